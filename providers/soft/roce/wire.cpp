// RoCE v2 headers and ICRC (wire.h).
#include "wire.h"

#include <cstdint>
#include <cstring>
#include <zlib.h>

namespace ovroce {

namespace {

inline uint16_t ld16(const uint8_t *p) { return uint16_t(p[0] << 8 | p[1]); }
inline uint32_t ld24(const uint8_t *p) { return uint32_t(p[0]) << 16 | uint32_t(p[1]) << 8 | p[2]; }
inline uint32_t ld32(const uint8_t *p)
{
	return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}
inline uint64_t ld64(const uint8_t *p) { return uint64_t(ld32(p)) << 32 | ld32(p + 4); }
inline void st16(uint8_t *p, uint16_t v)
{
	p[0] = uint8_t(v >> 8);
	p[1] = uint8_t(v);
}
inline void st24(uint8_t *p, uint32_t v)
{
	p[0] = uint8_t(v >> 16);
	p[1] = uint8_t(v >> 8);
	p[2] = uint8_t(v);
}
inline void st32(uint8_t *p, uint32_t v)
{
	st16(p, uint16_t(v >> 16));
	st16(p + 2, uint16_t(v));
}
inline void st64(uint8_t *p, uint64_t v)
{
	st32(p, uint32_t(v >> 32));
	st32(p + 4, uint32_t(v));
}

// Operation part of the opcode -> flags, for RC (UC and UD use subsets).
uint32_t op_flags(uint8_t op)
{
	constexpr uint32_t S = F_SEND | F_PAYLOAD | F_REQUEST;
	constexpr uint32_t W = F_WRITE | F_PAYLOAD | F_REQUEST;
	constexpr uint32_t R = F_READ_RESP | F_PAYLOAD;
	switch (op) {
	case kSendFirst: return S | F_FIRST;
	case kSendMiddle: return S | F_MIDDLE;
	case kSendLast: return S | F_LAST;
	case kSendLastImm: return S | F_LAST | F_IMM;
	case kSendOnly: return S | F_ONLY;
	case kSendOnlyImm: return S | F_ONLY | F_IMM;
	case kWriteFirst: return W | F_FIRST | F_RETH;
	case kWriteMiddle: return W | F_MIDDLE;
	case kWriteLast: return W | F_LAST;
	case kWriteLastImm: return W | F_LAST | F_IMM;
	case kWriteOnly: return W | F_ONLY | F_RETH;
	case kWriteOnlyImm: return W | F_ONLY | F_RETH | F_IMM;
	case kReadRequest: return F_READ_REQ | F_REQUEST | F_ONLY | F_RETH;
	case kReadRespFirst: return R | F_FIRST | F_AETH;
	case kReadRespMiddle: return R | F_MIDDLE;
	case kReadRespLast: return R | F_LAST | F_AETH;
	case kReadRespOnly: return R | F_ONLY | F_AETH;
	case kAck: return F_ACK | F_AETH;
	case kAtomicAck: return F_ACK | F_AETH | F_ATOMIC_ACK;
	case kCompareSwap:
	case kFetchAdd: return F_ATOMIC_REQ | F_REQUEST | F_ONLY | F_ATOMIC;
	case kSendLastInv: return S | F_LAST | F_IETH;
	case kSendOnlyInv: return S | F_ONLY | F_IETH;
	default: return 0;
	}
}

} // namespace

uint32_t opcode_flags(uint8_t opcode)
{
	uint8_t t = opcode & 0xe0, op = opcode & 0x1f;
	uint32_t f = 0;
	switch (t) {
	case kRC:
		f = op_flags(op);
		break;
	case kUC:
		if (op <= kWriteOnlyImm)
			f = op_flags(op);
		break;
	case kUD:
		if (op == kSendOnly || op == kSendOnlyImm)
			f = op_flags(op) | F_DETH;
		break;
	case kXRC:
		f = op_flags(op);
		if (f & F_REQUEST)
			f |= F_XRCETH;
		break;
	default:
		break;
	}
	return f ? f | F_KNOWN : 0;
}

size_t ext_header_bytes(uint32_t f)
{
	size_t n = 0;
	if (f & F_XRCETH)
		n += kXrcEthBytes;
	if (f & F_DETH)
		n += kDethBytes;
	if (f & F_RETH)
		n += kRethBytes;
	if (f & F_ATOMIC)
		n += kAtomicEthBytes;
	if (f & F_AETH)
		n += kAethBytes;
	if (f & F_ATOMIC_ACK)
		n += kAtomicAckBytes;
	if (f & F_IMM)
		n += kImmBytes;
	if (f & F_IETH)
		n += kIethBytes;
	return n;
}

const char *opcode_name(uint8_t opcode)
{
	static const char *const ops[] = {
		"SEND_FIRST", "SEND_MIDDLE", "SEND_LAST", "SEND_LAST_WITH_IMMEDIATE", "SEND_ONLY",
		"SEND_ONLY_WITH_IMMEDIATE", "RDMA_WRITE_FIRST", "RDMA_WRITE_MIDDLE",
		"RDMA_WRITE_LAST", "RDMA_WRITE_LAST_WITH_IMMEDIATE", "RDMA_WRITE_ONLY",
		"RDMA_WRITE_ONLY_WITH_IMMEDIATE", "RDMA_READ_REQUEST", "RDMA_READ_RESPONSE_FIRST",
		"RDMA_READ_RESPONSE_MIDDLE", "RDMA_READ_RESPONSE_LAST", "RDMA_READ_RESPONSE_ONLY",
		"ACKNOWLEDGE", "ATOMIC_ACKNOWLEDGE", "COMPARE_SWAP", "FETCH_ADD", "RESERVED",
		"SEND_LAST_WITH_INVALIDATE", "SEND_ONLY_WITH_INVALIDATE"};
	if (!opcode_flags(opcode))
		return "UNKNOWN";
	return ops[opcode & 0x1f];
}

const char *drop_name(Drop d)
{
	switch (d) {
	case D_OK: return "ok";
	case D_SHORT: return "short";
	case D_VERSION: return "version";
	case D_OPCODE: return "opcode";
	case D_PAD: return "pad";
	case D_PAYLOAD: return "payload";
	case D_ICRC: return "icrc";
	case D_QPN: return "qpn";
	case D_STATE: return "state";
	case D_SOURCE: return "source";
	case D_LENGTH: return "length";
	case D_QKEY: return "qkey";
	case D_FILTERED: return "filtered";
	case D_COUNT: break;
	}
	return "?";
}

Drop decode(const uint8_t *p, size_t n, Packet *out)
{
	if (!p || n < kBthBytes + kIcrcBytes)
		return D_SHORT;
	Packet k;
	Bth &b = k.bth;
	b.opcode = p[0];
	b.se = p[1] & 0x80;
	b.mig = p[1] & 0x40;
	b.pad = (p[1] >> 4) & 3;
	b.tver = p[1] & 0xf;
	b.pkey = ld16(p + 2);
	b.fecn = p[4] & 0x80;
	b.becn = p[4] & 0x40;
	b.dqpn = ld24(p + 5);
	b.ack_req = p[8] & 0x80;
	b.psn = ld24(p + 9);
	if (b.tver != 0)
		return D_VERSION;
	k.flags = opcode_flags(b.opcode);
	if (!k.flags)
		return D_OPCODE;
	size_t hdr = kBthBytes + ext_header_bytes(k.flags);
	if (n < hdr + kIcrcBytes)
		return D_SHORT;
	size_t body = n - hdr - kIcrcBytes; // payload + pad
	if (!(k.flags & F_PAYLOAD)) {
		if (b.pad)
			return D_PAD;
		if (body)
			return D_PAYLOAD;
	} else if (b.pad > body || (body & 3)) {
		// Payload + pad is always a whole number of 4-byte words.
		return D_PAD;
	}
	const uint8_t *q = p + kBthBytes;
	if (k.flags & F_XRCETH) {
		k.xrc_srqn = ld24(q + 1); // the first byte is reserved
		q += kXrcEthBytes;
	}
	if (k.flags & F_DETH) {
		k.deth.qkey = ld32(q);
		k.deth.src_qpn = ld24(q + 5);
		q += kDethBytes;
	}
	if (k.flags & F_RETH) {
		k.reth.va = ld64(q);
		k.reth.rkey = ld32(q + 8);
		k.reth.len = ld32(q + 12);
		q += kRethBytes;
	}
	if (k.flags & F_ATOMIC) {
		k.atomic.va = ld64(q);
		k.atomic.rkey = ld32(q + 8);
		k.atomic.swap_add = ld64(q + 12);
		k.atomic.compare = ld64(q + 20);
		q += kAtomicEthBytes;
	}
	if (k.flags & F_AETH) {
		k.syndrome = q[0];
		k.msn = ld24(q + 1);
		q += kAethBytes;
	}
	if (k.flags & F_ATOMIC_ACK) {
		k.orig = ld64(q);
		q += kAtomicAckBytes;
	}
	if (k.flags & F_IMM) {
		k.imm = ld32(q);
		q += kImmBytes;
	}
	if (k.flags & F_IETH) {
		k.ieth = ld32(q);
		q += kIethBytes;
	}
	k.payload = q;
	k.payload_len = uint32_t(body - b.pad);
	*out = k;
	return D_OK;
}

size_t encode_headers(const Packet &k, uint8_t *buf)
{
	const Bth &b = k.bth;
	uint32_t f = opcode_flags(b.opcode);
	if (!f)
		return 0;
	buf[0] = b.opcode;
	buf[1] = uint8_t((b.se ? 0x80 : 0) | (b.mig ? 0x40 : 0) | ((b.pad & 3) << 4) | (b.tver & 0xf));
	st16(buf + 2, b.pkey);
	buf[4] = uint8_t((b.fecn ? 0x80 : 0) | (b.becn ? 0x40 : 0));
	st24(buf + 5, b.dqpn & kQpnMask);
	buf[8] = b.ack_req ? 0x80 : 0;
	st24(buf + 9, b.psn & kPsnMask);
	uint8_t *q = buf + kBthBytes;
	if (f & F_XRCETH) {
		q[0] = 0;
		st24(q + 1, k.xrc_srqn & 0xffffff);
		q += kXrcEthBytes;
	}
	if (f & F_DETH) {
		st32(q, k.deth.qkey);
		q[4] = 0;
		st24(q + 5, k.deth.src_qpn & kQpnMask);
		q += kDethBytes;
	}
	if (f & F_RETH) {
		st64(q, k.reth.va);
		st32(q + 8, k.reth.rkey);
		st32(q + 12, k.reth.len);
		q += kRethBytes;
	}
	if (f & F_ATOMIC) {
		st64(q, k.atomic.va);
		st32(q + 8, k.atomic.rkey);
		st64(q + 12, k.atomic.swap_add);
		st64(q + 20, k.atomic.compare);
		q += kAtomicEthBytes;
	}
	if (f & F_AETH) {
		q[0] = k.syndrome;
		st24(q + 1, k.msn & 0xffffff);
		q += kAethBytes;
	}
	if (f & F_ATOMIC_ACK) {
		st64(q, k.orig);
		q += kAtomicAckBytes;
	}
	if (f & F_IMM) {
		st32(q, k.imm);
		q += kImmBytes;
	}
	if (f & F_IETH) {
		st32(q, k.ieth);
		q += kIethBytes;
	}
	return size_t(q - buf);
}

// ------------------------------------------------------------------ ICRC

namespace {

// The masked pseudo-header: 8 x 0xff, IP header, UDP header. Returns its
// length; `id_at` receives the offset of the IPv4 identification (0 for IPv6).
size_t pseudo_header(const IpMeta &ip, size_t n, uint8_t *h, size_t *id_at)
{
	memset(h, 0xff, 8);
	uint8_t *q = h + 8;
	size_t udp_len = 8 + n + kIcrcBytes;
	if (ip.v6) {
		q[0] = 0x6f; // version 6, traffic class and flow label all ones
		q[1] = q[2] = q[3] = 0xff;
		st16(q + 4, uint16_t(udp_len));
		q[6] = 17;   // next header: UDP
		q[7] = 0xff; // hop limit
		memcpy(q + 8, ip.src, 16);
		memcpy(q + 24, ip.dst, 16);
		q += 40;
		*id_at = 0;
	} else {
		q[0] = 0x45;
		q[1] = 0xff; // type of service
		st16(q + 2, uint16_t(20 + udp_len));
		st16(q + 4, ip.ip_id);
		st16(q + 6, ip.df ? 0x4000 : 0);
		q[8] = 0xff; // time to live
		q[9] = 17;
		q[10] = q[11] = 0xff; // header checksum
		memcpy(q + 12, ip.src, 4);
		memcpy(q + 16, ip.dst, 4);
		q += 20;
		*id_at = 8 + 4;
	}
	st16(q, ip.sport);
	st16(q + 2, ip.dport);
	st16(q + 4, uint16_t(udp_len));
	q[6] = q[7] = 0xff; // UDP checksum
	q += 8;
	return size_t(q - h);
}

uint32_t crc_with(const uint8_t *h, size_t hl, const uint8_t *p, size_t n)
{
	uint8_t bth[kBthBytes];
	memcpy(bth, p, kBthBytes);
	bth[4] = 0xff; // FECN, BECN, reserved
	const CrcFn more = crc_function();
	uint32_t c = more(0, h, hl);
	c = more(c, bth, kBthBytes);
	return more(c, p + kBthBytes, n - kBthBytes);
}

} // namespace

uint32_t icrc_compute(const IpMeta &ip, const uint8_t *p, size_t n)
{
	if (n < kBthBytes)
		return 0;
	uint8_t h[8 + 40 + 8];
	size_t id_at;
	size_t hl = pseudo_header(ip, n, h, &id_at);
	return crc_with(h, hl, p, n);
}

uint32_t icrc_read(const uint8_t *p, size_t n)
{
	const uint8_t *q = p + n - kIcrcBytes;
	return uint32_t(q[0]) | uint32_t(q[1]) << 8 | uint32_t(q[2]) << 16 | uint32_t(q[3]) << 24;
}

void icrc_write(uint8_t *at, uint32_t v)
{
	at[0] = uint8_t(v);
	at[1] = uint8_t(v >> 8);
	at[2] = uint8_t(v >> 16);
	at[3] = uint8_t(v >> 24);
}

namespace {

// The 16 vectors an identification bit adds to the CRC of a datagram whose
// identification is followed by k more bytes, reduced to an echelon basis
// over GF(2) (basis[hb]: the vector whose highest set bit is hb, who[hb]:
// the identification bits it is made of). The same k comes again and again
// (a flow's packets have one size): one basis per thread is remembered.
struct IdBasis {
	size_t k = SIZE_MAX;
	uint32_t basis[32];
	uint32_t who[32];
};

const IdBasis &id_basis(size_t k)
{
	static thread_local IdBasis b;
	if (b.k == k)
		return b;
	// The CRC of two messages of one length differs by the CRC (no initial
	// value, no final inversion) of their difference: here the 16 bits of
	// the identification, followed by k more bytes of the virtual message.
	// Each bit's contribution is its 2-byte CRC moved k bytes along
	// (multiplied by x^8k: zlib's crc32_combine_op with a zero second CRC).
	uLong op = crc32_combine_gen(z_off_t(k));
	static const uint8_t zero2[2] = {0, 0};
	uLong c0 = crc32(0L, zero2, 2);
	memset(b.basis, 0, sizeof(b.basis));
	memset(b.who, 0, sizeof(b.who));
	for (int bit = 0; bit < 16; bit++) {
		uint8_t b2[2] = {uint8_t((1u << bit) >> 8), uint8_t(1u << bit)};
		uLong raw = crc32(0L, b2, 2) ^ c0;
		uint32_t v = uint32_t(crc32_combine_op(raw, 0, op)), w = 1u << bit;
		// Gaussian elimination: reduce v by the basis so far.
		for (int hb = 31; hb >= 0 && v; hb--) {
			if (!(v >> hb & 1))
				continue;
			if (!b.basis[hb]) {
				b.basis[hb] = v;
				b.who[hb] = w;
				break;
			}
			v ^= b.basis[hb];
			w ^= b.who[hb];
		}
	}
	b.k = k;
	return b;
}

} // namespace

bool icrc_check(const IpMeta &ip, const uint8_t *p, size_t n, bool *solved_id, uint16_t *id_out)
{
	if (solved_id)
		*solved_id = false;
	if (id_out)
		*id_out = 0;
	if (!p || n < kBthBytes + kIcrcBytes)
		return false;
	size_t body = n - kIcrcBytes;
	uint32_t want = icrc_read(p, n);
	IpMeta m = ip;
	if (!m.v6)
		m.ip_id = 0;
	uint8_t h[8 + 40 + 8];
	size_t id_at;
	size_t hl = pseudo_header(m, body, h, &id_at);
	uint32_t got = crc_with(h, hl, p, body);
	if (got == want)
		return true;
	if (m.v6)
		return false;
	// Solve for the identification whose contribution is the difference:
	// reduce it by the echelon basis. A difference the basis does not
	// reach is damage; one it reaches is exactly the CRC with that
	// identification (the CRC is affine in the message), so the CRC is not
	// computed a second time.
	const IdBasis &b = id_basis(hl + body - (id_at + 2));
	uint32_t r = got ^ want, id = 0;
	for (int hb = 31; hb >= 0; hb--) {
		if (!(r >> hb & 1))
			continue;
		if (!b.basis[hb])
			return false; // not reachable by any identification
		r ^= b.basis[hb];
		id ^= b.who[hb];
	}
	if (solved_id)
		*solved_id = true;
	if (id_out)
		*id_out = uint16_t(id);
	return true;
}

} // namespace ovroce
