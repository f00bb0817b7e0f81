/*
 * Full rdma_cm connection cycles between two processes, through the public
 * librdmacm API only (so it runs unchanged on Debian's library and ours):
 * per cycle the client creates an id, resolves address and route, creates a
 * QP (unless --no-qp), connects, disconnects and destroys everything; the
 * server accepts on a new id with its own QP and destroys it after the
 * disconnect.
 *
 *   cm_cycles server ADDR PORT N [--no-qp]
 *   cm_cycles client ADDR PORT N [--no-qp]
 *   cm_cycles tcp-server ADDR PORT N     (the anchor: kernel TCP over the
 *   cm_cycles tcp-client ADDR PORT N      same address, connect + one byte
 *                                         each way + close per cycle)
 *
 * The client prints "cycles N seconds S per_second R fds_before A fds_after B".
 * Both exit non-zero on any unexpected event or when the client's number
 * of open file descriptors after the cycles differs from the one after the
 * first cycle (a descriptor leak).
 */
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>
#include <dirent.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int use_qp = 1;

static int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Waits for one event of the expected type on the channel; returns the
 * event's id (and the event's listen id in *listen) or NULL. */
static struct rdma_cm_id *expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	if (rdma_get_cm_event(ch, &ev)) {
		perror("rdma_get_cm_event");
		return NULL;
	}
	id = ev->id;
	if (ev->event != want) {
		fprintf(stderr, "expected %s, got %s (status %d)\n", rdma_event_str(want),
			rdma_event_str(ev->event), ev->status);
		id = NULL;
	}
	rdma_ack_cm_event(ev);
	return id;
}

static int make_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a;
	if (!use_qp)
		return 0;
	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, NULL, &a)) {
		perror("rdma_create_qp");
		return -1;
	}
	return 0;
}

static struct rdma_conn_param *param(void)
{
	static struct rdma_conn_param p;
	memset(&p, 0, sizeof(p));
	p.responder_resources = 1;
	p.initiator_depth = 1;
	p.retry_count = 7;
	p.rnr_retry_count = 7;
	p.qp_num = 0x100; /* used only without a QP */
	return &p;
}

static int server(struct addrinfo *ai, long n)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *listen_id, *id;
	long i;
	if (!ch || rdma_create_id(ch, &listen_id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(listen_id, ai->ai_addr) || rdma_listen(listen_id, 128)) {
		perror("server set-up");
		return 1;
	}
	for (i = 0; i < n; i++) {
		if (!(id = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST)) || make_qp(id) ||
		    rdma_accept(id, param()) || !expect(ch, RDMA_CM_EVENT_ESTABLISHED) ||
		    !expect(ch, RDMA_CM_EVENT_DISCONNECTED))
			return 1;
		if (use_qp)
			rdma_destroy_qp(id);
		rdma_destroy_id(id);
	}
	rdma_destroy_id(listen_id);
	rdma_destroy_event_channel(ch);
	return 0;
}

static int client(struct addrinfo *ai, long n)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	int fds_before = -1, fds_after;
	double t0 = 0;
	long i;
	if (!ch) {
		perror("rdma_create_event_channel");
		return 1;
	}
	for (i = 0; i < n; i++) {
		if (i == 1) {
			fds_before = count_fds();
			t0 = now();
		}
		if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
		    rdma_resolve_addr(id, NULL, ai->ai_addr, 2000) ||
		    !expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED) || rdma_resolve_route(id, 2000) ||
		    !expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED) || make_qp(id) ||
		    rdma_connect(id, param()))
			return 1;
		if (use_qp) {
			if (!expect(ch, RDMA_CM_EVENT_ESTABLISHED))
				return 1;
		} else {
			if (!expect(ch, RDMA_CM_EVENT_CONNECT_RESPONSE) || rdma_establish(id))
				return 1;
		}
		if (rdma_disconnect(id) || !expect(ch, RDMA_CM_EVENT_DISCONNECTED))
			return 1;
		if (use_qp)
			rdma_destroy_qp(id);
		rdma_destroy_id(id);
	}
	fds_after = count_fds();
	if (n > 1) {
		double s = now() - t0;
		printf("cycles %ld seconds %.3f per_second %.0f fds_before %d fds_after %d\n", n - 1, s,
		       (n - 1) / s, fds_before, fds_after);
	}
	rdma_destroy_event_channel(ch);
	if (n > 1 && fds_after != fds_before) {
		fprintf(stderr, "file descriptors leaked: %d before, %d after\n", fds_before, fds_after);
		return 1;
	}
	return 0;
}

static int tcp_server(struct addrinfo *ai, long n)
{
	int one = 1, l = socket(ai->ai_family, SOCK_STREAM, 0);
	long i;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (l < 0 || bind(l, ai->ai_addr, ai->ai_addrlen) || listen(l, 128)) {
		perror("tcp server");
		return 1;
	}
	for (i = 0; i < n; i++) {
		char b;
		int c = accept(l, NULL, NULL);
		if (c < 0 || read(c, &b, 1) != 1 || write(c, &b, 1) != 1) {
			perror("tcp accept");
			return 1;
		}
		close(c);
	}
	close(l);
	return 0;
}

static int tcp_client(struct addrinfo *ai, long n)
{
	double t0 = 0;
	long i;
	for (i = 0; i < n; i++) {
		char b = 1;
		int c;
		if (i == 1)
			t0 = now();
		c = socket(ai->ai_family, SOCK_STREAM, 0);
		while (c >= 0 && connect(c, ai->ai_addr, ai->ai_addrlen) != 0 && i == 0)
			usleep(10000); /* the first cycle waits for the server */
		if (c < 0 || write(c, &b, 1) != 1 || read(c, &b, 1) != 1) {
			perror("tcp connect");
			return 1;
		}
		close(c);
	}
	if (n > 1) {
		double s = now() - t0;
		printf("cycles %ld seconds %.3f per_second %.0f\n", n - 1, s, (n - 1) / s);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct addrinfo hints, *ai;
	long n;
	int ret;
	if (argc < 5) {
		fprintf(stderr, "usage: %s server|client|tcp-server|tcp-client ADDR PORT N [--no-qp]\n", argv[0]);
		return 2;
	}
	if (argc > 5 && !strcmp(argv[5], "--no-qp"))
		use_qp = 0;
	n = atol(argv[4]);
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = AI_NUMERICHOST;
	if (getaddrinfo(argv[2], argv[3], &hints, &ai)) {
		fprintf(stderr, "bad address %s port %s\n", argv[2], argv[3]);
		return 2;
	}
	if (!strcmp(argv[1], "tcp-server"))
		ret = tcp_server(ai, n);
	else if (!strcmp(argv[1], "tcp-client"))
		ret = tcp_client(ai, n);
	else
		ret = !strcmp(argv[1], "server") ? server(ai, n) : client(ai, n);
	freeaddrinfo(ai);
	return ret;
}
