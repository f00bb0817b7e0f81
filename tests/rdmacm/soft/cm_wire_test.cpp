// The user-space CM's message parser: every message type round-trips, and
// every kind of malformed record is rejected and counted (wire.h).
#include "rdmacm/usercm/wire.h"

#include <arpa/inet.h>
#include <cstring>
#include <gtest/gtest.h>
#include <vector>

using namespace ov::usercm;

namespace {

Message sample(MsgType t)
{
	Message m;
	m.type = t;
	m.conn = 0x01020304;
	m.port = {3, 4, {0xfe, 0x80}, 5};
	m.src.family = m.dst.family = AF_INET;
	inet_pton(AF_INET, "127.0.0.1", m.src.addr);
	inet_pton(AF_INET, "127.0.0.2", m.dst.addr);
	m.src.port = 1;
	m.dst.port = 2;
	switch (t) {
	case MsgType::req:
		m.port_space = 0x0106;
		m.qp_type = 2;
		m.qpn = 77;
		m.psn = 0x10;
		m.retry_count = 7;
		m.rnr_retry_count = 6;
		m.srq = true;
		break;
	case MsgType::rep:
		m.qpn = 78;
		m.psn = 0xffffff;
		m.responder_resources = 4;
		m.initiator_depth = 3;
		m.flow_control = true;
		break;
	case MsgType::rej:
		m.status = 28;
		break;
	case MsgType::sidr_req:
		m.port_space = 0x0111;
		break;
	case MsgType::sidr_rep:
		m.qpn = 9;
		m.qkey = 0x01234567;
		break;
	default:
		break;
	}
	m.private_len = 3;
	memcpy(m.private_data, "abc", 3);
	return m;
}

std::vector<uint8_t> bytes_of(const Message &m)
{
	std::vector<uint8_t> b(kMaxMessage);
	size_t n = encode(m, b.data(), b.size());
	b.resize(n);
	return b;
}

ParseError parse_vec(const std::vector<uint8_t> &b)
{
	Message m;
	return parse(b.data(), b.size(), m);
}

} // namespace

TEST(CmWire, EveryTypeRoundTrips)
{
	for (int t = 1; t <= 8; t++) {
		Message m = sample(MsgType(t));
		auto b = bytes_of(m);
		ASSERT_FALSE(b.empty()) << "type " << t;
		Message back;
		ASSERT_EQ(parse(b.data(), b.size(), back), ParseError::ok) << "type " << t;
		EXPECT_EQ(bytes_of(back), b) << "type " << t;
		EXPECT_EQ(back.private_len, 3);
		EXPECT_EQ(memcmp(back.private_data, "abc", 3), 0);
	}
	Message back;
	auto b = bytes_of(sample(MsgType::req));
	ASSERT_EQ(parse(b.data(), b.size(), back), ParseError::ok);
	EXPECT_EQ(back.qpn, 77u);
	EXPECT_EQ(back.port.device, 3);
	EXPECT_TRUE(back.srq);
	EXPECT_EQ(back.rnr_retry_count, 6);
}

TEST(CmWire, PrivateDataLimitsAreTheIbCmOnes)
{
	const uint16_t limit[] = {0, 56, 196, 224, 148, 220, 224, 180, 136};
	for (int t = 1; t <= 8; t++) {
		Message m = sample(MsgType(t));
		m.private_len = limit[t];
		EXPECT_FALSE(bytes_of(m).empty()) << "type " << t;
		m.private_len = limit[t] + 1;
		EXPECT_TRUE(bytes_of(m).empty()) << "type " << t;
	}
}

TEST(CmWire, MalformedRecordsAreRejectedAndCounted)
{
	auto good = bytes_of(sample(MsgType::req));
	uint64_t before = parse_failures(ParseError::ok);
	struct Case {
		const char *what;
		std::vector<uint8_t> rec;
		ParseError want;
	};
	std::vector<Case> cases;
	auto with = [&](size_t off, uint8_t v) {
		auto b = good;
		b[off] = v;
		return b;
	};
	cases.push_back({"empty", {}, ParseError::short_header});
	cases.push_back({"short", std::vector<uint8_t>(good.begin(), good.begin() + 15),
			 ParseError::short_header});
	cases.push_back({"magic", with(0, 'x'), ParseError::bad_magic});
	cases.push_back({"version", with(4, 1), ParseError::bad_version});
	cases.push_back({"type 0", with(6, 0), ParseError::bad_type});
	cases.push_back({"type 9", with(6, 9), ParseError::bad_type});
	cases.push_back({"length", with(8, uint8_t(good.size() + 1)), ParseError::bad_length});
	cases.push_back({"connection 0", [&] {
				 auto b = good;
				 memset(&b[12], 0, 4);
				 return b;
			 }(), ParseError::bad_field});
	cases.push_back({"qp type", with(18, 4), ParseError::bad_field});   // UD in a REQ
	cases.push_back({"qp type 10", with(18, 10), ParseError::bad_field}); // XRC_RECV in a REQ
	cases.push_back({"retry", with(21, 8), ParseError::bad_field});
	cases.push_back({"flags", with(23, 4), ParseError::bad_reserved});
	cases.push_back({"qpn 0", [&] {
				 auto b = good;
				 memset(&b[24], 0, 4);
				 return b;
			 }(), ParseError::bad_field});
	cases.push_back({"qpn 25 bits", with(27, 1), ParseError::bad_field});
	cases.push_back({"psn 25 bits", with(31, 1), ParseError::bad_field});
	cases.push_back({"device vs lid", with(32, 9), ParseError::bad_field});
	cases.push_back({"mtu 6", with(52, 6), ParseError::bad_field});
	cases.push_back({"port pad", with(53, 1), ParseError::bad_reserved});
	cases.push_back({"family", with(56, 99), ParseError::bad_field});
	cases.push_back({"ipv4 tail", with(70, 1), ParseError::bad_field});
	{ // private length larger than the record
		auto b = good;
		b[good.size() - 7] = 4;
		cases.push_back({"private past end", b, ParseError::bad_length});
	}
	{ // private length above REQ's limit, with the bytes present
		auto b = good;
		size_t at = good.size() - 7;
		b[at] = 57;
		b.resize(good.size() - 3 + 57, 0);
		uint32_t n = uint32_t(b.size());
		memcpy(&b[8], &n, 4);
		cases.push_back({"private limit", b, ParseError::bad_private});
	}
	{ // a trailing byte after the private data
		auto b = good;
		b.push_back(0);
		uint32_t n = uint32_t(b.size());
		memcpy(&b[8], &n, 4);
		cases.push_back({"trailing", b, ParseError::bad_length});
	}
	cases.push_back({"oversized", std::vector<uint8_t>(kMaxMessage + 1, 0), ParseError::bad_length});
	for (auto &c : cases)
		EXPECT_EQ(parse_vec(c.rec), c.want) << c.what << ": got "
						   << parse_error_name(parse_vec(c.rec));
	EXPECT_EQ(parse_failures(ParseError::ok) - before, cases.size());
	EXPECT_EQ(parse_vec(good), ParseError::ok);
}

// A REQ names the requester's QP type: RC, UC or XRC_SEND (an XRC
// initiator connects to an XRC_RECV target, as rdma_xclient -c x does).
TEST(CmWire, ReqQpTypes)
{
	Message m = sample(MsgType::req);
	for (uint8_t t : {2, 3, 9}) {
		m.qp_type = t;
		auto b = bytes_of(m);
		ASSERT_FALSE(b.empty()) << int(t);
		Message back;
		ASSERT_EQ(parse(b.data(), b.size(), back), ParseError::ok) << int(t);
		EXPECT_EQ(back.qp_type, t);
	}
	for (uint8_t t : {1, 4, 8, 10}) {
		m.qp_type = t;
		EXPECT_TRUE(bytes_of(m).empty()) << int(t);
	}
}

TEST(CmWire, SidrFailureCarriesNoQp)
{
	Message m = sample(MsgType::sidr_rep);
	m.status = 1;
	EXPECT_TRUE(bytes_of(m).empty());
	m.qpn = 0;
	m.qkey = 0;
	EXPECT_FALSE(bytes_of(m).empty());
}

// An sroce device's port (kRoceDeviceBase + N) has no LID: LID 0 is the only
// one accepted, and N stays below the number of sroce devices.
TEST(CmWire, RocePortHasNoLid)
{
	Message m = sample(MsgType::req);
	m.port.device = kRoceDeviceBase + 3;
	m.port.lid = 0;
	m.port.mtu = 3;
	auto b = bytes_of(m);
	ASSERT_FALSE(b.empty());
	Message back;
	ASSERT_EQ(parse(b.data(), b.size(), back), ParseError::ok);
	EXPECT_EQ(back.port.device, kRoceDeviceBase + 3);
	EXPECT_EQ(back.port.lid, 0);
	m.port.lid = kRoceDeviceBase + 4; // a soft device's rule does not apply
	EXPECT_TRUE(bytes_of(m).empty());
	m.port.lid = 0;
	m.port.device = kRoceDeviceBase + kMaxRoceDevices;
	EXPECT_TRUE(bytes_of(m).empty());
	b[34] = 1; // LID 1 on the wire
	EXPECT_EQ(parse_vec(b), ParseError::bad_field);
}
