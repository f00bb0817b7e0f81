// RDMACM_1.4 (ABI target 64: rdma-core 64's rdma_write_cm_event(3),
// rdma_resolve_addrinfo(3), rdma_query_addrinfo(3)) through the public API,
// on ids the software CM serves (no kernel CM on the machine; with one, the
// ids are the kernel's and these need a kernel with ucma's WRITE_CM_EVENT).
// Runs in a private /dev/shm (private_shm.sh).
#include <rdma/rdma_cma.h>

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

namespace {

struct Got {
	int type = -1;
	int status = 0;
	uint64_t arg = 0;
	rdma_cm_id *id = nullptr;
};

// The next event within 3 s, acknowledged (type -1 when none came).
Got next(rdma_event_channel *ch)
{
	Got g;
	pollfd p{ch->fd, POLLIN, 0};
	if (poll(&p, 1, 3000) != 1)
		return g;
	rdma_cm_event *ev;
	if (rdma_get_cm_event(ch, &ev))
		return g;
	g.type = ev->event;
	g.status = ev->status;
	g.arg = ev->param.arg;
	g.id = ev->id;
	rdma_ack_cm_event(ev);
	return g;
}

bool pending(rdma_event_channel *ch)
{
	pollfd p{ch->fd, POLLIN, 0};
	return poll(&p, 1, 100) == 1;
}

class Rdmacm14 : public ::testing::Test {
protected:
	void SetUp() override
	{
		if (access("/dev/infiniband/rdma_cm", F_OK) == 0)
			GTEST_SKIP() << "a kernel CM serves the ids here";
		ch = rdma_create_event_channel();
		ASSERT_NE(ch, nullptr) << strerror(errno);
		ASSERT_EQ(0, rdma_create_id(ch, &id, this, RDMA_PS_TCP)) << strerror(errno);
	}
	void TearDown() override
	{
		if (id)
			EXPECT_EQ(0, rdma_destroy_id(id));
		if (ch)
			rdma_destroy_event_channel(ch);
	}
	static rdma_addrinfo numeric_hints()
	{
		rdma_addrinfo h{};
		h.ai_flags = RAI_NUMERICHOST;
		h.ai_port_space = RDMA_PS_TCP;
		return h;
	}
	rdma_event_channel *ch = nullptr;
	rdma_cm_id *id = nullptr;
};

TEST_F(Rdmacm14, UserEventCarriesStatusAndArgument)
{
	ASSERT_EQ(0, rdma_write_cm_event(id, RDMA_CM_EVENT_USER, 7, 0x1122334455667788ull));
	ASSERT_EQ(0, rdma_write_cm_event(id, RDMA_CM_EVENT_USER, -3, 0));
	Got g = next(ch);
	EXPECT_EQ(RDMA_CM_EVENT_USER, g.type);
	EXPECT_EQ(7, g.status);
	EXPECT_EQ(0x1122334455667788ull, g.arg);
	EXPECT_EQ(id, g.id);
	g = next(ch);
	EXPECT_EQ(RDMA_CM_EVENT_USER, g.type);
	EXPECT_EQ(-3, g.status);
	EXPECT_FALSE(pending(ch));
}

TEST_F(Rdmacm14, OnlyUserEventsMayBeWritten)
{
	for (auto e : {RDMA_CM_EVENT_ADDR_RESOLVED, RDMA_CM_EVENT_ADDRINFO_RESOLVED,
		       RDMA_CM_EVENT_INTERNAL}) {
		errno = 0;
		EXPECT_EQ(-1, rdma_write_cm_event(id, e, 0, 0));
		EXPECT_EQ(EINVAL, errno);
	}
	errno = 0;
	EXPECT_EQ(-1, rdma_write_cm_event(nullptr, RDMA_CM_EVENT_USER, 0, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_FALSE(pending(ch));
}

TEST_F(Rdmacm14, ResolveByNameReportsAnEventThenHandsTheResultOver)
{
	rdma_addrinfo h = numeric_hints();
	errno = 0;
	rdma_addrinfo *info = nullptr;
	EXPECT_EQ(-1, rdma_query_addrinfo(id, &info)); // nothing resolved yet
	EXPECT_EQ(ENOENT, errno);
	ASSERT_EQ(0, rdma_resolve_addrinfo(id, "127.0.0.1", "7471", &h)) << strerror(errno);
	errno = 0;
	EXPECT_EQ(-1, rdma_resolve_addrinfo(id, "127.0.0.1", "7471", &h)); // one at a time
	EXPECT_EQ(EBUSY, errno);
	Got g = next(ch);
	EXPECT_EQ(RDMA_CM_EVENT_ADDRINFO_RESOLVED, g.type);
	EXPECT_EQ(0, g.status);
	EXPECT_EQ(id, g.id);
	ASSERT_EQ(0, rdma_query_addrinfo(id, &info));
	ASSERT_NE(info, nullptr);
	ASSERT_NE(info->ai_dst_addr, nullptr);
	auto *sin = reinterpret_cast<sockaddr_in *>(info->ai_dst_addr);
	EXPECT_EQ(AF_INET, sin->sin_family);
	EXPECT_EQ(htons(7471), sin->sin_port);
	EXPECT_EQ(htonl(INADDR_LOOPBACK), sin->sin_addr.s_addr);
	rdma_freeaddrinfo(info);
	errno = 0;
	EXPECT_EQ(-1, rdma_query_addrinfo(id, &info)); // handed over once
	EXPECT_EQ(ENOENT, errno);
	EXPECT_EQ(-1, rdma_query_addrinfo(id, nullptr));
	EXPECT_EQ(EINVAL, errno);

	// A new resolution may start; destroying the id frees an unclaimed result.
	ASSERT_EQ(0, rdma_resolve_addrinfo(id, "127.0.0.1", "7472", &h));
	EXPECT_EQ(RDMA_CM_EVENT_ADDRINFO_RESOLVED, next(ch).type);
}

TEST_F(Rdmacm14, FailuresEndTheResolution)
{
	rdma_addrinfo h = numeric_hints();
	EXPECT_EQ(-1, rdma_resolve_addrinfo(id, "not-an-address", "7471", &h));
	h.ai_flags = RAI_SA | RAI_DNS;
	errno = 0;
	EXPECT_EQ(-1, rdma_resolve_addrinfo(id, nullptr, "7471", &h));
	EXPECT_EQ(EOPNOTSUPP, errno);
	h.ai_flags = RAI_SA;
	errno = 0;
	EXPECT_EQ(-1, rdma_resolve_addrinfo(id, nullptr, nullptr, &h));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(-1, rdma_resolve_addrinfo(id, "127.0.0.1", "7471", &h));
	EXPECT_EQ(EOPNOTSUPP, errno);
	errno = 0;
	EXPECT_EQ(-1, rdma_resolve_addrinfo(id, nullptr, "7471", &h)); // no SA to ask
	EXPECT_EQ(EOPNOTSUPP, errno);
	EXPECT_EQ(-1, rdma_getaddrinfo(nullptr, "7471", &h, nullptr));
	rdma_addrinfo *res = nullptr;
	errno = 0;
	EXPECT_EQ(-1, rdma_getaddrinfo(nullptr, "7471", &h, &res));
	EXPECT_EQ(EOPNOTSUPP, errno);
	EXPECT_FALSE(pending(ch));
	h = numeric_hints(); // none of the failures left a resolution behind
	ASSERT_EQ(0, rdma_resolve_addrinfo(id, "127.0.0.1", "7471", &h));
	EXPECT_EQ(RDMA_CM_EVENT_ADDRINFO_RESOLVED, next(ch).type);
	errno = 0;
	EXPECT_EQ(-1, rdma_resolve_addrinfo(nullptr, "127.0.0.1", "7471", &h));
	EXPECT_EQ(EINVAL, errno);
}

TEST(Rdmacm14Sync, ASynchronousIdHasTheResultOnReturn)
{
	if (access("/dev/infiniband/rdma_cm", F_OK) == 0)
		GTEST_SKIP() << "a kernel CM serves the ids here";
	rdma_cm_id *id = nullptr;
	ASSERT_EQ(0, rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP)) << strerror(errno);
	rdma_addrinfo h{};
	h.ai_flags = RAI_NUMERICHOST;
	h.ai_port_space = RDMA_PS_TCP;
	ASSERT_EQ(0, rdma_resolve_addrinfo(id, "127.0.0.1", "7471", &h));
	ASSERT_NE(id->event, nullptr);
	EXPECT_EQ(RDMA_CM_EVENT_ADDRINFO_RESOLVED, id->event->event);
	rdma_addrinfo *info = nullptr;
	ASSERT_EQ(0, rdma_query_addrinfo(id, &info));
	rdma_freeaddrinfo(info);
	EXPECT_EQ(0, rdma_destroy_id(id));
}

TEST(Rdmacm14Names, EventStrings)
{
	EXPECT_STREQ("RDMA_CM_EVENT_ADDRINFO_RESOLVED", rdma_event_str(RDMA_CM_EVENT_ADDRINFO_RESOLVED));
	EXPECT_STREQ("RDMA_CM_EVENT_ADDRINFO_ERROR", rdma_event_str(RDMA_CM_EVENT_ADDRINFO_ERROR));
	EXPECT_STREQ("UNKNOWN EVENT", rdma_event_str(RDMA_CM_EVENT_USER));
	EXPECT_STREQ("UNKNOWN EVENT", rdma_event_str(RDMA_CM_EVENT_INTERNAL));
	EXPECT_STREQ("RDMA_CM_EVENT_TIMEWAIT_EXIT", rdma_event_str(RDMA_CM_EVENT_TIMEWAIT_EXIT));
}

} // namespace
