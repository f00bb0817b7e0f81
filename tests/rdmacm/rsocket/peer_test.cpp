// rsockets between two processes on soft0 through our librdmacm (the
// software devices' connection manager): the peer closes or dies, and the
// survivor's blocking read, non-blocking read and rpoll() end within a
// bounded time instead of waiting forever. Run under private_shm.sh.
#include <rdma/rsocket.h>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <poll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace {

int g_port = 20000 + (getpid() % 20000);

sockaddr_in loopback(int port)
{
	sockaddr_in sin = {};
	sin.sin_family = AF_INET;
	sin.sin_port = htons(static_cast<uint16_t>(port));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return sin;
}

double now()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

enum class End { close, kill };

// The child connects, sends "hello", then closes or dies.
[[noreturn]] void child(int port, End end)
{
	sockaddr_in sin = loopback(port);
	int fd = -1;
	for (int i = 0; i < 200; i++) {
		fd = rsocket(AF_INET, SOCK_STREAM, 0);
		if (fd >= 0 && !rconnect(fd, reinterpret_cast<sockaddr *>(&sin), sizeof(sin)))
			break;
		if (fd >= 0)
			rclose(fd);
		fd = -1;
		usleep(50000);
	}
	if (fd < 0)
		_exit(2);
	if (rsend(fd, "hello", 5, 0) != 5)
		_exit(3);
	usleep(200000);
	if (end == End::kill)
		raise(SIGKILL);
	rclose(fd);
	_exit(0);
}

// Listens, forks the child, accepts and reads its 5 bytes.
int serve(End end, pid_t *pid)
{
	int port = g_port++;
	int l = rsocket(AF_INET, SOCK_STREAM, 0);
	EXPECT_GE(l, 0) << strerror(errno);
	int one = 1;
	rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sockaddr_in sin = loopback(port);
	EXPECT_EQ(rbind(l, reinterpret_cast<sockaddr *>(&sin), sizeof(sin)), 0) << strerror(errno);
	EXPECT_EQ(rlisten(l, 4), 0);
	*pid = fork();
	if (*pid == 0)
		child(port, end);
	int fd = raccept(l, nullptr, nullptr);
	EXPECT_GE(fd, 0) << strerror(errno);
	rclose(l);
	char buf[8];
	EXPECT_EQ(rrecv(fd, buf, 5, MSG_WAITALL), 5);
	return fd;
}

void reap(pid_t pid, End end)
{
	int st = 0;
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	if (end == End::kill)
		EXPECT_TRUE(WIFSIGNALED(st));
	else
		EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
}

class Peer : public ::testing::TestWithParam<End> {};

TEST_P(Peer, BlockingReadEnds)
{
	pid_t pid;
	int fd = serve(GetParam(), &pid);
	alarm(60);
	double t0 = now();
	char buf[8];
	ssize_t n = rrecv(fd, buf, sizeof(buf), 0);
	EXPECT_TRUE(n == 0 || (n < 0 && errno == ECONNRESET)) << n << " " << strerror(errno);
	EXPECT_LT(now() - t0, 30.0);
	alarm(0);
	EXPECT_EQ(rclose(fd), 0);
	reap(pid, GetParam());
}

TEST_P(Peer, NonBlockingReadEnds)
{
	pid_t pid;
	int fd = serve(GetParam(), &pid);
	double t0 = now();
	char buf[8];
	ssize_t n;
	while ((n = rrecv(fd, buf, sizeof(buf), MSG_DONTWAIT)) < 0 && errno == EAGAIN &&
	       now() - t0 < 30.0)
		;
	EXPECT_TRUE(n == 0 || (n < 0 && errno == ECONNRESET)) << n << " " << strerror(errno);
	EXPECT_EQ(rclose(fd), 0);
	reap(pid, GetParam());
}

TEST_P(Peer, PollReportsTheEnd)
{
	pid_t pid;
	int fd = serve(GetParam(), &pid);
	pollfd p = {fd, POLLIN, 0};
	EXPECT_EQ(rpoll(&p, 1, 30000), 1);
	EXPECT_TRUE(p.revents & (POLLIN | POLLHUP | POLLERR));
	char buf[8];
	EXPECT_LE(rrecv(fd, buf, sizeof(buf), MSG_DONTWAIT), 0);
	EXPECT_EQ(rclose(fd), 0);
	reap(pid, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Rsocket, Peer, ::testing::Values(End::close, End::kill),
			 [](const auto &info) { return info.param == End::close ? "closes" : "dies"; });

} // namespace
