// rsockets between two processes on soft0 through our librdmacm (the
// software devices' connection manager): the peer closes or dies, and the
// survivor's blocking read, non-blocking read and rpoll() end within a
// bounded time instead of waiting forever; a listener is readable only
// while a connection waits to be accepted. Run under private_shm.sh.
#include <rdma/rsocket.h>

#include <fcntl.h>
#include <initializer_list>

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

// A client connects, reads until the server's end of the stream, closes
// and exits. Before connecting it waits for a byte on `before`, before
// closing for one on `after` (-1: no wait; EOF: the test ended, exit);
// `writers` are the pipes' write ends, closed first so that EOF comes.
[[noreturn]] void short_client(int port, int before, int after, std::initializer_list<int> writers)
{
	for (int w : writers)
		close(w);
	char c;
	if (before >= 0 && read(before, &c, 1) != 1)
		_exit(4);
	sockaddr_in sin = loopback(port);
	int fd = rsocket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || rconnect(fd, reinterpret_cast<sockaddr *>(&sin), sizeof(sin)))
		_exit(2);
	char buf[8];
	if (rrecv(fd, buf, sizeof(buf), 0) != 0)
		_exit(3);
	if (after >= 0 && read(after, &c, 1) != 1)
		_exit(4);
	rclose(fd);
	_exit(0);
}

// iperf3 -s -1 under librspreload hung in raccept after a complete run:
// select() said its listener was readable although no connection waited.
// The software CM hands a connection's link back to the listener when the
// connection ends; the client's disconnect record for the finished
// connection and its exit (EOF on the link) then made the listener's
// channel readable with no event, and the blocking raccept that followed
// waited for a connection that never came. A listener must be readable
// only while a connection request waits, and one that does come must
// still be reported and accepted.
TEST(Listener, ReadableOnlyWhileARequestWaits)
{
	int port = g_port++;
	int l = rsocket(AF_INET, SOCK_STREAM, 0);
	ASSERT_GE(l, 0) << strerror(errno);
	sockaddr_in sin = loopback(port);
	ASSERT_EQ(rbind(l, reinterpret_cast<sockaddr *>(&sin), sizeof(sin)), 0) << strerror(errno);
	ASSERT_EQ(rlisten(l, 4), 0) << strerror(errno);
	int closed[2], hold[2];
	ASSERT_EQ(pipe(closed), 0);
	ASSERT_EQ(pipe(hold), 0);
	pid_t first = fork();
	if (first == 0)
		short_client(port, -1, closed[0], {closed[1], hold[1]});
	pid_t second = fork();
	if (second == 0)
		short_client(port, hold[0], -1, {closed[1], hold[1]});
	close(closed[0]);
	close(hold[0]);
	alarm(60);

	// The first client connects; we end the connection (its link goes
	// back to the listener), then it closes its end and exits: nothing
	// waits on the listener afterwards.
	int fd = raccept(l, nullptr, nullptr);
	ASSERT_GE(fd, 0) << strerror(errno);
	EXPECT_EQ(rclose(fd), 0);
	ASSERT_EQ(write(closed[1], "c", 1), 1);
	reap(first, End::close);
	pollfd p = {l, POLLIN, 0};
	ASSERT_EQ(rpoll(&p, 1, 200), 0) << "revents " << p.revents;
	fd_set rd;
	FD_ZERO(&rd);
	FD_SET(l, &rd);
	timeval tv = {0, 200000};
	ASSERT_EQ(rselect(l + 1, &rd, nullptr, nullptr, &tv), 0);
	ASSERT_EQ(rfcntl(l, F_SETFL, O_NONBLOCK), 0);
	EXPECT_EQ(raccept(l, nullptr, nullptr), -1);
	EXPECT_EQ(errno, EAGAIN);

	// The second client's request is reported and accepted.
	ASSERT_EQ(write(hold[1], "g", 1), 1);
	p.revents = 0;
	EXPECT_EQ(rpoll(&p, 1, 30000), 1);
	EXPECT_TRUE(p.revents & POLLIN) << p.revents;
	fd = raccept(l, nullptr, nullptr);
	ASSERT_GE(fd, 0) << strerror(errno);
	EXPECT_EQ(rclose(fd), 0);
	reap(second, End::close);
	close(closed[1]);
	close(hold[1]);
	alarm(0);
	EXPECT_EQ(rclose(l), 0);
}

INSTANTIATE_TEST_SUITE_P(Rsocket, Peer, ::testing::Values(End::close, End::kill),
			 [](const auto &info) { return info.param == End::close ? "closes" : "dies"; });

} // namespace
