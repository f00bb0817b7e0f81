// The kernel transport against the real uverbs ABI (run in the qemu test
// bed by vm-group-kernel-transport.sh, never on the host): a Debian provider
// (librxe/libsiw) on top of our libibverbs.so.1 drives every object through
// its life cycle and sends one RC message over a loopback QP pair, in three
// transport modes forced through the context's private state:
//   ioctl   - as probed (ioctl methods; write commands go by write(), the
//             INVOKE_WRITE tunnel being only their fallback on EACCES)
//   tunnel  - every op marked legacy (the in-place UHW write path), the
//             tunnel still available to write commands
//   write   - no ioctl at all (as after ENOTTY): plain write() for everything
// Usage: kernel_transport_real DEVICE GID_INDEX MODE [rc]
// Prints what failed and exits non-zero on the first failure.
#include "core/context_private.h"

#include <infiniband/verbs.h>

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

int failures = 0;

#define CHECK(cond, what)                                                                        \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			std::fprintf(stderr, "FAILED: %s (errno %d: %s)\n", what, errno,          \
				     std::strerror(errno));                                      \
			++failures;                                                              \
			return false;                                                            \
		}                                                                                \
		std::printf("ok: %s\n", what);                                                   \
	} while (0)

bool set_mode(struct ibv_context *ctx, const std::string &mode)
{
	struct verbs_context *vctx = verbs_get_ctx(ctx);
	if (!vctx || !vctx->priv)
		return false;
	struct verbs_ex_private *priv = vctx->priv;
	if (mode == "ioctl")
		return true;
	for (size_t i = 0; i < kVerbsOpsCount; ++i)
		priv->unsupported_ioctls[i / 64] |= 1ULL << (i % 64);
	if (mode == "tunnel")
		return true;
	if (mode == "write") {
		priv->ioctl_write = kIoctlWriteNo;
		return true;
	}
	return false;
}

bool connect_qp(struct ibv_qp *qp, uint32_t dest_qpn, const union ibv_gid &gid, int gid_index)
{
	struct ibv_qp_attr a = {};
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	      "modify_qp INIT");
	a = {};
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	CHECK(!ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
	      "modify_qp RTR");
	a = {};
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 1;
	a.max_rd_atomic = 1;
	CHECK(!ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC),
	      "modify_qp RTS");
	return true;
}

bool run(struct ibv_context *ctx, int gid_index, bool rc)
{
	struct ibv_device_attr_ex dev = {};
	CHECK(!ibv_query_device_ex(ctx, nullptr, &dev), "query_device_ex");
	CHECK(dev.orig_attr.max_qp > 0 && dev.orig_attr.phys_port_cnt >= 1, "device attributes filled");
	struct ibv_port_attr port = {};
	CHECK(!ibv_query_port(ctx, 1, &port), "query_port");
	CHECK(port.state == IBV_PORT_ACTIVE && port.gid_tbl_len > 0, "port attributes filled");
	union ibv_gid gid;
	CHECK(!ibv_query_gid(ctx, 1, gid_index, &gid), "query_gid");

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "alloc_pd");
	static char buf[2][4096];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf),
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK(mr, "reg_mr");
	CHECK(mr->lkey != 0 || mr->rkey != 0, "reg_mr keys");
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(ch, "create_comp_channel");
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, nullptr, ch, 0);
	CHECK(cq, "create_cq");
	CHECK(cq->cqe >= 16, "create_cq cqe");
	CHECK(!ibv_req_notify_cq(cq, 0), "req_notify_cq");
	int rr = ibv_resize_cq(cq, 32);
	CHECK(rr == 0 || rr == EOPNOTSUPP, "resize_cq (or not supported)");

	struct ibv_qp_init_attr qa = {};
	qa.send_cq = cq;
	qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 4;
	qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	struct ibv_qp *qp[2];
	qp[0] = ibv_create_qp(pd, &qa);
	CHECK(qp[0], "create_qp 0");
	qp[1] = ibv_create_qp(pd, &qa);
	CHECK(qp[1], "create_qp 1");
	CHECK(qp[0]->qp_num != qp[1]->qp_num, "distinct qp numbers");

	struct ibv_qp_attr qattr;
	struct ibv_qp_init_attr qinit;
	CHECK(!ibv_query_qp(qp[0], &qattr, IBV_QP_STATE | IBV_QP_CAP, &qinit), "query_qp");
	CHECK(qattr.qp_state == IBV_QPS_RESET && qinit.cap.max_send_wr >= 4, "query_qp values");

	struct ibv_srq_init_attr sa = {};
	sa.attr.max_wr = 8;
	sa.attr.max_sge = 1;
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	if (srq) {
		std::printf("ok: create_srq\n");
		struct ibv_srq_attr s = {};
		int r = ibv_query_srq(srq, &s);
		CHECK(r == 0 ? s.max_wr >= 8 : r == EOPNOTSUPP, "query_srq (or not supported)");
		CHECK(!ibv_destroy_srq(srq), "destroy_srq");
	} else {
		CHECK(errno == EOPNOTSUPP || errno == ENOSYS, "create_srq (or not supported)");
	}

	// Extended CQ and QP (ibv_cmd_create_cq_ex / ibv_cmd_create_qp_ex2).
	struct ibv_cq_init_attr_ex cqa = {};
	cqa.cqe = 8;
	cqa.wc_flags = IBV_WC_STANDARD_FLAGS;
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &cqa);
	if (cqx) {
		std::printf("ok: create_cq_ex\n");
		struct ibv_qp_init_attr_ex qx = {};
		qx.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		qx.pd = pd;
		qx.send_cq = ibv_cq_ex_to_cq(cqx);
		qx.recv_cq = ibv_cq_ex_to_cq(cqx);
		qx.qp_type = IBV_QPT_RC;
		qx.cap.max_send_wr = 2;
		qx.cap.max_recv_wr = 2;
		qx.cap.max_send_sge = 1;
		qx.cap.max_recv_sge = 1;
		qx.send_ops_flags = IBV_QP_EX_WITH_SEND;
		struct ibv_qp *q = ibv_create_qp_ex(ctx, &qx);
		if (q) {
			std::printf("ok: create_qp_ex (qpn 0x%x)\n", q->qp_num);
			CHECK(!ibv_destroy_qp(q), "destroy_qp (ex)");
		} else {
			CHECK(errno == EOPNOTSUPP, "create_qp_ex (or not supported)");
		}
		CHECK(!ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), "destroy_cq (ex)");
	} else {
		CHECK(errno == EOPNOTSUPP, "create_cq_ex (or not supported)");
	}

	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	if (mw)
		CHECK(!ibv_dealloc_mw(mw), "alloc_mw/dealloc_mw");
	else
		std::printf("ok: alloc_mw not supported (errno %d)\n", errno);

	struct ibv_ah_attr ah = {};
	ah.is_global = 1;
	ah.grh.dgid = gid;
	ah.grh.sgid_index = (uint8_t)gid_index;
	ah.grh.hop_limit = 1;
	ah.port_num = 1;
	struct ibv_ah *a = ibv_create_ah(pd, &ah);
	if (a)
		CHECK(!ibv_destroy_ah(a), "create_ah/destroy_ah");
	else
		std::printf("ok: create_ah not supported (errno %d)\n", errno);

	if (rc) {
		if (!connect_qp(qp[0], qp[1]->qp_num, gid, gid_index) ||
		    !connect_qp(qp[1], qp[0]->qp_num, gid, gid_index))
			return false;
		struct ibv_sge rs = {(uintptr_t)buf[1], 64, mr->lkey};
		struct ibv_recv_wr rwr = {};
		rwr.wr_id = 2;
		rwr.sg_list = &rs;
		rwr.num_sge = 1;
		struct ibv_recv_wr *bad_r = nullptr;
		CHECK(!ibv_post_recv(qp[1], &rwr, &bad_r), "post_recv");
		std::strcpy(buf[0], "openverbs transport");
		struct ibv_sge ss = {(uintptr_t)buf[0], 64, mr->lkey};
		struct ibv_send_wr swr = {};
		swr.wr_id = 1;
		swr.sg_list = &ss;
		swr.num_sge = 1;
		swr.opcode = IBV_WR_SEND;
		swr.send_flags = IBV_SEND_SIGNALED;
		struct ibv_send_wr *bad_s = nullptr;
		CHECK(!ibv_post_send(qp[0], &swr, &bad_s), "post_send");
		int got = 0;
		for (int spin = 0; spin < 20000000 && got < 2; ++spin) {
			struct ibv_wc wc;
			int n = ibv_poll_cq(cq, 1, &wc);
			CHECK(n >= 0, "poll_cq");
			if (n == 1) {
				CHECK(wc.status == IBV_WC_SUCCESS, "completion status");
				++got;
			}
		}
		CHECK(got == 2, "send and receive completed");
		CHECK(!std::strcmp(buf[1], "openverbs transport"), "payload arrived");
	}

	CHECK(!ibv_destroy_qp(qp[0]), "destroy_qp 0");
	CHECK(!ibv_destroy_qp(qp[1]), "destroy_qp 1");
	CHECK(!ibv_destroy_cq(cq), "destroy_cq");
	CHECK(!ibv_destroy_comp_channel(ch), "destroy_comp_channel");
	CHECK(!ibv_dereg_mr(mr), "dereg_mr");
	CHECK(!ibv_dealloc_pd(pd), "dealloc_pd");

	// The kernel's errno comes back unchanged: port 99 does not exist.
	struct ibv_port_attr bad = {};
	int r = ibv_query_port(ctx, 99, &bad);
	std::printf("query_port(99) = %d\n", r);
	CHECK(r == EINVAL, "query_port of a missing port is the kernel's EINVAL");
	return true;
}

void on_crash(int sig)
{
	void *frames[64];
	int n = backtrace(frames, 64);
	dprintf(2, "signal %d, backtrace:\n", sig);
	backtrace_symbols_fd(frames, n, 2);
	_exit(128 + sig);
}

} // namespace

int main(int argc, char **argv)
{
	std::setvbuf(stdout, nullptr, _IOLBF, 0);
	signal(SIGSEGV, on_crash);
	if (argc < 4) {
		std::fprintf(stderr, "usage: %s DEVICE GID_INDEX ioctl|tunnel|write [rc]\n", argv[0]);
		return 2;
	}
	const std::string want = argv[1];
	int gid_index = std::atoi(argv[2]);
	const std::string mode = argv[3];
	bool rc = argc > 4 && std::string(argv[4]) == "rc";

	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list) {
		std::perror("ibv_get_device_list");
		return 1;
	}
	struct ibv_device *dev = nullptr;
	for (int i = 0; i < n; ++i)
		if (want == ibv_get_device_name(list[i]))
			dev = list[i];
	if (!dev) {
		std::fprintf(stderr, "no device %s\n", want.c_str());
		return 1;
	}
	struct ibv_context *ctx = ibv_open_device(dev);
	if (!ctx) {
		std::perror("ibv_open_device");
		return 1;
	}
	if (!set_mode(ctx, mode)) {
		std::fprintf(stderr, "cannot set mode %s\n", mode.c_str());
		return 2;
	}
	std::printf("mode %s: ioctl_write=%d\n", mode.c_str(), (int)verbs_get_ctx(ctx)->priv->ioctl_write);
	bool ok = run(ctx, gid_index, rc);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	std::printf("%s: %s\n", mode.c_str(), ok && !failures ? "all passed" : "FAILED");
	return ok && !failures ? 0 : 1;
}
