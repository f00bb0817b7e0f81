// openverbs software RDMA device: memory windows (allocation, ibv_bind_mw).
#include "objects.h"

namespace ovsoft {

struct ibv_mw *soft_alloc_mw(struct ibv_pd *ibpd, enum ibv_mw_type type)
{
	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
		errno = EINVAL;
		return nullptr;
	}
	auto *mw = static_cast<SoftMw *>(calloc(1, sizeof(SoftMw)));
	if (!mw) {
		errno = ENOMEM;
		return nullptr;
	}
	Segment *seg = to_sctx(ibpd->context)->seg;
	shm_lock(&seg->hdr->lock);
	int slot = key_slot_alloc(seg);
	if (slot < 0) {
		shm_unlock(&seg->hdr->lock);
		free(mw);
		errno = ENOMEM;
		return nullptr;
	}
	MrEntry &e = seg->hdr->mrs[slot];
	uint32_t key = make_key(seg, slot);
	uint64_t ws = key_write_new(e, seg, key, to_spd(ibpd)->id, 0, 0, 0, 0, uint32_t(type));
	clear_backing(e);
	e.kind.store(KEY_MW, std::memory_order_relaxed);
	key_write_unlock(e, ws);
	shm_unlock(&seg->hdr->lock);
	mw->slot = slot;
	mw->mw.context = ibpd->context;
	mw->mw.pd = ibpd;
	mw->mw.rkey = key;
	mw->mw.handle = slot;
	mw->mw.type = type;
	return &mw->mw;
}

int soft_dealloc_mw(struct ibv_mw *ibmw)
{
	auto *mw = reinterpret_cast<SoftMw *>(ibmw);
	Segment *seg = to_sctx(ibmw->context)->seg;
	shm_lock(&seg->hdr->lock);
	MrEntry &e = seg->hdr->mrs[mw->slot];
	uint64_t ws = key_write_lock(e);
	if (e.kind.load(std::memory_order_relaxed) == KEY_MW && kld(e.owner) == seg->my_proc) {
		e.kind.store(KEY_FREE, std::memory_order_relaxed);
		key_slot_free(seg, mw->slot);
	}
	key_write_unlock(e, ws);
	shm_unlock(&seg->hdr->lock);
	free(mw);
	return 0;
}

void type1_bind_wr(SoftWr &w, struct ibv_mw *ibmw, const struct ibv_mw_bind *bind)
{
	memset(&w, 0, offsetof(SoftWr, sge));
	w.wr_id = bind->wr_id;
	w.opcode = IBV_WR_BIND_MW;
	w.send_flags = bind->send_flags;
	w.mw = ibmw;
	w.bind_rkey = (ibmw->rkey & 0xffffff00u) | ((ibmw->rkey + 1) & 0xff);
	w.bind = bind->bind_info;
}

int soft_bind_mw(struct ibv_qp *ibqp, struct ibv_mw *ibmw, struct ibv_mw_bind *bind)
{
	if (!ibqp || !ibmw || !bind || ibmw->type != IBV_MW_TYPE_1)
		return EINVAL;
	SoftQp *qp = to_sqp(ibqp);
	if (qp->type == IBV_QPT_UD || !qp->sq)
		return EINVAL;
	if (bind->bind_info.mr && bind->bind_info.mr->pd != ibmw->pd)
		return EINVAL;
	SoftWr *w = static_cast<SoftWr *>(calloc(1, sizeof(SoftWr)));
	if (!w)
		return ENOMEM;
	type1_bind_wr(*w, ibmw, bind);
	uint32_t st = qp->entry->state.load();
	int rc = st == IBV_QPS_RTS || st == IBV_QPS_ERR ? submit_wrs(qp, w, 1) : EINVAL;
	free(w);
	return rc;
}

} // namespace ovsoft
