// Soak test of the software device through the public verbs API only.
//
//   soak [SECONDS]      supervisor (default $OPENVERBS_SOAK_SECONDS or 120)
//
// The supervisor runs rounds until the time is up. Each round starts
// OPENVERBS_SOAK_PAIRS (3) pairs of worker processes (fork + exec of this
// program: "soak --server FD" and "soak --client FD", a socketpair between
// them for the set-up and the bookkeeping). In about one round in three it
// SIGKILLs one worker at a random moment. A pair uses channels of every QP
// type (RC, UC, UD, XRC: two of each): the client posts checksummed
// messages (SEND on every type; RDMA WRITE then RDMA READ back on RC), and
// between batches does random verbs: rereg MR, bind and invalidate a type 2
// MW, resize its CQ, ask the server to resize its XRC SRQ, and move a
// channel's QPs to the error state, destroy and recreate them on both sides.
//
// It fails (exit status 1, a line saying why) on: a corrupted byte, a
// message lost or delivered twice on a reliable channel (RC, XRC: every
// successful send completion at the client is one delivery at the server,
// in order), a duplicate on UC/UD, a completion error outside the expected
// flushes, a worker that hangs (a watchdog per process), a worker that dies
// unasked, a file descriptor or resident memory growth in a worker after its
// last object is destroyed, or an entry left in /dev/shm once every worker
// of a round is gone (run it in a private /dev/shm).
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <execinfo.h>
#include <fcntl.h>
#include <poll.h>
#include <random>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <vector>

namespace {

constexpr int kChannels = 8;   // RC, UC, UD, XRC, RC, UC, UD, XRC
constexpr int kDepth = 32;     // receive WRs per channel
constexpr int kSlot = 4096;    // bytes per receive slot
constexpr int kGrh = 40;       // UD receive buffers start with the GRH
constexpr int kMaxMsg = 2048;  // message size limit (UD: one MTU)
constexpr uint32_t kQkey = 0x11111111;
constexpr uint32_t kMagic = 0x534f414b; // "SOAK"

[[noreturn]] void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "soak[%d]: FAIL: ", getpid());
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	_exit(1);
}

double now()
{
	timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

uint32_t crc32(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & -(c & 1));
	}
	return ~c;
}

ibv_qp_type type_of(int ch)
{
	static const ibv_qp_type t[] = {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_XRC_SEND};
	return t[ch % 4];
}
bool reliable(int ch) { return type_of(ch) == IBV_QPT_RC || type_of(ch) == IBV_QPT_XRC_SEND; }

// A message: this header, then `len` payload bytes.
struct Msg {
	uint32_t magic, ch, epoch, seq, len, crc;
};

// Control records on the socketpair.
enum Kind : uint32_t { HELLO = 1, QPNS, READY, RECREATE, REPLACED, RESIZE_SRQ, STOP, VERDICT };
struct Ctl {
	uint32_t kind, ch, a, b;
	uint64_t x, y;
};

bool ctl_send(int fd, const Ctl &c) { return write(fd, &c, sizeof(c)) == sizeof(c); }
// false on EOF (the peer is gone).
bool ctl_recv(int fd, Ctl &c)
{
	size_t got = 0;
	while (got < sizeof(c)) {
		ssize_t n = read(fd, reinterpret_cast<char *>(&c) + got, sizeof(c) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		got += size_t(n);
	}
	return true;
}

std::string fd_list();

// Open descriptors.
int count_fds()
{
	int n = 0;
	if (DIR *d = opendir("/proc/self/fd")) {
		while (dirent *e = readdir(d))
			n += e->d_name[0] != '.';
		closedir(d);
	}
	return n;
}

// The descriptor check after the last object is gone: as many as before
// the device was opened.
void check_fds(const char *who, int fds0)
{
	if (count_fds() == fds0)
		return;
	die("%s: %d file descriptors before, %d after:%s", who, fds0, count_fds(), fd_list().c_str());
}

// "fd -> target" of every open descriptor, for a leak report.
std::string fd_list()
{
	std::string out;
	if (DIR *d = opendir("/proc/self/fd")) {
		while (dirent *e = readdir(d)) {
			if (e->d_name[0] == '.')
				continue;
			char link[256] = "", path[300];
			snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
			ssize_t n = readlink(path, link, sizeof(link) - 1);
			if (n > 0)
				link[n] = '\0';
			out += std::string(" ") + e->d_name + "->" + link;
		}
		closedir(d);
	}
	return out;
}

long rss_kib()
{
	FILE *f = fopen("/proc/self/status", "r");
	long v = -1;
	char line[256];
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

struct Device {
	ibv_context *ctx = nullptr;
	ibv_pd *pd = nullptr;
	uint16_t lid = 0;
	void open()
	{
		int n = 0;
		ibv_device **l = ibv_get_device_list(&n);
		if (!l || n == 0)
			die("no device (RDMAV_SOFT_DEVICES=1?)");
		for (int i = 0; i < n && !ctx; i++)
			if (!strcmp(ibv_get_device_name(l[i]), "soft0"))
				ctx = ibv_open_device(l[i]);
		ibv_free_device_list(l);
		if (!ctx)
			die("cannot open soft0: %s", strerror(errno));
		pd = ibv_alloc_pd(ctx);
		ibv_port_attr pa;
		if (!pd || ibv_query_port(ctx, 1, &pa))
			die("pd/query_port: %s", strerror(errno));
		lid = pa.lid;
	}
	void close()
	{
		if (ibv_dealloc_pd(pd) || ibv_close_device(ctx))
			die("dealloc pd / close device failed");
	}
};

int modify(ibv_qp *qp, ibv_qp_state st, uint32_t dest, uint16_t dlid)
{
	ibv_qp_attr a = {};
	a.qp_state = st;
	int mask = IBV_QP_STATE;
	ibv_qp_type t = qp->qp_type;
	if (st == IBV_QPS_INIT) {
		a.pkey_index = 0;
		a.port_num = 1;
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (t == IBV_QPT_UD) {
			a.qkey = kQkey;
			mask |= IBV_QP_QKEY;
		} else {
			a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					    IBV_ACCESS_REMOTE_READ;
			mask |= IBV_QP_ACCESS_FLAGS;
		}
	} else if (st == IBV_QPS_RTR && t != IBV_QPT_UD) {
		a.path_mtu = IBV_MTU_4096;
		a.dest_qp_num = dest;
		a.rq_psn = 0;
		a.ah_attr.dlid = dlid;
		a.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (t == IBV_QPT_RC || t == IBV_QPT_XRC_RECV) {
			a.max_dest_rd_atomic = 4;
			a.min_rnr_timer = 1;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	} else if (st == IBV_QPS_RTS) {
		a.sq_psn = 0;
		mask |= IBV_QP_SQ_PSN;
		if (t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND) {
			a.timeout = 14;
			a.retry_cnt = 7;
			a.rnr_retry = 7;
			a.max_rd_atomic = 4;
			mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				IBV_QP_MAX_QP_RD_ATOMIC;
		}
	}
	return ibv_modify_qp(qp, &a, mask);
}

// ------------------------------------------------------------------ server

struct ServerChannel {
	ibv_qp *qp = nullptr;
	ibv_xrcd *xrcd = nullptr;
	ibv_srq *srq = nullptr;
	uint32_t epoch = 0, last_seq = 0;
	bool any = false;
	uint64_t received = 0; // in this epoch
};

struct Server {
	Device dev;
	ibv_cq *cq = nullptr;
	std::vector<uint8_t> recv = std::vector<uint8_t>(size_t(kChannels) * kDepth * kSlot);
	std::vector<uint8_t> target = std::vector<uint8_t>(size_t(kChannels) * kDepth * kSlot);
	ibv_mr *recv_mr = nullptr, *target_mr = nullptr;
	ServerChannel ch[kChannels];
	uint64_t verified = 0;
	int fd;

	uint8_t *slot(int c, int s) { return recv.data() + (size_t(c) * kDepth + s) * kSlot; }

	void post(int c, int s)
	{
		ibv_sge sge = {uintptr_t(slot(c, s)), kSlot, recv_mr->lkey};
		ibv_recv_wr wr = {}, *bad;
		wr.wr_id = (uint64_t(c) << 32) | uint32_t(s);
		wr.sg_list = &sge;
		wr.num_sge = 1;
		int rc = ch[c].srq ? ibv_post_srq_recv(ch[c].srq, &wr, &bad)
				   : ibv_post_recv(ch[c].qp, &wr, &bad);
		if (rc)
			die("post_recv channel %d: %s", c, strerror(rc));
	}

	void create(int c)
	{
		ServerChannel &k = ch[c];
		ibv_qp_type t = type_of(c);
		if (t == IBV_QPT_XRC_SEND) {
			if (!k.xrcd) {
				ibv_xrcd_init_attr xa = {};
				xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
				xa.fd = -1;
				xa.oflags = O_CREAT;
				k.xrcd = ibv_open_xrcd(dev.ctx, &xa);
				ibv_srq_init_attr_ex sa = {};
				sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
					       IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
				sa.srq_type = IBV_SRQT_XRC;
				sa.pd = dev.pd;
				sa.xrcd = k.xrcd;
				sa.cq = cq;
				sa.attr.max_wr = kDepth;
				sa.attr.max_sge = 1;
				k.srq = k.xrcd ? ibv_create_srq_ex(dev.ctx, &sa) : nullptr;
				if (!k.srq)
					die("XRCD/XRC SRQ: %s", strerror(errno));
				for (int s = 0; s < kDepth; s++)
					post(c, s);
			}
			ibv_qp_init_attr_ex qa = {};
			qa.qp_type = IBV_QPT_XRC_RECV;
			qa.comp_mask = IBV_QP_INIT_ATTR_XRCD;
			qa.xrcd = k.xrcd;
			k.qp = ibv_create_qp_ex(dev.ctx, &qa);
		} else {
			ibv_qp_init_attr qa = {};
			qa.send_cq = cq;
			qa.recv_cq = cq;
			qa.qp_type = t;
			qa.cap.max_send_wr = 4;
			qa.cap.max_recv_wr = kDepth;
			qa.cap.max_send_sge = 1;
			qa.cap.max_recv_sge = 1;
			k.qp = ibv_create_qp(dev.pd, &qa);
		}
		if (!k.qp || modify(k.qp, IBV_QPS_INIT, 0, 0))
			die("server QP channel %d: %s", c, strerror(errno));
		if (!k.srq)
			for (int s = 0; s < kDepth; s++)
				post(c, s);
		if (t == IBV_QPT_UD && (modify(k.qp, IBV_QPS_RTR, 0, 0) || modify(k.qp, IBV_QPS_RTS, 0, 0)))
			die("UD to RTS");
		k.any = false;
		k.received = 0;
	}

	void connect(int c, uint32_t dest)
	{
		if (type_of(c) != IBV_QPT_UD && modify(ch[c].qp, IBV_QPS_RTR, dest, dev.lid))
			die("server channel %d to RTR", c);
	}

	void describe(int c, Ctl &m)
	{
		m.ch = uint32_t(c);
		m.a = ch[c].qp->qp_num;
		m.b = 0;
		if (ch[c].srq && ibv_get_srq_num(ch[c].srq, &m.b))
			die("get_srq_num");
		m.x = uintptr_t(target.data() + size_t(c) * kDepth * kSlot);
		m.y = (uint64_t(dev.lid) << 32) | target_mr->rkey;
	}

	// Checks one received message; false if it is not ours at all.
	void check(int c, const ibv_wc &wc)
	{
		int s = int(wc.wr_id & 0xffffffff);
		const uint8_t *p = slot(c, s) + (type_of(c) == IBV_QPT_UD ? kGrh : 0);
		Msg m;
		memcpy(&m, p, sizeof(m));
		size_t len = wc.byte_len - (type_of(c) == IBV_QPT_UD ? kGrh : 0);
		if (m.magic != kMagic || m.ch != uint32_t(c) || len != sizeof(m) + m.len ||
		    crc32(p + sizeof(m), m.len) != m.crc)
			die("channel %d: corrupted message (magic %x ch %u len %zu/%u)", c, m.magic,
			    m.ch, len, m.len);
		ServerChannel &k = ch[c];
		if (m.epoch != k.epoch)
			die("channel %d: message of epoch %u in epoch %u", c, m.epoch, k.epoch);
		if (k.any && (reliable(c) ? m.seq != k.last_seq + 1 : m.seq <= k.last_seq))
			die("channel %d (%s): seq %u after %u: %s", c, reliable(c) ? "reliable" : "unreliable",
			    m.seq, k.last_seq, m.seq <= k.last_seq ? "duplicate" : "lost message");
		if (!k.any && reliable(c) && m.seq != 0)
			die("channel %d: first seq %u, lost the first messages", c, m.seq);
		k.any = true;
		k.last_seq = m.seq;
		k.received++;
		verified++;
	}

	void drain()
	{
		ibv_wc wc[32];
		int n;
		while ((n = ibv_poll_cq(cq, 32, wc)) > 0) {
			for (int i = 0; i < n; i++) {
				int c = int(wc[i].wr_id >> 32);
				if (c < 0 || c >= kChannels)
					die("completion with wr_id %llx", (unsigned long long)wc[i].wr_id);
				if (wc[i].status == IBV_WC_WR_FLUSH_ERR)
					continue; // the channel is being replaced
				if (wc[i].status != IBV_WC_SUCCESS)
					die("channel %d: receive completion %s", c, ibv_wc_status_str(wc[i].status));
				check(c, wc[i]);
				post(c, int(wc[i].wr_id & 0xffffffff));
			}
		}
		if (n < 0)
			die("poll_cq");
	}

	// Waits until `count` messages of the current epoch arrived on c.
	void expect(int c, uint64_t count)
	{
		// Reliable: every completed send is here or on its way. UC/UD may
		// have dropped some (no receive posted at that moment).
		double end = now() + (reliable(c) ? 10 : 0.2);
		while (ch[c].received < count && now() < end)
			drain();
		if (reliable(c) ? ch[c].received != count : ch[c].received > count)
			die("channel %d: the client completed %llu sends, %llu arrived", c,
			    (unsigned long long)count, (unsigned long long)ch[c].received);
	}

	void destroy(int c, bool all)
	{
		ServerChannel &k = ch[c];
		if (k.qp)
			if (int rc = ibv_destroy_qp(k.qp))
				die("server: destroy QP channel %d: %s", c, strerror(rc));
		k.qp = nullptr;
		if (all && k.srq && ibv_destroy_srq(k.srq))
			die("destroy SRQ");
		if (all && k.xrcd && ibv_close_xrcd(k.xrcd))
			die("close XRCD");
		if (all)
			k.srq = nullptr, k.xrcd = nullptr;
	}

	int run()
	{
		int fds0 = count_fds();
		dev.open();
		cq = ibv_create_cq(dev.ctx, kChannels * kDepth * 2, nullptr, nullptr, 0);
		recv_mr = ibv_reg_mr(dev.pd, recv.data(), recv.size(), IBV_ACCESS_LOCAL_WRITE);
		target_mr = ibv_reg_mr(dev.pd, target.data(), target.size(),
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					       IBV_ACCESS_REMOTE_READ);
		if (!cq || !recv_mr || !target_mr)
			die("server set-up: %s", strerror(errno));
		for (int c = 0; c < kChannels; c++) {
			create(c);
			Ctl m = {HELLO};
			describe(c, m);
			if (!ctl_send(fd, m))
				return 0;
		}
		for (int c = 0; c < kChannels; c++) {
			Ctl m;
			if (!ctl_recv(fd, m) || m.kind != QPNS)
				return peer_gone();
			connect(int(m.ch), m.a);
		}
		Ctl ready = {READY};
		ctl_send(fd, ready);
		for (;;) {
			drain();
			pollfd p = {fd, POLLIN, 0};
			if (poll(&p, 1, 0) <= 0)
				continue;
			Ctl m;
			if (!ctl_recv(fd, m))
				return peer_gone();
			int c = int(m.ch);
			if (m.kind == RECREATE) {
				expect(c, m.x);
				modify(ch[c].qp, IBV_QPS_ERR, 0, 0);
				drain();
				destroy(c, false);
				ch[c].epoch++;
				create(c);
				Ctl r = {REPLACED};
				describe(c, r);
				ctl_send(fd, r);
				if (!ctl_recv(fd, m) || m.kind != QPNS)
					return peer_gone();
				connect(c, m.a);
				ctl_send(fd, ready);
			} else if (m.kind == RESIZE_SRQ) {
				ibv_srq_attr sa = {};
				sa.max_wr = m.a;
				if (ch[c].srq && ibv_modify_srq(ch[c].srq, &sa, IBV_SRQ_MAX_WR) &&
				    errno != EINVAL && errno != EOPNOTSUPP)
					die("modify_srq(max_wr %u): %s", m.a, strerror(errno));
			} else if (m.kind == STOP) {
				expect(c, m.x);
				if (c != kChannels - 1)
					continue;
				teardown(fds0);
				Ctl v = {VERDICT};
				ctl_send(fd, v);
				printf("soak: server %d verified %llu messages\n", getpid(),
				       (unsigned long long)verified);
				return 0;
			}
		}
	}

	int peer_gone()
	{
		// The client was killed: everything received so far was checked;
		// the objects must still go away cleanly.
		drain();
		teardown(-1);
		printf("soak: server %d: client gone, %llu messages verified\n", getpid(),
		       (unsigned long long)verified);
		return 0;
	}

	void teardown(int fds0)
	{
		for (int c = 0; c < kChannels; c++)
			destroy(c, true);
		if (ibv_dereg_mr(recv_mr) || ibv_dereg_mr(target_mr) || ibv_destroy_cq(cq))
			die("server teardown");
		dev.close();
		if (fds0 >= 0)
			check_fds("server", fds0);
	}
};

// ------------------------------------------------------------------ client

struct ClientChannel {
	ibv_qp *qp = nullptr;
	ibv_ah *ah = nullptr;
	uint32_t rqpn = 0, srqn = 0, epoch = 0, seq = 0, rkey = 0;
	uint64_t raddr = 0, completed = 0;
};

struct Client {
	Device dev;
	ibv_cq *cq = nullptr;
	int cq_size = 512;
	std::vector<uint8_t> buf = std::vector<uint8_t>(size_t(64) * kSlot);
	ibv_mr *mr = nullptr;
	ClientChannel ch[kChannels];
	std::mt19937_64 rng;
	uint16_t slid = 0;
	int fd;
	uint64_t sent = 0, writes = 0, rereg = 0, mws = 0, resizes = 0, recreated = 0;

	void create(int c, const Ctl &m)
	{
		ClientChannel &k = ch[c];
		k.rqpn = m.a;
		k.srqn = m.b;
		k.raddr = m.x;
		k.rkey = uint32_t(m.y);
		slid = uint16_t(m.y >> 32);
		ibv_qp_init_attr_ex qa = {};
		qa.send_cq = cq;
		qa.recv_cq = cq;
		qa.qp_type = type_of(c);
		qa.cap.max_send_wr = 16;
		qa.cap.max_recv_wr = type_of(c) == IBV_QPT_XRC_SEND ? 0 : 1;
		qa.cap.max_send_sge = 1;
		qa.cap.max_recv_sge = 1;
		qa.comp_mask = IBV_QP_INIT_ATTR_PD;
		qa.pd = dev.pd;
		if (type_of(c) == IBV_QPT_XRC_SEND)
			qa.cap.max_recv_sge = 0;
		k.qp = ibv_create_qp_ex(dev.ctx, &qa);
		if (!k.qp)
			die("client channel %d: create QP: %s", c, strerror(errno));
		if (int rc = modify(k.qp, IBV_QPS_INIT, 0, 0))
			die("client channel %d: to INIT: %s", c, strerror(rc));
		if (int rc = modify(k.qp, IBV_QPS_RTR, k.rqpn, slid))
			die("client channel %d: to RTR: %s", c, strerror(rc));
		if (int rc = modify(k.qp, IBV_QPS_RTS, 0, 0))
			die("client channel %d: to RTS: %s", c, strerror(rc));
		if (type_of(c) == IBV_QPT_UD && !k.ah) {
			ibv_ah_attr aa = {};
			aa.dlid = slid;
			aa.port_num = 1;
			k.ah = ibv_create_ah(dev.pd, &aa);
			if (!k.ah)
				die("create_ah");
		}
		k.seq = 0;
		k.completed = 0;
		Ctl r = {QPNS, uint32_t(c), k.qp->qp_num};
		ctl_send(fd, r);
	}

	// Polls until `outstanding` completions arrived; counts the sends.
	void wait(int outstanding)
	{
		double end = now() + 20;
		ibv_wc wc[16];
		while (outstanding > 0) {
			int n = ibv_poll_cq(cq, 16, wc);
			if (n < 0)
				die("poll_cq");
			for (int i = 0; i < n; i++) {
				if (wc[i].status != IBV_WC_SUCCESS && peer_dead())
					peer_gone();
				if (wc[i].status != IBV_WC_SUCCESS)
					die("send completion %s (opcode %d, wr_id %llx)",
					    ibv_wc_status_str(wc[i].status), wc[i].opcode,
					    (unsigned long long)wc[i].wr_id);
				int c = int(wc[i].wr_id >> 32);
				if (c < kChannels && wc[i].opcode == IBV_WC_SEND)
					ch[c].completed++;
			}
			outstanding -= n;
			if (n == 0 && now() > end) {
				if (peer_dead())
					peer_gone();
				die("%d completions missing after 20 s", outstanding);
			}
		}
	}

	int post_send(int c, int n)
	{
		ClientChannel &k = ch[c];
		for (int i = 0; i < n; i++) {
			uint8_t *p = buf.data() + size_t(i) * kSlot;
			Msg m = {kMagic, uint32_t(c), k.epoch, k.seq++,
				 uint32_t(rng() % (kMaxMsg - sizeof(Msg))), 0};
			for (uint32_t b = 0; b < m.len; b++)
				p[sizeof(m) + b] = uint8_t(rng());
			m.crc = crc32(p + sizeof(m), m.len);
			memcpy(p, &m, sizeof(m));
			ibv_sge sge = {uintptr_t(p), uint32_t(sizeof(m) + m.len), mr->lkey};
			ibv_send_wr wr = {}, *bad;
			wr.wr_id = uint64_t(c) << 32 | m.seq;
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.opcode = IBV_WR_SEND;
			wr.send_flags = IBV_SEND_SIGNALED;
			if (type_of(c) == IBV_QPT_UD) {
				wr.wr.ud.ah = k.ah;
				wr.wr.ud.remote_qpn = k.rqpn;
				wr.wr.ud.remote_qkey = kQkey;
			} else if (type_of(c) == IBV_QPT_XRC_SEND) {
				wr.qp_type.xrc.remote_srqn = k.srqn;
			}
			if (int rc = ibv_post_send(k.qp, &wr, &bad))
				die("post_send channel %d: %s", c, strerror(rc));
		}
		sent += unsigned(n);
		return n;
	}

	// RDMA WRITE of random bytes into the server's target slot, RDMA READ
	// back into another buffer, compare (RC only).
	void write_read(int c)
	{
		ClientChannel &k = ch[c];
		size_t len = 1 + rng() % kSlot;
		uint64_t slot = rng() % kDepth;
		uint8_t *src = buf.data() + size_t(40) * kSlot, *dst = buf.data() + size_t(48) * kSlot;
		for (size_t b = 0; b < len; b++)
			src[b] = uint8_t(rng());
		memset(dst, 0, len);
		ibv_sge s1 = {uintptr_t(src), uint32_t(len), mr->lkey};
		ibv_sge s2 = {uintptr_t(dst), uint32_t(len), mr->lkey};
		ibv_send_wr w = {}, r = {}, *bad;
		w.wr_id = uint64_t(kChannels) << 32;
		w.sg_list = &s1;
		w.num_sge = 1;
		w.opcode = IBV_WR_RDMA_WRITE;
		w.wr.rdma.remote_addr = k.raddr + slot * kSlot;
		w.wr.rdma.rkey = k.rkey;
		w.next = &r;
		r = w;
		r.next = nullptr;
		r.sg_list = &s2;
		r.opcode = IBV_WR_RDMA_READ;
		r.send_flags = IBV_SEND_SIGNALED;
		if (int rc = ibv_post_send(k.qp, &w, &bad))
			die("post write+read: %s", strerror(rc));
		wait(1);
		if (memcmp(src, dst, len))
			die("channel %d: RDMA READ returned other bytes than the RDMA WRITE wrote", c);
		writes++;
	}

	void random_verb()
	{
		switch (rng() % 5) {
		case 0: { // rereg (access change) with nothing in flight
			int acc = IBV_ACCESS_LOCAL_WRITE | ((rng() & 1) ? IBV_ACCESS_REMOTE_READ : 0);
			if (int rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, dev.pd, nullptr, 0, acc))
				die("rereg_mr: %d", rc);
			rereg++;
			break;
		}
		case 1: { // type 2 MW: bind through an RC QP, then invalidate it
			int c = 0;
			ibv_mw *mw = ibv_alloc_mw(dev.pd, IBV_MW_TYPE_2);
			if (!mw)
				die("alloc_mw: %s", strerror(errno));
			ibv_mr *bmr = ibv_reg_mr(dev.pd, buf.data(), kSlot,
						 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
			if (!bmr)
				die("reg_mr(MW_BIND): %s", strerror(errno));
			ibv_send_wr wr = {}, *bad;
			wr.wr_id = uint64_t(kChannels) << 32;
			wr.opcode = IBV_WR_BIND_MW;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.bind_mw.mw = mw;
			wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
			wr.bind_mw.bind_info.mr = bmr;
			wr.bind_mw.bind_info.addr = uintptr_t(buf.data());
			wr.bind_mw.bind_info.length = kSlot;
			wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
			if (int rc = ibv_post_send(ch[c].qp, &wr, &bad))
				die("bind MW: %s", strerror(rc));
			wait(1);
			ibv_send_wr inv = {};
			inv.wr_id = uint64_t(kChannels) << 32;
			inv.opcode = IBV_WR_LOCAL_INV;
			inv.send_flags = IBV_SEND_SIGNALED;
			inv.invalidate_rkey = wr.bind_mw.rkey;
			if (int rc = ibv_post_send(ch[c].qp, &inv, &bad))
				die("local invalidate: %s", strerror(rc));
			wait(1);
			if (ibv_dealloc_mw(mw) || ibv_dereg_mr(bmr))
				die("dealloc MW / dereg");
			mws++;
			break;
		}
		case 2: { // resize the CQ
			int want = 64 + int(rng() % 2048);
			if (ibv_resize_cq(cq, want))
				die("resize_cq(%d): %s", want, strerror(errno));
			resizes++;
			break;
		}
		case 3: { // the server resizes its XRC SRQ
			Ctl m = {RESIZE_SRQ, 3, uint32_t(kDepth + rng() % 64)};
			ctl_send(fd, m);
			break;
		}
		case 4: { // error, destroy, recreate one channel on both sides
			int c = int(rng() % kChannels);
			ClientChannel &k = ch[c];
			Ctl m = {RECREATE, uint32_t(c), 0, 0, k.completed};
			if (!ctl_send(fd, m))
				peer_gone();
			if (modify(k.qp, IBV_QPS_ERR, 0, 0))
				die("modify to ERR");
			if (ibv_destroy_qp(k.qp))
				die("destroy_qp");
			k.qp = nullptr;
			k.epoch++;
			Ctl r;
			if (!ctl_recv(fd, r) || r.kind != REPLACED)
				peer_gone();
			create(c, r);
			if (!ctl_recv(fd, r) || r.kind != READY)
				peer_gone();
			recreated++;
			break;
		}
		}
	}

	// Whether the server's end of the socketpair is closed (it was killed).
	// The device may see the death a little before the socket is closed:
	// an error completion gets 5 s for the EOF to show.
	bool peer_dead()
	{
		double end = now() + 5;
		do {
			pollfd p = {fd, POLLIN, 0};
			char c;
			if (poll(&p, 1, 100) > 0 && recv(fd, &c, 1, MSG_PEEK) == 0)
				return true;
		} while (now() < end);
		return false;
	}

	[[noreturn]] void peer_gone()
	{
		// The server was killed: what is in flight may fail, nothing may
		// hang; the objects must still go away.
		ibv_wc wc[16];
		double end = now() + 5;
		while (now() < end && ibv_poll_cq(cq, 16, wc) > 0)
			;
		teardown(-1, -1);
		printf("soak: client %d: server gone after %llu messages\n", getpid(),
		       (unsigned long long)sent);
		fflush(stdout);
		_exit(0);
	}

	void teardown(int fds0, long rss0)
	{
		for (ClientChannel &k : ch) {
			if (k.qp)
				if (int rc = ibv_destroy_qp(k.qp))
					die("client: destroy QP (%s): %s", k.qp->qp_type == IBV_QPT_XRC_SEND ? "XRC" : "RC/UC/UD", strerror(rc));
			if (k.ah && ibv_destroy_ah(k.ah))
				die("destroy AH");
			k.qp = nullptr;
			k.ah = nullptr;
		}
		if (ibv_dereg_mr(mr) || ibv_destroy_cq(cq))
			die("client teardown");
		dev.close();
		if (fds0 >= 0)
			check_fds("client", fds0);
		if (rss0 >= 0 && rss_kib() > rss0 + 32 * 1024)
			die("client: resident memory grew from %ld to %ld KiB", rss0, rss_kib());
	}

	int run(double seconds)
	{
		rng.seed(uint64_t(getpid()) * 2654435761u ^ uint64_t(now() * 1e6));
		int fds0 = count_fds();
		dev.open();
		cq = ibv_create_cq(dev.ctx, cq_size, nullptr, nullptr, 0);
		mr = ibv_reg_mr(dev.pd, buf.data(), buf.size(),
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
		if (!cq || !mr)
			die("client set-up: %s", strerror(errno));
		long rss0 = -1;
		for (int c = 0; c < kChannels; c++) {
			Ctl m;
			if (!ctl_recv(fd, m) || m.kind != HELLO)
				peer_gone();
			create(int(m.ch), m);
		}
		Ctl r;
		if (!ctl_recv(fd, r) || r.kind != READY)
			peer_gone();
		double end = now() + seconds;
		for (unsigned round = 0; now() < end; round++) {
			int c = int(rng() % kChannels);
			int n = 1 + int(rng() % 8);
			wait(post_send(c, n));
			if (type_of(c) == IBV_QPT_RC && rng() % 4 == 0)
				write_read(c);
			if (rng() % 16 == 0)
				random_verb();
			if (round == 200)
				rss0 = rss_kib(); // after the allocator warmed up
			pollfd p = {fd, POLLIN, 0};
			if (poll(&p, 1, 0) > 0 && !ctl_recv(fd, r))
				peer_gone();
		}
		for (int c = 0; c < kChannels; c++) {
			Ctl m = {STOP, uint32_t(c), 0, 0, ch[c].completed};
			if (!ctl_send(fd, m))
				peer_gone();
		}
		if (!ctl_recv(fd, r) || r.kind != VERDICT) {
			// The supervisor may kill the server up to 0.2 s after the
			// session's end: after our last round, before its verdict.
			if (peer_dead())
				peer_gone();
			die("no verdict from the server");
		}
		teardown(fds0, rss0);
		printf("soak: client %d sent %llu, %llu write/read, %llu rereg, %llu MW, %llu CQ "
		       "resizes, %llu recreated\n",
		       getpid(), (unsigned long long)sent, (unsigned long long)writes,
		       (unsigned long long)rereg, (unsigned long long)mws,
		       (unsigned long long)resizes, (unsigned long long)recreated);
		return 0;
	}
};

// ------------------------------------------------------------------ supervisor

int shm_entries()
{
	int n = 0;
	if (DIR *d = opendir("/dev/shm")) {
		while (dirent *e = readdir(d))
			n += e->d_name[0] != '.';
		closedir(d);
	}
	return n;
}

pid_t spawn(const char *self, const char *role, int fd, double seconds)
{
	pid_t p = fork();
	if (p == 0) {
		fcntl(fd, F_SETFD, 0); // only this worker's end survives exec
		char fds[16], secs[32];
		snprintf(fds, sizeof(fds), "%d", fd);
		snprintf(secs, sizeof(secs), "%.3f", seconds);
		execl(self, self, role, fds, secs, static_cast<char *>(nullptr));
		_exit(127);
	}
	return p;
}

int supervise(const char *self, double seconds)
{
	int pairs = 3;
	if (const char *e = getenv("OPENVERBS_SOAK_PAIRS"))
		pairs = atoi(e) > 0 ? atoi(e) : pairs;
	setenv("RDMAV_SOFT_DEVICES", "1", 1);
	// OPENVERBS_SOAK_KILLS: random (default: one round in three), always, never.
	int kill_mode = 1;
	if (const char *e = getenv("OPENVERBS_SOAK_KILLS"))
		kill_mode = !strcmp(e, "always") ? 2 : !strcmp(e, "never") ? 0 : 1;
	std::mt19937 rng(unsigned(time(nullptr)));
	int shm0 = shm_entries();
	double end = now() + seconds;
	unsigned rounds = 0, kills = 0;
	while (now() < end) {
		double session = 2 + rng() % 7;
		std::vector<pid_t> pids;
		for (int i = 0; i < pairs; i++) {
			int sv[2];
			if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
				die("socketpair");
			pids.push_back(spawn(self, "--server", sv[0], session));
			pids.push_back(spawn(self, "--client", sv[1], session));
			close(sv[0]);
			close(sv[1]);
		}
		pid_t victim = -1;
		if (kill_mode == 2 || (kill_mode == 1 && rng() % 3 == 0)) {
			usleep(useconds_t((0.2 + (rng() % 1000) / 1000.0 * session) * 1e6));
			size_t v = rng() % pids.size();
			victim = pids[v];
			kill(victim, SIGKILL);
			printf("soak: round %u: killed the %s %d\n", rounds, v % 2 ? "client" : "server", victim);
			kills++;
		}
		for (pid_t p : pids) {
			int st = 0;
			double deadline = now() + session + 60;
			pid_t w;
			while ((w = waitpid(p, &st, WNOHANG)) == 0 && now() < deadline)
				usleep(20000);
			if (w == 0) {
				kill(p, SIGKILL);
				waitpid(p, &st, 0);
				die("worker %d hangs (round %u)", p, rounds);
			}
			if (p == victim)
				continue;
			if (!WIFEXITED(st) || WEXITSTATUS(st))
				die("worker %d ended with %s %d (round %u)", p,
				    WIFEXITED(st) ? "status" : "signal",
				    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), rounds);
		}
		if (shm_entries() != shm0)
			die("round %u: %d entries in /dev/shm after every worker ended, %d before", rounds,
			    shm_entries(), shm0);
		rounds++;
	}
	printf("soak: PASS: %u rounds of %d pairs, %u workers killed, no loss, duplicate, "
	       "corruption, hang or leak\n",
	       rounds, pairs, kills);
	return 0;
}

// The watchdog: a worker still running long after its session hangs; its
// stack goes to stderr (for FINDINGS.md) before it ends.
void on_alarm(int)
{
	static const char msg[] = "soak: FAIL: worker hangs; its stack:\n";
	(void)!write(2, msg, sizeof(msg) - 1);
	void *frames[64];
	backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
	_exit(3);
}

} // namespace

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc == 4 && (!strcmp(argv[1], "--server") || !strcmp(argv[1], "--client"))) {
		signal(SIGALRM, on_alarm);
		alarm(unsigned(atof(argv[3])) + 45); // watchdog
		setvbuf(stdout, nullptr, _IOLBF, 0);
		int fd = atoi(argv[2]);
		if (!strcmp(argv[1], "--server")) {
			Server s;
			s.fd = fd;
			return s.run();
		}
		Client c;
		c.fd = fd;
		return c.run(atof(argv[3]));
	}
	double seconds = 120;
	if (const char *e = getenv("OPENVERBS_SOAK_SECONDS"))
		seconds = atof(e);
	if (argc == 2)
		seconds = atof(argv[1]);
	if (seconds <= 0) {
		fprintf(stderr, "usage: soak [SECONDS] (default $OPENVERBS_SOAK_SECONDS or 120)\n");
		return 2;
	}
	setvbuf(stdout, nullptr, _IOLBF, 0);
	return supervise("/proc/self/exe", seconds);
}
