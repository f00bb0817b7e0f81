// Writes one well-formed record of every message type, and one InfiniBand CM
// MAD of every type sroce devices' QP1 handles, into a folder: the seed
// corpus of cm_fuzz (tests/rdmacm/soft/cm-corpus/ was made by this).
// Usage: cm_seeds DIR
#include "rdmacm/usercm/mad.h"
#include "rdmacm/usercm/wire.h"

#include <arpa/inet.h>
#include <cstdio>
#include <cstring>

using namespace ov::usercm;
namespace mad = ov::usercm::mad;

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

static void write_mad(const char *dir, const char *name, const mad::Mad &m)
{
	uint8_t buf[mad::kMadBytes];
	if (!mad::encode(m, buf)) {
		fprintf(stderr, "cm_seeds: %s does not encode\n", name);
		return;
	}
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (f) {
		fwrite(buf, 1, sizeof(buf), f);
		fclose(f);
	}
}

// MADs as a RoCE connection's handshake carries them (a REQ with the
// rdma_cm header for 10.0.0.2:40000 -> 10.0.0.1:7174).
static void write_mads(const char *dir)
{
	mad::Mad m;
	m.attr = mad::Attr::req;
	m.tid = 0x1234;
	m.local_id = 0x11223344;
	m.service_id = mad::service_id(0x0106, 7174);
	m.qpn = 0x20;
	m.psn = 0x123456;
	m.resp_res = m.init_depth = 1;
	m.remote_cm_timeout = m.local_cm_timeout = 20;
	m.retry = m.rnr_retry = 7;
	m.pkey = 0xffff;
	m.mtu = 3;
	m.max_cm_retries = 15;
	m.slid = m.dlid = 0xffff;
	m.sgid[10] = m.sgid[11] = m.dgid[10] = m.dgid[11] = 0xff;
	m.sgid[12] = m.dgid[12] = 10;
	m.sgid[15] = 2;
	m.dgid[15] = 1;
	m.hop_limit = 64;
	m.ack_timeout = 14;
	mad::CmaHeader h;
	h.family = AF_INET;
	h.src_port = 40000;
	inet_pton(AF_INET, "10.0.0.2", h.src);
	inet_pton(AF_INET, "10.0.0.1", h.dst);
	mad::encode_cma(h, m.private_data);
	write_mad(dir, "mad_req", m);
	mad::Mad r;
	r.tid = 0x1234;
	r.local_id = 0x55667788;
	r.remote_id = 0x11223344;
	r.attr = mad::Attr::rep;
	r.qpn = 0x21;
	r.psn = 0x654321;
	r.target_ack_delay = 15;
	write_mad(dir, "mad_rep", r);
	r.qpn = 0;
	r.psn = 0;
	r.target_ack_delay = 0;
	r.attr = mad::Attr::rtu;
	write_mad(dir, "mad_rtu", r);
	r.attr = mad::Attr::rej;
	r.reason = 28;
	write_mad(dir, "mad_rej", r);
	r.reason = 0;
	r.attr = mad::Attr::mra;
	r.service_timeout = 20;
	write_mad(dir, "mad_mra", r);
	r.service_timeout = 0;
	r.attr = mad::Attr::dreq;
	r.qpn = 0x20;
	write_mad(dir, "mad_dreq", r);
	r.qpn = 0;
	r.attr = mad::Attr::drep;
	write_mad(dir, "mad_drep", r);
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	Message m;
	m.conn = 1;
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
	write_mads(argv[1]);
	return 0;
}
