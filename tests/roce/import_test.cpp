// ibv_import_device(3), ibv_import_pd(3), ibv_import_mr(3) and
// ibv_import_dm(3) on a RoCE software device (sroce0). Run by roce.import
// (CMakeLists.txt) with RDMAV_SOFT_ROCE=lo in a user and network namespace of
// its own, so the loopback interface, its UDP port and /dev/shm are this
// test's alone; RDMAV_SOFT_DEVICES=1 lists soft0 as well.
//
// A software device's cmd_fd is a memfd whose name tells the device
// (providers/soft/context.cpp, make_cmd_fd): sroce<N> has index
// kRoceIndexBase + N, beyond soft<N>'s, and import refused it (EINVAL from
// the library after every device said ENODEV), so rdma-core's
// test_import_dm errored on sroce0. Here the imported context shares the
// original's PD, MR and device memory, carries traffic over the wire, and a
// command fd of the other kind of device (soft0's) imports soft0, not sroce0.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <unistd.h>
#include <vector>

namespace {

struct CtxClose {
	void operator()(ibv_context *c) const { ibv_close_device(c); }
};
using Ctx = std::unique_ptr<ibv_context, CtxClose>;

Ctx open_named(const char *name)
{
	int n = 0;
	ibv_device **list = ibv_get_device_list(&n);
	ibv_context *c = nullptr;
	for (int i = 0; list && i < n && !c; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			c = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return Ctx(c);
}

// The GID index of 127.0.0.1 (an IPv4-mapped RoCE v2 GID), or -1.
int ipv4_loopback_gid(ibv_context *c)
{
	ibv_port_attr pa{};
	if (ibv_query_port(c, 1, &pa))
		return -1;
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		ibv_gid g{};
		if (ibv_query_gid(c, 1, i, &g))
			continue;
		static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		if (!memcmp(g.raw, kPrefix, 12) && g.raw[12] == 127 && g.raw[13] == 0 &&
		    g.raw[14] == 0 && g.raw[15] == 1)
			return i;
	}
	return -1;
}

class RoceImport : public ::testing::Test {
protected:
	void SetUp() override
	{
		ctx = open_named("sroce0");
		ASSERT_TRUE(ctx) << "no sroce0 (RDMAV_SOFT_ROCE=lo): " << strerror(errno);
		ibv_port_attr pa{};
		ASSERT_EQ(ibv_query_port(ctx.get(), 1, &pa), 0);
		ASSERT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
		int fd = dup(ctx->cmd_fd);
		ASSERT_GE(fd, 0) << "sroce0's context has no command fd";
		imported = Ctx(ibv_import_device(fd));
		ASSERT_TRUE(imported) << strerror(errno);
	}
	void TearDown() override
	{
		imported.reset();
		ctx.reset();
	}
	Ctx ctx, imported;
};

TEST_F(RoceImport, ImportedContextIsTheSameDevice)
{
	EXPECT_STREQ(ibv_get_device_name(imported->device), "sroce0");
	EXPECT_NE(imported->cmd_fd, ctx->cmd_fd);
	ibv_port_attr pa{};
	ASSERT_EQ(ibv_query_port(imported.get(), 1, &pa), 0);
	EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
	EXPECT_GE(ipv4_loopback_gid(imported.get()), 0);
}

TEST_F(RoceImport, SoftDeviceFdImportsTheSoftDevice)
{
	Ctx soft = open_named("soft0");
	ASSERT_TRUE(soft) << "no soft0 (RDMAV_SOFT_DEVICES=1): " << strerror(errno);
	Ctx again(ibv_import_device(dup(soft->cmd_fd)));
	ASSERT_TRUE(again) << strerror(errno);
	EXPECT_STREQ(ibv_get_device_name(again->device), "soft0");
}

TEST_F(RoceImport, PdMrAndDeviceMemoryAreShared)
{
	ibv_pd *pd = ibv_alloc_pd(ctx.get());
	ASSERT_TRUE(pd);
	std::vector<uint8_t> buf(4096, 0x5a);
	ibv_mr *mr = ibv_reg_mr(pd, buf.data(), buf.size(),
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ASSERT_TRUE(mr);
	ibv_pd *ipd = ibv_import_pd(imported.get(), pd->handle);
	ASSERT_TRUE(ipd) << strerror(errno);
	EXPECT_EQ(ipd->handle, pd->handle);
	ibv_mr *imr = ibv_import_mr(ipd, mr->handle);
	ASSERT_TRUE(imr) << strerror(errno);
	EXPECT_EQ(imr->lkey, mr->lkey);
	EXPECT_EQ(imr->rkey, mr->rkey);
	EXPECT_EQ(imr->addr, nullptr); // as a kernel device reports an imported region
	EXPECT_EQ(imr->length, mr->length);

	ibv_device_attr_ex ax{};
	ASSERT_EQ(ibv_query_device_ex(ctx.get(), nullptr, &ax), 0);
	if (ax.max_dm_size) {
		ibv_alloc_dm_attr da{};
		da.length = 256;
		ibv_dm *dm = ibv_alloc_dm(ctx.get(), &da);
		ASSERT_TRUE(dm) << strerror(errno);
		ibv_dm *idm = ibv_import_dm(imported.get(), dm->handle);
		ASSERT_TRUE(idm) << strerror(errno);
		uint32_t word = 0x12345678, got = 0;
		ASSERT_EQ(ibv_memcpy_to_dm(dm, 16, &word, 4), 0);
		ASSERT_EQ(ibv_memcpy_from_dm(&got, idm, 16, 4), 0);
		EXPECT_EQ(got, word);
		ibv_unimport_dm(idm);
		EXPECT_EQ(ibv_free_dm(dm), 0);
	}
	ibv_unimport_mr(imr);
	ibv_unimport_pd(ipd);
	EXPECT_EQ(ibv_dereg_mr(mr), 0);
	EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

// An RC QP of the imported context writes into a region of the original
// one over the wire (127.0.0.1), with the imported PD's local key: every
// byte arrives.
TEST_F(RoceImport, ImportedContextCarriesTraffic)
{
	int gid_index = ipv4_loopback_gid(ctx.get());
	ASSERT_GE(gid_index, 0) << "no GID of 127.0.0.1";
	ibv_gid gid{};
	ASSERT_EQ(ibv_query_gid(ctx.get(), 1, gid_index, &gid), 0);

	ibv_pd *pd = ibv_alloc_pd(ctx.get());
	ASSERT_TRUE(pd);
	ibv_pd *ipd = ibv_import_pd(imported.get(), pd->handle);
	ASSERT_TRUE(ipd) << strerror(errno);
	const size_t kLen = 8192;
	std::vector<uint8_t> src(kLen), dst(kLen, 0);
	for (size_t i = 0; i < kLen; i++)
		src[i] = uint8_t(i * 7 + 3);
	ibv_mr *smr = ibv_reg_mr(pd, src.data(), kLen, IBV_ACCESS_LOCAL_WRITE);
	ibv_mr *dmr = ibv_reg_mr(pd, dst.data(), kLen,
				 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ASSERT_TRUE(smr && dmr);
	ibv_mr *ismr = ibv_import_mr(ipd, smr->handle);
	ASSERT_TRUE(ismr) << strerror(errno);

	ibv_cq *cq_a = ibv_create_cq(imported.get(), 8, nullptr, nullptr, 0);
	ibv_cq *cq_b = ibv_create_cq(ctx.get(), 8, nullptr, nullptr, 0);
	ASSERT_TRUE(cq_a && cq_b);
	ibv_qp_init_attr ia{};
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ia.send_cq = ia.recv_cq = cq_a;
	ibv_qp *a = ibv_create_qp(ipd, &ia); // the writer, on the imported context
	ia.send_cq = ia.recv_cq = cq_b;
	ibv_qp *b = ibv_create_qp(pd, &ia);
	ASSERT_TRUE(a && b) << strerror(errno);

	auto connect = [&](ibv_qp *qp, uint32_t dqpn) {
		ibv_qp_attr at{};
		at.qp_state = IBV_QPS_INIT;
		at.port_num = 1;
		at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
		ASSERT_EQ(ibv_modify_qp(qp, &at,
					IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						IBV_QP_ACCESS_FLAGS),
			  0);
		at = {};
		at.qp_state = IBV_QPS_RTR;
		at.path_mtu = IBV_MTU_1024;
		at.dest_qp_num = dqpn;
		at.rq_psn = 100;
		at.max_dest_rd_atomic = 1;
		at.min_rnr_timer = 12;
		at.ah_attr.is_global = 1;
		at.ah_attr.grh.dgid = gid;
		at.ah_attr.grh.sgid_index = uint8_t(gid_index);
		at.ah_attr.grh.hop_limit = 64;
		at.ah_attr.port_num = 1;
		ASSERT_EQ(ibv_modify_qp(qp, &at,
					IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
						IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
						IBV_QP_MIN_RNR_TIMER),
			  0);
		at = {};
		at.qp_state = IBV_QPS_RTS;
		at.sq_psn = 100;
		at.timeout = 14;
		at.retry_cnt = 7;
		at.rnr_retry = 7;
		at.max_rd_atomic = 1;
		ASSERT_EQ(ibv_modify_qp(qp, &at,
					IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
						IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
						IBV_QP_MAX_QP_RD_ATOMIC),
			  0);
	};
	connect(a, b->qp_num);
	connect(b, a->qp_num);

	ibv_sge sge{};
	sge.addr = uintptr_t(src.data());
	sge.length = uint32_t(kLen);
	sge.lkey = ismr->lkey;
	ibv_send_wr wr{}, *bad = nullptr;
	wr.wr_id = 7;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = uintptr_t(dst.data());
	wr.wr.rdma.rkey = dmr->rkey;
	ASSERT_EQ(ibv_post_send(a, &wr, &bad), 0);
	ibv_wc wc{};
	int got = 0;
	for (int i = 0; i < 100000 && !got; i++) {
		got = ibv_poll_cq(cq_a, 1, &wc);
		if (!got)
			usleep(100);
	}
	ASSERT_EQ(got, 1) << "no completion";
	EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
	EXPECT_EQ(wc.wr_id, 7u);
	EXPECT_EQ(memcmp(src.data(), dst.data(), kLen), 0);

	EXPECT_EQ(ibv_destroy_qp(a), 0);
	EXPECT_EQ(ibv_destroy_qp(b), 0);
	EXPECT_EQ(ibv_destroy_cq(cq_a), 0);
	EXPECT_EQ(ibv_destroy_cq(cq_b), 0);
	ibv_unimport_mr(ismr);
	ibv_unimport_pd(ipd);
	EXPECT_EQ(ibv_dereg_mr(smr), 0);
	EXPECT_EQ(ibv_dereg_mr(dmr), 0);
	EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

} // namespace
