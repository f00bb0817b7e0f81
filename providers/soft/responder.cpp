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

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

namespace ovsoft {

// ------------------------------------------------------------------ delivery

DeliverResult deliver(Segment *seg, QpEntry &d, uint32_t dqpn, SrqEntry *xsrq,
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
__attribute__((noinline)) bool check_rkey_full(Segment *seg, QpEntry &d, uint32_t dqpn,
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
bool check_flush_key(Segment *seg, QpEntry &d, uint32_t dqpn, const SoftWr &w,
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
