/*
 * One post_send + poll_cq pair on the software device, with and without a
 * thread domain (issue 6 benchmark).
 *
 *   td_bench MODE ITERATIONS      MODE: plain | td
 *
 * plain: PD, ibv_create_cq, RC QP pair connected in loopback.
 * td:    thread domain + parent domain over the same PD; the CQ is created
 *        with IBV_CQ_INIT_ATTR_MASK_PD and the QPs under the parent domain,
 *        so the provider may drop its locks on this data path.
 * Each iteration posts one signalled 64-byte RDMA WRITE and polls the send
 * CQ until its completion arrives. Prints "MODE ns_per_pair N"; under
 * `valgrind --tool=callgrind --instr-atstart=no` only the measured loop is
 * counted (CALLGRIND_START/STOP_INSTRUMENTATION around it).
 * Exit status 0 when every step succeeded.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>
#include <valgrind/callgrind.h>

#define CHECK(cond, what)                                                        \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "td_bench: %s failed: %s\n", what,       \
				strerror(errno));                                \
			return 1;                                                \
		}                                                                \
	} while (0)

static int connect_rc(struct ibv_qp *qp, uint32_t dest)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.ah_attr.dlid = 1;
	a.ah_attr.port_num = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
					     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					     IBV_QP_MAX_QP_RD_ATOMIC);
}

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc < 3 || (strcmp(argv[1], "plain") && strcmp(argv[1], "td"))) {
		fprintf(stderr, "usage: td_bench plain|td ITERATIONS\n");
		return 2;
	}
	int use_td = !strcmp(argv[1], "td");
	long iters = atol(argv[2]);
	int n = 0, i;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = NULL;
	for (i = 0; list && i < n && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "soft0"))
			ctx = ibv_open_device(list[i]);
	CHECK(ctx, "opening soft0 (RDMAV_SOFT_DEVICES=1?)");
	ibv_free_device_list(list);

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	struct ibv_pd *qpd = pd;
	struct ibv_td *td = NULL;
	struct ibv_cq_init_attr_ex ca;
	memset(&ca, 0, sizeof(ca));
	ca.cqe = 64;
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	if (use_td) {
		struct ibv_td_init_attr ta = { 0 };
		td = ibv_alloc_td(ctx, &ta);
		CHECK(td, "ibv_alloc_td");
		struct ibv_parent_domain_init_attr pa;
		memset(&pa, 0, sizeof(pa));
		pa.pd = pd;
		pa.td = td;
		qpd = ibv_alloc_parent_domain(ctx, &pa);
		CHECK(qpd, "ibv_alloc_parent_domain");
		ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
		ca.parent_domain = qpd;
	}
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &ca);
	CHECK(cqx, "ibv_create_cq_ex");
	struct ibv_cq *cq = ibv_cq_ex_to_cq(cqx);
	static char buf[2][4096];
	struct ibv_mr *mr = ibv_reg_mr(qpd, buf, sizeof(buf),
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr, "ibv_reg_mr");
	struct ibv_qp_init_attr qa;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 16;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	struct ibv_qp *a = ibv_create_qp(qpd, &qa), *b = ibv_create_qp(qpd, &qa);
	CHECK(a && b, "ibv_create_qp");
	CHECK(!connect_rc(a, b->qp_num) && !connect_rc(b, a->qp_num), "connect");

	struct ibv_sge sge = { (uintptr_t)buf[0], 64, mr->lkey };
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)buf[1];
	wr.wr.rdma.rkey = mr->rkey;
	struct ibv_wc wc;

	/* Warm-up (also proves the path works). */
	for (i = 0; i < 100; i++) {
		CHECK(!ibv_post_send(a, &wr, &bad), "ibv_post_send");
		while (ibv_poll_cq(cq, 1, &wc) == 0)
			;
		CHECK(wc.status == IBV_WC_SUCCESS, "completion");
	}
	double t0 = now_ns();
	CALLGRIND_START_INSTRUMENTATION;
	for (long k = 0; k < iters; k++) {
		ibv_post_send(a, &wr, &bad);
		while (ibv_poll_cq(cq, 1, &wc) == 0)
			;
	}
	CALLGRIND_STOP_INSTRUMENTATION;
	double t1 = now_ns();
	CHECK(wc.status == IBV_WC_SUCCESS, "last completion");
	printf("%s ns_per_pair %.1f\n", argv[1], (t1 - t0) / (double)iters);

	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	if (use_td) {
		ibv_dealloc_pd(qpd);
		ibv_dealloc_td(td);
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
