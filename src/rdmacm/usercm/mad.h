// InfiniBand CM messages as MADs (IBTA vol 1 chapter 12, "Communication
// Management", the message tables of 12.6; the common MAD header of 13.4.3),
// and the RDMA CM's private-data header that rdma_cm puts at the start of a
// REQ's and a SIDR_REQ's private data (rdma_cm(7): IP addresses and ports).
// These are what the kernel's CM sends to QP1 over RoCE v2, so that an sroce
// device's connections interoperate with the kernel's rdma_cm on a RoCE peer.
//
// A MAD is 256 bytes: a 24-byte header (base version 1, management class
// 0x07 "CM", class version 2, method 0x03 "Send", a transaction ID, the
// attribute ID naming the message) and 232 bytes of message, every field
// big-endian at the bit position the specification gives it. The parser
// trusts nothing: a MAD is accepted only if it is exactly 256 bytes, its
// header is the CM's, its attribute is one this CM handles, its reserved
// fields are zero and every field is in range; a rejected MAD is counted per
// reason (mad_failures()) and never used.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ov::usercm::mad {

inline constexpr size_t kMadBytes = 256;
inline constexpr size_t kHeaderBytes = 24;
inline constexpr uint32_t kGsiQkey = 0x80010000;  // QP1's Q_Key (IBTA 3.5.3 / 13.5.1)
inline constexpr uint32_t kGsiQpn = 1;
inline constexpr uint16_t kDefaultPkey = 0xffff;
inline constexpr uint8_t kBaseVersion = 1, kClassCm = 0x07, kClassVersion = 2, kMethodSend = 0x03;

// Attribute IDs of the CM's messages (IBTA Table 104).
enum class Attr : uint16_t {
	req = 0x0010,
	mra = 0x0011,
	rej = 0x0012,
	rep = 0x0013,
	rtu = 0x0014,
	dreq = 0x0015,
	drep = 0x0016,
	sidr_req = 0x0017,
	sidr_rep = 0x0018,
};

// Bytes of private data each message carries (always all of them).
size_t private_bytes(Attr a) noexcept;

// Transport service types of a REQ.
inline constexpr uint8_t kTransportRc = 0, kTransportUc = 1;
// MRA's and REJ's "message" field.
inline constexpr uint8_t kMsgReq = 0, kMsgRep = 1, kMsgOther = 2;

// One CM message. Fields not used by its type stay zero.
struct Mad {
	Attr attr = Attr::req;
	uint64_t tid = 0;       // transaction ID
	uint32_t local_id = 0;  // local communication ID (SIDR: request ID)
	uint32_t remote_id = 0; // remote communication ID
	// REQ, SIDR_REQ, SIDR_REP
	uint64_t service_id = 0;
	// REQ, REP: the sender's CA GUID as its 8 bytes on the wire
	uint8_t ca_guid[8] = {};
	// REQ, REP, SIDR_REP: Q_Key; REQ, REP, SIDR_REP: the sender's QPN;
	// DREQ: the receiver's QPN
	uint32_t qkey = 0;
	uint32_t qpn = 0;
	uint32_t psn = 0; // REQ, REP: starting PSN
	uint8_t resp_res = 0, init_depth = 0; // REQ, REP
	bool flow_control = false;            // REQ, REP
	bool srq = false;                     // REQ, REP
	uint8_t rnr_retry = 0;                // REQ, REP (0..7)
	// REQ
	uint8_t remote_cm_timeout = 0, local_cm_timeout = 0; // 4.096 us * 2^t, 0..31
	uint8_t transport = kTransportRc;
	uint8_t retry = 0;          // 0..7
	uint16_t pkey = 0;
	uint8_t mtu = 0;            // enum ibv_mtu, 1..5
	uint8_t max_cm_retries = 0; // 0..15
	uint16_t slid = 0, dlid = 0;
	uint8_t sgid[16] = {}, dgid[16] = {}; // the sender's, the receiver's
	uint32_t flow_label = 0;    // 20 bits
	uint8_t rate = 0;           // 6 bits
	uint8_t traffic_class = 0, hop_limit = 0;
	uint8_t sl = 0;             // 4 bits
	bool subnet_local = false;
	uint8_t ack_timeout = 0;    // 5 bits
	// REP
	uint8_t target_ack_delay = 0; // 5 bits
	uint8_t failover = 0;         // 2 bits
	// MRA
	uint8_t msg = 0;              // MRA: message MRAed; REJ: message rejected
	uint8_t service_timeout = 0;  // MRA, 5 bits
	// REJ
	uint16_t reason = 0;
	uint8_t ari_len = 0;          // 0..72
	uint8_t ari[72] = {};
	// SIDR_REP
	uint8_t status = 0;
	// every type: private_bytes(attr) bytes
	uint8_t private_data[224] = {};
};

// Why a MAD was refused.
enum class MadError : uint8_t {
	ok = 0,
	bad_length,    // not exactly 256 bytes
	bad_header,    // base version, class, class version, method or status
	bad_attribute, // an attribute this CM does not handle
	bad_reserved,  // a reserved field is not zero
	bad_field,     // a field out of its range
	count_,
};

// Encodes `m` into 256 bytes at `out`. False if `m` is not valid (the
// parser's checks).
bool encode(const Mad &m, uint8_t out[kMadBytes]) noexcept;

// Decodes one MAD; counts and returns the reason on failure.
MadError parse(const uint8_t *buf, size_t len, Mad &out) noexcept;

uint64_t mad_failures(MadError reason) noexcept; // ok: all reasons
const char *mad_error_name(MadError e) noexcept;

// ---- The RDMA CM's header in a REQ's (SIDR_REQ's) private data: 36 bytes:
// version 0, the IP version in the high nibble of the next byte, the
// source port, then the source and destination addresses in 16 bytes each
// (IPv4: in the last 4, the first 12 zero). The destination port is the
// service ID's low 16 bits (service ID = port space << 16 | port).
inline constexpr size_t kCmaHeaderBytes = 36;

struct CmaHeader {
	int family = 0;       // AF_INET or AF_INET6
	uint16_t src_port = 0; // host order
	uint8_t src[16] = {}, dst[16] = {}; // IPv4: the first 4 bytes
};

void encode_cma(const CmaHeader &h, uint8_t out[kCmaHeaderBytes]) noexcept;
// False (counted as bad_field) for another version, IP version, a non-zero
// low nibble of the IP version's byte or a non-zero pad of an IPv4 address.
bool parse_cma(const uint8_t in[kCmaHeaderBytes], CmaHeader &h) noexcept;

inline uint64_t service_id(uint16_t port_space, uint16_t port)
{
	return uint64_t(port_space) << 16 | port;
}

} // namespace ov::usercm::mad
