// Tag matching on the software device (ibv_create_srq_ex(3) with
// IBV_SRQT_TM, ibv_post_srq_ops(3), the TM fields of ibv_query_device_ex and
// of the extended CQ): eager and rendezvous messages matched against posted
// tags, unexpected and untagged messages in ordinary receives, the
// unexpected-message count and its synchronisation, deletion, and the
// arguments every verb refuses. Through the real libibverbs.so.1.
#include "../soft_fixture.h"
#include <infiniband/tm_types.h>
#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <endian.h>
#include <unistd.h>
#include <vector>

namespace {

using ov_test::open_soft;

// One completion of the extended CQ, with its TM fields.
struct Cqe {
	uint64_t wr_id = 0;
	ibv_wc_status status = IBV_WC_SUCCESS;
	ibv_wc_opcode opcode = IBV_WC_SEND;
	unsigned flags = 0;
	uint32_t byte_len = 0;
	ibv_wc_tm_info tm = {};
};

struct Tm : public ::testing::Test {
	ibv_context *ctx = nullptr;
	ibv_pd *pd = nullptr;
	ibv_cq_ex *cqx = nullptr;  // the TM SRQ's CQ (and b's)
	ibv_cq *scq = nullptr;     // a's
	ibv_srq *srq = nullptr;
	ibv_qp *a = nullptr, *b = nullptr; // a sends, b receives through the TM SRQ
	std::vector<uint8_t> buf = std::vector<uint8_t>(1 << 16);
	ibv_mr *mr = nullptr;
	ibv_device_attr_ex dev = {};
	// Regions of buf: a's send buffer, a's receive buffers, the tags'
	// buffers, the SRQ's ordinary receive buffers.
	uint8_t *sendbuf() { return buf.data(); }
	uint8_t *arecv(int i) { return buf.data() + 8192 + i * 256; }
	uint8_t *tagbuf(int i) { return buf.data() + 16384 + i * 1024; }
	uint8_t *srqbuf(int i) { return buf.data() + 49152 + i * 512; }

	void SetUp() override
	{
		ctx = open_soft();
		ASSERT_NE(ctx, nullptr);
		ASSERT_EQ(ibv_query_device_ex(ctx, nullptr, &dev), 0);
		pd = ibv_alloc_pd(ctx);
		ASSERT_NE(pd, nullptr);
		ibv_cq_init_attr_ex ca = {};
		ca.cqe = 256;
		ca.wc_flags = uint64_t(IBV_WC_STANDARD_FLAGS) | IBV_WC_EX_WITH_TM_INFO;
		cqx = ibv_create_cq_ex(ctx, &ca);
		ASSERT_NE(cqx, nullptr) << strerror(errno);
		scq = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
		ASSERT_NE(scq, nullptr);
		mr = ibv_reg_mr(pd, buf.data(), buf.size(),
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
		ASSERT_NE(mr, nullptr);
		srq = make_srq(8);
		ASSERT_NE(srq, nullptr) << strerror(errno);
		a = make_qp(nullptr, scq);
		b = make_qp(srq, ibv_cq_ex_to_cq(cqx));
		ASSERT_TRUE(a && b);
		ASSERT_TRUE(connect(a, b->qp_num));
		ASSERT_TRUE(connect(b, a->qp_num));
	}

	void TearDown() override
	{
		if (a)
			ibv_destroy_qp(a);
		if (b)
			ibv_destroy_qp(b);
		if (srq)
			ibv_destroy_srq(srq);
		if (mr)
			ibv_dereg_mr(mr);
		if (scq)
			ibv_destroy_cq(scq);
		if (cqx)
			ibv_destroy_cq(ibv_cq_ex_to_cq(cqx));
		if (pd)
			ibv_dealloc_pd(pd);
		if (ctx)
			ibv_close_device(ctx);
	}

	ibv_srq *make_srq(uint32_t tags, ibv_cq *cq = nullptr)
	{
		ibv_srq_init_attr_ex sa = {};
		sa.attr.max_wr = 16;
		sa.attr.max_sge = 1;
		sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			       IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
		sa.srq_type = IBV_SRQT_TM;
		sa.pd = pd;
		sa.cq = cq ? cq : ibv_cq_ex_to_cq(cqx);
		sa.tm_cap.max_num_tags = tags;
		sa.tm_cap.max_ops = 4;
		return ibv_create_srq_ex(ctx, &sa);
	}

	ibv_qp *make_qp(ibv_srq *s, ibv_cq *cq, ibv_qp_type t = IBV_QPT_RC)
	{
		ibv_qp_init_attr ia = {};
		ia.send_cq = ia.recv_cq = cq;
		ia.srq = s;
		ia.qp_type = t;
		ia.sq_sig_all = 1;
		ia.cap.max_send_wr = 16;
		ia.cap.max_recv_wr = s ? 0 : 16;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		return ibv_create_qp(pd, &ia);
	}

	static ::testing::AssertionResult connect(ibv_qp *qp, uint32_t dest)
	{
		ov_test::Path p;
		p.dest_qpn = dest;
		p.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
		p.rnr_retry = 0; // RNR is reported at once
		return ov_test::bring_up(qp, p);
	}

	// A signaled IBV_WR_TAG_ADD of tag/mask with tag buffer i (len bytes).
	int add(uint64_t tag, uint64_t mask, int i, uint32_t *handle, uint32_t len = 1024,
		uint32_t unexpected = 0, int flags = IBV_OPS_SIGNALED)
	{
		ibv_sge s = {uintptr_t(tagbuf(i)), len, mr->lkey};
		ibv_ops_wr op = {}, *bad = nullptr;
		op.wr_id = 1000 + i;
		op.opcode = IBV_WR_TAG_ADD;
		op.flags = flags;
		op.tm.unexpected_cnt = unexpected;
		op.tm.add.recv_wr_id = 2000 + i;
		op.tm.add.sg_list = &s;
		op.tm.add.num_sge = 1;
		op.tm.add.tag = tag;
		op.tm.add.mask = mask;
		int rc = ibv_post_srq_ops(srq, &op, &bad);
		if (handle)
			*handle = op.tm.handle;
		return rc;
	}

	int ops(ibv_ops_wr_opcode opc, uint32_t handle, uint32_t unexpected, int flags)
	{
		ibv_ops_wr op = {}, *bad = nullptr;
		op.wr_id = 77;
		op.opcode = opc;
		op.flags = flags;
		op.tm.handle = handle;
		op.tm.unexpected_cnt = unexpected;
		return ibv_post_srq_ops(srq, &op, &bad);
	}

	// Ordinary receive i of the SRQ (wr_id 3000 + i) or of a (4000 + i).
	void post_srq_recv(int i) { post_ordinary(true, i); }
	void post_a_recv(int i) { post_ordinary(false, i); }
	void post_ordinary(bool to_srq, int i)
	{
		ibv_sge s = {uintptr_t(to_srq ? srqbuf(i) : arecv(i)), to_srq ? 512u : 256u,
			     mr->lkey};
		ibv_recv_wr wr = {}, *bad;
		wr.wr_id = (to_srq ? 3000 : 4000) + i;
		wr.sg_list = &s;
		wr.num_sge = 1;
		ASSERT_EQ(to_srq ? ibv_post_srq_recv(srq, &wr, &bad) : ibv_post_recv(a, &wr, &bad), 0);
	}

	// Writes a TMH (and, for a rendezvous, an RVH) at the start of the
	// send buffer, payload bytes `fill` after it up to len.
	void message(uint8_t op, uint64_t tag, uint32_t app, uint32_t len, uint8_t fill)
	{
		memset(sendbuf(), fill, len);
		ibv_tmh h = {};
		h.opcode = op;
		h.app_ctx = htobe32(app);
		h.tag = htobe64(tag);
		memcpy(sendbuf(), &h, sizeof(h));
	}

	void rvh(uint64_t va, uint32_t rkey, uint32_t len)
	{
		ibv_rvh r = {htobe64(va), htobe32(rkey), htobe32(len)};
		memcpy(sendbuf() + sizeof(ibv_tmh), &r, sizeof(r));
	}

	ibv_wc_status send(uint32_t len)
	{
		ibv_sge s = {uintptr_t(sendbuf()), len, mr->lkey};
		ibv_send_wr wr = {}, *bad;
		wr.wr_id = 9;
		wr.sg_list = &s;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		if (ibv_post_send(a, &wr, &bad))
			return IBV_WC_GENERAL_ERR;
		ibv_wc wc;
		if (!ov_test::poll_one(scq, &wc))
			return IBV_WC_GENERAL_ERR;
		EXPECT_EQ(wc.opcode, IBV_WC_SEND);
		return wc.status;
	}

	bool poll(Cqe &c, int ms = 5000)
	{
		ibv_poll_cq_attr pa = {};
		for (int i = 0; i < ms * 10; i++) {
			int rc = ibv_start_poll(cqx, &pa);
			if (rc == ENOENT) {
				usleep(100);
				continue;
			}
			if (rc)
				return false;
			c.wr_id = cqx->wr_id;
			c.status = cqx->status;
			c.opcode = ibv_wc_read_opcode(cqx);
			c.flags = ibv_wc_read_wc_flags(cqx);
			c.byte_len = ibv_wc_read_byte_len(cqx);
			ibv_wc_read_tm_info(cqx, &c.tm);
			ibv_end_poll(cqx);
			return true;
		}
		return false;
	}

	bool empty()
	{
		ibv_poll_cq_attr pa = {};
		if (ibv_start_poll(cqx, &pa) == ENOENT)
			return true;
		ibv_end_poll(cqx);
		return false;
	}
};

TEST_F(Tm, CapsNameRcTagMatching)
{
	EXPECT_TRUE(dev.tm_caps.flags & IBV_TM_CAP_RC);
	EXPECT_GE(dev.tm_caps.max_num_tags, 8u);
	EXPECT_GE(dev.tm_caps.max_ops, 4u);
	EXPECT_GE(dev.tm_caps.max_sge, 1u);
	EXPECT_GE(dev.tm_caps.max_rndv_hdr_size, sizeof(ibv_tmh) + sizeof(ibv_rvh));
}

TEST_F(Tm, CreateChecksItsArguments)
{
	ibv_srq_init_attr_ex sa = {};
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TM;
	sa.srq_type = IBV_SRQT_TM;
	sa.pd = pd;
	sa.tm_cap.max_num_tags = 4;
	sa.tm_cap.max_ops = 4;
	errno = 0;
	EXPECT_EQ(ibv_create_srq_ex(ctx, &sa), nullptr); // no CQ
	EXPECT_EQ(errno, EINVAL);
	sa.comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
	sa.cq = ibv_cq_ex_to_cq(cqx);
	sa.tm_cap.max_num_tags = dev.tm_caps.max_num_tags + 1;
	errno = 0;
	EXPECT_EQ(ibv_create_srq_ex(ctx, &sa), nullptr);
	EXPECT_EQ(errno, EINVAL);
	sa.tm_cap.max_num_tags = 4;
	sa.tm_cap.max_ops = 0;
	errno = 0;
	EXPECT_EQ(ibv_create_srq_ex(ctx, &sa), nullptr);
	EXPECT_EQ(errno, EINVAL);
	// Only RC QPs take a TM SRQ.
	errno = 0;
	EXPECT_EQ(make_qp(srq, scq, IBV_QPT_UC), nullptr);
	EXPECT_EQ(errno, EINVAL);
	// List operations need a TM SRQ.
	ibv_srq_init_attr ba = {};
	ba.attr.max_wr = 4;
	ba.attr.max_sge = 1;
	ibv_srq *basic = ibv_create_srq(pd, &ba);
	ASSERT_NE(basic, nullptr);
	ibv_ops_wr op = {}, *bad = nullptr;
	op.opcode = IBV_WR_TAG_SYNC;
	EXPECT_EQ(ibv_post_srq_ops(basic, &op, &bad), EINVAL);
	EXPECT_EQ(bad, &op);
	EXPECT_EQ(ibv_destroy_srq(basic), 0);
	// The SRQ holds its CQ.
	EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), EBUSY);
}

TEST_F(Tm, EagerMessageLandsInTheMatchingTag)
{
	uint32_t h1, h2;
	ASSERT_EQ(add(7, ~0ull, 0, &h1), 0);
	ASSERT_EQ(add(8, ~0ull, 1, &h2), 0);
	EXPECT_NE(h1, h2);
	Cqe c;
	for (int i = 0; i < 2; i++) {
		ASSERT_TRUE(poll(c));
		EXPECT_EQ(c.opcode, IBV_WC_TM_ADD);
		EXPECT_EQ(c.status, IBV_WC_SUCCESS);
		EXPECT_EQ(c.wr_id, uint64_t(1000 + i));
		EXPECT_EQ(c.flags, 0u);
	}
	message(IBV_TMH_EAGER, 8, 0xabcd, 300, 'x');
	ASSERT_EQ(send(300), IBV_WC_SUCCESS);
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.status, IBV_WC_SUCCESS);
	EXPECT_EQ(c.opcode, IBV_WC_TM_RECV);
	EXPECT_EQ(c.wr_id, 2001u);
	EXPECT_EQ(c.flags, unsigned(IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID));
	EXPECT_EQ(c.tm.tag, 8u);
	EXPECT_EQ(c.tm.priv, 0xabcdu);
	EXPECT_EQ(c.byte_len, 300u - sizeof(ibv_tmh));
	EXPECT_EQ(std::vector<uint8_t>(tagbuf(1), tagbuf(1) + 284), std::vector<uint8_t>(284, 'x'));
	// The tag was consumed: deleting it fails, deleting the other works.
	ASSERT_EQ(ops(IBV_WR_TAG_DEL, h2, 0, IBV_OPS_SIGNALED), 0);
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.opcode, IBV_WC_TM_DEL);
	EXPECT_EQ(c.status, IBV_WC_TM_ERR);
	ASSERT_EQ(ops(IBV_WR_TAG_DEL, h1, 0, IBV_OPS_SIGNALED), 0);
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.opcode, IBV_WC_TM_DEL);
	EXPECT_EQ(c.status, IBV_WC_SUCCESS);
	EXPECT_EQ(c.wr_id, 77u);
	EXPECT_TRUE(empty());
}

TEST_F(Tm, MaskAndOrderPickTheOldestMatch)
{
	ASSERT_EQ(add(0x1200, 0xff00, 0, nullptr, 1024, 0, 0), 0); // unsignaled
	ASSERT_EQ(add(0x1234, ~0ull, 1, nullptr, 1024, 0, 0), 0);
	EXPECT_TRUE(empty());
	message(IBV_TMH_EAGER, 0x1234, 1, 64, 'm');
	ASSERT_EQ(send(64), IBV_WC_SUCCESS);
	Cqe c;
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.wr_id, 2000u); // the masked entry, posted first
	EXPECT_EQ(c.tm.tag, 0x1234u);
	message(IBV_TMH_EAGER, 0x1234, 1, 64, 'n');
	ASSERT_EQ(send(64), IBV_WC_SUCCESS);
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.wr_id, 2001u);
}

TEST_F(Tm, UnexpectedMessagesNeedASync)
{
	post_srq_recv(0);
	post_srq_recv(1);
	message(IBV_TMH_EAGER, 0x55, 3, 100, 'u');
	ASSERT_EQ(send(100), IBV_WC_SUCCESS);
	Cqe c;
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.opcode, IBV_WC_TM_RECV);
	EXPECT_EQ(c.wr_id, 3000u);
	EXPECT_EQ(c.flags, 0u);
	EXPECT_EQ(c.tm.tag, 0u);
	EXPECT_EQ(c.byte_len, 100u); // the whole message, header too
	EXPECT_EQ(memcmp(srqbuf(0), sendbuf(), 100), 0);
	// One unexpected message the application has not reported: a new tag
	// is refused until it does.
	ASSERT_EQ(add(0x55, ~0ull, 0, nullptr, 1024, 0, 0), 0);
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.opcode, IBV_WC_TM_ADD);
	EXPECT_EQ(c.status, IBV_WC_TM_ERR);
	EXPECT_EQ(c.flags, unsigned(IBV_WC_TM_SYNC_REQ));
	ASSERT_EQ(ops(IBV_WR_TAG_SYNC, 0, 0, IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC), 0);
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.opcode, IBV_WC_TM_SYNC);
	EXPECT_EQ(c.flags, unsigned(IBV_WC_TM_SYNC_REQ));
	ASSERT_EQ(ops(IBV_WR_TAG_SYNC, 0, 1, IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC), 0);
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.opcode, IBV_WC_TM_SYNC);
	EXPECT_EQ(c.status, IBV_WC_SUCCESS);
	EXPECT_EQ(c.flags, 0u);
	ASSERT_EQ(add(0x55, ~0ull, 0, nullptr), 0);
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.status, IBV_WC_SUCCESS);
	message(IBV_TMH_EAGER, 0x55, 3, 100, 'v');
	ASSERT_EQ(send(100), IBV_WC_SUCCESS);
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.flags, unsigned(IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID));
	EXPECT_EQ(c.wr_id, 2000u);
}

TEST_F(Tm, UntaggedAndForeignMessagesUseOrdinaryReceives)
{
	post_srq_recv(0);
	post_srq_recv(1);
	ASSERT_EQ(add(0x9, ~0ull, 0, nullptr, 1024, 0, 0), 0);
	message(IBV_TMH_NO_TAG, 0x9, 0, 40, 'n');
	ASSERT_EQ(send(40), IBV_WC_SUCCESS);
	Cqe c;
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.opcode, IBV_WC_TM_NO_TAG);
	EXPECT_EQ(c.wr_id, 3000u);
	EXPECT_EQ(c.flags, 0u);
	EXPECT_EQ(c.byte_len, 40u);
	// Shorter than a TMH: an ordinary receive.
	memset(sendbuf(), 's', 8);
	ASSERT_EQ(send(8), IBV_WC_SUCCESS);
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.opcode, IBV_WC_RECV);
	EXPECT_EQ(c.wr_id, 3001u);
	EXPECT_EQ(c.byte_len, 8u);
	// Neither consumed the tag.
	message(IBV_TMH_EAGER, 0x9, 0, 40, 'e');
	ASSERT_EQ(send(40), IBV_WC_SUCCESS);
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.wr_id, 2000u);
	EXPECT_EQ(c.flags, unsigned(IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID));
}

TEST_F(Tm, RendezvousReadsTheSenderAndAnswersWithFin)
{
	// The data the receiver reads: 600 bytes of a's memory.
	uint8_t *src = buf.data() + 4096;
	for (int i = 0; i < 600; i++)
		src[i] = uint8_t(i * 7);
	post_a_recv(0);
	ASSERT_EQ(add(0x77, ~0ull, 2, nullptr, 1024, 0, 0), 0);
	message(IBV_TMH_RNDV, 0x77, 0x42, 48, 0);
	rvh(uintptr_t(src), mr->rkey, 600);
	ASSERT_EQ(send(48), IBV_WC_SUCCESS);
	Cqe c;
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.opcode, IBV_WC_TM_RECV);
	EXPECT_EQ(c.wr_id, 2002u);
	EXPECT_EQ(c.flags, unsigned(IBV_WC_TM_MATCH));
	EXPECT_EQ(c.tm.tag, 0x77u);
	EXPECT_EQ(c.tm.priv, 0x42u);
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.status, IBV_WC_SUCCESS);
	EXPECT_EQ(c.opcode, IBV_WC_TM_RECV);
	EXPECT_EQ(c.wr_id, 2002u);
	EXPECT_EQ(c.flags, unsigned(IBV_WC_TM_DATA_VALID));
	EXPECT_EQ(c.byte_len, 600u);
	EXPECT_EQ(memcmp(tagbuf(2), src, 600), 0);
	// The sender's FIN.
	ibv_wc wc;
	ASSERT_TRUE(ov_test::poll_one(scq, &wc));
	EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
	EXPECT_EQ(wc.opcode, IBV_WC_RECV);
	EXPECT_EQ(wc.wr_id, 4000u);
	EXPECT_EQ(wc.byte_len, sizeof(ibv_tmh));
	ibv_tmh fin;
	memcpy(&fin, arecv(0), sizeof(fin));
	EXPECT_EQ(fin.opcode, IBV_TMH_FIN);
	EXPECT_EQ(be64toh(fin.tag), 0x77u);
	EXPECT_EQ(be32toh(fin.app_ctx), 0x42u);
}

TEST_F(Tm, RendezvousThatCannotBeReadIsLeftToTheApplication)
{
	post_a_recv(0);
	ASSERT_EQ(add(0x78, ~0ull, 3, nullptr, 256, 0, 0), 0);
	message(IBV_TMH_RNDV, 0x78, 0, 48, 0);
	rvh(uintptr_t(buf.data()), mr->rkey, 4096); // larger than the 256-byte tag
	ASSERT_EQ(send(48), IBV_WC_SUCCESS);
	Cqe c;
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.flags, unsigned(IBV_WC_TM_MATCH));
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.opcode, IBV_WC_TM_RECV);
	EXPECT_EQ(c.status, IBV_WC_TM_RNDV_INCOMPLETE);
	EXPECT_EQ(c.wr_id, 2003u);
	ibv_wc wc;
	EXPECT_EQ(ibv_poll_cq(scq, 1, &wc), 0); // no FIN
	// A bad rkey likewise.
	ASSERT_EQ(add(0x79, ~0ull, 4, nullptr, 1024, 0, 0), 0);
	message(IBV_TMH_RNDV, 0x79, 0, 48, 0);
	rvh(uintptr_t(buf.data()), mr->rkey ^ 0x5a5a00, 16);
	ASSERT_EQ(send(48), IBV_WC_SUCCESS);
	ASSERT_TRUE(poll(c));
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.status, IBV_WC_TM_RNDV_INCOMPLETE);
	EXPECT_EQ(ibv_poll_cq(scq, 1, &wc), 0);
}

TEST_F(Tm, RendezvousWaitsForTheSendersReceive)
{
	// No receive at the sender for the FIN: the request is not accepted
	// (RNR, reported at once with rnr_retry 0) and the tag stays posted.
	ASSERT_EQ(add(0x80, ~0ull, 5, nullptr, 1024, 0, 0), 0);
	message(IBV_TMH_RNDV, 0x80, 0, 48, 0);
	rvh(uintptr_t(buf.data()), mr->rkey, 16);
	EXPECT_EQ(send(48), IBV_WC_RNR_RETRY_EXC_ERR);
	EXPECT_TRUE(empty());
}

TEST_F(Tm, ListLimitsAndBadOperations)
{
	uint32_t h = 0;
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(add(i, ~0ull, i, &h, 1024, 0, 0), 0);
	ibv_sge s = {uintptr_t(tagbuf(0)), 16, mr->lkey};
	ibv_ops_wr op = {}, *bad = nullptr;
	op.opcode = IBV_WR_TAG_ADD;
	op.tm.add.sg_list = &s;
	op.tm.add.num_sge = 1;
	EXPECT_EQ(ibv_post_srq_ops(srq, &op, &bad), ENOMEM); // all 8 posted
	EXPECT_EQ(bad, &op);
	op.tm.add.num_sge = int(dev.tm_caps.max_sge) + 1;
	EXPECT_EQ(ibv_post_srq_ops(srq, &op, &bad), EINVAL);
	op.opcode = IBV_WR_TAG_DEL;
	op.tm.handle = 8; // past max_num_tags
	EXPECT_EQ(ibv_post_srq_ops(srq, &op, &bad), EINVAL);
	uint32_t unknown = 9; // stored as the integer an application might pass
	memcpy(&op.opcode, &unknown, sizeof(unknown));
	EXPECT_EQ(ibv_post_srq_ops(srq, &op, &bad), EINVAL);
	op.opcode = IBV_WR_TAG_SYNC;
	op.flags = 0x100;
	EXPECT_EQ(ibv_post_srq_ops(srq, &op, &bad), EINVAL);
	// A deletion frees a handle for the next add.
	ASSERT_EQ(ops(IBV_WR_TAG_DEL, h, 0, 0), 0);
	uint32_t again = 99;
	ASSERT_EQ(add(42, ~0ull, 0, &again, 1024, 0, 0), 0);
	EXPECT_EQ(again, h);
	EXPECT_TRUE(empty());
}

TEST_F(Tm, EagerLargerThanTheTagIsALengthError)
{
	ASSERT_EQ(add(0x31, ~0ull, 0, nullptr, 32, 0, 0), 0);
	message(IBV_TMH_EAGER, 0x31, 0, 200, 'l');
	EXPECT_EQ(send(200), IBV_WC_REM_INV_REQ_ERR);
	Cqe c;
	ASSERT_TRUE(poll(c));
	EXPECT_EQ(c.opcode, IBV_WC_TM_RECV);
	EXPECT_EQ(c.status, IBV_WC_LOC_LEN_ERR);
	EXPECT_EQ(c.wr_id, 2000u);
}

} // namespace
