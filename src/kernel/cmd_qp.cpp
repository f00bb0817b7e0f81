// Queue pairs: UVERBS_OBJECT_QP (QP_CREATE / QP_DESTROY) with the write
// fallbacks CREATE_QP / EX_CREATE_QP / DESTROY_QP, and the write-only
// OPEN_QP, QUERY_QP, MODIFY_QP, EX_MODIFY_QP, POST_SEND, POST_RECV
// (<rdma/ib_user_verbs.h>).
#include "kernel/commands.h"

#include "core/context_private.h"

#include <pthread.h>

#include <cerrno>
#include <cstdlib>

namespace ov::kernel {

namespace {

// Creation flags the kernel's QP_CREATE understands.
constexpr uint32_t kSupportedCreateFlags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB | IBV_QP_CREATE_SCATTER_FCS |
					   IBV_QP_CREATE_CVLAN_STRIPPING | IBV_QP_CREATE_SOURCE_QPN |
					   IBV_QP_CREATE_PCI_WRITE_END_PADDING;

static_assert(offsetof(struct ibv_qp_cap, max_send_wr) == offsetof(struct ib_uverbs_qp_cap, max_send_wr) &&
		      offsetof(struct ibv_qp_cap, max_recv_wr) == offsetof(struct ib_uverbs_qp_cap, max_recv_wr) &&
		      offsetof(struct ibv_qp_cap, max_send_sge) == offsetof(struct ib_uverbs_qp_cap, max_send_sge) &&
		      offsetof(struct ibv_qp_cap, max_recv_sge) == offsetof(struct ib_uverbs_qp_cap, max_recv_sge) &&
		      offsetof(struct ibv_qp_cap, max_inline_data) ==
			      offsetof(struct ib_uverbs_qp_cap, max_inline_data) &&
		      sizeof(struct ibv_qp_cap) == sizeof(struct ib_uverbs_qp_cap),
	      "ibv_qp_cap travels as ib_uverbs_qp_cap");

// Common state of a new QP, as the cmd layer of rdma-core leaves it.
void set_qp(struct verbs_qp *vqp, struct ibv_qp *qp, const struct ibv_qp_init_attr_ex *attr_ex,
	    struct verbs_xrcd *vxrcd) noexcept
{
	qp->qp_context = attr_ex->qp_context;
	qp->pd = attr_ex->pd;
	qp->send_cq = attr_ex->send_cq;
	qp->recv_cq = attr_ex->recv_cq;
	qp->srq = attr_ex->srq;
	qp->qp_type = attr_ex->qp_type;
	qp->state = IBV_QPS_RESET;
	qp->events_completed = 0;
	init_object_sync(&qp->mutex, &qp->cond);
	if (vqp) {
		vqp->comp_mask = 0;
		if (attr_ex->comp_mask & IBV_QP_INIT_ATTR_XRCD) {
			vqp->comp_mask |= VERBS_QP_XRCD;
			vqp->xrcd = vxrcd;
		}
	}
}

// Fills the legacy create request shared by CREATE_QP and EX_CREATE_QP.
template <class Req>
void fill_create_req(Req *req, uint32_t pd_handle, struct ibv_qp *qp, const struct ibv_qp_init_attr_ex *a,
		     uint32_t send_cq_handle, uint32_t recv_cq_handle) noexcept
{
	req->user_handle = ptr_to_u64(qp);
	req->pd_handle = pd_handle;
	req->send_cq_handle = send_cq_handle;
	req->recv_cq_handle = recv_cq_handle;
	req->srq_handle = a->srq ? a->srq->handle : 0;
	req->max_send_wr = a->cap.max_send_wr;
	req->max_recv_wr = a->cap.max_recv_wr;
	req->max_send_sge = a->cap.max_send_sge;
	req->max_recv_sge = a->cap.max_recv_sge;
	req->max_inline_data = a->cap.max_inline_data;
	req->sq_sig_all = (uint8_t)a->sq_sig_all;
	req->qp_type = (uint8_t)a->qp_type;
	req->is_srq = a->srq ? 1 : 0;
}

void caps_from(struct ibv_qp_cap *cap, const struct ib_uverbs_create_qp_resp *r) noexcept
{
	cap->max_recv_sge = r->max_recv_sge;
	cap->max_send_sge = r->max_send_sge;
	cap->max_recv_wr = r->max_recv_wr;
	cap->max_send_wr = r->max_send_wr;
	cap->max_inline_data = r->max_inline_data;
}

int create_qp(struct ibv_context *context, struct verbs_qp *vqp, struct ibv_qp *qp_in,
	      struct ibv_qp_init_attr_ex *attr_ex, struct ibv_command_buffer *link) noexcept
{
	struct ibv_qp *qp = vqp ? &vqp->qp : qp_in;
	struct verbs_xrcd *vxrcd = nullptr;
	uint32_t pd_handle = 0, send_cq_handle = 0, recv_cq_handle = 0, create_flags = 0, qp_num = 0;

	CommandBuffer cmdb(UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE, 15, link);
	if (!cmdb.ok())
		return fail(ENOMEM);

	switch (attr_ex->qp_type) {
	case IBV_QPT_XRC_RECV:
		if (!(attr_ex->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr_ex->xrcd)
			return fail(EINVAL);
		vxrcd = to_vxrcd(attr_ex->xrcd);
		cmdb.in_obj(UVERBS_ATTR_CREATE_QP_XRCD_HANDLE, vxrcd->handle);
		// The legacy command carries the XRCD where the PD would be.
		pd_handle = vxrcd->handle;
		break;
	case IBV_QPT_RC:
	case IBV_QPT_UD:
	case IBV_QPT_UC:
	case IBV_QPT_RAW_PACKET:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_DRIVER:
		if (!(attr_ex->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr_ex->pd)
			return fail(EINVAL);
		cmdb.in_obj(UVERBS_ATTR_CREATE_QP_PD_HANDLE, attr_ex->pd->handle);
		pd_handle = attr_ex->pd->handle;
		if (attr_ex->comp_mask & IBV_QP_INIT_ATTR_IND_TABLE) {
			if (attr_ex->cap.max_recv_wr || attr_ex->cap.max_recv_sge || attr_ex->recv_cq ||
			    attr_ex->srq || !attr_ex->rwq_ind_tbl)
				return fail(EINVAL);
			cmdb.require_ex();
			cmdb.in_obj(UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE, attr_ex->rwq_ind_tbl->ind_tbl_handle);
			// An RSS QP may have no send queue at all.
			if (attr_ex->cap.max_send_wr) {
				if (!attr_ex->send_cq)
					return fail(EINVAL);
				cmdb.in_obj(UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, attr_ex->send_cq->handle);
				send_cq_handle = attr_ex->send_cq->handle;
			}
		} else {
			if (!attr_ex->send_cq)
				return fail(EINVAL);
			cmdb.in_obj(UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, attr_ex->send_cq->handle);
			send_cq_handle = attr_ex->send_cq->handle;
			if (attr_ex->qp_type != IBV_QPT_XRC_SEND) {
				if (!attr_ex->recv_cq)
					return fail(EINVAL);
				cmdb.in_obj(UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, attr_ex->recv_cq->handle);
				recv_cq_handle = attr_ex->recv_cq->handle;
			}
		}
		// The write path of the kernel ignores receive caps of XRC senders.
		if (attr_ex->qp_type == IBV_QPT_XRC_SEND) {
			attr_ex->cap.max_recv_wr = 0;
			attr_ex->cap.max_recv_sge = 0;
		}
		break;
	default:
		return fail(EINVAL);
	}

	struct ib_uverbs_attr *handle = cmdb.out_obj(UVERBS_ATTR_CREATE_QP_HANDLE);
	cmdb.const_in(UVERBS_ATTR_CREATE_QP_TYPE, (uint64_t)attr_ex->qp_type);
	cmdb.in_u64(UVERBS_ATTR_CREATE_QP_USER_HANDLE, ptr_to_u64(qp));
	cmdb.in(UVERBS_ATTR_CREATE_QP_CAP, &attr_ex->cap, sizeof(attr_ex->cap));
	cmdb.in_fd(UVERBS_ATTR_CREATE_QP_EVENT_FD, context->async_fd);

	if (attr_ex->sq_sig_all)
		create_flags |= IB_UVERBS_QP_CREATE_SQ_SIG_ALL;
	if (attr_ex->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) {
		if (attr_ex->create_flags & ~kSupportedCreateFlags)
			return fail(EINVAL);
		cmdb.require_ex();
		create_flags |= attr_ex->create_flags;
		if (attr_ex->create_flags & IBV_QP_CREATE_SOURCE_QPN) {
			// In ioctl mode the source QPN is an attribute of its own.
			cmdb.in_u32(UVERBS_ATTR_CREATE_QP_SOURCE_QPN, attr_ex->source_qpn);
			create_flags &= ~(uint32_t)IBV_QP_CREATE_SOURCE_QPN;
		}
	}
	if (create_flags)
		cmdb.in_u32(UVERBS_ATTR_CREATE_QP_FLAGS, create_flags);
	if (attr_ex->srq)
		cmdb.in_obj(UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, attr_ex->srq->handle);
	cmdb.out(UVERBS_ATTR_CREATE_QP_RESP_CAP, &attr_ex->cap, sizeof(attr_ex->cap));
	cmdb.out_ptr(UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, &qp_num);

	qp->context = context;
	int ret = 0;
	switch (ioctl_or_legacy(context, OV_FALLBACK_BIT(create_qp), cmdb.get(), &ret)) {
	case Fallback::Success:
		qp->handle = read_obj(handle);
		qp->qp_num = qp_num;
		set_qp(vqp, qp, attr_ex, vxrcd);
		return 0;
	case Fallback::TryWrite: {
		LegacyReq<ib_uverbs_create_qp> req_stack = {};
		struct ib_uverbs_create_qp_resp resp_stack;
		auto *req = static_cast<struct ib_uverbs_create_qp *>(legacy_req(link, &req_stack, sizeof(req_stack.core)));
		void *out = req ? legacy_resp(link, req, &resp_stack, sizeof(resp_stack)) : nullptr;
		if (!out)
			return fail(EINVAL);
		std::memset(req, 0, sizeof(*req));
		fill_create_req(req, pd_handle, qp, attr_ex, send_cq_handle, recv_cq_handle);
		ret = write_bufs(IB_USER_VERBS_CMD_CREATE_QP, context, req, out);
		if (ret)
			return ret;
		auto *r = static_cast<struct ib_uverbs_create_qp_resp *>(out);
		qp->handle = r->qp_handle;
		qp->qp_num = r->qpn;
		caps_from(&attr_ex->cap, r);
		set_qp(vqp, qp, attr_ex, vxrcd);
		return 0;
	}
	case Fallback::TryWriteEx: {
		LegacyReqEx<ib_uverbs_ex_create_qp> req_stack = {};
		struct ib_uverbs_ex_create_qp_resp resp_stack;
		auto *req = static_cast<struct ib_uverbs_ex_create_qp *>(
			legacy_req_ex(link, &req_stack, sizeof(req_stack.core)));
		void *out = req ? legacy_resp_ex(link, req, &resp_stack, sizeof(resp_stack)) : nullptr;
		if (!out)
			return fail(EINVAL);
		std::memset(req, 0, sizeof(*req));
		fill_create_req(req, pd_handle, qp, attr_ex, send_cq_handle, recv_cq_handle);
		if (attr_ex->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) {
			req->create_flags = attr_ex->create_flags;
			if (attr_ex->create_flags & IBV_QP_CREATE_SOURCE_QPN)
				req->source_qpn = attr_ex->source_qpn;
		}
		if (attr_ex->comp_mask & IBV_QP_INIT_ATTR_IND_TABLE) {
			req->rwq_ind_tbl_handle = attr_ex->rwq_ind_tbl->ind_tbl_handle;
			req->comp_mask = IB_UVERBS_CREATE_QP_MASK_IND_TABLE;
		}
		ret = write_raw_ex(IB_USER_VERBS_EX_CMD_CREATE_QP, context, req, out);
		if (ret)
			return ret;
		auto *r = static_cast<struct ib_uverbs_ex_create_qp_resp *>(out);
		qp->handle = r->base.qp_handle;
		qp->qp_num = r->base.qpn;
		caps_from(&attr_ex->cap, &r->base);
		set_qp(vqp, qp, attr_ex, vxrcd);
		return 0;
	}
	case Fallback::Error:
	default:
		return ret;
	}
}

void copy_dest_to_kern(struct ib_uverbs_qp_dest *d, const struct ibv_ah_attr *a) noexcept
{
	std::memcpy(d->dgid, a->grh.dgid.raw, sizeof(d->dgid));
	d->flow_label = a->grh.flow_label;
	d->dlid = a->dlid;
	d->reserved = 0;
	d->sgid_index = a->grh.sgid_index;
	d->hop_limit = a->grh.hop_limit;
	d->traffic_class = a->grh.traffic_class;
	d->sl = a->sl;
	d->src_path_bits = a->src_path_bits;
	d->static_rate = a->static_rate;
	d->is_global = a->is_global;
	d->port_num = a->port_num;
}

void copy_dest_from_kern(struct ibv_ah_attr *a, const struct ib_uverbs_qp_dest *d) noexcept
{
	std::memcpy(a->grh.dgid.raw, d->dgid, sizeof(a->grh.dgid.raw));
	a->grh.flow_label = d->flow_label;
	a->dlid = d->dlid;
	a->grh.sgid_index = d->sgid_index;
	a->grh.hop_limit = d->hop_limit;
	a->grh.traffic_class = d->traffic_class;
	a->sl = d->sl;
	a->src_path_bits = d->src_path_bits;
	a->static_rate = d->static_rate;
	a->is_global = d->is_global;
	a->port_num = d->port_num;
}

// The fields of ib_uverbs_modify_qp selected by attr_mask.
void copy_modify_fields(struct ibv_qp *qp, const struct ibv_qp_attr *attr, int attr_mask,
			struct ib_uverbs_modify_qp *cmd) noexcept
{
	cmd->qp_handle = qp->handle;
	cmd->attr_mask = (uint32_t)attr_mask;
	if (attr_mask & IBV_QP_STATE)
		cmd->qp_state = attr->qp_state;
	if (attr_mask & IBV_QP_CUR_STATE)
		cmd->cur_qp_state = attr->cur_qp_state;
	if (attr_mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		cmd->en_sqd_async_notify = attr->en_sqd_async_notify;
	if (attr_mask & IBV_QP_ACCESS_FLAGS)
		cmd->qp_access_flags = attr->qp_access_flags;
	if (attr_mask & IBV_QP_PKEY_INDEX)
		cmd->pkey_index = attr->pkey_index;
	if (attr_mask & IBV_QP_PORT)
		cmd->port_num = attr->port_num;
	if (attr_mask & IBV_QP_QKEY)
		cmd->qkey = attr->qkey;
	if (attr_mask & IBV_QP_AV)
		copy_dest_to_kern(&cmd->dest, &attr->ah_attr);
	if (attr_mask & IBV_QP_PATH_MTU)
		cmd->path_mtu = attr->path_mtu;
	if (attr_mask & IBV_QP_TIMEOUT)
		cmd->timeout = attr->timeout;
	if (attr_mask & IBV_QP_RETRY_CNT)
		cmd->retry_cnt = attr->retry_cnt;
	if (attr_mask & IBV_QP_RNR_RETRY)
		cmd->rnr_retry = attr->rnr_retry;
	if (attr_mask & IBV_QP_RQ_PSN)
		cmd->rq_psn = attr->rq_psn;
	if (attr_mask & IBV_QP_MAX_QP_RD_ATOMIC)
		cmd->max_rd_atomic = attr->max_rd_atomic;
	if (attr_mask & IBV_QP_ALT_PATH) {
		cmd->alt_pkey_index = attr->alt_pkey_index;
		cmd->alt_port_num = attr->alt_port_num;
		cmd->alt_timeout = attr->alt_timeout;
		copy_dest_to_kern(&cmd->alt_dest, &attr->alt_ah_attr);
	}
	if (attr_mask & IBV_QP_MIN_RNR_TIMER)
		cmd->min_rnr_timer = attr->min_rnr_timer;
	if (attr_mask & IBV_QP_SQ_PSN)
		cmd->sq_psn = attr->sq_psn;
	if (attr_mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		cmd->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (attr_mask & IBV_QP_PATH_MIG_STATE)
		cmd->path_mig_state = attr->path_mig_state;
	if (attr_mask & IBV_QP_DEST_QPN)
		cmd->dest_qp_num = attr->dest_qp_num;
	cmd->reserved[0] = cmd->reserved[1] = 0;
}

} // namespace

int cmd_create_qp(struct ibv_pd *pd, struct ibv_qp *qp, struct ibv_qp_init_attr *attr, void *cmd,
		  size_t cmd_size, struct ib_uverbs_create_qp_resp *resp, size_t resp_size) noexcept
{
	if (!pd || !qp || !attr)
		return fail(EINVAL);
	CompatBuffer<ib_uverbs_create_qp, ib_uverbs_create_qp_resp> link(UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE,
									  cmd, cmd_size, resp, resp_size);
	if (!link.ok())
		return fail(ENOMEM);
	struct ibv_qp_init_attr_ex attr_ex = {};
	attr_ex.qp_context = attr->qp_context;
	attr_ex.send_cq = attr->send_cq;
	attr_ex.recv_cq = attr->recv_cq;
	attr_ex.srq = attr->srq;
	attr_ex.cap = attr->cap;
	attr_ex.qp_type = attr->qp_type;
	attr_ex.sq_sig_all = attr->sq_sig_all;
	attr_ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	attr_ex.pd = pd;
	int ret = create_qp(pd->context, nullptr, qp, &attr_ex, link.get());
	if (!ret)
		attr->cap = attr_ex.cap;
	return ret;
}

int cmd_create_qp_ex(struct ibv_context *context, struct verbs_qp *qp, struct ibv_qp_init_attr_ex *attr_ex,
		     void *cmd, size_t cmd_size, struct ib_uverbs_create_qp_resp *resp, size_t resp_size) noexcept
{
	if (!context || !qp || !attr_ex)
		return fail(EINVAL);
	CompatBuffer<ib_uverbs_create_qp, ib_uverbs_create_qp_resp> link(UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE,
									  cmd, cmd_size, resp, resp_size);
	if (!link.ok())
		return fail(ENOMEM);
	if (attr_ex->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
					     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		return fail(EINVAL);
	return create_qp(context, qp, nullptr, attr_ex, link.get());
}

int cmd_create_qp_ex2(struct ibv_context *context, struct verbs_qp *qp, struct ibv_qp_init_attr_ex *attr_ex,
		      void *cmd, size_t cmd_size, struct ib_uverbs_ex_create_qp_resp *resp, size_t resp_size,
		      struct ibv_command_buffer *driver) noexcept
{
	if (!context || !qp || !attr_ex)
		return fail(EINVAL);
	CompatBuffer<ib_uverbs_ex_create_qp, ib_uverbs_ex_create_qp_resp> link(
		UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE, cmd, cmd_size, resp, resp_size,
		kLegacyExSize<ib_uverbs_ex_create_qp>, driver);
	if (!link.ok())
		return fail(ENOMEM);
	if (attr_ex->comp_mask &
	    ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
			IBV_QP_INIT_ATTR_MAX_TSO_HEADER | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH |
			IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		return fail(EINVAL);
	return create_qp(context, qp, nullptr, attr_ex, link.get());
}

int cmd_open_qp(struct ibv_context *context, struct verbs_qp *qp, int vqp_sz, struct ibv_qp_open_attr *attr,
		void *cmd, size_t cmd_size, struct ib_uverbs_create_qp_resp *resp, size_t resp_size) noexcept
{
	if (!context || !qp || !attr || !cmd || !resp)
		return fail(EINVAL);
	// The provider's buffer must hold at least the command's head.
	if (cmd_size < kLegacySize<ib_uverbs_open_qp>)
		return fail(EINVAL);
	if (attr->comp_mask >= IBV_QP_OPEN_ATTR_RESERVED)
		return fail(EOPNOTSUPP);
	if (!(attr->comp_mask & IBV_QP_OPEN_ATTR_XRCD) || !(attr->comp_mask & IBV_QP_OPEN_ATTR_NUM) ||
	    !(attr->comp_mask & IBV_QP_OPEN_ATTR_TYPE) || !attr->xrcd)
		return fail(EINVAL);
	struct verbs_xrcd *xrcd = to_vxrcd(attr->xrcd);
	auto *core = core_of<ib_uverbs_open_qp>(cmd);
	core->response = ptr_to_u64(resp);
	core->user_handle = ptr_to_u64(qp);
	core->pd_handle = xrcd->handle;
	core->qpn = attr->qp_num;
	core->qp_type = (uint8_t)attr->qp_type;
	int ret = send_write(context, IB_USER_VERBS_CMD_OPEN_QP, cmd, kLegacySize<ib_uverbs_open_qp>, cmd_size, resp,
			     sizeof(*resp), resp_size);
	if (ret)
		return ret;
	qp->qp.handle = resp->qp_handle;
	qp->qp.context = context;
	qp->qp.qp_context = attr->qp_context;
	qp->qp.pd = nullptr;
	qp->qp.send_cq = nullptr;
	qp->qp.recv_cq = nullptr;
	qp->qp.srq = nullptr;
	qp->qp.qp_num = attr->qp_num;
	qp->qp.qp_type = attr->qp_type;
	qp->qp.state = IBV_QPS_UNKNOWN;
	qp->qp.events_completed = 0;
	init_object_sync(&qp->qp.mutex, &qp->qp.cond);
	qp->comp_mask = 0;
	// Old providers pass a verbs_qp without the xrcd field.
	if (offsetof(struct verbs_qp, xrcd) < (size_t)vqp_sz) {
		qp->comp_mask = VERBS_QP_XRCD;
		qp->xrcd = xrcd;
	}
	return 0;
}

int cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask, struct ibv_qp_init_attr *init_attr,
		 void *cmd, size_t cmd_size) noexcept
{
	if (!qp || !attr || !init_attr || !cmd)
		return fail(EINVAL);
	// The provider's buffer must hold at least the command's head.
	if (cmd_size < kLegacySize<ib_uverbs_query_qp>)
		return fail(EINVAL);
	// From IBV_QP_RATE_LIMIT on, attributes only exist in the extended API.
	if (attr_mask & ~(IBV_QP_RATE_LIMIT - 1))
		return fail(EOPNOTSUPP);
	struct ib_uverbs_query_qp_resp resp = {};
	auto *core = core_of<ib_uverbs_query_qp>(cmd);
	core->response = ptr_to_u64(&resp);
	core->qp_handle = qp->handle;
	core->attr_mask = (uint32_t)attr_mask;
	int ret = send_write(qp->context, IB_USER_VERBS_CMD_QUERY_QP, cmd, kLegacySize<ib_uverbs_query_qp>, cmd_size,
			     &resp, sizeof(resp), sizeof(resp));
	if (ret)
		return ret;

	attr->qkey = resp.qkey;
	attr->rq_psn = resp.rq_psn;
	attr->sq_psn = resp.sq_psn;
	attr->dest_qp_num = resp.dest_qp_num;
	attr->qp_access_flags = resp.qp_access_flags;
	attr->pkey_index = resp.pkey_index;
	attr->alt_pkey_index = resp.alt_pkey_index;
	attr->qp_state = (enum ibv_qp_state)resp.qp_state;
	attr->cur_qp_state = (enum ibv_qp_state)resp.cur_qp_state;
	attr->path_mtu = (enum ibv_mtu)resp.path_mtu;
	attr->path_mig_state = (enum ibv_mig_state)resp.path_mig_state;
	attr->sq_draining = resp.sq_draining;
	attr->max_rd_atomic = resp.max_rd_atomic;
	attr->max_dest_rd_atomic = resp.max_dest_rd_atomic;
	attr->min_rnr_timer = resp.min_rnr_timer;
	attr->port_num = resp.port_num;
	attr->timeout = resp.timeout;
	attr->retry_cnt = resp.retry_cnt;
	attr->rnr_retry = resp.rnr_retry;
	attr->alt_port_num = resp.alt_port_num;
	attr->alt_timeout = resp.alt_timeout;
	attr->cap.max_send_wr = resp.max_send_wr;
	attr->cap.max_recv_wr = resp.max_recv_wr;
	attr->cap.max_send_sge = resp.max_send_sge;
	attr->cap.max_recv_sge = resp.max_recv_sge;
	attr->cap.max_inline_data = resp.max_inline_data;
	copy_dest_from_kern(&attr->ah_attr, &resp.dest);
	copy_dest_from_kern(&attr->alt_ah_attr, &resp.alt_dest);

	init_attr->qp_context = qp->qp_context;
	init_attr->send_cq = qp->send_cq;
	init_attr->recv_cq = qp->recv_cq;
	init_attr->srq = qp->srq;
	init_attr->qp_type = qp->qp_type;
	init_attr->cap = attr->cap;
	init_attr->sq_sig_all = resp.sq_sig_all;
	return 0;
}

int cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask, void *cmd, size_t cmd_size) noexcept
{
	if (!qp || !attr || !cmd)
		return fail(EINVAL);
	// The provider's buffer must hold at least the command's head.
	if (cmd_size < kLegacySize<ib_uverbs_modify_qp>)
		return fail(EINVAL);
	// Masks beyond IBV_QP_DEST_QPN need the extended command.
	if (attr_mask & ~((IBV_QP_DEST_QPN << 1) - 1))
		return fail(EOPNOTSUPP);
	copy_modify_fields(qp, attr, attr_mask, core_of<ib_uverbs_modify_qp>(cmd));
	return send_write(qp->context, IB_USER_VERBS_CMD_MODIFY_QP, cmd, kLegacySize<ib_uverbs_modify_qp>, cmd_size,
			  nullptr, 0, 0);
}

int cmd_modify_qp_ex(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask, void *cmd, size_t cmd_size,
		     struct ib_uverbs_ex_modify_qp_resp *resp, size_t resp_size) noexcept
{
	if (!qp || !attr || !cmd || !resp || cmd_size < kLegacyExSize<ib_uverbs_ex_modify_qp>)
		return fail(EINVAL);
	auto *core = core_of_ex<ib_uverbs_ex_modify_qp>(cmd);
	copy_modify_fields(qp, attr, attr_mask, &core->base);
	if (attr_mask & IBV_QP_RATE_LIMIT)
		core->rate_limit = attr->rate_limit;
	return send_write_ex(qp->context, IB_USER_VERBS_EX_CMD_MODIFY_QP, cmd, kLegacyExSize<ib_uverbs_ex_modify_qp>,
			     cmd_size, resp, sizeof(*resp), resp_size);
}

int cmd_destroy_qp(struct ibv_qp *qp) noexcept
{
	if (!qp)
		return fail(EINVAL);
	struct ib_uverbs_destroy_qp_resp resp = {};
	LegacyReq<ib_uverbs_destroy_qp> req = {};
	req.core.response = ptr_to_u64(&resp);
	req.core.qp_handle = qp->handle;
	int ret;
	if (destroy_handle(qp->context, OV_FALLBACK_BIT(destroy_qp), UVERBS_OBJECT_QP, UVERBS_METHOD_QP_DESTROY,
			   UVERBS_ATTR_DESTROY_QP_HANDLE, qp->handle, IB_USER_VERBS_CMD_DESTROY_QP, req,
			   answer_in(UVERBS_ATTR_DESTROY_QP_RESP, &resp), &ret))
		return ret;
	wait_events(&qp->mutex, &qp->cond, &qp->events_completed, resp.events_reported);
	return 0;
}

int cmd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr) noexcept
{
	if (!ibqp || !bad_wr)
		return fail(EINVAL);
	uint32_t wr_count = 0, sge_count = 0;
	for (struct ibv_send_wr *i = wr; i; i = i->next) {
		if (i->num_sge < 0 || (i->num_sge && !i->sg_list) || (ibqp->qp_type == IBV_QPT_UD && !i->wr.ud.ah)) {
			*bad_wr = i;
			return fail(EINVAL);
		}
		++wr_count;
		sge_count += (uint32_t)i->num_sge;
	}
	size_t size = sizeof(LegacyReq<ib_uverbs_post_send>) + wr_count * sizeof(struct ib_uverbs_send_wr) +
		      sge_count * sizeof(struct ib_uverbs_sge);
	auto *req = static_cast<LegacyReq<ib_uverbs_post_send> *>(std::calloc(1, size));
	if (!req)
		return fail(ENOMEM);
	struct ib_uverbs_post_send_resp resp = {};
	req->core.response = ptr_to_u64(&resp);
	req->core.qp_handle = ibqp->handle;
	req->core.wr_count = wr_count;
	req->core.sge_count = sge_count;
	req->core.wqe_size = sizeof(struct ib_uverbs_send_wr);
	auto *n = reinterpret_cast<struct ib_uverbs_send_wr *>(req + 1);
	auto *s = reinterpret_cast<struct ib_uverbs_sge *>(n + wr_count);
	for (struct ibv_send_wr *i = wr; i; i = i->next, ++n) {
		n->wr_id = i->wr_id;
		n->num_sge = (uint32_t)i->num_sge;
		n->opcode = (uint32_t)i->opcode;
		n->send_flags = i->send_flags;
		n->ex.imm_data = i->imm_data;
		if (ibqp->qp_type == IBV_QPT_UD) {
			n->wr.ud.ah = i->wr.ud.ah->handle;
			n->wr.ud.remote_qpn = i->wr.ud.remote_qpn;
			n->wr.ud.remote_qkey = i->wr.ud.remote_qkey;
		} else {
			switch (i->opcode) {
			case IBV_WR_RDMA_WRITE:
			case IBV_WR_RDMA_WRITE_WITH_IMM:
			case IBV_WR_RDMA_READ:
				n->wr.rdma.remote_addr = i->wr.rdma.remote_addr;
				n->wr.rdma.rkey = i->wr.rdma.rkey;
				break;
			case IBV_WR_ATOMIC_CMP_AND_SWP:
			case IBV_WR_ATOMIC_FETCH_AND_ADD:
				n->wr.atomic.remote_addr = i->wr.atomic.remote_addr;
				n->wr.atomic.compare_add = i->wr.atomic.compare_add;
				n->wr.atomic.swap = i->wr.atomic.swap;
				n->wr.atomic.rkey = i->wr.atomic.rkey;
				break;
			default:
				break;
			}
		}
		s = append_sges(s, i->sg_list, i->num_sge);
	}
	int ret = send_write(ibqp->context, IB_USER_VERBS_CMD_POST_SEND, req, size, size, &resp, sizeof(resp),
			     sizeof(resp));
	std::free(req);

	report_bad_wr(wr, wr_count, resp.bad_wr, ret, bad_wr);
	return ret;
}

int cmd_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr) noexcept
{
	if (!ibqp)
		return fail(EINVAL);
	return post_recv_common(ibqp->context, IB_USER_VERBS_CMD_POST_RECV, ibqp->handle, wr, bad_wr);
}

} // namespace ov::kernel
