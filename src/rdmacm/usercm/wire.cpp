// Encoder and strict parser of the user-space CM's messages (wire.h).
#include "wire.h"

#include <cstring>
#include <netinet/in.h>
#include <sys/socket.h>

namespace ov::usercm {

namespace {

std::atomic<uint64_t> g_failures[size_t(ParseError::count_)];

constexpr uint16_t kPsIpoib = 0x0002, kPsTcp = 0x0106, kPsUdp = 0x0111, kPsIb = 0x013f;
constexpr uint8_t kQpRc = 2, kQpUc = 3, kQpXrcSend = 9; // enum ibv_qp_type
constexpr uint8_t kFlagSrq = 1, kFlagFlowControl = 2;

// Appends little-endian fields; never writes past `cap` (ok() turns false).
class Writer {
public:
	Writer(uint8_t *p, size_t cap) : p_(p), cap_(cap) {}
	void u8(uint8_t v) { put(&v, 1); }
	void u16(uint16_t v) { uint8_t b[2] = {uint8_t(v), uint8_t(v >> 8)}; put(b, 2); }
	void u32(uint32_t v)
	{
		uint8_t b[4] = {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)};
		put(b, 4);
	}
	void bytes(const uint8_t *v, size_t n) { put(v, n); }
	void zeros(size_t n)
	{
		for (size_t i = 0; i < n; i++)
			u8(0);
	}
	size_t size() const { return n_; }
	bool ok() const { return ok_; }

private:
	void put(const uint8_t *v, size_t n)
	{
		if (!ok_ || cap_ - n_ < n) {
			ok_ = false;
			return;
		}
		memcpy(p_ + n_, v, n);
		n_ += n;
	}
	uint8_t *p_;
	size_t cap_, n_ = 0;
	bool ok_ = true;
};

// Reads little-endian fields; a read past the end or a non-zero reserved
// byte records the first error and yields zeros from then on.
class Reader {
public:
	Reader(const uint8_t *p, size_t len) : p_(p), len_(len) {}
	uint8_t u8()
	{
		uint8_t b[1];
		return get(b, 1) ? b[0] : 0;
	}
	uint16_t u16()
	{
		uint8_t b[2];
		return get(b, 2) ? uint16_t(b[0] | b[1] << 8) : 0;
	}
	uint32_t u32()
	{
		uint8_t b[4];
		return get(b, 4) ? uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 |
					   uint32_t(b[3]) << 24
				 : 0;
	}
	void bytes(uint8_t *out, size_t n)
	{
		if (!get(out, n))
			memset(out, 0, n);
	}
	void reserved(size_t n)
	{
		for (size_t i = 0; i < n; i++)
			if (u8() != 0)
				fail(ParseError::bad_reserved);
	}
	void fail(ParseError e)
	{
		if (err_ == ParseError::ok)
			err_ = e;
	}
	size_t left() const { return len_ - off_; }
	ParseError error() const { return err_; }

private:
	bool get(uint8_t *out, size_t n)
	{
		if (err_ != ParseError::ok)
			return false;
		if (len_ - off_ < n) {
			fail(ParseError::bad_length);
			return false;
		}
		memcpy(out, p_ + off_, n);
		off_ += n;
		return true;
	}
	const uint8_t *p_;
	size_t len_, off_ = 0;
	ParseError err_ = ParseError::ok;
};

bool known_ps(uint16_t ps) { return ps == kPsIpoib || ps == kPsTcp || ps == kPsUdp || ps == kPsIb; }

bool endpoint_ok(const Endpoint &e)
{
	if (e.family == AF_INET) {
		for (int i = 4; i < 16; i++)
			if (e.addr[i])
				return false;
		return e.scope_id == 0;
	}
	return e.family == AF_INET6;
}

bool port_ok(const Port &p)
{
	if (p.device >= kRoceDeviceBase) // sroce<N>: no LID (RoCE addresses by GID)
		return p.device < kRoceDeviceBase + kMaxRoceDevices && p.lid == 0 && p.mtu >= 1 &&
		       p.mtu <= 5;
	return p.lid == p.device + 1 && p.mtu >= 1 && p.mtu <= 5;
}

bool qpn_ok(uint32_t qpn) { return qpn >= 2 && qpn <= 0xffffff; }

// Field checks shared by encode() and parse().
bool fields_ok(const Message &m)
{
	switch (m.type) {
	case MsgType::req:
		return known_ps(m.port_space) && m.port_space != kPsUdp &&
		       (m.qp_type == kQpRc || m.qp_type == kQpUc || m.qp_type == kQpXrcSend) &&
		       qpn_ok(m.qpn) &&
		       m.psn <= 0xffffff && m.retry_count <= 7 && m.rnr_retry_count <= 7 &&
		       port_ok(m.port) && endpoint_ok(m.src) && endpoint_ok(m.dst);
	case MsgType::rep:
		return qpn_ok(m.qpn) && m.psn <= 0xffffff && m.retry_count <= 7 &&
		       m.rnr_retry_count <= 7 && port_ok(m.port);
	case MsgType::rej:
		return m.status != 0;
	case MsgType::sidr_req:
		return known_ps(m.port_space) && endpoint_ok(m.src) && endpoint_ok(m.dst);
	case MsgType::sidr_rep:
		// A successful reply names a QP and the sender's port; a failed one
		// carries nothing but the status.
		if (m.status == 0)
			return qpn_ok(m.qpn) && port_ok(m.port);
		return m.status <= 3 && m.qpn == 0 && m.qkey == 0;
	default:
		return true;
	}
}

void put_endpoint(Writer &w, const Endpoint &e)
{
	w.u16(e.family);
	w.u16(e.port);
	w.bytes(e.addr, 16);
	w.u32(e.scope_id);
}

void get_endpoint(Reader &r, Endpoint &e)
{
	e.family = r.u16();
	e.port = r.u16();
	r.bytes(e.addr, 16);
	e.scope_id = r.u32();
}

void put_port(Writer &w, const Port &p)
{
	w.u16(p.device);
	w.u16(p.lid);
	w.bytes(p.gid, 16);
	w.u8(p.mtu);
	w.zeros(3);
}

void get_port(Reader &r, Port &p)
{
	p.device = r.u16();
	p.lid = r.u16();
	r.bytes(p.gid, 16);
	p.mtu = r.u8();
	r.reserved(3);
}

uint8_t flags_of(const Message &m)
{
	return uint8_t((m.srq ? kFlagSrq : 0) | (m.flow_control ? kFlagFlowControl : 0));
}

void set_flags(Reader &r, Message &m)
{
	uint8_t f = r.u8();
	if (f & ~(kFlagSrq | kFlagFlowControl))
		r.fail(ParseError::bad_reserved);
	m.srq = f & kFlagSrq;
	m.flow_control = f & kFlagFlowControl;
}

} // namespace

size_t encode(const Message &m, uint8_t *out, size_t cap) noexcept
{
	unsigned t = unsigned(m.type);
	if (t < 1 || t > 8 || m.private_len > kMaxPrivate[t] || !m.conn || !fields_ok(m))
		return 0;
	Writer w(out, cap);
	w.u32(kMagic);
	w.u16(kVersion);
	w.u16(uint16_t(t));
	w.u32(0); // length, patched below
	w.u32(m.conn);
	switch (m.type) {
	case MsgType::req:
		w.u16(m.port_space);
		w.u8(m.qp_type);
		w.u8(m.responder_resources);
		w.u8(m.initiator_depth);
		w.u8(m.retry_count);
		w.u8(m.rnr_retry_count);
		w.u8(flags_of(m));
		w.u32(m.qpn);
		w.u32(m.psn);
		put_port(w, m.port);
		put_endpoint(w, m.src);
		put_endpoint(w, m.dst);
		break;
	case MsgType::rep:
		w.u32(m.qpn);
		w.u32(m.psn);
		w.u8(m.responder_resources);
		w.u8(m.initiator_depth);
		w.u8(m.retry_count);
		w.u8(m.rnr_retry_count);
		w.u8(flags_of(m));
		w.zeros(3);
		put_port(w, m.port);
		break;
	case MsgType::rej:
		w.u16(m.status);
		w.zeros(2);
		break;
	case MsgType::sidr_req:
		w.u16(m.port_space);
		w.zeros(2);
		put_endpoint(w, m.src);
		put_endpoint(w, m.dst);
		break;
	case MsgType::sidr_rep:
		w.u16(m.status);
		w.zeros(2);
		w.u32(m.qpn);
		w.u32(m.qkey);
		put_port(w, m.port);
		break;
	default:
		break;
	}
	w.u16(m.private_len);
	w.zeros(2);
	w.bytes(m.private_data, m.private_len);
	if (!w.ok() || w.size() > kMaxMessage)
		return 0;
	uint32_t n = uint32_t(w.size());
	out[8] = uint8_t(n);
	out[9] = uint8_t(n >> 8);
	out[10] = uint8_t(n >> 16);
	out[11] = uint8_t(n >> 24);
	return n;
}

ParseError parse(const uint8_t *buf, size_t len, Message &m) noexcept
{
	auto fail = [](ParseError e) {
		g_failures[size_t(e)].fetch_add(1, std::memory_order_relaxed);
		return e;
	};
	if (!buf || len < kHeaderBytes)
		return fail(ParseError::short_header);
	if (len > kMaxMessage)
		return fail(ParseError::bad_length);
	Reader r(buf, len);
	if (r.u32() != kMagic)
		return fail(ParseError::bad_magic);
	if (r.u16() != kVersion)
		return fail(ParseError::bad_version);
	uint16_t t = r.u16();
	if (t < 1 || t > 8)
		return fail(ParseError::bad_type);
	if (r.u32() != len)
		return fail(ParseError::bad_length);
	uint32_t conn = r.u32();
	if (r.error() != ParseError::ok)
		return fail(r.error());
	if (!conn)
		return fail(ParseError::bad_field);
	m = Message{};
	m.type = MsgType(t);
	m.conn = conn;
	switch (m.type) {
	case MsgType::req:
		m.port_space = r.u16();
		m.qp_type = r.u8();
		m.responder_resources = r.u8();
		m.initiator_depth = r.u8();
		m.retry_count = r.u8();
		m.rnr_retry_count = r.u8();
		set_flags(r, m);
		m.qpn = r.u32();
		m.psn = r.u32();
		get_port(r, m.port);
		get_endpoint(r, m.src);
		get_endpoint(r, m.dst);
		break;
	case MsgType::rep:
		m.qpn = r.u32();
		m.psn = r.u32();
		m.responder_resources = r.u8();
		m.initiator_depth = r.u8();
		m.retry_count = r.u8();
		m.rnr_retry_count = r.u8();
		set_flags(r, m);
		r.reserved(3);
		get_port(r, m.port);
		break;
	case MsgType::rej:
		m.status = r.u16();
		r.reserved(2);
		break;
	case MsgType::sidr_req:
		m.port_space = r.u16();
		r.reserved(2);
		get_endpoint(r, m.src);
		get_endpoint(r, m.dst);
		break;
	case MsgType::sidr_rep:
		m.status = r.u16();
		r.reserved(2);
		m.qpn = r.u32();
		m.qkey = r.u32();
		get_port(r, m.port);
		break;
	default:
		break;
	}
	m.private_len = r.u16();
	r.reserved(2);
	if (r.error() != ParseError::ok)
		return fail(r.error());
	if (m.private_len > kMaxPrivate[t])
		return fail(ParseError::bad_private);
	if (r.left() != m.private_len)
		return fail(ParseError::bad_length);
	r.bytes(m.private_data, m.private_len);
	if (!fields_ok(m))
		return fail(ParseError::bad_field);
	return ParseError::ok;
}

uint64_t parse_failures(ParseError reason) noexcept
{
	if (reason != ParseError::ok)
		return size_t(reason) < size_t(ParseError::count_)
			       ? g_failures[size_t(reason)].load(std::memory_order_relaxed)
			       : 0;
	uint64_t n = 0;
	for (auto &c : g_failures)
		n += c.load(std::memory_order_relaxed);
	return n;
}

const char *parse_error_name(ParseError e) noexcept
{
	switch (e) {
	case ParseError::ok: return "ok";
	case ParseError::short_header: return "short header";
	case ParseError::bad_magic: return "bad magic";
	case ParseError::bad_version: return "unsupported version";
	case ParseError::bad_type: return "unknown message type";
	case ParseError::bad_length: return "length mismatch";
	case ParseError::bad_reserved: return "reserved bits set";
	case ParseError::bad_field: return "field out of range";
	case ParseError::bad_private: return "private data too long";
	default: return "?";
	}
}

} // namespace ov::usercm
