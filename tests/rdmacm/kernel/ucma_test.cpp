// librdmacm's kernel backend at the syscall seam: every rdma_* call is
// checked against the exact bytes the kernel's ucma would receive (the
// kernel's structs, built in fake_ucma.cpp), and the fake kernel's answers
// and events against what the application sees. Runs twice: with AF_IB
// support (the probe's BIND succeeds, as on kernels with an RDMA device) and,
// with FAKE_UCMA_NO_AF_IB=1, without it (the IP-only commands).
#include "fake_ucma.h"

#include <rdma/rdma_cma.h>
#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <thread>
#include <vector>

namespace ov::cm {
bool af_ib_support() noexcept;
void set_lazy_kernel_ids(bool on) noexcept;
}

namespace {

using fake::Bytes;

// The library's state (device list, AF_IB probe) is made once per process,
// with the fake in place: one fake for the whole run.
fake::Ucma *g_ucma;

class Env : public ::testing::Environment {
public:
	void SetUp() override
	{
		g_ucma = new fake::Ucma;
		if (getenv("FAKE_UCMA_NO_AF_IB")) {
			g_ucma->fail_cmd = fake::BIND;
			g_ucma->fail_errno = ENODEV;
		}
		// First call: ucma_init, with the AF_IB probe.
		rdma_event_channel *ch = rdma_create_event_channel();
		ASSERT_NE(ch, nullptr) << strerror(errno);
		rdma_destroy_event_channel(ch);
		g_ucma->fail_cmd = -1;
		g_ucma->fail_errno = 0;
	}
	void TearDown() override { delete g_ucma; }
};
const auto *g_env = ::testing::AddGlobalTestEnvironment(new Env);

sockaddr_in ip4(const char *addr, uint16_t port)
{
	sockaddr_in s = {};
	s.sin_family = AF_INET;
	s.sin_port = htons(port);
	inet_pton(AF_INET, addr, &s.sin_addr);
	return s;
}

class Ucma : public ::testing::Test {
protected:
	void SetUp() override
	{
		f().clear();
		f().events.clear();
		f().events_reported = 0;
		f().node_guid = 0;
		// These tests check each command at the call that issues it
		// (CREATE_ID at rdma_create_id), as with the kernel CM alone.
		ov::cm::set_lazy_kernel_ids(false);
		ch = rdma_create_event_channel();
		ASSERT_NE(ch, nullptr);
		kfd = f().last_fd; // the channel's kernel CM fd (ch->fd may be an epoll set)
	}
	void TearDown() override { rdma_destroy_event_channel(ch); }
	static fake::Ucma &f() { return *g_ucma; }
	uint32_t create(rdma_cm_id **id, rdma_port_space ps = RDMA_PS_TCP, void *ctx = nullptr)
	{
		uint32_t handle = f().next_id;
		EXPECT_EQ(rdma_create_id(ch, id, ctx, ps), 0) << strerror(errno);
		return handle;
	}
	// One command of this number was written; its masked payload.
	Bytes only(uint32_t cmd)
	{
		auto v = f().of(cmd);
		EXPECT_EQ(v.size(), 1u) << "command " << cmd;
		if (v.empty())
			return {};
		EXPECT_EQ(v[0].in, fake::size_of(cmd));
		return fake::masked(v[0]);
	}
	rdma_event_channel *ch = nullptr;
	int kfd = -1;
};

TEST_F(Ucma, CreateAndDestroyId)
{
	rdma_cm_id *id;
	uint32_t h = create(&id);
	EXPECT_EQ(only(fake::CREATE_ID),
		  fake::create_id(reinterpret_cast<uintptr_t>(id), RDMA_PS_TCP, IBV_QPT_RC));
	EXPECT_EQ(f().of(fake::CREATE_ID)[0].out, 4); // struct rdma_ucm_create_id_resp
	EXPECT_EQ(id->channel, ch);
	EXPECT_EQ(id->ps, RDMA_PS_TCP);
	EXPECT_EQ(id->qp_type, IBV_QPT_RC);
	EXPECT_EQ(rdma_destroy_id(id), 0);
	EXPECT_EQ(only(fake::DESTROY_ID), fake::destroy_id(h));
}

// With software devices on, a channel has both CMs: an id's kernel half is
// made by the first call that needs it, so an id the software CM takes (or
// one destroyed unused) never costs a kernel command.
TEST_F(Ucma, KernelIdIsMadeByItsFirstKernelCommand)
{
	ov::cm::set_lazy_kernel_ids(true);
	rdma_cm_id *unused, *id;
	ASSERT_EQ(rdma_create_id(ch, &unused, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
	EXPECT_EQ(rdma_destroy_id(unused), 0);
	ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
	EXPECT_TRUE(f().of(fake::CREATE_ID).empty());
	EXPECT_TRUE(f().of(fake::DESTROY_ID).empty());
	uint32_t h = f().next_id;
	sockaddr_in dst = ip4("10.77.0.2", 20000); // not an address of this host
	ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr *>(&dst), 2000), 0)
		<< strerror(errno);
	EXPECT_EQ(only(fake::CREATE_ID),
		  fake::create_id(reinterpret_cast<uintptr_t>(id), RDMA_PS_TCP, IBV_QPT_RC));
	if (!ov::cm::af_ib_support())
		EXPECT_EQ(only(fake::RESOLVE_IP),
			  fake::resolve_ip(h, nullptr, 0, reinterpret_cast<sockaddr *>(&dst), sizeof(dst), 2000));
	else
		EXPECT_EQ(f().of(fake::RESOLVE_ADDR).size(), 1u);
	EXPECT_EQ(rdma_destroy_id(id), 0);
	EXPECT_EQ(only(fake::DESTROY_ID), fake::destroy_id(h));
	ov::cm::set_lazy_kernel_ids(false);
}

TEST_F(Ucma, UdpAndIpoibIdsAreUd)
{
	rdma_cm_id *a, *b;
	create(&a, RDMA_PS_UDP);
	create(&b, RDMA_PS_IPOIB);
	auto c = f().of(fake::CREATE_ID);
	ASSERT_EQ(c.size(), 2u);
	EXPECT_EQ(fake::masked(c[0]), fake::create_id(reinterpret_cast<uintptr_t>(a), RDMA_PS_UDP, IBV_QPT_UD));
	EXPECT_EQ(fake::masked(c[1]), fake::create_id(reinterpret_cast<uintptr_t>(b), RDMA_PS_IPOIB, IBV_QPT_UD));
	EXPECT_EQ(a->qp_type, IBV_QPT_UD);
	rdma_destroy_id(a);
	rdma_destroy_id(b);
}

TEST_F(Ucma, SyncIdHasItsOwnChannel)
{
	rdma_cm_id *id;
	ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), 0);
	EXPECT_NE(id->channel, nullptr);
	EXPECT_NE(id->channel, ch);
	int closed = f().closed;
	EXPECT_EQ(rdma_destroy_id(id), 0);
	EXPECT_EQ(f().closed, closed + 1); // its channel's kernel CM fd
}

TEST_F(Ucma, BindIpv4)
{
	rdma_cm_id *id;
	uint32_t h = create(&id);
	sockaddr_in a = ip4("10.77.0.1", 7471);
	ASSERT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr *>(&a)), 0) << strerror(errno);
	if (ov::cm::af_ib_support()) {
		auto b = f().of(fake::BIND);
		ASSERT_EQ(b.size(), 1u);
		EXPECT_EQ(b[0].in, fake::size_of(fake::BIND));
		// id, addr_size, then the address (struct rdma_ucm_bind)
		uint32_t id_field;
		uint16_t size_field;
		memcpy(&id_field, b[0].payload.data(), 4);
		memcpy(&size_field, b[0].payload.data() + 4, 2);
		EXPECT_EQ(id_field, h);
		EXPECT_EQ(size_field, sizeof(sockaddr_in));
		EXPECT_EQ(memcmp(b[0].payload.data() + 8, &a, sizeof(a)), 0);
		EXPECT_EQ(f().of(fake::QUERY).size(), 1u); // UCMA_QUERY_ADDR
	} else {
		EXPECT_EQ(only(fake::BIND_IP), fake::bind_ip(h, reinterpret_cast<sockaddr *>(&a), sizeof(a)));
		EXPECT_EQ(f().of(fake::QUERY_ROUTE).size(), 1u);
	}
	rdma_destroy_id(id);
}

TEST_F(Ucma, ResolveAddrThenEvent)
{
	rdma_cm_id *id;
	uint32_t h = create(&id);
	sockaddr_in dst = ip4("10.77.0.2", 20000);
	ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr *>(&dst), 2000), 0);
	if (!ov::cm::af_ib_support())
		EXPECT_EQ(only(fake::RESOLVE_IP),
			  fake::resolve_ip(h, nullptr, 0, reinterpret_cast<sockaddr *>(&dst), sizeof(dst), 2000));
	else
		EXPECT_EQ(f().of(fake::RESOLVE_ADDR).size(), 1u);
	EXPECT_EQ(memcmp(&id->route.addr.dst_sin, &dst, sizeof(dst)), 0);
	EXPECT_EQ(rdma_get_dst_port(id), htons(20000));

	f().events.push_back({reinterpret_cast<uintptr_t>(id), h, RDMA_CM_EVENT_ADDR_RESOLVED, 0, {}, 0, 0, 0});
	rdma_cm_event *ev = nullptr;
	ASSERT_EQ(rdma_get_cm_event(ch, &ev), 0);
	auto g = f().of(fake::GET_EVENT);
	ASSERT_EQ(g.size(), 1u);
	EXPECT_EQ(g[0].in, fake::size_of(fake::GET_EVENT));
	EXPECT_EQ(g[0].out, 336u); // struct rdma_ucm_event_resp
	EXPECT_EQ(ev->id, id);
	EXPECT_EQ(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	EXPECT_EQ(ev->status, 0);
	EXPECT_EQ(rdma_ack_cm_event(ev), 0);

	ASSERT_EQ(rdma_resolve_route(id, 1000), -1); // no device bound yet
	EXPECT_EQ(errno, EINVAL);
	f().events_reported = 1;
	EXPECT_EQ(rdma_destroy_id(id), 0);
}

// The kernel binds the id to soft0 (its GUID and index in the answers):
// the library opens the device, and CONNECT/ACCEPT carry the device's
// limits where the application asks for them.
TEST_F(Ucma, ConnectAcceptDisconnectOnABoundDevice)
{
	int n = 0;
	ibv_device **list = ibv_get_device_list(&n);
	ASSERT_GT(n, 0);
	f().node_guid = ibv_get_device_guid(list[0]);
	f().ibdev_index = static_cast<uint32_t>(ibv_get_device_index(list[0]));
	ibv_free_device_list(list);

	rdma_cm_id *id;
	uint32_t h = create(&id);
	sockaddr_in a = ip4("10.77.0.1", 0);
	ASSERT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr *>(&a)), 0) << strerror(errno);
	ASSERT_NE(id->verbs, nullptr);
	ASSERT_NE(id->pd, nullptr);
	EXPECT_EQ(id->port_num, 1);
	ibv_device_attr attr;
	ASSERT_EQ(ibv_query_device(id->verbs, &attr), 0);

	EXPECT_EQ(rdma_connect(id, nullptr), -1); // RDMA_PS_TCP: a QP or parameters
	EXPECT_EQ(errno, EINVAL);
	rdma_conn_param p = {};
	const char hello[] = "hello";
	p.private_data = hello;
	p.private_data_len = sizeof(hello);
	p.responder_resources = RDMA_MAX_RESP_RES; // the device's
	p.initiator_depth = 1;
	p.retry_count = 5;
	p.rnr_retry_count = 6;
	p.qp_num = 0x1234;
	ASSERT_EQ(rdma_connect(id, &p), 0) << strerror(errno);
	Bytes pd(hello, hello + sizeof(hello));
	EXPECT_EQ(only(fake::CONNECT),
		  fake::connect(h, 0x1234, pd, static_cast<uint8_t>(attr.max_qp_rd_atom), 1, 5, 6, 0));

	p.initiator_depth = static_cast<uint8_t>(attr.max_qp_init_rd_atom + 1);
	if (attr.max_qp_init_rd_atom < 0xfe) {
		EXPECT_EQ(rdma_connect(id, &p), -1); // beyond the device
		EXPECT_EQ(errno, EINVAL);
	}

	rdma_conn_param ap = {};
	ap.qp_num = 0x77;
	ap.responder_resources = 1;
	ap.initiator_depth = 1;
	ap.rnr_retry_count = 7;
	ASSERT_EQ(rdma_accept(id, &ap), 0) << strerror(errno);
	EXPECT_EQ(fake::masked(f().of(fake::ACCEPT).back()),
		  fake::accept(h, reinterpret_cast<uintptr_t>(id), 0x77, {}, 1, 1, 7));

	ASSERT_EQ(rdma_disconnect(id), 0) << strerror(errno);
	EXPECT_EQ(only(fake::DISCONNECT), fake::disconnect(h));
	EXPECT_EQ(rdma_destroy_id(id), 0);
}

TEST_F(Ucma, InvalidAddressesWriteNothing)
{
	rdma_cm_id *id;
	create(&id);
	f().clear();
	sockaddr_storage un = {};
	un.ss_family = AF_UNIX;
	EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr *>(&un)), -1);
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(rdma_bind_addr(id, nullptr), -1);
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(rdma_resolve_addr(id, nullptr, nullptr, 100), -1);
	EXPECT_EQ(errno, EINVAL);
	sockaddr_in dst = ip4("10.0.0.1", 1);
	EXPECT_EQ(rdma_resolve_addr(id, reinterpret_cast<sockaddr *>(&un), reinterpret_cast<sockaddr *>(&dst), 100), -1);
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(rdma_join_multicast(id, reinterpret_cast<sockaddr *>(&un), nullptr), -1);
	EXPECT_EQ(errno, EINVAL);
	EXPECT_TRUE(f().commands.empty());
	rdma_destroy_id(id);
}

TEST_F(Ucma, KernelErrnoAndShortWrite)
{
	rdma_cm_id *id;
	uint32_t h = create(&id);
	f().fail_cmd = fake::LISTEN;
	f().fail_errno = EADDRINUSE;
	EXPECT_EQ(rdma_listen(id, 7), -1);
	EXPECT_EQ(errno, EADDRINUSE);
	EXPECT_EQ(fake::masked(f().of(fake::LISTEN).back()), fake::listen(h, 7));
	f().fail_errno = 0; // a short write
	EXPECT_EQ(rdma_listen(id, 7), -1);
	EXPECT_EQ(errno, ENODATA);
	f().fail_cmd = -1;
	EXPECT_EQ(rdma_listen(id, 7), 0);
	rdma_destroy_id(id);
}

TEST_F(Ucma, RejectNotifySetOption)
{
	rdma_cm_id *id;
	uint32_t h = create(&id);
	Bytes pd = {1, 2, 3, 4, 5};
	EXPECT_EQ(rdma_reject(id, pd.data(), static_cast<uint8_t>(pd.size())), 0);
	EXPECT_EQ(rdma_reject_ece(id, nullptr, 0), 0);
	auto r = f().of(fake::REJECT);
	ASSERT_EQ(r.size(), 2u);
	EXPECT_EQ(r[0].payload, fake::reject(h, pd, 0));
	EXPECT_EQ(r[1].payload, fake::reject(h, {}, 35));

	EXPECT_EQ(rdma_notify(id, IBV_EVENT_COMM_EST), 0);
	EXPECT_EQ(only(fake::NOTIFY), fake::notify(h, IBV_EVENT_COMM_EST));

	uint8_t tos = 32;
	EXPECT_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos)), 0);
	auto so = f().of(fake::SET_OPTION);
	ASSERT_EQ(so.size(), 1u);
	EXPECT_EQ(fake::masked(so[0]), fake::set_option(h, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, 1));
	uint64_t optval;
	memcpy(&optval, so[0].payload.data() + fake::response_offset(fake::SET_OPTION), 8);
	EXPECT_EQ(optval, reinterpret_cast<uintptr_t>(&tos));
	rdma_destroy_id(id);
}

TEST_F(Ucma, ConnectRequestMakesANewId)
{
	int ctx = 0;
	rdma_cm_id *listen;
	uint32_t h = create(&listen, RDMA_PS_TCP, &ctx);
	ASSERT_EQ(rdma_listen(listen, 1), 0);
	f().events.push_back({reinterpret_cast<uintptr_t>(listen), 555, RDMA_CM_EVENT_CONNECT_REQUEST, 0,
			      {9, 8, 7}, 77, 0, 0});
	rdma_cm_event *ev;
	ASSERT_EQ(rdma_get_cm_event(ch, &ev), 0) << strerror(errno);
	EXPECT_EQ(ev->event, RDMA_CM_EVENT_CONNECT_REQUEST);
	EXPECT_EQ(ev->listen_id, listen);
	ASSERT_NE(ev->id, listen);
	EXPECT_EQ(ev->id->context, &ctx);
	EXPECT_EQ(ev->id->channel, ch);
	EXPECT_EQ(ev->param.conn.private_data_len, 3);
	EXPECT_EQ(memcmp(ev->param.conn.private_data, "\x09\x08\x07", 3), 0);
	EXPECT_EQ(ev->param.conn.qp_num, 77u);
	rdma_cm_id *conn = ev->id;
	EXPECT_EQ(rdma_reject(conn, nullptr, 0), 0);
	EXPECT_EQ(f().of(fake::REJECT).back().payload, fake::reject(555, {}, 0));
	EXPECT_EQ(rdma_ack_cm_event(ev), 0);
	EXPECT_EQ(rdma_destroy_id(conn), 0);
	EXPECT_EQ(fake::masked(f().of(fake::DESTROY_ID).back()), fake::destroy_id(555));
	f().events_reported = 1;
	EXPECT_EQ(rdma_destroy_id(listen), 0);
	EXPECT_EQ(fake::masked(f().of(fake::DESTROY_ID).back()), fake::destroy_id(h));
}

TEST_F(Ucma, DestroyWaitsUntilEventsAreAcknowledged)
{
	rdma_cm_id *id;
	uint32_t h = create(&id);
	f().events.push_back({reinterpret_cast<uintptr_t>(id), h, RDMA_CM_EVENT_DISCONNECTED, 0, {}, 0, 0, 0});
	rdma_cm_event *ev;
	ASSERT_EQ(rdma_get_cm_event(ch, &ev), 0);
	f().events_reported = 1;
	std::atomic<bool> done{false};
	std::thread t([&] {
		EXPECT_EQ(rdma_destroy_id(id), 0);
		done = true;
	});
	std::this_thread::sleep_for(std::chrono::milliseconds(100));
	EXPECT_FALSE(done.load());
	rdma_ack_cm_event(ev);
	t.join();
	EXPECT_TRUE(done.load());
}

TEST_F(Ucma, RejectedEventCarriesPrivateData)
{
	rdma_cm_id *id;
	uint32_t h = create(&id);
	f().events.push_back({reinterpret_cast<uintptr_t>(id), h, RDMA_CM_EVENT_REJECTED, 8, {42}, 0, 0, 0});
	rdma_cm_event *ev;
	ASSERT_EQ(rdma_get_cm_event(ch, &ev), 0);
	EXPECT_EQ(ev->event, RDMA_CM_EVENT_REJECTED);
	EXPECT_EQ(ev->status, 8);
	ASSERT_EQ(ev->param.conn.private_data_len, 1);
	EXPECT_EQ(*static_cast<const uint8_t *>(ev->param.conn.private_data), 42);
	EXPECT_STREQ(rdma_event_str(ev->event), "RDMA_CM_EVENT_REJECTED");
	rdma_ack_cm_event(ev);
	f().events_reported = 1;
	rdma_destroy_id(id);
}

TEST_F(Ucma, NonBlockingChannelWithoutEvent)
{
	// With software devices on, the channel's fd is an epoll set over the
	// kernel CM's fd and the software CM's: O_NONBLOCK on it is honoured.
	int fl = fcntl(ch->fd, F_GETFL);
	ASSERT_EQ(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK), 0);
	rdma_cm_event *ev;
	EXPECT_EQ(rdma_get_cm_event(ch, &ev), -1);
	EXPECT_EQ(errno, EAGAIN);
	EXPECT_EQ(rdma_get_cm_event(ch, nullptr), -1);
	EXPECT_EQ(errno, EINVAL);
	fcntl(ch->fd, F_SETFL, fl);
}

// With both CMs, a channel looks first at the CM that gave its last event
// (channel.cpp, Channel::next), but never lets the other's events wait
// behind more than 64 of its own: a kernel CM event that arrives while 200
// of the software CM's are queued is reported among the next 65, and every
// event of both is reported once.
TEST_F(Ucma, BothCmsShareTheChannelFairly)
{
	ov::cm::set_lazy_kernel_ids(true);
	constexpr int kSoft = 200;
	std::vector<rdma_cm_id *> soft(kSoft);
	sockaddr_in lo = ip4("127.0.0.1", 20000);
	for (rdma_cm_id *&id : soft) {
		ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
		ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr *>(&lo), 2000), 0)
			<< strerror(errno);
	}
	EXPECT_TRUE(f().of(fake::CREATE_ID).empty()); // all the software CM's
	rdma_cm_event *ev;
	ASSERT_EQ(rdma_get_cm_event(ch, &ev), 0) << strerror(errno); // now looks at soft first
	EXPECT_EQ(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	rdma_ack_cm_event(ev);

	rdma_cm_id *kid;
	uint32_t h = f().next_id;
	ASSERT_EQ(rdma_create_id(ch, &kid, nullptr, RDMA_PS_TCP), 0);
	sockaddr_in dst = ip4("10.77.0.2", 20000); // not an address of this host
	ASSERT_EQ(rdma_resolve_addr(kid, nullptr, reinterpret_cast<sockaddr *>(&dst), 2000), 0);
	f().events.push_back({reinterpret_cast<uintptr_t>(kid), h, RDMA_CM_EVENT_ADDR_RESOLVED, 0, {}, 0, 0, 0});

	int soft_seen = 1, kernel_at = -1;
	for (int n = 0; n < kSoft; n++) {
		ASSERT_EQ(rdma_get_cm_event(ch, &ev), 0) << strerror(errno);
		EXPECT_EQ(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
		if (ev->id == kid) {
			EXPECT_EQ(kernel_at, -1);
			kernel_at = n;
		} else {
			soft_seen++;
		}
		rdma_ack_cm_event(ev);
	}
	EXPECT_EQ(soft_seen, kSoft);
	EXPECT_GE(kernel_at, 0);
	EXPECT_LE(kernel_at, 64);
	int fl = fcntl(ch->fd, F_GETFL);
	ASSERT_EQ(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK), 0);
	EXPECT_EQ(rdma_get_cm_event(ch, &ev), -1); // nothing left in either
	EXPECT_EQ(errno, EAGAIN);
	fcntl(ch->fd, F_SETFL, fl);
	for (rdma_cm_id *id : soft)
		EXPECT_EQ(rdma_destroy_id(id), 0);
	f().events_reported = 1;
	EXPECT_EQ(rdma_destroy_id(kid), 0);
	ov::cm::set_lazy_kernel_ids(false);
}

TEST_F(Ucma, MulticastJoinAndLeave)
{
	rdma_cm_id *id;
	int ctx;
	uint32_t h = create(&id, RDMA_PS_UDP);
	sockaddr_in grp = ip4("239.1.1.1", 0);
	uint32_t mc_handle = f().next_id;
	ASSERT_EQ(rdma_join_multicast(id, reinterpret_cast<sockaddr *>(&grp), &ctx), 0);
	uint64_t mc_uid;
	if (!ov::cm::af_ib_support()) {
		auto j = f().of(fake::JOIN_IP_MCAST);
		ASSERT_EQ(j.size(), 1u);
		memcpy(&mc_uid, j[0].payload.data() + 8, 8);
		EXPECT_EQ(fake::masked(j[0]), fake::join_ip_mcast(h, mc_uid, reinterpret_cast<sockaddr *>(&grp), sizeof(grp)));
	} else {
		auto j = f().of(fake::JOIN_MCAST);
		ASSERT_EQ(j.size(), 1u);
		memcpy(&mc_uid, j[0].payload.data() + 8, 8);
		uint16_t flags;
		memcpy(&flags, j[0].payload.data() + 22, 2);
		EXPECT_EQ(flags, 0); // a full member
	}
	f().events.push_back({mc_uid, h, RDMA_CM_EVENT_MULTICAST_JOIN, 0, {}, 0xffffff, 0x01234567, 0xc001});
	rdma_cm_event *ev;
	ASSERT_EQ(rdma_get_cm_event(ch, &ev), 0);
	EXPECT_EQ(ev->event, RDMA_CM_EVENT_MULTICAST_JOIN);
	EXPECT_EQ(ev->id, id);
	EXPECT_EQ(ev->param.ud.private_data, &ctx);
	rdma_ack_cm_event(ev);
	f().events_reported = 1;
	EXPECT_EQ(rdma_leave_multicast(id, reinterpret_cast<sockaddr *>(&grp)), 0);
	EXPECT_EQ(fake::masked(f().of(fake::LEAVE_MCAST).back()), fake::leave(mc_handle));
	EXPECT_EQ(rdma_leave_multicast(id, reinterpret_cast<sockaddr *>(&grp)), -1);
	EXPECT_EQ(errno, EADDRNOTAVAIL);
	rdma_destroy_id(id);
}

TEST_F(Ucma, JoinExChecksItsAttributes)
{
	rdma_cm_id *id;
	create(&id, RDMA_PS_UDP);
	sockaddr_in grp = ip4("239.1.1.3", 0);
	rdma_cm_join_mc_attr_ex a = {};
	a.addr = reinterpret_cast<sockaddr *>(&grp);
	a.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED;
	EXPECT_EQ(rdma_join_multicast_ex(id, &a, nullptr), -1);
	EXPECT_EQ(errno, ENOTSUP);
	a.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS;
	EXPECT_EQ(rdma_join_multicast_ex(id, &a, nullptr), -1);
	EXPECT_EQ(errno, EINVAL);
	a.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	a.join_flags = RDMA_MC_JOIN_FLAG_RESERVED;
	EXPECT_EQ(rdma_join_multicast_ex(id, &a, nullptr), -1);
	EXPECT_EQ(errno, EINVAL);
	a.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
	f().clear();
	ASSERT_EQ(rdma_join_multicast_ex(id, &a, nullptr), 0);
	if (ov::cm::af_ib_support()) {
		auto j = f().of(fake::JOIN_MCAST);
		ASSERT_EQ(j.size(), 1u);
		uint16_t flags;
		memcpy(&flags, j[0].payload.data() + 22, 2);
		EXPECT_EQ(flags, RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER);
	}
	rdma_destroy_id(id);
}

TEST_F(Ucma, MigrateWritesToTheNewChannel)
{
	rdma_cm_id *id;
	uint32_t h = create(&id);
	rdma_event_channel *ch2 = rdma_create_event_channel();
	ASSERT_NE(ch2, nullptr);
	ASSERT_EQ(rdma_migrate_id(id, ch2), 0);
	EXPECT_EQ(fake::masked(f().of(fake::MIGRATE_ID).back()), fake::migrate(h, static_cast<uint32_t>(kfd)));
	EXPECT_EQ(id->channel, ch2);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch2);
}

TEST_F(Ucma, NullArgumentsAreEinval)
{
	rdma_cm_id *id = nullptr;
	EXPECT_EQ(rdma_create_id(ch, nullptr, nullptr, RDMA_PS_TCP), -1);
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(rdma_destroy_id(nullptr), -1);
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(rdma_listen(nullptr, 1), -1);
	EXPECT_EQ(rdma_connect(nullptr, nullptr), -1);
	EXPECT_EQ(rdma_accept(nullptr, nullptr), -1);
	EXPECT_EQ(rdma_disconnect(nullptr), -1);
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(rdma_ack_cm_event(nullptr), -1);
	EXPECT_EQ(rdma_get_cm_event(nullptr, nullptr), -1);
	EXPECT_EQ(errno, EINVAL);
	create(&id);
	EXPECT_EQ(rdma_accept(id, nullptr), -1); // no QP and no parameters
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(rdma_disconnect(id), -1); // no device yet
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(rdma_get_request(id, &id), -1); // not an endpoint
	EXPECT_EQ(errno, EINVAL);
	rdma_destroy_id(id);
}

} // namespace

namespace {

std::string read_file(const char *path)
{
	std::string s;
	if (FILE *f = fopen(path, "r")) {
		char buf[512];
		size_t n;
		while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
			s.append(buf, n);
		fclose(f);
	}
	return s;
}

// Run by rdmacm_kernel_diagnostics with VERBS_LOG_LEVEL=3 and VERBS_LOG_FILE.
TEST_F(Ucma, DiagnosticsNameTheAddressAndTheReason)
{
	const char *path = getenv("VERBS_LOG_FILE");
	if (!path)
		GTEST_SKIP() << "needs VERBS_LOG_LEVEL=3 and VERBS_LOG_FILE";
	size_t before = read_file(path).size(); // the file is appended to
	rdma_cm_id *id;
	create(&id);
	f().fail_cmd = ov::cm::af_ib_support() ? fake::BIND : fake::BIND_IP;
	f().fail_errno = EADDRNOTAVAIL;
	sockaddr_in a = ip4("10.9.9.9", 0);
	EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr *>(&a)), -1);
	EXPECT_EQ(errno, EADDRNOTAVAIL); // logging keeps errno
	f().fail_cmd = ov::cm::af_ib_support() ? fake::RESOLVE_ADDR : fake::RESOLVE_IP;
	f().fail_errno = ENETUNREACH;
	sockaddr_in d = ip4("192.0.2.7", 9);
	EXPECT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr *>(&d), 100), -1);
	f().fail_cmd = -1;
	rdma_destroy_id(id);
	std::string log = read_file(path).substr(before);
	EXPECT_NE(log.find("librdmacm: bind to 10.9.9.9 failed: Cannot assign requested address\n"),
		  std::string::npos) << log;
	EXPECT_NE(log.find("librdmacm: resolving 192.0.2.7 failed: Network is unreachable\n"),
		  std::string::npos) << log;
}

} // namespace
