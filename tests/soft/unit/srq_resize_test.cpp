// ibv_modify_srq with IBV_SRQ_MAX_WR on the software device: the queue
// grows keeping what is queued (in order), refuses to shrink below what is
// queued, and checks its arguments. Through the real libibverbs.so.1.
#include "../soft_fixture.h"
#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <unistd.h>
#include <vector>

namespace {

using ov_test::open_soft;

struct SrqLoop : public ::testing::Test {
	ibv_context *ctx = nullptr;
	ibv_pd *pd = nullptr;
	ibv_cq *cq = nullptr;
	ibv_srq *srq = nullptr;
	ibv_qp *a = nullptr, *b = nullptr; // a sends to b, b takes from the SRQ
	std::vector<char> buf = std::vector<char>(1 << 16);
	ibv_mr *mr = nullptr;

	void SetUp() override
	{
		ctx = open_soft();
		ASSERT_NE(ctx, nullptr);
		pd = ibv_alloc_pd(ctx);
		cq = ibv_create_cq(ctx, 1024, nullptr, nullptr, 0);
		ASSERT_TRUE(pd && cq);
		mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
		ASSERT_NE(mr, nullptr);
		ibv_srq_init_attr sa = {};
		sa.attr.max_wr = 4;
		sa.attr.max_sge = 1;
		srq = ibv_create_srq(pd, &sa);
		ASSERT_NE(srq, nullptr);
		a = make_qp(nullptr);
		b = make_qp(srq);
		ASSERT_TRUE(a && b);
		ASSERT_EQ(connect(a, b->qp_num), 0);
		ASSERT_EQ(connect(b, a->qp_num), 0);
	}

	ibv_qp *make_qp(ibv_srq *s)
	{
		ibv_qp_init_attr ia = {};
		ia.send_cq = ia.recv_cq = cq;
		ia.srq = s;
		ia.qp_type = IBV_QPT_RC;
		ia.sq_sig_all = 1;
		ia.cap.max_send_wr = 256;
		ia.cap.max_recv_wr = s ? 0 : 4;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		return ibv_create_qp(pd, &ia);
	}

	static int connect(ibv_qp *qp, uint32_t dest)
	{
		ov_test::Path p;
		p.dest_qpn = dest;
		p.access = 0;
		p.rd_atomic = 1;
		int rc = ov_test::qp_to_init(qp, p);
		if (!rc)
			rc = ov_test::qp_to_rtr(qp, p);
		return rc ? rc : ov_test::qp_to_rts(qp, p);
	}

	int post_srq(uint64_t id)
	{
		ibv_sge s = {uintptr_t(buf.data() + 32768 + id * 64), 64, mr->lkey};
		ibv_recv_wr wr = {}, *bad;
		wr.wr_id = id;
		wr.sg_list = &s;
		wr.num_sge = 1;
		return ibv_post_srq_recv(srq, &wr, &bad);
	}

	int send(uint8_t tag)
	{
		buf[tag] = char(tag);
		ibv_sge s = {uintptr_t(buf.data() + tag), 1, mr->lkey};
		ibv_send_wr wr = {}, *bad;
		wr.wr_id = tag;
		wr.opcode = IBV_WR_SEND;
		wr.sg_list = &s;
		wr.num_sge = 1;
		return ibv_post_send(a, &wr, &bad);
	}

	void TearDown() override
	{
		if (a)
			ibv_destroy_qp(a);
		if (b)
			ibv_destroy_qp(b);
		if (srq) {
			EXPECT_EQ(ibv_destroy_srq(srq), 0);
		}
		if (mr)
			ibv_dereg_mr(mr);
		if (cq)
			ibv_destroy_cq(cq);
		if (pd)
			ibv_dealloc_pd(pd);
		if (ctx)
			ibv_close_device(ctx);
	}
};

TEST_F(SrqLoop, DeviceAdvertisesResize)
{
	ibv_device_attr da;
	ASSERT_EQ(ibv_query_device(ctx, &da), 0);
	EXPECT_TRUE(da.device_cap_flags & IBV_DEVICE_SRQ_RESIZE);
}

TEST_F(SrqLoop, GrowKeepsQueuedRequestsInOrder)
{
	ibv_srq_attr q;
	ASSERT_EQ(ibv_query_srq(srq, &q), 0);
	uint32_t before = q.max_wr;
	for (uint64_t i = 0; i < before; i++)
		ASSERT_EQ(post_srq(i), 0);
	EXPECT_NE(post_srq(999), 0) << "the small queue is full";
	ibv_srq_attr na = {};
	na.max_wr = 200;
	ASSERT_EQ(ibv_modify_srq(srq, &na, IBV_SRQ_MAX_WR), 0);
	ASSERT_EQ(ibv_query_srq(srq, &q), 0);
	EXPECT_GE(q.max_wr, 200u);
	for (uint64_t i = before; i < 200; i++)
		ASSERT_EQ(post_srq(i), 0) << i;
	// Grow again with requests queued, and arm a limit at the same time.
	na.max_wr = 400;
	na.srq_limit = 10;
	ASSERT_EQ(ibv_modify_srq(srq, &na, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT), 0);
	ASSERT_EQ(ibv_query_srq(srq, &q), 0);
	EXPECT_GE(q.max_wr, 400u);
	EXPECT_EQ(q.srq_limit, 10u);
	// Every request is consumed once, in the order posted.
	for (int i = 0; i < 200; i++)
		ASSERT_EQ(send(uint8_t(i)), 0);
	std::vector<uint64_t> recv_ids;
	int sends = 0;
	for (int spins = 0; spins < 50000 && (recv_ids.size() < 200 || sends < 200); spins++) {
		ibv_wc wc[16];
		int n = ibv_poll_cq(cq, 16, wc);
		ASSERT_GE(n, 0);
		for (int k = 0; k < n; k++) {
			ASSERT_EQ(wc[k].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc[k].status);
			if (wc[k].opcode == IBV_WC_RECV)
				recv_ids.push_back(wc[k].wr_id);
			else
				sends++;
		}
		if (!n)
			usleep(100);
	}
	ASSERT_EQ(recv_ids.size(), 200u);
	for (uint64_t i = 0; i < 200; i++) {
		EXPECT_EQ(recv_ids[i], i);
		EXPECT_EQ(buf[32768 + i * 64], char(uint8_t(i)));
	}
}

TEST_F(SrqLoop, BadSizesAreEinval)
{
	for (uint64_t i = 0; i < 4; i++)
		ASSERT_EQ(post_srq(i), 0);
	ibv_srq_attr na = {};
	na.max_wr = 2; // fewer than the 4 queued
	EXPECT_EQ(ibv_modify_srq(srq, &na, IBV_SRQ_MAX_WR), EINVAL);
	na.max_wr = 0;
	EXPECT_EQ(ibv_modify_srq(srq, &na, IBV_SRQ_MAX_WR), EINVAL);
	na.max_wr = 1u << 30; // beyond the device's max_srq_wr
	EXPECT_EQ(ibv_modify_srq(srq, &na, IBV_SRQ_MAX_WR), EINVAL);
	na.max_wr = 8;
	na.srq_limit = 9; // a limit beyond the new size
	EXPECT_EQ(ibv_modify_srq(srq, &na, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT), EINVAL);
	ibv_srq_attr q;
	ASSERT_EQ(ibv_query_srq(srq, &q), 0);
	EXPECT_EQ(q.max_wr, 4u) << "a refused resize leaves the queue as it was";
	// The queued requests are still there.
	ASSERT_EQ(send(1), 0);
	ibv_wc wc;
	int got = 0;
	for (int spins = 0; spins < 50000 && got < 2; spins++) {
		int n = ibv_poll_cq(cq, 1, &wc);
		if (n == 1) {
			EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
			if (wc.opcode == IBV_WC_RECV) {
				EXPECT_EQ(wc.wr_id, 0u);
			}
			got++;
		} else {
			usleep(100);
		}
	}
	EXPECT_EQ(got, 2);
}

} // namespace
