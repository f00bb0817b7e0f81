// RoCE v2 packet code (providers/soft/roce/wire.*): header layouts, the
// parser's drop reasons and the invariant CRC against packets of real
// hardware.
#include "wire.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

using namespace ovroce;

namespace {

std::vector<uint8_t> hex(const char *s)
{
	std::vector<uint8_t> v;
	while (*s) {
		if (*s == ' ') {
			s++;
			continue;
		}
		unsigned x;
		sscanf(s, "%2x", &x);
		v.push_back(uint8_t(x));
		s += 2;
	}
	return v;
}

IpMeta v4(const char *src, const char *dst, uint16_t sport, uint16_t id)
{
	IpMeta m;
	inet_pton(AF_INET, src, m.src);
	inet_pton(AF_INET, dst, m.dst);
	m.sport = sport;
	m.ip_id = id;
	return m;
}

// A whole datagram: headers of k, payload, pad, ICRC for ip.
std::vector<uint8_t> build(Packet k, const std::vector<uint8_t> &payload, const IpMeta &ip)
{
	k.bth.pad = pad_for(uint32_t(payload.size()));
	std::vector<uint8_t> d(kMaxHeaderBytes + 16);
	size_t h = encode_headers(k, d.data());
	EXPECT_GT(h, 0u);
	d.resize(h);
	d.insert(d.end(), payload.begin(), payload.end());
	d.insert(d.end(), k.bth.pad, 0);
	uint32_t c = icrc_compute(ip, d.data(), d.size());
	d.resize(d.size() + 4);
	icrc_write(d.data() + d.size() - 4, c);
	return d;
}

} // namespace

// A congestion notification packet captured on a ConnectX-4 Lx (IPv4 with a
// non-zero identification, UDP source port 0): the ICRC a NIC computed.
TEST(RoceIcrc, MatchesHardwareCapture)
{
	auto frame = hex("e41d2dab2bc27cfe90643b32080045c2003c718c400040119161"
			 "0a0011010a001201000012b700280000"
			 "8100ffff400001180000000000000000000000000000000000000000"
			 "82fd002a");
	const uint8_t *udp_payload = frame.data() + 14 + 20 + 8;
	size_t n = frame.size() - (14 + 20 + 8);
	ASSERT_EQ(n, 32u);
	IpMeta ip = v4("10.0.17.1", "10.0.18.1", 0, 0x718c);
	EXPECT_EQ(icrc_compute(ip, udp_payload, n - 4), icrc_read(udp_payload, n));
	// As a UDP socket sees it (identification unknown): solved for.
	bool solved = false;
	ip.ip_id = 0;
	EXPECT_TRUE(icrc_check(ip, udp_payload, n, &solved));
	EXPECT_TRUE(solved);
	// Any single flipped bit of the datagram is caught.
	std::vector<uint8_t> bad(udp_payload, udp_payload + n);
	for (size_t bit = 0; bit < n * 8; bit++) {
		if (bit / 8 == 4)
			continue; // FECN/BECN/reserved byte: masked, changes are allowed
		bad[bit / 8] ^= uint8_t(1u << (bit % 8));
		EXPECT_FALSE(icrc_check(ip, bad.data(), n)) << "bit " << bit;
		bad[bit / 8] ^= uint8_t(1u << (bit % 8));
	}
	bad[4] ^= 0x40; // BECN: not covered
	EXPECT_TRUE(icrc_check(ip, bad.data(), n));
}

// The UC SEND Only example of scapy's RoCE layer tests (an independent
// implementation): IPv4 identification 1144, padded payload.
TEST(RoceIcrc, MatchesIndependentImplementation)
{
	auto d = hex("2460ffff000000d300cf1710"
		     "4630818be28935d90e9a955054 01be885e500000"
		     "78f353f3");
	IpMeta ip = v4("192.168.0.7", "192.168.0.7", 49152, 1144);
	EXPECT_EQ(icrc_compute(ip, d.data(), d.size() - 4), icrc_read(d.data(), d.size()));
	Packet k;
	ASSERT_EQ(decode(d.data(), d.size(), &k), D_OK);
	EXPECT_EQ(k.bth.opcode, kUC | kSendOnly);
	EXPECT_EQ(k.bth.dqpn, 211u);
	EXPECT_EQ(k.bth.psn, 13571856u);
	EXPECT_TRUE(k.bth.mig);
	EXPECT_EQ(k.bth.pad, 2);
	EXPECT_EQ(k.payload_len, 18u);
	EXPECT_EQ(k.payload[0], 'F');
}

TEST(RoceIcrc, Ipv6IsCheckedExactly)
{
	IpMeta ip;
	ip.v6 = true;
	inet_pton(AF_INET6, "fd00::1", ip.src);
	inet_pton(AF_INET6, "fd00::2", ip.dst);
	ip.sport = 4791;
	Packet k;
	k.bth.opcode = kRC | kSendOnly;
	k.bth.dqpn = 0x21;
	k.bth.psn = 7;
	auto d = build(k, {1, 2, 3, 4, 5}, ip);
	bool solved = true;
	EXPECT_TRUE(icrc_check(ip, d.data(), d.size(), &solved));
	EXPECT_FALSE(solved);
	IpMeta other = ip;
	other.src[15] = 3; // from another address
	EXPECT_FALSE(icrc_check(other, d.data(), d.size()));
	other = ip;
	other.sport = 1000; // another source port
	EXPECT_FALSE(icrc_check(other, d.data(), d.size()));
	d[13] ^= 1;
	EXPECT_FALSE(icrc_check(ip, d.data(), d.size()));
}

TEST(RoceIcrc, OurOwnIpv4PacketsNeedNoSolving)
{
	IpMeta ip = v4("10.9.0.1", "10.9.0.2", 4791, 0);
	Packet k;
	k.bth.opcode = kRC | kAck;
	k.syndrome = kAethNoCredit;
	k.msn = 5;
	auto d = build(k, {}, ip);
	bool solved = true;
	EXPECT_TRUE(icrc_check(ip, d.data(), d.size(), &solved));
	EXPECT_FALSE(solved);
	// Random damage is caught (a 2^-16 chance each of passing: none of 2000).
	std::mt19937 rng(1);
	int passed = 0;
	for (int i = 0; i < 2000; i++) {
		auto c = d;
		size_t at = rng() % c.size();
		if (at == 4)
			continue;
		c[at] ^= uint8_t(1 + rng() % 255);
		passed += icrc_check(ip, c.data(), c.size());
	}
	EXPECT_EQ(passed, 0);
}

// A sender's UDP GSO train is cut into datagrams whose identifications count
// up from the train's (0 for our unconnected socket): each one's ICRC,
// computed with its own identification, checks, and the identification is
// found, for packets of several sizes in turn (the solver remembers one
// size's basis at a time).
TEST(RoceIcrc, SolvesTheIdentificationOfEachDatagramOfATrain)
{
	std::mt19937 rng(7);
	for (uint32_t len : {0u, 8u, 1024u, 4096u, 1024u, 13u}) {
		for (uint16_t id : {uint16_t(0), uint16_t(1), uint16_t(2), uint16_t(63), uint16_t(0x718c),
				    uint16_t(0xffff)}) {
			IpMeta ip = v4("10.9.0.1", "10.9.0.2", 4791, id);
			Packet k;
			k.bth.opcode = kRC | kWriteMiddle;
			k.bth.dqpn = 0x12;
			k.bth.psn = id;
			std::vector<uint8_t> payload(len);
			for (auto &b : payload)
				b = uint8_t(rng());
			auto d = build(k, payload, ip);
			ip.ip_id = 0; // as the socket sees it
			bool solved = false;
			uint16_t got = 0xbeef;
			EXPECT_TRUE(icrc_check(ip, d.data(), d.size(), &solved, &got)) << len << " " << id;
			EXPECT_EQ(solved, id != 0);
			EXPECT_EQ(got, id);
			// The same datagram damaged is refused (or, with the 2^-16
			// chance of a solvable difference, never taken for a small
			// identification of a train): a flipped payload bit.
			if (len) {
				d[kBthBytes + len / 2] ^= 0x10;
				uint16_t bad = 0;
				bool ok = icrc_check(ip, d.data(), d.size(), &solved, &bad);
				EXPECT_TRUE(!ok || bad >= 64) << len << " " << id;
			}
		}
	}
}

// Every opcode the device speaks survives encode + decode with its fields.
TEST(RoceWire, EveryOpcodeRoundTrips)
{
	IpMeta ip = v4("10.1.0.1", "10.1.0.2", 4791, 0);
	int known = 0;
	for (int op = 0; op < 256; op++) {
		uint32_t f = opcode_flags(uint8_t(op));
		if (!f)
			continue;
		known++;
		Packet k;
		k.bth.opcode = uint8_t(op);
		k.bth.se = op & 1;
		k.bth.mig = true;
		k.bth.pkey = 0xffff;
		k.bth.dqpn = 0xabcdef;
		k.bth.ack_req = true;
		k.bth.psn = 0xfffffe;
		k.reth = {0x1122334455667788ull, 0x99aabbcc, 4096};
		k.syndrome = kAethNak | kNakRemoteAccess;
		k.msn = 0x123456;
		k.atomic = {0x1000, 0x77, 0xdead, 0xbeef};
		k.orig = 0x0102030405060708ull;
		k.imm = 0xcafef00d;
		k.ieth = 0x42;
		k.deth = {0x11111111, 0x222222};
		k.xrc_srqn = 0x5a5a5a;
		std::vector<uint8_t> payload;
		if (f & F_PAYLOAD)
			payload = {9, 8, 7};
		auto d = build(k, payload, ip);
		EXPECT_EQ(d.size(), kBthBytes + ext_header_bytes(f) + (payload.empty() ? 0 : 4) + 4);
		Packet o;
		ASSERT_EQ(decode(d.data(), d.size(), &o), D_OK) << opcode_name(uint8_t(op));
		EXPECT_TRUE(icrc_check(ip, d.data(), d.size()));
		EXPECT_EQ(o.bth.opcode, op);
		EXPECT_EQ(o.bth.dqpn, 0xabcdefu);
		EXPECT_EQ(o.bth.psn, 0xfffffeu);
		EXPECT_TRUE(o.bth.ack_req);
		EXPECT_EQ(o.bth.se, bool(op & 1));
		EXPECT_EQ(o.payload_len, payload.size());
		if (f & F_RETH) {
			EXPECT_EQ(o.reth.va, k.reth.va);
			EXPECT_EQ(o.reth.rkey, k.reth.rkey);
			EXPECT_EQ(o.reth.len, k.reth.len);
		}
		if (f & F_AETH) {
			EXPECT_EQ(o.syndrome, k.syndrome);
			EXPECT_EQ(o.msn, k.msn);
		}
		if (f & F_ATOMIC) {
			EXPECT_EQ(o.atomic.va, k.atomic.va);
			EXPECT_EQ(o.atomic.rkey, k.atomic.rkey);
			EXPECT_EQ(o.atomic.swap_add, k.atomic.swap_add);
			EXPECT_EQ(o.atomic.compare, k.atomic.compare);
		}
		if (f & F_ATOMIC_ACK) {
			EXPECT_EQ(o.orig, k.orig);
		}
		// XRC requests, and only they, carry the XRCETH.
		EXPECT_EQ(bool(f & F_XRCETH), (op & 0xe0) == kXRC && (f & F_REQUEST));
		EXPECT_EQ(o.xrc_srqn, (f & F_XRCETH) ? 0x5a5a5au : 0u);
		if (f & F_IMM) {
			EXPECT_EQ(o.imm, k.imm);
		}
		if (f & F_IETH) {
			EXPECT_EQ(o.ieth, k.ieth);
		}
		if (f & F_DETH) {
			EXPECT_EQ(o.deth.qkey, k.deth.qkey);
			EXPECT_EQ(o.deth.src_qpn, k.deth.src_qpn);
		}
	}
	// RC: 23 operations; UC: 12; UD: 2; XRC: RC's 23.
	EXPECT_EQ(known, 23 + 12 + 2 + 23);
}

// The header bytes encode_headers writes for k.
static std::vector<uint8_t> encoded(const Packet &k)
{
	uint8_t b[kMaxHeaderBytes];
	size_t n = encode_headers(k, b);
	return std::vector<uint8_t>(b, b + n);
}

// An XRC request: the XRCETH (a reserved byte and the 24-bit XRC SRQ
// number) right after the BTH, the RETH after it (IBA 9.3.10); XRC's
// responses carry none.
TEST(RoceWire, LayoutOfXrcEth)
{
	Packet k;
	k.bth.opcode = kXRC | kWriteOnly;
	k.bth.dqpn = 0x000102;
	k.bth.psn = 0x030405;
	k.xrc_srqn = 0xa1b2c3;
	k.reth = {0x0a0b0c0d0e0f1011ull, 0x12131415, 0x16171819};
	EXPECT_EQ(encoded(k), hex("aa00ffff00000102 00030405 00a1b2c3 0a0b0c0d0e0f1011 12131415 16171819"));
	uint8_t b[kMaxHeaderBytes];
	Packet a;
	a.bth.opcode = kXRC | kAck;
	a.syndrome = kAethNoCredit;
	a.msn = 7;
	ASSERT_EQ(encode_headers(a, b), 16u);
	EXPECT_EQ(b[0], 0xb1);
	k.bth.opcode = kXRC | kCompareSwap;
	EXPECT_EQ(encode_headers(k, b), kMaxHeaderBytes);
}

// Header bytes at their specified offsets (IBA 9.2, 9.3).
TEST(RoceWire, LayoutOfBthRethAndImm)
{
	Packet k;
	k.bth.opcode = kRC | kWriteOnlyImm;
	k.bth.se = true;
	k.bth.mig = true;
	k.bth.pad = 3;
	k.bth.pkey = 0xffff;
	k.bth.dqpn = 0x000102;
	k.bth.ack_req = true;
	k.bth.psn = 0x030405;
	k.reth = {0x0a0b0c0d0e0f1011ull, 0x12131415, 0x16171819};
	k.imm = 0x1a1b1c1d;
	EXPECT_EQ(encoded(k), hex("0bf0ffff00000102 80030405 0a0b0c0d0e0f1011 12131415 16171819 1a1b1c1d"));
	uint8_t b[kMaxHeaderBytes];
	Packet u;
	u.bth.opcode = kUD | kSendOnlyImm;
	u.deth = {0x11223344, 0x556677};
	u.imm = 0x8899aabb;
	ASSERT_EQ(encode_headers(u, b), 24u);
	EXPECT_EQ(std::vector<uint8_t>(b + 12, b + 24), hex("11223344 00556677 8899aabb"));
	Packet a;
	a.bth.opcode = kRC | kAtomicAck;
	a.syndrome = 0x1f;
	a.msn = 0x010203;
	a.orig = 0x0102030405060708ull;
	ASSERT_EQ(encode_headers(a, b), 24u);
	EXPECT_EQ(std::vector<uint8_t>(b + 12, b + 24), hex("1f010203 0102030405060708"));
}

TEST(RoceWire, MalformedPacketsAreRefusedWithTheirReason)
{
	IpMeta ip = v4("10.1.0.1", "10.1.0.2", 4791, 0);
	Packet k;
	k.bth.opcode = kRC | kWriteFirst;
	auto d = build(k, std::vector<uint8_t>(64, 1), ip);
	Packet o;
	EXPECT_EQ(decode(d.data(), d.size(), &o), D_OK);
	EXPECT_EQ(decode(d.data(), 15, &o), D_SHORT);
	EXPECT_EQ(decode(d.data(), kBthBytes + 4, &o), D_SHORT); // RETH cut off
	EXPECT_EQ(decode(nullptr, 100, &o), D_SHORT);
	auto t = d;
	t[1] |= 0x01; // transport version 1
	EXPECT_EQ(decode(t.data(), t.size(), &o), D_VERSION);
	t = d;
	t[0] = kRC | 0x15; // reserved
	EXPECT_EQ(decode(t.data(), t.size(), &o), D_OPCODE);
	t[0] = 0x40 | kSendOnly; // RD: not supported
	EXPECT_EQ(decode(t.data(), t.size(), &o), D_OPCODE);
	t[0] = kUC | kReadRequest; // no RDMA READ on UC
	EXPECT_EQ(decode(t.data(), t.size(), &o), D_OPCODE);
	t[0] = kUD | kSendFirst; // UD has only SEND Only (with immediate)
	EXPECT_EQ(decode(t.data(), t.size(), &o), D_OPCODE);
	t = d;
	t.pop_back(); // not a whole word
	EXPECT_EQ(decode(t.data(), t.size(), &o), D_PAD);
	Packet ack;
	ack.bth.opcode = kRC | kAck;
	auto a = build(ack, {}, ip);
	EXPECT_EQ(decode(a.data(), a.size(), &o), D_OK);
	a.insert(a.begin() + 16, 4, 0); // payload on an ACK
	EXPECT_EQ(decode(a.data(), a.size(), &o), D_PAYLOAD);
	a = build(ack, {}, ip);
	a[1] |= 0x10; // pad on an ACK
	EXPECT_EQ(decode(a.data(), a.size(), &o), D_PAD);
	// A pad count larger than the bytes after the headers.
	Packet s;
	s.bth.opcode = kRC | kSendOnly;
	auto e = build(s, {}, ip);
	e[1] |= 0x30;
	EXPECT_EQ(decode(e.data(), e.size(), &o), D_PAD);
}

// The CRC the ICRC is computed with (crc.cpp): whichever was chosen (ISA-L's
// when libisal.so.2 is installed) gives zlib's value for every length and
// alignment, and chains as zlib chains.
TEST(RoceIcrc, ChosenCrcEqualsZlibsAtEveryLengthAndSplit)
{
	const CrcFn chosen = crc_function(), zlib = crc_zlib();
	std::mt19937 rng(4791);
	std::vector<uint8_t> buf(9000 + 64);
	for (auto &b : buf)
		b = uint8_t(rng());
	for (size_t n : {0u, 1u, 3u, 7u, 8u, 15u, 16u, 31u, 63u, 64u, 65u, 255u, 1024u, 1057u,
			 4096u, 4133u, 9000u})
		for (size_t off = 0; off < 16; off += 5) {
			const uint8_t *p = buf.data() + off;
			const uint32_t want = zlib(0, p, n);
			EXPECT_EQ(chosen(0, p, n), want) << crc_name() << " n=" << n << " off=" << off;
			const size_t cut = n / 3;
			EXPECT_EQ(chosen(chosen(0, p, cut), p + cut, n - cut), want)
				<< crc_name() << " n=" << n << " cut=" << cut;
		}
	std::printf("ICRC CRC-32: %s\n", crc_name());
}

#if defined(__x86_64__)
#include <cpuid.h>

// XINUSE (XGETBV with ECX = 1): which state components are not in their
// initial configuration. Bit 2: the upper halves of YMM0-15; bit 6: the
// upper halves of ZMM0-15 (Intel SDM vol. 1, 13.6). False when the CPU
// cannot tell.
static bool xinuse(uint64_t *out)
{
	unsigned a, b, c, d;
	if (!__get_cpuid_count(0xd, 1, &a, &b, &c, &d) || !(a & (1u << 2)))
		return false;
	uint32_t lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
	*out = (uint64_t(hi) << 32) | lo;
	return true;
}

// A CRC over a long buffer (ISA-L's vector code, when chosen) leaves the
// upper register halves clean (crc.cpp, isal_clean): otherwise the thread
// pays for every legacy-SSE instruction it runs afterwards.
TEST(RoceIcrc, LongCrcLeavesUpperVectorStateClean)
{
	std::vector<uint8_t> buf(16384, 0x5a);
	const CrcFn chosen = crc_function();
	uint32_t r = chosen(0, buf.data(), buf.size());
	uint64_t in_use = 0;
	if (!xinuse(&in_use))
		GTEST_SKIP() << "this CPU does not report XINUSE";
	EXPECT_EQ(in_use & ((1u << 2) | (1u << 6)), 0u)
		<< crc_name() << " left the upper vector halves in use (XINUSE " << std::hex << in_use
		<< ")";
	EXPECT_EQ(r, crc_zlib()(0, buf.data(), buf.size()));
}
#endif
