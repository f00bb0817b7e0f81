// Raw packet QPs, flow steering and RSS on a software device with an
// Ethernet port (RDMAV_SOFT_LINK_LAYER=ethernet, which this program,
// soft_raw_unit, sets for itself). Frames are built here, sent by one raw packet QP
// and must reach exactly the receive queues whose rules match them, byte
// for byte; an RSS QP must spread them as the Toeplitz hash computed here
// says.
#include "../soft_fixture.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstring>
#include <vector>

using namespace ov_test;

namespace {

// This program tests Ethernet ports: the setting is read when the devices
// are listed, after static initialisation. Eight devices unless the
// environment says otherwise.
const int g_eth = setenv("RDMAV_SOFT_LINK_LAYER", "ethernet", 1) |
		  setenv("RDMAV_SOFT_DEVICES", "8", 0);

struct WqDel { void operator()(ibv_wq *w) const { ibv_destroy_wq(w); } };
struct IndDel { void operator()(ibv_rwq_ind_table *t) const { ibv_destroy_rwq_ind_table(t); } };
struct FlowDel { void operator()(ibv_flow *f) const { ibv_destroy_flow(f); } };
using Wq = std::unique_ptr<ibv_wq, WqDel>;
using Ind = std::unique_ptr<ibv_rwq_ind_table, IndDel>;
using Flow = std::unique_ptr<ibv_flow, FlowDel>;

const uint8_t kDstMac[6] = {0x01, 0x50, 0x56, 0x19, 0x20, 0xa7};
const uint8_t kOtherMac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
const uint8_t kSrcMac[6] = {0x24, 0x8a, 0x07, 0xa5, 0x28, 0xc8};

// An Ethernet / IPv4 / UDP frame of `size` bytes (payload 'a'... by index).
std::vector<uint8_t> udp4_frame(const uint8_t *dst_mac, uint32_t src_ip, uint32_t dst_ip,
				uint16_t sport, uint16_t dport, size_t size = 128)
{
	std::vector<uint8_t> f(size);
	memcpy(f.data(), dst_mac, 6);
	memcpy(f.data() + 6, kSrcMac, 6);
	f[12] = 0x08;
	f[13] = 0x00;
	uint8_t *ip = f.data() + 14;
	ip[0] = 0x45;
	uint16_t tl = htons(uint16_t(size - 14));
	memcpy(ip + 2, &tl, 2);
	ip[6] = 0x40; // DF
	ip[8] = 64;
	ip[9] = IPPROTO_UDP;
	uint32_t s = htonl(src_ip), d = htonl(dst_ip);
	memcpy(ip + 12, &s, 4);
	memcpy(ip + 16, &d, 4);
	uint8_t *udp = ip + 20;
	uint16_t sp = htons(sport), dp = htons(dport), ul = htons(uint16_t(size - 34));
	memcpy(udp, &sp, 2);
	memcpy(udp + 2, &dp, 2);
	memcpy(udp + 4, &ul, 2);
	for (size_t i = 42; i < size; i++)
		f[i] = uint8_t('a' + i % 26);
	return f;
}

// A flow attribute followed by its specs, as ibv_create_flow(3) takes it.
struct FlowRule {
	alignas(8) uint8_t buf[512] = {};
	size_t used = sizeof(ibv_flow_attr);
	ibv_flow_attr *attr() { return reinterpret_cast<ibv_flow_attr *>(buf); }
	explicit FlowRule(uint16_t priority = 0, ibv_flow_attr_type type = IBV_FLOW_ATTR_NORMAL)
	{
		attr()->type = type;
		attr()->priority = priority;
		attr()->port = 1;
		attr()->size = uint16_t(used);
	}
	template <class S> FlowRule &add(const S &spec)
	{
		memcpy(buf + used, &spec, sizeof(spec));
		used += sizeof(spec);
		attr()->num_of_specs++;
		attr()->size = uint16_t(used);
		return *this;
	}
};

ibv_flow_spec_eth eth_dst(const uint8_t *mac)
{
	ibv_flow_spec_eth e = {};
	e.type = IBV_FLOW_SPEC_ETH;
	e.size = sizeof(e);
	memcpy(e.val.dst_mac, mac, 6);
	memset(e.mask.dst_mac, 0xff, 6);
	return e;
}

ibv_flow_spec_tcp_udp udp_dport(uint16_t port)
{
	ibv_flow_spec_tcp_udp u = {};
	u.type = IBV_FLOW_SPEC_UDP;
	u.size = sizeof(u);
	u.val.dst_port = htons(port);
	u.mask.dst_port = 0xffff;
	return u;
}

// The Toeplitz hash, written from its definition (bit by bit), for
// checking the device's spreading.
uint32_t toeplitz(const uint8_t *key, size_t klen, const uint8_t *in, size_t n)
{
	uint32_t h = 0;
	for (size_t bit = 0; bit < n * 8; bit++) {
		if (!(in[bit / 8] >> (7 - bit % 8) & 1))
			continue;
		uint32_t w = 0;
		for (size_t k = 0; k < 32; k++) {
			size_t kb = bit + k;
			uint32_t v = kb / 8 < klen ? key[kb / 8] >> (7 - kb % 8) & 1 : 0;
			w = w << 1 | v;
		}
		h ^= w;
	}
	return h;
}

// A device context with a PD, a CQ, a registered buffer and raw packet QPs.
struct RawEnv {
	Ctx ctx;
	Pd pd;
	Cq cq;
	std::vector<uint8_t> mem = std::vector<uint8_t>(1 << 16);
	Mr mr;

	::testing::AssertionResult open(int index = 0)
	{
		ctx.reset(open_soft(index));
		if (!ctx)
			return ::testing::AssertionFailure() << "open: " << strerror(errno);
		pd.reset(ibv_alloc_pd(ctx.get()));
		cq.reset(ibv_create_cq(ctx.get(), 512, nullptr, nullptr, 0));
		mr.reset(ibv_reg_mr(pd.get(), mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE));
		if (!pd || !cq || !mr)
			return ::testing::AssertionFailure() << "PD/CQ/MR: " << strerror(errno);
		return ::testing::AssertionSuccess();
	}
	// A raw packet QP in RTS with its own CQ (cq_out) or the shared one.
	Qp raw_qp(ibv_cq *own = nullptr)
	{
		ibv_qp_init_attr ia = {};
		ia.send_cq = ia.recv_cq = own ? own : cq.get();
		ia.qp_type = IBV_QPT_RAW_PACKET;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 64;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 2;
		Qp qp(ibv_create_qp(pd.get(), &ia));
		if (!qp)
			return qp;
		ibv_qp_attr a = {};
		a.qp_state = IBV_QPS_INIT;
		a.port_num = 1;
		if (ibv_modify_qp(qp.get(), &a, IBV_QP_STATE | IBV_QP_PORT))
			return nullptr;
		a.qp_state = IBV_QPS_RTR;
		if (ibv_modify_qp(qp.get(), &a, IBV_QP_STATE))
			return nullptr;
		a.qp_state = IBV_QPS_RTS;
		if (ibv_modify_qp(qp.get(), &a, IBV_QP_STATE))
			return nullptr;
		return qp;
	}
	// Sends frame f from qp (copied to the buffer's start); the send's status.
	int send(ibv_qp *qp, const std::vector<uint8_t> &f, ibv_cq *scq = nullptr)
	{
		memcpy(mem.data(), f.data(), f.size());
		if (post_one(qp, IBV_WR_SEND, mem.data(), uint32_t(f.size()), mr->lkey))
			return -1;
		ibv_wc wc;
		if (!poll_one(scq ? scq : cq.get(), &wc))
			return -2;
		return wc.status;
	}
};

// Receive buffers at 4 KiB steps from offset 8 KiB.
void post_recvs(RawEnv &e, ibv_qp *qp, int n, uint64_t tag = 100)
{
	for (int i = 0; i < n; i++)
		ASSERT_EQ(post_recv_one(qp, e.mem.data() + 8192 + 4096 * (tag % 8), 4096, e.mr->lkey,
					tag),
			  0);
}

TEST(RawPort, EthernetLinkLayerAndCaps)
{
	ASSERT_EQ(g_eth, 0);
	RawEnv e;
	ASSERT_TRUE(e.open());
	ibv_port_attr pa;
	ASSERT_EQ(ibv_query_port(e.ctx.get(), 1, &pa), 0);
	EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
	EXPECT_EQ(pa.lid, 0);
	ibv_gid_entry ge;
	ASSERT_EQ(ibv_query_gid_ex(e.ctx.get(), 1, 0, &ge, 0), 0);
	EXPECT_EQ(ge.gid_type, IBV_GID_TYPE_ROCE_V2);
	// RoCE: no address handle without a GRH.
	ibv_ah_attr ah = {};
	ah.port_num = 1;
	errno = 0;
	EXPECT_EQ(ibv_create_ah(e.pd.get(), &ah), nullptr);
	EXPECT_EQ(errno, EINVAL);
	ibv_device_attr_ex dx;
	ASSERT_EQ(ibv_query_device_ex(e.ctx.get(), nullptr, &dx), 0);
	EXPECT_TRUE(dx.orig_attr.device_cap_flags & IBV_DEVICE_MANAGED_FLOW_STEERING);
	EXPECT_EQ(dx.rss_caps.supported_qpts, 1u << IBV_QPT_RAW_PACKET);
	EXPECT_EQ(dx.rss_caps.max_rwq_indirection_table_size, 64u);
	EXPECT_EQ(dx.rss_caps.rx_hash_function, IBV_RX_HASH_FUNC_TOEPLITZ);
	EXPECT_TRUE(dx.rss_caps.rx_hash_fields_mask & IBV_RX_HASH_SRC_IPV4);
	EXPECT_GT(dx.max_wq_type_rq, 0u);
	EXPECT_EQ(dx.raw_packet_caps, 0u);
}

TEST(RawQp, StatesAndChecks)
{
	RawEnv e;
	ASSERT_TRUE(e.open());
	ibv_qp_init_attr ia = {};
	ia.send_cq = ia.recv_cq = e.cq.get();
	ia.qp_type = IBV_QPT_RAW_PACKET;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	Qp qp(ibv_create_qp(e.pd.get(), &ia));
	ASSERT_TRUE(qp) << strerror(errno);
	ibv_qp_attr a = {};
	a.qp_state = IBV_QPS_INIT;
	EXPECT_EQ(ibv_modify_qp(qp.get(), &a, IBV_QP_STATE), EINVAL); // the port is required
	a.port_num = 1;
	a.qkey = 1;
	EXPECT_EQ(ibv_modify_qp(qp.get(), &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_QKEY), EINVAL);
	ASSERT_EQ(ibv_modify_qp(qp.get(), &a, IBV_QP_STATE | IBV_QP_PORT), 0);
	a.qp_state = IBV_QPS_RTR;
	ASSERT_EQ(ibv_modify_qp(qp.get(), &a, IBV_QP_STATE), 0);
	a.qp_state = IBV_QPS_RTS;
	ASSERT_EQ(ibv_modify_qp(qp.get(), &a, IBV_QP_STATE), 0);
	ibv_qp_attr q;
	ibv_qp_init_attr qi;
	ASSERT_EQ(ibv_query_qp(qp.get(), &q, IBV_QP_STATE | IBV_QP_CAP, &qi), 0);
	EXPECT_EQ(q.qp_state, IBV_QPS_RTS);
	EXPECT_EQ(qi.qp_type, IBV_QPT_RAW_PACKET);
	EXPECT_GE(qi.cap.max_recv_wr, 8u);
	// Frames only: no RDMA, no immediate.
	EXPECT_EQ(post_one(qp.get(), IBV_WR_RDMA_WRITE, e.mem.data(), 64, e.mr->lkey), EINVAL);
	EXPECT_EQ(post_one(qp.get(), IBV_WR_SEND_WITH_IMM, e.mem.data(), 64, e.mr->lkey), EINVAL);
	// Shorter than an Ethernet header, longer than the largest frame.
	EXPECT_EQ(e.send(qp.get(), std::vector<uint8_t>(10)), IBV_WC_LOC_LEN_ERR);
}

TEST(RawFlow, MatchingRulesOnlyGetTheFrame)
{
	RawEnv e;
	ASSERT_TRUE(e.open());
	Cq rcq(ibv_create_cq(e.ctx.get(), 64, nullptr, nullptr, 0));
	Qp tx = e.raw_qp(), rx = e.raw_qp(rcq.get());
	ASSERT_TRUE(tx && rx);
	post_recvs(e, rx.get(), 4);
	// No rule: nothing is delivered, the send still completes.
	auto f = udp4_frame(kDstMac, 0x01010101, 0x02020202, 1234, 5678, 200);
	ASSERT_EQ(e.send(tx.get(), f), IBV_WC_SUCCESS);
	ibv_wc wc;
	EXPECT_FALSE(poll_one(rcq.get(), &wc, 50));
	FlowRule r;
	r.add(eth_dst(kDstMac)).add(udp_dport(5678));
	Flow fl(ibv_create_flow(rx.get(), r.attr()));
	ASSERT_TRUE(fl) << strerror(errno);
	ASSERT_EQ(e.send(tx.get(), f), IBV_WC_SUCCESS);
	ASSERT_TRUE(poll_one(rcq.get(), &wc));
	EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
	EXPECT_EQ(wc.opcode, IBV_WC_RECV);
	EXPECT_EQ(wc.byte_len, f.size());
	EXPECT_EQ(wc.qp_num, rx->qp_num);
	EXPECT_EQ(memcmp(e.mem.data() + 8192 + 4096 * (wc.wr_id % 8), f.data(), f.size()), 0);
	// Another destination MAC, another port: not matched.
	ASSERT_EQ(e.send(tx.get(), udp4_frame(kOtherMac, 1, 2, 1234, 5678)), IBV_WC_SUCCESS);
	ASSERT_EQ(e.send(tx.get(), udp4_frame(kDstMac, 1, 2, 1234, 5679)), IBV_WC_SUCCESS);
	EXPECT_FALSE(poll_one(rcq.get(), &wc, 50));
	// A QP with rules cannot go; the rule can.
	EXPECT_EQ(ibv_destroy_qp(rx.get()), EBUSY);
	fl.reset();
	ASSERT_EQ(e.send(tx.get(), f), IBV_WC_SUCCESS);
	EXPECT_FALSE(poll_one(rcq.get(), &wc, 50));
}

TEST(RawFlow, LowestPriorityValueWinsAndDefaultsCatchTheRest)
{
	RawEnv e;
	ASSERT_TRUE(e.open());
	Cq c1(ibv_create_cq(e.ctx.get(), 64, nullptr, nullptr, 0));
	Cq c2(ibv_create_cq(e.ctx.get(), 64, nullptr, nullptr, 0));
	Cq c3(ibv_create_cq(e.ctx.get(), 64, nullptr, nullptr, 0));
	Qp tx = e.raw_qp(), q1 = e.raw_qp(c1.get()), q2 = e.raw_qp(c2.get()),
	   q3 = e.raw_qp(c3.get());
	ASSERT_TRUE(tx && q1 && q2 && q3);
	post_recvs(e, q1.get(), 4, 1);
	post_recvs(e, q2.get(), 4, 2);
	post_recvs(e, q3.get(), 4, 3);
	FlowRule hi(0), lo(3), def(0, IBV_FLOW_ATTR_ALL_DEFAULT);
	hi.add(udp_dport(5678));
	lo.add(eth_dst(kDstMac));
	Flow f1(ibv_create_flow(q1.get(), hi.attr())), f2(ibv_create_flow(q2.get(), lo.attr())),
		f3(ibv_create_flow(q3.get(), def.attr()));
	ASSERT_TRUE(f1 && f2 && f3) << strerror(errno);
	ibv_wc wc;
	// Both rules match: priority 0 takes it.
	ASSERT_EQ(e.send(tx.get(), udp4_frame(kDstMac, 1, 2, 9, 5678)), IBV_WC_SUCCESS);
	EXPECT_TRUE(poll_one(c1.get(), &wc));
	EXPECT_FALSE(poll_one(c2.get(), &wc, 20));
	// Only the MAC rule: q2.
	ASSERT_EQ(e.send(tx.get(), udp4_frame(kDstMac, 1, 2, 9, 1)), IBV_WC_SUCCESS);
	EXPECT_TRUE(poll_one(c2.get(), &wc));
	EXPECT_FALSE(poll_one(c1.get(), &wc, 20));
	EXPECT_FALSE(poll_one(c3.get(), &wc, 20));
	// No rule: the catch-all.
	ASSERT_EQ(e.send(tx.get(), udp4_frame(kOtherMac, 1, 2, 9, 1)), IBV_WC_SUCCESS);
	EXPECT_TRUE(poll_one(c3.get(), &wc));
	EXPECT_FALSE(poll_one(c1.get(), &wc, 20));
	EXPECT_FALSE(poll_one(c2.get(), &wc, 20));
}

TEST(RawFlow, RefusesWhatItCannotSteer)
{
	RawEnv e;
	ASSERT_TRUE(e.open());
	Qp rx = e.raw_qp();
	ASSERT_TRUE(rx);
	FlowRule bad_size;
	ibv_flow_spec_eth eth = eth_dst(kDstMac);
	eth.size = 8;
	bad_size.add(eth);
	errno = 0;
	EXPECT_EQ(ibv_create_flow(rx.get(), bad_size.attr()), nullptr);
	EXPECT_EQ(errno, EINVAL);
	FlowRule tunnel;
	ibv_flow_spec_tcp_udp vx = udp_dport(4789);
	vx.type = IBV_FLOW_SPEC_VXLAN_TUNNEL;
	tunnel.add(vx);
	errno = 0;
	EXPECT_EQ(ibv_create_flow(rx.get(), tunnel.attr()), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
	FlowRule dont_trap;
	dont_trap.attr()->flags = IBV_FLOW_ATTR_FLAGS_DONT_TRAP;
	errno = 0;
	EXPECT_EQ(ibv_create_flow(rx.get(), dont_trap.attr()), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
	// Flows steer to raw packet QPs only.
	ibv_qp_init_attr ia = {};
	ia.send_cq = ia.recv_cq = e.cq.get();
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	Qp ud(ibv_create_qp(e.pd.get(), &ia));
	ASSERT_TRUE(ud);
	FlowRule ok;
	errno = 0;
	EXPECT_EQ(ibv_create_flow(ud.get(), ok.attr()), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
}

// A receiver in another process: the rule lives in the device's segment,
// and the sender's process steers the frame into the child's queue.
TEST(RawFlow, ReachesAnotherProcess)
{
	int ready[2];
	ASSERT_EQ(pipe(ready), 0);
	auto f = udp4_frame(kDstMac, 0x0a000001, 0x0a000002, 7, 5678, 300);
	pid_t c = fork();
	if (c == 0) {
		RawEnv r;
		bool ok = r.open();
		Qp rx = ok ? r.raw_qp() : nullptr;
		ok = rx && post_recv_one(rx.get(), r.mem.data(), 4096, r.mr->lkey) == 0;
		FlowRule rule;
		rule.add(eth_dst(kDstMac)).add(udp_dport(5678));
		Flow fl(ok ? ibv_create_flow(rx.get(), rule.attr()) : nullptr);
		char m = fl ? 'y' : 'n';
		if (write(ready[1], &m, 1) != 1)
			_exit(2);
		ibv_wc wc;
		bool got = fl && poll_one(r.cq.get(), &wc) && wc.status == IBV_WC_SUCCESS &&
			   wc.byte_len == f.size() && !memcmp(r.mem.data(), f.data(), f.size());
		fl.reset();
		_exit(got ? 0 : 1);
	}
	char m = 0;
	ASSERT_EQ(read(ready[0], &m, 1), 1);
	ASSERT_EQ(m, 'y');
	RawEnv e;
	ASSERT_TRUE(e.open());
	Qp tx = e.raw_qp();
	ASSERT_TRUE(tx);
	EXPECT_EQ(e.send(tx.get(), f), IBV_WC_SUCCESS);
	int st = 0;
	ASSERT_EQ(waitpid(c, &st, 0), c);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
	close(ready[0]);
	close(ready[1]);
}

TEST(RawRss, SpreadsByToeplitzOverTheIndirectionTable)
{
	RawEnv e;
	ASSERT_TRUE(e.open());
	constexpr int kWqs = 8;
	std::array<Cq, kWqs> cqs;
	std::array<Wq, kWqs> wqs;
	ibv_wq *raw_wqs[kWqs];
	for (int i = 0; i < kWqs; i++) {
		cqs[i].reset(ibv_create_cq(e.ctx.get(), 64, nullptr, nullptr, 0));
		ASSERT_TRUE(cqs[i]);
		ibv_wq_init_attr wa = {};
		wa.wq_type = IBV_WQT_RQ;
		wa.max_wr = 64;
		wa.max_sge = 1;
		wa.pd = e.pd.get();
		wa.cq = cqs[i].get();
		wqs[i].reset(ibv_create_wq(e.ctx.get(), &wa));
		ASSERT_TRUE(wqs[i]) << strerror(errno);
		ibv_wq_attr m = {};
		m.attr_mask = IBV_WQ_ATTR_STATE;
		m.wq_state = IBV_WQS_RDY;
		ASSERT_EQ(ibv_modify_wq(wqs[i].get(), &m), 0);
		raw_wqs[i] = wqs[i].get();
		for (int k = 0; k < 40; k++) {
			ibv_sge s = {uintptr_t(e.mem.data() + 8192 + 256 * i), 256, e.mr->lkey};
			ibv_recv_wr wr = {}, *bad;
			wr.wr_id = uint64_t(i);
			wr.sg_list = &s;
			wr.num_sge = 1;
			ASSERT_EQ(ibv_post_wq_recv(wqs[i].get(), &wr, &bad), 0);
		}
	}
	ibv_rwq_ind_table_init_attr ta = {};
	ta.log_ind_tbl_size = 3;
	ta.ind_tbl = raw_wqs;
	Ind ind(ibv_create_rwq_ind_table(e.ctx.get(), &ta));
	ASSERT_TRUE(ind) << strerror(errno);
	// A WQ an indirection table names cannot go.
	EXPECT_EQ(ibv_destroy_wq(wqs[0].get()), EBUSY);
	uint8_t key[40];
	for (int i = 0; i < 40; i++)
		key[i] = uint8_t(0x6d + 37 * i);
	ibv_qp_init_attr_ex qa = {};
	qa.qp_type = IBV_QPT_RAW_PACKET;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
	qa.pd = e.pd.get();
	qa.rwq_ind_tbl = ind.get();
	qa.rx_hash_conf.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
	qa.rx_hash_conf.rx_hash_key_len = 40;
	qa.rx_hash_conf.rx_hash_key = key;
	qa.rx_hash_conf.rx_hash_fields_mask =
		IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 | IBV_RX_HASH_SRC_PORT_UDP |
		IBV_RX_HASH_DST_PORT_UDP;
	Qp rss(ibv_create_qp_ex(e.ctx.get(), &qa));
	ASSERT_TRUE(rss) << strerror(errno);
	EXPECT_EQ(ibv_destroy_rwq_ind_table(ind.get()), EBUSY);
	FlowRule r;
	r.add(eth_dst(kDstMac));
	Flow fl(ibv_create_flow(rss.get(), r.attr()));
	ASSERT_TRUE(fl) << strerror(errno);
	Qp tx = e.raw_qp();
	ASSERT_TRUE(tx);
	int per_wq[kWqs] = {};
	for (uint32_t n = 0; n < 32; n++) {
		uint32_t sip = 0x0a000000 + n * 7919, dip = 0xc0a80001;
		uint16_t sp = uint16_t(1000 + n * 13), dp = 4791;
		ASSERT_EQ(e.send(tx.get(), udp4_frame(kDstMac, sip, dip, sp, dp)), IBV_WC_SUCCESS);
		uint8_t in[12];
		uint32_t s = htonl(sip), d = htonl(dip);
		uint16_t ps = htons(sp), pd = htons(dp);
		memcpy(in, &s, 4);
		memcpy(in + 4, &d, 4);
		memcpy(in + 8, &ps, 2);
		memcpy(in + 10, &pd, 2);
		int want = int(toeplitz(key, 40, in, 12) & 7);
		ibv_wc wc;
		ASSERT_TRUE(poll_one(cqs[want].get(), &wc, 2000)) << "frame " << n << " not on WQ " << want;
		EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
		EXPECT_EQ(wc.qp_num, wqs[want]->wq_num);
		per_wq[want]++;
	}
	int used = 0;
	for (int i = 0; i < kWqs; i++) {
		ibv_wc wc;
		EXPECT_EQ(ibv_poll_cq(cqs[i].get(), 1, &wc), 0) << "extra frame on WQ " << i;
		used += per_wq[i] > 0;
	}
	EXPECT_GE(used, 4); // 32 flows over 8 queues
	fl.reset();
	rss.reset();
	ind.reset();
}

TEST(RawRss, ReferenceHashMatchesThePublishedVector)
{
	// The Toeplitz verification vector of Microsoft's RSS documentation:
	// 66.9.149.187:2794 -> 161.142.100.80:1766.
	const uint8_t key[40] = {0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67,
				 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb,
				 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
				 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};
	const uint8_t in[12] = {66, 9, 149, 187, 161, 142, 100, 80, 0x0a, 0xea, 0x06, 0xe6};
	EXPECT_EQ(toeplitz(key, 40, in, 8), 0x323e8fc2u);
	EXPECT_EQ(toeplitz(key, 40, in, 12), 0x51ccc178u);
}

TEST(RawWq, StatesFlushAndLimits)
{
	RawEnv e;
	ASSERT_TRUE(e.open());
	ibv_wq_init_attr wa = {};
	wa.wq_type = IBV_WQT_RQ;
	wa.max_wr = 4;
	wa.max_sge = 1;
	wa.pd = e.pd.get();
	wa.cq = e.cq.get();
	Wq wq(ibv_create_wq(e.ctx.get(), &wa));
	ASSERT_TRUE(wq) << strerror(errno);
	EXPECT_EQ(wq->state, IBV_WQS_RESET);
	ibv_wq_attr m = {};
	m.attr_mask = IBV_WQ_ATTR_STATE;
	m.wq_state = IBV_WQS_RDY;
	ASSERT_EQ(ibv_modify_wq(wq.get(), &m), 0);
	ibv_sge s = {uintptr_t(e.mem.data()), 64, e.mr->lkey};
	ibv_recv_wr wr = {}, *bad;
	wr.wr_id = 42;
	wr.sg_list = &s;
	wr.num_sge = 1;
	ASSERT_EQ(ibv_post_wq_recv(wq.get(), &wr, &bad), 0);
	m.wq_state = IBV_WQS_ERR;
	ASSERT_EQ(ibv_modify_wq(wq.get(), &m), 0);
	ibv_wc wc;
	ASSERT_TRUE(poll_one(e.cq.get(), &wc));
	EXPECT_EQ(wc.wr_id, 42u);
	EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
	m.wq_state = IBV_WQS_RDY; // from ERR only through RESET
	EXPECT_EQ(ibv_modify_wq(wq.get(), &m), EINVAL);
	m.attr_mask = IBV_WQ_ATTR_FLAGS;
	m.flags = m.flags_mask = IBV_WQ_FLAGS_CVLAN_STRIPPING;
	EXPECT_EQ(ibv_modify_wq(wq.get(), &m), EOPNOTSUPP);
	// Tables of more than rss_caps.max_rwq_indirection_table_size WQs.
	std::vector<ibv_wq *> many(128, wq.get());
	ibv_rwq_ind_table_init_attr ta = {};
	ta.log_ind_tbl_size = 7;
	ta.ind_tbl = many.data();
	errno = 0;
	EXPECT_EQ(ibv_create_rwq_ind_table(e.ctx.get(), &ta), nullptr);
	EXPECT_EQ(errno, EINVAL);
	// An RSS QP's key is 40 bytes; its function Toeplitz.
	ta.log_ind_tbl_size = 0;
	Ind ind(ibv_create_rwq_ind_table(e.ctx.get(), &ta));
	ASSERT_TRUE(ind);
	uint8_t key[40] = {};
	ibv_qp_init_attr_ex qa = {};
	qa.qp_type = IBV_QPT_RAW_PACKET;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
	qa.pd = e.pd.get();
	qa.rwq_ind_tbl = ind.get();
	qa.rx_hash_conf.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
	qa.rx_hash_conf.rx_hash_key_len = 16;
	qa.rx_hash_conf.rx_hash_key = key;
	errno = 0;
	EXPECT_EQ(ibv_create_qp_ex(e.ctx.get(), &qa), nullptr);
	EXPECT_EQ(errno, EINVAL);
	qa.rx_hash_conf.rx_hash_key_len = 40;
	qa.rx_hash_conf.rx_hash_fields_mask = IBV_RX_HASH_IPSEC_SPI;
	errno = 0;
	EXPECT_EQ(ibv_create_qp_ex(e.ctx.get(), &qa), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
}

} // namespace
