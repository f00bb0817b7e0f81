// Device-level commands: GET_CONTEXT, QUERY_CONTEXT, QUERY_DEVICE(_EX),
// QUERY_PORT. Kernel methods: UVERBS_OBJECT_DEVICE (<rdma/ib_user_ioctl_cmds.h>)
// with the write fallbacks of <rdma/ib_user_verbs.h>.
#include "kernel/commands.h"

#include "core/context_private.h"

#include <algorithm>
#include <cerrno>

namespace ov::kernel {

namespace {

void set_core_support(struct ibv_context *context, uint64_t core_support) noexcept
{
	if (context->device)
		verbs_get_device(context->device)->core_support = core_support;
}

void copy_port_attr(struct ibv_port_attr *port_attr, const struct ib_uverbs_query_port_resp *resp) noexcept
{
	port_attr->state = (enum ibv_port_state)resp->state;
	port_attr->max_mtu = (enum ibv_mtu)resp->max_mtu;
	port_attr->active_mtu = (enum ibv_mtu)resp->active_mtu;
	port_attr->gid_tbl_len = resp->gid_tbl_len;
	port_attr->port_cap_flags = resp->port_cap_flags;
	port_attr->max_msg_sz = resp->max_msg_sz;
	port_attr->bad_pkey_cntr = resp->bad_pkey_cntr;
	port_attr->qkey_viol_cntr = resp->qkey_viol_cntr;
	port_attr->pkey_tbl_len = resp->pkey_tbl_len;
	port_attr->lid = resp->lid;
	port_attr->sm_lid = resp->sm_lid;
	port_attr->lmc = resp->lmc;
	port_attr->max_vl_num = resp->max_vl_num;
	port_attr->sm_sl = resp->sm_sl;
	port_attr->subnet_timeout = resp->subnet_timeout;
	port_attr->init_type_reply = resp->init_type_reply;
	port_attr->active_width = resp->active_width;
	port_attr->active_speed = resp->active_speed;
	port_attr->phys_state = resp->phys_state;
	port_attr->link_layer = resp->link_layer;
	port_attr->flags = resp->flags;
}

} // namespace

int cmd_get_context(struct verbs_context *context_ex, void *cmd, size_t cmd_size,
		    struct ib_uverbs_get_context_resp *resp, size_t resp_size, const int *fds,
		    uint32_t nfds) noexcept
{
	if (!context_ex)
		return fail(EINVAL);
	struct ibv_context *context = &context_ex->context;
	CompatBuffer<ib_uverbs_get_context, ib_uverbs_get_context_resp> link(
		UVERBS_OBJECT_DEVICE, UVERBS_METHOD_GET_CONTEXT, cmd, cmd_size, resp, resp_size);
	CommandBuffer cmdb(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_GET_CONTEXT, 3, link.get());
	if (!link.ok() || !cmdb.ok())
		return fail(ENOMEM);

	uint32_t num_comp_vectors = 0;
	uint64_t core_support = 0;
	cmdb.out_ptr(UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, &num_comp_vectors);
	cmdb.out_ptr(UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, &core_support);
	if (fds && nfds) {
		// rdma-core 64: UVERBS_ATTR_GET_CONTEXT_FD_ARR, the attribute after
		// CORE_SUPPORT (not in the 6.1/6.12 uapi headers); the write
		// command cannot carry it, so a kernel without it fails.
		if (nfds > UINT16_MAX / sizeof(int))
			return fail(EINVAL);
		cmdb.in(UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT + 1, fds, nfds * sizeof(int));
		cmdb.ioctl_only();
	}

	int ret = 0;
	// GET_CONTEXT has no op of its own; rdma-core books it on free_context.
	switch (ioctl_or_legacy(context, OV_FALLBACK_BIT(free_context), cmdb.get(), &ret)) {
	case Fallback::Success:
		context->num_comp_vectors = (int)num_comp_vectors;
		set_core_support(context, core_support);
		return 0;
	case Fallback::TryWrite: {
		LegacyReq<ib_uverbs_get_context> req_stack = {};
		struct ib_uverbs_get_context_resp resp_stack;
		void *req = legacy_req(link.get(), &req_stack, sizeof(req_stack.core));
		void *out = req ? legacy_resp(link.get(), req, &resp_stack, sizeof(resp_stack)) : nullptr;
		if (!out)
			return fail(EINVAL);
		ret = write_bufs(IB_USER_VERBS_CMD_GET_CONTEXT, context, req, out);
		if (ret)
			return ret;
		auto *r = static_cast<struct ib_uverbs_get_context_resp *>(out);
		context->async_fd = (int)r->async_fd;
		context->num_comp_vectors = (int)r->num_comp_vectors;
		return 0;
	}
	case Fallback::TryWriteEx:
		return fail(EOPNOTSUPP);
	case Fallback::Error:
	default:
		return ret;
	}
}

int cmd_query_context(struct ibv_context *context, struct ibv_command_buffer *driver) noexcept
{
	if (!context)
		return fail(EINVAL);
	CommandBuffer cmdb(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_CONTEXT, 2, driver);
	if (!cmdb.ok())
		return fail(ENOMEM);
	uint32_t num_comp_vectors = 0;
	uint64_t core_support = 0;
	cmdb.out_ptr(UVERBS_ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS, &num_comp_vectors);
	cmdb.out_ptr(UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT, &core_support);
	int ret = run_ioctl(context, cmdb.get());
	if (ret)
		return ret;
	context->num_comp_vectors = (int)num_comp_vectors;
	set_core_support(context, core_support);
	return 0;
}

#define OV_END(type, field) (offsetof(type, field) + sizeof(((type *)nullptr)->field))

int cmd_query_device_any(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
			 struct ibv_device_attr_ex *attr, size_t attr_size,
			 struct ib_uverbs_ex_query_device_resp *resp, size_t *resp_size) noexcept
{
	struct ib_uverbs_ex_query_device_resp internal_resp;
	size_t internal_size = sizeof(internal_resp);

	if (!context || !attr)
		return fail(EINVAL);
	if (input && input->comp_mask)
		return fail(EINVAL);
	if (attr_size < sizeof(attr->orig_attr))
		return fail(EINVAL);
	if (!resp || !resp_size) {
		resp = &internal_resp;
		resp_size = &internal_size;
	}
	if (*resp_size < sizeof(resp->base) + 2 * sizeof(uint32_t))
		return fail(EINVAL);
	std::memset(attr, 0, attr_size);

	if (attr_size > sizeof(attr->orig_attr)) {
		LegacyReqEx<ib_uverbs_ex_query_device> req = {};
		size_t core_resp = std::min(*resp_size, sizeof(*resp)) & ~(size_t)7;
		int err = send_write_ex(context, IB_USER_VERBS_EX_CMD_QUERY_DEVICE, &req, sizeof(req), sizeof(req),
					resp, core_resp, *resp_size & ~(size_t)7);
		if (err) {
			if (err != EOPNOTSUPP && err != ENOSYS)
				return err;
			attr_size = sizeof(attr->orig_attr);
		}
	}
	if (attr_size == sizeof(attr->orig_attr)) {
		LegacyReq<ib_uverbs_query_device> req = {};
		req.core.response = ptr_to_u64(&resp->base);
		int err = send_write(context, IB_USER_VERBS_CMD_QUERY_DEVICE, &req, sizeof(req), sizeof(req),
				     &resp->base, sizeof(resp->base), sizeof(resp->base));
		if (err)
			return err;
		resp->response_length = sizeof(resp->base);
	}

	*resp_size = resp->response_length;
	const struct ib_uverbs_query_device_resp &b = resp->base;
	struct ibv_device_attr &o = attr->orig_attr;
	o.node_guid = b.node_guid;
	o.sys_image_guid = b.sys_image_guid;
	o.max_mr_size = b.max_mr_size;
	o.page_size_cap = b.page_size_cap;
	o.vendor_id = b.vendor_id;
	o.vendor_part_id = b.vendor_part_id;
	o.hw_ver = b.hw_ver;
	o.max_qp = (int)b.max_qp;
	o.max_qp_wr = (int)b.max_qp_wr;
	o.device_cap_flags = b.device_cap_flags;
	o.max_sge = (int)b.max_sge;
	o.max_sge_rd = (int)b.max_sge_rd;
	o.max_cq = (int)b.max_cq;
	o.max_cqe = (int)b.max_cqe;
	o.max_mr = (int)b.max_mr;
	o.max_pd = (int)b.max_pd;
	o.max_qp_rd_atom = (int)b.max_qp_rd_atom;
	o.max_ee_rd_atom = (int)b.max_ee_rd_atom;
	o.max_res_rd_atom = (int)b.max_res_rd_atom;
	o.max_qp_init_rd_atom = (int)b.max_qp_init_rd_atom;
	o.max_ee_init_rd_atom = (int)b.max_ee_init_rd_atom;
	o.atomic_cap = (enum ibv_atomic_cap)b.atomic_cap;
	o.max_ee = (int)b.max_ee;
	o.max_rdd = (int)b.max_rdd;
	o.max_mw = (int)b.max_mw;
	o.max_raw_ipv6_qp = (int)b.max_raw_ipv6_qp;
	o.max_raw_ethy_qp = (int)b.max_raw_ethy_qp;
	o.max_mcast_grp = (int)b.max_mcast_grp;
	o.max_mcast_qp_attach = (int)b.max_mcast_qp_attach;
	o.max_total_mcast_qp_attach = (int)b.max_total_mcast_qp_attach;
	o.max_ah = (int)b.max_ah;
	o.max_fmr = (int)b.max_fmr;
	o.max_map_per_fmr = (int)b.max_map_per_fmr;
	o.max_srq = (int)b.max_srq;
	o.max_srq_wr = (int)b.max_srq_wr;
	o.max_srq_sge = (int)b.max_srq_sge;
	o.max_pkeys = b.max_pkeys;
	o.local_ca_ack_delay = b.local_ca_ack_delay;
	o.phys_port_cnt = b.phys_port_cnt;

	// A field is copied when the caller's struct has room for it and the
	// kernel's answer reaches it.
	auto can_copy = [&](size_t attr_end, size_t resp_end) {
		return attr_size >= attr_end && resp->response_length >= resp_end;
	};
	using A = struct ibv_device_attr_ex;
	using R = struct ib_uverbs_ex_query_device_resp;
	if (can_copy(OV_END(A, odp_caps), OV_END(R, odp_caps))) {
		attr->odp_caps.general_caps = resp->odp_caps.general_caps;
		attr->odp_caps.per_transport_caps.rc_odp_caps = resp->odp_caps.per_transport_caps.rc_odp_caps;
		attr->odp_caps.per_transport_caps.uc_odp_caps = resp->odp_caps.per_transport_caps.uc_odp_caps;
		attr->odp_caps.per_transport_caps.ud_odp_caps = resp->odp_caps.per_transport_caps.ud_odp_caps;
	}
	if (can_copy(OV_END(A, completion_timestamp_mask), OV_END(R, timestamp_mask)))
		attr->completion_timestamp_mask = resp->timestamp_mask;
	if (can_copy(OV_END(A, hca_core_clock), OV_END(R, hca_core_clock)))
		attr->hca_core_clock = resp->hca_core_clock;
	if (can_copy(OV_END(A, device_cap_flags_ex), OV_END(R, device_cap_flags_ex)))
		attr->device_cap_flags_ex = resp->device_cap_flags_ex;
	if (can_copy(OV_END(A, rss_caps), OV_END(R, rss_caps))) {
		attr->rss_caps.supported_qpts = resp->rss_caps.supported_qpts;
		attr->rss_caps.max_rwq_indirection_tables = resp->rss_caps.max_rwq_indirection_tables;
		attr->rss_caps.max_rwq_indirection_table_size = resp->rss_caps.max_rwq_indirection_table_size;
	}
	if (can_copy(OV_END(A, max_wq_type_rq), OV_END(R, max_wq_type_rq)))
		attr->max_wq_type_rq = resp->max_wq_type_rq;
	if (can_copy(OV_END(A, raw_packet_caps), OV_END(R, raw_packet_caps)))
		attr->raw_packet_caps = resp->raw_packet_caps;
	if (can_copy(OV_END(A, tm_caps), OV_END(R, tm_caps))) {
		attr->tm_caps.max_rndv_hdr_size = resp->tm_caps.max_rndv_hdr_size;
		attr->tm_caps.max_num_tags = resp->tm_caps.max_num_tags;
		attr->tm_caps.flags = resp->tm_caps.flags;
		attr->tm_caps.max_ops = resp->tm_caps.max_ops;
		attr->tm_caps.max_sge = resp->tm_caps.max_sge;
	}
	if (can_copy(OV_END(A, cq_mod_caps), OV_END(R, cq_moderation_caps))) {
		attr->cq_mod_caps.max_cq_count = resp->cq_moderation_caps.max_cq_moderation_count;
		attr->cq_mod_caps.max_cq_period = resp->cq_moderation_caps.max_cq_moderation_period;
	}
	if (can_copy(OV_END(A, max_dm_size), OV_END(R, max_dm_size)))
		attr->max_dm_size = resp->max_dm_size;
	if (can_copy(OV_END(A, xrc_odp_caps), OV_END(R, xrc_odp_caps)))
		attr->xrc_odp_caps = resp->xrc_odp_caps;
	if (attr_size >= OV_END(A, phys_port_cnt_ex)) {
		struct verbs_sysfs_dev *sysfs =
			context->device ? verbs_get_device(context->device)->sysfs : nullptr;
		if (sysfs && sysfs->num_ports)
			attr->phys_port_cnt_ex = sysfs->num_ports;
		else
			attr->phys_port_cnt_ex = attr->orig_attr.phys_port_cnt;
	}
	return 0;
}

int cmd_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *port_attr, void *cmd,
		   size_t cmd_size) noexcept
{
	if (!context || !port_attr)
		return fail(EINVAL);
	CommandBuffer cmdb(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT, 2);
	if (!cmdb.ok())
		return fail(ENOMEM);
	struct ib_uverbs_query_port_resp_ex resp_ex = {};
	cmdb.const_in(UVERBS_ATTR_QUERY_PORT_PORT_NUM, port_num);
	cmdb.out_ptr(UVERBS_ATTR_QUERY_PORT_RESP, &resp_ex);

	int ret = 0;
	switch (ioctl_or_legacy(context, OV_FALLBACK_BIT(query_port), cmdb.get(), &ret)) {
	case Fallback::Success:
		copy_port_attr(port_attr, &resp_ex.legacy_resp);
		port_attr->port_cap_flags2 = resp_ex.port_cap_flags2;
#if _OPENVERBS_ABI >= 56
		// Kernels before 6.9 leave the field zero (it was reserved).
		port_attr->active_speed_ex = resp_ex.active_speed_ex;
#endif
		return 0;
	case Fallback::TryWrite: {
		LegacyReq<ib_uverbs_query_port> stack = {};
		if (!cmd || cmd_size < sizeof(stack)) {
			cmd = &stack;
			cmd_size = sizeof(stack);
		}
		auto *core = core_of<ib_uverbs_query_port>(cmd);
		struct ib_uverbs_query_port_resp resp = {};
		core->port_num = port_num;
		std::memset(core->reserved, 0, sizeof(core->reserved));
		core->response = ptr_to_u64(&resp);
		ret = send_write(context, IB_USER_VERBS_CMD_QUERY_PORT, cmd, sizeof(stack), cmd_size, &resp,
				 sizeof(resp), sizeof(resp));
		if (ret)
			return ret;
		copy_port_attr(port_attr, &resp);
		return 0;
	}
	case Fallback::TryWriteEx:
		return fail(EOPNOTSUPP);
	case Fallback::Error:
	default:
		return ret;
	}
}

} // namespace ov::kernel
