// xrcpd_peer: a small "verbs shell" that the XRC and domain tests start as a
// fresh process (fork + exec) to play one side of a multi-process scenario.
//
// It opens one device (argv[1], default soft0) with a PD, a receive CQ and a
// send CQ, prints "hello <pid>", then reads one command per line on stdin
// and answers one line on stdout: "ok [values...]" or "err <errno>".
// Objects are kept in numbered slots (0..15) chosen by the caller.
//
//   xrcd S PATH OFLAGS     ibv_open_xrcd on PATH ("-" = fd -1, "closed" = a
//                          descriptor that is not open); OFLAGS: decimal
//   closexrcd S            ibv_close_xrcd
//   xsrq S X               XRC SRQ in xrcd X (recv CQ)        -> ok SRQN
//   rqp S X                XRC_RECV QP in xrcd X              -> ok QPN
//   openqp S X QPN         ibv_open_qp(XRC_RECV) in xrcd X
//   rconnect S DEST        modify QP S (XRC_RECV) to INIT then RTR (dest QPN)
//   destroyqp S / destroysrq S
//   ldom S PATH OFLAG      ibv_open_xrc_domain (legacy API)
//   lclose S               ibv_close_xrc_domain
//   lsrq S D               ibv_create_xrc_srq in legacy domain D -> ok SRQN
//   lcreate D              ibv_create_xrc_rcv_qp             -> ok QPN
//   lreg D QPN / lunreg D QPN
//   lconnect D QPN DEST    ibv_modify_xrc_rcv_qp to INIT then RTR (dest QPN)
//   post S N               N receives of 64 bytes on SRQ S
//   poll N MS              up to N receive completions in MS ms
//                          -> ok COUNT STATUS:TEXT ...
//   sender S               XRC_SEND QP                        -> ok QPN
//   sconnect S DEST        INIT, RTR (dest QPN), RTS
//   send S SRQN TEXT       one signalled SEND, waits for it   -> ok STATUS
//   bigsend S SRQN LEN     the same with LEN bytes (up to 4096; larger than a
//                          64-byte receive: a length error at the responder)
//   rreset S               modify QP S to RESET
//   event MS               the next asynchronous event within MS ms
//                          -> ok TYPE QPN (QP events) | ok TYPE | ok none
//   crash                  SIGKILL itself (no clean-up at all)
//   quit                   exits 0 without freeing anything
#include <infiniband/legacy_xrc.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <string>
#include <time.h>
#include <unistd.h>

namespace {

constexpr int kSlots = 16;
constexpr int kBufs = 64;
constexpr int kMsg = 64;

ibv_context *g_ctx;
ibv_pd *g_pd;
ibv_cq *g_rcq, *g_scq;
ibv_mr *g_mr;
char g_buf[kBufs * 2][kMsg]; // receive buffers, then send buffers
int g_next_buf;

ibv_xrcd *g_xrcd[kSlots];
ibv_srq *g_srq[kSlots];
ibv_qp *g_qp[kSlots];
ibv_xrc_domain *g_dom[kSlots];

void reply_err(int e) { printf("err %d\n", e); }
void reply_ret(int ret) { ret ? reply_err(ret) : (void)printf("ok\n"); }

ibv_context *open_dev(const char *name)
{
	int n = 0;
	ibv_device **list = ibv_get_device_list(&n);
	if (!list)
		return nullptr;
	ibv_context *ctx = nullptr;
	for (int i = 0; i < n && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return ctx;
}

int open_path(const char *path)
{
	if (!strcmp(path, "-"))
		return -1;
	if (!strcmp(path, "closed")) {
		int fd = open("/dev/null", O_RDONLY);
		close(fd);
		return fd; // a descriptor number that is not open now
	}
	return open(path, O_RDONLY | O_CREAT, 0600);
}

bool slot_ok(int s) { return s >= 0 && s < kSlots; }

int modify_to_init(ibv_qp *qp)
{
	ibv_qp_attr a = {};
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					     IBV_QP_ACCESS_FLAGS);
}

void rtr_attr(ibv_qp_attr *a, uint32_t dest)
{
	*a = {};
	a->qp_state = IBV_QPS_RTR;
	a->path_mtu = IBV_MTU_1024;
	a->dest_qp_num = dest;
	a->ah_attr.dlid = 1;
	a->ah_attr.port_num = 1;
	a->max_dest_rd_atomic = 1;
	a->min_rnr_timer = 1;
}

const int kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;

uint64_t now_ms()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void run(const char *line)
{
	char cmd[32] = {}, path[512] = {}, text[kMsg] = {};
	int a = -1, b = -1;
	unsigned u = 0, v = 0;
	if (sscanf(line, "%31s", cmd) != 1)
		return reply_err(EINVAL);
	std::string c = cmd;
	errno = 0;
	if (c == "xrcd" && sscanf(line, "%*s %d %511s %u", &a, path, &u) == 3 && slot_ok(a)) {
		int fd = open_path(path);
		ibv_xrcd_init_attr attr = {};
		attr.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
		attr.fd = fd;
		attr.oflags = int(u);
		g_xrcd[a] = ibv_open_xrcd(g_ctx, &attr);
		int e = errno;
		if (fd >= 0)
			close(fd); // the domain outlives the descriptor
		return g_xrcd[a] ? (void)printf("ok\n") : reply_err(e);
	}
	if (c == "closexrcd" && sscanf(line, "%*s %d", &a) == 1 && slot_ok(a)) {
		int ret = ibv_close_xrcd(g_xrcd[a]);
		if (!ret)
			g_xrcd[a] = nullptr;
		return reply_ret(ret);
	}
	if (c == "xsrq" && sscanf(line, "%*s %d %d", &a, &b) == 2 && slot_ok(a) && slot_ok(b)) {
		ibv_srq_init_attr_ex attr = {};
		attr.attr.max_wr = kBufs;
		attr.attr.max_sge = 1;
		attr.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
				 IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
		attr.srq_type = IBV_SRQT_XRC;
		attr.pd = g_pd;
		attr.xrcd = g_xrcd[b];
		attr.cq = g_rcq;
		g_srq[a] = ibv_create_srq_ex(g_ctx, &attr);
		if (!g_srq[a])
			return reply_err(errno);
		uint32_t num = 0;
		int ret = ibv_get_srq_num(g_srq[a], &num);
		return ret ? reply_err(ret) : (void)printf("ok %u\n", num);
	}
	if (c == "rqp" && sscanf(line, "%*s %d %d", &a, &b) == 2 && slot_ok(a) && slot_ok(b)) {
		ibv_qp_init_attr_ex attr = {};
		attr.qp_type = IBV_QPT_XRC_RECV;
		attr.comp_mask = IBV_QP_INIT_ATTR_XRCD;
		attr.xrcd = g_xrcd[b];
		g_qp[a] = ibv_create_qp_ex(g_ctx, &attr);
		return g_qp[a] ? (void)printf("ok %u\n", g_qp[a]->qp_num) : reply_err(errno);
	}
	if (c == "openqp" && sscanf(line, "%*s %d %d %u", &a, &b, &u) == 3 && slot_ok(a) &&
	    slot_ok(b)) {
		ibv_qp_open_attr attr = {};
		attr.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
				 IBV_QP_OPEN_ATTR_TYPE;
		attr.qp_num = u;
		attr.xrcd = g_xrcd[b];
		attr.qp_type = IBV_QPT_XRC_RECV;
		g_qp[a] = ibv_open_qp(g_ctx, &attr);
		return g_qp[a] ? (void)printf("ok %u\n", g_qp[a]->qp_num) : reply_err(errno);
	}
	if (c == "rconnect" && sscanf(line, "%*s %d %u", &a, &u) == 2 && slot_ok(a)) {
		int ret = modify_to_init(g_qp[a]);
		if (ret)
			return reply_err(ret);
		ibv_qp_attr attr;
		rtr_attr(&attr, u);
		return reply_ret(ibv_modify_qp(g_qp[a], &attr, kRtrMask));
	}
	if (c == "destroyqp" && sscanf(line, "%*s %d", &a) == 1 && slot_ok(a)) {
		int ret = ibv_destroy_qp(g_qp[a]);
		if (!ret)
			g_qp[a] = nullptr;
		return reply_ret(ret);
	}
	if (c == "destroysrq" && sscanf(line, "%*s %d", &a) == 1 && slot_ok(a)) {
		int ret = ibv_destroy_srq(g_srq[a]);
		if (!ret)
			g_srq[a] = nullptr;
		return reply_ret(ret);
	}
	if (c == "ldom" && sscanf(line, "%*s %d %511s %u", &a, path, &u) == 3 && slot_ok(a)) {
		int fd = open_path(path);
		g_dom[a] = ibv_open_xrc_domain(g_ctx, fd, int(u));
		int e = errno;
		if (fd >= 0)
			close(fd);
		return g_dom[a] ? (void)printf("ok\n") : reply_err(e);
	}
	if (c == "lclose" && sscanf(line, "%*s %d", &a) == 1 && slot_ok(a)) {
		int ret = ibv_close_xrc_domain(g_dom[a]);
		if (!ret)
			g_dom[a] = nullptr;
		return reply_ret(ret);
	}
	if (c == "lsrq" && sscanf(line, "%*s %d %d", &a, &b) == 2 && slot_ok(a) && slot_ok(b)) {
		ibv_srq_init_attr attr = {};
		attr.attr.max_wr = kBufs;
		attr.attr.max_sge = 1;
		g_srq[a] = ibv_create_xrc_srq(g_pd, g_dom[b], g_rcq, &attr);
		if (!g_srq[a])
			return reply_err(errno);
		uint32_t num = ibv_xrc_srq_num(g_srq[a]);
		return num ? (void)printf("ok %u\n", num) : reply_err(errno);
	}
	if (c == "lcreate" && sscanf(line, "%*s %d", &a) == 1 && slot_ok(a)) {
		ibv_xrc_rcv_qp_init_attr attr = {};
		attr.xrc_domain = g_dom[a];
		uint32_t qpn = 0;
		int ret = ibv_create_xrc_rcv_qp(&attr, &qpn);
		return ret ? reply_err(ret) : (void)printf("ok %u\n", qpn);
	}
	if (c == "lreg" && sscanf(line, "%*s %d %u", &a, &u) == 2 && slot_ok(a))
		return reply_ret(ibv_reg_xrc_rcv_qp(g_dom[a], u));
	if (c == "lunreg" && sscanf(line, "%*s %d %u", &a, &u) == 2 && slot_ok(a))
		return reply_ret(ibv_unreg_xrc_rcv_qp(g_dom[a], u));
	if (c == "lconnect" && sscanf(line, "%*s %d %u %u", &a, &u, &v) == 3 && slot_ok(a)) {
		ibv_qp_attr attr = {};
		attr.qp_state = IBV_QPS_INIT;
		attr.port_num = 1;
		int ret = ibv_modify_xrc_rcv_qp(g_dom[a], u, &attr,
						IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
							IBV_QP_ACCESS_FLAGS);
		if (ret)
			return reply_err(ret);
		rtr_attr(&attr, v);
		return reply_ret(ibv_modify_xrc_rcv_qp(g_dom[a], u, &attr, kRtrMask));
	}
	if (c == "post" && sscanf(line, "%*s %d %u", &a, &u) == 2 && slot_ok(a)) {
		for (unsigned i = 0; i < u; i++) {
			int idx = g_next_buf++ % kBufs;
			memset(g_buf[idx], 0, kMsg);
			ibv_sge sge = {uintptr_t(g_buf[idx]), kMsg, g_mr->lkey};
			ibv_recv_wr wr = {}, *bad = nullptr;
			wr.wr_id = uint64_t(idx);
			wr.sg_list = &sge;
			wr.num_sge = 1;
			int ret = ibv_post_srq_recv(g_srq[a], &wr, &bad);
			if (ret)
				return reply_err(ret);
		}
		return (void)printf("ok\n");
	}
	if (c == "poll" && sscanf(line, "%*s %u %u", &u, &v) == 2) {
		std::string out;
		unsigned got = 0;
		uint64_t end = now_ms() + v;
		while (got < u && now_ms() < end) {
			ibv_wc wc;
			int n = ibv_poll_cq(g_rcq, 1, &wc);
			if (n < 0)
				return reply_err(EIO);
			if (n == 0) {
				usleep(1000);
				continue;
			}
			got++;
			char item[kMsg + 32];
			const char *msg = wc.status == IBV_WC_SUCCESS && wc.wr_id < kBufs
						  ? g_buf[wc.wr_id]
						  : "-";
			snprintf(item, sizeof(item), " %d:%.*s", int(wc.status), kMsg - 1, msg);
			out += item;
		}
		return (void)printf("ok %u%s\n", got, out.c_str());
	}
	if (c == "sender" && sscanf(line, "%*s %d", &a) == 1 && slot_ok(a)) {
		ibv_qp_init_attr_ex attr = {};
		attr.qp_type = IBV_QPT_XRC_SEND;
		attr.comp_mask = IBV_QP_INIT_ATTR_PD;
		attr.pd = g_pd;
		attr.send_cq = g_scq;
		attr.recv_cq = g_scq;
		attr.cap.max_send_wr = 16;
		attr.cap.max_send_sge = 1;
		g_qp[a] = ibv_create_qp_ex(g_ctx, &attr);
		return g_qp[a] ? (void)printf("ok %u\n", g_qp[a]->qp_num) : reply_err(errno);
	}
	if (c == "sconnect" && sscanf(line, "%*s %d %u", &a, &u) == 2 && slot_ok(a)) {
		int ret = modify_to_init(g_qp[a]);
		if (ret)
			return reply_err(ret);
		ibv_qp_attr attr;
		rtr_attr(&attr, u);
		// An initiator has no responder attributes.
		ret = ibv_modify_qp(g_qp[a], &attr,
				    kRtrMask & ~(IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
		if (ret)
			return reply_err(ret);
		attr = {};
		attr.qp_state = IBV_QPS_RTS;
		attr.timeout = 8;
		attr.retry_cnt = 1;
		attr.rnr_retry = 1;
		attr.max_rd_atomic = 1;
		return reply_ret(ibv_modify_qp(g_qp[a], &attr,
					       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
						       IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
						       IBV_QP_MAX_QP_RD_ATOMIC));
	}
	bool big = c == "bigsend" && sscanf(line, "%*s %d %u %u", &a, &u, &v) == 3 && slot_ok(a) &&
		   v > 0 && v <= unsigned(kBufs * kMsg);
	if (big || (c == "send" && sscanf(line, "%*s %d %u %63s", &a, &u, text) == 3 &&
		    slot_ok(a))) {
		char *sbuf = g_buf[kBufs];
		snprintf(sbuf, kMsg, "%s", big ? "big" : text);
		ibv_sge sge = {uintptr_t(sbuf), big ? v : uint32_t(strlen(sbuf) + 1), g_mr->lkey};
		ibv_send_wr wr = {}, *bad = nullptr;
		wr.opcode = IBV_WR_SEND;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.qp_type.xrc.remote_srqn = u;
		int ret = ibv_post_send(g_qp[a], &wr, &bad);
		if (ret)
			return reply_err(ret);
		uint64_t end = now_ms() + 20000;
		while (now_ms() < end) {
			ibv_wc wc;
			int n = ibv_poll_cq(g_scq, 1, &wc);
			if (n < 0)
				return reply_err(EIO);
			if (n == 1)
				return (void)printf("ok %d\n", int(wc.status));
			usleep(1000);
		}
		return reply_err(ETIMEDOUT);
	}
	if (c == "rreset" && sscanf(line, "%*s %d", &a) == 1 && slot_ok(a)) {
		ibv_qp_attr attr = {};
		attr.qp_state = IBV_QPS_RESET;
		return reply_ret(ibv_modify_qp(g_qp[a], &attr, IBV_QP_STATE));
	}
	if (c == "event" && sscanf(line, "%*s %u", &u) == 1) {
		pollfd pfd = {g_ctx->async_fd, POLLIN, 0};
		int n = poll(&pfd, 1, int(u));
		if (n < 0)
			return reply_err(errno);
		if (n == 0)
			return (void)printf("ok none\n");
		ibv_async_event ev;
		if (ibv_get_async_event(g_ctx, &ev))
			return reply_err(errno);
		unsigned type = unsigned(ev.event_type);
		unsigned qpn = 0;
		bool qp_event = true;
		switch (ev.event_type) {
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_COMM_EST:
		case IBV_EVENT_SQ_DRAINED:
		case IBV_EVENT_PATH_MIG:
		case IBV_EVENT_PATH_MIG_ERR:
		case IBV_EVENT_QP_LAST_WQE_REACHED:
			qpn = ev.element.qp ? ev.element.qp->qp_num : 0;
			break;
		default:
			qp_event = false;
		}
		ibv_ack_async_event(&ev);
		return qp_event ? (void)printf("ok %u %u\n", type, qpn)
				: (void)printf("ok %u\n", type);
	}
	if (c == "crash") {
		fflush(stdout);
		raise(SIGKILL);
	}
	if (c == "quit") {
		fflush(stdout);
		_exit(0);
	}
	reply_err(ENOSYS);
}

} // namespace

int main(int argc, char **argv)
{
	setvbuf(stdout, nullptr, _IOLBF, 0);
	const char *dev = argc > 1 ? argv[1] : "soft0";
	g_ctx = open_dev(dev);
	if (!g_ctx) {
		printf("fail open %s %d\n", dev, errno);
		return 2;
	}
	g_pd = ibv_alloc_pd(g_ctx);
	g_rcq = ibv_create_cq(g_ctx, 256, nullptr, nullptr, 0);
	g_scq = ibv_create_cq(g_ctx, 256, nullptr, nullptr, 0);
	g_mr = g_pd ? ibv_reg_mr(g_pd, g_buf, sizeof(g_buf), IBV_ACCESS_LOCAL_WRITE) : nullptr;
	if (!g_pd || !g_rcq || !g_scq || !g_mr) {
		printf("fail setup %d\n", errno);
		return 3;
	}
	printf("hello %d\n", int(getpid()));
	char line[1024];
	while (fgets(line, sizeof(line), stdin))
		run(line);
	return 0;
}
