// Helpers shared by the software-device test programs (tests/soft, tests/xrc,
// tests/domains): open a software device by index, wait for one completion,
// and the path of the running test binary (peers are exec'ed from it).
#pragma once

#include <infiniband/verbs.h>

#include <cstdio>
#include <string>
#include <unistd.h>

namespace ov_test {

// Opens soft<index> through the library under test, or returns nullptr.
inline ibv_context *open_soft(int index = 0)
{
	int n = 0;
	ibv_device **list = ibv_get_device_list(&n);
	if (!list)
		return nullptr;
	ibv_context *ctx = nullptr;
	std::string want = "soft" + std::to_string(index);
	for (int i = 0; i < n && !ctx; i++)
		if (want == ibv_get_device_name(list[i]))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return ctx;
}

// Polls until one completion arrives (true) or about `ms` ms pass or the
// poll fails (false).
inline bool poll_one(ibv_cq *cq, ibv_wc *wc, int ms = 5000)
{
	for (int i = 0; i < ms * 10; i++) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n == 1)
			return true;
		if (n < 0)
			return false;
		usleep(100);
	}
	return false;
}

// The path of this executable ("" if /proc is unavailable).
inline std::string self_exe()
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return {};
	exe[n] = 0;
	return exe;
}

// Starts this executable as "EXE flag mode" with its standard input and
// output (or, with out_is_stderr, its standard error) on pipes; *in writes
// to it, *out reads from it (either may be nullptr: that end is closed).
// Returns the child's pid, or -1.
inline pid_t spawn_self(const char *flag, const char *mode, FILE **in, FILE **out,
			bool out_is_stderr = false)
{
	int to[2], from[2];
	if (pipe(to))
		return -1;
	if (pipe(from)) {
		close(to[0]);
		close(to[1]);
		return -1;
	}
	pid_t c = fork();
	if (c == 0) {
		dup2(to[0], 0);
		dup2(from[1], out_is_stderr ? 2 : 1);
		close(to[1]);
		close(from[0]);
		std::string self = self_exe();
		execl(self.c_str(), self.c_str(), flag, mode, (char *)nullptr);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	if (in)
		*in = fdopen(to[1], "w");
	else
		close(to[1]);
	if (out)
		*out = fdopen(from[0], "r");
	else
		close(from[0]);
	return c;
}

} // namespace ov_test

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <sys/types.h>

namespace ov_test {

// Forks a child that opens soft<index> and sleeps holding it (a user of
// the device's segment); returns its pid once it has the device, or -1.
// The caller kills and reaps it.
inline pid_t hold_soft_in_child(int index)
{
	int ready[2];
	if (pipe(ready))
		return -1;
	pid_t c = fork();
	if (c == 0) {
		close(ready[0]);
		char ok = open_soft(index) ? 'y' : 'n';
		if (write(ready[1], &ok, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(ready[1]);
	char ok = 0;
	bool got = read(ready[0], &ok, 1) == 1 && ok == 'y';
	close(ready[0]);
	return c > 0 && got ? c : -1;
}

// Handle wrappers: each object destroys itself (deleters ignore nullptr).
struct CtxDel { void operator()(ibv_context *c) const { ibv_close_device(c); } };
struct PdDel { void operator()(ibv_pd *p) const { ibv_dealloc_pd(p); } };
struct CqDel { void operator()(ibv_cq *c) const { ibv_destroy_cq(c); } };
struct QpDel { void operator()(ibv_qp *q) const { ibv_destroy_qp(q); } };
struct MrDel { void operator()(ibv_mr *m) const { ibv_dereg_mr(m); } };
struct MwDel { void operator()(ibv_mw *m) const { ibv_dealloc_mw(m); } };
using Ctx = std::unique_ptr<ibv_context, CtxDel>;
using Pd = std::unique_ptr<ibv_pd, PdDel>;
using Cq = std::unique_ptr<ibv_cq, CqDel>;
using Qp = std::unique_ptr<ibv_qp, QpDel>;
using Mr = std::unique_ptr<ibv_mr, MrDel>;
using Mw = std::unique_ptr<ibv_mw, MwDel>;

inline constexpr int kAllAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
				  IBV_ACCESS_MW_BIND;

// Where and how a QP is brought up (ibv_modify_qp(3) attributes); the
// defaults connect to soft0 (LID 1) with every remote right.
struct Path {
	uint32_t dest_qpn = 0;
	uint16_t dlid = 1;
	const ibv_gid *dgid = nullptr; // set: a global route to this GID
	int access = kAllAccess;        // IBV_ACCESS_MW_BIND is dropped (no QP right)
	uint32_t qkey = 0x11111111;     // UD
	uint8_t min_rnr_timer = 1;
	uint8_t rnr_retry = 7;
	uint8_t retry_cnt = 7;
	uint8_t timeout = 10;
	uint8_t rd_atomic = 4;          // max_rd_atomic and max_dest_rd_atomic
};

// One step each, with exactly the attributes the transition needs for the
// QP's type; 0 or the errno value of ibv_modify_qp.
inline int qp_to_init(ibv_qp *qp, const Path &p)
{
	ibv_qp_attr a = {};
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = p.qkey;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = p.access & ~IBV_ACCESS_MW_BIND;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	return ibv_modify_qp(qp, &a, mask);
}

inline int qp_to_rtr(ibv_qp *qp, const Path &p)
{
	ibv_qp_attr a = {};
	a.qp_state = IBV_QPS_RTR;
	int mask = IBV_QP_STATE;
	if (qp->qp_type != IBV_QPT_UD) {
		a.path_mtu = IBV_MTU_4096;
		a.dest_qp_num = p.dest_qpn;
		a.ah_attr.dlid = p.dlid;
		a.ah_attr.port_num = 1;
		if (p.dgid) {
			a.ah_attr.is_global = 1;
			a.ah_attr.grh.dgid = *p.dgid;
			a.ah_attr.grh.hop_limit = 1;
		}
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (qp->qp_type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = p.rd_atomic;
			a.min_rnr_timer = p.min_rnr_timer;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	return ibv_modify_qp(qp, &a, mask);
}

inline int qp_to_rts(ibv_qp *qp, const Path &p)
{
	ibv_qp_attr a = {};
	a.qp_state = IBV_QPS_RTS;
	int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (qp->qp_type == IBV_QPT_RC) {
		a.timeout = p.timeout;
		a.retry_cnt = p.retry_cnt;
		a.rnr_retry = p.rnr_retry;
		a.max_rd_atomic = p.rd_atomic;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	return ibv_modify_qp(qp, &a, mask);
}

// INIT, RTR and RTS in turn; the first failure names its step.
inline ::testing::AssertionResult bring_up(ibv_qp *qp, const Path &p)
{
	if (int rc = qp_to_init(qp, p))
		return ::testing::AssertionFailure() << "INIT: " << strerror(rc);
	if (int rc = qp_to_rtr(qp, p))
		return ::testing::AssertionFailure() << "RTR: " << strerror(rc);
	if (int rc = qp_to_rts(qp, p))
		return ::testing::AssertionFailure() << "RTS: " << strerror(rc);
	return ::testing::AssertionSuccess();
}

// The common case: towards QP number dest on the device of LID dlid.
inline ::testing::AssertionResult bring_up(ibv_qp *qp, uint32_t dest, uint16_t dlid, int access,
					   uint8_t rnr_retry = 7)
{
	Path p;
	p.dest_qpn = dest;
	p.dlid = dlid;
	p.access = access;
	p.rnr_retry = rnr_retry;
	return bring_up(qp, p);
}

// A context of soft<index> with a PD and two connected QPs (a sends to b),
// each with its own CQ. Everything is released by the destructor.
struct Pair {
	Ctx ctx;
	Pd pd;
	Cq cqa, cqb;
	Qp a, b;
	uint32_t max_send_wr = 32;

	::testing::AssertionResult connect_pair(ibv_qp_type type, int access, int index = 0,
						uint8_t rnr_retry = 7)
	{
		ctx.reset(open_soft(index));
		if (!ctx)
			return ::testing::AssertionFailure()
			       << "open soft" << index << ": " << strerror(errno);
		pd.reset(ibv_alloc_pd(ctx.get()));
		cqa.reset(ibv_create_cq(ctx.get(), 256, nullptr, nullptr, 0));
		cqb.reset(ibv_create_cq(ctx.get(), 256, nullptr, nullptr, 0));
		if (!pd || !cqa || !cqb)
			return ::testing::AssertionFailure() << "PD/CQ: " << strerror(errno);
		auto make = [&](ibv_cq *cq) {
			ibv_qp_init_attr ia = {};
			ia.send_cq = ia.recv_cq = cq;
			ia.qp_type = type;
			ia.cap.max_send_wr = max_send_wr;
			ia.cap.max_recv_wr = 32;
			ia.cap.max_send_sge = ia.cap.max_recv_sge = 4;
			ia.cap.max_inline_data = 64;
			return ibv_create_qp(pd.get(), &ia);
		};
		a.reset(make(cqa.get()));
		b.reset(make(cqb.get()));
		if (!a || !b)
			return ::testing::AssertionFailure() << "QP: " << strerror(errno);
		uint16_t lid = uint16_t(index + 1);
		auto ra = bring_up(a.get(), b->qp_num, lid, access, rnr_retry);
		if (!ra)
			return ra;
		return bring_up(b.get(), a->qp_num, lid, access, rnr_retry);
	}
	~Pair()
	{
		a.reset();
		b.reset();
		cqa.reset();
		cqb.reset();
		pd.reset();
		ctx.reset();
	}
};

// Posts one work request of opcode op with one gather entry.
inline int post_one(ibv_qp *qp, ibv_wr_opcode op, const void *buf, uint32_t len, uint32_t lkey,
		    uint64_t raddr = 0, uint32_t rkey = 0, uint64_t wr_id = 1,
		    unsigned flags = IBV_SEND_SIGNALED)
{
	ibv_sge s = {uintptr_t(buf), len, lkey};
	ibv_send_wr wr = {}, *bad;
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.send_flags = flags;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

inline int post_recv_one(ibv_qp *qp, void *buf, uint32_t len, uint32_t lkey, uint64_t wr_id = 7)
{
	ibv_sge s = {uintptr_t(buf), len, lkey};
	ibv_recv_wr wr = {}, *bad;
	wr.wr_id = wr_id;
	wr.sg_list = &s;
	wr.num_sge = 1;
	return ibv_post_recv(qp, &wr, &bad);
}

} // namespace ov_test
