// A scripted stand-in for the uverbs character device, plugged in through the
// transport's syscall seam. It records every ioctl (header, attributes and
// the bytes behind pointer attributes) and every write (the whole buffer),
// and answers with a programmable handler.
#pragma once

#include "core/context_private.h"
#include "kernel/transport.h"

#include <functional>
#include <vector>

// Arguments rdma-core 64 inserted into provider-facing commands (driver.h):
// the provider's CQ ring of ibv_cmd_create_cq_ex(2) (after cq_attr) and the
// fd array of ibv_cmd_get_context (after cmd_size). NULL asks for exactly
// the commands of 44 and 56, which is what these tests expect.
#if _OPENVERBS_ABI >= 64
#define OV_CQ_PROV_ATTR nullptr,
#define OV_GET_CONTEXT_FD_ARR nullptr,
#else
#define OV_CQ_PROV_ATTR
#define OV_GET_CONTEXT_FD_ARR
#endif

namespace kt {

struct IoctlCall {
	int fd = -1;
	unsigned long request = 0;
	alignas(8) unsigned char hdr_raw[sizeof(struct ib_uverbs_ioctl_hdr)] = {};
	const struct ib_uverbs_ioctl_hdr &hdr() const
	{
		return *reinterpret_cast<const struct ib_uverbs_ioctl_hdr *>(hdr_raw);
	}
	std::vector<struct ib_uverbs_attr> attrs;
	std::vector<std::vector<unsigned char>> payload; // bytes behind pointer attrs (len > 8)
	const struct ib_uverbs_attr *find(uint16_t id) const;
};

struct WriteCall {
	int fd = -1;
	std::vector<unsigned char> bytes;
};

// Answers an ioctl: return 0 for success or an errno value (the fake sets
// errno and makes ioctl() return -1). May write outputs through the live
// header (attribute data, pointed-to buffers).
using IoctlHandler = std::function<int(struct ib_uverbs_ioctl_hdr *hdr)>;
using WriteHandler = std::function<int(const void *buf, size_t len)>;

class FakeKernel {
public:
	FakeKernel();
	~FakeKernel();

	std::vector<IoctlCall> ioctls;
	std::vector<WriteCall> writes;
	IoctlHandler on_ioctl; // default: success
	WriteHandler on_write; // default: success, all bytes written

	static FakeKernel *current;

private:
	ov::kernel::ScopedSyscalls seam_;
};

// A provider's request or response: a kern-abi/uapi head followed by N
// bytes of driver data (the uapi heads end in flexible arrays, so they
// cannot be struct members followed by more fields in C++).
template <class Head, size_t N> struct alignas(8) WithDrv {
	unsigned char bytes[sizeof(Head) + N] = {};
	Head *head() { return reinterpret_cast<Head *>(bytes); }
	uint64_t *drv() { return reinterpret_cast<uint64_t *>(bytes + sizeof(Head)); }
	template <class T> T *as() { return reinterpret_cast<T *>(bytes); }
};

// A verbs_context with private state, as the core would make it.
struct FakeContext {
	struct verbs_ex_private priv = {};
	struct verbs_context vctx = {};
	explicit FakeContext(bool use_ioctl_write = true, uint32_t driver_id = RDMA_DRIVER_RXE);
	struct ibv_context *ctx() { return &vctx.context; }
	bool bit(unsigned int b) const { return priv.unsupported_ioctls[b / 64] & (1ULL << (b % 64)); }
};

// Live attribute of an ioctl header in a handler.
struct ib_uverbs_attr *live_attr(struct ib_uverbs_ioctl_hdr *hdr, uint16_t id);

} // namespace kt
