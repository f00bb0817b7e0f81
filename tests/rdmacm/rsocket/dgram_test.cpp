// Datagram rsockets (SOCK_DGRAM) through the exported entry points of our
// librdmacm.so.1, on soft0 with the software devices' CM (run by
// private_shm.sh): bind and addresses, rsendto/rrecvfrom, connected
// sockets, truncation, non-blocking calls, rpoll/rselect, options, bad
// input, and the wire format of rdma-core 44 (rsocket.c's ds_udp_header and
// ds_header) seen from a plain UDP socket and a raw UD QP playing the peer.
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <random>
#include <sys/select.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

#define EXPECT_ERRNO(call, err)                                                                    \
	do {                                                                                       \
		errno = 0;                                                                         \
		EXPECT_EQ((call), -1);                                                             \
		EXPECT_EQ(errno, (err));                                                           \
	} while (0)

sockaddr_in loopback(uint16_t port = 0)
{
	sockaddr_in a = {};
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

sockaddr *sa(sockaddr_in &a) { return reinterpret_cast<sockaddr *>(&a); }

// A bound datagram rsocket that closes itself.
struct Ds {
	int fd = -1;
	sockaddr_in addr = {};
	explicit Ds(bool bind_it = true)
	{
		fd = rsocket(AF_INET, SOCK_DGRAM, 0);
		if (fd < 0 || !bind_it)
			return;
		sockaddr_in a = loopback();
		if (rbind(fd, sa(a), sizeof(a)))
			return;
		socklen_t l = sizeof(addr);
		rgetsockname(fd, sa(addr), &l);
	}
	~Ds()
	{
		if (fd >= 0)
			rclose(fd);
	}
};

// Receives one datagram, waiting up to 5 s (rpoll), from any sender.
ssize_t recv_wait(int fd, void *buf, size_t len, sockaddr_in *from = nullptr, int flags = 0)
{
	pollfd p = {fd, POLLIN, 0};
	if (rpoll(&p, 1, 5000) != 1)
		return -2;
	socklen_t l = sizeof(sockaddr_in);
	return rrecvfrom(fd, buf, len, flags | MSG_DONTWAIT, from ? sa(*from) : nullptr,
			 from ? &l : nullptr);
}

std::vector<uint8_t> pattern(size_t n, unsigned seed)
{
	std::vector<uint8_t> v(n);
	std::mt19937 g(seed);
	for (auto &b : v)
		b = static_cast<uint8_t>(g());
	return v;
}

TEST(RsocketDgram, BindAndAddresses)
{
	Ds a;
	ASSERT_GE(a.fd, 0) << strerror(errno);
	EXPECT_EQ(a.addr.sin_family, AF_INET);
	EXPECT_NE(a.addr.sin_port, 0);
	EXPECT_EQ(a.addr.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	sockaddr_in p = {};
	socklen_t l = sizeof(p);
	EXPECT_ERRNO(rgetpeername(a.fd, sa(p), &l), ENOTCONN);
	// A second bind is the kernel's EINVAL, a taken port EADDRINUSE.
	sockaddr_in again = loopback();
	EXPECT_ERRNO(rbind(a.fd, sa(again), sizeof(again)), EINVAL);
	Ds b(false);
	ASSERT_GE(b.fd, 0);
	EXPECT_ERRNO(rbind(b.fd, sa(a.addr), sizeof(a.addr)), EADDRINUSE);
	int type = 0;
	l = sizeof(type);
	EXPECT_EQ(rgetsockopt(a.fd, SOL_SOCKET, SO_TYPE, &type, &l), 0);
	EXPECT_EQ(type, SOCK_DGRAM);
}

// Datagrams both ways, every size up to the largest, content and source
// address checked: the first goes over UDP, the rest over the UD QPs.
TEST(RsocketDgram, SendtoRecvfromBothWays)
{
	Ds a, b;
	ASSERT_GE(a.fd, 0);
	ASSERT_GE(b.fd, 0);
	std::vector<uint8_t> in(4096);
	const size_t sizes[] = {1, 7, 64, 100, 1000, 1500, 2000, 2032};
	unsigned seed = 1;
	for (int round = 0; round < 3; round++) {
		for (size_t n : sizes) {
			auto out = pattern(n, seed++);
			ASSERT_EQ(rsendto(b.fd, out.data(), n, 0, sa(a.addr), sizeof(a.addr)),
				  static_cast<ssize_t>(n));
			sockaddr_in from = {};
			ASSERT_EQ(recv_wait(a.fd, in.data(), in.size(), &from), static_cast<ssize_t>(n));
			EXPECT_EQ(memcmp(in.data(), out.data(), n), 0) << n;
			EXPECT_EQ(from.sin_family, AF_INET);
			EXPECT_EQ(from.sin_port, b.addr.sin_port);
			EXPECT_EQ(from.sin_addr.s_addr, b.addr.sin_addr.s_addr);
			// The answer to the address the datagram came from.
			auto back = pattern(n, seed++);
			ASSERT_EQ(rsendto(a.fd, back.data(), n, 0, sa(from), sizeof(from)),
				  static_cast<ssize_t>(n));
			sockaddr_in from2 = {};
			ASSERT_EQ(recv_wait(b.fd, in.data(), in.size(), &from2), static_cast<ssize_t>(n));
			EXPECT_EQ(memcmp(in.data(), back.data(), n), 0);
			EXPECT_EQ(from2.sin_port, a.addr.sin_port);
		}
	}
}

TEST(RsocketDgram, ConnectedSendRecvAndPeerName)
{
	Ds a;
	Ds b(false);
	ASSERT_GE(a.fd, 0);
	ASSERT_GE(b.fd, 0);
	char c = 'x';
	EXPECT_ERRNO(rsend(b.fd, &c, 1, 0), EDESTADDRREQ);
	ASSERT_EQ(rconnect(b.fd, sa(a.addr), sizeof(a.addr)), 0) << strerror(errno);
	sockaddr_in peer = {}, me = {};
	socklen_t l = sizeof(peer);
	ASSERT_EQ(rgetpeername(b.fd, sa(peer), &l), 0);
	EXPECT_EQ(peer.sin_port, a.addr.sin_port);
	l = sizeof(me);
	ASSERT_EQ(rgetsockname(b.fd, sa(me), &l), 0);
	EXPECT_NE(me.sin_port, 0); // connect bound it
	for (int i = 0; i < 200; i++) {
		auto out = pattern(100 + i, i);
		ASSERT_EQ(rsend(b.fd, out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
		std::vector<uint8_t> in(4096);
		sockaddr_in from = {};
		ASSERT_EQ(recv_wait(a.fd, in.data(), in.size(), &from), static_cast<ssize_t>(out.size()));
		ASSERT_EQ(memcmp(in.data(), out.data(), out.size()), 0);
		EXPECT_EQ(from.sin_port, me.sin_port);
		ASSERT_EQ(rsendto(a.fd, in.data(), 3, 0, sa(from), sizeof(from)), 3);
		char r[8];
		ASSERT_EQ(rrecv(b.fd, r, sizeof(r), 0), 3); // blocking
		EXPECT_EQ(memcmp(r, out.data(), 3), 0);
	}
	// rwrite/rread are rsend/rrecv.
	ASSERT_EQ(rwrite(b.fd, "hello", 5), 5);
	char r[16];
	ASSERT_EQ(recv_wait(a.fd, r, sizeof(r)), 5);
}

TEST(RsocketDgram, TruncationPeekAndMsgTrunc)
{
	Ds a, b;
	ASSERT_GE(a.fd, 0);
	ASSERT_GE(b.fd, 0);
	auto out = pattern(100, 7);
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(rsendto(b.fd, out.data(), 100, 0, sa(a.addr), sizeof(a.addr)), 100);
	char buf[200];
	// Peek leaves the datagram queued.
	ASSERT_EQ(recv_wait(a.fd, buf, 10, nullptr, MSG_PEEK), 10);
	EXPECT_EQ(memcmp(buf, out.data(), 10), 0);
	// A short buffer: the first 10 bytes, the rest of that datagram dropped.
	ASSERT_EQ(recv_wait(a.fd, buf, 10), 10);
	EXPECT_EQ(memcmp(buf, out.data(), 10), 0);
	// MSG_TRUNC: the datagram's real length.
	ASSERT_EQ(recv_wait(a.fd, buf, 10, nullptr, MSG_TRUNC), 100);
	// rrecvmsg reports the truncation in msg_flags, with the source.
	iovec v[2] = {{buf, 30}, {buf + 100, 20}};
	sockaddr_in from = {};
	msghdr m = {};
	m.msg_name = &from;
	m.msg_namelen = sizeof(from);
	m.msg_iov = v;
	m.msg_iovlen = 2;
	pollfd p = {a.fd, POLLIN, 0};
	ASSERT_EQ(rpoll(&p, 1, 5000), 1);
	ASSERT_EQ(rrecvmsg(a.fd, &m, 0), 50);
	EXPECT_TRUE(m.msg_flags & MSG_TRUNC);
	EXPECT_EQ(m.msg_namelen, sizeof(sockaddr_in));
	EXPECT_EQ(from.sin_port, b.addr.sin_port);
	EXPECT_EQ(memcmp(buf, out.data(), 30), 0);
	EXPECT_EQ(memcmp(buf + 100, out.data() + 30, 20), 0);
	// The whole datagram fits: no MSG_TRUNC.
	ASSERT_EQ(rsendto(b.fd, out.data(), 40, 0, sa(a.addr), sizeof(a.addr)), 40);
	ASSERT_EQ(rpoll(&p, 1, 5000), 1);
	m.msg_namelen = sizeof(from);
	ASSERT_EQ(rrecvmsg(a.fd, &m, 0), 40);
	EXPECT_FALSE(m.msg_flags & MSG_TRUNC);
	// Nothing left.
	EXPECT_ERRNO(rrecv(a.fd, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
}

TEST(RsocketDgram, GatherSendmsg)
{
	Ds a, b;
	ASSERT_GE(a.fd, 0);
	ASSERT_GE(b.fd, 0);
	char p1[] = "abc", p2[] = "defgh", p3[] = "ij";
	iovec v[3] = {{p1, 3}, {p2, 5}, {p3, 2}};
	msghdr m = {};
	m.msg_name = &a.addr;
	m.msg_namelen = sizeof(a.addr);
	m.msg_iov = v;
	m.msg_iovlen = 3;
	ASSERT_EQ(rsendmsg(b.fd, &m, 0), 10);
	char buf[32] = {};
	ASSERT_EQ(recv_wait(a.fd, buf, sizeof(buf)), 10);
	EXPECT_STREQ(buf, "abcdefghij");
	// rwritev on a connected socket: one datagram.
	ASSERT_EQ(rconnect(b.fd, sa(a.addr), sizeof(a.addr)), 0);
	ASSERT_EQ(rwritev(b.fd, v, 3), 10);
	memset(buf, 0, sizeof(buf));
	pollfd p = {a.fd, POLLIN, 0};
	ASSERT_EQ(rpoll(&p, 1, 5000), 1);
	iovec r[2] = {{buf, 4}, {buf + 4, 28}};
	ASSERT_EQ(rreadv(a.fd, r, 2), 10);
	EXPECT_STREQ(buf, "abcdefghij");
}

TEST(RsocketDgram, NonblockingEagainAndBlockingWake)
{
	Ds a, b;
	ASSERT_GE(a.fd, 0);
	ASSERT_GE(b.fd, 0);
	char buf[64];
	EXPECT_ERRNO(rrecv(a.fd, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
	ASSERT_EQ(rfcntl(a.fd, F_SETFL, O_NONBLOCK), 0);
	EXPECT_EQ(rfcntl(a.fd, F_GETFL), O_NONBLOCK);
	EXPECT_ERRNO(rrecvfrom(a.fd, buf, sizeof(buf), 0, nullptr, nullptr), EAGAIN);
	ASSERT_EQ(rfcntl(a.fd, F_SETFL, 0), 0);
	// A blocking receive sleeps until a datagram comes (from another thread).
	std::thread t([&] {
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
		rsendto(b.fd, "wake", 4, 0, sa(a.addr), sizeof(a.addr));
	});
	auto t0 = std::chrono::steady_clock::now();
	EXPECT_EQ(rrecv(a.fd, buf, sizeof(buf), 0), 4);
	EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
	t.join();
	// Again once the destination has an address handle (UD, not UDP).
	std::thread t2([&] {
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
		rsendto(b.fd, "wake2", 5, 0, sa(a.addr), sizeof(a.addr));
	});
	EXPECT_EQ(rrecv(a.fd, buf, sizeof(buf), 0), 5);
	t2.join();
}

TEST(RsocketDgram, PollAndSelect)
{
	Ds a, b;
	ASSERT_GE(a.fd, 0);
	ASSERT_GE(b.fd, 0);
	pollfd p[2] = {{a.fd, POLLIN | POLLOUT, 0}, {b.fd, POLLIN, 0}};
	// Writable at once, nothing to read.
	ASSERT_EQ(rpoll(p, 2, 0), 1);
	EXPECT_EQ(p[0].revents, POLLOUT);
	EXPECT_EQ(p[1].revents, 0);
	p[0].events = POLLIN;
	EXPECT_EQ(rpoll(p, 2, 50), 0);
	// Readable when a datagram arrives while rpoll sleeps.
	for (int i = 0; i < 3; i++) {
		std::thread t([&] {
			std::this_thread::sleep_for(std::chrono::milliseconds(50));
			rsendto(b.fd, "x", 1, 0, sa(a.addr), sizeof(a.addr));
		});
		ASSERT_EQ(rpoll(p, 2, 5000), 1);
		EXPECT_EQ(p[0].revents, POLLIN);
		t.join();
		char c;
		ASSERT_EQ(rrecv(a.fd, &c, 1, 0), 1);
	}
	// rselect: the same through fd sets.
	std::thread t([&] {
		std::this_thread::sleep_for(std::chrono::milliseconds(50));
		rsendto(a.fd, "y", 1, 0, sa(b.addr), sizeof(b.addr));
	});
	fd_set rd;
	FD_ZERO(&rd);
	FD_SET(a.fd, &rd);
	FD_SET(b.fd, &rd);
	timeval tv = {5, 0};
	ASSERT_EQ(rselect(std::max(a.fd, b.fd) + 1, &rd, nullptr, nullptr, &tv), 1);
	EXPECT_TRUE(FD_ISSET(b.fd, &rd));
	EXPECT_FALSE(FD_ISSET(a.fd, &rd));
	t.join();
	// An rsocket never bound, connected or sent from reports nothing (as
	// rdma-core: it has no queues yet).
	Ds c(false);
	pollfd q = {c.fd, POLLIN | POLLOUT, 0};
	EXPECT_EQ(rpoll(&q, 1, 0), 0);
}

TEST(RsocketDgram, Options)
{
	Ds a(false);
	ASSERT_GE(a.fd, 0);
	int v = 8192; // 16 KiB of buffer: 8 slots of 2048 bytes each way
	ASSERT_EQ(rsetsockopt(a.fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), 0);
	ASSERT_EQ(rsetsockopt(a.fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)), 0);
	v = 1;
	ASSERT_EQ(rsetsockopt(a.fd, SOL_SOCKET, SO_REUSEADDR, &v, sizeof(v)), 0);
	v = 0x10;
	EXPECT_EQ(rsetsockopt(a.fd, IPPROTO_IP, IP_TOS, &v, sizeof(v)), 0); // the UDP socket's
	sockaddr_in any = loopback();
	ASSERT_EQ(rbind(a.fd, sa(any), sizeof(any)), 0);
	socklen_t l = sizeof(a.addr);
	ASSERT_EQ(rgetsockname(a.fd, sa(a.addr), &l), 0);
	l = sizeof(v);
	ASSERT_EQ(rgetsockopt(a.fd, SOL_RDMA, RDMA_RQSIZE, &v, &l), 0);
	EXPECT_EQ(v, 8);
	ASSERT_EQ(rgetsockopt(a.fd, SOL_RDMA, RDMA_SQSIZE, &v, &l), 0);
	EXPECT_EQ(v, 8);
	ASSERT_EQ(rgetsockopt(a.fd, SOL_SOCKET, SO_RCVBUF, &v, &l), 0);
	EXPECT_EQ(v, 8 * 2048);
	ASSERT_EQ(rgetsockopt(a.fd, SOL_SOCKET, SO_REUSEADDR, &v, &l), 0);
	EXPECT_EQ(v, 1);
	ASSERT_EQ(rgetsockopt(a.fd, IPPROTO_IP, IP_TOS, &v, &l), 0);
	EXPECT_EQ(v, 0x10);
	// SOL_RDMA sizes are fixed once the queues exist (rdma-core: EINVAL).
	v = 16;
	EXPECT_ERRNO(rsetsockopt(a.fd, SOL_RDMA, RDMA_SQSIZE, &v, sizeof(v)), EINVAL);
	// TCP options are the kernel's answer for a UDP socket.
	EXPECT_EQ(rsetsockopt(a.fd, IPPROTO_TCP, TCP_NODELAY, &v, sizeof(v)), -1);
	// A receive queue of 8: datagrams past it are dropped, not queued.
	Ds b;
	ASSERT_GE(b.fd, 0);
	for (int i = 0; i < 20; i++)
		ASSERT_EQ(rsendto(b.fd, "z", 1, 0, sa(a.addr), sizeof(a.addr)), 1);
	std::this_thread::sleep_for(std::chrono::milliseconds(50));
	int got = 0;
	char c;
	while (rrecv(a.fd, &c, 1, MSG_DONTWAIT) == 1)
		got++;
	EXPECT_GE(got, 1);
	EXPECT_LE(got, 8);
}

TEST(RsocketDgram, BadInput)
{
	EXPECT_ERRNO(rsocket(AF_INET, SOCK_DGRAM, IPPROTO_TCP), ENOTSUP);
	EXPECT_ERRNO(rsocket(AF_UNIX, SOCK_DGRAM, 0), ENOTSUP);
	Ds a;
	Ds u(false);
	ASSERT_GE(a.fd, 0);
	ASSERT_GE(u.fd, 0);
	char buf[4096] = {};
	// Before bind/connect/send there is nothing to read (rdma-core: EINVAL).
	EXPECT_ERRNO(rrecv(u.fd, buf, 1, MSG_DONTWAIT), EINVAL);
	EXPECT_ERRNO(rsend(u.fd, buf, 1, 0), EDESTADDRREQ);
	EXPECT_ERRNO(rlisten(a.fd, 1), EOPNOTSUPP);
	EXPECT_ERRNO(raccept(a.fd, nullptr, nullptr), EOPNOTSUPP);
	EXPECT_ERRNO(rshutdown(a.fd, 42), EINVAL);
	EXPECT_EQ(rshutdown(a.fd, SHUT_RDWR), 0); // nothing to do (rdma-core)
	EXPECT_ERRNO(riomap(a.fd, buf, sizeof(buf), PROT_WRITE, 0, -1), EINVAL);
	EXPECT_ERRNO(riounmap(a.fd, buf, sizeof(buf)), EINVAL);
	errno = 0;
	EXPECT_EQ(riowrite(a.fd, buf, 1, 0, 0), static_cast<size_t>(-1));
	EXPECT_EQ(errno, EINVAL);
	sockaddr_in dst = loopback(9);
	// Larger than a peer's 2048-byte slot holds behind the UDP header.
	EXPECT_ERRNO(rsendto(a.fd, buf, 2033, 0, sa(dst), sizeof(dst)), EMSGSIZE);
	EXPECT_ERRNO(rsendto(a.fd, buf, 1, 0, sa(dst), sizeof(dst) - 1), EINVAL);
	sockaddr bad = {};
	bad.sa_family = AF_UNIX;
	EXPECT_ERRNO(rsendto(a.fd, buf, 1, 0, &bad, sizeof(bad)), EAFNOSUPPORT);
	EXPECT_ERRNO(rsendto(a.fd, nullptr, 1, 0, sa(dst), sizeof(dst)), EFAULT);
	EXPECT_ERRNO(rrecv(a.fd, nullptr, 1, MSG_DONTWAIT), EFAULT);
	EXPECT_ERRNO(rrecvfrom(a.fd, buf, 1, MSG_DONTWAIT, sa(dst), nullptr), EFAULT);
	EXPECT_ERRNO(rbind(u.fd, nullptr, sizeof(dst)), EFAULT);
	int v = 0;
	EXPECT_ERRNO(rsetsockopt(a.fd, SOL_RDMA, 12345, &v, sizeof(v)), EINVAL); // after bind
	socklen_t l = sizeof(v);
	EXPECT_ERRNO(rgetsockopt(a.fd, SOL_SOCKET, SO_RCVBUF, nullptr, &l), EFAULT);
	// Ancillary data is not carried (ENOTSUP, as rdma-core).
	char ctl[32];
	iovec iv = {buf, 1};
	msghdr m = {};
	m.msg_iov = &iv;
	m.msg_iovlen = 1;
	m.msg_control = ctl;
	m.msg_controllen = sizeof(ctl);
	EXPECT_ERRNO(rsendmsg(a.fd, &m, 0), ENOTSUP);
	EXPECT_ERRNO(rrecvmsg(a.fd, &m, 0), ENOTSUP);
}

// ----------------------------------------------------------------- wire

// What our rsocket sends to a peer it has no address handle for: rdma-core
// 44's ds_udp_header (16 bytes for IPv4) and the payload, on UDP.
struct UdpPeer {
	int fd = -1;
	sockaddr_in addr = {};
	UdpPeer()
	{
		fd = socket(AF_INET, SOCK_DGRAM, 0);
		sockaddr_in a = loopback();
		bind(fd, sa(a), sizeof(a));
		socklen_t l = sizeof(addr);
		getsockname(fd, sa(addr), &l);
	}
	~UdpPeer() { close(fd); }
	ssize_t recv(uint8_t *buf, size_t n, sockaddr_in *from)
	{
		pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, 5000) != 1)
			return -2;
		socklen_t l = sizeof(*from);
		return recvfrom(fd, buf, n, 0, sa(*from), &l);
	}
};

uint32_t be32(const uint8_t *p) { return (uint32_t(p[0]) << 24) | (p[1] << 16) | (p[2] << 8) | p[3]; }

TEST(RsocketDgramWire, FirstMessageGoesOverUdpWithRdmaCoreHeader)
{
	Ds a;
	UdpPeer peer;
	ASSERT_GE(a.fd, 0);
	ASSERT_GE(peer.fd, 0);
	ASSERT_EQ(rsendto(a.fd, "payload", 7, 0, sa(peer.addr), sizeof(peer.addr)), 7);
	uint8_t buf[2048];
	sockaddr_in from = {};
	ASSERT_EQ(peer.recv(buf, sizeof(buf), &from), 16 + 7);
	EXPECT_EQ(from.sin_port, a.addr.sin_port); // from the rsocket's UDP socket
	EXPECT_EQ(be32(buf), 0x55555555u);         // DS_UDP_TAG
	EXPECT_EQ(buf[4], 4);                      // version
	EXPECT_EQ(buf[5], 0);                      // op: RS_OP_DATA
	EXPECT_EQ(buf[6], 16);                     // DS_UDP_IPV4_HDR_LEN
	EXPECT_EQ(buf[7], 0);                      // reserved
	uint32_t qpn = be32(buf + 8);
	EXPECT_NE(qpn, 0u);
	EXPECT_EQ(qpn & 0xFF000000u, 0u);
	EXPECT_EQ(memcmp(buf + 12, "\x7f\x00\x00\x01", 4), 0); // our QP's address
	EXPECT_EQ(memcmp(buf + 16, "payload", 7), 0);
	// Nobody answers: the next message goes over UDP as well.
	ASSERT_EQ(rsendto(a.fd, "again", 5, 0, sa(peer.addr), sizeof(peer.addr)), 5);
	ASSERT_EQ(peer.recv(buf, sizeof(buf), &from), 16 + 5);
	EXPECT_EQ(buf[5], 0);
}

// A peer speaking rdma-core's UDP exchange by hand: its DATA is delivered
// with the peer's UDP address as the source and answered by a CTRL carrying
// our QPN; malformed messages are dropped.
TEST(RsocketDgramWire, UdpDataIsDeliveredAndAnswered)
{
	Ds a;
	UdpPeer peer;
	ASSERT_GE(a.fd, 0);
	uint8_t msg[64] = {0x55, 0x55, 0x55, 0x55, 4, 0, 16, 0, 0, 0x12, 0x34, 0x56, 127, 0, 0, 1};
	memcpy(msg + 16, "hello", 5);
	// Malformed first: a bad tag, a header length that does not match the
	// version, a message shorter than its header, an unknown op.
	uint8_t bad[4][64];
	for (auto &b : bad)
		memcpy(b, msg, sizeof(msg));
	bad[0][0] = 0x54;
	bad[1][6] = 28;
	bad[3][5] = 3;
	sendto(peer.fd, bad[0], 21, 0, sa(a.addr), sizeof(a.addr));
	sendto(peer.fd, bad[1], 21, 0, sa(a.addr), sizeof(a.addr));
	sendto(peer.fd, bad[2], 12, 0, sa(a.addr), sizeof(a.addr));
	sendto(peer.fd, bad[3], 21, 0, sa(a.addr), sizeof(a.addr));
	ASSERT_EQ(sendto(peer.fd, msg, 21, 0, sa(a.addr), sizeof(a.addr)), 21);
	char in[64] = {};
	sockaddr_in from = {};
	ASSERT_EQ(recv_wait(a.fd, in, sizeof(in), &from), 5);
	EXPECT_STREQ(in, "hello");
	EXPECT_EQ(from.sin_port, peer.addr.sin_port);
	EXPECT_EQ(from.sin_addr.s_addr, peer.addr.sin_addr.s_addr);
	char c;
	EXPECT_ERRNO(rrecv(a.fd, &c, 1, MSG_DONTWAIT), EAGAIN); // the bad ones dropped
	// The answer: a header alone, op RS_OP_CTRL, our QPN.
	uint8_t buf[2048];
	sockaddr_in src = {};
	ssize_t n = peer.recv(buf, sizeof(buf), &src);
	ASSERT_EQ(n, 16);
	EXPECT_EQ(be32(buf), 0x55555555u);
	EXPECT_EQ(buf[5], 7);
	EXPECT_EQ(src.sin_port, a.addr.sin_port);
	EXPECT_NE(be32(buf + 8), 0u);
}

// A raw UD QP on soft0 as the peer: after the UDP exchange, our messages
// come over UD as ds_header (8 bytes: version 4, length 8, our port and
// address) and payload with the Q_Key RDMA_UDP_QKEY, and a ds_header the
// peer writes by hand is how our rsocket learns the source.
struct RawUd {
	ibv_context *ctx = nullptr;
	ibv_pd *pd = nullptr;
	ibv_cq *cq = nullptr;
	ibv_qp *qp = nullptr;
	ibv_mr *mr = nullptr;
	uint8_t buf[8 * 2200] = {};
	bool ok = false;
	RawUd()
	{
		int n = 0;
		ibv_device **l = ibv_get_device_list(&n);
		for (int i = 0; l && i < n; i++)
			if (!strcmp(ibv_get_device_name(l[i]), "soft0"))
				ctx = ibv_open_device(l[i]);
		if (l)
			ibv_free_device_list(l);
		if (!ctx)
			return;
		pd = ibv_alloc_pd(ctx);
		cq = ibv_create_cq(ctx, 32, nullptr, nullptr, 0);
		ibv_qp_init_attr ia = {};
		ia.send_cq = ia.recv_cq = cq;
		ia.qp_type = IBV_QPT_UD;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		qp = ibv_create_qp(pd, &ia);
		mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
		if (!qp || !mr)
			return;
		ibv_qp_attr a = {};
		a.qp_state = IBV_QPS_INIT;
		a.port_num = 1;
		a.qkey = RDMA_UDP_QKEY;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
			return;
		a.qp_state = IBV_QPS_RTR;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
			return;
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = 0;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
			return;
		for (int i = 0; i < 4; i++)
			post(i);
		ok = true;
	}
	void post(int i)
	{
		ibv_sge s = {reinterpret_cast<uintptr_t>(buf + i * 2200), 2200, mr->lkey};
		ibv_recv_wr w = {};
		w.wr_id = i;
		w.sg_list = &s;
		w.num_sge = 1;
		ibv_recv_wr *bad;
		ibv_post_recv(qp, &w, &bad);
	}
	// One received message (after the 40-byte GRH) or an empty vector.
	std::vector<uint8_t> recv()
	{
		ibv_wc wc;
		auto t0 = std::chrono::steady_clock::now();
		while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
			if (ibv_poll_cq(cq, 1, &wc) == 1) {
				if (wc.status != IBV_WC_SUCCESS || !(wc.wr_id < 4))
					continue;
				uint8_t *m = buf + wc.wr_id * 2200 + 40;
				std::vector<uint8_t> v(m, m + wc.byte_len - 40);
				post(static_cast<int>(wc.wr_id));
				return v;
			}
			std::this_thread::sleep_for(std::chrono::microseconds(100));
		}
		return {};
	}
	~RawUd()
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
	}
};

TEST(RsocketDgramWire, UdMessagesCarryTheDsHeader)
{
	Ds a;
	UdpPeer peer;
	RawUd ud;
	ASSERT_GE(a.fd, 0);
	ASSERT_TRUE(ud.ok) << "no raw UD QP on soft0";
	// The peer introduces its QPN with a DATA on UDP.
	uint8_t hello[32] = {0x55, 0x55, 0x55, 0x55, 4, 0, 16, 0};
	uint32_t q = htonl(ud.qp->qp_num);
	memcpy(hello + 8, &q, 4);
	memcpy(hello + 12, "\x7f\x00\x00\x01", 4);
	memcpy(hello + 16, "hi", 2);
	ASSERT_EQ(sendto(peer.fd, hello, 18, 0, sa(a.addr), sizeof(a.addr)), 18);
	char in[64];
	ASSERT_EQ(recv_wait(a.fd, in, sizeof(in)), 2);
	uint8_t ctrl[64];
	sockaddr_in src;
	ASSERT_EQ(peer.recv(ctrl, sizeof(ctrl), &src), 16);
	uint32_t our_qpn = be32(ctrl + 8);
	// Our answer now goes over UD to the peer's QP.
	ASSERT_EQ(rsendto(a.fd, "over-ud", 7, 0, sa(peer.addr), sizeof(peer.addr)), 7);
	auto m = ud.recv();
	ASSERT_EQ(m.size(), 8u + 7u);
	EXPECT_EQ(m[0], 4);                                       // version
	EXPECT_EQ(m[1], 8);                                       // DS_IPV4_HDR_LEN
	EXPECT_EQ(memcmp(&m[2], &a.addr.sin_port, 2), 0);         // our port, network order
	EXPECT_EQ(memcmp(&m[4], "\x7f\x00\x00\x01", 4), 0);       // our address
	EXPECT_EQ(memcmp(&m[8], "over-ud", 7), 0);
	// The peer writes to our QPN with its own header: that is the source.
	ibv_port_attr pa = {};
	ASSERT_EQ(ibv_query_port(ud.ctx, 1, &pa), 0);
	ibv_ah_attr aa = {};
	aa.dlid = pa.lid;
	aa.port_num = 1;
	ibv_ah *ah = ibv_create_ah(ud.pd, &aa);
	ASSERT_NE(ah, nullptr);
	uint8_t *out = ud.buf + 6 * 2200;
	uint8_t h[8] = {4, 8, 0x1f, 0x90, 10, 1, 2, 3}; // 10.1.2.3:8080
	memcpy(out, h, 8);
	memcpy(out + 8, "from-raw", 8);
	ibv_sge s = {reinterpret_cast<uintptr_t>(out), 16, ud.mr->lkey};
	ibv_send_wr w = {};
	w.wr_id = 99;
	w.sg_list = &s;
	w.num_sge = 1;
	w.opcode = IBV_WR_SEND;
	w.send_flags = IBV_SEND_SIGNALED;
	w.wr.ud.ah = ah;
	w.wr.ud.remote_qpn = our_qpn;
	w.wr.ud.remote_qkey = RDMA_UDP_QKEY;
	ibv_send_wr *bad;
	ASSERT_EQ(ibv_post_send(ud.qp, &w, &bad), 0);
	sockaddr_in from = {};
	memset(in, 0, sizeof(in));
	ASSERT_EQ(recv_wait(a.fd, in, sizeof(in), &from), 8);
	EXPECT_STREQ(in, "from-raw");
	EXPECT_EQ(from.sin_family, AF_INET);
	EXPECT_EQ(ntohs(from.sin_port), 8080);
	EXPECT_EQ(ntohl(from.sin_addr.s_addr), 0x0a010203u);
	// A header that lies about its length is dropped.
	out[1] = 24;
	ASSERT_EQ(ibv_post_send(ud.qp, &w, &bad), 0);
	std::this_thread::sleep_for(std::chrono::milliseconds(50));
	char c;
	EXPECT_ERRNO(rrecv(a.fd, &c, 1, MSG_DONTWAIT), EAGAIN);
	ibv_wc wc;
	while (ibv_poll_cq(ud.cq, 1, &wc) > 0) {
	}
	ibv_destroy_ah(ah);
}

} // namespace
