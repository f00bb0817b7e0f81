// The op tables of a context (facts 1.8): verbs_dummy_ops and verbs_set_ops.
//
// OV_VERBS_OPS(X) lists the slots of struct verbs_context_ops (76; 83 for the
// 64 target, OV_VERBS_OPS_64) each with where verbs_set_ops mirrors it:
//   VCTX   the verbs_context slot of the same name (application inline code)
//   LIVE   the live slot of the same name in ibv_context::ops
//   COMPAT ibv_context::ops._compat_<name> (kept for old binaries)
//   PRIV   nowhere but priv->ops (the library wraps it)
//   FLOW   verbs_context::ibv_<name> (create_flow, destroy_flow)
#pragma once

#include "core/context_private.h"

#include <infiniband/driver.h>

#define OV_VERBS_OPS(X)                                                                    \
	X(advise_mr, VCTX) X(alloc_dm, VCTX) X(alloc_mw, LIVE) X(alloc_null_mr, VCTX)       \
	X(alloc_parent_domain, VCTX) X(alloc_pd, COMPAT) X(alloc_td, VCTX)                  \
	X(async_event, COMPAT) X(attach_counters_point_flow, VCTX) X(attach_mcast, COMPAT)  \
	X(bind_mw, LIVE) X(close_xrcd, VCTX) X(cq_event, COMPAT) X(create_ah, COMPAT)      \
	X(create_counters, VCTX) X(create_cq, COMPAT) X(create_cq_ex, PRIV)                 \
	X(create_flow, FLOW) X(create_flow_action_esp, VCTX) X(create_qp, COMPAT)           \
	X(create_qp_ex, VCTX) X(create_rwq_ind_table, VCTX) X(create_srq, COMPAT)           \
	X(create_srq_ex, VCTX) X(create_wq, VCTX) X(dealloc_mw, LIVE) X(dealloc_pd, COMPAT) \
	X(dealloc_td, VCTX) X(dereg_mr, COMPAT) X(destroy_ah, COMPAT)                       \
	X(destroy_counters, VCTX) X(destroy_cq, COMPAT) X(destroy_flow, FLOW)               \
	X(destroy_flow_action, VCTX) X(destroy_qp, COMPAT) X(destroy_rwq_ind_table, VCTX)   \
	X(destroy_srq, COMPAT) X(destroy_wq, VCTX) X(detach_mcast, COMPAT)                  \
	X(free_context, PRIV) X(free_dm, VCTX) X(get_srq_num, VCTX) X(import_dm, PRIV)      \
	X(import_mr, PRIV) X(import_pd, PRIV) X(modify_cq, VCTX)                            \
	X(modify_flow_action_esp, VCTX) X(modify_qp, COMPAT) X(modify_qp_rate_limit, VCTX)  \
	X(modify_srq, COMPAT) X(modify_wq, VCTX) X(open_qp, VCTX) X(open_xrcd, VCTX)        \
	X(poll_cq, LIVE) X(post_recv, LIVE) X(post_send, LIVE) X(post_srq_ops, VCTX)        \
	X(post_srq_recv, LIVE) X(query_device_ex, VCTX) X(query_ece, PRIV)                  \
	X(query_port, PRIV) X(query_qp, COMPAT) X(query_qp_data_in_order, PRIV)             \
	X(query_rt_values, VCTX) X(query_srq, COMPAT) X(read_counters, VCTX)                \
	X(reg_dm_mr, VCTX) X(reg_dmabuf_mr, PRIV) X(reg_mr, COMPAT) X(req_notify_cq, LIVE)  \
	X(rereg_mr, COMPAT) X(resize_cq, COMPAT) X(set_ece, PRIV) X(unimport_dm, PRIV)      \
	X(unimport_mr, PRIV) X(unimport_pd, PRIV) OV_VERBS_OPS_64(X)

// rdma-core 64's seven slots (the order of the list does not matter).
#if _OPENVERBS_ABI >= 64
#define OV_VERBS_OPS_64(X)                                                                 \
	X(alloc_buf, VCTX) X(alloc_dmah, VCTX) X(dealloc_dmah, VCTX)                        \
	X(dm_export_dmabuf_fd, VCTX) X(free_buf, VCTX) X(query_port_speed, PRIV)            \
	X(reg_mr_ex, VCTX)
#else
#define OV_VERBS_OPS_64(X)
#endif

namespace ov::core {

// The table of EOPNOTSUPP stubs (no NULL slot). Pointer-returning stubs set
// errno = EOPNOTSUPP and return NULL; int stubs return EOPNOTSUPP (post_*
// also set *bad_wr to the first request); void stubs do nothing;
// rereg_mr sets errno and returns IBV_REREG_MR_ERR_INPUT;
// query_qp_data_in_order returns 0 (no in-order guarantee); 64 target:
// dm_export_dmabuf_fd returns -1 with errno EOPNOTSUPP, alloc_buf/free_buf
// and reg_mr_ex are the library's defaults (ov::verbs::default_*).
extern const struct verbs_context_ops dummy_ops;

// verbs_set_ops: copies each non-NULL op into priv->ops and mirrors it into
// the public slot its kind names. Safe to call several times.
void set_ops(struct verbs_context *vctx, const struct verbs_context_ops *ops) noexcept;

// set_ops(vctx, &dummy_ops), the first table of every context, done faster.
void set_dummy_ops(struct verbs_context *vctx) noexcept;

} // namespace ov::core
