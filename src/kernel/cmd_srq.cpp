// Shared receive queues: UVERBS_OBJECT_SRQ (SRQ_CREATE / SRQ_DESTROY) with the
// write fallbacks CREATE_SRQ / CREATE_XSRQ / DESTROY_SRQ, and the write-only
// MODIFY_SRQ, QUERY_SRQ, POST_SRQ_RECV (<rdma/ib_user_verbs.h>).
#include "kernel/commands.h"

#include "core/context_private.h"

#include <pthread.h>

#include <cerrno>
#include <cstdlib>

namespace ov::kernel {

namespace {

void set_vsrq(struct verbs_srq *vsrq, const struct ibv_srq_init_attr_ex *attr_ex, uint32_t srq_num) noexcept
{
	vsrq->srq_type = (attr_ex->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? attr_ex->srq_type : IBV_SRQT_BASIC;
	if (vsrq->srq_type == IBV_SRQT_XRC) {
		vsrq->srq_num = srq_num;
		vsrq->xrcd = to_vxrcd(attr_ex->xrcd);
	}
	if (attr_ex->comp_mask & IBV_SRQ_INIT_ATTR_CQ)
		vsrq->cq = attr_ex->cq;
}

// The legacy write of an SRQ create: the kernel struct `Core` (CREATE_SRQ's
// or CREATE_XSRQ's, which share their leading fields) rebuilt in the
// provider's request (or on the stack when there is none), the shared
// fields set here and the type's own ones by `fill`; the answer (handle,
// granted sizes and, when report_srqn, the XRC SRQ number) goes to the SRQ.
template <class Core, class Fill>
int create_srq_write(uint32_t command, struct ibv_command_buffer *link, struct ibv_pd *pd,
		     struct verbs_srq *vsrq, struct ibv_srq *srq, struct ibv_srq_init_attr_ex *attr_ex,
		     bool report_srqn, Fill fill) noexcept
{
	LegacyReq<Core> req_stack = {};
	struct ib_uverbs_create_srq_resp resp_stack;
	auto *req = static_cast<Core *>(legacy_req(link, &req_stack, sizeof(req_stack.core)));
	void *out = req ? legacy_resp(link, req, &resp_stack, sizeof(resp_stack)) : nullptr;
	if (!out)
		return fail(EINVAL);
	std::memset(req, 0, sizeof(*req));
	req->pd_handle = pd->handle;
	req->user_handle = ptr_to_u64(srq);
	req->max_wr = attr_ex->attr.max_wr;
	req->max_sge = attr_ex->attr.max_sge;
	req->srq_limit = attr_ex->attr.srq_limit;
	fill(req);
	int ret = write_bufs(command, pd->context, req, out);
	if (ret)
		return ret;
	auto *r = static_cast<struct ib_uverbs_create_srq_resp *>(out);
	srq->handle = r->srq_handle;
	attr_ex->attr.max_wr = r->max_wr;
	attr_ex->attr.max_sge = r->max_sge;
	if (vsrq)
		set_vsrq(vsrq, attr_ex, report_srqn ? r->srqn : 0);
	return 0;
}

int create_srq(struct ibv_pd *pd, struct verbs_srq *vsrq, struct ibv_srq *srq_in,
	       struct ibv_srq_init_attr_ex *attr_ex, struct ibv_command_buffer *link) noexcept
{
	struct ibv_srq *srq = vsrq ? &vsrq->srq : srq_in;
	struct verbs_xrcd *vxrcd = nullptr;
	enum ibv_srq_type srq_type =
		(attr_ex->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? attr_ex->srq_type : IBV_SRQT_BASIC;

	// Validate before touching anything so a rejected call leaves no state.
	switch (srq_type) {
	case IBV_SRQT_XRC:
		if (!(attr_ex->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !(attr_ex->comp_mask & IBV_SRQ_INIT_ATTR_CQ) ||
		    !attr_ex->xrcd || !attr_ex->cq)
			return fail(EINVAL);
		vxrcd = to_vxrcd(attr_ex->xrcd);
		break;
	case IBV_SRQT_TM:
		if (!(attr_ex->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !(attr_ex->comp_mask & IBV_SRQ_INIT_ATTR_TM) ||
		    !attr_ex->tm_cap.max_num_tags || !attr_ex->cq)
			return fail(EINVAL);
		break;
	case IBV_SRQT_BASIC:
		break;
	default:
		return fail(EINVAL);
	}

	CommandBuffer cmdb(UVERBS_OBJECT_SRQ, UVERBS_METHOD_SRQ_CREATE, 13, link);
	if (!cmdb.ok())
		return fail(ENOMEM);

	srq->pd = pd;
	srq->context = pd->context;
	srq->srq_context = attr_ex->srq_context;
	srq->events_completed = 0;
	init_object_sync(&srq->mutex, &srq->cond);

	uint32_t max_wr = 0, max_sge = 0, srq_num = 0;
	if (srq_type == IBV_SRQT_XRC) {
		cmdb.in_obj(UVERBS_ATTR_CREATE_SRQ_XRCD_HANDLE, vxrcd->handle);
		cmdb.in_obj(UVERBS_ATTR_CREATE_SRQ_CQ_HANDLE, attr_ex->cq->handle);
		cmdb.out_ptr(UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM, &srq_num);
	} else if (srq_type == IBV_SRQT_TM) {
		cmdb.in_obj(UVERBS_ATTR_CREATE_SRQ_CQ_HANDLE, attr_ex->cq->handle);
		cmdb.in_u32(UVERBS_ATTR_CREATE_SRQ_MAX_NUM_TAGS, attr_ex->tm_cap.max_num_tags);
	}
	struct ib_uverbs_attr *handle = cmdb.out_obj(UVERBS_ATTR_CREATE_SRQ_HANDLE);
	cmdb.const_in(UVERBS_ATTR_CREATE_SRQ_TYPE, (uint64_t)srq_type);
	cmdb.in_u64(UVERBS_ATTR_CREATE_SRQ_USER_HANDLE, ptr_to_u64(srq));
	cmdb.in_obj(UVERBS_ATTR_CREATE_SRQ_PD_HANDLE, pd->handle);
	cmdb.in_u32(UVERBS_ATTR_CREATE_SRQ_MAX_WR, attr_ex->attr.max_wr);
	cmdb.in_u32(UVERBS_ATTR_CREATE_SRQ_MAX_SGE, attr_ex->attr.max_sge);
	cmdb.in_u32(UVERBS_ATTR_CREATE_SRQ_LIMIT, attr_ex->attr.srq_limit);
	cmdb.in_fd(UVERBS_ATTR_CREATE_SRQ_EVENT_FD, pd->context->async_fd);
	cmdb.out_ptr(UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, &max_wr);
	cmdb.out_ptr(UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, &max_sge);

	struct verbs_context *vctx = verbs_get_ctx(pd->context);
	if (vctx && vctx->priv && vctx->priv->imported)
		cmdb.ioctl_only();

	int ret = 0;
	switch (ioctl_or_legacy(pd->context, OV_FALLBACK_BIT(create_srq), cmdb.get(), &ret)) {
	case Fallback::Success:
		srq->handle = read_obj(handle);
		attr_ex->attr.max_wr = max_wr;
		attr_ex->attr.max_sge = max_sge;
		if (vsrq)
			set_vsrq(vsrq, attr_ex, srq_num);
		return 0;
	case Fallback::TryWrite:
	case Fallback::TryWriteEx:
		if (srq_type == IBV_SRQT_BASIC)
			return create_srq_write<ib_uverbs_create_srq>(IB_USER_VERBS_CMD_CREATE_SRQ, link, pd, vsrq, srq,
								      attr_ex, false, [](struct ib_uverbs_create_srq *) {});
		return create_srq_write<ib_uverbs_create_xsrq>(
			IB_USER_VERBS_CMD_CREATE_XSRQ, link, pd, vsrq, srq, attr_ex, true,
			[&](struct ib_uverbs_create_xsrq *req) {
				req->srq_type = (uint32_t)srq_type;
				req->cq_handle = attr_ex->cq->handle;
				if (srq_type == IBV_SRQT_TM)
					req->max_num_tags = attr_ex->tm_cap.max_num_tags;
				else
					req->xrcd_handle = vxrcd->handle;
			});
	case Fallback::Error:
	default:
		return ret;
	}
}

} // namespace

int cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq, struct ibv_srq_init_attr *attr, void *cmd,
		   size_t cmd_size, struct ib_uverbs_create_srq_resp *resp, size_t resp_size) noexcept
{
	if (!pd || !srq || !attr)
		return fail(EINVAL);
	CompatBuffer<ib_uverbs_create_srq, ib_uverbs_create_srq_resp> link(UVERBS_OBJECT_SRQ,
									    UVERBS_METHOD_SRQ_CREATE, cmd,
									    cmd_size, resp, resp_size);
	if (!link.ok())
		return fail(ENOMEM);
	struct ibv_srq_init_attr_ex attr_ex = {};
	attr_ex.srq_context = attr->srq_context;
	attr_ex.attr = attr->attr;
	int ret = create_srq(pd, nullptr, srq, &attr_ex, link.get());
	if (!ret) {
		attr->attr.max_wr = attr_ex.attr.max_wr;
		attr->attr.max_sge = attr_ex.attr.max_sge;
	}
	return ret;
}

int cmd_create_srq_ex(struct ibv_context *context, struct verbs_srq *srq, struct ibv_srq_init_attr_ex *attr_ex,
		      void *cmd, size_t cmd_size, struct ib_uverbs_create_srq_resp *resp, size_t resp_size) noexcept
{
	if (!context || !srq || !attr_ex)
		return fail(EINVAL);
	CompatBuffer<ib_uverbs_create_xsrq, ib_uverbs_create_srq_resp> link(UVERBS_OBJECT_SRQ,
									     UVERBS_METHOD_SRQ_CREATE, cmd,
									     cmd_size, resp, resp_size);
	if (!link.ok())
		return fail(ENOMEM);
	if (attr_ex->comp_mask >= IBV_SRQ_INIT_ATTR_RESERVED)
		return fail(EOPNOTSUPP);
	if (!(attr_ex->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr_ex->pd)
		return fail(EINVAL);
	return create_srq(attr_ex->pd, srq, nullptr, attr_ex, link.get());
}

int cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, int srq_attr_mask, void *cmd,
		   size_t cmd_size) noexcept
{
	if (!srq || !srq_attr || !cmd)
		return fail(EINVAL);
	// The provider's buffer must hold at least the command's head.
	if (cmd_size < kLegacySize<ib_uverbs_modify_srq>)
		return fail(EINVAL);
	auto *core = core_of<ib_uverbs_modify_srq>(cmd);
	core->srq_handle = srq->handle;
	core->attr_mask = (uint32_t)srq_attr_mask;
	core->max_wr = srq_attr->max_wr;
	core->srq_limit = srq_attr->srq_limit;
	return send_write(srq->context, IB_USER_VERBS_CMD_MODIFY_SRQ, cmd, kLegacySize<ib_uverbs_modify_srq>,
			  cmd_size, nullptr, 0, 0);
}

int cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, void *cmd, size_t cmd_size) noexcept
{
	if (!srq || !srq_attr || !cmd)
		return fail(EINVAL);
	// The provider's buffer must hold at least the command's head.
	if (cmd_size < kLegacySize<ib_uverbs_query_srq>)
		return fail(EINVAL);
	struct ib_uverbs_query_srq_resp resp = {};
	auto *core = core_of<ib_uverbs_query_srq>(cmd);
	core->response = ptr_to_u64(&resp);
	core->srq_handle = srq->handle;
	core->reserved = 0;
	int ret = send_write(srq->context, IB_USER_VERBS_CMD_QUERY_SRQ, cmd, kLegacySize<ib_uverbs_query_srq>,
			     cmd_size, &resp, sizeof(resp), sizeof(resp));
	if (ret)
		return ret;
	srq_attr->max_wr = resp.max_wr;
	srq_attr->max_sge = resp.max_sge;
	srq_attr->srq_limit = resp.srq_limit;
	return 0;
}

int cmd_destroy_srq(struct ibv_srq *srq) noexcept
{
	if (!srq)
		return fail(EINVAL);
	struct ib_uverbs_destroy_srq_resp resp = {};
	LegacyReq<ib_uverbs_destroy_srq> req = {};
	req.core.response = ptr_to_u64(&resp);
	req.core.srq_handle = srq->handle;
	int ret;
	if (destroy_handle(srq->context, OV_FALLBACK_BIT(destroy_srq), UVERBS_OBJECT_SRQ, UVERBS_METHOD_SRQ_DESTROY,
			   UVERBS_ATTR_DESTROY_SRQ_HANDLE, srq->handle, IB_USER_VERBS_CMD_DESTROY_SRQ, req,
			   answer_in(UVERBS_ATTR_DESTROY_SRQ_RESP, &resp), &ret))
		return ret;
	wait_events(&srq->mutex, &srq->cond, &srq->events_completed, resp.events_reported);
	return 0;
}

// Marshals a receive work request list after a legacy post-recv head (shared
// by POST_RECV and POST_SRQ_RECV, whose heads differ only in the handle name).
int post_recv_common(struct ibv_context *ctx, uint32_t command, uint32_t handle, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad_wr) noexcept
{
	static_assert(sizeof(struct ib_uverbs_post_recv) == sizeof(struct ib_uverbs_post_srq_recv),
		      "post_recv and post_srq_recv heads share one layout");
	if (!ctx || !bad_wr)
		return fail(EINVAL);
	uint32_t wr_count = 0, sge_count = 0;
	for (struct ibv_recv_wr *i = wr; i; i = i->next) {
		if (i->num_sge < 0 || (i->num_sge && !i->sg_list))
			return fail(EINVAL);
		++wr_count;
		sge_count += (uint32_t)i->num_sge;
	}
	size_t size = sizeof(LegacyReq<ib_uverbs_post_recv>) + wr_count * sizeof(struct ib_uverbs_recv_wr) +
		      sge_count * sizeof(struct ib_uverbs_sge);
	auto *req = static_cast<LegacyReq<ib_uverbs_post_recv> *>(std::calloc(1, size));
	if (!req)
		return fail(ENOMEM);
	struct ib_uverbs_post_recv_resp resp = {};
	req->core.response = ptr_to_u64(&resp);
	req->core.qp_handle = handle;
	req->core.wr_count = wr_count;
	req->core.sge_count = sge_count;
	req->core.wqe_size = sizeof(struct ib_uverbs_recv_wr);
	auto *n = reinterpret_cast<struct ib_uverbs_recv_wr *>(req + 1);
	auto *s = reinterpret_cast<struct ib_uverbs_sge *>(n + wr_count);
	for (struct ibv_recv_wr *i = wr; i; i = i->next, ++n) {
		n->wr_id = i->wr_id;
		n->num_sge = (uint32_t)i->num_sge;
		s = append_sges(s, i->sg_list, i->num_sge);
	}
	int ret = send_write(ctx, command, req, size, size, &resp, sizeof(resp), sizeof(resp));
	std::free(req);

	report_bad_wr(wr, wr_count, resp.bad_wr, ret, bad_wr);
	return ret;
}

int cmd_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr) noexcept
{
	if (!srq)
		return fail(EINVAL);
	return post_recv_common(srq->context, IB_USER_VERBS_CMD_POST_SRQ_RECV, srq->handle, wr, bad_wr);
}

} // namespace ov::kernel
