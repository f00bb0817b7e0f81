// RoCE v2 software device: the transport. The requester cuts work requests
// into packets of the path MTU with consecutive PSNs, keeps them until
// acknowledged and sends them again from the oldest unacknowledged request
// when the QP's timeout expires or the responder NAKs (go-back-N, as the
// InfiniBand reliable connection allows: IBA 9.7). The responder accepts
// exactly the PSN it expects, answers duplicates from its state (ACK again,
// or serve an RDMA READ again), NAKs a gap once, and writes into registered
// memory only after the key, range and rights checks of the shared-memory
// device. One receive thread per context reads the socket (recvmmsg), checks
// the ICRC, parses (wire.h) and runs both roles; post_send transmits in the
// caller's thread.
#include "roce.h"
#include "recovery.h"
#include "../engine.h"
#include "../keys.h"
#include "../log.h"

#include <algorithm>
#include <alloca.h>
#include <arpa/inet.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <netlink/socket.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ovsoft {

using namespace ovroce;

namespace {

inline int32_t psn_diff(uint32_t a, uint32_t b) { return int32_t((a - b) << 8) >> 8; }
inline uint32_t psn_add(uint32_t a, uint32_t n) { return (a + n) & kPsnMask; }

// RC and XRC run one reliable protocol: XRC's send QP is an RC requester
// whose requests name the responder's XRC SRQ (XRCETH), its receive QP an
// RC responder that takes receive WQEs from that SRQ. Their packets carry
// XRC's transport bits.
inline bool is_xrc(const SoftQp *qp)
{
	return qp->type == IBV_QPT_XRC_SEND || qp->type == IBV_QPT_XRC_RECV;
}
inline bool reliable(const SoftQp *qp) { return qp->type == IBV_QPT_RC || is_xrc(qp); }
inline uint8_t rc_transport(const SoftQp *qp) { return is_xrc(qp) ? kXRC : kRC; }

// The transport's clock (now_ns, CLOCK_MONOTONIC) is read at most once per
// unit of work (ClockScope: a round of datagrams in roce_drain, a
// post_send), when the first timer of the unit is set or checked: the
// unit's work takes microseconds, against timers of tens of microseconds
// and more. Where the kernel's clocksource is emulated (a TCG guest: the
// HPET, a device access under qemu's global lock) each read costs several
// microseconds, and reading it for each packet and each poll made a
// quarter of an RDMA WRITE ping-pong's time in the test bed.
// Initial-exec TLS (as shm.h's t_map): read on every packet, and the
// general-dynamic model of a dlopen'ed provider makes each access a call of
// __tls_get_addr (a tenth of a handled packet's user time on the host).
thread_local uint64_t t_clock_ns __attribute__((tls_model("initial-exec")));
thread_local int t_clock_scopes __attribute__((tls_model("initial-exec")));

uint64_t clock_ns()
{
	if (!t_clock_scopes)
		return now_ns();
	if (!t_clock_ns)
		t_clock_ns = now_ns();
	return t_clock_ns;
}

struct ClockScope {
	uint64_t saved = t_clock_ns;
	ClockScope()
	{
		t_clock_scopes++;
		t_clock_ns = 0;
	}
	// The unit's work starts again (the next round of datagrams).
	void renew() { t_clock_ns = 0; }
	~ClockScope()
	{
		t_clock_scopes--;
		t_clock_ns = saved;
	}
	ClockScope(const ClockScope &) = delete;
	ClockScope &operator=(const ClockScope &) = delete;
};

int32_t g_pid;
void pid_refresh() { g_pid = getpid(); }
__attribute__((constructor)) void pid_init()
{
	pid_refresh();
	pthread_atfork(nullptr, nullptr, pid_refresh);
}

// Receive-side fault injection for tests: percent (0..50) of the arriving
// datagrams dropped (OPENVERBS_SOFT_ROCE_LOSS), held back and handled after
// the next one (..._REORDER), handled twice (..._DUPLICATE) or given one
// flipped bit that the ICRC covers (..._CORRUPT). Read once per process;
// ignored in setuid programs (secure_getenv). The draws come from a
// generator of the context's own (RoceCtx::fault_rng, under rx_lock).
struct Faults {
	double loss = 0, reorder = 0, duplicate = 0, corrupt = 0;
	bool any = false;
};
const Faults &faults()
{
	static const Faults f = [] {
		Faults r;
		auto pct = [](const char *name) {
			const char *v = secure_getenv(name);
			double x = v ? strtod(v, nullptr) : 0;
			return (x > 0 && x <= 50) ? x / 100.0 : 0.0;
		};
		r.loss = pct("OPENVERBS_SOFT_ROCE_LOSS");
		r.reorder = pct("OPENVERBS_SOFT_ROCE_REORDER");
		r.duplicate = pct("OPENVERBS_SOFT_ROCE_DUPLICATE");
		r.corrupt = pct("OPENVERBS_SOFT_ROCE_CORRUPT");
		r.any = r.loss > 0 || r.reorder > 0 || r.duplicate > 0 || r.corrupt > 0;
		return r;
	}();
	return f;
}

// xorshift64*: uniform in [0, 1).
double fault_draw(RoceCtx *rc)
{
	uint64_t x = rc->fault_rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rc->fault_rng = x;
	return double((x * 0x2545f4914f6cdd1dull) >> 11) / double(1ull << 53);
}

uint64_t timeout_ns(uint8_t t)
{
	if (t == 0)
		return 0; // no timeout: never retransmitted
	uint64_t ns = 4096ull << std::min<uint32_t>(t, 31); // 4.096 us * 2^t
	return std::max<uint64_t>(ns, 2000000ull);
}

// Sets a retransmission or RNR deadline (`at`, 0: none) and lowers the
// receive thread's hint to it (RoceCtx::timer_hint_ns); wakes the thread when
// it sleeps past it. rc->lock held. The hint's store and the load of the
// thread's wake time, and the thread's store of that time and its load of the
// hint, are sequentially consistent: one of the two sides sees the other's.
void arm_timer(RoceCtx *rc, uint64_t &deadline, uint64_t at)
{
	deadline = at;
	uint64_t hint = rc->timer_hint_ns.load(std::memory_order_relaxed);
	if (!at || (hint && at >= hint))
		return;
	rc->timer_hint_ns.store(at);
	uint64_t wake = rc->rx_wake_ns.load();
	if (wake && at < wake) {
		uint64_t one = 1;
		if (write(rc->wake_fd, &one, sizeof(one)) < 0) {
			// EAGAIN: the counter is full of wakes already.
		}
	}
}

uint32_t packets_for(uint32_t len, uint32_t mtu) { return len ? (len + mtu - 1) / mtu : 1; }

// ------------------------------------------------------------------ memory

// Whether a key of protection domain pd_id may serve qp. An XRC receive QP
// has no PD: the XRC SRQ's stands for it (xrc_pd), and without one (0) no
// key serves.
inline bool pd_ok(const SoftQp *qp, uint32_t pd_id, uint32_t xrc_pd)
{
	if (qp->type == IBV_QPT_XRC_RECV)
		return xrc_pd && pd_id == xrc_pd;
	return !qp->pd_id || pd_id == qp->pd_id;
}

// Where the bytes of a key's range are: our pointer to them (a region of
// this process, or another process's region mapped here: direct_ptr), else
// the owner's address, which move_remote reaches with process_vm_*.
struct Span {
	uint8_t *direct = nullptr;
	uint64_t va = 0;
	int32_t pid = 0;
};

void fill_span(const KeySnap &m, uint64_t addr, uint64_t len, int32_t pid, Span *s)
{
	s->va = m.addr + (addr - m.iova);
	s->pid = pid;
	s->direct = pid == g_pid ? reinterpret_cast<uint8_t *>(s->va) : direct_ptr(m, addr, len);
}

// Copies len bytes between buf and span s (to_span: into it). False when the
// owner's memory cannot be reached (gone, or the range unmapped).
bool span_copy(const Span &s, uint8_t *buf, uint64_t len, bool to_span)
{
	struct iovec lv = {buf, len};
	return move_remote(s.pid, &lv, 1, s.va, s.direct, len, to_span) == 0;
}

// A region on qp's device for a gather (write false) or a scatter entry
// (write true) of qp: of this process, or for an XRC receive QP of the
// process and PD of the receive WQE's SRQ. True and *out set, or false.
bool local_span(SoftQp *qp, uint32_t lkey, uint64_t addr, uint64_t len, bool write, Span *out)
{
	Segment *seg = qp->ctx->seg;
	bool xrc = qp->type == IBV_QPT_XRC_RECV;
	uint32_t proc = xrc ? qp->roce->recv_owner : seg->my_proc;
	int32_t pid = xrc ? qp->roce->recv_pid : g_pid;
	KeySnap m;
	if (!key_read(seg, lkey, m) || m.kind != KEY_MR || m.owner != proc || m.owner_pid != pid ||
	    !pd_ok(qp, m.pd_id, xrc ? qp->roce->recv_pd : 0) || !key_range_ok(m, addr, len) ||
	    (write && !(m.access & IBV_ACCESS_LOCAL_WRITE)) ||
	    ((m.access & IBV_ACCESS_ON_DEMAND) && pid == g_pid &&
	     !odp_fault(m.addr + (addr - m.iova), len, write)))
		return false;
	fill_span(m, addr, len, pid, out);
	return true;
}

// The responder's check of an R_Key for [va, va+len) and `need`
// (IBV_ACCESS_REMOTE_*): a region in the QP's PD (an XRC receive QP: of the
// process and PD of the SRQ the request names) whose and whose QP's rights
// allow it, or a memory window over one, bound (a type 2 window: by this QP)
// and its region unchanged since the bind. True and *out set, or false.
bool remote_span(SoftQp *qp, uint32_t rkey, uint64_t va, uint64_t len, uint32_t need, Span *out)
{
	Segment *seg = qp->ctx->seg;
	bool xrc = qp->type == IBV_QPT_XRC_RECV;
	uint32_t proc = xrc ? qp->roce->xrc_owner : seg->my_proc;
	int32_t pid = xrc ? qp->roce->xrc_pid : g_pid;
	KeySnap m;
	if (!key_read(seg, rkey, m) || (m.kind != KEY_MR && m.kind != KEY_MW) ||
	    (m.kind == KEY_MW && !window_usable(seg, m, qp->qpn)) || m.owner != proc ||
	    m.owner_pid != pid || !pd_ok(qp, m.pd_id, xrc ? qp->roce->xrc_pd : 0) ||
	    !(m.access & need) || !(qp->attr.qp_access_flags & need) || !key_range_ok(m, va, len) ||
	    ((m.access & IBV_ACCESS_ON_DEMAND) && pid == g_pid &&
	     !odp_fault(m.addr + (va - m.iova), len,
			need & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC))))
		return false;
	fill_span(m, va, len, pid, out);
	return true;
}

// Copies between buf and bytes [off, off+len) of an SGE list (to_sge: into
// the list). False on a protection error or when the list is too short.
bool sge_copy(SoftQp *qp, const struct ibv_sge *sge, uint32_t nsge, uint64_t off, uint8_t *buf,
	      uint32_t len, bool to_sge)
{
	for (uint32_t i = 0; i < nsge && len; i++) {
		uint64_t l = sge[i].length;
		if (off >= l) {
			off -= l;
			continue;
		}
		uint32_t take = uint32_t(std::min<uint64_t>(l - off, len));
		Span sp;
		if (!local_span(qp, sge[i].lkey, sge[i].addr + off, take, to_sge, &sp) ||
		    !span_copy(sp, buf, take, to_sge))
			return false;
		buf += take;
		len -= take;
		off = 0;
	}
	return len == 0;
}

uint64_t sge_total(const SoftWr &w)
{
	if (w.inline_len)
		return w.inline_len;
	uint64_t t = 0;
	for (uint32_t i = 0; i < w.num_sge; i++)
		t += w.sge[i].length;
	return t;
}

// Gathers [off, off+len) of a send request's data.
bool gather(SoftQp *qp, const SoftWr &w, uint64_t off, uint8_t *buf, uint32_t len)
{
	if (w.inline_len) {
		if (off + len > w.inline_len)
			return false;
		memcpy(buf, w.inline_data + off, len);
		return true;
	}
	return sge_copy(qp, w.sge, w.num_sge, off, buf, len, false);
}

// ------------------------------------------------------------------ transmit

void to_sockaddr(RoceCtx *rc, const union ibv_gid &gid, struct sockaddr_in6 *a)
{
	memset(a, 0, sizeof(*a));
	a->sin6_family = AF_INET6;
	a->sin6_port = htons(kRoceV2Port);
	memcpy(&a->sin6_addr, gid.raw, 16);
	// Link-local unicast, and interface- or link-local multicast.
	if ((gid.raw[0] == 0xfe && (gid.raw[1] & 0xc0) == 0x80) ||
	    (gid.raw[0] == 0xff && (gid.raw[1] & 0x0f) <= 2))
		a->sin6_scope_id = uint32_t(rc->ifindex);
}

bool is_v4_mapped(const uint8_t *a)
{
	static const uint8_t pre[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return memcmp(a, pre, 12) == 0;
}

void ip_meta(const uint8_t src[16], const struct sockaddr_in6 &to, IpMeta *ip)
{
	bool v4 = is_v4_mapped(src);
	ip->v6 = !v4;
	memcpy(ip->src, v4 ? src + 12 : src, v4 ? 4 : 16);
	const uint8_t *d = reinterpret_cast<const uint8_t *>(&to.sin6_addr);
	memcpy(ip->dst, v4 ? d + 12 : d, v4 ? 4 : 16);
	ip->sport = kRoceV2Port;
	ip->dport = ntohs(to.sin6_port);
}

bool same_route(const RoceCtx::TxPkt &a, const struct sockaddr_in6 &to, const uint8_t src[16])
{
	return a.to.sin6_port == to.sin6_port && a.to.sin6_scope_id == to.sin6_scope_id &&
	       memcmp(&a.to.sin6_addr, &to.sin6_addr, 16) == 0 && memcmp(a.src, src, 16) == 0;
}

// The slot the next packet is built in (its payload goes at slot +
// kMaxHeaderBytes, xmit_buf puts the headers before it). A full batch is
// sent first. rc->lock held.
uint8_t *tx_slot(RoceCtx *rc)
{
	if (rc->ntx == kRoceTxBatch)
		roce_flush(rc);
	return rc->tx_bufs + size_t(rc->ntx) * kRoceTxSlot;
}

inline uint8_t *slot_payload(uint8_t *slot) { return slot + kMaxHeaderBytes; }

// Queues one packet: the headers of k, `len` bytes of payload already at
// slot_payload(buf), where buf is tx_slot(rc). A packet that may follow the
// one before it in a UDP GSO train joins it: the kernel cuts a train into
// datagrams whose IPv4 identifications count up from 0 (Don't Fragment,
// unconnected socket), so the ICRC is computed with the identification the
// packet will carry, its place in the train. rc->lock held.
void xmit_buf(RoceCtx *rc, const uint8_t src[16], const struct sockaddr_in6 &to, Packet &k,
	      uint8_t *buf, uint32_t len)
{
	uint8_t hdr[kMaxHeaderBytes];
	k.bth.pad = (k.flags & F_PAYLOAD) ? pad_for(len) : 0;
	k.bth.mig = true;
	size_t h = encode_headers(k, hdr);
	uint8_t *p = buf + kMaxHeaderBytes - h;
	memcpy(p, hdr, h);
	size_t n = h + len;
	memset(p + n, 0, k.bth.pad);
	n += k.bth.pad;
	uint32_t total = uint32_t(n + kIcrcBytes);
	RoceCtx::TxPkt &t = rc->tx[rc->ntx];
	uint16_t seg = 0;
	if (rc->gso && rc->ntx && rc->train_len && total <= rc->train_len &&
	    rc->train_bytes + total <= kRoceGsoBytes && rc->tx[rc->ntx - 1].seg + 1u < kRoceGsoSegs &&
	    same_route(rc->tx[rc->ntx - 1], to, src)) {
		seg = uint16_t(rc->tx[rc->ntx - 1].seg + 1);
		rc->train_bytes += total;
		if (total < rc->train_len)
			rc->train_len = 0; // a shorter packet ends a train
	} else {
		rc->train_len = total;
		rc->train_bytes = total;
	}
	IpMeta ip;
	ip_meta(src, to, &ip);
	ip.ip_id = ip.v6 ? 0 : seg;
	icrc_write(p + n, icrc_compute(ip, p, n));
	t.off = uint32_t(p - buf);
	t.len = total;
	t.seg = seg;
	t.to = to;
	memcpy(t.src, src, 16);
	rc->ntx++;
}

} // namespace

// Sends the batch: one sendmmsg for all of it, each GSO train one message
// (UDP_SEGMENT: the kernel sends its packets as ordinary datagrams, or
// hands the train whole to a receiver that asked for UDP_GRO). A full
// socket buffer is waited out (1 ms at a time, 50 times); a packet that
// still cannot go is lost as on the wire (RC sends it again). A kernel or
// route that refuses GSO gets plain datagrams from then on. rc->lock held.
void roce_flush(RoceCtx *rc)
{
	uint32_t n = rc->ntx;
	if (!n)
		return;
	struct iovec iov[kRoceTxBatch];
	struct mmsghdr msgs[kRoceTxBatch];
	uint32_t first[kRoceTxBatch + 1]; // message -> its first packet
	union Ctl {
		char b[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	};
	Ctl ctl[kRoceTxBatch];
	// Messages for the packets from `from` on, written from message m0 on.
	auto build = [&](uint32_t from, uint32_t m0) {
		uint32_t m = m0;
		for (uint32_t j = from; j < n; m++) {
			uint32_t e = j + 1;
			while (e < n && rc->tx[e].seg)
				e++;
			first[m] = j;
			for (uint32_t i = j; i < e; i++)
				iov[i] = {rc->tx_bufs + size_t(i) * kRoceTxSlot + rc->tx[i].off, rc->tx[i].len};
			struct msghdr &mh = msgs[m].msg_hdr;
			mh = {};
			mh.msg_name = &rc->tx[j].to;
			mh.msg_namelen = sizeof(rc->tx[j].to);
			mh.msg_iov = &iov[j];
			mh.msg_iovlen = e - j;
			memset(&ctl[m], 0, sizeof(ctl[m]));
			mh.msg_control = ctl[m].b;
			mh.msg_controllen = CMSG_SPACE(sizeof(struct in6_pktinfo)) +
					    (e - j > 1 ? CMSG_SPACE(sizeof(uint16_t)) : 0);
			struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = IPPROTO_IPV6;
			c->cmsg_type = IPV6_PKTINFO;
			c->cmsg_len = CMSG_LEN(sizeof(struct in6_pktinfo));
			struct in6_pktinfo pi = {};
			memcpy(&pi.ipi6_addr, rc->tx[j].src, 16);
			pi.ipi6_ifindex = unsigned(rc->ifindex);
			memcpy(CMSG_DATA(c), &pi, sizeof(pi));
			if (e - j > 1) {
				c = CMSG_NXTHDR(&mh, c);
				c->cmsg_level = IPPROTO_UDP;
				c->cmsg_type = UDP_SEGMENT;
				c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
				uint16_t gso = uint16_t(rc->tx[j].len);
				memcpy(CMSG_DATA(c), &gso, sizeof(gso));
			}
			j = e;
		}
		first[m] = n;
		return m;
	};
	uint32_t nm = build(0, 0), m = 0;
	int tries = 0;
	while (m < nm) {
		// The system call itself, without libc's cancellation-point
		// wrapper (as roce_drain's recvmmsg): the caller holds locks.
		int got = int(syscall(SYS_sendmmsg, rc->fd, msgs + m, nm - m, MSG_DONTWAIT));
		if (got > 0) {
			rc->tx_packets += first[m + uint32_t(got)] - first[m];
			m += uint32_t(got);
			tries = 0;
			continue;
		}
		int e = errno;
		if ((e == EAGAIN || e == ENOBUFS || e == EINTR) && tries++ < 50) {
			struct pollfd pf = {rc->fd, POLLOUT, 0};
			poll(&pf, 1, 1);
			continue;
		}
		if (first[m + 1] - first[m] > 1 && (e == EIO || e == EINVAL || e == EOPNOTSUPP ||
						   e == ENOPROTOOPT || e == EMSGSIZE)) {
			// No GSO here (no checksum offload on the route, an old
			// kernel): plain datagrams, each with the ICRC of
			// identification 0, from this one on.
			softlog(2, "%s: UDP GSO refused (%s): one datagram per packet from now on",
				rc->ifname, strerror(e));
			rc->gso = false;
			for (uint32_t i = first[m]; i < n; i++) {
				RoceCtx::TxPkt &t = rc->tx[i];
				if (!t.seg)
					continue;
				t.seg = 0;
				IpMeta ip;
				ip_meta(t.src, t.to, &ip);
				if (ip.v6)
					continue;
				uint8_t *p = rc->tx_bufs + size_t(i) * kRoceTxSlot + t.off;
				icrc_write(p + t.len - kIcrcBytes, icrc_compute(ip, p, t.len - kIcrcBytes));
			}
			nm = build(first[m], m);
			continue;
		}
		// Lost like packets on the wire: RC sends them again.
		if (rc->tx_errors++ < 5)
			softlog(2, "%s: send to port %u failed: %s", rc->ifname,
				ntohs(rc->tx[first[m]].to.sin6_port), strerror(e));
		m++;
		tries = 0;
	}
	rc->ntx = 0;
	rc->train_len = 0;
}

namespace {

void ack_emit(SoftQp *qp);

// An Acknowledge (or, with opcode kAtomicAck, an Atomic Acknowledge carrying
// orig) for psn. An acknowledgement still waiting (send_ack) goes first, so
// that the QP's responses leave in PSN order.
void send_aeth(SoftQp *qp, uint8_t opcode_op, uint32_t psn, uint8_t syndrome, uint64_t orig = 0)
{
	RoceQp *r = qp->roce;
	if (r->ack_pending)
		ack_emit(qp);
	Packet k;
	k.bth.opcode = rc_transport(qp) | opcode_op;
	k.flags = opcode_flags(k.bth.opcode);
	k.bth.dqpn = qp->attr.dest_qp_num;
	k.bth.psn = psn;
	k.syndrome = syndrome;
	k.msn = r->msn;
	k.orig = orig;
	uint8_t *pb = tx_slot(qp->ctx->roce);
	xmit_buf(qp->ctx->roce, r->src, r->peer, k, pb, 0);
}

// Queues the acknowledgement that waits (send_ack), if the QP still answers.
void ack_emit(SoftQp *qp)
{
	RoceQp *r = qp->roce;
	if (!r->ack_pending)
		return;
	r->ack_pending = false;
	uint32_t st = qp->entry->state.load(std::memory_order_acquire);
	if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD)
		return;
	Packet k;
	k.bth.opcode = rc_transport(qp) | kAck;
	k.flags = opcode_flags(k.bth.opcode);
	k.bth.dqpn = qp->attr.dest_qp_num;
	k.bth.psn = r->ack_psn;
	k.syndrome = kAethNoCredit;
	k.msn = r->ack_msn;
	uint8_t *pb = tx_slot(qp->ctx->roce);
	xmit_buf(qp->ctx->roce, r->src, r->peer, k, pb, 0);
}

// Asks for an acknowledgement of every request up to the last SEND or
// WRITE packet executed (plain_ack_psn: epsn - 1 unless an RDMA READ or an
// atomic came since; one already waiting is replaced: ACKs are
// cumulative). It goes when the current batch is done (tx_done), or, with
// `delay` (a single-packet request), behind the QP's next packet and at the
// latest kRoceAckDelayNs from now.
void send_ack(SoftQp *qp, bool delay = false)
{
	RoceQp *r = qp->roce;
	RoceCtx *rc = qp->ctx->roce;
	r->ack_psn = r->plain_ack_psn;
	r->ack_msn = r->plain_ack_msn;
	if (!r->ack_pending) {
		r->ack_pending = true;
		r->ack_due_ns = delay ? clock_ns() + kRoceAckDelayNs : 0;
	} else if (!delay) {
		r->ack_due_ns = 0;
	}
	if (!r->ack_listed && rc->nacks < kMaxQps) {
		r->ack_listed = true;
		rc->ack_slots[rc->nacks++] = qp->slot;
		rc->tx_work.store(true, std::memory_order_relaxed);
	} else if (!r->ack_listed) {
		ack_emit(qp); // not reached: a QP is listed once
	}
}

// Sends the acknowledgements that are due (all of them with `all`) and
// remembers when the next delayed one is. rc->lock held.
void ack_run(RoceCtx *rc, uint64_t now, bool all)
{
	// Keep each listed QP once (a QP reset or destroyed meanwhile, or its
	// slot taken by another, is dropped or listed again by send_ack).
	uint32_t k = 0;
	for (uint32_t i = 0; i < rc->nacks; i++) {
		uint32_t slot = rc->ack_slots[i];
		SoftQp *qp = slot < kMaxQps ? rc->by_slot[slot] : nullptr;
		if (qp && qp->roce && qp->roce->ack_listed) {
			qp->roce->ack_listed = false;
			rc->ack_slots[k++] = slot;
		}
	}
	uint32_t n = k;
	uint64_t next = 0;
	k = 0;
	for (uint32_t i = 0; i < n; i++) {
		SoftQp *qp = rc->by_slot[rc->ack_slots[i]];
		RoceQp *r = qp->roce;
		if (r->ack_pending && (all || !r->ack_due_ns || now >= r->ack_due_ns))
			ack_emit(qp);
		if (r->ack_pending) {
			r->ack_listed = true;
			rc->ack_slots[k++] = rc->ack_slots[i];
			if (!next || r->ack_due_ns < next)
				next = r->ack_due_ns;
		}
	}
	rc->nacks = k;
	rc->ack_next_ns = next;
	rc->tx_work.store(k != 0, std::memory_order_relaxed);
}

// The lock holder is done: acknowledgements that are due and the batch go.
// rc->lock held.
void tx_done(RoceCtx *rc)
{
	if (rc->nacks)
		ack_run(rc, clock_ns(), false);
	roce_flush(rc);
}

// ------------------------------------------------------------------ completions

// The QP enters the error state: queued requests and receives are flushed
// (the soft device's qp_to_error), the transport forgets what was in flight.
void qp_error(SoftQp *qp)
{
	RoceQp *r = qp->roce;
	bool xrc = qp->type == IBV_QPT_XRC_RECV;
	if ((r->in_send || r->recv_held) && (qp->rcq || xrc)) {
		// The receive request of the message in progress is flushed too
		// (an XRC receive QP's to its SRQ's completion queue).
		struct ibv_wc wc = {};
		wc.wr_id = r->recv_wr_id;
		wc.status = IBV_WC_WR_FLUSH_ERR;
		wc.opcode = IBV_WC_RECV;
		wc.qp_num = qp->qpn;
		cq_push(qp->ctx->seg, xrc ? r->recv_cq : qp->rcq->slot, wc, false);
		r->recv_held = false;
	}
	qp_sq_lock(qp);
	qp_to_error(qp, false);
	qp_sq_unlock(qp);
	r->next_wr = 0;
	r->deadline_ns = 0;
	r->rnr_until_ns = 0;
	r->in_send = r->in_write = false;
}

void pop_head(SoftQp *qp)
{
	qp->sq_head = (qp->sq_head + 1) % qp->sq_depth;
	sq_set_pending(qp, qp->sq_count - 1);
	if (qp->roce->next_wr)
		qp->roce->next_wr--;
}

bool is_atomic(uint32_t op)
{
	return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

// Work requests that change this device's key table and send nothing
// (memory window binds, local invalidations): run when the requester
// reaches them in send-queue order, complete in that order.
static bool is_local(uint32_t op) { return op == IBV_WR_BIND_MW || op == IBV_WR_LOCAL_INV; }

// Completes, in order, the requests at the head that are finished.
void complete_ready(SoftQp *qp)
{
	RoceQp *r = qp->roce;
	while (qp->sq_count) {
		uint32_t h = qp->sq_head;
		SoftWr &w = qp->sq[h];
		RoceTx &t = r->tx[h];
		if (t.status != IBV_WC_SUCCESS) {
			send_complete(qp, w, t.status, 0);
			pop_head(qp);
			qp_error(qp);
			return;
		}
		if (is_local(w.opcode)) {
			if (!t.done)
				return;
		} else if (qp->type == IBV_QPT_UC) {
			if (t.sent < t.npkts)
				return;
		} else if (w.opcode == IBV_WR_RDMA_READ || is_atomic(w.opcode)) {
			if (!t.done)
				return;
		} else if (psn_diff(r->una, psn_add(t.psn, t.npkts)) < 0) {
			return;
		}
		send_complete(qp, w, IBV_WC_SUCCESS,
			      w.opcode == IBV_WR_RDMA_READ || is_atomic(w.opcode) ? t.len : 0);
		pop_head(qp);
	}
	r->deadline_ns = 0;
}

bool fully_sent(const SoftWr &w, const RoceTx &t)
{
	return w.opcode == IBV_WR_RDMA_READ ? t.sent >= 1 : t.sent >= t.npkts;
}

// Sends READ request w for the responses not placed yet: from PSN
// t.rd_next and the matching offset (the whole read the first time).
void send_read_request(SoftQp *qp, const SoftWr &w, const RoceTx &t)
{
	RoceQp *r = qp->roce;
	Packet k;
	k.bth.opcode = rc_transport(qp) | kReadRequest;
	k.flags = opcode_flags(k.bth.opcode);
	k.bth.dqpn = qp->attr.dest_qp_num;
	k.xrc_srqn = w.xrc_srqn;
	k.bth.psn = t.rd_next;
	k.bth.ack_req = true;
	uint64_t off = uint64_t(psn_diff(t.rd_next, t.psn)) * r->mtu;
	k.reth = {w.remote_addr + off, w.rkey, uint32_t(t.len - std::min<uint64_t>(off, t.len))};
	uint8_t *pb = tx_slot(qp->ctx->roce);
	xmit_buf(qp->ctx->roce, r->src, r->peer, k, pb, 0);
}

// Sends the next packet of request w (its packet number t.sent).
void send_next_packet(SoftQp *qp, SoftWr &w, RoceTx &t)
{
	RoceQp *r = qp->roce;
	RoceCtx *rc = qp->ctx->roce;
	uint8_t tr = qp->type == IBV_QPT_UC ? kUC : rc_transport(qp);
	Packet k;
	k.bth.dqpn = qp->attr.dest_qp_num;
	k.xrc_srqn = w.xrc_srqn; // sent with XRC's requests only (F_XRCETH)
	uint8_t *pb = tx_slot(qp->ctx->roce);
	uint32_t plen = 0;
	if (is_atomic(w.opcode)) {
		k.bth.opcode = tr | (w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? kCompareSwap : kFetchAdd);
		k.flags = opcode_flags(k.bth.opcode);
		k.bth.psn = t.psn;
		k.bth.ack_req = true;
		k.atomic = {w.remote_addr, w.rkey, w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w.swap : w.compare_add,
			    w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w.compare_add : 0};
		t.sent = 1;
		r->snd_nxt = psn_add(t.psn, 1);
		if (psn_diff(r->snd_nxt, r->snd_max) > 0)
			r->snd_max = r->snd_nxt;
		xmit_buf(rc, r->src, r->peer, k, pb, 0);
		return;
	}
	if (w.opcode == IBV_WR_RDMA_READ) {
		// Responses already placed are not asked for again.
		send_read_request(qp, w, t);
		t.sent = 1;
		r->snd_nxt = psn_add(t.psn, t.npkts);
		if (psn_diff(r->snd_nxt, r->snd_max) > 0)
			r->snd_max = r->snd_nxt;
		return;
	} else {
		uint32_t i = t.sent;
		bool first = i == 0, last = i + 1 == t.npkts;
		uint64_t off = uint64_t(i) * r->mtu;
		plen = uint32_t(std::min<uint64_t>(r->mtu, t.len - off));
		if (plen && !gather(qp, w, off, slot_payload(pb), plen)) {
			t.status = IBV_WC_LOC_PROT_ERR;
			return;
		}
		bool write = w.opcode == IBV_WR_RDMA_WRITE || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
		bool imm = w.opcode == IBV_WR_SEND_WITH_IMM || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
		bool inv = w.opcode == IBV_WR_SEND_WITH_INV;
		uint8_t op;
		if (first && last)
			op = write ? (imm ? kWriteOnlyImm : kWriteOnly)
				   : (imm ? kSendOnlyImm : inv ? kSendOnlyInv : kSendOnly);
		else if (first)
			op = write ? kWriteFirst : kSendFirst;
		else if (last)
			op = write ? (imm ? kWriteLastImm : kWriteLast)
				   : (imm ? kSendLastImm : inv ? kSendLastInv : kSendLast);
		else
			op = write ? kWriteMiddle : kSendMiddle;
		if (inv && last)
			k.ieth = w.imm; // the R_Key the responder invalidates
		k.bth.opcode = tr | op;
		k.bth.psn = psn_add(t.psn, i);
		k.bth.se = last && (w.send_flags & IBV_SEND_SOLICITED);
		// AckReq: the end of a message, every kRoceAckEvery packets, and the
		// packet that fills the flight window (else nothing would answer
		// until the timeout).
		k.bth.ack_req = reliable(qp) &&
				(last || (i + 1) % kRoceAckEvery == 0 ||
				 psn_diff(psn_add(k.bth.psn, 1), r->una) >= int32_t(r->cwnd));
		if (write && first)
			k.reth = {w.remote_addr, w.rkey, t.len};
		if (imm && last)
			k.imm = be32toh(w.imm);
		t.sent++;
		r->snd_nxt = psn_add(k.bth.psn, 1);
		if (psn_diff(r->snd_nxt, r->snd_max) > 0)
			r->snd_max = r->snd_nxt;
	}
	k.flags = opcode_flags(k.bth.opcode);
	xmit_buf(rc, r->src, r->peer, k, pb, plen);
}

// IBV_SEND_FENCE (ibv_post_send(3)): a request so marked starts only when
// every RDMA READ and atomic ahead of it in the send queue (the first k
// requests) is done. Without it a READ whose responses were lost would be
// asked for again after the fenced SEND had told the peer it may reuse the
// buffer, and would read the new bytes.
static bool fence_holds(SoftQp *qp, uint32_t k)
{
	RoceQp *r = qp->roce;
	for (uint32_t i = 0; i < k; i++) {
		uint32_t idx = (qp->sq_head + i) % qp->sq_depth;
		const SoftWr &w = qp->sq[idx];
		if ((w.opcode == IBV_WR_RDMA_READ || is_atomic(w.opcode)) && !r->tx[idx].done &&
		    r->tx[idx].status == IBV_WC_SUCCESS)
			return true;
	}
	return false;
}

// Sends what the window allows, in order.
void pump(SoftQp *qp)
{
	RoceQp *r = qp->roce;
	uint32_t st = qp->entry->state.load(std::memory_order_acquire);
	if (st != IBV_QPS_RTS)
		return;
	if (r->rnr_until_ns && clock_ns() < r->rnr_until_ns)
		return;
	r->rnr_until_ns = 0;
	bool sent = false;
	while (r->next_wr < qp->sq_count) {
		if (reliable(qp) && psn_diff(r->snd_nxt, r->una) >= int32_t(r->cwnd))
			break;
		uint32_t idx = (qp->sq_head + r->next_wr) % qp->sq_depth;
		SoftWr &w = qp->sq[idx];
		RoceTx &t = r->tx[idx];
		if (t.status != IBV_WC_SUCCESS || t.done || (!is_local(w.opcode) && fully_sent(w, t))) {
			r->next_wr++;
			continue;
		}
		if ((w.send_flags & IBV_SEND_FENCE) && t.sent == 0 && fence_holds(qp, r->next_wr))
			break; // pump runs again when a response completes them
		if (is_local(w.opcode)) {
			t.status = run_local_op(qp, w);
			t.done = true;
			r->next_wr++;
			continue;
		}
		send_next_packet(qp, w, t);
		sent = true;
		if (t.status != IBV_WC_SUCCESS || fully_sent(w, t))
			r->next_wr++;
	}
	if (sent && reliable(qp) && !r->deadline_ns) {
		// Longer after each timeout in a row (recovery.h).
		uint64_t to = timeout_ns(qp->attr.timeout);
		int missed = std::max(int(qp->attr.retry_cnt) - r->retry_left, 0);
		arm_timer(qp->ctx->roce, r->deadline_ns,
			  to ? clock_ns() + retransmit_wait_ns(to, uint32_t(missed)) : 0);
	}
	// A waiting acknowledgement goes right behind the requests (a
	// ping-pong's peer reads the request before the ACK it polls for).
	if (sent && r->ack_pending)
		ack_emit(qp);
	complete_ready(qp);
}

// Sends again from PSN `psn` (inside the request at offset k from the head,
// or from the head when no request holds it).
void rewind_to(SoftQp *qp, uint32_t psn)
{
	RoceQp *r = qp->roce;
	uint32_t n = qp->sq_count;
	uint32_t from = 0;
	bool found = false;
	for (uint32_t k = 0; k < n; k++) {
		uint32_t idx = (qp->sq_head + k) % qp->sq_depth;
		RoceTx &t = r->tx[idx];
		if (psn_diff(psn, t.psn) >= 0 && psn_diff(psn, psn_add(t.psn, t.npkts)) < 0) {
			from = k;
			found = true;
			break;
		}
	}
	for (uint32_t k = from; k < n; k++) {
		uint32_t idx = (qp->sq_head + k) % qp->sq_depth;
		SoftWr &w = qp->sq[idx];
		RoceTx &t = r->tx[idx];
		if (w.opcode == IBV_WR_RDMA_READ || is_atomic(w.opcode)) {
			if (!t.done)
				t.sent = 0;
		} else if (k == from && found) {
			t.sent = uint32_t(psn_diff(psn, t.psn));
		} else {
			t.sent = 0;
		}
	}
	r->next_wr = from;
	if (n) {
		uint32_t idx = (qp->sq_head + from) % qp->sq_depth;
		r->snd_nxt = found ? psn : r->tx[idx].psn;
	}
	r->rewind_psn = r->snd_nxt;
	r->rewind_ns = clock_ns();
	r->cwnd = std::max<uint32_t>(r->cwnd / 2, 8);
	r->deadline_ns = 0;
}

void retry_exceeded(SoftQp *qp, enum ibv_wc_status st)
{
	if (qp->sq_count)
		qp->roce->tx[qp->sq_head].status = st;
	complete_ready(qp);
}

// ------------------------------------------------------------------ requester: responses

void on_response(SoftQp *qp, const Packet &k)
{
	RoceQp *r = qp->roce;
	uint32_t psn = k.bth.psn;
	if (r->retry_left < qp->attr.retry_cnt)
		softlog(4, "%s: QP 0x%x: response %s PSN 0x%x syndrome 0x%x (una 0x%x, max 0x%x)",
			qp->ctx->roce->ifname, qp->qpn, opcode_name(k.bth.opcode), psn, k.syndrome,
			r->una, r->snd_max);
	// Nothing answers what was never sent.
	if (psn_diff(psn, r->snd_max) >= 0)
		return;
	auto progress = [&]() {
		if (r->cwnd < qp->ctx->roce->window)
			r->cwnd++;
		r->retry_left = qp->attr.retry_cnt;
		uint64_t to = timeout_ns(qp->attr.timeout);
		arm_timer(qp->ctx->roce, r->deadline_ns, to ? clock_ns() + to : 0);
	};
	if (k.flags & F_READ_RESP) {
		for (uint32_t i = 0; i < qp->sq_count; i++) {
			uint32_t idx = (qp->sq_head + i) % qp->sq_depth;
			SoftWr &w = qp->sq[idx];
			RoceTx &t = r->tx[idx];
			if (psn_diff(psn, t.psn) < 0 || psn_diff(psn, psn_add(t.psn, t.npkts)) >= 0)
				continue;
			if (w.opcode != IBV_WR_RDMA_READ || t.done)
				return; // a duplicate
			if (psn != t.rd_next) {
				// A response was lost: ask again for the rest of this
				// read at once (once per gap: the later responses of the
				// same flight say the same), else the timer recovers.
				if (psn_diff(psn, t.rd_next) > 0 &&
				    !(t.rereq && t.rereq_psn == t.rd_next)) {
					t.rereq = true;
					t.rereq_psn = t.rd_next;
					send_read_request(qp, w, t);
					qp->ctx->roce->retransmits++;
				}
				return;
			}
			uint32_t j = uint32_t(psn_diff(psn, t.psn));
			bool last = j + 1 == t.npkts;
			uint64_t off = uint64_t(j) * r->mtu;
			uint32_t want = uint32_t(std::min<uint64_t>(r->mtu, t.len - off));
			// A read asked for again from the middle is answered from
			// a First (or Only) packet: only the end is checked.
			bool last_ok = last == bool(k.flags & F_LAST);
			if (k.payload_len != want || !last_ok)
				return; // malformed: dropped, the timer recovers
			if (psn_diff(t.psn, r->una) > 0)
				r->una = t.psn; // responses imply the earlier requests were done
			if (want && !sge_copy(qp, w.sge, w.num_sge, off, const_cast<uint8_t *>(k.payload),
					      want, true)) {
				t.status = IBV_WC_LOC_PROT_ERR;
				t.done = true;
			}
			t.rd_next = psn_add(psn, 1);
			if (last) {
				t.done = true;
				if (psn_diff(t.rd_next, r->una) > 0)
					r->una = t.rd_next;
			}
			progress();
			complete_ready(qp);
			pump(qp);
			return;
		}
		return;
	}
	if (!(k.flags & F_AETH))
		return;
	uint8_t kind = k.syndrome & 0x60;
	if ((k.flags & F_ATOMIC_ACK) && kind == kAethAck) {
		for (uint32_t i = 0; i < qp->sq_count; i++) {
			uint32_t idx = (qp->sq_head + i) % qp->sq_depth;
			SoftWr &w = qp->sq[idx];
			RoceTx &t = r->tx[idx];
			if (t.psn != psn)
				continue;
			if (!is_atomic(w.opcode) || t.done)
				return; // a duplicate
			uint64_t orig = k.orig;
			if (!sge_copy(qp, w.sge, w.num_sge, 0, reinterpret_cast<uint8_t *>(&orig), 8, true))
				t.status = IBV_WC_LOC_PROT_ERR;
			t.done = true;
			if (psn_diff(psn_add(psn, 1), r->una) > 0)
				r->una = psn_add(psn, 1);
			progress();
			complete_ready(qp);
			pump(qp);
			return;
		}
		return;
	}
	if (kind == kAethAck) {
		uint32_t next = psn_add(psn, 1);
		if (psn_diff(next, r->una) > 0) {
			r->una = next;
			progress();
		}
		complete_ready(qp);
		pump(qp);
		return;
	}
	// RNR NAK and NAK name the PSN that was refused: everything before it
	// was done, which is progress for the retry count (recovery.h).
	if (acknowledges_new(psn, r->una)) {
		r->una = psn;
		r->retry_left = qp->attr.retry_cnt;
	}
	complete_ready(qp);
	if (!qp->sq_count)
		return;
	if (kind == kAethRnr) {
		if (psn_diff(psn, r->una) < 0)
			return; // late or duplicated: the responder took psn since
		if (r->rnr_left == 0)
			return retry_exceeded(qp, IBV_WC_RNR_RETRY_EXC_ERR);
		if (r->rnr_left != 7)
			r->rnr_left--;
		rewind_to(qp, psn);
		arm_timer(qp->ctx->roce, r->rnr_until_ns,
			  clock_ns() + uint64_t(kRnrTimer10us[k.syndrome & 31]) * 10000ull);
		qp->ctx->roce->retransmits++;
		return;
	}
	if (kind == kAethNak) {
		switch (k.syndrome & 0x1f) {
		case kNakPsnSeq:
			if (!nak_goes_back({r->una, r->rewind_ns != 0, r->rewind_psn, r->rewind_ns}, psn,
					   clock_ns())) {
				pump(qp); // already being sent again; the window may have opened
				return;
			}
			rewind_to(qp, psn);
			qp->ctx->roce->retransmits++;
			pump(qp);
			return;
		case kNakInvalidRequest:
			return retry_exceeded(qp, IBV_WC_REM_INV_REQ_ERR);
		case kNakRemoteAccess:
			return retry_exceeded(qp, IBV_WC_REM_ACCESS_ERR);
		case kNakRemoteOp:
			return retry_exceeded(qp, IBV_WC_REM_OP_ERR);
		case kNakInvalidRdRequest:
			return retry_exceeded(qp, IBV_WC_REM_INV_RD_REQ_ERR);
		default:
			return;
		}
	}
}

// ------------------------------------------------------------------ responder

RingHeader *recv_ring(SoftQp *qp)
{
	if (qp->type == IBV_QPT_XRC_RECV)
		return qp->roce->xrc_ring; // the request's SRQ (xrc_target)
	return qp->srq ? qp->srq->ring : qp->rq;
}

// Takes the next receive request into r->recv_*. False when none is posted.
bool take_recv(SoftQp *qp)
{
	RoceQp *r = qp->roce;
	RingHeader *ring = recv_ring(qp);
	if (!ring)
		return false;
	alignas(8) uint8_t buf[sizeof(RecvWqe) + kMaxSge * sizeof(struct ibv_sge)];
	if (!ring_pop(ring, buf, sizeof(buf)))
		return false;
	Segment *seg = qp->ctx->seg;
	if (qp->type == IBV_QPT_XRC_RECV) {
		// The WQE completes on its SRQ's CQ, and its SRQ's PD checks
		// its scatter list (xrc_target checked both).
		SrqEntry &e = seg->hdr->srqs[r->xrc_srq];
		srq_limit_check(seg, e, ring);
		r->recv_cq = e.cq - 1;
		r->recv_pd = r->xrc_pd;
		r->recv_owner = r->xrc_owner;
		r->recv_pid = r->xrc_pid;
	} else if (qp->srq && qp->srq->slot < kMaxSrqs) { // limit events as on the shared-memory device
		srq_limit_check(seg, seg->hdr->srqs[qp->srq->slot], ring);
	}
	auto *wqe = reinterpret_cast<RecvWqe *>(buf);
	uint32_t n = wqe->num_sge;
	uint32_t fit = (ring->cell_size - 8 - sizeof(RecvWqe)) / sizeof(struct ibv_sge);
	if (n > fit || n > kMaxSge)
		n = 0;
	r->recv_wr_id = wqe->wr_id;
	r->recv_nsge = n;
	memcpy(r->recv_sge, wqe->sge, n * sizeof(struct ibv_sge));
	r->recv_off = 0;
	r->recv_status = IBV_WC_SUCCESS;
	return true;
}

// The receive request for a new message: the one kept from a message UC
// dropped, else the next posted one.
bool next_recv(SoftQp *qp)
{
	RoceQp *r = qp->roce;
	if (r->recv_held) {
		r->recv_held = false;
		r->recv_off = 0;
		r->recv_status = IBV_WC_SUCCESS;
		return true;
	}
	return take_recv(qp);
}

bool have_recv(SoftQp *qp)
{
	RingHeader *ring = recv_ring(qp);
	return qp->roce->recv_held || (ring && ring_count(ring));
}

uint64_t recv_capacity(const RoceQp *r)
{
	uint64_t c = 0;
	for (uint32_t i = 0; i < r->recv_nsge; i++)
		c += r->recv_sge[i].length;
	return c;
}

void recv_place(SoftQp *qp, const uint8_t *data, uint32_t len)
{
	RoceQp *r = qp->roce;
	if (r->recv_status == IBV_WC_SUCCESS && len) {
		if (r->recv_off + len > recv_capacity(r))
			r->recv_status = IBV_WC_LOC_LEN_ERR;
		else if (!sge_copy(qp, r->recv_sge, r->recv_nsge, r->recv_off, const_cast<uint8_t *>(data),
				   len, true))
			r->recv_status = IBV_WC_LOC_PROT_ERR;
	}
	r->recv_off += len;
}

void recv_complete(SoftQp *qp, enum ibv_wc_opcode op, uint32_t byte_len, const Packet &k,
		   uint32_t src_qp, uint32_t extra_flags)
{
	RoceQp *r = qp->roce;
	struct ibv_wc wc = {};
	wc.wr_id = r->recv_wr_id;
	wc.status = r->recv_status;
	wc.opcode = op;
	wc.byte_len = r->recv_status == IBV_WC_SUCCESS ? byte_len : 0;
	wc.qp_num = qp->qpn;
	wc.src_qp = src_qp;
	wc.wc_flags = extra_flags;
	if (k.flags & F_IMM) {
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = htobe32(k.imm);
	} else if ((k.flags & F_IETH) && r->recv_status == IBV_WC_SUCCESS) {
		wc.wc_flags |= IBV_WC_WITH_INV;
		wc.invalidated_rkey = k.ieth;
	}
	uint32_t cq = qp->type == IBV_QPT_XRC_RECV ? r->recv_cq : qp->rcq->slot;
	cq_push(qp->ctx->seg, cq, wc, k.bth.se);
}

// Serves an RDMA READ request (first time or again): the responses carry
// the request's PSNs. False when the key does not allow it.
bool serve_read(SoftQp *qp, const Packet &k)
{
	RoceQp *r = qp->roce;
	RoceCtx *rc = qp->ctx->roce;
	uint32_t len = k.reth.len;
	Span sp;
	if (len && !remote_span(qp, k.reth.rkey, k.reth.va, len, IBV_ACCESS_REMOTE_READ, &sp))
		return false;
	if (r->ack_pending)
		ack_emit(qp); // responses in PSN order
	uint32_t n = packets_for(len, r->mtu);
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *pb = tx_slot(rc);
		uint64_t off = uint64_t(i) * r->mtu;
		uint32_t plen = uint32_t(std::min<uint64_t>(r->mtu, len - off));
		// Checked again for every packet: the region may change meanwhile.
		if (plen && (!remote_span(qp, k.reth.rkey, k.reth.va + off, plen,
					  IBV_ACCESS_REMOTE_READ, &sp) ||
			     !span_copy(sp, slot_payload(pb), plen, false)))
			return false;
		Packet o;
		bool first = i == 0, last = i + 1 == n;
		uint8_t op = first && last ? kReadRespOnly
			     : first	   ? kReadRespFirst
			     : last	   ? kReadRespLast
					   : kReadRespMiddle;
		o.bth.opcode = rc_transport(qp) | op;
		o.flags = opcode_flags(o.bth.opcode);
		o.bth.dqpn = qp->attr.dest_qp_num;
		o.bth.psn = psn_add(k.bth.psn, i);
		o.syndrome = kAethNoCredit;
		o.msn = r->msn;
		xmit_buf(rc, r->src, r->peer, o, pb, plen);
	}
	return true;
}

void send_atomic_ack(SoftQp *qp, uint32_t psn, uint64_t orig)
{
	send_aeth(qp, kAtomicAck, psn, kAethNoCredit, orig);
}

enum Verdict { V_DONE, V_RNR, V_NAK_INV, V_NAK_ACCESS, V_NAK_OP, V_DROP };

// Runs an in-sequence request packet.
Verdict execute(SoftQp *qp, const Packet &k)
{
	RoceQp *r = qp->roce;
	uint32_t f = k.flags;
	bool first = f & F_FIRST, last = f & F_LAST;
	uint32_t len = k.payload_len;
	if ((f & F_PAYLOAD) && (len > r->mtu || (!last && len != r->mtu)))
		return V_NAK_INV;
	if (f & F_SEND) {
		// SEND with invalidate: the R_Key must name a bound type 2
		// window of this process (of an XRC receive QP: of the SRQ's
		// process) (IBTA 10.6.7.2.4; rxe answers anything
		// else as an invalid request, and so does this device, before the
		// receive is touched when the message is one packet).
		KeySnap inv = {};
		uint32_t inv_owner =
			qp->type == IBV_QPT_XRC_RECV ? r->xrc_owner : qp->ctx->seg->my_proc;
		if ((f & F_IETH) &&
		    (!key_read(qp->ctx->seg, k.ieth, inv) || inv.kind != KEY_MW ||
		     inv.owner != inv_owner || inv.mw_type != IBV_MW_TYPE_2 || !inv.parent))
			return V_NAK_INV;
		if (first) {
			if (r->in_send || r->in_write)
				return V_NAK_INV;
			if (!next_recv(qp))
				return V_RNR;
			r->in_send = true;
		} else if (!r->in_send) {
			return V_NAK_INV;
		}
		recv_place(qp, k.payload, len);
		if (last) {
			r->in_send = false;
			r->msn = psn_add(r->msn, 1);
			enum ibv_wc_status st = r->recv_status;
			if ((f & F_IETH) && st == IBV_WC_SUCCESS)
				invalidate_window(inv);
			recv_complete(qp, IBV_WC_RECV, uint32_t(r->recv_off), k, qp->attr.dest_qp_num, 0);
			if (st == IBV_WC_LOC_LEN_ERR)
				return V_NAK_INV;
			if (st != IBV_WC_SUCCESS)
				return V_NAK_OP;
		}
		return V_DONE;
	}
	if (f & F_WRITE) {
		if (first) {
			if (r->in_send || r->in_write)
				return V_NAK_INV;
			Span sp;
			if (k.reth.len && !remote_span(qp, k.reth.rkey, k.reth.va, k.reth.len,
						       IBV_ACCESS_REMOTE_WRITE, &sp))
				return V_NAK_ACCESS;
			if (last && (f & F_IMM) && !have_recv(qp))
				return V_RNR;
			r->in_write = true;
			r->write_va = k.reth.va;
			r->write_rkey = k.reth.rkey;
			r->write_left = k.reth.len;
			r->write_total = k.reth.len;
		} else if (!r->in_write) {
			return V_NAK_INV;
		}
		if (len > r->write_left || (last && len != r->write_left))
			return V_NAK_INV;
		if (last && (f & F_IMM) && !first && !have_recv(qp))
			return V_RNR;
		if (len) {
			Span sp;
			if (!remote_span(qp, r->write_rkey, r->write_va, len, IBV_ACCESS_REMOTE_WRITE, &sp) ||
			    !span_copy(sp, const_cast<uint8_t *>(k.payload), len, true))
				return V_NAK_ACCESS;
		}
		r->write_va += len;
		r->write_left -= len;
		if (last) {
			r->in_write = false;
			r->msn = psn_add(r->msn, 1);
			if (f & F_IMM) {
				if (!next_recv(qp))
					return V_RNR; // checked above: not reached
				recv_complete(qp, IBV_WC_RECV_RDMA_WITH_IMM, r->write_total, k,
					      qp->attr.dest_qp_num, 0);
			}
		}
		return V_DONE;
	}
	if (f & F_READ_REQ) {
		if (r->in_send || r->in_write)
			return V_NAK_INV;
		r->msn = psn_add(r->msn, 1);
		if (!serve_read(qp, k)) {
			r->msn = psn_add(r->msn, kPsnMask);
			return V_NAK_ACCESS;
		}
		return V_DONE;
	}
	if (f & F_ATOMIC_REQ) {
		if (r->in_send || r->in_write)
			return V_NAK_INV;
		if (k.atomic.va & 7)
			return V_NAK_INV; // not naturally aligned
		Span sp;
		if (!remote_span(qp, k.atomic.rkey, k.atomic.va, 8, IBV_ACCESS_REMOTE_ATOMIC, &sp))
			return V_NAK_ACCESS;
		bool cas = (k.bth.opcode & 0x1f) == kCompareSwap;
		uint64_t orig = 0;
		// Under the device's atomic lock, as every requester of the
		// shared-memory device and every responder of this one: an XRC
		// receive QP may reach another process's word, mapped here or not
		// (then read and written with process_vm_*).
		SegmentHeader *h = qp->ctx->seg->hdr;
		shm_lock(&h->atomic_lock);
		bool ok = true;
		if (sp.direct) {
			auto *p = reinterpret_cast<uint64_t *>(sp.direct);
			if (cas) {
				orig = k.atomic.compare;
				__atomic_compare_exchange_n(p, &orig, k.atomic.swap_add, false,
							    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
			} else {
				orig = __atomic_fetch_add(p, k.atomic.swap_add, __ATOMIC_SEQ_CST);
			}
		} else if ((ok = span_copy(sp, reinterpret_cast<uint8_t *>(&orig), 8, false))) {
			uint64_t val = cas ? (orig == k.atomic.compare ? k.atomic.swap_add : orig)
					   : orig + k.atomic.swap_add;
			if (val != orig || !cas)
				ok = span_copy(sp, reinterpret_cast<uint8_t *>(&val), 8, true);
		}
		shm_unlock(&h->atomic_lock);
		if (!ok)
			return V_NAK_ACCESS;
		r->msn = psn_add(r->msn, 1);
		RoceQp::AtomicDone &e = r->replay[r->replay_next++ % kRoceAtomicReplay];
		e = {k.bth.psn, true, orig};
		send_atomic_ack(qp, k.bth.psn, orig);
		return V_DONE;
	}
	return V_NAK_INV;
}

// A request to XRC receive QP qp names the XRC SRQ it is for (XRCETH): the
// SRQ must be live and an XRC SRQ of the QP's XRC domain; it may be another
// process's (the receive work of the QP, which runs in the process that
// made it, then reaches that process's memory: local_span, remote_span).
// Sets xrc_ring, xrc_srq, xrc_pd and xrc_owner/xrc_pid; false (logged) when
// the request names no SRQ it may use: the requester gets an Invalid
// Request NAK, as from an HCA for a bad XRCETH.
bool xrc_target(SoftQp *qp, const Packet &k)
{
	RoceQp *r = qp->roce;
	Segment *seg = qp->ctx->seg;
	r->xrc_ring = nullptr;
	r->xrc_pd = 0;
	uint32_t s = k.xrc_srqn - kSrqnBase;
	const char *why = nullptr;
	if (k.xrc_srqn < kSrqnBase || s >= kMaxSrqs) {
		why = "no such SRQ";
	} else {
		SrqEntry &e = seg->hdr->srqs[s];
		if (e.slot.load(std::memory_order_acquire) != SLOT_LIVE || e.error.load())
			why = "no such SRQ";
		else if (e.srq_type != IBV_SRQT_XRC)
			why = "not an XRC SRQ";
		else if (e.xrcd != qp->entry->xrcd)
			why = "of another XRC domain";
		else if (!(r->xrc_ring = seg->ring(e.ring)))
			why = "its ring cannot be reached";
		else {
			r->xrc_srq = s;
			r->xrc_pd = e.pd_id;
			r->xrc_owner = e.owner;
			r->xrc_pid = e.owner_pid;
			return true;
		}
	}
	softlog(3, "%s: XRC receive QP 0x%x: %s names XRC SRQ 0x%x: %s", qp->ctx->roce->ifname,
		qp->qpn, opcode_name(k.bth.opcode), k.xrc_srqn, why);
	return false;
}

void on_request_rc(SoftQp *qp, const Packet &k)
{
	RoceQp *r = qp->roce;
	int32_t d = psn_diff(k.bth.psn, r->epsn);
	// A request to an XRC receive QP: its SRQ first (a duplicate READ is
	// served again through that SRQ's PD).
	bool target_ok = qp->type != IBV_QPT_XRC_RECV || d > 0 || xrc_target(qp, k);
	if (r->retry_left < qp->attr.retry_cnt)
		softlog(4, "%s: QP 0x%x: request %s PSN 0x%x (expected 0x%x)", qp->ctx->roce->ifname,
			qp->qpn, opcode_name(k.bth.opcode), k.bth.psn, r->epsn);
	if (d > 0) {
		// A gap: NAK once, drop until the expected PSN comes.
		uint64_t now = clock_ns();
		if (!r->nak_sent || ns_since(now, r->nak_ns) > kRoceNakRepeatNs) {
			send_aeth(qp, kAck, r->epsn, kAethNak | kNakPsnSeq);
			r->nak_sent = true;
			r->nak_ns = now;
		}
		return;
	}
	if (d < 0) {
		// A duplicate: done already. READs are served again; the rest
		// are acknowledged again (the ACK was lost), up to the last SEND
		// or WRITE packet (send_ack: plain_ack_psn).
		if (!target_ok)
			return;
		if (k.flags & F_READ_REQ) {
			serve_read(qp, k);
		} else if (k.flags & F_ATOMIC_REQ) {
			// Executed already: answered from the replay cache, never
			// executed twice (too old to be remembered: dropped).
			for (const auto &e : r->replay)
				if (e.valid && e.psn == k.bth.psn) {
					send_atomic_ack(qp, e.psn, e.orig);
					break;
				}
		} else {
			send_ack(qp);
		}
		return;
	}
	r->nak_sent = false;
	Verdict v = target_ok ? execute(qp, k) : V_NAK_INV;
	switch (v) {
	case V_DONE:
		if (k.flags & F_READ_REQ) {
			r->epsn = psn_add(r->epsn, packets_for(k.reth.len, r->mtu));
		} else {
			r->epsn = psn_add(r->epsn, 1);
			if (!(k.flags & F_ATOMIC_REQ)) {
				r->plain_ack_psn = k.bth.psn;
				r->plain_ack_msn = r->msn;
			}
		}
		if (k.bth.ack_req && !(k.flags & (F_READ_REQ | F_ATOMIC_REQ)))
			send_ack(qp, (k.flags & F_FIRST) && (k.flags & F_LAST));
		return;
	case V_RNR:
		send_aeth(qp, kAck, k.bth.psn, kAethRnr | (qp->attr.min_rnr_timer & 31));
		return;
	case V_DROP:
		return;
	case V_NAK_INV:
	case V_NAK_ACCESS:
	case V_NAK_OP: {
		uint8_t code = v == V_NAK_INV ? kNakInvalidRequest
			       : v == V_NAK_ACCESS ? kNakRemoteAccess
						   : kNakRemoteOp;
		softlog(3, "%s: QP 0x%x: %s PSN 0x%x (%u bytes) refused with NAK %s; the QP goes to "
			   "the error state (message in progress: send %d, write %d with %llu bytes "
			   "left; path MTU %u)",
			qp->ctx->roce->ifname, qp->qpn, opcode_name(k.bth.opcode), k.bth.psn,
			k.payload_len,
			v == V_NAK_INV ? "invalid request" : v == V_NAK_ACCESS ? "remote access" : "remote operation",
			r->in_send, r->in_write, (unsigned long long)r->write_left, r->mtu);
		send_aeth(qp, kAck, k.bth.psn, kAethNak | code);
		qp_error(qp);
		return;
	}
	}
}

void on_request_uc(SoftQp *qp, const Packet &k)
{
	RoceQp *r = qp->roce;
	if (k.bth.psn != r->epsn) {
		// Lost packets: the message in progress is dropped (its receive
		// request is used by the next message), start over at a first.
		r->in_write = false;
		if (r->in_send) {
			r->in_send = false;
			r->recv_held = true; // used by the next message
		}
		if (!(k.flags & F_FIRST)) {
			r->epsn = psn_add(k.bth.psn, 1);
			return;
		}
		r->epsn = k.bth.psn;
	}
	r->epsn = psn_add(r->epsn, 1);
	Verdict v = execute(qp, k);
	if (v != V_DONE) {
		// UC has no NAK: the message is dropped.
		if (r->in_send)
			r->recv_held = true;
		r->in_send = r->in_write = false;
	}
}

void write_grh(uint8_t grh[40], const IpMeta &ip, uint32_t udp_payload)
{
	memset(grh, 0, 40);
	if (ip.v6) {
		grh[0] = 0x60;
		grh[4] = uint8_t((udp_payload + 8) >> 8);
		grh[5] = uint8_t(udp_payload + 8);
		grh[6] = 17;
		grh[7] = 64;
		memcpy(grh + 8, ip.src, 16);
		memcpy(grh + 24, ip.dst, 16);
	} else {
		uint8_t *h = grh + 20; // IPv4 header in the last 20 bytes
		uint32_t tot = 20 + 8 + udp_payload;
		h[0] = 0x45;
		h[2] = uint8_t(tot >> 8);
		h[3] = uint8_t(tot);
		h[6] = 0x40;
		h[8] = 64;
		h[9] = 17;
		memcpy(h + 12, ip.src, 4);
		memcpy(h + 16, ip.dst, 4);
		uint32_t sum = 0;
		for (int i = 0; i < 20; i += 2)
			sum += uint32_t(h[i] << 8 | h[i + 1]);
		while (sum >> 16)
			sum = (sum & 0xffff) + (sum >> 16);
		h[10] = uint8_t(~sum >> 8);
		h[11] = uint8_t(~sum);
	}
}

void on_ud(RoceCtx *rc, SoftQp *qp, const Packet &k, const IpMeta &ip, size_t datagram)
{
	if (k.deth.qkey != qp->attr.qkey) {
		rc->drops[D_QKEY]++;
		return;
	}
	if (!take_recv(qp)) {
		rc->drops[D_STATE]++; // no receive posted: UD drops it
		return;
	}
	RoceQp *r = qp->roce;
	uint8_t grh[40];
	write_grh(grh, ip, uint32_t(datagram));
	recv_place(qp, grh, 40);
	recv_place(qp, k.payload, k.payload_len);
	recv_complete(qp, IBV_WC_RECV, 40 + k.payload_len, k, k.deth.src_qpn, IBV_WC_GRH);
	(void)r;
}

// A multicast datagram (destination QP kRoceMcastQpn) for group `gid` (its
// destination address, as an MGID): a copy to each UD QP of the device
// attached to the group and able to receive (rc->lock held). False when
// none is.
static bool mcast_deliver(RoceCtx *rc, const uint8_t gid[16], const Packet &k, const IpMeta &ip,
			  size_t datagram)
{
	bool any = false;
	for (uint32_t g = 0; g < rc->ngroups; g++) {
		RoceCtx::Group &G = rc->groups[g];
		if (memcmp(G.gid, gid, 16))
			continue;
		for (uint32_t i = 0; i < G.nqps; i++) {
			SoftQp *qp = G.qps[i];
			uint32_t st = qp->entry->state.load(std::memory_order_acquire);
			if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD)
				continue;
			on_ud(rc, qp, k, ip, datagram);
			any = true;
		}
	}
	return any;
}

// ------------------------------------------------------------------ receive

// An IPv4 datagram's identification is not visible through a UDP socket
// (icrc_check tries 0, then solves for it). A connected QP counts its peer's
// datagrams in a row that checked with 0; after kRoceZeroIdRun of them a
// datagram that needs an identification of kRoceGsoSegs or more is dropped
// as damaged (and the count starts again). Smaller ones are what such a
// peer's GSO trains carry (the kernel numbers a train's datagrams 0, 1, 2,
// ...): they neither count nor end the run. This takes the chance that
// damage passes from 2^-16 to about 2^-26 (a solvable difference, 64 of the
// 65536 identifications) for such peers.
void note_ip_id(RoceQp *r, const IpMeta &ip, bool solved, uint16_t id)
{
	if (solved && id >= kRoceGsoSegs) {
		r->zero_id_run = 0;
	} else if (solved) {
		// A datagram of a GSO train from a peer that sends 0 otherwise.
	} else if (!ip.v6 && r->zero_id_run < kRoceZeroIdRun) {
		r->zero_id_run++;
	}
}

// A datagram's destination address (IPv4-mapped for IPv4) and the
// interface it arrived on, from its packet information (IPV6_PKTINFO,
// IP_PKTINFO); ifindex 0 when there is none.
void arrival(const struct msghdr &msg, uint8_t dst[16], int *ifindex)
{
	memset(dst, 0, 16);
	*ifindex = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(const_cast<struct msghdr *>(&msg)); c;
	     c = CMSG_NXTHDR(const_cast<struct msghdr *>(&msg), c)) {
		if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
			struct in6_pktinfo pi;
			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			memcpy(dst, &pi.ipi6_addr, 16);
			*ifindex = int(pi.ipi6_ifindex);
		} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;
			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			memset(dst, 0, 10);
			dst[10] = dst[11] = 0xff;
			memcpy(dst + 12, &pi.ipi_addr, 4);
			*ifindex = pi.ipi_ifindex;
		}
	}
}

void handle(RoceCtx *rc, uint8_t *p, size_t n, const struct msghdr &msg)
{
	rc->rx_packets++;
	if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		rc->drops[D_LENGTH]++;
		return;
	}
	auto *from = static_cast<const struct sockaddr_in6 *>(msg.msg_name);
	const uint8_t *s = reinterpret_cast<const uint8_t *>(&from->sin6_addr);
	uint8_t dst[16];
	int ifindex;
	arrival(msg, dst, &ifindex);
	if (ifindex != rc->ifindex) {
		rc->drops[D_SOURCE]++;
		return;
	}
	if (n < kBthBytes + kIcrcBytes) {
		rc->drops[D_SHORT]++;
		return;
	}
	IpMeta ip;
	bool v4 = is_v4_mapped(s);
	ip.v6 = !v4;
	memcpy(ip.src, v4 ? s + 12 : s, v4 ? 4 : 16);
	memcpy(ip.dst, v4 ? dst + 12 : dst, v4 ? 4 : 16);
	ip.sport = ntohs(from->sin6_port);
	ip.dport = kRoceV2Port;
	bool solved = false;
	uint16_t ip_id = 0;
	if (!icrc_check(ip, p, n, &solved, &ip_id)) {
		rc->drops[D_ICRC]++;
		return;
	}
	if (solved)
		rc->icrc_solved++;
	Packet k;
	Drop d = decode(p, n, &k);
	if (d != D_OK) {
		rc->drops[d]++;
		return;
	}
	uint32_t qpn = k.bth.dqpn;
	uint32_t slot = qpn - kQpnBase;
	pthread_mutex_lock(&rc->lock);
	if (qpn == kRoceMcastQpn) {
		if ((k.bth.opcode & 0xe0) != kUD || !mcast_deliver(rc, dst, k, ip, n))
			rc->drops[D_QPN]++;
		pthread_mutex_unlock(&rc->lock);
		return;
	}
	SoftQp *qp = qpn == kRoceGsiQpn	       ? rc->gsi
		     : qpn >= kQpnBase && slot < kMaxQps ? rc->by_slot[slot]
							 : nullptr;
	uint8_t tr = k.bth.opcode & 0xe0;
	uint8_t want = !qp ? 0xff
		       : qp->type == IBV_QPT_RC ? kRC
		       : qp->type == IBV_QPT_UC ? kUC
		       : qp->type == IBV_QPT_UD ? kUD
		       : is_xrc(qp)		? kXRC
						: 0xff;
	// An XRC send QP takes responses only, an XRC receive QP requests only.
	if (qp && ((qp->type == IBV_QPT_XRC_SEND && (k.flags & F_REQUEST)) ||
		   (qp->type == IBV_QPT_XRC_RECV && !(k.flags & F_REQUEST))))
		want = 0xff;
	if (!qp || tr != want) {
		rc->drops[D_QPN]++;
	} else {
		uint32_t st = qp->entry->state.load(std::memory_order_acquire);
		bool req = k.flags & F_REQUEST;
		bool ok = req ? (st == IBV_QPS_RTR || st == IBV_QPS_RTS || st == IBV_QPS_SQD)
			      : (st == IBV_QPS_RTS || st == IBV_QPS_SQD);
		RoceQp *r = qp->roce;
		if (!ok) {
			rc->drops[D_STATE]++;
		} else if (qp->type == IBV_QPT_UD) {
			on_ud(rc, qp, k, ip, n);
		} else if (memcmp(&r->peer.sin6_addr, s, 16) != 0) {
			rc->drops[D_SOURCE]++;
		} else if (solved && r->zero_id_run >= kRoceZeroIdRun && ip_id >= kRoceGsoSegs) {
			// This peer sends identification 0 (as Linux does for
			// datagrams with DF and no connected socket), or the small
			// numbers of a GSO train's datagrams: a CRC that needs
			// another one is damage, not a NIC's counter.
			r->zero_id_run = 0;
			rc->drops[D_ICRC]++;
		} else if (req) {
			note_ip_id(r, ip, solved, ip_id);
			if (reliable(qp))
				on_request_rc(qp, k);
			else
				on_request_uc(qp, k);
		} else if (reliable(qp)) {
			note_ip_id(r, ip, solved, ip_id);
			on_response(qp, k);
		} else {
			rc->drops[D_OPCODE]++;
		}
	}
	pthread_mutex_unlock(&rc->lock);
}

// Handles the datagram held back by the fault-injection point. rx_lock held.
void release_held(RoceCtx *rc)
{
	RoceFaultState *f = rc->fault.get();
	if (!f || !f->held_len)
		return;
	struct iovec iov = {f->held, f->held_len};
	struct msghdr m = {};
	m.msg_name = &f->held_name;
	m.msg_namelen = sizeof(f->held_name);
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = f->held_ctl_len ? f->held_ctl : nullptr;
	m.msg_controllen = f->held_ctl_len;
	m.msg_flags = f->held_flags;
	size_t n = f->held_len;
	f->held_len = 0;
	rc->fault_held.store(false, std::memory_order_relaxed);
	handle(rc, f->held, n, m);
}

// A datagram held back longer than this is handled even though no other
// came after it (the receive thread and roce_drain look).
constexpr uint64_t kRoceHoldNs = 1000000;

// The fault-injection point (faults(), tests only) in front of handle: the
// datagram is dropped (counted as D_FILTERED), gets one bit flipped (the
// ICRC check must then drop it: D_ICRC), is held back until the next one
// has been handled (reordering), or is handled twice (duplication); the
// draws are independent. rx_lock held.
void inject(RoceCtx *rc, uint8_t *p, size_t n, const struct msghdr &msg)
{
	const Faults &fs = faults();
	if (!fs.any) {
		handle(rc, p, n, msg);
		return;
	}
	if (!rc->fault) {
		rc->fault.reset(new (std::nothrow) RoceFaultState());
		if (!rc->fault) {
			handle(rc, p, n, msg);
			return;
		}
	}
	if (!rc->fault_rng)
		rc->fault_rng = (uint64_t(g_pid) << 32 ^ now_ns()) | 1;
	RoceFaultState *f = rc->fault.get();
	if (fs.loss > 0 && fault_draw(rc) < fs.loss) {
		rc->rx_packets++;
		rc->drops[D_FILTERED]++;
		return;
	}
	if (fs.corrupt > 0 && n > 5 && fault_draw(rc) < fs.corrupt) {
		// Any bit but those of the BTH's reserved byte (4), which the
		// ICRC leaves out: a change there is no damage.
		size_t bit = size_t(fault_draw(rc) * double((n - 1) * 8));
		size_t at = bit / 8 >= 4 ? bit / 8 + 1 : bit / 8;
		p[at] ^= uint8_t(1u << (bit % 8));
		rc->corrupted++;
	}
	bool twice = fs.duplicate > 0 && fault_draw(rc) < fs.duplicate;
	if (fs.reorder > 0 && !f->held_len && fault_draw(rc) < fs.reorder &&
	    msg.msg_controllen <= sizeof(f->held_ctl)) {
		memcpy(f->held, p, n);
		f->held_len = n;
		f->held_ns = clock_ns();
		memcpy(&f->held_name, msg.msg_name, sizeof(f->held_name));
		f->held_flags = msg.msg_flags;
		f->held_ctl_len = msg.msg_controllen;
		if (msg.msg_controllen)
			memcpy(f->held_ctl, msg.msg_control, msg.msg_controllen);
		rc->fault_held.store(true, std::memory_order_relaxed);
		rc->reordered++;
		return;
	}
	if (twice)
		memcpy(f->copy, p, n);
	handle(rc, p, n, msg);
	if (twice) {
		rc->duplicated++;
		handle(rc, f->copy, n, msg);
	}
	release_held(rc);
}

// The destination QP of the packet at p (its BTH).
uint32_t bth_dqpn(const uint8_t *p) { return uint32_t(p[5]) << 16 | uint32_t(p[6]) << 8 | p[7]; }

// Several processes on the device (share.cpp): a datagram this process's
// socket read for a QP of another process goes to that process, whole
// when it is a train of packets all for that QP, else packet by packet.
// True when it was handed on (or lost on the way, as on a wire); false
// when it is this process's to handle (or to drop: no process has an
// endpoint for it).
bool hand_on(RoceCtx *rc, uint8_t *p, size_t len, size_t seg, const struct msghdr &msg)
{
	if (len < kBthBytes || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
		return false;
	uint32_t qpn = bth_dqpn(p);
	int t = roce_share_target(rc, p, seg);
	// (A train of MADs for QP1 may be for several processes: by packet.)
	bool uniform = qpn != kRoceGsiQpn || seg >= len;
	for (size_t off = seg; off < len && uniform; off += seg)
		uniform = len - off >= kBthBytes && bth_dqpn(p + off) == qpn;
	if (!t && uniform)
		return false;
	uint8_t dst[16];
	int ifindex;
	arrival(msg, dst, &ifindex);
	if (ifindex != rc->ifindex)
		return false; // not of this interface: dropped here
	const auto &from = *static_cast<const struct sockaddr_in6 *>(msg.msg_name);
	if (uniform)
		return roce_share_send(rc, t, p, len, seg, from, dst, ifindex) >= 0;
	// A train of packets for several QPs (two peer QPs whose datagrams
	// share their addresses and ports) or processes: each packet to its
	// own process.
	for (size_t off = 0; off < len; off += seg) {
		size_t n = std::min(seg, len - off);
		int to = roce_share_target(rc, p + off, n);
		if (to && roce_share_send(rc, to, p + off, n, n, from, dst, ifindex) >= 0)
			continue;
		if (n > kRoceMaxDatagram)
			rc->rx_packets++, rc->drops[D_LENGTH]++;
		else
			inject(rc, p + off, n, msg);
	}
	return true;
}

// One datagram read from the socket (or handed on by another process,
// `handed`): a train that UDP_GRO kept whole (packets of `seg` bytes, the
// last one may be shorter) is cut into its packets, each a datagram of its
// own. rx_lock held.
void take_datagram(RoceCtx *rc, uint8_t *p, size_t len, size_t seg, const struct msghdr &msg,
		   bool handed)
{
	if (!seg || seg > len)
		seg = len;
	if (!handed && hand_on(rc, p, len, seg, msg))
		return;
	size_t off = 0;
	do {
		size_t n = std::min(seg, len - off);
		if (n > kRoceMaxDatagram) {
			rc->rx_packets++;
			rc->drops[D_LENGTH]++;
		} else {
			inject(rc, p + off, n, msg);
		}
		off += n;
	} while (off < len);
}

// Handles the datagrams other processes handed to this one's endpoint, at
// most a batch's worth, each read into buf (kRoceRxBuffer bytes: rx_bufs
// once the batch read from the socket is done, else side_buf). Returns how
// many. rx_lock held.
int drain_handed(RoceCtx *rc, uint8_t *buf)
{
	int total = 0;
	for (int i = 0; rc->fwd_fd >= 0 && i < kRoceBatch; i++) {
		RoceFwdMeta m;
		ssize_t n = roce_share_recv(rc, rc->fwd_fd, buf, kRoceRxBuffer, &m);
		if (n < 0)
			break;
		if (n == 0)
			continue;
		union {
			char b[CMSG_SPACE(sizeof(struct in6_pktinfo))];
			struct cmsghdr align;
		} ctl = {};
		struct msghdr msg = {};
		msg.msg_name = &m.from;
		msg.msg_namelen = sizeof(m.from);
		msg.msg_control = ctl.b;
		msg.msg_controllen = sizeof(ctl.b);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = IPPROTO_IPV6;
		c->cmsg_type = IPV6_PKTINFO;
		c->cmsg_len = CMSG_LEN(sizeof(struct in6_pktinfo));
		struct in6_pktinfo pi = {};
		memcpy(&pi.ipi6_addr, m.dst, 16);
		pi.ipi6_ifindex = unsigned(m.ifindex);
		memcpy(CMSG_DATA(c), &pi, sizeof(pi));
		take_datagram(rc, buf, size_t(n), m.gro_seg, msg, true);
		total++;
	}
	return total;
}

// A datagram read from the socket (msg, len bytes): the size of its packets
// when it is a train that UDP_GRO kept whole, else len.
size_t gro_seg(struct msghdr &msg, size_t len)
{
	size_t seg = len;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO &&
		    c->cmsg_len >= CMSG_LEN(sizeof(int))) {
			int g;
			memcpy(&g, CMSG_DATA(c), sizeof(g));
			if (g > 0)
				seg = size_t(g);
		}
	return seg;
}

} // namespace

// The kernel keeps giving the socket its share of the port's datagrams
// until it closes, also after the receive thread stopped; a bound number of
// them is read here (into rx_bufs, free by now), at most 4096.
void roce_hand_on_rest(RoceCtx *rc)
{
	if (rc->fwd_fd < 0)
		return;
	pthread_mutex_lock(&rc->rx_lock);
	int handed = 0;
	for (int i = 0; i < 4096; i++) {
		struct sockaddr_in6 from;
		RoceCtx::RxMsgs::Ctl ctl;
		struct iovec iov = {rc->rx_bufs, kRoceRxBuffer};
		struct msghdr m = {};
		m.msg_name = &from;
		m.msg_namelen = sizeof(from);
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_control = ctl.b;
		m.msg_controllen = sizeof(ctl.b);
		ssize_t n = recvmsg(rc->fd, &m, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		if (hand_on(rc, rc->rx_bufs, size_t(n), gro_seg(m, size_t(n)), m))
			handed++;
	}
	pthread_mutex_unlock(&rc->rx_lock);
	if (handed)
		softlog(4, "%s: %d datagrams for other processes were still in the socket at close: handed on",
			rc->ifname, handed);
}

// (A datagram handled here was handed to us, so it is never handed on
// again: no nesting.)
int roce_share_wait(RoceCtx *rc)
{
	if (!rc->side_buf)
		rc->side_buf = static_cast<uint8_t *>(malloc(kRoceRxBuffer));
	return rc->side_buf ? drain_handed(rc, rc->side_buf) : 0;
}

namespace {

// Retransmission and RNR timers of every QP, and the delayed ACKs that are
// due. Returns the next retransmission or RNR deadline (0: none; also the new
// timer_hint_ns) and sets *ack_next to the next delayed ACK's (0: none).
uint64_t run_timers(RoceCtx *rc, uint64_t *ack_next)
{
	uint64_t now = now_ns(), next = 0;
	pthread_mutex_lock(&rc->lock);
	for (uint32_t s = 0; s < rc->slots_end; s++) {
		SoftQp *qp = rc->by_slot[s];
		if (!qp || !reliable(qp) || !qp->sq_count)
			continue;
		RoceQp *r = qp->roce;
		if (r->rnr_until_ns && now >= r->rnr_until_ns)
			pump(qp);
		if (r->deadline_ns && now >= r->deadline_ns &&
		    qp->entry->state.load(std::memory_order_acquire) == IBV_QPS_RTS) {
			if (r->retry_left <= 0) {
				retry_exceeded(qp, IBV_WC_RETRY_EXC_ERR);
				continue;
			}
			r->retry_left--;
			rc->retransmits++;
			softlog(4, "%s: QP 0x%x: timeout, sending again from PSN 0x%x (next 0x%x, %u queued, "
				   "%d retries left; %llu datagrams in, %llu dropped as filtered, epsn 0x%x)",
				rc->ifname, qp->qpn, r->una, r->snd_nxt, qp->sq_count, r->retry_left,
				(unsigned long long)rc->rx_packets.load(),
				(unsigned long long)rc->drops[D_FILTERED].load(), r->epsn);
			rewind_to(qp, r->una);
			uint64_t before = rc->tx_packets.load();
			pump(qp);
			roce_flush(rc);
			softlog(4, "%s: QP 0x%x: %llu packets sent again (next_wr %u, snd_nxt 0x%x, window %u, rnr wait %d)",
				rc->ifname, qp->qpn, (unsigned long long)(rc->tx_packets.load() - before),
				r->next_wr, r->snd_nxt, rc->window, r->rnr_until_ns != 0);
		}
		for (uint64_t t : {r->rnr_until_ns, r->deadline_ns})
			if (t && (!next || t < next))
				next = t;
	}
	rc->timer_hint_ns.store(next, std::memory_order_relaxed);
	tx_done(rc);
	*ack_next = rc->ack_next_ns;
	pthread_mutex_unlock(&rc->lock);
	return next;
}

} // namespace

int roce_drain(RoceCtx *rc, bool from_app)
{
	if (from_app) {
		rc->app_polls.fetch_add(1, std::memory_order_relaxed);
		if (pthread_mutex_trylock(&rc->rx_lock) != 0)
			return 0;
	} else {
		pthread_mutex_lock(&rc->rx_lock);
	}
	RoceCtx::RxMsgs &rx = rc->rx_msgs;
	struct mmsghdr *msgs = rx.msgs;
	struct iovec *iovs = rx.iovs;
	// Headers for entries [0, dirty) are set up again: all of them the first
	// time, then those the last receive filled (it changed their lengths).
	int dirty = rc->rx_dirty;
	int total = 0;
	// The clock of the datagrams' work (made when the first come: a poll
	// that finds none touches no thread-local state).
	std::optional<ClockScope> clock;
	for (int rounds = 0; rounds < 8; rounds++) {
		for (int i = 0; i < dirty; i++) {
			iovs[i] = {rc->rx_bufs + size_t(i) * kRoceRxBuffer, kRoceRxBuffer};
			msgs[i].msg_hdr = {};
			msgs[i].msg_hdr.msg_name = &rx.names[i];
			msgs[i].msg_hdr.msg_namelen = sizeof(rx.names[i]);
			msgs[i].msg_hdr.msg_iov = &iovs[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
			msgs[i].msg_hdr.msg_control = rx.ctls[i].b;
			msgs[i].msg_hdr.msg_controllen = sizeof(rx.ctls[i].b);
		}
		// The system call itself: libc's recvmmsg is a cancellation point
		// and wraps the call in two atomic updates of the thread's state
		// (with the set-up of all 16 headers each time, an empty poll cost
		// 190-240 ns on the host against 160 for the bare call).
		// Cancellation here would leave rx_lock held in any case.
		int got = int(syscall(SYS_recvmmsg, rc->fd, msgs, kRoceBatch, MSG_DONTWAIT, nullptr));
		if (got <= 0) {
			// Nothing to read leaves the headers as they were; after
			// another error, trust none of them.
			dirty = got < 0 && errno != EAGAIN && errno != EWOULDBLOCK ? kRoceBatch : 0;
			break;
		}
		dirty = got;
		if (clock)
			clock->renew();
		else
			clock.emplace();
		for (int i = 0; i < got; i++) {
			auto *p = static_cast<uint8_t *>(iovs[i].iov_base);
			size_t len = msgs[i].msg_len;
			take_datagram(rc, p, len, gro_seg(msgs[i].msg_hdr, len), msgs[i].msg_hdr, false);
		}
		total += got;
		if (got < kRoceBatch)
			break;
	}
	rc->rx_dirty = dirty;
	// Datagrams other processes handed on: once any came (the receive
	// thread watches the endpoints and sets `multi`), polls read them too.
	if (rc->multi.load(std::memory_order_relaxed)) {
		int n = drain_handed(rc, rc->rx_bufs);
		if (n && !clock)
			clock.emplace();
		total += n;
	}
	if (rc->fault && rc->fault->held_len && ns_since(clock_ns(), rc->fault->held_ns) >= kRoceHoldNs)
		release_held(rc);
	// What the datagrams asked for leaves now: coalesced ACKs, the
	// requests their ACKs let through, read responses.
	if (total || rc->tx_work.load(std::memory_order_relaxed)) {
		pthread_mutex_lock(&rc->lock);
		tx_done(rc);
		pthread_mutex_unlock(&rc->lock);
	}
	pthread_mutex_unlock(&rc->rx_lock);
	return total;
}

void *roce_rx_main(void *arg)
{
	auto *rc = static_cast<RoceCtx *>(arg);
	uint64_t window = kRoceAppPollNs; // roce.h
	uint64_t last_polls = rc->app_polls.load(std::memory_order_relaxed);
	uint64_t last_arms = rc->app_arms.load(std::memory_order_relaxed);
	uint64_t last_look = now_ns();
	while (!rc->stop.load()) {
		uint64_t now = now_ns();
		// The socket is watched here unless an application thread polled a
		// CQ of the device since this thread last looked: that thread reads
		// the socket itself (roce_drain from poll_cq) and sends the delayed
		// ACKs as they fall due, and waking this one for every datagram
		// would take a core from it. One that waits for data some other way
		// (ib_write_lat spins on the buffer an RDMA WRITE fills) polls its
		// CQ for its own request's ACK, which the peer sends behind its
		// WRITE (send_ack); once it stops polling, this thread watches
		// again within two windows (kRoceAppPollNs, growing to
		// kRoceAppPollMaxNs while a thread polls at least every
		// kRoceAppBusyNs: roce.h). A thread that armed a CQ's notification
		// since the last look may block next (event-driven programs arm,
		// poll, then block): the socket is watched then, and at once when
		// the arming came while this thread was leaving it to the
		// applications (app_waits). The polls and armings are counted, not
		// stamped: a clock read per poll is what a guest's emulated clock
		// makes dear.
		uint64_t polls = rc->app_polls.load(std::memory_order_relaxed);
		uint64_t arms = rc->app_arms.load(std::memory_order_relaxed);
		uint64_t seen = polls - last_polls, looked = now - last_look;
		bool armed = arms != last_arms;
		last_polls = polls;
		last_arms = arms;
		last_look = now;
		bool waits = rc->app_waits.exchange(false);
		bool app_reads = seen != 0 && !armed && !waits;
		if (!app_reads)
			window = kRoceAppPollNs;
		else if (seen * kRoceAppBusyNs >= looked)
			window = std::min(window * 2, kRoceAppPollMaxNs);
		rc->apps_read.store(app_reads, std::memory_order_relaxed);
		// The timers: while applications read, only when a retransmission
		// or RNR deadline is due (without the lock otherwise: each wake here
		// preempts a spinning application where they fill the cores).
		uint64_t next = rc->timer_hint_ns.load(std::memory_order_relaxed), ack_next = 0;
		if (!app_reads || (next && next <= now))
			next = run_timers(rc, &ack_next);
		if (!app_reads && ack_next && (!next || ack_next < next))
			next = ack_next;
		uint64_t wait_ns = 50000000;
		if (next)
			wait_ns = next <= now ? 0 : std::min(next - now, wait_ns);
		if (rc->fault_held.load(std::memory_order_relaxed))
			wait_ns = std::min<uint64_t>(wait_ns, 1000000); // a datagram held back (inject)
		if (app_reads)
			wait_ns = std::min<uint64_t>(wait_ns, window);
		// A deadline armed meanwhile (arm_timer) is seen here, or that
		// side sees the wake time and wakes this thread.
		rc->rx_wake_ns.store(now + wait_ns);
		uint64_t hint = rc->timer_hint_ns.load();
		if (hint && hint < now + wait_ns)
			wait_ns = hint <= now ? 0 : hint - now;
		// The wake eventfd, the link messages (port events), then the
		// socket, which is left out while applications read it.
		// The endpoint other processes hand this one's datagrams to is
		// watched always: the first datagram there tells that polls must
		// read it too (`multi`).
		struct pollfd pf[4] = {{rc->wake_fd, POLLIN, 0},
				       {rc->nl ? nl_socket_get_fd(rc->nl) : -1, POLLIN, 0},
				       {rc->fwd_fd, POLLIN, 0},
				       {rc->fd, POLLIN, 0}};
		struct timespec ts = {time_t(wait_ns / 1000000000), long(wait_ns % 1000000000)};

		int pr = ppoll(pf, app_reads ? 3 : 4, &ts, nullptr);
		rc->rx_wake_ns.store(0, std::memory_order_relaxed);

		if (pr < 0 && errno != EINTR)
			break;
		if (pf[0].revents) {
			uint64_t v;
			if (read(rc->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				break;
			continue; // stop, or app_waits: look again
		}
		if (pf[1].revents)
			roce_read_link_messages(rc);
		bool handed = pf[2].revents & POLLIN;
		if (handed)
			rc->multi.store(true, std::memory_order_relaxed);
		if ((!app_reads && (pf[3].revents & POLLIN)) || handed ||
		    rc->fault_held.load(std::memory_order_relaxed))
			roce_drain(rc, false);
	}
	rc->apps_read.store(false, std::memory_order_relaxed);
	return nullptr;
}

// An application thread arms a CQ's notification: it may block next, so the
// receive thread watches the socket in this window, and, if it was leaving
// the socket to the applications, from now on rather than from the end of
// its window (one wake per arming while it does).
void roce_note_app_waits(RoceCtx *rc)
{
	rc->app_arms.fetch_add(1, std::memory_order_relaxed);
	if (!rc->apps_read.load(std::memory_order_relaxed) || rc->app_waits.exchange(true))
		return;
	rc->app_wait_wakes.fetch_add(1, std::memory_order_relaxed);
	uint64_t one = 1;
	if (write(rc->wake_fd, &one, sizeof(one)) < 0) {
		// EAGAIN: the counter is full of wakes already.
	}
}

void roce_flush_acks(RoceCtx *rc)
{
	if (rc->nacks)
		ack_run(rc, now_ns(), true);
	roce_flush(rc);
}

// ------------------------------------------------------------------ post_send

static int ud_send(SoftQp *qp, SoftWr &w)
{
	RoceCtx *rc = qp->ctx->roce;
	const struct ibv_ah_attr &ah = w.ah;
	if (!ah.is_global || ah.grh.sgid_index >= rc->ngids || !rc->gids[ah.grh.sgid_index].valid)
		return EINVAL;
	uint64_t len = sge_total(w);
	uint32_t mtu = roce_mtu_bytes(roce_refresh_mtu(rc, false));
	uint8_t *pb = tx_slot(qp->ctx->roce);
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	if (len > mtu)
		st = IBV_WC_LOC_LEN_ERR;
	else if (len && !gather(qp, w, 0, slot_payload(pb), uint32_t(len)))
		st = IBV_WC_LOC_PROT_ERR;
	if (st == IBV_WC_SUCCESS) {
		Packet k;
		k.bth.opcode = kUD | (w.opcode == IBV_WR_SEND_WITH_IMM ? kSendOnlyImm : kSendOnly);
		k.flags = opcode_flags(k.bth.opcode);
		k.bth.se = w.send_flags & IBV_SEND_SOLICITED;
		k.bth.dqpn = w.remote_qpn;
		RoceQp *r = qp->roce;
		k.bth.psn = r->sq_psn;
		r->sq_psn = psn_add(r->sq_psn, 1);
		k.deth.qkey = (w.remote_qkey & 0x80000000u) ? qp->attr.qkey : w.remote_qkey;
		k.deth.src_qpn = qp == rc->gsi ? kRoceGsiQpn : qp->qpn;
		if (w.opcode == IBV_WR_SEND_WITH_IMM)
			k.imm = be32toh(w.imm);
		struct sockaddr_in6 to;
		to_sockaddr(rc, ah.grh.dgid, &to);
		xmit_buf(rc, rc->gids[ah.grh.sgid_index].gid.raw, to, k, pb, uint32_t(len));
	}
	send_complete(qp, w, st, 0);
	return 0;
}

static bool opcode_allowed(enum ibv_qp_type t, uint32_t op)
{
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		return true;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return t != IBV_QPT_UD;
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
	case IBV_WR_SEND_WITH_INV:
		return t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND;
	case IBV_WR_BIND_MW:
	case IBV_WR_LOCAL_INV:
		return t == IBV_QPT_RC || t == IBV_QPT_UC || t == IBV_QPT_XRC_SEND;
	default:
		return false;
	}
}

// Queues RC or UC request w behind the send queue's others (rc->lock held):
// its PSNs, none for a local operation. ENOMEM when the queue is full.
static int queue_wr(SoftQp *qp, const SoftWr &w)
{
	RoceQp *r = qp->roce;
	if (qp->sq_count >= qp->sq_depth)
		return ENOMEM;
	uint32_t idx = (qp->sq_head + qp->sq_count) % qp->sq_depth;
	SoftWr &slot = qp->sq[idx];
	memcpy(&slot, &w, offsetof(SoftWr, sge));
	memcpy(slot.sge, w.sge, w.num_sge * sizeof(struct ibv_sge));
	if (w.inline_len)
		memcpy(slot.inline_data, w.inline_data, w.inline_len);
	RoceTx &t = r->tx[idx];
	t = RoceTx{};
	t.psn = r->sq_psn;
	t.rd_next = t.psn;
	if (!is_local(w.opcode)) {
		uint64_t len = sge_total(w);
		t.status = len > kMaxMsgSize || (is_atomic(w.opcode) && len != 8) ? IBV_WC_LOC_LEN_ERR
										 : IBV_WC_SUCCESS;
		t.len = uint32_t(std::min<uint64_t>(len, kMaxMsgSize));
		t.npkts = packets_for(t.len, r->mtu);
		r->sq_psn = psn_add(r->sq_psn, t.npkts);
	}
	sq_set_pending(qp, qp->sq_count + 1);
	return 0;
}

int roce_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct ibv_send_wr *dummy;
	if (!bad)
		bad = &dummy;
	if (!wr)
		return 0;
	SoftQp *qp = to_sqp(ibqp);
	RoceCtx *rc = qp->ctx->roce;
	RoceQp *r = qp->roce;
	if (!qp->sq || !qp->scq || !r) {
		*bad = wr;
		return EINVAL;
	}
	SoftWr *w = static_cast<SoftWr *>(alloca(sizeof(SoftWr)));
	int err = 0;
	ClockScope clock;
	pthread_mutex_lock(&rc->lock);
	uint32_t st = qp->entry->state.load(std::memory_order_acquire);
	if (st != IBV_QPS_RTS && st != IBV_QPS_ERR && st != IBV_QPS_SQD) {
		*bad = wr;
		pthread_mutex_unlock(&rc->lock);
		return EINVAL;
	}
	for (; wr; wr = wr->next) {
		if ((err = convert_wr(qp, wr, *w)) != 0 || !opcode_allowed(qp->type, w->opcode)) {
			err = EINVAL;
			*bad = wr;
			break;
		}
		st = qp->entry->state.load(std::memory_order_acquire);
		if (st == IBV_QPS_ERR) {
			send_complete(qp, *w, IBV_WC_WR_FLUSH_ERR, 0);
			continue;
		}
		if (qp->type == IBV_QPT_UD) {
			if ((err = ud_send(qp, *w)) != 0) {
				*bad = wr;
				break;
			}
			continue;
		}
		if ((err = queue_wr(qp, *w)) != 0) {
			*bad = wr;
			break;
		}
	}
	pump(qp);
	tx_done(rc);
	pthread_mutex_unlock(&rc->lock);
	return err;
}


// submit_wrs for a QP of this device (ibv_wr_complete(3) and ibv_bind_mw(3)
// reach it there): the n requests, queued (RC, UC) or sent (UD) in order. Nothing is posted
// when one of them has an opcode the wire does not carry (EINVAL: the QP's
// send_ops_flags allow none, roce_create_qp_ex) or the send queue cannot take
// them all (ENOMEM). In the error state each completes with a flush error.
int roce_submit_wrs(SoftQp *qp, SoftWr *wrs, uint32_t n)
{
	RoceCtx *rc = qp->ctx->roce;
	if (!qp->sq || !qp->scq || !qp->roce)
		return EINVAL;
	for (uint32_t i = 0; i < n; i++)
		if (!opcode_allowed(qp->type, wrs[i].opcode))
			return EINVAL;
	ClockScope clock;
	pthread_mutex_lock(&rc->lock);
	int err = 0;
	uint32_t st = qp->entry->state.load(std::memory_order_acquire);
	if (st == IBV_QPS_ERR) {
		for (uint32_t i = 0; i < n; i++)
			send_complete(qp, wrs[i], IBV_WC_WR_FLUSH_ERR, 0);
	} else if (qp->type != IBV_QPT_UD && n > qp->sq_depth - qp->sq_count) {
		err = ENOMEM;
	} else {
		for (uint32_t i = 0; i < n && !err; i++) {
			if (qp->type == IBV_QPT_UD)
				err = ud_send(qp, wrs[i]);
			else
				err = queue_wr(qp, wrs[i]);
			// A bind's new R_Key is the window's from the post on, as a
			// kernel device's provider sets it (the bind itself runs in
			// queue order).
			if (!err && wrs[i].opcode == IBV_WR_BIND_MW && wrs[i].mw)
				wrs[i].mw->rkey = wrs[i].bind_rkey;
		}
		pump(qp);
		tx_done(rc);
	}
	pthread_mutex_unlock(&rc->lock);
	return err;
}

void roce_qp_transition(SoftQp *qp, enum ibv_qp_state cur, enum ibv_qp_state next)
{
	RoceQp *r = qp->roce;
	RoceCtx *rc = qp->ctx->roce;
	if (!r)
		return;
	const struct ibv_qp_attr &a = qp->attr;
	if (cur == next)
		return;
	switch (next) {
	case IBV_QPS_RESET:
		roce_qp_reset(qp);
		break;
	case IBV_QPS_RTR:
		if (qp->type != IBV_QPT_UD) {
			to_sockaddr(rc, a.ah_attr.grh.dgid, &r->peer);
			uint32_t si = a.ah_attr.grh.sgid_index < rc->ngids ? a.ah_attr.grh.sgid_index : 0;
			memcpy(r->src, rc->gids[si].gid.raw, 16);
			r->mtu = roce_mtu_bytes(a.path_mtu);
		} else {
			r->mtu = roce_mtu_bytes(roce_refresh_mtu(rc, false));
		}
		r->epsn = a.rq_psn & kPsnMask;
		r->plain_ack_psn = psn_add(r->epsn, kPsnMask);
		r->plain_ack_msn = 0;
		r->zero_id_run = 0;
		r->msn = 0;
		r->nak_sent = false;
		r->in_send = r->in_write = false;
		break;
	case IBV_QPS_RTS:
		if (cur == IBV_QPS_RTR) {
			r->sq_psn = a.sq_psn & kPsnMask;
			r->snd_nxt = r->una = r->snd_max = r->sq_psn;
			r->cwnd = rc->window;
			r->retry_left = a.retry_cnt;
			r->rnr_left = a.rnr_retry;
		}
		pump(qp);
		break;
	case IBV_QPS_ERR:
		r->next_wr = 0;
		r->deadline_ns = 0;
		r->rnr_until_ns = 0;
		r->in_send = r->in_write = false;
		r->ack_pending = false;
		break;
	default:
		break;
	}
	tx_done(rc);
}

void roce_qp_reset(SoftQp *qp)
{
	RoceQp *r = qp->roce;
	RoceTx *tx = r->tx;
	bool listed = r->ack_listed; // its slot stays in the list (ack_run)
	*r = RoceQp{};
	r->tx = tx;
	r->ack_listed = listed;
}

} // namespace ovsoft
