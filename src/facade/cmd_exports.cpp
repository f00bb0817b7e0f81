// Exported ibv_cmd_* of the private provider ABI (IBVERBS_PRIVATE_34, or _64) and the
// ioctl entry points providers call directly. Each is a thin extern "C"
// forwarder into the kernel transport (src/kernel/commands.h documents the
// behaviour); prototypes come from include/infiniband/driver.h and
// cmd_ioctl.h, return conventions from rdma-core 44 (0 or an errno value;
// ibv_cmd_poll_cq returns a count or -1). The headers declare them without
// noexcept, so the definitions cannot add it; every callee is noexcept.
#include "facade/export.h"
#include "kernel/commands.h"

OV_EXPORT int execute_ioctl(struct ibv_context *context, struct ibv_command_buffer *cmd)
{
	return ov::kernel::run_ioctl(context, cmd);
}

OV_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, struct ibv_command_buffer *link)
{
	return ov::kernel::final_num_attrs(num_attrs, link);
}

#if _OPENVERBS_ABI >= 64
// rdma-core 64: same symbol, an fd array (may be NULL) before resp.
OV_EXPORT int ibv_cmd_get_context(struct verbs_context *context, struct ibv_get_context *cmd, size_t cmd_size, struct ibv_fd_arr *fd_arr, struct ib_uverbs_get_context_resp *resp, size_t resp_size)
{
	return ov::kernel::cmd_get_context(context, cmd, cmd_size, resp, resp_size, fd_arr ? fd_arr->arr : nullptr,
					   fd_arr ? fd_arr->count : 0);
}

OV_EXPORT int ibv_cmd_query_port_speed(struct ibv_context *context, uint32_t port_num, uint64_t *speed)
{
	return ov::kernel::cmd_query_port_speed(context, port_num, speed);
}
#else
OV_EXPORT int ibv_cmd_get_context(struct verbs_context *context, struct ibv_get_context *cmd, size_t cmd_size, struct ib_uverbs_get_context_resp *resp, size_t resp_size)
{
	return ov::kernel::cmd_get_context(context, cmd, cmd_size, resp, resp_size);
}
#endif

OV_EXPORT int ibv_cmd_query_context(struct ibv_context *ctx, struct ibv_command_buffer *driver)
{
	return ov::kernel::cmd_query_context(ctx, driver);
}

OV_EXPORT int ibv_cmd_query_device_any(struct ibv_context *context, const struct ibv_query_device_ex_input *input, struct ibv_device_attr_ex *attr, size_t attr_size, struct ib_uverbs_ex_query_device_resp *resp, size_t *resp_size)
{
	return ov::kernel::cmd_query_device_any(context, input, attr, attr_size, resp, resp_size);
}

OV_EXPORT int ibv_cmd_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *port_attr, struct ibv_query_port *cmd, size_t cmd_size)
{
	return ov::kernel::cmd_query_port(context, port_num, port_attr, cmd, cmd_size);
}

OV_EXPORT int ibv_cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd, struct ibv_alloc_pd *cmd, size_t cmd_size, struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size)
{
	return ov::kernel::cmd_alloc_pd(context, pd, cmd, cmd_size, resp, resp_size);
}

OV_EXPORT int ibv_cmd_dealloc_pd(struct ibv_pd *pd)
{
	return ov::kernel::cmd_dealloc_pd(pd);
}

OV_EXPORT int ibv_cmd_open_xrcd(struct ibv_context *context, struct verbs_xrcd *xrcd, int vxrcd_size, struct ibv_xrcd_init_attr *attr, struct ibv_open_xrcd *cmd, size_t cmd_size, struct ib_uverbs_open_xrcd_resp *resp, size_t resp_size)
{
	return ov::kernel::cmd_open_xrcd(context, xrcd, vxrcd_size, attr, cmd, cmd_size, resp, resp_size);
}

OV_EXPORT int ibv_cmd_close_xrcd(struct verbs_xrcd *xrcd)
{
	return ov::kernel::cmd_close_xrcd(xrcd);
}

OV_EXPORT int ibv_cmd_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va, int access, struct verbs_mr *vmr, struct ibv_reg_mr *cmd, size_t cmd_size, struct ib_uverbs_reg_mr_resp *resp, size_t resp_size)
{
	return ov::kernel::cmd_reg_mr(pd, addr, length, hca_va, access, vmr, cmd, cmd_size, resp, resp_size);
}

OV_EXPORT int ibv_cmd_rereg_mr(struct verbs_mr *vmr, uint32_t flags, void *addr, size_t length, uint64_t hca_va, int access, struct ibv_pd *pd, struct ibv_rereg_mr *cmd, size_t cmd_sz, struct ib_uverbs_rereg_mr_resp *resp, size_t resp_sz)
{
	return ov::kernel::cmd_rereg_mr(vmr, flags, addr, length, hca_va, access, pd, cmd, cmd_sz, resp, resp_sz);
}

OV_EXPORT int ibv_cmd_dereg_mr(struct verbs_mr *vmr)
{
	return ov::kernel::cmd_dereg_mr(vmr);
}

OV_EXPORT int ibv_cmd_query_mr(struct ibv_pd *pd, struct verbs_mr *vmr, uint32_t mr_handle)
{
	return ov::kernel::cmd_query_mr(pd, vmr, mr_handle);
}

OV_EXPORT int ibv_cmd_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge)
{
	return ov::kernel::cmd_advise_mr(pd, (enum ib_uverbs_advise_mr_advice)advice, flags, sg_list, num_sge);
}

#if _OPENVERBS_ABI >= 56
// rdma-core 56: same symbol, an eighth argument with the provider's own
// attributes (driver.h).
OV_EXPORT int ibv_cmd_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access, struct verbs_mr *vmr, struct ibv_command_buffer *driver)
{
	return ov::kernel::cmd_reg_dmabuf_mr(pd, offset, length, iova, fd, access, vmr, driver);
}
#else
OV_EXPORT int ibv_cmd_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access, struct verbs_mr *vmr)
{
	return ov::kernel::cmd_reg_dmabuf_mr(pd, offset, length, iova, fd, access, vmr, nullptr);
}
#endif

OV_EXPORT int ibv_cmd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type, struct ibv_mw *mw, struct ibv_alloc_mw *cmd, size_t cmd_size, struct ib_uverbs_alloc_mw_resp *resp, size_t resp_size)
{
	return ov::kernel::cmd_alloc_mw(pd, type, mw, cmd, cmd_size, resp, resp_size);
}

OV_EXPORT int ibv_cmd_dealloc_mw(struct ibv_mw *mw)
{
	return ov::kernel::cmd_dealloc_mw(mw);
}

OV_EXPORT int ibv_cmd_create_cq(struct ibv_context *context, int cqe, struct ibv_comp_channel *channel, int comp_vector, struct ibv_cq *cq, struct ibv_create_cq *cmd, size_t cmd_size, struct ib_uverbs_create_cq_resp *resp, size_t resp_size)
{
	return ov::kernel::cmd_create_cq(context, cqe, channel, comp_vector, cq, cmd, cmd_size, resp, resp_size);
}

#if _OPENVERBS_ABI >= 64
// rdma-core 64: same symbols, the provider's CQ ring (prov_attr) third.
OV_EXPORT int ibv_cmd_create_cq_ex(struct ibv_context *context, const struct ibv_cq_init_attr_ex *cq_attr, struct verbs_create_cq_prov_attr *prov_attr, struct verbs_cq *cq, struct ibv_create_cq_ex *cmd, size_t cmd_size, struct ib_uverbs_ex_create_cq_resp *resp, size_t resp_size, uint32_t cmd_flags)
{
	return ov::kernel::cmd_create_cq_ex(context, cq_attr, cq, cmd, cmd_size, resp, resp_size, cmd_flags, nullptr,
					    prov_attr);
}

OV_EXPORT int ibv_cmd_create_cq_ex2(struct ibv_context *context, const struct ibv_cq_init_attr_ex *cq_attr, struct verbs_create_cq_prov_attr *prov_attr, struct verbs_cq *cq, struct ibv_create_cq_ex *cmd, size_t cmd_size, struct ib_uverbs_ex_create_cq_resp *resp, size_t resp_size, uint32_t cmd_flags, struct ibv_command_buffer *driver)
{
	return ov::kernel::cmd_create_cq_ex(context, cq_attr, cq, cmd, cmd_size, resp, resp_size, cmd_flags, driver,
					    prov_attr);
}
#else
OV_EXPORT int ibv_cmd_create_cq_ex(struct ibv_context *context, const struct ibv_cq_init_attr_ex *cq_attr, struct verbs_cq *cq, struct ibv_create_cq_ex *cmd, size_t cmd_size, struct ib_uverbs_ex_create_cq_resp *resp, size_t resp_size, uint32_t cmd_flags)
{
	return ov::kernel::cmd_create_cq_ex(context, cq_attr, cq, cmd, cmd_size, resp, resp_size, cmd_flags, nullptr);
}
#endif

#if _OPENVERBS_ABI >= 56 && _OPENVERBS_ABI < 64
OV_EXPORT int ibv_cmd_create_cq_ex2(struct ibv_context *context, const struct ibv_cq_init_attr_ex *cq_attr, struct verbs_cq *cq, struct ibv_create_cq_ex *cmd, size_t cmd_size, struct ib_uverbs_ex_create_cq_resp *resp, size_t resp_size, uint32_t cmd_flags, struct ibv_command_buffer *driver)
{
	return ov::kernel::cmd_create_cq_ex(context, cq_attr, cq, cmd, cmd_size, resp, resp_size, cmd_flags, driver);
}
#endif

OV_EXPORT int ibv_cmd_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc)
{
	return ov::kernel::cmd_poll_cq(cq, ne, wc);
}

OV_EXPORT int ibv_cmd_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	return ov::kernel::cmd_req_notify_cq(cq, solicited_only);
}

OV_EXPORT int ibv_cmd_resize_cq(struct ibv_cq *cq, int cqe, struct ibv_resize_cq *cmd, size_t cmd_size, struct ib_uverbs_resize_cq_resp *resp, size_t resp_size)
{
	return ov::kernel::cmd_resize_cq(cq, cqe, cmd, cmd_size, resp, resp_size);
}

OV_EXPORT int ibv_cmd_destroy_cq(struct ibv_cq *cq)
{
	return ov::kernel::cmd_destroy_cq(cq);
}

OV_EXPORT int ibv_cmd_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr, struct ibv_modify_cq *cmd, size_t cmd_size)
{
	return ov::kernel::cmd_modify_cq(cq, attr, cmd, cmd_size);
}

OV_EXPORT int ibv_cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq, struct ibv_srq_init_attr *attr, struct ibv_create_srq *cmd, size_t cmd_size, struct ib_uverbs_create_srq_resp *resp, size_t resp_size)
{
	return ov::kernel::cmd_create_srq(pd, srq, attr, cmd, cmd_size, resp, resp_size);
}

OV_EXPORT int ibv_cmd_create_srq_ex(struct ibv_context *context, struct verbs_srq *srq, struct ibv_srq_init_attr_ex *attr_ex, struct ibv_create_xsrq *cmd, size_t cmd_size, struct ib_uverbs_create_srq_resp *resp, size_t resp_size)
{
	return ov::kernel::cmd_create_srq_ex(context, srq, attr_ex, cmd, cmd_size, resp, resp_size);
}

OV_EXPORT int ibv_cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, int srq_attr_mask, struct ibv_modify_srq *cmd, size_t cmd_size)
{
	return ov::kernel::cmd_modify_srq(srq, srq_attr, srq_attr_mask, cmd, cmd_size);
}

OV_EXPORT int ibv_cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, struct ibv_query_srq *cmd, size_t cmd_size)
{
	return ov::kernel::cmd_query_srq(srq, srq_attr, cmd, cmd_size);
}

OV_EXPORT int ibv_cmd_destroy_srq(struct ibv_srq *srq)
{
	return ov::kernel::cmd_destroy_srq(srq);
}

OV_EXPORT int ibv_cmd_create_qp(struct ibv_pd *pd, struct ibv_qp *qp, struct ibv_qp_init_attr *attr, struct ibv_create_qp *cmd, size_t cmd_size, struct ib_uverbs_create_qp_resp *resp, size_t resp_size)
{
	return ov::kernel::cmd_create_qp(pd, qp, attr, cmd, cmd_size, resp, resp_size);
}

OV_EXPORT int ibv_cmd_create_qp_ex(struct ibv_context *context, struct verbs_qp *qp, struct ibv_qp_init_attr_ex *attr_ex, struct ibv_create_qp *cmd, size_t cmd_size, struct ib_uverbs_create_qp_resp *resp, size_t resp_size)
{
	return ov::kernel::cmd_create_qp_ex(context, qp, attr_ex, cmd, cmd_size, resp, resp_size);
}

#if _OPENVERBS_ABI >= 64
// rdma-core 64: same symbol, the provider's own attributes (driver) last.
OV_EXPORT int ibv_cmd_create_qp_ex2(struct ibv_context *context, struct verbs_qp *qp, struct ibv_qp_init_attr_ex *qp_attr, struct ibv_create_qp_ex *cmd, size_t cmd_size, struct ib_uverbs_ex_create_qp_resp *resp, size_t resp_size, struct ibv_command_buffer *driver)
{
	return ov::kernel::cmd_create_qp_ex2(context, qp, qp_attr, cmd, cmd_size, resp, resp_size, driver);
}
#else
OV_EXPORT int ibv_cmd_create_qp_ex2(struct ibv_context *context, struct verbs_qp *qp, struct ibv_qp_init_attr_ex *qp_attr, struct ibv_create_qp_ex *cmd, size_t cmd_size, struct ib_uverbs_ex_create_qp_resp *resp, size_t resp_size)
{
	return ov::kernel::cmd_create_qp_ex2(context, qp, qp_attr, cmd, cmd_size, resp, resp_size);
}
#endif

OV_EXPORT int ibv_cmd_open_qp(struct ibv_context *context, struct verbs_qp *qp, int vqp_sz, struct ibv_qp_open_attr *attr, struct ibv_open_qp *cmd, size_t cmd_size, struct ib_uverbs_create_qp_resp *resp, size_t resp_size)
{
	return ov::kernel::cmd_open_qp(context, qp, vqp_sz, attr, cmd, cmd_size, resp, resp_size);
}

OV_EXPORT int ibv_cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *qp_attr, int attr_mask, struct ibv_qp_init_attr *qp_init_attr, struct ibv_query_qp *cmd, size_t cmd_size)
{
	return ov::kernel::cmd_query_qp(qp, qp_attr, attr_mask, qp_init_attr, cmd, cmd_size);
}

OV_EXPORT int ibv_cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask, struct ibv_modify_qp *cmd, size_t cmd_size)
{
	return ov::kernel::cmd_modify_qp(qp, attr, attr_mask, cmd, cmd_size);
}

OV_EXPORT int ibv_cmd_modify_qp_ex(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask, struct ibv_modify_qp_ex *cmd, size_t cmd_size, struct ib_uverbs_ex_modify_qp_resp *resp, size_t resp_size)
{
	return ov::kernel::cmd_modify_qp_ex(qp, attr, attr_mask, cmd, cmd_size, resp, resp_size);
}

OV_EXPORT int ibv_cmd_destroy_qp(struct ibv_qp *qp)
{
	return ov::kernel::cmd_destroy_qp(qp);
}

OV_EXPORT int ibv_cmd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	return ov::kernel::cmd_post_send(ibqp, wr, bad_wr);
}

OV_EXPORT int ibv_cmd_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	return ov::kernel::cmd_post_recv(ibqp, wr, bad_wr);
}

OV_EXPORT int ibv_cmd_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	return ov::kernel::cmd_post_srq_recv(srq, wr, bad_wr);
}

OV_EXPORT int ibv_cmd_create_ah(struct ibv_pd *pd, struct ibv_ah *ah, struct ibv_ah_attr *attr, struct ib_uverbs_create_ah_resp *resp, size_t resp_size)
{
	return ov::kernel::cmd_create_ah(pd, ah, attr, resp, resp_size);
}

OV_EXPORT int ibv_cmd_destroy_ah(struct ibv_ah *ah)
{
	return ov::kernel::cmd_destroy_ah(ah);
}

OV_EXPORT int ibv_cmd_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return ov::kernel::cmd_attach_mcast(qp, gid, lid);
}

OV_EXPORT int ibv_cmd_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return ov::kernel::cmd_detach_mcast(qp, gid, lid);
}

OV_EXPORT int ibv_cmd_create_flow(struct ibv_qp *qp, struct ibv_flow *flow_id, struct ibv_flow_attr *flow_attr, void *ucmd, size_t ucmd_size)
{
	return ov::kernel::cmd_create_flow(qp, flow_id, flow_attr, ucmd, ucmd_size);
}

OV_EXPORT int ibv_cmd_destroy_flow(struct ibv_flow *flow_id)
{
	return ov::kernel::cmd_destroy_flow(flow_id);
}

OV_EXPORT int ibv_cmd_create_flow_action_esp(struct ibv_context *ctx, struct ibv_flow_action_esp_attr *attr, struct verbs_flow_action *flow_action, struct ibv_command_buffer *driver)
{
	return ov::kernel::cmd_create_flow_action_esp(ctx, attr, flow_action, driver);
}

OV_EXPORT int ibv_cmd_modify_flow_action_esp(struct verbs_flow_action *flow_action, struct ibv_flow_action_esp_attr *attr, struct ibv_command_buffer *driver)
{
	return ov::kernel::cmd_modify_flow_action_esp(flow_action, attr, driver);
}

OV_EXPORT int ibv_cmd_destroy_flow_action(struct verbs_flow_action *action)
{
	return ov::kernel::cmd_destroy_flow_action(action);
}

OV_EXPORT int ibv_cmd_create_wq(struct ibv_context *context, struct ibv_wq_init_attr *wq_init_attr, struct ibv_wq *wq, struct ibv_create_wq *cmd, size_t cmd_size, struct ib_uverbs_ex_create_wq_resp *resp, size_t resp_size)
{
	return ov::kernel::cmd_create_wq(context, wq_init_attr, wq, cmd, cmd_size, resp, resp_size);
}

OV_EXPORT int ibv_cmd_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *attr, struct ibv_modify_wq *cmd, size_t cmd_size)
{
	return ov::kernel::cmd_modify_wq(wq, attr, cmd, cmd_size);
}

OV_EXPORT int ibv_cmd_destroy_wq(struct ibv_wq *wq)
{
	return ov::kernel::cmd_destroy_wq(wq);
}

OV_EXPORT int ibv_cmd_create_rwq_ind_table(struct ibv_context *context, struct ibv_rwq_ind_table_init_attr *init_attr, struct ibv_rwq_ind_table *rwq_ind_table, struct ib_uverbs_ex_create_rwq_ind_table_resp *resp, size_t resp_size)
{
	return ov::kernel::cmd_create_rwq_ind_table(context, init_attr, rwq_ind_table, resp, resp_size);
}

OV_EXPORT int ibv_cmd_destroy_rwq_ind_table(struct ibv_rwq_ind_table *rwq_ind_table)
{
	return ov::kernel::cmd_destroy_rwq_ind_table(rwq_ind_table);
}

OV_EXPORT int ibv_cmd_create_counters(struct ibv_context *context, struct ibv_counters_init_attr *init_attr, struct verbs_counters *vcounters, struct ibv_command_buffer *link)
{
	return ov::kernel::cmd_create_counters(context, init_attr, vcounters, link);
}

OV_EXPORT int ibv_cmd_destroy_counters(struct verbs_counters *vcounters)
{
	return ov::kernel::cmd_destroy_counters(vcounters);
}

OV_EXPORT int ibv_cmd_read_counters(struct verbs_counters *vcounters, uint64_t *counters_value, uint32_t ncounters, uint32_t flags, struct ibv_command_buffer *link)
{
	return ov::kernel::cmd_read_counters(vcounters, counters_value, ncounters, flags, link);
}

OV_EXPORT int ibv_cmd_alloc_dm(struct ibv_context *ctx, const struct ibv_alloc_dm_attr *dm_attr, struct verbs_dm *dm, struct ibv_command_buffer *link)
{
	return ov::kernel::cmd_alloc_dm(ctx, dm_attr, dm, link);
}

OV_EXPORT int ibv_cmd_free_dm(struct verbs_dm *dm)
{
	return ov::kernel::cmd_free_dm(dm);
}

OV_EXPORT int ibv_cmd_reg_dm_mr(struct ibv_pd *pd, struct verbs_dm *dm, uint64_t offset, size_t length, unsigned int access, struct verbs_mr *vmr, struct ibv_command_buffer *link)
{
	return ov::kernel::cmd_reg_dm_mr(pd, dm, offset, length, access, vmr, link);
}

#if _OPENVERBS_ABI >= 64
// rdma-core 64's new private functions (driver.h documents them).
OV_EXPORT int ibv_cmd_alloc_dmah(struct ibv_context *ctx, struct verbs_dmah *st, struct ibv_dmah_init_attr *attr)
{
	return ov::kernel::cmd_alloc_dmah(ctx, st, attr);
}

OV_EXPORT int ibv_cmd_free_dmah(struct verbs_dmah *dmah)
{
	return ov::kernel::cmd_free_dmah(dmah);
}

OV_EXPORT int ibv_cmd_reg_mr_ex(struct ibv_pd *pd, struct verbs_mr *vmr, struct ibv_mr_init_attr *mr_init_attr)
{
	return ov::kernel::cmd_reg_mr_ex(pd, vmr, mr_init_attr);
}

OV_EXPORT int ibv_cmd_export_dmabuf_fd(struct ibv_context *ctx, off_t pg_off)
{
	return ov::kernel::cmd_export_dmabuf_fd(ctx, pg_off);
}

// The heap handle is the kernel layer's DmabufHeap (opaque to providers).
OV_EXPORT struct ibv_dmabuf_heap *ibv_dmabuf_heap_cc_shared_init(void)
{
	return reinterpret_cast<struct ibv_dmabuf_heap *>(ov::kernel::dmabuf_heap_open("system_cc_shared"));
}

OV_EXPORT void ibv_dmabuf_heap_destroy(struct ibv_dmabuf_heap *heap)
{
	ov::kernel::dmabuf_heap_close(reinterpret_cast<ov::kernel::DmabufHeap *>(heap));
}

OV_EXPORT void *ibv_dmabuf_heap_alloc(struct ibv_dmabuf_heap *heap, size_t size, int *dmabuf_fd)
{
	return ov::kernel::dmabuf_heap_alloc(reinterpret_cast<ov::kernel::DmabufHeap *>(heap), size, dmabuf_fd);
}

OV_EXPORT void ibv_dmabuf_heap_free(void *buf, size_t size, int dmabuf_fd)
{
	ov::kernel::dmabuf_heap_free(buf, size, dmabuf_fd);
}
#endif
