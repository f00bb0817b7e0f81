// rdma_getaddrinfo (and so rdma_resolve_route, which asks it on every call)
// probes the ibacm service's socket at most once a second, and again after
// that (the service may start later): the library's connect(2) calls are
// counted by this executable's own connect, which ELF symbol interposition
// puts before libc's for the library too.
#include <rdma/rdma_cma.h>

#include <atomic>
#include <cstring>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace {
std::atomic<int> g_ibacm_connects{0};
constexpr const char *kIbacm = "/run/ibacm-unix.sock";
} // namespace

extern "C" int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	using Fn = int (*)(int, const struct sockaddr *, socklen_t);
	static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "connect"));
	if (addr && addr->sa_family == AF_UNIX &&
	    strcmp(reinterpret_cast<const sockaddr_un *>(addr)->sun_path, kIbacm) == 0)
		g_ibacm_connects++;
	return real(fd, addr, len);
}

namespace {

void resolve_n(int n)
{
	for (int i = 0; i < n; i++) {
		rdma_addrinfo hints = {}, *res = nullptr;
		hints.ai_port_space = RDMA_PS_TCP;
		ASSERT_EQ(rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res), 0);
		rdma_freeaddrinfo(res);
	}
}

TEST(IbacmProbe, AtMostOncePerSecond)
{
	resolve_n(1);
	int first = g_ibacm_connects.load();
	EXPECT_EQ(first, 1);
	resolve_n(200);
	EXPECT_EQ(g_ibacm_connects.load(), first) << "probed again within a second";
	usleep(1100 * 1000);
	resolve_n(50);
	EXPECT_EQ(g_ibacm_connects.load(), first + 1) << "not probed again after a second";
}

TEST(IbacmProbe, PassiveLookupsNeverProbe)
{
	int before = g_ibacm_connects.load();
	usleep(1100 * 1000);
	for (int i = 0; i < 5; i++) {
		rdma_addrinfo hints = {}, *res = nullptr;
		hints.ai_flags = RAI_PASSIVE;
		hints.ai_port_space = RDMA_PS_TCP;
		ASSERT_EQ(rdma_getaddrinfo(nullptr, "7471", &hints, &res), 0);
		rdma_freeaddrinfo(res);
	}
	EXPECT_EQ(g_ibacm_connects.load(), before);
}

} // namespace
