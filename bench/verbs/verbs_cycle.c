/*
 * One control-path cycle of the verbs, for side-by-side measurement of two
 * libibverbs.so.1 (ours and Debian's) with the same provider:
 *
 *   open device, alloc PD, reg MR, create CQ, create RC QP,
 *   modify RESET->INIT->RTR->RTS (connected to itself), destroy all, close.
 *
 * Usage: verbs_cycle DEVICE [GID_INDEX] [--rss]
 *   Under `valgrind --tool=callgrind --instr-atstart=no` only the cycle is
 *   counted (CALLGRIND_START/STOP_INSTRUMENTATION around it), not the program
 *   start or the device list. (--collect-atstart=no does not work with these
 *   macros: they switch instrumentation, not collection.) With --rss it
 *   prints the resident set size in KiB (from /proc/self/statm) before and
 *   right after ibv_open_device, then the resident KiB of each mapped object
 *   ("rss_map KIB PATH", from /proc/self/smaps; anonymous memory as [anon]),
 *   and exits.
 * Exit status 0 when every step succeeded; each failure is printed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <valgrind/callgrind.h>

#define CHECK(cond, what)                                                      \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "verbs_cycle: %s failed: %s\n", what,  \
				strerror(errno));                              \
			return 1;                                              \
		}                                                              \
	} while (0)

static long rss_kib(void)
{
	long pages_total = 0, pages_rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &pages_total, &pages_rss) != 2)
		pages_rss = -1;
	fclose(f);
	return pages_rss < 0 ? -1 : pages_rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Resident KiB per mapped object, summed over its mappings. */
static void print_rss_maps(void)
{
	enum { MAX_OBJS = 256 };
	static char names[MAX_OBJS][256];
	static long kib[MAX_OBJS];
	int nobj = 0, cur = -1;
	char line[512];
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char first[128], path[256] = "[anon]";
		long v;

		if (sscanf(line, "%127s", first) != 1)
			continue;
		if (first[strlen(first) - 1] == ':') {
			if (cur >= 0 && !strcmp(first, "Rss:") &&
			    sscanf(line, "%*s %ld", &v) == 1)
				kib[cur] += v;
			continue;
		}
		/* A mapping header: range perms offset dev inode [path]. */
		sscanf(line, "%*s %*s %*s %*s %*s %255s", path);
		for (cur = 0; cur < nobj && strcmp(names[cur], path); cur++)
			;
		if (cur == nobj) {
			if (nobj == MAX_OBJS) {
				cur = -1;
				continue;
			}
			snprintf(names[nobj++], sizeof(names[0]), "%s", path);
		}
	}
	fclose(f);
	for (int i = 0; i < nobj; i++)
		printf("rss_map %ld %s\n", kib[i], names[i]);
}

static int cycle(struct ibv_device *dev, int gid_index)
{
	static char buf[4096];
	struct ibv_context *ctx = ibv_open_device(dev);
	CHECK(ctx, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf),
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr, "ibv_reg_mr");
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(cq, "ibv_create_cq");
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	CHECK(qp, "ibv_create_qp");

	struct ibv_port_attr port;
	CHECK(ibv_query_port(ctx, 1, &port) == 0, "ibv_query_port");
	union ibv_gid gid;
	memset(&gid, 0, sizeof(gid));
	if (gid_index >= 0)
		CHECK(ibv_query_gid(ctx, 1, gid_index, &gid) == 0, "ibv_query_gid");

	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0,
				 .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0, "modify INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.port_num = 1;
	a.ah_attr.dlid = port.lid;
	if (gid_index >= 0) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = gid;
		a.ah_attr.grh.sgid_index = gid_index;
		a.ah_attr.grh.hop_limit = 1;
	}
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0,
	      "modify RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			    IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			    IBV_QP_MAX_QP_RD_ATOMIC) == 0, "modify RTS");

	CHECK(ibv_destroy_qp(qp) == 0, "ibv_destroy_qp");
	CHECK(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
	CHECK(ibv_dealloc_pd(pd) == 0, "ibv_dealloc_pd");
	CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s DEVICE [GID_INDEX] [--rss]\n", argv[0]);
		return 2;
	}
	int gid_index = argc > 2 && strcmp(argv[2], "--rss") ? atoi(argv[2]) : -1;
	int want_rss = !strcmp(argv[argc - 1], "--rss");
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = NULL;
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			dev = list[i];
	if (!dev) {
		fprintf(stderr, "verbs_cycle: device %s not found\n", argv[1]);
		return 1;
	}
	if (want_rss) {
		long before = rss_kib();
		struct ibv_context *ctx = ibv_open_device(dev);
		CHECK(ctx, "ibv_open_device");
		long after = rss_kib();
		printf("rss_kib_before_open %ld\n", before);
		printf("rss_kib_after_open %ld\n", after);
		print_rss_maps();
		ibv_close_device(ctx);
		ibv_free_device_list(list);
		return 0;
	}
	CALLGRIND_START_INSTRUMENTATION;
	int ret = cycle(dev, gid_index);
	CALLGRIND_STOP_INSTRUMENTATION;
	ibv_free_device_list(list);
	return ret;
}
