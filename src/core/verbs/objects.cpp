// Protection domains, memory regions, completion queues and channels, shared
// receive queues, queue pairs, address handles and multicast attachment:
// each verb's library part around the provider op (ibv_alloc_pd(3),
// ibv_reg_mr(3), ibv_rereg_mr(3), ibv_create_cq(3), ibv_get_cq_event(3),
// ibv_create_comp_channel(3), ibv_create_srq(3), ibv_create_qp(3),
// ibv_modify_qp(3), ibv_create_ah(3), ibv_attach_mcast(3), ibv_import_pd(3)...).
#include "core/domains/domains.h"
#include "core/verbs/verbs.h"
#include "core/verbs/lib_ops.h"
#include "core/context_private.h"
#include "kernel/transport.h"

#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/ib_user_verbs.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

namespace ov::verbs {

namespace {

// Access bits the kernel may ignore; cleared when the kernel did not
// announce IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS.
unsigned int mask_optional_access(struct ibv_context *ctx, unsigned int access)
{
	const struct verbs_device *vdev = verbs_get_device(ctx->device);
	if (!(vdev->core_support & IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS))
		access &= ~static_cast<unsigned int>(IBV_ACCESS_OPTIONAL_RANGE);
	return access;
}

} // namespace

// ---- PD --------------------------------------------------------------------

struct ibv_pd *alloc_pd(struct ibv_context *ctx) noexcept
{
	struct ibv_pd *pd = get_ops(ctx)->alloc_pd(ctx);
	if (pd) {
		pd->context = ctx;
		ov::domains::note_pd_alloc(pd);
	}
	return pd;
}

// Parent domains are freed here too (ibv_alloc_parent_domain(3)); a PD still
// used by a parent domain is EBUSY, one freed already EINVAL (domains.h).
int dealloc_pd(struct ibv_pd *pd) noexcept
{
	int ret = ov::domains::check_dealloc_pd(pd);
	if (ret)
		return ret;
	ret = get_ops(pd->context)->dealloc_pd(pd);
	if (!ret)
		ov::domains::note_pd_freed(pd);
	return ret;
}

// ---- MR --------------------------------------------------------------------

struct ibv_mr *reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
			    unsigned int access) noexcept
{
	struct ibv_context *ctx = pd->context;
	const bool odp = access & IBV_ACCESS_ON_DEMAND;

	access = mask_optional_access(ctx, access);
	// On-demand paging MRs are never pinned, so fork protection is moot.
	if (!odp && dontfork_range(addr, length))
		return nullptr;

	struct ibv_mr *mr = get_ops(ctx)->reg_mr(pd, addr, length, iova, static_cast<int>(access));
	if (!mr) {
		int saved = errno;
		if (!odp)
			dofork_range(addr, length);
		errno = saved;
		return nullptr;
	}
	mr->context = ctx;
	mr->pd = pd;
	mr->addr = addr;
	mr->length = length;
	return mr;
}

struct ibv_mr *reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova,
			     int fd, int access) noexcept
{
	struct ibv_context *ctx = pd->context;
	access = static_cast<int>(mask_optional_access(ctx, static_cast<unsigned int>(access)));
	struct ibv_mr *mr = get_ops(ctx)->reg_dmabuf_mr(pd, offset, length, iova, fd, access);
	if (!mr)
		return nullptr;
	mr->context = ctx;
	mr->pd = pd;
	mr->addr = reinterpret_cast<void *>(static_cast<uintptr_t>(offset));
	mr->length = length;
	return mr;
}

int rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length,
	     int access) noexcept
{
	const bool translate = flags & IBV_REREG_MR_CHANGE_TRANSLATION;

	if (verbs_get_mr(mr)->mr_type != IBV_MR_TYPE_MR ||
	    (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) || (translate && (!addr || !length)) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS)) ||
	    ((flags & IBV_REREG_MR_CHANGE_PD) && !pd)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}

	if (translate && dontfork_range(addr, length))
		return IBV_REREG_MR_ERR_DONT_FORK_NEW;

	void *old_addr = mr->addr;
	size_t old_length = mr->length;
	int ret = get_ops(mr->context)->rereg_mr(verbs_get_mr(mr), flags, pd, addr, length, access);
	if (ret) {
		int saved = errno;
		ret = IBV_REREG_MR_ERR_CMD;
		if (translate && dofork_range(addr, length))
			ret = IBV_REREG_MR_ERR_CMD_AND_DO_FORK_NEW;
		errno = saved;
		return ret;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD)
		mr->pd = pd;
	if (translate) {
		mr->addr = addr;
		mr->length = length;
		if (dofork_range(old_addr, old_length))
			return IBV_REREG_MR_ERR_DO_FORK_OLD;
	}
	return 0;
}

int dereg_mr(struct ibv_mr *mr) noexcept
{
	struct verbs_mr *vmr = verbs_get_mr(mr);
	void *addr = mr->addr;
	size_t length = mr->length;
	const enum ibv_mr_type type = vmr->mr_type;
	const int access = vmr->access;

	int ret = get_ops(mr->context)->dereg_mr(vmr);
	if (!ret && type == IBV_MR_TYPE_MR && !(access & IBV_ACCESS_ON_DEMAND))
		dofork_range(addr, length);
	return ret;
}

// ---- import ----------------------------------------------------------------

struct ibv_pd *import_pd(struct ibv_context *ctx, uint32_t handle) noexcept
{
	struct ibv_pd *pd = get_ops(ctx)->import_pd(ctx, handle);
	if (pd)
		ov::domains::note_pd_alloc(pd);
	return pd;
}

void unimport_pd(struct ibv_pd *pd) noexcept
{
	get_ops(pd->context)->unimport_pd(pd);
	ov::domains::note_pd_freed(pd);
}

struct ibv_mr *import_mr(struct ibv_pd *pd, uint32_t handle) noexcept
{
	return get_ops(pd->context)->import_mr(pd, handle);
}

void unimport_mr(struct ibv_mr *mr) noexcept
{
	get_ops(mr->context)->unimport_mr(mr);
}

struct ibv_dm *import_dm(struct ibv_context *ctx, uint32_t handle) noexcept
{
	return get_ops(ctx)->import_dm(ctx, handle);
}

void unimport_dm(struct ibv_dm *dm) noexcept
{
	get_ops(dm->context)->unimport_dm(dm);
}

// ---- completion channels -------------------------------------------------

namespace {

// A kernel completion channel: IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL on the
// context's uverbs fd (through the transport, which tunnels it over
// INVOKE_WRITE when the kernel offers that) returns a new fd delivering
// struct ib_uverbs_comp_event_desc records.
int kernel_comp_channel_fd(struct ibv_context *ctx)
{
	ov::kernel::LegacyReq<struct ib_uverbs_create_comp_channel> req;
	struct ib_uverbs_create_comp_channel_resp resp;
	memset(&req, 0, sizeof(req));
	memset(&resp, 0, sizeof(resp));
	req.core.response = reinterpret_cast<uintptr_t>(&resp);
	if (int ret = ov::kernel::write_core(ctx, IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, req, &resp)) {
		errno = ret;
		return -1;
	}
	return static_cast<int>(resp.fd);
}

// A channel for a context without a kernel device (cmd_fd < 0, e.g. the
// software device): a pipe. channel->fd is its read end, which works with
// poll/epoll/read like a kernel channel and receives the provider's
// ib_uverbs_comp_event_desc records (peers open it for writing by
// /proc/<pid>/fd/<fd>); the channel keeps the write end open itself, so a
// blocking read never sees end-of-file. Keeping the writer costs one more
// descriptor per channel but halves the channel's set-up (reopening the read
// end O_RDWR through /proc, a path walk, and two more closes cost as much as
// the pipe itself: rdma_create_qp makes two channels per id).
struct Channel {
	struct ibv_comp_channel pub; // what the application sees (first member)
	int writer;                  // the pipe's write end, -1 for a kernel channel
};

} // namespace

struct ibv_comp_channel *create_comp_channel(struct ibv_context *ctx) noexcept
{
	auto *c = static_cast<Channel *>(calloc(1, sizeof(Channel)));
	if (!c) {
		errno = ENOMEM;
		return nullptr;
	}
	int fd;
	c->writer = -1;
	if (kernel_cmd_fd(ctx)) {
		fd = kernel_comp_channel_fd(ctx);
	} else {
		int p[2];
		fd = pipe2(p, O_CLOEXEC) ? -1 : p[0];
		if (fd >= 0)
			c->writer = p[1];
	}
	if (fd < 0) {
		int saved = errno;
		free(c);
		errno = saved;
		return nullptr;
	}
	c->pub.context = ctx;
	c->pub.fd = fd;
	c->pub.refcnt = 0;
	return &c->pub;
}

int destroy_comp_channel(struct ibv_comp_channel *channel) noexcept
{
	struct ibv_context *ctx = channel->context;
	pthread_mutex_lock(&ctx->mutex);
	if (channel->refcnt) {
		pthread_mutex_unlock(&ctx->mutex);
		return EBUSY; // errno untouched, as rdma-core
	}
	auto *c = reinterpret_cast<Channel *>(channel);
	close(c->pub.fd);
	if (c->writer >= 0)
		close(c->writer);
	free(c);
	pthread_mutex_unlock(&ctx->mutex);
	return 0;
}

// ---- CQ ----------------------------------------------------------------------

void init_cq(struct ibv_cq *cq, struct ibv_context *ctx, struct ibv_comp_channel *channel,
	     void *cq_context) noexcept
{
	cq->context = ctx;
	cq->channel = channel;
	if (channel) {
		pthread_mutex_lock(&ctx->mutex);
		channel->refcnt++;
		pthread_mutex_unlock(&ctx->mutex);
	}
	cq->cq_context = cq_context;
	cq->comp_events_completed = 0;
	cq->async_events_completed = 0;
	init_object_sync(&cq->mutex, &cq->cond);
}

struct ibv_cq *create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
			 struct ibv_comp_channel *channel, int comp_vector) noexcept
{
	struct ibv_cq *cq = get_ops(ctx)->create_cq(ctx, cqe, channel, comp_vector);
	if (cq)
		init_cq(cq, ctx, channel, cq_context);
	return cq;
}

int resize_cq(struct ibv_cq *cq, int cqe) noexcept
{
	return get_ops(cq->context)->resize_cq(cq, cqe);
}

int destroy_cq(struct ibv_cq *cq) noexcept
{
	struct ibv_comp_channel *channel = cq->channel;
	struct ibv_context *ctx = cq->context;
	int ret = get_ops(ctx)->destroy_cq(cq);
	if (!ret && channel) {
		pthread_mutex_lock(&channel->context->mutex);
		channel->refcnt--;
		pthread_mutex_unlock(&channel->context->mutex);
	}
	return ret;
}

int get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context) noexcept
{
	struct ib_uverbs_comp_event_desc desc;
	ssize_t n = read(channel->fd, &desc, sizeof(desc));
	if (n != static_cast<ssize_t>(sizeof(desc))) {
		if (n >= 0)
			errno = EIO;
		return -1;
	}
	// The kernel echoes the user handle given at CQ creation: the CQ itself.
	auto *ev_cq = reinterpret_cast<struct ibv_cq *>(static_cast<uintptr_t>(desc.cq_handle));
	if (!ev_cq) {
		errno = EIO;
		return -1;
	}
	*cq = ev_cq;
	*cq_context = ev_cq->cq_context;
	get_ops(ev_cq->context)->cq_event(ev_cq);
	return 0;
}

void ack_cq_events(struct ibv_cq *cq, unsigned int nevents) noexcept
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

// ---- SRQ -------------------------------------------------------------------

struct ibv_srq *create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr) noexcept
{
	struct ibv_srq *srq = get_ops(pd->context)->create_srq(pd, attr);
	if (srq) {
		srq->context = pd->context;
		srq->srq_context = attr->srq_context;
		srq->pd = pd;
		srq->events_completed = 0;
		init_object_sync(&srq->mutex, &srq->cond);
	}
	return srq;
}

int modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask) noexcept
{
	return get_ops(srq->context)->modify_srq(srq, attr, mask);
}

int query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr) noexcept
{
	return get_ops(srq->context)->query_srq(srq, attr);
}

int destroy_srq(struct ibv_srq *srq) noexcept
{
	return get_ops(srq->context)->destroy_srq(srq);
}

// ---- QP --------------------------------------------------------------------

struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr) noexcept
{
	// The command layer (ibv_cmd_create_qp) fills the library fields.
	return get_ops(pd->context)->create_qp(pd, attr);
}

int query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
	     struct ibv_qp_init_attr *init_attr) noexcept
{
	int ret = get_ops(qp->context)->query_qp(qp, attr, mask, init_attr);
	if (ret)
		return ret;
	if (mask & IBV_QP_STATE)
		qp->state = attr->qp_state;
	return 0;
}

int modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask) noexcept
{
	int ret = get_ops(qp->context)->modify_qp(qp, attr, mask);
	if (ret)
		return ret;
	if (mask & IBV_QP_STATE)
		qp->state = attr->qp_state;
	return 0;
}

int destroy_qp(struct ibv_qp *qp) noexcept
{
	return get_ops(qp->context)->destroy_qp(qp);
}

struct ibv_qp_ex *qp_to_qp_ex(struct ibv_qp *qp) noexcept
{
	auto *vqp = reinterpret_cast<struct verbs_qp *>(qp);
	if (vqp->comp_mask & VERBS_QP_EX)
		return &vqp->qp_ex;
	return nullptr;
}

int query_ece(struct ibv_qp *qp, struct ibv_ece *ece) noexcept
{
	return get_ops(qp->context)->query_ece(qp, ece);
}

int set_ece(struct ibv_qp *qp, struct ibv_ece *ece) noexcept
{
	// Without a vendor there is nothing to negotiate.
	if (!ece->vendor_id) {
		errno = EOPNOTSUPP;
		return EOPNOTSUPP;
	}
	return get_ops(qp->context)->set_ece(qp, ece);
}

int query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags) noexcept
{
#if defined(__x86_64__) || defined(__i386__)
#if _OPENVERBS_ABI >= 56
	// rdma-core 56: flags may ask for the capability vector; unknown flags
	// answer 0.  The provider answers with capability bits; in-order whole
	// messages imply in-order aligned 128-byte blocks.
	if (flags & ~(uint32_t)IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS)
		return 0;
	int caps = get_ops(qp->context)->query_qp_data_in_order(qp, op, flags);
	if (caps & IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG)
		caps |= IBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES;
	if (flags & IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS)
		return caps;
	return (caps & IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG) ? 1 : 0;
#else
	return get_ops(qp->context)->query_qp_data_in_order(qp, op, flags);
#endif
#else
	// Only x86 guarantees in-order visibility of DMA writes to the CPU.
	(void)qp;
	(void)op;
	(void)flags;
	return 0;
#endif
}

// ---- AH and multicast ------------------------------------------------------

struct ibv_ah *create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr) noexcept
{
	struct ibv_ah *ah = get_ops(pd->context)->create_ah(pd, attr);
	if (ah) {
		ah->context = pd->context;
		ah->pd = pd;
	}
	return ah;
}

int destroy_ah(struct ibv_ah *ah) noexcept
{
	return get_ops(ah->context)->destroy_ah(ah);
}

int attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid) noexcept
{
	return get_ops(qp->context)->attach_mcast(qp, gid, lid);
}

int detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid) noexcept
{
	return get_ops(qp->context)->detach_mcast(qp, gid, lid);
}

} // namespace ov::verbs

namespace ov {

struct ibv_cq_ex *lib_create_cq_ex(struct ibv_context *context,
				   struct ibv_cq_init_attr_ex *cq_attr) noexcept
{
	if (!context || !cq_attr) {
		errno = EINVAL;
		return nullptr;
	}
	if (cq_attr->wc_flags & ~static_cast<uint64_t>(IBV_CREATE_CQ_SUP_WC_FLAGS)) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	// A CQ bound to a parent domain (IBV_CQ_INIT_ATTR_MASK_PD) needs a live
	// parent domain of this context, not a plain PD (ibv_create_cq_ex(3)).
	if ((cq_attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
	    (!cq_attr->parent_domain || cq_attr->parent_domain->context != context ||
	     !ov::domains::is_parent_domain(cq_attr->parent_domain))) {
		errno = EINVAL;
		return nullptr;
	}
	struct ibv_cq_ex *cq = get_ops(context)->create_cq_ex(context, cq_attr);
	if (cq)
		verbs::init_cq(ibv_cq_ex_to_cq(cq), context, cq_attr->channel, cq_attr->cq_context);
	return cq;
}

} // namespace ov
