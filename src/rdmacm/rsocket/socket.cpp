// Connection set-up of stream rsockets over the public rdma_cm API, and the
// table of rsockets. Each rsocket owns an event channel; its fd is the
// rsocket's number (unique while the rsocket lives, as in rdma-core).
// Connections are made asynchronously on that channel: a blocking rsocket
// waits for each event, a non-blocking one returns EINPROGRESS/EAGAIN and
// is driven on by rpoll(), rsend() and rrecv().
#include "rsocket.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <atomic>
#include <map>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

namespace ov::rs {
namespace {

int fail(int e)
{
	errno = e;
	return -1;
}

// errno for a CM event that ends a connection attempt (rdma-core's
// ucma_complete: a rejection is ECONNREFUSED, otherwise the event status).
int event_errno(rdma_cm_event_type type, int status)
{
	if (type == RDMA_CM_EVENT_REJECTED)
		return ECONNREFUSED;
	if (status < 0)
		return -status;
	if (status > 0)
		return status;
	switch (type) {
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return EHOSTUNREACH;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return ECONNREFUSED;
	default:
		return EIO;
	}
}

// Offset of rsockets' data in the private data of an AF_IB connection
// request (the CM's IB connect header: version bytes, port, two 16-byte
// addresses).
constexpr size_t kIbConnectHdr = 36;

constexpr int kFastSlots = 1 << 16;
std::mutex g_table_mu;
std::map<int, std::shared_ptr<RSocket>> g_table; // owners
std::atomic<RSocket *> g_fast[kFastSlots];       // lock-free index

} // namespace

RSocket *lookup(int fd)
{
	if (fd < 0)
		return nullptr;
	if (fd < kFastSlots)
		return g_fast[fd].load(std::memory_order_acquire);
	std::lock_guard<std::mutex> g(g_table_mu);
	auto it = g_table.find(fd);
	return it == g_table.end() ? nullptr : it->second.get();
}

bool insert(const std::shared_ptr<RSocket> &rs)
{
	std::lock_guard<std::mutex> g(g_table_mu);
	if (!g_table.emplace(rs->fd(), rs).second)
		return false;
	if (rs->fd() < kFastSlots)
		g_fast[rs->fd()].store(rs.get(), std::memory_order_release);
	return true;
}

std::shared_ptr<RSocket> remove(int fd)
{
	std::lock_guard<std::mutex> g(g_table_mu);
	auto it = g_table.find(fd);
	if (it == g_table.end())
		return nullptr;
	auto rs = it->second;
	g_table.erase(it);
	if (fd < kFastSlots)
		g_fast[fd].store(nullptr, std::memory_order_release);
	return rs;
}

RSocket::RSocket(int domain, int type, const StreamParams &params)
	: domain_(domain), type_(type), params_(params)
{
	if (type == SOCK_DGRAM)
		dgram_ = std::make_unique<Dgram>(domain, params);
}

RSocket::~RSocket()
{
	for (Request &r : requests_) {
		rdma_reject(r.id, nullptr, 0);
		rdma_destroy_id(r.id);
	}
	if (id_ && id_->qp)
		rdma_destroy_qp(id_);
	stream_.reset();
	if (id_)
		rdma_destroy_id(id_);
	if (own_pd_)
		ibv_dealloc_pd(own_pd_);
	if (chan_)
		rdma_destroy_event_channel(chan_);
}

int RSocket::create()
{
	if (dgram_)
		return dgram_->create(fd_flags & FD_CLOEXEC);
	chan_ = rdma_create_event_channel();
	if (!chan_)
		return -1;
	if (rdma_create_id(chan_, &id_, this, RDMA_PS_TCP)) {
		int e = errno;
		rdma_destroy_event_channel(chan_);
		chan_ = nullptr;
		return fail(e);
	}
	return 0;
}

int RSocket::bind(const sockaddr *addr, socklen_t len)
{
	if (dgram_)
		return dgram_->bind(addr, len);
	std::lock_guard<std::recursive_mutex> g(mu_);
	if (!addr)
		return fail(EFAULT);
	if (len < sizeof(sockaddr_in) ||
	    (addr->sa_family == AF_INET6 && len < sizeof(sockaddr_in6)))
		return fail(EINVAL);
	if (phase_ != Phase::init)
		return fail(EINVAL);
	if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6 && addr->sa_family != AF_IB)
		return fail(EAFNOSUPPORT);
	if (rdma_bind_addr(id_, const_cast<sockaddr *>(addr)))
		return -1;
	phase_ = Phase::bound;
	return 0;
}

int RSocket::listen(int backlog)
{
	if (dgram_)
		return fail(EOPNOTSUPP); // listen(2) on a UDP socket
	std::lock_guard<std::recursive_mutex> g(mu_);
	if (phase_ == Phase::listening)
		return 0;
	if (phase_ != Phase::init && phase_ != Phase::bound)
		return fail(EINVAL);
	// The channel is only ever read after poll(2) says it is readable, but
	// readable does not mean an event is there (take_requests()): reads
	// must not block.
	int fl = fcntl(chan_->fd, F_GETFL);
	if (fl < 0 || fcntl(chan_->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	if (rdma_listen(id_, backlog))
		return -1;
	phase_ = Phase::listening;
	return 0;
}

size_t RSocket::conn_data_offset() const
{
	return (id_ && id_->route.addr.src_addr.sa_family == AF_IB) || domain_ == AF_IB ? kIbConnectHdr : 0;
}

// Reads the next CM event of our channel: its type, status and private
// data; the event is acknowledged before returning. With `nonblock`, -1
// and EAGAIN when none is queued.
int RSocket::next_event(bool nonblock, rdma_cm_event_type *type, int *status,
			std::vector<uint8_t> *pdata)
{
	for (;;) {
		pollfd p = {chan_->fd, POLLIN, 0};
		int r = ::poll(&p, 1, nonblock ? 0 : -1);
		if (r < 0)
			return -1;
		if (r == 0)
			return fail(EAGAIN);
		rdma_cm_event *ev = nullptr;
		if (rdma_get_cm_event(chan_, &ev)) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -1;
		}
		*type = ev->event;
		*status = ev->status;
		if (pdata) {
			pdata->clear();
			if (ev->param.conn.private_data && ev->param.conn.private_data_len &&
			    ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
				pdata->assign(static_cast<const uint8_t *>(ev->param.conn.private_data),
					      static_cast<const uint8_t *>(ev->param.conn.private_data) +
						      ev->param.conn.private_data_len);
		}
		rdma_ack_cm_event(ev);
		return 0;
	}
}

int RSocket::create_ep()
{
	params_.msg_send = id_->verbs->device->transport_type == IBV_TRANSPORT_IWARP;
	ibv_pd *pd = id_->pd;
	if (!pd) {
		own_pd_ = ibv_alloc_pd(id_->verbs);
		if (!own_pd_)
			return -1;
		pd = own_pd_;
	}
	auto s = std::make_unique<Stream>(params_);
	if (s->open(id_->verbs, pd))
		return -1;
	ibv_qp_init_attr attr = s->qp_init_attr();
	if (rdma_create_qp(id_, pd, &attr))
		return -1;
	if (s->attach(id_->qp, attr.cap.max_inline_data)) {
		int e = errno;
		rdma_destroy_qp(id_);
		return fail(e);
	}
	s->set_cm_hook(chan_->fd, &RSocket::cm_hook, this);
	stream_ = std::move(s);
	return 0;
}

// Reads what the listener's channel holds without sleeping and queues the
// connection requests that carry rsockets' connection data (others are
// rejected, as rdma-core's listener does). The channel's fd can be
// readable with no event for us: the software CM hands a connection's
// link back to the listener when the connection ends, and the client's
// exit (EOF on that link) or a record for the finished connection wake
// the listener's channel; reading it consumes that and yields nothing.
// So readiness of a listener is this queue, never the fd alone. Returns 0
// once the channel has nothing more, else the errno of the failed read.
// Caller holds mu_.
int RSocket::take_requests()
{
	for (;;) {
		rdma_cm_event *ev = nullptr;
		if (rdma_get_cm_event(chan_, &ev)) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : errno;
		}
		if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
			rdma_ack_cm_event(ev);
			continue;
		}
		Request r = {ev->id, ev->param.conn, {}};
		r.param.private_data = nullptr;
		size_t off = conn_data_offset();
		const auto *pd = static_cast<const uint8_t *>(ev->param.conn.private_data);
		bool valid = pd && ev->param.conn.private_data_len >= off + sizeof(ConnData);
		if (valid)
			memcpy(&r.peer, pd + off, sizeof(r.peer));
		rdma_ack_cm_event(ev);
		if (!valid || r.peer.version != kConnVersion) {
			rdma_reject(r.id, nullptr, 0);
			rdma_destroy_id(r.id);
			continue;
		}
		try {
			requests_.push_back(r);
		} catch (const std::bad_alloc &) {
			rdma_reject(r.id, nullptr, 0);
			rdma_destroy_id(r.id);
		}
	}
}

std::shared_ptr<RSocket> RSocket::accept()
{
	if (dgram_) {
		errno = EOPNOTSUPP; // accept(2) on a UDP socket
		return nullptr;
	}
	std::unique_lock<std::recursive_mutex> g(mu_);
	if (phase_ != Phase::listening) {
		errno = EINVAL;
		return nullptr;
	}
	// Sleeps without the lock, so that rpoll() on the listener from
	// another thread is not held up by a blocking accept.
	for (;;) {
		int err = take_requests();
		if (!requests_.empty())
			break;
		if (err) {
			errno = err;
			return nullptr;
		}
		if (fs_flags & O_NONBLOCK) {
			errno = EAGAIN;
			return nullptr;
		}
		g.unlock();
		pollfd p = {chan_->fd, POLLIN, 0};
		int r = ::poll(&p, 1, -1);
		if (r < 0)
			return nullptr;
		g.lock();
	}
	Request req = requests_.front();
	requests_.pop_front();
	g.unlock();
	rdma_cm_id *cid = req.id;

	auto child = std::make_shared<RSocket>(domain_, type_, params_);
	child->fd_flags = fd_flags;
	child->fs_flags = fs_flags;
	child->so_opts_ = so_opts_;
	child->tcp_opts_ = tcp_opts_;
	child->ipv6_opts_ = ipv6_opts_;
	child->chan_ = rdma_create_event_channel();
	if (!child->chan_ || rdma_migrate_id(cid, child->chan_)) {
		int e = errno;
		rdma_reject(cid, nullptr, 0);
		rdma_destroy_id(cid);
		errno = e;
		return nullptr;
	}
	child->id_ = cid;
	cid->context = child.get();
	if (child->create_ep() || child->stream_->start(req.peer)) {
		int e = errno;
		rdma_reject(cid, nullptr, 0);
		errno = e;
		return nullptr; // child's destructor releases the id
	}
	ConnData mine = child->stream_->local_conn_data();
	rdma_conn_param param = req.param;
	param.private_data = &mine;
	param.private_data_len = sizeof(mine);
	param.srq = 0;
	param.qp_num = 0;
	if (rdma_accept(cid, &param)) {
		int e = errno;
		rdma_reject(cid, nullptr, 0);
		errno = e;
		return nullptr;
	}
	child->phase_ = Phase::accepting;
	child->was_connected_ = true;
	return child;
}

void RSocket::fail_connect(int e)
{
	phase_ = Phase::connect_error;
	err_ = e;
	errno = e;
}

int RSocket::connect(const sockaddr *addr, socklen_t len)
{
	if (dgram_)
		return dgram_->connect(addr, len);
	std::lock_guard<std::recursive_mutex> g(mu_);
	if (!addr)
		return fail(EFAULT);
	if (len < sizeof(sockaddr_in) || len > sizeof(dst_) ||
	    (addr->sa_family == AF_INET6 && len < sizeof(sockaddr_in6)))
		return fail(EINVAL);
	switch (phase_) {
	case Phase::init:
	case Phase::bound:
		memset(&dst_, 0, sizeof(dst_));
		memcpy(&dst_, addr, len);
		retries_ = 0;
		break;
	case Phase::listening:
		return fail(EINVAL);
	case Phase::connected:
		return fail(EISCONN);
	case Phase::connect_error:
		return fail(ENOTCONN);
	default:
		return fail(EALREADY);
	}
	return progress(fs_flags & O_NONBLOCK);
}

// rdma-core's rs_do_connect as a loop over our channel's events.
int RSocket::progress(bool nonblock)
{
	std::lock_guard<std::recursive_mutex> g(mu_);
	for (;;) {
		rdma_cm_event_type type;
		int status = 0;
		std::vector<uint8_t> pdata;
		switch (phase_) {
		case Phase::init:
		case Phase::bound: {
			int to = 1000 << std::min(retries_++, 8);
			if (rdma_resolve_addr(id_, nullptr, reinterpret_cast<sockaddr *>(&dst_), to)) {
				fail_connect(errno);
				return -1;
			}
			phase_ = Phase::resolving_addr;
			break;
		}
		case Phase::resolving_addr:
			if (next_event(nonblock, &type, &status, nullptr))
				goto wait;
			if (type == RDMA_CM_EVENT_ADDR_RESOLVED) {
				retries_ = 0;
				if (!route_.empty()) {
					if (!rdma_set_option(id_, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH,
							     route_.data(), route_.size())) {
						phase_ = Phase::resolving_route;
						break;
					}
				}
				if (rdma_resolve_route(id_, 1000 << std::min(retries_++, 8))) {
					fail_connect(errno);
					return -1;
				}
				phase_ = Phase::resolving_route;
			} else if (type == RDMA_CM_EVENT_ADDR_ERROR && status == -ETIMEDOUT &&
				   retries_ <= kConnRetries) {
				phase_ = Phase::init;
			} else {
				fail_connect(event_errno(type, status));
				return -1;
			}
			break;
		case Phase::resolving_route:
			if (next_event(nonblock, &type, &status, nullptr))
				goto wait;
			if (type == RDMA_CM_EVENT_ROUTE_RESOLVED) {
				if (create_ep()) {
					fail_connect(errno);
					return -1;
				}
				size_t off = conn_data_offset();
				uint8_t buf[kIbConnectHdr + sizeof(ConnData)] = {};
				ConnData mine = stream_->local_conn_data();
				memcpy(buf + off, &mine, sizeof(mine));
				rdma_conn_param param = {};
				param.private_data = buf;
				param.private_data_len = static_cast<uint8_t>(off + sizeof(mine));
				param.flow_control = 1;
				param.retry_count = 7;
				param.rnr_retry_count = 7;
				if (stream_->msg_send())
					param.initiator_depth = 1; // iWARP reads during set-up
				retries_ = 0;
				if (rdma_connect(id_, &param)) {
					fail_connect(errno);
					return -1;
				}
				phase_ = Phase::connecting;
			} else if (type == RDMA_CM_EVENT_ROUTE_ERROR && status == -ETIMEDOUT &&
				   retries_ <= kConnRetries) {
				if (rdma_resolve_route(id_, 1000 << std::min(retries_++, 8))) {
					fail_connect(errno);
					return -1;
				}
			} else {
				fail_connect(event_errno(type, status));
				return -1;
			}
			break;
		case Phase::connecting:
			if (next_event(nonblock, &type, &status, &pdata))
				goto wait;
			if (type == RDMA_CM_EVENT_ESTABLISHED) {
				ConnData peer = {};
				if (pdata.size() < sizeof(ConnData)) {
					fail_connect(EPROTO);
					return -1;
				}
				memcpy(&peer, pdata.data(), sizeof(peer));
				if (stream_->start(peer)) {
					fail_connect(errno);
					return -1;
				}
				phase_ = Phase::connected;
				was_connected_ = true;
				return 0;
			}
			if (type == RDMA_CM_EVENT_CONNECT_RESPONSE)
				break; // not for an id with a QP; ignore
			fail_connect(event_errno(type, status));
			return -1;
		case Phase::accepting:
			if (next_event(nonblock, &type, &status, nullptr))
				goto wait;
			if (type == RDMA_CM_EVENT_ESTABLISHED) {
				phase_ = Phase::connected;
				return 0;
			}
			if (type == RDMA_CM_EVENT_DISCONNECTED || type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
				phase_ = Phase::connected;
				stream_->cm_disconnected();
				return 0;
			}
			fail_connect(event_errno(type, status));
			return -1;
		case Phase::connected:
			return 0;
		case Phase::connect_error:
			return fail(ENOTCONN);
		case Phase::listening:
			return fail(EINVAL);
		}
		continue;
	wait:
		if (errno == EAGAIN)
			return fail(EINPROGRESS);
		return -1;
	}
}

Stream *RSocket::ready_stream(bool nonblock)
{
	Phase ph = phase_;
	if (ph == Phase::connected)
		return stream_.get();
	switch (ph) {
	case Phase::resolving_addr:
	case Phase::resolving_route:
	case Phase::connecting:
	case Phase::accepting:
		if (progress(nonblock)) {
			if (errno == EINPROGRESS)
				errno = EAGAIN;
			return nullptr;
		}
		return stream_.get();
	default:
		errno = ENOTCONN;
		return nullptr;
	}
}

// The CM channel of a connected rsocket became readable: the connection
// may be gone (the peer died, the device went away).
void RSocket::drain_cm_events()
{
	std::unique_lock<std::mutex> g(cm_mu_, std::try_to_lock);
	if (!g.owns_lock())
		return;
	for (;;) {
		rdma_cm_event_type type;
		int status;
		if (next_event(true, &type, &status, nullptr))
			return;
		if (type == RDMA_CM_EVENT_DISCONNECTED || type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
			if (stream_)
				stream_->cm_disconnected();
		}
	}
}

void RSocket::cm_hook(void *self)
{
	static_cast<RSocket *>(self)->drain_cm_events();
}

int RSocket::shutdown(int how)
{
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return fail(EINVAL);
	if (dgram_)
		return 0; // rdma-core 44: nothing to shut down on a datagram rsocket
	if (!was_connected_ || !stream_)
		return fail(ENOTCONN);
	if (phase_ == Phase::accepting) {
		if (progress(false))
			return -1;
	}
	return stream_->shutdown(how);
}

void RSocket::close()
{
	if (dgram_) {
		dgram_->close();
		return;
	}
	if (stream_ && (stream_->state() & kStateConnected)) {
		if (phase_ == Phase::accepting)
			progress(false);
		stream_->shutdown(SHUT_RDWR);
	}
	if (was_connected_ && id_)
		rdma_disconnect(id_);
}

short RSocket::poll_events(short events)
{
	if (dgram_)
		return dgram_->poll_events(events);
	Phase ph = phase_;
	switch (ph) {
	case Phase::connected:
		return stream_->poll_events(events);
	case Phase::listening: {
		std::lock_guard<std::recursive_mutex> g(mu_);
		take_requests();
		return requests_.empty() ? 0 : static_cast<short>(events & POLLIN);
	}
	case Phase::resolving_addr:
	case Phase::resolving_route:
	case Phase::connecting:
	case Phase::accepting:
		if (!progress(true))
			return stream_->poll_events(events);
		if (errno == EINPROGRESS)
			return 0;
		[[fallthrough]];
	case Phase::connect_error:
		return static_cast<short>((events & (POLLIN | POLLOUT)) | POLLERR);
	default:
		return 0;
	}
}

short RSocket::arm(short events, int fds[2], int *nfds)
{
	if (dgram_)
		return dgram_->arm(events, fds, nfds);
	*nfds = 0;
	if (phase_ == Phase::connected) {
		stream_->arm_for_poll();
		short rev = static_cast<short>(stream_->poll_events(events) & (events | POLLERR | POLLHUP));
		if (rev)
			return rev;
		fds[(*nfds)++] = stream_->channel_fd();
		fds[(*nfds)++] = chan_->fd;
		return 0;
	}
	short rev = poll_events(events);
	if (rev)
		return rev;
	if (phase_ == Phase::connected) {
		fds[(*nfds)++] = stream_->channel_fd();
		fds[(*nfds)++] = chan_->fd;
	} else if (phase_ != Phase::init && phase_ != Phase::bound) {
		fds[(*nfds)++] = chan_->fd;
	}
	return 0;
}

void RSocket::after_poll(int fd, short revents)
{
	if (dgram_) {
		dgram_->after_poll(fd, revents);
		return;
	}
	if (!revents)
		return;
	if (stream_ && fd == stream_->channel_fd())
		stream_->take_cq_event();
	else if (phase_ == Phase::connected && fd == chan_->fd)
		drain_cm_events();
}

static int copy_addr(const sockaddr *src, sockaddr *dst, socklen_t *len)
{
	if (!dst || !len)
		return fail(EFAULT);
	socklen_t full = src->sa_family == AF_INET6 ? sizeof(sockaddr_in6)
		       : src->sa_family == AF_INET  ? sizeof(sockaddr_in)
						    : sizeof(sockaddr_storage);
	memcpy(dst, src, std::min(*len, full));
	*len = full;
	return 0;
}

int RSocket::getpeername(sockaddr *addr, socklen_t *len)
{
	if (dgram_)
		return dgram_->getpeername(addr, len);
	if (!was_connected_ && phase_ < Phase::connecting)
		return fail(ENOTCONN);
	return copy_addr(rdma_get_peer_addr(id_), addr, len);
}

int RSocket::getsockname(sockaddr *addr, socklen_t *len)
{
	if (dgram_)
		return dgram_->getsockname(addr, len);
	sockaddr *src = rdma_get_local_addr(id_);
	if (src->sa_family == 0) {
		// Not bound yet: an unspecified address of our family.
		sockaddr_storage any = {};
		any.ss_family = static_cast<sa_family_t>(domain_ == AF_IB ? AF_INET6 : domain_);
		return copy_addr(reinterpret_cast<sockaddr *>(&any), addr, len);
	}
	return copy_addr(src, addr, len);
}

int RSocket::setsockopt(int level, int name, const void *val, socklen_t len)
{
	if (dgram_)
		return dgram_->setsockopt(level, name, val, len);
	std::lock_guard<std::recursive_mutex> g(mu_);
	if (!val)
		return fail(EFAULT);
	auto as_int = [&](int *out) {
		if (len < sizeof(int))
			return fail(EINVAL);
		memcpy(out, val, sizeof(int));
		return 0;
	};
	uint64_t *opts = nullptr;
	bool on = false;
	int v = 0;
	int ret = -1;
	errno = ENOTSUP;
	switch (level) {
	case SOL_SOCKET:
		opts = &so_opts_;
		switch (name) {
		case SO_REUSEADDR:
			if (as_int(&v))
				return -1;
			ret = rdma_set_option(id_, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v, sizeof(v));
			if (ret && (errno == ENOSYS || (phase_ != Phase::init && id_->verbs &&
							 id_->verbs->device->transport_type == IBV_TRANSPORT_IB)))
				ret = 0;
			on = v;
			break;
		case SO_RCVBUF:
			if (as_int(&v))
				return -1;
			if (!stream_ && v > 0)
				params_.rbuf_size = static_cast<uint32_t>(std::min(v, 1 << 29)) << 1;
			ret = 0;
			break;
		case SO_SNDBUF:
			if (as_int(&v))
				return -1;
			if (!stream_ && v > 0)
				params_.sbuf_size = static_cast<uint32_t>(std::min(v, 1 << 29)) << 1;
			if (params_.sbuf_size < kSendLowWater)
				params_.sbuf_size = kSendLowWater << 1;
			ret = 0;
			break;
		case SO_LINGER:
			if (len < sizeof(linger))
				return fail(EINVAL);
			// Stored inverted, as rdma-core does: the default (0) is on.
			on = !static_cast<const linger *>(val)->l_onoff;
			ret = 0;
			break;
		case SO_KEEPALIVE:
			if (as_int(&v))
				return -1;
			// The connection is reliable; rdma-core's keep-alive only
			// sends empty writes. Recorded, nothing is sent.
			if (v && !keepalive_time_)
				keepalive_time_ = 7200;
			on = v;
			ret = 0;
			break;
		case SO_OOBINLINE:
			if (as_int(&v))
				return -1;
			on = v;
			ret = 0;
			break;
		default:
			break;
		}
		break;
	case IPPROTO_IP:
		if (name == IP_TOS) {
			if (as_int(&v))
				return -1;
			uint8_t tos = static_cast<uint8_t>(v);
			ret = rdma_set_option(id_, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos));
			if (!ret)
				ip_tos_ = v;
		}
		break;
	case IPPROTO_TCP:
		opts = &tcp_opts_;
		switch (name) {
		case TCP_KEEPCNT:
		case TCP_KEEPINTVL:
		case TCP_MAXSEG:
		case TCP_CONGESTION:
			ret = 0;
			break;
		case TCP_KEEPIDLE:
			if (as_int(&v))
				return -1;
			if (v <= 0)
				return fail(EINVAL);
			keepalive_time_ = static_cast<unsigned>(v);
			ret = 0;
			break;
		case TCP_NODELAY:
			if (as_int(&v))
				return -1;
			on = v;
			ret = 0;
			break;
		default:
			break;
		}
		break;
	case IPPROTO_IPV6:
		opts = &ipv6_opts_;
		if (name == IPV6_V6ONLY) {
			if (as_int(&v))
				return -1;
			ret = rdma_set_option(id_, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v, sizeof(v));
			on = v;
		}
		break;
	case SOL_RDMA:
		if (phase_ >= Phase::resolving_addr && phase_ != Phase::listening)
			return fail(EINVAL);
		if (stream_)
			return fail(EINVAL);
		switch (name) {
		case RDMA_SQSIZE:
		case RDMA_RQSIZE:
		case RDMA_INLINE: {
			if (as_int(&v))
				return -1;
			uint16_t n = static_cast<uint16_t>(std::min<uint32_t>(static_cast<uint32_t>(v), kQueueMax));
			(name == RDMA_SQSIZE ? params_.sq_size : name == RDMA_RQSIZE ? params_.rq_size : params_.sq_inline) = n;
			ret = 0;
			break;
		}
		case RDMA_IOMAPSIZE:
			if (as_int(&v))
				return -1;
			if (v < 0)
				return fail(EINVAL);
			params_.iomap_size = static_cast<uint16_t>(value_of(scale_of(std::min(v, 0xffff)) & 0xff));
			ret = 0;
			break;
		case RDMA_ROUTE:
			if (len == 0)
				return fail(EINVAL);
			route_.assign(static_cast<const uint8_t *>(val), static_cast<const uint8_t *>(val) + len);
			ret = 0;
			break;
		default:
			break;
		}
		break;
	default:
		break;
	}
	if (!ret && opts && name < 64) {
		if (on)
			*opts |= 1ull << name;
		else
			*opts &= ~(1ull << name);
	}
	return ret;
}

int RSocket::getsockopt(int level, int name, void *val, socklen_t *len)
{
	if (dgram_)
		return dgram_->getsockopt(level, name, val, len);
	if (!val || !len)
		return fail(EFAULT);
	auto put_int = [&](int v) { return put_int_option(val, len, v); };
	switch (level) {
	case SOL_SOCKET:
		switch (name) {
		case SO_REUSEADDR:
		case SO_KEEPALIVE:
		case SO_OOBINLINE:
			return put_int(!!(so_opts_ & (1ull << name)));
		case SO_RCVBUF:
			return put_int(static_cast<int>(stream_ ? stream_->params().rbuf_size : params_.rbuf_size));
		case SO_SNDBUF:
			return put_int(static_cast<int>(stream_ ? stream_->params().sbuf_size : params_.sbuf_size));
		case SO_LINGER: {
			if (*len < sizeof(linger))
				return fail(EINVAL);
			linger l = {!(so_opts_ & (1ull << SO_LINGER)), 0};
			memcpy(val, &l, sizeof(l));
			*len = sizeof(l);
			return 0;
		}
		case SO_ERROR: {
			int e = err_;
			if (!e && stream_)
				e = stream_->take_error();
			err_ = 0;
			return put_int(e);
		}
		case SO_TYPE:
			return put_int(type_);
		case SO_BROADCAST:
			return 0;
		default:
			return fail(ENOTSUP);
		}
	case IPPROTO_IP:
		if (name == IP_TOS)
			return put_int(ip_tos_);
		return fail(ENOTSUP);
	case IPPROTO_TCP:
		switch (name) {
		case TCP_CONGESTION:
		case TCP_KEEPCNT:
		case TCP_KEEPINTVL:
			return put_int(1);
		case TCP_KEEPIDLE:
			return put_int(static_cast<int>(keepalive_time_));
		case TCP_NODELAY:
			return put_int(!!(tcp_opts_ & (1ull << TCP_NODELAY)));
		case TCP_MAXSEG:
			return put_int(id_ && id_->route.num_paths && id_->route.path_rec
					       ? 1 << (7 + id_->route.path_rec->mtu)
					       : 2048);
		case TCP_INFO: {
			tcp_info info = {};
			info.tcpi_state = (phase_ == Phase::connected && stream_ &&
					   (stream_->state() & kStateConnected))
						  ? TCP_ESTABLISHED
						  : TCP_CLOSE;
			info.tcpi_snd_cwnd = stream_ ? stream_->params().sq_size : params_.sq_size;
			socklen_t n = std::min<socklen_t>(*len, sizeof(info));
			memcpy(val, &info, n);
			*len = n;
			return 0;
		}
		default:
			return fail(ENOTSUP);
		}
	case IPPROTO_IPV6:
		if (name == IPV6_V6ONLY)
			return put_int(!!(ipv6_opts_ & (1ull << IPV6_V6ONLY)));
		return fail(ENOTSUP);
	case SOL_RDMA: {
		const StreamParams &p = stream_ ? stream_->params() : params_;
		switch (name) {
		case RDMA_SQSIZE:
			return put_int(p.sq_size);
		case RDMA_RQSIZE:
			return put_int(p.rq_size);
		case RDMA_INLINE:
			return put_int(p.sq_inline);
		case RDMA_IOMAPSIZE:
			return put_int(p.iomap_size);
		case RDMA_ROUTE: {
			if (!route_.empty()) {
				if (*len < route_.size())
					return fail(EINVAL);
				memcpy(val, route_.data(), route_.size());
				*len = static_cast<socklen_t>(route_.size());
				return 0;
			}
			if (*len < sizeof(ibv_path_data))
				return fail(EINVAL);
			socklen_t used = 0;
			uint8_t *out = static_cast<uint8_t *>(val);
			for (int i = 0; id_ && i < id_->route.num_paths &&
					used + sizeof(ibv_path_data) <= *len; i++) {
				const ibv_sa_path_rec &sa = id_->route.path_rec[i];
				ibv_path_data pd = {};
				pd.path.dgid = sa.dgid;
				pd.path.sgid = sa.sgid;
				pd.path.dlid = sa.dlid;
				pd.path.slid = sa.slid;
				uint32_t fl_hop = (be32toh(sa.flow_label) << 8) | sa.hop_limit;
				pd.path.flowlabel_hoplimit = htobe32(fl_hop);
				pd.path.tclass = sa.traffic_class;
				pd.path.reversible_numpath = static_cast<uint8_t>(sa.reversible << 7 | 1);
				pd.path.pkey = sa.pkey;
				pd.path.qosclass_sl = htobe16(sa.sl);
				// selector "exactly" (2) in the two top bits
				pd.path.mtu = static_cast<uint8_t>(sa.mtu | 2 << 6);
				pd.path.rate = static_cast<uint8_t>(sa.rate | 2 << 6);
				pd.path.packetlifetime = static_cast<uint8_t>(sa.packet_life_time | 2 << 6);
				pd.flags = static_cast<uint32_t>(sa.preference);
				memcpy(out + used, &pd, sizeof(pd));
				used += sizeof(pd);
			}
			*len = used;
			return 0;
		}
		default:
			return fail(ENOTSUP);
		}
	}
	default:
		return fail(ENOTSUP);
	}
}

} // namespace ov::rs
