// RoCE v2 software device: several processes on one device. Every process
// that opens sroceN on an interface binds its own UDP socket to port 4791
// with SO_REUSEPORT (socket(7)); the kernel lets only sockets of the same
// user into such a group, and spreads the arriving datagrams over them by a
// hash of their addresses and ports, which knows nothing of QPs. So a
// process may read a datagram for a QP of another: it looks the QP's owner
// up in the device's segment (one QP-number space for all processes of the
// user in the namespace: QpEntry::owner_pid) and hands the datagram on,
// unchanged, with the addresses its ICRC covers, to that process's endpoint:
// an AF_UNIX datagram socket (unix(7)) whose file lies beside the segment,
// in the user's own directory of /dev/shm, where no other user can bind or
// send. The receiver also checks that the sender is of its user
// (SO_PASSCRED), and never hands a datagram on again. Every process has its
// own QP1; a CM MAD goes to the process it is for by its content, as the
// kernel's MAD layer hands it to the right agent (mad_target). Multicast
// datagrams reach every socket of the group by themselves. src/DESIGN.md
// ("Several processes on one device") says why.
#include "roce.h"
#include "../log.h"
#include "../objects.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace ovsoft {

namespace {

// What precedes a datagram handed on: the receiver handles it as if its own
// socket had read it (transport.cpp).
struct FwdHeader {
	uint32_t magic;
	uint32_t ifindex;  // the interface it arrived on
	uint32_t gro_seg;  // a UDP_GRO train's packet size (0: one packet)
	uint32_t reserved;
	struct sockaddr_in6 from; // its source address and port
	uint8_t dst[16];   // its destination address (IPv4-mapped for IPv4)
};
constexpr uint32_t kFwdMagic = 0x4f565246; // "OVRF"

// The endpoint of process `who` (a pid) of rc's device: a socket file
// beside the device's segment, in the user's own directory of /dev/shm
// (mode 0700: no other user can bind or reach it). Returns the address
// length, 0 when the path does not fit.
socklen_t endpoint_path(const RoceCtx *rc, int who, struct sockaddr_un *a)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	int n = snprintf(a->sun_path, sizeof(a->sun_path), "%s.fwd-%d", rc->seg->path, who);
	if (n < 0 || size_t(n) >= sizeof(a->sun_path))
		return 0;
	return socklen_t(offsetof(struct sockaddr_un, sun_path) + size_t(n) + 1);
}

// A marker in the abstract namespace (unix(7)), which belongs to the
// network namespace as the port does: "openverbs-sroce-UID-IFINDEX-" (the
// group), the segment's identity, then the pid. Markers tell a process at
// open whether one of another segment shares the port (the kernel frees
// them when their process dies). Returns the address length.
socklen_t marker_name(const RoceCtx *rc, int who, struct sockaddr_un *a)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	char *p = a->sun_path + 1; // sun_path[0] 0: the abstract namespace
	size_t room = sizeof(a->sun_path) - 1;
	int n = snprintf(p, room, "%s-%d", rc->share_prefix, who);
	return socklen_t(offsetof(struct sockaddr_un, sun_path) + 1 + size_t(n));
}

// Binds a new socket to a (unlinking a stale socket file first when
// `path`); the socket, or -1 with errno.
int bind_socket(const struct sockaddr_un *a, socklen_t al, bool path, int (*make)())
{
	int fd = make();
	if (fd < 0)
		return -1;
	if (path)
		unlink(a->sun_path);
	if (bind(fd, reinterpret_cast<const struct sockaddr *>(a), al) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

// The markers' group of rc's device, "openverbs-sroce-UID-IFINDEX-", into
// buf; its length.
size_t marker_group(const RoceCtx *rc, char *buf, size_t len)
{
	int n = snprintf(buf, len, "openverbs-sroce-%u-%d-", unsigned(geteuid()), rc->ifindex);
	return n < 0 ? 0 : std::min(size_t(n), len - 1);
}

int marker_socket()
{
	return socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}

// How long a process waits to hand a datagram on while the receiving
// endpoint's queue is full (a burst: the kernel queues only
// net.unix.max_dgram_qlen datagrams, 10 by default, per endpoint); the
// datagram is then lost as on a wire. (2 ms lost 3-18 of 2000 datagrams of
// a UD burst when other tests kept both cores busy: the receiver's thread
// did not run in time.) Meanwhile the waiting process handles what is
// handed to it (roce_share_wait): two processes that each waited for the
// other's queue, a burst each way, lost datagrams both ways (udaddy's
// replies, two clients on one device: 5 of 15 runs hung).
constexpr long kHandOnWaitUs = 20000;
// Between two tries when nothing was handed to this process meanwhile.
constexpr long kHandOnPauseNs = 20000;

// An endpoint: sends and receives with MSG_DONTWAIT, the sender's
// credentials with each datagram.
int endpoint_socket()
{
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0) {
		close(fd);
		return -1;
	}
	// Room for a few trains (each up to 64 KiB) on their way out.
	int buf = 1 << 20;
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	return fd;
}

// The pid in a file name after `at` ("PID" or "PID-..."), 0 if none.
long name_pid(const char *at)
{
	char *end = nullptr;
	long pid = strtol(at, &end, 10);
	return pid > 0 && end && (!*end || *end == '-') ? pid : 0;
}

bool pid_gone(long pid) { return kill(pid_t(pid), 0) != 0 && errno == ESRCH; }

// Calls fn(d, name, rest) for each file beside the segment at seg_path whose
// name is "<segment>.<kind>..." (rest: what follows), until fn returns
// false; d is the directory (for unlinkat).
template <class Fn> void each_beside(const char *seg_path, const char *kind, Fn fn)
{
	const char *slash = strrchr(seg_path, '/');
	if (!slash)
		return;
	std::string dir(seg_path, size_t(slash - seg_path));
	std::string stem = std::string(slash + 1) + "." + kind;
	DIR *d = opendir(dir.c_str());
	if (!d)
		return;
	while (struct dirent *e = readdir(d))
		if (!strncmp(e->d_name, stem.c_str(), stem.size()) &&
		    !fn(d, e->d_name, e->d_name + stem.size()))
			break;
	closedir(d);
}

// A listener marker's name after "<segment>.listen-": the service ID (16
// hex digits), the listener's address (32 hex digits: the 16 bytes of the
// RDMA CM header's address field, IPv4 in the last 4, all zero for the
// wildcard), the pid and the listener's handle, joined by '-'.
constexpr size_t kMarkSvcChars = 16, kMarkAddrChars = 32;
constexpr size_t kMarkPidAt = kMarkSvcChars + 1 + kMarkAddrChars + 1;

// A listener address (16 bytes) as a marker spells it.
void addr_hex(const uint8_t *addr, char out[kMarkAddrChars + 1])
{
	for (size_t i = 0; i < kMarkAddrChars / 2; i++)
		snprintf(out + 2 * i, 3, "%02x", addr[i]);
}

// Removes the files of processes of the segment at `seg_path` that died
// without closing the device (killed): endpoints "<segment>.fwd-PID" and
// listener markers "<segment>.listen-SVC-ADDR-PID-HANDLE" of a pid that no
// longer exists.
void forget_dead(const char *seg_path)
{
	auto drop = [](DIR *d, const char *name, long pid) {
		if (pid > 0 && pid_gone(pid))
			unlinkat(dirfd(d), name, 0);
		return true;
	};
	each_beside(seg_path, "fwd-", [&](DIR *d, const char *name, const char *rest) {
		return drop(d, name, name_pid(rest));
	});
	each_beside(seg_path, "listen-", [&](DIR *d, const char *name, const char *rest) {
		return drop(d, name, strlen(rest) > kMarkPidAt ? name_pid(rest + kMarkPidAt) : 0);
	});
}

// A CM MAD for QP1 (BTH, DETH, then the 256-byte MAD: IBTA 13.4.3 for its
// header, 12.6 for the messages' fields). The offsets the routing reads,
// from the MAD's start: base version, management class, attribute ID; a
// REQ's and a SIDR_REQ's service ID; a SIDR_REP's request ID; the remote
// communication ID of REP, MRA, REJ, RTU, DREQ and DREP.
constexpr size_t kDethBytes = 8;
constexpr size_t kMadAt = ovroce::kBthBytes + kDethBytes;
constexpr size_t kMadAttr = 16, kMadServiceId = 32, kMadRequestId = 24, kMadRemoteId = 28;
// Where a REQ's and a SIDR_REQ's private data start (their message at byte
// 24 of the MAD: private data at byte 140 of REQ, 16 of SIDR_REQ), and the
// destination address in the RDMA CM header that starts it (rdma_cm(7);
// 16 bytes at its byte 20, IPv4 in the last 4).
constexpr size_t kMadReqPrivate = 24 + 140, kMadSidrReqPrivate = 24 + 16;
constexpr size_t kCmaDstAt = 20, kCmaAddrBytes = kMarkAddrChars / 2;
constexpr uint8_t kMadBaseVersion = 1, kMadClassCm = 0x07;
constexpr uint16_t kAttrReq = 0x0010, kAttrSidrReq = 0x0017, kAttrSidrRep = 0x0018;
// The low bits of the communication IDs (and SIDR request IDs) our CM
// makes: the tag of the process whose CM made it, its slot among the
// device's processes (openverbs_soft_roce_cm_tag; librdmacm's usercm
// engine, mad_local_id).
constexpr uint32_t kCommIdTagBits = 9;
static_assert(kMaxProcs <= (1u << kCommIdTagBits), "a process slot fits a communication ID's tag");

uint64_t be_at(const uint8_t *p, size_t bytes)
{
	uint64_t v = 0;
	for (size_t i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

// The process whose CM listens on service ID `svc` on rc's device for the
// destination address `dst` (32 hex digits, as in the markers): the listener
// markers beside the segment ("<segment>.listen-SVC-ADDR-PID-HANDLE", made
// by our librdmacm at rdma_listen, removed when the listener goes), one of
// that exact address first, else one of the wildcard (as the CM matches a
// REQ to a listener; two processes may listen on one port at two
// addresses). 0 when it is this one, none, or only dead ones.
int listener_pid(RoceCtx *rc, uint64_t svc, const char *dst)
{
	char kind[48];
	snprintf(kind, sizeof(kind), "listen-%016llx-", (unsigned long long)svc);
	static const char kAny[kMarkAddrChars + 1] = "00000000000000000000000000000000";
	long exact = 0, any = 0;
	each_beside(rc->seg->path, kind, [&](DIR *, const char *, const char *rest) {
		if (strlen(rest) <= kMarkAddrChars + 1 || rest[kMarkAddrChars] != '-')
			return true;
		bool is_exact = !strncmp(rest, dst, kMarkAddrChars);
		if (!is_exact && strncmp(rest, kAny, kMarkAddrChars))
			return true; // another address's listener
		long &slot = is_exact ? exact : any;
		long pid = name_pid(rest + kMarkAddrChars + 1);
		if (pid > 0 && !slot && (pid == self_pid() || !pid_gone(pid)))
			slot = pid;
		return !exact;
	});
	long pid = exact ? exact : any;
	return pid == self_pid() ? 0 : int(pid); // ours: handled here
}

// The process a datagram for QP1 belongs to (roce_share_target).
int mad_target(RoceCtx *rc, const uint8_t *p, size_t n)
{
	if (n < kMadAt + kMadRemoteId + 4)
		return 0;
	const uint8_t *mad = p + kMadAt;
	if (mad[0] != kMadBaseVersion || mad[1] != kMadClassCm) // not the CM's: this QP1's
		return 0;
	uint16_t attr = uint16_t(be_at(mad + kMadAttr, 2));
	if (attr == kAttrReq || attr == kAttrSidrReq) {
		size_t cma = attr == kAttrReq ? kMadReqPrivate : kMadSidrReqPrivate;
		if (n < kMadAt + cma + kCmaDstAt + kCmaAddrBytes || !rc->seg)
			return 0;
		char dst[kMarkAddrChars + 1];
		addr_hex(mad + cma + kCmaDstAt, dst);
		return listener_pid(rc, be_at(mad + kMadServiceId, 8), dst);
	}
	uint32_t id = uint32_t(be_at(mad + (attr == kAttrSidrRep ? kMadRequestId : kMadRemoteId), 4));
	if (!rc->seg)
		return 0;
	const ProcEntry &pe = rc->seg->hdr->procs[id & ((1u << kCommIdTagBits) - 1)];
	int32_t pid = __atomic_load_n(&pe.pid, __ATOMIC_RELAXED);
	return pe.in_use.load(std::memory_order_acquire) && pid > 0 && pid != self_pid() ? pid : 0;
}

} // namespace

int roce_share_open(RoceCtx *rc, const Segment *seg)
{
	struct stat st;
	if (!seg || (fstat(seg->fd, &st) != 0 && stat(seg->path, &st) != 0))
		return EIO;
	rc->seg = seg;
	// The group, then the segment (device and inode of its file: processes
	// that see another /dev/shm have another one).
	size_t gl = marker_group(rc, rc->share_prefix, sizeof(rc->share_prefix));
	snprintf(rc->share_prefix + gl, sizeof(rc->share_prefix) - gl, "%llx.%llx",
		 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	forget_dead(seg->path);
	struct sockaddr_un a;
	socklen_t al = endpoint_path(rc, self_pid(), &a);
	if (!al)
		return ENAMETOOLONG;
	// (A file of this pid is a dead process's: pids are unique among the
	// living ones of the segment's processes, which share a PID namespace.)
	rc->fwd_fd = bind_socket(&a, al, true, endpoint_socket);
	if (rc->fwd_fd >= 0) {
		al = marker_name(rc, self_pid(), &a);
		rc->marker_fd = bind_socket(&a, al, false, marker_socket);
	}
	if (rc->fwd_fd < 0 || rc->marker_fd < 0) {
		int e = errno ? errno : EIO;
		softlog(1, "%s: cannot make this process's endpoint for datagrams of its QPs: %s",
			rc->ifname, strerror(e));
		roce_share_close(rc);
		return e;
	}
	return 0;
}

int roce_share_check(RoceCtx *rc)
{
	// Every marker of the user's processes on this interface and in this
	// namespace (abstract names are the namespace's). The marker was bound
	// before the UDP port: of two processes of different segments that
	// bind at once, at least the later one sees the other here.
	FILE *f = fopen("/proc/self/net/unix", "re");
	if (!f)
		return 0; // no procfs: nothing to tell apart (src/DESIGN.md)
	char line[512], group[64];
	size_t gl = marker_group(rc, group, sizeof(group)), pl = strlen(rc->share_prefix);
	int e = 0;
	while (!e && fgets(line, sizeof(line), f)) {
		const char *at = strstr(line, " @");
		if (!at || strncmp(at + 2, group, gl) != 0)
			continue;
		const char *name = at + 2;
		if (strncmp(name, rc->share_prefix, pl) == 0 && name[pl] == '-')
			continue; // one of this segment's processes
		e = EADDRINUSE;
		char other[128];
		snprintf(other, sizeof(other), "%s", name);
		other[strcspn(other, "\n")] = 0;
		softlog(1, "%s: UDP port %u is shared with a process of another device segment (%s): "
			   "processes that share a RoCE device must see the same /dev/shm",
			rc->ifname, ovroce::kRoceV2Port, other);
	}
	fclose(f);
	return e;
}

void roce_share_close(RoceCtx *rc)
{
	struct sockaddr_un a;
	if (rc->fwd_fd >= 0 && endpoint_path(rc, self_pid(), &a))
		unlink(a.sun_path);
	for (int *fd : {&rc->fwd_fd, &rc->marker_fd}) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
	}
}

int roce_share_target(RoceCtx *rc, const uint8_t *p, size_t n)
{
	if (n < ovroce::kBthBytes)
		return 0;
	uint32_t qpn = uint32_t(p[5]) << 16 | uint32_t(p[6]) << 8 | p[7];
	if (qpn == kRoceMcastQpn)
		return 0;
	if (qpn == kRoceGsiQpn)
		return mad_target(rc, p, n);
	uint32_t slot = qpn - kQpnBase;
	if (qpn < kQpnBase || slot >= kMaxQps || !rc->seg)
		return 0;
	if (__atomic_load_n(&rc->by_slot[slot], __ATOMIC_RELAXED))
		return 0;
	const QpEntry &e = rc->seg->hdr->qps[slot];
	if (e.slot.load(std::memory_order_acquire) != SLOT_LIVE)
		return 0;
	int32_t pid = __atomic_load_n(&e.owner_pid, __ATOMIC_RELAXED);
	return pid > 0 && pid != self_pid() ? pid : 0;
}

int roce_share_send(RoceCtx *rc, int target, const uint8_t *p, size_t n, size_t gro_seg,
		     const struct sockaddr_in6 &from, const uint8_t dst[16], int ifindex)
{
	FwdHeader h = {};
	h.magic = kFwdMagic;
	h.ifindex = uint32_t(ifindex);
	h.gro_seg = gro_seg < n ? uint32_t(gro_seg) : 0;
	h.from = from;
	memcpy(h.dst, dst, 16);
	struct sockaddr_un a;
	socklen_t al = endpoint_path(rc, target, &a);
	struct iovec iov[2] = {{&h, sizeof(h)}, {const_cast<uint8_t *>(p), n}};
	struct msghdr m = {};
	m.msg_name = &a;
	m.msg_namelen = al;
	m.msg_iov = iov;
	m.msg_iovlen = 2;
	ssize_t sent;
	struct timespec start = {};
	bool waiting = false;
	for (;;) {
		sent = sendmsg(rc->fwd_fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (sent >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			break;
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (!waiting) {
			waiting = true;
			start = now;
		} else if ((now.tv_sec - start.tv_sec) * 1000000L + (now.tv_nsec - start.tv_nsec) / 1000 >=
			   kHandOnWaitUs) {
			errno = EAGAIN;
			break;
		}
		if (!roce_share_wait(rc)) {
			struct timespec pause = {0, kHandOnPauseNs};
			nanosleep(&pause, nullptr);
		}
	}
	if (sent < 0) {
		// No such endpoint (the owner is gone): this process drops it. A full queue: lost as on a wire (RC sends it
		// again).
		if (errno == ECONNREFUSED || errno == ENOENT)
			return -1;
		if (!rc->fwd_lost++)
			softlog(3, "%s: a datagram for process %d was lost on the way: %s", rc->ifname,
				target, strerror(errno));
		return 0;
	}
	rc->fwd_out++;
	return 1;
}

ssize_t roce_share_recv(RoceCtx *rc, int fd, uint8_t *buf, size_t cap, RoceFwdMeta *meta)
{
	FwdHeader h;
	struct iovec iov[2] = {{&h, sizeof(h)}, {buf, cap}};
	union {
		char b[CMSG_SPACE(sizeof(struct ucred))];
		struct cmsghdr align;
	} ctl;
	struct msghdr m = {};
	m.msg_iov = iov;
	m.msg_iovlen = 2;
	m.msg_control = ctl.b;
	m.msg_controllen = sizeof(ctl.b);
	ssize_t got = recvmsg(fd, &m, MSG_DONTWAIT);
	if (got < 0)
		return -1;
	bool mine = false;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
		    c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
			struct ucred u;
			memcpy(&u, CMSG_DATA(c), sizeof(u));
			mine = u.uid == geteuid();
		}
	if (!mine || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || size_t(got) < sizeof(h) ||
	    h.magic != kFwdMagic || h.from.sin6_family != AF_INET6) {
		rc->fwd_bad++;
		softlog(3, "%s: a datagram handed on by %s was dropped (%zd bytes)", rc->ifname,
			mine ? "a process of this user" : "another user's process", got);
		return 0;
	}
	rc->fwd_in++;
	meta->from = h.from;
	memcpy(meta->dst, h.dst, 16);
	meta->ifindex = int(h.ifindex);
	meta->gro_seg = h.gro_seg;
	return got - ssize_t(sizeof(h));
}

} // namespace ovsoft

// The project's librdmacm finds this function with dlsym (src/rdmacm/usercm,
// roce_listen_mark); it is no public API. Its CM listens (`on` 1) or no
// longer listens (0) on service ID `service_id` (the port space << 16 | the
// port) of ibctx's device, an sroce device, at address `addr` (16 bytes as in
// the RDMA CM header of a REQ's private data: IPv4 in the last 4, the first
// 12 zero; all zero: the wildcard), with the listener `handle`: a marker file
// beside the device's segment, "<segment>.listen-SVC-ADDR-PID-HANDLE", by
// which a process that shares the device hands the REQs and SIDR_REQs for
// that service and address to this one (roce_share_target). 0, or an errno
// value (EINVAL: not an sroce context, or no address).
extern "C" __attribute__((visibility("default"))) int
openverbs_soft_roce_listen_at(struct ibv_context *ibctx, uint64_t service_id, const uint8_t *addr,
			      uint32_t handle, int on)
{
	using namespace ovsoft;
	SoftContext *ctx = ibctx ? to_sctx(ibctx) : nullptr;
	if (!ctx || !ctx->roce || !ctx->roce->seg || !addr)
		return EINVAL;
	char hex[kMarkAddrChars + 1];
	addr_hex(addr, hex);
	char path[PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s.listen-%016llx-%s-%d-%u", ctx->roce->seg->path,
			 (unsigned long long)service_id, hex, self_pid(), handle);
	if (n < 0 || size_t(n) >= sizeof(path))
		return ENAMETOOLONG;
	if (!on)
		return unlink(path) == 0 || errno == ENOENT ? 0 : errno;
	int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

// The project's librdmacm finds this function with dlsym (src/rdmacm/usercm,
// gsi_for); it is no public API. This process's tag on ibctx's device, an
// sroce device: its slot among the processes of the device's segment
// (0 .. kMaxProcs - 1), which the CM puts in the low bits of the
// communication IDs it makes, so that a process sharing the device hands the
// peer's answers to this one (mad_target). -1: not an sroce context.
extern "C" __attribute__((visibility("default"))) int
openverbs_soft_roce_cm_tag(struct ibv_context *ibctx)
{
	using namespace ovsoft;
	SoftContext *ctx = ibctx ? to_sctx(ibctx) : nullptr;
	if (!ctx || !ctx->roce || !ctx->roce->seg)
		return -1;
	return int(ctx->roce->seg->my_proc);
}
