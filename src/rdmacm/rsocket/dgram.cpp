// Datagram rsockets (dgram.h; the protocol is wire.h's "Datagram rsockets").
// The sizes, the header bytes and the UDP exchange follow rdma-core 44 so
// that a Debian peer and we understand each other; the code is ours.
//
// Socket calls on the UDP socket go straight to the kernel (syscall(2)),
// not through the libc symbols: under Debian's librspreload.so those are
// the preload library's, whose socket() would turn our own helper sockets
// into rsockets.
#include "dgram.h"

#include <infiniband/verbs.h>
#include <rdma/rsocket.h>

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ov::rs {
namespace {

constexpr uint64_t kRecvFlag = 1ull << 63; // wr_id of receives (slot in the low bits)
constexpr uint32_t kRecvSlot = kGrhBytes + kDgramSlot;
constexpr int kResolveMs = 2000; // rdma-core's address handle resolution timeouts

int fail(int e)
{
	errno = e;
	return -1;
}

int sys_socket(int domain, int type, int proto)
{
	return static_cast<int>(syscall(SYS_socket, domain, type, proto));
}
int sys_bind(int fd, const sockaddr *a, socklen_t l)
{
	return static_cast<int>(syscall(SYS_bind, fd, a, l));
}
int sys_connect(int fd, const sockaddr *a, socklen_t l)
{
	return static_cast<int>(syscall(SYS_connect, fd, a, l));
}
int sys_getsockname(int fd, sockaddr *a, socklen_t *l)
{
	return static_cast<int>(syscall(SYS_getsockname, fd, a, l));
}
int sys_getpeername(int fd, sockaddr *a, socklen_t *l)
{
	return static_cast<int>(syscall(SYS_getpeername, fd, a, l));
}
ssize_t sys_sendmsg(int fd, const msghdr *m, int flags)
{
	return syscall(SYS_sendmsg, fd, m, flags);
}
ssize_t sys_recvfrom(int fd, void *buf, size_t n, int flags, sockaddr *a, socklen_t *l)
{
	return syscall(SYS_recvfrom, fd, buf, n, flags, a, l);
}
int sys_setsockopt(int fd, int level, int name, const void *v, socklen_t l)
{
	return static_cast<int>(syscall(SYS_setsockopt, fd, level, name, v, l));
}
int sys_getsockopt(int fd, int level, int name, void *v, socklen_t *l)
{
	return static_cast<int>(syscall(SYS_getsockopt, fd, level, name, v, l));
}

socklen_t addr_len(const sockaddr *a)
{
	return a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

uint16_t port_of(const sockaddr_storage &a)
{
	return a.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6 &>(a).sin6_port
				       : reinterpret_cast<const sockaddr_in &>(a).sin_port;
}

void set_port(sockaddr_storage &a, uint16_t port)
{
	if (a.ss_family == AF_INET6)
		reinterpret_cast<sockaddr_in6 &>(a).sin6_port = port;
	else
		reinterpret_cast<sockaddr_in &>(a).sin_port = port;
}

// Same family, port and address (the destination table's key).
bool same_addr(const sockaddr_storage &a, const sockaddr *b)
{
	if (a.ss_family != b->sa_family)
		return false;
	if (b->sa_family == AF_INET) {
		auto &x = reinterpret_cast<const sockaddr_in &>(a);
		auto *y = reinterpret_cast<const sockaddr_in *>(b);
		return x.sin_port == y->sin_port && x.sin_addr.s_addr == y->sin_addr.s_addr;
	}
	auto &x = reinterpret_cast<const sockaddr_in6 &>(a);
	auto *y = reinterpret_cast<const sockaddr_in6 *>(b);
	return x.sin6_port == y->sin6_port && !memcmp(&x.sin6_addr, &y->sin6_addr, 16);
}

// rdma-core's rs_any_addr: the wildcard or the loopback address, which
// need the route toward the destination to name the source.
bool any_or_loopback(const sockaddr_storage &a)
{
	if (a.ss_family == AF_INET) {
		uint32_t s = ntohl(reinterpret_cast<const sockaddr_in &>(a).sin_addr.s_addr);
		return s == INADDR_ANY || s == INADDR_LOOPBACK;
	}
	auto &x = reinterpret_cast<const sockaddr_in6 &>(a).sin6_addr;
	return !memcmp(&x, &in6addr_any, 16) || !memcmp(&x, &in6addr_loopback, 16);
}

void format_hdr(DsHeader &h, const sockaddr_storage &a)
{
	memset(&h, 0, sizeof(h));
	if (a.ss_family == AF_INET) {
		auto &s = reinterpret_cast<const sockaddr_in &>(a);
		h.version = 4;
		h.length = kDsHdrV4;
		h.port = s.sin_port;
		h.addr.ipv4 = s.sin_addr.s_addr;
	} else {
		auto &s = reinterpret_cast<const sockaddr_in6 &>(a);
		h.version = 6;
		h.length = kDsHdrV6;
		h.port = s.sin6_port;
		h.addr.ipv6.flowinfo = s.sin6_flowinfo;
		memcpy(h.addr.ipv6.addr, &s.sin6_addr, 16);
	}
}

// The sender's address as rdma-core's receivers report it (rdma-core's
// ds_set_src): family, port, address, and for IPv6 the flow information.
sockaddr_storage addr_of(const DsHeader &h)
{
	sockaddr_storage a = {};
	if (h.version == 4) {
		auto &s = reinterpret_cast<sockaddr_in &>(a);
		s.sin_family = AF_INET;
		s.sin_port = h.port;
		s.sin_addr.s_addr = h.addr.ipv4;
	} else {
		auto &s = reinterpret_cast<sockaddr_in6 &>(a);
		s.sin6_family = AF_INET6;
		s.sin6_port = h.port;
		s.sin6_flowinfo = h.addr.ipv6.flowinfo;
		memcpy(&s.sin6_addr, h.addr.ipv6.addr, 16);
	}
	return a;
}

void *alloc_pages(size_t len, size_t *alloc)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t pg = page > 0 ? static_cast<size_t>(page) : 4096;
	size_t sz = std::max<size_t>((len + pg - 1) / pg * pg, pg);
	void *p = nullptr;
	if (posix_memalign(&p, pg, sz))
		return nullptr;
	memset(p, 0, sz);
	*alloc = sz;
	return p;
}

// The smallest max_qp_wr of the RDMA devices (rdma-core's
// ucma_max_qpsize(NULL)); kQueueMax when none answers.
uint32_t max_qp_wr()
{
	uint32_t best = kQueueMax;
	int n = 0;
	ibv_context **ctxs = rdma_get_devices(&n);
	if (!ctxs)
		return best;
	for (int i = 0; i < n && ctxs[i]; i++) {
		ibv_device_attr a = {};
		if (!ibv_query_device(ctxs[i], &a) && a.max_qp_wr > 0)
			best = std::min<uint32_t>(best, static_cast<uint32_t>(a.max_qp_wr));
	}
	rdma_free_devices(ctxs);
	return best;
}

uint64_t now_ms()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000u + static_cast<uint64_t>(ts.tv_nsec) / 1000000u;
}

int copy_addr_out(const sockaddr_storage &a, sockaddr *dst, socklen_t *len)
{
	socklen_t full = addr_len(reinterpret_cast<const sockaddr *>(&a));
	memcpy(dst, &a, std::min(*len, full));
	*len = full;
	return 0;
}

} // namespace

Dgram::~Dgram()
{
	for (auto &d : dests_)
		if (d->ah)
			ibv_destroy_ah(d->ah);
	for (auto &q : qps_)
		free_qp(q.get());
	if (epfd_ >= 0)
		::close(epfd_);
	if (udp_ >= 0)
		::close(udp_);
	free(sbuf_);
}

int Dgram::create(bool cloexec)
{
	int fl = cloexec ? SOCK_CLOEXEC : 0;
	udp_ = sys_socket(domain_, SOCK_DGRAM | fl, 0);
	if (udp_ < 0)
		return -1;
	epfd_ = epoll_create1(EPOLL_CLOEXEC);
	return epfd_ < 0 ? -1 : 0;
}

size_t Dgram::max_payload() const
{
	return kDgramSlot - (domain_ == AF_INET6 ? kUdpHdrV6 : kUdpHdrV4);
}

int Dgram::init_ep()
{
	if (ready_)
		return 0;
	// rdma-core's ds_set_qp_size: the queues within the devices' limit,
	// then each queue as deep as its buffer holds 2048-byte slots (or the
	// buffer as large as the queue needs). At least one slot each.
	uint32_t maxq = std::min<uint32_t>(max_qp_wr(), kQueueMax);
	uint32_t sq = std::min<uint32_t>(p_.sq_size, maxq), rq = std::min<uint32_t>(p_.rq_size, maxq);
	if (rq > p_.rbuf_size / kDgramSlot)
		rq = p_.rbuf_size / kDgramSlot;
	if (sq > p_.sbuf_size / kDgramSlot)
		sq = p_.sbuf_size / kDgramSlot;
	sq_size_ = std::max<uint32_t>(sq, 1);
	rq_size_ = std::max<uint32_t>(rq, 1);
	p_.sq_size = static_cast<uint16_t>(sq_size_);
	p_.rq_size = static_cast<uint16_t>(rq_size_);
	p_.sbuf_size = sq_size_ * kDgramSlot;
	p_.rbuf_size = rq_size_ * kDgramSlot;
	sbuf_ = static_cast<uint8_t *>(alloc_pages(p_.sbuf_size, &sbuf_alloc_));
	if (!sbuf_)
		return fail(ENOMEM);
	free_slots_.reserve(sq_size_);
	for (uint32_t i = sq_size_; i-- > 0;)
		free_slots_.push_back(i);
	epoll_event ev = {};
	ev.events = EPOLLIN;
	ev.data.ptr = nullptr; // the UDP socket
	if (epoll_ctl(epfd_, EPOLL_CTL_ADD, udp_, &ev))
		return -1;
	ready_ = true;
	return 0;
}

int Dgram::bind(const sockaddr *addr, socklen_t len)
{
	std::lock_guard<std::mutex> g(mu_);
	if (init_ep())
		return -1;
	return sys_bind(udp_, addr, len);
}

int Dgram::connect(const sockaddr *addr, socklen_t len)
{
	std::lock_guard<std::mutex> g(mu_);
	if (init_ep())
		return -1;
	if (sys_connect(udp_, addr, len))
		return -1;
	if (addr->sa_family == AF_UNSPEC) {
		conn_ = nullptr;
		return 0;
	}
	Dest *d = nullptr;
	if (get_dest(addr, &d))
		return -1;
	conn_ = d;
	return 0;
}

// The local address our messages to `dst` leave from: the UDP socket's
// (bound now to an ephemeral port if it has none: our QP is bound to the
// same port and the header carries it), or, when that is the wildcard or
// loopback, the route's source toward `dst` with our port (rdma-core's
// ds_get_src_addr).
int Dgram::src_addr_for(const sockaddr *dst, sockaddr_storage *src)
{
	socklen_t l = sizeof(*src);
	if (sys_getsockname(udp_, reinterpret_cast<sockaddr *>(src), &l))
		return -1;
	if (!port_of(*src)) {
		sockaddr_storage any = {};
		any.ss_family = static_cast<sa_family_t>(domain_);
		if (sys_bind(udp_, reinterpret_cast<sockaddr *>(&any), addr_len(reinterpret_cast<sockaddr *>(&any))) &&
		    errno != EINVAL)
			return -1;
		l = sizeof(*src);
		if (sys_getsockname(udp_, reinterpret_cast<sockaddr *>(src), &l))
			return -1;
	}
	if (!any_or_loopback(*src))
		return 0;
	uint16_t port = port_of(*src);
	int probe = sys_socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (probe < 0)
		return -1;
	int ret = sys_connect(probe, dst, addr_len(dst));
	if (!ret) {
		l = sizeof(*src);
		ret = sys_getsockname(probe, reinterpret_cast<sockaddr *>(src), &l);
		set_port(*src, port);
	}
	int e = errno;
	::close(probe);
	errno = e;
	return ret;
}

int Dgram::get_dest(const sockaddr *addr, Dest **out)
{
	for (auto &d : dests_) {
		if (same_addr(d->addr, addr)) {
			*out = d.get();
			return 0;
		}
	}
	sockaddr_storage src;
	if (src_addr_for(addr, &src))
		return -1;
	Qp *qp = nullptr;
	if (get_qp(src, &qp))
		return -1;
	auto d = std::make_unique<Dest>();
	memcpy(&d->addr, addr, addr_len(addr));
	d->qp = qp;
	*out = d.get();
	dests_.push_back(std::move(d));
	return 0;
}

int Dgram::get_qp(const sockaddr_storage &src, Qp **out)
{
	for (auto &q : qps_) {
		if (same_addr(q->local, reinterpret_cast<const sockaddr *>(&src))) {
			*out = q.get();
			return 0;
		}
	}
	return create_qp(src, out);
}

int Dgram::create_qp(const sockaddr_storage &src, Qp **out)
{
	auto holder = std::make_unique<Qp>();
	Qp *q = holder.get();
	auto bail = [&]() {
		int e = errno;
		free_qp(q);
		errno = e;
		return -1;
	};
	q->local = src;
	format_hdr(q->hdr, src);
	if (rdma_create_id(nullptr, &q->id, this, RDMA_PS_UDP))
		return bail();
	sockaddr_storage bind_to = src;
	if (rdma_bind_addr(q->id, reinterpret_cast<sockaddr *>(&bind_to)))
		return bail();
	if (!q->id->verbs || !q->id->pd) {
		errno = ENODEV;
		return bail();
	}
	q->rbuf = static_cast<uint8_t *>(alloc_pages(static_cast<size_t>(rq_size_) * kRecvSlot, &q->rbuf_alloc));
	if (!q->rbuf) {
		errno = ENOMEM;
		return bail();
	}
	q->chan = ibv_create_comp_channel(q->id->verbs);
	if (!q->chan)
		return bail();
	int fl = fcntl(q->chan->fd, F_GETFL);
	if (fl < 0 || fcntl(q->chan->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return bail();
	q->cq = ibv_create_cq(q->id->verbs, static_cast<int>(sq_size_ + rq_size_), q, q->chan, 0);
	if (!q->cq)
		return bail();
	ibv_qp_init_attr a = {};
	a.qp_context = q;
	a.send_cq = q->cq;
	a.recv_cq = q->cq;
	a.qp_type = IBV_QPT_UD;
	a.sq_sig_all = 1;
	a.cap.max_send_wr = sq_size_;
	a.cap.max_recv_wr = rq_size_;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	a.cap.max_inline_data = p_.sq_inline;
	if (rdma_create_qp(q->id, q->id->pd, &a))
		return bail();
	sq_inline_ = a.cap.max_inline_data;
	q->smr = ibv_reg_mr(q->id->qp->pd, sbuf_, static_cast<size_t>(sq_size_) * kDgramSlot, IBV_ACCESS_LOCAL_WRITE);
	if (!q->smr)
		return bail();
	q->rmr = ibv_reg_mr(q->id->qp->pd, q->rbuf, static_cast<size_t>(rq_size_) * kRecvSlot, IBV_ACCESS_LOCAL_WRITE);
	if (!q->rmr)
		return bail();
	epoll_event ev = {};
	ev.events = EPOLLIN;
	ev.data.ptr = q;
	if (epoll_ctl(epfd_, EPOLL_CTL_ADD, q->chan->fd, &ev))
		return bail();
	for (uint32_t i = 0; i < rq_size_; i++)
		if (post_recv(q, i))
			return bail();
	// Armed from the start, as rdma-core does, so that the first
	// completion wakes an rpoll that is already asleep.
	if (!ibv_req_notify_cq(q->cq, 0))
		q->armed = true;
	qps_.push_back(std::move(holder));
	*out = q;
	return 0;
}

void Dgram::free_qp(Qp *q)
{
	if (q->chan && epfd_ >= 0)
		epoll_ctl(epfd_, EPOLL_CTL_DEL, q->chan->fd, nullptr);
	if (q->id && q->id->qp)
		rdma_destroy_qp(q->id);
	if (q->smr)
		ibv_dereg_mr(q->smr);
	if (q->rmr)
		ibv_dereg_mr(q->rmr);
	if (q->cq)
		ibv_destroy_cq(q->cq);
	if (q->chan)
		ibv_destroy_comp_channel(q->chan);
	if (q->id)
		rdma_destroy_id(q->id);
	free(q->rbuf);
	q->id = nullptr;
	q->chan = nullptr;
	q->cq = nullptr;
	q->smr = q->rmr = nullptr;
	q->rbuf = nullptr;
}

int Dgram::post_recv(Qp *q, uint32_t slot)
{
	ibv_sge sge = {};
	sge.addr = reinterpret_cast<uintptr_t>(q->rbuf) + static_cast<uintptr_t>(slot) * kRecvSlot;
	sge.length = kRecvSlot;
	sge.lkey = q->rmr->lkey;
	ibv_recv_wr wr = {};
	wr.wr_id = kRecvFlag | slot;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	ibv_recv_wr *bad = nullptr;
	int r = ibv_post_recv(q->id->qp, &wr, &bad);
	return r ? fail(r) : 0;
}

// An address handle to `qpn` behind the peer's UDP address: the route from
// our QP's address (port 0) to it, as rdma-core's udp_svc_create_ah builds
// it, with a GRH also whenever the port is Ethernet (RoCE needs one;
// rdma-core's handle without it fails there and its data stays on UDP).
void Dgram::make_ah(Dest &d, uint32_t qpn)
{
	if (d.ah) {
		ibv_destroy_ah(d.ah);
		d.ah = nullptr;
	}
	rdma_cm_id *id = nullptr;
	if (rdma_create_id(nullptr, &id, nullptr, RDMA_PS_UDP))
		return;
	sockaddr_storage src = d.qp->local;
	set_port(src, 0);
	sockaddr_storage dst = d.addr;
	if (!rdma_resolve_addr(id, reinterpret_cast<sockaddr *>(&src), reinterpret_cast<sockaddr *>(&dst),
			       kResolveMs) &&
	    !rdma_resolve_route(id, kResolveMs) && id->route.num_paths > 0 && id->route.path_rec) {
		const ibv_sa_path_rec &p = *id->route.path_rec;
		ibv_context *ctx = d.qp->id->verbs;
		uint8_t port = d.qp->id->port_num ? d.qp->id->port_num : id->port_num;
		ibv_port_attr pa = {};
		bool have_port = !ibv_query_port(ctx, port, &pa);
		ibv_ah_attr a = {};
		if (p.hop_limit > 1 || (have_port && pa.link_layer == IBV_LINK_LAYER_ETHERNET)) {
			a.is_global = 1;
			a.grh.dgid = p.dgid;
			a.grh.flow_label = be32toh(p.flow_label);
			a.grh.hop_limit = p.hop_limit ? p.hop_limit : 64;
			a.grh.traffic_class = p.traffic_class;
			int n = have_port ? std::min(pa.gid_tbl_len, 256) : 16;
			for (int i = 0; i < n; i++) {
				ibv_gid g;
				if (!ibv_query_gid(ctx, port, i, &g) && !memcmp(&g, &p.sgid, sizeof(g))) {
					a.grh.sgid_index = static_cast<uint8_t>(i);
					break;
				}
			}
		}
		a.dlid = be16toh(p.dlid);
		a.sl = p.sl;
		a.src_path_bits = static_cast<uint8_t>(be16toh(p.slid) & (have_port ? (1u << pa.lmc) - 1 : 0x7f));
		a.static_rate = p.rate;
		a.port_num = port;
		d.ah = ibv_create_ah(d.qp->id->qp->pd, &a);
		if (d.ah)
			d.qpn = qpn;
	}
	rdma_destroy_id(id);
}

ssize_t Dgram::send_udp(Dest &d, const iovec *iov, int iovcnt, size_t len, int flags, uint8_t op)
{
	UdpHeader h = {};
	h.tag = htobe32(kUdpTag);
	h.version = d.qp->hdr.version;
	h.op = op;
	h.qpn = htobe32(d.qp->id->qp->qp_num & 0xFFFFFF);
	if (h.version == 4) {
		h.length = kUdpHdrV4;
		memcpy(h.addr, &d.qp->hdr.addr.ipv4, 4);
	} else {
		h.length = kUdpHdrV6;
		memcpy(h.addr, &d.qp->hdr.addr.ipv6, 16);
	}
	iovec v[IOV_MAX];
	v[0].iov_base = &h;
	v[0].iov_len = h.length;
	int n = 1;
	for (int i = 0; i < iovcnt && n < IOV_MAX; i++)
		if (iov[i].iov_len)
			v[n++] = iov[i];
	msghdr m = {};
	m.msg_name = &d.addr;
	m.msg_namelen = addr_len(reinterpret_cast<sockaddr *>(&d.addr));
	m.msg_iov = v;
	m.msg_iovlen = static_cast<size_t>(n);
	ssize_t r = sys_sendmsg(udp_, &m, flags | MSG_NOSIGNAL);
	if (r < 0)
		return -1;
	return r >= h.length ? static_cast<ssize_t>(len) : 0;
}

// Reads what the UDP socket holds (at most a queue's worth at a time).
void Dgram::drain_udp()
{
	if (!ready_)
		return;
	uint8_t buf[kDgramSlot];
	for (uint32_t i = 0; i < rq_size_ + 16; i++) {
		sockaddr_storage from = {};
		socklen_t fl = sizeof(from);
		ssize_t n = sys_recvfrom(udp_, buf, sizeof(buf), MSG_DONTWAIT, reinterpret_cast<sockaddr *>(&from), &fl);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return; // EAGAIN, or an error queued by ICMP: nothing to read
		}
		udp_message(buf, static_cast<size_t>(n), from);
	}
}

// One message on the UDP socket (rdma-core's udp_svc_process_rs, with the
// length checked against what was read).
void Dgram::udp_message(const uint8_t *buf, size_t n, const sockaddr_storage &from)
{
	if (n < kUdpHdrV4)
		return;
	UdpHeader h = {};
	memcpy(&h, buf, std::min(n, sizeof(h)));
	bool valid = be32toh(h.tag) == kUdpTag &&
		     ((h.version == 4 && from.ss_family == AF_INET && h.length == kUdpHdrV4) ||
		      (h.version == 6 && from.ss_family == AF_INET6 && h.length == kUdpHdrV6)) &&
		     n >= h.length;
	if (!valid || (h.op != static_cast<uint8_t>(Op::data) && h.op != static_cast<uint8_t>(Op::ctrl)))
		return;
	uint32_t qpn = be32toh(h.qpn) & 0xFFFFFF;
	Dest *d = nullptr;
	if (get_dest(reinterpret_cast<const sockaddr *>(&from), &d))
		return;
	bool data = h.op == static_cast<uint8_t>(Op::data);
	if (data)
		send_udp(*d, nullptr, 0, 0, MSG_DONTWAIT, static_cast<uint8_t>(Op::ctrl));
	if (!d->ah || d->qpn != qpn) {
		// A destination we cannot reach over RDMA stays on UDP; its
		// route is not asked for again more than once a second (each
		// try may wait up to the resolution timeouts).
		uint64_t now = now_ms();
		if (d->ah || d->tried_qpn != qpn || now - d->tried_ms >= 1000) {
			d->tried_qpn = qpn;
			d->tried_ms = now;
			make_ah(*d, qpn);
		}
	}
	if (!data || local_queued_ >= rq_size_)
		return; // a full queue drops the datagram, as a UDP socket would
	Msg m;
	m.len = static_cast<uint32_t>(n - h.length);
	DsHeader src;
	format_hdr(src, from);
	m.src = addr_of(src);
	m.bytes.assign(buf + h.length, buf + n);
	queue_.push_back(std::move(m));
	local_queued_++;
}

bool Dgram::msg_valid(const uint8_t *m, uint32_t n) const
{
	if (n < kDsHdrV4)
		return false;
	if (m[0] == 4 && m[1] == kDsHdrV4)
		return true;
	return m[0] == 6 && m[1] == kDsHdrV6 && n >= kDsHdrV6;
}

void Dgram::poll_cqs()
{
	ibv_wc wc[16];
	for (auto &qh : qps_) {
		Qp *q = qh.get();
		int k;
		while ((k = ibv_poll_cq(q->cq, 16, wc)) > 0) {
			for (int i = 0; i < k; i++) {
				uint32_t slot = static_cast<uint32_t>(wc[i].wr_id);
				if (!(wc[i].wr_id & kRecvFlag)) {
					if (slot < sq_size_)
						free_slots_.push_back(slot);
					continue;
				}
				const uint8_t *m = q->rbuf + static_cast<size_t>(slot) * kRecvSlot + kGrhBytes;
				uint32_t n = wc[i].byte_len > kGrhBytes ? wc[i].byte_len - kGrhBytes : 0;
				if (wc[i].status != IBV_WC_SUCCESS || n > kDgramSlot || !msg_valid(m, n)) {
					if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
						post_recv(q, slot);
					continue;
				}
				DsHeader h = {};
				memcpy(&h, m, m[1]);
				Msg msg;
				msg.qp = q;
				msg.slot = slot;
				msg.len = n - m[1];
				msg.src = addr_of(h);
				queue_.push_back(std::move(msg));
			}
		}
	}
}

void Dgram::arm_cqs()
{
	for (auto &q : qps_) {
		if (!q->armed && !ibv_req_notify_cq(q->cq, 0))
			q->armed = true;
	}
}

// Consumes the completion events the epoll fd reports (without sleeping).
void Dgram::take_events()
{
	epoll_event ev[16];
	int n = epoll_wait(epfd_, ev, 16, 0);
	for (int i = 0; i < n; i++) {
		auto *q = static_cast<Qp *>(ev[i].data.ptr);
		if (!q)
			continue; // the UDP socket: read by drain_udp
		ibv_cq *cq;
		void *ctx;
		while (!ibv_get_cq_event(q->chan, &cq, &ctx))
			ibv_ack_cq_events(cq, 1);
		q->armed = false;
	}
}

// Waits, with the lock held on entry and exit, until `pred` holds: first
// what the CQs and the UDP socket hold, then for the polling time, then
// asleep on the epoll fd (one sleeper; other threads on the condition
// variable). -1 and EWOULDBLOCK when non-blocking.
int Dgram::wait_for(std::unique_lock<std::mutex> &lk, Pred pred, bool nonblock)
{
	uint64_t spin_until = 0;
	for (;;) {
		poll_cqs();
		if ((this->*pred)()) {
			idle_calls_ = 0;
			return 0;
		}
		drain_udp();
		if ((this->*pred)()) {
			idle_calls_ = 0;
			return 0;
		}
		if (nonblock) {
			// A caller spinning on EAGAIN waits for its peer, which on
			// a busy host may be waiting for a CPU (and, on soft0, for
			// the CQ we keep polling): every 16th empty call in a row
			// gives the CPU away, as the stream path does.
			if ((++idle_calls_ & 15) == 0) {
				lk.unlock();
				sched_yield();
				lk.lock();
			}
			return fail(EWOULDBLOCK);
		}
		timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t now = static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
		if (!spin_until)
			spin_until = now + tunables().polling_us;
		if (now < spin_until)
			continue;
		arm_cqs();
		poll_cqs();
		if ((this->*pred)())
			return 0;
		if (sleeper_) {
			cv_.wait(lk);
			continue;
		}
		sleeper_ = true;
		lk.unlock();
		pollfd p = {epfd_, POLLIN, 0};
		int r = ::poll(&p, 1, tunables().wake_up_ms);
		int e = errno;
		lk.lock();
		sleeper_ = false;
		if (r > 0)
			take_events();
		cv_.notify_all();
		if (r < 0 && e != EINTR)
			return fail(e);
	}
}

ssize_t Dgram::send(const iovec *iov, int iovcnt, int flags, const sockaddr *dst, socklen_t dstlen,
		    bool nonblock)
{
	size_t len = 0;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return fail(EFAULT);
		len += iov[i].iov_len;
		if (len > max_payload())
			return fail(EMSGSIZE);
	}
	if (dst) {
		if (dst->sa_family != AF_INET && dst->sa_family != AF_INET6)
			return fail(EAFNOSUPPORT);
		if (dstlen < addr_len(dst))
			return fail(EINVAL);
	}
	std::unique_lock<std::mutex> lk(mu_);
	if (init_ep())
		return -1;
	Dest *d = conn_;
	if (dst) {
		if (get_dest(dst, &d))
			return -1;
	} else if (!d) {
		return fail(EDESTADDRREQ);
	}
	int sflags = (flags & (MSG_DONTROUTE | MSG_CONFIRM)) | (nonblock ? MSG_DONTWAIT : 0);
	if (!d->ah) {
		drain_udp(); // the answer to an earlier message may be there
		if (!d->ah)
			return send_udp(*d, iov, iovcnt, len, sflags, static_cast<uint8_t>(Op::data));
	}
	if (wait_for(lk, &Dgram::can_send, nonblock))
		return -1;
	uint32_t slot = free_slots_.back();
	free_slots_.pop_back();
	uint8_t *m = sbuf_ + static_cast<size_t>(slot) * kDgramSlot;
	const DsHeader &h = d->qp->hdr;
	memcpy(m, &h, h.length);
	size_t off = h.length;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len)
			memcpy(m + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	ibv_sge sge = {};
	sge.addr = reinterpret_cast<uintptr_t>(m);
	sge.length = static_cast<uint32_t>(off);
	sge.lkey = d->qp->smr->lkey;
	ibv_send_wr wr = {};
	wr.wr_id = slot;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = sge.length <= sq_inline_ ? IBV_SEND_INLINE : 0;
	wr.wr.ud.ah = d->ah;
	wr.wr.ud.remote_qpn = d->qpn;
	wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
	ibv_send_wr *bad = nullptr;
	int r = ibv_post_send(d->qp->id->qp, &wr, &bad);
	if (r) {
		free_slots_.push_back(slot);
		return fail(r);
	}
	return static_cast<ssize_t>(len);
}

ssize_t Dgram::recv(const iovec *iov, int iovcnt, int flags, sockaddr *src, socklen_t *srclen,
		    int *out_flags, bool nonblock)
{
	std::unique_lock<std::mutex> lk(mu_);
	if (!ready_)
		return fail(EINVAL);
	if (wait_for(lk, &Dgram::have_data, nonblock))
		return -1;
	Msg &m = queue_.front();
	const uint8_t *data = m.qp ? m.qp->rbuf + static_cast<size_t>(m.slot) * kRecvSlot + kGrhBytes +
					     m.qp->rbuf[static_cast<size_t>(m.slot) * kRecvSlot + kGrhBytes + 1]
				   : m.bytes.data();
	size_t copied = 0;
	for (int i = 0; i < iovcnt && copied < m.len; i++) {
		size_t k = std::min<size_t>(iov[i].iov_len, m.len - copied);
		if (k)
			memcpy(iov[i].iov_base, data + copied, k);
		copied += k;
	}
	if (src && srclen)
		copy_addr_out(m.src, src, srclen);
	size_t full = m.len;
	if (out_flags && full > copied)
		*out_flags |= MSG_TRUNC;
	if (!(flags & MSG_PEEK)) {
		if (m.qp)
			post_recv(m.qp, m.slot);
		else
			local_queued_--;
		queue_.pop_front();
	}
	return static_cast<ssize_t>((flags & MSG_TRUNC) ? full : copied);
}

short Dgram::poll_events(short events)
{
	std::lock_guard<std::mutex> g(mu_);
	if (!ready_)
		return 0;
	poll_cqs();
	short rev = 0;
	if (events & POLLIN) {
		if (!have_data())
			drain_udp();
		if (have_data())
			rev |= POLLIN;
	}
	if ((events & POLLOUT) && can_send())
		rev |= POLLOUT;
	return rev;
}

short Dgram::arm(short events, int fds[2], int *nfds)
{
	*nfds = 0;
	short rev = poll_events(events);
	if (rev)
		return rev;
	{
		std::lock_guard<std::mutex> g(mu_);
		arm_cqs();
	}
	rev = poll_events(events);
	if (rev)
		return rev;
	fds[(*nfds)++] = epfd_;
	return 0;
}

void Dgram::after_poll(int, short revents)
{
	if (!revents)
		return;
	std::lock_guard<std::mutex> g(mu_);
	take_events();
	cv_.notify_all();
}

int Dgram::getsockname(sockaddr *addr, socklen_t *len)
{
	return sys_getsockname(udp_, addr, len);
}

int Dgram::getpeername(sockaddr *addr, socklen_t *len)
{
	return sys_getpeername(udp_, addr, len);
}

// rdma-core's rsetsockopt for datagram rsockets: every level but SOL_RDMA
// is set on the UDP socket first (its errno is the answer when the kernel
// refuses), then the options rsockets keeps are recorded.
int Dgram::setsockopt(int level, int name, const void *val, socklen_t len)
{
	std::lock_guard<std::mutex> g(mu_);
	if (level != SOL_RDMA && sys_setsockopt(udp_, level, name, val, len))
		return -1;
	if (!val)
		return fail(EFAULT);
	int v = 0;
	if (len >= sizeof(int))
		memcpy(&v, val, sizeof(int));
	auto record = [&](uint64_t &opts, bool on) {
		if (name < 64) {
			if (on)
				opts |= 1ull << name;
			else
				opts &= ~(1ull << name);
		}
	};
	switch (level) {
	case SOL_SOCKET:
		switch (name) {
		case SO_RCVBUF:
			if (qps_.empty() && v > 0)
				p_.rbuf_size = static_cast<uint32_t>(std::min(v, 1 << 29)) << 1;
			break;
		case SO_SNDBUF:
			if (!sbuf_ && v > 0)
				p_.sbuf_size = static_cast<uint32_t>(std::min(v, 1 << 29)) << 1;
			if (p_.sbuf_size < kSendLowWater)
				p_.sbuf_size = kSendLowWater << 1;
			break;
		case SO_REUSEADDR:
		case SO_KEEPALIVE:
		case SO_OOBINLINE:
			record(so_opts_, v);
			break;
		case SO_LINGER:
			if (len >= sizeof(linger))
				record(so_opts_, !static_cast<const linger *>(val)->l_onoff);
			break;
		default:
			break;
		}
		return 0;
	case IPPROTO_IPV6:
		if (name == IPV6_V6ONLY)
			record(ipv6_opts_, v);
		return 0;
	case SOL_RDMA:
		if (len < sizeof(int) && name != RDMA_ROUTE)
			return fail(EINVAL);
		if (ready_)
			return fail(EINVAL);
		switch (name) {
		case RDMA_SQSIZE:
			p_.sq_size = static_cast<uint16_t>(std::min<uint32_t>(static_cast<uint32_t>(v), kQueueMax));
			return 0;
		case RDMA_RQSIZE:
			p_.rq_size = static_cast<uint16_t>(std::min<uint32_t>(static_cast<uint32_t>(v), kQueueMax));
			return 0;
		case RDMA_INLINE:
			p_.sq_inline = static_cast<uint16_t>(std::min<uint32_t>(static_cast<uint32_t>(v), kQueueMax));
			return 0;
		case RDMA_IOMAPSIZE:
		case RDMA_ROUTE:
			return 0; // accepted and unused, as rdma-core does for datagrams
		default:
			return fail(ENOTSUP);
		}
	default:
		return 0;
	}
}

int Dgram::getsockopt(int level, int name, void *val, socklen_t *len)
{
	if (!val || !len)
		return fail(EFAULT);
	auto put_int = [&](int v) { return put_int_option(val, len, v); };
	std::lock_guard<std::mutex> g(mu_);
	switch (level) {
	case SOL_SOCKET:
		switch (name) {
		case SO_REUSEADDR:
		case SO_KEEPALIVE:
		case SO_OOBINLINE:
			return put_int(!!(so_opts_ & (1ull << name)));
		case SO_RCVBUF:
			return put_int(static_cast<int>(p_.rbuf_size));
		case SO_SNDBUF:
			return put_int(static_cast<int>(p_.sbuf_size));
		case SO_LINGER: {
			if (*len < sizeof(linger))
				return fail(EINVAL);
			linger l = {!(so_opts_ & (1ull << SO_LINGER)), 0};
			memcpy(val, &l, sizeof(l));
			*len = sizeof(l);
			return 0;
		}
		case SO_TYPE:
			return put_int(SOCK_DGRAM);
		default:
			return sys_getsockopt(udp_, level, name, val, len);
		}
	case IPPROTO_IPV6:
		if (name == IPV6_V6ONLY)
			return put_int(!!(ipv6_opts_ & (1ull << IPV6_V6ONLY)));
		return sys_getsockopt(udp_, level, name, val, len);
	case SOL_RDMA:
		switch (name) {
		case RDMA_SQSIZE:
			return put_int(p_.sq_size);
		case RDMA_RQSIZE:
			return put_int(p_.rq_size);
		case RDMA_INLINE:
			return put_int(ready_ && !qps_.empty() ? static_cast<int>(sq_inline_) : p_.sq_inline);
		case RDMA_IOMAPSIZE:
			return put_int(0);
		default:
			return fail(ENOTSUP);
		}
	default:
		return sys_getsockopt(udp_, level, name, val, len);
	}
}

void Dgram::close()
{
	std::unique_lock<std::mutex> lk(mu_);
	if (ready_ && !qps_.empty())
		wait_for(lk, &Dgram::all_sends_done, false);
}

} // namespace ov::rs
