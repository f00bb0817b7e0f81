// The software device's clock (providers/soft/clock.cpp): hca_core_clock and
// completion_timestamp_mask, ibv_query_rt_values_ex(3), and completion
// timestamps of extended CQs (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP and
// _WALLCLOCK) falling between the clock readings around the operation.
#include "../soft_fixture.h"

#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <memory>
#include <vector>

namespace {

using namespace ov_test;

uint64_t clock_ns(clockid_t id)
{
	timespec ts;
	clock_gettime(id, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

struct CqExDel { void operator()(ibv_cq_ex *c) const { ibv_destroy_cq(ibv_cq_ex_to_cq(c)); } };
using CqEx = std::unique_ptr<ibv_cq_ex, CqExDel>;

TEST(SoftClock, DeviceReportsAOneGigahertzClock)
{
	Ctx ctx(open_soft());
	ASSERT_TRUE(ctx);
	ibv_device_attr_ex a = {};
	ASSERT_EQ(ibv_query_device_ex(ctx.get(), nullptr, &a), 0);
	EXPECT_EQ(a.hca_core_clock, 1000000u); // kHz
	EXPECT_EQ(a.completion_timestamp_mask, ~uint64_t(0));
	ibv_values_ex v = {};
	v.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
	uint64_t before = clock_ns(CLOCK_MONOTONIC);
	ASSERT_EQ(ibv_query_rt_values_ex(ctx.get(), &v), 0);
	uint64_t after = clock_ns(CLOCK_MONOTONIC);
	EXPECT_EQ(v.comp_mask, uint32_t(IBV_VALUES_MASK_RAW_CLOCK));
	EXPECT_EQ(v.raw_clock.tv_sec, 0);
	EXPECT_GE(uint64_t(v.raw_clock.tv_nsec), before);
	EXPECT_LE(uint64_t(v.raw_clock.tv_nsec), after);
	v = {};
	ASSERT_EQ(ibv_query_rt_values_ex(ctx.get(), &v), 0);
	EXPECT_EQ(v.comp_mask, 0u);
}

class SoftClockCq : public ::testing::Test {
protected:
	CqEx make_cq(uint64_t flags)
	{
		ibv_cq_init_attr_ex ca = {};
		ca.cqe = 16;
		ca.wc_flags = IBV_WC_STANDARD_FLAGS | flags;
		return CqEx(ibv_create_cq_ex(p.ctx.get(), &ca));
	}
	void SetUp() override
	{
		p.ctx.reset(open_soft());
		ASSERT_TRUE(p.ctx);
		p.pd.reset(ibv_alloc_pd(p.ctx.get()));
		ASSERT_TRUE(p.pd);
	}
	// Two RC QPs on the given CQs, connected.
	void connect(ibv_cq_ex *ca, ibv_cq_ex *cb)
	{
		auto make = [&](ibv_cq_ex *cq) {
			ibv_qp_init_attr ia = {};
			ia.send_cq = ia.recv_cq = ibv_cq_ex_to_cq(cq);
			ia.qp_type = IBV_QPT_RC;
			ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
			ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
			return ibv_create_qp(p.pd.get(), &ia);
		};
		p.a.reset(make(ca));
		p.b.reset(make(cb));
		ASSERT_TRUE(p.a && p.b);
		ASSERT_TRUE(bring_up(p.a.get(), p.b->qp_num, 1, kAllAccess));
		ASSERT_TRUE(bring_up(p.b.get(), p.a->qp_num, 1, kAllAccess));
	}
	// Polls one completion of cq (5 s at most); false when none came.
	static bool poll_ex(ibv_cq_ex *cq)
	{
		ibv_poll_cq_attr pa = {};
		for (int i = 0; i < 50000; i++) {
			if (ibv_start_poll(cq, &pa) == 0)
				return true;
			usleep(100);
		}
		return false;
	}
	// The QPs go before the CQs they use (a CQ with QPs is busy and would
	// stay allocated), both before the context.
	void TearDown() override
	{
		p.a.reset();
		p.b.reset();
		ca.reset();
		cb.reset();
	}
	Pair p;
	CqEx ca, cb;
};

TEST_F(SoftClockCq, CompletionsCarryTheTimeTheyWereWritten)
{
	ca = make_cq(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
		     IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK);
	cb = make_cq(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK);
	ASSERT_TRUE(ca && cb) << strerror(errno);
	EXPECT_NE(ca->read_completion_ts, nullptr);
	EXPECT_NE(ca->read_completion_wallclock_ns, nullptr);
	connect(ca.get(), cb.get());
	std::vector<char> s(64, 's'), r(64);
	Mr ms(ibv_reg_mr(p.pd.get(), s.data(), 64, kAllAccess));
	Mr mr(ibv_reg_mr(p.pd.get(), r.data(), 64, kAllAccess));
	ASSERT_TRUE(ms && mr);
	ASSERT_EQ(post_recv_one(p.b.get(), r.data(), 64, mr->lkey), 0);
	uint64_t mono0 = clock_ns(CLOCK_MONOTONIC), real0 = clock_ns(CLOCK_REALTIME);
	ASSERT_EQ(post_one(p.a.get(), IBV_WR_SEND, s.data(), 64, ms->lkey), 0);
	ASSERT_TRUE(poll_ex(ca.get()));
	uint64_t ts = ibv_wc_read_completion_ts(ca.get());
	uint64_t wall = ibv_wc_read_completion_wallclock_ns(ca.get());
	EXPECT_EQ(ca->status, IBV_WC_SUCCESS);
	ibv_end_poll(ca.get());
	ASSERT_TRUE(poll_ex(cb.get()));
	uint64_t rwall = ibv_wc_read_completion_wallclock_ns(cb.get());
	ibv_end_poll(cb.get());
	uint64_t mono1 = clock_ns(CLOCK_MONOTONIC), real1 = clock_ns(CLOCK_REALTIME);
	EXPECT_GE(ts, mono0);
	EXPECT_LE(ts, mono1);
	// The wall clock is derived with the offset at the read: allow for the
	// two clocks drifting apart meanwhile (NTP slews by microseconds).
	const uint64_t slack = 50000000; // 50 ms
	EXPECT_GE(wall + slack, real0);
	EXPECT_LE(wall, real1 + slack);
	EXPECT_GE(rwall + slack, real0);
	EXPECT_LE(rwall, real1 + slack);
}

TEST_F(SoftClockCq, CqWithoutTimestampsHasNoReaders)
{
	CqEx cq(make_cq(0));
	ASSERT_TRUE(cq);
	EXPECT_EQ(cq->read_completion_ts, nullptr);
	EXPECT_EQ(cq->read_completion_wallclock_ns, nullptr);
}

} // namespace
