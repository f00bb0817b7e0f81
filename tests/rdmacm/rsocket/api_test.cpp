// Bad input through the exported rsocket entry points of our
// librdmacm.so.1: the errno a socket call would give (EBADF, EFAULT,
// EINVAL, ENOTCONN, EISCONN, ENOTSUP), never a crash. Cases that need an
// rsocket run when one can be made (a CM is reachable: the kernel's or the
// software devices').
#include <rdma/rsocket.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <fcntl.h>
#include <poll.h>
#include <sys/select.h>
#include <unistd.h>

namespace {

#define EXPECT_ERRNO(call, err)                                                                    \
	do {                                                                                       \
		errno = 0;                                                                         \
		EXPECT_EQ((call), -1);                                                             \
		EXPECT_EQ(errno, (err));                                                           \
	} while (0)

TEST(RsocketApi, UnknownNumbersAreEbadf)
{
	char buf[8];
	sockaddr_in sin = {};
	socklen_t len = sizeof(sin);
	int v = 0;
	for (int fd : {-1, 0, 123456}) {
		EXPECT_ERRNO(rbind(fd, reinterpret_cast<sockaddr *>(&sin), len), EBADF);
		EXPECT_ERRNO(rlisten(fd, 1), EBADF);
		EXPECT_ERRNO(raccept(fd, nullptr, nullptr), EBADF);
		EXPECT_ERRNO(rconnect(fd, reinterpret_cast<sockaddr *>(&sin), len), EBADF);
		EXPECT_ERRNO(rshutdown(fd, SHUT_RDWR), EBADF);
		EXPECT_ERRNO(rclose(fd), EBADF);
		EXPECT_ERRNO(rrecv(fd, buf, sizeof(buf), 0), EBADF);
		EXPECT_ERRNO(rsend(fd, buf, sizeof(buf), 0), EBADF);
		EXPECT_ERRNO(rread(fd, buf, sizeof(buf)), EBADF);
		EXPECT_ERRNO(rwrite(fd, buf, sizeof(buf)), EBADF);
		EXPECT_ERRNO(rsendto(fd, buf, 1, 0, nullptr, 0), EBADF);
		EXPECT_ERRNO(rrecvfrom(fd, buf, 1, 0, nullptr, nullptr), EBADF);
		EXPECT_ERRNO(rgetpeername(fd, reinterpret_cast<sockaddr *>(&sin), &len), EBADF);
		EXPECT_ERRNO(rgetsockname(fd, reinterpret_cast<sockaddr *>(&sin), &len), EBADF);
		EXPECT_ERRNO(rsetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), EBADF);
		EXPECT_ERRNO(rgetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &len), EBADF);
		EXPECT_ERRNO(rfcntl(fd, F_GETFL), EBADF);
		EXPECT_ERRNO(riomap(fd, buf, sizeof(buf), PROT_WRITE, 0, -1), EBADF);
		EXPECT_ERRNO(riounmap(fd, buf, sizeof(buf)), EBADF);
		errno = 0;
		EXPECT_EQ(riowrite(fd, buf, 1, 0, 0), static_cast<size_t>(-1));
		EXPECT_EQ(errno, EBADF);
	}
	EXPECT_ERRNO(rrecvmsg(-1, nullptr, 0), EFAULT);
	EXPECT_ERRNO(rsendmsg(-1, nullptr, 0), EFAULT);
}

TEST(RsocketApi, UnsupportedSockets)
{
	EXPECT_ERRNO(rsocket(AF_UNIX, SOCK_STREAM, 0), ENOTSUP);
	EXPECT_ERRNO(rsocket(AF_INET, SOCK_RAW, 0), ENOTSUP);
	EXPECT_ERRNO(rsocket(AF_INET, SOCK_STREAM, IPPROTO_UDP), ENOTSUP);
}

TEST(RsocketApi, PollAndSelectArguments)
{
	EXPECT_ERRNO(rpoll(nullptr, 1, 0), EFAULT);
	EXPECT_EQ(rpoll(nullptr, 0, 0), 0);
	EXPECT_ERRNO(rselect(-1, nullptr, nullptr, nullptr, nullptr), EINVAL);
	timeval bad = {0, 2000000};
	EXPECT_ERRNO(rselect(1, nullptr, nullptr, nullptr, &bad), EINVAL);

	// Ordinary fds pass through, fd 0 included.
	int p[2];
	ASSERT_EQ(pipe(p), 0);
	pollfd f = {p[0], POLLIN, 0};
	EXPECT_EQ(rpoll(&f, 1, 0), 0);
	ASSERT_EQ(write(p[1], "x", 1), 1);
	EXPECT_EQ(rpoll(&f, 1, 1000), 1);
	EXPECT_TRUE(f.revents & POLLIN);
	fd_set r;
	FD_ZERO(&r);
	FD_SET(p[0], &r);
	timeval tv = {1, 0};
	EXPECT_EQ(rselect(p[0] + 1, &r, nullptr, nullptr, &tv), 1);
	EXPECT_TRUE(FD_ISSET(p[0], &r));
	// Timeout with nothing ready.
	char c;
	ASSERT_EQ(read(p[0], &c, 1), 1);
	EXPECT_EQ(rpoll(&f, 1, 50), 0);
	close(p[0]);
	close(p[1]);
}

TEST(RsocketApi, UnconnectedSocket)
{
	int fd = rsocket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		GTEST_SKIP() << "no connection manager here: " << strerror(errno);
	char buf[8];
	sockaddr_in sin = {};
	socklen_t len = sizeof(sin);
	EXPECT_ERRNO(rsend(fd, buf, 1, 0), ENOTCONN);
	EXPECT_ERRNO(rrecv(fd, buf, 1, 0), ENOTCONN);
	EXPECT_ERRNO(rshutdown(fd, SHUT_RDWR), ENOTCONN);
	EXPECT_ERRNO(rshutdown(fd, 99), EINVAL);
	EXPECT_ERRNO(rgetpeername(fd, reinterpret_cast<sockaddr *>(&sin), &len), ENOTCONN);
	EXPECT_ERRNO(rgetsockname(fd, nullptr, &len), EFAULT);
	EXPECT_ERRNO(rbind(fd, nullptr, sizeof(sin)), EFAULT);
	EXPECT_ERRNO(rbind(fd, reinterpret_cast<sockaddr *>(&sin), 3), EINVAL);
	EXPECT_ERRNO(rconnect(fd, nullptr, sizeof(sin)), EFAULT);
	EXPECT_ERRNO(raccept(fd, nullptr, nullptr), EINVAL);
	EXPECT_ERRNO(rsendto(fd, buf, 1, 0, reinterpret_cast<sockaddr *>(&sin), sizeof(sin)), EISCONN);
	EXPECT_ERRNO(rsetsockopt(fd, SOL_SOCKET, SO_RCVBUF, nullptr, 4), EFAULT);
	int v = 1 << 16;
	EXPECT_ERRNO(rsetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, 2), EINVAL);
	EXPECT_EQ(rsetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), 0);
	len = sizeof(v);
	EXPECT_EQ(rgetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &len), 0);
	EXPECT_EQ(v, 1 << 17);
	EXPECT_ERRNO(rgetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, nullptr), EFAULT);
	EXPECT_ERRNO(rgetsockopt(fd, SOL_SOCKET, SO_PEERCRED, &v, &len), ENOTSUP);
	v = 64;
	EXPECT_EQ(rsetsockopt(fd, SOL_RDMA, RDMA_SQSIZE, &v, sizeof(v)), 0);
	len = sizeof(v);
	EXPECT_EQ(rgetsockopt(fd, SOL_RDMA, RDMA_SQSIZE, &v, &len), 0);
	EXPECT_EQ(v, 64);
	EXPECT_EQ(rfcntl(fd, F_GETFL), 0);
	EXPECT_EQ(rfcntl(fd, F_SETFL, O_NONBLOCK), 0);
	EXPECT_EQ(rfcntl(fd, F_GETFL), O_NONBLOCK);
	EXPECT_ERRNO(rfcntl(fd, F_DUPFD, 0), ENOTSUP);
	EXPECT_ERRNO(riomap(fd, buf, sizeof(buf), PROT_WRITE, 0, -1), EINVAL);
	EXPECT_ERRNO(rrecvmsg(fd, nullptr, 0), EFAULT);
	pollfd f = {fd, POLLIN | POLLOUT, 0};
	EXPECT_EQ(rpoll(&f, 1, 0), 0);
	EXPECT_EQ(rclose(fd), 0);
	EXPECT_ERRNO(rclose(fd), EBADF);
}

} // namespace
