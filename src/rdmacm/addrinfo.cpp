// rdma_getaddrinfo (rdma-core 44 addrinfo.c): getaddrinfo(3) translated into
// the CM's terms (QP type, port space), plus a route from the ibacm service
// when it runs. Without ibacm (its socket absent) no route is attached and
// rdma_resolve_route asks the kernel, as rdma-core does.
#include "cm.h"
#include "log.h"

#include <infiniband/ib.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <netdb.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

namespace ov::cm {
namespace {

int copy_addr(sockaddr **dst, socklen_t *dst_len, const sockaddr *src, size_t len) noexcept
{
	*dst = static_cast<sockaddr *>(malloc(len));
	if (!*dst)
		return fail(ENOMEM);
	memcpy(*dst, src, len);
	*dst_len = static_cast<socklen_t>(len);
	return 0;
}

void to_ai(addrinfo &ai, const rdma_addrinfo &rai) noexcept
{
	memset(&ai, 0, sizeof(ai));
	if (rai.ai_flags & RAI_PASSIVE)
		ai.ai_flags = AI_PASSIVE;
	if (rai.ai_flags & RAI_NUMERICHOST)
		ai.ai_flags |= AI_NUMERICHOST;
	if (rai.ai_family != AF_IB)
		ai.ai_family = rai.ai_family;
	switch (rai.ai_qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		ai.ai_socktype = SOCK_STREAM;
		break;
	case IBV_QPT_UD:
		ai.ai_socktype = SOCK_DGRAM;
		break;
	default:
		break;
	}
	switch (rai.ai_port_space) {
	case RDMA_PS_TCP:
		ai.ai_protocol = IPPROTO_TCP;
		break;
	case RDMA_PS_IPOIB:
	case RDMA_PS_UDP:
		ai.ai_protocol = IPPROTO_UDP;
		break;
	case RDMA_PS_IB:
		if (ai.ai_socktype == SOCK_STREAM)
			ai.ai_protocol = IPPROTO_TCP;
		else if (ai.ai_socktype == SOCK_DGRAM)
			ai.ai_protocol = IPPROTO_UDP;
		break;
	default:
		break;
	}
	if (rai.ai_flags & RAI_PASSIVE) {
		ai.ai_addrlen = rai.ai_src_len;
		ai.ai_addr = rai.ai_src_addr;
	} else {
		ai.ai_addrlen = rai.ai_dst_len;
		ai.ai_addr = rai.ai_dst_addr;
	}
	ai.ai_canonname = rai.ai_dst_canonname;
}

// An IP address as AF_IB: the IPv4-mapped or IPv6 address as the GID, the
// port space and port as the service ID.
int to_ib(sockaddr **dst, socklen_t *dst_len, const sockaddr *src, int ps) noexcept
{
	auto *sib = static_cast<sockaddr_ib *>(calloc(1, sizeof(sockaddr_ib)));
	if (!sib)
		return fail(ENOMEM);
	sib->sib_family = AF_IB;
	sib->sib_pkey = htobe16(0xffff);
	uint16_t port = 0;
	if (src->sa_family == AF_INET) {
		auto *sin = reinterpret_cast<const sockaddr_in *>(src);
		ib_addr_set(&sib->sib_addr, 0, 0, htobe32(0xffff), sin->sin_addr.s_addr);
		port = be16toh(sin->sin_port);
	} else {
		auto *sin6 = reinterpret_cast<const sockaddr_in6 *>(src);
		memcpy(&sib->sib_addr, &sin6->sin6_addr, 16);
		port = be16toh(sin6->sin6_port);
		sib->sib_flowinfo = sin6->sin6_flowinfo;
		sib->sib_scope_id = sin6->sin6_scope_id;
	}
	uint64_t sid = (ps == RDMA_PS_UDP ? RDMA_IB_IP_PS_UDP : RDMA_IB_IP_PS_TCP) | port;
	sib->sib_sid = htobe64(sid);
	sib->sib_sid_mask = htobe64(port ? ~0ULL : RDMA_IB_IP_PS_MASK);
	*dst = reinterpret_cast<sockaddr *>(sib);
	*dst_len = sizeof(sockaddr_ib);
	return 0;
}

int to_rai(rdma_addrinfo &rai, const rdma_addrinfo &hints, const addrinfo &ai) noexcept
{
	if (hints.ai_qp_type) {
		rai.ai_qp_type = hints.ai_qp_type;
	} else if (ai.ai_socktype == SOCK_STREAM) {
		rai.ai_qp_type = IBV_QPT_RC;
	} else if (ai.ai_socktype == SOCK_DGRAM) {
		rai.ai_qp_type = IBV_QPT_UD;
	}
	if (hints.ai_port_space) {
		rai.ai_port_space = hints.ai_port_space;
	} else if (ai.ai_protocol == IPPROTO_TCP) {
		rai.ai_port_space = RDMA_PS_TCP;
	} else if (ai.ai_protocol == IPPROTO_UDP) {
		rai.ai_port_space = RDMA_PS_UDP;
	}
	bool passive = hints.ai_flags & RAI_PASSIVE;
	sockaddr **addr = passive ? &rai.ai_src_addr : &rai.ai_dst_addr;
	socklen_t *len = passive ? &rai.ai_src_len : &rai.ai_dst_len;
	char **canon = passive ? &rai.ai_src_canonname : &rai.ai_dst_canonname;
	if (hints.ai_family == AF_IB && (hints.ai_flags & RAI_FAMILY)) {
		if (to_ib(addr, len, ai.ai_addr, rai.ai_port_space))
			return -1;
		rai.ai_family = AF_IB;
	} else {
		if (copy_addr(addr, len, ai.ai_addr, ai.ai_addrlen))
			return -1;
		rai.ai_family = ai.ai_family;
	}
	if (ai.ai_canonname) {
		*canon = strdup(ai.ai_canonname);
		if (!*canon)
			return fail(ENOMEM);
	}
	return 0;
}

// ibacm: rdma-core asks the service for a route when it runs; here it is
// only detected. With the service absent (its socket missing or refusing)
// nothing is attached, exactly as rdma-core then does. rdma_resolve_route
// asks on every call (rdma-core's ucma_set_ib_route), so the answer is kept
// for a second: the service may start (or stop) later, and is seen within a
// second of it, without a socket and a connect per connection.
constexpr uint64_t kIbacmRecheckNs = 1000000000ull;

uint64_t monotonic_ns() noexcept
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

bool probe_ibacm(const char *path) noexcept
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	sockaddr_un un = {};
	un.sun_family = AF_UNIX;
	strncpy(un.sun_path, path, sizeof(un.sun_path) - 1);
	bool up = ::connect(fd, reinterpret_cast<sockaddr *>(&un), sizeof(un)) == 0;
	close(fd);
	return up;
}

void ib_resolve(rdma_addrinfo &, const rdma_addrinfo &) noexcept
{
	static const char *const kSocket = "/run/ibacm-unix.sock";
	// 0: never probed; else the time of the next probe. Racing threads may
	// both probe: harmless.
	static std::atomic<uint64_t> next_probe{0};
	static std::atomic<bool> running{false};
	uint64_t now = monotonic_ns();
	uint64_t next = next_probe.load(std::memory_order_acquire);
	if (next && now < next)
		return;
	bool up = probe_ibacm(kSocket);
	bool was = running.exchange(up, std::memory_order_relaxed);
	next_probe.store(now + kIbacmRecheckNs, std::memory_order_release);
	if (up && (!was || !next))
		log::info("ibacm runs (%s) but its path queries are not used: the kernel resolves "
			  "routes",
			  kSocket);
}

} // namespace

int getaddrinfo(const char *node, const char *service, const rdma_addrinfo *hints,
		rdma_addrinfo **res) noexcept
{
	static const rdma_addrinfo nohints = {};
	if (!service && !node && !hints)
		return fail(EINVAL);
	if (!res)
		return fail(EINVAL);
	if (init())
		return -1;
#if _OPENVERBS_ABI >= 64
	// rdma-core 64's RAI_SA asks the subnet administrator for the service's
	// records; no CM of this library asks an SA (rdma_getaddrinfo(3)).
	if (hints && (hints->ai_flags & RAI_SA))
		return fail(EOPNOTSUPP);
#endif
	auto *rai = static_cast<rdma_addrinfo *>(calloc(1, sizeof(rdma_addrinfo)));
	if (!rai)
		return fail(ENOMEM);
	if (!hints)
		hints = &nohints;
	int ret = 0;
	if (node || service) {
		addrinfo aih, *ai = nullptr;
		if (hints != &nohints) {
			to_ai(aih, *hints);
			ret = ::getaddrinfo(node, service, &aih, &ai);
		} else {
			ret = ::getaddrinfo(node, service, nullptr, &ai);
		}
		if (ret) {
			// rdma-core returns getaddrinfo's EAI_* code itself.
			log::info("getaddrinfo(%s, %s): %s", node ? node : "-", service ? service : "-",
				  gai_strerror(ret));
			freeaddrinfo(rai);
			return ret;
		}
		rai->ai_flags = hints->ai_flags;
		ret = to_rai(*rai, *hints, *ai);
		::freeaddrinfo(ai);
	} else {
		rai->ai_flags = hints->ai_flags;
		rai->ai_family = hints->ai_family;
		rai->ai_qp_type = hints->ai_qp_type;
		rai->ai_port_space = hints->ai_port_space;
		if (hints->ai_dst_len)
			ret = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, hints->ai_dst_addr,
					hints->ai_dst_len);
	}
	if (!ret && !rai->ai_src_len && hints->ai_src_len)
		ret = copy_addr(&rai->ai_src_addr, &rai->ai_src_len, hints->ai_src_addr,
				hints->ai_src_len);
	if (ret) {
		int err = errno;
		freeaddrinfo(rai);
		return fail(err);
	}
	if (!(rai->ai_flags & RAI_PASSIVE))
		ib_resolve(*rai, *hints);
	*res = rai;
	return 0;
}

void freeaddrinfo(rdma_addrinfo *res) noexcept
{
	while (res) {
		rdma_addrinfo *next = res->ai_next;
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}

} // namespace ov::cm
