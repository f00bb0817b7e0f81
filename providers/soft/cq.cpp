// openverbs software RDMA device: completion queues (create, poll, notify,
// resize, the extended CQ's poll functions).
#include "engine.h"
#include "objects.h"

namespace ovsoft {

// ------------------------------------------------------------------ CQ

static void cq_ex_setup(SoftCq *cq);

static SoftCq *cq_create(SoftContext *ctx, int cqe, struct ibv_comp_channel *channel,
			 int comp_vector, bool ex, SoftPd *ppd)
{
	if (cqe < 1 || uint32_t(cqe) > kMaxCqe || comp_vector < 0 ||
	    comp_vector >= ctx->vctx.context.num_comp_vectors) {
		errno = EINVAL;
		return nullptr;
	}
	uint32_t chan_ino = 0;
	if (channel) {
		struct stat st;
		if (fstat(channel->fd, &st) != 0 || !S_ISFIFO(st.st_mode)) {
			softlog(1, "soft%d: completion channel fd %d is not a pipe: events cannot "
				   "be delivered", ctx->index, channel->fd);
			errno = EINVAL;
			return nullptr;
		}
		chan_ino = uint32_t(st.st_ino);
	}
	auto *cq = static_cast<SoftCq *>(calloc(1, sizeof(SoftCq)));
	if (!cq) {
		errno = ENOMEM;
		return nullptr;
	}
	uint32_t cap = ring_capacity(uint32_t(cqe));
	uint32_t cell = kCqeCellSize;
	uint64_t bytes = sizeof(RingHeader) + uint64_t(cap) * cell;
	// The application's allocator is called before the device lock is taken.
	int rc = ring_buf_alloc(allocator_of(ppd ? &ppd->pd : nullptr), OPENVERBS_SOFT_RES_CQ_RING,
				bytes, &cq->ring_buf);
	if (rc) {
		free(cq);
		errno = rc;
		return nullptr;
	}
	Segment *seg = ctx->seg;
	shm_lock(&seg->hdr->lock);
	SegmentHeader *hdr = seg->hdr;
	int slot = extent_take(hdr->extents.cqs, kMaxCqs,
			       [&](uint32_t i) { return hdr->cqs[i].slot.load() == SLOT_FREE; });
	uint64_t off = slot >= 0 && !cq->ring_buf.ptr ? arena_alloc(seg, bytes, seg->my_proc) : 0;
	if (slot < 0 || (!off && !cq->ring_buf.ptr)) {
		shm_unlock(&seg->hdr->lock);
		queue_buf_free(&cq->ring_buf);
		free(cq);
		errno = ENOMEM;
		return nullptr;
	}
	auto *ring = reinterpret_cast<RingHeader *>(off ? seg->base + off
						       : static_cast<uint8_t *>(cq->ring_buf.ptr));
	ring_init(ring, cell, cap, seg->my_proc);
	CqEntry &e = seg->hdr->cqs[slot];
	e.generation++;
	e.owner = seg->my_proc;
	e.owner_pid = self_pid();
	e.ring = off ? Segment::arena_loc(off) : ring_buf_loc(cq->ring_buf);
	e.user_handle = uintptr_t(&cq->vcq.cq);
	e.armed.store(0);
	e.overflow.store(0);
	e.channel_fd = channel ? channel->fd : -1;
	e.channel_ino = chan_ino;
	e.async_fd = ctx->vctx.context.async_fd;
	e.async_ino = ctx->async_ino;
	__atomic_store_n(&e.stamp, 0u, __ATOMIC_RELAXED);
	e.slot.store(SLOT_LIVE, std::memory_order_release);
	shm_unlock(&seg->hdr->lock);
	cq->slot = slot;
	cq->capacity = cap;
	cq->ring = ring;
	cq->ring_off = off;
	cq->ex = ex;
	if (ppd) {
		cq->pd = ppd;
		ppd->users.fetch_add(1);
		cq->td_mode = ppd->td != nullptr;
	}
	// The library's create_cq / create_cq_ex wrappers finish the public
	// fields (and count the channel reference); set what they rely on.
	cq->vcq.cq.context = &ctx->vctx.context;
	cq->vcq.cq.channel = channel;
	pthread_mutex_init(&cq->vcq.cq.mutex, nullptr);
	pthread_cond_init(&cq->vcq.cq.cond, nullptr);
	cq->vcq.cq.cqe = int(cap);
	cq->vcq.cq.handle = slot;
	return cq;
}

struct ibv_cq *soft_create_cq(struct ibv_context *context, int cqe,
			      struct ibv_comp_channel *channel, int comp_vector)
{
	SoftCq *cq = cq_create(to_sctx(context), cqe, channel, comp_vector, false, nullptr);
	return cq ? &cq->vcq.cq : nullptr;
}

static const uint64_t kSupportedWcFlags =
	IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
	IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
	IBV_WC_EX_WITH_DLID_PATH_BITS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
	IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK | IBV_WC_EX_WITH_TM_INFO;

struct ibv_cq_ex *soft_create_cq_ex(struct ibv_context *context,
				    struct ibv_cq_init_attr_ex *attr)
{
	if (!attr) {
		errno = EINVAL;
		return nullptr;
	}
	if (attr->comp_mask & ~uint32_t(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) {
		errno = EINVAL;
		return nullptr;
	}
	if (attr->wc_flags & ~kSupportedWcFlags) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (attr->flags & ~uint32_t(IBV_CREATE_CQ_ATTR_SINGLE_THREADED))) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	SoftPd *ppd = nullptr;
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) && attr->parent_domain) {
		ppd = to_spd(attr->parent_domain);
		if (attr->parent_domain->context != context || !ppd->parent || ppd->dead) {
			errno = EINVAL;
			return nullptr;
		}
	}
	SoftCq *cq = cq_create(to_sctx(context), int(attr->cqe), attr->channel,
			       int(attr->comp_vector), true, ppd);
	if (!cq)
		return nullptr;
	if (cq->td_mode) {
		// The thread-domain lane: process local, from the parent domain's
		// allocator when it has one.
		int rc = queue_buf_alloc(allocator_of(&cq->pd->pd), OPENVERBS_SOFT_RES_CQ_LANE,
					 size_t(cq->capacity) * sizeof(struct ibv_wc), 64,
					 &cq->lane_buf);
		if (rc) {
			soft_destroy_cq(&cq->vcq.cq);
			errno = rc;
			return nullptr;
		}
		cq->lane.cells = static_cast<struct ibv_wc *>(cq->lane_buf.ptr);
		cq->lane.mask = cq->capacity - 1;
		cq->entry = &to_sctx(context)->seg->hdr->cqs[cq->slot];
	}
	cq->wc_flags = attr->wc_flags;
	cq_ex_setup(cq);
	cq_ex_timestamps(cq); // clock.cpp
	return &cq->vcq.cq_ex;
}

// The next completion of the shared ring that no QP reset removed (see
// cq_purge_qp), whole cell. False: the ring is empty.
static bool pop_unpurged(SoftCq *cq, CqeCell *c)
{
	while (ring_pop(cq->ring, c, sizeof(*c))) {
		if (!c->purged)
			return true;
		cq->purged.fetch_sub(1, std::memory_order_relaxed);
	}
	return false;
}

static __attribute__((noinline, cold)) int pop_ring_purging(SoftCq *cq, int got, int n,
							     struct ibv_wc *wc)
{
	CqeCell c;
	while (got < n && pop_unpurged(cq, &c))
		wc[got++] = c.wc;
	return got;
}

// The shared ring of a CQ into wc[got..n) (a completion's ibv_wc is the head
// of its cell, so it is copied straight to the caller). Kept out of line:
// a thread-domain poll served by the lane does not pay for its frame.
static inline __attribute__((always_inline)) int pop_ring(SoftCq *cq, int got, int n,
							 struct ibv_wc *wc)
{
	if (__builtin_expect(cq->purged.load(std::memory_order_relaxed) != 0, 0))
		return pop_ring_purging(cq, got, n, wc);
	while (got < n && ring_pop(cq->ring, &wc[got], sizeof(struct ibv_wc)))
		got++;
	return got;
}

static __attribute__((noinline)) int poll_ring(SoftCq *cq, int got, int n, struct ibv_wc *wc)
{
	return pop_ring(cq, got, n, wc);
}

static __attribute__((noinline)) int poll_ring_locked(SoftCq *cq, int n, struct ibv_wc *wc)
{
	guard_lock(&cq->poll_busy);
	int got = pop_ring(cq, 0, n, wc);
	guard_unlock(&cq->poll_busy);
	return got;
}

int soft_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	SoftCq *cq = to_scq(ibcq);
	if (n < 0 || (n && !wc))
		return -EINVAL;
	if (!cq->td_mode)
		return poll_ring_locked(cq, n, wc);
	// Thread domain: the application serialises its polls. The send
	// completions of the TD's own QPs wait in the lane, everything else in
	// the shared ring.
	int got = lane_poll(&cq->lane, n, wc);
	return got < n ? poll_ring(cq, got, n, wc) : got;
}

int soft_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	SoftCq *cq = to_scq(ibcq);
	Segment *seg = to_sctx(ibcq->context)->seg;
	// Sequentially consistent: a full fence before the application polls
	// (the other half of cq_push_fill's).
	uint32_t a = solicited_only ? 2 : 1;
	seg->hdr->cqs[cq->slot].armed.store(a, std::memory_order_seq_cst);
	cq_arm_pending(seg, cq, a); // completions already waiting raise the event now
	return 0;
}

void soft_cq_event(struct ibv_cq *) {}

int soft_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	SoftCq *cq = to_scq(ibcq);
	if (cqe < 1 || uint32_t(cqe) > kMaxCqe)
		return EINVAL;
	uint32_t cap = ring_capacity(uint32_t(cqe));
	uint32_t cell = cq->ring->cell_size;
	uint64_t bytes = sizeof(RingHeader) + uint64_t(cap) * cell;
	// A CQ of a parent domain with allocators asks it for the new ring too
	// (before any lock is taken), and a thread-domain CQ that grows for a
	// larger lane.
	SoftPd *apd = allocator_of(cq->pd ? &cq->pd->pd : nullptr);
	QueueBuf nb, nlane;
	int rc = ring_buf_alloc(apd, OPENVERBS_SOFT_RES_CQ_RING, bytes, &nb);
	if (rc)
		return rc;
	if (cq->td_mode && cap > cq->lane.mask + 1) {
		rc = queue_buf_alloc(apd, OPENVERBS_SOFT_RES_CQ_LANE,
				     size_t(cap) * sizeof(struct ibv_wc), 64, &nlane);
		if (rc) {
			queue_buf_free(&nb);
			return rc;
		}
	}
	guard_lock(&cq->poll_busy);
	// A thread-domain CQ: the TD's guard keeps the progress thread away
	// from the lane (and the ring pointer it reads) meanwhile.
	std::atomic<bool> *guard =
		cq->td_mode ? &reinterpret_cast<SoftTd *>(cq->pd->td)->busy : nullptr;
	if (guard)
		td_guard_lock(guard);
	auto unlock = [&] {
		if (guard)
			td_guard_unlock(guard);
		guard_unlock(&cq->poll_busy);
	};
	if (ring_count(cq->ring) + (cq->td_mode ? lane_count(&cq->lane) : 0) > cap) {
		unlock();
		queue_buf_free(&nb);
		queue_buf_free(&nlane);
		return EINVAL;
	}
	Segment *seg = to_sctx(ibcq->context)->seg;
	shm_lock(&seg->hdr->lock);
	uint64_t off = nb.ptr ? 0 : arena_alloc(seg, bytes, seg->my_proc);
	if (!off && !nb.ptr) {
		shm_unlock(&seg->hdr->lock);
		unlock();
		queue_buf_free(&nlane);
		return ENOMEM;
	}
	auto *ring = reinterpret_cast<RingHeader *>(off ? seg->base + off
						       : static_cast<uint8_t *>(nb.ptr));
	ring_init(ring, cell, cap, seg->my_proc);
	CqEntry &e = seg->hdr->cqs[cq->slot];
	e.ring = off ? Segment::arena_loc(off) : ring_buf_loc(nb);
	CqeCell c;
	while (ring_pop(cq->ring, &c, sizeof(c))) {
		uint64_t pos;
		void *dst = ring_claim(ring, &pos);
		if (!dst)
			break;
		memcpy(dst, &c, sizeof(c));
		ring_publish(ring, dst, pos);
	}
	if (cq->ring_off)
		arena_free(seg, cq->ring_off);
	shm_unlock(&seg->hdr->lock);
	QueueBuf old = cq->ring_buf, old_lane;
	if (nlane.ptr) {
		lane_move(&cq->lane, static_cast<struct ibv_wc *>(nlane.ptr), cap);
		old_lane = cq->lane_buf;
		cq->lane_buf = nlane;
	}
	cq->ring = ring;
	cq->ring_off = off;
	cq->ring_buf = nb;
	cq->capacity = cap;
	ibcq->cqe = int(cap);
	unlock();
	queue_buf_free(&old);
	queue_buf_free(&old_lane);
	return 0;
}

int soft_destroy_cq(struct ibv_cq *ibcq)
{
	SoftCq *cq = to_scq(ibcq);
	if (cq->users.load())
		return EBUSY;
	Segment *seg = to_sctx(ibcq->context)->seg;
	shm_lock(&seg->hdr->lock);
	CqEntry &e = seg->hdr->cqs[cq->slot];
	e.generation++;
	e.slot.store(SLOT_FREE, std::memory_order_release);
	extent_release(seg->hdr->extents.cqs, cq->slot);
	if (cq->ring_off)
		arena_free(seg, cq->ring_off);
	shm_unlock(&seg->hdr->lock);
	queue_buf_free(&cq->ring_buf);
	if (cq->pd)
		cq->pd->users.fetch_sub(1);
	queue_buf_free(&cq->lane_buf);
	free(cq);
	return 0;
}

// cq_ex polling: start_poll takes the first completion, next_poll the
// following ones, read_* report fields of the current one.
static inline SoftCq *ex_cq(struct ibv_cq_ex *c) { return reinterpret_cast<SoftCq *>(c); }

static int ex_load(SoftCq *cq)
{
	if (cq->td_mode && lane_poll(&cq->lane, 1, &cq->cur.wc)) {
		cq->cur.solicited = 0;
		cq->cur.tm_tag = 0;
		cq->cur.tm_priv = 0;
		// Lane cells carry no time: stamped when polled (clock.cpp).
		cq->cur.ts = cq->stamp ? device_clock() : 0;
		cq->vcq.cq_ex.status = cq->cur.wc.status;
		cq->vcq.cq_ex.wr_id = cq->cur.wc.wr_id;
		return 0;
	}
	if (!pop_unpurged(cq, &cq->cur))
		return ENOENT;
	cq->vcq.cq_ex.status = cq->cur.wc.status;
	cq->vcq.cq_ex.wr_id = cq->cur.wc.wr_id;
	return 0;
}

static int ex_start_poll(struct ibv_cq_ex *c, struct ibv_poll_cq_attr *attr)
{
	if (attr && attr->comp_mask)
		return EINVAL;
	SoftCq *cq = ex_cq(c);
	if (cq->td_mode)
		return ex_load(cq);
	guard_lock(&cq->poll_busy);
	int rc = ex_load(cq);
	if (rc)
		guard_unlock(&cq->poll_busy);
	return rc;
}
static int ex_next_poll(struct ibv_cq_ex *c) { return ex_load(ex_cq(c)); }
static void ex_end_poll(struct ibv_cq_ex *c)
{
	if (!ex_cq(c)->td_mode)
		guard_unlock(&ex_cq(c)->poll_busy);
}
static enum ibv_wc_opcode ex_opcode(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.opcode; }
static uint32_t ex_vendor_err(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.vendor_err; }
static uint32_t ex_byte_len(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.byte_len; }
static __be32 ex_imm(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.imm_data; }
static uint32_t ex_qp_num(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.qp_num; }
static uint32_t ex_src_qp(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.src_qp; }
static unsigned int ex_wc_flags(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.wc_flags; }
static uint32_t ex_slid(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.slid; }
static uint8_t ex_sl(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.sl; }
static uint8_t ex_dlid_path_bits(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.dlid_path_bits; }
// The tag and app_ctx of a tag-matching receive that matched (zero on other
// completions, whose cells do not carry them).
static void ex_tm_info(struct ibv_cq_ex *c, struct ibv_wc_tm_info *info)
{
	const CqeCell &cur = ex_cq(c)->cur;
	bool match = cur.wc.wc_flags & IBV_WC_TM_MATCH;
	info->tag = match ? cur.tm_tag : 0;
	info->priv = match ? cur.tm_priv : 0;
}

static void cq_ex_setup(SoftCq *cq)
{
	struct ibv_cq_ex &x = cq->vcq.cq_ex;
	x.start_poll = ex_start_poll;
	x.next_poll = ex_next_poll;
	x.end_poll = ex_end_poll;
	x.read_opcode = ex_opcode;
	x.read_vendor_err = ex_vendor_err;
	x.read_wc_flags = ex_wc_flags;
	if (cq->wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		x.read_byte_len = ex_byte_len;
	if (cq->wc_flags & IBV_WC_EX_WITH_IMM)
		x.read_imm_data = ex_imm;
	if (cq->wc_flags & IBV_WC_EX_WITH_QP_NUM)
		x.read_qp_num = ex_qp_num;
	if (cq->wc_flags & IBV_WC_EX_WITH_SRC_QP)
		x.read_src_qp = ex_src_qp;
	if (cq->wc_flags & IBV_WC_EX_WITH_SLID)
		x.read_slid = ex_slid;
	if (cq->wc_flags & IBV_WC_EX_WITH_SL)
		x.read_sl = ex_sl;
	if (cq->wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		x.read_dlid_path_bits = ex_dlid_path_bits;
	if (cq->wc_flags & IBV_WC_EX_WITH_TM_INFO)
		x.read_tm_info = ex_tm_info;
	x.comp_mask = 0;
}

} // namespace ovsoft

// ---------------------------------------------------------------- for the CM
// The project's librdmacm finds this function with dlsym (src/rdmacm/usercm,
// "Disconnects that wait for the receive queue"); it is no public API.
// It answers, for QP `qpn` of this process on ibctx's device (ibctx: a
// context of a soft or sroce device, which the CM has opened), whether its
// receive CQ holds completions the application has not polled yet:
// - *mark == 0: 1 when it does, *mark then set to the CQ's enqueue position
//   plus one (the completions to wait for are those below it); 0 when the CQ
//   is empty;
// - *mark != 0: 1 while the application has not polled up to that mark; 0
//   once it has;
// - -1: no such QP of this process, or no receive CQ (nothing to wait for).
extern "C" __attribute__((visibility("default"))) int
openverbs_soft_recv_backlog(struct ibv_context *ibctx, uint32_t qpn, uint64_t *mark)
{
	using namespace ovsoft;
	if (!ibctx || !mark)
		return -1;
	Segment *seg = to_sctx(ibctx)->seg;
	uint32_t slot = qpn - kQpnBase;
	if (!seg || slot >= kMaxQps)
		return -1;
	const QpEntry &q = seg->hdr->qps[slot];
	if (q.slot.load(std::memory_order_acquire) != SLOT_LIVE || q.owner_pid != my_pid())
		return -1;
	uint32_t cs = q.recv_cq - 1;
	if (cs >= kMaxCqs)
		return -1;
	const CqEntry &c = seg->hdr->cqs[cs];
	if (c.slot.load(std::memory_order_acquire) != SLOT_LIVE || c.owner_pid != my_pid())
		return -1;
	MapUse use;
	RingHeader *r = seg->ring(c.ring);
	if (!r)
		return -1;
	uint64_t deq = r->deq.load(std::memory_order_acquire);
	if (!*mark) {
		uint64_t enq = r->enq.load(std::memory_order_acquire);
		if (deq >= enq)
			return 0;
		*mark = enq + 1;
		return 1;
	}
	return deq + 1 < *mark ? 1 : 0;
}
