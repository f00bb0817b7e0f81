// The kernel transport of libibverbs: how a command reaches /dev/infiniband/uverbsN.
//
// Three wire protocols exist and all of them are spoken here:
//  * RDMA_VERBS_IOCTL: an ib_uverbs_ioctl_hdr followed by ib_uverbs_attr records
//    (<rdma/rdma_user_ioctl_cmds.h>), built in a struct ibv_command_buffer that
//    providers may chain to ours (cmd_ioctl.h layout, IBVERBS_PRIVATE_34).
//  * write(): ib_uverbs_cmd_hdr + core request + provider data (UHW); extended
//    commands add ib_uverbs_ex_cmd_hdr and IB_USER_VERBS_CMD_FLAG_EXTENDED.
//  * write() tunnelled through ioctl (UVERBS_METHOD_INVOKE_WRITE) when the
//    kernel has it (every kernel since 5.0) and a write() was refused or
//    cannot express the command's size (send_write below).
// Whether the tunnel exists is probed (probe_ioctl_write) the first time the
// transport needs to know, and kept in priv->ioctl_write.
// The per-context fallback (priv->unsupported_ioctls) decides, per op, whether
// the ioctl method is tried or the legacy write command is sent instead.
//
// Everything here returns a positive errno value (0 on success) and leaves
// errno set to the same value on failure. The kernel's errno passes through
// unchanged.
#pragma once

#include <infiniband/driver.h>
#include <infiniband/cmd_ioctl.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/rdma_user_ioctl_cmds.h>

#include <sys/types.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace ov::kernel {

// ---------------------------------------------------------------------------
// Syscall seam. Production uses ::ioctl and ::write; unit tests swap in
// doubles with ScopedSyscalls to see every byte that would reach the kernel.
struct Syscalls {
	int (*ioctl)(int fd, unsigned long request, void *arg);
	ssize_t (*write)(int fd, const void *buf, size_t count);
};

// The table in use (process-wide).
Syscalls &syscalls() noexcept;

// RAII replacement of the syscall table (tests only; not thread-safe).
class ScopedSyscalls {
public:
	explicit ScopedSyscalls(const Syscalls &replacement) noexcept;
	~ScopedSyscalls();
	ScopedSyscalls(const ScopedSyscalls &) = delete;
	ScopedSyscalls &operator=(const ScopedSyscalls &) = delete;

private:
	Syscalls saved_;
};

// ---------------------------------------------------------------------------
// Tunnel probe, run by the transport the first time a context needs it: true when
// the kernel accepts UVERBS_METHOD_INVOKE_WRITE (the probe sends WRITE_CMD =
// IB_USER_VERBS_CMD_QUERY_DEVICE without payload; any answer other than
// EPROTONOSUPPORT or ENOTTY, normally ENOSPC, means the tunnel exists).
bool probe_ioctl_write(int cmd_fd) noexcept;
bool probe_ioctl_write(int cmd_fd, uint32_t driver_id) noexcept;

// Allocates the context's async event fd through
// UVERBS_OBJECT_ASYNC_EVENT / UVERBS_METHOD_ASYNC_EVENT_ALLOC and stores it
// in context->async_fd. Used by the core after an ioctl GET_CONTEXT.
int alloc_async_fd(struct ibv_context *context) noexcept;

// ---------------------------------------------------------------------------
// RDMA_VERBS_IOCTL.

// Number of attributes of `num_attrs` plus every buffer chained from `link`.
unsigned int final_num_attrs(unsigned int num_attrs, const struct ibv_command_buffer *link) noexcept;

// Sends the command buffer `cmd` (with its chain) on context->cmd_fd.
// EINVAL when a fill helper flagged buffer_error, ENOSPC when the chained
// attributes do not fit into cmd's attribute array, else the kernel's errno.
// On success outputs are copied back into the chained buffers.
int run_ioctl(struct ibv_context *context, struct ibv_command_buffer *cmd) noexcept;

// Same, on a bare fd (no context): used by the probe.
int run_ioctl_fd(int fd, uint32_t driver_id, struct ibv_command_buffer *cmd) noexcept;

// A command buffer with room for `own` attributes plus the chain of `link`,
// laid out exactly as DECLARE_COMMAND_BUFFER_LINK does (struct
// ibv_command_buffer immediately followed by its ib_uverbs_attr array).
// Small buffers live inline; larger ones on the heap (ok() false on ENOMEM).
//
// Everything here is inline: most commands have a fixed number of
// attributes with constant ids, and the compiler folds a command's buffer
// into a handful of stores.
class CommandBuffer {
public:
	CommandBuffer(uint16_t object_id, uint16_t method_id, unsigned int own,
		      struct ibv_command_buffer *link = nullptr) noexcept
	{
		unsigned int total = link ? final_num_attrs(own, link) : own;
		void *mem = storage_;
		if (total > kInlineAttrs) {
			heap_ = std::malloc(sizeof(struct ibv_command_buffer) +
					    (size_t)total * sizeof(struct ib_uverbs_attr));
			if (!heap_)
				return;
			mem = heap_;
		}
		// Only the head is cleared: next() writes every attribute it
		// hands out whole, and nothing past next_attr is read or sent.
		cmd_ = static_cast<struct ibv_command_buffer *>(mem);
		*cmd_ = {};
		cmd_->next = link;
		cmd_->hdr.object_id = object_id;
		cmd_->hdr.method_id = method_id;
		cmd_->next_attr = cmd_->hdr.attrs;
		cmd_->last_attr = cmd_->hdr.attrs + total;
		cmd_->uhw_in_idx = kNoUhwIndex;
		cmd_->uhw_out_idx = kNoUhwIndex;
	}
	~CommandBuffer()
	{
		if (heap_)
			std::free(heap_);
	}
	CommandBuffer(const CommandBuffer &) = delete;
	CommandBuffer &operator=(const CommandBuffer &) = delete;

	bool ok() const noexcept { return cmd_ != nullptr; }
	struct ibv_command_buffer *get() noexcept { return cmd_; }
	struct ibv_command_buffer *operator->() noexcept { return cmd_; }

	// Each returns the attribute written (nullptr when out of room or, for
	// in_fd, when fd == -1 which means "absent"). Semantics follow the
	// cmd_ioctl.h helpers: every attribute starts MANDATORY, inputs of at
	// most 8 bytes are inlined into .data, larger ones are pointers, lengths
	// above 65535 set buffer_error.
	struct ib_uverbs_attr *next(uint16_t attr_id) noexcept
	{
		if (cmd_->next_attr >= cmd_->last_attr) {
			cmd_->buffer_error = 1;
			return nullptr;
		}
		struct ib_uverbs_attr *attr = cmd_->next_attr++;
		*attr = {};
		attr->attr_id = attr_id;
		attr->flags = UVERBS_ATTR_F_MANDATORY;
		return attr;
	}
	struct ib_uverbs_attr *in(uint16_t attr_id, const void *data, size_t len) noexcept
	{
		if (len > sizeof(ib_uverbs_attr::data)) // larger inputs go by pointer
			return by_pointer(attr_id, data, len);
		struct ib_uverbs_attr *attr = sized(attr_id, len);
		if (attr)
			std::memcpy(&attr->data, data, len);
		return attr;
	}
	struct ib_uverbs_attr *in_u32(uint16_t attr_id, uint32_t v) noexcept { return in(attr_id, &v, sizeof(v)); }
	struct ib_uverbs_attr *in_u64(uint16_t attr_id, uint64_t v) noexcept { return in(attr_id, &v, sizeof(v)); }
	struct ib_uverbs_attr *const_in(uint16_t attr_id, uint64_t v) noexcept { return in_u64(attr_id, v); }
	struct ib_uverbs_attr *in_obj(uint16_t attr_id, uint32_t handle) noexcept
	{
		struct ib_uverbs_attr *attr = next(attr_id);
		if (attr)
			attr->data = handle; // IDR attributes carry the handle in .data
		return attr;
	}
	struct ib_uverbs_attr *out_obj(uint16_t attr_id) noexcept { return in_obj(attr_id, 0); }
	struct ib_uverbs_attr *in_fd(uint16_t attr_id, int fd) noexcept
	{
		if (fd == -1)
			return nullptr;
		struct ib_uverbs_attr *attr = next(attr_id);
		if (attr)
			attr->data = (uint64_t)(int64_t)fd;
		return attr;
	}
	// data 0; the kernel writes the new fd there
	struct ib_uverbs_attr *out_fd(uint16_t attr_id) noexcept { return next(attr_id); }
	struct ib_uverbs_attr *out(uint16_t attr_id, void *data, size_t len) noexcept
	{
		return by_pointer(attr_id, data, len);
	}
	struct ib_uverbs_attr *in_enum(uint16_t attr_id, uint8_t elem_id, const void *data, size_t len) noexcept
	{
		struct ib_uverbs_attr *attr = in(attr_id, data, len);
		if (attr)
			attr->attr_data.enum_data.elem_id = elem_id;
		return attr;
	}
	// UHW_IN kept as a pointer until execute_ioctl (needed by the legacy
	// fallback, which builds the write request in the headroom before it).
	struct ib_uverbs_attr *in_uhw(uint16_t attr_id, const void *data, size_t len) noexcept
	{
		return by_pointer(attr_id, data, len);
	}
	template <class T> struct ib_uverbs_attr *in_ptr(uint16_t id, const T *p) noexcept { return in(id, p, sizeof(*p)); }
	template <class T> struct ib_uverbs_attr *out_ptr(uint16_t id, T *p) noexcept { return out(id, p, sizeof(*p)); }

	void require_ex() noexcept { cmd_->fallback_require_ex = 1; }
	void ioctl_only() noexcept { cmd_->fallback_ioctl_only = 1; }

	// Records the provider's UHW in/out (the parts of req/resp past the core
	// structs) and the headroom before them, as the compat wrappers of the
	// private ABI require.
	void set_uhw(const void *req, size_t core_req_size, size_t req_size, void *resp,
		     size_t core_resp_size, size_t resp_size) noexcept;

	// _UHW_NO_INDEX of cmd_ioctl.h: no UHW attribute recorded.
	static constexpr uint8_t kNoUhwIndex = 0xFF;

private:
	// The next attribute with its length set (beyond 16 bits: buffer_error).
	struct ib_uverbs_attr *sized(uint16_t attr_id, size_t len) noexcept
	{
		struct ib_uverbs_attr *attr = next(attr_id);
		if (!attr)
			return nullptr;
		if (len > UINT16_MAX)
			cmd_->buffer_error = 1;
		attr->len = (uint16_t)len;
		return attr;
	}
	// Same, with .data pointing at `data` (the kernel reads or writes there).
	struct ib_uverbs_attr *by_pointer(uint16_t attr_id, const void *data, size_t len) noexcept
	{
		struct ib_uverbs_attr *attr = sized(attr_id, len);
		if (attr)
			attr->data = (uint64_t)(uintptr_t)data;
		return attr;
	}

	static constexpr unsigned kInlineAttrs = 24;
	struct ibv_command_buffer *cmd_ = nullptr;
	void *heap_ = nullptr;
	alignas(struct ibv_command_buffer) unsigned char
		storage_[sizeof(struct ibv_command_buffer) + kInlineAttrs * sizeof(struct ib_uverbs_attr)];
};

// The value the kernel wrote into an IDR/FD output attribute.
static inline uint32_t read_obj(const struct ib_uverbs_attr *attr) noexcept { return (uint32_t)attr->data; }
static inline int read_fd(const struct ib_uverbs_attr *attr) noexcept { return (int)attr->data; }

// ---------------------------------------------------------------------------
// Fallback from ioctl to write.
enum class Fallback { TryWrite, TryWriteEx, Error, Success };

// Bit of an op in priv->unsupported_ioctls.
#define OV_FALLBACK_BIT(op) (offsetof(struct verbs_context_ops, op) / sizeof(void *))

// Decides what a command may do when its ioctl method is unavailable: any
// MANDATORY attribute other than UHW_IN/UHW_OUT in a chained (provider)
// buffer, or fallback_ioctl_only anywhere → Error with *ret = EOPNOTSUPP;
// fallback_require_ex anywhere → TryWriteEx; else TryWrite.
Fallback legacy_mode(const struct ibv_command_buffer *cmdb, int *ret) noexcept;

// Runs the ioctl unless the op's bit is set; ENOTTY marks every op legacy,
// EPROTONOSUPPORT marks this op legacy, both then consult legacy_mode.
// Any other failure is Error with the kernel's errno in *ret.
Fallback ioctl_or_legacy(struct ibv_context *ctx, unsigned int cmd_bit,
				struct ibv_command_buffer *cmdb, int *ret) noexcept;

// ---------------------------------------------------------------------------
// write() protocol.

// Legacy request placement. When `link` carries a UHW_IN, the header and the
// core request are built in the headroom right before the provider's driver
// data (exactly where the provider's struct ibv_<cmd> head is), so that one
// write() sends core + UHW; otherwise `onstack` is used. Returns the core
// payload (the ib_uverbs_cmd_hdr sits just before it). `onstack` must have
// room for the header plus `core_size` bytes.
void *legacy_req(struct ibv_command_buffer *link, void *onstack, size_t core_size) noexcept;
void *legacy_req_ex(struct ibv_command_buffer *link, void *onstack, size_t core_size) noexcept;
// Response placement, likewise right before the provider's UHW_OUT. Sets the
// out_words of the header that precedes `req`.
void *legacy_resp(struct ibv_command_buffer *link, void *req, void *onstack, size_t core_size) noexcept;
void *legacy_resp_ex(struct ibv_command_buffer *link, void *req, void *onstack, size_t core_size) noexcept;

// Sends a request prepared with legacy_req/legacy_resp through write().
// `req` is the core payload; its first u64 must be the response pointer for
// commands that have one (set by write_bufs below).
int write_raw(uint32_t cmdnum, struct ibv_context *ctx, void *req, void *resp) noexcept;
int write_raw_ex(uint32_t cmdnum, struct ibv_context *ctx, void *req, void *resp) noexcept;
// Same, storing `resp` in the request's leading `response` field first.
int write_bufs(uint32_t cmdnum, struct ibv_context *ctx, void *req, void *resp) noexcept;

// Header sizes of the write() protocol (plain and extended).
inline constexpr size_t kHdrSize = sizeof(struct ib_uverbs_cmd_hdr);
inline constexpr size_t kExHdrSize = sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_ex_cmd_hdr);

// The table in use, for the inline fast paths below.
extern Syscalls g_syscalls;

// send_write's cases off the fast path: sizes that are not whole words
// (written == kWriteNotTried: the tunnel when there is one, else write()),
// a failed or short write() (written = its result): EACCES retries through
// the tunnel, anything else is the answer.
inline constexpr ssize_t kWriteNotTried = -2;
int send_write_slow(struct ibv_context *ctx, uint32_t method, void *req, size_t core_req_size,
		    size_t req_size, void *resp, size_t core_resp_size, size_t resp_size, ssize_t written) noexcept;

// A write command given as the provider's struct ibv_<cmd> (header first):
// `req` points at the ib_uverbs_cmd_hdr, core_req_size includes the header,
// req_size adds the driver data; likewise for the response (reached by the
// kernel through the request's `response` field, which the caller sets).
//
// Write commands go to the kernel through write() even when the context
// has the INVOKE_WRITE tunnel: the kernel runs the same handler with the
// same request, response and driver data either way (core sizes are the
// uapi structs on both paths), and write() costs a fraction of the
// userspace work of building an attribute chain. The one case where the
// two differ is a process whose credentials changed after the device was
// opened: the kernel then refuses write() with EACCES before looking at the
// command, and the tunnel is used instead. Sizes that are not whole 4-byte
// words cannot be expressed in a write() header; they also take the tunnel
// when there is one. Inline: the checks fold into a few instructions at
// each call site.
inline int send_write(struct ibv_context *ctx, uint32_t method, void *req, size_t core_req_size,
		      size_t req_size, void *resp, size_t core_resp_size, size_t resp_size) noexcept
{
	if (!ctx || !req || core_req_size < kHdrSize || req_size < core_req_size || resp_size < core_resp_size ||
	    req_size / 4 > UINT16_MAX || resp_size / 4 > UINT16_MAX) {
		errno = EINVAL;
		return EINVAL;
	}
	if ((req_size | resp_size) & 3)
		return send_write_slow(ctx, method, req, core_req_size, req_size, resp, core_resp_size, resp_size,
				       kWriteNotTried);
	struct ib_uverbs_cmd_hdr *hdr = static_cast<struct ib_uverbs_cmd_hdr *>(req);
	hdr->command = method;
	hdr->in_words = (uint16_t)(req_size / 4);
	hdr->out_words = (uint16_t)(resp_size / 4);
	ssize_t n = g_syscalls.write(ctx->cmd_fd, req, req_size);
	if (n == (ssize_t)req_size)
		return 0;
	return send_write_slow(ctx, method, req, core_req_size, req_size, resp, core_resp_size, resp_size, n);
}

// Extended: `req` points at the ib_uverbs_cmd_hdr followed by
// ib_uverbs_ex_cmd_hdr; core_req_size includes both headers.
int send_write_ex(struct ibv_context *ctx, uint32_t method, void *req, size_t core_req_size,
			 size_t req_size, void *resp, size_t core_resp_size, size_t resp_size) noexcept;

// Stack storage for a legacy request: header(s) + core payload.
template <class Core> struct LegacyReq {
	struct ib_uverbs_cmd_hdr hdr;
	Core core;
};
template <class Core> struct LegacyReqEx {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_ex_cmd_hdr ex_hdr;
	Core core;
};

// Sends a core-only legacy command (no driver data): fills `response`.
template <class Core, class Resp>
int write_core(struct ibv_context *ctx, uint32_t method, LegacyReq<Core> &req, Resp *resp) noexcept
{
	return send_write(ctx, method, &req, sizeof(req), sizeof(req), resp,
				 resp ? sizeof(*resp) : 0, resp ? sizeof(*resp) : 0);
}

// ---------------------------------------------------------------------------
// Helpers shared by the ibv_cmd_* implementations.

static inline uint64_t ptr_to_u64(const void *p) noexcept { return (uint64_t)(uintptr_t)p; }

// errno = err; return err.
static inline int fail(int err) noexcept
{
	errno = err;
	return err;
}

// verbs_is_destroy_err: true when a destroy must report failure; an EIO
// after the device was disassociated counts as success (ret set to 0, and
// true returned so the caller skips waiting for events) when
// verbs_allow_disassociate_destroy is set.
bool destroy_failed(int *ret) noexcept;

} // namespace ov::kernel
