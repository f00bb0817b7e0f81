// Several processes on one RoCE v2 software device (tests/roce/share.sh):
// opens DEVICE, makes a UD QP and gives it QP1's Q_Key (0x80010000, as a
// connection manager does for its MADs: it becomes the process's QP1),
// prints the outcome, then keeps the device open for SECONDS. With "fork", a child made after that exits at
// once (its exit handlers close the inherited device: they must leave the
// parent's endpoints alone).
//   share_probe DEVICE SECONDS [fork]
// Prints "open: ok" or "open: <error>", then "qp1: ok" or "qp1: <error>",
// then (fork) "fork: child exited";
// exit 0 whatever the outcome (the script judges), 2 on bad arguments.
#include <infiniband/verbs.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3 && !(argc == 4 && !strcmp(argv[3], "fork")))
		return 2;
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = NULL;
	int err = ENODEV;
	for (int i = 0; list && i < n && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1])) {
			errno = 0;
			ctx = ibv_open_device(list[i]);
			err = errno;
		}
	if (!ctx) {
		printf("open: %s\n", strerror(err ? err : EIO));
		fflush(stdout);
		return 0;
	}
	printf("open: ok\n");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 4, NULL, NULL, 0) : NULL;
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
				      .cap = {.max_send_wr = 1, .max_recv_wr = 1,
					      .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = cq ? ibv_create_qp(pd, &ia) : NULL;
	if (!qp) {
		printf("qp1: no QP: %s\n", strerror(errno));
	} else {
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x80010000};
		int e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						      IBV_QP_QKEY);
		printf("qp1: %s\n", e ? strerror(e) : "ok");
	}
	fflush(stdout);
	if (argc == 4) {
		pid_t child = fork();
		if (child == 0)
			exit(0);
		int status;
		if (child > 0 && waitpid(child, &status, 0) == child)
			printf("fork: child exited\n");
		fflush(stdout);
	}
	sleep((unsigned)atoi(argv[2]));
	if (qp)
		ibv_destroy_qp(qp);
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
