/* A reliable-connection check for lossy links: every transfer must complete
 * exactly once, in order, with its bytes intact. Run as a server/client pair
 * (the client gets the server's address last, like ibv_rc_pingpong):
 *
 *   rc_check -d DEV -g GID_INDEX -p PORT [-n COUNT] [-s SIZE] [-u] [SERVER]
 *
 * 1. SENDs: the client sends COUNT messages of SIZE bytes (up to 16 in
 *    flight), message i filled from a generator seeded with i; the server's
 *    i-th receive completion must hold message i (order, no loss, no
 *    duplicate, bytes).
 * 2. RDMA WRITE then RDMA READ: the client writes COUNT regions of SIZE bytes
 *    into the server's buffer (region i seeded with 1000 + i) and reads each
 *    back into a second buffer; both copies must match.
 * 3. Atomics: COUNT fetch-and-adds of 1 on a server counter must return 0 ..
 *    COUNT-1 in order, then a compare-and-swap of COUNT for 0 must find COUNT
 *    (an atomic executed twice would show).
 * 4. With -w, memory windows and fences, after step 3: the server binds a
 *    type 2 window (ibv_post_send, IBV_WR_BIND_MW: remote read and write)
 *    and a type 1 window (ibv_bind_mw: remote read only) over its first SIZE
 *    bytes. Then COUNT rounds: the client READs the bytes through the type 1
 *    window and sends a SEND marked IBV_SEND_FENCE; the server, on its
 *    arrival, writes the next round's bytes there. The READ must hold the
 *    round's bytes: without the fence, a READ whose responses were lost is
 *    asked for again after the SEND and reads the next round's. Then the
 *    client WRITEs through the type 2 window (read back through the type 1
 *    one), sends a SEND with invalidate naming it (the server's completion
 *    must say IBV_WC_WITH_INV and the R_Key), and WRITEs through it once
 *    more: that must fail with a remote access error (the client's QP then
 *    is in the error state). With -L (a link that loses datagrams) a retry
 *    error counts too: the responder moves its QP to the error state as it
 *    sends the NAK, so when the NAK is lost the WRITE sent again is never
 *    answered.
 * With -x, every RC request goes through the extended send API
 * (ibv_create_qp_ex with send_ops_flags, ibv_wr_start .. ibv_wr_complete).
 * With -X, steps 1 to 3 run over XRC instead of RC: the client's XRC send QP
 * to the server's XRC receive QP, every request naming the server's XRC SRQ
 * (of an XRC domain without a file), whose receive WQEs take the SENDs and
 * whose protection domain is the server's region's; not with -w. Then a
 * SEND naming an SRQ the server does not have must fail with a remote
 * invalid request error (-L: or a retry error, when the NAK was lost); with
 * -P instead an RDMA WRITE with the R_Key of a region the server registered
 * in another PD than its SRQ's must fail with a remote access error. With
 * -X -F the server's XRC receive QP is another process's than its SRQ,
 * buffer and CQ (its child's): all of it crosses between the two.
 * With -u -m, the datagrams go to a multicast group (::ffff:239.1.2.3,
 * destination QP 0xffffff) that the receiving QP attached itself to.
 * With -u, an unreliable-datagram check instead: the client sends COUNT
 * datagrams of SIZE bytes (at most the path MTU), datagram i starting with i
 * and filled from a generator seeded with i; the server counts what arrives:
 * datagrams lost or duplicated on the way are reported as such, and any
 * datagram whose length or bytes are wrong (garbage) fails the check.
 * The connection data goes over TCP, and both sides meet over TCP again at the
 * end, so neither destroys its QP while the other still waits for an ACK.
 * Exit status 0 when everything checked out. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct conn {
	uint32_t qpn, psn, rkey, pad;
	uint64_t addr;
	union ibv_gid gid;
};

static void die(const char *what)
{
	fprintf(stderr, "rc_check: %s\n", what);
	exit(1);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

/* The server by IPv4 address or by name (tests/soft/run_pair.sh passes
 * "localhost"). */
static int tcp_connect(const char *host, int port)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	if (s >= 0 && inet_pton(AF_INET, host, &a.sin_addr) != 1) {
		struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
		if (getaddrinfo(host, NULL, &hints, &ai))
			die("bad server address");
		a.sin_addr = ((struct sockaddr_in *)ai->ai_addr)->sin_addr;
		freeaddrinfo(ai);
	}
	if (s < 0)
		die("socket");
	for (int i = 0; i < 100; i++) {
		if (connect(s, (struct sockaddr *)&a, sizeof(a)) == 0)
			return s;
		usleep(100000);
	}
	die("cannot connect");
	return -1;
}

static int tcp_accept(int port)
{
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1))
		die("cannot listen");
	int s = accept(l, NULL, NULL);
	close(l);
	if (s < 0)
		die("accept");
	return s;
}

static void xfer(int s, void *out, void *in, size_t n)
{
	if (write(s, out, n) != (ssize_t)n)
		die("tcp write");
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(s, (char *)in + got, n - got);
		if (r <= 0)
			die("tcp read");
		got += (size_t)r;
	}
}

/* The TCP connection to the peer: a peer that has exited (closed it) ends
 * the wait for a completion that can no longer come. */
static int g_sock = -1;

static void peer_alive(void)
{
	char c;
	if (g_sock >= 0 && recv(g_sock, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
		die("the peer has exited");
}

/* The next completion, whatever its status. */
static struct ibv_wc wait_wc(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	int n;
	unsigned long spins = 0;
	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
		if (++spins % 100000 == 0)
			peer_alive();
	if (n < 0)
		die("poll_cq");
	return wc;
}

/* The next completion, which must have succeeded. */
static struct ibv_wc wait_one(struct ibv_cq *cq)
{
	struct ibv_wc wc = wait_wc(cq);
	if (wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "rc_check: completion %llu failed: %s\n", (unsigned long long)wc.wr_id,
			ibv_wc_status_str(wc.status));
		exit(1);
	}
	return wc;
}

/* -x: requests go through the extended send API (ibv_wr_start(3) ..
 * ibv_wr_complete), each chain as one batch; else ibv_post_send. -L: the
 * link loses datagrams (step 4). */
static int g_ex, g_lossy, g_mcast;
/* -X: the XRC SRQ number every request names (the server's). -P: the
 * server's R_Key of its buffer registered in a second PD. */
static int g_xrc, g_xrc_pd;
static uint32_t g_srqn, g_rkey2;

/* -X -F, server side: the XRC receive QP lives in this process, and
 * everything else the server has (the XRC SRQ, the buffer and its regions,
 * the CQ, the exchange with the client) in a child, which opens the same
 * XRC domain (a file both open): every request crosses from the receive
 * QP's process to the SRQ's, SENDs, RDMA and atomics alike. The child asks
 * for the QP's transitions through a pipe. */
static int g_fork, g_to_tgt = -1, g_from_tgt = -1, g_xrcd_fd = -1;

static void pipe_io(int fd, void *p, size_t n, int out)
{
	for (size_t done = 0; done < n;) {
		ssize_t r = out ? write(fd, (char *)p + done, n - done) : read(fd, (char *)p + done, n - done);
		if (r <= 0)
			die("pipe to the receive QP's process");
		done += (size_t)r;
	}
}

/* The parent of -X -F: makes the XRC receive QP in the XRC domain of the
 * file xrcd_fd, tells the child its number, moves it to INIT and to RTR
 * with the attributes the child sends, and waits for the child. */
static int tgt_process(struct ibv_device *dev, pid_t child, int to_child, int from_child)
{
	struct ibv_context *ctx = ibv_open_device(dev);
	if (!ctx)
		die("open_device (receive QP's process)");
	struct ibv_xrcd_init_attr xa = {.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
					.fd = g_xrcd_fd, .oflags = O_CREAT};
	struct ibv_xrcd *xrcd = ibv_open_xrcd(ctx, &xa);
	struct ibv_qp_init_attr_ex qx = {.qp_type = IBV_QPT_XRC_RECV,
					 .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = xrcd};
	struct ibv_qp *qp = xrcd ? ibv_create_qp_ex(ctx, &qx) : NULL;
	if (!qp)
		die("XRC receive QP");
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
						   IBV_ACCESS_REMOTE_ATOMIC};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("INIT (receive QP's process)");
	pipe_io(to_child, &qp->qp_num, sizeof(qp->qp_num), 1);
	int mask;
	pipe_io(from_child, &a, sizeof(a), 0);
	pipe_io(from_child, &mask, sizeof(mask), 0);
	char ok = ibv_modify_qp(qp, &a, mask) ? 'x' : 'r';
	pipe_io(to_child, &ok, 1, 1);
	int status = 1;
	waitpid(child, &status, 0);
	ibv_destroy_qp(qp);
	ibv_close_xrcd(xrcd);
	ibv_close_device(ctx);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static int post_wr(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	if (g_xrc)
		for (struct ibv_send_wr *w = wr; w; w = w->next)
			w->qp_type.xrc.remote_srqn = g_srqn;
	if (!g_ex)
		return ibv_post_send(qp, wr, bad);
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
	*bad = wr;
	ibv_wr_start(x);
	for (; wr; wr = wr->next) {
		x->wr_id = wr->wr_id;
		x->wr_flags = wr->send_flags;
		switch (wr->opcode) {
		case IBV_WR_SEND: ibv_wr_send(x); break;
		case IBV_WR_SEND_WITH_INV: ibv_wr_send_inv(x, wr->invalidate_rkey); break;
		case IBV_WR_RDMA_WRITE:
			ibv_wr_rdma_write(x, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr);
			break;
		case IBV_WR_RDMA_READ:
			ibv_wr_rdma_read(x, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr);
			break;
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			ibv_wr_atomic_fetch_add(x, wr->wr.atomic.rkey, wr->wr.atomic.remote_addr,
						wr->wr.atomic.compare_add);
			break;
		case IBV_WR_ATOMIC_CMP_AND_SWP:
			ibv_wr_atomic_cmp_swp(x, wr->wr.atomic.rkey, wr->wr.atomic.remote_addr,
					      wr->wr.atomic.compare_add, wr->wr.atomic.swap);
			break;
		case IBV_WR_BIND_MW:
			ibv_wr_bind_mw(x, wr->bind_mw.mw, wr->bind_mw.rkey, &wr->bind_mw.bind_info);
			break;
		default:
			ibv_wr_abort(x);
			return EINVAL;
		}
		if (wr->opcode != IBV_WR_BIND_MW)
			ibv_wr_set_sge_list(x, (size_t)wr->num_sge, wr->sg_list);
		if (g_xrc)
			ibv_wr_set_xrc_srqn(x, g_srqn);
	}
	return ibv_wr_complete(x);
}

/* -X -P: the server registers its buffer's first page again in a PD of its
 * own and tells the client that region's R_Key (the client sends 0). The
 * region stays until the end (the client's WRITE must find it). */
static struct ibv_pd *g_pd2;
static struct ibv_mr *g_mr2;

static void xrc_key_exchange(int s, struct ibv_pd *pd, uint8_t *buf)
{
	if (!g_xrc_pd)
		return;
	uint32_t mine = 0;
	if (pd) {
		g_pd2 = ibv_alloc_pd(pd->context);
		g_mr2 = g_pd2 ? ibv_reg_mr(g_pd2, buf, 4096,
					   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
			      : NULL;
		if (!g_mr2)
			die("second PD's region");
		mine = g_mr2->rkey;
	}
	xfer(s, &mine, &g_rkey2, sizeof(mine));
}

struct windows {
	uint32_t rkey2, rkey1;
	uint64_t addr;
};

static void post_recv_one(struct ibv_qp *qp, struct ibv_mr *mr, uint8_t *at, uint32_t len,
			  uint64_t id)
{
	struct ibv_sge sge = {(uintptr_t)at, len, mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;
	if (ibv_post_recv(qp, &wr, &bad))
		die("post_recv");
}

/* Step 4, the server's side: the windows over buf[0, size), the fence
 * rounds, the invalidation. Returns the number of failures. */
static int windows_server(struct ibv_pd *pd, struct ibv_qp *qp, struct ibv_cq *cq,
			  struct ibv_mr *mr, uint8_t *buf, size_t size, int count, uint8_t *scratch)
{
	int bad = 0;
	struct ibv_mw *w2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2), *w1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	if (!w2 || !w1)
		die("alloc_mw");
	for (int r = 0; r <= count; r++) /* the fence SENDs and the SEND with invalidate */
		post_recv_one(qp, mr, scratch, 64, 100u + (uint64_t)r);
	char c = 'w', got;
	xfer(g_sock, &c, &got, 1); /* the client's steps 2 and 3 are over: buf is ours */
	fill(buf, size, 7000u);
	struct ibv_send_wr wr = {.wr_id = 10, .opcode = IBV_WR_BIND_MW,
				 .send_flags = IBV_SEND_SIGNALED}, *badwr;
	wr.bind_mw.mw = w2;
	wr.bind_mw.rkey = ibv_inc_rkey(w2->rkey);
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
		mr, (uintptr_t)buf, size, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
	if (post_wr(qp, &wr, &badwr))
		die("post_send bind_mw");
	struct ibv_wc wc = wait_one(cq);
	if (wc.opcode != IBV_WC_BIND_MW)
		die("type 2 bind: wrong completion");
	struct ibv_mw_bind mb = {.wr_id = 11, .send_flags = IBV_SEND_SIGNALED,
				 .bind_info = {mr, (uintptr_t)buf, size, IBV_ACCESS_REMOTE_READ}};
	if (ibv_bind_mw(qp, w1, &mb))
		die("ibv_bind_mw");
	wc = wait_one(cq);
	if (wc.opcode != IBV_WC_BIND_MW)
		die("type 1 bind: wrong completion");
	/* A type 2 window's R_Key is the one the bind asked for (Debian's rxe
	 * provider leaves mw->rkey as it was; a type 1 bind updates it). */
	struct windows k = {wr.bind_mw.rkey, w1->rkey, (uintptr_t)buf}, unused;
	xfer(g_sock, &k, &unused, sizeof(k));
	for (int r = 0; r < count; r++) {
		wc = wait_one(cq);
		if (wc.opcode != IBV_WC_RECV || wc.wr_id != 100u + (uint64_t)r)
			die("fence round: not the round's SEND");
		fill(buf, size, 7001u + (uint32_t)r); /* the READ before it must not see this */
		xfer(g_sock, &c, &got, 1);        /* the next round reads these bytes */
	}
	wc = wait_one(cq);
	/* Debian's rxe provider hands the kernel's flag bits through as they
	 * are, and the kernel's "with invalidate" is bit 2 (IBV_WC_IP_CSUM_OK's
	 * bit in libibverbs; seen in the test bed: flags 0x5 and the R_Key):
	 * that is accepted from a device named rxe* only. */
	unsigned inv_flag = IBV_WC_WITH_INV;
	if (!strncmp(ibv_get_device_name(pd->context->device), "rxe", 3))
		inv_flag |= 1u << 2;
	if (wc.opcode != IBV_WC_RECV || !(wc.wc_flags & inv_flag) ||
	    wc.invalidated_rkey != k.rkey2) {
		fprintf(stderr, "rc_check: SEND with invalidate: flags %#x, R_Key %#x (window %#x)\n",
			wc.wc_flags, wc.invalidated_rkey, k.rkey2);
		bad++;
	}
	c = bad ? 'x' : 'i';
	xfer(g_sock, &c, &got, 1); /* the client's last WRITE comes after this */
	xfer(g_sock, &c, &got, 1); /* the client is done with the windows */
	ibv_dealloc_mw(w1);
	ibv_dealloc_mw(w2);
	printf("windows: type 1 and 2 bound, %d fenced rounds served, SEND with invalidate %s\n",
	       count, bad ? "wrong" : "reported");
	return bad + (got != 'i');
}

/* Step 4, the client's side. Returns the number of failures. */
static int windows_client(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr, uint8_t *src,
			  uint8_t *dst, size_t size, int count)
{
	int bad = 0;
	struct windows k, unused = {0};
	char c = 'w', got;
	xfer(g_sock, &c, &got, 1); /* steps 2 and 3 are over */
	xfer(g_sock, &unused, &k, sizeof(k));
	uint8_t *want = malloc(size);
	struct ibv_send_wr *badwr;
	for (int r = 0; r < count; r++) {
		memset(dst, 0, size);
		struct ibv_sge rs = {(uintptr_t)dst, (uint32_t)size, mr->lkey};
		struct ibv_send_wr rd = {.wr_id = 20, .sg_list = &rs, .num_sge = 1,
					 .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED};
		rd.wr.rdma.remote_addr = k.addr;
		rd.wr.rdma.rkey = k.rkey1;
		struct ibv_sge ss = {(uintptr_t)src, 8, mr->lkey};
		struct ibv_send_wr sd = {.wr_id = 21, .sg_list = &ss, .num_sge = 1,
					 .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE};
		rd.next = &sd;
		if (post_wr(qp, &rd, &badwr))
			die("post_send read + fenced send");
		wait_one(cq);
		wait_one(cq);
		fill(want, size, 7000u + (uint32_t)r);
		if (memcmp(dst, want, size)) {
			fill(want, size, 7001u + (uint32_t)r);
			fprintf(stderr, "rc_check: fence round %d: the READ %s\n", r,
				memcmp(dst, want, size) ? "read wrong bytes"
							: "saw bytes written after the fenced SEND");
			bad++;
		}
		xfer(g_sock, &c, &got, 1); /* the server has written the next round's */
	}
	/* WRITE through the type 2 window, read back through the type 1 one. */
	fill(src, size, 8000u);
	struct ibv_sge ws = {(uintptr_t)src, (uint32_t)size, mr->lkey};
	struct ibv_send_wr w = {.wr_id = 22, .sg_list = &ws, .num_sge = 1,
				.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED};
	w.wr.rdma.remote_addr = k.addr;
	w.wr.rdma.rkey = k.rkey2;
	if (post_wr(qp, &w, &badwr))
		die("post_send write through window");
	wait_one(cq);
	memset(dst, 0, size);
	struct ibv_sge rs = {(uintptr_t)dst, (uint32_t)size, mr->lkey};
	struct ibv_send_wr rd = {.wr_id = 23, .sg_list = &rs, .num_sge = 1,
				 .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED};
	rd.wr.rdma.remote_addr = k.addr;
	rd.wr.rdma.rkey = k.rkey1;
	if (post_wr(qp, &rd, &badwr))
		die("post_send read through window");
	wait_one(cq);
	if (memcmp(dst, src, size)) {
		fprintf(stderr, "rc_check: the WRITE through the type 2 window read back wrong\n");
		bad++;
	}
	struct ibv_sge ss = {(uintptr_t)src, 8, mr->lkey};
	struct ibv_send_wr inv = {.wr_id = 24, .sg_list = &ss, .num_sge = 1,
				  .opcode = IBV_WR_SEND_WITH_INV, .send_flags = IBV_SEND_SIGNALED};
	inv.invalidate_rkey = k.rkey2;
	if (post_wr(qp, &inv, &badwr))
		die("post_send send with invalidate");
	wait_one(cq);
	c = 'i';
	xfer(g_sock, &c, &got, 1);
	if (got != 'i')
		bad++;
	/* It must fail now: the type 2 window is invalidated (the error takes
	 * the QP to the error state: the last step). */
	w.wr_id = 25;
	if (post_wr(qp, &w, &badwr))
		die("post_send write through invalidated window");
	struct ibv_wc wc = wait_wc(cq);
	int refused = wc.status == IBV_WC_REM_ACCESS_ERR ||
		      (g_lossy && wc.status == IBV_WC_RETRY_EXC_ERR);
	if (!refused) {
		fprintf(stderr, "rc_check: WRITE through the invalidated window: %s\n",
			ibv_wc_status_str(wc.status));
		bad++;
	}
	xfer(g_sock, &c, &got, 1);
	free(want);
	printf("windows: %d fenced READs saw their round's bytes, WRITE and READ through windows, "
	       "access after SEND with invalidate %s\n", count,
	       wc.status == IBV_WC_REM_ACCESS_ERR ? "refused"
	       : refused ? "refused (the NAK was lost: retry error)" : "NOT refused");
	return bad;
}

/* Polls for one completion for up to idle_ms; 0 when none came. */
static int poll_for(struct ibv_cq *cq, struct ibv_wc *wc, int idle_ms)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			die("poll_cq");
		if (n)
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= idle_ms)
			return 0;
	}
}

/* The unreliable-datagram check (-u): see the top of the file. */
static int ud_check(struct ibv_context *ctx, int gidx, int port, int count, size_t size,
		    const char *server)
{
	const uint32_t qkey = 0x11111111;
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, 1, &pa))
		die("query_port");
	size_t mtu = (size_t)128 << pa.active_mtu;
	if (size > mtu)
		size = mtu;
	if (size < 8)
		size = 8;
	size_t slot = 40 + size; /* the GRH, then the datagram */
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, count + 32, NULL, NULL, 0);
	size_t bytes = (size_t)(count > 16 ? count : 16) * slot;
	uint8_t *buf = calloc(1, bytes);
	struct ibv_mr *mr = pd && buf ? ibv_reg_mr(pd, buf, bytes, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!pd || !cq || !mr)
		die("pd/cq/mr");
	struct ibv_qp_init_attr qia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
				       .cap = {.max_send_wr = 32, .max_recv_wr = (uint32_t)count + 8,
					       .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = ibv_create_qp(pd, &qia); /* (-x: RC only) */
	if (!qp)
		die("create_qp");
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = qkey};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		die("INIT");
	if (!server)
		for (int i = 0; i < count; i++) {
			struct ibv_sge sge = {(uintptr_t)(buf + (size_t)i * slot), (uint32_t)slot, mr->lkey};
			struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1}, *bad;
			if (ibv_post_recv(qp, &wr, &bad))
				die("post_recv");
		}
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		die("RTR");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .sq_psn = 0};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("RTS");
	struct conn me = {.qpn = qp->qp_num}, peer;
	if (ibv_query_gid(ctx, 1, gidx, &me.gid))
		die("query_gid");
	union ibv_gid group = {.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 2, 3}};
	if (g_mcast && !server) { /* the receiver joins; the sender sends to the group */
		if (ibv_attach_mcast(qp, &group, 0))
			die("attach_mcast");
		me.gid = group;
		me.qpn = 0xffffff;
	}
	int s = server ? tcp_connect(server, port) : tcp_accept(port);
	xfer(s, &me, &peer, sizeof(me));
	int lost = 0, dup = 0, garbage = 0, received = 0;
	char sync = 's', got;
	if (server) {
		struct ibv_ah_attr ah = {.is_global = 1, .port_num = 1,
					 .grh = {.dgid = peer.gid, .sgid_index = (uint8_t)gidx,
						 .hop_limit = 64}};
		struct ibv_ah *ahp = ibv_create_ah(pd, &ah);
		if (!ahp)
			die("create_ah");
		for (int posted = 0, done = 0; done < count; done++) {
			for (; posted < count && posted - done < 16; posted++) {
				uint8_t *m = buf + (size_t)(posted % 16) * slot;
				fill(m, size, (uint32_t)posted);
				memcpy(m, &posted, 4);
				struct ibv_sge sge = {(uintptr_t)m, (uint32_t)size, mr->lkey};
				struct ibv_send_wr wr = {.wr_id = (uint64_t)posted, .sg_list = &sge,
							 .num_sge = 1, .opcode = IBV_WR_SEND,
							 .send_flags = IBV_SEND_SIGNALED}, *badwr;
				wr.wr.ud.ah = ahp;
				wr.wr.ud.remote_qpn = peer.qpn;
				wr.wr.ud.remote_qkey = qkey;
				if (ibv_post_send(qp, &wr, &badwr))
					die("post_send");
			}
			wait_one(cq);
			if (done % 16 == 15)
				usleep(1000); /* the receiver's socket buffer keeps up */
		}
		printf("ud: %d datagrams of %zu bytes sent\n", count, size);
		xfer(s, &sync, &got, 1); /* all sent; back when the receiver has counted */
		ibv_destroy_ah(ahp);
	} else {
		uint8_t *want = malloc(size);
		char *seen = calloc((size_t)count, 1);
		int all_sent = 0;
		/* Until the sender is done and nothing more came for 2 s. */
		for (;;) {
			struct ibv_wc wc;
			if (!poll_for(cq, &wc, all_sent ? 2000 : 100)) {
				if (all_sent)
					break;
				/* Has the sender finished? (non-blocking look) */
				struct timeval tv = {0, 0};
				fd_set fs;
				FD_ZERO(&fs);
				FD_SET(s, &fs);
				if (select(s + 1, &fs, NULL, NULL, &tv) == 1) {
					if (read(s, &got, 1) != 1)
						die("tcp read");
					all_sent = 1;
				}
				continue;
			}
			if (wc.status != IBV_WC_SUCCESS) {
				fprintf(stderr, "rc_check: UD receive failed: %s\n",
					ibv_wc_status_str(wc.status));
				garbage++;
				continue;
			}
			received++;
			uint8_t *m = buf + wc.wr_id * slot + 40;
			uint32_t seq;
			memcpy(&seq, m, 4);
			if (wc.byte_len != slot || seq >= (uint32_t)count) {
				fprintf(stderr, "rc_check: UD datagram of %u bytes, sequence %u\n",
					wc.byte_len, seq);
				garbage++;
				continue;
			}
			fill(want, size, seq);
			memcpy(want, &seq, 4);
			if (memcmp(m, want, size)) {
				fprintf(stderr, "rc_check: UD datagram %u: bytes differ\n", seq);
				garbage++;
			} else if (seen[seq]++) {
				dup++;
			}
		}
		for (int i = 0; i < count; i++)
			lost += !seen[i];
		printf("ud%s: %d datagrams of %zu bytes: %d received, %d lost, %d duplicated, "
		       "%d garbage\n", g_mcast ? " multicast" : "",
		       count, size, received, lost, dup, garbage);
		if (g_mcast && ibv_detach_mcast(qp, &group, 0))
			die("detach_mcast");
		if (write(s, &sync, 1) != 1)
			die("tcp write");
		free(seen);
		free(want);
	}
	close(s);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	free(buf);
	/* Losses are what UD allows; garbage or nothing at all is a failure. */
	return garbage || (!server && received == 0) ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *dev_name = NULL;
	int gidx = 0, port = 18515, count = 200, opt, ud = 0, windows = 0;
	size_t size = 65536;
	while ((opt = getopt(argc, argv, "d:g:p:n:s:uwxXPFLm")) != -1) {
		switch (opt) {
		case 'd': dev_name = optarg; break;
		case 'g': gidx = atoi(optarg); break;
		case 'p': port = atoi(optarg); break;
		case 'n': count = atoi(optarg); break;
		case 's': size = (size_t)strtoul(optarg, NULL, 0); break;
		case 'u': ud = 1; break;
		case 'w': windows = 1; break;
		case 'x': g_ex = 1; break;
		case 'X': g_xrc = 1; break;
		case 'P': g_xrc_pd = 1; break;
		case 'F': g_fork = 1; break;
		case 'L': g_lossy = 1; break;
		case 'm': g_mcast = 1; break;
		default: die("usage: rc_check -d DEV -g GID -p PORT [-n N] [-s SIZE] [-u [-m]|-w|-X [-P]] [-x] [-L] [SERVER]");
		}
	}
	if ((g_xrc && (windows || ud)) || ((g_xrc_pd || g_fork) && !g_xrc))
		die("-X goes with neither -w nor -u, -P and -F only with -X");
	const char *server = optind < argc ? argv[optind] : NULL;
	/* Line by line, so that a log holding stdout and stderr keeps their
	 * order (the last line of a failed run names the failure). */
	setvbuf(stdout, NULL, _IOLBF, 0);
	int ndev;
	struct ibv_device **list = ibv_get_device_list(&ndev);
	struct ibv_device *dev = NULL;
	for (int i = 0; list && i < ndev; i++)
		if (!dev_name || !strcmp(ibv_get_device_name(list[i]), dev_name))
			dev = list[i];
	if (!dev)
		die("no such device");
	if (g_fork && !server) {
		char path[] = "/tmp/rc_check_xrcd.XXXXXX";
		int to_child[2], from_child[2];
		g_xrcd_fd = mkstemp(path);
		if (g_xrcd_fd < 0 || unlink(path) || pipe(to_child) || pipe(from_child))
			die("XRC domain file and pipes");
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid > 0) {
			int rc = tgt_process(dev, pid, to_child[1], from_child[0]);
			ibv_free_device_list(list);
			return rc;
		}
		g_from_tgt = to_child[0];
		g_to_tgt = from_child[1];
	}
	struct ibv_context *ctx = ibv_open_device(dev);
	if (!ctx)
		die("open_device");
	if (ud) {
		int rc = ud_check(ctx, gidx, port, count, size, optind < argc ? argv[optind] : NULL);
		ibv_close_device(ctx);
		ibv_free_device_list(list);
		return rc;
	}
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 2 * count + 16, NULL, NULL, 0);
	/* [0, count*size): send/write target; then count*size read-back; then the counter */
	size_t bytes = 2 * (size_t)count * size + 128; /* counter, result, -w receive slot */
	uint8_t *buf = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
	memset(buf, 0, bytes);
	uint64_t *counter = (uint64_t *)(buf + 2 * (size_t)count * size);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, bytes,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
					       (windows ? IBV_ACCESS_MW_BIND : 0));
	if (!pd || !cq || !mr)
		die("pd/cq/mr");
	struct ibv_qp_init_attr qia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				       .cap = {.max_send_wr = (uint32_t)count + 8,
					       .max_recv_wr = (uint32_t)count + 8,
					       .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp;
	struct ibv_xrcd *xrcd = NULL;
	struct ibv_srq *srq = NULL;
	uint32_t srqn = 0;
	if (g_xrc && server) {
		struct ibv_qp_init_attr_ex qx = {
			.send_cq = cq, .qp_type = IBV_QPT_XRC_SEND, .cap = qia.cap,
			.comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd};
		qx.cap.max_recv_wr = qx.cap.max_recv_sge = 0;
		if (g_ex) {
			qx.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			qx.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
					    IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
					    IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP;
		}
		qp = ibv_create_qp_ex(ctx, &qx);
	} else if (g_xrc) {
		struct ibv_xrcd_init_attr xa = {.comp_mask = IBV_XRCD_INIT_ATTR_FD |
							     IBV_XRCD_INIT_ATTR_OFLAGS,
						.fd = g_xrcd_fd, .oflags = O_CREAT};
		xrcd = ibv_open_xrcd(ctx, &xa);
		if (!xrcd)
			die("open_xrcd");
		struct ibv_srq_init_attr_ex sa = {
			.attr = {.max_wr = (uint32_t)count + 8, .max_sge = 1},
			.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
				     IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_XRCD,
			.srq_type = IBV_SRQT_XRC, .pd = pd, .xrcd = xrcd, .cq = cq};
		srq = ibv_create_srq_ex(ctx, &sa);
		if (!srq || ibv_get_srq_num(srq, &srqn))
			die("create_srq_ex (XRC)");
		struct ibv_qp_init_attr_ex qx = {.qp_type = IBV_QPT_XRC_RECV,
						 .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = xrcd};
		qp = g_fork ? NULL : ibv_create_qp_ex(ctx, &qx);
	} else if (g_ex) {
		struct ibv_qp_init_attr_ex qx = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .cap = qia.cap,
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = pd,
			.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_INV |
					  IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ |
					  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
					  IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_BIND_MW};
		qp = ibv_create_qp_ex(ctx, &qx);
	} else {
		qp = ibv_create_qp(pd, &qia);
	}
	uint32_t qpn = 0; /* -X -F: the receive QP's, in the parent */
	if (g_to_tgt >= 0)
		pipe_io(g_from_tgt, &qpn, sizeof(qpn), 0);
	else if (!qp)
		die("create_qp");
	else
		qpn = qp->qp_num;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
						   IBV_ACCESS_REMOTE_ATOMIC};
	if (qp &&
	    ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("INIT");
	if (!server) /* receives first: the client starts sending at once */
		for (int i = 0; i < count; i++) {
			struct ibv_sge sge = {(uintptr_t)(buf + (size_t)i * size), (uint32_t)size, mr->lkey};
			struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1}, *bad;
			if (srq ? ibv_post_srq_recv(srq, &wr, &bad) : ibv_post_recv(qp, &wr, &bad))
				die("post_recv");
		}
	struct ibv_port_attr pa;
	ibv_query_port(ctx, 1, &pa);
	struct conn me = {.qpn = qpn, .psn = (uint32_t)(getpid() & 0xffffff),
			  .rkey = mr->rkey, .pad = srqn, .addr = (uintptr_t)buf}, peer;
	if (ibv_query_gid(ctx, 1, gidx, &me.gid))
		die("query_gid");
	int s = server ? tcp_connect(server, port) : tcp_accept(port);
	g_sock = s;
	xfer(s, &me, &peer, sizeof(me));
	g_srqn = peer.pad;
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR, .path_mtu = pa.active_mtu,
				 .dest_qp_num = peer.qpn, .rq_psn = peer.psn, .max_dest_rd_atomic = 16,
				 .min_rnr_timer = 12,
				 .ah_attr = {.is_global = 1, .port_num = 1,
					     .grh = {.dgid = peer.gid, .sgid_index = (uint8_t)gidx,
						     .hop_limit = 64}}};
	/* An XRC send QP has no responder: no responder attributes. */
	int responder = g_xrc && server ? 0 : IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		       responder;
	if (!qp) { /* -X -F: the receive QP's process makes the transition */
		char ok;
		pipe_io(g_to_tgt, &a, sizeof(a), 1);
		pipe_io(g_to_tgt, &rtr_mask, sizeof(rtr_mask), 1);
		pipe_io(g_from_tgt, &ok, 1, 0);
		if (ok != 'r')
			die("RTR (in the receive QP's process)");
	} else if (ibv_modify_qp(qp, &a, rtr_mask)) {
		die("RTR");
	}
	/* timeout 16: 268 ms per try, 8 tries without progress before an error
	 * (generous: a busy host may not run the peer for a while). */
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .timeout = 16, .retry_cnt = 7,
				 .rnr_retry = 7, .sq_psn = me.psn, .max_rd_atomic = 16};
	if (!(g_xrc && !server) && /* an XRC receive QP answers from RTR */
	    ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
	char sync = 's', got;
	xfer(s, &sync, &got, 1); /* both in RTS */
	int bad_count = 0;
	uint8_t *want = malloc(size);
	unsigned mtu_bytes = 128u << pa.active_mtu; /* IBV_MTU_256 is 1 */
	if (!server) {
		for (int i = 0; i < count; i++) {
			struct ibv_wc wc = wait_one(cq);
			fill(want, size, (uint32_t)i);
			const uint8_t *got_bytes = buf + (size_t)i * size;
			if (wc.opcode != IBV_WC_RECV || wc.wr_id != (uint64_t)i || wc.byte_len != size ||
			    memcmp(got_bytes, want, size)) {
				size_t at = 0;
				while (at < size && got_bytes[at] == want[at])
					at++;
				fprintf(stderr, "rc_check: receive %d: wr_id %llu, %u bytes, ", i,
					(unsigned long long)wc.wr_id, wc.byte_len);
				if (at == size)
					fprintf(stderr, "bytes ok\n");
				else
					fprintf(stderr, "bytes differ from offset %zu (packet %zu of %u bytes)\n",
						at, at / mtu_bytes, mtu_bytes);
				bad_count++;
			}
		}
		printf("sends: %d messages of %zu bytes received in order, %d wrong\n", count, size,
		       bad_count);
		/* Checked: only now may the client's RDMA WRITEs (step 2) land in
		 * the same slots (a receiver held off its CPU until then used to
		 * see the writes' bytes in message 0). */
		xfer(s, &sync, &got, 1);
		xrc_key_exchange(s, pd, buf);
		if (windows)
			bad_count += windows_server(pd, qp, cq, mr, buf, size, count,
						    buf + 2 * (size_t)count * size + 16);
	} else {
		uint8_t *src = buf + (size_t)count * size;
		/* 1. SENDs, up to 16 outstanding, message i from the i-th slot of
		 * the second half of the buffer; completions in posting order. */
		for (int posted = 0, done = 0; done < count; done++) {
			for (; posted < count && posted - done < 16; posted++) {
				uint8_t *m = src + (size_t)posted * size;
				fill(m, size, (uint32_t)posted);
				struct ibv_sge sge = {(uintptr_t)m, (uint32_t)size, mr->lkey};
				struct ibv_send_wr wr = {.wr_id = (uint64_t)posted, .sg_list = &sge,
							 .num_sge = 1, .opcode = IBV_WR_SEND,
							 .send_flags = IBV_SEND_SIGNALED}, *badwr;
				if (post_wr(qp, &wr, &badwr))
					die("post_send");
			}
			struct ibv_wc wc = wait_one(cq);
			if (wc.wr_id != (uint64_t)done) {
				fprintf(stderr, "rc_check: send completion %d has wr_id %llu\n", done,
					(unsigned long long)wc.wr_id);
				bad_count++;
			}
		}
		xfer(s, &sync, &got, 1); /* the server has checked every message */
		xrc_key_exchange(s, NULL, NULL);
		/* 2. WRITE each region, READ it back. */
		for (int i = 0; i < count; i++) {
			fill(src, size, 1000u + (uint32_t)i);
			struct ibv_sge sge = {(uintptr_t)src, (uint32_t)size, mr->lkey};
			struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1,
						 .opcode = IBV_WR_RDMA_WRITE,
						 .send_flags = IBV_SEND_SIGNALED}, *badwr;
			wr.wr.rdma.remote_addr = peer.addr + (uint64_t)i * size;
			wr.wr.rdma.rkey = peer.rkey;
			if (post_wr(qp, &wr, &badwr))
				die("post_send write");
			wait_one(cq);
			memset(buf, 0, size);
			struct ibv_sge rs = {(uintptr_t)buf, (uint32_t)size, mr->lkey};
			wr.sg_list = &rs;
			wr.opcode = IBV_WR_RDMA_READ;
			if (post_wr(qp, &wr, &badwr))
				die("post_send read");
			struct ibv_wc wc = wait_one(cq);
			if (wc.byte_len != size || memcmp(buf, src, size)) {
				fprintf(stderr, "rc_check: region %d read back wrong\n", i);
				bad_count++;
			}
		}
		printf("writes: %d regions of %zu bytes written and read back, %d wrong\n", count,
		       size, bad_count);
		/* 3. Atomics on the server's counter. */
		uint64_t *res = (uint64_t *)(buf + 2 * (size_t)count * size + 8);
		uint64_t raddr = peer.addr + 2 * (uint64_t)count * size;
		for (int i = 0; i <= count; i++) {
			struct ibv_sge sge = {(uintptr_t)res, 8, mr->lkey};
			struct ibv_send_wr wr = {.wr_id = 2, .sg_list = &sge, .num_sge = 1,
						 .send_flags = IBV_SEND_SIGNALED}, *badwr;
			wr.opcode = i < count ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
			wr.wr.atomic.remote_addr = raddr;
			wr.wr.atomic.rkey = peer.rkey;
			wr.wr.atomic.compare_add = i < count ? 1 : (uint64_t)count;
			wr.wr.atomic.swap = 0;
			*res = ~0ull;
			if (post_wr(qp, &wr, &badwr))
				die("post_send atomic");
			wait_one(cq);
			if (*res != (uint64_t)(i < count ? i : count)) {
				fprintf(stderr, "rc_check: atomic %d returned %llu\n", i,
					(unsigned long long)*res);
				bad_count++;
				break;
			}
		}
		printf("atomics: %d fetch-and-adds and a compare-and-swap, %s\n", count,
		       bad_count ? "wrong" : "every value as expected");
		if (windows)
			bad_count += windows_client(qp, cq, mr, src, buf, size, count);
		if (g_xrc) {
			/* A SEND naming an SRQ number the server does not have:
			 * the responder refuses it (Invalid Request NAK), and both
			 * QPs end in the error state (-L: the NAK may be lost,
			 * then the retries run out). */
			struct ibv_sge sge = {(uintptr_t)src, 8, mr->lkey};
			struct ibv_send_wr wr = {.wr_id = 3, .sg_list = &sge, .num_sge = 1,
						 .opcode = IBV_WR_SEND,
						 .send_flags = IBV_SEND_SIGNALED}, *badwr;
			enum ibv_wc_status want = IBV_WC_REM_INV_REQ_ERR;
			if (g_xrc_pd) {
				wr.opcode = IBV_WR_RDMA_WRITE;
				wr.wr.rdma.remote_addr = peer.addr;
				wr.wr.rdma.rkey = g_rkey2;
				want = IBV_WC_REM_ACCESS_ERR;
			} else {
				g_srqn ^= 0x400;
			}
			if (post_wr(qp, &wr, &badwr))
				die("post_send (refused)");
			struct ibv_wc wc = wait_wc(cq);
			int ok = wc.status == want || (g_lossy && wc.status == IBV_WC_RETRY_EXC_ERR);
			printf("xrc: %s: %s%s\n",
			       g_xrc_pd ? "a WRITE with a key of another PD than the SRQ's"
					: "a SEND to no SRQ",
			       ibv_wc_status_str(wc.status), ok ? "" : " (wanted another error)");
			bad_count += !ok;
		}
	}
	char done = bad_count ? 'x' : 'd';
	xfer(s, &done, &got, 1); /* nobody destroys a QP the other still needs */
	if (got != 'd') {
		fprintf(stderr, "rc_check: the peer found a failure (see its output)\n");
		bad_count++;
	}
	if (!server && *counter != 0) {
		fprintf(stderr, "rc_check: counter ends at %llu, not 0\n", (unsigned long long)*counter);
		bad_count++;
	}
	close(s);
	if (qp)
		ibv_destroy_qp(qp);
	if (srq)
		ibv_destroy_srq(srq);
	if (xrcd)
		ibv_close_xrcd(xrcd);
	if (g_mr2) {
		ibv_dereg_mr(g_mr2);
		ibv_dealloc_pd(g_pd2);
	}
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	free(want);
	free(buf);
	return bad_count ? 1 : 0;
}
