// What rdma-core's test suite expects of a device, on the software device:
// a QP reset takes its unpolled completions out of its CQs (the suite's
// test_mr_rereg_* reset their QPs after a failed transfer and expect the
// next poll to see new work only), traffic after ibv_rereg_mr(3), and with
// rdma-core 56's ABI the FLUSH operation (ibv_wr_flush(3), IBA 1.5): access
// rights of the responder QP and of the region, the two selectivity levels,
// IBV_WC_FLUSH completions and the device capability bit. Under the 44 ABI
// the FLUSH access bits stay unknown. And ibv_import_device(3) of a software
// device's context (test_imported_rc_ex_rdma_write).
#include "../soft_fixture.h"

#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace {

using namespace ov_test;

int to_reset(ibv_qp *qp)
{
	ibv_qp_attr a = {};
	a.qp_state = IBV_QPS_RESET;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

int to_error(ibv_qp *qp)
{
	ibv_qp_attr a = {};
	a.qp_state = IBV_QPS_ERR;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

// Every completion waiting in cq (without blocking).
std::vector<ibv_wc> drain(ibv_cq *cq)
{
	std::vector<ibv_wc> out;
	ibv_wc wc[8];
	int n;
	while ((n = ibv_poll_cq(cq, 8, wc)) > 0)
		out.insert(out.end(), wc, wc + n);
	return out;
}

// Both QPs of p back to RTS after a reset (a talks to b again).
::testing::AssertionResult restate(Pair &p, int access = kAllAccess)
{
	if (to_reset(p.a.get()) || to_reset(p.b.get()))
		return ::testing::AssertionFailure() << "reset: " << strerror(errno);
	auto r = bring_up(p.a.get(), p.b->qp_num, 1, access);
	return r ? bring_up(p.b.get(), p.a->qp_num, 1, access) : r;
}

// One send of `len` bytes from a to b, both completions polled: the status
// the sender saw.
ibv_wc_status send_once(Pair &p, ibv_mr *src, ibv_mr *dst, char *dbuf, uint32_t len)
{
	if (post_recv_one(p.b.get(), dbuf, len, dst->lkey, 7) ||
	    post_one(p.a.get(), IBV_WR_SEND, src->addr, len, src->lkey, 0, 0, 1))
		return IBV_WC_GENERAL_ERR;
	ibv_wc wc;
	if (!poll_one(p.cqa.get(), &wc))
		return IBV_WC_GENERAL_ERR;
	ibv_wc_status st = wc.status;
	ibv_wc rw;
	if (st == IBV_WC_SUCCESS && (!poll_one(p.cqb.get(), &rw) || rw.status != IBV_WC_SUCCESS)) {
		ADD_FAILURE() << "receive: " << ibv_wc_status_str(rw.status) << " wr_id " << rw.wr_id;
		return IBV_WC_GENERAL_ERR;
	}
	return st;
}

TEST(SoftReset, ResetRemovesOnlyThatQpsUnpolledCompletions)
{
	Pair p;
	ASSERT_TRUE(p.connect_pair(IBV_QPT_RC, kAllAccess));
	std::vector<char> buf(4096);
	Mr mr(ibv_reg_mr(p.pd.get(), buf.data(), buf.size(), kAllAccess));
	ASSERT_TRUE(mr);
	// A third QP shares b's CQ; its completions must survive b's reset, in
	// their order.
	ibv_qp_init_attr ia = {};
	ia.send_cq = ia.recv_cq = p.cqb.get();
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	Qp c(ibv_create_qp(p.pd.get(), &ia));
	ASSERT_TRUE(c);
	ASSERT_TRUE(bring_up(c.get(), p.a->qp_num, 1, kAllAccess));
	ASSERT_EQ(post_recv_one(p.b.get(), buf.data(), 64, mr->lkey, 1), 0);
	ASSERT_EQ(post_recv_one(c.get(), buf.data(), 64, mr->lkey, 100), 0);
	ASSERT_EQ(post_recv_one(p.b.get(), buf.data(), 64, mr->lkey, 2), 0);
	ASSERT_EQ(post_recv_one(c.get(), buf.data(), 64, mr->lkey, 101), 0);
	ASSERT_EQ(to_error(p.b.get()), 0);
	ASSERT_EQ(to_error(c.get()), 0);
	ASSERT_EQ(to_reset(p.b.get()), 0);
	auto left = drain(p.cqb.get());
	ASSERT_EQ(left.size(), 2u);
	EXPECT_EQ(left[0].wr_id, 100u);
	EXPECT_EQ(left[1].wr_id, 101u);
	for (auto &wc : left) {
		EXPECT_EQ(wc.qp_num, c->qp_num);
		EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
	}
	// Back to RTS: the first completions polled are of the new work.
	ASSERT_TRUE(bring_up(p.b.get(), p.a->qp_num, 1, kAllAccess));
	EXPECT_EQ(send_once(p, mr.get(), mr.get(), buf.data() + 1024, 64), IBV_WC_SUCCESS);
	EXPECT_TRUE(drain(p.cqa.get()).empty());
	EXPECT_TRUE(drain(p.cqb.get()).empty());
}

TEST(SoftReset, ResetPurgesTheExtendedCqToo)
{
	Pair p;
	ASSERT_TRUE(p.connect_pair(IBV_QPT_RC, kAllAccess));
	ibv_cq_init_attr_ex ca = {};
	ca.cqe = 16;
	ca.wc_flags = IBV_WC_EX_WITH_QP_NUM;
	ibv_cq_ex *cx = ibv_create_cq_ex(p.ctx.get(), &ca);
	ASSERT_NE(cx, nullptr);
	ibv_qp_init_attr ia = {};
	ia.send_cq = ia.recv_cq = ibv_cq_ex_to_cq(cx);
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ibv_qp *q = ibv_create_qp(p.pd.get(), &ia);
	ASSERT_NE(q, nullptr);
	std::vector<char> buf(4096);
	Mr mr(ibv_reg_mr(p.pd.get(), buf.data(), buf.size(), kAllAccess));
	ASSERT_TRUE(mr);
	ASSERT_TRUE(bring_up(q, p.a->qp_num, 1, kAllAccess));
	ASSERT_EQ(post_recv_one(q, buf.data(), 64, mr->lkey, 5), 0);
	ASSERT_EQ(to_error(q), 0);
	ASSERT_EQ(to_reset(q), 0);
	ibv_poll_cq_attr pa = {};
	EXPECT_EQ(ibv_start_poll(cx, &pa), ENOENT);
	ASSERT_TRUE(bring_up(q, p.a->qp_num, 1, kAllAccess));
	ASSERT_EQ(post_recv_one(q, buf.data(), 64, mr->lkey, 6), 0);
	ASSERT_EQ(to_error(q), 0);
	ASSERT_EQ(ibv_start_poll(cx, &pa), 0);
	EXPECT_EQ(cx->wr_id, 6u);
	EXPECT_EQ(cx->status, IBV_WC_WR_FLUSH_ERR);
	EXPECT_EQ(ibv_next_poll(cx), ENOENT);
	ibv_end_poll(cx);
	ASSERT_EQ(ibv_destroy_qp(q), 0);
	ASSERT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cx)), 0);
}

// rdma-core's test_mr_rereg_pd: a region moved to another PD is out of reach
// of the QP (remote operation error), moved back it is usable again.
TEST(SoftReset, TrafficAfterReregPd)
{
	Pair p;
	ASSERT_TRUE(p.connect_pair(IBV_QPT_RC, kAllAccess));
	std::vector<char> src(256, 'c'), dst(256);
	Mr ms(ibv_reg_mr(p.pd.get(), src.data(), src.size(), kAllAccess));
	Mr md(ibv_reg_mr(p.pd.get(), dst.data(), dst.size(), kAllAccess));
	Pd other(ibv_alloc_pd(p.ctx.get()));
	ASSERT_TRUE(ms && md && other);
	ASSERT_EQ(send_once(p, ms.get(), md.get(), dst.data(), 64), IBV_WC_SUCCESS);
	ASSERT_EQ(ibv_rereg_mr(md.get(), IBV_REREG_MR_CHANGE_PD, other.get(), nullptr, 0, 0), 0);
	EXPECT_EQ(send_once(p, ms.get(), md.get(), dst.data(), 64), IBV_WC_REM_OP_ERR);
	ASSERT_TRUE(restate(p));
	ASSERT_EQ(ibv_rereg_mr(md.get(), IBV_REREG_MR_CHANGE_PD, p.pd.get(), nullptr, 0, 0), 0);
	for (int i = 0; i < 10; i++)
		ASSERT_EQ(send_once(p, ms.get(), md.get(), dst.data(), 64), IBV_WC_SUCCESS) << i;
	EXPECT_EQ(memcmp(dst.data(), src.data(), 64), 0);
	// The region may stay in the other PD when that one is freed last.
	ASSERT_EQ(ibv_rereg_mr(md.get(), IBV_REREG_MR_CHANGE_PD, other.get(), nullptr, 0, 0), 0);
	md.reset();
}

// rdma-core's test_mr_rereg_addr: a receive posted before the region moved
// names the old address (local protection error at the receiver, remote
// operation error at the sender); after a reset the new buffer is used.
TEST(SoftReset, TrafficAfterReregTranslation)
{
	Pair p;
	ASSERT_TRUE(p.connect_pair(IBV_QPT_RC, kAllAccess));
	std::vector<char> src(256, 's'), old_buf(256), new_buf(256);
	Mr ms(ibv_reg_mr(p.pd.get(), src.data(), src.size(), kAllAccess));
	Mr md(ibv_reg_mr(p.pd.get(), old_buf.data(), old_buf.size(), kAllAccess));
	ASSERT_TRUE(ms && md);
	ASSERT_EQ(post_recv_one(p.b.get(), old_buf.data(), 64, md->lkey, 7), 0);
	ASSERT_EQ(ibv_rereg_mr(md.get(), IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, new_buf.data(),
			       new_buf.size(), 0),
		  0);
	ASSERT_EQ(post_one(p.a.get(), IBV_WR_SEND, src.data(), 64, ms->lkey), 0);
	ibv_wc wc;
	ASSERT_TRUE(poll_one(p.cqa.get(), &wc));
	EXPECT_EQ(wc.status, IBV_WC_REM_OP_ERR);
	ASSERT_TRUE(poll_one(p.cqb.get(), &wc));
	EXPECT_EQ(wc.status, IBV_WC_LOC_PROT_ERR);
	ASSERT_TRUE(restate(p));
	for (int i = 0; i < 10; i++)
		ASSERT_EQ(send_once(p, ms.get(), md.get(), new_buf.data(), 64), IBV_WC_SUCCESS) << i;
	EXPECT_EQ(memcmp(new_buf.data(), src.data(), 64), 0);
	EXPECT_EQ(old_buf[0], 0);
}

#if _OPENVERBS_ABI >= 56

constexpr int kFlushQpAccess = kAllAccess | IBV_ACCESS_FLUSH_GLOBAL | IBV_ACCESS_FLUSH_PERSISTENT;

// Two extended RC QPs (RDMA write and flush builders), a sends to b.
struct FlushPair {
	Ctx ctx;
	Pd pd;
	Cq cqa, cqb;
	Qp a, b;
	ibv_qp_ex *ax = nullptr;

	::testing::AssertionResult make(int b_access = kFlushQpAccess,
					ibv_qp_type type = IBV_QPT_RC)
	{
		ctx.reset(open_soft(0));
		if (!ctx)
			return ::testing::AssertionFailure() << "open soft0: " << strerror(errno);
		pd.reset(ibv_alloc_pd(ctx.get()));
		cqa.reset(ibv_create_cq(ctx.get(), 64, nullptr, nullptr, 0));
		cqb.reset(ibv_create_cq(ctx.get(), 64, nullptr, nullptr, 0));
		if (!pd || !cqa || !cqb)
			return ::testing::AssertionFailure() << "PD/CQ: " << strerror(errno);
		auto create = [&](ibv_cq *cq) {
			ibv_qp_init_attr_ex ia = {};
			ia.send_cq = ia.recv_cq = cq;
			ia.qp_type = type;
			ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
			ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
			ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			ia.pd = pd.get();
			ia.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_FLUSH |
					    IBV_QP_EX_WITH_SEND;
			return ibv_create_qp_ex(ctx.get(), &ia);
		};
		a.reset(create(cqa.get()));
		b.reset(create(cqb.get()));
		if (!a || !b)
			return ::testing::AssertionFailure() << "create_qp_ex: " << strerror(errno);
		ax = ibv_qp_to_qp_ex(a.get());
		if (type == IBV_QPT_UD)
			return ::testing::AssertionSuccess();
		auto r = bring_up(a.get(), b->qp_num, 1, kFlushQpAccess);
		return r ? bring_up(b.get(), a->qp_num, 1, b_access) : r;
	}

	// Posts one signaled flush; the wr_complete result.
	int flush(uint32_t rkey, uint64_t addr, size_t len, uint8_t type, uint8_t level)
	{
		ibv_wr_start(ax);
		ax->wr_id = 0xf1;
		ax->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_flush(ax, rkey, addr, len, type, level);
		return ibv_wr_complete(ax);
	}

	// The status of the flush just posted (after its completion arrived).
	ibv_wc_status status()
	{
		ibv_wc wc = {};
		if (!poll_one(cqa.get(), &wc))
			return IBV_WC_GENERAL_ERR;
		EXPECT_EQ(wc.wr_id, 0xf1u);
		if (wc.status == IBV_WC_SUCCESS) {
			EXPECT_EQ(wc.opcode, IBV_WC_FLUSH);
			EXPECT_EQ(wc.byte_len, 0u);
		}
		return wc.status;
	}
};

TEST(SoftFlush, DeviceAdvertisesGlobalFlushOnly)
{
	Ctx ctx(open_soft(0));
	ASSERT_TRUE(ctx);
	ibv_device_attr_ex da = {};
	ASSERT_EQ(ibv_query_device_ex(ctx.get(), nullptr, &da), 0);
	EXPECT_TRUE(da.device_cap_flags_ex & (1ull << 38)); // IB_UVERBS_DEVICE_FLUSH_GLOBAL
	EXPECT_FALSE(da.device_cap_flags_ex & (1ull << 39)); // IB_UVERBS_DEVICE_FLUSH_PERSISTENT
	Pd pd(ibv_alloc_pd(ctx.get()));
	std::vector<char> buf(4096);
	Mr g(ibv_reg_mr(pd.get(), buf.data(), buf.size(),
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_FLUSH_GLOBAL));
	EXPECT_TRUE(g);
	errno = 0;
	EXPECT_EQ(ibv_reg_mr(pd.get(), buf.data(), buf.size(),
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_FLUSH_PERSISTENT),
		  nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
	errno = 0;
	EXPECT_EQ(ibv_rereg_mr(g.get(), IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
			       IBV_ACCESS_FLUSH_PERSISTENT),
		  IBV_REREG_MR_ERR_CMD);
	EXPECT_EQ(errno, EOPNOTSUPP);
	EXPECT_EQ(ibv_rereg_mr(g.get(), IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				       IBV_ACCESS_FLUSH_GLOBAL),
		  0);
}

TEST(SoftFlush, WriteThenFlushRangeAndWholeRegion)
{
	FlushPair p;
	ASSERT_TRUE(p.make());
	std::vector<char> src(4096, 'w'), dst(4096);
	Mr ms(ibv_reg_mr(p.pd.get(), src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE));
	Mr md(ibv_reg_mr(p.pd.get(), dst.data(), dst.size(),
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_FLUSH_GLOBAL));
	ASSERT_TRUE(ms && md);
	// Write, then flush in the same batch: the flush completes after the
	// write's bytes are in place.
	ibv_wr_start(p.ax);
	p.ax->wr_id = 1;
	p.ax->wr_flags = 0;
	ibv_wr_rdma_write(p.ax, md->rkey, uintptr_t(dst.data()));
	ibv_wr_set_sge(p.ax, ms->lkey, uintptr_t(src.data()), 4096);
	p.ax->wr_id = 0xf1;
	p.ax->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_flush(p.ax, md->rkey, uintptr_t(dst.data()), 4096, IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE);
	ASSERT_EQ(ibv_wr_complete(p.ax), 0);
	EXPECT_EQ(p.status(), IBV_WC_SUCCESS);
	EXPECT_EQ(memcmp(src.data(), dst.data(), 4096), 0);
	// A range inside the region, an empty one at its end, and the whole
	// region whatever address and length say (IBV_FLUSH_MR).
	ASSERT_EQ(p.flush(md->rkey, uintptr_t(dst.data()) + 100, 10, IBV_FLUSH_GLOBAL,
			  IBV_FLUSH_RANGE), 0);
	EXPECT_EQ(p.status(), IBV_WC_SUCCESS);
	ASSERT_EQ(p.flush(md->rkey, uintptr_t(dst.data()) + 4096, 0, IBV_FLUSH_GLOBAL,
			  IBV_FLUSH_RANGE), 0);
	EXPECT_EQ(p.status(), IBV_WC_SUCCESS);
	ASSERT_EQ(p.flush(md->rkey, 0, 12345678, IBV_FLUSH_GLOBAL, IBV_FLUSH_MR), 0);
	EXPECT_EQ(p.status(), IBV_WC_SUCCESS);
	EXPECT_TRUE(drain(p.cqb.get()).empty()); // nothing at the responder
}

// The status of one flush from a fresh pair: b accepts b_access, the target
// is a 4 KiB region with mr_access, the range starts `off` bytes into it.
ibv_wc_status flush_once(int b_access, int mr_access, uint64_t off, size_t len, uint8_t type,
			 uint8_t level)
{
	FlushPair p;
	std::vector<char> dst(4096);
	if (!p.make(b_access))
		return IBV_WC_GENERAL_ERR;
	Mr md(ibv_reg_mr(p.pd.get(), dst.data(), dst.size(), mr_access));
	if (!md || p.flush(md->rkey, uintptr_t(dst.data()) + off, len, type, level))
		return IBV_WC_GENERAL_ERR;
	return p.status();
}

constexpr int kFlushMr = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_FLUSH_GLOBAL;

TEST(SoftFlush, RangeOutsideTheRegionIsARemoteAccessError)
{
	EXPECT_EQ(flush_once(kFlushQpAccess, kFlushMr, 4000, 200, IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE),
		  IBV_WC_REM_ACCESS_ERR);
}

TEST(SoftFlush, RegionWithoutTheRightIsARemoteAccessError)
{
	EXPECT_EQ(flush_once(kFlushQpAccess, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0, 64,
			     IBV_FLUSH_GLOBAL, IBV_FLUSH_MR),
		  IBV_WC_REM_ACCESS_ERR);
}

// rdma-core's test_qp_ex_rc_flush_type_violate: the QP accepts persistent
// flushes but the region (ordinary memory) cannot have the right.
TEST(SoftFlush, PersistentFlushIsARemoteAccessError)
{
	EXPECT_EQ(flush_once(kFlushQpAccess, kFlushMr, 0, 64, IBV_FLUSH_PERSISTENT, IBV_FLUSH_RANGE),
		  IBV_WC_REM_ACCESS_ERR);
}

TEST(SoftFlush, ResponderQpWithoutTheTypeIsAnInvalidRequest)
{
	// b accepts no flush at all.
	EXPECT_EQ(flush_once(kAllAccess, kFlushMr, 0, 64, IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE),
		  IBV_WC_REM_INV_REQ_ERR);
}

TEST(SoftFlush, BadArgumentsPostNothing)
{
	FlushPair p;
	ASSERT_TRUE(p.make());
	std::vector<char> dst(4096);
	Mr md(ibv_reg_mr(p.pd.get(), dst.data(), dst.size(), kFlushMr));
	ASSERT_TRUE(md);
	uint64_t at = uintptr_t(dst.data());
	EXPECT_EQ(p.flush(md->rkey, at, 64, 0, IBV_FLUSH_RANGE), EINVAL);
	EXPECT_EQ(p.flush(md->rkey, at, 64, 4, IBV_FLUSH_RANGE), EINVAL);
	EXPECT_EQ(p.flush(md->rkey, at, 64, IBV_FLUSH_GLOBAL, 2), EINVAL);
	EXPECT_TRUE(drain(p.cqa.get()).empty());
	// The flush has no ibv_send_wr form.
	char b = 0;
	EXPECT_EQ(post_one(p.a.get(), IBV_WR_FLUSH, &b, 0, 0, at, md->rkey), EINVAL);
	// The QP is still usable.
	ASSERT_EQ(p.flush(md->rkey, at, 64, IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE), 0);
	EXPECT_EQ(p.status(), IBV_WC_SUCCESS);
}

TEST(SoftFlush, OnlyConnectedReliableQps)
{
	FlushPair p;
	ASSERT_TRUE(p.make(kFlushQpAccess, IBV_QPT_UD));
	EXPECT_EQ(p.flush(1, 0, 0, IBV_FLUSH_GLOBAL, IBV_FLUSH_MR), EINVAL);
}

#else // the 44 ABI: rdma-core 44 has no FLUSH; its access bits are unknown

TEST(SoftFlush, AccessBitsOfLaterReleasesAreRefused)
{
	Pair p;
	ASSERT_TRUE(p.connect_pair(IBV_QPT_RC, kAllAccess));
	std::vector<char> buf(4096);
	errno = 0;
	EXPECT_EQ(ibv_reg_mr(p.pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | (1 << 8)),
		  nullptr);
	EXPECT_EQ(errno, EINVAL);
	ibv_qp_init_attr ia = {};
	ia.send_cq = ia.recv_cq = p.cqa.get();
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	Qp c(ibv_create_qp(p.pd.get(), &ia));
	ASSERT_TRUE(c);
	ibv_qp_attr a = {};
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | (1 << 9);
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	EXPECT_EQ(ibv_modify_qp(c.get(), &a, mask), EINVAL);
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	EXPECT_EQ(ibv_modify_qp(c.get(), &a, mask), 0);
	ibv_device_attr_ex da = {};
	ASSERT_EQ(ibv_query_device_ex(p.ctx.get(), nullptr, &da), 0);
	EXPECT_FALSE(da.device_cap_flags_ex & (3ull << 38));
}

#endif

} // namespace

namespace {

// ibv_import_device(3) on a software device (rdma-core's
// test_imported_rc_ex_rdma_write): the context's cmd_fd is a real file that
// can be duplicated; the imported context shares the PD and MR by handle.
TEST(SoftImport, DuplicatedCmdFdImportsContextPdAndMr)
{
	Pair p;
	ASSERT_TRUE(p.connect_pair(IBV_QPT_RC, kAllAccess));
	ASSERT_GE(p.ctx->cmd_fd, 0);
	std::vector<char> buf(4096), src(4096, 'i');
	Mr mr(ibv_reg_mr(p.pd.get(), buf.data(), buf.size(), kAllAccess));
	Mr ms(ibv_reg_mr(p.pd.get(), src.data(), src.size(), kAllAccess));
	ASSERT_TRUE(mr && ms);
	int fd = dup(p.ctx->cmd_fd);
	ASSERT_GE(fd, 0);
	Ctx ic(ibv_import_device(fd)); // owns fd from here
	ASSERT_TRUE(ic) << strerror(errno);
	EXPECT_STREQ(ibv_get_device_name(ic->device), "soft0");
	EXPECT_GE(ic->cmd_fd, 0);
	ibv_pd *ipd = ibv_import_pd(ic.get(), p.pd->handle);
	ASSERT_NE(ipd, nullptr) << strerror(errno);
	EXPECT_EQ(ipd->handle, p.pd->handle);
	ibv_mr *imr = ibv_import_mr(ipd, mr->handle);
	ASSERT_NE(imr, nullptr) << strerror(errno);
	EXPECT_EQ(imr->lkey, mr->lkey);
	EXPECT_EQ(imr->rkey, mr->rkey);
	EXPECT_EQ(imr->length, mr->length);
	EXPECT_EQ(imr->addr, nullptr); // as a kernel device reports it
	// A QP of the imported context on the imported PD receives an RDMA
	// write into the imported region, and uses its lkey as a local buffer.
	Cq icq(ibv_create_cq(ic.get(), 16, nullptr, nullptr, 0));
	ASSERT_TRUE(icq);
	ibv_qp_init_attr ia = {};
	ia.send_cq = ia.recv_cq = icq.get();
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	Qp iq(ibv_create_qp(ipd, &ia));
	ASSERT_TRUE(iq);
	ASSERT_TRUE(bring_up(iq.get(), p.a->qp_num, 1, kAllAccess));
	ASSERT_EQ(to_reset(p.a.get()), 0);
	ASSERT_TRUE(bring_up(p.a.get(), iq->qp_num, 1, kAllAccess));
	ASSERT_EQ(post_one(p.a.get(), IBV_WR_RDMA_WRITE, src.data(), 512, ms->lkey,
			   uintptr_t(buf.data()), imr->rkey), 0);
	ibv_wc wc;
	ASSERT_TRUE(poll_one(p.cqa.get(), &wc));
	EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
	EXPECT_EQ(memcmp(buf.data(), src.data(), 512), 0);
	ASSERT_EQ(post_one(iq.get(), IBV_WR_RDMA_WRITE, buf.data(), 512, imr->lkey,
			   uintptr_t(src.data()) + 1024, ms->rkey), 0);
	ASSERT_TRUE(poll_one(icq.get(), &wc));
	EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
	EXPECT_EQ(memcmp(src.data() + 1024, buf.data(), 512), 0);
	iq.reset();
	icq.reset();
	ibv_unimport_mr(imr);
	ibv_unimport_pd(ipd);
	// The unimports leave the region registered (it can be imported again).
	ibv_mr *again = ibv_import_mr(p.pd.get(), mr->handle);
	ASSERT_NE(again, nullptr);
	ibv_unimport_mr(again);
}

TEST(SoftImport, WrongDescriptorsAndHandlesAreRefused)
{
	Pair p;
	ASSERT_TRUE(p.connect_pair(IBV_QPT_RC, kAllAccess));
	errno = 0;
	EXPECT_EQ(ibv_import_device(-1), nullptr);
	EXPECT_EQ(errno, EINVAL);
	int pipefd[2];
	ASSERT_EQ(pipe(pipefd), 0);
	errno = 0;
	EXPECT_EQ(ibv_import_device(pipefd[0]), nullptr);
	EXPECT_EQ(errno, EINVAL);
	close(pipefd[0]);
	close(pipefd[1]);
	// A look-alike naming a device that is not listed (8 are).
	int fake = memfd_create("openverbs-soft99", MFD_CLOEXEC);
	ASSERT_GE(fake, 0);
	errno = 0;
	EXPECT_EQ(ibv_import_device(fake), nullptr);
	EXPECT_EQ(errno, EINVAL);
	close(fake);
	errno = 0;
	EXPECT_EQ(ibv_import_pd(p.ctx.get(), 0), nullptr);
	EXPECT_EQ(errno, EINVAL);
	errno = 0;
	EXPECT_EQ(ibv_import_pd(p.ctx.get(), 0x7fffffff), nullptr);
	EXPECT_EQ(errno, EINVAL);
	std::vector<char> buf(4096);
	Mr mr(ibv_reg_mr(p.pd.get(), buf.data(), buf.size(), kAllAccess));
	Pd other(ibv_alloc_pd(p.ctx.get()));
	ASSERT_TRUE(mr && other);
	errno = 0;
	EXPECT_EQ(ibv_import_mr(other.get(), mr->handle), nullptr); // another PD's region
	EXPECT_EQ(errno, EINVAL);
	errno = 0;
	EXPECT_EQ(ibv_import_mr(p.pd.get(), 1u << 30), nullptr);
	EXPECT_EQ(errno, EINVAL);
}

} // namespace
