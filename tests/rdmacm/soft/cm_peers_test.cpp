// The software CM through librdmacm's public API, two processes per case
// (fork) on soft0: killed peers (client and server side, connected and
// mid-handshake) give the documented event within a bounded time, no
// listener and rdma_reject give their IB CM reasons, another user can
// neither connect nor list the listeners, and a malformed record is
// dropped and counted; the links that carry the connections (a killed
// process ends all of its connections, a listener gone or replaced, a
// destroyed requester, a fork child). Runs in a private /dev/shm (private_shm.sh).
#include "cm_test.h"
#include <rdma/rdma_cma.h>

#include <arpa/inet.h>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <memory>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

constexpr int kBoundMs = 3000; // every expected event must come within this

struct Got {
	int type = -1;
	int status = 0;
	rdma_cm_id *id = nullptr;
	std::string priv;
};

// The next event within `ms`, acknowledged (type -1 when none came).
Got next(rdma_event_channel *ch, int ms = kBoundMs)
{
	Got g;
	pollfd p{ch->fd, POLLIN, 0};
	if (poll(&p, 1, ms) != 1)
		return g;
	rdma_cm_event *ev;
	if (rdma_get_cm_event(ch, &ev))
		return g;
	g.type = ev->event;
	g.status = ev->status;
	g.id = ev->id;
	if (ev->param.conn.private_data)
		g.priv.assign(static_cast<const char *>(ev->param.conn.private_data),
			      ev->param.conn.private_data_len);
	rdma_ack_cm_event(ev);
	return g;
}

sockaddr_in loopback(uint16_t port)
{
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

uint16_t test_port()
{
	static uint16_t n = 0;
	return uint16_t(20000 + getpid() % 20000 + n++);
}

struct Listener {
	rdma_event_channel *ch = rdma_create_event_channel();
	rdma_cm_id *id = nullptr;
	explicit Listener(uint16_t port)
	{
		auto a = loopback(port);
		EXPECT_NE(ch, nullptr);
		EXPECT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
		EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr *>(&a)), 0);
		EXPECT_EQ(rdma_listen(id, 8), 0);
	}
	~Listener()
	{
		if (id)
			rdma_destroy_id(id);
		if (ch)
			rdma_destroy_event_channel(ch);
	}
};

using cmtest::make_qp;

// An active id with a QP, route resolved.
rdma_cm_id *resolved(rdma_event_channel *ch, uint16_t port)
{
	rdma_cm_id *id = nullptr;
	auto dst = loopback(port);
	EXPECT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
	EXPECT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr *>(&dst), 1000), 0);
	EXPECT_EQ(next(ch).type, RDMA_CM_EVENT_ADDR_RESOLVED);
	EXPECT_EQ(rdma_resolve_route(id, 1000), 0);
	EXPECT_EQ(next(ch).type, RDMA_CM_EVENT_ROUTE_RESOLVED);
	make_qp(id);
	return id;
}

rdma_conn_param param(const char *priv = nullptr)
{
	rdma_conn_param p{};
	p.responder_resources = 1;
	p.initiator_depth = 1;
	p.retry_count = 7;
	p.rnr_retry_count = 7;
	if (priv) {
		p.private_data = priv;
		p.private_data_len = uint8_t(strlen(priv));
	}
	return p;
}

// Runs `child` in a forked process; its failures become exit code 1.
template <typename F>
pid_t spawn(F child)
{
	pid_t pid = fork();
	if (pid == 0) {
		child();
		_exit(::testing::Test::HasFailure() ? 1 : 0);
	}
	return pid;
}

int reap(pid_t pid)
{
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void signal_parent(int fd)
{
	char x = 1;
	ASSERT_EQ(write(fd, &x, 1), 1);
}

void wait_child(int fd)
{
	char x;
	pollfd p{fd, POLLIN, 0};
	ASSERT_EQ(poll(&p, 1, 10000), 1);
	ASSERT_EQ(read(fd, &x, 1), 1);
}

} // namespace

// A client process killed while connected: the server sees DISCONNECTED.
TEST(SoftCmPeers, ClientKilledWhileConnected)
{
	uint16_t port = test_port();
	Listener l(port);
	int sync[2];
	ASSERT_EQ(pipe(sync), 0);
	pid_t client = spawn([&] {
		rdma_event_channel *ch = rdma_create_event_channel();
		rdma_cm_id *id = resolved(ch, port);
		auto p = param();
		ASSERT_EQ(rdma_connect(id, &p), 0);
		ASSERT_EQ(next(ch).type, RDMA_CM_EVENT_ESTABLISHED);
		signal_parent(sync[1]);
		pause();
	});
	auto req = next(l.ch);
	ASSERT_EQ(req.type, RDMA_CM_EVENT_CONNECT_REQUEST);
	make_qp(req.id);
	auto p = param();
	ASSERT_EQ(rdma_accept(req.id, &p), 0);
	EXPECT_EQ(next(l.ch).type, RDMA_CM_EVENT_ESTABLISHED);
	wait_child(sync[0]);
	kill(client, SIGKILL);
	reap(client);
	EXPECT_EQ(next(l.ch).type, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_qp(req.id);
	rdma_destroy_id(req.id);
}

// A client killed after its request reached the server: accepting it
// succeeds, then REJECTED with IB CM reason 4 (timeout) follows.
TEST(SoftCmPeers, ClientKilledMidHandshake)
{
	uint16_t port = test_port();
	Listener l(port);
	pid_t client = spawn([&] {
		rdma_event_channel *ch = rdma_create_event_channel();
		rdma_cm_id *id = resolved(ch, port);
		auto p = param();
		ASSERT_EQ(rdma_connect(id, &p), 0);
		pause();
	});
	auto req = next(l.ch);
	ASSERT_EQ(req.type, RDMA_CM_EVENT_CONNECT_REQUEST);
	kill(client, SIGKILL);
	reap(client);
	make_qp(req.id);
	auto p = param();
	ASSERT_EQ(rdma_accept(req.id, &p), 0);
	auto g = next(l.ch);
	EXPECT_EQ(g.type, RDMA_CM_EVENT_REJECTED);
	EXPECT_EQ(g.status, 4);
	rdma_destroy_qp(req.id);
	rdma_destroy_id(req.id);
}

// The server process is killed after it accepted (connected) or right after
// it received the request (mid-handshake); the client sees `want` (status).
void server_killed(bool accepted, int want, int want_status)
{
	uint16_t port = test_port();
	int sync[2];
	ASSERT_EQ(pipe(sync), 0);
	pid_t server = spawn([&] {
		Listener l(port);
		signal_parent(sync[1]);
		auto req = next(l.ch, 10000);
		ASSERT_EQ(req.type, RDMA_CM_EVENT_CONNECT_REQUEST);
		if (accepted) {
			make_qp(req.id);
			auto p = param();
			ASSERT_EQ(rdma_accept(req.id, &p), 0);
		}
		signal_parent(sync[1]);
		pause();
	});
	wait_child(sync[0]);
	rdma_event_channel *ch = rdma_create_event_channel();
	rdma_cm_id *id = resolved(ch, port);
	auto p = param();
	ASSERT_EQ(rdma_connect(id, &p), 0);
	wait_child(sync[0]);
	if (accepted) {
		ASSERT_EQ(next(ch).type, RDMA_CM_EVENT_ESTABLISHED);
	}
	kill(server, SIGKILL);
	reap(server);
	auto g = next(ch);
	EXPECT_EQ(g.type, want);
	EXPECT_EQ(g.status, want_status);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

// A server process killed while connected: the client sees DISCONNECTED.
TEST(SoftCmPeers, ServerKilledWhileConnected)
{
	server_killed(true, RDMA_CM_EVENT_DISCONNECTED, 0);
}

// A server killed while the client waits for its reply: REJECTED (4).
TEST(SoftCmPeers, ServerKilledMidHandshake)
{
	server_killed(false, RDMA_CM_EVENT_REJECTED, 4);
}

// Nobody listens: REJECTED with IB CM reason 8 (invalid service ID).
TEST(SoftCmPeers, NoListener)
{
	rdma_event_channel *ch = rdma_create_event_channel();
	rdma_cm_id *id = resolved(ch, test_port());
	auto p = param();
	ASSERT_EQ(rdma_connect(id, &p), 0);
	auto g = next(ch);
	EXPECT_EQ(g.type, RDMA_CM_EVENT_REJECTED);
	EXPECT_EQ(g.status, 8);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

// rdma_reject: REJECTED with reason 28 (consumer defined) and the data.
TEST(SoftCmPeers, RejectCarriesPrivateData)
{
	uint16_t port = test_port();
	Listener l(port);
	pid_t client = spawn([&] {
		rdma_event_channel *ch = rdma_create_event_channel();
		rdma_cm_id *id = resolved(ch, port);
		auto p = param("let me in");
		ASSERT_EQ(rdma_connect(id, &p), 0);
		auto g = next(ch);
		EXPECT_EQ(g.type, RDMA_CM_EVENT_REJECTED);
		EXPECT_EQ(g.status, 28);
		EXPECT_EQ(g.priv.substr(0, 7), "go away");
	});
	auto req = next(l.ch);
	ASSERT_EQ(req.type, RDMA_CM_EVENT_CONNECT_REQUEST);
	EXPECT_EQ(req.priv.substr(0, 9), "let me in");
	ASSERT_EQ(rdma_reject(req.id, "go away", 7), 0);
	EXPECT_EQ(reap(client), 0);
	rdma_destroy_id(req.id);
}

// Another user's process can neither connect nor see the listeners.
TEST(SoftCmPeers, OtherUserCannotConnectOrObserve)
{
	if (geteuid() != 0)
		GTEST_SKIP() << "needs root to become another user";
	uint16_t port = test_port();
	Listener l(port);
	pid_t other = spawn([&] {
		ASSERT_EQ(setgid(65534), 0);
		ASSERT_EQ(setuid(65534), 0);
		char dir[64];
		snprintf(dir, sizeof(dir), "/dev/shm/openverbs-0/cm");
		EXPECT_EQ(opendir(dir), nullptr);
		std::string path = std::string(dir) + "/tcp-" + std::to_string(port) + "-7f000001";
		int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		sockaddr_un un{};
		un.sun_family = AF_UNIX;
		strcpy(un.sun_path, path.c_str());
		EXPECT_NE(connect(fd, reinterpret_cast<sockaddr *>(&un), sizeof(un)), 0);
		EXPECT_EQ(errno, EACCES);
	});
	EXPECT_EQ(reap(other), 0);
	EXPECT_EQ(next(l.ch, 300).type, -1);
}

// A same-user peer sending garbage: the record is dropped (no event) and
// the connection closed.
TEST(SoftCmPeers, MalformedRecordIsDropped)
{
	uint16_t port = test_port();
	Listener l(port);
	pid_t peer = spawn([&] {
		std::string path = "/dev/shm/openverbs-" + std::to_string(geteuid()) + "/cm/tcp-" +
				   std::to_string(port) + "-7f000001";
		int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		sockaddr_un un{};
		un.sun_family = AF_UNIX;
		strcpy(un.sun_path, path.c_str());
		ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr *>(&un), sizeof(un)), 0);
		const char junk[] = "OVCM\x01\x00\x01\x00 not a request";
		ASSERT_GT(send(fd, junk, sizeof(junk), 0), 0);
		char b;
		EXPECT_EQ(recv(fd, &b, 1, 0), 0); // closed by the listener
	});
	// The listener works on the record when the application asks for events.
	rdma_cm_event *ev = nullptr;
	int fl = fcntl(l.ch->fd, F_GETFL);
	fcntl(l.ch->fd, F_SETFL, fl | O_NONBLOCK);
	int st = -1;
	for (int i = 0; i < 250 && waitpid(peer, &st, WNOHANG) == 0; i++) {
		EXPECT_NE(rdma_get_cm_event(l.ch, &ev), 0);
		EXPECT_EQ(errno, EAGAIN);
		usleep(20000);
	}
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

// ---- Links: one UNIX connection per pair of processes and listener socket
// carries every rdma_cm connection between them (src/DESIGN.md, "Transport").

namespace {

// An accepted connection: CONNECT_REQUEST, a QP, rdma_accept, ESTABLISHED.
rdma_cm_id *accept_one(rdma_event_channel *ch, int ms = kBoundMs)
{
	auto req = next(ch, ms);
	EXPECT_EQ(req.type, RDMA_CM_EVENT_CONNECT_REQUEST);
	if (req.type != RDMA_CM_EVENT_CONNECT_REQUEST)
		return nullptr;
	make_qp(req.id);
	auto p = param();
	EXPECT_EQ(rdma_accept(req.id, &p), 0);
	EXPECT_EQ(next(ch).type, RDMA_CM_EVENT_ESTABLISHED);
	return req.id;
}

rdma_cm_id *connected(rdma_event_channel *ch, uint16_t port)
{
	rdma_cm_id *id = resolved(ch, port);
	auto p = param();
	EXPECT_EQ(rdma_connect(id, &p), 0);
	EXPECT_EQ(next(ch).type, RDMA_CM_EVENT_ESTABLISHED);
	return id;
}

void drop(rdma_cm_id *id)
{
	if (!id)
		return;
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
}

} // namespace

// Two connections of one client process at once (two links: a link carries
// one connection at a time): killing the process disconnects both.
TEST(SoftCmLinks, KilledClientDisconnectsEveryConnection)
{
	uint16_t port = test_port();
	Listener l(port);
	int sync[2];
	ASSERT_EQ(pipe(sync), 0);
	pid_t client = spawn([&] {
		rdma_event_channel *ch = rdma_create_event_channel();
		connected(ch, port);
		connected(ch, port);
		signal_parent(sync[1]);
		pause();
	});
	rdma_cm_id *a = accept_one(l.ch);
	rdma_cm_id *b = accept_one(l.ch);
	wait_child(sync[0]);
	kill(client, SIGKILL);
	reap(client);
	auto g1 = next(l.ch), g2 = next(l.ch);
	EXPECT_EQ(g1.type, RDMA_CM_EVENT_DISCONNECTED);
	EXPECT_EQ(g2.type, RDMA_CM_EVENT_DISCONNECTED);
	EXPECT_TRUE((g1.id == a && g2.id == b) || (g1.id == b && g2.id == a));
	drop(a);
	drop(b);
}

// The listener goes while a connection runs on the client's link: that
// connection goes on (its disconnect still arrives), a new connect is
// refused as nobody listens (REJECTED 8), and a new listener on the same
// port (another socket) is reached through a new link.
TEST(SoftCmLinks, ListenerGoneAndReplaced)
{
	uint16_t port = test_port();
	auto l = std::make_unique<Listener>(port);
	int to_parent[2], to_child[2];
	ASSERT_EQ(pipe(to_parent), 0);
	ASSERT_EQ(pipe(to_child), 0);
	pid_t client = spawn([&] {
		rdma_event_channel *ch = rdma_create_event_channel();
		rdma_cm_id *first = connected(ch, port);
		signal_parent(to_parent[1]);
		wait_child(to_child[0]); // the listener is gone
		rdma_cm_id *id = resolved(ch, port);
		auto p = param();
		ASSERT_EQ(rdma_connect(id, &p), 0);
		auto g = next(ch);
		EXPECT_EQ(g.type, RDMA_CM_EVENT_REJECTED);
		EXPECT_EQ(g.status, 8);
		drop(id);
		ASSERT_EQ(rdma_disconnect(first), 0);
		EXPECT_EQ(next(ch).type, RDMA_CM_EVENT_DISCONNECTED);
		drop(first);
		signal_parent(to_parent[1]);
		wait_child(to_child[0]); // a new listener
		drop(connected(ch, port));
	});
	rdma_cm_id *a = accept_one(l->ch);
	wait_child(to_parent[0]);
	rdma_destroy_id(l->id);
	l->id = nullptr;
	signal_parent(to_child[1]);
	wait_child(to_parent[0]);
	EXPECT_EQ(next(l->ch).type, RDMA_CM_EVENT_DISCONNECTED);
	drop(a);
	rdma_destroy_event_channel(l->ch);
	l->ch = nullptr;
	Listener again(port);
	signal_parent(to_child[1]);
	drop(accept_one(again.ch));
	EXPECT_EQ(reap(client), 0);
}

// Eight connections at once to one listener (eight links), all ended, then
// eight again: the second round reuses the idle links (the client's open
// descriptors do not grow), and so does a third after the second ended.
TEST(SoftCmLinks, IdleLinksAreReused)
{
	constexpr int kConns = 8;
	uint16_t port = test_port();
	Listener l(port);
	int to_parent[2], to_child[2];
	ASSERT_EQ(pipe(to_parent), 0);
	ASSERT_EQ(pipe(to_child), 0);
	pid_t client = spawn([&] {
		auto fds = [] {
			int n = 0;
			DIR *d = opendir("/proc/self/fd");
			while (dirent *e = readdir(d))
				n += e->d_name[0] != '.';
			closedir(d);
			return n;
		};
		rdma_event_channel *ch = rdma_create_event_channel();
		int after[3] = {};
		for (int round = 0; round < 3; round++) {
			std::vector<rdma_cm_id *> ids;
			for (int i = 0; i < kConns; i++) {
				rdma_cm_id *id = resolved(ch, port);
				auto p = param();
				ASSERT_EQ(rdma_connect(id, &p), 0);
				ids.push_back(id);
			}
			for (int i = 0; i < kConns; i++)
				EXPECT_EQ(next(ch).type, RDMA_CM_EVENT_ESTABLISHED);
			signal_parent(to_parent[1]);
			wait_child(to_child[0]); // the server accepted them all
			for (rdma_cm_id *id : ids)
				ASSERT_EQ(rdma_disconnect(id), 0);
			for (int i = 0; i < kConns; i++)
				EXPECT_EQ(next(ch).type, RDMA_CM_EVENT_DISCONNECTED);
			for (rdma_cm_id *id : ids)
				drop(id);
			after[round] = fds();
		}
		EXPECT_EQ(after[1], after[0]);
		EXPECT_EQ(after[2], after[0]);
	});
	for (int round = 0; round < 3; round++) {
		// Requests and establishments interleave: each request is
		// accepted as it comes.
		std::vector<rdma_cm_id *> ids;
		int established = 0;
		while (established < kConns) {
			auto g = next(l.ch);
			if (g.type == RDMA_CM_EVENT_CONNECT_REQUEST) {
				make_qp(g.id);
				auto p = param();
				EXPECT_EQ(rdma_accept(g.id, &p), 0);
				ids.push_back(g.id);
			} else {
				ASSERT_EQ(g.type, RDMA_CM_EVENT_ESTABLISHED);
				established++;
			}
		}
		wait_child(to_parent[0]);
		signal_parent(to_child[1]);
		for (int i = 0; i < kConns; i++)
			EXPECT_EQ(next(l.ch).type, RDMA_CM_EVENT_DISCONNECTED);
		for (rdma_cm_id *id : ids)
			drop(id);
	}
	EXPECT_EQ(reap(client), 0);
}

// A requester destroyed before the listener accepted: accepting succeeds,
// then REJECTED with reason 4 (its REJ on the link), as for a dead one.
TEST(SoftCmLinks, DestroyedRequesterIsRejectedAfterAccept)
{
	uint16_t port = test_port();
	Listener l(port);
	int sync[2];
	ASSERT_EQ(pipe(sync), 0);
	pid_t client = spawn([&] {
		rdma_event_channel *ch = rdma_create_event_channel();
		rdma_cm_id *id = resolved(ch, port);
		auto p = param();
		ASSERT_EQ(rdma_connect(id, &p), 0);
		drop(id);
		signal_parent(sync[1]);
		pause(); // the link stays
	});
	wait_child(sync[0]);
	auto req = next(l.ch);
	ASSERT_EQ(req.type, RDMA_CM_EVENT_CONNECT_REQUEST);
	make_qp(req.id);
	auto p = param();
	ASSERT_EQ(rdma_accept(req.id, &p), 0);
	auto g = next(l.ch);
	EXPECT_EQ(g.type, RDMA_CM_EVENT_REJECTED);
	EXPECT_EQ(g.status, 4);
	drop(req.id);
	kill(client, SIGKILL);
	reap(client);
}

// A fork child of a process with an idle link to the listener makes its own:
// its connection works, and after its exit the parent's link still serves
// the parent.
TEST(SoftCmLinks, ForkChildUsesItsOwnLink)
{
	uint16_t port = test_port();
	int sync[2];
	ASSERT_EQ(pipe(sync), 0);
	pid_t server = spawn([&] {
		Listener l(port);
		signal_parent(sync[1]);
		// The parent's connection, the child's, the parent's again (on
		// two links: a request may come before the last disconnect).
		std::vector<rdma_cm_id *> ids;
		int established = 0, gone = 0;
		while (gone < 3) {
			auto g = next(l.ch, 10000);
			if (g.type == RDMA_CM_EVENT_CONNECT_REQUEST) {
				make_qp(g.id);
				auto p = param();
				EXPECT_EQ(rdma_accept(g.id, &p), 0);
				ids.push_back(g.id);
			} else if (g.type == RDMA_CM_EVENT_ESTABLISHED) {
				established++;
			} else if (g.type == RDMA_CM_EVENT_DISCONNECTED) {
				gone++;
			} else {
				ADD_FAILURE() << "event " << g.type;
				break;
			}
		}
		EXPECT_EQ(ids.size(), 3u);
		EXPECT_EQ(established, 3);
		for (rdma_cm_id *id : ids)
			drop(id);
	});
	wait_child(sync[0]);
	rdma_event_channel *ch = rdma_create_event_channel();
	rdma_cm_id *first = connected(ch, port);
	ASSERT_EQ(rdma_disconnect(first), 0);
	EXPECT_EQ(next(ch).type, RDMA_CM_EVENT_DISCONNECTED);
	drop(first); // the link stays, idle
	pid_t child = spawn([&] {
		rdma_event_channel *ch2 = rdma_create_event_channel();
		rdma_cm_id *id = connected(ch2, port);
		ASSERT_EQ(rdma_disconnect(id), 0);
		EXPECT_EQ(next(ch2).type, RDMA_CM_EVENT_DISCONNECTED);
		drop(id);
	});
	EXPECT_EQ(reap(child), 0);
	rdma_cm_id *mine = connected(ch, port);
	ASSERT_EQ(rdma_disconnect(mine), 0);
	EXPECT_EQ(next(ch).type, RDMA_CM_EVENT_DISCONNECTED);
	drop(mine);
	rdma_destroy_event_channel(ch);
	EXPECT_EQ(reap(server), 0);
}
