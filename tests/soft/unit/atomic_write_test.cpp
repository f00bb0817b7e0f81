// ATOMIC WRITE on the software device (ibv_wr_atomic_write(3), IBA 1.5):
// the capability bit, an 8-byte store at an aligned address of a region
// with remote write (completion opcode IBV_WC_ATOMIC_WRITE), and its errors:
// misaligned target, region or QP without remote write, no data, a QP type
// other than RC/XRC.
#include "../soft_fixture.h"

#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

using namespace ov_test;

class SoftAtomicWrite : public ::testing::Test {
protected:
	// Extended RC QPs a (requester) and b, connected.
	::testing::AssertionResult make()
	{
		p.ctx.reset(open_soft(0));
		if (!p.ctx)
			return ::testing::AssertionFailure() << "open soft0: " << strerror(errno);
		p.pd.reset(ibv_alloc_pd(p.ctx.get()));
		p.cqa.reset(ibv_create_cq(p.ctx.get(), 64, nullptr, nullptr, 0));
		p.cqb.reset(ibv_create_cq(p.ctx.get(), 64, nullptr, nullptr, 0));
		if (!p.pd || !p.cqa || !p.cqb)
			return ::testing::AssertionFailure() << "PD/CQ: " << strerror(errno);
		ibv_qp_init_attr_ex ia = {};
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		ia.pd = p.pd.get();
		ia.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_SEND;
		ia.send_cq = ia.recv_cq = p.cqa.get();
		p.a.reset(ibv_create_qp_ex(p.ctx.get(), &ia));
		ia.send_cq = ia.recv_cq = p.cqb.get();
		p.b.reset(ibv_create_qp_ex(p.ctx.get(), &ia));
		if (!p.a || !p.b)
			return ::testing::AssertionFailure() << "create_qp_ex: " << strerror(errno);
		ax = ibv_qp_to_qp_ex(p.a.get());
		auto r = bring_up(p.a.get(), p.b->qp_num, 1, kAllAccess);
		return r ? bring_up(p.b.get(), p.a->qp_num, 1, kAllAccess) : r;
	}

	int post(uint32_t rkey, uint64_t addr, const void *data)
	{
		ibv_wr_start(ax);
		ax->wr_id = 0xa7;
		ax->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_atomic_write(ax, rkey, addr, data);
		return ibv_wr_complete(ax);
	}

	ibv_wc_status status()
	{
		ibv_wc wc = {};
		if (!poll_one(p.cqa.get(), &wc))
			return IBV_WC_GENERAL_ERR;
		EXPECT_EQ(wc.wr_id, 0xa7u);
		if (wc.status == IBV_WC_SUCCESS) {
			EXPECT_EQ(wc.opcode, IBV_WC_ATOMIC_WRITE);
		}
		return wc.status;
	}

	Pair p;
	ibv_qp_ex *ax = nullptr;
};

TEST_F(SoftAtomicWrite, StoresEightBytesAtAnAlignedAddress)
{
	ASSERT_TRUE(make());
	ibv_device_attr_ex da = {};
	ASSERT_EQ(ibv_query_device_ex(p.ctx.get(), nullptr, &da), 0);
	EXPECT_TRUE(da.device_cap_flags_ex & (1ull << 40)); // IB_UVERBS_DEVICE_ATOMIC_WRITE
	std::vector<uint64_t> target(8, 0x1111111111111111ull);
	Mr mr(ibv_reg_mr(p.pd.get(), target.data(), 64, kAllAccess));
	ASSERT_TRUE(mr);
	const uint64_t v = 0x0123456789abcdefull;
	ASSERT_EQ(post(mr->rkey, uintptr_t(&target[3]), &v), 0);
	EXPECT_EQ(status(), IBV_WC_SUCCESS);
	EXPECT_EQ(target[3], v);
	EXPECT_EQ(target[2], 0x1111111111111111ull);
	EXPECT_EQ(target[4], 0x1111111111111111ull);
	// Misaligned: an invalid request, nothing written.
	ASSERT_EQ(post(mr->rkey, uintptr_t(&target[5]) + 4, &v), 0);
	EXPECT_EQ(status(), IBV_WC_REM_INV_REQ_ERR);
	EXPECT_EQ(target[5], 0x1111111111111111ull);
}

TEST_F(SoftAtomicWrite, NeedsRemoteWriteOnTheRegion)
{
	ASSERT_TRUE(make());
	uint64_t target = 5;
	Mr ro(ibv_reg_mr(p.pd.get(), &target, 8, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ));
	ASSERT_TRUE(ro);
	const uint64_t v = 9;
	ASSERT_EQ(post(ro->rkey, uintptr_t(&target), &v), 0);
	EXPECT_EQ(status(), IBV_WC_REM_ACCESS_ERR);
	EXPECT_EQ(target, 5u);
}

TEST_F(SoftAtomicWrite, NeedsRemoteWriteOnTheResponderQp)
{
	ASSERT_TRUE(make());
	uint64_t target = 5;
	const uint64_t v = 9;
	// The responder QP stops granting remote write (RTS to RTS).
	ibv_qp_attr qa = {};
	qa.qp_access_flags = IBV_ACCESS_REMOTE_READ;
	ASSERT_EQ(ibv_modify_qp(p.b.get(), &qa, IBV_QP_ACCESS_FLAGS), 0);
	Mr rw(ibv_reg_mr(p.pd.get(), &target, 8, kAllAccess));
	ASSERT_TRUE(rw);
	ASSERT_EQ(post(rw->rkey, uintptr_t(&target), &v), 0);
	EXPECT_EQ(status(), IBV_WC_REM_ACCESS_ERR);
	EXPECT_EQ(target, 5u);
}

TEST_F(SoftAtomicWrite, BuildErrorsFailTheBatch)
{
	ASSERT_TRUE(make());
	uint64_t target = 0;
	Mr mr(ibv_reg_mr(p.pd.get(), &target, 8, kAllAccess));
	ASSERT_TRUE(mr);
	EXPECT_EQ(post(mr->rkey, uintptr_t(&target), nullptr), EINVAL);
	// UD QPs have no atomic write.
	ibv_qp_init_attr_ex ia = {};
	ia.qp_type = IBV_QPT_UD;
	ia.send_cq = ia.recv_cq = p.cqa.get();
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.pd = p.pd.get();
	ia.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_SEND;
	Qp ud(ibv_create_qp_ex(p.ctx.get(), &ia));
	ASSERT_TRUE(ud) << strerror(errno);
	ax = ibv_qp_to_qp_ex(ud.get());
	const uint64_t v = 1;
	EXPECT_EQ(post(mr->rkey, uintptr_t(&target), &v), EINVAL);
	ax = ibv_qp_to_qp_ex(p.a.get());
	// The legacy post_send has no field for the data: refused.
	ibv_send_wr wr = {}, *bad = nullptr;
	wr.opcode = IBV_WR_ATOMIC_WRITE;
	EXPECT_NE(ibv_post_send(p.a.get(), &wr, &bad), 0);
}

} // namespace
