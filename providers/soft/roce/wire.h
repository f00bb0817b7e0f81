// RoCE v2 on the wire: the InfiniBand transport headers carried in a UDP
// datagram to port 4791, and the invariant CRC that ends every packet.
//
// Pure functions of bytes (no device state), so the unit tests and the fuzz
// target use them alone. Layouts follow the InfiniBand Architecture
// Specification volume 1 (chapter 9, "Transport layer": BTH 9.2, RETH 9.3.3,
// AETH 9.3.5, AtomicETH 9.3.4, AtomicAckETH 9.3.6, ImmDt 9.3.7, IETH 9.3.8,
// DETH 9.3.2, and the XRCETH of XRC, release 1.2.1; opcodes table 38) and its
// annex A17 (RoCE v2: UDP port 4791, the ICRC over the masked IP and UDP
// headers). Every multi-byte field is big endian on the wire.
//
// A datagram is: BTH (12 bytes), the extended headers the opcode calls for,
// the payload, BTH.PadCnt zero bytes (payload + pad is a multiple of 4) and
// the 4-byte ICRC.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ovroce {

inline constexpr uint16_t kRoceV2Port = 4791;
inline constexpr size_t kBthBytes = 12;
inline constexpr size_t kRethBytes = 16;
inline constexpr size_t kAethBytes = 4;
inline constexpr size_t kAtomicEthBytes = 28;
inline constexpr size_t kAtomicAckBytes = 8;
inline constexpr size_t kImmBytes = 4;
inline constexpr size_t kIethBytes = 4;
inline constexpr size_t kDethBytes = 8;
inline constexpr size_t kIcrcBytes = 4;
inline constexpr size_t kXrcEthBytes = 4;
// Largest header block: an XRC atomic request, BTH + XRCETH + AtomicETH.
inline constexpr size_t kMaxHeaderBytes = kBthBytes + kXrcEthBytes + kAtomicEthBytes;
inline constexpr uint32_t kPsnMask = 0xffffff;
inline constexpr uint32_t kQpnMask = 0xffffff;

// BTH opcodes: transport in bits 7..5 (RC 0, UC 1, UD 3, CNP 4, XRC 5),
// operation in bits 4..0 (IBA table 38). XRC has RC's operations under its
// own transport bits; its requests carry the XRCETH.
inline constexpr uint8_t kRC = 0x00, kUC = 0x20, kUD = 0x60, kCNP = 0x80, kXRC = 0xa0;
enum Op : uint8_t {
	kSendFirst = 0x00,
	kSendMiddle = 0x01,
	kSendLast = 0x02,
	kSendLastImm = 0x03,
	kSendOnly = 0x04,
	kSendOnlyImm = 0x05,
	kWriteFirst = 0x06,
	kWriteMiddle = 0x07,
	kWriteLast = 0x08,
	kWriteLastImm = 0x09,
	kWriteOnly = 0x0a,
	kWriteOnlyImm = 0x0b,
	kReadRequest = 0x0c,
	kReadRespFirst = 0x0d,
	kReadRespMiddle = 0x0e,
	kReadRespLast = 0x0f,
	kReadRespOnly = 0x10,
	kAck = 0x11,
	kAtomicAck = 0x12,
	kCompareSwap = 0x13,
	kFetchAdd = 0x14,
	kSendLastInv = 0x16,
	kSendOnlyInv = 0x17,
};

// What an opcode carries and where it sits in a message.
enum OpFlag : uint32_t {
	F_RETH = 1u << 0,
	F_AETH = 1u << 1,
	F_ATOMIC = 1u << 2,
	F_ATOMIC_ACK = 1u << 3,
	F_IMM = 1u << 4,
	F_IETH = 1u << 5,
	F_DETH = 1u << 6,
	F_PAYLOAD = 1u << 7, // may carry payload (others must carry none)
	F_FIRST = 1u << 8,
	F_MIDDLE = 1u << 9,
	F_LAST = 1u << 10,
	F_ONLY = F_FIRST | F_LAST,
	F_SEND = 1u << 11,
	F_WRITE = 1u << 12,
	F_READ_REQ = 1u << 13,
	F_READ_RESP = 1u << 14,
	F_ACK = 1u << 15,     // Acknowledge, Atomic Acknowledge
	F_ATOMIC_REQ = 1u << 16,
	F_REQUEST = 1u << 17, // travels requester -> responder
	F_XRCETH = 1u << 18,  // an XRC request: the XRCETH follows the BTH
	F_KNOWN = 1u << 31,
};

// Flags of a full opcode (transport | operation); 0 for opcodes this device
// neither sends nor accepts (RD, reserved values, CNP).
uint32_t opcode_flags(uint8_t opcode);
// Bytes of the headers that follow the BTH for this opcode (0 if unknown).
size_t ext_header_bytes(uint32_t flags);
const char *opcode_name(uint8_t opcode);

// AETH syndrome (IBA 9.7.5.1.1): bits 6..5 say ACK (00), RNR NAK (01) or
// NAK (11); bits 4..0 are the credit count, the RNR timer or the NAK code.
inline constexpr uint8_t kAethAck = 0x00, kAethRnr = 0x20, kAethNak = 0x60;
enum NakCode : uint8_t {
	kNakPsnSeq = 0,
	kNakInvalidRequest = 1,
	kNakRemoteAccess = 2,
	kNakRemoteOp = 3,
	kNakInvalidRdRequest = 4,
};
// "Credits not valid" in an ACK: end-to-end flow control is not used.
inline constexpr uint8_t kAethNoCredit = 0x1f;

struct Bth {
	uint8_t opcode = 0;
	bool se = false;     // solicited event
	bool mig = false;    // MigReq (always 1 from us: no migration)
	uint8_t pad = 0;     // PadCnt 0..3
	uint8_t tver = 0;    // transport header version (0)
	uint16_t pkey = 0xffff;
	bool fecn = false, becn = false;
	uint32_t dqpn = 0;   // 24 bits
	bool ack_req = false;
	uint32_t psn = 0;    // 24 bits
};

struct Reth {
	uint64_t va = 0;
	uint32_t rkey = 0;
	uint32_t len = 0;    // DMA length of the whole message
};

struct AtomicEth {
	uint64_t va = 0;
	uint32_t rkey = 0;
	uint64_t swap_add = 0; // swap data, or the addend of Fetch and Add
	uint64_t compare = 0;
};

struct Deth {
	uint32_t qkey = 0;
	uint32_t src_qpn = 0; // 24 bits
};

// One decoded packet (decode) or the headers to write (encode_headers).
// Only the headers `flags` names are meaningful.
struct Packet {
	Bth bth;
	uint32_t flags = 0; // opcode_flags(bth.opcode)
	Reth reth;
	uint8_t syndrome = 0; // AETH
	uint32_t msn = 0;     // AETH, 24 bits
	AtomicEth atomic;
	uint64_t orig = 0;    // AtomicAckETH: the remote data before the operation
	uint32_t imm = 0;     // ImmDt, as the 4 bytes read in host order of the
			      // big-endian field (ibv_wc.imm_data wants network
			      // order: htobe32(imm))
	uint32_t ieth = 0;    // the R_Key to invalidate
	Deth deth;
	uint32_t xrc_srqn = 0; // XRCETH: the responder's XRC SRQ, 24 bits
	const uint8_t *payload = nullptr;
	uint32_t payload_len = 0;
};

// Why decode refused a datagram (each one is counted by the device).
enum Drop : uint8_t {
	D_OK = 0,
	D_SHORT,         // shorter than BTH + headers + ICRC
	D_VERSION,       // BTH.TVer not 0
	D_OPCODE,        // opcode not known
	D_PAD,           // pad bytes with no room, or on an opcode without payload
	D_PAYLOAD,       // payload on an opcode that carries none
	D_ICRC,          // invariant CRC mismatch
	D_QPN,           // no such QP, or the wrong type for the opcode
	D_STATE,         // QP not in a state that accepts the packet
	D_SOURCE,        // not from the connected peer
	D_LENGTH,        // payload size wrong for its place in the message
	D_QKEY,          // UD: Q_Key mismatch
	D_FILTERED,      // dropped by the fault-injection point
	D_COUNT
};
const char *drop_name(Drop d);

// Parses a UDP payload (without checking the ICRC: see icrc_*). D_OK and
// *out filled (payload points into p), or the reason.
Drop decode(const uint8_t *p, size_t n, Packet *out);

// Writes BTH and the extended headers of pkt.bth.opcode into buf (at least
// kMaxHeaderBytes). Returns the bytes written, 0 for an unknown opcode.
// The pad count is taken from pkt.bth.pad.
size_t encode_headers(const Packet &pkt, uint8_t *buf);

// PadCnt for a payload of len bytes.
inline uint8_t pad_for(uint32_t len) { return uint8_t((4 - (len & 3)) & 3); }

// ------------------------------------------------------------------ ICRC
//
// The invariant CRC (annex A17.3.3) is CRC-32 (the Ethernet polynomial, as
// zlib's crc32) over: 8 bytes of 0xff standing for the InfiniBand LRH, the
// IP header, the UDP header, the BTH and everything after it up to the ICRC,
// with the fields a router may change set to all ones: IPv4 type of service,
// time to live and header checksum; IPv6 traffic class, flow label and hop
// limit; the UDP checksum; the BTH byte holding FECN, BECN and reserved bits.
// It is sent as the 4 little-endian bytes of that CRC.
//
// A UDP socket never shows the IP header. The fields it does not report are
// known (version, lengths, protocol) or masked, except IPv4's identification
// (and flags: RoCE v2 sends with Don't Fragment). See icrc_check.
// CRC-32 of p[0..n) continued from c (0 starts one): the reflected CRC of
// the Ethernet polynomial, chained as zlib's crc32 chains.
using CrcFn = uint32_t (*)(uint32_t c, const uint8_t *p, uint64_t n);
// The one the ICRC uses (crc.cpp): ISA-L's crc32_gzip_refl when
// libisal.so.2 loads, agrees with zlib on a probe and is not slower than
// zlib on this machine (timed once), else zlib's crc32;
// OPENVERBS_SOFT_ROCE_CRC=zlib forces zlib, =isa-l skips the timing.
// crc_name says which ("isa-l", "zlib"); crc_zlib is zlib's, for
// comparisons.
CrcFn crc_function();
const char *crc_name();
CrcFn crc_zlib();

struct IpMeta {
	bool v6 = false;
	uint8_t src[16] = {}; // IPv4: the first 4 bytes
	uint8_t dst[16] = {};
	uint16_t sport = 0, dport = kRoceV2Port;
	uint16_t ip_id = 0;   // IPv4 identification
	bool df = true;       // IPv4 Don't Fragment
};

// The ICRC of the UDP payload p[0..n) (n excludes the ICRC itself), as the
// value whose little-endian bytes are the ICRC field.
uint32_t icrc_compute(const IpMeta &ip, const uint8_t *p, size_t n);
// Reads the ICRC field at the end of a datagram of n bytes (n >= 4).
uint32_t icrc_read(const uint8_t *p, size_t n);
void icrc_write(uint8_t *at, uint32_t icrc);

// Whether the datagram p[0..n) (ICRC included) is intact. IPv6: the ICRC is
// recomputed exactly. IPv4: the identification the sender's kernel chose is
// unknown to a UDP socket; 0 (what Linux writes for an unconnected UDP
// socket's Don't Fragment datagrams, our own sends) is tried first, then the
// value is solved for (the CRC is linear in it): the check then spends 16 of
// its 32 bits on finding it, so a damaged IPv4 packet goes unnoticed with
// probability 2^-16 rather than 2^-32. *solved_id (if given) says whether
// the second way was needed, and *id (if given) receives the identification
// the check found (0 when the first way matched). A sender's UDP GSO train
// of Don't Fragment datagrams is cut by the kernel into datagrams numbered
// 0, 1, 2, ... from the train's own identification (0 for an unconnected
// socket), so a small solved value is what such a sender produces.
bool icrc_check(const IpMeta &ip, const uint8_t *p, size_t n, bool *solved_id = nullptr,
		uint16_t *id = nullptr);

} // namespace ovroce
