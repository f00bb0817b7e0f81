// openverbs software RDMA device: what the data path's parts share (internal).
//
// The engine is split by role, as Linux's rxe is: requester.cpp executes
// work requests (post_send and its queue), responder.cpp makes the
// responder's checks and places the data (receive WQEs, memory keys, the
// fabric of devices), completer.cpp writes completions and events, and
// dma.cpp moves the bytes. The few functions every role inlines on the
// fast path live here.
#pragma once

#include "soft.h"
#include "keys.h"

#include <sys/uio.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace ovsoft {

// ------------------------------------------------------------------ process (dma.cpp)

// getpid() cached for the data path; refreshed in a child after fork().
extern int32_t g_pid;
inline int32_t my_pid() { return g_pid; }

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
uint8_t *peer_direct(SoftQp::PeerCache *pc, int32_t pid, int32_t memfd, uint32_t ino,
		    uint64_t memfd_off, uint64_t share_lo, uint64_t share_hi, uint64_t addr,
		    uint64_t len);
// Our mapping of [addr, addr+len) of region or window m: the owner's
// address in our own process, else peer_direct's; nullptr when none.
uint8_t *direct_ptr(const KeySnap &m, uint64_t addr, uint64_t len);

struct Iov {
	struct iovec v[kMaxSge + 2];
	int n = 0;
	uint64_t len = 0;
	Iov() = default;
	// Copies the n entries in use, not the whole array (half a KiB: a
	// receive's copies of its scatter list cost more than the rest of it).
	Iov(const Iov &o) : n(o.n), len(o.len) { __builtin_memcpy(v, o.v, size_t(n) * sizeof(v[0])); }
	Iov &operator=(const Iov &o)
	{
		n = o.n;
		len = o.len;
		__builtin_memmove(v, o.v, size_t(n) * sizeof(v[0]));
		return *this;
	}
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

// ------------------------------------------------------------------ copies (dma.cpp)

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

// memmove semantics (the ranges may overlap within one process).
void copy_bytes(void *dst, const void *src, size_t n);

// A payload the device moves into a registered region (its DMA): short ones
// inline; under ThreadSanitizer always through copy_bytes, whose copy is not
// instrumented (dma.cpp), since the application may read the region while
// the device writes it, as it may with a NIC (rsockets polls the peer's
// RDMA-written target list that way).
static inline void copy_payload(void *dst, const void *src, size_t n)
{
#if !defined(__SANITIZE_THREAD__)
	if (n <= 16)
		return copy_small(static_cast<uint8_t *>(dst), static_cast<const uint8_t *>(src), n);
#endif
	copy_bytes(dst, src, n);
}
// Copies between my memory (local) and process pid's memory (remote).
// Returns 0, ESRCH (process gone) or EFAULT.
int move_bytes(int32_t pid, const struct iovec *local, int nl, const struct iovec *remote, int nr,
	       bool to_remote);

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

// ------------------------------------------------------------------ completions (completer.cpp)

// A send completion into the thread-domain lane of qp's send CQ (the
// caller holds the thread domain's guard), or into the send CQ's shared ring.
void lane_push(SoftQp *qp, uint64_t wr_id, enum ibv_wc_status st, enum ibv_wc_opcode op,
	       uint32_t len);
void complete_send_ring(SoftQp *qp, uint64_t wr_id, enum ibv_wc_opcode op,
			enum ibv_wc_status st, uint32_t len);

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
	case IBV_WR_ATOMIC_WRITE:
		return IBV_WC_ATOMIC_WRITE;
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

// Raw packet QPs (raw.cpp): steers the frame src that raw packet QP qp
// sends to the receive queues whose flow rules match it; the send's status.
enum ibv_wc_status raw_send(SoftQp *qp, const Iov &src);

// ------------------------------------------------------------------ responder (responder.cpp)

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
	// The sending QP (this process's), or nullptr: a rendezvous to a TM SRQ
	// reads the sender's memory and answers it (deliver_tm).
	SoftQp *req;
};

enum DeliverResult { DV_OK, DV_NO_WQE, DV_GONE, DV_LEN_ERR, DV_PROT_ERR };

// The receive completion (status st) of message m on responder QP dqpn, in
// wc (zeroed by the caller).
static inline void recv_wc_fill(struct ibv_wc &wc, uint64_t wr_id, enum ibv_wc_status st,
				uint32_t dqpn, const Msg &m)
{
	wc.wr_id = wr_id;
	wc.status = st;
	wc.opcode = m.opcode;
	wc.byte_len = st == IBV_WC_SUCCESS ? uint32_t(m.byte_len + (m.ud ? 40 : 0)) : 0;
	wc.imm_data = m.imm;
	wc.qp_num = dqpn;
	wc.src_qp = m.src_qp;
	wc.wc_flags = m.wc_flags | ((m.ud && m.grh) ? IBV_WC_GRH : 0);
	wc.slid = m.slid;
	wc.sl = m.sl;
}
// cq_push of that completion, written in place (completer.cpp).
int cq_push_recv(Segment *seg, uint32_t cq_slot, uint64_t wr_id, enum ibv_wc_status st,
		 uint32_t dqpn, const Msg &m);

// Places message m into the next receive WQE of responder QP d (or of SRQ
// xsrq) and completes it on the responder's CQ. connected: an error moves
// d to the error state (RC, UC).
DeliverResult deliver(Segment *seg, QpEntry &d, uint32_t dqpn, SrqEntry *xsrq, const Msg &m,
		      bool connected);
// The fast message path's delivery (requester.cpp), in three steps so that
// it can place the bytes itself when its cached checks hold:
// take_recv_wqe pops the next receive WQE of a responder's own receive
// ring into out and returns the number of its scatter entries that may be
// used (0 for a damaged entry), UINT32_MAX when none is posted (nothing
// taken); deliver_taken then does what deliver does with a taken WQE of
// responder QP d (scatter, completion, error state), and complete_recv
// writes the successful receive completion of m into d's receive CQ when
// the caller placed the bytes itself.
struct RecvWqeBuf {
	alignas(8) uint8_t bytes[sizeof(RecvWqe) + kMaxSge * sizeof(struct ibv_sge)];
	const RecvWqe &wqe() const { return *reinterpret_cast<const RecvWqe *>(bytes); }
};
uint32_t take_recv_wqe(RingHeader *ring, RecvWqeBuf &out);
DeliverResult deliver_taken(Segment *seg, QpEntry &d, uint32_t dqpn, const RecvWqeBuf &w,
			    uint32_t nsge, const Msg &m, bool connected);
static inline void complete_recv(Segment *seg, const QpEntry &d, uint32_t dqpn, uint64_t wr_id,
				 const Msg &m)
{
	cq_push_recv(seg, d.recv_cq - 1, wr_id, IBV_WC_SUCCESS, dqpn, m);
}
// Delivers qp->fin (a rendezvous' FIN, deliver_tm) into qp's own receive
// queue: after the send completion of the request that asked for it.
void send_fin(SoftQp *qp);
// Whose keys a request may use at the responder, and with which rights: the
// responder QP's process and PD (pd_id 0: a QP without one, any PD), and its
// access flags. An XRC receive QP has no PD: the XRC SRQ its request names
// stands for it, with its PD and its process, which may be another than the
// QP's (the PD of the XRC SRQ is the one RDMA and atomic requests are
// checked against: IBA 1.2.1 Annex A14; the RoCE device's pd_ok alike).
struct KeyHolder {
	int32_t owner_pid;
	uint32_t pd_id;
	uint32_t access;
};
static inline KeyHolder key_holder(const QpEntry &d, const SrqEntry *xsrq)
{
	if (xsrq) // an SRQ of no PD (none is made) would let no key serve
		return KeyHolder{xsrq->owner_pid, xsrq->pd_id ? xsrq->pd_id : UINT32_MAX, d.access};
	return KeyHolder{d.owner_pid, d.pd_id, d.access};
}

// check_rkey for every kind of key (memory windows too), on a snapshot of
// the key's entry (keys.h).
bool check_rkey_full(Segment *seg, const KeyHolder &h, uint32_t dqpn, uint32_t rkey,
		     uint64_t addr, uint64_t len, uint32_t need, uint64_t *va, uint8_t **direct);

// Checks an rkey for holder h (key_holder: responder QP dqpn's process, PD
// and rights) for [addr, addr+len) and `need`
// (IBV_ACCESS_REMOTE_*); returns the responder's virtual address, and in
// *direct our mapping of it (nullptr: none). A memory region's key is
// checked on the few fields it needs, read in place under the entry's
// sequence lock (keys.h: the same protocol as key_snapshot, fewer loads);
// windows, and entries being written, take check_rkey_full.
static inline __attribute__((always_inline)) bool
check_rkey(Segment *seg, const KeyHolder &h, uint32_t dqpn, uint32_t rkey, uint64_t addr,
	   uint64_t len, uint32_t need, uint64_t *va, uint8_t **direct, SoftQp::PeerCache *pc)
{
	MrEntry *ep = key_entry(seg, rkey);
	if (!ep)
		return false;
	MrEntry &e = *ep;
	uint64_t seq = e.seq.load(std::memory_order_acquire);
	if ((seq & 1) || e.kind.load(std::memory_order_relaxed) != KEY_MR)
		return check_rkey_full(seg, h, dqpn, rkey, addr, len, need, va, direct);
	uint32_t key = kld(e.key);
	int32_t pid = kld(e.owner_pid);
	uint32_t pd_id = kld(e.pd_id), access = kld(e.access);
	if (access & IBV_ACCESS_ON_DEMAND)
		return check_rkey_full(seg, h, dqpn, rkey, addr, len, need, va, direct);
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
		return check_rkey_full(seg, h, dqpn, rkey, addr, len, need, va, direct);
	if (key != rkey)
		return false;
	if (pid != h.owner_pid)
		return false;
	if (h.pd_id && pd_id != h.pd_id)
		return false;
	if (!(access & need) || !(h.access & need))
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
uint32_t flush_rights(uint8_t type);
// The rkey of FLUSH w on responder QP d: a region or window of the
// responder's process and PD that grants every right in `need`; with
// IBV_FLUSH_RANGE, [remote_addr, remote_addr + flush_len) must lie inside
// it (IBV_FLUSH_MR flushes the whole region: address and length are not
// looked at). The IBA 1.5 FLUSH responder checks, as rxe makes them
// (rxe_resp.c, check_rkey).
bool check_flush_key(Segment *seg, const KeyHolder &h, uint32_t dqpn, const SoftWr &w,
		     uint32_t need);
#endif

// The device an address vector names: its index, or -1 for the requester's
// own device (its own LID or GID, and addresses that name no soft device,
// as before there was more than one).
int dest_device(const SoftContext *ctx, const struct ibv_ah_attr &ah);

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

bool responder_alive_slow(SoftQp *qp, Segment *rseg, QpEntry &d);

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

} // namespace ovsoft
