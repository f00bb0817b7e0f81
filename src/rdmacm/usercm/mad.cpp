// InfiniBand CM messages as MADs (mad.h). Field positions: IBTA vol 1,
// Tables 106 (REQ), 107 (MRA), 108 (REJ), 110 (REP), 111 (RTU), 112 (DREQ),
// 113 (DREP), 119 (SIDR_REQ), 120 (SIDR_REP); offsets below count from the
// start of the message data (after the 24-byte MAD header), bits from the
// most significant bit of a byte.
#include "mad.h"

#include <atomic>
#include <cstring>
#include <sys/socket.h>

namespace ov::usercm::mad {

namespace {

std::atomic<uint64_t> g_failures[size_t(MadError::count_)];

MadError fail(MadError e)
{
	g_failures[size_t(e)].fetch_add(1, std::memory_order_relaxed);
	return e;
}

void put16(uint8_t *p, uint16_t v)
{
	p[0] = uint8_t(v >> 8);
	p[1] = uint8_t(v);
}
void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = uint8_t(v >> (24 - 8 * i));
}
void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = uint8_t(v >> (56 - 8 * i));
}
uint16_t get16(const uint8_t *p) { return uint16_t(p[0] << 8 | p[1]); }
uint32_t get32(const uint8_t *p)
{
	return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}
uint64_t get64(const uint8_t *p) { return uint64_t(get32(p)) << 32 | get32(p + 4); }
// A 24-bit field in the high bits of a 32-bit word, and the byte after it.
void put24(uint8_t *p, uint32_t v)
{
	p[0] = uint8_t(v >> 16);
	p[1] = uint8_t(v >> 8);
	p[2] = uint8_t(v);
}
uint32_t get24(const uint8_t *p) { return uint32_t(p[0]) << 16 | uint32_t(p[1]) << 8 | p[2]; }

bool zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

// Offset of the private data in each message's data.
size_t private_offset(Attr a)
{
	switch (a) {
	case Attr::req: return 140;
	case Attr::mra: return 10;
	case Attr::rej: return 84;
	case Attr::rep: return 36;
	case Attr::rtu: return 8;
	case Attr::dreq: return 12;
	case Attr::drep: return 8;
	case Attr::sidr_req: return 16;
	case Attr::sidr_rep: return 96;
	}
	return 0;
}

bool known(uint16_t attr) { return attr >= uint16_t(Attr::req) && attr <= uint16_t(Attr::sidr_rep); }

// The checks both directions share: every field in its range.
bool fields_ok(const Mad &m)
{
	if (m.qpn > 0xffffff || m.psn > 0xffffff || m.flow_label > 0xfffff || m.rate > 63 ||
	    m.sl > 15 || m.ack_timeout > 31 || m.target_ack_delay > 31 || m.failover > 3 ||
	    m.service_timeout > 31 || m.remote_cm_timeout > 31 || m.local_cm_timeout > 31 ||
	    m.retry > 7 || m.rnr_retry > 7 || m.max_cm_retries > 15 || m.ari_len > 72)
		return false;
	switch (m.attr) {
	case Attr::req:
		return m.qpn != 0 && m.mtu >= 1 && m.mtu <= 5 &&
		       (m.transport == kTransportRc || m.transport == kTransportUc);
	case Attr::rep:
		return m.qpn != 0;
	case Attr::mra:
	case Attr::rej:
		return m.msg <= kMsgOther;
	case Attr::sidr_rep:
		return m.status <= 4;
	default:
		return true;
	}
}

} // namespace

size_t private_bytes(Attr a) noexcept
{
	return known(uint16_t(a)) ? 232 - private_offset(a) : 0;
}

bool encode(const Mad &m, uint8_t out[kMadBytes]) noexcept
{
	if (!known(uint16_t(m.attr)) || !fields_ok(m))
		return false;
	memset(out, 0, kMadBytes);
	out[0] = kBaseVersion;
	out[1] = kClassCm;
	out[2] = kClassVersion;
	out[3] = kMethodSend;
	put64(out + 8, m.tid);
	put16(out + 16, uint16_t(m.attr));
	uint8_t *d = out + kHeaderBytes;
	put32(d, m.local_id);
	switch (m.attr) {
	case Attr::req:
		put64(d + 8, m.service_id);
		memcpy(d + 16, m.ca_guid, 8);
		put32(d + 28, m.qkey);
		put24(d + 32, m.qpn);
		d[35] = m.resp_res;
		d[39] = m.init_depth;
		d[43] = uint8_t(m.remote_cm_timeout << 3 | m.transport << 1 | m.flow_control);
		put24(d + 44, m.psn);
		d[47] = uint8_t(m.local_cm_timeout << 3 | m.retry);
		put16(d + 48, m.pkey);
		d[50] = uint8_t(m.mtu << 4 | m.rnr_retry);
		d[51] = uint8_t(m.max_cm_retries << 4 | uint8_t(m.srq) << 3);
		put16(d + 52, m.slid);
		put16(d + 54, m.dlid);
		memcpy(d + 56, m.sgid, 16);
		memcpy(d + 72, m.dgid, 16);
		put32(d + 88, m.flow_label << 12 | m.rate);
		d[92] = m.traffic_class;
		d[93] = m.hop_limit;
		d[94] = uint8_t(m.sl << 4 | uint8_t(m.subnet_local) << 3);
		d[95] = uint8_t(m.ack_timeout << 3);
		break;
	case Attr::rep:
		put32(d + 4, m.remote_id);
		put32(d + 8, m.qkey);
		put24(d + 12, m.qpn);
		put24(d + 20, m.psn);
		d[24] = m.resp_res;
		d[25] = m.init_depth;
		d[26] = uint8_t(m.target_ack_delay << 3 | m.failover << 1 | m.flow_control);
		d[27] = uint8_t(m.rnr_retry << 5 | uint8_t(m.srq) << 4);
		memcpy(d + 28, m.ca_guid, 8);
		break;
	case Attr::mra:
		put32(d + 4, m.remote_id);
		d[8] = uint8_t(m.msg << 6);
		d[9] = uint8_t(m.service_timeout << 3);
		break;
	case Attr::rej:
		put32(d + 4, m.remote_id);
		d[8] = uint8_t(m.msg << 6);
		d[9] = uint8_t(m.ari_len << 1);
		put16(d + 10, m.reason);
		memcpy(d + 12, m.ari, 72);
		break;
	case Attr::rtu:
	case Attr::drep:
		put32(d + 4, m.remote_id);
		break;
	case Attr::dreq:
		put32(d + 4, m.remote_id);
		put24(d + 8, m.qpn);
		break;
	case Attr::sidr_req:
		put16(d + 4, m.pkey);
		put64(d + 8, m.service_id);
		break;
	case Attr::sidr_rep:
		d[4] = m.status;
		put24(d + 8, m.qpn);
		put64(d + 12, m.service_id);
		put32(d + 20, m.qkey);
		break;
	}
	memcpy(d + private_offset(m.attr), m.private_data, private_bytes(m.attr));
	return true;
}

MadError parse(const uint8_t *buf, size_t len, Mad &m) noexcept
{
	if (!buf || len != kMadBytes)
		return fail(MadError::bad_length);
	if (buf[0] != kBaseVersion || buf[1] != kClassCm || buf[2] != kClassVersion ||
	    buf[3] != kMethodSend || get16(buf + 4) != 0 || get16(buf + 6) != 0)
		return fail(MadError::bad_header);
	uint16_t attr = get16(buf + 16);
	if (!known(attr))
		return fail(MadError::bad_attribute);
	if (!zero(buf + 18, 2))
		return fail(MadError::bad_reserved);
	// The attribute modifier is not read: a peer with enhanced connection
	// establishment (ECE) puts its options there.
	m = Mad{};
	m.attr = Attr(attr);
	m.tid = get64(buf + 8);
	const uint8_t *d = buf + kHeaderBytes;
	m.local_id = get32(d);
	bool reserved_ok = true;
	switch (m.attr) {
	case Attr::req:
		// Reserved: 4..7; EECNs (RD only) 36..38, 40..42; the low bits
		// of 95. 24..27 (where an ECE peer puts its vendor ID) and the
		// alternate path (96..139, unused over RoCE) are not read.
		reserved_ok = zero(d + 4, 4) && zero(d + 36, 3) && zero(d + 40, 3) &&
			      (d[50] & 0x08) == 0 && (d[51] & 0x07) == 0 && (d[91] & 0xc0) == 0 &&
			      (d[94] & 0x07) == 0 && (d[95] & 0x07) == 0;
		m.service_id = get64(d + 8);
		memcpy(m.ca_guid, d + 16, 8);
		m.qkey = get32(d + 28);
		m.qpn = get24(d + 32);
		m.resp_res = d[35];
		m.init_depth = d[39];
		m.remote_cm_timeout = d[43] >> 3;
		m.transport = (d[43] >> 1) & 3;
		m.flow_control = d[43] & 1;
		m.psn = get24(d + 44);
		m.local_cm_timeout = d[47] >> 3;
		m.retry = d[47] & 7;
		m.pkey = get16(d + 48);
		m.mtu = d[50] >> 4;
		m.rnr_retry = d[50] & 7;
		m.max_cm_retries = d[51] >> 4;
		m.srq = (d[51] >> 3) & 1;
		m.slid = get16(d + 52);
		m.dlid = get16(d + 54);
		memcpy(m.sgid, d + 56, 16);
		memcpy(m.dgid, d + 72, 16);
		m.flow_label = get32(d + 88) >> 12;
		reserved_ok = reserved_ok && (get32(d + 88) & 0xfc0) == 0;
		m.rate = d[91] & 0x3f;
		m.traffic_class = d[92];
		m.hop_limit = d[93];
		m.sl = d[94] >> 4;
		m.subnet_local = (d[94] >> 3) & 1;
		m.ack_timeout = d[95] >> 3;
		break;
	case Attr::rep:
		// EECN (RD only) 16..18; the bytes 15, 19 and 23 (an ECE
		// peer's vendor ID) are not read.
		reserved_ok = zero(d + 16, 3) && (d[27] & 0x0f) == 0;
		m.remote_id = get32(d + 4);
		m.qkey = get32(d + 8);
		m.qpn = get24(d + 12);
		m.psn = get24(d + 20);
		m.resp_res = d[24];
		m.init_depth = d[25];
		m.target_ack_delay = d[26] >> 3;
		m.failover = (d[26] >> 1) & 3;
		m.flow_control = d[26] & 1;
		m.rnr_retry = d[27] >> 5;
		m.srq = (d[27] >> 4) & 1;
		memcpy(m.ca_guid, d + 28, 8);
		break;
	case Attr::mra:
		reserved_ok = (d[8] & 0x3f) == 0 && (d[9] & 0x07) == 0;
		m.remote_id = get32(d + 4);
		m.msg = d[8] >> 6;
		m.service_timeout = d[9] >> 3;
		break;
	case Attr::rej:
		reserved_ok = (d[8] & 0x3f) == 0 && (d[9] & 0x01) == 0;
		m.remote_id = get32(d + 4);
		m.msg = d[8] >> 6;
		m.ari_len = d[9] >> 1;
		m.reason = get16(d + 10);
		memcpy(m.ari, d + 12, 72);
		break;
	case Attr::rtu:
	case Attr::drep:
		m.remote_id = get32(d + 4);
		break;
	case Attr::dreq:
		reserved_ok = d[11] == 0;
		m.remote_id = get32(d + 4);
		m.qpn = get24(d + 8);
		break;
	case Attr::sidr_req:
		reserved_ok = d[6] == 0 && d[7] == 0;
		m.pkey = get16(d + 4);
		m.service_id = get64(d + 8);
		break;
	case Attr::sidr_rep:
		reserved_ok = d[6] == 0 && d[7] == 0 && d[11] == 0;
		m.status = d[4];
		m.qpn = get24(d + 8);
		m.service_id = get64(d + 12);
		m.qkey = get32(d + 20);
		break;
	}
	if (!reserved_ok)
		return fail(MadError::bad_reserved);
	memcpy(m.private_data, d + private_offset(m.attr), private_bytes(m.attr));
	if (!fields_ok(m))
		return fail(MadError::bad_field);
	return MadError::ok;
}

uint64_t mad_failures(MadError reason) noexcept
{
	if (reason != MadError::ok)
		return g_failures[size_t(reason)].load(std::memory_order_relaxed);
	uint64_t n = 0;
	for (auto &f : g_failures)
		n += f.load(std::memory_order_relaxed);
	return n;
}

const char *mad_error_name(MadError e) noexcept
{
	switch (e) {
	case MadError::ok: return "ok";
	case MadError::bad_length: return "length";
	case MadError::bad_header: return "header";
	case MadError::bad_attribute: return "attribute";
	case MadError::bad_reserved: return "reserved";
	case MadError::bad_field: return "field";
	case MadError::count_: break;
	}
	return "?";
}

void encode_cma(const CmaHeader &h, uint8_t out[kCmaHeaderBytes]) noexcept
{
	memset(out, 0, kCmaHeaderBytes);
	out[0] = 0; // version
	bool v4 = h.family == AF_INET;
	out[1] = uint8_t((v4 ? 4 : 6) << 4);
	put16(out + 2, h.src_port);
	if (v4) {
		memcpy(out + 4 + 12, h.src, 4);
		memcpy(out + 20 + 12, h.dst, 4);
	} else {
		memcpy(out + 4, h.src, 16);
		memcpy(out + 20, h.dst, 16);
	}
}

bool parse_cma(const uint8_t in[kCmaHeaderBytes], CmaHeader &h) noexcept
{
	h = CmaHeader{};
	if (in[0] != 0 || (in[1] != 0x40 && in[1] != 0x60)) { // (the low nibble is reserved)
		fail(MadError::bad_field);
		return false;
	}
	h.src_port = get16(in + 2);
	if (in[1] >> 4 == 4) {
		if (!zero(in + 4, 12) || !zero(in + 20, 12)) {
			fail(MadError::bad_field);
			return false;
		}
		h.family = AF_INET;
		memcpy(h.src, in + 16, 4);
		memcpy(h.dst, in + 32, 4);
	} else {
		h.family = AF_INET6;
		memcpy(h.src, in + 4, 16);
		memcpy(h.dst, in + 20, 16);
	}
	return true;
}

} // namespace ov::usercm::mad
