// openverbs software RDMA device: shared receive queues and the receive
// rings they share with QPs.
#include "objects.h"

namespace ovsoft {

// ------------------------------------------------------------------ SRQ
RecvGeometry recv_geometry(uint32_t depth, uint32_t max_sge)
{
	uint32_t cap = ring_capacity(depth);
	// Whole cache lines (the rings start on one): a WQE's sequence number
	// and its scatter list are written and read as one line or a few,
	// none shared with the next WQE.
	uint32_t cell = (8 + sizeof(RecvWqe) + max_sge * sizeof(struct ibv_sge) + 63) & ~63u;
	return RecvGeometry{cap, cell};
}

// Sets up a receive ring (device lock held): in `app` when the allocator
// gave it, else cut from the arena (*off). ENOMEM when the arena is full.
int recv_ring_alloc(Segment *seg, const RecvGeometry &g, const QueueBuf &app,
		    uint64_t *off, RingHeader **ring, RingLoc *loc)
{
	uint64_t o = 0;
	uint8_t *at = static_cast<uint8_t *>(app.ptr);
	if (!at) {
		o = arena_alloc(seg, g.bytes(), seg->my_proc);
		if (!o)
			return ENOMEM;
		at = seg->base + o;
	}
	auto *r = reinterpret_cast<RingHeader *>(at);
	ring_init(r, g.cell, g.cap, seg->my_proc);
	*off = o;
	*ring = r;
	*loc = o ? Segment::arena_loc(o) : ring_buf_loc(app);
	return 0;
}

static struct ibv_srq *srq_create(SoftContext *ctx, struct ibv_pd *pd,
				  struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq_attr &a = attr->attr;
	if (!a.max_wr || a.max_wr > kMaxSrqWr || a.max_sge > kMaxSge || a.srq_limit > a.max_wr) {
		errno = EINVAL;
		return nullptr;
	}
	bool typed = attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE;
	bool xrc = typed && attr->srq_type == IBV_SRQT_XRC;
	bool tm = typed && attr->srq_type == IBV_SRQT_TM;
	// A RoCE device's wire transport does not match tags (tm_caps empty).
	if ((typed && attr->srq_type != IBV_SRQT_BASIC && !xrc && !tm) || (tm && ctx->roce)) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	bool has_cq = (attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) && attr->cq;
	if (!pd || (xrc && (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd || !has_cq)))
	{
		errno = EINVAL;
		return nullptr;
	}
	// A tag-matching SRQ (ibv_create_srq_ex(3)): its CQ receives the list
	// operations' and the receives' completions; tm_cap within tm_caps.
	if (tm && (!has_cq || !(attr->comp_mask & IBV_SRQ_INIT_ATTR_TM) ||
		   !attr->tm_cap.max_num_tags || attr->tm_cap.max_num_tags > kTmMaxTags ||
		   !attr->tm_cap.max_ops || attr->tm_cap.max_ops > kTmMaxOps)) {
		errno = EINVAL;
		return nullptr;
	}
	// Every object named must belong to this context (an XRCD, PD or CQ of
	// another device or context is EINVAL, as for a kernel device).
	struct ibv_context *self = &ctx->vctx.context;
	if (pd->context != self || (xrc && attr->xrcd->context != self) ||
	    ((xrc || tm) && attr->cq->context != self)) {
		errno = EINVAL;
		return nullptr;
	}
	auto *srq = static_cast<SoftSrq *>(calloc(1, sizeof(SoftSrq)));
	if (!srq) {
		errno = ENOMEM;
		return nullptr;
	}
	Segment *seg = ctx->seg;
	uint32_t max_sge = a.max_sge ? a.max_sge : 1;
	RecvGeometry geo = recv_geometry(a.max_wr, max_sge);
	int rc = ring_buf_alloc(allocator_of(pd), OPENVERBS_SOFT_RES_SRQ_RING, geo.bytes(),
				&srq->ring_buf);
	if (rc) {
		free(srq);
		errno = rc;
		return nullptr;
	}
	shm_lock(&seg->hdr->lock);
	SegmentHeader *hdr = seg->hdr;
	int slot = extent_take(hdr->extents.srqs, kMaxSrqs,
			       [&](uint32_t i) { return hdr->srqs[i].slot.load() == SLOT_FREE; });
	uint32_t cap = geo.cap;
	RingLoc loc{};
	uint64_t tm_off = 0;
	if (tm && slot >= 0) {
		uint32_t n = attr->tm_cap.max_num_tags;
		tm_off = arena_alloc(seg, sizeof(TmList) + uint64_t(n) * sizeof(TmTag), seg->my_proc);
		if (tm_off) {
			auto *tl = reinterpret_cast<TmList *>(seg->base + tm_off);
			memset(tl, 0, sizeof(TmList) + uint64_t(n) * sizeof(TmTag));
			shm_mutex_init(&tl->lock);
			tl->max_tags = n;
			tl->magic = kTmListMagic;
		}
	}
	if (slot < 0 || (tm && !tm_off) ||
	    recv_ring_alloc(seg, geo, srq->ring_buf, &srq->ring_off, &srq->ring, &loc)) {
		if (tm_off)
			arena_free(seg, tm_off);
		shm_unlock(&seg->hdr->lock);
		queue_buf_free(&srq->ring_buf);
		free(srq);
		errno = ENOMEM;
		return nullptr;
	}
	SrqEntry &e = seg->hdr->srqs[slot];
	e.generation++;
	e.owner = seg->my_proc;
	e.owner_pid = self_pid();
	enum ibv_srq_type type = xrc ? IBV_SRQT_XRC : tm ? IBV_SRQT_TM : IBV_SRQT_BASIC;
	e.srq_type = type;
	e.pd_id = to_spd(pd)->id;
	e.xrcd = xrc ? reinterpret_cast<SoftXrcd *>(attr->xrcd)->slot + 1 : 0;
	e.cq = xrc || tm ? to_scq(attr->cq)->slot + 1 : 0;
	e.tm_off = tm_off;
	e.ring = loc;
	e.user_handle = uintptr_t(&srq->vsrq.srq);
	e.limit.store(a.srq_limit);
	e.async_fd = ctx->vctx.context.async_fd;
	e.async_ino = ctx->async_ino;
	e.error.store(0);
	e.slot.store(SLOT_LIVE, std::memory_order_release);
	shm_unlock(&seg->hdr->lock);
	srq->slot = slot;
	srq->max_wr = cap;
	srq->max_sge = max_sge;
	pthread_mutex_init(&srq->post_lock, nullptr);
	struct ibv_srq &s = srq->vsrq.srq;
	s.context = &ctx->vctx.context;
	s.srq_context = attr->srq_context;
	s.pd = pd;
	srq->pd = to_spd(pd);
	srq->pd->users.fetch_add(1);
	s.handle = slot;
	s.events_completed = 0;
	pthread_mutex_init(&s.mutex, nullptr);
	pthread_cond_init(&s.cond, nullptr);
	srq->vsrq.srq_type = type;
	srq->vsrq.srq_num = slot + kSrqnBase;
	srq->tm_off = tm_off;
	srq->tm_max_ops = tm ? attr->tm_cap.max_ops : 0;
	if (xrc || tm) {
		srq->vsrq.cq = attr->cq;
		srq->cq = to_scq(attr->cq);
		srq->cq->users.fetch_add(1);
	}
	if (xrc) {
		srq->vsrq.xrcd = reinterpret_cast<struct verbs_xrcd *>(attr->xrcd);
		reinterpret_cast<SoftXrcd *>(attr->xrcd)->users.fetch_add(1);
	}
	a.max_wr = cap;
	a.max_sge = max_sge;
	return &s;
}

struct ibv_srq *soft_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	if (!pd || !attr) {
		errno = EINVAL;
		return nullptr;
	}
	struct ibv_srq_init_attr_ex ex = {};
	ex.srq_context = attr->srq_context;
	ex.attr = attr->attr;
	ex.comp_mask = IBV_SRQ_INIT_ATTR_PD;
	ex.pd = pd;
	struct ibv_srq *s = srq_create(to_sctx(pd->context), pd, &ex);
	if (s)
		attr->attr = ex.attr;
	return s;
}

struct ibv_srq *soft_create_srq_ex(struct ibv_context *context,
				   struct ibv_srq_init_attr_ex *attr)
{
	if (!attr || !(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ||
	    (attr->comp_mask & ~uint32_t(IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
					 IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |
					 IBV_SRQ_INIT_ATTR_TM))) {
		errno = EINVAL;
		return nullptr;
	}
	return srq_create(to_sctx(context), attr->pd, attr);
}

struct SrqOldRing {
	uint64_t off;  // arena offset, 0 when buf holds it
	QueueBuf buf;
	SrqOldRing *next;
};

// Resizes the SRQ's ring to hold max_wr requests (rounded up to a power of
// two). EINVAL when more requests are queued than fit, ENOMEM when no
// memory is left. Requesters of other processes keep consuming meanwhile:
// the new ring is published first, then what is queued moves over, taken
// from the old ring one request at a time (a requester that still looks at
// the old ring takes a request there instead, never one twice). The old
// ring stays allocated until the SRQ is destroyed.
static int srq_resize(SoftSrq *srq, uint32_t max_wr)
{
	RecvGeometry geo = recv_geometry(max_wr, srq->max_sge);
	auto *old = static_cast<SrqOldRing *>(calloc(1, sizeof(SrqOldRing)));
	if (!old)
		return ENOMEM;
	QueueBuf nb;
	int rc = ring_buf_alloc(allocator_of(srq->vsrq.srq.pd), OPENVERBS_SOFT_RES_SRQ_RING,
				geo.bytes(), &nb);
	if (rc) {
		free(old);
		return rc;
	}
	pthread_mutex_lock(&srq->post_lock);
	if (ring_count(srq->ring) > geo.cap || geo.cell != srq->ring->cell_size) {
		pthread_mutex_unlock(&srq->post_lock);
		queue_buf_free(&nb);
		free(old);
		return EINVAL;
	}
	Segment *seg = to_sctx(srq->vsrq.srq.context)->seg;
	shm_lock(&seg->hdr->lock);
	uint64_t off = 0;
	RingHeader *ring = nullptr;
	RingLoc loc{};
	if (recv_ring_alloc(seg, geo, nb, &off, &ring, &loc)) {
		shm_unlock(&seg->hdr->lock);
		pthread_mutex_unlock(&srq->post_lock);
		queue_buf_free(&nb);
		free(old);
		return ENOMEM;
	}
	seg->hdr->srqs[srq->slot].ring = loc;
	shm_unlock(&seg->hdr->lock);
	alignas(8) uint8_t cell[sizeof(RecvWqe) + kMaxSge * sizeof(struct ibv_sge)];
	size_t bytes = geo.cell - 8;
	while (ring_pop(srq->ring, cell, bytes)) {
		uint64_t pos;
		void *dst = ring_claim(ring, &pos);
		if (!dst)
			break; // cannot happen: the new ring holds all that was queued
		memcpy(dst, cell, bytes);
		ring_publish(ring, dst, pos);
	}
	*old = SrqOldRing{srq->ring_off, srq->ring_buf, srq->old_rings};
	srq->old_rings = old;
	srq->ring = ring;
	srq->ring_off = off;
	srq->ring_buf = nb;
	srq->max_wr = geo.cap;
	pthread_mutex_unlock(&srq->post_lock);
	return 0;
}

int soft_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	SoftSrq *srq = to_ssrq(ibsrq);
	if (!attr || (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
		return EINVAL;
	if (mask & IBV_SRQ_MAX_WR) {
		// The armed limit (or the one set by this call) must stay below
		// the new size.
		Segment *seg = to_sctx(ibsrq->context)->seg;
		uint32_t lim = (mask & IBV_SRQ_LIMIT) ? attr->srq_limit
						      : seg->hdr->srqs[srq->slot].limit.load();
		if (!attr->max_wr || attr->max_wr > kMaxSrqWr || lim > attr->max_wr)
			return EINVAL;
		if (int rc = srq_resize(srq, attr->max_wr))
			return rc;
	}
	if (mask & IBV_SRQ_LIMIT) {
		if (attr->srq_limit > srq->max_wr)
			return EINVAL;
		Segment *seg = to_sctx(ibsrq->context)->seg;
		seg->hdr->srqs[srq->slot].limit.store(attr->srq_limit);
	}
	return 0;
}

int soft_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	SoftSrq *srq = to_ssrq(ibsrq);
	if (!attr)
		return EINVAL;
	Segment *seg = to_sctx(ibsrq->context)->seg;
	attr->max_wr = srq->max_wr;
	attr->max_sge = srq->max_sge;
	attr->srq_limit = seg->hdr->srqs[srq->slot].limit.load();
	return 0;
}

int soft_destroy_srq(struct ibv_srq *ibsrq)
{
	SoftSrq *srq = to_ssrq(ibsrq);
	if (srq->users.load())
		return EBUSY;
	Segment *seg = to_sctx(ibsrq->context)->seg;
	shm_lock(&seg->hdr->lock);
	SrqEntry &e = seg->hdr->srqs[srq->slot];
	e.error.store(1);
	e.generation++;
	e.slot.store(SLOT_FREE, std::memory_order_release);
	extent_release(seg->hdr->extents.srqs, srq->slot);
	if (srq->ring_off)
		arena_free(seg, srq->ring_off);
	if (srq->tm_off)
		arena_free(seg, srq->tm_off);
	for (SrqOldRing *o = srq->old_rings; o; o = o->next)
		if (o->off)
			arena_free(seg, o->off);
	shm_unlock(&seg->hdr->lock);
	queue_buf_free(&srq->ring_buf);
	while (SrqOldRing *o = srq->old_rings) {
		srq->old_rings = o->next;
		queue_buf_free(&o->buf);
		free(o);
	}
	if (srq->cq)
		srq->cq->users.fetch_sub(1);
	if (srq->pd)
		srq->pd->users.fetch_sub(1);
	if (srq->vsrq.srq_type == IBV_SRQT_XRC && srq->vsrq.xrcd)
		reinterpret_cast<SoftXrcd *>(srq->vsrq.xrcd)->users.fetch_sub(1);
	pthread_mutex_destroy(&srq->post_lock);
	free(srq);
	return 0;
}

int post_recv_ring(RingHeader *ring, uint32_t max_sge, struct ibv_recv_wr *wr,
		   struct ibv_recv_wr **bad)
{
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || uint32_t(wr->num_sge) > max_sge || (wr->num_sge && !wr->sg_list)) {
			*bad = wr;
			return EINVAL;
		}
		uint64_t pos;
		void *cell = ring_claim(ring, &pos);
		if (!cell) {
			*bad = wr;
			return ENOMEM;
		}
		auto *wqe = static_cast<RecvWqe *>(cell);
		wqe->wr_id = wr->wr_id;
		wqe->num_sge = wr->num_sge;
		if (wr->num_sge)
			memcpy(wqe->sge, wr->sg_list, wr->num_sge * sizeof(struct ibv_sge));
		ring_publish(ring, cell, pos);
	}
	return 0;
}

int soft_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad)
{
	SoftSrq *srq = to_ssrq(ibsrq);
	// Against a concurrent resize (which moves the queue to a new ring).
	pthread_mutex_lock(&srq->post_lock);
	int rc = post_recv_ring(srq->ring, srq->max_sge, wr, bad);
	pthread_mutex_unlock(&srq->post_lock);
	return rc;
}

int soft_get_srq_num(struct ibv_srq *ibsrq, uint32_t *num)
{
	SoftSrq *srq = to_ssrq(ibsrq);
	if (!num || srq->vsrq.srq_type != IBV_SRQT_XRC)
		return EINVAL;
	*num = srq->vsrq.srq_num;
	return 0;
}

} // namespace ovsoft

namespace ovsoft {

// ------------------------------------------------------------------ tag matching

// ibv_post_srq_ops(3) on a TM SRQ: each operation is carried out before the
// call returns, so no more than one is ever outstanding (tm_cap.max_ops is
// never exceeded). Completions go to the SRQ's CQ when the operation is
// IBV_OPS_SIGNALED or fails.
//  IBV_WR_TAG_ADD: posts a tag entry (tag, mask, recv_wr_id, up to
//    tm_caps.max_sge scatter entries) and returns its handle in
//    op->tm.handle. The list is in sync when the unexpected messages the
//    application reported handled (tm.unexpected_cnt of the last operation
//    flagged IBV_OPS_TM_SYNC) are all the device found: otherwise a message
//    the application has not seen yet might be one the new tag should have
//    matched, so the tag is not posted: IBV_WC_TM_ERR with
//    IBV_WC_TM_SYNC_REQ (the completion is generated signaled or not).
//  IBV_WR_TAG_DEL: removes the entry of tm.handle; IBV_WC_TM_ERR when no
//    tag is posted under that handle (a message consumed it).
//  IBV_WR_TAG_SYNC: only reports the count; its completion carries
//    IBV_WC_TM_SYNC_REQ while the counts still differ.
// Errors (returned, *bad names the operation, nothing after it is done):
// EINVAL for an SRQ that is not TM, an unknown opcode or flag, a scatter
// list longer than tm_caps.max_sge, a handle past max_num_tags; ENOMEM when
// all max_num_tags entries are posted; EIO when the device lost the list.
int soft_post_srq_ops(struct ibv_srq *ibsrq, struct ibv_ops_wr *op, struct ibv_ops_wr **bad)
{
	SoftSrq *srq = to_ssrq(ibsrq);
	struct ibv_ops_wr *dummy;
	if (!bad)
		bad = &dummy;
	if (srq->vsrq.srq_type != IBV_SRQT_TM) {
		*bad = op;
		return EINVAL;
	}
	Segment *seg = to_sctx(ibsrq->context)->seg;
	SrqEntry &e = seg->hdr->srqs[srq->slot];
	TmList *tl = tm_list(seg, e);
	if (!tl) {
		*bad = op;
		return EIO;
	}
	for (; op; op = op->next) {
		// The opcode as the integer the caller stored (any value may come).
		uint32_t opc;
		memcpy(&opc, &op->opcode, sizeof(opc));
		if ((opc != IBV_WR_TAG_ADD && opc != IBV_WR_TAG_DEL && opc != IBV_WR_TAG_SYNC) ||
		    (op->flags & ~int(IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC)) ||
		    (opc == IBV_WR_TAG_ADD &&
		     (op->tm.add.num_sge < 0 || uint32_t(op->tm.add.num_sge) > kTmMaxSge ||
		      (op->tm.add.num_sge && !op->tm.add.sg_list))) ||
		    (opc == IBV_WR_TAG_DEL && op->tm.handle >= tl->max_tags)) {
			*bad = op;
			return EINVAL;
		}
		struct ibv_wc wc = {};
		wc.wr_id = op->wr_id;
		wc.status = IBV_WC_SUCCESS;
		shm_lock(&tl->lock);
		if (op->flags & IBV_OPS_TM_SYNC)
			tl->sw_count = op->tm.unexpected_cnt;
		bool synced = tl->sw_count == tl->unexpected;
		switch (opc) {
		case IBV_WR_TAG_ADD: {
			uint32_t h = 0;
			while (h < tl->max_tags && tl->tags[h].state != TAG_FREE)
				h++;
			if (h == tl->max_tags) {
				shm_unlock(&tl->lock);
				*bad = op;
				return ENOMEM;
			}
			op->tm.handle = h;
			wc.opcode = IBV_WC_TM_ADD;
			if (!synced) {
				wc.status = IBV_WC_TM_ERR;
				wc.wc_flags = IBV_WC_TM_SYNC_REQ;
				break;
			}
			TmTag &t = tl->tags[h];
			t.num_sge = uint32_t(op->tm.add.num_sge);
			if (t.num_sge)
				memcpy(t.sge, op->tm.add.sg_list, t.num_sge * sizeof(struct ibv_sge));
			t.tag = op->tm.add.tag;
			t.mask = op->tm.add.mask;
			t.wr_id = op->tm.add.recv_wr_id;
			t.order = tl->next_order++;
			t.state = TAG_POSTED;
			break;
		}
		case IBV_WR_TAG_DEL: {
			wc.opcode = IBV_WC_TM_DEL;
			TmTag &t = tl->tags[op->tm.handle];
			if (t.state == TAG_POSTED)
				t.state = TAG_FREE;
			else
				wc.status = IBV_WC_TM_ERR;
			break;
		}
		default:
			wc.opcode = IBV_WC_TM_SYNC;
			if (!synced)
				wc.wc_flags = IBV_WC_TM_SYNC_REQ;
			break;
		}
		shm_unlock(&tl->lock);
		if ((op->flags & IBV_OPS_SIGNALED) || wc.status != IBV_WC_SUCCESS)
			cq_push(seg, srq->cq->slot, wc, false);
	}
	return 0;
}

} // namespace ovsoft
