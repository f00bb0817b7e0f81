// The passive side's DISCONNECTED waits for the receive completions that were
// in its CQ when the peer disconnected (src/rdmacm/usercm/engine.cpp,
// "disconnects that wait"; rdma_cm(7)), at most
// OPENVERBS_CM_DISCONNECT_WAIT_MS: here 1500 ms, long enough that an event
// released by the poll cannot be mistaken for one released by the limit.
// One process, two event channels on soft0; runs in a private /dev/shm
// (private_shm.sh).
#include "cm_test.h"
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <arpa/inet.h>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

namespace {

constexpr int kWaitMs = 1500;
// Read by the library at its first disconnect, after this.
const int g_env = setenv("OPENVERBS_CM_DISCONNECT_WAIT_MS", "1500", 1);

using Clock = std::chrono::steady_clock;

int ms_since(Clock::time_point t)
{
	return int(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count());
}

// The next event of ch (non-blocking: the CM's own work, such as the wait's
// checks, makes the fd readable too) within `ms` (-1: none), acknowledged;
// *id its id.
int next(rdma_event_channel *ch, int ms, rdma_cm_id **id = nullptr)
{
	pollfd p{ch->fd, POLLIN, 0};
	auto t0 = Clock::now();
	for (;;) {
		int left = ms - ms_since(t0);
		if (left < 0 || poll(&p, 1, left) != 1)
			return -1;
		rdma_cm_event *ev;
		if (rdma_get_cm_event(ch, &ev))
			continue; // EAGAIN: the fd was readable for the CM's own work
		int type = ev->event;
		if (id)
			*id = ev->id;
		rdma_ack_cm_event(ev);
		return type;
	}
}

using cmtest::make_qp;

// A connected pair on soft0 (one process); open(send): the client sent one
// SEND that sits, completed, in the server's receive CQ unless `send` is
// false.
struct Pair {
	rdma_event_channel *sch = rdma_create_event_channel();
	rdma_event_channel *cch = rdma_create_event_channel();
	rdma_cm_id *listen = nullptr, *server = nullptr, *client = nullptr;
	char sbuf[64] = {}, cbuf[64] = "last message";
	ibv_mr *smr = nullptr, *cmr = nullptr;

	void open(bool send)
	{
		ASSERT_TRUE(sch && cch);
		for (rdma_event_channel *ch : {sch, cch})
			ASSERT_EQ(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK), 0);
		sockaddr_in a{};
		a.sin_family = AF_INET;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		for (int port = 21000 + getpid() % 20000;; port++) {
			a.sin_port = htons(uint16_t(port));
			ASSERT_EQ(rdma_create_id(sch, &listen, nullptr, RDMA_PS_TCP), 0);
			if (!rdma_bind_addr(listen, reinterpret_cast<sockaddr *>(&a)))
				break;
			rdma_destroy_id(listen);
		}
		ASSERT_EQ(rdma_listen(listen, 4), 0);
		ASSERT_EQ(rdma_create_id(cch, &client, nullptr, RDMA_PS_TCP), 0);
		ASSERT_EQ(rdma_resolve_addr(client, nullptr, reinterpret_cast<sockaddr *>(&a), 1000), 0);
		ASSERT_EQ(next(cch, 3000), RDMA_CM_EVENT_ADDR_RESOLVED);
		ASSERT_EQ(rdma_resolve_route(client, 1000), 0);
		ASSERT_EQ(next(cch, 3000), RDMA_CM_EVENT_ROUTE_RESOLVED);
		make_qp(client);
		rdma_conn_param p{};
		p.responder_resources = p.initiator_depth = 1;
		p.retry_count = p.rnr_retry_count = 7;
		ASSERT_EQ(rdma_connect(client, &p), 0);
		ASSERT_EQ(next(sch, 3000, &server), RDMA_CM_EVENT_CONNECT_REQUEST);
		make_qp(server);
		smr = rdma_reg_msgs(server, sbuf, sizeof(sbuf));
		ASSERT_NE(smr, nullptr);
		ASSERT_EQ(rdma_post_recv(server, nullptr, sbuf, sizeof(sbuf), smr), 0);
		ASSERT_EQ(rdma_accept(server, &p), 0);
		ASSERT_EQ(next(cch, 3000), RDMA_CM_EVENT_ESTABLISHED);
		ASSERT_EQ(next(sch, 3000), RDMA_CM_EVENT_ESTABLISHED);
		if (!send)
			return;
		cmr = rdma_reg_msgs(client, cbuf, sizeof(cbuf));
		ASSERT_NE(cmr, nullptr);
		ASSERT_EQ(rdma_post_send(client, nullptr, cbuf, sizeof(cbuf), cmr, IBV_SEND_SIGNALED), 0);
		ibv_wc wc{};
		ASSERT_EQ(rdma_get_send_comp(client, &wc), 1);
		ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	}
	// The client disconnects; its own DISCONNECTED comes at once.
	void client_disconnects()
	{
		ASSERT_EQ(rdma_disconnect(client), 0);
		ASSERT_EQ(next(cch, 3000), RDMA_CM_EVENT_DISCONNECTED);
	}
	// The server takes the SEND from its receive CQ.
	void server_polls()
	{
		ibv_wc wc{};
		int n = 0;
		auto t0 = Clock::now();
		while ((n = ibv_poll_cq(server->recv_cq, 1, &wc)) == 0 && ms_since(t0) < 3000)
			;
		ASSERT_EQ(n, 1);
		ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
		ASSERT_STREQ(sbuf, "last message");
	}
	~Pair()
	{
		for (rdma_cm_id *id : {client, server}) {
			if (!id)
				continue;
			if (id->qp)
				rdma_destroy_qp(id);
			rdma_destroy_id(id);
		}
		if (smr)
			ibv_dereg_mr(smr);
		if (cmr)
			ibv_dereg_mr(cmr);
		if (listen)
			rdma_destroy_id(listen);
		rdma_destroy_event_channel(sch);
		rdma_destroy_event_channel(cch);
	}
};

} // namespace

// The SEND is in the server's CQ when the DREQ comes: DISCONNECTED waits
// until the server polls it, then comes without waiting for the limit.
TEST(SoftCmDisconnect, WaitsUntilTheReceiveCqIsPolled)
{
	ASSERT_EQ(g_env, 0);
	Pair p;
	ASSERT_NO_FATAL_FAILURE(p.open(true));
	ASSERT_NO_FATAL_FAILURE(p.client_disconnects());
	EXPECT_EQ(next(p.sch, 200), -1) << "DISCONNECTED before the server polled its CQ";
	ASSERT_NO_FATAL_FAILURE(p.server_polls());
	auto t0 = Clock::now();
	EXPECT_EQ(next(p.sch, 3000), RDMA_CM_EVENT_DISCONNECTED);
	EXPECT_LT(ms_since(t0), kWaitMs - 500) << "released by the limit, not by the poll";
}

// A server that never polls gets DISCONNECTED when the limit is over.
TEST(SoftCmDisconnect, WaitEndsAtTheLimit)
{
	Pair p;
	ASSERT_NO_FATAL_FAILURE(p.open(true));
	auto t0 = Clock::now();
	ASSERT_NO_FATAL_FAILURE(p.client_disconnects());
	EXPECT_EQ(next(p.sch, kWaitMs + 3000), RDMA_CM_EVENT_DISCONNECTED);
	EXPECT_GE(ms_since(t0), kWaitMs - 100);
}

// Nothing in the CQ: DISCONNECTED at once.
TEST(SoftCmDisconnect, EmptyCqDoesNotWait)
{
	Pair p;
	ASSERT_NO_FATAL_FAILURE(p.open(false));
	ASSERT_NO_FATAL_FAILURE(p.client_disconnects());
	auto t0 = Clock::now();
	EXPECT_EQ(next(p.sch, 3000), RDMA_CM_EVENT_DISCONNECTED);
	EXPECT_LT(ms_since(t0), kWaitMs - 500);
}

// The server disconnects too while its DISCONNECTED waits (crossing
// disconnects): rdma_disconnect succeeds, and the one event still comes
// once it polls.
TEST(SoftCmDisconnect, DisconnectWhileWaiting)
{
	Pair p;
	ASSERT_NO_FATAL_FAILURE(p.open(true));
	ASSERT_NO_FATAL_FAILURE(p.client_disconnects());
	EXPECT_EQ(next(p.sch, 100), -1);
	EXPECT_EQ(rdma_disconnect(p.server), 0);
	ASSERT_NO_FATAL_FAILURE(p.server_polls());
	EXPECT_EQ(next(p.sch, 3000), RDMA_CM_EVENT_DISCONNECTED);
	EXPECT_EQ(next(p.sch, 100), -1) << "a second DISCONNECTED";
}

// The server destroys its id while its DISCONNECTED waits: no event, and
// the wait's timer finds nothing to run.
TEST(SoftCmDisconnect, DestroyWhileWaiting)
{
	Pair p;
	ASSERT_NO_FATAL_FAILURE(p.open(true));
	ASSERT_NO_FATAL_FAILURE(p.client_disconnects());
	EXPECT_EQ(next(p.sch, 100), -1);
	rdma_destroy_qp(p.server);
	EXPECT_EQ(rdma_destroy_id(p.server), 0);
	p.server = nullptr;
	EXPECT_EQ(next(p.sch, 300), -1);
}
