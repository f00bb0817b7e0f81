/* The GID table follows the interface's addresses while the device is open,
 * keeping each GID at its index, and the port's active MTU follows the
 * interface's MTU (run by gid_table.sh in a network namespace of its own, as
 * root: the addresses and the MTU are changed with ip(8)).
 *
 *   gid_table DEV IFNAME
 *
 * Expects 10.77.0.1 at index 1; adds 10.78.0.2 (a new slot, 2), removes
 * 10.77.0.1 (slot 1 empty: ENODATA, zero GID; 10.78.0.2 stays at 2), adds
 * it again (slot 1 again). Then the MTU: 1500 gives IB 1024; raised to 9000,
 * an RC QP may go to RTR with path MTU 4096 at once (modify_qp looks at the
 * interface again before refusing) and ibv_query_port says 4096; lowered
 * to 1000, 512 (the largest IB MTU whose packets, headers included, fit).
 * Exit status 0 when all held. */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *ifname;
static int failures;

static void run(const char *verb, const char *addr)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "ip addr %s %s/24 dev %s", verb, addr, ifname);
	if (system(cmd) != 0) {
		fprintf(stderr, "gid_table: '%s' failed\n", cmd);
		exit(2);
	}
	usleep(1200000); /* the table is read again at most once a second */
}

static void set_mtu(int mtu, int settle)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "ip link set %s mtu %d", ifname, mtu);
	if (system(cmd) != 0) {
		fprintf(stderr, "gid_table: '%s' failed\n", cmd);
		exit(2);
	}
	if (settle)
		usleep(1200000); /* the MTU is read again at most once a second */
}

static void expect_mtu(struct ibv_context *ctx, int if_mtu, enum ibv_mtu want)
{
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, 1, &pa) || pa.active_mtu != want) {
		fprintf(stderr, "gid_table: MTU %d: active_mtu %d, want %d\n", if_mtu,
			(int)pa.active_mtu, (int)want);
		failures++;
	} else {
		printf("MTU %d: active_mtu %d\n", if_mtu, (int)pa.active_mtu);
	}
}

/* An RC QP to our own GID 1 taken to RTR with path MTU mtu; its errno. */
static int rtr_with(struct ibv_context *ctx, enum ibv_mtu mtu)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 4, NULL, NULL, 0) : NULL;
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
					      .max_recv_sge = 1}};
	struct ibv_qp *qp = cq ? ibv_create_qp(pd, &ia) : NULL;
	int rc = qp ? 0 : errno ? errno : ENOMEM;
	if (!rc) {
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
					.qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
		rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						   IBV_QP_ACCESS_FLAGS);
	}
	if (!rc) {
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR, .path_mtu = mtu, .dest_qp_num = qp->qp_num,
					.rq_psn = 1, .max_dest_rd_atomic = 1, .min_rnr_timer = 12};
		a.ah_attr.is_global = 1;
		a.ah_attr.port_num = 1;
		a.ah_attr.grh.sgid_index = 1;
		a.ah_attr.grh.hop_limit = 64;
		ibv_query_gid(ctx, 1, 1, &a.ah_attr.grh.dgid);
		rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
						   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
						   IBV_QP_MIN_RNR_TIMER);
	}
	if (qp)
		ibv_destroy_qp(qp);
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
	return rc;
}

static void expect(struct ibv_context *ctx, int index, const char *v4)
{
	struct ibv_gid_entry e;
	union ibv_gid g;
	int rc = ibv_query_gid_ex(ctx, 1, (uint32_t)index, &e, 0);
	int grc = ibv_query_gid(ctx, 1, index, &g);
	if (!v4) {
		static const union ibv_gid zero;
		if (rc != ENODATA || grc || memcmp(&g, &zero, sizeof(g))) {
			fprintf(stderr, "gid_table: index %d should be empty (query_gid_ex %d)\n", index, rc);
			failures++;
		} else {
			printf("GID[%d]: empty\n", index);
		}
		return;
	}
	unsigned char want[16] = {0};
	want[10] = want[11] = 0xff;
	inet_pton(AF_INET, v4, want + 12);
	if (rc || memcmp(e.gid.raw, want, 16) || e.gid_type != IBV_GID_TYPE_ROCE_V2 ||
	    e.ndev_ifindex == 0 || grc || memcmp(g.raw, want, 16)) {
		fprintf(stderr, "gid_table: index %d should be %s, RoCE v2 (query_gid_ex %d)\n", index,
			v4, rc);
		failures++;
	} else {
		printf("GID[%d]: ::ffff:%s, RoCE v2, ifindex %u\n", index, v4, e.ndev_ifindex);
	}
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	ifname = argv[2];
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		fprintf(stderr, "gid_table: cannot open %s\n", argv[1]);
		return 2;
	}
	expect(ctx, 1, "10.77.0.1");
	run("add", "10.78.0.2");
	expect(ctx, 1, "10.77.0.1");
	expect(ctx, 2, "10.78.0.2");
	run("del", "10.77.0.1");
	expect(ctx, 1, NULL);
	expect(ctx, 2, "10.78.0.2");
	run("add", "10.77.0.1");
	expect(ctx, 1, "10.77.0.1");
	expect(ctx, 2, "10.78.0.2");

	expect_mtu(ctx, 1500, IBV_MTU_1024);
	set_mtu(9000, 0);
	int rc = rtr_with(ctx, IBV_MTU_4096);
	if (rc) {
		fprintf(stderr, "gid_table: RTR with path MTU 4096 after MTU 9000: %s\n", strerror(rc));
		failures++;
	} else {
		printf("MTU 9000: RTR with path MTU 4096\n");
	}
	expect_mtu(ctx, 9000, IBV_MTU_4096);
	set_mtu(1000, 1);
	expect_mtu(ctx, 1000, IBV_MTU_512);
	rc = rtr_with(ctx, IBV_MTU_1024);
	if (rc != EINVAL) {
		fprintf(stderr, "gid_table: RTR with path MTU 1024 after MTU 1000: %d, want EINVAL\n", rc);
		failures++;
	}
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return failures ? 1 : 0;
}
