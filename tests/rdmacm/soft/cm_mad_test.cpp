// InfiniBand CM MADs of sroce devices' QP1 (src/rdmacm/usercm/mad.h): field
// positions as IBTA vol 1 chapter 12 gives them, round trips, the rdma_cm
// header, and malformed MADs refused and counted.
#include "rdmacm/usercm/mad.h"

#include <arpa/inet.h>
#include <cstring>
#include <gtest/gtest.h>
#include <sys/socket.h>

using namespace ov::usercm::mad;

namespace {

Mad sample(Attr a)
{
	Mad m;
	m.attr = a;
	m.tid = 0x0102030405060708ull;
	m.local_id = 0x11223344;
	m.remote_id = a == Attr::req || a == Attr::sidr_req ? 0 : 0x55667788;
	switch (a) {
	case Attr::req:
		m.service_id = service_id(0x0106, 7174);
		m.ca_guid[0] = 0xaa;
		m.qpn = 0x123456;
		m.resp_res = 4;
		m.init_depth = 3;
		m.remote_cm_timeout = 20;
		m.local_cm_timeout = 19;
		m.transport = kTransportUc;
		m.flow_control = true;
		m.psn = 0xabcdef;
		m.retry = 7;
		m.pkey = 0xffff;
		m.mtu = 3;
		m.rnr_retry = 6;
		m.max_cm_retries = 15;
		m.srq = true;
		m.slid = m.dlid = 0xffff;
		m.sgid[10] = m.sgid[11] = 0xff;
		m.sgid[15] = 1;
		m.dgid[0] = 0xfd;
		m.flow_label = 0xabcde;
		m.rate = 3;
		m.traffic_class = 0x20;
		m.hop_limit = 64;
		m.sl = 5;
		m.subnet_local = true;
		m.ack_timeout = 14;
		break;
	case Attr::rep:
		m.qpn = 0x42;
		m.psn = 0x10;
		m.resp_res = 1;
		m.init_depth = 2;
		m.target_ack_delay = 15;
		m.failover = 1;
		m.flow_control = true;
		m.rnr_retry = 7;
		m.srq = true;
		break;
	case Attr::rej:
		m.msg = kMsgReq;
		m.reason = 28;
		m.ari_len = 2;
		m.ari[0] = 9;
		break;
	case Attr::mra:
		m.msg = kMsgRep;
		m.service_timeout = 21;
		break;
	case Attr::dreq:
		m.qpn = 0x99;
		break;
	case Attr::sidr_req:
		m.pkey = 0xffff;
		m.service_id = service_id(0x0111, 7174);
		break;
	case Attr::sidr_rep:
		m.qpn = 0x77;
		m.qkey = 0x01234567;
		m.service_id = service_id(0x0111, 7174);
		break;
	default:
		break;
	}
	for (size_t i = 0; i < private_bytes(a); i++)
		m.private_data[i] = uint8_t(i + 1);
	return m;
}

} // namespace

TEST(CmMad, EveryMessageRoundTrips)
{
	for (Attr a : {Attr::req, Attr::mra, Attr::rej, Attr::rep, Attr::rtu, Attr::dreq, Attr::drep,
		       Attr::sidr_req, Attr::sidr_rep}) {
		SCOPED_TRACE(int(a));
		Mad m = sample(a);
		uint8_t b[kMadBytes];
		ASSERT_TRUE(encode(m, b));
		Mad back;
		ASSERT_EQ(parse(b, sizeof(b), back), MadError::ok);
		uint8_t again[kMadBytes];
		ASSERT_TRUE(encode(back, again));
		EXPECT_EQ(memcmp(b, again, kMadBytes), 0);
		EXPECT_EQ(back.tid, m.tid);
		EXPECT_EQ(back.local_id, m.local_id);
		EXPECT_EQ(back.qpn, m.qpn);
		EXPECT_EQ(memcmp(back.private_data, m.private_data, private_bytes(a)), 0);
	}
}

// The private data each message carries: rdma_cm's limits plus its
// 36-byte header in REQ (56 + 36) and SIDR_REQ (180 + 36).
TEST(CmMad, PrivateDataSizes)
{
	EXPECT_EQ(private_bytes(Attr::req), 92u);
	EXPECT_EQ(private_bytes(Attr::mra), 222u);
	EXPECT_EQ(private_bytes(Attr::rej), 148u);
	EXPECT_EQ(private_bytes(Attr::rep), 196u);
	EXPECT_EQ(private_bytes(Attr::rtu), 224u);
	EXPECT_EQ(private_bytes(Attr::dreq), 220u);
	EXPECT_EQ(private_bytes(Attr::drep), 224u);
	EXPECT_EQ(private_bytes(Attr::sidr_req), 216u);
	EXPECT_EQ(private_bytes(Attr::sidr_rep), 136u);
}

// Where the fields sit (offsets in the MAD: 24-byte header, then the
// message; IBTA Tables 106 and 110).
TEST(CmMad, FieldPositions)
{
	uint8_t b[kMadBytes];
	ASSERT_TRUE(encode(sample(Attr::req), b));
	EXPECT_EQ(b[0], 1);    // base version
	EXPECT_EQ(b[1], 0x07); // CM class
	EXPECT_EQ(b[2], 2);    // class version
	EXPECT_EQ(b[3], 0x03); // Send
	EXPECT_EQ(b[16], 0x00);
	EXPECT_EQ(b[17], 0x10); // REQ
	EXPECT_EQ(b[8], 0x01);  // TID, big-endian
	const uint8_t *d = b + 24;
	EXPECT_EQ(d[0], 0x11);
	EXPECT_EQ(d[14], 0x1c); // service ID 0x0000000001061c06: port 7174
	EXPECT_EQ(d[15], 0x06);
	EXPECT_EQ(d[13], 0x06);
	EXPECT_EQ(d[12], 0x01);
	EXPECT_EQ(d[16], 0xaa); // CA GUID
	EXPECT_EQ(d[32], 0x12); // QPN
	EXPECT_EQ(d[34], 0x56);
	EXPECT_EQ(d[35], 4);    // responder resources
	EXPECT_EQ(d[39], 3);    // initiator depth
	EXPECT_EQ(d[43], 20 << 3 | 1 << 1 | 1); // remote CM timeout, UC, flow control
	EXPECT_EQ(d[44], 0xab); // PSN
	EXPECT_EQ(d[47], 19 << 3 | 7);
	EXPECT_EQ(d[48], 0xff); // P_Key
	EXPECT_EQ(d[50], 3 << 4 | 6); // MTU, RNR retry
	EXPECT_EQ(d[51], 15 << 4 | 1 << 3); // max CM retries, SRQ
	EXPECT_EQ(d[52], 0xff); // LIDs
	EXPECT_EQ(d[56 + 15], 1); // local GID
	EXPECT_EQ(d[72], 0xfd);   // remote GID
	EXPECT_EQ(d[88], 0xab);   // flow label 0xabcde, then the rate
	EXPECT_EQ(d[89], 0xcd);
	EXPECT_EQ(d[90], 0xe0);
	EXPECT_EQ(d[91], 3);
	EXPECT_EQ(d[92], 0x20);
	EXPECT_EQ(d[93], 64);
	EXPECT_EQ(d[94], 5 << 4 | 1 << 3);
	EXPECT_EQ(d[95], 14 << 3);
	EXPECT_EQ(d[140], 1); // private data
	ASSERT_TRUE(encode(sample(Attr::rep), b));
	EXPECT_EQ(b[17], 0x13);
	EXPECT_EQ(d[4], 0x55);  // remote comm ID
	EXPECT_EQ(d[14], 0x42); // QPN
	EXPECT_EQ(d[22], 0x10); // PSN
	EXPECT_EQ(d[24], 1);
	EXPECT_EQ(d[25], 2);
	EXPECT_EQ(d[26], 15 << 3 | 1 << 1 | 1);
	EXPECT_EQ(d[27], 7 << 5 | 1 << 4);
	EXPECT_EQ(d[36], 1);
	ASSERT_TRUE(encode(sample(Attr::rej), b));
	EXPECT_EQ(d[8], 0);
	EXPECT_EQ(d[9], 2 << 1);
	EXPECT_EQ(d[11], 28);
	EXPECT_EQ(d[12], 9);
	EXPECT_EQ(d[84], 1);
}

// The rdma_cm header: version 0, IP version in the high nibble, the source
// port, then the addresses (IPv4 in the last 4 bytes of each 16).
TEST(CmMad, RdmaCmHeader)
{
	CmaHeader h;
	h.family = AF_INET;
	h.src_port = 40000;
	inet_pton(AF_INET, "10.0.0.2", h.src);
	inet_pton(AF_INET, "10.0.0.1", h.dst);
	uint8_t b[kCmaHeaderBytes];
	encode_cma(h, b);
	EXPECT_EQ(b[0], 0);
	EXPECT_EQ(b[1], 0x40);
	EXPECT_EQ(b[2], 40000 >> 8);
	EXPECT_EQ(b[3], 40000 & 0xff);
	EXPECT_EQ(b[4 + 12], 10);
	EXPECT_EQ(b[4 + 15], 2);
	EXPECT_EQ(b[20 + 15], 1);
	CmaHeader back;
	ASSERT_TRUE(parse_cma(b, back));
	EXPECT_EQ(back.family, AF_INET);
	EXPECT_EQ(back.src_port, 40000);
	EXPECT_EQ(memcmp(back.src, h.src, 4), 0);
	b[1] = 0x50; // IP version 5
	EXPECT_FALSE(parse_cma(b, back));
	b[1] = 0x40;
	b[4] = 1; // a non-zero pad
	EXPECT_FALSE(parse_cma(b, back));
}

TEST(CmMad, MalformedMadsAreRefusedAndCounted)
{
	uint8_t good[kMadBytes];
	ASSERT_TRUE(encode(sample(Attr::req), good));
	struct Case {
		const char *name;
		size_t at;
		uint8_t value;
		MadError want;
	} cases[] = {
	    {"base version", 0, 2, MadError::bad_header},
	    {"class", 1, 0x81, MadError::bad_header},
	    {"class version", 2, 1, MadError::bad_header},
	    {"method", 3, 0x81, MadError::bad_header},
	    {"status", 4, 1, MadError::bad_header},
	    {"attribute", 17, 0x19, MadError::bad_attribute}, // LAP
	    {"attribute 0", 17, 0x00, MadError::bad_attribute},
	    {"reserved", 18, 1, MadError::bad_reserved},
	    {"REQ reserved", 24 + 5, 1, MadError::bad_reserved},
	    {"REQ EECN", 24 + 36, 1, MadError::bad_reserved},
	    {"QPN 0", 0, 0, MadError::bad_field}, // (patched below)
	    {"MTU 0", 24 + 50, 0x06, MadError::bad_field},
	    {"MTU 6", 24 + 50, 0x66, MadError::bad_field},
	    {"transport RD", 24 + 43, 20 << 3 | 2 << 1, MadError::bad_field},
	};
	for (const Case &c : cases) {
		SCOPED_TRACE(c.name);
		uint8_t b[kMadBytes];
		memcpy(b, good, sizeof(b));
		if (!strcmp(c.name, "QPN 0"))
			memset(b + 24 + 32, 0, 3);
		else
			b[c.at] = c.value;
		uint64_t before = mad_failures(c.want);
		Mad m;
		EXPECT_EQ(parse(b, sizeof(b), m), c.want);
		EXPECT_EQ(mad_failures(c.want), before + 1);
	}
	Mad m;
	EXPECT_EQ(parse(good, 255, m), MadError::bad_length);
	EXPECT_EQ(parse(nullptr, 256, m), MadError::bad_length);
	EXPECT_EQ(parse(good, 256, m), MadError::ok);
	// REJ with more than 72 bytes of ARI.
	uint8_t rej[kMadBytes];
	ASSERT_TRUE(encode(sample(Attr::rej), rej));
	rej[24 + 9] = 73 << 1;
	EXPECT_EQ(parse(rej, sizeof(rej), m), MadError::bad_field);
	Mad bad = sample(Attr::req);
	bad.qpn = 0x1000000;
	uint8_t out[kMadBytes];
	EXPECT_FALSE(encode(bad, out));
}
