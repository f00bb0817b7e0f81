// Completion queues: UVERBS_OBJECT_CQ (CQ_CREATE / CQ_DESTROY) with the write
// fallbacks CREATE_CQ, EX_CREATE_CQ, DESTROY_CQ, and the write-only
// RESIZE_CQ, EX_MODIFY_CQ, POLL_CQ, REQ_NOTIFY_CQ (<rdma/ib_user_verbs.h>).
#include "kernel/commands.h"

#include "core/context_private.h"

#include <pthread.h>

#include <cerrno>
#include <cstdlib>

namespace ov::kernel {

void wait_events(pthread_mutex_t *mutex, pthread_cond_t *cond, const uint32_t *completed, uint32_t reported) noexcept
{
	if (reported == 0)
		return;
	pthread_mutex_lock(mutex);
	while (*completed != reported)
		pthread_cond_wait(cond, mutex);
	pthread_mutex_unlock(mutex);
}

namespace {

// CREATE_CQ_CMD_FLAGS_TS_IGNORED_EX (driver.h): the provider accepts that a
// completion timestamp is dropped when only the basic write command exists.
constexpr uint32_t kCqCmdFlagsTsIgnoredEx = CREATE_CQ_CMD_FLAGS_TS_IGNORED_EX;

int create_cq(struct ibv_context *context, int cqe, struct ibv_comp_channel *channel, int comp_vector,
	      uint32_t flags, struct ibv_cq *cq, struct ibv_command_buffer *link, uint32_t cmd_flags,
	      const struct verbs_create_cq_prov_attr *prov_attr = nullptr) noexcept
{
	CommandBuffer cmdb(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE, 10, link);
	if (!cmdb.ok())
		return fail(ENOMEM);
	uint32_t resp_cqe = 0;

	cq->context = context;
	struct ib_uverbs_attr *handle = cmdb.out_obj(UVERBS_ATTR_CREATE_CQ_HANDLE);
	cmdb.out_ptr(UVERBS_ATTR_CREATE_CQ_RESP_CQE, &resp_cqe);
	cmdb.in_u32(UVERBS_ATTR_CREATE_CQ_CQE, (uint32_t)cqe);
	cmdb.in_u64(UVERBS_ATTR_CREATE_CQ_USER_HANDLE, ptr_to_u64(cq));
	if (channel)
		cmdb.in_fd(UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, channel->fd);
	cmdb.in_u32(UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, (uint32_t)comp_vector);
#if _OPENVERBS_ABI >= 64
	// rdma-core 64: a CQ ring the provider allocated. The attributes follow
	// UVERBS_ATTR_CREATE_CQ_EVENT_FD in the kernel's enum (VA, LENGTH, FD,
	// OFFSET; not in the 6.1/6.12 uapi headers); the write commands cannot
	// carry them.
	constexpr uint16_t kBufferVa = UVERBS_ATTR_CREATE_CQ_EVENT_FD + 1;
	constexpr uint16_t kBufferLength = UVERBS_ATTR_CREATE_CQ_EVENT_FD + 2;
	constexpr uint16_t kBufferFd = UVERBS_ATTR_CREATE_CQ_EVENT_FD + 3;
	constexpr uint16_t kBufferOffset = UVERBS_ATTR_CREATE_CQ_EVENT_FD + 4;
	if (cmd_flags & (CREATE_CQ_CMD_FLAGS_WITH_MEM_VA | CREATE_CQ_CMD_FLAGS_WITH_MEM_DMABUF)) {
		if (!prov_attr)
			return fail(EINVAL);
		if (cmd_flags & CREATE_CQ_CMD_FLAGS_WITH_MEM_VA) {
			cmdb.in_u64(kBufferVa, ptr_to_u64(prov_attr->buffer.ptr));
		} else {
			cmdb.in_fd(kBufferFd, prov_attr->buffer.dmabuf.fd);
			cmdb.in_u64(kBufferOffset, prov_attr->buffer.dmabuf.offset);
		}
		cmdb.in_u64(kBufferLength, prov_attr->buffer.length);
		cmdb.ioctl_only();
	}
#else
	(void)prov_attr;
#endif
	if (flags) {
		// A timestamp the provider can do without does not force the
		// extended legacy command.
		if ((flags & ~(uint32_t)IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION) ||
		    !(cmd_flags & kCqCmdFlagsTsIgnoredEx))
			cmdb.require_ex();
		cmdb.in_u32(UVERBS_ATTR_CREATE_CQ_FLAGS, flags);
	}

	int ret = 0;
	switch (ioctl_or_legacy(context, OV_FALLBACK_BIT(create_cq), cmdb.get(), &ret)) {
	case Fallback::Success:
		cq->handle = read_obj(handle);
		cq->cqe = (int)resp_cqe;
		return 0;
	case Fallback::TryWrite: {
		LegacyReq<ib_uverbs_create_cq> req_stack = {};
		struct ib_uverbs_create_cq_resp resp_stack;
		auto *req = static_cast<struct ib_uverbs_create_cq *>(legacy_req(link, &req_stack, sizeof(req_stack.core)));
		void *out = req ? legacy_resp(link, req, &resp_stack, sizeof(resp_stack)) : nullptr;
		if (!out)
			return fail(EINVAL);
		std::memset(&req->user_handle, 0, sizeof(*req) - offsetof(struct ib_uverbs_create_cq, user_handle));
		req->user_handle = ptr_to_u64(cq);
		req->cqe = (uint32_t)cqe;
		req->comp_vector = (uint32_t)comp_vector;
		req->comp_channel = channel ? channel->fd : -1;
		ret = write_bufs(IB_USER_VERBS_CMD_CREATE_CQ, context, req, out);
		if (ret)
			return ret;
		auto *r = static_cast<struct ib_uverbs_create_cq_resp *>(out);
		cq->handle = r->cq_handle;
		cq->cqe = (int)r->cqe;
		return 0;
	}
	case Fallback::TryWriteEx: {
		LegacyReqEx<ib_uverbs_ex_create_cq> req_stack = {};
		struct ib_uverbs_ex_create_cq_resp resp_stack;
		auto *req = static_cast<struct ib_uverbs_ex_create_cq *>(
			legacy_req_ex(link, &req_stack, sizeof(req_stack.core)));
		void *out = req ? legacy_resp_ex(link, req, &resp_stack, sizeof(resp_stack)) : nullptr;
		if (!out)
			return fail(EINVAL);
		std::memset(req, 0, sizeof(*req));
		req->user_handle = ptr_to_u64(cq);
		req->cqe = (uint32_t)cqe;
		req->comp_vector = (uint32_t)comp_vector;
		req->comp_channel = channel ? channel->fd : -1;
		req->flags = flags;
		ret = write_raw_ex(IB_USER_VERBS_EX_CMD_CREATE_CQ, context, req, out);
		if (ret)
			return ret;
		auto *r = static_cast<struct ib_uverbs_ex_create_cq_resp *>(out);
		cq->handle = r->base.cq_handle;
		cq->cqe = (int)r->base.cqe;
		return 0;
	}
	case Fallback::Error:
	default:
		return ret;
	}
}

} // namespace

int cmd_create_cq(struct ibv_context *context, int cqe, struct ibv_comp_channel *channel, int comp_vector,
		  struct ibv_cq *cq, void *cmd, size_t cmd_size, struct ib_uverbs_create_cq_resp *resp,
		  size_t resp_size) noexcept
{
	if (!context || !cq)
		return fail(EINVAL);
	CompatBuffer<ib_uverbs_create_cq, ib_uverbs_create_cq_resp> link(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE,
									  cmd, cmd_size, resp, resp_size);
	return create_cq(context, cqe, channel, comp_vector, 0, cq, link.get(), 0);
}

int cmd_create_cq_ex(struct ibv_context *context, const struct ibv_cq_init_attr_ex *cq_attr,
		     struct verbs_cq *cq, void *cmd, size_t cmd_size, struct ib_uverbs_ex_create_cq_resp *resp,
		     size_t resp_size, uint32_t cmd_flags, struct ibv_command_buffer *driver,
		     const struct verbs_create_cq_prov_attr *prov_attr) noexcept
{
	if (!context || !cq_attr || !cq)
		return fail(EINVAL);
	CompatBuffer<ib_uverbs_ex_create_cq, ib_uverbs_ex_create_cq_resp> link(
		UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE, cmd, cmd_size, resp, resp_size,
		kLegacyExSize<ib_uverbs_ex_create_cq>, driver);
	uint32_t flags = 0;

	if (cq_attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD))
		return fail(EOPNOTSUPP);
	if (cq_attr->wc_flags & (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK))
		flags |= IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION;
	if ((cq_attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (cq_attr->flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN))
		flags |= IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN;

	return create_cq(context, (int)cq_attr->cqe, cq_attr->channel, (int)cq_attr->comp_vector, flags, &cq->cq,
			 link.get(), cmd_flags, prov_attr);
}

int cmd_destroy_cq(struct ibv_cq *cq) noexcept
{
	if (!cq)
		return fail(EINVAL);
	struct ib_uverbs_destroy_cq_resp resp = {};
	LegacyReq<ib_uverbs_destroy_cq> req = {};
	req.core.response = ptr_to_u64(&resp);
	req.core.cq_handle = cq->handle;
	int ret;
	if (destroy_handle(cq->context, OV_FALLBACK_BIT(destroy_cq), UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_DESTROY,
			   UVERBS_ATTR_DESTROY_CQ_HANDLE, cq->handle, IB_USER_VERBS_CMD_DESTROY_CQ, req,
			   answer_in(UVERBS_ATTR_DESTROY_CQ_RESP, &resp), &ret))
		return ret;

	// Every completion and async event the kernel delivered for this CQ
	// must be acknowledged before its memory may go (none delivered: none
	// can have been acknowledged, nothing to wait for).
	if (resp.comp_events_reported == 0 && resp.async_events_reported == 0)
		return 0;
	pthread_mutex_lock(&cq->mutex);
	while (cq->comp_events_completed != resp.comp_events_reported ||
	       cq->async_events_completed != resp.async_events_reported)
		pthread_cond_wait(&cq->cond, &cq->mutex);
	pthread_mutex_unlock(&cq->mutex);
	return 0;
}

int cmd_resize_cq(struct ibv_cq *cq, int cqe, void *cmd, size_t cmd_size, struct ib_uverbs_resize_cq_resp *resp,
		  size_t resp_size) noexcept
{
	if (!cq || !cmd || !resp)
		return fail(EINVAL);
	// The provider's buffer must hold at least the command's head.
	if (cmd_size < kLegacySize<ib_uverbs_resize_cq>)
		return fail(EINVAL);
	auto *core = core_of<ib_uverbs_resize_cq>(cmd);
	core->response = ptr_to_u64(resp);
	core->cq_handle = cq->handle;
	core->cqe = (uint32_t)cqe;
	int ret = send_write(cq->context, IB_USER_VERBS_CMD_RESIZE_CQ, cmd, kLegacySize<ib_uverbs_resize_cq>,
			     cmd_size, resp, sizeof(*resp), resp_size);
	if (ret)
		return ret;
	cq->cqe = (int)resp->cqe;
	return 0;
}

int cmd_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr, void *cmd, size_t cmd_size) noexcept
{
	if (!cq || !attr || !cmd)
		return fail(EINVAL);
	// The provider's buffer must hold at least the command's head.
	if (cmd_size < kLegacyExSize<ib_uverbs_ex_modify_cq>)
		return fail(EINVAL);
	if (attr->attr_mask >= IBV_CQ_ATTR_RESERVED)
		return fail(EINVAL);
	auto *core = core_of_ex<ib_uverbs_ex_modify_cq>(cmd);
	core->cq_handle = cq->handle;
	core->attr_mask = attr->attr_mask;
	core->attr.cq_count = attr->moderate.cq_count;
	core->attr.cq_period = attr->moderate.cq_period;
	core->reserved = 0;
	return send_write_ex(cq->context, IB_USER_VERBS_EX_CMD_MODIFY_CQ, cmd, kLegacyExSize<ib_uverbs_ex_modify_cq>,
			     cmd_size, nullptr, 0, 0);
}

int cmd_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc) noexcept
{
	if (!ibcq || ne < 0 || (ne && !wc)) {
		errno = EINVAL;
		return -1;
	}
	size_t rsize = sizeof(struct ib_uverbs_poll_cq_resp) + (size_t)ne * sizeof(struct ib_uverbs_wc);
	auto *resp = static_cast<struct ib_uverbs_poll_cq_resp *>(std::calloc(1, rsize));
	if (!resp) {
		errno = ENOMEM;
		return -1;
	}
	LegacyReq<ib_uverbs_poll_cq> req = {};
	req.core.response = ptr_to_u64(resp);
	req.core.cq_handle = ibcq->handle;
	req.core.ne = (uint32_t)ne;
	int ret = send_write(ibcq->context, IB_USER_VERBS_CMD_POLL_CQ, &req, sizeof(req), sizeof(req), resp, rsize,
			     rsize);
	if (ret) {
		std::free(resp);
		errno = ret;
		return -1;
	}
	uint32_t count = resp->count > (uint32_t)ne ? (uint32_t)ne : resp->count;
	for (uint32_t i = 0; i < count; ++i) {
		const struct ib_uverbs_wc &k = resp->wc[i];
		wc[i].wr_id = k.wr_id;
		wc[i].status = (enum ibv_wc_status)k.status;
		wc[i].opcode = (enum ibv_wc_opcode)k.opcode;
		wc[i].vendor_err = k.vendor_err;
		wc[i].byte_len = k.byte_len;
		wc[i].imm_data = k.ex.imm_data;
		wc[i].qp_num = k.qp_num;
		wc[i].src_qp = k.src_qp;
		wc[i].wc_flags = k.wc_flags;
		wc[i].pkey_index = k.pkey_index;
		wc[i].slid = k.slid;
		wc[i].sl = k.sl;
		wc[i].dlid_path_bits = k.dlid_path_bits;
	}
	std::free(resp);
	return (int)count;
}

int cmd_req_notify_cq(struct ibv_cq *ibcq, int solicited_only) noexcept
{
	if (!ibcq)
		return fail(EINVAL);
	LegacyReq<ib_uverbs_req_notify_cq> req = {};
	req.core.cq_handle = ibcq->handle;
	req.core.solicited_only = !!solicited_only;
	return send_write(ibcq->context, IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, &req, sizeof(req), sizeof(req), nullptr, 0,
			  0);
}

} // namespace ov::kernel
