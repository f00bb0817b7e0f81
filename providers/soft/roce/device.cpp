// RoCE v2 software device: the interface it sits on (index, MAC, MTU,
// addresses as GIDs), its UDP socket and receive thread, and the verbs whose
// answers differ from the shared-memory device's (port, device attributes,
// GIDs, address handles, QP creation and transitions).
#include "roce.h"
#include "../log.h"
#include "../objects.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ifaddrs.h>
#include <linux/rtnetlink.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <net/if.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ovsoft {

uint32_t roce_mtu_bytes(enum ibv_mtu m)
{
	switch (m) {
	case IBV_MTU_256: return 256;
	case IBV_MTU_512: return 512;
	case IBV_MTU_1024: return 1024;
	case IBV_MTU_2048: return 2048;
	case IBV_MTU_4096: return 4096;
	}
	return 256;
}

// Largest IB MTU whose biggest packet (IPv6 40, UDP 8, BTH 12, RETH 16,
// ImmDt 4, ICRC 4 bytes of headers around it) fits the interface MTU.
static enum ibv_mtu ib_mtu_for(uint32_t if_mtu)
{
	const uint32_t overhead = 40 + 8 + 12 + 16 + 4 + 4;
	enum ibv_mtu m = IBV_MTU_256;
	for (int e = IBV_MTU_4096; e >= IBV_MTU_256; e--)
		if (roce_mtu_bytes(static_cast<enum ibv_mtu>(e)) + overhead <= if_mtu) {
			m = static_cast<enum ibv_mtu>(e);
			break;
		}
	return m;
}

// ------------------------------------------------------------------ device

// Takes `mtu`, the interface's MTU read at `now`: the port's active MTU follows.
static void store_mtu(RoceCtx *rc, uint32_t mtu, uint64_t now)
{
	uint32_t was = rc->if_mtu.load(std::memory_order_relaxed);
	if (was && mtu != was)
		softlog(3, "%s: MTU %u -> %u (IB %u)", rc->ifname, was, mtu, roce_mtu_bytes(ib_mtu_for(mtu)));
	rc->if_mtu.store(mtu, std::memory_order_relaxed);
	rc->active_mtu.store(ib_mtu_for(mtu), std::memory_order_relaxed);
	rc->mtu_read_ns.store(now, std::memory_order_relaxed);
}

struct verbs_device *roce_alloc_device(struct verbs_sysfs_dev *sysfs_dev)
{
	const char *name = sysfs_dev->ibdev_name;
	size_t pl = strlen(OPENVERBS_SOFT_ROCE_NAME);
	const char *alias = sysfs_dev->modalias;
	size_t al = strlen(OPENVERBS_SOFT_ROCE_MODALIAS);
	char *end = nullptr;
	long n = -1;
	if (strncmp(name, OPENVERBS_SOFT_ROCE_NAME, pl) == 0 && name[pl])
		n = strtol(name + pl, &end, 10);
	if (n < 0 || n >= OPENVERBS_MAX_SOFT_ROCE || !end || *end ||
	    strncmp(alias, OPENVERBS_SOFT_ROCE_MODALIAS, al) != 0 || !alias[al] ||
	    strlen(alias + al) >= sizeof(SoftDevice::roce_if)) {
		softlog(2, "%s is not a RoCE software device entry (sroce0..sroce%d on an interface)",
			name, OPENVERBS_MAX_SOFT_ROCE - 1);
		errno = EINVAL;
		return nullptr;
	}
	auto *dev = static_cast<SoftDevice *>(calloc(1, sizeof(SoftDevice)));
	if (!dev) {
		errno = ENOMEM;
		return nullptr;
	}
	dev->index = kRoceIndexBase + int(n);
	snprintf(dev->roce_if, sizeof(dev->roce_if), "%s", alias + al);
	return &dev->vdev;
}

// The segment of a RoCE device is the interface's, in this network
// namespace: every process of the user that opens a device on the same
// interface shares it (one key and QP number space, as one NIC).
int roce_segment_name(const SoftDevice *dev, char *buf, size_t len)
{
	struct stat st;
	if (stat("/proc/self/ns/net", &st) != 0)
		return errno;
	unsigned idx = if_nametoindex(dev->roce_if);
	if (!idx) {
		softlog(1, "sroce%d: no network interface %s in this namespace",
			dev->index - kRoceIndexBase, dev->roce_if);
		return ENODEV;
	}
	snprintf(buf, len, "sroce-%llu-%u", (unsigned long long)st.st_ino, idx);
	return 0;
}

static void eui64(const uint8_t mac[6], uint8_t *out)
{
	out[0] = mac[0] ^ 2;
	out[1] = mac[1];
	out[2] = mac[2];
	out[3] = 0xff;
	out[4] = 0xfe;
	out[5] = mac[3];
	out[6] = mac[4];
	out[7] = mac[5];
}

// The interface is up and running (IFF_UP, IFF_RUNNING: carrier, and the
// operational state the kernel's link watch sets).
static bool link_up(int s, const char *ifname)
{
	struct ifreq ifr = {};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	return ioctl(s, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags & IFF_UP) &&
	       (ifr.ifr_flags & IFF_RUNNING);
}

// Interface facts: MTU, MAC (and the EUI-64 node GUID), up and running.
static int read_interface(RoceCtx *rc)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return errno;
	struct ifreq ifr = {};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", rc->ifname);
	int rc_mtu = ioctl(s, SIOCGIFMTU, &ifr);
	store_mtu(rc, rc_mtu == 0 ? uint32_t(ifr.ifr_mtu) : 1500, now_ns());
	memset(&ifr.ifr_ifru, 0, sizeof(ifr.ifr_ifru));
	if (ioctl(s, SIOCGIFHWADDR, &ifr) == 0)
		memcpy(rc->mac, ifr.ifr_hwaddr.sa_data, 6);
	rc->link_up = link_up(s, rc->ifname);
	close(s);
	uint8_t e[8];
	eui64(rc->mac, e);
	rc->guid = 0;
	for (int i = 0; i < 8; i++)
		rc->guid = (rc->guid << 8) | e[i];
	return 0;
}

// The GIDs the interface's addresses give, in table order: the default GID
// fe80::EUI-64 (as every RoCE device has), each IPv4 address (IPv4-mapped),
// the other IPv6 addresses; all RoCE v2. Returns how many (at most max).
static uint32_t interface_gids(const RoceCtx *rc, RoceGid *out, uint32_t max)
{
	uint32_t n = 0;
	RoceGid d = {};
	d.gid.raw[0] = 0xfe;
	d.gid.raw[1] = 0x80;
	eui64(rc->mac, d.gid.raw + 8);
	d.valid = true;
	out[n++] = d;
	struct ifaddrs *ifa = nullptr;
	if (getifaddrs(&ifa) != 0)
		return n; // the default GID alone
	for (int pass = 0; pass < 2; pass++) {
		for (struct ifaddrs *a = ifa; a; a = a->ifa_next) {
			if (!a->ifa_addr || strcmp(a->ifa_name, rc->ifname) != 0 || n >= max)
				continue;
			RoceGid g = {};
			g.valid = true;
			if (pass == 0 && a->ifa_addr->sa_family == AF_INET) {
				auto *sin = reinterpret_cast<struct sockaddr_in *>(a->ifa_addr);
				g.gid.raw[10] = g.gid.raw[11] = 0xff;
				memcpy(g.gid.raw + 12, &sin->sin_addr, 4);
				g.v4 = true;
			} else if (pass == 1 && a->ifa_addr->sa_family == AF_INET6) {
				auto *sin6 = reinterpret_cast<struct sockaddr_in6 *>(a->ifa_addr);
				memcpy(g.gid.raw, &sin6->sin6_addr, 16);
				if (memcmp(g.gid.raw, d.gid.raw, 16) == 0)
					continue;
			} else {
				continue;
			}
			out[n++] = g;
		}
	}
	freeifaddrs(ifa);
	return n;
}

// Brings the GID table up to date with the interface's addresses, keeping
// every GID that is still there at its index (QPs and AHs name them by
// index, as with a kernel device): a removed address leaves an empty slot,
// a new one takes the first empty slot. At most once a second unless forced.
// Takes rc->lock.
void roce_refresh_gids(RoceCtx *rc, bool force)
{
	uint64_t now = now_ns();
	if (!force && now - rc->gids_read_ns.load(std::memory_order_relaxed) < 1000000000ull)
		return;
	RoceGid fresh[kRoceMaxGids];
	uint32_t n = interface_gids(rc, fresh, kRoceMaxGids);
	pthread_mutex_lock(&rc->lock);
	rc->gids_read_ns.store(now, std::memory_order_relaxed);
	bool seen[kRoceMaxGids] = {};
	for (uint32_t i = 0; i < rc->ngids; i++) {
		RoceGid &g = rc->gids[i];
		bool still = false;
		for (uint32_t j = 0; j < n && !still; j++)
			if (!seen[j] && memcmp(fresh[j].gid.raw, g.gid.raw, 16) == 0)
				still = seen[j] = true;
		if (g.valid && !still)
			g = RoceGid{}; // gone: an empty slot
	}
	for (uint32_t j = 0; j < n; j++) {
		if (seen[j])
			continue;
		uint32_t slot = 0;
		while (slot < kRoceMaxGids && slot < rc->ngids && rc->gids[slot].valid)
			slot++;
		if (slot >= kRoceMaxGids)
			break;
		rc->gids[slot] = fresh[j];
		if (slot >= rc->ngids)
			rc->ngids = slot + 1;
	}
	while (rc->ngids && !rc->gids[rc->ngids - 1].valid)
		rc->ngids--;
	pthread_mutex_unlock(&rc->lock);
}

enum ibv_mtu roce_refresh_mtu(RoceCtx *rc, bool force)
{
	uint64_t now = now_ns();
	if ((force || now - rc->mtu_read_ns.load(std::memory_order_relaxed) >= 1000000000ull) &&
	    rc->fd >= 0) {
		struct ifreq ifr = {};
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", rc->ifname);
		if (ioctl(rc->fd, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0)
			store_mtu(rc, uint32_t(ifr.ifr_mtu), now);
		else
			rc->mtu_read_ns.store(now, std::memory_order_relaxed);
	}
	return rc->active_mtu.load(std::memory_order_relaxed);
}

static int open_socket(RoceCtx *rc)
{
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	int zero = 0, one = 1, pmtu = IP_PMTUDISC_DO, pmtu6 = IPV6_PMTUDISC_DO;
	setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one));
	setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
	// Don't Fragment, never fragmented: with an unconnected socket Linux
	// then writes IPv4 identification 0, which our ICRC assumes.
	setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu6, sizeof(pmtu6));
	// net.core.rmem_max caps SO_RCVBUF; with CAP_NET_ADMIN the buffer may
	// exceed it (SO_RCVBUFFORCE, refused with EPERM otherwise). A peer that
	// sends more than the buffer holds before it waits for an ACK (kernel
	// rxe: 128 packets) loses the rest and sends them again.
	int buf = 4 << 20;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)) != 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	// UDP GRO: a GSO train from a peer of ours arrives whole, one datagram
	// for up to 64 packets (the receive path cuts it: transport.cpp,
	// roce_drain); without it the kernel cuts trains into datagrams.
	// OPENVERBS_SOFT_ROCE_OFFLOAD=0 turns both off (comparisons, and a route
	// that mishandles them); ignored in setuid programs.
	const char *off = secure_getenv("OPENVERBS_SOFT_ROCE_OFFLOAD");
	bool offload = !off || strcmp(off, "0") != 0;
	rc->gso = offload;
	rc->gro = offload && setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)) == 0;
	softlog(4, "%s: ICRC computed with %s's CRC-32", rc->ifname, ovroce::crc_name());
	// One socket per interface: bound to the device, so that each
	// interface of a namespace can have its own port 4791 (Linux 5.7 and
	// later allow this without privileges).
	if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, rc->ifname, socklen_t(strlen(rc->ifname))) !=
	    0)
		softlog(2, "%s: SO_BINDTODEVICE: %s; the socket takes port %u on every interface",
			rc->ifname, strerror(errno), ovroce::kRoceV2Port);
	// Every process of the user that opens the device binds the port
	// (share.cpp: the kernel admits only sockets of one user to the group;
	// datagrams for another process's QPs are handed on).
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	struct sockaddr_in6 a = {};
	a.sin6_family = AF_INET6;
	a.sin6_port = htons(ovroce::kRoceV2Port);
	a.sin6_addr = in6addr_any;
	if (bind(fd, reinterpret_cast<struct sockaddr *>(&a), sizeof(a)) != 0) {
		int e = errno;
		if (e == EADDRINUSE)
			softlog(1, "%s: UDP port %u is in use on this interface (by the kernel's rxe, "
				   "or by another user's process)",
				rc->ifname, ovroce::kRoceV2Port);
		else
			softlog(1, "%s: cannot bind UDP port %u: %s", rc->ifname, ovroce::kRoceV2Port,
				strerror(e));
		close(fd);
		return e;
	}
	rc->fd = fd;
	// Packets in flight per QP: what the receive buffer the kernel granted
	// (net.core.rmem_max caps it) holds four times over, counting each
	// datagram of the path MTU at its size rounded up to whole pages plus
	// the buffer's overhead (the kernel charges a datagram's truesize), so
	// that a peer's full window and the other traffic of the socket never
	// overflow it.
	int granted = 0;
	socklen_t gl = sizeof(granted);
	getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &granted, &gl);
	// (Sized for the MTU at open: an MTU raised later, up to the largest
	// IB MTU, at most doubles a datagram's charge, inside the margin.)
	uint32_t per = (roce_mtu_bytes(rc->active_mtu.load()) + 256 + 4095) / 4096 * 4096 + 512;
	rc->window = std::clamp<uint32_t>(uint32_t(granted) / (4 * per), 8, kRoceMaxWindow);
	return 0;
}

// The transports of this process, one per device and network namespace:
// a second context of the same device (a program that opens the device and
// then lets librdmacm open it too, as perftest -R does) shares the first's
// socket, receive thread and QP table (QP slots come from the device's one
// segment, so they never collide).
static pthread_mutex_t g_roce_lock = PTHREAD_MUTEX_INITIALIZER;
static RoceCtx *g_roce = nullptr;

static uint64_t netns_inode()
{
	struct stat st;
	return stat("/proc/self/ns/net", &st) == 0 ? uint64_t(st.st_ino) : 0;
}

static int roce_open_new(SoftContext *ctx, const SoftDevice *dev, uint64_t netns);

// A context starts or stops receiving rc's port events (roce_port_events).
// False when rc already serves as many contexts as it can tell (the
// context then gets no port events; a diagnostic says so).
static bool ctx_add(RoceCtx *rc, SoftContext *ctx)
{
	pthread_mutex_lock(&rc->ctx_lock);
	bool ok = rc->nctxs < sizeof(rc->ctxs) / sizeof(rc->ctxs[0]);
	if (ok)
		rc->ctxs[rc->nctxs++] = ctx;
	pthread_mutex_unlock(&rc->ctx_lock);
	if (!ok)
		softlog(2, "%s: more than %zu contexts: this one gets no port events", rc->ifname,
			sizeof(rc->ctxs) / sizeof(rc->ctxs[0]));
	return ok;
}

static void ctx_remove(RoceCtx *rc, SoftContext *ctx)
{
	pthread_mutex_lock(&rc->ctx_lock);
	for (uint32_t i = 0; i < rc->nctxs; i++)
		if (rc->ctxs[i] == ctx) {
			rc->ctxs[i] = rc->ctxs[--rc->nctxs];
			break;
		}
	pthread_mutex_unlock(&rc->ctx_lock);
}

// Tells every context of rc that port 1 went up or down (the receive
// thread, when the interface's link messages say its state changed).
void roce_port_event(RoceCtx *rc, bool up)
{
	softlog(3, "%s: port 1 %s (the interface is %s)", rc->ifname, up ? "active" : "down",
		up ? "up and running" : "down or without carrier");
	pthread_mutex_lock(&rc->ctx_lock);
	for (uint32_t i = 0; i < rc->nctxs; i++) {
		SoftContext *c = rc->ctxs[i];
		async_notify(c->seg, self_pid(), c->vctx.context.async_fd, c->async_ino, 1,
			     up ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR);
	}
	pthread_mutex_unlock(&rc->ctx_lock);
}

// libnl's callback for each link message: a new state of rc's interface
// (RTM_NEWLINK: IFF_UP and IFF_RUNNING; RTM_DELLINK: gone) is kept in
// rc->link_up and told to the contexts when it differs from the last.
static int link_message(struct nl_msg *msg, void *arg)
{
	auto *rc = static_cast<RoceCtx *>(arg);
	struct nlmsghdr *h = nlmsg_hdr(msg);
	if (h->nlmsg_type != RTM_NEWLINK && h->nlmsg_type != RTM_DELLINK)
		return NL_OK;
	if (!nlmsg_valid_hdr(h, int(sizeof(struct ifinfomsg)))) {
		rc->link_msgs_bad++;
		softlog(3, "%s: a link message of %u bytes, too short: dropped", rc->ifname,
			unsigned(h->nlmsg_len));
		return NL_OK;
	}
	auto *ifi = static_cast<const struct ifinfomsg *>(nlmsg_data(h));
	if (ifi->ifi_index != rc->ifindex)
		return NL_OK;
	int up = h->nlmsg_type == RTM_NEWLINK && (ifi->ifi_flags & IFF_UP) &&
		 (ifi->ifi_flags & IFF_RUNNING);
	if (up != rc->link_up) {
		rc->link_up = up;
		roce_port_event(rc, up != 0);
	}
	return NL_OK;
}

// The receive thread's link-message socket (nullptr: none could be made;
// no port events then).
static ::nl_sock *open_link_watch(RoceCtx *rc)
{
	::nl_sock *sk = nl_socket_alloc();
	if (!sk)
		return nullptr;
	nl_socket_disable_seq_check(sk);
	if (nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, link_message, rc) < 0 ||
	    nl_connect(sk, NETLINK_ROUTE) < 0 || nl_socket_add_membership(sk, RTNLGRP_LINK) < 0 ||
	    nl_socket_set_nonblocking(sk) < 0) {
		softlog(2, "%s: no NETLINK_ROUTE socket for link messages: no port events",
			rc->ifname);
		nl_socket_free(sk);
		return nullptr;
	}
	return sk;
}

// Reads the link messages that wait on rc's socket (the receive thread).
// When reading fails (messages were lost: the socket's buffer overflowed),
// the interface's state is read directly, so no change goes unreported.
void roce_read_link_messages(RoceCtx *rc)
{
	if (!rc->nl)
		return;
	int e = nl_recvmsgs_default(rc->nl);
	if (e < 0 && e != -NLE_AGAIN) {
		softlog(3, "%s: reading link messages: %s; the interface's state read instead",
			rc->ifname, nl_geterror(e));
		int up = link_up(rc->fd, rc->ifname);
		if (up != rc->link_up) {
			rc->link_up = up;
			roce_port_event(rc, up != 0);
		}
	}
}

int roce_open(SoftContext *ctx, const SoftDevice *dev)
{
	uint64_t netns = netns_inode();
	pthread_mutex_lock(&g_roce_lock);
	for (RoceCtx *rc = g_roce; rc; rc = rc->next_shared)
		if (rc->netns == netns && !strcmp(rc->ifname, dev->roce_if)) {
			rc->refs++;
			ctx->roce = rc;
			ctx_add(rc, ctx);
			pthread_mutex_unlock(&g_roce_lock);
			return 0;
		}
	int e = roce_open_new(ctx, dev, netns);
	if (!e) {
		ctx_add(ctx->roce, ctx);
		ctx->roce->refs = 1;
		ctx->roce->next_shared = g_roce;
		g_roce = ctx->roce;
	}
	pthread_mutex_unlock(&g_roce_lock);
	return e;
}

static int roce_open_new(SoftContext *ctx, const SoftDevice *dev, uint64_t netns)
{
	auto *rc = new (std::nothrow) RoceCtx();
	if (!rc)
		return ENOMEM;
	rc->netns = netns;
	snprintf(rc->ifname, sizeof(rc->ifname), "%s", dev->roce_if);
	rc->ifindex = int(if_nametoindex(rc->ifname));
	pthread_mutex_init(&rc->lock, nullptr);
	pthread_mutex_init(&rc->rx_lock, nullptr);
	rc->rx_bufs = static_cast<uint8_t *>(malloc(size_t(kRoceBatch) * kRoceRxBuffer));
	rc->tx_bufs = static_cast<uint8_t *>(malloc(size_t(kRoceTxBatch) * kRoceTxSlot));
	int e = !rc->rx_bufs || !rc->tx_bufs ? ENOMEM : rc->ifindex ? read_interface(rc) : ENODEV;
	if (!e)
		roce_refresh_gids(rc, true);
	if (!e)
		e = roce_share_open(rc, ctx->seg);
	if (!e)
		e = open_socket(rc);
	if (!e)
		e = roce_share_check(rc);
	if (!e) {
		rc->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (rc->wake_fd < 0)
			e = errno;
	}
	if (!e) {
		rc->nl = open_link_watch(rc);
		ctx->roce = rc;
		e = pthread_create(&rc->rx, nullptr, roce_rx_main, rc);
		rc->rx_started = e == 0;
	}
	if (e) {
		softlog(1, "sroce%d (%s): cannot open the device: %s", dev->index - kRoceIndexBase,
			dev->roce_if, strerror(e));
		ctx->roce = nullptr;
		if (rc->fd >= 0)
			close(rc->fd);
		roce_share_close(rc);
		if (rc->wake_fd >= 0)
			close(rc->wake_fd);
		if (rc->nl)
			nl_socket_free(rc->nl);
		pthread_mutex_destroy(&rc->lock);
		pthread_mutex_destroy(&rc->rx_lock);
		free(rc->rx_bufs);
		free(rc->tx_bufs);
		delete rc;
		return e;
	}
	softlog(3, "sroce%d on %s: ifindex %d, MTU %u (IB %u), %u GIDs", dev->index - kRoceIndexBase,
		rc->ifname, rc->ifindex, rc->if_mtu.load(), roce_mtu_bytes(rc->active_mtu.load()),
		rc->ngids);
	return 0;
}

void roce_close(SoftContext *ctx)
{
	RoceCtx *rc = ctx->roce;
	if (!rc)
		return;
	if (segment_inherited(rc->seg)) {
		// A fork() child's copy (closing the device, or exiting): the
		// socket, the QPs' state and the endpoints are the parent's, and a
		// lock a thread of the parent held at fork() stays held here. The
		// child lets go of its context and sends nothing.
		ctx->roce = nullptr;
		return;
	}
	pthread_mutex_lock(&g_roce_lock);
	ctx_remove(rc, ctx);
	if (--rc->refs) {
		// Another context still uses the transport: forget this one's QPs
		// (left by a program that closes the device with QPs alive).
		pthread_mutex_lock(&rc->lock);
		roce_flush_acks(rc);
		for (SoftQp *&qp : rc->by_slot)
			if (qp && qp->ctx == ctx) {
				roce_mcast_forget(rc, qp);
				qp = nullptr;
			}
		if (rc->gsi && rc->gsi->ctx == ctx)
			rc->gsi = nullptr;
		pthread_mutex_unlock(&rc->lock);
		ctx->roce = nullptr;
		pthread_mutex_unlock(&g_roce_lock);
		return;
	}
	for (RoceCtx **p = &g_roce; *p; p = &(*p)->next_shared)
		if (*p == rc) {
			*p = rc->next_shared;
			break;
		}
	pthread_mutex_unlock(&g_roce_lock);
	// Acknowledgements still waiting go before the socket closes (the
	// peer would otherwise send its last requests again to no one).
	pthread_mutex_lock(&rc->lock);
	roce_flush_acks(rc);
	pthread_mutex_unlock(&rc->lock);
	rc->stop.store(true);
	uint64_t one = 1;
	if (write(rc->wake_fd, &one, sizeof(one)) < 0) {
	}
	if (rc->rx_started)
		pthread_join(rc->rx, nullptr);
	roce_hand_on_rest(rc);
	close(rc->fd);
	roce_share_close(rc);
	close(rc->wake_fd);
	if (rc->nl)
		nl_socket_free(rc->nl);
	char drops[256] = "";
	size_t used = 0;
	for (int d = 1; d < ovroce::D_COUNT; d++)
		if (uint64_t v = rc->drops[d].load(); v && used < sizeof(drops))
			used += size_t(snprintf(drops + used, sizeof(drops) - used, " %s=%llu",
						ovroce::drop_name(ovroce::Drop(d)), (unsigned long long)v));
	softlog(3, "%s: %llu datagrams in, %llu out (%llu failed), %llu retransmissions, window %u, "
		   "%llu IPv4 identifications solved; dropped:%s",
		rc->ifname, (unsigned long long)rc->rx_packets.load(),
		(unsigned long long)rc->tx_packets.load(), (unsigned long long)rc->tx_errors.load(),
		(unsigned long long)rc->retransmits.load(), rc->window,
		(unsigned long long)rc->icrc_solved.load(), used ? drops : " none");
	if (rc->fwd_out || rc->fwd_in || rc->fwd_lost || rc->fwd_bad)
		softlog(3, "%s: datagrams of other processes' QPs: %llu handed on, %llu lost on the "
			   "way; %llu handed to this one, %llu of them dropped",
			rc->ifname, (unsigned long long)rc->fwd_out.load(),
			(unsigned long long)rc->fwd_lost.load(),
			(unsigned long long)(rc->fwd_in.load() + rc->fwd_bad.load()),
			(unsigned long long)rc->fwd_bad.load());
	softlog(3, "%s: receive thread woken %llu times by a thread arming a CQ's notification",
		rc->ifname, (unsigned long long)rc->app_wait_wakes.load());
	if (rc->fault)
		softlog(3, "%s: faults injected: %llu dropped, %llu reordered, %llu duplicated, "
			   "%llu corrupted",
			rc->ifname, (unsigned long long)rc->drops[ovroce::D_FILTERED].load(),
			(unsigned long long)rc->reordered.load(), (unsigned long long)rc->duplicated.load(),
			(unsigned long long)rc->corrupted.load());
	pthread_mutex_destroy(&rc->lock);
	pthread_mutex_destroy(&rc->rx_lock);
	free(rc->rx_bufs);
	free(rc->side_buf);
	free(rc->tx_bufs);
	ctx->roce = nullptr;
	delete rc;
}

// ------------------------------------------------------------------ queries

int roce_query_gid(SoftContext *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	RoceCtx *rc = ctx->roce;
	if (!gid || port != 1 || index < 0 || uint32_t(index) >= kRoceMaxGids)
		return EINVAL;
	roce_refresh_gids(rc, false);
	pthread_mutex_lock(&rc->lock);
	if (uint32_t(index) >= rc->ngids || !rc->gids[index].valid)
		memset(gid, 0, sizeof(*gid)); // an empty slot, as sysfs shows it
	else
		*gid = rc->gids[index].gid;
	pthread_mutex_unlock(&rc->lock);
	return 0;
}

int roce_query_gid_entry(SoftContext *ctx, uint32_t port, uint32_t index,
			 struct ibv_gid_entry *entry)
{
	RoceCtx *rc = ctx->roce;
	if (port != 1 || index >= kRoceMaxGids)
		return EINVAL;
	roce_refresh_gids(rc, false);
	pthread_mutex_lock(&rc->lock);
	bool valid = index < rc->ngids && rc->gids[index].valid;
	union ibv_gid gid = valid ? rc->gids[index].gid : ibv_gid{};
	pthread_mutex_unlock(&rc->lock);
	if (!valid)
		return ENODATA;
	memset(entry, 0, sizeof(*entry));
	entry->gid = gid;
	entry->gid_index = index;
	entry->port_num = port;
	entry->gid_type = IBV_GID_TYPE_ROCE_V2;
	entry->ndev_ifindex = uint32_t(rc->ifindex);
	return 0;
}

static int roce_query_port(struct ibv_context *context, uint8_t port, struct ibv_port_attr *attr)
{
	if (port != 1 || !attr)
		return EINVAL;
	RoceCtx *rc = to_sctx(context)->roce;
	// The port's state follows the interface's, read at each query (an
	// interface brought up after the device was opened makes it active),
	// through the device's own UDP socket: it lives as long as the device
	// and is in the interface's network namespace (a socket made here for
	// each query cost two more system calls, and the CM queries the port
	// several times per connection).
	bool up = link_up(rc->fd, rc->ifname);
	memset(attr, 0, sizeof(*attr));
	attr->state = up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	attr->max_mtu = IBV_MTU_4096;
	attr->active_mtu = roce_refresh_mtu(rc, false);
	attr->gid_tbl_len = kRoceMaxGids;
	attr->port_cap_flags = IBV_PORT_IP_BASED_GIDS;
	attr->max_msg_sz = kMaxMsgSize;
	attr->pkey_tbl_len = kPkeyTableLen;
	attr->max_vl_num = 1;
	attr->subnet_timeout = 0;
	attr->active_width = 1;  // 1X
	attr->active_speed = 32; // EDR-like: the interface's speed is not known
	attr->phys_state = up ? 5 : 3; // LinkUp / Disabled
	attr->link_layer = IBV_LINK_LAYER_ETHERNET;
	return 0;
}

static int roce_query_device_ex(struct ibv_context *context,
				const struct ibv_query_device_ex_input *input,
				struct ibv_device_attr_ex *attr, size_t attr_size)
{
	int e = soft_context_ops().query_device_ex(context, input, attr, attr_size);
	if (e)
		return e;
	RoceCtx *rc = to_sctx(context)->roce;
	struct ibv_device_attr &o = attr->orig_attr;
	snprintf(o.fw_ver, sizeof(o.fw_ver), "openverbs-sroce %d.0", 44);
	o.node_guid = htobe64(rc->guid);
	o.sys_image_guid = o.node_guid;
	o.vendor_part_id = 0x4f57;
	// Memory windows of both types, local invalidation and SEND with
	// invalidate as on the shared-memory device; multicast on UD QPs
	// (kRoceMaxGroups groups of kRoceGroupQps QPs); XRC (not
	// ibv_open_qp: roce_open_qp).
	o.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT |
			     IBV_DEVICE_N_NOTIFY_CQ | IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_MEM_WINDOW |
			     IBV_DEVICE_MEM_MGT_EXTENSIONS | IBV_DEVICE_MEM_WINDOW_TYPE_2B |
			     IBV_DEVICE_XRC;
	o.atomic_cap = IBV_ATOMIC_GLOB; // the responder's CPU atomics on its memory
	o.max_mcast_grp = int(kRoceMaxGroups);
	o.max_mcast_qp_attach = int(kRoceGroupQps);
	o.max_total_mcast_qp_attach = int(kRoceMaxGroups * kRoceGroupQps);
	if (attr_size >= offsetof(struct ibv_device_attr_ex, device_cap_flags_ex) +
				 sizeof(attr->device_cap_flags_ex))
		attr->device_cap_flags_ex = o.device_cap_flags;
	// Nor tag matching (the wire's responder does not match tags).
	if (attr_size >= offsetof(struct ibv_device_attr_ex, tm_caps) + sizeof(attr->tm_caps))
		memset(&attr->tm_caps, 0, sizeof(attr->tm_caps));
	return 0;
}

// ------------------------------------------------------------------ AH, QPs

// Caller holds rc->lock.
static bool av_ok(RoceCtx *rc, const struct ibv_ah_attr &ah)
{
	return ah.is_global && ah.port_num <= 1 && ah.grh.sgid_index < rc->ngids &&
	       rc->gids[ah.grh.sgid_index].valid;
}

static struct ibv_ah *roce_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	RoceCtx *rc = pd && attr ? to_sctx(pd->context)->roce : nullptr;
	if (rc)
		roce_refresh_gids(rc, false);
	if (rc)
		pthread_mutex_lock(&rc->lock);
	bool ok = rc && av_ok(rc, *attr);
	if (rc)
		pthread_mutex_unlock(&rc->lock);
	if (!ok) {
		errno = EINVAL;
		return nullptr;
	}
	struct ibv_ah_attr a = *attr;
	a.port_num = 1;
	a.grh.sgid_index = 0; // the shared-memory device's table has one entry
	struct ibv_ah *ah = soft_context_ops().create_ah(pd, &a);
	if (ah)
		reinterpret_cast<SoftAh *>(ah)->attr = *attr;
	return ah;
}

static struct ibv_qp *attach_transport(struct ibv_qp *ibqp)
{
	if (!ibqp)
		return nullptr;
	SoftQp *qp = to_sqp(ibqp);
	RoceCtx *rc = qp->ctx->roce;
	auto *rq = new (std::nothrow) RoceQp();
	RoceTx *tx = rq ? static_cast<RoceTx *>(calloc(qp->sq_depth ? qp->sq_depth : 1,
							sizeof(RoceTx)))
			: nullptr;
	if (!rq || !tx || qp->lane) {
		delete rq;
		free(tx);
		soft_context_ops().destroy_qp(ibqp);
		errno = qp->lane ? EOPNOTSUPP : ENOMEM;
		return nullptr;
	}
	rq->tx = tx;
	pthread_mutex_lock(&rc->lock);
	qp->roce = rq;
	rc->by_slot[qp->slot] = qp;
	rc->slots_end = std::max(rc->slots_end, qp->slot + 1);
	pthread_mutex_unlock(&rc->lock);
	return ibqp;
}

static bool type_ok(enum ibv_qp_type t)
{
	return t == IBV_QPT_RC || t == IBV_QPT_UC || t == IBV_QPT_UD || t == IBV_QPT_XRC_SEND ||
	       t == IBV_QPT_XRC_RECV;
}

static struct ibv_qp *roce_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	if (attr && !type_ok(attr->qp_type)) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	return attach_transport(soft_context_ops().create_qp(pd, attr));
}

// The ibv_wr_* operations the wire carries (ibv_create_qp_ex(3)
// send_ops_flags): not ATOMIC_WRITE, FLUSH or TSO.
static const uint64_t kRoceSendOps =
	IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
	IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
	IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
	IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV;

static struct ibv_qp *roce_create_qp_ex(struct ibv_context *context,
					struct ibv_qp_init_attr_ex *attr)
{
	if (attr && (!type_ok(attr->qp_type) ||
		     ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
		      (attr->send_ops_flags & ~kRoceSendOps)))) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	return attach_transport(soft_context_ops().create_qp_ex(context, attr));
}

static int roce_destroy_qp(struct ibv_qp *ibqp)
{
	SoftQp *qp = to_sqp(ibqp);
	RoceCtx *rc = qp->ctx->roce;
	RoceQp *rq = qp->roce;
	uint32_t slot = qp->slot; // the soft device's destroy frees qp
	pthread_mutex_lock(&rc->lock);
	if (rq && rq->ack_pending)
		roce_flush_acks(rc); // its last ACK goes before it does
	int e = soft_context_ops().destroy_qp(ibqp);
	if (!e) {
		// From here qp is only a value to compare with (freed).
		roce_mcast_forget(rc, qp); // as the kernel detaches a destroyed QP
		rc->by_slot[slot] = nullptr; // slot numbers come back only after this
		while (rc->slots_end && !rc->by_slot[rc->slots_end - 1])
			rc->slots_end--;
		if (rc->gsi == qp)
			rc->gsi = nullptr;
	}
	pthread_mutex_unlock(&rc->lock);
	if (!e && rq) {
		free(rq->tx);
		delete rq;
	}
	return e;
}

static int roce_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	SoftQp *qp = to_sqp(ibqp);
	RoceCtx *rc = qp->ctx->roce;
	if (!attr)
		return EINVAL;
	// A path MTU above the port's is refused, after a fresh look at the
	// interface (the CM may have seen its MTU raised first).
	if ((mask & IBV_QP_PATH_MTU) && attr->path_mtu > rc->active_mtu.load() &&
	    attr->path_mtu > roce_refresh_mtu(rc, true))
		return EINVAL;
	if (mask & IBV_QP_AV)
		roce_refresh_gids(rc, false);
	struct ibv_qp_attr a = *attr;
	if (mask & IBV_QP_AV) {
		a.ah_attr.port_num = 1;
		a.ah_attr.grh.sgid_index = 0;
	}
	pthread_mutex_lock(&rc->lock);
	// RoCE addresses need the GRH: a GID of ours, the peer's; IPv4 to IPv4,
	// IPv6 to IPv6.
	if ((mask & IBV_QP_AV) &&
	    (!av_ok(rc, attr->ah_attr) ||
	     rc->gids[attr->ah_attr.grh.sgid_index].v4 !=
		     (memcmp(attr->ah_attr.grh.dgid.raw, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0))) {
		pthread_mutex_unlock(&rc->lock);
		return EINVAL;
	}
	auto cur = static_cast<enum ibv_qp_state>(qp->entry->state.load());
	// The acknowledgement a responder still owes for requests it has
	// executed (and completed: the application may have seen them, and
	// moves the QP to the error state now, as rdma_disconnect does) goes
	// before the QP stops answering; dropped, the requester would send
	// the last request again until its retries ran out and report a
	// message that arrived as failed (rdma_xclient waited 8.5 s for that).
	if ((mask & IBV_QP_STATE) && qp->roce && qp->roce->ack_pending &&
	    (attr->qp_state == IBV_QPS_ERR || attr->qp_state == IBV_QPS_RESET))
		roce_flush_acks(rc);
	int e = soft_context_ops().modify_qp(ibqp, &a, mask);
	if (!e) {
		if (mask & IBV_QP_AV)
			qp->attr.ah_attr = attr->ah_attr;
		if (mask & IBV_QP_STATE)
			roce_qp_transition(qp, cur, attr->qp_state);
		// QP1 of this process: the first UD QP with the GSI Q_Key; it
		// stops being QP1 when its Q_Key changes. Each process sharing
		// the device has its own; the CM's MADs reach the right one by
		// their content (share.cpp, roce_share_target).
		if (qp->type == IBV_QPT_UD && (mask & IBV_QP_QKEY)) {
			if (qp->attr.qkey == kRoceGsiQkey && !rc->gsi)
				rc->gsi = qp;
			else if (qp->attr.qkey != kRoceGsiQkey && rc->gsi == qp)
				rc->gsi = nullptr;
		}
	}
	pthread_mutex_unlock(&rc->lock);
	return e;
}

// Completions are made when packets are handled: a poll that finds none
// reads the socket first (the application's thread does the receive work
// while it polls; the receive thread covers the time it does not).
static int roce_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	int got = soft_context_ops().poll_cq(ibcq, n, wc);
	if (got != 0)
		return got;
	RoceCtx *rc = to_sctx(ibcq->context)->roce;
	if (!roce_drain(rc, true))
		return 0;
	return soft_context_ops().poll_cq(ibcq, n, wc);
}

// Arming a CQ's notification says the thread may block next: the receive
// thread, if it had left the socket to polling applications, watches it
// again now (roce_note_app_waits), not up to two windows later.
static int roce_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	int e = soft_context_ops().req_notify_cq(ibcq, solicited_only);
	if (e == 0)
		roce_note_app_waits(to_sctx(ibcq->context)->roce);
	return e;
}

// ------------------------------------------------------------------ multicast

// A RoCE v2 multicast GID: an IPv6 multicast address (ff00::/8) or an
// IPv4-mapped IPv4 one (::ffff:224.0.0.0/100).
static bool mcast_gid(const union ibv_gid *g)
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return g->raw[0] == 0xff || (!memcmp(g->raw, v4mapped, 12) && (g->raw[12] & 0xf0) == 0xe0);
}

// Joins (or leaves) the IP multicast group of MGID gid on the device's
// interface, so that the kernel hands its datagrams to the device's
// socket. 0 or an errno value.
static int ip_membership(RoceCtx *rc, const uint8_t gid[16], bool join)
{
	int r;
	if (gid[0] != 0xff) {
		struct ip_mreqn m = {};
		memcpy(&m.imr_multiaddr, gid + 12, 4);
		m.imr_ifindex = rc->ifindex;
		r = setsockopt(rc->fd, IPPROTO_IP, join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP, &m,
			       sizeof(m));
	} else {
		struct ipv6_mreq m = {};
		memcpy(&m.ipv6mr_multiaddr, gid, 16);
		m.ipv6mr_interface = unsigned(rc->ifindex);
		r = setsockopt(rc->fd, IPPROTO_IPV6, join ? IPV6_JOIN_GROUP : IPV6_LEAVE_GROUP, &m,
			       sizeof(m));
	}
	return r == 0 ? 0 : errno;
}

// Drops group g of rc (its last QP is gone): leaves it on the socket.
static void group_drop(RoceCtx *rc, uint32_t g)
{
	int e = ip_membership(rc, rc->groups[g].gid, false);
	if (e)
		softlog(3, "%s: leaving a multicast group: %s", rc->ifname, strerror(e));
	rc->groups[g] = rc->groups[--rc->ngroups];
}

// ibv_attach_mcast(3): UD QPs only, a multicast MGID (else EINVAL); ENOMEM
// when kRoceMaxGroups groups or kRoceGroupQps QPs of the group are
// attached already; the errno of the IP join when the kernel refuses it.
// Attaching a QP that is attached already succeeds. The LID is not used.
static int roce_attach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t)
{
	if (!ibqp || !gid)
		return EINVAL;
	SoftQp *qp = to_sqp(ibqp);
	RoceCtx *rc = qp->ctx->roce;
	if (qp->type != IBV_QPT_UD || !rc || !mcast_gid(gid))
		return EINVAL;
	int e = 0;
	pthread_mutex_lock(&rc->lock);
	RoceCtx::Group *G = nullptr;
	for (uint32_t g = 0; g < rc->ngroups && !G; g++)
		if (!memcmp(rc->groups[g].gid, gid->raw, 16))
			G = &rc->groups[g];
	if (!G) {
		if (rc->ngroups == kRoceMaxGroups) {
			e = ENOMEM;
		} else if ((e = ip_membership(rc, gid->raw, true)) == 0) {
			G = &rc->groups[rc->ngroups++];
			memcpy(G->gid, gid->raw, 16);
			G->nqps = 0;
		}
	}
	if (G) {
		bool there = false;
		for (uint32_t i = 0; i < G->nqps; i++)
			there = there || G->qps[i] == qp;
		if (!there && G->nqps == kRoceGroupQps)
			e = ENOMEM;
		else if (!there)
			G->qps[G->nqps++] = qp;
	}
	pthread_mutex_unlock(&rc->lock);
	return e;
}

// ibv_detach_mcast(3): EINVAL when qp is not attached to the group.
static int roce_detach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t)
{
	if (!ibqp || !gid)
		return EINVAL;
	SoftQp *qp = to_sqp(ibqp);
	RoceCtx *rc = qp->ctx->roce;
	if (!rc)
		return EINVAL;
	int e = EINVAL;
	pthread_mutex_lock(&rc->lock);
	for (uint32_t g = 0; g < rc->ngroups && e; g++) {
		RoceCtx::Group &G = rc->groups[g];
		if (memcmp(G.gid, gid->raw, 16))
			continue;
		for (uint32_t i = 0; i < G.nqps; i++)
			if (G.qps[i] == qp) {
				G.qps[i] = G.qps[--G.nqps];
				e = 0;
				break;
			}
		if (!e && !G.nqps)
			group_drop(rc, g);
	}
	pthread_mutex_unlock(&rc->lock);
	return e;
}

void roce_mcast_forget(RoceCtx *rc, SoftQp *qp)
{
	for (uint32_t g = 0; g < rc->ngroups;) {
		RoceCtx::Group &G = rc->groups[g];
		for (uint32_t i = 0; i < G.nqps;)
			if (G.qps[i] == qp)
				G.qps[i] = G.qps[--G.nqps];
			else
				i++;
		if (!G.nqps)
			group_drop(rc, g); // the last group moved here: look at g again
		else
			g++;
	}
}

// ibv_open_qp(3) of an XRC receive QP: not on this device. The wire's
// responder state of a QP (expected PSN, the message in progress, the
// atomics' replay cache) lives in the process that made it, and that
// process runs its receive work, so another process could neither change
// its state nor outlive its maker. XRC domains, XRC SRQs and both XRC QP
// types are the shared-memory device's (roce_create_qp_ex).
static struct ibv_qp *roce_open_qp(struct ibv_context *, struct ibv_qp_open_attr *)
{
	errno = EOPNOTSUPP;
	return nullptr;
}

static const struct verbs_context_ops g_roce_ops = [] {
	struct verbs_context_ops o = {};
	o.attach_mcast = roce_attach_mcast;
	o.create_ah = roce_create_ah;
	o.create_qp = roce_create_qp;
	o.create_qp_ex = roce_create_qp_ex;
	o.destroy_qp = roce_destroy_qp;
	o.detach_mcast = roce_detach_mcast;
	o.modify_qp = roce_modify_qp;
	o.open_qp = roce_open_qp;
	o.poll_cq = roce_poll_cq;
	o.post_send = roce_post_send;
	o.query_device_ex = roce_query_device_ex;
	o.query_port = roce_query_port;
	o.req_notify_cq = roce_req_notify_cq;
	return o;
}();

const struct verbs_context_ops &roce_context_ops() { return g_roce_ops; }

} // namespace ovsoft
