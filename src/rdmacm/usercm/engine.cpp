// The software devices' connection manager (engine.h; src/DESIGN.md,
// "Connection manager for software devices").
#include "engine.h"

#include "../hooks.h"
#include "../log.h"
#include "addr.h"
#include "due.h"
#include "event_queue.h"
#include "common/env.h"
#include "mad.h"
#include "wire.h"

#include <rdma/rdma_cma.h>

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <link.h>
#include <mutex>
#include <net/if.h>
#include <new>
#include <pthread.h>
#include <csignal>
#include <random>
#include <string>
#include <strings.h>
#include <sys/epoll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace ov::usercm {

namespace {

using ov::cm::ConnParam;
using ov::cm::Ece;
using ov::cm::EventSource;
using ov::cm::IdBackend;
using ov::cm::RawEvent;
using ov::cm::Route;

std::atomic<uint64_t> g_timeout_ns{8ull * 1000 * 1000 * 1000}; // REP, RTU, DREP, SIDR_REP
constexpr uint16_t kRejNoResources = 3, kRejTimeout = 4, kRejInvalidServiceId = 8,
		   kRejConsumer = 28;
constexpr uint16_t kSidrUnsupported = 1, kSidrReject = 2;
constexpr uint8_t kMtu4096 = 5; // every soft port's MTU (IBV_MTU_4096)
// The IB CM over RoCE: the CM response timeout we announce (4.096 us *
// 2^20, about 4 s, as the kernel's rdma_cm), our target ACK delay, and how
// often and how many times a MAD that waits for its answer is sent again.
constexpr uint8_t kCmResponseTimeout = 20, kTargetAckDelay = 15;
constexpr uint64_t kMadRetryNs = 1000000000ull;
constexpr int kMadTries = 8;
// A blocking rdma_get_cm_event that finds nothing to do looks at its fds
// again, yielding its core in between, for up to kSpinBeforeSleepNs before
// it sleeps in epoll_wait: the peer's answer to a record just sent (REQ,
// REP, DREQ) usually comes within it, and on a machine whose cores are idle
// a thread woken from sleep waits long for its core (2 cores, idle
// otherwise: 17,000-20,000 connect/disconnect cycles per second between two
// processes, bench/rdmacm/cm-cycles-run.sh, against 29,000-46,000 with the
// spin). A look that comes more than kSpinPreemptedNs after the one before
// means another thread had the core (the cores are busy: spinning would
// only take them from the peer): the process then sleeps at once in every
// wait for kSpinBackoffNs. The cost: up to kSpinBeforeSleepNs of CPU per wait
// for an event that comes later.
constexpr uint64_t kSpinBeforeSleepNs = 50000;
constexpr uint64_t kSpinPreemptedNs = 200000;
constexpr uint64_t kSpinBackoffNs = 100000000;
std::atomic<uint64_t> g_spin_off_until{0};

enum class St {
	idle,
	bound,
	addr_resolved,
	route_resolved,
	listening,
	req_sent,     // REQ (or SIDR_REQ) sent, waiting for the reply
	req_rcvd,     // CONNECT_REQUEST reported, waiting for accept or reject
	rep_sent,     // accepted, waiting for RTU
	rep_rcvd,     // CONNECT_RESPONSE reported, waiting for the RTU command
	connected,
	dreq_sent,
	disc_held,    // DREQ came; DISCONNECTED waits for the receive CQ (hold_disconnect)
	disconnected,
	done,         // rejected, refused, timed out, or a finished UD exchange
};

struct SoftId;
class Source;
struct Gsi;
struct Link;

// What an epoll key names. Keys are looked up under the lock, so an entry
// removed meanwhile by another thread is simply not found.
struct Item {
	enum Kind { listen, peer, timer, event, qp1 } kind;
	SoftId *id = nullptr; // listen
	Link *link = nullptr; // peer (a link)
	Gsi *gsi = nullptr;   // qp1
	Source *src = nullptr;
};

struct Mcast {
	uint64_t uid;
	uint32_t handle;
	sockaddr_storage addr;
	ibv_gid mgid;
	uint16_t mlid;
	uint32_t reported = 0;
};

struct SoftId {
	uint64_t uid;
	uint32_t handle;
	uint16_t ps;
	uint8_t qp_type;
	bool ud;
	Source *src;
	St st = St::idle;
	int device = -1; // soft device index once bound to a device
	int dst_device = -1;
	sockaddr_storage addr_src{}, addr_dst{};
	bool have_route = false;
	int lfd = -1; // bound / listening socket
	uint64_t lkey = 0;
	std::string path;
	ino_t path_ino = 0;
	Link *link = nullptr; // the link the connection runs on, while it does
	uint32_t conn = 0;    // its number there
	// Its time-out (ns, CLOCK_MONOTONIC; 0: none), kept only by set_due:
	// the id is then in one of its source's heaps (due.h).
	uint64_t deadline = 0;
	size_t due_pos = kNowhere;
	size_t src_pos = kNowhere; // its place in src->ids
	uint32_t links_accepted = 0; // a listener: links whose `listener` it is
	uint32_t listener = 0; // a CONNECT_REQUEST's new id: its listener's handle
	uint32_t psn = 0;   // our send PSN
	Message peer;       // the peer's REQ or REP
	bool peer_valid = false;
	bool gone_before_accept = false; // the requester went away before accept
	uint8_t resp_res = 0, init_depth = 0, retry = 7, rnr = 7;
	uint8_t ack_timeout = 14;
	uint32_t qkey = 0;
	uint32_t qpn = 0;      // our QP (connect, accept), 0: none named
	uint64_t backlog_mark = 0; // disc_held: the receive CQ's position to wait for
	uint64_t hold_until = 0;   // disc_held: DISCONNECTED at the latest then
	uint32_t reported = 0; // events handed out
	std::vector<Mcast> mcs;
	// Connections of an sroce device speak the InfiniBand CM: MADs on the
	// device's QP1 (Gsi), with communication IDs and the peer's and our
	// GIDs; the last MAD that waits for an answer is sent again until
	// `tries` runs out (retx).
	bool mad = false;
	Gsi *gsi = nullptr;
	uint32_t lcid = 0, rcid = 0;
	// A listener: the sroce devices (bit N: sroce<N>) told that it listens
	// (roce_listen_mark).
	uint64_t roce_listens = 0;
	uint64_t tid = 0;
	uint8_t peer_gid[16] = {}, our_gid[16] = {};
	// The IB CM's "starting PSN" of a REQ or REP is the PSN its sender's
	// receive queue expects (the peer's send queue starts there): the
	// reverse of our own records, whose PSN is the sender's send PSN. The
	// active side keeps here the one its REQ named until REP comes.
	uint32_t mad_rq_psn = 0;
	mad::Mad last;
	bool retx = false;
	int tries = 0;
};

std::recursive_mutex g_lock;
std::unordered_map<uint32_t, SoftId *> g_ids; // by handle
std::unordered_map<uint64_t, Item> g_items;
uint64_t g_next_key = 1;
uint32_t g_next_handle = 1;
std::atomic<uint64_t> g_foreign{0};

class Source : public EventSource {
public:
	int epfd = -1, evfd = -1, tfd = -1;
	pid_t pid = 0; // the process that made it (a fork child shares its epoll set)
	uint64_t armed = 0; // the deadline the timerfd is set to (0: none)
	// The eventfd holds a count (the channel fd is readable for `ready`).
	// While next() runs the CM for a reader (dispatching), events it makes
	// are not signalled one by one: the reader takes the first itself, and
	// only what is left after that needs the fd readable (next()).
	bool signalled = false, dispatching = false;
	std::atomic<int> waiting{0}; // threads inside next()
	uint64_t keys[2] = {};
	EventQueue<RawEvent> ready;
	std::vector<SoftId *> ids; // each knows its place (SoftId::src_pos)
	// The ids with a time-out: those that speak the IB CM on QP1 (the
	// progress thread runs them too) and the others.
	DueHeap<SoftId> due_mad, due;

	// Makes room for one more id, in ids and in both heaps (throws
	// std::bad_alloc); join() and set_due() then never allocate.
	void reserve_one()
	{
		make_room(ids, ids.size() + 1);
		due_mad.reserve(ids.size() + 1);
		due.reserve(ids.size() + 1);
	}
	// Adds s (room reserved) / takes it out, its time-out with it.
	void join(SoftId *s) noexcept;
	void leave(SoftId *s) noexcept;

	~Source() override;
	const char *kind() const noexcept override { return "soft"; }
	int fd() const noexcept override { return epfd; }
	int next(RawEvent &ev, bool block) noexcept override;
};

// ------------------------------------------------------------------ devices

// The devices this CM serves, in one index space (wire.h): soft<N> at N,
// sroce<N> at kRoceDeviceBase + N.
struct SoftDevices {
	bool any = false;
	uint64_t guid[kRoceDeviceBase + kMaxRoceDevices] = {}; // network order, 0 = absent
	// sroce<N>'s network interface at [N] ("" when absent or unknown).
	std::vector<std::string> roce_if;
};

// Listed once, on first use (a function-local static: after that a call is
// one load of its guard; std::call_once cost a thousand instructions a call,
// and every resolution and route query asks several times).
const SoftDevices &soft_devices()
{
	static const SoftDevices devices = [] {
		SoftDevices d;
		int n = 0;
		ibv_device **list = ibv_get_device_list(&n);
		std::vector<std::string> env_if = roce_interfaces_from_env();
		for (int i = 0; list && i < n; i++) {
			const char *name = ibv_get_device_name(list[i]);
			unsigned long idx;
			if (!strncmp(name, "sroce", 5) &&
			    ov::parse_uint(name + 5, kMaxRoceDevices - 1, &idx)) {
				uint64_t guid = ibv_get_device_guid(list[i]);
				// The interface: RDMAV_SOFT_ROCE's list gives it by
				// position, as the core names the devices; a config
				// file's line by the GUID (the EUI-64 of its MAC).
				std::string ifn = idx < env_if.size() ? env_if[idx] : interface_by_guid(guid);
				if (ifn.empty() || !guid)
					continue;
				d.guid[kRoceDeviceBase + idx] = guid;
				if (d.roce_if.size() <= idx)
					d.roce_if.resize(idx + 1);
				d.roce_if[idx] = ifn;
				d.any = true;
				continue;
			}
			if (strncmp(name, "soft", 4) || !ov::parse_uint(name + 4, 255, &idx))
				continue;
			d.guid[idx] = ibv_get_device_guid(list[i]);
			d.any = d.any || d.guid[idx] != 0;
		}
		if (list)
			ibv_free_device_list(list);
		return d;
	}();
	return devices;
}

bool is_roce(int dev) { return dev >= kRoceDeviceBase; }

// soft<N> devices with an Ethernet port (RDMAV_SOFT_LINK_LAYER=ethernet, the
// setting the soft provider reads when it lists them): addresses are GIDs,
// so the CM's address vectors towards them carry a global route.
bool soft_eth()
{
	static const bool eth = [] {
		const char *v = ov::secure_env("RDMAV_SOFT_LINK_LAYER");
		return v && !strcasecmp(v, "ethernet");
	}();
	return eth;
}

// The address vector towards soft port p: by LID, or by GID on Ethernet.
void soft_ah(const Port &p, ibv_ah_attr &ah)
{
	ah.port_num = 1;
	if (!soft_eth()) {
		ah.dlid = p.lid;
		return;
	}
	ah.dlid = 0;
	ah.is_global = 1;
	memcpy(ah.grh.dgid.raw, p.gid, 16);
	ah.grh.sgid_index = 0;
	ah.grh.hop_limit = 1;
}

bool have_device(int dev)
{
	return dev >= 0 && dev < kRoceDeviceBase + kMaxRoceDevices && soft_devices().guid[dev];
}

const std::string &roce_ifname(int dev) { return soft_devices().roce_if[size_t(dev - kRoceDeviceBase)]; }

// The sroce device whose interface owns `sa` or whose subnet holds it, or -1.
int roce_device_for(const sockaddr *sa)
{
	int n = roce_interface_for(sa, soft_devices().roce_if);
	return n < 0 ? -1 : kRoceDeviceBase + n;
}

// The port of soft device `index` as the soft provider presents it: LID
// index + 1, GID fe80::/64 + the node GUID, MTU 4096.
bool port_of_device(int index, Port &p)
{
	if (index < 0 || index > 255 || !soft_devices().guid[index])
		return false;
	p.device = uint16_t(index);
	p.lid = uint16_t(index + 1);
	p.mtu = kMtu4096;
	memset(p.gid, 0, 16);
	p.gid[0] = 0xfe;
	p.gid[1] = 0x80;
	uint64_t g = soft_devices().guid[index];
	memcpy(p.gid + 8, &g, 8);
	return true;
}

// The network devices in the GID tables of the kernel's RDMA ports (sysfs
// ports/*/gid_attrs/ndevs/N). all == false reads only entry 0 of each port:
// the port's own network device (the kernel keeps a RoCE port's default GID
// there; an iWARP port has that one entry). all == true reads every entry
// (rxe has 1024 per port): the others name upper devices (VLAN, bond,
// macvlan) of the port's network device.
std::vector<std::string> kernel_ndevs(bool all)
{
	std::vector<std::string> ndevs;
	DIR *d = opendir("/sys/class/infiniband");
	if (!d)
		return ndevs;
	auto add = [&](const std::string &file) {
		char name[64] = {};
		int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return;
		ssize_t n = read(fd, name, sizeof(name) - 1);
		close(fd);
		if (n > 0) {
			name[strcspn(name, "\n")] = 0;
			if (std::find(ndevs.begin(), ndevs.end(), name) == ndevs.end())
				ndevs.emplace_back(name);
		}
	};
	while (dirent *e = readdir(d)) {
		if (e->d_name[0] == '.')
			continue;
		std::string ports = std::string("/sys/class/infiniband/") + e->d_name + "/ports";
		DIR *pd = opendir(ports.c_str());
		if (!pd)
			continue;
		while (dirent *p = readdir(pd)) {
			if (p->d_name[0] == '.')
				continue;
			std::string dir = ports + "/" + p->d_name + "/gid_attrs/ndevs";
			if (!all) {
				add(dir + "/0");
				continue;
			}
			DIR *nd = opendir(dir.c_str());
			if (!nd)
				continue;
			while (dirent *g = readdir(nd))
				if (g->d_name[0] != '.')
					add(dir + "/" + g->d_name);
			closedir(nd);
		}
		closedir(pd);
	}
	closedir(d);
	return ndevs;
}

uint64_t now_ns();

// Every bind and resolve asks, and sysfs is slow to read (the full tables
// very): both lists are read at most once a second (as the ibacm probe,
// addrinfo.cpp), so a kernel device or GID added later is seen within a
// second.
constexpr uint64_t kGidTablesRecheckNs = 1000000000ull;
struct NdevList {
	std::vector<std::string> names;
	uint64_t next = 0; // the time of the next reading (0: never read)
	// Whether name is in the list, read again first when it is due.
	bool has(bool all, const std::string &name)
	{
		uint64_t now = now_ns();
		if (!next || now >= next) {
			names = kernel_ndevs(all);
			next = now + kGidTablesRecheckNs;
		}
		return std::find(names.begin(), names.end(), name) != names.end();
	}
};
std::mutex g_ndevs_lock;
NdevList g_own_ndevs, g_all_ndevs; // guarded by g_ndevs_lock

// The network device that holds the address ("lo" for loopback), or "".
std::string ndev_of(const sockaddr *sa)
{
	int family = sa->sa_family;
	const void *want = family == AF_INET
				   ? static_cast<const void *>(&reinterpret_cast<const sockaddr_in *>(sa)->sin_addr)
				   : static_cast<const void *>(&reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr);
	size_t len = family == AF_INET ? 4 : 16;
	static const uint8_t loop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	if ((family == AF_INET && static_cast<const uint8_t *>(want)[0] == 127) ||
	    (family == AF_INET6 && !memcmp(want, loop6, 16)))
		return "lo";
	ifaddrs *list = nullptr;
	if (getifaddrs(&list) != 0)
		return "";
	std::string name;
	for (ifaddrs *i = list; i && name.empty(); i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != family)
			continue;
		const void *have =
			family == AF_INET
				? static_cast<const void *>(&reinterpret_cast<const sockaddr_in *>(i->ifa_addr)->sin_addr)
				: static_cast<const void *>(&reinterpret_cast<const sockaddr_in6 *>(i->ifa_addr)->sin6_addr);
		if (!memcmp(have, want, len))
			name = i->ifa_name;
	}
	freeifaddrs(list);
	return name;
}

// Whether the network device is stacked on another (sysfs lower_* links:
// VLAN, macvlan, bond master): only such a device can be in a port's GID
// table without being the port's own.
bool has_lower(const std::string &ndev)
{
	DIR *d = opendir(("/sys/class/net/" + ndev).c_str());
	if (!d)
		return false;
	bool lower = false;
	while (dirent *e = readdir(d))
		lower = lower || !strncmp(e->d_name, "lower_", 6);
	closedir(d);
	return lower;
}

// Whether the address sits on a network device in a kernel RDMA port's GID
// table: it then belongs to the kernel's CM. The ports' own devices answer
// (one file per port); the full tables are read only for a stacked device.
bool kernel_owns(const sockaddr *sa)
{
	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
		return false;
	std::string ndev = ndev_of(sa);
	if (ndev.empty())
		return false;
	std::lock_guard<std::mutex> g(g_ndevs_lock);
	if (g_own_ndevs.has(false, ndev))
		return true;
	// No kernel RDMA device with a network device, or the address's device
	// is not stacked (loopback never is: no sysfs walk per bind and resolve).
	if (g_own_ndevs.names.empty() || ndev == "lo" || !has_lower(ndev))
		return false;
	return g_all_ndevs.has(true, ndev);
}

// The ports' own network devices, read now unless read within the last
// second (kernel_owns then finds them read).
void read_kernel_ndevs()
{
	std::lock_guard<std::mutex> g(g_ndevs_lock);
	g_own_ndevs.has(false, "");
}

// True when the kernel has an RDMA device that serves this network
// namespace: one whose port's own network device (kernel_ndevs) is an
// interface of this namespace (rxe, siw, RoCE NICs), or an InfiniBand one
// (no network device: it serves every namespace). Soft devices are not in
// sysfs. A namespace that only reaches the kernel's devices of another
// namespace (an sroce device's, beside rxe in the root namespace) is ours.
bool kernel_owns_any()
{
	{
		std::lock_guard<std::mutex> g(g_ndevs_lock);
		g_own_ndevs.has(false, ""); // read again when due
		for (auto &n : g_own_ndevs.names)
			if (if_nametoindex(n.c_str()) != 0)
				return true;
	}
	DIR *d = opendir("/sys/class/infiniband");
	if (!d)
		return false;
	bool ib = false;
	while (dirent *e = readdir(d)) {
		if (e->d_name[0] == '.' || ib)
			continue;
		char ll[32] = {};
		std::string path = std::string("/sys/class/infiniband/") + e->d_name + "/ports/1/link_layer";
		int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			(void)!read(fd, ll, sizeof(ll) - 1);
			close(fd);
		}
		ib = !strncmp(ll, "InfiniBand", 10);
	}
	closedir(d);
	return ib;
}

// The device of the wildcard address: the one bound to "*", else soft0,
// else the first sroce device.
int default_device()
{
	sockaddr_in any{};
	any.sin_family = AF_INET;
	int d = bound_device(reinterpret_cast<sockaddr *>(&any));
	if (d >= 0 || soft_devices().guid[0])
		return d >= 0 ? d : 0;
	for (int n = 0; n < kMaxRoceDevices; n++)
		if (soft_devices().guid[kRoceDeviceBase + n])
			return kRoceDeviceBase + n;
	return 0;
}

// An address's device: an explicit binding to a soft device, else the
// sroce device of the interface that owns it or whose subnet holds it,
// else soft0 for any other local address.
int device_for(const sockaddr *sa)
{
	if (!sa || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
		return -1;
	int d = -1;
	if (is_wildcard(sa))
		d = default_device();
	else if ((d = bound_device(sa)) < 0 && (d = roce_device_for(sa)) < 0)
		d = soft_device_for(sa);
	return have_device(d) ? d : -1;
}

// Our port for id `s` as its messages carry it: soft devices by index;
// an sroce device's port is named by the id's source address (its GID)
// and the MTU its interface allows.
bool local_port(const SoftId *s, Port &p)
{
	if (!is_roce(s->device))
		return port_of_device(s->device, p);
	if (!have_device(s->device))
		return false;
	p = Port{};
	p.device = uint16_t(s->device);
	p.lid = 0;
	roce_gid_of(reinterpret_cast<const sockaddr *>(&s->addr_src), p.gid);
	p.mtu = roce_ib_mtu(roce_ifname(s->device));
	return p.mtu != 0;
}

// The peer's port as the route names it: soft devices by the peer's
// index; over RoCE the GID of the destination address (LID 0).
bool remote_port(const SoftId *s, Port &p)
{
	if (!is_roce(s->device))
		return port_of_device(s->dst_device, p);
	if (!local_port(s, p))
		return false;
	roce_gid_of(reinterpret_cast<const sockaddr *>(&s->addr_dst), p.gid);
	return true;
}

constexpr uint8_t kRoceHopLimit = 64; // the kernel's default for RoCE v2 routes

// The address vector towards the peer over an sroce device: a global route
// from our source GID (its index in the device's table, read from the
// process's context) to the destination's GID. False when our address is
// no longer in the table.
bool roce_ah(const SoftId *s, ibv_ah_attr &ah)
{
	Port local, remote;
	if (!local_port(s, local) || !remote_port(s, remote))
		return false;
	ibv_gid sgid;
	memcpy(sgid.raw, local.gid, 16);
	int idx = ov::cm::device_gid_index(soft_devices().guid[s->device], 1, sgid);
	if (idx < 0 || idx > 255)
		return false;
	memset(&ah, 0, sizeof(ah));
	ah.is_global = 1;
	memcpy(ah.grh.dgid.raw, remote.gid, 16);
	ah.grh.sgid_index = uint8_t(idx);
	ah.grh.hop_limit = kRoceHopLimit;
	ah.port_num = 1;
	return true;
}

// ------------------------------------------------------------------ QP1 (sroce)
// Defined after Backend (a REQ makes a Backend).
Gsi *gsi_for(int dev);
bool mad_send(SoftId *s, const mad::Mad &m, bool retx);
void gsi_readable(Gsi *g);
mad::Mad mad_for(const SoftId *s, mad::Attr a);

// ------------------------------------------------------------------ helpers

uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Ports, PSNs, communication ids and transaction ids: unpredictable enough
// that two processes do not pick the same, not secrets. Seeded from
// getrandom(2), not std::random_device: libstdc++'s probes the CPU with
// CPUID first, an exit to the hypervisor in a virtual machine (the dearest
// user-space function of a process's first rdma_resolve_addr in a perf
// profile on this project's build host, itself a virtual machine).
std::mt19937 &rng()
{
	static std::mt19937 gen{[] {
		uint32_t seed;
		if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != ssize_t(sizeof(seed)))
			seed = uint32_t(now_ns()) ^ uint32_t(getpid()) << 16;
		return seed;
	}()};
	return gen;
}

// A new local communication ID (or SIDR request ID) for the IB CM on a
// device where this process's tag is `tag` (its slot among the processes
// of the device, openverbs_soft_roce_cm_tag: below 2^kCommIdTagBits): the
// tag in the low bits, by which a device that several processes share
// hands the peer's answers, which name the ID, to this process
// (providers/soft/roce/share.cpp); above it a counter of the process from
// a random start, so that no two of its connections share an ID until 2^23
// more have been made (as the kernel's CM allocates IDs, then randomises
// them).
constexpr uint32_t kCommIdTagBits = 9;

uint32_t mad_local_id(uint32_t tag)
{
	static std::atomic<uint32_t> next{uint32_t(rng()())};
	uint32_t id;
	do
		id = next.fetch_add(1, std::memory_order_relaxed) << kCommIdTagBits |
		     (tag & ((1u << kCommIdTagBits) - 1));
	while (!id);
	return id;
}

uint32_t gsi_tag(Gsi *g);

uint16_t ephemeral_port() { return uint16_t(32768 + rng()() % (60999 - 32768 + 1)); }

SoftId *by_handle(uint32_t h)
{
	auto it = g_ids.find(h);
	return it == g_ids.end() ? nullptr : it->second;
}

// registered: fd is in the epoll set already (under a key dropped from
// g_items): it is re-keyed in place (EPOLL_CTL_MOD) instead of added.
uint64_t add_item(Source *src, int fd, Item item, bool registered = false)
{
	uint64_t key = g_next_key++;
	item.src = src;
	g_items[key] = item;
	epoll_event ev{};
	ev.events = EPOLLIN;
	ev.data.u64 = key;
	epoll_ctl(src->epfd, registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev);
	return key;
}

void remove_item(Source *src, int fd, uint64_t &key)
{
	if (!key)
		return;
	g_items.erase(key);
	if (src && fd >= 0)
		epoll_ctl(src->epfd, EPOLL_CTL_DEL, fd, nullptr);
	key = 0;
}

void clear_eventfd(Source *src)
{
	if (!src->signalled)
		return;
	uint64_t x;
	(void)!read(src->evfd, &x, sizeof(x));
	src->signalled = false;
}

void signal_eventfd(Source *src)
{
	if (src->signalled)
		return;
	uint64_t one = 1;
	(void)!write(src->evfd, &one, sizeof(one));
	src->signalled = true;
}

void push(Source *src, RawEvent &&e)
{
	src->ready.push_back(std::move(e));
	if (!src->dispatching)
		signal_eventfd(src);
}

RawEvent make_event(SoftId *s, rdma_cm_event_type type, int status)
{
	RawEvent e;
	e.uid = s->uid;
	e.handle = s->handle;
	e.event = type;
	e.status = status;
	return e;
}

void post(SoftId *s, rdma_cm_event_type type, int status)
{
	push(s->src, make_event(s, type, status));
}

void set_private(RawEvent &e, const Message &m)
{
	memcpy(e.conn.private_data, m.private_data, m.private_len);
	e.conn.private_data_len = uint8_t(m.private_len);
	memcpy(e.ud.private_data, m.private_data, m.private_len);
	e.ud.private_data_len = uint8_t(m.private_len);
}

// Connection parameters as the kernel reports them: from the receiver's
// point of view (the peer's initiator depth is our responder resources).
void fill_conn(RawEvent &e, const Message &m)
{
	e.conn.responder_resources = m.initiator_depth;
	e.conn.initiator_depth = m.responder_resources;
	e.conn.flow_control = m.flow_control;
	e.conn.retry_count = m.retry_count;
	e.conn.rnr_retry_count = m.rnr_retry_count;
	e.conn.srq = m.srq;
	e.conn.qp_num = m.qpn;
	e.conn.valid = 1;
	set_private(e, m);
}

// ------------------------------------------------------------------ sockets

// The CM's socket directory, made and checked once per process (and again
// after a failure: a directory removed meanwhile is made anew).
std::string g_cm_dir; // guarded by g_lock
uid_t g_cm_uid;       // the euid g_cm_dir was made for (the peers' uid)

int cm_dir(std::string &out)
{
	std::string &checked = g_cm_dir;
	if (!checked.empty()) {
		out = checked;
		return 0;
	}
	char base[64];
	uid_t uid = geteuid();
	snprintf(base, sizeof(base), "/dev/shm/openverbs-%u", unsigned(uid));
	for (const char *d : {"", "/cm"}) {
		std::string p = std::string(base) + d;
		if (mkdir(p.c_str(), 0700) != 0 && errno != EEXIST)
			return errno;
		struct stat st;
		if (lstat(p.c_str(), &st) != 0)
			return errno;
		if (!S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 077))
			return EPERM; // not a private directory of ours: never use it
	}
	out = checked = std::string(base) + "/cm";
	g_cm_uid = uid;
	return 0;
}

const char *ps_name(uint16_t ps)
{
	switch (ps) {
	case RDMA_PS_TCP: return "tcp";
	case RDMA_PS_UDP: return "udp";
	case RDMA_PS_IB: return "ib";
	case RDMA_PS_IPOIB: return "ipoib";
	default: return nullptr;
	}
}

uint16_t port_of(const sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(reinterpret_cast<const sockaddr_in *>(sa)->sin_port);
	return ntohs(reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_port);
}

void set_port(sockaddr *sa, uint16_t port)
{
	if (sa->sa_family == AF_INET)
		reinterpret_cast<sockaddr_in *>(sa)->sin_port = htons(port);
	else
		reinterpret_cast<sockaddr_in6 *>(sa)->sin6_port = htons(port);
}

socklen_t sa_len(const sockaddr *sa)
{
	return sa->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

bool ip_family(const sockaddr *sa, socklen_t len)
{
	return sa && ((sa->sa_family == AF_INET && len >= sizeof(sockaddr_in)) ||
		      (sa->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)));
}

// (Called on sockets of the directory cm_dir() checked: the uid it was
// checked for is ours.)
bool peer_is_us(int fd)
{
	ucred cr{};
	socklen_t len = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || cr.uid != g_cm_uid) {
		g_foreign.fetch_add(1, std::memory_order_relaxed);
		return false;
	}
	return true;
}

bool fill_un(sockaddr_un &un, const std::string &path)
{
	memset(&un, 0, sizeof(un));
	un.sun_family = AF_UNIX;
	if (path.size() >= sizeof(un.sun_path))
		return false;
	memcpy(un.sun_path, path.c_str(), path.size());
	return true;
}

std::string sock_path(const std::string &dir, uint16_t ps, uint16_t port, const std::string &key)
{
	return dir + "/" + ps_name(ps) + "-" + std::to_string(port) + "-" + key;
}

// Binds a listening socket at `path`. A path left by a dead process refuses
// connections: it is replaced, under an flock so that two processes never
// both take it over.
int bind_path(const std::string &dir, const std::string &path, int &fd_out, ino_t &ino)
{
	sockaddr_un un;
	if (!fill_un(un, path))
		return ENAMETOOLONG;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	int rc = 0;
	if (bind(fd, reinterpret_cast<sockaddr *>(&un), sizeof(un)) != 0) {
		rc = errno;
		if (rc == EADDRINUSE) {
			int lock = open((dir + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
					0600);
			if (lock >= 0 && flock(lock, LOCK_EX) == 0) {
				int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
				bool stale = probe >= 0 &&
					     ::connect(probe, reinterpret_cast<sockaddr *>(&un), sizeof(un)) != 0 &&
					     errno == ECONNREFUSED;
				if (probe >= 0)
					close(probe);
				if (stale && unlink(path.c_str()) == 0 &&
				    bind(fd, reinterpret_cast<sockaddr *>(&un), sizeof(un)) == 0)
					rc = 0;
			}
			if (lock >= 0)
				close(lock);
		}
	}
	// Listening from the bind on: a connect to a bound port that does not
	// listen is answered (REJ "invalid service ID"), and a live binding
	// never looks stale.
	if (!rc && ::listen(fd, 4096) != 0)
		rc = errno;
	struct stat st;
	if (!rc && lstat(path.c_str(), &st) == 0)
		ino = st.st_ino;
	if (rc) {
		close(fd);
		return rc;
	}
	fd_out = fd;
	return 0;
}

// ------------------------------------------------------------------ links
// A link is one UNIX connection between this process and a peer process,
// made to one of the peer's listener sockets, that carries one CM connection
// at a time and is kept for the next (src/DESIGN.md, "Transport"): the side
// that connected it numbers the connections (Message::conn), both sides find
// a connection by its number. A connect costs a stat of the listener's socket
// and one record instead of a socket, a connect and an accept. EOF on a link
// is the peer process's death. Its fd is in the epoll set of one event
// source: its connection's (idle: its listener's; one we made, none).

std::atomic<pid_t> g_pid{0}; // cached getpid(), cleared in a fork child

pid_t self_pid()
{
	pid_t p = g_pid.load(std::memory_order_relaxed);
	if (!p) {
		p = getpid();
		g_pid.store(p, std::memory_order_relaxed);
	}
	return p;
}

std::vector<Source *> g_sources; // every event source, for the QP1 fds

struct PathLinks;

struct Link {
	int fd = -1;
	pid_t pid = 0;       // the process that made it: a fork child never uses its parent's
	bool active = false; // we connected it (we number its connections)
	bool stale = false;  // active: the listener's socket was replaced or removed
	std::string path;    // active: the listener socket it was made to
	ino_t ino = 0;       // active: that socket's inode then
	SoftId *listener = nullptr; // passive: the listener that accepted it, while it lives
	size_t pos = kNowhere;      // its place in g_links
	// Active: its path's links (link_group), its place among them and, with
	// no connection on it, among the idle ones (kNowhere: not there).
	PathLinks *group = nullptr;
	size_t group_pos = kNowhere, idle_pos = kNowhere;
	uint32_t next_conn = 0;     // active: the last number given
	std::unordered_map<uint32_t, SoftId *> conns;
	Source *watcher = nullptr; // the one source whose epoll set has it
	uint64_t key = 0;          // its key there
	// Records the socket had no room for (the peer is not reading), sent in
	// order when it is writable again (EPOLLOUT while this is not empty).
	std::deque<std::vector<uint8_t>> out;
};
// Never destroyed: links stay open until the process ends (kept for the
// next connect), and stay reachable for leak checkers.
std::vector<Link *> &g_links = *new std::vector<Link *>;

// The active links to one listener socket path, and those of them that
// carry no connection: a connect finds an idle link to reuse without
// looking at the busy ones (a client with thousands of connections to one
// listener has as many links). `ino`: the socket's inode when the group's
// links were last checked (links made to an older socket are stale).
struct PathLinks {
	std::vector<Link *> all, idle;
	ino_t ino = 0;
};
std::unordered_map<std::string, PathLinks> &g_links_to =
    *new std::unordered_map<std::string, PathLinks>;

// Whether active link l carries no connection (kept in its group's idle
// list, room made by link_group): called after every change of l->conns.
void link_conns_changed(Link *l) noexcept
{
	PathLinks *g = l->group;
	if (!g)
		return;
	bool listed = l->idle_pos != kNowhere;
	if (l->conns.empty() && !listed)
		place_back(g->idle, l, &Link::idle_pos);
	else if (!l->conns.empty() && listed)
		take_out(g->idle, l, &Link::idle_pos);
}

// Puts new active link l (its path set) in its path's group. Throws
// std::bad_alloc with l in no group (an empty group may stay: harmless).
void link_group(Link *l)
{
	PathLinks &g = g_links_to[l->path];
	make_room(g.all, g.all.size() + 1);
	make_room(g.idle, g.all.size() + 1);
	l->group = &g;
	place_back(g.all, l, &Link::group_pos);
	link_conns_changed(l);
}

void link_ungroup(Link *l) noexcept
{
	PathLinks *g = l->group;
	if (!g)
		return;
	if (l->idle_pos != kNowhere)
		take_out(g->idle, l, &Link::idle_pos);
	take_out(g->all, l, &Link::group_pos);
	l->group = nullptr;
	if (g->all.empty())
		g_links_to.erase(l->path);
}

bool mine(const Link *l) { return l->pid == self_pid(); }

void link_events(Link *l, uint32_t events)
{
	if (!l->watcher)
		return;
	epoll_event ev{};
	ev.events = events;
	ev.data.u64 = l->key;
	epoll_ctl(l->watcher->epfd, EPOLL_CTL_MOD, l->fd, &ev);
}

// Moves the link into the epoll set of `src` (a source of this process),
// out of the one that had it: at most one source watches a link, the one of
// the connection on it (idle: the listener's; one we made, none), so a
// channel's fd is readable only for its own connections.
void link_watch(Source *src, Link *l)
{
	if (src->pid != l->pid || l->watcher == src)
		return;
	Item it{Item::peer};
	it.link = l;
	uint64_t key = add_item(src, l->fd, it); // (may throw: nothing changed)
	if (l->watcher) {
		g_items.erase(l->key);
		epoll_ctl(l->watcher->epfd, EPOLL_CTL_DEL, l->fd, nullptr);
	}
	l->watcher = src;
	l->key = key;
	if (!l->out.empty())
		link_events(l, EPOLLIN | EPOLLOUT);
}

// A new link on a connected socket, watched by `src`.
Link *link_new(int fd, bool active, Source *src)
{
	auto *l = new (std::nothrow) Link;
	if (!l) {
		close(fd);
		return nullptr;
	}
	l->fd = fd;
	l->pid = self_pid();
	l->active = active;
	try {
		make_room(g_links, g_links.size() + 1);
		place_back(g_links, l, &Link::pos);
		link_watch(src, l);
	} catch (...) {
		if (!g_links.empty() && g_links.back() == l)
			g_links.pop_back();
		close(fd);
		delete l;
		return nullptr;
	}
	return l;
}

// An idle link we made leaves its source's set (nothing sent waits in it):
// its peer's exit must not make a channel readable with no event. A stray
// record or the EOF is read when the link is taken again.
void link_unwatch_idle(Link *l)
{
	if (!l->active || !l->conns.empty() || !l->out.empty() || !l->watcher || !mine(l))
		return;
	g_items.erase(l->key);
	epoll_ctl(l->watcher->epfd, EPOLL_CTL_DEL, l->fd, nullptr);
	l->watcher = nullptr;
	l->key = 0;
}

// Closes a link that carries no connection any more.
void link_close(Link *l)
{
	if (l->watcher) {
		g_items.erase(l->key);
		if (mine(l))
			epoll_ctl(l->watcher->epfd, EPOLL_CTL_DEL, l->fd, nullptr);
	}
	close(l->fd);
	link_ungroup(l);
	if (!l->active && l->listener)
		l->listener->links_accepted--;
	take_out(g_links, l, &Link::pos); // (the order of g_links means nothing)
	delete l;
}

// Whether a link without connections has no further use: a passive one
// whose listener is gone, an active one whose listener was replaced.
bool link_idle(const Link *l) { return l->conns.empty() && (l->active ? l->stale : !l->listener); }

void peer_gone(SoftId *s);
void set_deadline(SoftId *s, bool on);
void link_broken(Link *l);

// The connection of `s` leaves its link (the link closes when idle).
void detach(SoftId *s)
{
	set_deadline(s, false);
	Link *l = s->link;
	if (!l)
		return;
	l->conns.erase(s->conn);
	link_conns_changed(l);
	s->link = nullptr;
	s->conn = 0;
	if (link_idle(l)) {
		link_close(l);
		return;
	}
	link_unwatch_idle(l);
	// An idle link we accepted waits for the next request in its
	// listener's set.
	if (!l->active && l->listener && l->conns.empty() && mine(l)) {
		try {
			link_watch(l->listener->src, l);
		} catch (...) {
			link_broken(l); // unwatched it would hang the next request
		}
	}
}

// The peer process is gone (EOF), or broke the protocol: every connection
// on the link ends as a dead peer's does, and the link closes.
void link_broken(Link *l)
{
	std::vector<SoftId *> on;
	on.reserve(l->conns.size());
	for (auto &kv : l->conns)
		on.push_back(kv.second);
	for (SoftId *s : on)
		peer_gone(s); // detaches s
	if (std::find(g_links.begin(), g_links.end(), l) != g_links.end())
		link_close(l);
}

// Sends one record (its connection number set); queued while the socket
// has no room. 0, or the errno of a link that is broken.
int link_send(Link *l, Message &m, uint32_t conn)
{
	m.conn = conn;
	uint8_t buf[kMaxMessage];
	size_t n = encode(m, buf, sizeof(buf));
	if (!n)
		return EINVAL;
	if (l->out.empty()) {
		ssize_t r = send(l->fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r == ssize_t(n))
			return 0;
		if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
			return r >= 0 ? EIO : errno;
	}
	try {
		l->out.emplace_back(buf, buf + n);
	} catch (...) {
		return ENOMEM;
	}
	if (l->out.size() == 1)
		link_events(l, EPOLLIN | EPOLLOUT);
	return 0;
}

// The socket has room again: what was queued goes, in order.
void link_flush(Link *l)
{
	while (!l->out.empty()) {
		auto &b = l->out.front();
		ssize_t r = send(l->fd, b.data(), b.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (r != ssize_t(b.size())) {
			link_broken(l);
			return;
		}
		l->out.pop_front();
	}
	link_events(l, EPOLLIN);
	link_unwatch_idle(l);
}

// Sends a record of `s`'s connection. False when its link is broken: every
// connection on it, `s`'s too, then ends as a dead peer's (peer_gone).
bool conn_send(SoftId *s, Message &m)
{
	if (!s->link || !mine(s->link))
		return false;
	if (link_send(s->link, m, s->conn) == 0)
		return true;
	link_broken(s->link);
	return false;
}

// Tells the peer that our end of the connection of `s`, which was in state
// `was`, is gone (what a closed socket of its own used to tell it): a
// connection gets DREQ, a handshake REJ "timeout" (the peer reports it as a
// dead requester or responder), an unanswered SIDR_REQ a failed SIDR_REP.
void notify_peer(SoftId *s, St was)
{
	if (!s->link)
		return;
	Message m;
	if (was == St::connected || was == St::rep_rcvd) {
		m.type = MsgType::dreq;
	} else if (was == St::req_sent) {
		m.type = MsgType::rej; // (for SIDR too: the responder lets the link go)
		m.status = kRejTimeout;
	} else if (was == St::rep_sent || was == St::req_rcvd) {
		m.type = s->ud ? MsgType::sidr_rep : MsgType::rej;
		m.status = s->ud ? kSidrReject : kRejTimeout;
	} else {
		return;
	}
	conn_send(s, m);
}

// The listener `l` goes: links it accepted take no new connection, and
// close when they carry none.
void listener_gone(SoftId *l)
{
	std::vector<Link *> idle;
	for (Link *k : g_links)
		if (!k->active && k->listener == l) {
			k->listener = nullptr;
			if (k->conns.empty())
				idle.push_back(k);
		}
	l->links_accepted = 0;
	for (Link *k : idle)
		link_close(k);
}

void roce_listen_mark(SoftId *s, int dev, bool on);

void close_listen(SoftId *s)
{
	for (int n = 0; s->roce_listens && n < kMaxRoceDevices; n++)
		if (s->roce_listens & (uint64_t(1) << n)) {
			roce_listen_mark(s, kRoceDeviceBase + n, false);
			s->roce_listens &= ~(uint64_t(1) << n);
		}
	if (s->lfd < 0)
		return;
	remove_item(s->src, s->lfd, s->lkey);
	// Unlink only our own socket (the path may have been taken over).
	struct stat st;
	if (!s->path.empty() && lstat(s->path.c_str(), &st) == 0 && st.st_ino == s->path_ino)
		unlink(s->path.c_str());
	close(s->lfd);
	s->lfd = -1;
	s->path.clear();
}

void arm_timer(Source *src)
{
	uint64_t first = 0;
	for (SoftId *s : {src->due_mad.top(), src->due.top()})
		if (s && (!first || s->deadline < first))
			first = s->deadline;
	if (first == src->armed)
		return;
	src->armed = first;
	itimerspec its{};
	if (first) {
		its.it_value.tv_sec = time_t(first / 1000000000ull);
		its.it_value.tv_nsec = long(first % 1000000000ull);
	}
	timerfd_settime(src->tfd, TFD_TIMER_ABSTIME, &its, nullptr);
}

bool hold_disconnect(SoftId *s);

// The peer ended connected s (DREQ, or its link ended): the link forgotten,
// DISCONNECTED now or once the receive CQ is polled (hold_disconnect).
void peer_disconnected(SoftId *s)
{
	detach(s);
	if (hold_disconnect(s))
		return;
	post(s, RDMA_CM_EVENT_DISCONNECTED, 0);
	s->st = St::disconnected;
}

// Sets s's time-out to `when` (0: none) and the source's timer to the
// earliest of its ids'.
void set_due(SoftId *s, uint64_t when)
{
	Source *src = s->src;
	DueHeap<SoftId> &h = s->mad ? src->due_mad : src->due;
	DueHeap<SoftId> &other = s->mad ? src->due : src->due_mad;
	other.remove(s); // (s->mad is set before any time-out: not expected)
	if (when) {
		h.set(s, when);
	} else {
		h.remove(s);
		s->deadline = 0;
	}
	arm_timer(src);
}

void set_deadline(SoftId *s, bool on)
{
	set_due(s, on ? now_ns() + g_timeout_ns.load() : 0);
}

void Source::join(SoftId *s) noexcept
{
	s->src = this;
	place_back(ids, s, &SoftId::src_pos); // within the room reserve_one made
}

void Source::leave(SoftId *s) noexcept
{
	due_mad.remove(s);
	due.remove(s);
	take_out(ids, s, &SoftId::src_pos);
}

Endpoint endpoint_of(const sockaddr *sa)
{
	Endpoint e;
	e.family = sa->sa_family;
	e.port = port_of(sa);
	if (sa->sa_family == AF_INET) {
		memcpy(e.addr, &reinterpret_cast<const sockaddr_in *>(sa)->sin_addr, 4);
	} else {
		auto *a6 = reinterpret_cast<const sockaddr_in6 *>(sa);
		memcpy(e.addr, &a6->sin6_addr, 16);
		e.scope_id = a6->sin6_scope_id;
	}
	return e;
}

void sockaddr_of(const Endpoint &e, sockaddr_storage &ss)
{
	memset(&ss, 0, sizeof(ss));
	if (e.family == AF_INET) {
		auto *a = reinterpret_cast<sockaddr_in *>(&ss);
		a->sin_family = AF_INET;
		a->sin_port = htons(e.port);
		memcpy(&a->sin_addr, e.addr, 4);
	} else {
		auto *a = reinterpret_cast<sockaddr_in6 *>(&ss);
		a->sin6_family = AF_INET6;
		a->sin6_port = htons(e.port);
		memcpy(&a->sin6_addr, e.addr, 16);
		a->sin6_scope_id = e.scope_id;
	}
}

uint32_t qkey_for(uint16_t ps) { return ps == RDMA_PS_IPOIB ? 0 : RDMA_UDP_QKEY; }

bool is_multicast(const sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return IN_MULTICAST(ntohl(reinterpret_cast<const sockaddr_in *>(sa)->sin_addr.s_addr));
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_MULTICAST(&reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr);
	return false;
}

// ------------------------------------------------------------------ state machine

// The peer's connection ended (EOF, a broken record, or a protocol error).
void peer_gone(SoftId *s)
{
	switch (s->st) {
	case St::req_sent:
		if (s->ud)
			post(s, RDMA_CM_EVENT_UNREACHABLE, -ECONNRESET);
		else
			post(s, RDMA_CM_EVENT_REJECTED, kRejTimeout);
		s->st = St::done;
		break;
	case St::req_rcvd:
		// Not accepted yet: the id has no uid of its own; accept() reports it.
		s->gone_before_accept = true;
		break;
	case St::rep_sent:
	case St::rep_rcvd:
		post(s, RDMA_CM_EVENT_REJECTED, kRejTimeout);
		s->st = St::done;
		break;
	case St::connected:
		peer_disconnected(s);
		return;
	case St::dreq_sent:
		post(s, RDMA_CM_EVENT_DISCONNECTED, 0);
		s->st = St::disconnected;
		break;
	default:
		break;
	}
	detach(s);
}

// The active side takes the passive side's REP: its QP attributes, the
// smaller of the two sides' RDMA READ limits, and CONNECT_RESPONSE.
void take_rep(SoftId *s, const Message &m)
{
	s->peer = m;
	s->peer_valid = true;
	s->rnr = m.rnr_retry_count;
	if (s->resp_res > m.initiator_depth)
		s->resp_res = m.initiator_depth;
	if (s->init_depth > m.responder_resources)
		s->init_depth = m.responder_resources;
	RawEvent e = make_event(s, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
	fill_conn(e, m);
	push(s->src, std::move(e));
	s->st = St::rep_rcvd;
}

void on_message(SoftId *s, const Message &m)
{
	switch (s->st) {
	case St::req_sent:
		if (s->ud && m.type == MsgType::sidr_rep) {
			RawEvent e = make_event(s, m.status ? RDMA_CM_EVENT_UNREACHABLE : RDMA_CM_EVENT_ESTABLISHED,
						m.status ? -ECONNRESET : 0);
			set_private(e, m);
			if (!m.status && is_roce(s->device) && !roce_ah(s, e.ud.ah_attr)) {
				e.event = RDMA_CM_EVENT_UNREACHABLE;
				e.status = -EADDRNOTAVAIL;
			} else if (!m.status) {
				if (!is_roce(s->device))
					soft_ah(m.port, e.ud.ah_attr);
				e.ud.ah_attr.port_num = 1;
				e.ud.qp_num = m.qpn;
				e.ud.qkey = m.qkey;
			}
			push(s->src, std::move(e));
			s->st = St::done;
			detach(s);
			return;
		}
		if (!s->ud && m.type == MsgType::rep) {
			take_rep(s, m);
			set_deadline(s, false);
			return;
		}
		if (!s->ud && m.type == MsgType::rej) {
			RawEvent e = make_event(s, RDMA_CM_EVENT_REJECTED, m.status);
			set_private(e, m);
			push(s->src, std::move(e));
			s->st = St::done;
			detach(s);
			return;
		}
		break;
	case St::rep_sent:
		if (m.type == MsgType::rtu) {
			s->st = St::connected;
			set_deadline(s, false);
			RawEvent e = make_event(s, RDMA_CM_EVENT_ESTABLISHED, 0);
			fill_conn(e, s->peer);
			e.conn.private_data_len = 0;
			e.ud.private_data_len = 0;
			set_private(e, m);
			push(s->src, std::move(e));
			return;
		}
		if (m.type == MsgType::rej) {
			RawEvent e = make_event(s, RDMA_CM_EVENT_REJECTED, m.status);
			set_private(e, m);
			push(s->src, std::move(e));
			s->st = St::done;
			detach(s);
			return;
		}
		[[fallthrough]];
	case St::connected:
	case St::rep_rcvd:
		if (m.type == MsgType::dreq) {
			// No DREP: the sender of a DREQ closes its end right after it
			// (rdma_disconnect, rdma_destroy_id), so a reply would only
			// find a closed socket.
			peer_disconnected(s);
			return;
		}
		break;
	case St::dreq_sent:
		if (m.type == MsgType::drep || m.type == MsgType::dreq) {
			post(s, RDMA_CM_EVENT_DISCONNECTED, 0);
			s->st = St::disconnected;
			detach(s);
			return;
		}
		break;
	default:
		break;
	}
	// A record the state does not expect: the peer is broken; the
	// connection ends on both sides (the peer knows it when it ended it).
	if (m.type != MsgType::rej && m.type != MsgType::dreq && m.type != MsgType::sidr_rep)
		notify_peer(s, s->st);
	peer_gone(s);
}

// Reads one record. 1: `m` holds it; 0: nothing to read; -1: the connection
// is over (EOF, error, or a malformed record, which parse() counted).
int read_msg(int fd, Message &m)
{
	uint8_t buf[kMaxMessage + 1];
	ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0)
		return -1;
	// MSG_TRUNC returns the record's real length: an oversized record is
	// handed to the parser at its cut length, which counts it as too long.
	size_t len = size_t(n) > sizeof(buf) ? sizeof(buf) : size_t(n);
	return parse(buf, len, m) == ParseError::ok ? 1 : -1;
}

// Answers a request that no listener takes (REJ, or a failed SIDR_REP).
void refuse(Link *l, const Message &req, uint16_t reason)
{
	Message r;
	if (req.type == MsgType::sidr_req) {
		r.type = MsgType::sidr_rep;
		r.status = kSidrUnsupported;
	} else {
		r.type = MsgType::rej;
		r.status = reason;
	}
	if (link_send(l, r, req.conn) != 0)
		link_broken(l);
}

// A request arrived on a link that listener l->listener accepted.
void on_request(Link *l, const Message &m);

// One record per readiness report: the epoll set is level-triggered, so a
// further record is reported again (no recv that only finds EAGAIN). A
// request opens a connection on a link we accepted; any other record goes
// to its connection (one already gone ignores it). EOF, a malformed record
// or a request on a link we made: the link is broken.
void on_link_readable(Link *l)
{
	Message m;
	int r = read_msg(l->fd, m);
	if (r == 0)
		return;
	bool request = r > 0 && (m.type == MsgType::req || m.type == MsgType::sidr_req);
	if (r < 0 || (request && (l->active || l->conns.count(m.conn)))) {
		link_broken(l);
		return;
	}
	if (request) {
		on_request(l, m);
		return;
	}
	auto it = l->conns.find(m.conn);
	if (it != l->conns.end())
		on_message(it->second, m);
}

// One connection per readiness report (level-triggered: a further one is
// reported again; no accept that only finds EAGAIN): a link of this
// listener's.
void on_listen_readable(SoftId *l)
{
	int fd = accept4(l->lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	if (!peer_is_us(fd)) {
		close(fd);
		return;
	}
	if (Link *k = link_new(fd, false, l->src)) {
		k->listener = l;
		l->links_accepted++;
	}
}

// ------------------------------------------------------------------ disconnects that wait
// A DREQ reaches the passive side through the CM's socket faster than any
// network: often before its application polled the peer's last messages,
// already in its receive CQ. A program that closes a connection as soon as
// DISCONNECTED comes and reaps its CQ afterwards then meets completions of a
// QP it destroyed (libfabric 1.17's rxm crashed at teardown in 16 of 40
// fi_pingpong runs on a loaded host). So, as on a network where the DREQ comes after the data, the
// passive side's DISCONNECTED waits until the application has polled the
// receive completions that were in the CQ when the DREQ came, checked every
// kHoldCheckNs, for at most OPENVERBS_CM_DISCONNECT_WAIT_MS (20 ms unless
// set; 0: no wait; ignored in setuid programs): a program that polls only
// after the event gets it that much later. The same holds when the peer's
// link ends while connected (the peer process exited or died). The soft
// provider answers the question (openverbs_soft_recv_backlog,
// providers/soft/cq.cpp), found with dlsym in the loaded provider; without
// it nothing waits. sroce devices' connections, whose DREQ crosses the
// network behind the data, do not wait.
constexpr uint64_t kHoldCheckNs = 1000000;

uint64_t hold_max_ns()
{
	static const uint64_t ns = [] {
		unsigned long ms = 20;
		const char *v = ov::secure_env("OPENVERBS_CM_DISCONNECT_WAIT_MS");
		if (v && *v && !ov::parse_uint(v, 600000, &ms))
			cm::log::warn("OPENVERBS_CM_DISCONNECT_WAIT_MS=%s is not a number of "
				      "milliseconds up to 600000: 20 taken",
				      v);
		return uint64_t(ms) * 1000000ull;
	}();
	return ns;
}

using BacklogFn = int (*)(ibv_context *, uint32_t, uint64_t *);

// dl_iterate_phdr's callback: the path of the loaded soft provider
// (libsoft-rdmav<PABI>.so) into the PATH_MAX buffer `out`.
int find_soft_provider(dl_phdr_info *info, size_t, void *out) noexcept
{
	const char *name = info->dlpi_name;
	const char *base = name ? strrchr(name, '/') : nullptr;
	if (!base || strncmp(base + 1, "libsoft-rdmav", 13) || strlen(name) >= PATH_MAX)
		return 0;
	strcpy(static_cast<char *>(out), name);
	return 1;
}

// The soft provider's function `name` (of type Fn, one lookup per Tag),
// looked up once the provider is loaded (null until then, or when it lacks
// it: `without` says what that costs, at debug level).
template <class Fn, int Tag> Fn provider_fn(const char *name, const char *without)
{
	static std::atomic<Fn> fn{nullptr};
	static std::atomic<bool> missing{false};
	if (Fn f = fn.load(std::memory_order_acquire))
		return f;
	if (missing.load(std::memory_order_relaxed))
		return nullptr;
	char path[PATH_MAX] = "";
	if (!dl_iterate_phdr(find_soft_provider, path))
		return nullptr; // not loaded yet: look again next time
	// The provider stays loaded while its devices are open; this reference
	// keeps the function valid for the life of the process.
	void *h = dlopen(path, RTLD_NOLOAD | RTLD_LAZY);
	void *sym = h ? dlsym(h, name) : nullptr;
	if (!sym) {
		cm::log::debug("%s has no %s: %s", path, name, without);
		missing.store(true, std::memory_order_relaxed);
		return nullptr;
	}
	Fn f = reinterpret_cast<Fn>(sym);
	fn.store(f, std::memory_order_release);
	return f;
}

BacklogFn backlog_fn()
{
	return provider_fn<BacklogFn, 0>("openverbs_soft_recv_backlog", "disconnects do not wait");
}

// Listeners on sroce devices, told to the provider
// (openverbs_soft_roce_listen_at, providers/soft/roce/share.cpp): when
// several processes share a device, a REQ (or SIDR_REQ) that reaches another
// process's socket is handed to the one whose CM listens on its service ID
// at its destination address (else at the wildcard address).
using ListenFn = int (*)(ibv_context *, uint64_t, const uint8_t *, uint32_t, int);

void roce_listen_mark(SoftId *s, int dev, bool on)
{
	ListenFn fn = provider_fn<ListenFn, 1>("openverbs_soft_roce_listen_at",
					       "REQs reach only a listener of the process that reads them");
	ibv_context *ctx = fn ? ov::cm::device_context(soft_devices().guid[dev]) : nullptr;
	const sockaddr *sa = reinterpret_cast<const sockaddr *>(&s->addr_src);
	// The address as the RDMA CM header of a REQ carries it (mad.h): IPv4
	// (and IPv4-mapped IPv6) in the last 4 bytes; the wildcard all zero.
	uint8_t addr[16] = {};
	if (sa->sa_family == AF_INET) {
		memcpy(addr + 12, &reinterpret_cast<const sockaddr_in *>(sa)->sin_addr, 4);
	} else {
		const in6_addr &a6 = reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(&a6))
			memcpy(addr + 12, a6.s6_addr + 12, 4);
		else
			memcpy(addr, a6.s6_addr, 16);
	}
	if (ctx && fn(ctx, mad::service_id(s->ps, port_of(sa)), addr, s->handle, on ? 1 : 0) != 0 && on)
		cm::log::warn("sroce%d: cannot tell other processes of this device that port %u "
			      "listens here: their sockets' REQs for it will not reach it",
			      dev - kRoceDeviceBase, unsigned(port_of(sa)));
}

// s's QP on its device: the provider's answer (see above), -1 when there is
// no one to ask.
int recv_backlog(SoftId *s, uint64_t *mark)
{
	if (!s->qpn || s->device < 0 || s->ud || s->mad || !hold_max_ns())
		return -1;
	BacklogFn fn = backlog_fn();
	if (!fn)
		return -1;
	ibv_context *ctx = ov::cm::device_context(soft_devices().guid[s->device]);
	return ctx ? fn(ctx, s->qpn, mark) : -1;
}

// The peer ended connected s (DREQ, or the end of its link; s's link already
// detached): true when its DISCONNECTED must wait (s is then in disc_held,
// its timer set).
bool hold_disconnect(SoftId *s)
{
	uint64_t mark = 0;
	if (recv_backlog(s, &mark) != 1)
		return false;
	uint64_t now = now_ns();
	s->backlog_mark = mark;
	s->hold_until = now + hold_max_ns();
	s->st = St::disc_held;
	set_due(s, now + kHoldCheckNs); // the limit is at least 1 ms (still_held caps it)
	cm::log::debug("the peer ended the connection of QP %u: DISCONNECTED waits until its "
		       "receive CQ is polled",
		       s->qpn);
	return true;
}

// disc_held s at its check: true (its next check set) while the application
// has not polled what was in its receive CQ and the wait is not over.
bool still_held(SoftId *s, uint64_t now)
{
	if (now >= s->hold_until || recv_backlog(s, &s->backlog_mark) != 1) {
		cm::log::debug("QP %u: DISCONNECTED after %s", s->qpn,
			       now >= s->hold_until ? "the longest wait" : "the receive CQ was polled");
		return false;
	}
	set_due(s, std::min(now + kHoldCheckNs, s->hold_until));
	return true;
}

// Runs what is due for the ids of `src`: a MAD sent again, or the end of a
// wait. mad_only: only ids that speak the IB CM on QP1 (the progress thread,
// below, runs those whether or not the application reads its events).
void run_due(Source *src, bool mad_only)
{
	uint64_t now = now_ns();
	// Earliest first. What runs sets later time-outs only (a wait's next
	// check at least 1 ms on, an MRA's wait), or uses up one of a MAD's
	// tries, so the loop ends.
	for (;;) {
		SoftId *s = src->due_mad.top(), *o = mad_only ? nullptr : src->due.top();
		if (!s || (o && o->deadline < s->deadline))
			s = o;
		if (!s || s->deadline > now)
			break;
		src->due_mad.remove(s);
		src->due.remove(s);
		if (s->mad && s->retx) {
			if (s->tries > 0) {
				mad_send(s, s->last, true); // the answer is late: again
				continue;
			}
			s->retx = false;
			if (s->st == St::disconnected)
				continue; // no DREP: the disconnect was reported already
		}
		switch (s->st) {
		case St::req_sent:
			post(s, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
			s->st = St::done;
			notify_peer(s, St::req_sent);
			break;
		case St::rep_sent:
			post(s, RDMA_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT);
			s->st = St::done;
			notify_peer(s, St::rep_sent);
			break;
		case St::dreq_sent:
			post(s, RDMA_CM_EVENT_DISCONNECTED, 0);
			s->st = St::disconnected;
			break;
		case St::disc_held:
			if (still_held(s, now))
				continue;
			post(s, RDMA_CM_EVENT_DISCONNECTED, 0);
			s->st = St::disconnected;
			break;
		default:
			continue;
		}
		detach(s);
	}
	arm_timer(src);
}

void on_timer(Source *src)
{
	uint64_t x;
	(void)!read(src->tfd, &x, sizeof(x));
	src->armed = 0;
	run_due(src, false);
}

// The link to whoever listens on `dst` (exact address, then the wildcard of
// its family, then the IPv6 wildcard for IPv4): ours to that listener
// socket when we have one, else a new one. A socket replaced since our link
// was made (another inode) gets a new link; the old one is stale.
int link_to_listener(Source *src, uint16_t ps, const sockaddr *dst, Link *&out)
{
	std::string dir;
	if (int rc = cm_dir(dir))
		return rc;
	std::vector<std::string> keys = {addr_key(dst)};
	int family = dst->sa_family;
	if (family == AF_INET6 &&
	    IN6_IS_ADDR_V4MAPPED(&reinterpret_cast<const sockaddr_in6 *>(dst)->sin6_addr))
		family = AF_INET;
	if (family == AF_INET)
		keys.push_back("any4");
	keys.push_back("any6");
	uint16_t port = port_of(dst);
	for (auto &k : keys) {
		sockaddr_un un;
		std::string path = sock_path(dir, ps, port, k);
		struct stat st;
		if (!fill_un(un, path))
			continue;
		bool exists = stat(path.c_str(), &st) == 0;
		// A link carries one connection at a time (so that only that
		// connection's channel watches it): an idle one is reused, one
		// already watched by this source first. The links made to a
		// socket that is gone or replaced are stale (each closes once
		// idle; the idle ones now).
		Link *have = nullptr;
		auto git = g_links_to.find(path);
		if (git != g_links_to.end()) {
			PathLinks &g = git->second;
			if (!exists || g.ino != st.st_ino) {
				for (Link *l : g.all)
					if (mine(l) && (!exists || l->ino != st.st_ino))
						l->stale = true;
				g.ino = exists ? st.st_ino : 0;
			}
			for (size_t i = g.idle.size(); i-- > 0;) {
				Link *l = g.idle[i];
				if (!mine(l))
					continue;
				if (!l->stale) {
					if (!have || l->watcher == src)
						have = l;
					continue;
				}
				bool last = g.all.size() == 1;
				link_close(l); // the group goes with its last link
				if (last)
					break;
			}
		}
		if (!exists)
			continue;
		if (have) {
			out = have;
			return 0;
		}
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return errno;
		int rc = ::connect(fd, reinterpret_cast<sockaddr *>(&un), sizeof(un));
		if (rc != 0 && errno == EAGAIN) {
			// The listener's backlog is full: wait for room, as a
			// blocking connect does (a fresh socket has no other flag).
			fcntl(fd, F_SETFL, 0);
			rc = ::connect(fd, reinterpret_cast<sockaddr *>(&un), sizeof(un));
			fcntl(fd, F_SETFL, O_NONBLOCK);
		}
		if (rc == 0) {
			if (!peer_is_us(fd)) {
				close(fd);
				continue;
			}
			Link *l = link_new(fd, true, src);
			if (!l)
				return ENOMEM;
			l->ino = st.st_ino;
			try {
				l->path = path;
				link_group(l);
				l->group->ino = st.st_ino;
			} catch (...) {
				l->stale = true; // closes once its connection ends
			}
			out = l;
			return 0;
		}
		close(fd);
	}
	return ECONNREFUSED;
}

// A number for a new connection on link `l` (ours): never 0, never one in use.
uint32_t next_conn(Link *l)
{
	do
		l->next_conn++;
	while (!l->next_conn || l->conns.count(l->next_conn));
	return l->next_conn;
}

int reserve(SoftId *s, const sockaddr *addr)
{
	std::string dir;
	if (int rc = cm_dir(dir))
		return rc;
	if (!ps_name(s->ps))
		return EINVAL;
	uint16_t port = port_of(addr);
	std::string key = addr_key(addr);
	for (int tries = 0; tries < 64; tries++) {
		uint16_t p = port ? port : ephemeral_port();
		std::string path = sock_path(dir, s->ps, p, key);
		int fd = -1;
		ino_t ino = 0;
		int rc = bind_path(dir, path, fd, ino);
		if (rc == EADDRINUSE && !port)
			continue;
		if (rc == ENOENT && tries == 0) { // the directory went away: make it again
			g_cm_dir.clear();
			if ((rc = cm_dir(dir)))
				return rc;
			continue;
		}
		if (rc)
			return rc;
		s->lfd = fd;
		s->path = path;
		s->path_ino = ino;
		s->lkey = add_item(s->src, fd, Item{Item::listen, s});
		memset(&s->addr_src, 0, sizeof(s->addr_src));
		memcpy(&s->addr_src, addr, sa_len(addr));
		set_port(reinterpret_cast<sockaddr *>(&s->addr_src), p);
		return 0;
	}
	return EADDRINUSE;
}

// ------------------------------------------------------------------ QP attributes

int qp_attr(SoftId *s, ibv_qp_attr &a, int &mask)
{
	Port local;
	if (!local_port(s, local))
		return EINVAL;
	bool connected = s->peer_valid;
	switch (a.qp_state) {
	case IBV_QPS_INIT:
		a.pkey_index = 0;
		a.port_num = 1;
		mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (s->ud) {
			a.qkey = s->qkey;
			mask |= IBV_QP_QKEY;
		} else {
			a.qp_access_flags = 0;
			if (connected) {
				a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
				if (s->resp_res)
					a.qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
			}
			mask |= IBV_QP_ACCESS_FLAGS;
		}
		return 0;
	case IBV_QPS_RTR:
		mask = IBV_QP_STATE;
		if (s->ud)
			return 0;
		if (!connected)
			return EINVAL;
		a.path_mtu = ibv_mtu(local.mtu < s->peer.port.mtu ? local.mtu : s->peer.port.mtu);
		a.dest_qp_num = s->peer.qpn;
		a.rq_psn = s->peer.psn;
		memset(&a.ah_attr, 0, sizeof(a.ah_attr));
		if (is_roce(s->device)) {
			if (!roce_ah(s, a.ah_attr))
				return EADDRNOTAVAIL;
		} else {
			soft_ah(s->peer.port, a.ah_attr);
		}
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		// Responder attributes for the QPs that answer RDMA READs and
		// atomics: RC and the XRC target (the kernel's CM does the same).
		if (s->qp_type == IBV_QPT_RC || s->qp_type == IBV_QPT_XRC_RECV) {
			a.max_dest_rd_atomic = s->resp_res;
			a.min_rnr_timer = 0;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
		return 0;
	case IBV_QPS_RTS:
		a.sq_psn = s->ud ? 0 : s->psn;
		mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		if (!s->ud && (s->qp_type == IBV_QPT_RC || s->qp_type == IBV_QPT_XRC_SEND)) {
			if (!connected)
				return EINVAL;
			a.timeout = s->ack_timeout;
			a.retry_cnt = s->retry;
			a.rnr_retry = s->rnr;
			a.max_rd_atomic = s->init_depth;
			mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		} else if (s->qp_type == IBV_QPT_XRC_RECV) {
			// An XRC target sends only acknowledgements: the timeout
			// is all RTS asks besides the PSN.
			if (!connected)
				return EINVAL;
			a.timeout = s->ack_timeout;
			mask |= IBV_QP_TIMEOUT;
		}
		return 0;
	default:
		return EINVAL;
	}
}

// ------------------------------------------------------------------ the backend of one id

class Backend : public IdBackend {
public:
	SoftId *s;

	// Throws std::bad_alloc; no id is then made (nothing leaks).
	Backend(Source &src, uint64_t uid, uint16_t ps, uint8_t qpt)
	{
		std::unique_ptr<SoftId> made(new SoftId());
		src.reserve_one();
		s = made.get();
		s->uid = uid;
		s->handle = g_next_handle++;
		s->ps = ps;
		s->qp_type = qpt;
		s->ud = ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB || qpt == IBV_QPT_UD;
		s->qkey = s->ud ? qkey_for(ps) : 0;
		g_ids[s->handle] = s;
		made.release();
		src.join(s);
	}
	~Backend() override
	{
		uint32_t n;
		destroy(n);
	}
	const char *kind() const noexcept override { return "soft"; }

	int destroy(uint32_t &events_reported) noexcept override
	{
		std::lock_guard<std::recursive_mutex> g(g_lock);
		events_reported = 0;
		if (!s)
			return 0;
		// Events made but not yet taken: the kernel's CM hands an event to a
		// reader blocked on the channel the moment it is made, so with a
		// reader inside next() they count as reported and stay for it to take
		// (the front end waits for their acknowledgement); without one they
		// are dropped, as the kernel drops what nobody has read.
		uint32_t pending = 0;
		if (s->src->waiting.load() > 0)
			s->src->ready.for_each([&](const RawEvent &e) {
				pending += e.handle == s->handle && e.event != RDMA_CM_EVENT_CONNECT_REQUEST;
			});
		events_reported = s->reported + pending;
		if (s->mad) {
			// As the kernel's CM: a connection goes with DREQ, a
			// handshake with REJ (not retried: the id is gone).
			if (s->st == St::connected || s->st == St::rep_sent || s->st == St::rep_rcvd) {
				mad::Mad m = mad_for(s, mad::Attr::dreq);
				m.qpn = s->peer.qpn;
				mad_send(s, m, false);
				mad_send(s, m, false);
			} else if (s->retx && s->last.attr == mad::Attr::dreq) {
				mad_send(s, s->last, false); // no DREP yet: once more
			} else if (s->st == St::req_sent || s->st == St::req_rcvd) {
				mad::Mad m = mad_for(s, mad::Attr::rej);
				m.msg = s->st == St::req_rcvd ? mad::kMsgReq : mad::kMsgOther;
				m.reason = s->st == St::req_rcvd ? kRejConsumer : kRejTimeout;
				mad_send(s, m, false);
			}
		}
		if (s->link) {
			// The peer learns it on the link, which stays: a connection
			// goes with DREQ, a handshake with REJ "timeout" (what the
			// peer reads as a dead requester or responder), an
			// unanswered SIDR_REQ with a failed SIDR_REP.
			// (Done first: a broken link then reports nothing for it.)
			St was = s->st;
			s->st = St::done;
			notify_peer(s, was == St::rep_sent ? St::connected : was);
		}
		if (s->links_accepted) // (a scan of every link: listeners only)
			listener_gone(s);
		close_listen(s);
		detach(s);
		s->src->leave(s);
		if (!pending)
			drop_events(s->src, s->handle);
		arm_timer(s->src);
		g_ids.erase(s->handle);
		delete s;
		s = nullptr;
		return 0;
	}

	int bind_addr(const sockaddr *addr, socklen_t len) noexcept override
	{
		if (!addr)
			return EINVAL;
		if (!ip_family(addr, len))
			return addr->sa_family == AF_INET || addr->sa_family == AF_INET6 ? EINVAL
											    : EAFNOSUPPORT;
		std::lock_guard<std::recursive_mutex> g(g_lock);
		if (s->st != St::idle)
			return EINVAL;
		int dev = device_for(addr);
		if (dev < 0)
			return EADDRNOTAVAIL;
		try {
			if (int rc = reserve(s, addr))
				return rc;
		} catch (...) {
			return ENOMEM;
		}
		// A wildcard bind names no device (as the kernel's).
		s->device = is_wildcard(addr) ? -1 : dev;
		s->st = St::bound;
		return 0;
	}

	int resolve_addr(const sockaddr *src, socklen_t src_len, const sockaddr *dst, socklen_t dst_len,
			 int) noexcept override
	{
		if (!ip_family(dst, dst_len) || (src && !ip_family(src, src_len)))
			return EINVAL;
		std::lock_guard<std::recursive_mutex> g(g_lock);
		if (s->st == St::idle && src && !is_wildcard(src))
			if (int rc = bind_addr(src, src_len))
				return rc;
		if (s->st != St::idle && s->st != St::bound && s->st != St::addr_resolved)
			return EINVAL;
		bool mc = is_multicast(dst);
		int dst_dev = mc ? -1 : device_for(dst);
		int dev = s->device >= 0 ? s->device : mc ? default_device() : dst_dev;
		if (dev < 0 || (!mc && dst_dev < 0) || !have_device(dev)) {
			post(s, RDMA_CM_EVENT_ADDR_ERROR, -EHOSTUNREACH);
			return 0;
		}
		// Source: the bound address, else the destination's own address
		// (a soft device's destinations are local), or over an sroce
		// device the interface's address towards the destination, with
		// the bound or an ephemeral port.
		const sockaddr *bound = reinterpret_cast<const sockaddr *>(&s->addr_src);
		if (s->st != St::bound || is_wildcard(bound)) {
			sockaddr_storage src_addr{};
			if (is_roce(dev) && !roce_source_for(roce_ifname(dev), dst, src_addr)) {
				post(s, RDMA_CM_EVENT_ADDR_ERROR, -EHOSTUNREACH);
				return 0;
			}
			uint16_t port = s->st == St::bound ? port_of(bound) : ephemeral_port();
			memset(&s->addr_src, 0, sizeof(s->addr_src));
			if (is_roce(dev))
				s->addr_src = src_addr;
			else if (mc)
				s->addr_src.ss_family = dst->sa_family; // the wildcard
			else
				memcpy(&s->addr_src, dst, sa_len(dst));
			set_port(reinterpret_cast<sockaddr *>(&s->addr_src), port);
		}
		s->device = dev;
		s->dst_device = mc ? dev : dst_dev;
		memset(&s->addr_dst, 0, sizeof(s->addr_dst));
		memcpy(&s->addr_dst, dst, sa_len(dst));
		s->st = St::addr_resolved;
		post(s, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
		return 0;
	}

	int resolve_route(int) noexcept override
	{
		std::lock_guard<std::recursive_mutex> g(g_lock);
		if (s->st != St::addr_resolved && s->st != St::route_resolved)
			return EINVAL;
		s->have_route = true;
		s->st = St::route_resolved;
		post(s, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
		return 0;
	}

	int query(unsigned what, Route &out) noexcept override
	{
		std::lock_guard<std::recursive_mutex> g(g_lock);
		Port local, remote;
		bool have_local = local_port(s, local);
		bool have_remote = remote_port(s, remote);
		try {
			if (what == 0 || (what & ov::cm::QUERY_ADDR)) {
				out.src = s->addr_src;
				out.dst = s->addr_dst;
				out.have_addrs = true;
				if (have_local) {
					out.node_guid = soft_devices().guid[s->device];
					out.ibdev_index = ov::cm::kInvalidDevIndex;
					out.port_num = 1;
					out.have_pkey = true;
					out.pkey = htons(0xffff);
				}
			}
			if ((what == 0 || (what & ov::cm::QUERY_GID)) && have_local) {
				out.have_gids = true;
				memcpy(out.sgid.raw, local.gid, 16);
				memcpy(out.dgid.raw, have_remote ? remote.gid : local.gid, 16);
			}
			if ((what == 0 || (what & ov::cm::QUERY_PATH)) && have_local && s->have_route) {
				ibv_sa_path_rec p{};
				memcpy(p.sgid.raw, local.gid, 16);
				memcpy(p.dgid.raw, have_remote ? remote.gid : local.gid, 16);
				p.slid = htons(local.lid);
				p.dlid = htons(have_remote ? remote.lid : local.lid);
				p.reversible = 1;
				p.numb_path = 1;
				p.pkey = htons(0xffff);
				p.mtu_selector = 2; // exactly
				p.mtu = kMtu4096;
				if (is_roce(s->device)) {
					// RoCE v2: a global route between the
					// addresses' GIDs, no LIDs, the interface's MTU.
					p.hop_limit = kRoceHopLimit;
					p.mtu = local.mtu;
				}
				p.rate_selector = 2;
				p.rate = 3; // 10 Gb/s
				p.packet_life_time_selector = 2;
				out.paths.assign(1, p);
				out.have_paths = true;
			}
		} catch (...) {
			return ENOMEM;
		}
		return 0;
	}

	int init_qp_attr(ibv_qp_attr &attr, int &mask) noexcept override
	{
		std::lock_guard<std::recursive_mutex> g(g_lock);
		return qp_attr(s, attr, mask);
	}

	int connect(const ConnParam &p, const Ece &) noexcept override
	{
		std::lock_guard<std::recursive_mutex> g(g_lock);
		if (s->st != St::route_resolved)
			return EINVAL;
		Port local;
		if (!local_port(s, local))
			return EINVAL;
		Message m;
		m.type = s->ud ? MsgType::sidr_req : MsgType::req;
		if (p.private_data_len > kMaxPrivate[unsigned(m.type)])
			return EINVAL;
		m.port_space = s->ps;
		m.src = endpoint_of(reinterpret_cast<const sockaddr *>(&s->addr_src));
		m.dst = endpoint_of(reinterpret_cast<const sockaddr *>(&s->addr_dst));
		m.private_len = p.private_data_len;
		memcpy(m.private_data, p.private_data, p.private_data_len);
		if (!s->ud) {
			if (s->qp_type != IBV_QPT_RC && s->qp_type != IBV_QPT_UC &&
			    s->qp_type != IBV_QPT_XRC_SEND)
				return EINVAL;
			if (p.qp_num < 2 || p.qp_num > 0xffffff)
				return EINVAL;
			m.qp_type = s->qp_type;
			m.qpn = p.qp_num;
			s->qpn = p.qp_num;
			s->psn = rng()() & 0xffffff;
			m.psn = s->psn;
			s->resp_res = p.responder_resources;
			s->init_depth = p.initiator_depth;
			s->retry = p.retry_count & 7;
			s->rnr = p.rnr_retry_count & 7;
			m.responder_resources = s->resp_res;
			m.initiator_depth = s->init_depth;
			m.retry_count = s->retry;
			m.rnr_retry_count = s->rnr;
			m.flow_control = p.flow_control;
			m.srq = p.srq;
			m.port = local;
		}
		if (is_roce(s->device))
			return s->ud ? sidr_mad(m, local) : connect_mad(m, local);
		// A link found broken by the send (its peer died unseen) is
		// dropped and a new one made once.
		for (int attempt = 0; attempt < 2; attempt++) {
			Link *l = nullptr;
			int rc;
			try {
				rc = link_to_listener(s->src, s->ps, reinterpret_cast<const sockaddr *>(&s->addr_dst), l);
				if (!rc)
					link_watch(s->src, l);
			} catch (...) {
				rc = ENOMEM;
			}
			if (rc == ENOMEM)
				return rc;
			if (rc != 0) {
				// Nobody listens: what the kernel's CM answers (REJ
				// "invalid service ID"; for SIDR, a reply with a
				// failure status).
				if (s->ud)
					post(s, RDMA_CM_EVENT_UNREACHABLE, -ECONNRESET);
				else
					post(s, RDMA_CM_EVENT_REJECTED, kRejInvalidServiceId);
				s->st = St::done;
				return 0;
			}
			uint32_t conn = next_conn(l);
			try {
				l->conns[conn] = s;
			} catch (...) {
				return ENOMEM;
			}
			link_conns_changed(l);
			rc = link_send(l, m, conn);
			if (rc == EINVAL || rc == ENOMEM) {
				l->conns.erase(conn);
				link_conns_changed(l);
				return rc;
			}
			if (rc != 0) {
				l->conns.erase(conn);
				link_conns_changed(l);
				link_broken(l);
				continue;
			}
			s->link = l;
			s->conn = conn;
			s->st = St::req_sent;
			set_deadline(s, true);
			return 0;
		}
		return ECONNRESET;
	}

	// The active side's first MAD: the device's QP1, a communication (or
	// request) ID, a transaction ID, our GID and the destination's.
	bool mad_begin(const Port &local)
	{
		Gsi *g = gsi_for(s->device);
		if (!g)
			return false;
		s->mad = true;
		s->gsi = g;
		s->lcid = mad_local_id(gsi_tag(g));
		s->tid = uint64_t(rng()()) << 32 | rng()();
		memcpy(s->our_gid, local.gid, 16);
		roce_gid_of(reinterpret_cast<const sockaddr *>(&s->addr_dst), s->peer_gid);
		return true;
	}

	// SIDR_REQ on the device's QP1 (IBTA 12.11): a UD id's request for
	// the destination's QPN and Q_Key, with the rdma_cm header too.
	int sidr_mad(const Message &m, const Port &local)
	{
		if (!mad_begin(local))
			return ENODEV;
		mad::Mad r = mad_for(s, mad::Attr::sidr_req);
		r.pkey = mad::kDefaultPkey;
		r.service_id = mad::service_id(s->ps, port_of(reinterpret_cast<sockaddr *>(&s->addr_dst)));
		mad::CmaHeader h;
		h.family = reinterpret_cast<const sockaddr *>(&s->addr_src)->sa_family;
		h.src_port = port_of(reinterpret_cast<const sockaddr *>(&s->addr_src));
		memcpy(h.src, m.src.addr, 16);
		memcpy(h.dst, m.dst.addr, 16);
		mad::encode_cma(h, r.private_data);
		memcpy(r.private_data + mad::kCmaHeaderBytes, m.private_data, m.private_len);
		if (!mad_send(s, r, true))
			return EIO;
		s->st = St::req_sent;
		return 0;
	}

	// REQ on the device's QP1 (IBTA 12.6.5): the rdma_cm header (our
	// address and port, the destination's) before the private data.
	int connect_mad(const Message &m, const Port &local)
	{
		if (!mad_begin(local))
			return ENODEV;
		mad::Mad r = mad_for(s, mad::Attr::req);
		r.service_id = mad::service_id(s->ps, port_of(reinterpret_cast<sockaddr *>(&s->addr_dst)));
		r.qpn = m.qpn;
		s->mad_rq_psn = rng()() & 0xffffff;
		r.psn = s->mad_rq_psn; // our receive queue's; REP names our send PSN
		r.resp_res = m.responder_resources;
		r.init_depth = m.initiator_depth;
		r.remote_cm_timeout = r.local_cm_timeout = kCmResponseTimeout;
		r.transport = s->qp_type == IBV_QPT_UC ? mad::kTransportUc : mad::kTransportRc;
		r.flow_control = m.flow_control;
		r.retry = m.retry_count;
		r.rnr_retry = m.rnr_retry_count;
		r.pkey = mad::kDefaultPkey;
		r.mtu = local.mtu;
		r.max_cm_retries = 15;
		r.srq = m.srq;
		r.slid = r.dlid = 0xffff; // permissive: RoCE has no LIDs
		memcpy(r.sgid, s->our_gid, 16);
		memcpy(r.dgid, s->peer_gid, 16);
		r.hop_limit = kRoceHopLimit;
		r.rate = 3;
		r.ack_timeout = s->ack_timeout;
		mad::CmaHeader h;
		const sockaddr *src = reinterpret_cast<const sockaddr *>(&s->addr_src);
		const sockaddr *dst = reinterpret_cast<const sockaddr *>(&s->addr_dst);
		h.family = src->sa_family;
		h.src_port = port_of(src);
		memcpy(h.src, m.src.addr, 16);
		memcpy(h.dst, m.dst.addr, 16);
		(void)dst;
		mad::encode_cma(h, r.private_data);
		memcpy(r.private_data + mad::kCmaHeaderBytes, m.private_data, m.private_len);
		if (!mad_send(s, r, true))
			return EIO;
		s->st = St::req_sent;
		return 0;
	}

	int listen(int) noexcept override
	{
		std::lock_guard<std::recursive_mutex> g(g_lock);
		if (s->st == St::idle) {
			sockaddr_in any{};
			any.sin_family = AF_INET;
			if (int rc = bind_addr(reinterpret_cast<sockaddr *>(&any), sizeof(any)))
				return rc;
		}
		if (s->st == St::listening)
			return 0;
		if (s->st != St::bound || s->lfd < 0)
			return EINVAL;
		// Requests to an sroce device arrive on its QP1: have it ready,
		// and tell the device that they are for this process.
		for (int n = 0; n < kMaxRoceDevices; n++) {
			int dev = kRoceDeviceBase + n;
			if (!have_device(dev) || (s->device >= 0 && s->device != dev))
				continue;
			if (!gsi_for(dev)) {
				cm::log::warn("cannot make QP1 of sroce%d: connections to it will fail", n);
				continue;
			}
			roce_listen_mark(s, dev, true);
			s->roce_listens |= uint64_t(1) << n;
		}
		s->st = St::listening;
		return 0;
	}

	int accept(uint64_t uid, const ConnParam &p, const Ece &) noexcept override
	{
		std::lock_guard<std::recursive_mutex> g(g_lock);
		if (!p.valid) { // the active side's RTU (after CONNECT_RESPONSE)
			if (s->st != St::rep_rcvd)
				return EINVAL;
			if (s->mad) {
				// Twice: RTU is not answered, and the passive side
				// gives up after its REP's tries (a duplicate REP makes
				// it go again, when this process reads its CM events).
				mad::Mad r = mad_for(s, mad::Attr::rtu);
				mad_send(s, r, false);
				mad_send(s, r, false);
				s->st = St::connected;
				return 0;
			}
			Message rtu;
			rtu.type = MsgType::rtu;
			if (conn_send(s, rtu))
				s->st = St::connected;
			else if (s->st == St::rep_rcvd)
				peer_gone(s); // no link: the peer is gone
			return 0;
		}
		if (s->st != St::req_rcvd)
			return EINVAL;
		if (uid)
			s->uid = uid;
		if (s->gone_before_accept) {
			// The requester is gone: accepting succeeds, then the
			// connection fails as it would on the wire.
			if (!s->ud)
				post(s, RDMA_CM_EVENT_REJECTED, kRejTimeout);
			s->st = St::done;
			return 0;
		}
		Port local;
		if (!local_port(s, local) || (!s->link && !s->mad))
			return EINVAL;
		if (s->mad && s->ud) {
			if (p.private_data_len > mad::private_bytes(mad::Attr::sidr_rep) || p.qp_num < 2 ||
			    p.qp_num > 0xffffff)
				return EINVAL;
			mad::Mad r = mad_for(s, mad::Attr::sidr_rep);
			r.local_id = s->rcid; // the request ID
			r.remote_id = 0;
			r.status = 0;
			r.qpn = p.qp_num;
			r.qkey = s->qkey;
			r.service_id = mad::service_id(s->ps, port_of(reinterpret_cast<sockaddr *>(&s->addr_src)));
			memcpy(r.private_data, p.private_data, p.private_data_len);
			mad_send(s, r, false);
			s->last = r; // for a duplicate SIDR_REQ
			s->st = St::done;
			return 0;
		}
		if (s->mad) {
			if (p.private_data_len > mad::private_bytes(mad::Attr::rep) ||
			    p.qp_num < 2 || p.qp_num > 0xffffff)
				return EINVAL;
			s->resp_res = p.responder_resources;
			s->init_depth = p.initiator_depth;
			mad::Mad r = mad_for(s, mad::Attr::rep);
			r.qpn = p.qp_num;
			r.psn = s->peer.psn; // the PSN our receive queue expects
			r.resp_res = s->resp_res;
			r.init_depth = s->init_depth;
			r.target_ack_delay = kTargetAckDelay;
			r.flow_control = p.flow_control;
			r.rnr_retry = p.rnr_retry_count & 7;
			r.srq = p.srq;
			memcpy(r.private_data, p.private_data, p.private_data_len);
			if (!mad_send(s, r, true))
				return EIO;
			s->st = St::rep_sent;
			return 0;
		}
		Message m;
		m.type = s->ud ? MsgType::sidr_rep : MsgType::rep;
		if (p.private_data_len > kMaxPrivate[unsigned(m.type)])
			return EINVAL;
		if (p.qp_num < 2 || p.qp_num > 0xffffff)
			return EINVAL;
		m.private_len = p.private_data_len;
		memcpy(m.private_data, p.private_data, p.private_data_len);
		m.qpn = p.qp_num;
		s->qpn = p.qp_num;
		m.port = local;
		if (s->ud) {
			m.qkey = s->qkey;
			if (!conn_send(s, m))
				return EIO;
			s->st = St::done;
			detach(s);
			return 0;
		}
		s->resp_res = p.responder_resources;
		s->init_depth = p.initiator_depth;
		m.psn = s->psn;
		m.responder_resources = s->resp_res;
		m.initiator_depth = s->init_depth;
		m.retry_count = s->retry;
		m.rnr_retry_count = p.rnr_retry_count & 7;
		m.flow_control = p.flow_control;
		m.srq = p.srq;
		s->st = St::rep_sent;
		if (conn_send(s, m))
			set_deadline(s, true);
		else if (s->st == St::rep_sent)
			peer_gone(s);
		return 0;
	}

	int reject(const void *data, uint8_t len, uint8_t reason) noexcept override
	{
		std::lock_guard<std::recursive_mutex> g(g_lock);
		if ((s->st != St::req_rcvd && s->st != St::rep_rcvd) || (len && !data))
			return EINVAL;
		if (s->mad && s->ud) {
			if (len > mad::private_bytes(mad::Attr::sidr_rep))
				return EINVAL;
			mad::Mad r = mad_for(s, mad::Attr::sidr_rep);
			r.local_id = s->rcid;
			r.remote_id = 0;
			r.status = kSidrReject;
			r.service_id = mad::service_id(s->ps, port_of(reinterpret_cast<sockaddr *>(&s->addr_src)));
			if (len)
				memcpy(r.private_data, data, len);
			mad_send(s, r, false);
			s->last = r;
			s->st = St::done;
			return 0;
		}
		if (s->mad) {
			if (len > mad::private_bytes(mad::Attr::rej))
				return EINVAL;
			mad::Mad r = mad_for(s, mad::Attr::rej);
			r.msg = s->st == St::req_rcvd ? mad::kMsgReq : mad::kMsgRep;
			r.reason = reason ? reason : kRejConsumer;
			if (len)
				memcpy(r.private_data, data, len);
			mad_send(s, r, false);
			s->st = St::done;
			set_deadline(s, false);
			return 0;
		}
		Message m;
		if (s->ud) {
			m.type = MsgType::sidr_rep;
			m.status = kSidrReject;
		} else {
			m.type = MsgType::rej;
			m.status = reason ? reason : kRejConsumer;
		}
		if (len > kMaxPrivate[unsigned(m.type)])
			return EINVAL;
		m.private_len = len;
		if (len)
			memcpy(m.private_data, data, len);
		if (s->link)
			conn_send(s, m);
		s->st = St::done;
		detach(s);
		return 0;
	}

	int disconnect() noexcept override
	{
		std::lock_guard<std::recursive_mutex> g(g_lock);
		switch (s->st) {
		case St::connected:
		case St::rep_sent:
		case St::rep_rcvd: {
			// The record reaches the peer (or the peer is gone, which it
			// also sees as a disconnect): report DISCONNECTED at once, as
			// the kernel's CM does as soon as its DREP comes back, without
			// waiting for the peer process to run.
			if (s->mad) {
				// The IB CM, as the kernel's: DISCONNECTED when DREP
				// comes (or DREQ crosses the peer's), or when the
				// DREQ's tries run out; until then the progress thread
				// sends it again, so a program that waits for the event
				// before it exits (as most do) does not take a lost
				// DREQ with it. Sent twice at once.
				mad::Mad r = mad_for(s, mad::Attr::dreq);
				r.qpn = s->peer.qpn;
				mad_send(s, r, false);
				mad_send(s, r, true);
				s->st = St::dreq_sent;
				return 0;
			}
			Message m;
			m.type = MsgType::dreq;
			if (s->link && !conn_send(s, m))
				return 0; // the link broke: peer_gone reported it
			post(s, RDMA_CM_EVENT_DISCONNECTED, 0);
			s->st = St::disconnected;
			detach(s);
			return 0;
		}
		case St::dreq_sent:
		case St::disc_held:
		case St::disconnected:
			return 0;
		default:
			return EINVAL;
		}
	}

	int notify(uint32_t) noexcept override
	{
		std::lock_guard<std::recursive_mutex> g(g_lock);
		return s->st == St::idle ? EINVAL : 0;
	}

	int join(uint64_t mc_uid, const sockaddr *addr, socklen_t len, uint16_t,
		 uint32_t &mc_handle) noexcept override
	{
		if (!ip_family(addr, len) || !is_multicast(addr))
			return EINVAL;
		std::lock_guard<std::recursive_mutex> g(g_lock);
		if (s->device < 0)
			return ENODEV;
		Mcast mc{};
		mc.uid = mc_uid;
		mc.handle = g_next_handle++;
		memcpy(&mc.addr, addr, sa_len(addr));
		ibv_ah_attr roce{};
		if (is_roce(s->device)) {
			// RoCE v2, as the kernel's CM has it: the MGID is the group's
			// IP address (IPv4-mapped for IPv4), no LID; the address
			// vector leaves from the id's source GID.
			roce_gid_of(addr, mc.mgid.raw);
			if (!roce_ah(s, roce))
				return EADDRNOTAVAIL; // our source address left the interface
		} else if (addr->sa_family == AF_INET) {
			static const uint8_t prefix[12] = {0xff, 0x12, 0x40, 0x1b, 0xff, 0xff};
			memcpy(mc.mgid.raw, prefix, 12);
			memcpy(mc.mgid.raw + 12, &reinterpret_cast<const sockaddr_in *>(addr)->sin_addr, 4);
		} else {
			memcpy(mc.mgid.raw, &reinterpret_cast<const sockaddr_in6 *>(addr)->sin6_addr, 16);
		}
		uint32_t h = 2166136261u; // FNV-1a of the MGID picks the MLID
		for (uint8_t b : mc.mgid.raw)
			h = (h ^ b) * 16777619u;
		mc.mlid = is_roce(s->device) ? 0 : uint16_t(0xc001 + h % 0x3ffe);
		for (auto &m : s->mcs)
			if (!memcmp(m.mgid.raw, mc.mgid.raw, 16))
				return EADDRINUSE;
		try {
			s->mcs.push_back(mc);
		} catch (...) {
			return ENOMEM;
		}
		mc_handle = mc.handle;
		RawEvent e;
		e.uid = mc_uid;
		e.handle = mc.handle;
		e.event = RDMA_CM_EVENT_MULTICAST_JOIN;
		if (is_roce(s->device))
			e.ud.ah_attr = roce;
		e.ud.ah_attr.dlid = mc.mlid;
		e.ud.ah_attr.is_global = 1;
		e.ud.ah_attr.grh.dgid = mc.mgid;
		e.ud.ah_attr.grh.hop_limit = 1;
		e.ud.ah_attr.port_num = 1;
		e.ud.qp_num = 0xffffff;
		e.ud.qkey = s->qkey ? s->qkey : RDMA_UDP_QKEY;
		push(s->src, std::move(e));
		return 0;
	}

	int leave(uint32_t mc_handle, uint32_t &events_reported) noexcept override
	{
		std::lock_guard<std::recursive_mutex> g(g_lock);
		for (size_t i = 0; i < s->mcs.size(); i++) {
			if (s->mcs[i].handle != mc_handle)
				continue;
			events_reported = s->mcs[i].reported;
			drop_events(s->src, mc_handle);
			s->mcs.erase(s->mcs.begin() + long(i));
			return 0;
		}
		return EINVAL;
	}

	int set_option(uint32_t level, uint32_t name, void *val, size_t len) noexcept override
	{
		if (!val)
			return EINVAL;
		std::lock_guard<std::recursive_mutex> g(g_lock);
		if (level == RDMA_OPTION_ID && name == RDMA_OPTION_ID_ACK_TIMEOUT) {
			if (len != sizeof(uint8_t))
				return EINVAL;
			s->ack_timeout = *static_cast<const uint8_t *>(val) & 0x1f;
			return 0;
		}
		// TOS, REUSEADDR, AFONLY, IB path records: accepted, no effect on
		// a soft port.
		return 0;
	}

	int write_event(uint32_t event, int32_t status, uint64_t arg) noexcept override
	{
		std::lock_guard<std::recursive_mutex> g(g_lock);
		try {
			RawEvent e = make_event(s, static_cast<rdma_cm_event_type>(event), status);
			e.arg = arg;
			push(s->src, std::move(e));
		} catch (...) {
			return ENOMEM;
		}
		return 0;
	}

	int migrate(EventSource &to, uint32_t &events_reported) noexcept override
	{
		if (strcmp(to.kind(), "soft") != 0)
			return EINVAL;
		std::lock_guard<std::recursive_mutex> g(g_lock);
		auto *nsrc = static_cast<Source *>(&to);
		Source *old = s->src;
		events_reported = s->reported;
		if (old == nsrc)
			return 0;
		try {
			nsrc->reserve_one();
			// Room for the id's events in the new source: moving them
			// below cannot fail.
			size_t mine = 0;
			old->ready.for_each([&](const RawEvent &e) { mine += e.handle == s->handle; });
			nsrc->ready.reserve(nsrc->ready.size() + mine);
		} catch (...) {
			return ENOMEM;
		}
		// The listening socket moves; the new source watches the links of
		// the id and of the listener (the old one keeps watching them).
		if (s->lfd >= 0) {
			Item item = g_items[s->lkey];
			remove_item(old, s->lfd, s->lkey);
			s->lkey = add_item(nsrc, s->lfd, item);
		}
		try {
			if (s->link)
				link_watch(nsrc, s->link);
			for (Link *k : g_links)
				if (!k->active && k->listener == s && k->conns.empty())
					link_watch(nsrc, k);
		} catch (...) {
			return ENOMEM;
		}
		uint64_t due = s->deadline;
		old->leave(s);
		old->ready.extract_if([&](const RawEvent &e) { return e.handle == s->handle; },
				      [&](RawEvent &&e) { push(nsrc, std::move(e)); });
		if (old->ready.empty())
			clear_eventfd(old);
		nsrc->join(s);
		set_due(s, due); // its time-out moves with it
		arm_timer(old);
		return 0;
	}

	static void drop_events(Source *src, uint32_t handle)
	{
		src->ready.extract_if(
			[&](const RawEvent &e) {
				return e.handle == handle && e.event != RDMA_CM_EVENT_CONNECT_REQUEST;
			},
			[](RawEvent &&) {});
		if (src->ready.empty())
			clear_eventfd(src);
	}
};

// ------------------------------------------------------------------ QP1 (sroce)
// The InfiniBand CM over an sroce device (src/DESIGN.md, "Connection
// manager for software devices", "RoCE v2 devices"): one UD QP per device in
// this process, on the front end's context of the device, with the GSI
// Q_Key, which the provider makes the device's QP1 (it receives what is sent
// to QPN 1 and sends as QPN 1). Its completion channel is in every event
// source's epoll set; whichever source runs reads it and hands the events
// to the ids' own sources.

// Receives kept posted on QP1. A MAD that finds none is dropped (UD), and
// its sender tries again only after a second: with 64, the DREQs of 1000
// connections closed at once (each sent twice) overflowed the queue before
// the progress thread reposted, and cmtime's disconnect over sroce took 8 s
// instead of 30 ms (ucmatose -c 1000: 3,350 MADs dropped). The kernel's MAD
// layer keeps 512 (ib_mad's recv_queue_size), served in the kernel; this
// one shares the CPUs with the application's threads: 4096 slots, 1.2 MB
// per sroce device a process uses the CM on. Sends are copied into the
// device's own buffers when posted, so their slots are free at once.
constexpr int kGsiRecv = 4096, kGsiSend = 64;
constexpr size_t kGsiRecvSlot = 40 + mad::kMadBytes; // the GRH area, then the MAD

struct Gsi {
	int dev = -1;
	uint32_t tag = 0; // this process's tag on the device (mad_local_id)
	ibv_context *ctx = nullptr;
	ibv_pd *pd = nullptr;
	ibv_comp_channel *ch = nullptr;
	ibv_cq *cq = nullptr;
	ibv_qp *qp = nullptr;
	ibv_mr *mr = nullptr;
	uint8_t *buf = nullptr; // kGsiRecv receive slots, then kGsiSend send slots
	uint32_t next_send = 0;
};

std::vector<Gsi *> g_gsi;       // never freed: the contexts are the process's

uint32_t gsi_tag(Gsi *g) { return g->tag; }

void gsi_watch(Source *src, Gsi *g)
{
	Item it{Item::qp1};
	it.gsi = g;
	add_item(src, g->ch->fd, it);
}

void gsi_free(Gsi *g)
{
	if (g->qp)
		ibv_destroy_qp(g->qp);
	if (g->cq)
		ibv_destroy_cq(g->cq);
	if (g->ch)
		ibv_destroy_comp_channel(g->ch);
	if (g->mr)
		ibv_dereg_mr(g->mr);
	if (g->pd)
		ibv_dealloc_pd(g->pd);
	free(g->buf);
	delete g;
}

bool gsi_post_recv(Gsi *g, uint32_t slot)
{
	ibv_sge sge{reinterpret_cast<uintptr_t>(g->buf + slot * kGsiRecvSlot), uint32_t(kGsiRecvSlot),
		    g->mr->lkey};
	ibv_recv_wr wr{}, *bad;
	wr.wr_id = slot;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return ibv_post_recv(g->qp, &wr, &bad) == 0;
}

// ------------------------------------------------------------------ progress thread (sroce)
// The IB CM over RoCE answers and resends MADs whether or not the application
// reads its CM events, as the kernel's CM does in the kernel: a peer's REP
// sent again because our RTU was lost must be answered while the application
// is busy with its data, and a DREQ must go again while the application waits
// for something else. One thread per process, started with the first QP1
// endpoint (sroce devices only: the shared-memory devices' CM needs none),
// watches every QP1 completion channel and runs the MAD timers, under g_lock
// like the event sources; what it makes for the application is queued on
// the id's event channel (push signals the channel's fd). It blocks every
// signal (the application's handlers run on its own threads); a fork() child
// starts its own when it next needs QP1; at exit it stops touching the CM
// before the CM's globals go (stop_progress).
struct Progress {
	int ep = -1;          // epoll over the QP1 completion channels
	bool started = false;
	bool stopping = false; // exit: the thread leaves at its next step
	bool hooks = false;    // atexit and pthread_atfork registered
};
Progress g_progress;

// The earliest due time of an id that speaks the IB CM (0: none).
uint64_t next_mad_deadline()
{
	uint64_t first = 0;
	for (Source *src : g_sources)
		if (SoftId *s = src->due_mad.top(); s && (!first || s->deadline < first))
			first = s->deadline;
	return first;
}

void *progress_main(void *)
{
	for (;;) {
		int ms = -1;
		{
			std::lock_guard<std::recursive_mutex> g(g_lock);
			if (g_progress.stopping)
				return nullptr;
			uint64_t next = next_mad_deadline(), now = now_ns();
			if (next)
				ms = next <= now ? 0 : int(std::min<uint64_t>((next - now) / 1000000 + 1, 60000));
		}
		epoll_event evs[8];
		int n = epoll_wait(g_progress.ep, evs, 8, ms);
		if (n < 0 && errno != EINTR)
			n = 0; // (not expected: the set is ours) the timers still run
		std::lock_guard<std::recursive_mutex> g(g_lock);
		if (g_progress.stopping)
			return nullptr;
		for (int i = 0; i < n; i++)
			gsi_readable(static_cast<Gsi *>(evs[i].data.ptr));
		for (Source *src : g_sources)
			run_due(src, true);
	}
}

// At exit: the thread is told to stop, and g_lock stays held by the exiting
// thread (recursive: its own later calls still get it), so the thread never
// again touches the CM's globals, whose destructors run after this.
void stop_progress()
{
	g_lock.lock();
	g_progress.stopping = true;
}

void progress_prefork() { g_lock.lock(); }
void progress_postfork_parent() { g_lock.unlock(); }
void progress_postfork_child()
{
	// The thread did not come along; the epoll set is shared with the
	// parent's and is left to it.
	if (g_progress.ep >= 0)
		close(g_progress.ep);
	g_progress.ep = -1;
	g_progress.started = false;
	g_lock.unlock();
}

// Starts the progress thread if it is not running, watching every QP1
// endpoint of g_gsi. g_lock held. Without it (no thread could be made) MADs
// are still handled while the application reads its events, as before.
void ensure_progress()
{
	if (g_progress.started || g_progress.stopping)
		return;
	if (!g_progress.hooks) {
		g_progress.hooks = true;
		atexit(stop_progress);
		pthread_atfork(progress_prefork, progress_postfork_parent, progress_postfork_child);
	}
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return;
	for (Gsi *gi : g_gsi) {
		epoll_event ev{};
		ev.events = EPOLLIN;
		ev.data.ptr = gi;
		epoll_ctl(ep, EPOLL_CTL_ADD, gi->ch->fd, &ev);
	}
	g_progress.ep = ep;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_t th;
	int e = pthread_create(&th, nullptr, progress_main, nullptr);
	pthread_sigmask(SIG_SETMASK, &old, nullptr);
	if (e != 0) {
		cm::log::err("the CM's progress thread cannot start: %s", strerror(e));
		close(ep);
		g_progress.ep = -1;
		return;
	}
	pthread_detach(th);
	g_progress.started = true;
}

Gsi *gsi_for(int dev)
{
	for (Gsi *g : g_gsi)
		if (g->dev == dev) {
			ensure_progress(); // (a fork() child's first use)
			return g;
		}
	auto *g = new (std::nothrow) Gsi;
	if (!g)
		return nullptr;
	g->dev = dev;
	g->ctx = ov::cm::device_context(soft_devices().guid[dev]);
	using TagFn = int (*)(ibv_context *);
	TagFn tag_fn = provider_fn<TagFn, 2>("openverbs_soft_roce_cm_tag",
					     "answers reach only the process that reads them");
	int tag = g->ctx && tag_fn ? tag_fn(g->ctx) : -1;
	g->tag = tag > 0 ? uint32_t(tag) : 0;
	size_t bytes = kGsiRecv * kGsiRecvSlot + kGsiSend * mad::kMadBytes;
	bool ok = g->ctx && (g->pd = ibv_alloc_pd(g->ctx)) && (g->ch = ibv_create_comp_channel(g->ctx)) &&
		  (g->cq = ibv_create_cq(g->ctx, kGsiRecv + kGsiSend, nullptr, g->ch, 0)) &&
		  (g->buf = static_cast<uint8_t *>(calloc(1, bytes))) &&
		  (g->mr = ibv_reg_mr(g->pd, g->buf, bytes, IBV_ACCESS_LOCAL_WRITE));
	if (ok) {
		ibv_qp_init_attr ia{};
		ia.send_cq = ia.recv_cq = g->cq;
		ia.cap.max_send_wr = kGsiSend;
		ia.cap.max_recv_wr = kGsiRecv;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		ia.qp_type = IBV_QPT_UD;
		ia.sq_sig_all = 1;
		ok = (g->qp = ibv_create_qp(g->pd, &ia)) != nullptr;
	}
	if (ok) {
		ibv_qp_attr a{};
		a.qp_state = IBV_QPS_INIT;
		a.port_num = 1;
		a.qkey = mad::kGsiQkey;
		ok = !ibv_modify_qp(g->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
		a.qp_state = IBV_QPS_RTR;
		ok = ok && !ibv_modify_qp(g->qp, &a, IBV_QP_STATE);
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = 0;
		ok = ok && !ibv_modify_qp(g->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	}
	for (uint32_t i = 0; ok && i < kGsiRecv; i++)
		ok = gsi_post_recv(g, i);
	ok = ok && fcntl(g->ch->fd, F_SETFL, fcntl(g->ch->fd, F_GETFL) | O_NONBLOCK) == 0 &&
	     !ibv_req_notify_cq(g->cq, 0);
	if (!ok) {
		cm::log::err("sroce%d: cannot make the CM's QP1 endpoint: %s", dev - kRoceDeviceBase,
			     strerror(errno ? errno : EIO));
		gsi_free(g);
		return nullptr;
	}
	try {
		g_gsi.push_back(g);
		for (Source *src : g_sources)
			gsi_watch(src, g);
	} catch (...) {
		return nullptr; // kept (in g_gsi or leaked with the process's context)
	}
	if (g_progress.started) {
		epoll_event ev{};
		ev.events = EPOLLIN;
		ev.data.ptr = g;
		epoll_ctl(g_progress.ep, EPOLL_CTL_ADD, g->ch->fd, &ev);
	}
	ensure_progress();
	return g;
}

// Sends `m` to the peer's QP1 from ours, from our GID `our` to `peer`.
bool gsi_send_to(Gsi *g, const uint8_t our[16], const uint8_t peer[16], const mad::Mad &m)
{
	uint8_t *slot = g->buf + kGsiRecv * kGsiRecvSlot + (g->next_send++ % kGsiSend) * mad::kMadBytes;
	if (!mad::encode(m, slot))
		return false;
	ibv_gid sgid;
	memcpy(sgid.raw, our, 16);
	int idx = ov::cm::device_gid_index(soft_devices().guid[g->dev], 1, sgid);
	if (idx < 0 || idx > 255)
		return false;
	ibv_ah_attr av{};
	av.is_global = 1;
	memcpy(av.grh.dgid.raw, peer, 16);
	av.grh.sgid_index = uint8_t(idx);
	av.grh.hop_limit = kRoceHopLimit;
	av.port_num = 1;
	ibv_ah *ah = ibv_create_ah(g->pd, &av);
	if (!ah)
		return false;
	ibv_sge sge{reinterpret_cast<uintptr_t>(slot), uint32_t(mad::kMadBytes), g->mr->lkey};
	ibv_send_wr wr{}, *bad;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = mad::kGsiQpn;
	wr.wr.ud.remote_qkey = mad::kGsiQkey;
	bool ok = ibv_post_send(g->qp, &wr, &bad) == 0;
	cm::log::debug("sroce%d: CM MAD 0x%x out (comm IDs %08x %08x, GID index %d): %s",
		       g->dev - kRoceDeviceBase, unsigned(m.attr), m.local_id, m.remote_id, idx,
		       ok ? "sent" : "failed");
	// The sroce provider copies the address vector into the request.
	ibv_destroy_ah(ah);
	return ok;
}

mad::Mad mad_for(const SoftId *s, mad::Attr a)
{
	mad::Mad m;
	m.attr = a;
	m.tid = s->tid;
	m.local_id = s->lcid;
	m.remote_id = s->rcid;
	memcpy(m.ca_guid, &soft_devices().guid[s->device], 8);
	return m;
}

bool mad_send(SoftId *s, const mad::Mad &m, bool retx)
{
	if (!s->gsi)
		return false;
	bool first = !retx || !s->retx || memcmp(&s->last, &m, sizeof(m)) != 0;
	if (retx) {
		if (first) {
			s->last = m;
			s->tries = kMadTries;
		}
		s->retx = true;
		s->tries--;
		set_due(s, now_ns() + std::min<uint64_t>(kMadRetryNs, g_timeout_ns.load()));
	}
	return gsi_send_to(s->gsi, s->our_gid, s->peer_gid, m);
}

// The id of a MAD that names our communication ID.
SoftId *mad_id(const Gsi *g, uint32_t lcid)
{
	for (auto &kv : g_ids)
		if (kv.second->mad && kv.second->gsi == g && kv.second->lcid == lcid)
			return kv.second;
	return nullptr;
}

void mad_stop(SoftId *s)
{
	s->retx = false;
	set_deadline(s, false);
}

// A REQ: a duplicate (REP sent again), or a new connection for a listener
// of its service ID and address (CONNECT_REQUEST), or REJ "invalid service ID".
// REQs that found no listener, by requester: when first seen (on_mad_req).
std::unordered_map<uint64_t, uint64_t> g_unheard;

void on_mad_req(Gsi *g, const mad::Mad &m, const uint8_t our[16], const uint8_t peer[16])
{
	bool sidr = m.attr == mad::Attr::sidr_req;
	for (auto &kv : g_ids) {
		SoftId *d = kv.second;
		if (d->mad && d->gsi == g && d->ud == sidr && d->rcid == m.local_id &&
		    !memcmp(d->peer_gid, peer, 16)) {
			if (d->st == St::rep_sent || (sidr && d->st == St::done))
				gsi_send_to(g, d->our_gid, d->peer_gid, d->last);
			return;
		}
	}
	mad::CmaHeader h;
	uint16_t ps = uint16_t(m.service_id >> 16), port = uint16_t(m.service_id);
	if ((m.service_id >> 32) != 0 || !mad::parse_cma(m.private_data, h))
		return; // not an rdma_cm connection: counted, dropped
	sockaddr_storage local{}, remote{};
	Endpoint el, er;
	el.family = er.family = uint16_t(h.family);
	el.port = port;
	er.port = h.src_port;
	memcpy(el.addr, h.dst, 16);
	memcpy(er.addr, h.src, 16);
	sockaddr_of(el, local);
	sockaddr_of(er, remote);
	const sockaddr *la = reinterpret_cast<const sockaddr *>(&local);
	SoftId *l = nullptr;
	for (auto &kv : g_ids) {
		SoftId *c = kv.second;
		const sockaddr *ca = reinterpret_cast<const sockaddr *>(&c->addr_src);
		if (c->st != St::listening || c->ud != sidr || c->ps != ps || port_of(ca) != port ||
		    (c->device >= 0 && c->device != g->dev))
			continue;
		if (is_wildcard(ca) ? (ca->sa_family == AF_INET6 || ca->sa_family == la->sa_family)
				    : addr_key(ca) == addr_key(la)) {
			l = c;
			break;
		}
	}
	mad::Mad rej;
	rej.attr = mad::Attr::rej;
	rej.tid = m.tid;
	rej.remote_id = m.local_id;
	rej.msg = mad::kMsgReq;
	memcpy(rej.ca_guid, &soft_devices().guid[g->dev], 8);
	if (sidr) { // a SIDR_REP with a status instead of REJ
		rej = mad::Mad{};
		rej.attr = mad::Attr::sidr_rep;
		rej.tid = m.tid;
		rej.local_id = m.local_id;
		rej.service_id = m.service_id;
	}
	if (!l) {
		// No listener (yet): the progress thread takes MADs at once, so a
		// REQ can come before the application's rdma_listen (or between a
		// listener's destroy and the next one's listen, as perftest -R
		// does). The first 2 s of a request (by the requester's
		// communication ID and GID) get no answer, the requester sends REQ
		// again each second; after that REJ 8 (invalid service ID).
		char at[INET6_ADDRSTRLEN] = "?";
		inet_ntop(h.family, h.dst, at, sizeof(at));
		cm::log::debug("sroce%d: CM %s for port %u at %s: no listener here", g->dev - kRoceDeviceBase,
			       sidr ? "SIDR_REQ" : "REQ", unsigned(port), at);
		uint64_t now = now_ns();
		for (auto it = g_unheard.begin(); it != g_unheard.end();)
			it = now - it->second > 10 * kMadRetryNs ? g_unheard.erase(it) : std::next(it);
		uint64_t key = uint64_t(m.local_id) << 32 ^ std::hash<std::string>()(
			std::string(reinterpret_cast<const char *>(peer), 16));
		auto seen = g_unheard.emplace(key, now).first;
		if (now - seen->second < 2 * kMadRetryNs && g_unheard.size() < 4096)
			return;
		rej.reason = kRejInvalidServiceId;
		rej.status = kSidrUnsupported;
		if (sidr)
			rej.reason = 0;
		gsi_send_to(g, our, peer, rej);
		return;
	}
	std::unique_ptr<Backend> child;
	try {
		child.reset(new Backend(*l->src, l->uid, l->ps, l->qp_type));
		child->s->listener = l->handle;
	} catch (...) {
	}
	if (!child) {
		if (sidr)
			rej.status = kSidrReject;
		else
			rej.reason = kRejNoResources;
		gsi_send_to(g, our, peer, rej);
		return;
	}
	SoftId *s = child->s;
	s->device = g->dev;
	s->dst_device = g->dev;
	s->addr_src = local;
	s->addr_dst = remote;
	s->have_route = true;
	s->mad = true;
	s->gsi = g;
	s->lcid = mad_local_id(gsi_tag(g));
	s->rcid = m.local_id;
	s->tid = m.tid;
	memcpy(s->our_gid, our, 16);
	memcpy(s->peer_gid, peer, 16);
	if (sidr) {
		Message sreq;
		sreq.type = MsgType::sidr_req;
		sreq.port_space = ps;
		sreq.private_len =
			uint16_t(mad::private_bytes(mad::Attr::sidr_req) - mad::kCmaHeaderBytes);
		memcpy(sreq.private_data, m.private_data + mad::kCmaHeaderBytes, sreq.private_len);
		s->st = St::req_rcvd;
		RawEvent e = make_event(l, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
		e.handle = s->handle;
		set_private(e, sreq);
		e.child = std::move(child);
		push(l->src, std::move(e));
		return;
	}
	Message req;
	req.type = MsgType::req;
	req.port_space = ps;
	req.qp_type = m.transport == mad::kTransportUc ? IBV_QPT_UC : IBV_QPT_RC;
	req.qpn = m.qpn;
	req.psn = rng()() & 0xffffff; // the peer's send PSN: REP names it
	req.responder_resources = m.resp_res;
	req.initiator_depth = m.init_depth;
	req.retry_count = m.retry;
	req.rnr_retry_count = m.rnr_retry;
	req.srq = m.srq;
	req.flow_control = m.flow_control;
	req.port.device = uint16_t(g->dev);
	req.port.mtu = m.mtu;
	memcpy(req.port.gid, peer, 16);
	req.private_len = uint16_t(mad::private_bytes(mad::Attr::req) - mad::kCmaHeaderBytes);
	memcpy(req.private_data, m.private_data + mad::kCmaHeaderBytes, req.private_len);
	s->peer = req;
	s->peer_valid = true;
	s->retry = m.retry;
	s->rnr = m.rnr_retry;
	s->resp_res = m.init_depth;
	s->init_depth = m.resp_res;
	s->psn = m.psn; // REQ's starting PSN: where the requester's receive queue starts
	s->st = St::req_rcvd;
	RawEvent e = make_event(l, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	e.handle = s->handle;
	fill_conn(e, req);
	e.child = std::move(child);
	push(l->src, std::move(e));
}

void on_mad(Gsi *g, const mad::Mad &m, const uint8_t our[16], const uint8_t peer[16])
{
	if (m.attr == mad::Attr::req || m.attr == mad::Attr::sidr_req) {
		on_mad_req(g, m, our, peer);
		return;
	}
	if (m.attr == mad::Attr::sidr_rep) {
		// The request ID is ours; a reply to a request no longer waiting
		// (answered already, or timed out) is dropped.
		SoftId *s = mad_id(g, m.local_id);
		if (!s || !s->ud || s->st != St::req_sent || memcmp(s->peer_gid, peer, 16) != 0)
			return;
		mad_stop(s);
		bool ok = m.status == 0;
		RawEvent e = make_event(s, ok ? RDMA_CM_EVENT_ESTABLISHED : RDMA_CM_EVENT_UNREACHABLE,
					ok ? 0 : -ECONNRESET);
		size_t n = mad::private_bytes(mad::Attr::sidr_rep);
		memcpy(e.ud.private_data, m.private_data, n);
		e.ud.private_data_len = uint8_t(n);
		memcpy(e.conn.private_data, m.private_data, n);
		e.conn.private_data_len = uint8_t(n);
		if (ok && !roce_ah(s, e.ud.ah_attr)) {
			e.event = RDMA_CM_EVENT_UNREACHABLE;
			e.status = -EADDRNOTAVAIL;
		} else if (ok) {
			e.ud.qp_num = m.qpn;
			e.ud.qkey = m.qkey;
		}
		push(s->src, std::move(e));
		s->st = St::done;
		return;
	}
	SoftId *s = mad_id(g, m.remote_id);
	if (m.attr == mad::Attr::dreq && (!s || s->st == St::disconnected || s->st == St::done)) {
		// Answered even when the connection is gone (a DREP was lost).
		mad::Mad r;
		r.attr = mad::Attr::drep;
		r.tid = m.tid;
		r.local_id = m.remote_id;
		r.remote_id = m.local_id;
		gsi_send_to(g, our, peer, r);
		if (s && s->retx && s->last.attr == mad::Attr::dreq)
			mad_stop(s); // DREQs crossed
		return;
	}
	if (!s || memcmp(s->peer_gid, peer, 16) != 0)
		return;
	switch (m.attr) {
	case mad::Attr::rep:
		if (s->st == St::connected) { // our RTU was lost
			gsi_send_to(g, s->our_gid, s->peer_gid, mad_for(s, mad::Attr::rtu));
			return;
		}
		if (s->st != St::req_sent)
			return;
		{
			mad_stop(s);
			s->rcid = m.local_id;
			Port local;
			local_port(s, local);
			Message rep;
			rep.type = MsgType::rep;
			rep.qpn = m.qpn;
			rep.psn = s->mad_rq_psn; // what our REQ named for our receive queue
			s->psn = m.psn;          // REP's: where the peer's receive queue starts
			rep.responder_resources = m.resp_res;
			rep.initiator_depth = m.init_depth;
			rep.rnr_retry_count = m.rnr_retry;
			rep.srq = m.srq;
			rep.flow_control = m.flow_control;
			rep.port = local;
			memcpy(rep.port.gid, peer, 16);
			rep.private_len = uint16_t(mad::private_bytes(mad::Attr::rep));
			memcpy(rep.private_data, m.private_data, rep.private_len);
			take_rep(s, rep);
		}
		return;
	case mad::Attr::rtu:
		if (s->st == St::rep_sent) {
			mad_stop(s);
			post(s, RDMA_CM_EVENT_ESTABLISHED, 0);
			s->st = St::connected;
		}
		return;
	case mad::Attr::rej:
		if (s->st == St::req_sent || s->st == St::rep_sent || s->st == St::rep_rcvd) {
			mad_stop(s);
			RawEvent e = make_event(s, RDMA_CM_EVENT_REJECTED, m.reason);
			size_t n = mad::private_bytes(mad::Attr::rej);
			memcpy(e.conn.private_data, m.private_data, n);
			e.conn.private_data_len = uint8_t(n);
			push(s->src, std::move(e));
			s->st = St::done;
		}
		return;
	case mad::Attr::mra:
		// The peer needs more time: wait as long as it says (at most
		// about 2 minutes), the tries left unchanged.
		if (s->retx) {
			uint64_t t = 4096ull << std::min<uint8_t>(m.service_timeout, 24);
			set_due(s, now_ns() + t + kMadRetryNs);
		}
		return;
	case mad::Attr::dreq:
		if (s->st == St::connected || s->st == St::rep_sent || s->st == St::rep_rcvd ||
		    s->st == St::dreq_sent) { // (dreq_sent: DREQs crossed)
			mad_stop(s);
			mad::Mad r = mad_for(s, mad::Attr::drep);
			r.tid = m.tid;
			mad_send(s, r, false);
			post(s, RDMA_CM_EVENT_DISCONNECTED, 0);
			s->st = St::disconnected;
		}
		return;
	case mad::Attr::drep:
		if (s->retx && s->last.attr == mad::Attr::dreq)
			mad_stop(s);
		if (s->st == St::dreq_sent) {
			post(s, RDMA_CM_EVENT_DISCONNECTED, 0);
			s->st = St::disconnected;
		}
		return;
	default:
		return; // SIDR is not carried on QP1 yet
	}
}

void gsi_readable(Gsi *g)
{
	ibv_cq *cq;
	void *cq_ctx;
	while (ibv_get_cq_event(g->ch, &cq, &cq_ctx) == 0)
		ibv_ack_cq_events(cq, 1);
	for (int round = 0; round < 2; round++) {
		ibv_wc wc[16];
		int n;
		while ((n = ibv_poll_cq(g->cq, 16, wc)) > 0) {
			for (int i = 0; i < n; i++) {
				if (!(wc[i].opcode & IBV_WC_RECV))
					continue; // a send done
				uint32_t slot = uint32_t(wc[i].wr_id);
				if (slot >= kGsiRecv)
					continue;
				const uint8_t *b = g->buf + slot * kGsiRecvSlot;
				if (wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len >= 40) {
					// Addresses from the GRH area: IPv4's header in
					// its last 20 bytes, or the IPv6 header.
					uint8_t our[16] = {}, peer[16] = {};
					bool v4 = (b[20] >> 4) == 4;
					if (v4) {
						our[10] = our[11] = peer[10] = peer[11] = 0xff;
						memcpy(peer + 12, b + 20 + 12, 4);
						memcpy(our + 12, b + 20 + 16, 4);
					} else {
						memcpy(peer, b + 8, 16);
						memcpy(our, b + 24, 16);
					}
					mad::Mad m;
					mad::MadError err = mad::parse(b + 40, wc[i].byte_len - 40, m);
					if (err == mad::MadError::ok) {
						cm::log::debug("sroce%d: CM MAD 0x%x in (comm IDs %08x %08x)",
							       g->dev - kRoceDeviceBase, unsigned(m.attr),
							       m.local_id, m.remote_id);
						on_mad(g, m, our, peer);
					} else {
						cm::log::info("sroce%d: a malformed CM MAD dropped (%s; %llu so far)",
							      g->dev - kRoceDeviceBase, mad::mad_error_name(err),
							      (unsigned long long)mad::mad_failures(mad::MadError::ok));
					}
				}
				if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
					gsi_post_recv(g, slot);
			}
		}
		if (round == 0)
			ibv_req_notify_cq(g->cq, 0);
	}
}

void on_request(Link *lk, const Message &m)
{
	SoftId *l = lk->listener;
	if (!l || l->st != St::listening || (m.type == MsgType::sidr_req) != l->ud ||
	    m.port_space != l->ps) {
		refuse(lk, m, kRejInvalidServiceId);
		return;
	}
	bool want_ud = l->ud;
	Source *src = l->src;
	sockaddr_storage local, remote;
	sockaddr_of(m.dst, local);
	sockaddr_of(m.src, remote);
	int dev = l->device >= 0 ? l->device : device_for(reinterpret_cast<sockaddr *>(&local));
	std::unique_ptr<Backend> child;
	if (have_device(dev)) {
		try {
			child.reset(new Backend(*src, l->uid, l->ps, l->qp_type));
			child->s->listener = l->handle;
		} catch (...) {
		}
	}
	if (child) {
		try {
			lk->conns[m.conn] = child->s;
		} catch (...) {
			child.reset();
		}
	}
	if (!child) {
		refuse(lk, m, kRejNoResources);
		return;
	}
	SoftId *s = child->s;
	s->link = lk;
	s->conn = m.conn;
	s->device = dev;
	s->addr_src = local;
	s->addr_dst = remote;
	s->have_route = true;
	s->peer = m;
	s->peer_valid = !want_ud;
	if (!want_ud) {
		// Over RoCE the peer's device index is its own business: the
		// route is named by the addresses.
		s->dst_device = is_roce(dev) ? dev : m.port.device;
		s->retry = m.retry_count;
		s->rnr = m.rnr_retry_count;
		s->resp_res = m.initiator_depth;
		s->init_depth = m.responder_resources;
		s->psn = rng()() & 0xffffff;
	} else {
		s->dst_device = device_for(reinterpret_cast<sockaddr *>(&remote));
	}
	s->st = St::req_rcvd;
	RawEvent e = make_event(l, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	e.handle = s->handle;
	if (want_ud)
		set_private(e, m);
	else
		fill_conn(e, m);
	e.child = std::move(child);
	push(src, std::move(e));
}

Source::~Source()
{
	std::lock_guard<std::recursive_mutex> g(g_lock);
	ready.clear(); // children of unreported requests are destroyed here
	for (size_t i = 0; i < g_sources.size(); i++)
		if (g_sources[i] == this) {
			g_sources.erase(g_sources.begin() + long(i));
			break;
		}
	for (auto it = g_items.begin(); it != g_items.end();)
		it = (it->second.kind == Item::qp1 || it->second.kind == Item::peer) && it->second.src == this
			     ? g_items.erase(it)
			     : std::next(it);
	for (Link *l : g_links)
		if (l->watcher == this) {
			l->watcher = nullptr;
			l->key = 0;
		}
	for (auto &k : keys)
		if (k)
			g_items.erase(k);
	close(epfd);
	close(evfd);
	close(tfd);
}

// epoll_wait(epfd, evs, max, 0) again and again, yielding the core in
// between, for up to kSpinBeforeSleepNs (see there); its result, 0 when
// nothing came.
static int spin_wait(int epfd, epoll_event *evs, int max)
{
	uint64_t t = now_ns();
	if (t < g_spin_off_until.load(std::memory_order_relaxed))
		return 0;
	uint64_t end = t + kSpinBeforeSleepNs;
	for (;;) {
		sched_yield();
		int n = epoll_wait(epfd, evs, max, 0);
		uint64_t t2 = now_ns();
		if (t2 - t > kSpinPreemptedNs)
			g_spin_off_until.store(t2 + kSpinBackoffNs, std::memory_order_relaxed);
		if (n != 0 || t2 - t > kSpinPreemptedNs || t2 >= end)
			return n;
		t = t2;
	}
}

int Source::next(RawEvent &ev, bool block) noexcept
{
	struct Inside {
		std::atomic<int> &n;
		explicit Inside(std::atomic<int> &c) : n(c) { n++; }
		~Inside() { n--; }
	} inside(waiting);
	for (;;) {
		{
			std::lock_guard<std::recursive_mutex> g(g_lock);
			if (!ready.empty()) {
				ev = ready.take_front();
				if (ready.empty())
					clear_eventfd(this);
				else
					signal_eventfd(this); // what dispatching left
				// Count it for its id (a request counts for the listener).
				SoftId *s = by_handle(ev.event == RDMA_CM_EVENT_CONNECT_REQUEST ? 0 : ev.handle);
				if (ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
					// Its listener, named by the new id; or, gone
					// meanwhile, another listener of the same uid.
					auto *c = static_cast<Backend *>(ev.child.get());
					s = c ? by_handle(c->s->listener) : nullptr;
					if (!s || s->uid != ev.uid || s->st != St::listening) {
						s = nullptr;
						for (SoftId *i : ids)
							if (i->uid == ev.uid && i->st == St::listening)
								s = i;
					}
				}
				if (s)
					s->reported++;
				else
					for (SoftId *i : ids)
						for (auto &m : i->mcs)
							if (m.handle == ev.handle)
								m.reported++;
				return 0;
			}
		}
		// Nothing queued: wait for the fds unless asked not to (the fd's
		// own O_NONBLOCK counts: it is the channel's fd). One look at the
		// flags and one wait: a reader usually comes before the peer's
		// answer.
		epoll_event evs[16];
		bool wait = block && !(fcntl(epfd, F_GETFL) & O_NONBLOCK);
		int n = epoll_wait(epfd, evs, 16, 0);
		if (n == 0 && wait) {
			n = spin_wait(epfd, evs, 16);
			if (n == 0)
				n = epoll_wait(epfd, evs, 16, -1);
		}
		if (n == 0)
			return EAGAIN;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		std::lock_guard<std::recursive_mutex> g(g_lock);
		dispatching = true;
		for (int i = 0; i < n; i++) {
			auto it = g_items.find(evs[i].data.u64);
			if (it == g_items.end())
				continue;
			Item item = it->second;
			switch (item.kind) {
			case Item::event: break;
			case Item::timer: on_timer(this); break;
			case Item::listen: on_listen_readable(item.id); break;
			case Item::peer:
				if (evs[i].events & EPOLLOUT)
					link_flush(item.link);
				// (A link broken by the flush is gone with its key.)
				if ((evs[i].events & ~uint32_t(EPOLLOUT)) && g_items.count(evs[i].data.u64))
					on_link_readable(item.link);
				break;
			case Item::qp1: gsi_readable(item.gsi); break;
			}
		}
		dispatching = false;
		if (ready.size() > 1)
			signal_eventfd(this); // this reader takes the first at once
	}
}

} // namespace

uint64_t foreign_peer_count() noexcept { return g_foreign.load(std::memory_order_relaxed); }

void set_response_timeout_ms(uint32_t ms) noexcept { g_timeout_ns = uint64_t(ms) * 1000000ull; }

} // namespace ov::usercm

// ====================================================================== hooks.h

namespace ov::cm::soft {

bool enabled() noexcept
{
	try {
		return usercm::soft_devices().any;
	} catch (...) {
		return false;
	}
}

void prepare() noexcept
{
	try {
		if (!enabled())
			return;
		(void)usercm::bindings();
		usercm::read_kernel_ndevs();
	} catch (...) {
		// what was not read is read by the first bind or resolve
	}
}

bool claims(const sockaddr *addr) noexcept
{
	if (!addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) || !enabled())
		return false;
	try {
		if (usercm::bound_device(addr) >= 0 && !usercm::is_wildcard(addr))
			return true; // explicitly bound
		if (usercm::is_wildcard(addr)) {
			// The wildcard goes to the kernel when it has RDMA devices,
			// unless "*" is bound to a soft device.
			for (auto &b : usercm::bindings())
				if (b.family == AF_UNSPEC)
					return true;
			return !usercm::kernel_owns_any();
		}
		if (usercm::is_multicast(addr))
			return true;
		// An address of (or reached through) an sroce device's interface.
		if (usercm::roce_device_for(addr) >= 0)
			return !usercm::kernel_owns(addr);
		return usercm::is_local_address(addr) && !usercm::kernel_owns(addr);
	} catch (...) {
		return false;
	}
}

std::unique_ptr<EventSource> open_source(int &err) noexcept
{
	auto src = std::unique_ptr<usercm::Source>(new (std::nothrow) usercm::Source());
	if (!src) {
		err = ENOMEM;
		return nullptr;
	}
	src->epfd = epoll_create1(EPOLL_CLOEXEC);
	src->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	src->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (src->epfd < 0 || src->evfd < 0 || src->tfd < 0) {
		err = errno;
		return nullptr; // the destructor closes what was opened
	}
	static std::once_flag atfork;
	std::call_once(atfork, [] {
		// A fork child is another process: its cached pid goes.
		pthread_atfork(nullptr, nullptr, [] { usercm::g_pid.store(0, std::memory_order_relaxed); });
	});
	std::lock_guard<std::recursive_mutex> g(usercm::g_lock);
	src->pid = usercm::self_pid();
	try {
		src->keys[0] = usercm::add_item(src.get(), src->evfd, usercm::Item{usercm::Item::event});
		src->keys[1] = usercm::add_item(src.get(), src->tfd, usercm::Item{usercm::Item::timer});
		usercm::g_sources.push_back(src.get());
		for (usercm::Gsi *gsi : usercm::g_gsi)
			usercm::gsi_watch(src.get(), gsi);

	} catch (...) {
		err = ENOMEM;
		return nullptr;
	}
	return src;
}

std::unique_ptr<IdBackend> create_id(EventSource &src, uint64_t uid, uint16_t ps, uint8_t qp_type,
				     int &err) noexcept
{
	if (strcmp(src.kind(), "soft") != 0 || !usercm::ps_name(ps)) {
		err = EINVAL;
		return nullptr;
	}
	std::lock_guard<std::recursive_mutex> g(usercm::g_lock);
	try {
		return std::unique_ptr<IdBackend>(
		    new usercm::Backend(static_cast<usercm::Source &>(src), uid, ps, qp_type));
	} catch (...) {
		err = ENOMEM;
		return nullptr;
	}
}

} // namespace ov::cm::soft
