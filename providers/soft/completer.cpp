// openverbs software RDMA device: the completer.
//
// Completions and events: a completion written into a CQ's shared ring (or
// the lane of a thread-domain CQ), the completion channel's and the async
// events, the flush of a QP's queues when it enters the error state, and
// the SRQ limit event. See engine.h for the split.
#include "engine.h"
#include "log.h"

#include <cstring>

namespace ovsoft {

// ------------------------------------------------------------------ completions

void async_notify(Segment *seg, int32_t pid, int fd, uint32_t ino, uint64_t element,
		  uint32_t type)
{
	struct ib_uverbs_async_event_desc d = {};
	d.element = element;
	d.event_type = type;
	int rc = notify_pipe(pid, fd, ino, &d, sizeof(d));
	if (rc)
		softlog(3, "soft%d: async event %u for pid %d not delivered: %s", seg->index, type,
			pid, strerror(rc));
}

// Sends the completion event of an armed CQ (armed value a) unless another
// completion got there first.
static void cq_event(Segment *seg, CqEntry &c, uint32_t a)
{
	if (!c.armed.compare_exchange_strong(a, 0))
		return;
	struct ib_uverbs_comp_event_desc ev = {};
	ev.cq_handle = c.user_handle;
	int rc = notify_pipe(c.owner_pid, c.channel_fd, c.channel_ino, &ev, sizeof(ev));
	if (rc)
		softlog(3, "soft%d: completion event not delivered: %s", seg->index, strerror(rc));
}

// Whether a completion (solicited flag, status) raises the event of a CQ
// armed with value a (1: any completion, 2: solicited or failed only).
static inline bool arm_asks(uint32_t a, bool solicited, enum ibv_wc_status st)
{
	return a == 1 || solicited || st != IBV_WC_SUCCESS;
}

// An HCA armed while its CQ holds entries past the consumer index it is
// given (the arm doorbells of rdma-core's mlx4 and mlx5 providers carry
// it) raises the completion event at once. Applications count on that when
// they poll, arm and then wait without polling again: Open MPI's openib
// connection manager (udcm_cq_event_dispatch in btl_openib_connect_udcm.c)
// does, and a completion that lands between its poll and its arm would
// otherwise sit in the CQ with no event, its connection never completing.
// So after the owner arms (soft_req_notify_cq), a completion still in the
// CQ that the arm asks for sends the event now. Completions pushed later
// are the pushers' (cq_push_fill reads the arm after publishing; both sides
// fence). An extra event is harmless: the application polls after it.
void cq_arm_pending(Segment *seg, SoftCq *cq, uint32_t a)
{
	CqEntry &c = seg->hdr->cqs[cq->slot];
	if (c.channel_fd < 0)
		return;
	bool due = false;
	if (cq->td_mode) {
		// Cells below the tail are written before it moves (lane_push).
		const CqLane *l = &cq->lane;
		uint32_t h = l->head.load(std::memory_order_acquire);
		uint32_t t = l->tail.load(std::memory_order_acquire);
		for (; h != t && !due; h++)
			due = arm_asks(a, false, l->cells[h & l->mask].status);
	}
	RingHeader *r = cq->ring;
	uint64_t d = r->deq.load(std::memory_order_acquire);
	uint64_t e = r->enq.load(std::memory_order_acquire);
	if (!due && a == 1) {
		// The oldest entry only: if it is not yet published, its pusher
		// publishes, then reads the arm and sends the event.
		due = d != e && ring_published(r, d) != nullptr;
	} else if (!due && d != e) {
		// Solicited only: a solicited or failed completion among those
		// published. The cells are read under the poll guard (the ring's
		// consumer side); a poller holding it (an ibv_start_poll section)
		// means completions are being taken: send the event rather than
		// wait.
		if (!cq->td_mode && cq->poll_busy.exchange(true, std::memory_order_acquire)) {
			due = true;
		} else {
			d = r->deq.load(std::memory_order_acquire);
			for (uint64_t pos = d; pos != e && !due; pos++) {
				auto *cell = static_cast<const CqeCell *>(ring_published(r, pos));
				due = cell && !cell->purged &&
				      arm_asks(a, cell->solicited, cell->wc.status);
			}
			if (!cq->td_mode)
				guard_unlock(&cq->poll_busy);
		}
	}
	if (due)
		cq_event(seg, c, a);
}

// cq_push with the completion written in place by fill(struct ibv_wc &)
// (the cell's ibv_wc, zeroed first); st is the status fill writes. tm: a
// tag-matching receive that matched (wc_flags IBV_WC_TM_MATCH), whose tag
// and app_ctx are written too.
template <class Fill>
static inline int cq_push_fill(Segment *seg, uint32_t cq_slot, bool solicited,
			       enum ibv_wc_status st, Fill fill, bool tm = false,
			       uint64_t tm_tag = 0, uint32_t tm_priv = 0)
{
	if (cq_slot >= kMaxCqs)
		return EINVAL;
	CqEntry &c = seg->hdr->cqs[cq_slot];
	if (c.slot.load(std::memory_order_acquire) != SLOT_LIVE)
		return ESTALE;
	RingHeader *r = seg->ring(c.ring);
	if (!r)
		return EPROTO;
	uint64_t pos;
	void *cell = ring_claim(r, &pos);
	if (!cell) {
		if (!c.overflow.exchange(1))
			async_notify(seg, c.owner_pid, c.async_fd, c.async_ino, c.user_handle,
				     IBV_EVENT_CQ_ERR);
		return ENOSPC;
	}
	auto *cc = static_cast<CqeCell *>(cell);
	cc->wc = {};
	fill(cc->wc);
	cc->solicited = solicited;
	cc->purged = 0; // the cell may hold a purged completion of its last turn
	// The cell's second line only when it has something to say (CqeCell).
	if (__builtin_expect(tm, 0)) {
		cc->tm_tag = tm_tag;
		cc->tm_priv = tm_priv;
	}
	if (__builtin_expect(__atomic_load_n(&c.stamp, __ATOMIC_RELAXED) != 0, 0))
		cc->ts = device_clock();
	ring_publish(r, cell, pos);
	if (c.channel_fd < 0)
		return 0; // no completion channel: no event to send
	// Publish, then read the arm; the application arms, then polls
	// (soft_req_notify_cq). A full fence on both sides, or both reads can
	// see the old values (a load may pass an earlier store): the completion
	// would sit in the CQ with no event sent.
	std::atomic_thread_fence(std::memory_order_seq_cst);
	uint32_t a = c.armed.load(std::memory_order_acquire);
	if (a && arm_asks(a, solicited, st))
		cq_event(seg, c, a);
	return 0;
}

int cq_push(Segment *seg, uint32_t cq_slot, const struct ibv_wc &wc, bool solicited)
{
	MapUse use; // the CQ ring may be a peer's mapping
	return cq_push_fill(seg, cq_slot, solicited, wc.status,
			    [&](struct ibv_wc &out) { out = wc; });
}

int cq_push_recv(Segment *seg, uint32_t cq_slot, uint64_t wr_id, enum ibv_wc_status st,
		 uint32_t dqpn, const Msg &m)
{
	MapUse use; // the CQ ring may be a peer's mapping
	return cq_push_fill(seg, cq_slot, m.solicited, st, [&](struct ibv_wc &out) {
		recv_wc_fill(out, wr_id, st, dqpn, m);
	});
}

int cq_push_tm(Segment *seg, uint32_t cq_slot, const struct ibv_wc &wc, uint64_t tag,
	       uint32_t priv)
{
	MapUse use;
	return cq_push_fill(
		seg, cq_slot, false, wc.status, [&](struct ibv_wc &out) { out = wc; },
		(wc.wc_flags & IBV_WC_TM_MATCH) != 0, tag, priv);
}

// The lane of a thread-domain CQ (with the ring) holds `capacity`
// completions: one more is an overrun, reported like cq_push's.
static __attribute__((noinline, cold)) void lane_overrun(SoftQp *qp)
{
	Segment *seg = qp->ctx->seg;
	CqEntry &c = *qp->scq->entry;
	if (!c.overflow.exchange(1))
		async_notify(seg, c.owner_pid, c.async_fd, c.async_ino, c.user_handle,
			     IBV_EVENT_CQ_ERR);
}

// A send completion of a QP whose send CQ has a lane (the caller holds the
// thread domain's guard): written in place into the lane, then the same
// overrun and completion-event rules as cq_push. The CQ's capacity bounds
// the lane and the shared ring together. No call on the common path (the
// rare ones are tail calls), so no register is saved.
void lane_push(SoftQp *qp, uint64_t wr_id, enum ibv_wc_status st, enum ibv_wc_opcode op,
	       uint32_t len)
{
	CqLane *l = qp->lane;
	SoftCq *cq = qp->scq;
	uint32_t t = l->tail.load(std::memory_order_relaxed);
	uint64_t used = t - l->head.load(std::memory_order_acquire);
	used += cq->ring->enq.load(std::memory_order_relaxed) -
		cq->ring->deq.load(std::memory_order_relaxed);
	if (__builtin_expect(used >= cq->capacity, 0))
		return lane_overrun(qp);
	struct ibv_wc &wc = l->cells[t & l->mask];
	wc = {};
	wc.wr_id = wr_id;
	wc.status = st;
	wc.opcode = op;
	wc.byte_len = len;
	wc.qp_num = qp->qpn;
	l->tail.store(t + 1, std::memory_order_release);
	// No fence between the two (unlike cq_push_fill): the lane's pusher is
	// the thread that also arms and polls the CQ (the thread domain's uses
	// are serialised by the application).
	CqEntry &c = *cq->entry;
	uint32_t a = c.armed.load(std::memory_order_acquire);
	if (__builtin_expect(a != 0, 0) && arm_asks(a, false, st))
		cq_event(qp->ctx->seg, c, a);
}

void lane_move(CqLane *l, struct ibv_wc *cells, uint32_t n)
{
	uint32_t h = l->head.load(std::memory_order_relaxed);
	uint32_t t = l->tail.load(std::memory_order_relaxed);
	uint32_t k = 0;
	for (; h != t; h++)
		cells[k++] = l->cells[h & l->mask];
	l->cells = cells;
	l->mask = n - 1;
	l->head.store(0, std::memory_order_relaxed);
	l->tail.store(k, std::memory_order_release);
}

uint32_t lane_count(const CqLane *l)
{
	return l->tail.load(std::memory_order_acquire) - l->head.load(std::memory_order_acquire);
}

// A send completion into the send CQ's shared ring.
__attribute__((noinline)) void complete_send_ring(SoftQp *qp, uint64_t wr_id,
						  enum ibv_wc_opcode op,
						  enum ibv_wc_status st, uint32_t len)
{
	cq_push_fill(qp->ctx->seg, qp->scq->slot, false, st, [&](struct ibv_wc &wc) {
		wc.wr_id = wr_id;
		wc.status = st;
		wc.opcode = op;
		wc.qp_num = qp->qpn;
		wc.byte_len = len;
	});
}

void send_complete(SoftQp *qp, const SoftWr &w, enum ibv_wc_status st, uint32_t len)
{
	complete_send(qp, w, st, len);
}

void flush_rq(SoftQp *qp)
{
	MapUse use;
	if (!qp->rq || !qp->rcq)
		return;
	uint8_t buf[sizeof(RecvWqe) + kMaxSge * sizeof(struct ibv_sge)];
	while (ring_pop(qp->rq, buf, sizeof(RecvWqe))) {
		auto *wqe = reinterpret_cast<RecvWqe *>(buf);
		struct ibv_wc wc = {};
		wc.wr_id = wqe->wr_id;
		wc.status = IBV_WC_WR_FLUSH_ERR;
		wc.opcode = IBV_WC_RECV;
		wc.qp_num = qp->qpn;
		cq_push(qp->ctx->seg, qp->rcq->slot, wc, false);
	}
}

// Caller holds the send-queue guard (qp_sq_lock).
void qp_to_error(SoftQp *qp, bool fatal_event)
{
	Segment *seg = qp->ctx->seg;
	QpEntry &e = seg->hdr->qps[qp->slot];
	e.state.store(IBV_QPS_ERR, std::memory_order_release);
	// ibv_qp::state is the library's copy of the last state the application
	// set (ibv_modify_qp writes it after the provider returns, without our
	// guard), so a transition of our own (the watchdog's, a failed request)
	// leaves it alone, as an HCA's does; ibv_query_qp reports the error.
	qp->attr.qp_state = IBV_QPS_ERR;
	while (qp->sq_count) {
		if (qp->lane || qp->scq)
			complete_send(qp, qp->sq[qp->sq_head], IBV_WC_WR_FLUSH_ERR, 0);
		qp->sq_head = (qp->sq_head + 1) % qp->sq_depth;
		sq_set_pending(qp, qp->sq_count - 1);
	}
	flush_rq(qp);
	qp->flushed = true;
	SoftContext *ctx = qp->ctx;
	if (qp->srq)
		async_notify(seg, my_pid(), ctx->vctx.context.async_fd, ctx->async_ino,
			     uint64_t(uintptr_t(&qp->vqp.qp)), IBV_EVENT_QP_LAST_WQE_REACHED);
	if (fatal_event)
		async_notify(seg, my_pid(), ctx->vctx.context.async_fd, ctx->async_ino,
			     uint64_t(uintptr_t(&qp->vqp.qp)), IBV_EVENT_QP_FATAL);
}

void srq_limit_check(Segment *seg, SrqEntry &s, RingHeader *ring)
{
	uint32_t lim = s.limit.load(std::memory_order_acquire);
	if (lim && ring_count(ring) < lim && s.limit.compare_exchange_strong(lim, 0))
		async_notify(seg, s.owner_pid, s.async_fd, s.async_ino, s.user_handle,
			     IBV_EVENT_SRQ_LIMIT_REACHED);
}

} // namespace ovsoft
