// The software devices' connection manager driven directly (engine.h), two
// processes per test (fork), real soft devices: connect, accept, data over the
// connected QPs, reject with private data, no listener, killed peers, UD
// exchange, malformed records, and a 1000-cycle fd count. Runs in a private
// /dev/shm (see CMakeLists.txt).
#include "rdmacm/usercm/engine.h"
#include "rdmacm/usercm/wire.h"

#include <arpa/inet.h>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

namespace cm = ov::usercm;

namespace {

ibv_context *g_ctx;

ibv_context *device_context(int index)
{
	if (index != 0)
		return nullptr;
	if (!g_ctx) {
		int n = 0;
		ibv_device **list = ibv_get_device_list(&n);
		for (int i = 0; list && i < n; i++)
			if (!strcmp(ibv_get_device_name(list[i]), "soft0"))
				g_ctx = ibv_open_device(list[i]);
		ibv_free_device_list(list);
	}
	return g_ctx;
}

rdma_cm_id *new_id(rdma_event_channel *ch, rdma_port_space ps)
{
	auto *id = static_cast<rdma_cm_id *>(calloc(1, sizeof(rdma_cm_id)));
	id->channel = ch;
	id->ps = ps;
	id->qp_type = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
	return id;
}

rdma_cm_id *new_conn_id(rdma_cm_id *listen) { return new_id(listen->channel, listen->ps); }

void drop_id(rdma_cm_id *id)
{
	free(id->route.path_rec);
	free(id);
}

// One process's side: a channel and its ids.
struct Side {
	cm::Channel *ch = nullptr;
	rdma_event_channel pub{};
	std::vector<rdma_cm_id *> ids;
	ibv_pd *pd = nullptr;
	ibv_cq *cq = nullptr;

	Side()
	{
		cm::Host h;
		h.new_conn_id = new_conn_id;
		h.drop_conn_id = drop_id;
		h.device_context = device_context;
		cm::set_host(h);
		EXPECT_EQ(cm::channel_open(-1, &ch), 0);
		pub.fd = cm::channel_fd(ch);
	}
	~Side()
	{
		for (auto *id : ids)
			destroy(id);
		if (cq)
			ibv_destroy_cq(cq);
		if (pd)
			ibv_dealloc_pd(pd);
		EXPECT_EQ(cm::channel_close(ch), 0);
	}
	rdma_cm_id *id(rdma_port_space ps = RDMA_PS_TCP)
	{
		rdma_cm_id *i = new_id(&pub, ps);
		EXPECT_EQ(cm::id_attach(i, ch), 0);
		ids.push_back(i);
		return i;
	}
	void adopt(rdma_cm_id *i) { ids.push_back(i); }
	void destroy(rdma_cm_id *i)
	{
		if (i->qp)
			ibv_destroy_qp(i->qp);
		cm::id_detach(i);
		drop_id(i);
	}
	// The next event (waits up to `ms`); type -1 when none came.
	struct Got {
		int type = -1;
		int status = 0;
		rdma_cm_id *id = nullptr;
		std::string priv;
		rdma_conn_param conn{};
		rdma_ud_param ud{};
	};
	Got next(int ms = 10000)
	{
		Got g;
		cm::Event *e = nullptr;
		// Readable means "something to process", not always an event
		// (a record that only closes a connection): poll, then take
		// without blocking, until the time is up.
		for (int waited = 0; !e && waited < ms; waited += 10) {
			pollfd p{pub.fd, POLLIN, 0};
			if (poll(&p, 1, 10) != 1)
				continue;
			bool k = false;
			if (cm::channel_next(ch, true, &e, &k) != 0)
				e = nullptr;
		}
		if (!e)
			return g;
		g.type = e->ev.event;
		g.status = e->ev.status;
		g.id = e->ev.id;
		g.conn = e->ev.param.conn;
		g.ud = e->ev.param.ud;
		bool ud = e->ev.id->ps == RDMA_PS_UDP;
		const void *pd = ud ? e->ev.param.ud.private_data : e->ev.param.conn.private_data;
		int pl = ud ? e->ev.param.ud.private_data_len : e->ev.param.conn.private_data_len;
		if (pd && e->ev.event != RDMA_CM_EVENT_MULTICAST_JOIN)
			g.priv.assign(static_cast<const char *>(pd), size_t(pl));
		cm::free_event(e);
		return g;
	}
	void make_qp(rdma_cm_id *i)
	{
		if (!pd) {
			pd = ibv_alloc_pd(i->verbs);
			cq = ibv_create_cq(i->verbs, 64, nullptr, nullptr, 0);
		}
		ibv_qp_init_attr a{};
		a.send_cq = a.recv_cq = cq;
		a.qp_type = i->qp_type;
		a.cap.max_send_wr = a.cap.max_recv_wr = 16;
		a.cap.max_send_sge = a.cap.max_recv_sge = 1;
		i->qp = ibv_create_qp(pd, &a);
		ASSERT_NE(i->qp, nullptr);
		ibv_qp_attr at{};
		int mask = 0;
		at.qp_state = IBV_QPS_INIT;
		ASSERT_EQ(cm::init_qp_attr(i, &at, &mask), 0);
		ASSERT_EQ(ibv_modify_qp(i->qp, &at, mask), 0);
	}
};

sockaddr_in loopback(uint16_t port)
{
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

const sockaddr *sa(const sockaddr_in &a) { return reinterpret_cast<const sockaddr *>(&a); }

// Client side up to ROUTE_RESOLVED.
rdma_cm_id *resolved(Side &c, uint16_t port, rdma_port_space ps = RDMA_PS_TCP)
{
	rdma_cm_id *id = c.id(ps);
	auto dst = loopback(port);
	EXPECT_EQ(cm::resolve_addr(id, nullptr, sa(dst), 1000), 0);
	EXPECT_EQ(c.next().type, RDMA_CM_EVENT_ADDR_RESOLVED);
	EXPECT_EQ(cm::resolve_route(id, 1000), 0);
	EXPECT_EQ(c.next().type, RDMA_CM_EVENT_ROUTE_RESOLVED);
	return id;
}

rdma_cm_id *listening(Side &s, uint16_t port, rdma_port_space ps = RDMA_PS_TCP)
{
	rdma_cm_id *l = s.id(ps);
	auto any = loopback(port);
	any.sin_addr.s_addr = 0;
	EXPECT_EQ(cm::bind_addr(l, sa(any)), 0);
	EXPECT_EQ(cm::listen(l, 16), 0);
	return l;
}

uint16_t test_port()
{
	static uint16_t n = 0;
	return uint16_t(20000 + getpid() % 20000 + n++);
}

// Runs `child` in a forked process; its gtest failures become exit code 1.
template <typename F>
pid_t spawn(F child)
{
	pid_t pid = fork();
	if (pid == 0) {
		g_ctx = nullptr; // the parent's context is not ours
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

int count_fds()
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	while (dirent *e = readdir(d))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

} // namespace

TEST(CmEngine, ConnectAcceptSendDisconnect)
{
	uint16_t port = test_port();
	int ready[2];
	ASSERT_EQ(pipe(ready), 0);
	pid_t server = spawn([&] {
		Side s;
		listening(s, port);
		char x = 1;
		ASSERT_EQ(write(ready[1], &x, 1), 1);
		auto req = s.next();
		ASSERT_EQ(req.type, RDMA_CM_EVENT_CONNECT_REQUEST);
		EXPECT_EQ(req.priv, "hello");
		EXPECT_EQ(req.conn.responder_resources, 2); // the peer's initiator depth
		EXPECT_EQ(req.conn.initiator_depth, 1);
		s.adopt(req.id);
		s.make_qp(req.id);
		char buf[64] = {};
		ibv_mr *mr = ibv_reg_mr(s.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
		ibv_sge sge{uintptr_t(buf), sizeof(buf), mr->lkey};
		ibv_recv_wr wr{}, *bad;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		ASSERT_EQ(ibv_post_recv(req.id->qp, &wr, &bad), 0);
		rdma_conn_param p{};
		p.private_data = "welcome";
		p.private_data_len = 7;
		p.responder_resources = 1;
		p.initiator_depth = 1;
		p.rnr_retry_count = 7;
		ASSERT_EQ(cm::accept(req.id, &p), 0);
		EXPECT_EQ(s.next().type, RDMA_CM_EVENT_ESTABLISHED);
		ibv_wc wc{};
		for (int i = 0; i < 10000 && ibv_poll_cq(s.cq, 1, &wc) == 0; i++)
			usleep(1000);
		EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
		EXPECT_STREQ(buf, "data over the CM's QP");
		auto d = s.next();
		EXPECT_EQ(d.type, RDMA_CM_EVENT_DISCONNECTED);
		ibv_dereg_mr(mr);
	});
	char x;
	ASSERT_EQ(read(ready[0], &x, 1), 1);
	{
		Side c;
		rdma_cm_id *id = resolved(c, port);
		c.make_qp(id);
		rdma_conn_param p{};
		p.private_data = "hello";
		p.private_data_len = 5;
		p.responder_resources = 1;
		p.initiator_depth = 2;
		p.retry_count = 7;
		p.rnr_retry_count = 7;
		ASSERT_EQ(cm::connect(id, &p), 0);
		auto est = c.next();
		ASSERT_EQ(est.type, RDMA_CM_EVENT_ESTABLISHED);
		EXPECT_EQ(est.priv, "welcome");
		ibv_qp_attr a{};
		ibv_qp_init_attr ia{};
		ASSERT_EQ(ibv_query_qp(id->qp, &a, IBV_QP_STATE, &ia), 0);
		EXPECT_EQ(a.qp_state, IBV_QPS_RTS);
		char msg[] = "data over the CM's QP";
		ibv_mr *mr = ibv_reg_mr(c.pd, msg, sizeof(msg), 0);
		ibv_sge sge{uintptr_t(msg), sizeof(msg), mr->lkey};
		ibv_send_wr wr{}, *bad;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		ASSERT_EQ(ibv_post_send(id->qp, &wr, &bad), 0);
		ibv_wc wc{};
		for (int i = 0; i < 10000 && ibv_poll_cq(c.cq, 1, &wc) == 0; i++)
			usleep(1000);
		EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
		ASSERT_EQ(cm::disconnect(id), 0);
		EXPECT_EQ(c.next().type, RDMA_CM_EVENT_DISCONNECTED);
		ibv_dereg_mr(mr);
	}
	EXPECT_EQ(reap(server), 0);
}

TEST(CmEngine, NoListenerIsRejectedWithReason8)
{
	Side c;
	rdma_cm_id *id = resolved(c, test_port());
	rdma_conn_param p{};
	p.qp_num = 0x42;
	ASSERT_EQ(cm::connect(id, &p), 0);
	auto g = c.next();
	EXPECT_EQ(g.type, RDMA_CM_EVENT_REJECTED);
	EXPECT_EQ(g.status, 8);
}

TEST(CmEngine, RejectCarriesReason28AndPrivateData)
{
	uint16_t port = test_port();
	Side s;
	listening(s, port);
	pid_t client = spawn([&] {
		Side c;
		rdma_cm_id *id = resolved(c, port);
		rdma_conn_param p{};
		p.qp_num = 0x42;
		ASSERT_EQ(cm::connect(id, &p), 0);
		auto g = c.next();
		EXPECT_EQ(g.type, RDMA_CM_EVENT_REJECTED);
		EXPECT_EQ(g.status, 28);
		EXPECT_EQ(g.priv, "go away");
	});
	auto req = s.next();
	ASSERT_EQ(req.type, RDMA_CM_EVENT_CONNECT_REQUEST);
	s.adopt(req.id);
	ASSERT_EQ(cm::reject(req.id, "go away", 7), 0);
	EXPECT_EQ(reap(client), 0);
}

TEST(CmEngine, KilledPeers)
{
	// Connected: the survivor sees DISCONNECTED. Mid-handshake: REJECTED 4.
	for (int connected = 0; connected < 2; connected++) {
		uint16_t port = test_port();
		Side s;
		listening(s, port);
		int done[2];
		ASSERT_EQ(pipe(done), 0);
		pid_t client = spawn([&] {
			Side c;
			rdma_cm_id *id = resolved(c, port);
			rdma_conn_param p{};
			p.qp_num = 0x42;
			ASSERT_EQ(cm::connect(id, &p), 0);
			if (connected) {
				auto g = c.next();
				EXPECT_EQ(g.type, RDMA_CM_EVENT_CONNECT_RESPONSE);
				ASSERT_EQ(cm::establish(id), 0);
			}
			char x = 1;
			ASSERT_EQ(write(done[1], &x, 1), 1);
			pause();
		});
		auto req = s.next();
		ASSERT_EQ(req.type, RDMA_CM_EVENT_CONNECT_REQUEST);
		s.adopt(req.id);
		rdma_conn_param p{};
		p.qp_num = 0x43;
		if (connected) {
			ASSERT_EQ(cm::accept(req.id, &p), 0);
			EXPECT_EQ(s.next().type, RDMA_CM_EVENT_ESTABLISHED);
		}
		char x;
		ASSERT_EQ(read(done[0], &x, 1), 1);
		kill(client, SIGKILL);
		reap(client);
		auto g = s.next(2000);
		if (connected) {
			EXPECT_EQ(g.type, RDMA_CM_EVENT_DISCONNECTED);
		} else {
			EXPECT_EQ(g.type, RDMA_CM_EVENT_REJECTED);
			EXPECT_EQ(g.status, 4);
		}
		close(done[0]);
		close(done[1]);
	}
	// The server dies while the client waits for REP, and while connected.
	for (int connected = 0; connected < 2; connected++) {
		uint16_t port = test_port();
		int ready[2];
		ASSERT_EQ(pipe(ready), 0);
		pid_t server = spawn([&] {
			Side s;
			listening(s, port);
			char x = 1;
			ASSERT_EQ(write(ready[1], &x, 1), 1);
			if (connected) {
				auto req = s.next();
				s.adopt(req.id);
				rdma_conn_param p{};
				p.qp_num = 0x43;
				ASSERT_EQ(cm::accept(req.id, &p), 0);
			}
			pause();
		});
		char x;
		ASSERT_EQ(read(ready[0], &x, 1), 1);
		Side c;
		rdma_cm_id *id = resolved(c, port);
		rdma_conn_param p{};
		p.qp_num = 0x42;
		ASSERT_EQ(cm::connect(id, &p), 0);
		if (connected) {
			ASSERT_EQ(c.next().type, RDMA_CM_EVENT_CONNECT_RESPONSE);
			ASSERT_EQ(cm::establish(id), 0);
		}
		kill(server, SIGKILL);
		reap(server);
		auto g = c.next(2000);
		if (connected) {
			EXPECT_EQ(g.type, RDMA_CM_EVENT_DISCONNECTED);
		} else {
			EXPECT_EQ(g.type, RDMA_CM_EVENT_REJECTED);
			EXPECT_EQ(g.status, 4);
		}
	}
}

TEST(CmEngine, UdExchangeGivesQpnAndQkey)
{
	uint16_t port = test_port();
	Side s;
	listening(s, port, RDMA_PS_UDP);
	pid_t client = spawn([&] {
		Side c;
		rdma_cm_id *id = resolved(c, port, RDMA_PS_UDP);
		ASSERT_EQ(cm::connect(id, nullptr), 0);
		auto g = c.next();
		EXPECT_EQ(g.type, RDMA_CM_EVENT_ESTABLISHED);
		EXPECT_EQ(g.ud.qp_num, 0x77u);
		EXPECT_EQ(g.ud.qkey, uint32_t(RDMA_UDP_QKEY));
		EXPECT_EQ(g.ud.ah_attr.dlid, 1);
	});
	auto req = s.next();
	ASSERT_EQ(req.type, RDMA_CM_EVENT_CONNECT_REQUEST);
	s.adopt(req.id);
	rdma_conn_param p{};
	p.qp_num = 0x77;
	ASSERT_EQ(cm::accept(req.id, &p), 0);
	EXPECT_EQ(reap(client), 0);
}

TEST(CmEngine, MalformedRecordIsCountedAndDropped)
{
	uint16_t port = test_port();
	Side s;
	listening(s, port);
	pid_t client = spawn([&] {
		char path[128];
		snprintf(path, sizeof(path), "/dev/shm/openverbs-%u/cm/tcp-%u-any4", unsigned(geteuid()),
			 unsigned(port));
		int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		sockaddr_un un{};
		un.sun_family = AF_UNIX;
		strcpy(un.sun_path, path);
		ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr *>(&un), sizeof(un)), 0);
		const char junk[] = "OVCM but not really a message";
		ASSERT_GT(send(fd, junk, sizeof(junk), 0), 0);
		char b;
		EXPECT_EQ(recv(fd, &b, 1, 0), 0); // the listener closed it
		close(fd);
	});
	uint64_t before = cm::parse_failures(cm::ParseError::ok);
	auto g = s.next(1000);
	EXPECT_EQ(g.type, -1);
	EXPECT_EQ(reap(client), 0);
	EXPECT_EQ(cm::parse_failures(cm::ParseError::ok), before + 1);
}

TEST(CmEngine, OtherUsersCannotReachTheListeners)
{
	if (geteuid() != 0)
		GTEST_SKIP() << "needs root to become another user";
	uint16_t port = test_port();
	Side s;
	listening(s, port);
	pid_t other = spawn([&] {
		ASSERT_EQ(setgid(65534), 0);
		ASSERT_EQ(setuid(65534), 0);
		char path[128];
		snprintf(path, sizeof(path), "/dev/shm/openverbs-0/cm/tcp-%u-any4", unsigned(port));
		int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		sockaddr_un un{};
		un.sun_family = AF_UNIX;
		strcpy(un.sun_path, path);
		EXPECT_NE(connect(fd, reinterpret_cast<sockaddr *>(&un), sizeof(un)), 0);
		EXPECT_EQ(errno, EACCES);
		EXPECT_EQ(opendir("/dev/shm/openverbs-0/cm"), nullptr); // nor list them
	});
	EXPECT_EQ(reap(other), 0);
	EXPECT_EQ(s.next(200).type, -1);
}

TEST(CmEngine, ThousandCyclesLeakNoFd)
{
	uint16_t port = test_port();
	int ready[2];
	ASSERT_EQ(pipe(ready), 0);
	const int kCycles = 1000;
	pid_t server = spawn([&] {
		Side s;
		listening(s, port);
		char x = 1;
		ASSERT_EQ(write(ready[1], &x, 1), 1);
		for (int i = 0; i < kCycles; i++) {
			auto req = s.next();
			ASSERT_EQ(req.type, RDMA_CM_EVENT_CONNECT_REQUEST);
			rdma_conn_param p{};
			p.qp_num = 0x43;
			ASSERT_EQ(cm::accept(req.id, &p), 0);
			ASSERT_EQ(s.next().type, RDMA_CM_EVENT_ESTABLISHED);
			ASSERT_EQ(s.next().type, RDMA_CM_EVENT_DISCONNECTED);
			s.destroy(req.id);
		}
	});
	char x;
	ASSERT_EQ(read(ready[0], &x, 1), 1);
	Side c;
	device_context(0);
	int fds = -1;
	for (int i = 0; i < kCycles; i++) {
		rdma_cm_id *id = resolved(c, port);
		rdma_conn_param p{};
		p.qp_num = 0x42;
		ASSERT_EQ(cm::connect(id, &p), 0);
		ASSERT_EQ(c.next().type, RDMA_CM_EVENT_CONNECT_RESPONSE);
		ASSERT_EQ(cm::establish(id), 0);
		ASSERT_EQ(cm::disconnect(id), 0);
		ASSERT_EQ(c.next().type, RDMA_CM_EVENT_DISCONNECTED);
		c.ids.pop_back();
		c.destroy(id);
		if (i == 10)
			fds = count_fds();
	}
	EXPECT_EQ(count_fds(), fds);
	EXPECT_EQ(reap(server), 0);
}
