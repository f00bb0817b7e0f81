// QPs and SRQs owned through an id, and the QP transitions the CM drives
// (rdma-core 44 cma.c: rdma_create_qp_ex, ucma_modify_qp_rtr/rts/sqd/err,
// ucma_init_conn_qp, ucma_init_ud_qp, rdma_create_srq_ex). Attributes come
// from the CM (rdma_init_qp_attr) so the peer's QPN and PSN are the CM's.
#include "cm.h"

#include <climits>
#include <cstring>

namespace ov::cm {
namespace {

bool is_ud(ibv_qp_type t) noexcept { return t == IBV_QPT_UD; }

void destroy_cqs(rdma_cm_id &id) noexcept
{
	if (id.qp_type == IBV_QPT_XRC_RECV && id.srq)
		return;
	if (id.recv_cq) {
		ibv_destroy_cq(id.recv_cq);
		if (id.send_cq && id.send_cq != id.recv_cq) {
			ibv_destroy_cq(id.send_cq);
			id.send_cq = nullptr;
		}
		id.recv_cq = nullptr;
	}
	if (id.recv_cq_channel) {
		ibv_destroy_comp_channel(id.recv_cq_channel);
		if (id.send_cq_channel && id.send_cq_channel != id.recv_cq_channel) {
			ibv_destroy_comp_channel(id.send_cq_channel);
			id.send_cq_channel = nullptr;
		}
		id.recv_cq_channel = nullptr;
	}
}

// CQs (each with its completion channel) the id creates for itself.
int create_cqs(rdma_cm_id &id, uint32_t send_size, uint32_t recv_size) noexcept
{
	if (recv_size) {
		id.recv_cq_channel = ibv_create_comp_channel(id.verbs);
		if (!id.recv_cq_channel)
			goto err;
		id.recv_cq = ibv_create_cq(id.verbs, static_cast<int>(recv_size), &id,
					   id.recv_cq_channel, 0);
		if (!id.recv_cq)
			goto err;
	}
	if (send_size) {
		id.send_cq_channel = ibv_create_comp_channel(id.verbs);
		if (!id.send_cq_channel)
			goto err;
		id.send_cq = ibv_create_cq(id.verbs, static_cast<int>(send_size), &id,
					   id.send_cq_channel, 0);
		if (!id.send_cq)
			goto err;
	}
	return 0;
err:
	int err = errno;
	destroy_cqs(id);
	return fail(err ? err : ENOMEM);
}

int find_pkey(Id &id, uint8_t port, __be16 pkey, uint16_t &index) noexcept
{
	for (int i = 0;; i++) {
		__be16 chk;
		if (ibv_query_pkey(id.pub.verbs, port, i, &chk))
			return fail(EINVAL);
		if (chk == pkey) {
			index = static_cast<uint16_t>(i);
			return 0;
		}
	}
}

// ABI 3 kernels cannot answer INIT_QP_ATTR for a fresh id.
int init_conn_qp3(Id &id, ibv_qp *qp) noexcept
{
	ibv_qp_attr a = {};
	if (find_pkey(id, id.pub.port_num, id.pub.route.addr.addr.ibaddr.pkey, a.pkey_index))
		return -1;
	a.port_num = id.pub.port_num;
	a.qp_state = IBV_QPS_INIT;
	a.qp_access_flags = 0;
	return seterr(ibv_modify_qp(qp, &a,
				    IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT));
}

int init_conn_qp(Id &id, ibv_qp *qp) noexcept
{
	if (abi_version() == 3)
		return init_conn_qp3(id, qp);
	ibv_qp_attr a = {};
	int mask = 0;
	a.qp_state = IBV_QPS_INIT;
	if (init_qp_attr(id, a, mask))
		return -1;
	return seterr(ibv_modify_qp(qp, &a, mask));
}

// A UD QP in INIT goes on to RTR, then RTS with send PSN 0.
int ud_rtr_rts(ibv_qp *qp, ibv_qp_attr &a) noexcept
{
	a.qp_state = IBV_QPS_RTR;
	int ret = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	if (ret)
		return fail(ret);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	return seterr(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN));
}

int init_ud_qp3(Id &id, ibv_qp *qp) noexcept
{
	ibv_qp_attr a = {};
	if (find_pkey(id, id.pub.port_num, id.pub.route.addr.addr.ibaddr.pkey, a.pkey_index))
		return -1;
	a.port_num = id.pub.port_num;
	a.qp_state = IBV_QPS_INIT;
	a.qkey = RDMA_UDP_QKEY;
	int ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_QKEY | IBV_QP_PKEY_INDEX | IBV_QP_PORT);
	return ret ? fail(ret) : ud_rtr_rts(qp, a);
}

// A UD QP is ready as soon as it exists: INIT (the CM's Q_Key and port),
// RTR, then RTS with PSN 0.
int init_ud_qp(Id &id, ibv_qp *qp) noexcept
{
	if (abi_version() == 3)
		return init_ud_qp3(id, qp);
	ibv_qp_attr a = {};
	int mask = 0;
	a.qp_state = IBV_QPS_INIT;
	if (init_qp_attr(id, a, mask))
		return -1;
	int ret = ibv_modify_qp(qp, &a, mask);
	return ret ? fail(ret) : ud_rtr_rts(qp, a);
}

} // namespace

int modify_qp_rtr(Id &id, uint8_t resp_res) noexcept
{
	if (!id.pub.qp)
		return 0;
	ibv_qp_attr a = {};
	int mask = 0;
	// Refresh INIT first: the CM may have changed the defaults.
	a.qp_state = IBV_QPS_INIT;
	if (init_qp_attr(id, a, mask))
		return -1;
	int ret = ibv_modify_qp(id.pub.qp, &a, mask);
	if (ret)
		return fail(ret);
	a.qp_state = IBV_QPS_RTR;
	if (init_qp_attr(id, a, mask))
		return -1;
	// Old kernels set RoCE-only mask bits (21..23) for InfiniBand ports.
	if (id.dev && id.pub.port_num >= 1 && id.pub.port_num <= id.dev->port_cnt &&
	    id.dev->link_layer[id.pub.port_num - 1] == IBV_LINK_LAYER_INFINIBAND)
		mask &= static_cast<int>(UINT_MAX ^ 0xe00000);
	if (resp_res != RDMA_MAX_RESP_RES)
		a.max_dest_rd_atomic = resp_res;
	return seterr(ibv_modify_qp(id.pub.qp, &a, mask));
}

int modify_qp_rts(Id &id, uint8_t init_depth) noexcept
{
	if (!id.pub.qp)
		return 0;
	ibv_qp_attr a = {};
	int mask = 0;
	a.qp_state = IBV_QPS_RTS;
	if (init_qp_attr(id, a, mask))
		return -1;
	if (init_depth != RDMA_MAX_INIT_DEPTH)
		a.max_rd_atomic = init_depth;
	return seterr(ibv_modify_qp(id.pub.qp, &a, mask));
}

int modify_qp_sqd(Id &id) noexcept
{
	if (!id.pub.qp)
		return 0;
	ibv_qp_attr a = {};
	a.qp_state = IBV_QPS_SQD;
	return seterr(ibv_modify_qp(id.pub.qp, &a, IBV_QP_STATE));
}

int modify_qp_err(Id &id) noexcept
{
	if (!id.pub.qp)
		return 0;
	ibv_qp_attr a = {};
	a.qp_state = IBV_QPS_ERR;
	return seterr(ibv_modify_qp(id.pub.qp, &a, IBV_QP_STATE));
}

int create_qp_ex(Id &idp, ibv_qp_init_attr_ex &attr) noexcept
{
	rdma_cm_id &id = idp.pub;
	if (id.qp)
		return fail(EINVAL);
	if (!(attr.comp_mask & IBV_QP_INIT_ATTR_PD) || !attr.pd) {
		attr.comp_mask |= IBV_QP_INIT_ATTR_PD;
		attr.pd = id.pd;
	} else if (id.verbs != attr.pd->context) {
		return fail(EINVAL);
	}
	if (!id.verbs || !attr.pd)
		return fail(EINVAL); // no device yet: rdma-core would crash
	if ((id.recv_cq && attr.recv_cq && id.recv_cq != attr.recv_cq) ||
	    (id.send_cq && attr.send_cq && id.send_cq != attr.send_cq))
		return fail(EINVAL);
	if (id.qp_type == IBV_QPT_XRC_RECV &&
	    (!(attr.comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr.xrcd)) {
		attr.xrcd = idp.dev ? get_xrcd(*idp.dev) : nullptr;
		if (!attr.xrcd)
			return -1;
		attr.comp_mask |= IBV_QP_INIT_ATTR_XRCD;
	}
	if (create_cqs(id, attr.send_cq || id.send_cq ? 0 : attr.cap.max_send_wr,
		       attr.recv_cq || id.recv_cq ? 0 : attr.cap.max_recv_wr))
		return -1;
	if (!attr.send_cq)
		attr.send_cq = id.send_cq;
	if (!attr.recv_cq)
		attr.recv_cq = id.recv_cq;
	if (id.srq && !attr.srq)
		attr.srq = id.srq;
	ibv_qp *qp = ibv_create_qp_ex(id.verbs, &attr);
	if (!qp) {
		int err = errno;
		destroy_cqs(id);
		return fail(err);
	}
	int ret = is_ud(id.qp_type) ? init_ud_qp(idp, qp) : init_conn_qp(idp, qp);
	if (ret) {
		int err = errno;
		ibv_destroy_qp(qp);
		destroy_cqs(id);
		return fail(err);
	}
	id.pd = qp->pd;
	id.qp = qp;
	return 0;
}

int create_qp(Id &id, ibv_pd *pd, ibv_qp_init_attr &init) noexcept
{
	ibv_qp_init_attr_ex ex = {};
	memcpy(&ex, &init, sizeof(init));
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd ? pd : id.pub.pd;
	int ret = create_qp_ex(id, ex);
	memcpy(&init, &ex, sizeof(init));
	return ret;
}

void destroy_qp(Id &id) noexcept
{
	if (id.pub.qp)
		ibv_destroy_qp(id.pub.qp);
	id.pub.qp = nullptr;
	destroy_cqs(id.pub);
}

int create_srq_ex(Id &idp, ibv_srq_init_attr_ex &attr) noexcept
{
	rdma_cm_id &id = idp.pub;
	if (!(attr.comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
		return fail(EINVAL);
	if (!(attr.comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr.pd) {
		attr.pd = id.pd;
		attr.comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	if (!id.verbs || !attr.pd)
		return fail(EINVAL);
	if (attr.srq_type == IBV_SRQT_XRC) {
		if (!(attr.comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr.xrcd) {
			attr.xrcd = idp.dev ? get_xrcd(*idp.dev) : nullptr;
			if (!attr.xrcd)
				return -1;
		}
		if (!(attr.comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr.cq) {
			if (create_cqs(id, 0, attr.attr.max_wr))
				return -1;
			attr.cq = id.recv_cq;
		}
		attr.comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	}
	ibv_srq *srq = ibv_create_srq_ex(id.verbs, &attr);
	if (!srq) {
		int err = errno;
		destroy_cqs(id);
		return fail(err);
	}
	if (!id.pd)
		id.pd = attr.pd;
	id.srq = srq;
	return 0;
}

int create_srq(Id &id, ibv_pd *pd, ibv_srq_init_attr &init) noexcept
{
	ibv_srq_init_attr_ex ex = {};
	memcpy(&ex, &init, sizeof(init));
	ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	ex.srq_type = id.pub.qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
	ex.pd = pd;
	int ret = create_srq_ex(id, ex);
	memcpy(&init, &ex, sizeof(init));
	return ret;
}

void destroy_srq(Id &id) noexcept
{
	if (id.pub.srq)
		ibv_destroy_srq(id.pub.srq);
	id.pub.srq = nullptr;
	destroy_cqs(id.pub);
}

} // namespace ov::cm
