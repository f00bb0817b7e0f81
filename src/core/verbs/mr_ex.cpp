// rdma-core 64's registration and buffer verbs (ibv_reg_mr_ex(3),
// ibv_reg_buf_mr(3), ibv_alloc_buf(3)) and the default ops behind them for
// providers that have none (dummy_ops in src/core/ops.cpp): a buffer is
// page-aligned memory, an extended registration is translated into the
// provider's reg_mr or reg_dmabuf_mr. Built for the 64 target only.
#include "core/verbs/verbs.h"
#include "core/context_private.h"

#include <rdma/ib_user_ioctl_verbs.h>

#include <cerrno>
#include <cstdlib>
#include <unistd.h>

#if _OPENVERBS_ABI >= 64

namespace ov::verbs {

namespace {

constexpr uint64_t kAddrOrFd = IBV_REG_MR_MASK_IOVA | IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_FD |
			       IBV_REG_MR_MASK_FD_OFFSET;

// IBV_REG_MR_MASK_BUF: the range must lie in a buffer of pd; a buffer backed
// by a dma-buf becomes an fd registration (iova = the address), ordinary
// memory stays an address registration. 0 or EINVAL.
int resolve_buf(struct ibv_pd *pd, struct ibv_mr_init_attr *attr) noexcept
{
	const struct ibv_buf *buf = attr->buf;
	if (!buf || buf->pd != pd || !(attr->comp_mask & IBV_REG_MR_MASK_ADDR))
		return EINVAL;
	const auto base = reinterpret_cast<uintptr_t>(buf->addr);
	const auto addr = reinterpret_cast<uintptr_t>(attr->addr);
	if (addr < base || addr - base > buf->size || attr->length > buf->size - (addr - base))
		return EINVAL;
	if (attr->comp_mask & (IBV_REG_MR_MASK_FD | IBV_REG_MR_MASK_FD_OFFSET))
		return EINVAL;
	attr->comp_mask &= ~static_cast<uint64_t>(IBV_REG_MR_MASK_BUF);
	if (buf->dmabuf_fd != -1) {
		if (attr->comp_mask & IBV_REG_MR_MASK_IOVA)
			return EINVAL;
		attr->comp_mask &= ~static_cast<uint64_t>(IBV_REG_MR_MASK_ADDR);
		attr->comp_mask |= IBV_REG_MR_MASK_FD | IBV_REG_MR_MASK_FD_OFFSET | IBV_REG_MR_MASK_IOVA;
		attr->fd = buf->dmabuf_fd;
		attr->fd_offset = addr - base;
		attr->iova = addr;
	}
	return 0;
}

} // namespace

struct ibv_mr *reg_mr_ex(struct ibv_pd *pd, const struct ibv_mr_init_attr *in) noexcept
{
	// A copy holding only the fields the mask names: the caller's attr is
	// input only, and unnamed fields are never read.
	struct ibv_mr_init_attr attr = {};
	attr.length = in->length;
	attr.access = in->access;
	attr.comp_mask = in->comp_mask;
	if (attr.comp_mask & IBV_REG_MR_MASK_IOVA)
		attr.iova = in->iova;
	if (attr.comp_mask & IBV_REG_MR_MASK_ADDR)
		attr.addr = in->addr;
	if (attr.comp_mask & IBV_REG_MR_MASK_FD)
		attr.fd = in->fd;
	if (attr.comp_mask & IBV_REG_MR_MASK_FD_OFFSET)
		attr.fd_offset = in->fd_offset;
	if (attr.comp_mask & IBV_REG_MR_MASK_DMAH)
		attr.dmah = in->dmah;
	if (attr.comp_mask & IBV_REG_MR_MASK_BUF) {
		attr.buf = in->buf;
		if (int err = resolve_buf(pd, &attr)) {
			errno = err;
			return nullptr;
		}
	}

	struct ibv_context *ctx = pd->context;
	// Pinned memory registered by address is protected across fork();
	// on-demand paging and dma-buf memory are not pinned pages of ours.
	const bool protect = !(attr.access & IBV_ACCESS_ON_DEMAND) && !(attr.comp_mask & IBV_REG_MR_MASK_FD);
	if (protect && dontfork_range(attr.addr, attr.length))
		return nullptr;
	const struct verbs_device *vdev = verbs_get_device(ctx->device);
	if (!(vdev->core_support & IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS))
		attr.access &= ~static_cast<int>(IBV_ACCESS_OPTIONAL_RANGE);

	struct ibv_mr *mr = get_ops(ctx)->reg_mr_ex(pd, &attr);
	if (!mr) {
		int saved = errno;
		if (protect)
			dofork_range(attr.addr, attr.length);
		errno = saved;
		return nullptr;
	}
	mr->context = ctx;
	mr->pd = pd;
	mr->length = attr.length;
	// As ibv_reg_dmabuf_mr: an fd registration reports its offset.
	mr->addr = (attr.comp_mask & IBV_REG_MR_MASK_ADDR)
			   ? attr.addr
			   : reinterpret_cast<void *>(static_cast<uintptr_t>(attr.fd_offset));
	return mr;
}

struct ibv_mr *reg_buf_mr(struct ibv_pd *pd, struct ibv_buf *buf, void *addr, size_t length,
			  int access) noexcept
{
	struct ibv_mr_init_attr attr = {};
	attr.length = length;
	attr.access = access;
	attr.comp_mask = IBV_REG_MR_MASK_BUF | IBV_REG_MR_MASK_ADDR;
	attr.addr = addr;
	attr.buf = buf;
	return reg_mr_ex(pd, &attr);
}

// ---- default ops --------------------------------------------------------------

void *default_alloc_buf(struct ibv_pd *pd, size_t size, struct ibv_buf **buf) noexcept
{
	auto *handle = static_cast<struct ibv_buf *>(calloc(1, sizeof(struct ibv_buf)));
	if (!handle) {
		errno = ENOMEM;
		return nullptr;
	}
	void *mem = nullptr;
	long page = sysconf(_SC_PAGESIZE);
	if (int err = posix_memalign(&mem, page > 0 ? static_cast<size_t>(page) : 4096, size)) {
		free(handle);
		errno = err;
		return nullptr;
	}
	ibv_buf_init(handle, pd, mem, size);
	*buf = handle;
	return mem;
}

void default_free_buf(struct ibv_buf *buf) noexcept
{
	free(buf->addr);
	free(buf);
}

struct ibv_mr *default_reg_mr_ex(struct ibv_pd *pd, struct ibv_mr_init_attr *attr) noexcept
{
	const struct verbs_context_ops *ops = get_ops(pd->context);
	const uint64_t mask = attr->comp_mask;
	// What the older ops cannot express (a DMA handle, unknown bits).
	if (mask & ~kAddrOrFd) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	if (mask & IBV_REG_MR_MASK_FD) {
		if ((mask & IBV_REG_MR_MASK_ADDR) || !(mask & IBV_REG_MR_MASK_FD_OFFSET) ||
		    !(mask & IBV_REG_MR_MASK_IOVA)) {
			errno = EINVAL;
			return nullptr;
		}
		return ops->reg_dmabuf_mr(pd, attr->fd_offset, attr->length, attr->iova, attr->fd, attr->access);
	}
	if (!(mask & IBV_REG_MR_MASK_ADDR) || (mask & IBV_REG_MR_MASK_FD_OFFSET)) {
		errno = EINVAL;
		return nullptr;
	}
	const uint64_t iova = (mask & IBV_REG_MR_MASK_IOVA) ? attr->iova : reinterpret_cast<uintptr_t>(attr->addr);
	return ops->reg_mr(pd, attr->addr, attr->length, iova, attr->access);
}

} // namespace ov::verbs

#endif // _OPENVERBS_ABI >= 64
