// openverbs software RDMA device: the requester (the data path).
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
//
// The parts the requester calls are split by role as Linux's rxe is
// (engine.h): responder.cpp, completer.cpp and dma.cpp.
#include "engine.h"
#include "log.h"
#include "roce/roce.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <netinet/in.h>
#include <cstring>

namespace ovsoft {

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

// The key-table work of local operation w (IBV_WR_LOCAL_INV: unbind a type 2
// window of this process; IBV_WR_BIND_MW: bind or unbind a window): its
// completion status, the completion itself left to the caller. Shared with
// the RoCE transport (soft.h).
enum ibv_wc_status run_local_op(SoftQp *qp, SoftWr &w)
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
		return ok ? IBV_WC_SUCCESS : IBV_WC_MW_BIND_ERR;
	}
	// IBV_WR_BIND_MW
	auto *mw = reinterpret_cast<SoftMw *>(w.mw);
	const struct ibv_mw_bind_info &b = w.bind;
	if (mw->slot >= kMaxMrs)
		return IBV_WC_MW_BIND_ERR;
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
	if (!ok || !key_write_lock_if(me, cur.seq))
		return IBV_WC_MW_BIND_ERR;
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
	return IBV_WC_SUCCESS;
}

static ExecResult exec_local(SoftQp *qp, SoftWr &w)
{
	enum ibv_wc_status st = run_local_op(qp, w);
	complete_send(qp, w, st, 0);
	return st == IBV_WC_SUCCESS ? EX_DONE : EX_FAILED;
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
		// Next header: IBA; on an Ethernet port UDP, as the IPv6 header of
		// a RoCE v2 datagram says (ibv_init_ah_from_wc(3) tells the GID
		// type by it).
		grh[6] = qp->ctx->eth ? IPPROTO_UDP : 0x1b;
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

// A raw packet QP's SEND: the gathered bytes are one Ethernet frame, which
// the device's flow rules steer (raw.cpp); completes when steered.
static ExecResult exec_raw(SoftQp *qp, SoftWr &w)
{
	Iov src;
	enum ibv_wc_status st = resolve_local(qp, w, false, src);
	if (st == IBV_WC_SUCCESS)
		st = raw_send(qp, src);
	complete_send(qp, w, st, 0);
	return st == IBV_WC_SUCCESS ? EX_DONE : EX_FAILED;
}

static ExecResult exec_wr(SoftQp *qp, SoftWr &w)
{
	if (w.opcode == IBV_WR_BIND_MW || w.opcode == IBV_WR_LOCAL_INV)
		return exec_local(qp, w);
	if (qp->type == IBV_QPT_UD)
		return exec_ud(qp, w);
	if (qp->type == IBV_QPT_RAW_PACKET)
		return exec_raw(qp, w);

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
	// Whose keys, and whose memory: the XRC SRQ's for an XRC request.
	const KeyHolder kh = key_holder(d, xsrq);

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
		m.req = qp;
		if (w.opcode == IBV_WR_SEND_WITH_IMM)
			m.wc_flags = IBV_WC_WITH_IMM;
		KeySnap inv = {};
		if (w.opcode == IBV_WR_SEND_WITH_INV) {
			// Invalidate a bound type 2 window of the responder, then
			// report it (an unbound one is an invalid request, as rxe
			// has it).
			if (!key_read(rseg, w.imm, inv) || inv.kind != KEY_MW ||
			    inv.owner_pid != kh.owner_pid || inv.mw_type != IBV_MW_TYPE_2 || !inv.parent)
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
			if (__builtin_expect(qp->fin.due, 0))
				send_fin(qp);
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
		if (src.len && !check_rkey(rseg, kh, dqpn, w.rkey, w.remote_addr, src.len,
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
			int e = move_remote(kh.owner_pid, src.v, src.n, va, direct, src.len, true);
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
		if (dst.len && !check_rkey(rseg, kh, dqpn, w.rkey, w.remote_addr, dst.len,
					   IBV_ACCESS_REMOTE_READ, &va, &direct, &qp->peer))
			return fail(IBV_WC_REM_ACCESS_ERR);
		if (dst.len) {
			int e = move_remote(kh.owner_pid, dst.v, dst.n, va, direct, dst.len, false);
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
		if (!check_rkey(rseg, kh, dqpn, w.rkey, w.remote_addr, 8, IBV_ACCESS_REMOTE_ATOMIC, &va,
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
			e = move_bytes(kh.owner_pid, &lv, 1, &rv, 1, false);
			if (!e) {
				if (w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP)
					val = old == w.compare_add ? w.swap : old;
				else
					val = old + w.compare_add;
				struct iovec nv = {&val, 8};
				if (val != old || w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
					e = move_bytes(kh.owner_pid, &nv, 1, &rv, 1, true);
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
	case IBV_WR_ATOMIC_WRITE: {
		// IBA 1.5 ATOMIC WRITE: 8 bytes at an 8-byte aligned address of a
		// region with remote write, stored at once (a peer's concurrent
		// 8-byte read sees the old or the new value, whole).
		if (!rc)
			return fail(IBV_WC_LOC_QP_OP_ERR);
		if (w.remote_addr & 7)
			return fail(IBV_WC_REM_INV_REQ_ERR);
		uint64_t va = 0;
		uint8_t *direct = nullptr;
		if (!check_rkey(rseg, kh, dqpn, w.rkey, w.remote_addr, 8, IBV_ACCESS_REMOTE_WRITE, &va,
				&direct, &qp->peer))
			return fail(IBV_WC_REM_ACCESS_ERR);
		int e = 0;
		if (direct) {
			__atomic_store_n(reinterpret_cast<uint64_t *>(direct), w.swap, __ATOMIC_SEQ_CST);
		} else {
			// One aligned 8-byte copy by the kernel, ordered with the
			// device's other atomics.
			struct iovec lv = {&w.swap, 8}, rv = {reinterpret_cast<void *>(va), 8};
			shm_lock(&rseg->hdr->atomic_lock);
			e = move_bytes(kh.owner_pid, &lv, 1, &rv, 1, true);
			shm_unlock(&rseg->hdr->atomic_lock);
		}
		if (e == ESRCH)
			return gone();
		if (e)
			return fail(IBV_WC_REM_ACCESS_ERR);
		complete_send(qp, w, IBV_WC_SUCCESS, 0);
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
		if (!check_flush_key(rseg, kh, dqpn, w, need))
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
			complete_send(qp, w, IBV_WC_WR_FLUSH_ERR, 0);
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
	if (qp->roce) // a QP of the RoCE v2 device: its wire (roce/transport.cpp)
		return roce_submit_wrs(qp, wrs, n);
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
	bool waiting = sq_has_due(qp);
	qp_sq_unlock(qp);
	if (waiting)
		wake_progress(qp->ctx);
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
	// A raw packet QP sends frames: SEND only, no immediate.
	if (t == IBV_QPT_RAW_PACKET && wr->opcode != IBV_WR_SEND)
		return EINVAL;
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

// Leaves the request w that ran first (nothing queued ahead) as its result r
// says (caller holds the send-queue guard): failed, the QP goes to the
// error state (flushing what follows); waiting, it stays at the head of the
// queue with its retry state.
static void settle_first(SoftQp *qp, const SoftWr *w, ExecResult r)
{
	if (r == EX_FAILED) {
		qp_to_error(qp, false);
	} else if (r == EX_WAIT) {
		SoftWr &slot = qp->sq[qp->sq_head];
		memcpy(&slot, w, offsetof(SoftWr, sge));
		memcpy(slot.sge, w->sge, w->num_sge * sizeof(struct ibv_sge));
		if (w->inline_len)
			memcpy(slot.inline_data, w->inline_data, w->inline_len);
		sq_set_pending(qp, 1);
	}
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

// Checks memory region `key` of the responder's device rseg for the access
// rights `need` and caches the result in c (wcache: remote writes, rcache:
// a receive buffer). False: not cacheable (unknown key, a window, a right
// missing, on-demand paging, a peer region without a shareable memfd).
static __attribute__((noinline)) bool region_cache_fill(SoftQp::RemoteWriteCache &c, Segment *rseg,
							 uint32_t key, uint32_t need)
{
	KeySnap e;
	if (!key_read(rseg, key, e) || e.kind != KEY_MR || (e.access & need) != need ||
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
	c = SoftQp::RemoteWriteCache{e.entry, rseg,	 e.seq,	   gen,	     lo,     hi,
				     delta,   key,	 e.owner_pid, e.pd_id, my_pid(), e.owner};
	return true;
}

// Whether c holds the checks of region `key` of device rseg (filling it
// when not); false when it cannot be cached.
static inline bool region_cached(SoftQp::RemoteWriteCache &c, Segment *rseg, uint32_t key,
				 uint32_t need, int32_t me)
{
	return (c.entry && c.rkey == key && c.seg == rseg && c.my_pid == me &&
		c.map_gen == g_peer_map_generation.load(std::memory_order_acquire) &&
		key_unchanged(c.entry, c.seq)) ||
	       region_cache_fill(c, rseg, key, need);
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

// The bytes of wr's one gather entry (or its inline data) in this process,
// checked as resolve_local checks them, with qp->lcache; nullptr when the
// fast paths must decline.
static inline const uint8_t *fast_source(SoftQp *qp, const struct ibv_send_wr *wr, uint32_t len,
					 int32_t me)
{
	const struct ibv_sge &sg = *wr->sg_list;
	if (wr->send_flags & IBV_SEND_INLINE)
		return reinterpret_cast<const uint8_t *>(uintptr_t(sg.addr));
	SoftQp::LocalSrcCache &lc = qp->lcache;
	if (!(lc.entry && lc.lkey == sg.lkey && lc.my_pid == me && key_unchanged(lc.entry, lc.seq)) &&
	    !lcache_fill(qp, sg.lkey))
		return nullptr;
	if (sg.addr - lc.lo > lc.hi - lc.lo || len > lc.hi - sg.addr)
		return nullptr;
	return reinterpret_cast<const uint8_t *>(uintptr_t(sg.addr + lc.delta));
}

// The responder QP of qp, checked as exec_wr checks it (live, of qp's type,
// ready to receive, connected to qp); nullptr when the fast paths must
// decline. *rsegp: its device's segment.
static inline QpEntry *fast_responder(SoftQp *qp, int32_t me, Segment **rsegp)
{
	Segment *rseg = qp->rseg;
	if (__builtin_expect(!rseg || qp->rseg_pid != me, 0)) {
		rseg = responder_segment(qp, qp->attr.ah_attr);
		if (!rseg)
			return nullptr;
		qp->rseg = rseg;
		qp->rseg_pid = me;
	}
	uint32_t ds = qp->attr.dest_qp_num - kQpnBase;
	if (ds >= kMaxQps)
		return nullptr;
	QpEntry &d = rseg->hdr->qps[ds];
	if (!responder_alive(qp, rseg, d) || d.qp_type != uint32_t(qp->type))
		return nullptr;
	uint32_t dstate = d.state.load(std::memory_order_acquire);
	if (dstate != IBV_QPS_RTR && dstate != IBV_QPS_RTS && dstate != IBV_QPS_SQD &&
	    dstate != IBV_QPS_SQE)
		return nullptr;
	if (qp->type == IBV_QPT_RC && d.dest_qpn != qp->qpn)
		return nullptr;
	*rsegp = rseg;
	return &d;
}

// Where wr's RDMA WRITE of len bytes lands on responder QP d (of device
// rseg), checked as check_rkey checks it, with qp->wcache; nullptr when the
// fast paths must decline.
static inline uint8_t *fast_target(SoftQp *qp, const struct ibv_send_wr *wr, uint32_t len,
				   int32_t me, Segment *rseg, const QpEntry &d)
{
	SoftQp::RemoteWriteCache &wc = qp->wcache;
	if (!region_cached(wc, rseg, wr->wr.rdma.rkey, IBV_ACCESS_REMOTE_WRITE, me))
		return nullptr;
	if (wc.owner_pid != d.owner_pid || (d.pd_id && wc.pd_id != d.pd_id) ||
	    !(d.access & IBV_ACCESS_REMOTE_WRITE))
		return nullptr;
	uint64_t raddr = wr->wr.rdma.remote_addr;
	if (raddr - wc.lo > wc.hi - wc.lo || len > wc.hi - raddr)
		return nullptr;
	return reinterpret_cast<uint8_t *>(uintptr_t(raddr + wc.delta));
}

// What both fast paths check first: nothing queued ahead (keep the order),
// qp in RTS, wr's source (*src) and the responder QP (returned, its
// device's segment in *rsegp); nullptr when they must decline.
static inline QpEntry *fast_begin(SoftQp *qp, const struct ibv_send_wr *wr, uint32_t len,
				  int32_t me, const uint8_t **src, Segment **rsegp)
{
	if (qp->sq_count || qp->entry->state.load(std::memory_order_acquire) != IBV_QPS_RTS)
		return nullptr;
	*src = fast_source(qp, wr, len, me);
	return *src ? fast_responder(qp, me, rsegp) : nullptr;
}

// Executes wr (see above; the caller holds the send-queue guard and checked
// the request's shape). Returns 0 when done, -1 to leave it to the general
// path (nothing has been changed then).
static inline int fast_write_locked(SoftQp *qp, const struct ibv_send_wr *wr, uint32_t len)
{
	int32_t me = my_pid();
	const uint8_t *src;
	Segment *rseg;
	QpEntry *d = fast_begin(qp, wr, len, me, &src, &rseg);
	if (!d)
		return -1;
	uint8_t *dst = fast_target(qp, wr, len, me, rseg, *d);
	if (!dst)
		return -1;
	copy_payload(dst, src, len);
	complete_send(qp, wr->wr_id, wr->send_flags, IBV_WC_RDMA_WRITE, IBV_WC_SUCCESS, 0);
	return 0;
}

// ------------------------------------------------------------------ fast message
//
// One SEND, SEND with immediate or RDMA WRITE with immediate, with one
// gather entry (or inline), posted alone on an RC or UC QP in RTS with
// nothing queued, to a responder QP without an SRQ: the ping-pong message
// of latency-bound two-sided traffic (qperf's rc_lat and rc_rdma_write_lat,
// perftest's ib_send_lat, rendezvous-less MPI eager messages). It makes
// exec_wr's checks with fast_write's caches, then hands the message to
// deliver() as exec_wr does; it declines (the general path runs the
// request) whenever a check fails or no receive WQE is posted, before
// anything has changed. What deliver reports after it has taken a WQE is
// settled here exactly as exec_wr settles it.

// exec_wr's answer to a delivery that did not succeed, for wr (which the
// fast path took); the QP goes to the error state, or the request waits at
// the head of the send queue for its retry, as post_send_general leaves
// them.
static __attribute__((noinline, cold)) void fast_settle(SoftQp *qp, const struct ibv_send_wr *wr,
							 DeliverResult r)
{
	SoftWr *w = static_cast<SoftWr *>(alloca(sizeof(SoftWr)));
	convert_wr(qp, wr, *w); // the fast path's shape checks passed: cannot fail
	w->rnr_left = qp->attr.rnr_retry;
	w->retry_left = qp->attr.retry_cnt;
	w->due_ns = 0;
	bool rc = qp->type != IBV_QPT_UC;
	bool imm_write = w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	ExecResult x = EX_DONE;
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	if (!rc) {
		// UC: dropped at the responder; the requester completes.
	} else if (r == DV_GONE) {
		x = retry_later(qp, *w, false, 0);
	} else if (r == DV_NO_WQE) {
		Segment *rseg = qp->rseg;
		QpEntry &d = rseg->hdr->qps[qp->attr.dest_qp_num - kQpnBase];
		x = retry_later(qp, *w, true, d.min_rnr_timer);
	} else if (!imm_write) {
		st = r == DV_LEN_ERR ? IBV_WC_REM_INV_REQ_ERR : IBV_WC_REM_OP_ERR;
		x = EX_FAILED;
	}
	if (x == EX_DONE || st != IBV_WC_SUCCESS)
		complete_send(qp, *w, st, 0);
	settle_first(qp, w, x);
}

// Where len bytes of a message land in receive buffer sge of responder QP
// d (of device rseg), checked as scatter checks a single scatter entry
// (a region of d's process and PD, local write, the whole entry inside it)
// with qp->rcache, and reachable through our mapping; nullptr when the
// general delivery must place them (it also reports what is wrong).
static inline uint8_t *fast_recv_target(SoftQp *qp, const struct ibv_sge &sge, uint32_t len,
					int32_t me, Segment *rseg, const QpEntry &d)
{
	SoftQp::RemoteWriteCache &rc = qp->rcache;
	if (!sge.length || len > sge.length ||
	    !region_cached(rc, rseg, sge.lkey, IBV_ACCESS_LOCAL_WRITE, me))
		return nullptr;
	if (rc.owner != d.owner || rc.owner_pid != d.owner_pid || (d.pd_id && rc.pd_id != d.pd_id))
		return nullptr;
	if (sge.addr - rc.lo > rc.hi - rc.lo || sge.length > rc.hi - sge.addr)
		return nullptr;
	return reinterpret_cast<uint8_t *>(uintptr_t(sge.addr + rc.delta));
}

// Executes wr, a SEND, SEND with immediate or RDMA WRITE with immediate
// (see above; the caller holds the send-queue guard and checked the
// request's shape). Returns 0 when done (or settled), -1 to leave it to the
// general path (nothing has been changed then).
static inline int fast_message_locked(SoftQp *qp, const struct ibv_send_wr *wr, uint32_t len)
{
	int32_t me = my_pid();
	const uint8_t *src;
	Segment *rseg;
	QpEntry *dp = fast_begin(qp, wr, len, me, &src, &rseg);
	if (!dp || dp->srq)
		return -1; // SRQs (and what they carry) take the general path
	QpEntry &d = *dp;
	bool rc = qp->type != IBV_QPT_UC;
	bool imm_write = wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	uint8_t *dst = nullptr;
	if (imm_write && !(dst = fast_target(qp, wr, len, me, rseg, d)))
		return -1;
	RingHeader *ring = rseg->ring(d.rq_ring);
	if (!ring)
		return -1; // the general path retries
	// A receive WQE before any byte moves (RNR otherwise: general path).
	RecvWqeBuf w;
	uint32_t nsge = take_recv_wqe(ring, w);
	if (nsge == UINT32_MAX)
		return -1;
	Msg m = {};
	m.src_qp = qp->qpn;
	m.slid = device_lid(qp->ctx->index);
	m.sl = qp->attr.ah_attr.sl;
	m.solicited = wr->send_flags & IBV_SEND_SOLICITED;
	m.imm = wr->imm_data;
	m.byte_len = len;
	struct iovec v = {const_cast<uint8_t *>(src), len};
	enum ibv_wc_opcode op;
	if (imm_write) {
		copy_payload(dst, src, len);
		m.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
		m.wc_flags = IBV_WC_WITH_IMM;
		op = IBV_WC_RDMA_WRITE;
	} else {
		m.src = &v;
		m.nsrc = 1;
		m.len = len;
		m.opcode = IBV_WC_RECV;
		m.req = qp;
		if (wr->opcode == IBV_WR_SEND_WITH_IMM)
			m.wc_flags = IBV_WC_WITH_IMM;
		op = IBV_WC_SEND;
	}
	// One scatter entry the cached checks hold for: the bytes go straight
	// there; anything else is placed (and checked) as deliver places it.
	const RecvWqe &wqe = w.wqe();
	uint8_t *rdst = nsge == 1 ? fast_recv_target(qp, wqe.sge[0], uint32_t(m.len), me, rseg, d)
				  : nullptr;
	DeliverResult r = DV_OK;
	if (rdst) {
		copy_payload(rdst, src, m.len);
		complete_recv(rseg, d, qp->attr.dest_qp_num, wqe.wr_id, m);
	} else {
		r = deliver_taken(rseg, d, qp->attr.dest_qp_num, w, nsge, m, rc);
	}
	if (__builtin_expect(r == DV_OK, 1)) {
		complete_send(qp, wr->wr_id, wr->send_flags, op, IBV_WC_SUCCESS, 0);
		return 0;
	}
	fast_settle(qp, wr, r);
	return 0;
}

// The lines a fast message will touch in other processes' caches, asked
// for before any of the message's checks run (fast_message_locked then
// finds them on their way, or here). Without it the requester met them one
// after the other, each a cache miss of a line the peer wrote last:
//   - the payload's source, when the application sends from the buffer its
//     last message arrived in (qperf does: one buffer for both);
//   - the responder's next receive WQE, which the responder posted;
//   - the enqueue counter of the responder's receive CQ, which the
//     responder's own send completions move when it has one CQ for both.
// Asked together, their misses overlap each other and the checks. Measured
// with Debian's qperf on soft0 (a 2-CPU host, interleaved rounds):
// rc_lat 0.43-0.47 -> 0.32-0.36 us, rc_rdma_write_lat alike; perftest's
// ib_send_lat and ib_write_lat (separate buffers and CQs) unchanged. Only
// prefetches: ring headers are read only where Segment::ring would read
// them (ring_header_at), nothing is written, a stale cache or a damaged
// entry costs a wasted hint. Plain RDMA WRITEs are left alone: their target is often the
// line the responder spins on (ib_write_lat), which an early request would
// take from it one more time.
static inline void prefetch_message(SoftQp *qp, const struct ibv_send_wr *wr)
{
	const struct ibv_sge &sg = *wr->sg_list;
	const SoftQp::LocalSrcCache &lc = qp->lcache;
	if (wr->send_flags & IBV_SEND_INLINE)
		__builtin_prefetch(reinterpret_cast<const void *>(uintptr_t(sg.addr)));
	else if (lc.entry && lc.lkey == sg.lkey)
		__builtin_prefetch(reinterpret_cast<const void *>(uintptr_t(sg.addr + lc.delta)));
	Segment *rseg = qp->rseg;
	uint32_t ds = qp->attr.dest_qp_num - kQpnBase;
	if (!rseg || qp->rseg_pid != my_pid() || ds >= kMaxQps)
		return;
	const QpEntry &d = rseg->hdr->qps[ds];
	uint64_t rq = __atomic_load_n(&d.rq_ring.off, __ATOMIC_RELAXED);
	if (const RingHeader *r = rseg->ring_header_at(rq)) {
		uint64_t pos = r->deq.load(std::memory_order_relaxed);
		uint64_t cell = rq + sizeof(RingHeader) + (pos & (r->capacity - 1)) * uint64_t(r->cell_size);
		if (cell < rseg->size)
			__builtin_prefetch(rseg->base + cell);
	}
	uint32_t cq = __atomic_load_n(&d.recv_cq, __ATOMIC_RELAXED) - 1;
	if (cq < kMaxCqs)
		if (const RingHeader *r = rseg->ring_header_at(
			    __atomic_load_n(&rseg->hdr->cqs[cq].ring.off, __ATOMIC_RELAXED)))
			__builtin_prefetch(&r->enq);
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
			settle_first(qp, w, exec_wr(qp, *w));
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
	bool waiting = sq_has_due(qp);
	qp_sq_unlock(qp);
	if (waiting)
		wake_progress(qp->ctx);
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
	if (!wr->next && wr->num_sge == 1 && wr->sg_list &&
	    (qp->type == IBV_QPT_RC || qp->type == IBV_QPT_UC) && qp->sq && qp->scq &&
	    qp->cap.max_send_sge) {
		uint32_t len = wr->sg_list->length;
		bool shape = len && len <= kMaxMsgSize &&
			     (!(wr->send_flags & IBV_SEND_INLINE) || len <= qp->cap.max_inline_data);
		if (shape && wr->opcode == IBV_WR_RDMA_WRITE) {
			qp_sq_lock(qp);
			int r = fast_write_locked(qp, wr, len);
			qp_sq_unlock(qp);
			if (r == 0)
				return 0;
		} else if (shape && (wr->opcode == IBV_WR_SEND || wr->opcode == IBV_WR_SEND_WITH_IMM ||
				     wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)) {
			prefetch_message(qp, wr);
			qp_sq_lock(qp);
			int r = fast_message_locked(qp, wr, len);
			bool waiting = r == 0 && sq_has_due(qp);
			qp_sq_unlock(qp);
			if (waiting)
				wake_progress(qp->ctx);
			if (r == 0)
				return 0;
		}
	}
	return post_send_general(qp, wr, bad);
}

} // namespace ovsoft

