// Address handles built from received completions (ibv_init_ah_from_wc(3),
// ibv_create_ah_from_wc(3)) and the Ethernet L2 address of a RoCE
// destination (ibv_resolve_eth_l2_from_gid, used by RoCE providers such as
// rxe when they create an AH).
//
// On RoCE the 40 bytes before the payload hold either an IB GRH (RoCE v1,
// next header 0x1b), an IPv6 header (RoCE v2 over IPv6, next header UDP), or,
// in its last 20 bytes, an IPv4 header (RoCE v2 over IPv4). The reply must
// leave from the GID the request was sent to, with the matching GID type.
#include "core/verbs/verbs.h"

#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/vlan.h>
#include <netlink/route/neighbour.h>

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <ifaddrs.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

namespace ov::verbs {

namespace {

constexpr uint8_t kIbNextHeader = 0x1b; // IB transport after a GRH (RoCE v1)
constexpr size_t kIpv4Offset = 20;      // IPv4 header sits in the GRH's last 20 bytes

uint16_t ipv4_header_checksum(const struct iphdr *hdr)
{
	const auto *words = reinterpret_cast<const uint16_t *>(hdr);
	uint32_t sum = 0;
	for (size_t i = 0; i < sizeof(*hdr) / 2; i++)
		sum += words[i];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return static_cast<uint16_t>(~sum);
}

// 4 for an IPv4 header, 6 for GRH/IPv6, -1 (errno EPROTONOSUPPORT) otherwise.
int grh_version(const struct ibv_grh *grh)
{
	const unsigned ip6_version = (be32toh(grh->version_tclass_flow) >> 28) & 0xf;
	struct iphdr ip4;
	memcpy(&ip4, reinterpret_cast<const char *>(grh) + kIpv4Offset, sizeof(ip4));

	if (ip6_version != 6) {
		if (ip4.version == 4)
			return 4;
		errno = EPROTONOSUPPORT;
		return -1;
	}
	// Both could match: an IPv4 header of length 5 with a valid checksum wins.
	if (ip4.ihl != 5)
		return 6;
	const uint16_t received = ip4.check;
	ip4.check = 0;
	return ipv4_header_checksum(&ip4) == received ? 4 : 6;
}

void ipv4_to_gid(uint32_t addr_be, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	gid->raw[10] = 0xff;
	gid->raw[11] = 0xff;
	memcpy(&gid->raw[12], &addr_be, 4);
}

int ah_from_ipv4(struct ibv_context *ctx, uint8_t port, struct ibv_ah_attr *ah,
		 const struct ibv_grh *grh)
{
	struct iphdr ip4;
	memcpy(&ip4, reinterpret_cast<const char *>(grh) + kIpv4Offset, sizeof(ip4));
	// A multicast destination is never one of our GIDs.
	if (IN_MULTICAST(be32toh(ip4.daddr))) {
		errno = EINVAL;
		return -1;
	}
	union ibv_gid our;
	ipv4_to_gid(ip4.daddr, &our);
	int index = find_gid_index(ctx, port, &our, IBV_GID_TYPE_SYSFS_ROCE_V2);
	if (index < 0)
		return index;
	ipv4_to_gid(ip4.saddr, &ah->grh.dgid);
	ah->grh.sgid_index = static_cast<uint8_t>(index);
	ah->grh.hop_limit = ip4.ttl;
	ah->grh.traffic_class = ip4.tos;
	return 0;
}

int ah_from_ipv6(struct ibv_context *ctx, uint8_t port, struct ibv_ah_attr *ah,
		 const struct ibv_grh *grh)
{
	if (grh->dgid.raw[0] == 0xff) {
		errno = EINVAL;
		return -1;
	}
	enum ibv_gid_type_sysfs type;
	if (grh->next_hdr == IPPROTO_UDP)
		type = IBV_GID_TYPE_SYSFS_ROCE_V2;
	else if (grh->next_hdr == kIbNextHeader)
		type = IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
	else {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	ah->grh.dgid = grh->sgid;
	int index = find_gid_index(ctx, port, &grh->dgid, type);
	if (index < 0)
		return index;
	ah->grh.sgid_index = static_cast<uint8_t>(index);
	ah->grh.hop_limit = grh->hop_limit;
	ah->grh.traffic_class = static_cast<uint8_t>((be32toh(grh->version_tclass_flow) >> 20) & 0xff);
	return 0;
}

} // namespace

int init_ah_from_wc(struct ibv_context *ctx, uint8_t port, struct ibv_wc *wc,
		    struct ibv_grh *grh, struct ibv_ah_attr *ah_attr) noexcept
{
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port;
	if (!(wc->wc_flags & IBV_WC_GRH))
		return 0;
	if (!grh) {
		errno = EINVAL;
		return -1;
	}
	ah_attr->grh.flow_label = be32toh(grh->version_tclass_flow) & 0xfffff;
	ah_attr->is_global = 1;
	switch (grh_version(grh)) {
	case 4:
		return ah_from_ipv4(ctx, port, ah_attr, grh);
	case 6:
		return ah_from_ipv6(ctx, port, ah_attr, grh);
	default:
		return -1;
	}
}

// ---- Ethernet L2 resolution ------------------------------------------------

namespace {

struct NlSock {
	struct nl_sock *sock = nullptr;
	~NlSock()
	{
		if (sock)
			nl_socket_free(sock);
	}
	bool open()
	{
		sock = nl_socket_alloc();
		return sock && nl_connect(sock, NETLINK_ROUTE) == 0;
	}
};

bool gid_is_ipv4_mapped(const union ibv_gid *gid)
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return memcmp(gid->raw, prefix, sizeof(prefix)) == 0;
}

// MAC from an fe80::/64 GID carrying a modified EUI-64 (xx:xx:xx:ff:fe:xx:xx:xx).
bool mac_from_link_local(const union ibv_gid *gid, uint8_t mac[6])
{
	if (gid->raw[0] != 0xfe || (gid->raw[1] & 0xc0) != 0x80 || gid->raw[11] != 0xff ||
	    gid->raw[12] != 0xfe)
		return false;
	mac[0] = gid->raw[8] ^ 2;
	mac[1] = gid->raw[9];
	mac[2] = gid->raw[10];
	mac[3] = gid->raw[13];
	mac[4] = gid->raw[14];
	mac[5] = gid->raw[15];
	return true;
}

bool mac_from_multicast(const union ibv_gid *gid, uint8_t mac[6])
{
	if (gid_is_ipv4_mapped(gid)) {
		if ((gid->raw[12] & 0xf0) != 0xe0)
			return false;
		mac[0] = 0x01;
		mac[1] = 0x00;
		mac[2] = 0x5e;
		mac[3] = gid->raw[13] & 0x7f;
		mac[4] = gid->raw[14];
		mac[5] = gid->raw[15];
		return true;
	}
	if (gid->raw[0] != 0xff)
		return false;
	mac[0] = 0x33;
	mac[1] = 0x33;
	memcpy(&mac[2], &gid->raw[12], 4);
	return true;
}

// The hardware address and VLAN id of interface ifindex.
int link_info(struct nl_sock *sock, int ifindex, uint8_t mac[6], uint16_t *vid, bool want_mac)
{
	struct rtnl_link *link = nullptr;
	if (rtnl_link_get_kernel(sock, ifindex, nullptr, &link) < 0 || !link)
		return -ENODEV;
	int ret = 0;
	if (vid)
		*vid = rtnl_link_is_vlan(link) ? static_cast<uint16_t>(rtnl_link_vlan_get_id(link))
					       : 0xffff;
	if (want_mac) {
		struct nl_addr *ll = rtnl_link_get_addr(link);
		if (ll && nl_addr_get_len(ll) == 6)
			memcpy(mac, nl_addr_get_binary_addr(ll), 6);
		else
			ret = -EINVAL;
	}
	rtnl_link_put(link);
	return ret;
}

// Interface index owning the local address, or 0.
int local_address_ifindex(int family, const void *addr)
{
	struct ifaddrs *list = nullptr;
	if (getifaddrs(&list))
		return 0;
	int found = 0;
	for (struct ifaddrs *it = list; it && !found; it = it->ifa_next) {
		if (!it->ifa_addr || it->ifa_addr->sa_family != family)
			continue;
		const void *mine = family == AF_INET
					   ? static_cast<const void *>(
						     &reinterpret_cast<struct sockaddr_in *>(it->ifa_addr)->sin_addr)
					   : static_cast<const void *>(
						     &reinterpret_cast<struct sockaddr_in6 *>(it->ifa_addr)->sin6_addr);
		if (!memcmp(mine, addr, family == AF_INET ? 4 : 16))
			found = static_cast<int>(if_nametoindex(it->ifa_name));
	}
	freeifaddrs(list);
	return found;
}

// Looks the neighbour up on ifindex; true with mac filled when reachable.
bool neighbour_mac(struct nl_sock *sock, int ifindex, int family, const void *addr, uint8_t mac[6])
{
	struct nl_cache *cache = nullptr;
	if (rtnl_neigh_alloc_cache(sock, &cache) < 0)
		return false;
	struct nl_addr *dst = nl_addr_build(family, addr, family == AF_INET ? 4 : 16);
	bool ok = false;
	if (dst) {
		struct rtnl_neigh *neigh = rtnl_neigh_get(cache, ifindex, dst);
		if (neigh) {
			struct nl_addr *ll = rtnl_neigh_get_lladdr(neigh);
			const int state = rtnl_neigh_get_state(neigh);
			if (ll && nl_addr_get_len(ll) == 6 &&
			    !(state & (NUD_INCOMPLETE | NUD_FAILED | NUD_NONE))) {
				memcpy(mac, nl_addr_get_binary_addr(ll), 6);
				ok = true;
			}
			rtnl_neigh_put(neigh);
		}
		nl_addr_put(dst);
	}
	nl_cache_free(cache);
	return ok;
}

// The kernel's route to addr (as "ip route get ADDR oif IFINDEX"): its
// type, outgoing interface and gateway. False when there is no route.
struct Route {
	unsigned char type = RTN_UNSPEC;
	int oif = 0;
	bool has_gateway = false;
	uint8_t gateway[16] = {};
};

bool route_lookup(struct nl_sock *sock, int family, const void *addr, int ifindex, Route *out)
{
	const size_t alen = family == AF_INET ? 4 : 16;
	struct nl_msg *msg = nlmsg_alloc_simple(RTM_GETROUTE, NLM_F_REQUEST);
	if (!msg)
		return false;
	struct rtmsg rtm = {};
	rtm.rtm_family = static_cast<unsigned char>(family);
	rtm.rtm_dst_len = static_cast<unsigned char>(alen * 8);
	bool ok = nlmsg_append(msg, &rtm, sizeof(rtm), NLMSG_ALIGNTO) == 0 &&
		  nla_put(msg, RTA_DST, static_cast<int>(alen), addr) == 0 &&
		  (ifindex <= 0 || nla_put_u32(msg, RTA_OIF, static_cast<uint32_t>(ifindex)) == 0) &&
		  nl_send_auto(sock, msg) >= 0;
	nlmsg_free(msg);
	if (!ok)
		return false;

	struct sockaddr_nl peer;
	unsigned char *buf = nullptr;
	int len = nl_recv(sock, &peer, &buf, nullptr);
	ok = false;
	if (len > 0) {
		auto *hdr = reinterpret_cast<struct nlmsghdr *>(buf);
		if (nlmsg_ok(hdr, len) && hdr->nlmsg_type == RTM_NEWROUTE) {
			struct nlattr *tb[RTA_MAX + 1] = {};
			if (nlmsg_parse(hdr, sizeof(struct rtmsg), tb, RTA_MAX, nullptr) == 0) {
				auto *r = static_cast<struct rtmsg *>(nlmsg_data(hdr));
				out->type = r->rtm_type;
				if (tb[RTA_OIF])
					out->oif = static_cast<int>(nla_get_u32(tb[RTA_OIF]));
				if (tb[RTA_GATEWAY] && nla_len(tb[RTA_GATEWAY]) == static_cast<int>(alen)) {
					out->has_gateway = true;
					memcpy(out->gateway, nla_data(tb[RTA_GATEWAY]), alen);
				}
				ok = true;
			}
		}
	}
	free(buf);
	return ok;
}

// Makes the kernel resolve the neighbour: one UDP datagram to the discard
// port, leaving through ifindex.
void kick_resolution(int ifindex, int family, const void *addr)
{
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	char name[IF_NAMESIZE];
	if (if_indextoname(static_cast<unsigned>(ifindex), name))
		setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, name, static_cast<socklen_t>(strlen(name)));
	if (family == AF_INET) {
		struct sockaddr_in sin = {};
		sin.sin_family = AF_INET;
		sin.sin_port = htons(9);
		memcpy(&sin.sin_addr, addr, 4);
		sendto(fd, "", 0, MSG_DONTWAIT, reinterpret_cast<struct sockaddr *>(&sin), sizeof(sin));
	} else {
		struct sockaddr_in6 sin6 = {};
		sin6.sin6_family = AF_INET6;
		sin6.sin6_port = htons(9);
		sin6.sin6_scope_id = static_cast<uint32_t>(ifindex);
		memcpy(&sin6.sin6_addr, addr, 16);
		sendto(fd, "", 0, MSG_DONTWAIT, reinterpret_cast<struct sockaddr *>(&sin6), sizeof(sin6));
	}
	close(fd);
}

} // namespace

int resolve_eth_l2_from_gid(struct ibv_context *ctx, struct ibv_ah_attr *attr, uint8_t eth_mac[6],
			    uint16_t *vid) noexcept
{
	if (!attr->is_global)
		return -EINVAL;

	struct ibv_gid_entry sgid;
	memset(&sgid, 0, sizeof(sgid));
	int ret = query_gid_ex(ctx, attr->port_num, attr->grh.sgid_index, &sgid, 0, sizeof(sgid),
			       VERBS_QUERY_GID_ATTR_GID | VERBS_QUERY_GID_ATTR_NDEV_IFINDEX);
	if (ret)
		return ret > 0 ? -ret : ret;
	const int ifindex = static_cast<int>(sgid.ndev_ifindex);

	NlSock nl;
	if (!nl.open())
		return -ENOMEM;

	*vid = 0xffff;
	if (ifindex > 0)
		link_info(nl.sock, ifindex, eth_mac, vid, false);

	const union ibv_gid *dgid = &attr->grh.dgid;
	if (mac_from_multicast(dgid, eth_mac) || mac_from_link_local(dgid, eth_mac))
		return 0;
	if (ifindex <= 0)
		return -EINVAL;

	int family;
	uint8_t addr[16];
	if (gid_is_ipv4_mapped(dgid)) {
		family = AF_INET;
		memcpy(addr, &dgid->raw[12], 4);
	} else {
		family = AF_INET6;
		memcpy(addr, dgid->raw, 16);
	}

	// A destination on this host answers with the owning interface's MAC.
	int local = local_address_ifindex(family, addr);
	if (local > 0)
		return link_info(nl.sock, local, eth_mac, nullptr, true);

	// Through a router the frame goes to the gateway's MAC.
	Route route;
	int out_if = ifindex;
	uint8_t hop[16];
	memcpy(hop, addr, sizeof(hop));
	if (route_lookup(nl.sock, family, addr, ifindex, &route)) {
		if (route.type == RTN_LOCAL)
			return link_info(nl.sock, route.oif > 0 ? route.oif : ifindex, eth_mac, nullptr, true);
		if (route.type != RTN_UNICAST)
			return -EHOSTUNREACH;
		if (route.oif > 0)
			out_if = route.oif;
		if (route.has_gateway)
			memcpy(hop, route.gateway, sizeof(hop));
	}

	if (neighbour_mac(nl.sock, out_if, family, hop, eth_mac))
		return 0;
	kick_resolution(out_if, family, addr);
	// Wait up to about a second for the neighbour entry to appear.
	for (int i = 0; i < 50; i++) {
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, nullptr);
		if (neighbour_mac(nl.sock, out_if, family, hop, eth_mac))
			return 0;
	}
	return -EHOSTUNREACH;
}

} // namespace ov::verbs
