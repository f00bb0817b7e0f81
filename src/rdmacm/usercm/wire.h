// Messages of the user-space connection manager for software devices
// (src/DESIGN.md, "Connection manager for software devices").
//
// One message is one SOCK_SEQPACKET record on a UNIX socket between two
// processes of the same user (a link: one per pair of processes and
// listener, carrying any number of connections, each named in the header by
// the number the requester's side gave it). The encoding is ours (the peers are always this
// library), modelled on the InfiniBand CM's messages: REQ/REP/RTU/REJ/DREQ/DREP
// for connected QPs and SIDR_REQ/SIDR_REP for UD ids. Every field is written
// little-endian at a fixed offset; nothing is copied as a C struct, so a message
// has no padding and no host layout in it.
//
// The parser trusts nothing: a record is accepted only if its magic, version,
// type, total length (exactly the length its type and private-data length
// imply), reserved bytes and every field's range are right. A rejected record
// is counted per reason (parse_failures()) and the connection it came on is
// treated as broken by the caller; its content is never used.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ov::usercm {

inline constexpr uint32_t kMagic = 0x4d43564f; // "OVCM" as little-endian bytes
inline constexpr uint16_t kVersion = 2; // 2: the header names the connection
inline constexpr size_t kHeaderBytes = 16;
inline constexpr size_t kMaxMessage = 512; // larger records are malformed

enum class MsgType : uint16_t {
	req = 1,      // connect request (RC/UC)
	rep = 2,      // reply to a REQ (the passive side accepted)
	rtu = 3,      // ready to use: the active side is in RTS
	rej = 4,      // reject, with an IB CM reason and private data
	dreq = 5,     // disconnect request
	drep = 6,     // disconnect reply
	sidr_req = 7, // UD service id resolution request
	sidr_rep = 8, // its reply (QPN and Q_Key, or a status)
};

// Private-data limits per message, as rdma_cm over InfiniBand offers them to
// applications (the IB CM's private data minus rdma_cm's 36-byte header where
// rdma_cm adds one): rdma_cm(7), rdma_connect(3), rdma_accept(3).
inline constexpr uint16_t kMaxPrivate[] = {
	0,   // (no type 0)
	56,  // REQ
	196, // REP
	224, // RTU
	148, // REJ
	220, // DREQ
	224, // DREP
	180, // SIDR_REQ
	136, // SIDR_REP
};

// An IPv4 or IPv6 socket address as carried in a message.
struct Endpoint {
	uint16_t family = 0; // AF_INET or AF_INET6
	uint16_t port = 0;   // host byte order
	uint8_t addr[16] = {}; // IPv4: the first 4 bytes, the rest zero
	uint32_t scope_id = 0; // IPv6 only
};

// The sender's side of a connection: enough for the peer to build its
// QP attributes (RTR/RTS) and the event's parameters.
// Devices are numbered in one space: soft<N> is N (< 256), the RoCE v2
// device sroce<N> is kRoceDeviceBase + N.
inline constexpr uint16_t kRoceDeviceBase = 256;
inline constexpr uint16_t kMaxRoceDevices = 64; // OPENVERBS_MAX_SOFT_ROCE

struct Port {
	uint16_t device = 0;  // soft<N>: N (< 256); sroce<N>: kRoceDeviceBase + N
	uint16_t lid = 0;     // soft: the port LID (index + 1); sroce: 0
	uint8_t gid[16] = {}; // soft: the port GID (index 0); sroce: the GID of
			      // the sender's address (IPv4-mapped or IPv6)
	uint8_t mtu = 0;      // enum ibv_mtu of the port, 1..5
};

struct Message {
	MsgType type = MsgType::req;
	// every type: the connection on its link (header bytes 12..15, never 0),
	// numbered by the side that sent the REQ or SIDR_REQ
	uint32_t conn = 0;
	// REQ, SIDR_REQ
	uint16_t port_space = 0; // enum rdma_port_space (TCP, UDP, IB, IPOIB)
	uint8_t qp_type = 0;     // enum ibv_qp_type: RC, UC or XRC_SEND (REQ)
	Endpoint src, dst;
	// REQ, REP, SIDR_REP
	uint32_t qpn = 0; // 24 bits
	// REQ, REP
	uint32_t psn = 0; // 24 bits: the sender's send PSN (the peer's rq_psn)
	uint8_t responder_resources = 0;
	uint8_t initiator_depth = 0;
	uint8_t retry_count = 0;     // 0..7
	uint8_t rnr_retry_count = 0; // 0..7
	bool srq = false;
	bool flow_control = false;
	// REQ, REP, SIDR_REP
	Port port;
	// REJ: IB CM reject reason; SIDR_REP: SIDR status (0 = success)
	uint16_t status = 0;
	// SIDR_REP
	uint32_t qkey = 0;
	// every type
	uint16_t private_len = 0;
	uint8_t private_data[kMaxPrivate[3]] = {}; // the largest limit (224)
};

// Why a record was rejected; counted per reason.
enum class ParseError : uint8_t {
	ok = 0,
	short_header,   // fewer bytes than a header
	bad_magic,
	bad_version,
	bad_type,
	bad_length,     // header length differs from the record, or too large
	bad_reserved,   // a reserved byte is not zero
	bad_field,      // a field out of its range
	bad_private,    // private-data length above the type's limit
	count_,
};

// Encodes `m` into `out` (at least kMaxMessage bytes). Returns the record's
// length, or 0 if `m` itself is not valid (the same checks as parse()).
size_t encode(const Message &m, uint8_t *out, size_t cap) noexcept;

// Decodes one record. On failure `out` is left in an unspecified state, the
// failure is counted, and the error is returned.
ParseError parse(const uint8_t *buf, size_t len, Message &out) noexcept;

// Number of records rejected so far in this process, for one reason or
// (reason == ParseError::ok) in all.
uint64_t parse_failures(ParseError reason) noexcept;

const char *parse_error_name(ParseError e) noexcept;

} // namespace ov::usercm
