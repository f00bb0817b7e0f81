// openverbs software RDMA device: address handles and multicast groups.
#include "objects.h"

namespace ovsoft {

// ------------------------------------------------------------------ AH and multicast

struct ibv_ah *soft_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	// An Ethernet port's address handles need the GRH (RoCE: GIDs are the
	// addresses).
	if (!pd || !attr || attr->port_num != 1 ||
	    (attr->is_global && attr->grh.sgid_index >= kGidPopulated) ||
	    (!attr->is_global && to_sctx(pd->context)->eth)) {
		errno = EINVAL;
		return nullptr;
	}
	auto *ah = static_cast<SoftAh *>(calloc(1, sizeof(SoftAh)));
	if (!ah) {
		errno = ENOMEM;
		return nullptr;
	}
	ah->ah.context = pd->context;
	ah->ah.pd = pd;
	ah->attr = *attr;
	return &ah->ah;
}

int soft_destroy_ah(struct ibv_ah *ah)
{
	free(ah);
	return 0;
}

int soft_attach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	SoftQp *qp = to_sqp(ibqp);
	if (!gid || qp->type != IBV_QPT_UD || gid->raw[0] != 0xff)
		return EINVAL;
	Segment *seg = qp->ctx->seg;
	SegmentHeader *h = seg->hdr;
	shm_lock(&h->lock);
	McastEntry *g = nullptr;
	for (auto &m : h->mcast)
		if (m.in_use && !memcmp(m.gid, gid->raw, 16))
			g = &m;
	if (!g)
		for (auto &m : h->mcast)
			if (!m.in_use) {
				memset(&m, 0, sizeof(m));
				m.in_use = 1;
				m.lid = lid;
				memcpy(m.gid, gid->raw, 16);
				g = &m;
				break;
			}
	int rc = g ? ENOMEM : ENOMEM;
	if (g) {
		for (auto &q : g->qpn)
			if (q == qp->qpn) {
				rc = 0;
				break;
			}
		if (rc)
			for (auto &q : g->qpn)
				if (!q) {
					q = qp->qpn;
					rc = 0;
					break;
				}
	}
	shm_unlock(&h->lock);
	return rc;
}

int soft_detach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	SoftQp *qp = to_sqp(ibqp);
	if (!gid)
		return EINVAL;
	SegmentHeader *h = qp->ctx->seg->hdr;
	int rc = EINVAL;
	shm_lock(&h->lock);
	for (auto &m : h->mcast) {
		if (!m.in_use || memcmp(m.gid, gid->raw, 16))
			continue;
		bool any = false;
		for (auto &q : m.qpn) {
			if (q == qp->qpn) {
				q = 0;
				rc = 0;
			}
			if (q)
				any = true;
		}
		if (!any)
			m.in_use = 0;
	}
	shm_unlock(&h->lock);
	return rc;
}

} // namespace ovsoft
