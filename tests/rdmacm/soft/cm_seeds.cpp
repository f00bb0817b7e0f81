// Writes one well-formed record of every message type into a folder: the
// seed corpus of cm_fuzz (tests/rdmacm/soft/cm-corpus/ was made by this).
// Usage: cm_seeds DIR
#include "rdmacm/usercm/wire.h"

#include <arpa/inet.h>
#include <cstdio>
#include <cstring>

using namespace ov::usercm;

static void write_seed(const char *dir, const char *name, const Message &m)
{
	uint8_t buf[kMaxMessage];
	size_t n = encode(m, buf, sizeof(buf));
	if (!n) {
		fprintf(stderr, "cm_seeds: %s does not encode\n", name);
		return;
	}
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (f) {
		fwrite(buf, 1, n, f);
		fclose(f);
	}
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	Message m;
	m.port.device = 0;
	m.port.lid = 1;
	m.port.mtu = 5;
	m.port.gid[0] = 0xfe;
	m.port.gid[1] = 0x80;
	m.port.gid[15] = 1;
	m.src.family = AF_INET;
	m.src.port = 40000;
	inet_pton(AF_INET, "127.0.0.1", m.src.addr);
	m.dst = m.src;
	m.dst.port = 7174;
	m.type = MsgType::req;
	m.port_space = 0x0106;
	m.qp_type = 2;
	m.qpn = 0x123;
	m.psn = 0xabcdef;
	m.responder_resources = 1;
	m.initiator_depth = 1;
	m.retry_count = 7;
	m.rnr_retry_count = 7;
	m.private_len = 4;
	memcpy(m.private_data, "ping", 4);
	write_seed(argv[1], "req", m);
	m.src.family = m.dst.family = AF_INET6;
	memset(m.src.addr, 0, 16);
	m.src.addr[15] = 1;
	memcpy(m.dst.addr, m.src.addr, 16);
	m.private_len = 56;
	write_seed(argv[1], "req6", m);
	m.type = MsgType::rep;
	m.private_len = 0;
	write_seed(argv[1], "rep", m);
	m.type = MsgType::rtu;
	write_seed(argv[1], "rtu", m);
	m.type = MsgType::rej;
	m.status = 28;
	m.private_len = 8;
	write_seed(argv[1], "rej", m);
	m.type = MsgType::dreq;
	m.private_len = 0;
	write_seed(argv[1], "dreq", m);
	m.type = MsgType::drep;
	write_seed(argv[1], "drep", m);
	m.type = MsgType::sidr_req;
	m.port_space = 0x0111;
	m.src.family = m.dst.family = AF_INET;
	memset(m.src.addr, 0, 16);
	inet_pton(AF_INET, "127.0.0.1", m.src.addr);
	memcpy(m.dst.addr, m.src.addr, 16);
	write_seed(argv[1], "sidr_req", m);
	m.type = MsgType::sidr_rep;
	m.status = 0;
	m.qkey = 0x01234567;
	write_seed(argv[1], "sidr_rep", m);
	m.status = 1;
	m.qpn = 0;
	m.qkey = 0;
	write_seed(argv[1], "sidr_rep_fail", m);
	return 0;
}
