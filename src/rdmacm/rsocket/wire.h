// The rsockets wire protocol of rdma-core 44 (rsocket(7)), as facts: what a
// peer running Debian's librdmacm puts on the wire and expects from us.
//
// A stream rsocket is one RC QP. Each side owns
//   * a receive buffer (rbuf) that the peer fills with RDMA WRITE; it hands
//     the peer one half at a time ("target SGEs"),
//   * a small array of kSglEntries target SGEs that the peer RDMA-writes to
//     hand us a fresh half of its rbuf (followed, in the same registration,
//     by the peer-writable table of iomap entries),
// and every message is the 32-bit immediate of an RDMA WRITE WITH IMM (on
// iWARP, which has no immediate data, an RDMA WRITE followed by a 4-byte
// inline SEND carrying the same word).
//
// Immediate word (sent big-endian, i.e. htobe32 of the value):
//   bits 31..29  operation (Op below)
//   bits 28..0   DATA: bytes written; SGL/CTRL: receive credits granted as
//                an absolute 16-bit message sequence number (SGL) or the
//                control code (CTRL); IOMAP_SGL: index of the entry written.
//
// Connection private data (ConnData, 40 bytes, in the REQ and the REP): the
// peer's version (1), flags, credits, iomap table size, where its target
// SGE array is and the first half of its receive buffer.
//
// Source of the facts: rdma-core 44 librdmacm/rsocket.c (struct rs_conn_data,
// rs_msg_set, RS_OP_*, RS_CTRL_*) and rsocket(7).
#pragma once

#include <cstddef>
#include <cstdint>
#include <endian.h>

namespace ov::rs {

// Protocol operations (bits 31..29 of the immediate word).
enum class Op : uint32_t {
	data = 0,       // bytes landed at the next place of the current target SGE
	write = 2,      // never on the wire: local marker of riowrite's plain writes
	sgl = 4,        // a target SGE was written; data = new credit limit
	iomap_sgl = 6,  // an iomap entry was written; data = its index
	ctrl = 7,       // control message; data = Ctrl
};

enum class Ctrl : uint32_t {
	disconnect = 0, // no more data in either direction
	keepalive = 1,  // 0-byte RDMA WRITE without immediate (nothing arrives)
	shutdown = 2,   // the sender will send no more data (SHUT_WR)
};

inline constexpr uint32_t kMsgDataMask = 0x1FFFFFFF;
inline constexpr uint32_t make_msg(Op op, uint32_t data)
{
	return (static_cast<uint32_t>(op) << 29) | (data & kMsgDataMask);
}
inline constexpr Op msg_op(uint32_t msg) { return static_cast<Op>(msg >> 29); }
inline constexpr uint32_t msg_data(uint32_t msg) { return msg & kMsgDataMask; }

// One buffer description as the protocol writes it (16 bytes, host order of
// the writer unless the peers' byte orders differ, see kConnFlagNet).
struct Sge {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};
static_assert(sizeof(Sge) == 16);

// One peer-writable iomap entry: the offset the mapping answers to and
// the memory behind it (24 bytes).
struct IomapEntry {
	uint64_t offset;
	Sge sge;
};
static_assert(sizeof(IomapEntry) == 24);

inline constexpr uint8_t kConnVersion = 1;
inline constexpr uint8_t kConnFlagNet = 1 << 0;   // sender is big-endian
inline constexpr uint8_t kConnFlagIomap = 1 << 1; // sender has an iomap table

// Private data of the connection request and reply; multi-byte fields are
// big-endian.
struct ConnData {
	uint8_t version;
	uint8_t flags;
	uint16_t credits_be;     // receive queue depth: the first credit limit
	uint8_t reserved[3];
	uint8_t iomap_size;      // number of iomap entries, scaled (scale_of)
	Sge target_sgl_be;       // the target SGE array (addr, rkey, entries)
	Sge data_buf_be;         // first half of the receive buffer
};
static_assert(sizeof(ConnData) == 40);
static_assert(offsetof(ConnData, target_sgl_be) == 8);
static_assert(offsetof(ConnData, data_buf_be) == 24);

// The iomap table size travels in 8 bits: values up to 128 as is, larger
// ones as 0x80 | (value >> 8) (multiples of 256).
inline constexpr int scale_of(int value)
{
	return value <= 128 ? value : (128 | (value >> 8));
}
inline constexpr int value_of(int scaled)
{
	return scaled <= 128 ? scaled : (scaled & ~128) << 8;
}

// Sizes and limits of the protocol and rdma-core's defaults.
inline constexpr uint32_t kSglEntries = 2;        // target SGEs per side
inline constexpr uint32_t kCtrlSlots = 4;         // control messages in flight
inline constexpr uint32_t kMaxCtrlMsg = sizeof(Sge);
inline constexpr uint32_t kSendLowWater = 2048;   // smallest useful send space
inline constexpr uint32_t kFirstChunk = 2048;     // first transfer of a large send
inline constexpr uint32_t kMaxChunk = 65536;      // largest single transfer
inline constexpr uint16_t kQueueMin = 16;
inline constexpr uint16_t kQueueMax = 0xFFFE;
inline constexpr int kConnRetries = 6;

inline constexpr uint16_t kDefaultInline = 64;
inline constexpr uint16_t kDefaultSqSize = 384;
inline constexpr uint16_t kDefaultRqSize = 384;
inline constexpr uint32_t kDefaultMem = 1u << 17;
inline constexpr uint32_t kDefaultWmem = 1u << 17;
inline constexpr uint32_t kDefaultPollingUs = 10;
inline constexpr int kDefaultWakeUpMs = 500;

// ---------------------------------------------------------------------------
// Datagram rsockets (SOCK_DGRAM), rsocket(7) "datagram" and rdma-core 44's
// rsocket.c (struct ds_header, struct ds_udp_header, DS_UDP_TAG,
// RS_SNDLOWAT, RDMA_UDP_QKEY), as facts.
//
// Each datagram rsocket owns a UDP socket (its number is that socket's fd)
// and one UD QP per local address it sends from, bound in RDMA_PS_UDP to
// the UDP socket's address and port. A message over a UD QP is a DsHeader
// (the sender's UDP address) followed by the payload, at most kDgramSlot
// bytes in all, sent with the Q_Key RDMA_UDP_QKEY; the receiver posts
// kDgramSlot bytes after the 40-byte GRH.
//
// Until the sender has an address handle for a destination, it sends the
// payload over its UDP socket instead, behind a UdpHeader with op DATA and
// its QP number. The receiver answers every DATA with a UdpHeader alone
// (op CTRL, its own QP number), makes an address handle for the sender from
// the UDP source address and the QP number it was given, and delivers the
// payload as if it had come over the QP (source: the UDP source address).
// The answer gives the sender its address handle; later messages go over
// the QPs.
inline constexpr uint32_t kDgramSlot = 2048;   // RS_SNDLOWAT
inline constexpr uint32_t kGrhBytes = 40;      // sizeof(struct ibv_grh)
inline constexpr uint32_t kUdpTag = 0x55555555;
inline constexpr uint8_t kDsHdrV4 = 8, kDsHdrV6 = 24;
inline constexpr uint8_t kUdpHdrV4 = 16, kUdpHdrV6 = 28;

// Header of every UD message. `port` and the addresses are copied as they
// are in the sockaddr (network order); version 4 uses the first 8 bytes.
struct DsHeader {
	uint8_t version; // 4 or 6
	uint8_t length;  // kDsHdrV4 or kDsHdrV6
	uint16_t port;
	union {
		uint32_t ipv4;
		struct {
			uint32_t flowinfo;
			uint8_t addr[16];
		} ipv6;
	} addr;
};
static_assert(sizeof(DsHeader) == 24);
static_assert(offsetof(DsHeader, addr) == 4);

// Header of every message on the UDP sockets. `op` is Op::data or Op::ctrl;
// `qpn` is the sender's QP number (big-endian, top 8 bits 0); `addr` holds
// the IPv4 address of the sender's QP (4 bytes, version 4) or, version 6,
// the 16 bytes that follow the port in the sender's DsHeader: the flow
// information and the first 12 bytes of the IPv6 address (rdma-core 44 copies
// the address union, not the address; nobody reads the field).
struct UdpHeader {
	uint32_t tag; // htobe32(kUdpTag)
	uint8_t version;
	uint8_t op;
	uint8_t length; // kUdpHdrV4 or kUdpHdrV6
	uint8_t reserved;
	uint32_t qpn;
	uint8_t addr[16];
};
static_assert(sizeof(UdpHeader) == 28);
static_assert(offsetof(UdpHeader, qpn) == 8 && offsetof(UdpHeader, addr) == 12);

} // namespace ov::rs
