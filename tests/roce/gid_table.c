/* The GID table follows the interface's addresses while the device is open,
 * keeping each GID at its index (run by gid_table.sh in a network namespace
 * of its own, as root: the addresses are changed with ip(8)).
 *
 *   gid_table DEV IFNAME
 *
 * Expects 10.77.0.1 at index 1; adds 10.78.0.2 (a new slot, 2), removes
 * 10.77.0.1 (slot 1 empty: ENODATA, zero GID; 10.78.0.2 stays at 2), adds
 * it again (slot 1 again). Exit status 0 when all held. */
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
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return failures ? 1 : 0;
}
