// openverbs software RDMA device: the responder.
//
// The responder's side of every request, executed by the requester's
// thread on the responder's shared tables: the receive WQE a message lands
// in (deliver), the checks of remote keys and windows (check_rkey,
// check_flush_key), SEND_WITH_INV's invalidation, whether the responder's
// process still runs, and the fabric that finds the responder's device.
// See engine.h for the split.
#include "engine.h"
#include "log.h"

#include <infiniband/tm_types.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <endian.h>

namespace ovsoft {

// ------------------------------------------------------------------ delivery

// Whose memory a receive buffer is: the process, its device process slot
// and the PD its keys must be of (0: any).
struct RecvOwner {
	int32_t pid;
	uint32_t owner;
	uint32_t pd;
};

// Places message m into the scatter list sge[0..nsge) of receive buffer
// owner o (the 40-byte GRH area first on UD): the status of the receive.
// *gone: the owner's process has exited.
static enum ibv_wc_status scatter(Segment *seg, const RecvOwner &o, const struct ibv_sge *sge,
				  uint32_t nsge, const Msg &m, bool *gone)
{
	*gone = false;
	int32_t rpid = o.pid;
	Iov dst, direct;
	bool all_direct = true;
	uint64_t cap = 0;
	for (uint32_t i = 0; i < nsge; i++) {
		const struct ibv_sge &s = sge[i];
		if (!s.length)
			continue;
		KeySnap mr;
		if (!key_read(seg, s.lkey, mr) || mr.kind != KEY_MR ||
		    mr.owner != o.owner || mr.owner_pid != o.pid ||
		    (o.pd && mr.pd_id != o.pd) || !key_range_ok(mr, s.addr, s.length) ||
		    !(mr.access & IBV_ACCESS_LOCAL_WRITE) ||
		    ((mr.access & IBV_ACCESS_ON_DEMAND) && mr.owner_pid == my_pid() &&
		     !odp_fault(mr.addr + (s.addr - mr.iova), s.length, true)))
			return IBV_WC_LOC_PROT_ERR;
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
	if (need > cap)
		return IBV_WC_LOC_LEN_ERR;
	if (!need)
		return IBV_WC_SUCCESS;
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
	if (rc == ESRCH) {
		*gone = true;
		return IBV_WC_LOC_PROT_ERR;
	}
	return rc ? IBV_WC_LOC_PROT_ERR : IBV_WC_SUCCESS;
}

// The receive completion of m on responder QP dqpn.
static struct ibv_wc recv_wc(uint64_t wr_id, enum ibv_wc_status st, uint32_t dqpn, const Msg &m)
{
	struct ibv_wc wc = {};
	recv_wc_fill(wc, wr_id, st, dqpn, m);
	return wc;
}

// After a failed receive on responder QP d: a connected QP goes to the
// error state (the requester sees the remote error).
static DeliverResult recv_failed(QpEntry &d, enum ibv_wc_status st, bool connected)
{
	if (connected) {
		d.state.store(IBV_QPS_ERR);
		d.remote_error.store(1);
		d.error_seq.fetch_add(1);
	}
	return st == IBV_WC_LOC_LEN_ERR ? DV_LEN_ERR : DV_PROT_ERR;
}

static uint32_t wqe_sges(const RecvWqe &w, const RingHeader *ring);
static DeliverResult place_wqe(Segment *seg, QpEntry &d, uint32_t dqpn, SrqEntry *srq,
			       uint32_t cq_slot, const RecvWqe &w, uint32_t nsge, const Msg &m,
			       bool connected);

// Places m into the next receive WQE of the ring of d or of srq (non-null:
// completions go to cq_slot) and completes it.
static DeliverResult deliver_wqe(Segment *seg, QpEntry &d, uint32_t dqpn, SrqEntry *srq,
				 uint32_t cq_slot, const Msg &m, bool connected)
{
	RingHeader *ring = srq ? seg->ring(srq->ring) : seg->ring(d.rq_ring);
	if (!ring)
		return DV_GONE;
	alignas(8) uint8_t buf[sizeof(RecvWqe) + kMaxSge * sizeof(struct ibv_sge)];
	if (!ring_pop(ring, buf, sizeof(buf)))
		return DV_NO_WQE;
	if (srq)
		srq_limit_check(seg, *srq, ring);
	auto *wqe = reinterpret_cast<RecvWqe *>(buf);
	return place_wqe(seg, d, dqpn, srq, cq_slot, *wqe, wqe_sges(*wqe, ring), m, connected);
}

// The scatter entries of receive WQE w taken from ring: num_sge, or 0 when
// more than its cells hold (a damaged entry: treated as an empty list).
static uint32_t wqe_sges(const RecvWqe &w, const RingHeader *ring)
{
	uint32_t nsge = w.num_sge;
	uint32_t fit = (ring->cell_size - 8 - sizeof(RecvWqe)) / sizeof(struct ibv_sge);
	return nsge > fit || nsge > kMaxSge ? 0 : nsge;
}

// Places m into receive WQE w (taken from the ring of d or of srq; its
// first nsge scatter entries) and completes it on cq_slot.
static DeliverResult place_wqe(Segment *seg, QpEntry &d, uint32_t dqpn, SrqEntry *srq,
			       uint32_t cq_slot, const RecvWqe &w, uint32_t nsge, const Msg &m,
			       bool connected)
{
	RecvOwner o = srq ? RecvOwner{srq->owner_pid, srq->owner, srq->pd_id}
			  : RecvOwner{d.owner_pid, d.owner, d.pd_id};
	bool gone;
	enum ibv_wc_status st = scatter(seg, o, w.sge, nsge, m, &gone);
	if (gone)
		return DV_GONE;
	cq_push_recv(seg, cq_slot, w.wr_id, st, dqpn, m);
	return st == IBV_WC_SUCCESS ? DV_OK : recv_failed(d, st, connected);
}

uint32_t take_recv_wqe(RingHeader *ring, RecvWqeBuf &out)
{
	if (!ring_pop(ring, out.bytes, sizeof(out.bytes)))
		return UINT32_MAX;
	return wqe_sges(out.wqe(), ring);
}

DeliverResult deliver_taken(Segment *seg, QpEntry &d, uint32_t dqpn, const RecvWqeBuf &w,
			    uint32_t nsge, const Msg &m, bool connected)
{
	return place_wqe(seg, d, dqpn, nullptr, d.recv_cq - 1, w.wqe(), nsge, m, connected);
}


TmList *tm_list(Segment *seg, const SrqEntry &s)
{
	uint64_t off = __atomic_load_n(&s.tm_off, __ATOMIC_ACQUIRE);
	uint64_t lo = seg->hdr->arena_offset;
	if (!off || off < lo || (off & 7) || off > seg->size || seg->size - off < sizeof(TmList))
		return nullptr;
	auto *tl = reinterpret_cast<TmList *>(seg->base + off);
	uint32_t n = __atomic_load_n(&tl->max_tags, __ATOMIC_RELAXED);
	if (tl->magic != kTmListMagic || !n || n > kTmMaxTags ||
	    (seg->size - off - sizeof(TmList)) / sizeof(TmTag) < n)
		return nullptr;
	return tl;
}

// The first n bytes of message m (its source is this process's memory).
static void msg_head(const Msg &m, uint8_t *out, uint64_t n)
{
	for (int i = 0; i < m.nsrc && n; i++) {
		uint64_t take = std::min<uint64_t>(n, m.src[i].iov_len);
		memcpy(out, m.src[i].iov_base, take);
		out += take;
		n -= take;
	}
}

static inline uint64_t be_load64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return be64toh(v);
}
static inline uint32_t be_load32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return be32toh(v);
}

// A message to the TM SRQ srq of responder QP d (ibv_create_srq_ex(3),
// ibv_post_srq_ops(3); the header layouts are struct ibv_tmh and struct
// ibv_rvh of <infiniband/tm_types.h>). Every completion goes to the SRQ's
// CQ.
//  IBV_TMH_NO_TAG: the whole message (header too) into the next ordinary
//    receive of the SRQ, completed as IBV_WC_TM_NO_TAG.
//  IBV_TMH_EAGER and IBV_TMH_RNDV whose tag matches a posted entry
//    ((TMH tag & entry mask) == entry tag; of several the oldest): the
//    entry is consumed. Eager: the payload after the 16-byte TMH goes to
//    the entry's buffer; one IBV_WC_TM_RECV completion with the entry's
//    recv_wr_id, IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, the tag and
//    app_ctx (ibv_wc_read_tm_info), byte_len the payload's length.
//    Rendezvous: IBV_WC_TM_RECV with IBV_WC_TM_MATCH (tag, app_ctx) at
//    once; then the device reads the RVH's len bytes at va/rkey from the
//    sender (the rkey checked as an RDMA READ of the responder QP's peer)
//    into the entry's buffer, completes IBV_WC_TM_RECV with
//    IBV_WC_TM_DATA_VALID (byte_len len), and sends the sender a 16-byte
//    TMH of opcode IBV_TMH_FIN with the tag and app_ctx, which lands in
//    the sender QP's next receive. Bytes after the 32-byte TMH+RVH are not
//    delivered. When the read cannot be made (no RVH, a bad key, len larger
//    than the buffer) the second completion has status
//    IBV_WC_TM_RNDV_INCOMPLETE and no FIN is sent: the application
//    completes the protocol itself.
//  Tagged messages no entry matches are unexpected: counted (see
//    soft_post_srq_ops), then delivered whole into the next ordinary
//    receive as IBV_WC_TM_RECV without flags or tag.
//  Anything else (shorter than a TMH, opcode FIN or unknown): the whole
//    message into the next ordinary receive as IBV_WC_RECV.
static DeliverResult deliver_tm(Segment *seg, QpEntry &d, uint32_t dqpn, SrqEntry &srq,
				const Msg &m, bool connected)
{
	uint32_t cq_slot = srq.cq - 1;
	TmList *tl = tm_list(seg, srq);
	if (!tl)
		return DV_GONE;
	uint8_t h[32] = {};
	uint64_t hl = std::min<uint64_t>(m.len, sizeof(h));
	msg_head(m, h, hl);
	uint8_t op = hl >= 16 ? h[0] : 0xff;
	if (op != IBV_TMH_EAGER && op != IBV_TMH_RNDV) {
		Msg w = m;
		w.opcode = op == IBV_TMH_NO_TAG ? IBV_WC_TM_NO_TAG : IBV_WC_RECV;
		return deliver_wqe(seg, d, dqpn, &srq, cq_slot, w, connected);
	}
	uint64_t tag = be_load64(h + 8);
	uint32_t app = be_load32(h + 4);
	// A rendezvous sends a FIN to the sender: without a receive there it
	// waits (RNR) before anything is consumed.
	QpEntry *sq = nullptr;
	Segment *sseg = m.req ? m.req->ctx->seg : nullptr;
	if (op == IBV_TMH_RNDV && m.req) {
		sq = &sseg->hdr->qps[m.req->slot];
		RingHeader *r = sq->srq ? (sq->srq - 1 < kMaxSrqs
						   ? sseg->ring(sseg->hdr->srqs[sq->srq - 1].ring)
						   : nullptr)
					: sseg->ring(sq->rq_ring);
		if (r && !ring_count(r))
			return DV_NO_WQE;
	}
	shm_lock(&tl->lock);
	uint32_t n = std::min(tl->max_tags, kTmMaxTags);
	TmTag *best = nullptr;
	for (uint32_t i = 0; i < n; i++) {
		TmTag &t = tl->tags[i];
		if (t.state == TAG_POSTED && (tag & t.mask) == t.tag &&
		    (!best || t.order < best->order))
			best = &t;
	}
	if (!best) {
		// Unexpected: counted once it is delivered (under the lock, so a
		// list operation sees the count and the completion agree).
		Msg w = m;
		w.opcode = IBV_WC_TM_RECV;
		DeliverResult r = deliver_wqe(seg, d, dqpn, &srq, cq_slot, w, connected);
		if (r == DV_OK)
			tl->unexpected++;
		shm_unlock(&tl->lock);
		return r;
	}
	TmTag t = *best;
	best->state = TAG_FREE;
	shm_unlock(&tl->lock);
	uint32_t nsge = std::min(t.num_sge, kTmMaxSge);
	RecvOwner o{srq.owner_pid, srq.owner, srq.pd_id};
	bool gone;
	if (op == IBV_TMH_EAGER) {
		// The payload: the message without its TMH.
		struct iovec pv[kMaxSge + 2];
		int np = 0;
		uint64_t skip = 16;
		for (int i = 0; i < m.nsrc; i++) {
			uint64_t l = m.src[i].iov_len;
			if (skip >= l) {
				skip -= l;
				continue;
			}
			pv[np].iov_base = static_cast<uint8_t *>(m.src[i].iov_base) + skip;
			pv[np].iov_len = l - skip;
			skip = 0;
			np++;
		}
		Msg p = m;
		p.src = pv;
		p.nsrc = np;
		p.len = m.len - 16;
		p.byte_len = uint32_t(p.len);
		p.opcode = IBV_WC_TM_RECV;
		p.wc_flags = m.wc_flags | IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID;
		enum ibv_wc_status st = scatter(seg, o, t.sge, nsge, p, &gone);
		if (gone)
			return DV_GONE;
		cq_push_tm(seg, cq_slot, recv_wc(t.wr_id, st, dqpn, p), tag, app);
		return st == IBV_WC_SUCCESS ? DV_OK : recv_failed(d, st, connected);
	}
	// Rendezvous: the match first.
	Msg p = m;
	p.nsrc = 0;
	p.len = 0;
	p.byte_len = 0;
	p.opcode = IBV_WC_TM_RECV;
	p.wc_flags = IBV_WC_TM_MATCH;
	cq_push_tm(seg, cq_slot, recv_wc(t.wr_id, IBV_WC_SUCCESS, dqpn, p), tag, app);
	// Then the read of the sender's data.
	enum ibv_wc_status st = IBV_WC_TM_RNDV_INCOMPLETE;
	uint64_t len = hl >= 32 ? be_load32(h + 28) : 0;
	if (sq && hl >= 32) {
		uint64_t va = be_load64(h + 16), sva = 0;
		uint32_t rkey = be_load32(h + 24);
		uint8_t *direct = nullptr;
		if (!len || check_rkey_full(sseg, key_holder(*sq, nullptr), m.req->qpn, rkey, va, len,
					    IBV_ACCESS_REMOTE_READ, &sva, &direct)) {
			struct iovec sv = {direct ? direct : reinterpret_cast<uint8_t *>(sva),
					   size_t(len)};
			// The sender's memory is this process's (a key of the
			// sender QP's owner, whose thread runs this).
			p.src = &sv;
			p.nsrc = len ? 1 : 0;
			p.len = len;
			p.byte_len = uint32_t(len);
			p.wc_flags = IBV_WC_TM_DATA_VALID;
			if (sq->owner_pid == my_pid()) {
				st = scatter(seg, o, t.sge, nsge, p, &gone);
				if (gone)
					return DV_GONE;
				if (st != IBV_WC_SUCCESS)
					st = IBV_WC_TM_RNDV_INCOMPLETE;
			}
		}
	}
	p.wc_flags = IBV_WC_TM_DATA_VALID;
	p.byte_len = st == IBV_WC_SUCCESS ? uint32_t(len) : 0;
	struct ibv_wc wc = recv_wc(t.wr_id, st, dqpn, p);
	if (st != IBV_WC_SUCCESS)
		wc.wc_flags = 0;
	cq_push_tm(seg, cq_slot, wc, 0, 0);
	if (st != IBV_WC_SUCCESS)
		return DV_OK; // the application finishes the rendezvous
	// The FIN to the sender's receive queue, once its request has completed.
	PendingFin &f = m.req->fin;
	memset(f.tmh, 0, sizeof(f.tmh));
	f.tmh[0] = IBV_TMH_FIN;
	memcpy(f.tmh + 4, h + 4, 12); // app_ctx and tag, as the request had them
	f.src_qp = dqpn;
	f.slid = device_lid(seg->index);
	f.sl = m.sl;
	f.due = true;
	return DV_OK;
}

void send_fin(SoftQp *qp)
{
	PendingFin &pf = qp->fin;
	pf.due = false;
	struct iovec fv = {pf.tmh, sizeof(pf.tmh)};
	Msg f = {};
	f.src = &fv;
	f.nsrc = 1;
	f.len = sizeof(pf.tmh);
	f.byte_len = sizeof(pf.tmh);
	f.opcode = IBV_WC_RECV;
	f.src_qp = pf.src_qp;
	f.slid = pf.slid;
	f.sl = pf.sl;
	deliver(qp->ctx->seg, *qp->entry, qp->qpn, nullptr, f, true);
}

DeliverResult deliver(Segment *seg, QpEntry &d, uint32_t dqpn, SrqEntry *xsrq,
		      const Msg &m, bool connected)
{
	SrqEntry *srq = nullptr;
	uint32_t cq_slot;
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
		if (__builtin_expect(srq->srq_type == IBV_SRQT_TM, 0))
			return deliver_tm(seg, d, dqpn, *srq, m, connected);
	}
	return deliver_wqe(seg, d, dqpn, srq, cq_slot, m, connected);
}

// Whether window snapshot m may be used through responder QP dqpn: bound,
// to that QP if it is of type 2, and its region unchanged since the bind.
bool window_usable(Segment *seg, const KeySnap &m, uint32_t dqpn)
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
__attribute__((noinline)) bool check_rkey_full(Segment *seg, const KeyHolder &h, uint32_t dqpn,
						     uint32_t rkey, uint64_t addr, uint64_t len,
						     uint32_t need, uint64_t *va, uint8_t **direct)
{
	KeySnap m;
	if (!key_read(seg, rkey, m))
		return false;
	if (m.owner_pid != h.owner_pid)
		return false;
	if (h.pd_id && m.pd_id != h.pd_id)
		return false;
	if (!(m.access & need) || !(h.access & need))
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

#if _OPENVERBS_ABI >= 56
// The access rights a FLUSH of placement `type` needs, of the responder QP
// and of the target region alike: IBV_ACCESS_FLUSH_GLOBAL for
// IBV_FLUSH_GLOBAL, IBV_ACCESS_FLUSH_PERSISTENT for IBV_FLUSH_PERSISTENT.
uint32_t flush_rights(uint8_t type)
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
bool check_flush_key(Segment *seg, const KeyHolder &h, uint32_t dqpn, const SoftWr &w,
		     uint32_t need)
{
	KeySnap m;
	if (!key_read(seg, w.rkey, m) || m.owner_pid != h.owner_pid)
		return false;
	if (h.pd_id && m.pd_id != h.pd_id)
		return false;
	if ((m.access & need) != need)
		return false;
	if (m.kind == KEY_MW && !window_usable(seg, m, dqpn))
		return false;
	return w.flush_level == IBV_FLUSH_MR || key_range_ok(m, w.remote_addr, w.flush_len);
}
#endif

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
int dest_device(const SoftContext *ctx, const struct ibv_ah_attr &ah)
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

__attribute__((noinline)) bool responder_alive_slow(SoftQp *qp, Segment *rseg, QpEntry &d)
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

// SEND_WITH_INV's invalidation of the window checked as `inv`: only if its
// entry still holds exactly that (keys.h): a window deallocated, reused or
// rebound since is someone else's now and stays as it is.
void invalidate_window(const KeySnap &inv)
{
	auto *e = const_cast<MrEntry *>(inv.entry);
	if (key_write_lock_if(*e, inv.seq)) {
		kst(e->parent, 0u);
		key_write_unlock(*e, inv.seq);
	}
}

} // namespace ovsoft
