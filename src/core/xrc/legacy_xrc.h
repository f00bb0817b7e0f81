// The legacy OFED XRC API (include/infiniband/legacy_xrc.h) as a thin layer
// over XRC domains, XRC SRQs, XRC_RECV QPs and ibv_open_qp.
//
// Per process, a registry remembers the domains opened through the legacy
// API and, per (domain, QP number), the QP handle that represents this
// process's registration: the handle returned by ibv_create_qp_ex for the
// creator, by ibv_open_qp for every later registration. Unregistering
// destroys that handle; the device (kernel or software) destroys the shared
// receive QP when its last handle in any process is gone, which gives the
// legacy rule "destroyed when the last registered process unregisters".
#pragma once

#include <infiniband/legacy_xrc.h>

#include <cstdint>

namespace ov::legacy_xrc {

// Each returns 0 or an errno value (pointer-returning ones: nullptr + errno).
ibv_xrc_domain *open_domain(ibv_context *context, int fd, int oflag);
int close_domain(ibv_xrc_domain *d);
ibv_srq *create_srq(ibv_pd *pd, ibv_xrc_domain *d, ibv_cq *cq,
		    ibv_srq_init_attr *attr);
int create_rcv_qp(ibv_xrc_rcv_qp_init_attr *init_attr, uint32_t *qpn);
int modify_rcv_qp(ibv_xrc_domain *d, uint32_t qpn, ibv_qp_attr *attr, int mask);
int query_rcv_qp(ibv_xrc_domain *d, uint32_t qpn, ibv_qp_attr *attr, int mask,
		 ibv_xrc_rcv_qp_init_attr *init_attr);
int reg_rcv_qp(ibv_xrc_domain *d, uint32_t qpn);
int unreg_rcv_qp(ibv_xrc_domain *d, uint32_t qpn);

// Async-event hooks used by ibv_get_async_event / ibv_ack_async_event: an
// event of a QP that is a legacy registration is rewritten to carry
// IBV_XRC_QP_EVENT_FLAG and the QP number; the ack restores it so that the
// core acknowledges the right QP.
void translate_event(ibv_async_event *event) noexcept;
void restore_event(ibv_async_event *event) noexcept;

} // namespace ov::legacy_xrc
