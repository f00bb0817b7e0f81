// The rsockets data path (src/rdmacm/rsocket/stream.*) on the software
// device, without a connection manager: two RC QPs of soft0 are moved to
// RTS by hand, as tests/soft does, and handed to two Streams that exchange
// their private data directly. Everything after that is what runs over a
// connection made by rdma_cm.
#include "soft_fixture.h"
#include "stream.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <numeric>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <thread>
#include <vector>

using namespace ov::rs;

namespace {

int to_rts(ibv_qp *qp, uint32_t dest)
{
	ibv_qp_attr a = {};
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	a = {};
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = dest;
	a.ah_attr.dlid = 1;
	a.ah_attr.port_num = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	a = {};
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

// Two connected streams on soft0.
struct Pair : ::testing::Test {
	ibv_context *ctx = nullptr;
	ibv_pd *pd = nullptr;
	Stream *a = nullptr, *b = nullptr;
	ibv_qp *qa = nullptr, *qb = nullptr;

	void open(StreamParams pa = {}, StreamParams pb = {})
	{
		ctx = ov_test::open_soft(0);
		ASSERT_NE(ctx, nullptr);
		pd = ibv_alloc_pd(ctx);
		ASSERT_NE(pd, nullptr);
		a = new Stream(pa);
		b = new Stream(pb);
		ASSERT_EQ(a->open(ctx, pd), 0) << strerror(errno);
		ASSERT_EQ(b->open(ctx, pd), 0) << strerror(errno);
		ibv_qp_init_attr ia = a->qp_init_attr(), ib = b->qp_init_attr();
		qa = ibv_create_qp(pd, &ia);
		qb = ibv_create_qp(pd, &ib);
		ASSERT_TRUE(qa && qb);
		ASSERT_EQ(to_rts(qa, qb->qp_num), 0);
		ASSERT_EQ(to_rts(qb, qa->qp_num), 0);
		ASSERT_EQ(a->attach(qa, ia.cap.max_inline_data), 0);
		ASSERT_EQ(b->attach(qb, ib.cap.max_inline_data), 0);
		ConnData ca = a->local_conn_data(), cb = b->local_conn_data();
		ASSERT_EQ(a->start(cb), 0);
		ASSERT_EQ(b->start(ca), 0);
	}
	void TearDown() override
	{
		if (qa)
			ibv_destroy_qp(qa);
		if (qb)
			ibv_destroy_qp(qb);
		delete a;
		delete b;
		if (pd)
			ibv_dealloc_pd(pd);
		if (ctx)
			ibv_close_device(ctx);
	}
};

ssize_t send_all(Stream *s, const void *buf, size_t len)
{
	iovec v = {const_cast<void *>(buf), len};
	return s->send(&v, 1, 0, false);
}

ssize_t recv_all(Stream *s, void *buf, size_t len)
{
	return s->recv(buf, len, MSG_WAITALL, false);
}

std::vector<uint8_t> pattern(size_t n, unsigned seed)
{
	std::vector<uint8_t> v(n);
	for (size_t i = 0; i < n; i++)
		v[i] = static_cast<uint8_t>((i * 131u + seed) >> 3);
	return v;
}

TEST_F(Pair, ConnDataLayout)
{
	open();
	ConnData c = a->local_conn_data();
	EXPECT_EQ(c.version, 1);
	EXPECT_EQ(c.flags, kConnFlagIomap); // little-endian host
	EXPECT_EQ(be16toh(c.credits_be), kDefaultRqSize);
	EXPECT_EQ(be32toh(c.target_sgl_be.length), 2u);
	EXPECT_EQ(be32toh(c.data_buf_be.length), kDefaultMem / 2);
}

TEST_F(Pair, SmallPingPong)
{
	open();
	std::thread t([&] {
		char buf[64];
		for (int i = 0; i < 2000; i++) {
			ASSERT_EQ(recv_all(b, buf, 16), 16);
			ASSERT_EQ(send_all(b, buf, 16), 16);
		}
	});
	for (int i = 0; i < 2000; i++) {
		char out[16], in[16];
		memset(out, i & 0xff, sizeof(out));
		ASSERT_EQ(send_all(a, out, 16), 16);
		ASSERT_EQ(recv_all(a, in, 16), 16);
		ASSERT_EQ(memcmp(in, out, 16), 0);
	}
	t.join();
}

// Many times the receive buffer, in odd sizes: the credits, the two halves
// and the send ring all wrap many times; every byte arrives in order.
void bulk(Stream *tx, Stream *rx, size_t total, size_t chunk)
{
	auto data = pattern(total, 7);
	std::thread t([&] {
		for (size_t off = 0; off < total;) {
			size_t n = std::min(chunk, total - off);
			ASSERT_EQ(send_all(tx, data.data() + off, n), static_cast<ssize_t>(n));
			off += n;
		}
	});
	std::vector<uint8_t> got(total);
	size_t off = 0;
	while (off < total) {
		ssize_t n = rx->recv(got.data() + off, std::min<size_t>(total - off, 100000), 0, false);
		ASSERT_GT(n, 0) << strerror(errno);
		off += static_cast<size_t>(n);
	}
	t.join();
	ASSERT_TRUE(got == data);
}

TEST_F(Pair, BulkDefault)
{
	open();
	bulk(a, b, 16u << 20, 65536);
	bulk(b, a, 3u << 20, 777);
}

TEST_F(Pair, BulkSmallBuffersAndQueues)
{
	StreamParams p;
	p.sbuf_size = 8192;
	p.rbuf_size = 4096;
	p.sq_size = 16;
	p.rq_size = 16;
	p.sq_inline = 0;
	open(p, p);
	bulk(a, b, 2u << 20, 10000);
	bulk(b, a, 1u << 20, 3);
}

TEST_F(Pair, GatherSend)
{
	open();
	auto d = pattern(300000, 3);
	std::vector<iovec> iov;
	size_t cuts[] = {0, 1, 1, 5000, 70000, 70001, 200000, 300000};
	for (size_t i = 0; i + 1 < sizeof(cuts) / sizeof(cuts[0]); i++)
		iov.push_back({d.data() + cuts[i], cuts[i + 1] - cuts[i]});
	std::thread t([&] { ASSERT_EQ(a->send(iov.data(), static_cast<int>(iov.size()), 0, false), 300000); });
	std::vector<uint8_t> got(d.size());
	ASSERT_EQ(recv_all(b, got.data(), got.size()), 300000);
	t.join();
	EXPECT_TRUE(got == d);
}

TEST_F(Pair, PeekAndPartialReads)
{
	open();
	ASSERT_EQ(send_all(a, "hello world", 11), 11);
	char buf[32] = {};
	ASSERT_EQ(b->recv(buf, 5, MSG_PEEK, false), 5);
	EXPECT_EQ(std::string(buf, 5), "hello");
	ASSERT_EQ(b->recv(buf, 3, 0, false), 3);
	EXPECT_EQ(std::string(buf, 3), "hel");
	ASSERT_EQ(b->recv(buf, sizeof(buf), MSG_PEEK, false), 8);
	ASSERT_EQ(b->recv(buf, sizeof(buf), 0, false), 8);
	EXPECT_EQ(std::string(buf, 8), "lo world");
}

TEST_F(Pair, NonBlocking)
{
	StreamParams p;
	p.rbuf_size = 8192;
	open(p, p);
	char buf[4096];
	errno = 0;
	EXPECT_EQ(b->recv(buf, sizeof(buf), 0, true), -1);
	EXPECT_EQ(errno, EWOULDBLOCK);
	EXPECT_FALSE(b->poll_events(POLLIN) & POLLIN);
	EXPECT_TRUE(a->poll_events(POLLOUT) & POLLOUT);
	// Nobody reads: the sender runs out of the receiver's buffer.
	auto d = pattern(1 << 20, 1);
	iovec v = {d.data(), d.size()};
	ssize_t sent = a->send(&v, 1, 0, true);
	ASSERT_GT(sent, 0);
	ASSERT_LT(sent, 1 << 20);
	errno = 0;
	iovec v2 = {d.data() + sent, 100};
	EXPECT_EQ(a->send(&v2, 1, 0, true), -1);
	EXPECT_EQ(errno, EWOULDBLOCK);
	EXPECT_TRUE(b->poll_events(POLLIN) & POLLIN);
	std::vector<uint8_t> got(static_cast<size_t>(sent));
	ASSERT_EQ(recv_all(b, got.data(), got.size()), sent);
	EXPECT_EQ(memcmp(got.data(), d.data(), got.size()), 0);
}

TEST_F(Pair, ShutdownWriteThenEof)
{
	open();
	ASSERT_EQ(send_all(a, "last", 4), 4);
	ASSERT_EQ(a->shutdown(SHUT_WR), 0);
	char buf[16];
	ASSERT_EQ(recv_all(b, buf, 4), 4);
	EXPECT_EQ(b->recv(buf, sizeof(buf), 0, false), 0); // EOF
	EXPECT_TRUE(b->poll_events(POLLIN) & POLLIN);
	// The other direction still works.
	ASSERT_EQ(send_all(b, "back", 4), 4);
	ASSERT_EQ(recv_all(a, buf, 4), 4);
	EXPECT_EQ(memcmp(buf, "back", 4), 0);
	errno = 0;
	EXPECT_EQ(send_all(a, "x", 1), -1);
	EXPECT_EQ(errno, EPIPE);
	ASSERT_EQ(b->shutdown(SHUT_RDWR), 0);
	EXPECT_EQ(a->recv(buf, sizeof(buf), 0, false), 0);
	EXPECT_TRUE(a->poll_events(POLLIN) & POLLHUP);
}

TEST_F(Pair, DisconnectWakesBlockedReader)
{
	open();
	std::thread t([&] {
		char buf[16];
		EXPECT_EQ(b->recv(buf, sizeof(buf), 0, false), 0);
	});
	usleep(100000);
	ASSERT_EQ(a->shutdown(SHUT_RDWR), 0);
	t.join();
}

TEST_F(Pair, IomapAndIowrite)
{
	StreamParams p;
	p.iomap_size = 4;
	open(p, p);
	std::vector<uint8_t> target(1 << 16, 0);
	ASSERT_EQ(b->iomap(target.data(), target.size(), PROT_WRITE, 0, 4096), 4096);
	// The mapping is announced with the next transfer from b.
	ASSERT_EQ(send_all(b, "map", 3), 3);
	char buf[8];
	ASSERT_EQ(recv_all(a, buf, 3), 3);
	auto d = pattern(20000, 9);
	ASSERT_EQ(a->iowrite(d.data(), d.size(), 4096 + 100, 0, false), d.size());
	ASSERT_EQ(send_all(a, "done", 4), 4); // ordered after the write
	ASSERT_EQ(recv_all(b, buf, 4), 4);
	EXPECT_EQ(memcmp(target.data() + 100, d.data(), d.size()), 0);
	errno = 0;
	EXPECT_EQ(a->iowrite(d.data(), 10, 1, 0, false), static_cast<size_t>(-1));
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(b->iounmap(target.data(), target.size()), 0);
	EXPECT_EQ(b->iounmap(target.data(), target.size()), -1);
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(b->iomap(target.data(), 16, PROT_READ, 0, -1), -1);
	EXPECT_EQ(errno, EINVAL);
}

} // namespace
