// openverbs software RDMA device: raw packet QPs on an Ethernet port, flow
// steering (ibv_create_flow(3)), work queues (ibv_create_wq(3)) and receive
// side scaling (ibv_create_rwq_ind_table(3), QPs with rx_hash_conf).
//
// The device is the Ethernet switch of its own port: a frame a raw packet
// QP sends is steered, inside the device, to the receive queues of the raw
// packet QPs (of any process of the device) whose flow rules match it, as a
// NIC steers what arrives at its port. Rules live in the device segment
// (SegmentHeader::flows) so that any sender can steer; a rule of an RSS QP
// carries the QP's hash key, hashed fields and indirection table, and the
// frame goes to one of its WQs. Nothing leaves the device: frames reach
// only raw packet QPs of the same device, so no privilege is asked for.
#include "engine.h"
#include "objects.h"

#include <arpa/inet.h>

namespace ovsoft {

// ------------------------------------------------------------------ frames

// The header fields flow specs and the hash look at, read from the first
// bytes of a frame. Multi-byte values keep network order, as the specs'.
struct FrameView {
	uint8_t dst_mac[6], src_mac[6];
	uint16_t ether_type; // the inner one after an 802.1Q tag
	uint16_t vlan_tag;   // the tag's TCI, 0 without one
	bool vlan;
	int l3;              // 4, 6 or 0
	uint32_t v4_src, v4_dst;
	uint8_t v4_proto, v4_tos, v4_ttl, v4_flags;
	uint8_t v6_src[16], v6_dst[16];
	uint32_t v6_flow_label; // 20 bits, network order as the spec's
	uint8_t v6_next, v6_tclass, v6_hop;
	uint8_t l4_proto;    // IPPROTO_TCP, IPPROTO_UDP or another
	bool l4;             // ports present
	uint16_t src_port, dst_port;
};

static uint16_t rd16(const uint8_t *p) { return uint16_t(p[0] << 8 | p[1]); }

// Parses the headers of the frame's first n bytes (Ethernet, one optional
// 802.1Q tag, IPv4 or IPv6, TCP or UDP ports). Layers cut short are absent.
static FrameView parse_frame(const uint8_t *f, size_t n)
{
	FrameView v = {};
	if (n < 14)
		return v;
	memcpy(v.dst_mac, f, 6);
	memcpy(v.src_mac, f + 6, 6);
	size_t off = 12;
	uint16_t et = rd16(f + off);
	if (et == 0x8100 && n >= 18) {
		v.vlan = true;
		memcpy(&v.vlan_tag, f + 14, 2);
		off = 16;
		et = rd16(f + off);
	}
	off += 2;
	v.ether_type = htons(et);
	size_t l4off = 0;
	if (et == 0x0800 && n >= off + 20 && (f[off] >> 4) == 4) {
		size_t ihl = size_t(f[off] & 15) * 4;
		if (ihl < 20 || n < off + ihl)
			return v;
		v.l3 = 4;
		v.v4_tos = f[off + 1];
		v.v4_flags = uint8_t(f[off + 6] >> 5);
		v.v4_ttl = f[off + 8];
		v.v4_proto = f[off + 9];
		memcpy(&v.v4_src, f + off + 12, 4);
		memcpy(&v.v4_dst, f + off + 16, 4);
		v.l4_proto = v.v4_proto;
		// Only the first fragment carries the ports.
		if ((rd16(f + off + 6) & 0x1fff) == 0)
			l4off = off + ihl;
	} else if (et == 0x86dd && n >= off + 40 && (f[off] >> 4) == 6) {
		v.l3 = 6;
		uint32_t vtf = uint32_t(f[off]) << 24 | uint32_t(f[off + 1]) << 16 |
			       uint32_t(f[off + 2]) << 8 | f[off + 3];
		v.v6_tclass = uint8_t(vtf >> 20);
		v.v6_flow_label = htonl(vtf & 0xfffff);
		v.v6_next = f[off + 6];
		v.v6_hop = f[off + 7];
		memcpy(v.v6_src, f + off + 8, 16);
		memcpy(v.v6_dst, f + off + 24, 16);
		v.l4_proto = v.v6_next;
		l4off = off + 40;
	}
	if (l4off && (v.l4_proto == IPPROTO_TCP || v.l4_proto == IPPROTO_UDP) && n >= l4off + 4) {
		v.l4 = true;
		memcpy(&v.src_port, f + l4off, 2);
		memcpy(&v.dst_port, f + l4off + 2, 2);
	}
	return v;
}

// (field & mask) == (val & mask), byte by byte.
static bool masked_eq(const void *field, const void *val, const void *mask, size_t n)
{
	auto *f = static_cast<const uint8_t *>(field);
	auto *v = static_cast<const uint8_t *>(val);
	auto *m = static_cast<const uint8_t *>(mask);
	for (size_t i = 0; i < n; i++)
		if ((f[i] & m[i]) != (v[i] & m[i]))
			return false;
	return true;
}

// The byte size of each spec type carried, 0 for the others.
static size_t spec_size(uint32_t type)
{
	switch (type) {
	case IBV_FLOW_SPEC_ETH:
		return sizeof(ibv_flow_spec_eth);
	case IBV_FLOW_SPEC_IPV4:
		return sizeof(ibv_flow_spec_ipv4);
	case IBV_FLOW_SPEC_IPV4_EXT:
		return sizeof(ibv_flow_spec_ipv4_ext);
	case IBV_FLOW_SPEC_IPV6:
		return sizeof(ibv_flow_spec_ipv6);
	case IBV_FLOW_SPEC_TCP:
	case IBV_FLOW_SPEC_UDP:
		return sizeof(ibv_flow_spec_tcp_udp);
	default:
		return 0;
	}
}

// Whether frame v matches every spec of a rule: n specs in len bytes at p
// (checked again here: the table is shared data). A spec of a layer asks
// for that layer (an IPv4 spec for an IPv4 frame, a UDP spec for UDP).
static bool specs_match(const FrameView &v, const uint8_t *p, uint32_t len, uint32_t n)
{
	uint32_t off = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (len - off < 8)
			return false;
		uint32_t type;
		uint16_t size;
		memcpy(&type, p + off, 4);
		memcpy(&size, p + off + 4, 2);
		if (size != spec_size(type) || size > len - off)
			return false;
		const uint8_t *s = p + off;
		off += size;
		switch (type) {
		case IBV_FLOW_SPEC_ETH: {
			ibv_flow_spec_eth e;
			memcpy(&e, s, sizeof(e));
			ibv_flow_eth_filter f = {};
			memcpy(f.dst_mac, v.dst_mac, 6);
			memcpy(f.src_mac, v.src_mac, 6);
			f.ether_type = v.ether_type;
			f.vlan_tag = v.vlan_tag;
			if (!masked_eq(&f, &e.val, &e.mask, sizeof(f)))
				return false;
			break;
		}
		case IBV_FLOW_SPEC_IPV4:
		case IBV_FLOW_SPEC_IPV4_EXT: {
			if (v.l3 != 4)
				return false;
			ibv_flow_spec_ipv4_ext e = {};
			memcpy(&e, s, size); // the short spec is the long one's prefix
			ibv_flow_ipv4_ext_filter f = {};
			f.src_ip = v.v4_src;
			f.dst_ip = v.v4_dst;
			size_t cmp = sizeof(ibv_flow_ipv4_filter);
			if (type == IBV_FLOW_SPEC_IPV4_EXT) {
				f.proto = v.v4_proto;
				f.tos = v.v4_tos;
				f.ttl = v.v4_ttl;
				f.flags = v.v4_flags;
				cmp = sizeof(f);
			} else {
				// ibv_flow_spec_ipv4: val and mask of 8 bytes each
				memcpy(&e.mask, s + offsetof(ibv_flow_spec_ipv4, mask),
				       sizeof(ibv_flow_ipv4_filter));
			}
			if (!masked_eq(&f, &e.val, &e.mask, cmp))
				return false;
			break;
		}
		case IBV_FLOW_SPEC_IPV6: {
			if (v.l3 != 6)
				return false;
			ibv_flow_spec_ipv6 e;
			memcpy(&e, s, sizeof(e));
			ibv_flow_ipv6_filter f = {};
			memcpy(f.src_ip, v.v6_src, 16);
			memcpy(f.dst_ip, v.v6_dst, 16);
			f.flow_label = v.v6_flow_label;
			f.next_hdr = v.v6_next;
			f.traffic_class = v.v6_tclass;
			f.hop_limit = v.v6_hop;
			if (!masked_eq(&f, &e.val, &e.mask, offsetof(ibv_flow_ipv6_filter, hop_limit) + 1))
				return false;
			break;
		}
		case IBV_FLOW_SPEC_TCP:
		case IBV_FLOW_SPEC_UDP: {
			uint8_t want = type == IBV_FLOW_SPEC_TCP ? IPPROTO_TCP : IPPROTO_UDP;
			if (!v.l3 || v.l4_proto != want)
				return false;
			ibv_flow_spec_tcp_udp e;
			memcpy(&e, s, sizeof(e));
			ibv_flow_tcp_udp_filter f = {v.dst_port, v.src_port};
			if (!v.l4 && (e.mask.dst_port || e.mask.src_port))
				return false;
			if (!masked_eq(&f, &e.val, &e.mask, sizeof(f)))
				return false;
			break;
		}
		default:
			return false;
		}
	}
	return true;
}

// ------------------------------------------------------------------ RSS

uint32_t toeplitz_hash(const uint8_t *key, size_t key_len, const uint8_t *in, size_t len)
{
	// The hash XORs, for every set bit of the input (most significant
	// first), the 32 bits of the key starting at that bit's position.
	if (key_len < 4)
		return 0;
	uint32_t window = uint32_t(key[0]) << 24 | uint32_t(key[1]) << 16 | uint32_t(key[2]) << 8 |
			  key[3];
	uint32_t h = 0;
	size_t next = 4; // the key byte whose bits shift in next
	for (size_t i = 0; i < len; i++) {
		uint8_t kb = next < key_len ? key[next] : 0;
		next++;
		for (int b = 7; b >= 0; b--) {
			if (in[i] >> b & 1)
				h ^= window;
			window = window << 1 | (kb >> b & 1);
		}
	}
	return h;
}

// The hash of frame v for an RSS rule: the fields it names, in the order
// source address, destination address, source port, destination port (each
// present only when the frame has that layer: IPv4 fields for IPv4
// frames, and so on). A frame with none of them hashes to 0.
static uint32_t rss_hash(const FlowEntry &f, const FrameView &v)
{
	uint8_t in[36];
	size_t n = 0;
	uint64_t m = f.rss_fields;
	if (v.l3 == 4) {
		if (m & IBV_RX_HASH_SRC_IPV4) {
			memcpy(in + n, &v.v4_src, 4);
			n += 4;
		}
		if (m & IBV_RX_HASH_DST_IPV4) {
			memcpy(in + n, &v.v4_dst, 4);
			n += 4;
		}
	} else if (v.l3 == 6) {
		if (m & IBV_RX_HASH_SRC_IPV6) {
			memcpy(in + n, v.v6_src, 16);
			n += 16;
		}
		if (m & IBV_RX_HASH_DST_IPV6) {
			memcpy(in + n, v.v6_dst, 16);
			n += 16;
		}
	}
	if (v.l4) {
		bool tcp = v.l4_proto == IPPROTO_TCP;
		uint64_t sp = tcp ? IBV_RX_HASH_SRC_PORT_TCP : IBV_RX_HASH_SRC_PORT_UDP;
		uint64_t dp = tcp ? IBV_RX_HASH_DST_PORT_TCP : IBV_RX_HASH_DST_PORT_UDP;
		if (m & sp) {
			memcpy(in + n, &v.src_port, 2);
			n += 2;
		}
		if (m & dp) {
			memcpy(in + n, &v.dst_port, 2);
			n += 2;
		}
	}
	return n ? toeplitz_hash(f.rss_key, kRssKeyLen, in, n) : 0;
}

// ------------------------------------------------------------------ steering

static bool multicast_mac(const FrameView &v) { return v.dst_mac[0] & 1; }

enum ibv_wc_status raw_send(SoftQp *qp, const Iov &src)
{
	if (src.len < kRawMinFrame || src.len > kRawMaxFrame)
		return IBV_WC_LOC_LEN_ERR;
	// The headers: the frame's first bytes, gathered.
	uint8_t hdr[128];
	size_t hn = 0;
	for (int i = 0; i < src.n && hn < sizeof(hdr); i++) {
		size_t k = std::min(src.v[i].iov_len, sizeof(hdr) - hn);
		memcpy(hdr + hn, src.v[i].iov_base, k);
		hn += k;
	}
	FrameView v = parse_frame(hdr, hn);
	Segment *seg = qp->ctx->seg;
	SegmentHeader *h = seg->hdr;
	// The receive queues (QP slots) the frame goes to: a rule's QP, or for
	// an RSS rule the WQ its hash picks; one copy each.
	uint32_t out[kMaxFlows];
	uint32_t nout = 0;
	auto add = [&](uint32_t s) {
		for (uint32_t i = 0; i < nout; i++)
			if (out[i] == s)
				return;
		out[nout++] = s;
	};
	auto target_of = [&](const FlowEntry &f) -> uint32_t {
		if (!f.rss)
			return f.qp;
		uint32_t size = 1u << std::min<uint32_t>(f.rss_log_size, 6);
		return f.rss_wq[rss_hash(f, v) & (size - 1)];
	};
	shm_lock(&h->flow_lock);
	// The most specific kind that matches: rules by their specs (the
	// lowest priority value wins; equal ones each get a copy), else the
	// default rules (multicast frames: MC_DEFAULT first); sniffers get
	// every frame.
	uint32_t best = UINT32_MAX;
	for (const FlowEntry &f : in_extent(h->flows, h->extents.flows))
		if (f.in_use.load(std::memory_order_relaxed) && f.type == IBV_FLOW_ATTR_NORMAL &&
		    f.qp != qp->slot && f.priority < best &&
		    specs_match(v, f.specs, std::min(f.specs_len, kFlowSpecBytes), f.num_specs))
			best = f.priority;
	uint32_t def = best != UINT32_MAX ? UINT32_MAX : uint32_t(IBV_FLOW_ATTR_ALL_DEFAULT);
	if (def != UINT32_MAX && multicast_mac(v)) {
		for (const FlowEntry &f : in_extent(h->flows, h->extents.flows))
			if (f.in_use.load(std::memory_order_relaxed) && f.qp != qp->slot &&
			    f.type == IBV_FLOW_ATTR_MC_DEFAULT)
				def = IBV_FLOW_ATTR_MC_DEFAULT;
	}
	for (const FlowEntry &f : in_extent(h->flows, h->extents.flows)) {
		if (!f.in_use.load(std::memory_order_relaxed) || f.qp == qp->slot)
			continue;
		bool take = f.type == IBV_FLOW_ATTR_SNIFFER || f.type == def ||
			    (f.type == IBV_FLOW_ATTR_NORMAL && f.priority == best &&
			     specs_match(v, f.specs, std::min(f.specs_len, kFlowSpecBytes), f.num_specs));
		if (take)
			add(target_of(f));
	}
	shm_unlock(&h->flow_lock);

	Msg m = {};
	m.src = src.v;
	m.nsrc = src.n;
	m.len = src.len;
	m.byte_len = uint32_t(src.len);
	m.opcode = IBV_WC_RECV;
	for (uint32_t i = 0; i < nout; i++) {
		uint32_t s = out[i];
		if (s >= kMaxQps)
			continue;
		QpEntry &d = h->qps[s];
		if (d.slot.load(std::memory_order_acquire) != SLOT_LIVE ||
		    d.qp_type != IBV_QPT_RAW_PACKET)
			continue;
		uint32_t st = d.state.load(std::memory_order_acquire);
		if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD && st != IBV_QPS_SQE)
			continue; // not receiving: dropped, as a NIC drops it
		deliver(seg, d, s + kQpnBase, nullptr, m, false);
	}
	return IBV_WC_SUCCESS;
}

// ------------------------------------------------------------------ flows

struct SoftFlow {
	struct ibv_flow flow;
	uint32_t slot;
	uint32_t generation;
	SoftQp *qp;
};

struct ibv_flow *soft_create_flow(struct ibv_qp *ibqp, struct ibv_flow_attr *attr)
{
	if (!ibqp || !attr) {
		errno = EINVAL;
		return nullptr;
	}
	SoftQp *qp = to_sqp(ibqp);
	SoftContext *ctx = qp->ctx;
	if (!ctx->eth || qp->type != IBV_QPT_RAW_PACKET || qp->wq) {
		errno = EOPNOTSUPP; // flows steer to raw packet QPs of an Ethernet port
		return nullptr;
	}
	if (attr->comp_mask || attr->port != 1) {
		errno = EINVAL;
		return nullptr;
	}
	if (attr->flags) {
		errno = EOPNOTSUPP; // neither DONT_TRAP nor EGRESS
		return nullptr;
	}
	if (attr->type > IBV_FLOW_ATTR_SNIFFER ||
	    (attr->type != IBV_FLOW_ATTR_NORMAL && attr->num_of_specs)) {
		errno = EINVAL;
		return nullptr;
	}
	// The specs follow the attribute; each names its type and size.
	auto *p = reinterpret_cast<const uint8_t *>(attr + 1);
	uint32_t len = 0;
	for (uint32_t i = 0; i < attr->num_of_specs; i++) {
		uint32_t type;
		uint16_t size;
		memcpy(&type, p + len, 4);
		memcpy(&size, p + len + 4, 2);
		size_t want = spec_size(type);
		if (!want) {
			errno = EOPNOTSUPP; // tunnels, inner headers, ESP, MPLS, actions
			return nullptr;
		}
		if (size != want) {
			errno = EINVAL;
			return nullptr;
		}
		if (len + size > kFlowSpecBytes) {
			errno = EINVAL;
			return nullptr;
		}
		len += size;
	}
	auto *fl = static_cast<SoftFlow *>(calloc(1, sizeof(SoftFlow)));
	if (!fl) {
		errno = ENOMEM;
		return nullptr;
	}
	Segment *seg = ctx->seg;
	SegmentHeader *h = seg->hdr;
	shm_lock(&h->flow_lock);
	int fslot = extent_take(h->extents.flows, kMaxFlows,
				[&](uint32_t i) { return !h->flows[i].in_use.load(); });
	FlowEntry *f = fslot < 0 ? nullptr : &h->flows[fslot];
	if (!f) {
		shm_unlock(&h->flow_lock);
		free(fl);
		errno = ENOMEM; // kMaxFlows rules per device
		return nullptr;
	}
	f->generation++;
	f->owner = seg->my_proc;
	f->qp = qp->slot;
	f->type = attr->type;
	f->priority = attr->priority;
	f->num_specs = attr->num_of_specs;
	f->specs_len = len;
	memcpy(f->specs, p, len);
	f->rss = 0;
	if (qp->rss && qp->ind) {
		f->rss = 1;
		f->rss_log_size = qp->ind->log_size;
		f->rss_fields = qp->rss_fields;
		memcpy(f->rss_key, qp->rss_key, kRssKeyLen);
		for (uint32_t i = 0; i < (1u << qp->ind->log_size); i++)
			f->rss_wq[i] = qp->ind->wqs[i]->qp->slot;
	}
	f->in_use.store(1, std::memory_order_release);
	fl->slot = uint32_t(f - h->flows);
	fl->generation = f->generation;
	shm_unlock(&h->flow_lock);
	fl->qp = qp;
	qp->flows.fetch_add(1);
	fl->flow.context = &ctx->vctx.context;
	fl->flow.handle = fl->slot;
	return &fl->flow;
}

int soft_destroy_flow(struct ibv_flow *flow)
{
	if (!flow)
		return EINVAL;
	auto *fl = reinterpret_cast<SoftFlow *>(flow);
	SegmentHeader *h = fl->qp->ctx->seg->hdr;
	shm_lock(&h->flow_lock);
	FlowEntry &f = h->flows[fl->slot % kMaxFlows];
	if (f.in_use.load() && f.generation == fl->generation) {
		f.generation++;
		f.in_use.store(0, std::memory_order_release);
		extent_release(h->extents.flows, fl->slot % kMaxFlows);
	}
	shm_unlock(&h->flow_lock);
	fl->qp->flows.fetch_sub(1);
	free(fl);
	return 0;
}

// ------------------------------------------------------------------ WQs

static int soft_post_wq_recv(struct ibv_wq *ibwq, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad)
{
	auto *wq = reinterpret_cast<SoftWq *>(ibwq);
	return soft_post_recv(&wq->qp->vqp.qp, wr, bad);
}

struct ibv_wq *soft_create_wq(struct ibv_context *context, struct ibv_wq_init_attr *attr)
{
	if (!context || !attr) {
		errno = EINVAL;
		return nullptr;
	}
	SoftContext *ctx = to_sctx(context);
	if (!ctx->eth) {
		errno = EOPNOTSUPP; // WQs feed raw packet QPs: an Ethernet port's
		return nullptr;
	}
	if (attr->wq_type != IBV_WQT_RQ || (attr->comp_mask & ~uint32_t(IBV_WQ_INIT_ATTR_FLAGS))) {
		errno = EINVAL;
		return nullptr;
	}
	if ((attr->comp_mask & IBV_WQ_INIT_ATTR_FLAGS) && attr->create_flags) {
		errno = EOPNOTSUPP; // no VLAN stripping, FCS, delay drop or padding
		return nullptr;
	}
	if (!attr->pd || !attr->cq || attr->pd->context != context || attr->cq->context != context) {
		errno = EINVAL;
		return nullptr;
	}
	auto *wq = static_cast<SoftWq *>(calloc(1, sizeof(SoftWq)));
	if (!wq) {
		errno = ENOMEM;
		return nullptr;
	}
	struct ibv_qp_init_attr_ex a = {};
	a.qp_type = IBV_QPT_RAW_PACKET;
	a.send_cq = attr->cq;
	a.recv_cq = attr->cq;
	a.cap.max_recv_wr = attr->max_wr;
	a.cap.max_recv_sge = attr->max_sge;
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = attr->pd;
	struct ibv_qp *q = soft_create_wq_qp(ctx, &a);
	if (!q) {
		int e = errno;
		free(wq);
		errno = e;
		return nullptr;
	}
	wq->qp = to_sqp(q);
	attr->max_wr = a.cap.max_recv_wr;
	attr->max_sge = a.cap.max_recv_sge;
	struct ibv_wq &w = wq->wq;
	w.context = context;
	w.wq_context = attr->wq_context;
	w.pd = attr->pd;
	w.cq = attr->cq;
	w.wq_num = q->qp_num;
	w.handle = q->handle;
	w.state = IBV_WQS_RESET;
	w.wq_type = IBV_WQT_RQ;
	w.post_recv = soft_post_wq_recv;
	w.comp_mask = 0;
	return &wq->wq;
}

int soft_modify_wq(struct ibv_wq *ibwq, struct ibv_wq_attr *attr)
{
	if (!ibwq || !attr)
		return EINVAL;
	auto *wq = reinterpret_cast<SoftWq *>(ibwq);
	if (attr->attr_mask & ~uint32_t(IBV_WQ_ATTR_STATE | IBV_WQ_ATTR_CURR_STATE | IBV_WQ_ATTR_FLAGS))
		return EINVAL;
	if ((attr->attr_mask & IBV_WQ_ATTR_FLAGS) && attr->flags_mask)
		return EOPNOTSUPP;
	enum ibv_wq_state cur = ibwq->state;
	if ((attr->attr_mask & IBV_WQ_ATTR_CURR_STATE) && attr->curr_wq_state != cur)
		return EINVAL;
	if (!(attr->attr_mask & IBV_WQ_ATTR_STATE))
		return 0;
	enum ibv_wq_state next = attr->wq_state;
	struct ibv_qp *q = &wq->qp->vqp.qp;
	struct ibv_qp_attr qa = {};
	int e = 0;
	switch (next) {
	case IBV_WQS_RESET:
		qa.qp_state = IBV_QPS_RESET;
		e = soft_modify_qp(q, &qa, IBV_QP_STATE);
		break;
	case IBV_WQS_RDY:
		if (cur == IBV_WQS_RDY)
			return 0;
		if (cur != IBV_WQS_RESET)
			return EINVAL; // from the error state only through RESET
		qa.qp_state = IBV_QPS_INIT;
		qa.port_num = 1;
		e = soft_modify_qp(q, &qa, IBV_QP_STATE | IBV_QP_PORT);
		if (!e) {
			qa.qp_state = IBV_QPS_RTR;
			e = soft_modify_qp(q, &qa, IBV_QP_STATE);
		}
		break;
	case IBV_WQS_ERR:
		qa.qp_state = IBV_QPS_ERR;
		e = soft_modify_qp(q, &qa, IBV_QP_STATE);
		break;
	default:
		return EINVAL;
	}
	if (!e)
		ibwq->state = next;
	return e;
}

int soft_destroy_wq(struct ibv_wq *ibwq)
{
	if (!ibwq)
		return EINVAL;
	auto *wq = reinterpret_cast<SoftWq *>(ibwq);
	if (wq->users.load())
		return EBUSY; // an indirection table names it
	int e = soft_destroy_qp(&wq->qp->vqp.qp);
	if (e)
		return e;
	free(wq);
	return 0;
}

// ------------------------------------------------------------------ indirection tables

struct ibv_rwq_ind_table *soft_create_rwq_ind_table(struct ibv_context *context,
						   struct ibv_rwq_ind_table_init_attr *attr)
{
	if (!context || !attr) {
		errno = EINVAL;
		return nullptr;
	}
	SoftContext *ctx = to_sctx(context);
	if (!ctx->eth) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	if (attr->comp_mask || !attr->ind_tbl || (1u << std::min<uint32_t>(attr->log_ind_tbl_size, 31)) > kRssMaxTable) {
		errno = EINVAL;
		return nullptr;
	}
	uint32_t n = 1u << attr->log_ind_tbl_size;
	for (uint32_t i = 0; i < n; i++)
		if (!attr->ind_tbl[i] || attr->ind_tbl[i]->context != context) {
			errno = EINVAL;
			return nullptr;
		}
	if (ctx->ind_tables.fetch_add(1) >= kMaxIndTables) {
		ctx->ind_tables.fetch_sub(1);
		errno = ENOMEM;
		return nullptr;
	}
	auto *t = static_cast<SoftIndTable *>(calloc(1, sizeof(SoftIndTable)));
	if (!t) {
		ctx->ind_tables.fetch_sub(1);
		errno = ENOMEM;
		return nullptr;
	}
	static std::atomic<int> next_num{1};
	t->log_size = attr->log_ind_tbl_size;
	for (uint32_t i = 0; i < n; i++) {
		t->wqs[i] = reinterpret_cast<SoftWq *>(attr->ind_tbl[i]);
		t->wqs[i]->users.fetch_add(1);
	}
	t->t.context = context;
	t->t.ind_tbl_num = next_num.fetch_add(1);
	t->t.ind_tbl_handle = t->t.ind_tbl_num;
	t->t.comp_mask = 0;
	return &t->t;
}

int soft_destroy_rwq_ind_table(struct ibv_rwq_ind_table *it)
{
	if (!it)
		return EINVAL;
	auto *t = reinterpret_cast<SoftIndTable *>(it);
	if (t->users.load())
		return EBUSY; // an RSS QP uses it
	for (uint32_t i = 0; i < (1u << t->log_size); i++)
		t->wqs[i]->users.fetch_sub(1);
	to_sctx(it->context)->ind_tables.fetch_sub(1);
	free(t);
	return 0;
}

// ------------------------------------------------------------------ caps

void raw_caps(struct ibv_device_attr_ex &a)
{
	a.orig_attr.device_cap_flags |= IBV_DEVICE_MANAGED_FLOW_STEERING;
	a.device_cap_flags_ex |= IBV_DEVICE_MANAGED_FLOW_STEERING;
	// Frames are steered as they are: no VLAN stripping, no checksums, no
	// FCS, no delay drop.
	a.raw_packet_caps = 0;
	a.rss_caps.supported_qpts = 1u << IBV_QPT_RAW_PACKET;
	a.rss_caps.max_rwq_indirection_tables = kMaxIndTables;
	a.rss_caps.max_rwq_indirection_table_size = kRssMaxTable;
	a.rss_caps.rx_hash_fields_mask = IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 |
					 IBV_RX_HASH_SRC_IPV6 | IBV_RX_HASH_DST_IPV6 |
					 IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP |
					 IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP;
	a.rss_caps.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
	a.max_wq_type_rq = kMaxQps;
}

} // namespace ovsoft
