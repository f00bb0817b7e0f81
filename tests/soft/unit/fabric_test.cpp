// Two software devices of one host on one fabric (as two HCAs on one
// switch): QPs of soft0 and soft1 reach each other by LID or by GID, in one
// process and across processes; an address naming a device nobody has open
// is unreachable (RC: retry exceeded). Through the real libibverbs.so.1.
#include "../soft_fixture.h"
#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <cstdint>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

using ov_test::open_soft;
using ov_test::poll_one;

const int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		    IBV_ACCESS_REMOTE_ATOMIC;

// One device's side: context, PD, CQ, a 64 KiB registered buffer, one QP.
struct Side {
	ibv_context *ctx = nullptr;
	ibv_pd *pd = nullptr;
	ibv_cq *cq = nullptr;
	ibv_mr *mr = nullptr;
	ibv_qp *qp = nullptr;
	std::vector<char> buf = std::vector<char>(1 << 16);
	uint16_t lid = 0;
	ibv_gid gid = {};

	bool open(int index, ibv_qp_type type)
	{
		ctx = open_soft(index);
		if (!ctx)
			return false;
		ibv_port_attr pa;
		if (ibv_query_port(ctx, 1, &pa) || ibv_query_gid(ctx, 1, 0, &gid))
			return false;
		lid = pa.lid;
		pd = ibv_alloc_pd(ctx);
		cq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
		if (!pd || !cq)
			return false;
		mr = ibv_reg_mr(pd, buf.data(), buf.size(), kAccess);
		ibv_qp_init_attr ia = {};
		ia.send_cq = ia.recv_cq = cq;
		ia.qp_type = type;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		qp = ibv_create_qp(pd, &ia);
		return mr && qp;
	}

	// INIT -> RTR -> RTS towards (dlid or dgid, dqpn).
	int connect(uint16_t dlid, const ibv_gid *dgid, uint32_t dqpn, uint8_t retry = 7,
		    uint8_t timeout = 10)
	{
		ov_test::Path p;
		p.dest_qpn = dqpn;
		p.dlid = dlid;
		p.dgid = dgid;
		p.access = kAccess;
		p.qkey = 0x1234;
		p.retry_cnt = retry;
		p.timeout = timeout;
		int rc = ov_test::qp_to_init(qp, p);
		if (!rc)
			rc = ov_test::qp_to_rtr(qp, p);
		return rc ? rc : ov_test::qp_to_rts(qp, p);
	}

	int post_recv(uint32_t off, uint32_t len)
	{
		ibv_sge s = {uintptr_t(buf.data() + off), len, mr->lkey};
		ibv_recv_wr wr = {}, *bad;
		wr.wr_id = 1;
		wr.sg_list = &s;
		wr.num_sge = 1;
		return ibv_post_recv(qp, &wr, &bad);
	}

	int post(ibv_wr_opcode op, uint32_t off, uint32_t len, uint64_t raddr = 0, uint32_t rkey = 0,
		 ibv_ah *ah = nullptr, uint32_t rqpn = 0)
	{
		ibv_sge s = {uintptr_t(buf.data() + off), len, mr->lkey};
		ibv_send_wr wr = {}, *bad;
		wr.wr_id = 2;
		wr.opcode = op;
		wr.sg_list = &s;
		wr.num_sge = 1;
		wr.send_flags = IBV_SEND_SIGNALED;
		if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			wr.wr.atomic.remote_addr = raddr;
			wr.wr.atomic.rkey = rkey;
			wr.wr.atomic.compare_add = 5;
		} else if (ah) {
			wr.wr.ud.ah = ah;
			wr.wr.ud.remote_qpn = rqpn;
			wr.wr.ud.remote_qkey = 0x1234;
		} else {
			wr.wr.rdma.remote_addr = raddr;
			wr.wr.rdma.rkey = rkey;
		}
		return ibv_post_send(qp, &wr, &bad);
	}

	void close()
	{
		if (qp)
			ibv_destroy_qp(qp);
		if (mr)
			ibv_dereg_mr(mr);
		if (cq)
			ibv_destroy_cq(cq);
		if (pd)
			ibv_dealloc_pd(pd);
		if (ctx)
			ibv_close_device(ctx);
		*this = Side();
	}
};

uint64_t addr_of(Side &s, uint32_t off) { return uintptr_t(s.buf.data() + off); }

// RC traffic between a (soft0) and b (soft1), connected by LID or by GID.
void rc_between_devices(bool by_gid)
{
	Side a, b;
	ASSERT_TRUE(a.open(0, IBV_QPT_RC));
	ASSERT_TRUE(b.open(1, IBV_QPT_RC));
	ASSERT_EQ(a.lid, 1);
	ASSERT_EQ(b.lid, 2);
	ASSERT_EQ(a.connect(b.lid, by_gid ? &b.gid : nullptr, b.qp->qp_num), 0);
	ASSERT_EQ(b.connect(a.lid, by_gid ? &a.gid : nullptr, a.qp->qp_num), 0);
	ibv_wc wc;

	// send a -> b: the data lands in b's buffer, b's completion names a.
	memset(a.buf.data(), 'x', 4096);
	ASSERT_EQ(b.post_recv(8192, 4096), 0);
	ASSERT_EQ(a.post(IBV_WR_SEND, 0, 4096), 0);
	ASSERT_TRUE(poll_one(a.cq, &wc));
	EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
	ASSERT_TRUE(poll_one(b.cq, &wc));
	EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
	EXPECT_EQ(wc.opcode, IBV_WC_RECV);
	EXPECT_EQ(wc.byte_len, 4096u);
	EXPECT_EQ(wc.src_qp, a.qp->qp_num);
	EXPECT_EQ(wc.slid, a.lid);
	EXPECT_EQ(memcmp(b.buf.data() + 8192, a.buf.data(), 4096), 0);

	// RDMA write a -> b and read back b -> a (64 KiB buffer halves).
	memset(a.buf.data(), 'w', 16384);
	ASSERT_EQ(a.post(IBV_WR_RDMA_WRITE, 0, 16384, addr_of(b, 16384), b.mr->rkey), 0);
	ASSERT_TRUE(poll_one(a.cq, &wc));
	EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
	EXPECT_EQ(std::string(b.buf.data() + 16384, 16384), std::string(16384, 'w'));
	memset(b.buf.data() + 40000, 'r', 1000);
	ASSERT_EQ(a.post(IBV_WR_RDMA_READ, 50000, 1000, addr_of(b, 40000), b.mr->rkey), 0);
	ASSERT_TRUE(poll_one(a.cq, &wc));
	EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
	EXPECT_EQ(std::string(a.buf.data() + 50000, 1000), std::string(1000, 'r'));

	// Atomic fetch-and-add on b's memory.
	uint64_t v = 37;
	memcpy(b.buf.data() + 64, &v, 8);
	ASSERT_EQ(a.post(IBV_WR_ATOMIC_FETCH_AND_ADD, 128, 8, addr_of(b, 64), b.mr->rkey), 0);
	ASSERT_TRUE(poll_one(a.cq, &wc));
	EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
	uint64_t old = 0, now = 0;
	memcpy(&old, a.buf.data() + 128, 8);
	memcpy(&now, b.buf.data() + 64, 8);
	EXPECT_EQ(old, 37u);
	EXPECT_EQ(now, 42u);

	// A bad rkey of soft1 is refused by soft1's key table.
	ASSERT_EQ(a.post(IBV_WR_RDMA_WRITE, 0, 64, addr_of(b, 0), b.mr->rkey ^ 0x100), 0);
	ASSERT_TRUE(poll_one(a.cq, &wc));
	EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
	a.close();
	b.close();
}

TEST(SoftFabric, RcBetweenTwoDevicesByLid) { rc_between_devices(false); }

TEST(SoftFabric, RcBetweenTwoDevicesByGid) { rc_between_devices(true); }

TEST(SoftFabric, UdDatagramToAnotherDevice)
{
	Side a, b;
	ASSERT_TRUE(a.open(0, IBV_QPT_UD));
	ASSERT_TRUE(b.open(1, IBV_QPT_UD));
	ASSERT_EQ(a.connect(0, nullptr, 0), 0);
	ASSERT_EQ(b.connect(0, nullptr, 0), 0);
	ibv_ah_attr aa = {};
	aa.dlid = b.lid;
	aa.port_num = 1;
	ibv_ah *ah = ibv_create_ah(a.pd, &aa);
	ASSERT_NE(ah, nullptr);
	memset(a.buf.data(), 'u', 256);
	ASSERT_EQ(b.post_recv(0, 40 + 256), 0);
	ASSERT_EQ(a.post(IBV_WR_SEND, 0, 256, 0, 0, ah, b.qp->qp_num), 0);
	ibv_wc wc;
	ASSERT_TRUE(poll_one(a.cq, &wc));
	EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_TRUE(poll_one(b.cq, &wc));
	EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
	EXPECT_EQ(wc.byte_len, 40u + 256u);
	EXPECT_EQ(wc.slid, a.lid);
	EXPECT_EQ(wc.src_qp, a.qp->qp_num);
	EXPECT_EQ(std::string(b.buf.data() + 40, 256), std::string(256, 'u'));
	ibv_destroy_ah(ah);
	a.close();
	b.close();
}

TEST(SoftFabric, DeviceNobodyHasOpenIsUnreachable)
{
	// soft6 exists (RDMAV_SOFT_DEVICES=8) but nobody has it open: no
	// responder answers, so the requester reports retry exceeded.
	Side a;
	ASSERT_TRUE(a.open(0, IBV_QPT_RC));
	ASSERT_EQ(a.connect(7, nullptr, 0x20, /*retry=*/1, /*timeout=*/1), 0);
	ASSERT_EQ(a.post(IBV_WR_SEND, 0, 64), 0);
	ibv_wc wc;
	ASSERT_TRUE(poll_one(a.cq, &wc));
	EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR) << ibv_wc_status_str(wc.status);
	a.close();
}

TEST(SoftFabric, RcAcrossProcessesAndDevices)
{
	// The child has soft1 only, this process soft0 only: each reaches the
	// other's device through the fabric. QP numbers go over pipes.
	int to_child[2], to_parent[2];
	ASSERT_EQ(pipe(to_child), 0);
	ASSERT_EQ(pipe(to_parent), 0);
	pid_t c = fork();
	if (c == 0) {
		Side b;
		uint32_t msg[2] = {0, 0}, peer = 0;
		if (!b.open(1, IBV_QPT_RC))
			_exit(2);
		msg[0] = b.qp->qp_num;
		msg[1] = b.lid;
		if (write(to_parent[1], msg, sizeof(msg)) != sizeof(msg) ||
		    read(to_child[0], &peer, sizeof(peer)) != sizeof(peer))
			_exit(3);
		if (b.connect(1, nullptr, peer) || b.post_recv(0, 32768))
			_exit(4);
		uint32_t go = 1;
		if (write(to_parent[1], &go, sizeof(go)) != sizeof(go))
			_exit(5);
		ibv_wc wc;
		if (!poll_one(b.cq, &wc) || wc.status != IBV_WC_SUCCESS || wc.byte_len != 32768)
			_exit(6);
		// Echo it back.
		if (b.post(IBV_WR_SEND, 0, 32768))
			_exit(7);
		if (!poll_one(b.cq, &wc) || wc.status != IBV_WC_SUCCESS)
			_exit(8);
		// Wait until the parent has its echo before tearing down.
		if (read(to_child[0], &go, sizeof(go)) != sizeof(go))
			_exit(9);
		b.close();
		_exit(0);
	}
	ASSERT_GT(c, 0);
	Side a;
	ASSERT_TRUE(a.open(0, IBV_QPT_RC));
	uint32_t msg[2];
	ASSERT_EQ(read(to_parent[0], msg, sizeof(msg)), ssize_t(sizeof(msg)));
	EXPECT_EQ(msg[1], 2u);
	uint32_t mine = a.qp->qp_num, go = 0;
	ASSERT_EQ(write(to_child[1], &mine, sizeof(mine)), ssize_t(sizeof(mine)));
	ASSERT_EQ(a.connect(uint16_t(msg[1]), nullptr, msg[0]), 0);
	ASSERT_EQ(a.post_recv(32768, 32768), 0); // the echo lands in the upper half
	ASSERT_EQ(read(to_parent[0], &go, sizeof(go)), ssize_t(sizeof(go)));
	for (size_t i = 0; i < 32768; i++)
		a.buf[i] = char(i * 7);
	ASSERT_EQ(a.post(IBV_WR_SEND, 0, 32768), 0);
	ibv_wc wc;
	int got_send = 0, got_recv = 0;
	for (int i = 0; i < 2; i++) {
		ASSERT_TRUE(poll_one(a.cq, &wc));
		EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
		if (wc.opcode == IBV_WC_RECV) {
			got_recv++;
			EXPECT_EQ(wc.slid, 2);
		} else {
			got_send++;
		}
	}
	EXPECT_EQ(got_send, 1);
	EXPECT_EQ(got_recv, 1);
	EXPECT_EQ(memcmp(a.buf.data(), a.buf.data() + 32768, 32768), 0); // the echo is what was sent
	ASSERT_EQ(write(to_child[1], &go, sizeof(go)), ssize_t(sizeof(go)));
	int status = -1;
	waitpid(c, &status, 0);
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
	a.close();
	for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]})
		::close(fd);
}

} // namespace
