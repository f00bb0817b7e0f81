// Raw packet QPs, flows and WQs need an Ethernet port: on soft devices with
// the default InfiniBand port they are refused with EOPNOTSUPP (raw_test.cpp
// covers the Ethernet port).
#include "../soft_fixture.h"

#include <gtest/gtest.h>

using namespace ov_test;

TEST(RawOnInfiniBand, RawPacketQpsAndWqsAreNotOffered)
{
	Ctx ctx(open_soft(0));
	ASSERT_TRUE(ctx);
	ibv_port_attr pa;
	ASSERT_EQ(ibv_query_port(ctx.get(), 1, &pa), 0);
	if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND)
		GTEST_SKIP() << "soft0 has an Ethernet port here (RDMAV_SOFT_LINK_LAYER)";
	Pd pd(ibv_alloc_pd(ctx.get()));
	Cq cq(ibv_create_cq(ctx.get(), 8, nullptr, nullptr, 0));
	ASSERT_TRUE(pd && cq);
	ibv_qp_init_attr ia = {};
	ia.send_cq = ia.recv_cq = cq.get();
	ia.qp_type = IBV_QPT_RAW_PACKET;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	errno = 0;
	EXPECT_EQ(ibv_create_qp(pd.get(), &ia), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
	ibv_wq_init_attr wa = {};
	wa.wq_type = IBV_WQT_RQ;
	wa.max_wr = wa.max_sge = 1;
	wa.pd = pd.get();
	wa.cq = cq.get();
	errno = 0;
	EXPECT_EQ(ibv_create_wq(ctx.get(), &wa), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
	ibv_device_attr_ex dx;
	ASSERT_EQ(ibv_query_device_ex(ctx.get(), nullptr, &dx), 0);
	EXPECT_EQ(dx.rss_caps.supported_qpts, 0u);
	EXPECT_FALSE(dx.orig_attr.device_cap_flags & IBV_DEVICE_MANAGED_FLOW_STEERING);
}
