// Work queues, RSS indirection tables, flow steering objects, counters and
// device memory. Kernel: UVERBS_OBJECT_WQ / RWQ_IND_TBL / FLOW /
// FLOW_ACTION / COUNTERS / DM / MR (<rdma/ib_user_ioctl_cmds.h>) and the
// extended write commands of <rdma/ib_user_verbs.h>.
#include "kernel/commands.h"

#include "core/context_private.h"

#include <pthread.h>

#include <cerrno>
#include <cstdlib>

namespace ov::kernel {

// A destroy that exists only as an ioctl method (commands.h).
int destroy_ioctl_only(struct ibv_context *ctx, uint16_t object, uint16_t method, uint16_t attr,
		       uint32_t handle) noexcept
{
	if (!ctx)
		return fail(EINVAL);
	CommandBuffer cmdb(object, method, 1);
	if (!cmdb.ok())
		return fail(ENOMEM);
	cmdb.in_obj(attr, handle);
	int ret = run_ioctl(ctx, cmdb.get());
	destroy_failed(&ret);
	return ret;
}

// ---------------------------------------------------------------------------
// WQ

int cmd_create_wq(struct ibv_context *context, struct ibv_wq_init_attr *wq_init_attr, struct ibv_wq *wq,
		  void *cmd, size_t cmd_size, struct ib_uverbs_ex_create_wq_resp *resp, size_t resp_size) noexcept
{
	if (!context || !wq_init_attr || !wq || !wq_init_attr->pd || !wq_init_attr->cq)
		return fail(EINVAL);
	if (wq_init_attr->comp_mask >= IBV_WQ_INIT_ATTR_RESERVED)
		return fail(EINVAL);
	if ((wq_init_attr->comp_mask & IBV_WQ_INIT_ATTR_FLAGS) &&
	    (wq_init_attr->create_flags & ~(IBV_WQ_FLAGS_RESERVED - 1)))
		return fail(EOPNOTSUPP);

	CompatBuffer<ib_uverbs_ex_create_wq, ib_uverbs_ex_create_wq_resp> link(
		UVERBS_OBJECT_WQ, UVERBS_METHOD_WQ_CREATE, cmd, cmd_size, resp, resp_size,
		kLegacyExSize<ib_uverbs_ex_create_wq>);
	CommandBuffer cmdb(UVERBS_OBJECT_WQ, UVERBS_METHOD_WQ_CREATE, 13, link.get());
	if (!link.ok() || !cmdb.ok())
		return fail(ENOMEM);

	uint32_t max_wr = 0, max_sge = 0, wq_num = 0;
	wq->context = context;
	wq->cq = wq_init_attr->cq;
	wq->pd = wq_init_attr->pd;
	wq->wq_type = wq_init_attr->wq_type;

	struct ib_uverbs_attr *handle = cmdb.out_obj(UVERBS_ATTR_CREATE_WQ_HANDLE);
	cmdb.in_u64(UVERBS_ATTR_CREATE_WQ_USER_HANDLE, ptr_to_u64(wq));
	cmdb.in_obj(UVERBS_ATTR_CREATE_WQ_PD_HANDLE, wq_init_attr->pd->handle);
	cmdb.in_obj(UVERBS_ATTR_CREATE_WQ_CQ_HANDLE, wq_init_attr->cq->handle);
	cmdb.const_in(UVERBS_ATTR_CREATE_WQ_TYPE, (uint64_t)wq_init_attr->wq_type);
	cmdb.in_u32(UVERBS_ATTR_CREATE_WQ_MAX_WR, wq_init_attr->max_wr);
	cmdb.in_u32(UVERBS_ATTR_CREATE_WQ_MAX_SGE, wq_init_attr->max_sge);
	cmdb.in_fd(UVERBS_ATTR_CREATE_WQ_EVENT_FD, context->async_fd);
	if (wq_init_attr->comp_mask & IBV_WQ_INIT_ATTR_FLAGS)
		cmdb.in_u32(UVERBS_ATTR_CREATE_WQ_FLAGS, wq_init_attr->create_flags);
	cmdb.out_ptr(UVERBS_ATTR_CREATE_WQ_RESP_MAX_WR, &max_wr);
	cmdb.out_ptr(UVERBS_ATTR_CREATE_WQ_RESP_MAX_SGE, &max_sge);
	cmdb.out_ptr(UVERBS_ATTR_CREATE_WQ_RESP_WQ_NUM, &wq_num);

	struct verbs_context *vctx = verbs_get_ctx(context);
	if (vctx && vctx->priv && vctx->priv->imported)
		cmdb.ioctl_only();
	cmdb.require_ex(); // WQs never existed in the basic write ABI

	int ret = 0;
	switch (ioctl_or_legacy(context, OV_FALLBACK_BIT(create_wq), cmdb.get(), &ret)) {
	case Fallback::Success:
		wq->handle = read_obj(handle);
		wq->wq_num = wq_num;
		wq_init_attr->max_wr = max_wr;
		wq_init_attr->max_sge = max_sge;
		break;
	case Fallback::TryWriteEx: {
		LegacyReqEx<ib_uverbs_ex_create_wq> req_stack = {};
		struct ib_uverbs_ex_create_wq_resp resp_stack;
		auto *req = static_cast<struct ib_uverbs_ex_create_wq *>(
			legacy_req_ex(link.get(), &req_stack, sizeof(req_stack.core)));
		void *out = req ? legacy_resp_ex(link.get(), req, &resp_stack, sizeof(resp_stack)) : nullptr;
		if (!out)
			return fail(EINVAL);
		std::memset(req, 0, sizeof(*req));
		req->user_handle = ptr_to_u64(wq);
		req->pd_handle = wq_init_attr->pd->handle;
		req->cq_handle = wq_init_attr->cq->handle;
		req->max_wr = wq_init_attr->max_wr;
		req->max_sge = wq_init_attr->max_sge;
		req->wq_type = (uint32_t)wq_init_attr->wq_type;
		if (wq_init_attr->comp_mask & IBV_WQ_INIT_ATTR_FLAGS)
			req->create_flags = wq_init_attr->create_flags;
		ret = write_raw_ex(IB_USER_VERBS_EX_CMD_CREATE_WQ, context, req, out);
		if (ret)
			return ret;
		auto *r = static_cast<struct ib_uverbs_ex_create_wq_resp *>(out);
		wq->handle = r->wq_handle;
		wq_init_attr->max_wr = r->max_wr;
		wq_init_attr->max_sge = r->max_sge;
		wq->wq_num = r->wqn;
		break;
	}
	case Fallback::TryWrite:
		return fail(EOPNOTSUPP);
	case Fallback::Error:
	default:
		return ret;
	}
	wq->state = IBV_WQS_RESET;
	wq->events_completed = 0;
	init_object_sync(&wq->mutex, &wq->cond);
	return 0;
}

int cmd_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *attr, void *cmd, size_t cmd_size) noexcept
{
	if (!wq || !attr || !cmd || cmd_size < kLegacyExSize<ib_uverbs_ex_modify_wq>)
		return fail(EINVAL);
	if (attr->attr_mask >= IBV_WQ_ATTR_RESERVED)
		return fail(EINVAL);
	if ((attr->attr_mask & IBV_WQ_ATTR_FLAGS) && (attr->flags_mask & ~(IBV_WQ_FLAGS_RESERVED - 1)))
		return fail(EOPNOTSUPP);
	std::memset(cmd, 0, kLegacyExSize<ib_uverbs_ex_modify_wq>);
	auto *core = core_of_ex<ib_uverbs_ex_modify_wq>(cmd);
	core->curr_wq_state = (uint32_t)attr->curr_wq_state;
	core->wq_state = (uint32_t)attr->wq_state;
	if (attr->attr_mask & IBV_WQ_ATTR_FLAGS) {
		core->flags = attr->flags;
		core->flags_mask = attr->flags_mask;
	}
	core->wq_handle = wq->handle;
	core->attr_mask = attr->attr_mask;
	int ret = send_write_ex(wq->context, IB_USER_VERBS_EX_CMD_MODIFY_WQ, cmd,
				kLegacyExSize<ib_uverbs_ex_modify_wq>, cmd_size, nullptr, 0, 0);
	if (ret)
		return ret;
	if (attr->attr_mask & IBV_WQ_ATTR_STATE)
		wq->state = attr->wq_state;
	return 0;
}

int cmd_destroy_wq(struct ibv_wq *wq) noexcept
{
	if (!wq)
		return fail(EINVAL);
	// The ioctl method answers only the event count; the extended write
	// answers the whole ib_uverbs_ex_destroy_wq_resp.
	struct ib_uverbs_ex_destroy_wq_resp resp = {};
	LegacyReqEx<ib_uverbs_ex_destroy_wq> req = {};
	req.core.wq_handle = wq->handle;
	const DestroyAnswer answer{UVERBS_ATTR_DESTROY_WQ_RESP, &resp.events_reported, sizeof(resp.events_reported),
				   &resp, sizeof(resp)};
	int ret;
	if (destroy_handle(wq->context, OV_FALLBACK_BIT(destroy_wq), UVERBS_OBJECT_WQ, UVERBS_METHOD_WQ_DESTROY,
			   UVERBS_ATTR_DESTROY_WQ_HANDLE, wq->handle, IB_USER_VERBS_EX_CMD_DESTROY_WQ, req, answer,
			   &ret))
		return ret;
	wait_events(&wq->mutex, &wq->cond, &wq->events_completed, resp.events_reported);
	return 0;
}

int cmd_create_rwq_ind_table(struct ibv_context *context, struct ibv_rwq_ind_table_init_attr *init_attr,
			     struct ibv_rwq_ind_table *rwq_ind_table,
			     struct ib_uverbs_ex_create_rwq_ind_table_resp *resp, size_t resp_size) noexcept
{
	if (!context || !init_attr || !rwq_ind_table || !resp || !init_attr->ind_tbl)
		return fail(EINVAL);
	if (init_attr->comp_mask >= IBV_CREATE_IND_TABLE_RESERVED)
		return fail(EINVAL);
	// The kernel accepts at most 2^13 entries; anything far beyond cannot
	// even be expressed in one write.
	if (init_attr->log_ind_tbl_size > 16)
		return fail(EINVAL);
	size_t entries = (size_t)1 << init_attr->log_ind_tbl_size;
	for (size_t i = 0; i < entries; ++i)
		if (!init_attr->ind_tbl[i])
			return fail(EINVAL);

	// The whole message must be a multiple of 8 bytes.
	size_t size = kLegacyExSize<ib_uverbs_ex_create_rwq_ind_table> + entries * sizeof(uint32_t);
	size = (size + 7) / 8 * 8;
	auto *req = static_cast<LegacyReqEx<ib_uverbs_ex_create_rwq_ind_table> *>(std::calloc(1, size));
	if (!req)
		return fail(ENOMEM);
	req->core.log_ind_tbl_size = init_attr->log_ind_tbl_size;
	req->core.comp_mask = 0;
	auto *handles = reinterpret_cast<uint32_t *>(&req->core + 1);
	for (size_t i = 0; i < entries; ++i)
		handles[i] = init_attr->ind_tbl[i]->handle;
	int ret = send_write_ex(context, IB_USER_VERBS_EX_CMD_CREATE_RWQ_IND_TBL, req, size, size, resp,
				sizeof(*resp), resp_size);
	std::free(req);
	if (ret)
		return ret;
	if (resp->response_length < sizeof(*resp))
		return fail(EINVAL);
	rwq_ind_table->ind_tbl_handle = resp->ind_tbl_handle;
	rwq_ind_table->ind_tbl_num = resp->ind_tbl_num;
	rwq_ind_table->context = context;
	return 0;
}

int cmd_destroy_rwq_ind_table(struct ibv_rwq_ind_table *rwq_ind_table) noexcept
{
	if (!rwq_ind_table)
		return fail(EINVAL);
	LegacyReqEx<ib_uverbs_ex_destroy_rwq_ind_table> req = {};
	req.core.ind_tbl_handle = rwq_ind_table->ind_tbl_handle;
	int ret;
	destroy_handle(rwq_ind_table->context, OV_FALLBACK_BIT(destroy_rwq_ind_table), UVERBS_OBJECT_RWQ_IND_TBL,
		       UVERBS_METHOD_RWQ_IND_TBL_DESTROY, UVERBS_ATTR_DESTROY_RWQ_IND_TBL_HANDLE,
		       rwq_ind_table->ind_tbl_handle, IB_USER_VERBS_EX_CMD_DESTROY_RWQ_IND_TBL, req, DestroyAnswer{},
		       &ret);
	return ret;
}

// ---------------------------------------------------------------------------
// Flow steering

int cmd_destroy_flow(struct ibv_flow *flow_id) noexcept
{
	if (!flow_id)
		return fail(EINVAL);
	LegacyReqEx<ib_uverbs_destroy_flow> req = {};
	req.core.flow_handle = flow_id->handle;
	int ret;
	destroy_handle(flow_id->context, OV_FALLBACK_BIT(destroy_flow), UVERBS_OBJECT_FLOW, UVERBS_METHOD_FLOW_DESTROY,
		       UVERBS_ATTR_DESTROY_FLOW_HANDLE, flow_id->handle, IB_USER_VERBS_EX_CMD_DESTROY_FLOW, req,
		       DestroyAnswer{}, &ret);
	return ret;
}

namespace {

// The optional ESP attributes shared by create and modify.
void fill_esp(CommandBuffer &cmdb, const struct ibv_flow_action_esp_attr *esp) noexcept
{
	if (esp->comp_mask & IBV_FLOW_ACTION_ESP_MASK_ESN)
		cmdb.in(UVERBS_ATTR_FLOW_ACTION_ESP_ESN, &esp->esn, sizeof(esp->esn));
	if (esp->keymat_ptr)
		cmdb.in_enum(UVERBS_ATTR_FLOW_ACTION_ESP_KEYMAT, (uint8_t)esp->keymat_proto, esp->keymat_ptr,
			     esp->keymat_len);
	if (esp->replay_ptr)
		cmdb.in_enum(UVERBS_ATTR_FLOW_ACTION_ESP_REPLAY, (uint8_t)esp->replay_proto, esp->replay_ptr,
			     esp->replay_len);
	if (esp->esp_encap)
		cmdb.in(UVERBS_ATTR_FLOW_ACTION_ESP_ENCAP, esp->esp_encap, sizeof(*esp->esp_encap));
	if (esp->esp_attr)
		cmdb.in(UVERBS_ATTR_FLOW_ACTION_ESP_ATTRS, esp->esp_attr, sizeof(*esp->esp_attr));
}

} // namespace

int cmd_create_flow_action_esp(struct ibv_context *ctx, struct ibv_flow_action_esp_attr *attr,
			       struct verbs_flow_action *flow_action, struct ibv_command_buffer *driver) noexcept
{
	if (!ctx || !attr || !flow_action)
		return fail(EINVAL);
	CommandBuffer cmdb(UVERBS_OBJECT_FLOW_ACTION, UVERBS_METHOD_FLOW_ACTION_ESP_CREATE, 6, driver);
	if (!cmdb.ok())
		return fail(ENOMEM);
	struct ib_uverbs_attr *handle = cmdb.out_obj(UVERBS_ATTR_CREATE_FLOW_ACTION_ESP_HANDLE);
	fill_esp(cmdb, attr);
	int ret = run_ioctl(ctx, cmdb.get());
	if (ret)
		return ret;
	flow_action->action.context = ctx;
	flow_action->type = IBV_FLOW_ACTION_ESP;
	flow_action->handle = read_obj(handle);
	return 0;
}

int cmd_modify_flow_action_esp(struct verbs_flow_action *flow_action, struct ibv_flow_action_esp_attr *attr,
			       struct ibv_command_buffer *driver) noexcept
{
	if (!flow_action || !attr)
		return fail(EINVAL);
	CommandBuffer cmdb(UVERBS_OBJECT_FLOW_ACTION, UVERBS_METHOD_FLOW_ACTION_ESP_MODIFY, 6, driver);
	if (!cmdb.ok())
		return fail(ENOMEM);
	cmdb.in_obj(UVERBS_ATTR_MODIFY_FLOW_ACTION_ESP_HANDLE, flow_action->handle);
	fill_esp(cmdb, attr);
	return run_ioctl(flow_action->action.context, cmdb.get());
}

int cmd_destroy_flow_action(struct verbs_flow_action *action) noexcept
{
	if (!action)
		return fail(EINVAL);
	return destroy_ioctl_only(action->action.context, UVERBS_OBJECT_FLOW_ACTION, UVERBS_METHOD_FLOW_ACTION_DESTROY,
				  UVERBS_ATTR_DESTROY_FLOW_ACTION_HANDLE, action->handle);
}

// ---------------------------------------------------------------------------
// Counters

int cmd_create_counters(struct ibv_context *context, struct ibv_counters_init_attr *init_attr,
			struct verbs_counters *vcounters, struct ibv_command_buffer *link) noexcept
{
	if (!context || !init_attr || !vcounters)
		return fail(EINVAL);
	if (init_attr->comp_mask)
		return fail(EOPNOTSUPP);
	CommandBuffer cmdb(UVERBS_OBJECT_COUNTERS, UVERBS_METHOD_COUNTERS_CREATE, 1, link);
	if (!cmdb.ok())
		return fail(ENOMEM);
	struct ib_uverbs_attr *handle = cmdb.out_obj(UVERBS_ATTR_CREATE_COUNTERS_HANDLE);
	int ret = run_ioctl(context, cmdb.get());
	if (ret)
		return ret;
	vcounters->counters.context = context;
	vcounters->handle = read_obj(handle);
	return 0;
}

int cmd_destroy_counters(struct verbs_counters *vcounters) noexcept
{
	if (!vcounters)
		return fail(EINVAL);
	return destroy_ioctl_only(vcounters->counters.context, UVERBS_OBJECT_COUNTERS, UVERBS_METHOD_COUNTERS_DESTROY,
				  UVERBS_ATTR_DESTROY_COUNTERS_HANDLE, vcounters->handle);
}

int cmd_read_counters(struct verbs_counters *vcounters, uint64_t *counters_value, uint32_t ncounters,
		      uint32_t flags, struct ibv_command_buffer *link) noexcept
{
	if (!vcounters || (ncounters && !counters_value))
		return fail(EINVAL);
	CommandBuffer cmdb(UVERBS_OBJECT_COUNTERS, UVERBS_METHOD_COUNTERS_READ, 3, link);
	if (!cmdb.ok())
		return fail(ENOMEM);
	cmdb.in_obj(UVERBS_ATTR_READ_COUNTERS_HANDLE, vcounters->handle);
	cmdb.out(UVERBS_ATTR_READ_COUNTERS_BUFF, counters_value, (size_t)ncounters * sizeof(uint64_t));
	cmdb.in_u32(UVERBS_ATTR_READ_COUNTERS_FLAGS, flags);
	return run_ioctl(vcounters->counters.context, cmdb.get());
}

// ---------------------------------------------------------------------------
// Device memory

int cmd_alloc_dm(struct ibv_context *ctx, const struct ibv_alloc_dm_attr *dm_attr, struct verbs_dm *dm,
		 struct ibv_command_buffer *link) noexcept
{
	if (!ctx || !dm_attr || !dm)
		return fail(EINVAL);
	CommandBuffer cmdb(UVERBS_OBJECT_DM, UVERBS_METHOD_DM_ALLOC, 3, link);
	if (!cmdb.ok())
		return fail(ENOMEM);
	struct ib_uverbs_attr *handle = cmdb.out_obj(UVERBS_ATTR_ALLOC_DM_HANDLE);
	cmdb.in_u64(UVERBS_ATTR_ALLOC_DM_LENGTH, dm_attr->length);
	cmdb.in_u32(UVERBS_ATTR_ALLOC_DM_ALIGNMENT, dm_attr->log_align_req);
	int ret = run_ioctl(ctx, cmdb.get());
	if (ret)
		return ret;
	dm->handle = read_obj(handle);
	dm->dm.context = ctx;
	return 0;
}

int cmd_free_dm(struct verbs_dm *dm) noexcept
{
	if (!dm)
		return fail(EINVAL);
	return destroy_ioctl_only(dm->dm.context, UVERBS_OBJECT_DM, UVERBS_METHOD_DM_FREE, UVERBS_ATTR_FREE_DM_HANDLE,
				  dm->handle);
}

int cmd_reg_dm_mr(struct ibv_pd *pd, struct verbs_dm *dm, uint64_t offset, size_t length, unsigned int access,
		  struct verbs_mr *vmr, struct ibv_command_buffer *link) noexcept
{
	if (!pd || !dm || !vmr)
		return fail(EINVAL);
	// Device memory MRs are zero based: the mapping is not the user's.
	if (!(access & IBV_ACCESS_ZERO_BASED))
		return fail(EINVAL);
	CommandBuffer cmdb(UVERBS_OBJECT_MR, UVERBS_METHOD_DM_MR_REG, 8, link);
	if (!cmdb.ok())
		return fail(ENOMEM);
	uint32_t lkey = 0, rkey = 0;
	struct ib_uverbs_attr *handle = cmdb.out_obj(UVERBS_ATTR_REG_DM_MR_HANDLE);
	cmdb.out_ptr(UVERBS_ATTR_REG_DM_MR_RESP_LKEY, &lkey);
	cmdb.out_ptr(UVERBS_ATTR_REG_DM_MR_RESP_RKEY, &rkey);
	cmdb.in_obj(UVERBS_ATTR_REG_DM_MR_PD_HANDLE, pd->handle);
	cmdb.in_obj(UVERBS_ATTR_REG_DM_MR_DM_HANDLE, dm->handle);
	cmdb.in_u64(UVERBS_ATTR_REG_DM_MR_OFFSET, offset);
	cmdb.in_u64(UVERBS_ATTR_REG_DM_MR_LENGTH, length);
	cmdb.in_u32(UVERBS_ATTR_REG_DM_MR_ACCESS_FLAGS, access);
	int ret = run_ioctl(pd->context, cmdb.get());
	if (ret)
		return ret;
	vmr->ibv_mr.handle = read_obj(handle);
	vmr->ibv_mr.context = pd->context;
	vmr->ibv_mr.lkey = lkey;
	vmr->ibv_mr.rkey = rkey;
	vmr->ibv_mr.length = length;
	vmr->ibv_mr.pd = pd;
	vmr->ibv_mr.addr = nullptr;
	vmr->mr_type = IBV_MR_TYPE_MR;
	return 0;
}

} // namespace ov::kernel
