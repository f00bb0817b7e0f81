// The software devices' connection manager (engine.h; src/DESIGN.md,
// "Connection manager for software devices").
#include "engine.h"

#include "addr.h"
#include "wire.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <mutex>
#include <new>
#include <random>
#include <string>
#include <sys/epoll.h>
#include <sys/eventfd.h>
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

constexpr uint64_t kTimeoutNs = 8ull * 1000 * 1000 * 1000; // REP, RTU, DREP, SIDR_REP
constexpr uint16_t kRejTimeout = 4, kRejInvalidServiceId = 8, kRejConsumer = 28;
constexpr uint16_t kSidrUnsupported = 1, kSidrReject = 2;

enum class St {
	idle,
	bound,
	addr_resolved,
	route_resolved,
	listening,
	req_sent,      // REQ (or SIDR_REQ) sent, waiting for the reply
	req_rcvd,      // CONNECT_REQUEST given to the application
	rep_sent,      // accepted, waiting for RTU
	rep_rcvd,      // CONNECT_RESPONSE given (no QP), waiting for rdma_establish
	connected,
	dreq_sent,
	disconnected,
	done,          // rejected, refused, UD exchange finished
};

struct SoftId;
class ChannelImpl;

// What an epoll key names. Keys are looked up under the lock, so an entry
// removed by another thread is simply not found.
struct Item {
	enum Kind { listen, conn, pending, timer, event, kernel } kind;
	SoftId *id = nullptr;   // listen, conn
	int fd = -1;            // pending
	SoftId *listener = nullptr; // pending
	ChannelImpl *ch = nullptr;
};

struct Mcast {
	sockaddr_storage addr;
	ibv_gid mgid;
	uint16_t mlid;
};

struct SoftId {
	rdma_cm_id *id;
	ChannelImpl *ch;
	St st = St::idle;
	int device = -1;
	int lfd = -1; // bound / listening socket
	uint64_t lkey = 0;
	std::string path;
	ino_t path_ino = 0;
	int cfd = -1; // connection socket
	uint64_t ckey = 0;
	uint64_t deadline = 0;
	uint32_t psn = 0;
	Message peer; // the peer's REQ, REP or SIDR_REQ
	bool peer_valid = false;
	bool ud = false;
	uint8_t resp_res = 0, init_depth = 0, retry = 7, rnr = 7;
	uint8_t ack_timeout = 14;
	uint32_t qkey = 0;
	std::vector<Mcast> mcs;
};

} // namespace

class Channel {};

namespace {

class ChannelImpl : public Channel {
public:
	int epfd = -1, evfd = -1, tfd = -1, kfd = -1;
	uint64_t keys[3] = {};
	std::deque<Event *> ready;
	std::vector<SoftId *> ids;
};

std::recursive_mutex g_lock;
Host g_host;
std::unordered_map<const rdma_cm_id *, SoftId *> g_ids;
std::unordered_map<uint64_t, Item> g_items;
uint64_t g_next_key = 1;
std::atomic<uint64_t> g_foreign{0};

struct DevInfo {
	bool valid = false;
	Port port;
	uint8_t max_rd = 0, max_init_rd = 0;
};
DevInfo g_dev[256];

uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

uint32_t random_psn()
{
	static std::mt19937 gen{std::random_device{}()};
	return gen() & 0xffffff;
}

SoftId *find(const rdma_cm_id *id)
{
	auto it = g_ids.find(id);
	return it == g_ids.end() ? nullptr : it->second;
}

uint64_t add_item(ChannelImpl *ch, int fd, const Item &item)
{
	uint64_t key = g_next_key++;
	Item it = item;
	it.ch = ch;
	g_items[key] = it;
	epoll_event ev{};
	ev.events = EPOLLIN;
	ev.data.u64 = key;
	epoll_ctl(ch->epfd, EPOLL_CTL_ADD, fd, &ev);
	return key;
}

void remove_item(ChannelImpl *ch, int fd, uint64_t &key)
{
	if (!key)
		return;
	g_items.erase(key);
	if (ch && fd >= 0)
		epoll_ctl(ch->epfd, EPOLL_CTL_DEL, fd, nullptr);
	key = 0;
}

const DevInfo *dev_info(int index)
{
	if (index < 0 || index > 255)
		return nullptr;
	DevInfo &d = g_dev[index];
	if (d.valid)
		return &d;
	ibv_context *ctx = g_host.device_context ? g_host.device_context(index) : nullptr;
	if (!ctx)
		return nullptr;
	ibv_port_attr pa;
	ibv_device_attr da;
	ibv_gid gid;
	if (ibv_query_port(ctx, 1, &pa) || ibv_query_device(ctx, &da) ||
	    ibv_query_gid(ctx, 1, 0, &gid))
		return nullptr;
	d.port.device = uint16_t(index);
	d.port.lid = pa.lid;
	d.port.mtu = uint8_t(pa.active_mtu);
	memcpy(d.port.gid, gid.raw, 16);
	d.max_rd = uint8_t(da.max_qp_rd_atom > 255 ? 255 : da.max_qp_rd_atom);
	d.max_init_rd = uint8_t(da.max_qp_init_rd_atom > 255 ? 255 : da.max_qp_init_rd_atom);
	d.valid = d.port.lid == index + 1 && d.port.mtu >= 1 && d.port.mtu <= 5;
	return d.valid ? &d : nullptr;
}

// ------------------------------------------------------------------ events

void push(ChannelImpl *ch, Event *e)
{
	if (ch->ready.empty()) {
		uint64_t one = 1;
		(void)!write(ch->evfd, &one, sizeof(one));
	}
	ch->ready.push_back(e);
}

Event *make_event(SoftId *s, rdma_cm_event_type type, int status)
{
	auto *e = new (std::nothrow) Event();
	if (!e)
		return nullptr;
	e->ev.id = s->id;
	e->ev.event = type;
	e->ev.status = status;
	return e;
}

void post(SoftId *s, rdma_cm_event_type type, int status)
{
	if (Event *e = make_event(s, type, status))
		push(s->ch, e);
}

void set_private(Event *e, const Message &m, bool ud)
{
	memcpy(e->priv, m.private_data, m.private_len);
	if (ud) {
		e->ev.param.ud.private_data = m.private_len ? e->priv : nullptr;
		e->ev.param.ud.private_data_len = uint8_t(m.private_len);
	} else {
		e->ev.param.conn.private_data = m.private_len ? e->priv : nullptr;
		e->ev.param.conn.private_data_len = uint8_t(m.private_len);
	}
}

// ------------------------------------------------------------------ sockets

int cm_dir(std::string &out)
{
	char base[64];
	snprintf(base, sizeof(base), "/dev/shm/openverbs-%u", unsigned(geteuid()));
	for (const char *d : {"", "/cm"}) {
		std::string p = std::string(base) + d;
		if (mkdir(p.c_str(), 0700) != 0 && errno != EEXIST)
			return errno;
		struct stat st;
		if (lstat(p.c_str(), &st) != 0)
			return errno;
		if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
			return EPERM; // not a private directory of ours: never use it
	}
	out = std::string(base) + "/cm";
	return 0;
}

const char *ps_name(int ps)
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

bool peer_is_us(int fd)
{
	ucred cr{};
	socklen_t len = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || cr.uid != geteuid()) {
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

std::string sock_path(const std::string &dir, int ps, uint16_t port, const std::string &key)
{
	return dir + "/" + ps_name(ps) + "-" + std::to_string(port) + "-" + key;
}

// Binds a listening socket at `path`. A path left by a dead process refuses
// connections: it is replaced, under an flock so two processes never both
// take it over.
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
			int lock = open((dir + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
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

void close_listen(SoftId *s)
{
	if (s->lfd < 0)
		return;
	remove_item(s->ch, s->lfd, s->lkey);
	// Unlink only our own socket (the path may have been taken over).
	struct stat st;
	if (!s->path.empty() && lstat(s->path.c_str(), &st) == 0 && st.st_ino == s->path_ino)
		unlink(s->path.c_str());
	close(s->lfd);
	s->lfd = -1;
	s->path.clear();
}

void close_conn(SoftId *s)
{
	if (s->cfd < 0)
		return;
	remove_item(s->ch, s->cfd, s->ckey);
	close(s->cfd);
	s->cfd = -1;
	s->deadline = 0;
}

bool send_msg(int fd, const Message &m)
{
	uint8_t buf[kMaxMessage];
	size_t n = encode(m, buf, sizeof(buf));
	return n && send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT) == ssize_t(n);
}

void arm_timer(ChannelImpl *ch)
{
	uint64_t first = 0;
	for (SoftId *s : ch->ids)
		if (s->deadline && (!first || s->deadline < first))
			first = s->deadline;
	itimerspec its{};
	if (first) {
		its.it_value.tv_sec = time_t(first / 1000000000ull);
		its.it_value.tv_nsec = long(first % 1000000000ull);
	}
	timerfd_settime(ch->tfd, TFD_TIMER_ABSTIME, &its, nullptr);
}

void set_deadline(SoftId *s, uint64_t when)
{
	s->deadline = when;
	arm_timer(s->ch);
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

void set_gids(rdma_cm_id *id, const Port &local, const uint8_t *remote_gid)
{
	memcpy(id->route.addr.addr.ibaddr.sgid.raw, local.gid, 16);
	memcpy(id->route.addr.addr.ibaddr.dgid.raw, remote_gid, 16);
	id->route.addr.addr.ibaddr.pkey = 0xffff;
}

uint32_t qkey_of(const rdma_cm_id *id, uint32_t requested)
{
	if (id->ps == RDMA_PS_UDP)
		return RDMA_UDP_QKEY;
	return requested ? requested : RDMA_UDP_QKEY;
}

bool is_ud(const rdma_cm_id *id)
{
	return id->ps == RDMA_PS_UDP || id->ps == RDMA_PS_IPOIB || id->qp_type == IBV_QPT_UD;
}

// ------------------------------------------------------------------ QP attributes

int qp_attr(SoftId *s, ibv_qp_attr *a, int *mask)
{
	const DevInfo *d = dev_info(s->device);
	if (!d)
		return ENODEV;
	rdma_cm_id *id = s->id;
	bool connected = s->peer_valid;
	switch (a->qp_state) {
	case IBV_QPS_INIT:
		a->pkey_index = 0;
		a->port_num = id->port_num ? id->port_num : 1;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (s->ud) {
			a->qkey = s->qkey ? s->qkey : qkey_of(id, 0);
			*mask |= IBV_QP_QKEY;
		} else {
			a->qp_access_flags = 0;
			if (connected) {
				a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
				if (s->resp_res)
					a->qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
			}
			*mask |= IBV_QP_ACCESS_FLAGS;
		}
		return 0;
	case IBV_QPS_RTR:
		*mask = IBV_QP_STATE;
		if (s->ud)
			return 0;
		if (!connected)
			return EINVAL;
		a->path_mtu = ibv_mtu(d->port.mtu < s->peer.port.mtu ? d->port.mtu : s->peer.port.mtu);
		a->dest_qp_num = s->peer.qpn;
		a->rq_psn = s->peer.psn;
		memset(&a->ah_attr, 0, sizeof(a->ah_attr));
		a->ah_attr.dlid = s->peer.port.lid;
		a->ah_attr.port_num = id->port_num ? id->port_num : 1;
		*mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (id->qp_type == IBV_QPT_RC) {
			a->max_dest_rd_atomic = s->resp_res;
			a->min_rnr_timer = 0;
			*mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
		return 0;
	case IBV_QPS_RTS:
		a->sq_psn = s->ud ? 0 : s->psn;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		if (!s->ud && id->qp_type == IBV_QPT_RC) {
			if (!connected)
				return EINVAL;
			a->timeout = s->ack_timeout;
			a->retry_cnt = s->retry;
			a->rnr_retry = s->rnr;
			a->max_rd_atomic = s->init_depth;
			*mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		}
		return 0;
	default:
		return EINVAL;
	}
}

int move_qp(SoftId *s, ibv_qp_state to)
{
	ibv_qp_attr a{};
	int mask = 0;
	a.qp_state = to;
	int rc = qp_attr(s, &a, &mask);
	if (rc)
		return rc;
	return ibv_modify_qp(s->id->qp, &a, mask);
}

// INIT (again, now with the connection's access flags), RTR, RTS.
int connect_qp(SoftId *s)
{
	if (!s->id->qp)
		return 0;
	ibv_qp_attr a{};
	ibv_qp_init_attr ia{};
	if (ibv_query_qp(s->id->qp, &a, IBV_QP_STATE, &ia) == 0 && a.qp_state == IBV_QPS_RESET)
		if (int rc = move_qp(s, IBV_QPS_INIT))
			return rc;
	if (int rc = move_qp(s, IBV_QPS_INIT))
		return rc;
	if (int rc = move_qp(s, IBV_QPS_RTR))
		return rc;
	return move_qp(s, IBV_QPS_RTS);
}

void qp_to_error(SoftId *s)
{
	if (!s->id->qp)
		return;
	ibv_qp_attr a{};
	a.qp_state = IBV_QPS_ERR;
	ibv_modify_qp(s->id->qp, &a, IBV_QP_STATE);
}

// ------------------------------------------------------------------ state machine

void fill_conn_param(Event *e, const Message &m)
{
	// As the kernel reports them: from the receiver's point of view.
	e->ev.param.conn.responder_resources = m.initiator_depth;
	e->ev.param.conn.initiator_depth = m.responder_resources;
	e->ev.param.conn.flow_control = m.flow_control;
	e->ev.param.conn.retry_count = m.retry_count;
	e->ev.param.conn.rnr_retry_count = m.rnr_retry_count;
	e->ev.param.conn.srq = m.srq;
	e->ev.param.conn.qp_num = m.qpn;
	set_private(e, m, false);
}

void fill_ud_param(Event *e, SoftId *s, const Message &m)
{
	rdma_ud_param &u = e->ev.param.ud;
	memset(&u.ah_attr, 0, sizeof(u.ah_attr));
	u.ah_attr.dlid = m.port.lid;
	u.ah_attr.port_num = s->id->port_num ? s->id->port_num : 1;
	u.qp_num = m.qpn;
	u.qkey = m.qkey;
	set_private(e, m, true);
}

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
	case St::rep_sent:
	case St::rep_rcvd:
		if (!s->ud)
			post(s, RDMA_CM_EVENT_REJECTED, kRejTimeout);
		s->st = St::done;
		break;
	case St::connected:
	case St::dreq_sent:
		post(s, RDMA_CM_EVENT_DISCONNECTED, 0);
		s->st = St::disconnected;
		break;
	default:
		break;
	}
	close_conn(s);
}

void on_message(SoftId *s, const Message &m)
{
	switch (s->st) {
	case St::req_sent:
		if (s->ud && m.type == MsgType::sidr_rep) {
			Event *e = make_event(s, m.status ? RDMA_CM_EVENT_UNREACHABLE : RDMA_CM_EVENT_ESTABLISHED,
					      m.status ? -ECONNRESET : 0);
			if (e) {
				if (!m.status)
					fill_ud_param(e, s, m);
				else
					set_private(e, m, true);
				push(s->ch, e);
			}
			s->st = St::done;
			close_conn(s);
			return;
		}
		if (!s->ud && m.type == MsgType::rep) {
			s->peer = m;
			s->peer_valid = true;
			// Our QP's receive side takes what the peer offers.
			s->rnr = m.rnr_retry_count;
			if (s->resp_res > m.initiator_depth)
				s->resp_res = m.initiator_depth;
			if (s->init_depth > m.responder_resources)
				s->init_depth = m.responder_resources;
			if (!s->id->qp) {
				Event *e = make_event(s, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
				if (e) {
					fill_conn_param(e, m);
					push(s->ch, e);
				}
				s->st = St::rep_rcvd;
				set_deadline(s, 0);
				return;
			}
			int rc = connect_qp(s);
			if (rc) {
				Message rej;
				rej.type = MsgType::rej;
				rej.status = kRejConsumer;
				send_msg(s->cfd, rej);
				post(s, RDMA_CM_EVENT_CONNECT_ERROR, -rc);
				s->st = St::done;
				close_conn(s);
				return;
			}
			Message rtu;
			rtu.type = MsgType::rtu;
			send_msg(s->cfd, rtu);
			Event *e = make_event(s, RDMA_CM_EVENT_ESTABLISHED, 0);
			if (e) {
				fill_conn_param(e, m);
				push(s->ch, e);
			}
			s->st = St::connected;
			set_deadline(s, 0);
			return;
		}
		if (!s->ud && m.type == MsgType::rej) {
			Event *e = make_event(s, RDMA_CM_EVENT_REJECTED, m.status);
			if (e) {
				set_private(e, m, false);
				push(s->ch, e);
			}
			s->st = St::done;
			close_conn(s);
			return;
		}
		break;
	case St::rep_sent:
		if (m.type == MsgType::rtu) {
			s->st = St::connected;
			set_deadline(s, 0);
			Event *e = make_event(s, RDMA_CM_EVENT_ESTABLISHED, 0);
			if (e) {
				fill_conn_param(e, s->peer);
				e->ev.param.conn.private_data = nullptr;
				e->ev.param.conn.private_data_len = 0;
				push(s->ch, e);
			}
			return;
		}
		if (m.type == MsgType::rej) {
			Event *e = make_event(s, RDMA_CM_EVENT_REJECTED, m.status);
			if (e) {
				set_private(e, m, false);
				push(s->ch, e);
			}
			s->st = St::done;
			close_conn(s);
			return;
		}
		[[fallthrough]];
	case St::connected:
	case St::rep_rcvd:
		if (m.type == MsgType::dreq) {
			Message drep;
			drep.type = MsgType::drep;
			send_msg(s->cfd, drep);
			post(s, RDMA_CM_EVENT_DISCONNECTED, 0);
			s->st = St::disconnected;
			close_conn(s);
			return;
		}
		break;
	case St::dreq_sent:
		if (m.type == MsgType::drep || m.type == MsgType::dreq) {
			post(s, RDMA_CM_EVENT_DISCONNECTED, 0);
			s->st = St::disconnected;
			close_conn(s);
			return;
		}
		break;
	default:
		break;
	}
	peer_gone(s); // a record the state does not expect: the peer is broken
}

void on_conn_readable(SoftId *s)
{
	uint8_t buf[kMaxMessage + 1];
	while (s->cfd >= 0) {
		ssize_t n = recv(s->cfd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			peer_gone(s);
			return;
		}
		Message m;
		if (size_t(n) > sizeof(buf) || parse(buf, size_t(n), m) != ParseError::ok) {
			if (size_t(n) > sizeof(buf))
				parse(buf, kMaxMessage + 1, m); // counted as too long
			peer_gone(s);
			return;
		}
		on_message(s, m);
	}
}

void refuse(int fd, const Message &req, uint16_t reason)
{
	Message r;
	if (req.type == MsgType::sidr_req) {
		r.type = MsgType::sidr_rep;
		r.status = kSidrUnsupported;
	} else {
		r.type = MsgType::rej;
		r.status = reason;
	}
	send_msg(fd, r);
}

// A request arrived on a connection accepted by `l`'s socket.
void on_request(ChannelImpl *ch, SoftId *l, int fd, const Message &m)
{
	bool want_ud = is_ud(l->id);
	if (l->st != St::listening || (m.type == MsgType::sidr_req) != want_ud ||
	    m.port_space != l->id->ps) {
		refuse(fd, m, kRejInvalidServiceId);
		close(fd);
		return;
	}
	rdma_cm_id *nid = g_host.new_conn_id ? g_host.new_conn_id(l->id) : nullptr;
	if (!nid || id_attach(nid, ch) != 0) {
		if (nid && g_host.drop_conn_id)
			g_host.drop_conn_id(nid);
		refuse(fd, m, 3); // IB CM: no resources
		close(fd);
		return;
	}
	SoftId *s = find(nid);
	sockaddr_storage src, dst;
	sockaddr_of(m.dst, src);
	sockaddr_of(m.src, dst);
	int dev = l->device >= 0 ? l->device : device_for(reinterpret_cast<sockaddr *>(&src));
	const DevInfo *d = dev_info(dev < 0 ? 0 : dev);
	if (!d) {
		id_detach(nid);
		if (g_host.drop_conn_id)
			g_host.drop_conn_id(nid);
		refuse(fd, m, 3);
		close(fd);
		return;
	}
	s->device = d->port.device;
	s->ud = want_ud;
	s->peer = m;
	s->peer_valid = !want_ud;
	s->retry = m.retry_count;
	s->rnr = m.rnr_retry_count;
	s->resp_res = m.initiator_depth < d->max_rd ? m.initiator_depth : d->max_rd;
	s->init_depth = m.responder_resources < d->max_init_rd ? m.responder_resources : d->max_init_rd;
	memcpy(&nid->route.addr.src_addr, &src, sizeof(src));
	memcpy(&nid->route.addr.dst_addr, &dst, sizeof(dst));
	set_gids(nid, d->port, m.type == MsgType::req ? m.port.gid : d->port.gid);
	nid->verbs = g_host.device_context(s->device);
	nid->port_num = 1;
	s->cfd = fd;
	s->ckey = add_item(ch, fd, Item{Item::conn, s});
	s->st = St::req_rcvd;
	Event *e = make_event(s, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	if (!e)
		return;
	e->ev.listen_id = l->id;
	if (want_ud)
		set_private(e, m, true);
	else
		fill_conn_param(e, m);
	push(ch, e);
}

void on_listen_readable(ChannelImpl *ch, SoftId *l)
{
	for (;;) {
		int fd = accept4(l->lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		if (!peer_is_us(fd)) {
			close(fd);
			continue;
		}
		Item it{Item::pending};
		it.fd = fd;
		it.listener = l;
		add_item(ch, fd, it);
	}
}

void drop_pending_of(SoftId *l)
{
	for (auto it = g_items.begin(); it != g_items.end();) {
		if (it->second.kind == Item::pending && it->second.listener == l) {
			epoll_ctl(it->second.ch->epfd, EPOLL_CTL_DEL, it->second.fd, nullptr);
			close(it->second.fd);
			it = g_items.erase(it);
		} else {
			++it;
		}
	}
}

void on_pending_readable(ChannelImpl *ch, uint64_t key)
{
	Item it = g_items[key];
	uint8_t buf[kMaxMessage + 1];
	ssize_t n = recv(it.fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	uint64_t k = key;
	remove_item(ch, it.fd, k);
	Message m;
	if (n <= 0 || size_t(n) > sizeof(buf) || parse(buf, size_t(n), m) != ParseError::ok ||
	    (m.type != MsgType::req && m.type != MsgType::sidr_req)) {
		close(it.fd);
		return;
	}
	on_request(ch, it.listener, it.fd, m);
}

void on_timer(ChannelImpl *ch)
{
	uint64_t x;
	(void)!read(ch->tfd, &x, sizeof(x));
	uint64_t now = now_ns();
	std::vector<SoftId *> due;
	for (SoftId *s : ch->ids)
		if (s->deadline && s->deadline <= now)
			due.push_back(s);
	for (SoftId *s : due) {
		s->deadline = 0;
		switch (s->st) {
		case St::req_sent:
			post(s, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
			s->st = St::done;
			break;
		case St::rep_sent:
			post(s, RDMA_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT);
			s->st = St::done;
			break;
		case St::dreq_sent:
			post(s, RDMA_CM_EVENT_DISCONNECTED, 0);
			s->st = St::disconnected;
			break;
		default:
			continue;
		}
		close_conn(s);
	}
	arm_timer(ch);
}

// Connects to the socket of whoever listens on `dst` (exact address, then
// the wildcard of its family, then the IPv6 wildcard for IPv4).
int open_to_listener(const rdma_cm_id *id, const sockaddr *dst, int &fd_out)
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
		if (!fill_un(un, sock_path(dir, id->ps, port, k)))
			continue;
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return errno;
		if (::connect(fd, reinterpret_cast<sockaddr *>(&un), sizeof(un)) == 0) {
			if (!peer_is_us(fd)) {
				close(fd);
				continue;
			}
			int fl = fcntl(fd, F_GETFL);
			fcntl(fd, F_SETFL, fl | O_NONBLOCK);
			fd_out = fd;
			return 0;
		}
		close(fd);
	}
	return ECONNREFUSED;
}

int reserve(SoftId *s, const sockaddr *addr)
{
	std::string dir;
	if (int rc = cm_dir(dir))
		return rc;
	const char *ps = ps_name(s->id->ps);
	if (!ps)
		return EINVAL;
	uint16_t port = port_of(addr);
	std::string key = addr_key(addr);
	sockaddr_storage ss;
	memcpy(&ss, addr, sa_len(addr));
	static std::mt19937 gen{std::random_device{}()};
	for (int tries = 0; tries < 64; tries++) {
		uint16_t p = port ? port : uint16_t(32768 + gen() % (60999 - 32768 + 1));
		std::string path = sock_path(dir, s->id->ps, p, key);
		int fd = -1;
		ino_t ino = 0;
		int rc = bind_path(dir, path, fd, ino);
		if (rc == EADDRINUSE && !port)
			continue;
		if (rc)
			return rc;
		s->lfd = fd;
		s->path = path;
		s->path_ino = ino;
		s->lkey = add_item(s->ch, fd, Item{Item::listen, s});
		set_port(reinterpret_cast<sockaddr *>(&ss), p);
		memcpy(&s->id->route.addr.src_addr, &ss, sa_len(addr));
		return 0;
	}
	return EADDRINUSE;
}

bool is_multicast(const sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return IN_MULTICAST(ntohl(reinterpret_cast<const sockaddr_in *>(sa)->sin_addr.s_addr));
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_MULTICAST(&reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr);
	return false;
}

int default_device()
{
	sockaddr_in any{};
	any.sin_family = AF_INET;
	int d = bound_device(reinterpret_cast<sockaddr *>(&any));
	return d >= 0 ? d : 0;
}

} // namespace

// ====================================================================== API

void set_host(const Host &h) noexcept
{
	std::lock_guard<std::recursive_mutex> g(g_lock);
	g_host = h;
}

void free_event(Event *e) noexcept { delete e; }

int channel_open(int kernel_fd, Channel **out) noexcept
{
	auto *ch = new (std::nothrow) ChannelImpl();
	if (!ch)
		return ENOMEM;
	ch->epfd = epoll_create1(EPOLL_CLOEXEC);
	ch->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	ch->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (ch->epfd < 0 || ch->evfd < 0 || ch->tfd < 0) {
		int e = errno;
		for (int fd : {ch->epfd, ch->evfd, ch->tfd})
			if (fd >= 0)
				close(fd);
		delete ch;
		return e;
	}
	std::lock_guard<std::recursive_mutex> g(g_lock);
	ch->keys[0] = add_item(ch, ch->evfd, Item{Item::event});
	ch->keys[1] = add_item(ch, ch->tfd, Item{Item::timer});
	if (kernel_fd >= 0) {
		ch->kfd = kernel_fd;
		ch->keys[2] = add_item(ch, kernel_fd, Item{Item::kernel});
	}
	*out = ch;
	return 0;
}

int channel_fd(const Channel *ch) noexcept
{
	return ch ? static_cast<const ChannelImpl *>(ch)->epfd : -1;
}

int channel_close(Channel *c) noexcept
{
	auto *ch = static_cast<ChannelImpl *>(c);
	if (!ch)
		return EINVAL;
	std::lock_guard<std::recursive_mutex> g(g_lock);
	if (!ch->ids.empty())
		return EBUSY;
	for (Event *e : ch->ready)
		delete e;
	for (auto &k : ch->keys)
		if (k)
			g_items.erase(k);
	close(ch->epfd);
	close(ch->evfd);
	close(ch->tfd);
	delete ch;
	return 0;
}

int channel_next(Channel *c, bool nonblock, Event **out, bool *kernel_ready) noexcept
{
	auto *ch = static_cast<ChannelImpl *>(c);
	*out = nullptr;
	*kernel_ready = false;
	for (;;) {
		{
			std::lock_guard<std::recursive_mutex> g(g_lock);
			if (!ch->ready.empty()) {
				*out = ch->ready.front();
				ch->ready.pop_front();
				if (ch->ready.empty()) {
					uint64_t x;
					(void)!read(ch->evfd, &x, sizeof(x));
				}
				return 0;
			}
		}
		epoll_event evs[16];
		int n = epoll_wait(ch->epfd, evs, 16, 0);
		if (n == 0) {
			if (nonblock)
				return EAGAIN;
			n = epoll_wait(ch->epfd, evs, 16, -1);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		std::lock_guard<std::recursive_mutex> g(g_lock);
		for (int i = 0; i < n; i++) {
			auto it = g_items.find(evs[i].data.u64);
			if (it == g_items.end())
				continue;
			Item item = it->second;
			switch (item.kind) {
			case Item::kernel: *kernel_ready = true; break;
			case Item::event: break;
			case Item::timer: on_timer(ch); break;
			case Item::listen: on_listen_readable(ch, item.id); break;
			case Item::conn: on_conn_readable(item.id); break;
			case Item::pending: on_pending_readable(ch, evs[i].data.u64); break;
			}
		}
		if (*kernel_ready && ch->ready.empty())
			return 0;
	}
}

int id_attach(rdma_cm_id *id, Channel *c) noexcept
{
	if (!id || !c)
		return EINVAL;
	try {
		std::lock_guard<std::recursive_mutex> g(g_lock);
		if (find(id))
			return 0;
		auto *s = new SoftId();
		s->id = id;
		s->ch = static_cast<ChannelImpl *>(c);
		s->ud = is_ud(id);
		s->qkey = s->ud ? qkey_of(id, 0) : 0;
		g_ids[id] = s;
		s->ch->ids.push_back(s);
		return 0;
	} catch (...) {
		return ENOMEM;
	}
}

void id_detach(rdma_cm_id *id) noexcept
{
	std::lock_guard<std::recursive_mutex> g(g_lock);
	SoftId *s = find(id);
	if (!s)
		return;
	if ((s->st == St::connected || s->st == St::rep_sent) && s->cfd >= 0) {
		qp_to_error(s);
		Message dreq;
		dreq.type = MsgType::dreq;
		send_msg(s->cfd, dreq);
	}
	for (auto &m : s->mcs)
		if (id->qp)
			ibv_detach_mcast(id->qp, &m.mgid, m.mlid);
	drop_pending_of(s);
	close_listen(s);
	close_conn(s);
	auto &v = s->ch->ids;
	for (size_t i = 0; i < v.size(); i++)
		if (v[i] == s) {
			v.erase(v.begin() + long(i));
			break;
		}
	// Events of this id not yet taken are dropped with it.
	for (auto it = s->ch->ready.begin(); it != s->ch->ready.end();) {
		if ((*it)->ev.id == id) {
			delete *it;
			it = s->ch->ready.erase(it);
		} else {
			++it;
		}
	}
	if (s->ch->ready.empty()) {
		uint64_t x;
		(void)!read(s->ch->evfd, &x, sizeof(x));
	}
	arm_timer(s->ch);
	g_ids.erase(id);
	delete s;
}

bool id_attached(const rdma_cm_id *id) noexcept
{
	std::lock_guard<std::recursive_mutex> g(g_lock);
	return find(id) != nullptr;
}

int id_migrate(rdma_cm_id *id, Channel *to) noexcept
{
	std::lock_guard<std::recursive_mutex> g(g_lock);
	SoftId *s = find(id);
	auto *nch = static_cast<ChannelImpl *>(to);
	if (!s || !nch)
		return EINVAL;
	ChannelImpl *old = s->ch;
	if (old == nch)
		return 0;
	try {
		nch->ids.reserve(nch->ids.size() + 1);
	} catch (...) {
		return ENOMEM;
	}
	for (auto *p : {&s->lfd, &s->cfd}) {
		if (*p < 0)
			continue;
		uint64_t &key = p == &s->lfd ? s->lkey : s->ckey;
		Item item = g_items[key];
		remove_item(old, *p, key);
		key = add_item(nch, *p, item);
	}
	for (size_t i = 0; i < old->ids.size(); i++)
		if (old->ids[i] == s) {
			old->ids.erase(old->ids.begin() + long(i));
			break;
		}
	for (auto it = old->ready.begin(); it != old->ready.end();) {
		if ((*it)->ev.id == id) {
			push(nch, *it);
			it = old->ready.erase(it);
		} else {
			++it;
		}
	}
	if (old->ready.empty()) {
		uint64_t x;
		(void)!read(old->evfd, &x, sizeof(x));
	}
	s->ch = nch;
	nch->ids.push_back(s);
	arm_timer(old);
	arm_timer(nch);
	return 0;
}

int device_for(const sockaddr *sa) noexcept
{
	if (!sa || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
		return -1;
	try {
		if (is_wildcard(sa))
			return default_device();
		return soft_device_for(sa);
	} catch (...) {
		return -1;
	}
}

int bind_addr(rdma_cm_id *id, const sockaddr *addr) noexcept
{
	if (!addr)
		return EINVAL;
	if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)
		return EAFNOSUPPORT;
	std::lock_guard<std::recursive_mutex> g(g_lock);
	SoftId *s = find(id);
	if (!s || s->st != St::idle)
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
	s->device = dev;
	if (!is_wildcard(addr)) {
		const DevInfo *d = dev_info(dev);
		id->verbs = d ? g_host.device_context(dev) : nullptr;
		id->port_num = 1;
		if (d)
			set_gids(id, d->port, d->port.gid);
	}
	s->st = St::bound;
	return 0;
}

int resolve_addr(rdma_cm_id *id, const sockaddr *src, const sockaddr *dst, int) noexcept
{
	if (!dst || (dst->sa_family != AF_INET && dst->sa_family != AF_INET6))
		return EINVAL;
	std::lock_guard<std::recursive_mutex> g(g_lock);
	SoftId *s = find(id);
	if (!s)
		return EINVAL;
	if (s->st == St::idle && src && !is_wildcard(src)) {
		if (int rc = bind_addr(id, src))
			return rc;
	}
	if (s->st != St::idle && s->st != St::bound)
		return EINVAL;
	bool mc = is_multicast(dst);
	int dst_dev = mc ? -1 : device_for(dst);
	int dev = s->st == St::bound && s->device >= 0 ? s->device
		  : mc                                 ? default_device()
							 : dst_dev;
	if (dev < 0 || (!mc && dst_dev < 0)) {
		post(s, RDMA_CM_EVENT_ADDR_ERROR, -EHOSTUNREACH);
		return 0;
	}
	const DevInfo *d = dev_info(dev);
	const DevInfo *dd = mc ? d : dev_info(dst_dev);
	if (!d || !dd) {
		post(s, RDMA_CM_EVENT_ADDR_ERROR, -ENODEV);
		return 0;
	}
	s->device = dev;
	// Source: the bound address, else (a local destination) the destination
	// address itself with an ephemeral port.
	sockaddr_storage ss;
	if (s->st == St::bound && !is_wildcard(&id->route.addr.src_addr)) {
		memcpy(&ss, &id->route.addr.src_addr, sizeof(ss));
	} else {
		memset(&ss, 0, sizeof(ss));
		memcpy(&ss, dst, sa_len(dst));
		uint16_t port = s->st == St::bound ? port_of(&id->route.addr.src_addr) : 0;
		if (!port) {
			static std::mt19937 gen{std::random_device{}()};
			port = uint16_t(32768 + gen() % (60999 - 32768 + 1));
		}
		if (mc) { // a multicast group is not a source: the wildcard is
			memset(&ss, 0, sizeof(ss));
			ss.ss_family = dst->sa_family;
		}
		set_port(reinterpret_cast<sockaddr *>(&ss), port);
	}
	memcpy(&id->route.addr.src_addr, &ss, sizeof(ss));
	memset(&id->route.addr.dst_addr, 0, sizeof(id->route.addr.dst_addr));
	memcpy(&id->route.addr.dst_addr, dst, sa_len(dst));
	set_gids(id, d->port, dd->port.gid);
	id->verbs = g_host.device_context(dev);
	id->port_num = 1;
	s->st = St::addr_resolved;
	post(s, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
	return 0;
}

int resolve_route(rdma_cm_id *id, int) noexcept
{
	std::lock_guard<std::recursive_mutex> g(g_lock);
	SoftId *s = find(id);
	if (!s || (s->st != St::addr_resolved && s->st != St::route_resolved))
		return EINVAL;
	const DevInfo *d = dev_info(s->device);
	if (!d)
		return ENODEV;
	auto *p = static_cast<ibv_sa_path_rec *>(calloc(1, sizeof(ibv_sa_path_rec)));
	if (!p)
		return ENOMEM;
	p->dgid = id->route.addr.addr.ibaddr.dgid;
	p->sgid = id->route.addr.addr.ibaddr.sgid;
	uint16_t dlid = uint16_t(((id->route.addr.addr.ibaddr.dgid.raw[15] |
				   id->route.addr.addr.ibaddr.dgid.raw[14] << 8)));
	int dst_dev = device_for(&id->route.addr.dst_addr);
	const DevInfo *dd = dst_dev >= 0 ? dev_info(dst_dev) : nullptr;
	p->dlid = htons(dd ? dd->port.lid : dlid);
	p->slid = htons(d->port.lid);
	p->raw_traffic = 0;
	p->reversible = 1;
	p->numb_path = 1;
	p->pkey = htons(0xffff);
	p->mtu_selector = 2;
	p->mtu = d->port.mtu;
	p->rate_selector = 2;
	p->rate = 3; // 10 Gb/s, what the soft port reports
	p->packet_life_time_selector = 2;
	p->hop_limit = 0;
	free(id->route.path_rec);
	id->route.path_rec = p;
	id->route.num_paths = 1;
	s->st = St::route_resolved;
	post(s, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
	return 0;
}

int listen(rdma_cm_id *id, int backlog) noexcept
{
	std::lock_guard<std::recursive_mutex> g(g_lock);
	SoftId *s = find(id);
	if (!s)
		return EINVAL;
	if (s->st == St::idle) {
		sockaddr_in any{};
		any.sin_family = AF_INET;
		if (int rc = bind_addr(id, reinterpret_cast<sockaddr *>(&any)))
			return rc;
	}
	if (s->st == St::listening)
		return 0;
	if (s->st != St::bound || s->lfd < 0)
		return EINVAL;
	if (::listen(s->lfd, backlog > 0 ? backlog : 4096) != 0)
		return errno;
	s->st = St::listening;
	return 0;
}

int connect(rdma_cm_id *id, const rdma_conn_param *param) noexcept
{
	std::lock_guard<std::recursive_mutex> g(g_lock);
	SoftId *s = find(id);
	if (!s || s->st != St::route_resolved)
		return EINVAL;
	const DevInfo *d = dev_info(s->device);
	if (!d)
		return ENODEV;
	Message m;
	uint8_t plen = param ? param->private_data_len : 0;
	if (plen && !param->private_data)
		return EINVAL;
	m.type = s->ud ? MsgType::sidr_req : MsgType::req;
	if (plen > kMaxPrivate[unsigned(m.type)])
		return EINVAL;
	m.port_space = uint16_t(id->ps);
	m.src = endpoint_of(&id->route.addr.src_addr);
	m.dst = endpoint_of(&id->route.addr.dst_addr);
	m.private_len = plen;
	if (plen)
		memcpy(m.private_data, param->private_data, plen);
	if (!s->ud) {
		if (id->qp_type != IBV_QPT_RC && id->qp_type != IBV_QPT_UC)
			return EINVAL;
		m.qp_type = uint8_t(id->qp_type);
		m.qpn = id->qp ? id->qp->qp_num : (param ? param->qp_num : 0);
		s->psn = random_psn();
		m.psn = s->psn;
		s->resp_res = param ? param->responder_resources : d->max_rd;
		s->init_depth = param ? param->initiator_depth : d->max_init_rd;
		if (s->resp_res > d->max_rd)
			s->resp_res = d->max_rd;
		if (s->init_depth > d->max_init_rd)
			s->init_depth = d->max_init_rd;
		s->retry = param ? (param->retry_count & 7) : 7;
		s->rnr = param ? (param->rnr_retry_count & 7) : 7;
		m.responder_resources = s->resp_res;
		m.initiator_depth = s->init_depth;
		m.retry_count = s->retry;
		m.rnr_retry_count = s->rnr;
		m.flow_control = param ? param->flow_control : 1;
		m.srq = (param && param->srq) || (id->qp && id->qp->srq);
		m.port = d->port;
		if (m.qpn < 2 || m.qpn > 0xffffff)
			return EINVAL;
	}
	int fd = -1;
	if (open_to_listener(id, &id->route.addr.dst_addr, fd) != 0) {
		// Nobody listens: what the kernel's CM answers (REJ "invalid
		// service ID"; for SIDR, a reply with a failure status).
		if (s->ud)
			post(s, RDMA_CM_EVENT_UNREACHABLE, -ECONNRESET);
		else
			post(s, RDMA_CM_EVENT_REJECTED, kRejInvalidServiceId);
		s->st = St::done;
		return 0;
	}
	if (!send_msg(fd, m)) {
		int e = errno ? errno : EIO;
		close(fd);
		return e;
	}
	s->cfd = fd;
	s->ckey = add_item(s->ch, fd, Item{Item::conn, s});
	s->st = St::req_sent;
	set_deadline(s, now_ns() + kTimeoutNs);
	return 0;
}

int accept(rdma_cm_id *id, const rdma_conn_param *param) noexcept
{
	std::lock_guard<std::recursive_mutex> g(g_lock);
	SoftId *s = find(id);
	if (!s || s->st != St::req_rcvd || s->cfd < 0)
		return EINVAL;
	const DevInfo *d = dev_info(s->device);
	if (!d)
		return ENODEV;
	uint8_t plen = param ? param->private_data_len : 0;
	if (plen && !param->private_data)
		return EINVAL;
	Message m;
	m.type = s->ud ? MsgType::sidr_rep : MsgType::rep;
	if (plen > kMaxPrivate[unsigned(m.type)])
		return EINVAL;
	m.private_len = plen;
	if (plen)
		memcpy(m.private_data, param->private_data, plen);
	m.qpn = id->qp ? id->qp->qp_num : (param ? param->qp_num : 0);
	if (m.qpn < 2 || m.qpn > 0xffffff)
		return EINVAL;
	m.port = d->port;
	if (s->ud) {
		m.qkey = qkey_of(id, 0);
		s->qkey = m.qkey;
		if (!send_msg(s->cfd, m))
			return errno ? errno : EIO;
		s->st = St::done;
		close_conn(s);
		return 0;
	}
	if (param && param->responder_resources != RDMA_MAX_RESP_RES)
		s->resp_res = param->responder_resources < d->max_rd ? param->responder_resources : d->max_rd;
	if (param && param->initiator_depth != RDMA_MAX_INIT_DEPTH)
		s->init_depth = param->initiator_depth < d->max_init_rd ? param->initiator_depth : d->max_init_rd;
	s->psn = random_psn();
	if (int rc = connect_qp(s))
		return rc;
	m.psn = s->psn;
	m.responder_resources = s->resp_res;
	m.initiator_depth = s->init_depth;
	m.retry_count = s->retry;
	m.rnr_retry_count = param ? (param->rnr_retry_count & 7) : 7;
	m.flow_control = param ? param->flow_control : 1;
	m.srq = (param && param->srq) || (id->qp && id->qp->srq);
	if (!send_msg(s->cfd, m)) {
		peer_gone(s);
		return 0;
	}
	s->st = St::rep_sent;
	set_deadline(s, now_ns() + kTimeoutNs);
	return 0;
}

int reject(rdma_cm_id *id, const void *private_data, uint8_t private_len) noexcept
{
	std::lock_guard<std::recursive_mutex> g(g_lock);
	SoftId *s = find(id);
	if (!s || s->st != St::req_rcvd || s->cfd < 0)
		return EINVAL;
	if (private_len && !private_data)
		return EINVAL;
	Message m;
	if (s->ud) {
		m.type = MsgType::sidr_rep;
		m.status = kSidrReject;
	} else {
		m.type = MsgType::rej;
		m.status = kRejConsumer;
	}
	if (private_len > kMaxPrivate[unsigned(m.type)])
		return EINVAL;
	m.private_len = private_len;
	if (private_len)
		memcpy(m.private_data, private_data, private_len);
	send_msg(s->cfd, m);
	s->st = St::done;
	close_conn(s);
	return 0;
}

int disconnect(rdma_cm_id *id) noexcept
{
	std::lock_guard<std::recursive_mutex> g(g_lock);
	SoftId *s = find(id);
	if (!s)
		return EINVAL;
	switch (s->st) {
	case St::connected:
	case St::rep_sent:
	case St::rep_rcvd: {
		qp_to_error(s);
		Message m;
		m.type = MsgType::dreq;
		if (!send_msg(s->cfd, m)) {
			peer_gone(s);
			return 0;
		}
		s->st = St::dreq_sent;
		set_deadline(s, now_ns() + kTimeoutNs);
		return 0;
	}
	case St::dreq_sent:
	case St::disconnected:
		qp_to_error(s);
		return 0;
	default:
		return EINVAL;
	}
}

int establish(rdma_cm_id *id) noexcept
{
	std::lock_guard<std::recursive_mutex> g(g_lock);
	SoftId *s = find(id);
	if (!s || s->st != St::rep_rcvd)
		return EINVAL;
	Message m;
	m.type = MsgType::rtu;
	if (!send_msg(s->cfd, m)) {
		peer_gone(s);
		return 0;
	}
	s->st = St::connected;
	return 0;
}

int init_qp_attr(rdma_cm_id *id, ibv_qp_attr *attr, int *mask) noexcept
{
	if (!attr || !mask)
		return EINVAL;
	std::lock_guard<std::recursive_mutex> g(g_lock);
	SoftId *s = find(id);
	if (!s || s->device < 0)
		return EINVAL;
	return qp_attr(s, attr, mask);
}

int join_multicast(rdma_cm_id *id, const sockaddr *addr, void *context, bool) noexcept
{
	if (!addr || !is_multicast(addr))
		return EINVAL;
	std::lock_guard<std::recursive_mutex> g(g_lock);
	SoftId *s = find(id);
	if (!s || s->device < 0)
		return EINVAL;
	const DevInfo *d = dev_info(s->device);
	if (!d)
		return ENODEV;
	Mcast mc{};
	memcpy(&mc.addr, addr, sa_len(addr));
	if (addr->sa_family == AF_INET) {
		static const uint8_t prefix[12] = {0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0};
		memcpy(mc.mgid.raw, prefix, 12);
		memcpy(mc.mgid.raw + 12, &reinterpret_cast<const sockaddr_in *>(addr)->sin_addr, 4);
	} else {
		memcpy(mc.mgid.raw, &reinterpret_cast<const sockaddr_in6 *>(addr)->sin6_addr, 16);
	}
	uint32_t h = 2166136261u;
	for (uint8_t b : mc.mgid.raw)
		h = (h ^ b) * 16777619u;
	mc.mlid = uint16_t(0xc001 + h % 0x3ffe);
	for (auto &m : s->mcs)
		if (!memcmp(m.mgid.raw, mc.mgid.raw, 16))
			return EADDRINUSE;
	if (id->qp) {
		if (int rc = ibv_attach_mcast(id->qp, &mc.mgid, mc.mlid))
			return rc;
	}
	try {
		s->mcs.push_back(mc);
	} catch (...) {
		if (id->qp)
			ibv_detach_mcast(id->qp, &mc.mgid, mc.mlid);
		return ENOMEM;
	}
	Event *e = make_event(s, RDMA_CM_EVENT_MULTICAST_JOIN, 0);
	if (e) {
		rdma_ud_param &u = e->ev.param.ud;
		u.private_data = context;
		u.ah_attr.dlid = mc.mlid;
		u.ah_attr.is_global = 1;
		u.ah_attr.grh.dgid = mc.mgid;
		u.ah_attr.grh.hop_limit = 1;
		u.ah_attr.port_num = 1;
		u.qp_num = 0xffffff;
		u.qkey = s->qkey ? s->qkey : RDMA_UDP_QKEY;
		push(s->ch, e);
	}
	return 0;
}

int leave_multicast(rdma_cm_id *id, const sockaddr *addr) noexcept
{
	if (!addr)
		return EINVAL;
	std::lock_guard<std::recursive_mutex> g(g_lock);
	SoftId *s = find(id);
	if (!s)
		return EINVAL;
	for (size_t i = 0; i < s->mcs.size(); i++) {
		const sockaddr *a = reinterpret_cast<const sockaddr *>(&s->mcs[i].addr);
		if (a->sa_family == addr->sa_family && !memcmp(a, addr, sa_len(addr))) {
			if (id->qp)
				ibv_detach_mcast(id->qp, &s->mcs[i].mgid, s->mcs[i].mlid);
			s->mcs.erase(s->mcs.begin() + long(i));
			return 0;
		}
	}
	return EADDRNOTAVAIL;
}

int set_option(rdma_cm_id *id, int level, int name, const void *val, size_t len) noexcept
{
	std::lock_guard<std::recursive_mutex> g(g_lock);
	SoftId *s = find(id);
	if (!s || !val)
		return EINVAL;
	if (level == RDMA_OPTION_ID && name == RDMA_OPTION_ID_ACK_TIMEOUT) {
		if (len != sizeof(uint8_t))
			return EINVAL;
		s->ack_timeout = *static_cast<const uint8_t *>(val) & 0x1f;
		return 0;
	}
	// TOS, REUSEADDR, AFONLY, IB path: accepted, without effect on a soft port.
	return 0;
}

uint64_t foreign_peer_count() noexcept { return g_foreign.load(std::memory_order_relaxed); }

} // namespace ov::usercm
