// openverbs software RDMA device: queue pairs (create, open, destroy,
// modify with the QP state machine, query, post_recv).
#include "objects.h"

namespace ovsoft {

// ------------------------------------------------------------------ QP

static const uint64_t kSendOps =
	IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
	IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
	IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
	IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV |
	IBV_QP_EX_WITH_ATOMIC_WRITE
#if _OPENVERBS_ABI >= 56
	| IBV_QP_EX_WITH_FLUSH
#endif
	;

// The context's QPs: a doubly linked list, so that a destroy among
// thousands of QPs does not walk it.
static void qp_link(SoftContext *ctx, SoftQp *qp)
{
	pthread_mutex_lock(&ctx->lock);
	qp->prev = nullptr;
	qp->next = ctx->qps;
	if (qp->next)
		qp->next->prev = qp;
	ctx->qps = qp;
	// The progress thread sleeps for seconds while the context has no
	// QP: wake it for this one (only then: a wake-up per QP made
	// cmtime's create QP step a third slower in the test bed's guest).
	bool wake = ctx->long_sleep;
	ctx->long_sleep = false;
	pthread_mutex_unlock(&ctx->lock);
	if (wake)
		wake_progress(ctx);
}

static void qp_unlink(SoftContext *ctx, SoftQp *qp)
{
	pthread_mutex_lock(&ctx->lock);
	if (qp->prev || ctx->qps == qp) { // linked (qp_link)
		if (qp->prev)
			qp->prev->next = qp->next;
		else
			ctx->qps = qp->next;
		if (qp->next)
			qp->next->prev = qp->prev;
		qp->next = qp->prev = nullptr;
	}
	pthread_mutex_unlock(&ctx->lock);
}

static void qp_init_public(SoftQp *qp, SoftContext *ctx, struct ibv_qp_init_attr_ex *a)
{
	struct ibv_qp &q = qp->vqp.qp;
	q.context = &ctx->vctx.context;
	q.qp_context = a->qp_context;
	q.pd = (a->comp_mask & IBV_QP_INIT_ATTR_PD) ? a->pd : nullptr;
	q.send_cq = a->send_cq;
	q.recv_cq = a->recv_cq;
	q.srq = a->srq;
	q.handle = qp->slot;
	q.qp_num = qp->qpn;
	q.state = IBV_QPS_RESET;
	q.qp_type = a->qp_type;
	q.events_completed = 0;
	pthread_mutex_init(&q.mutex, nullptr);
	pthread_cond_init(&q.cond, nullptr);
}

// The RSS part of a raw packet QP's creation attributes (rx_hash_conf and
// rwq_ind_tbl, both or neither): 0, or EINVAL / EOPNOTSUPP.
static int rss_check(SoftContext *ctx, const struct ibv_qp_init_attr_ex *a, bool *rss)
{
	const uint32_t both = IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
	uint32_t given = a->comp_mask & both;
	*rss = given == both;
	if (!given)
		return 0;
	if (given != both || !a->rwq_ind_tbl || a->rwq_ind_tbl->context != &ctx->vctx.context)
		return EINVAL;
	const struct ibv_rx_hash_conf &h = a->rx_hash_conf;
	if (h.rx_hash_function != IBV_RX_HASH_FUNC_TOEPLITZ)
		return EOPNOTSUPP;
	if (h.rx_hash_key_len != kRssKeyLen || !h.rx_hash_key)
		return EINVAL;
	const uint64_t fields = IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 | IBV_RX_HASH_SRC_IPV6 |
				IBV_RX_HASH_DST_IPV6 | IBV_RX_HASH_SRC_PORT_TCP |
				IBV_RX_HASH_DST_PORT_TCP | IBV_RX_HASH_SRC_PORT_UDP |
				IBV_RX_HASH_DST_PORT_UDP;
	if (h.rx_hash_fields_mask & ~fields)
		return EOPNOTSUPP;
	// A QP hashes the ports of one transport only.
	bool tcp = h.rx_hash_fields_mask & (IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP);
	bool udp = h.rx_hash_fields_mask & (IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP);
	if (tcp && udp)
		return EINVAL;
	return 0;
}

static struct ibv_qp *qp_create(SoftContext *ctx, struct ibv_qp_init_attr_ex *a, bool wq = false)
{
	enum ibv_qp_type t = a->qp_type;
	if (t != IBV_QPT_RC && t != IBV_QPT_UC && t != IBV_QPT_UD && t != IBV_QPT_XRC_SEND &&
	    t != IBV_QPT_XRC_RECV && !(t == IBV_QPT_RAW_PACKET && ctx->eth)) {
		// Raw packet QPs need an Ethernet port (RDMAV_SOFT_LINK_LAYER).
		errno = t == IBV_QPT_RAW_PACKET || t == IBV_QPT_DRIVER ? EOPNOTSUPP : EINVAL;
		return nullptr;
	}
	uint32_t masks = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
			 IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	if (t == IBV_QPT_RAW_PACKET)
		masks = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
			IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_IND_TABLE |
			IBV_QP_INIT_ATTR_RX_HASH;
	if (a->comp_mask & ~masks) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	bool rss = false;
	if (t == IBV_QPT_RAW_PACKET) {
		if (int e = rss_check(ctx, a, &rss)) {
			errno = e;
			return nullptr;
		}
	}
	if (rss && ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) || a->srq)) {
		errno = EINVAL; // receive only, through its WQs
		return nullptr;
	}
	if ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	if ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (a->send_ops_flags & ~kSendOps)) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	bool has_sq = t != IBV_QPT_XRC_RECV && !wq && !rss;
	bool has_rq = (t == IBV_QPT_RC || t == IBV_QPT_UC || t == IBV_QPT_UD ||
		       (t == IBV_QPT_RAW_PACKET && !rss)) && !a->srq;
	struct ibv_pd *pd = (a->comp_mask & IBV_QP_INIT_ATTR_PD) ? a->pd : nullptr;
	SoftXrcd *xrcd = nullptr;
	if (t == IBV_QPT_XRC_RECV) {
		if (!(a->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !a->xrcd) {
			errno = EINVAL;
			return nullptr;
		}
		xrcd = reinterpret_cast<SoftXrcd *>(a->xrcd);
		if (a->xrcd->context != &ctx->vctx.context) {
			errno = EINVAL;
			return nullptr;
		}
	} else {
		if (!pd || (!rss && (!a->send_cq || (t != IBV_QPT_XRC_SEND && !a->recv_cq)))) {
			errno = EINVAL;
			return nullptr;
		}
		if (pd->context != &ctx->vctx.context ||
		    (a->send_cq && a->send_cq->context != pd->context) ||
		    (a->recv_cq && a->recv_cq->context != pd->context)) {
			errno = EINVAL;
			return nullptr;
		}
	}
	struct ibv_qp_cap &c = a->cap;
	if (t == IBV_QPT_XRC_SEND || t == IBV_QPT_XRC_RECV) {
		c.max_recv_wr = 0;
		c.max_recv_sge = 0;
	}
	if (t == IBV_QPT_XRC_RECV || wq || rss) {
		c.max_send_wr = c.max_send_sge = c.max_inline_data = 0;
	}
	if (rss)
		c.max_recv_wr = c.max_recv_sge = 0;
	if (c.max_send_wr > kMaxQpWr || c.max_recv_wr > kMaxQpWr || c.max_send_sge > kMaxSge ||
	    c.max_recv_sge > kMaxSge || c.max_inline_data > kMaxInline) {
		errno = EINVAL;
		return nullptr;
	}
	// A tag-matching SRQ serves RC QPs only (tm_caps.flags: IBV_TM_CAP_RC).
	if (a->srq && to_ssrq(a->srq)->vsrq.srq_type == IBV_SRQT_TM && t != IBV_QPT_RC) {
		errno = EINVAL;
		return nullptr;
	}
	auto *qp = static_cast<SoftQp *>(calloc(1, sizeof(SoftQp)));
	if (!qp) {
		errno = ENOMEM;
		return nullptr;
	}
	qp->sq_guard = &qp->sq_busy;
	qp->ctx = ctx;
	qp->type = t;
	qp->wq = wq;
	if (rss) {
		qp->rss = true;
		qp->ind = reinterpret_cast<SoftIndTable *>(a->rwq_ind_tbl);
		memcpy(qp->rss_key, a->rx_hash_conf.rx_hash_key, kRssKeyLen);
		qp->rss_fields = a->rx_hash_conf.rx_hash_fields_mask;
	}
	uint32_t recv_sge = c.max_recv_sge ? c.max_recv_sge : 1;
	RecvGeometry geo = recv_geometry(c.max_recv_wr, recv_sge);
	// Buffers from the parent domain's allocator (or our own), in this
	// order: send queue, receive ring, ibv_wr_* staging. Every error path
	// gives back what was obtained.
	SoftPd *apd = t == IBV_QPT_XRC_RECV ? nullptr : allocator_of(pd);
	auto undo = [&](int e) {
		queue_buf_free(&qp->staged_buf);
		queue_buf_free(&qp->rq_buf);
		queue_buf_free(&qp->sq_buf);
		free(qp);
		errno = e;
		return nullptr;
	};
	if (has_sq) {
		qp->sq_depth = c.max_send_wr ? c.max_send_wr : 1;
		int rc = queue_buf_alloc(apd, OPENVERBS_SOFT_RES_QP_SQ,
					 size_t(qp->sq_depth) * sizeof(SoftWr), 64, &qp->sq_buf);
		if (rc)
			return undo(rc);
		qp->sq = static_cast<SoftWr *>(qp->sq_buf.ptr);
	}
	if (has_rq) {
		int rc = ring_buf_alloc(apd, OPENVERBS_SOFT_RES_QP_RQ_RING, geo.bytes(), &qp->rq_buf);
		if (rc)
			return undo(rc);
	}
	if (has_sq && apd && (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
		int rc = queue_buf_alloc(apd, OPENVERBS_SOFT_RES_QP_WR_STAGING,
					 size_t(qp->sq_depth) * sizeof(SoftWr), 64, &qp->staged_buf);
		if (rc)
			return undo(rc);
		if (qp->staged_buf.pd) { // else USE_DEFAULT: qpex.cpp allocates on first use
			qp->staged = static_cast<SoftWr *>(qp->staged_buf.ptr);
			qp->staged_cap = qp->sq_depth;
		} else {
			queue_buf_free(&qp->staged_buf);
		}
	}
	Segment *seg = ctx->seg;
	uint32_t rq_cap = has_rq ? geo.cap : 0;
	RingLoc rq_loc{};
	shm_lock(&seg->hdr->lock);
	SegmentHeader *hdr = seg->hdr;
	int slot = extent_take(hdr->extents.qps, kMaxQps,
			       [&](uint32_t i) { return hdr->qps[i].slot.load() == SLOT_FREE; });
	if (slot < 0 ||
	    (t == IBV_QPT_XRC_RECV && !qp_ref_add(seg->hdr, uint32_t(slot), seg->my_proc)) ||
	    (has_rq && recv_ring_alloc(seg, geo, qp->rq_buf, &qp->rq_off, &qp->rq, &rq_loc))) {
		shm_unlock(&seg->hdr->lock);
		return undo(ENOMEM);
	}
	qp->slot = slot;
	qp->entry = &seg->hdr->qps[slot];
	qp->qpn = slot + kQpnBase;
	QpEntry &e = seg->hdr->qps[slot];
	e.generation++;
	e.state.store(IBV_QPS_RESET);
	e.owner = seg->my_proc;
	e.owner_pid = self_pid();
	e.qp_type = t;
	e.access = 0;
	e.pd_id = pd ? to_spd(pd)->id : 0;
	e.qkey = 0;
	e.dest_qpn = 0;
	e.srq = a->srq ? to_ssrq(a->srq)->slot + 1 : 0;
	e.recv_cq = a->recv_cq ? to_scq(a->recv_cq)->slot + 1 : 0;
	e.xrcd = xrcd ? xrcd->slot + 1 : 0;
	e.min_rnr_timer = 0;
	e.port_num = 1;
	e.sq_sig_all = a->sq_sig_all;
	e.handles = 1;
	e.rq_ring = rq_loc;
	e.remote_error.store(0);
	e.recv_lock.store(0);
	qp->fatal_seen = e.error_seq.load();
	e.slot.store(SLOT_LIVE, std::memory_order_release);
	shm_unlock(&seg->hdr->lock);

	qp->pd_id = e.pd_id;
	qp->scq = a->send_cq ? to_scq(a->send_cq) : nullptr;
	qp->rcq = a->recv_cq ? to_scq(a->recv_cq) : nullptr;
	qp->srq = a->srq ? to_ssrq(a->srq) : nullptr;
	qp->xrcd = xrcd;
	if (xrcd)
		xrcd->users.fetch_add(1);
	if (pd && t != IBV_QPT_XRC_RECV) {
		qp->pd = to_spd(pd);
		qp->pd->users.fetch_add(1);
		if (qp->pd->parent && qp->pd->td) {
			SoftTd *td = reinterpret_cast<SoftTd *>(qp->pd->td);
			qp->sq_guard = &td->busy;
			// Send completions into the send CQ's lane when that CQ
			// belongs to the same thread domain.
			if (qp->scq && qp->scq->td_mode && qp->scq->pd->td == qp->pd->td)
				qp->lane = &qp->scq->lane;
		}
	}
	if (qp->ind)
		qp->ind->users.fetch_add(1);
	if (qp->scq)
		qp->scq->users.fetch_add(1);
	if (qp->rcq)
		qp->rcq->users.fetch_add(1);
	if (qp->srq)
		qp->srq->users.fetch_add(1);
	qp->sq_sig_all = a->sq_sig_all;
	qp->rq_cell = qp->rq ? qp->rq->cell_size : 0;
	c.max_send_wr = has_sq ? qp->sq_depth : 0;
	c.max_recv_wr = has_rq ? rq_cap : 0;
	c.max_recv_sge = has_rq ? recv_sge : 0;
	// Inline capacity is at least the room of the work request's gather
	// list (16 bytes per SGE), as the kernel's rxe and hardware devices
	// report it: programs such as rdma_xclient post 16 inline bytes on a QP
	// created with one send SGE and no inline request. Every send-queue
	// entry holds kMaxInline bytes, so the raised value is always honoured.
	if (has_sq)
		c.max_inline_data = std::max<uint32_t>(
			c.max_inline_data,
			std::min<uint32_t>(kMaxInline, c.max_send_sge * uint32_t(sizeof(ibv_sge))));
	qp->cap = c;
	if (has_sq && !qp->cap.max_send_sge)
		qp->cap.max_send_sge = 0;
	pthread_mutex_init(&qp->rq_lock, nullptr);
	qp->attr.qp_state = IBV_QPS_RESET;
	qp->attr.cap = c;
	qp->attr.port_num = 1;
	qp_init_public(qp, ctx, a);
	qp->vqp.comp_mask = VERBS_QP_EX;
	if (xrcd) {
		qp->vqp.comp_mask |= VERBS_QP_XRCD;
		qp->vqp.xrcd = &xrcd->vxrcd;
	}
	init_qp_ex_ops(qp);
	qp_link(ctx, qp);
	ensure_thread(ctx);
	return &qp->vqp.qp;
}

struct ibv_qp *soft_create_wq_qp(SoftContext *ctx, struct ibv_qp_init_attr_ex *attr)
{
	return qp_create(ctx, attr, true);
}

struct ibv_qp *soft_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	if (!pd || !attr) {
		errno = EINVAL;
		return nullptr;
	}
	struct ibv_qp_init_attr_ex ex = {};
	ex.qp_context = attr->qp_context;
	ex.send_cq = attr->send_cq;
	ex.recv_cq = attr->recv_cq;
	ex.srq = attr->srq;
	ex.cap = attr->cap;
	ex.qp_type = attr->qp_type;
	ex.sq_sig_all = attr->sq_sig_all;
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd;
	struct ibv_qp *qp = qp_create(to_sctx(pd->context), &ex);
	if (qp)
		attr->cap = ex.cap;
	return qp;
}

struct ibv_qp *soft_create_qp_ex(struct ibv_context *context,
				 struct ibv_qp_init_attr_ex *attr)
{
	if (!attr) {
		errno = EINVAL;
		return nullptr;
	}
	return qp_create(to_sctx(context), attr);
}

struct ibv_qp *soft_open_qp(struct ibv_context *context, struct ibv_qp_open_attr *attr)
{
	const uint32_t need = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
	if (!attr || (attr->comp_mask & need) != need || !attr->xrcd ||
	    attr->qp_type != IBV_QPT_XRC_RECV) {
		errno = EINVAL;
		return nullptr;
	}
	SoftContext *ctx = to_sctx(context);
	Segment *seg = ctx->seg;
	auto *x = reinterpret_cast<SoftXrcd *>(attr->xrcd);
	uint32_t s = attr->qp_num - kQpnBase;
	if (attr->qp_num < kQpnBase || s >= kMaxQps || attr->xrcd->context != context) {
		errno = EINVAL;
		return nullptr;
	}
	auto *qp = static_cast<SoftQp *>(calloc(1, sizeof(SoftQp)));
	if (!qp) {
		errno = ENOMEM;
		return nullptr;
	}
	qp->sq_guard = &qp->sq_busy;
	// Processes that died are reclaimed first, as the kernel drops a
	// process's handles when it exits: a QP whose last holders are dead is
	// gone, and opening (or registering with) it fails.
	segment_reap(seg);
	shm_lock(&seg->hdr->lock);
	QpEntry &e = seg->hdr->qps[s];
	if (e.slot.load() != SLOT_LIVE || e.qp_type != IBV_QPT_XRC_RECV || e.xrcd != x->slot + 1) {
		shm_unlock(&seg->hdr->lock);
		free(qp);
		errno = EINVAL;
		return nullptr;
	}
	if (!qp_ref_add(seg->hdr, s, seg->my_proc)) {
		shm_unlock(&seg->hdr->lock);
		free(qp);
		errno = ENOMEM;
		return nullptr;
	}
	e.handles++;
	qp->fatal_seen = e.error_seq.load(); // errors before the open are not ours
	shm_unlock(&seg->hdr->lock);
	qp->ctx = ctx;
	qp->type = IBV_QPT_XRC_RECV;
	qp->slot = s;
	qp->entry = &seg->hdr->qps[s];
	qp->qpn = attr->qp_num;
	qp->opened = true;
	qp->xrcd = x;
	x->users.fetch_add(1);
	pthread_mutex_init(&qp->rq_lock, nullptr);
	struct ibv_qp_init_attr_ex a = {};
	a.qp_context = attr->qp_context;
	a.qp_type = IBV_QPT_XRC_RECV;
	qp_init_public(qp, ctx, &a);
	qp->vqp.qp.state = IBV_QPS_UNKNOWN;
	qp->vqp.comp_mask = VERBS_QP_XRCD;
	qp->vqp.xrcd = &x->vxrcd;
	qp->attr.qp_state = IBV_QPS_ERR;
	qp_link(ctx, qp);
	ensure_thread(ctx); // its watchdog reports the QP's events to this handle
	return &qp->vqp.qp;
}

int soft_destroy_qp(struct ibv_qp *ibqp)
{
	SoftQp *qp = to_sqp(ibqp);
	SoftContext *ctx = qp->ctx;
	Segment *seg = ctx->seg;
	if (qp->flows.load())
		return EBUSY; // flow rules still steer to it (ibv_destroy_flow first)
	qp_unlink(ctx, qp);
	qp_sq_lock(qp); // waits for a running progress step
	qp_sq_unlock(qp);
	shm_lock(&seg->hdr->lock);
	QpEntry &e = seg->hdr->qps[qp->slot];
	if (e.slot.load() == SLOT_LIVE) {
		uint32_t mine = 0;
		if (e.qp_type == IBV_QPT_XRC_RECV)
			mine = qp_ref_drop(seg->hdr, qp->slot, seg->my_proc);
		if (e.qp_type == IBV_QPT_XRC_RECV && e.handles > 1) {
			e.handles--;
			// Our last handle of a QP we own: another holder takes it over.
			if (!mine && e.owner == seg->my_proc)
				qp_hand_over(seg->hdr, qp->slot);
		} else {
			if (e.qp_type == IBV_QPT_XRC_RECV)
				qp_ref_clear(seg->hdr, qp->slot);
			e.state.store(IBV_QPS_RESET);
			e.generation++;
			e.slot.store(SLOT_FREE, std::memory_order_release);
			extent_release(seg->hdr->extents.qps, qp->slot);
			if (qp->rq_off)
				arena_free(seg, qp->rq_off);
			qp->rq_off = 0;
			for (auto &g : seg->hdr->mcast)
				if (g.in_use)
					for (auto &q : g.qpn)
						if (q == qp->qpn)
							q = 0;
		}
	}
	shm_unlock(&seg->hdr->lock);
	if (qp->ind)
		qp->ind->users.fetch_sub(1);
	if (qp->scq)
		qp->scq->users.fetch_sub(1);
	if (qp->rcq)
		qp->rcq->users.fetch_sub(1);
	if (qp->srq)
		qp->srq->users.fetch_sub(1);
	if (qp->xrcd)
		qp->xrcd->users.fetch_sub(1);
	if (qp->pd)
		qp->pd->users.fetch_sub(1);
	pthread_mutex_destroy(&qp->rq_lock);
	if (qp->staged_buf.ptr)
		queue_buf_free(&qp->staged_buf);
	else
		free(qp->staged);
	queue_buf_free(&qp->rq_buf);
	queue_buf_free(&qp->sq_buf);
	free(qp);
	return 0;
}

// ---- The QP state machine: required and optional attribute masks per
// transition and QP type, as one table (ibv_modify_qp(3); the InfiniBand
// specification's QP state transition tables; the kernel keeps the same kind
// of table in drivers/infiniband/core/verbs.c, qp_state_table).

struct Transition {
	uint32_t req;
	uint32_t opt;
};

// QP types as the table tells them apart (RC also stands for any other).
enum Kind { K_UD, K_UC, K_RC, K_XI, K_XT, K_RAW, K_N };

static Kind kind_of(enum ibv_qp_type t)
{
	switch (t) {
	case IBV_QPT_UD:
		return K_UD;
	case IBV_QPT_UC:
		return K_UC;
	case IBV_QPT_XRC_SEND:
		return K_XI;
	case IBV_QPT_XRC_RECV:
		return K_XT;
	case IBV_QPT_RAW_PACKET:
		return K_RAW;
	default:
		return K_RC;
	}
}

// One allowed transition: the masks for UD, UC, RC, XRC_SEND, XRC_RECV and
// raw packet QPs (a kind with kind_ok false may not take it).
struct TransitionRow {
	bool valid;
	Transition by_kind[K_N];
	bool kind_ok[K_N];
};

inline constexpr int kQpStates = IBV_QPS_ERR + 1;

static constexpr std::array<std::array<TransitionRow, kQpStates>, kQpStates> make_qp_table()
{
	constexpr uint32_t P = IBV_QP_PKEY_INDEX, PO = IBV_QP_PORT, Q = IBV_QP_QKEY,
			   A = IBV_QP_ACCESS_FLAGS, AV = IBV_QP_AV, MTU = IBV_QP_PATH_MTU,
			   DQ = IBV_QP_DEST_QPN, RP = IBV_QP_RQ_PSN,
			   MDA = IBV_QP_MAX_DEST_RD_ATOMIC, RNRT = IBV_QP_MIN_RNR_TIMER,
			   SP = IBV_QP_SQ_PSN, TO = IBV_QP_TIMEOUT, RCNT = IBV_QP_RETRY_CNT,
			   RR = IBV_QP_RNR_RETRY, MQA = IBV_QP_MAX_QP_RD_ATOMIC, ALT = IBV_QP_ALT_PATH,
			   CS = IBV_QP_CUR_STATE, MIG = IBV_QP_PATH_MIG_STATE,
			   DRAIN = IBV_QP_EN_SQD_ASYNC_NOTIFY;
	std::array<std::array<TransitionRow, kQpStates>, kQpStates> t{};
	// (UD, UC, RC, XRC_SEND, XRC_RECV) masks; every type may take it.
	// Raw packet QPs: a port at INIT, nothing else (no address, no PSN);
	// set below, each row starts with the UD masks.
	auto row = [](Transition ud, Transition uc, Transition rc, Transition xi, Transition xt) {
		return TransitionRow{true, {ud, uc, rc, xi, xt, ud}, {true, true, true, true, true, true}};
	};
	auto same = [&](Transition m) { return row(m, m, m, m, m); };
	// Any state -> RESET or ERR, no attribute.
	for (int s = 0; s < kQpStates; s++) {
		t[s][IBV_QPS_RESET] = same({0, 0});
		t[s][IBV_QPS_ERR] = same({0, 0});
	}
	const Transition ud_init = {P | PO | Q, 0}, init = {P | PO | A, 0};
	t[IBV_QPS_RESET][IBV_QPS_INIT] = row(ud_init, init, init, init, init);
	t[IBV_QPS_INIT][IBV_QPS_INIT] = row({0, P | PO | Q}, {0, P | PO | A}, {0, P | PO | A},
					    {0, P | PO | A}, {0, P | PO | A});
	const Transition conn_rtr = {AV | MTU | DQ | RP, ALT | A | P};
	const Transition rc_rtr = {AV | MTU | DQ | RP | MDA | RNRT, ALT | A | P};
	t[IBV_QPS_INIT][IBV_QPS_RTR] = row({0, P | Q}, conn_rtr, rc_rtr, conn_rtr, rc_rtr);
	const Transition rc_rts = {SP | TO | RCNT | RR | MQA, CS | ALT | A | RNRT | MIG};
	t[IBV_QPS_RTR][IBV_QPS_RTS] = row({SP, CS | Q}, {SP, CS | ALT | A | MIG}, rc_rts, rc_rts,
					  {TO | SP, CS | ALT | A | RNRT | MIG});
	const Transition ud_re = {0, CS | Q}, uc_re = {0, CS | A | ALT | MIG},
			 rc_re = {0, CS | A | ALT | MIG | RNRT};
	t[IBV_QPS_RTS][IBV_QPS_RTS] = row(ud_re, uc_re, rc_re, rc_re, rc_re);
	t[IBV_QPS_RTS][IBV_QPS_SQD] = same({0, DRAIN});
	t[IBV_QPS_SQD][IBV_QPS_RTS] = row(ud_re, uc_re, rc_re, rc_re, rc_re);
	const Transition rc_sqd = {0, PO | AV | TO | RCNT | RR | MQA | MDA | ALT | A | P | RNRT | MIG};
	t[IBV_QPS_SQD][IBV_QPS_SQD] = row({0, P | Q}, {0, AV | ALT | A | P | MIG}, rc_sqd, rc_sqd,
					  rc_sqd);
	// SQE exists for unreliable types only.
	t[IBV_QPS_SQE][IBV_QPS_RTS] = row({0, CS | Q | A}, {0, CS | Q | A}, {}, {}, {});
	t[IBV_QPS_SQE][IBV_QPS_RTS].kind_ok[K_RC] = false;
	t[IBV_QPS_SQE][IBV_QPS_RTS].kind_ok[K_XI] = false;
	t[IBV_QPS_SQE][IBV_QPS_RTS].kind_ok[K_XT] = false;
	t[IBV_QPS_RESET][IBV_QPS_INIT].by_kind[K_RAW] = {PO, 0};
	t[IBV_QPS_INIT][IBV_QPS_INIT].by_kind[K_RAW] = {0, PO};
	t[IBV_QPS_INIT][IBV_QPS_RTR].by_kind[K_RAW] = {0, 0};
	t[IBV_QPS_RTR][IBV_QPS_RTS].by_kind[K_RAW] = {0, CS | SP}; // a PSN means nothing here
	t[IBV_QPS_RTS][IBV_QPS_RTS].by_kind[K_RAW] = {0, CS};
	t[IBV_QPS_SQD][IBV_QPS_RTS].by_kind[K_RAW] = {0, CS};
	t[IBV_QPS_SQD][IBV_QPS_SQD].by_kind[K_RAW] = {0, 0};
	t[IBV_QPS_SQE][IBV_QPS_RTS].by_kind[K_RAW] = {0, CS};
	return t;
}

static constexpr auto kQpTable = make_qp_table();

// The masks of cur -> next for a QP of kind k; false when not allowed.
static bool transition(enum ibv_qp_state cur, enum ibv_qp_state next, Kind k, Transition *out)
{
	if (unsigned(cur) >= unsigned(kQpStates) || unsigned(next) >= unsigned(kQpStates))
		return false;
	const TransitionRow &r = kQpTable[cur][next];
	if (!r.valid || !r.kind_ok[k])
		return false;
	*out = r.by_kind[k];
	return true;
}

// Removes from a thread-domain CQ's lane the completions of QP qpn (the
// caller holds the TD's guard, so it is the lane's producer, and is the
// application's thread, its consumer). The others keep their order.
static void lane_purge(CqLane *l, uint32_t qpn)
{
	uint32_t h = l->head.load(std::memory_order_relaxed);
	uint32_t t = l->tail.load(std::memory_order_relaxed);
	uint32_t k = t;
	for (uint32_t i = t; i != h;) {
		--i;
		const struct ibv_wc &wc = l->cells[i & l->mask];
		if (wc.qp_num != qpn) {
			--k;
			if (k != i)
				l->cells[k & l->mask] = wc;
		}
	}
	l->head.store(k, std::memory_order_release);
}

// Removes from cq's shared ring the completions of QP qpn nobody has polled
// yet, as HCA drivers clean a CQ when one of its QPs is reset (rdma-core's
// mlx4 and mlx5 providers in their modify_qp to IBV_QPS_RESET): after
// ibv_modify_qp(3) to RESET returns, no completion of the QP's earlier life
// (flush errors included) reaches a poll. Completions are marked in place
// (CqeCell::purged) under the CQ's poll guard, the ring's only consumer;
// the order of the others is unchanged. A QP in RESET produces nothing,
// so none of its completions can arrive after the scan.
static void cq_purge_qp(SoftCq *cq, uint32_t qpn)
{
	if (!cq)
		return;
	guard_lock(&cq->poll_busy);
	RingHeader *r = cq->ring;
	uint64_t end = r->enq.load(std::memory_order_acquire);
	uint32_t n = 0;
	for (uint64_t pos = r->deq.load(std::memory_order_acquire); pos != end; pos++) {
		auto *c = static_cast<CqeCell *>(ring_published(r, pos));
		if (c && !c->purged && c->wc.qp_num == qpn) {
			c->purged = 1;
			n++;
		}
	}
	if (n)
		cq->purged.fetch_add(n, std::memory_order_relaxed);
	guard_unlock(&cq->poll_busy);
}

// The rights a responder QP may grant (ibv_modify_qp(3) qp_access_flags);
// with rdma-core 56 also the FLUSH placement types it accepts (a QP may
// accept persistent flushes even though no region can be their target:
// they then fail with a remote access error, as on rxe with ordinary RAM).
// IBV_ACCESS_ON_DEMAND is accepted and means nothing for a QP (rdma-core's
// ODP tests give a QP the access flags of their regions; kernels ignore it).
static const unsigned kQpAccess =
	IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
	IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ON_DEMAND
#if _OPENVERBS_ABI >= 56
	| IBV_ACCESS_FLUSH_GLOBAL | IBV_ACCESS_FLUSH_PERSISTENT
#endif
	;

int soft_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	SoftQp *qp = to_sqp(ibqp);
	if (!attr)
		return EINVAL;
	SoftContext *ctx = qp->ctx;
	Segment *seg = ctx->seg;
	QpEntry &e = seg->hdr->qps[qp->slot];
	if (e.slot.load() != SLOT_LIVE)
		return EINVAL;
	auto cur = static_cast<enum ibv_qp_state>(e.state.load());
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur &&
	    !(cur == IBV_QPS_RTS && attr->cur_qp_state == IBV_QPS_SQE))
		return EINVAL;
	enum ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if (next > IBV_QPS_ERR)
		return EINVAL;
	Transition t;
	if (!transition(cur, next, kind_of(qp->type), &t))
		return EINVAL;
	uint32_t given = uint32_t(mask) & ~uint32_t(IBV_QP_STATE);
	if ((given & t.req) != t.req)
		return EINVAL;
	if (given & ~(t.req | t.opt)) {
		if (next != IBV_QPS_RESET && next != IBV_QPS_ERR)
			return EINVAL;
	}
	// Value checks.
	if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index >= kPkeyTableLen)
		return EINVAL;
	if ((mask & IBV_QP_PORT) && attr->port_num != 1)
		return EINVAL;
	if ((mask & IBV_QP_PATH_MTU) && (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096))
		return EINVAL;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && attr->max_rd_atomic > kMaxRdAtom)
		return EINVAL;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && attr->max_dest_rd_atomic > kMaxRdAtom)
		return EINVAL;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31)
		return EINVAL;
	if ((mask & IBV_QP_TIMEOUT) && attr->timeout > 31)
		return EINVAL;
	if ((mask & IBV_QP_RETRY_CNT) && attr->retry_cnt > 7)
		return EINVAL;
	if ((mask & IBV_QP_RNR_RETRY) && attr->rnr_retry > 7)
		return EINVAL;
	if ((mask & IBV_QP_ACCESS_FLAGS) && (attr->qp_access_flags & ~kQpAccess))
		return EINVAL;
	if ((mask & IBV_QP_DEST_QPN) && attr->dest_qp_num > 0xffffff)
		return EINVAL;
	if ((mask & IBV_QP_AV) && attr->ah_attr.port_num > 1)
		return EINVAL;
	// An Ethernet port addresses by GID only (RoCE): no address vector
	// without a GRH.
	if ((mask & IBV_QP_AV) && ctx->eth && !attr->ah_attr.is_global)
		return EINVAL;
	if ((mask & IBV_QP_AV) && attr->ah_attr.is_global &&
	    attr->ah_attr.grh.sgid_index >= kGidPopulated)
		return EINVAL;

	// Apply.
	struct ibv_qp_attr &s = qp->attr;
	if (mask & IBV_QP_PKEY_INDEX)
		s.pkey_index = attr->pkey_index;
	if (mask & IBV_QP_PORT)
		s.port_num = attr->port_num;
	if (mask & IBV_QP_QKEY) {
		s.qkey = attr->qkey;
		e.qkey = attr->qkey;
	}
	if (mask & IBV_QP_ACCESS_FLAGS) {
		s.qp_access_flags = attr->qp_access_flags;
		e.access = attr->qp_access_flags;
	}
	if (mask & IBV_QP_AV) {
		s.ah_attr = attr->ah_attr;
		qp_sq_lock(qp);
		qp->rseg = nullptr; // exec_wr looks the responder's device up again
		qp_sq_unlock(qp);
	}
	if (mask & IBV_QP_ALT_PATH) {
		s.alt_ah_attr = attr->alt_ah_attr;
		s.alt_pkey_index = attr->alt_pkey_index;
		s.alt_port_num = attr->alt_port_num;
		s.alt_timeout = attr->alt_timeout;
	}
	if (mask & IBV_QP_PATH_MTU)
		s.path_mtu = attr->path_mtu;
	if (mask & IBV_QP_DEST_QPN) {
		s.dest_qp_num = attr->dest_qp_num;
		e.dest_qpn = attr->dest_qp_num;
	}
	if (mask & IBV_QP_RQ_PSN)
		s.rq_psn = attr->rq_psn;
	if (mask & IBV_QP_SQ_PSN)
		s.sq_psn = attr->sq_psn;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		s.max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		s.max_rd_atomic = attr->max_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER) {
		s.min_rnr_timer = attr->min_rnr_timer;
		e.min_rnr_timer = attr->min_rnr_timer;
	}
	if (mask & IBV_QP_TIMEOUT)
		s.timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		s.retry_cnt = attr->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		s.rnr_retry = attr->rnr_retry;
	if (mask & IBV_QP_PATH_MIG_STATE)
		s.path_mig_state = attr->path_mig_state;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		s.en_sqd_async_notify = attr->en_sqd_async_notify;

	if (next == cur && next != IBV_QPS_ERR && next != IBV_QPS_RESET)
		return 0;
	if (next == IBV_QPS_ERR) {
		qp_sq_lock(qp);
		if (qp->opened || !qp->sq) {
			e.state.store(IBV_QPS_ERR);
			if (qp->rq)
				flush_rq(qp);
			qp->flushed = true;
		} else {
			qp_to_error(qp, false);
		}
	} else if (next == IBV_QPS_RESET) {
		qp_sq_lock(qp);
		e.state.store(IBV_QPS_RESET);
		qp->sq_head = 0;
		sq_set_pending(qp, 0);
		if (qp->rq) {
			uint8_t buf[sizeof(RecvWqe) + kMaxSge * sizeof(struct ibv_sge)];
			while (ring_pop(qp->rq, buf, sizeof(RecvWqe)))
				;
		}
		e.remote_error.store(0);
		qp->flushed = false;
		if (qp->lane)
			lane_purge(qp->lane, qp->qpn);
	} else {
		qp_sq_lock(qp);
		e.state.store(next, std::memory_order_release);
	}
	s.qp_state = next;
	s.cur_qp_state = next;
	ibqp->state = next;
	qp_sq_unlock(qp);
	if (next == IBV_QPS_RESET && !qp->opened) {
		cq_purge_qp(qp->scq, qp->qpn);
		if (qp->rcq != qp->scq)
			cq_purge_qp(qp->rcq, qp->qpn);
	}
	if (next == IBV_QPS_RTS && sq_pending(qp))
		progress_qp(qp, true);
	return 0;
}

int soft_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		  struct ibv_qp_init_attr *init)
{
	SoftQp *qp = to_sqp(ibqp);
	if (!attr || !init)
		return EINVAL;
	Segment *seg = qp->ctx->seg;
	QpEntry &e = seg->hdr->qps[qp->slot];
	*attr = qp->attr;
	attr->qp_state = static_cast<enum ibv_qp_state>(e.state.load());
	attr->cur_qp_state = attr->qp_state;
	attr->cap = qp->cap;
	attr->sq_draining = 0;
	memset(init, 0, sizeof(*init));
	init->qp_context = ibqp->qp_context;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->cap = qp->cap;
	init->qp_type = qp->type;
	init->sq_sig_all = qp->sq_sig_all;
	return 0;
}

int soft_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct ibv_recv_wr *dummy;
	if (!bad)
		bad = &dummy;
	if (!wr)
		return 0;
	SoftQp *qp = to_sqp(ibqp);
	if (!qp->rq) {
		*bad = wr;
		return EINVAL;
	}
	Segment *seg = qp->ctx->seg;
	uint32_t st = seg->hdr->qps[qp->slot].state.load();
	if (st == IBV_QPS_RESET) {
		*bad = wr;
		return EINVAL;
	}
	int rc = post_recv_ring(qp->rq, qp->cap.max_recv_sge, wr, bad);
	if (st == IBV_QPS_ERR)
		flush_rq(qp);
	return rc;
}

} // namespace ovsoft
