// openverbs software RDMA device: the data path.
//
// The requester is the DMA engine: post_send executes each work request in
// the caller's thread. It checks the responder's QP, memory keys and access
// rights in the shared tables, then moves the bytes straight between the two
// address spaces with process_vm_writev/process_vm_readv (memcpy within one
// process), takes receive WQEs from the responder's shared receive ring and
// writes the responder's completion into the responder's shared CQ ring.
// Every check happens before the first byte moves, so a refused access
// leaves the target memory untouched. Work that must wait (RNR, a responder
// not yet ready) stays queued in order and is retried by the context's
// progress thread, by later posts and by polls.
#include "soft.h"
#include "keys.h"
#include "log.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <signal.h>
#include <immintrin.h>
#include <sys/uio.h>
#include <unistd.h>

namespace ovsoft {

uint64_t now_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

// getpid() cached for the data path; refreshed in a child after fork().
static int32_t g_pid;
static void pid_refresh() { g_pid = getpid(); }
__attribute__((constructor)) static void pid_init()
{
	pid_refresh();
	pthread_atfork(nullptr, nullptr, pid_refresh);
}
static inline int32_t my_pid() { return g_pid; }

// ------------------------------------------------------------------ keys

static inline uint64_t range_end(uint64_t start, uint64_t length)
{
	return length > ~0ull - start ? ~0ull : start + length;
}

// A memory region `key` of seg as a consistent snapshot (keys.h). False if
// the key is unknown or not a memory region.
static inline bool local_mr_lookup(Segment *seg, uint32_t key, KeySnap &out)
{
	return key_read(seg, key, out) && out.kind == KEY_MR;
}

// Whether region m may be a gather or scatter entry of qp: registered by
// this process on this device, in the QP's PD.
static inline bool local_mr_usable(const SoftQp *qp, const KeySnap &m)
{
	return m.owner == qp->ctx->seg->my_proc && m.owner_pid == my_pid() &&
	       (m.pd_id == qp->pd_id || !qp->pd_id);
}

// The bytes [addr, addr+len) of region m (of another process) mapped into
// ours, or nullptr when the region is not backed by a shareable memfd.
// The peer's part of direct_ptr: the region's memfd fields (see MrEntry).
// pc: the caller's cache of the last mapping (or nullptr), tried first.
static uint8_t *peer_direct(SoftQp::PeerCache *pc, int32_t pid, int32_t memfd, uint32_t ino,
			    uint64_t memfd_off, uint64_t share_lo, uint64_t share_hi, uint64_t addr,
			    uint64_t len)
{
	if (memfd < 0 || addr < share_lo || addr > share_hi || len > share_hi - addr)
		return nullptr;
	uint64_t size = 0;
	uint8_t *base;
	uint64_t gen = g_peer_map_generation.load(std::memory_order_acquire);
	if (pc && pc->base && pc->gen == gen && pc->pid == pid && pc->fd == memfd &&
	    pc->ino == ino) {
		base = pc->base;
		size = pc->size;
	} else {
		base = peer_map(pid, memfd, ino, &size);
		if (!base)
			return nullptr;
		if (pc)
			*pc = SoftQp::PeerCache{base, size, gen, pid, memfd, ino};
	}
	uint64_t off = memfd_off + (addr - share_lo);
	if (off > size || len > size - off)
		return nullptr;
	return base + off;
}

static uint8_t *direct_ptr(const KeySnap &m, uint64_t addr, uint64_t len)
{
	if (m.owner_pid == my_pid())
		return reinterpret_cast<uint8_t *>(m.addr + (addr - m.iova));
	return peer_direct(nullptr, m.owner_pid, m.memfd, m.memfd_ino, m.memfd_off, m.share_lo,
			   m.share_hi, addr, len);
}

struct Iov {
	struct iovec v[kMaxSge + 2];
	int n = 0;
	uint64_t len = 0;
};

// Resolves my own SGE list. need_write: the operation writes local memory.
static inline __attribute__((always_inline)) enum ibv_wc_status
resolve_local(SoftQp *qp, const SoftWr &w, bool need_write, Iov &out)
{
	if (w.inline_len) {
		out.v[0].iov_base = const_cast<uint8_t *>(w.inline_data);
		out.v[0].iov_len = w.inline_len;
		out.n = 1;
		out.len = w.inline_len;
		return IBV_WC_SUCCESS;
	}
	Segment *seg = qp->ctx->seg;
	for (uint32_t i = 0; i < w.num_sge; i++) {
		const struct ibv_sge &s = w.sge[i];
		if (!s.length)
			continue;
		KeySnap m;
		if (!local_mr_lookup(seg, s.lkey, m) || !local_mr_usable(qp, m))
			return IBV_WC_LOC_PROT_ERR;
		if (!key_range_ok(m, s.addr, s.length))
			return IBV_WC_LOC_PROT_ERR;
		if (need_write && !(m.access & IBV_ACCESS_LOCAL_WRITE))
			return IBV_WC_LOC_PROT_ERR;
		if (__builtin_expect(m.access & IBV_ACCESS_ON_DEMAND, 0) &&
		    !odp_fault(m.addr + (s.addr - m.iova), s.length, need_write))
			return IBV_WC_LOC_PROT_ERR;
		out.v[out.n].iov_base = reinterpret_cast<void *>(m.addr + (s.addr - m.iova));
		out.v[out.n].iov_len = s.length;
		out.n++;
		out.len += s.length;
		if (out.len > kMaxMsgSize)
			return IBV_WC_LOC_LEN_ERR;
	}
	return IBV_WC_SUCCESS;
}

// ------------------------------------------------------------------ copies
//
// The device's data movement is a copy between two mappings of this process
// (its own buffers, or a peer's registered memory mapped through its memfd).
// Large copies use a plain loop of unaligned 32-byte AVX2 loads and stores
// when the CPU has AVX2: on hardware it runs at memcpy's speed, and where
// glibc's memcpy picks `rep movsb` (ERMS CPUs) but that instruction is slow
// (qemu's TCG emulates it one byte at a time: about 5x slower than the loop
// in the test bed's guest, bench/soft/copy_probe.c) it is much faster.
// Small copies and overlapping ranges go to memcpy/memmove.

static bool g_avx2;
__attribute__((constructor)) static void copy_init()
{
	__builtin_cpu_init();
	g_avx2 = __builtin_cpu_supports("avx2");
}

inline constexpr size_t kVectorCopyMin = 2048;

__attribute__((target("avx2"))) static void copy_avx2(uint8_t *d, const uint8_t *s, size_t n)
{
	size_t i = 0;
	for (; i + 256 <= n; i += 256) {
		auto *sp = reinterpret_cast<const __m256i *>(s + i);
		auto *dp = reinterpret_cast<__m256i *>(d + i);
		__m256i a = _mm256_loadu_si256(sp), b = _mm256_loadu_si256(sp + 1);
		__m256i c = _mm256_loadu_si256(sp + 2), e = _mm256_loadu_si256(sp + 3);
		__m256i f = _mm256_loadu_si256(sp + 4), g = _mm256_loadu_si256(sp + 5);
		__m256i h = _mm256_loadu_si256(sp + 6), k = _mm256_loadu_si256(sp + 7);
		_mm256_storeu_si256(dp, a);
		_mm256_storeu_si256(dp + 1, b);
		_mm256_storeu_si256(dp + 2, c);
		_mm256_storeu_si256(dp + 3, e);
		_mm256_storeu_si256(dp + 4, f);
		_mm256_storeu_si256(dp + 5, g);
		_mm256_storeu_si256(dp + 6, h);
		_mm256_storeu_si256(dp + 7, k);
	}
	for (; i + 32 <= n; i += 32)
		_mm256_storeu_si256(reinterpret_cast<__m256i *>(d + i),
				    _mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + i)));
	if (i < n)
		memcpy(d + i, s + i, n - i);
}

// Copies n <= 16 bytes inline: every load before any store, so the ranges
// may overlap.
static inline void copy_small(uint8_t *d, const uint8_t *s, size_t n)
{
	if (n >= 8) {
		uint64_t a, b;
		__builtin_memcpy(&a, s, 8);
		__builtin_memcpy(&b, s + n - 8, 8);
		__builtin_memcpy(d, &a, 8);
		__builtin_memcpy(d + n - 8, &b, 8);
	} else if (n >= 4) {
		uint32_t a, b;
		__builtin_memcpy(&a, s, 4);
		__builtin_memcpy(&b, s + n - 4, 4);
		__builtin_memcpy(d, &a, 4);
		__builtin_memcpy(d + n - 4, &b, 4);
	} else if (n) {
		uint8_t a = s[0], b = s[n / 2], c = s[n - 1];
		d[0] = a;
		d[n / 2] = b;
		d[n - 1] = c;
	}
}

#if defined(__SANITIZE_THREAD__)
// Under ThreadSanitizer: the device's payload copies are its DMA (memory of
// the application, or of another process, read and written as a NIC
// would, under no lock the application could share), so they are not
// instrumented and make no memmove call (which the runtime intercepts).
__attribute__((no_sanitize("thread"), optimize("no-tree-loop-distribute-patterns"))) static void
dma_copy(uint8_t *d, const uint8_t *s, size_t n)
{
	if (d < s)
		for (size_t i = 0; i < n; i++)
			d[i] = s[i];
	else
		for (size_t i = n; i--;)
			d[i] = s[i];
}
#endif

// memmove semantics (the ranges may overlap within one process).
static void copy_bytes(void *dst, const void *src, size_t n)
{
	auto *d = static_cast<uint8_t *>(dst);
	auto *s = static_cast<const uint8_t *>(src);
#if defined(__SANITIZE_THREAD__)
	return dma_copy(d, s, n);
#endif
	if (n <= 16)
		return copy_small(d, s, n);
	if (n >= kVectorCopyMin && g_avx2 && (d + n <= s || s + n <= d)) {
		copy_avx2(d, s, n);
		return;
	}
	memmove(d, s, n);
}

// Copies between my memory (local) and process pid's memory (remote).
// Returns 0, ESRCH (process gone) or EFAULT.
static int move_bytes(int32_t pid, const struct iovec *local, int nl, const struct iovec *remote,
		      int nr, bool to_remote)
{
	uint64_t total = 0;
	for (int i = 0; i < nl; i++)
		total += local[i].iov_len;
	if (!total)
		return 0;
	if (pid == my_pid()) {
		if (nl == 1 && nr == 1 && remote[0].iov_len >= total) {
			if (to_remote)
				copy_bytes(remote[0].iov_base, local[0].iov_base, total);
			else
				copy_bytes(local[0].iov_base, remote[0].iov_base, total);
			return 0;
		}
		int li = 0, ri = 0;
		size_t lo = 0, ro = 0;
		while (li < nl && ri < nr) {
			size_t n = std::min(local[li].iov_len - lo, remote[ri].iov_len - ro);
			auto *l = static_cast<uint8_t *>(local[li].iov_base) + lo;
			auto *r = static_cast<uint8_t *>(remote[ri].iov_base) + ro;
			if (n) {
				if (to_remote)
					copy_bytes(r, l, n);
				else
					copy_bytes(l, r, n);
			}
			lo += n;
			ro += n;
			if (lo == local[li].iov_len) {
				li++;
				lo = 0;
			}
			if (ri < nr && ro == remote[ri].iov_len) {
				ri++;
				ro = 0;
			}
		}
		return 0;
	}
	ssize_t n = to_remote ? process_vm_writev(pid, local, nl, remote, nr, 0)
			      : process_vm_readv(pid, local, nl, remote, nr, 0);
	if (n < 0)
		return errno == ESRCH ? ESRCH : EFAULT;
	if (uint64_t(n) != total)
		return EFAULT;
	return 0;
}

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

// cq_push with the completion written in place by fill(struct ibv_wc &)
// (the cell's ibv_wc, zeroed first); st is the status fill writes.
template <class Fill>
static inline int cq_push_fill(Segment *seg, uint32_t cq_slot, bool solicited,
			       enum ibv_wc_status st, Fill fill)
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
	ring_publish(r, cell, pos);
	uint32_t a = c.armed.load(std::memory_order_acquire);
	if (a && (a == 1 || solicited || st != IBV_WC_SUCCESS))
		cq_event(seg, c, a);
	return 0;
}

int cq_push(Segment *seg, uint32_t cq_slot, const struct ibv_wc &wc, bool solicited)
{
	MapUse use; // the CQ ring may be a peer's mapping
	return cq_push_fill(seg, cq_slot, solicited, wc.status,
			    [&](struct ibv_wc &out) { out = wc; });
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
static void lane_push(SoftQp *qp, uint64_t wr_id, enum ibv_wc_status st, enum ibv_wc_opcode op,
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
	CqEntry &c = *cq->entry;
	uint32_t a = c.armed.load(std::memory_order_acquire);
	if (__builtin_expect(a != 0, 0) && (a == 1 || st != IBV_WC_SUCCESS))
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

static enum ibv_wc_opcode send_wc_opcode(uint32_t op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
#if _OPENVERBS_ABI >= 56
	case IBV_WR_FLUSH:
		return IBV_WC_FLUSH;
#endif
	default:
		return IBV_WC_SEND;
	}
}

// A send completion into the send CQ's shared ring.
static __attribute__((noinline)) void complete_send_ring(SoftQp *qp, uint64_t wr_id,
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

// A send completion (when the request is signaled, or failed): into the
// lane of a thread-domain send CQ, else its shared ring.
static inline void complete_send(SoftQp *qp, uint64_t wr_id, uint32_t send_flags,
				 enum ibv_wc_opcode op, enum ibv_wc_status st, uint32_t len)
{
	if (st == IBV_WC_SUCCESS && !(send_flags & IBV_SEND_SIGNALED) && !qp->sq_sig_all)
		return;
	if (qp->lane)
		return lane_push(qp, wr_id, st, op, len);
	complete_send_ring(qp, wr_id, op, st, len);
}
static inline void complete_send(SoftQp *qp, const SoftWr &w, enum ibv_wc_status st, uint32_t len)
{
	complete_send(qp, w.wr_id, w.send_flags, send_wc_opcode(w.opcode), st, len);
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
		SoftWr &w = qp->sq[qp->sq_head];
		struct ibv_wc wc = {};
		wc.wr_id = w.wr_id;
		wc.status = IBV_WC_WR_FLUSH_ERR;
		wc.opcode = send_wc_opcode(w.opcode);
		wc.qp_num = qp->qpn;
		if (qp->lane)
			lane_push(qp, w.wr_id, IBV_WC_WR_FLUSH_ERR, wc.opcode, 0);
		else if (qp->scq)
			cq_push(seg, qp->scq->slot, wc, false);
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

// ------------------------------------------------------------------ delivery

struct Msg {
	const struct iovec *src;
	int nsrc;
	uint64_t len;       // bytes placed in the receive buffer
	uint32_t byte_len;  // reported in the receive completion
	enum ibv_wc_opcode opcode;
	uint32_t wc_flags;
	uint32_t imm;
	bool solicited;
	uint32_t src_qp;
	uint16_t slid;
	uint8_t sl;
	bool ud;
	const uint8_t *grh; // UD: 40 bytes, or nullptr
};

enum DeliverResult { DV_OK, DV_NO_WQE, DV_GONE, DV_LEN_ERR, DV_PROT_ERR };

void srq_limit_check(Segment *seg, SrqEntry &s, RingHeader *ring)
{
	uint32_t lim = s.limit.load(std::memory_order_acquire);
	if (lim && ring_count(ring) < lim && s.limit.compare_exchange_strong(lim, 0))
		async_notify(seg, s.owner_pid, s.async_fd, s.async_ino, s.user_handle,
			     IBV_EVENT_SRQ_LIMIT_REACHED);
}

static DeliverResult deliver(Segment *seg, QpEntry &d, uint32_t dqpn, SrqEntry *xsrq,
			     const Msg &m, bool connected)
{
	RingHeader *ring;
	uint32_t cq_slot;
	SrqEntry *srq = nullptr;
	if (xsrq) {
		srq = xsrq;
		cq_slot = srq->cq - 1;
	} else if (d.srq) {
		if (d.srq - 1 >= kMaxSrqs)
			return DV_GONE;
		srq = &seg->hdr->srqs[d.srq - 1];
		cq_slot = d.recv_cq - 1;
	} else {
		cq_slot = d.recv_cq - 1;
	}
	if (srq) {
		if (srq->slot.load() != SLOT_LIVE || srq->error.load())
			return DV_GONE;
		ring = seg->ring(srq->ring);
	} else {
		ring = seg->ring(d.rq_ring);
	}
	if (!ring)
		return DV_GONE;
	alignas(8) uint8_t buf[sizeof(RecvWqe) + kMaxSge * sizeof(struct ibv_sge)];
	if (!ring_pop(ring, buf, sizeof(buf)))
		return DV_NO_WQE;
	if (srq)
		srq_limit_check(seg, *srq, ring);
	auto *wqe = reinterpret_cast<RecvWqe *>(buf);
	uint32_t nsge = wqe->num_sge;
	uint32_t fit = (ring->cell_size - 8 - sizeof(RecvWqe)) / sizeof(struct ibv_sge);
	if (nsge > fit || nsge > kMaxSge)
		nsge = 0; // damaged entry: treated as an empty buffer list
	int32_t rpid = srq ? srq->owner_pid : d.owner_pid;
	uint32_t rowner = srq ? srq->owner : d.owner;
	uint32_t rpd = srq ? srq->pd_id : d.pd_id;
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	Iov dst, direct;
	bool all_direct = true;
	uint64_t cap = 0;
	for (uint32_t i = 0; i < nsge && st == IBV_WC_SUCCESS; i++) {
		const struct ibv_sge &s = wqe->sge[i];
		if (!s.length)
			continue;
		KeySnap mr;
		if (!key_read(seg, s.lkey, mr) || mr.kind != KEY_MR ||
		    mr.owner != rowner || mr.owner_pid != rpid ||
		    (rpd && mr.pd_id != rpd) || !key_range_ok(mr, s.addr, s.length) ||
		    !(mr.access & IBV_ACCESS_LOCAL_WRITE) ||
		    ((mr.access & IBV_ACCESS_ON_DEMAND) && mr.owner_pid == my_pid() &&
		     !odp_fault(mr.addr + (s.addr - mr.iova), s.length, true))) {
			st = IBV_WC_LOC_PROT_ERR;
			break;
		}
		uint8_t *dp = all_direct ? direct_ptr(mr, s.addr, s.length) : nullptr;
		if (!dp)
			all_direct = false;
		direct.v[dst.n].iov_base = dp;
		direct.v[dst.n].iov_len = s.length;
		dst.v[dst.n].iov_base = reinterpret_cast<void *>(mr.addr + (s.addr - mr.iova));
		dst.v[dst.n].iov_len = s.length;
		dst.n++;
		cap += s.length;
	}
	uint64_t need = m.len + (m.ud ? 40 : 0);
	if (st == IBV_WC_SUCCESS && need > cap)
		st = IBV_WC_LOC_LEN_ERR;
	if (st == IBV_WC_SUCCESS && need) {
		// Build the destination list: skip or fill the 40-byte GRH area first.
		struct iovec src[kMaxSge + 2];
		int ns = 0;
		if (all_direct) {
			direct.n = dst.n;
			dst = direct;
			rpid = my_pid();
		}
		Iov tgt = dst;
		if (m.ud) {
			uint64_t skip = 40;
			if (m.grh) {
				src[ns].iov_base = const_cast<uint8_t *>(m.grh);
				src[ns].iov_len = 40;
				ns++;
			} else {
				// Drop the first 40 bytes of the destination list.
				int i = 0;
				while (skip && i < tgt.n) {
					size_t take = std::min<uint64_t>(skip, tgt.v[i].iov_len);
					tgt.v[i].iov_base = static_cast<uint8_t *>(tgt.v[i].iov_base) + take;
					tgt.v[i].iov_len -= take;
					skip -= take;
					if (!tgt.v[i].iov_len)
						i++;
				}
				int k = 0;
				for (int j = i; j < tgt.n; j++)
					tgt.v[k++] = tgt.v[j];
				tgt.n = k;
			}
		}
		for (int i = 0; i < m.nsrc; i++)
			src[ns++] = m.src[i];
		int rc = move_bytes(rpid, src, ns, tgt.v, tgt.n, true);
		if (rc == ESRCH)
			return DV_GONE;
		if (rc)
			st = IBV_WC_LOC_PROT_ERR;
	}
	struct ibv_wc wc = {};
	wc.wr_id = wqe->wr_id;
	wc.status = st;
	wc.opcode = m.opcode;
	wc.byte_len = st == IBV_WC_SUCCESS ? uint32_t(m.byte_len + (m.ud ? 40 : 0)) : 0;
	wc.imm_data = m.imm;
	wc.qp_num = dqpn;
	wc.src_qp = m.src_qp;
	wc.wc_flags = m.wc_flags | ((m.ud && m.grh) ? IBV_WC_GRH : 0);
	wc.slid = m.slid;
	wc.sl = m.sl;
	cq_push(seg, cq_slot, wc, m.solicited);
	if (st != IBV_WC_SUCCESS) {
		if (connected) {
			d.state.store(IBV_QPS_ERR);
			d.remote_error.store(1);
			d.error_seq.fetch_add(1);
		}
		return st == IBV_WC_LOC_LEN_ERR ? DV_LEN_ERR : DV_PROT_ERR;
	}
	return DV_OK;
}

// Whether window snapshot m may be used through responder QP dqpn: bound,
// to that QP if it is of type 2, and its region unchanged since the bind.
static bool window_usable(Segment *seg, const KeySnap &m, uint32_t dqpn)
{
	if (!m.parent)
		return false; // unbound window
	if (m.mw_type == IBV_MW_TYPE_2 && m.bound_qpn && m.bound_qpn != dqpn)
		return false;
	// The region it was bound to, unchanged since the bind (a dereg,
	// rereg or reuse of the slot changes its seq).
	uint32_t ps = m.parent - 1;
	return ps < kMaxMrs && key_unchanged(&seg->hdr->mrs[ps], m.parent_seq);
}

// check_rkey for every kind of key (memory windows too), on a snapshot of
// the key's entry (keys.h).
static __attribute__((noinline)) bool check_rkey_full(Segment *seg, QpEntry &d, uint32_t dqpn,
						     uint32_t rkey, uint64_t addr, uint64_t len,
						     uint32_t need, uint64_t *va, uint8_t **direct)
{
	KeySnap m;
	if (!key_read(seg, rkey, m))
		return false;
	if (m.owner_pid != d.owner_pid)
		return false;
	if (d.pd_id && m.pd_id != d.pd_id)
		return false;
	if (!(m.access & need) || !(d.access & need))
		return false;
	if (m.kind == KEY_MW && !window_usable(seg, m, dqpn))
		return false;
	if (!key_range_ok(m, addr, len))
		return false;
	*va = m.addr + (addr - m.iova);
	// On-demand paging in this process: the pages must fault in (odp.cpp).
	if ((m.access & IBV_ACCESS_ON_DEMAND) && m.owner_pid == my_pid() &&
	    !odp_fault(*va, len, need & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)))
		return false;
	*direct = direct_ptr(m, addr, len);
	return true;
}

// Checks an rkey on the responder QP d for [addr, addr+len) and `need`
// (IBV_ACCESS_REMOTE_*); returns the responder's virtual address, and in
// *direct our mapping of it (nullptr: none). A memory region's key is
// checked on the few fields it needs, read in place under the entry's
// sequence lock (keys.h: the same protocol as key_snapshot, fewer loads);
// windows, and entries being written, take check_rkey_full.
static inline __attribute__((always_inline)) bool
check_rkey(Segment *seg, QpEntry &d, uint32_t dqpn, uint32_t rkey, uint64_t addr, uint64_t len,
	   uint32_t need, uint64_t *va, uint8_t **direct, SoftQp::PeerCache *pc)
{
	MrEntry *ep = key_entry(seg, rkey);
	if (!ep)
		return false;
	MrEntry &e = *ep;
	uint64_t seq = e.seq.load(std::memory_order_acquire);
	if ((seq & 1) || e.kind.load(std::memory_order_relaxed) != KEY_MR)
		return check_rkey_full(seg, d, dqpn, rkey, addr, len, need, va, direct);
	uint32_t key = kld(e.key);
	int32_t pid = kld(e.owner_pid);
	uint32_t pd_id = kld(e.pd_id), access = kld(e.access);
	if (access & IBV_ACCESS_ON_DEMAND)
		return check_rkey_full(seg, d, dqpn, rkey, addr, len, need, va, direct);
	uint64_t base = kld(e.addr), iova = kld(e.iova), length = kld(e.length);
	bool mine = pid == my_pid();
	int32_t memfd = -1;
	uint32_t ino = 0;
	uint64_t memfd_off = 0, share_lo = 0, share_hi = 0;
	if (!mine) {
		memfd = kld(e.memfd);
		ino = kld(e.memfd_ino);
		memfd_off = kld(e.memfd_off);
		share_lo = kld(e.share_lo);
		share_hi = kld(e.share_hi);
	}
	std::atomic_thread_fence(std::memory_order_acquire);
	if (e.seq.load(std::memory_order_relaxed) != seq)
		return check_rkey_full(seg, d, dqpn, rkey, addr, len, need, va, direct);
	if (key != rkey)
		return false;
	if (pid != d.owner_pid)
		return false;
	if (d.pd_id && pd_id != d.pd_id)
		return false;
	if (!(access & need) || !(d.access & need))
		return false;
	if (addr < iova)
		return false;
	uint64_t off = addr - iova;
	if (off > length || len > length - off)
		return false;
	*va = base + off;
	*direct = mine ? reinterpret_cast<uint8_t *>(base + off)
		       : peer_direct(pc, pid, memfd, ino, memfd_off, share_lo, share_hi, addr, len);
	return true;
}

#if _OPENVERBS_ABI >= 56
// The access rights a FLUSH of placement `type` needs, of the responder QP
// and of the target region alike: IBV_ACCESS_FLUSH_GLOBAL for
// IBV_FLUSH_GLOBAL, IBV_ACCESS_FLUSH_PERSISTENT for IBV_FLUSH_PERSISTENT.
static uint32_t flush_rights(uint8_t type)
{
	uint32_t need = 0;
	if (type & IBV_FLUSH_GLOBAL)
		need |= IBV_ACCESS_FLUSH_GLOBAL;
	if (type & IBV_FLUSH_PERSISTENT)
		need |= IBV_ACCESS_FLUSH_PERSISTENT;
	return need;
}

// The rkey of FLUSH w on responder QP d: a region or window of the
// responder's process and PD that grants every right in `need`; with
// IBV_FLUSH_RANGE, [remote_addr, remote_addr + flush_len) must lie inside
// it (IBV_FLUSH_MR flushes the whole region: address and length are not
// looked at). The IBA 1.5 FLUSH responder checks, as rxe makes them
// (rxe_resp.c, check_rkey).
static bool check_flush_key(Segment *seg, QpEntry &d, uint32_t dqpn, const SoftWr &w,
			    uint32_t need)
{
	KeySnap m;
	if (!key_read(seg, w.rkey, m) || m.owner_pid != d.owner_pid)
		return false;
	if (d.pd_id && m.pd_id != d.pd_id)
		return false;
	if ((m.access & need) != need)
		return false;
	if (m.kind == KEY_MW && !window_usable(seg, m, dqpn))
		return false;
	return w.flush_level == IBV_FLUSH_MR || key_range_ok(m, w.remote_addr, w.flush_len);
}
#endif

// Copies to (to_remote) or from the responder's memory: straight through our
// mapping of it when there is one, else with process_vm_*.
static inline __attribute__((always_inline)) int
move_remote(int32_t pid, const struct iovec *local, int nl, uint64_t va, uint8_t *direct,
	    uint64_t len, bool to_remote)
{
	if (direct && nl == 1 && local[0].iov_len <= len) {
		if (to_remote)
			copy_bytes(direct, local[0].iov_base, local[0].iov_len);
		else
			copy_bytes(local[0].iov_base, direct, local[0].iov_len);
		return 0;
	}
	if (direct) {
		struct iovec dv = {direct, len};
		return move_bytes(my_pid(), local, nl, &dv, 1, to_remote);
	}
	struct iovec rv = {reinterpret_cast<void *>(va), len};
	return move_bytes(pid, local, nl, &rv, 1, to_remote);
}

// ------------------------------------------------------------------ execution

enum ExecResult { EX_DONE, EX_WAIT, EX_FAILED };

static ExecResult retry_later(SoftQp *qp, SoftWr &w, bool rnr, uint32_t rnr_timer)
{
	int &left = rnr ? w.rnr_left : w.retry_left;
	if (left == 0) {
		complete_send(qp, w, rnr ? IBV_WC_RNR_RETRY_EXC_ERR : IBV_WC_RETRY_EXC_ERR, 0);
		return EX_FAILED;
	}
	if (left != 7 || !rnr)
		left--;
	uint64_t delay;
	if (rnr) {
		delay = uint64_t(kRnrTimer10us[rnr_timer & 31]) * 10000ull;
	} else {
		uint32_t t = qp->attr.timeout;
		delay = t ? (4096ull << std::min<uint32_t>(t, 31)) : 1000000ull;
		if (t == 0)
			left = 7; // no timeout: retry for ever
		delay = std::min<uint64_t>(delay, 100000000ull); // at most 100 ms per step
	}
	delay = std::max<uint64_t>(delay, 10000ull);
	w.due_ns = now_ns() + delay;
	return EX_WAIT;
}

static ExecResult exec_local(SoftQp *qp, SoftWr &w)
{
	Segment *seg = qp->ctx->seg;
	if (w.opcode == IBV_WR_LOCAL_INV) {
		// Unbind the type 2 window w.imm names, if the entry still holds
		// the window that was checked (keys.h, key_write_lock_if).
		MrEntry *e = key_entry(seg, w.imm);
		bool ok = false;
		for (int i = 0; e && i < 8 && !ok; i++) {
			KeySnap m;
			if (!key_read(seg, w.imm, m) || m.kind != KEY_MW || m.owner != seg->my_proc ||
			    m.mw_type != IBV_MW_TYPE_2)
				break;
			if (key_write_lock_if(*e, m.seq)) {
				kst(e->parent, 0u);
				key_write_unlock(*e, m.seq);
				ok = true;
			}
		}
		complete_send(qp, w, ok ? IBV_WC_SUCCESS : IBV_WC_MW_BIND_ERR, 0);
		return ok ? EX_DONE : EX_FAILED;
	}
	// IBV_WR_BIND_MW
	auto *mw = reinterpret_cast<SoftMw *>(w.mw);
	const struct ibv_mw_bind_info &b = w.bind;
	if (mw->slot >= kMaxMrs) {
		complete_send(qp, w, IBV_WC_MW_BIND_ERR, 0);
		return EX_FAILED;
	}
	MrEntry &me = seg->hdr->mrs[mw->slot];
	KeySnap cur, mr = {};
	bool ok = key_snapshot(me, cur) && cur.kind == KEY_MW &&
		  (w.bind_rkey >> 8) == (cur.key >> 8);
	if (ok && b.length) {
		ok = b.mr && key_read(seg, b.mr->lkey, mr) && mr.kind == KEY_MR &&
		     mr.owner == seg->my_proc && (mr.access & IBV_ACCESS_MW_BIND) &&
		     key_range_ok(mr, b.addr, b.length) && mr.pd_id == cur.pd_id &&
		     !(mr.access & IBV_ACCESS_ON_DEMAND); // windows over pinned regions only
		// Remote write/atomic through a window needs local write on the MR.
		if (ok && (b.mw_access_flags & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
		    !(mr.access & IBV_ACCESS_LOCAL_WRITE))
			ok = false;
	}
	// The window as checked, or nothing (it changed meanwhile).
	if (!ok || !key_write_lock_if(me, cur.seq)) {
		complete_send(qp, w, IBV_WC_MW_BIND_ERR, 0);
		return EX_FAILED;
	}
	kst(me.key, w.bind_rkey);
	if (b.length) {
		kst(me.parent, b.mr->lkey >> 8);
		kst(me.parent_seq, mr.seq);
		kst(me.addr, mr.addr + (b.addr - mr.iova));
		kst(me.iova, b.addr);
		kst(me.length, b.length);
		kst(me.access, b.mw_access_flags);
		kst(me.memfd, mr.memfd);
		kst(me.memfd_ino, mr.memfd_ino);
		kst(me.memfd_off, mr.memfd_off);
		kst(me.share_lo, mr.share_lo);
		kst(me.share_hi, mr.share_hi);
	} else {
		kst(me.parent, 0u);
		kst(me.length, 0u);
	}
	// Type 2 windows are reachable through the QP that bound them only.
	kst(me.bound_qpn, cur.mw_type == IBV_MW_TYPE_2 ? qp->qpn : 0u);
	key_write_unlock(me, cur.seq);
	mw->mw.rkey = w.bind_rkey;
	complete_send(qp, w, IBV_WC_SUCCESS, 0);
	return EX_DONE;
}

// ------------------------------------------------------------------ fabric
//
// The soft devices of one user form one fabric, as HCAs on one switch:
// soft<N> has LID N+1 and the GID fe80::<its node GUID>. A destination
// address naming another device is reached through that device's shared
// segment (its QP, SRQ, CQ and key tables), which the requester's process
// attaches on first use and keeps until it exits. A device whose segment
// does not exist (nobody has it open) is unreachable.

inline constexpr int kMaxDevices = OPENVERBS_MAX_SOFT_DEVICES; // RDMAV_SOFT_DEVICES' bound

struct Route {
	std::atomic<Segment *> seg;
	int32_t pid; // the process that attached it (a forked child re-attaches)
};
static Route g_routes[kMaxDevices];
static pthread_mutex_t g_route_lock = PTHREAD_MUTEX_INITIALIZER;

// The segment of soft<index> for this process, or nullptr when the device
// does not exist or its segment cannot be attached.
static Segment *device_segment(int index)
{
	Route &r = g_routes[index];
	Segment *s = r.seg.load(std::memory_order_acquire);
	if (s && r.pid == my_pid())
		return s;
	pthread_mutex_lock(&g_route_lock);
	s = r.seg.load(std::memory_order_relaxed);
	if (!s || r.pid != my_pid()) {
		s = nullptr;
		Segment *n = nullptr;
		if (segment_present(index) && segment_attach(index, &n) == 0) {
			r.pid = my_pid();
			r.seg.store(n, std::memory_order_release);
			s = n;
		}
	}
	pthread_mutex_unlock(&g_route_lock);
	return s;
}

void routes_release()
{
	pthread_mutex_lock(&g_route_lock);
	for (auto &r : g_routes) {
		Segment *s = r.seg.load(std::memory_order_relaxed);
		if (s && r.pid == my_pid())
			segment_detach(s);
		r.seg.store(nullptr, std::memory_order_relaxed);
	}
	pthread_mutex_unlock(&g_route_lock);
}

// The device an address vector names: its index, or -1 for the requester's
// own device (its own LID or GID, and addresses that name no soft device,
// as before there was more than one).
static int dest_device(const SoftContext *ctx, const struct ibv_ah_attr &ah)
{
	int idx = -1;
	if (ah.is_global) {
		uint64_t g = 0;
		for (int i = 8; i < 16; i++)
			g = (g << 8) | ah.grh.dgid.raw[i];
		uint64_t n = g & 0xffffffffffffull;
		if ((g & ~0xffffffffffffull) == (device_guid(0) & ~0xffffffffffffull) &&
		    n < uint64_t(kMaxDevices))
			idx = int(n);
	} else if (ah.dlid >= 1 && ah.dlid <= kMaxDevices) {
		idx = ah.dlid - 1;
	}
	return idx == ctx->index ? -1 : idx;
}

// The segment of the responder's device for address vector ah; nullptr
// when it names a device that cannot be reached.
Segment *responder_segment(SoftQp *qp, const struct ibv_ah_attr &ah)
{
	int idx = dest_device(qp->ctx, ah);
	return idx < 0 ? qp->ctx->seg : device_segment(idx);
}

static ExecResult exec_ud(SoftQp *qp, SoftWr &w)
{
	Segment *seg = qp->ctx->seg;
	Iov src;
	enum ibv_wc_status st = resolve_local(qp, w, false, src);
	if (st == IBV_WC_SUCCESS && src.len > kUdMtu)
		st = IBV_WC_LOC_LEN_ERR;
	if (st != IBV_WC_SUCCESS) {
		complete_send(qp, w, st, 0);
		return EX_FAILED;
	}
	uint32_t qkey = (w.remote_qkey & 0x80000000u) ? qp->attr.qkey : w.remote_qkey;
	uint8_t grh[40];
	const uint8_t *grhp = nullptr;
	if (w.ah.is_global) {
		memset(grh, 0, sizeof(grh));
		uint32_t vtf = (6u << 28) | (uint32_t(w.ah.grh.traffic_class) << 20) |
			       (w.ah.grh.flow_label & 0xfffff);
		grh[0] = vtf >> 24;
		grh[1] = vtf >> 16;
		grh[2] = vtf >> 8;
		grh[3] = vtf;
		grh[4] = uint8_t(src.len >> 8);
		grh[5] = uint8_t(src.len);
		grh[6] = 0x1b; // next header: IBA
		grh[7] = w.ah.grh.hop_limit;
		uint64_t guid = device_guid(qp->ctx->index);
		grh[8] = 0xfe;
		grh[9] = 0x80;
		for (int i = 0; i < 8; i++)
			grh[16 + i] = uint8_t(guid >> (56 - 8 * i));
		memcpy(grh + 24, w.ah.grh.dgid.raw, 16);
		grhp = grh;
	}
	Msg m = {};
	m.src = src.v;
	m.nsrc = src.n;
	m.len = src.len;
	m.byte_len = uint32_t(src.len);
	m.opcode = IBV_WC_RECV;
	m.wc_flags = w.opcode == IBV_WR_SEND_WITH_IMM ? IBV_WC_WITH_IMM : 0;
	m.imm = w.imm;
	m.solicited = w.send_flags & IBV_SEND_SOLICITED;
	m.src_qp = qp->qpn;
	m.slid = device_lid(qp->ctx->index);
	m.sl = w.ah.sl;
	m.ud = true;
	m.grh = grhp;
	Segment *rseg = seg; // the responder's device
	auto try_one = [&](uint32_t qpn) {
		uint32_t s = qpn - kQpnBase;
		if (qpn < kQpnBase || s >= kMaxQps)
			return;
		QpEntry &d = rseg->hdr->qps[s];
		if (d.slot.load() != SLOT_LIVE || d.qp_type != IBV_QPT_UD)
			return;
		uint32_t ds = d.state.load();
		if (ds != IBV_QPS_RTR && ds != IBV_QPS_RTS && ds != IBV_QPS_SQD)
			return;
		if (d.qkey != qkey)
			return; // Q_Key violation: silently dropped
		deliver(rseg, d, qpn, nullptr, m, false);
	};
	bool mcast = w.ah.dlid >= 0xc000 && w.ah.dlid != 0xffff;
	if (mcast || w.remote_qpn == 0xffffff) {
		for (auto &g : seg->hdr->mcast) {
			if (!g.in_use)
				continue;
			if (g.lid != w.ah.dlid &&
			    !(w.ah.is_global && !memcmp(g.gid, w.ah.grh.dgid.raw, 16)))
				continue;
			for (uint32_t qpn : g.qpn)
				if (qpn)
					try_one(qpn);
		}
	} else if (dest_device(qp->ctx, w.ah) >= 0) {
		rseg = responder_segment(qp, w.ah);
		if (rseg)
			try_one(w.remote_qpn); // else unreachable: the datagram is lost
	} else if (w.ah.dlid == device_lid(qp->ctx->index) || w.ah.is_global) {
		try_one(w.remote_qpn);
	}
	complete_send(qp, w, IBV_WC_SUCCESS, 0);
	return EX_DONE;
}

// Whether the peer liveness check may be due (its own clock test follows).
// The time-stamp counter filters first: where the clock source cannot be
// read from user space (the emulated HPET of the test bed's guest),
// clock_gettime is a system call plus an emulated device access, too dear
// for every operation. 2^20 ticks are about 1 ms or less on any TSC of 1 GHz or
// more, so the check still runs about once a millisecond of traffic.
static inline bool alive_check_due(SoftQp *qp)
{
#if defined(__x86_64__) || defined(__i386__)
	uint64_t t = __rdtsc();
	if (t - qp->alive_tsc < (1ull << 20))
		return false;
	qp->alive_tsc = t;
#endif
	return true;
}

static __attribute__((noinline)) bool responder_alive_slow(SoftQp *qp, Segment *rseg, QpEntry &d)
{
	uint64_t now = now_ns();
	if (now - qp->alive_checked_ns <= 1000000ull)
		return true;
	bool alive = true;
	if (kill(d.owner_pid, 0) != 0 && errno == ESRCH) {
		alive = false;
		// An XRC receive QP whose owner died may still be held by other
		// processes: reclaim the dead one (ownership moves to a live
		// holder) and look again.
		if (d.qp_type == IBV_QPT_XRC_RECV) {
			segment_reap(rseg);
			alive = d.slot.load(std::memory_order_acquire) == SLOT_LIVE &&
				(d.owner_pid == my_pid() || kill(d.owner_pid, 0) == 0);
		}
	}
	if (alive)
		qp->alive_checked_ns = now;
	return alive;
}

// Whether responder QP d (of device segment rseg) is live and its process
// still runs. The process is checked at most once a millisecond; the
// context's watchdog also notices dead peers (QP fatal).
static inline bool responder_alive(SoftQp *qp, Segment *rseg, QpEntry &d)
{
	if (d.slot.load(std::memory_order_acquire) != SLOT_LIVE)
		return false;
	if (d.owner_pid == my_pid() || !alive_check_due(qp))
		return true;
	return responder_alive_slow(qp, rseg, d);
}

// SEND_WITH_INV's invalidation of the window checked as `inv`: only if its
// entry still holds exactly that (keys.h): a window deallocated, reused or
// rebound since is someone else's now and stays as it is.
static void invalidate_window(const KeySnap &inv)
{
	auto *e = const_cast<MrEntry *>(inv.entry);
	if (key_write_lock_if(*e, inv.seq)) {
		kst(e->parent, 0u);
		key_write_unlock(*e, inv.seq);
	}
}

static ExecResult exec_wr(SoftQp *qp, SoftWr &w)
{
	if (w.opcode == IBV_WR_BIND_MW || w.opcode == IBV_WR_LOCAL_INV)
		return exec_local(qp, w);
	if (qp->type == IBV_QPT_UD)
		return exec_ud(qp, w);

	bool rc = qp->type != IBV_QPT_UC;
	uint32_t dqpn = qp->attr.dest_qp_num;
	uint32_t ds = dqpn - kQpnBase;
	auto fail = [&](enum ibv_wc_status st) {
		complete_send(qp, w, st, 0);
		return EX_FAILED;
	};
	if (dqpn < kQpnBase || ds >= kMaxQps)
		return rc ? fail(IBV_WC_RETRY_EXC_ERR) : (complete_send(qp, w, IBV_WC_SUCCESS, 0), EX_DONE);
	// The responder's device (this one, or another soft device of the
	// fabric); everything of the responder is looked up there.
	// Cached per QP (the caller holds the send-queue guard): modify_qp
	// forgets it when the address vector changes, and a forked child
	// looks it up again in its own routes.
	Segment *rseg = qp->rseg;
	if (__builtin_expect(!rseg || qp->rseg_pid != my_pid(), 0)) {
		rseg = responder_segment(qp, qp->attr.ah_attr);
		if (!rseg) // no such device: never acknowledged
			return rc ? retry_later(qp, w, false, 0)
				  : (complete_send(qp, w, IBV_WC_SUCCESS, 0), EX_DONE);
		qp->rseg = rseg;
		qp->rseg_pid = my_pid();
	}
	QpEntry &d = rseg->hdr->qps[ds];
	bool alive = responder_alive(qp, rseg, d);
	uint32_t want = qp->type == IBV_QPT_XRC_SEND ? IBV_QPT_XRC_RECV : qp->type;
	// A responder that is gone, in error or not connected to us never
	// acknowledges: the requester retries (timeout, retry_cnt) and then
	// reports retry-exceeded, as an HCA would.
	auto gone = [&]() {
		return rc ? retry_later(qp, w, false, 0)
			  : (complete_send(qp, w, IBV_WC_SUCCESS, 0), EX_DONE);
	};
	if (!alive || d.qp_type != want)
		return gone();
	uint32_t dstate = d.state.load(std::memory_order_acquire);
	if (dstate == IBV_QPS_ERR)
		return gone();
	if (dstate != IBV_QPS_RTR && dstate != IBV_QPS_RTS && dstate != IBV_QPS_SQD &&
	    dstate != IBV_QPS_SQE) {
		// Responder not ready: its HCA would drop the packets; we retry.
		if (!rc) {
			complete_send(qp, w, IBV_WC_SUCCESS, 0);
			return EX_DONE;
		}
		return retry_later(qp, w, false, 0);
	}
	if (qp->type == IBV_QPT_RC && d.dest_qpn != qp->qpn)
		return gone(); // not connected to us: its HCA drops our packets

	SrqEntry *xsrq = nullptr;
	if (qp->type == IBV_QPT_XRC_SEND) {
		uint32_t ss = w.xrc_srqn - kSrqnBase;
		if (w.xrc_srqn < kSrqnBase || ss >= kMaxSrqs)
			return fail(IBV_WC_REM_INV_REQ_ERR);
		xsrq = &rseg->hdr->srqs[ss];
		if (xsrq->slot.load() != SLOT_LIVE || xsrq->srq_type != IBV_SRQT_XRC ||
		    xsrq->xrcd != d.xrcd)
			return fail(IBV_WC_REM_INV_REQ_ERR);
	}

	Msg m = {};
	m.src_qp = qp->qpn;
	m.slid = device_lid(qp->ctx->index);
	m.sl = qp->attr.ah_attr.sl;
	m.solicited = w.send_flags & IBV_SEND_SOLICITED;
	m.imm = w.imm;

	switch (w.opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_SEND_WITH_INV: {
		Iov src;
		enum ibv_wc_status st = resolve_local(qp, w, false, src);
		if (st != IBV_WC_SUCCESS)
			return fail(st);
		m.src = src.v;
		m.nsrc = src.n;
		m.len = src.len;
		m.byte_len = uint32_t(src.len);
		m.opcode = IBV_WC_RECV;
		if (w.opcode == IBV_WR_SEND_WITH_IMM)
			m.wc_flags = IBV_WC_WITH_IMM;
		KeySnap inv = {};
		if (w.opcode == IBV_WR_SEND_WITH_INV) {
			// Invalidate a type 2 window of the responder, then report it.
			if (!key_read(rseg, w.imm, inv) || inv.kind != KEY_MW ||
			    inv.owner_pid != d.owner_pid || inv.mw_type != IBV_MW_TYPE_2)
				return fail(IBV_WC_REM_OP_ERR);
			m.wc_flags = IBV_WC_WITH_INV;
			m.imm = w.imm; // invalidated rkey, reported in imm_data
		}
		DeliverResult r = deliver(rseg, d, dqpn, xsrq, m, rc);
		switch (r) {
		case DV_OK:
			if (w.opcode == IBV_WR_SEND_WITH_INV)
				invalidate_window(inv);
			complete_send(qp, w, IBV_WC_SUCCESS, 0);
			return EX_DONE;
		case DV_NO_WQE:
			if (!rc) {
				complete_send(qp, w, IBV_WC_SUCCESS, 0); // UC: dropped
				return EX_DONE;
			}
			return retry_later(qp, w, true, d.min_rnr_timer);
		case DV_GONE:
			return gone();
		case DV_LEN_ERR:
			return rc ? fail(IBV_WC_REM_INV_REQ_ERR)
				  : (complete_send(qp, w, IBV_WC_SUCCESS, 0), EX_DONE);
		case DV_PROT_ERR:
			return rc ? fail(IBV_WC_REM_OP_ERR)
				  : (complete_send(qp, w, IBV_WC_SUCCESS, 0), EX_DONE);
		}
		return EX_DONE;
	}
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM: {
		Iov src;
		enum ibv_wc_status st = resolve_local(qp, w, false, src);
		if (st != IBV_WC_SUCCESS)
			return fail(st);
		uint64_t va = 0;
		uint8_t *direct = nullptr;
		if (src.len && !check_rkey(rseg, d, dqpn, w.rkey, w.remote_addr, src.len,
					   IBV_ACCESS_REMOTE_WRITE, &va, &direct, &qp->peer))
			return rc ? fail(IBV_WC_REM_ACCESS_ERR)
				  : (complete_send(qp, w, IBV_WC_SUCCESS, 0), EX_DONE);
		if (w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
			// Needs a receive WQE before any byte moves (RNR otherwise).
			RingHeader *ring = nullptr;
			if (xsrq)
				ring = rseg->ring(xsrq->ring);
			else if (d.srq && d.srq - 1 < kMaxSrqs)
				ring = rseg->ring(rseg->hdr->srqs[d.srq - 1].ring);
			else
				ring = rseg->ring(d.rq_ring);
			if (ring && !ring_count(ring)) {
				if (!rc) {
					complete_send(qp, w, IBV_WC_SUCCESS, 0);
					return EX_DONE;
				}
				return retry_later(qp, w, true, d.min_rnr_timer);
			}
		}
		if (src.len) {
			int e = move_remote(d.owner_pid, src.v, src.n, va, direct, src.len, true);
			if (e == ESRCH)
				return gone();
			if (e)
				return rc ? fail(IBV_WC_REM_ACCESS_ERR)
					  : (complete_send(qp, w, IBV_WC_SUCCESS, 0), EX_DONE);
		}
		if (w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
			m.src = nullptr;
			m.nsrc = 0;
			m.len = 0;
			m.byte_len = uint32_t(src.len);
			m.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
			m.wc_flags = IBV_WC_WITH_IMM;
			DeliverResult r = deliver(rseg, d, dqpn, xsrq, m, rc);
			if (r == DV_GONE && rc)
				return gone();
			if (r == DV_NO_WQE && rc)
				return retry_later(qp, w, true, d.min_rnr_timer);
		}
		complete_send(qp, w, IBV_WC_SUCCESS, 0);
		return EX_DONE;
	}
	case IBV_WR_RDMA_READ: {
		if (!rc)
			return fail(IBV_WC_LOC_QP_OP_ERR);
		Iov dst;
		enum ibv_wc_status st = resolve_local(qp, w, true, dst);
		if (st != IBV_WC_SUCCESS)
			return fail(st);
		uint64_t va = 0;
		uint8_t *direct = nullptr;
		if (dst.len && !check_rkey(rseg, d, dqpn, w.rkey, w.remote_addr, dst.len,
					   IBV_ACCESS_REMOTE_READ, &va, &direct, &qp->peer))
			return fail(IBV_WC_REM_ACCESS_ERR);
		if (dst.len) {
			int e = move_remote(d.owner_pid, dst.v, dst.n, va, direct, dst.len, false);
			if (e == ESRCH)
				return gone();
			if (e)
				return fail(IBV_WC_REM_ACCESS_ERR);
		}
		complete_send(qp, w, IBV_WC_SUCCESS, uint32_t(dst.len));
		return EX_DONE;
	}
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD: {
		if (!rc)
			return fail(IBV_WC_LOC_QP_OP_ERR);
		Iov dst;
		enum ibv_wc_status st = resolve_local(qp, w, true, dst);
		if (st != IBV_WC_SUCCESS)
			return fail(st);
		if (dst.len != 8)
			return fail(IBV_WC_LOC_LEN_ERR);
		if (w.remote_addr & 7)
			return fail(IBV_WC_REM_INV_REQ_ERR);
		uint64_t va = 0;
		uint8_t *direct = nullptr;
		if (!check_rkey(rseg, d, dqpn, w.rkey, w.remote_addr, 8, IBV_ACCESS_REMOTE_ATOMIC, &va,
				&direct, &qp->peer))
			return fail(IBV_WC_REM_ACCESS_ERR);
		uint64_t old = 0, val;
		int e = 0;
		struct iovec lv = {&old, 8}, rv = {reinterpret_cast<void *>(va), 8};
		shm_lock(&rseg->hdr->atomic_lock);
		if (direct) {
			// Mapped: a real atomic, also against the owner's own CPU accesses.
			auto *p = reinterpret_cast<uint64_t *>(direct);
			if (w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
				old = w.compare_add;
				__atomic_compare_exchange_n(p, &old, w.swap, false, __ATOMIC_SEQ_CST,
							    __ATOMIC_SEQ_CST);
			} else {
				old = __atomic_fetch_add(p, w.compare_add, __ATOMIC_SEQ_CST);
			}
		} else {
			e = move_bytes(d.owner_pid, &lv, 1, &rv, 1, false);
			if (!e) {
				if (w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP)
					val = old == w.compare_add ? w.swap : old;
				else
					val = old + w.compare_add;
				struct iovec nv = {&val, 8};
				if (val != old || w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
					e = move_bytes(d.owner_pid, &nv, 1, &rv, 1, true);
			}
		}
		shm_unlock(&rseg->hdr->atomic_lock);
		if (e == ESRCH)
			return gone();
		if (e)
			return fail(IBV_WC_REM_ACCESS_ERR);
		struct iovec ov = {&old, 8};
		if (move_bytes(my_pid(), dst.v, dst.n, &ov, 1, false))
			return fail(IBV_WC_LOC_PROT_ERR);
		complete_send(qp, w, IBV_WC_SUCCESS, 8);
		return EX_DONE;
	}
#if _OPENVERBS_ABI >= 56
	case IBV_WR_FLUSH: {
		if (!rc)
			return fail(IBV_WC_LOC_QP_OP_ERR);
		uint32_t need = flush_rights(w.flush_type);
		// A placement type the responder QP does not accept is an invalid
		// request for it; a key without the right, a remote access error
		// (IBA 1.5 FLUSH; rxe: check_qp_attr_access, check_rkey).
		if ((d.access & need) != need)
			return fail(IBV_WC_REM_INV_REQ_ERR);
		if (!check_flush_key(rseg, d, dqpn, w, need))
			return fail(IBV_WC_REM_ACCESS_ERR);
		// The bytes of every earlier request of this QP are already in the
		// responder's memory (requests run in order, each to its end,
		// under the send-queue guard, whose hand-over orders the stores of
		// whichever thread ran them). A full fence makes them globally
		// visible (regular, non-temporal and kernel-made stores alike)
		// before the completion says the flush is done. Persistence is
		// never granted (no region has IBV_ACCESS_FLUSH_PERSISTENT).
		std::atomic_thread_fence(std::memory_order_seq_cst);
		complete_send(qp, w, IBV_WC_SUCCESS, 0);
		return EX_DONE;
	}
#endif
	default:
		return fail(IBV_WC_LOC_QP_OP_ERR);
	}
}

// Runs queued work in order. Caller holds the send-queue guard.
static void run_queue(SoftQp *qp, bool force)
{
	uint64_t now = 0;
	while (qp->sq_count) {
		SoftWr &w = qp->sq[qp->sq_head];
		if (w.due_ns && !force) {
			if (!now)
				now = now_ns();
			if (now < w.due_ns)
				return;
		}
		uint32_t st = qp->entry->state.load(std::memory_order_acquire);
		if (st == IBV_QPS_ERR) {
			qp_to_error(qp, false);
			return;
		}
		if (st != IBV_QPS_RTS)
			return; // SQD: wait
		ExecResult r = exec_wr(qp, w);
		if (r == EX_WAIT)
			return;
		w.due_ns = 0;
		qp->sq_head = (qp->sq_head + 1) % qp->sq_depth;
		sq_set_pending(qp, qp->sq_count - 1);
		if (r == EX_FAILED) {
			qp_to_error(qp, false); // flushes what follows
			return;
		}
	}
}

uint64_t progress_qp(SoftQp *qp, bool force)
{
	if (qp->roce)
		return 0; // RoCE QPs: their own transport retries (roce/transport.cpp)
	if (!qp_sq_trylock(qp))
		return 1;
	run_queue(qp, force);
	uint64_t due = 0;
	if (qp->sq_count)
		due = qp->sq[qp->sq_head].due_ns ? qp->sq[qp->sq_head].due_ns : 1;
	qp_sq_unlock(qp);
	return due;
}

// Validates and queues n work requests, then runs the queue.
// Returns 0 or an errno value; *done says how many were accepted.
static int queue_wrs(SoftQp *qp, SoftWr *wrs, uint32_t n, uint32_t *done)
{
	*done = 0;
	uint32_t st = qp->entry->state.load(std::memory_order_acquire);
	for (uint32_t i = 0; i < n; i++) {
		SoftWr &w = wrs[i];
		if (st == IBV_QPS_ERR) {
			struct ibv_wc wc = {};
			wc.wr_id = w.wr_id;
			wc.status = IBV_WC_WR_FLUSH_ERR;
			wc.opcode = send_wc_opcode(w.opcode);
			wc.qp_num = qp->qpn;
			if (qp->lane)
				lane_push(qp, w.wr_id, IBV_WC_WR_FLUSH_ERR, wc.opcode, 0);
			else
				cq_push(qp->ctx->seg, qp->scq->slot, wc, false);
			++*done;
			continue;
		}
		if (qp->sq_count >= qp->sq_depth)
			return ENOMEM;
		uint32_t tail = (qp->sq_head + qp->sq_count) % qp->sq_depth;
		SoftWr &slot = qp->sq[tail];
		// Copy only what is used.
		size_t head = offsetof(SoftWr, sge);
		memcpy(&slot, &w, head);
		memcpy(slot.sge, w.sge, w.num_sge * sizeof(struct ibv_sge));
		if (w.inline_len)
			memcpy(slot.inline_data, w.inline_data, w.inline_len);
		slot.rnr_left = qp->attr.rnr_retry;
		slot.retry_left = qp->attr.retry_cnt;
		slot.due_ns = 0;
		sq_set_pending(qp, qp->sq_count + 1);
		++*done;
	}
	return 0;
}

int submit_wrs(SoftQp *qp, SoftWr *wrs, uint32_t n)
{
	qp_sq_lock(qp);
	// All or nothing (ibv_wr_post(3)): a batch that does not fit behind
	// the work already queued is refused before any of it is queued. In
	// the error state every request completes with a flush error instead.
	if (qp->entry->state.load(std::memory_order_acquire) != IBV_QPS_ERR &&
	    n > qp->sq_depth - qp->sq_count) {
		qp_sq_unlock(qp);
		return ENOMEM;
	}
	uint32_t done = 0;
	int rc = queue_wrs(qp, wrs, n, &done);
	run_queue(qp, false);
	// Anything left waits for a retry: account it for the progress thread.
	bool waiting = false;
	for (uint32_t i = 0, h = qp->sq_head; i < qp->sq_count; i++, h = (h + 1) % qp->sq_depth)
		if (qp->sq[h].due_ns) {
			waiting = true;
			break;
		}
	qp_sq_unlock(qp);
	if (waiting) {
		pthread_mutex_lock(&qp->ctx->wake_lock);
		pthread_cond_signal(&qp->ctx->wake);
		pthread_mutex_unlock(&qp->ctx->wake_lock);
	}
	return rc;
}

// Converts one ibv_send_wr. Returns 0 or EINVAL.
int convert_wr(SoftQp *qp, const struct ibv_send_wr *wr, SoftWr &w)
{
	w.wr_id = wr->wr_id;
	w.opcode = wr->opcode;
	w.send_flags = wr->send_flags;
	w.imm = wr->imm_data;
	w.num_sge = 0;
	w.inline_len = 0;
	w.has_ah = false;
	w.due_ns = 0;
	if (wr->num_sge < 0 || uint32_t(wr->num_sge) > qp->cap.max_send_sge)
		return EINVAL;
	if (wr->num_sge && !wr->sg_list)
		return EINVAL;
	enum ibv_qp_type t = qp->type;
	switch (wr->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		break;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		if (t == IBV_QPT_UD)
			return EINVAL;
		w.remote_addr = wr->wr.rdma.remote_addr;
		w.rkey = wr->wr.rdma.rkey;
		break;
	case IBV_WR_RDMA_READ:
		if (t == IBV_QPT_UD || t == IBV_QPT_UC)
			return EINVAL;
		w.remote_addr = wr->wr.rdma.remote_addr;
		w.rkey = wr->wr.rdma.rkey;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		if (t == IBV_QPT_UD || t == IBV_QPT_UC)
			return EINVAL;
		w.remote_addr = wr->wr.atomic.remote_addr;
		w.rkey = wr->wr.atomic.rkey;
		w.compare_add = wr->wr.atomic.compare_add;
		w.swap = wr->wr.atomic.swap;
		break;
	case IBV_WR_SEND_WITH_INV:
		if (t == IBV_QPT_UD || t == IBV_QPT_UC)
			return EINVAL;
		w.imm = wr->invalidate_rkey;
		break;
	case IBV_WR_LOCAL_INV:
		if (t == IBV_QPT_UD)
			return EINVAL;
		w.imm = wr->invalidate_rkey;
		break;
	case IBV_WR_BIND_MW:
		if (t == IBV_QPT_UD || !wr->bind_mw.mw || wr->bind_mw.mw->type != IBV_MW_TYPE_2 ||
		    wr->bind_mw.mw->context != qp->vqp.qp.context)
			return EINVAL;
		w.mw = wr->bind_mw.mw;
		w.bind_rkey = wr->bind_mw.rkey;
		w.bind = wr->bind_mw.bind_info;
		return 0;
	default:
		return EINVAL;
	}
	if (t == IBV_QPT_UD) {
		if (!wr->wr.ud.ah)
			return EINVAL;
		auto *ah = reinterpret_cast<SoftAh *>(wr->wr.ud.ah);
		w.ah = ah->attr;
		w.has_ah = true;
		w.remote_qpn = wr->wr.ud.remote_qpn & 0xffffff;
		w.remote_qkey = wr->wr.ud.remote_qkey;
	}
	if (t == IBV_QPT_XRC_SEND)
		w.xrc_srqn = wr->qp_type.xrc.remote_srqn;
	if (wr->send_flags & IBV_SEND_INLINE) {
		if (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM &&
		    wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM)
			return EINVAL;
		uint64_t total = 0;
		for (int i = 0; i < wr->num_sge; i++)
			total += wr->sg_list[i].length;
		if (total > qp->cap.max_inline_data)
			return EINVAL;
		uint32_t off = 0;
		for (int i = 0; i < wr->num_sge; i++) {
			uint32_t len = wr->sg_list[i].length;
			auto *src = reinterpret_cast<const uint8_t *>(uintptr_t(wr->sg_list[i].addr));
			if (len <= 16)
				copy_small(w.inline_data + off, src, len);
			else
				memcpy(w.inline_data + off, src, len);
			off += wr->sg_list[i].length;
		}
		w.inline_len = off; // 0: behaves like an empty gather list
		return 0;
	}
	w.num_sge = wr->num_sge;
	for (int i = 0; i < wr->num_sge; i++)
		w.sge[i] = wr->sg_list[i];
	return 0;
}

// ------------------------------------------------------------------ fast write
//
// One RDMA WRITE with one gather entry, posted alone on an RC or UC QP in
// RTS with nothing queued: the small one-sided message of latency-bound
// programs (perftest's ib_write_lat, put-style protocols). fast_write makes
// exec_wr's checks, but keeps what it established about the two memory
// regions per QP (wcache, lcache) and re-validates it with one load (the
// entry's sequence, keys.h: unchanged means the very contents that were
// checked), so the bytes move after a few dozen instructions.
// Whenever a check fails or anything is unusual it declines, and the
// general path runs the request and reports whatever is wrong.

// Checks memory region `rkey` of the responder's device rseg for remote
// writes and caches the result in qp->wcache. False: not cacheable (unknown
// key, a window, no remote write, a peer region without a shareable memfd).
static __attribute__((noinline)) bool wcache_fill(SoftQp *qp, Segment *rseg, uint32_t rkey)
{
	KeySnap e;
	if (!key_read(rseg, rkey, e) || e.kind != KEY_MR || !(e.access & IBV_ACCESS_REMOTE_WRITE) ||
	    (e.access & IBV_ACCESS_ON_DEMAND))
		return false;
	// Read before mapping: a mapping replaced meanwhile makes it stale.
	uint64_t gen = g_peer_map_generation.load(std::memory_order_acquire);
	uint64_t lo = e.iova, hi = range_end(e.iova, e.length), delta;
	if (e.owner_pid == my_pid()) {
		delta = e.addr - e.iova;
	} else {
		if (e.memfd < 0)
			return false;
		uint64_t size = 0;
		uint8_t *map = peer_map(e.owner_pid, e.memfd, e.memfd_ino, &size);
		if (!map || e.memfd_off > size)
			return false;
		// [share_lo, share_hi) starts at file offset memfd_off; the
		// mapping has size bytes.
		lo = std::max(lo, e.share_lo);
		hi = std::min({hi, e.share_hi, range_end(e.share_lo, size - e.memfd_off)});
		if (lo >= hi)
			return false;
		delta = uintptr_t(map) + e.memfd_off - e.share_lo;
	}
	qp->wcache = SoftQp::RemoteWriteCache{e.entry, rseg,  e.seq,	    gen,	 lo, hi,
					      delta,   rkey,  e.owner_pid, e.pd_id, my_pid()};
	return true;
}

// Checks my memory region `lkey` as a gather source of qp and caches the
// result in qp->lcache. False: unknown key, not mine, another PD.
static __attribute__((noinline)) bool lcache_fill(SoftQp *qp, uint32_t lkey)
{
	KeySnap m;
	if (!local_mr_lookup(qp->ctx->seg, lkey, m) || !local_mr_usable(qp, m) ||
	    (m.access & IBV_ACCESS_ON_DEMAND))
		return false;
	qp->lcache = SoftQp::LocalSrcCache{m.entry, m.seq, m.iova, range_end(m.iova, m.length),
					   m.addr - m.iova, lkey, my_pid()};
	return true;
}

// Executes wr (see above; the caller holds the send-queue guard and checked
// the request's shape). Returns 0 when done, -1 to leave it to the general
// path (nothing has been changed then).
static inline int fast_write_locked(SoftQp *qp, const struct ibv_send_wr *wr, uint32_t len)
{
	if (qp->sq_count)
		return -1; // keep the order
	if (qp->entry->state.load(std::memory_order_acquire) != IBV_QPS_RTS)
		return -1;
	int32_t me = my_pid();
	const struct ibv_sge &sg = *wr->sg_list;
	const uint8_t *src;
	if (wr->send_flags & IBV_SEND_INLINE) {
		src = reinterpret_cast<const uint8_t *>(uintptr_t(sg.addr));
	} else {
		SoftQp::LocalSrcCache &lc = qp->lcache;
		if (!(lc.entry && lc.lkey == sg.lkey && lc.my_pid == me &&
		      key_unchanged(lc.entry, lc.seq)) &&
		    !lcache_fill(qp, sg.lkey))
			return -1;
		if (sg.addr - lc.lo > lc.hi - lc.lo || len > lc.hi - sg.addr)
			return -1;
		src = reinterpret_cast<const uint8_t *>(uintptr_t(sg.addr + lc.delta));
	}
	// The responder: as exec_wr checks it.
	Segment *rseg = qp->rseg;
	if (__builtin_expect(!rseg || qp->rseg_pid != me, 0)) {
		rseg = responder_segment(qp, qp->attr.ah_attr);
		if (!rseg)
			return -1;
		qp->rseg = rseg;
		qp->rseg_pid = me;
	}
	uint32_t ds = qp->attr.dest_qp_num - kQpnBase;
	if (ds >= kMaxQps)
		return -1;
	QpEntry &d = rseg->hdr->qps[ds];
	if (!responder_alive(qp, rseg, d) || d.qp_type != uint32_t(qp->type))
		return -1;
	uint32_t dstate = d.state.load(std::memory_order_acquire);
	if (dstate != IBV_QPS_RTR && dstate != IBV_QPS_RTS && dstate != IBV_QPS_SQD &&
	    dstate != IBV_QPS_SQE)
		return -1;
	if (qp->type == IBV_QPT_RC && d.dest_qpn != qp->qpn)
		return -1;
	// The target region.
	uint32_t rkey = wr->wr.rdma.rkey;
	SoftQp::RemoteWriteCache &wc = qp->wcache;
	if (!(wc.entry && wc.rkey == rkey && wc.seg == rseg && wc.my_pid == me &&
	      wc.map_gen == g_peer_map_generation.load(std::memory_order_acquire) &&
	      key_unchanged(wc.entry, wc.seq)) &&
	    !wcache_fill(qp, rseg, rkey))
		return -1;
	if (wc.owner_pid != d.owner_pid || (d.pd_id && wc.pd_id != d.pd_id) ||
	    !(d.access & IBV_ACCESS_REMOTE_WRITE))
		return -1;
	uint64_t raddr = wr->wr.rdma.remote_addr;
	if (raddr - wc.lo > wc.hi - wc.lo || len > wc.hi - raddr)
		return -1;
	auto *dst = reinterpret_cast<uint8_t *>(uintptr_t(raddr + wc.delta));
	if (len <= 16)
		copy_small(dst, src, len);
	else
		copy_bytes(dst, src, len);
	complete_send(qp, wr->wr_id, wr->send_flags, IBV_WC_RDMA_WRITE, IBV_WC_SUCCESS, 0);
	return 0;
}

// The general path of ibv_post_send: every opcode, chains, queued work.
static __attribute__((noinline)) int post_send_general(SoftQp *qp, struct ibv_send_wr *wr,
						       struct ibv_send_wr **bad)
{
	if (!qp->sq || !qp->scq) {
		*bad = wr;
		return EINVAL;
	}
	uint32_t st = qp->entry->state.load(std::memory_order_acquire);
	if (st != IBV_QPS_RTS && st != IBV_QPS_ERR && st != IBV_QPS_SQD) {
		*bad = wr;
		return EINVAL;
	}
	qp_sq_lock(qp);
	int rc = 0;
	bool waiting = false;
	SoftWr *w = static_cast<SoftWr *>(alloca(sizeof(SoftWr)));
	for (; wr; wr = wr->next) {
		rc = convert_wr(qp, wr, *w);
		if (rc) {
			*bad = wr;
			break;
		}
		// Nothing queued ahead of it: execute it from the stack.
		if (!qp->sq_count &&
		    qp->entry->state.load(std::memory_order_acquire) ==
			    IBV_QPS_RTS) {
			w->rnr_left = qp->attr.rnr_retry;
			w->retry_left = qp->attr.retry_cnt;
			w->due_ns = 0;
			ExecResult r = exec_wr(qp, *w);
			if (r == EX_FAILED) {
				qp_to_error(qp, false);
			} else if (r == EX_WAIT) {
				// Keep it (with its retry state) at the head of the queue.
				SoftWr &slot = qp->sq[qp->sq_head];
				memcpy(&slot, w, offsetof(SoftWr, sge));
				memcpy(slot.sge, w->sge, w->num_sge * sizeof(struct ibv_sge));
				if (w->inline_len)
					memcpy(slot.inline_data, w->inline_data, w->inline_len);
				sq_set_pending(qp, 1);
			}
			continue;
		}
		uint32_t done;
		rc = queue_wrs(qp, w, 1, &done);
		if (rc) {
			*bad = wr;
			break;
		}
		run_queue(qp, false);
	}
	for (uint32_t i = 0, h = qp->sq_head; i < qp->sq_count; i++, h = (h + 1) % qp->sq_depth)
		if (qp->sq[h].due_ns) {
			waiting = true;
			break;
		}
	qp_sq_unlock(qp);
	if (waiting) {
		pthread_mutex_lock(&qp->ctx->wake_lock);
		pthread_cond_signal(&qp->ctx->wake);
		pthread_mutex_unlock(&qp->ctx->wake_lock);
	}
	return rc;
}

// ibv_post_send (the context's post_send operation): one RDMA WRITE takes
// fast_write when it can, everything else the general path.
int soft_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct ibv_send_wr *dummy;
	if (!bad)
		bad = &dummy;
	if (!wr)
		return 0;
	SoftQp *qp = to_sqp(ibqp);
	if (!wr->next && wr->opcode == IBV_WR_RDMA_WRITE && wr->num_sge == 1 && wr->sg_list &&
	    (qp->type == IBV_QPT_RC || qp->type == IBV_QPT_UC) && qp->sq && qp->scq &&
	    qp->cap.max_send_sge) {
		uint32_t len = wr->sg_list->length;
		if (len && len <= kMaxMsgSize &&
		    (!(wr->send_flags & IBV_SEND_INLINE) || len <= qp->cap.max_inline_data)) {
			qp_sq_lock(qp);
			int r = fast_write_locked(qp, wr, len);
			qp_sq_unlock(qp);
			if (r == 0)
				return 0;
		}
	}
	return post_send_general(qp, wr, bad);
}

} // namespace ovsoft
