// The kernel commands of rdma-core 64's private functions (IBVERBS_PRIVATE_64):
// DMA handles, the extended MR registration, the port speed query, dma-buf
// export of a context's mmap space, and the DMA-buf heap allocator. Built
// for the 64 target only.
//
// None of the ioctl methods below exists in the uapi headers of Linux 6.1
// (Debian 12) or 6.12 (Debian 13): their numbers are defined here from their
// place in the kernel's enums (include/uapi/rdma/ib_user_ioctl_cmds.h), each
// the next value after a name the installed header does have. A kernel
// without the method answers EPROTONOSUPPORT (ENOTTY without the ioctl
// interface), passed through as the result.
#include "kernel/commands.h"
#include "core/context_private.h"

#include <rdma/ib_user_ioctl_cmds.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#if _OPENVERBS_ABI >= 64

namespace ov::kernel {

namespace uapi64 {
// enum uverbs_default_objects: after UVERBS_OBJECT_ASYNC_EVENT.
constexpr uint16_t kObjectDmah = UVERBS_OBJECT_ASYNC_EVENT + 1;
constexpr uint16_t kObjectDmabuf = UVERBS_OBJECT_ASYNC_EVENT + 2;
// enum uverbs_methods_dmah / uverbs_attrs_alloc_dmah_cmd_attr_ids / free.
constexpr uint16_t kMethodDmahAlloc = 0;
constexpr uint16_t kMethodDmahFree = 1;
constexpr uint16_t kAttrAllocDmahHandle = 0;
constexpr uint16_t kAttrAllocDmahCpuId = 1;
constexpr uint16_t kAttrAllocDmahTphMemType = 2;
constexpr uint16_t kAttrAllocDmahPh = 3;
constexpr uint16_t kAttrFreeDmaHandle = 0;
// enum uverbs_methods_dmabuf / uverbs_attrs_alloc_dmabuf_cmd_attr_ids.
constexpr uint16_t kMethodDmabufAlloc = 0;
constexpr uint16_t kAttrAllocDmabufHandle = 0;
constexpr uint16_t kAttrAllocDmabufPgoff = 1;
// enum uverbs_methods_device: after UVERBS_METHOD_QUERY_GID_ENTRY;
// enum uverbs_attrs_query_port_speed_cmd_attr_ids.
constexpr uint16_t kMethodQueryPortSpeed = UVERBS_METHOD_QUERY_GID_ENTRY + 1;
constexpr uint16_t kAttrQueryPortSpeedPortNum = 0;
constexpr uint16_t kAttrQueryPortSpeedResp = 1;
// enum uverbs_methods_mr: after UVERBS_METHOD_REG_DMABUF_MR;
// enum uverbs_attrs_reg_mr_cmd_attr_ids, in order.
constexpr uint16_t kMethodRegMr = UVERBS_METHOD_REG_DMABUF_MR + 1;
enum : uint16_t {
	kAttrRegMrHandle,
	kAttrRegMrPdHandle,
	kAttrRegMrDmaHandle,
	kAttrRegMrIova,
	kAttrRegMrAddr,
	kAttrRegMrLength,
	kAttrRegMrAccessFlags,
	kAttrRegMrFd,
	kAttrRegMrFdOffset,
	kAttrRegMrRespLkey,
	kAttrRegMrRespRkey,
};
} // namespace uapi64

int cmd_alloc_dmah(struct ibv_context *ctx, struct verbs_dmah *dmah, const struct ibv_dmah_init_attr *attr) noexcept
{
	if (!ctx || !dmah || !attr)
		return fail(EINVAL);
	CommandBuffer cmdb(uapi64::kObjectDmah, uapi64::kMethodDmahAlloc, 4, nullptr);
	if (!cmdb.ok())
		return fail(ENOMEM);
	struct ib_uverbs_attr *handle = cmdb.out_obj(uapi64::kAttrAllocDmahHandle);
	if (attr->comp_mask & IBV_DMAH_INIT_ATTR_MASK_CPU_ID)
		cmdb.in_u32(uapi64::kAttrAllocDmahCpuId, attr->cpu_id);
	if (attr->comp_mask & IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE)
		cmdb.in_enum(uapi64::kAttrAllocDmahTphMemType, attr->tph_mem_type, nullptr, 0);
	if (attr->comp_mask & IBV_DMAH_INIT_ATTR_MASK_PH)
		cmdb.in(uapi64::kAttrAllocDmahPh, &attr->ph, sizeof(attr->ph));
	int ret = run_ioctl(ctx, cmdb.get());
	if (ret)
		return ret;
	dmah->handle = read_obj(handle);
	dmah->dmah.context = ctx;
	return 0;
}

int cmd_free_dmah(struct verbs_dmah *dmah) noexcept
{
	if (!dmah)
		return fail(EINVAL);
	return destroy_ioctl_only(dmah->dmah.context, uapi64::kObjectDmah, uapi64::kMethodDmahFree,
				  uapi64::kAttrFreeDmaHandle, dmah->handle);
}

int cmd_query_port_speed(struct ibv_context *context, uint32_t port_num, uint64_t *speed) noexcept
{
	if (!context || !speed)
		return fail(EINVAL);
	CommandBuffer cmdb(UVERBS_OBJECT_DEVICE, uapi64::kMethodQueryPortSpeed, 2, nullptr);
	if (!cmdb.ok())
		return fail(ENOMEM);
	cmdb.const_in(uapi64::kAttrQueryPortSpeedPortNum, port_num);
	cmdb.out_ptr(uapi64::kAttrQueryPortSpeedResp, speed);
	return run_ioctl(context, cmdb.get());
}

int cmd_export_dmabuf_fd(struct ibv_context *ctx, off_t pg_off) noexcept
{
	if (!ctx) {
		errno = EINVAL;
		return -1;
	}
	CommandBuffer cmdb(uapi64::kObjectDmabuf, uapi64::kMethodDmabufAlloc, 2, nullptr);
	if (!cmdb.ok()) {
		errno = ENOMEM;
		return -1;
	}
	struct ib_uverbs_attr *handle = cmdb.out_fd(uapi64::kAttrAllocDmabufHandle);
	cmdb.in_u64(uapi64::kAttrAllocDmabufPgoff, (uint64_t)pg_off);
	if (run_ioctl(ctx, cmdb.get()))
		return -1; // errno set by the transport
	return read_fd(handle);
}

int cmd_reg_mr_ex(struct ibv_pd *pd, struct verbs_mr *vmr, const struct ibv_mr_init_attr *attr) noexcept
{
	if (!pd || !vmr || !attr)
		return fail(EINVAL);
	const uint64_t mask = attr->comp_mask;
	const bool by_fd = mask & IBV_REG_MR_MASK_FD;
	uint64_t length = attr->length;
	CommandBuffer cmdb(UVERBS_OBJECT_MR, uapi64::kMethodRegMr, 11, nullptr);
	if (!cmdb.ok())
		return fail(ENOMEM);

	if (by_fd) {
		// A dma-buf region: its offset, no address; the kernel needs an IOVA.
		if (!(mask & IBV_REG_MR_MASK_FD_OFFSET) || (mask & IBV_REG_MR_MASK_ADDR) ||
		    !(mask & IBV_REG_MR_MASK_IOVA))
			return fail(EINVAL);
		cmdb.in_u64(uapi64::kAttrRegMrFdOffset, attr->fd_offset);
		cmdb.in_fd(uapi64::kAttrRegMrFd, attr->fd);
	} else {
		if ((mask & IBV_REG_MR_MASK_FD_OFFSET) || !(mask & IBV_REG_MR_MASK_ADDR))
			return fail(EINVAL);
		cmdb.in_u64(uapi64::kAttrRegMrAddr, ptr_to_u64(attr->addr));
		// On-demand paging of the whole address space: length SIZE_MAX
		// with a NULL address, sent as the largest 64-bit length.
		if ((attr->access & IBV_ACCESS_ON_DEMAND) && attr->length == SIZE_MAX) {
			if (attr->addr)
				return fail(EINVAL);
			length = UINT64_MAX;
		}
	}
	cmdb.in_u64(uapi64::kAttrRegMrIova, (mask & IBV_REG_MR_MASK_IOVA) ? attr->iova : ptr_to_u64(attr->addr));

	uint32_t lkey = 0, rkey = 0;
	struct ib_uverbs_attr *handle = cmdb.out_obj(uapi64::kAttrRegMrHandle);
	cmdb.out_ptr(uapi64::kAttrRegMrRespLkey, &lkey);
	cmdb.out_ptr(uapi64::kAttrRegMrRespRkey, &rkey);
	cmdb.in_obj(uapi64::kAttrRegMrPdHandle, pd->handle);
	cmdb.in_u64(uapi64::kAttrRegMrLength, length);
	cmdb.in_u32(uapi64::kAttrRegMrAccessFlags, (uint32_t)attr->access);
	if (mask & IBV_REG_MR_MASK_DMAH) {
		if (!attr->dmah)
			return fail(EINVAL);
		cmdb.in_obj(uapi64::kAttrRegMrDmaHandle, verbs_get_dmah(attr->dmah)->handle);
	}

	int ret = 0;
	switch (ioctl_or_legacy(pd->context, OV_FALLBACK_BIT(reg_mr_ex), cmdb.get(), &ret)) {
	case Fallback::Success:
		break;
	case Fallback::TryWrite:
	case Fallback::TryWriteEx: {
		// No REG_MR method: an address registration is the legacy write
		// command; a dma-buf or DMA-handle one has no legacy form.
		if (by_fd || (mask & IBV_REG_MR_MASK_DMAH))
			return fail(EOPNOTSUPP);
		LegacyReq<ib_uverbs_reg_mr> req = {};
		struct ib_uverbs_reg_mr_resp resp = {};
		const uint64_t hca_va = (mask & IBV_REG_MR_MASK_IOVA) ? attr->iova : ptr_to_u64(attr->addr);
		return cmd_reg_mr(pd, attr->addr, length, hca_va, attr->access, vmr, &req, sizeof(req), &resp,
				  sizeof(resp));
	}
	case Fallback::Error:
	default:
		return ret;
	}
	vmr->ibv_mr.handle = read_obj(handle);
	vmr->ibv_mr.context = pd->context;
	vmr->ibv_mr.lkey = lkey;
	vmr->ibv_mr.rkey = rkey;
	vmr->mr_type = by_fd ? IBV_MR_TYPE_DMABUF_MR : IBV_MR_TYPE_MR;
	vmr->access = attr->access;
	return 0;
}

// ---------------------------------------------------------------------------
// DMA-buf heaps (/dev/dma_heap/<name>, <linux/dma-heap.h>).

} // namespace ov::kernel

#if __has_include(<linux/dma-heap.h>)
#include <linux/dma-heap.h>
#define OV_HAVE_DMA_HEAP 1
#endif

namespace ov::kernel {

struct DmabufHeap {
	int heap_fd;
};

DmabufHeap *dmabuf_heap_open(const char *name) noexcept
{
#ifdef OV_HAVE_DMA_HEAP
	char path[128];
	int n = snprintf(path, sizeof(path), "/dev/dma_heap/%s", name);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return nullptr;
	}
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return nullptr;
	auto *heap = new (std::nothrow) DmabufHeap{fd};
	if (!heap) {
		close(fd);
		errno = ENOMEM;
	}
	return heap;
#else
	(void)name;
	errno = EOPNOTSUPP;
	return nullptr;
#endif
}

void dmabuf_heap_close(DmabufHeap *heap) noexcept
{
	if (!heap)
		return;
	close(heap->heap_fd);
	delete heap;
}

void *dmabuf_heap_alloc(DmabufHeap *heap, size_t size, int *dmabuf_fd) noexcept
{
#ifdef OV_HAVE_DMA_HEAP
	if (!heap || !dmabuf_fd) {
		errno = EINVAL;
		return nullptr;
	}
	struct dma_heap_allocation_data req = {};
	req.len = size;
	req.fd_flags = O_RDWR | O_CLOEXEC;
	if (ioctl(heap->heap_fd, DMA_HEAP_IOCTL_ALLOC, &req) < 0)
		return nullptr;
	int fd = (int)req.fd;
	void *mem = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (mem == MAP_FAILED) {
		int saved = errno;
		close(fd);
		errno = saved;
		return nullptr;
	}
	*dmabuf_fd = fd;
	return mem;
#else
	(void)heap;
	(void)size;
	(void)dmabuf_fd;
	errno = EOPNOTSUPP;
	return nullptr;
#endif
}

void dmabuf_heap_free(void *buf, size_t size, int dmabuf_fd) noexcept
{
	if (buf)
		munmap(buf, size);
	if (dmabuf_fd >= 0)
		close(dmabuf_fd);
}

} // namespace ov::kernel

#endif // _OPENVERBS_ABI >= 64
