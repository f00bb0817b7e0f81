// The IBVERBS_1.0 twins of the built libibverbs.so.1, called the way a 1.0
// binary calls them: through dlvsym(name, "IBVERBS_1.0"), on 1.0 wrapper
// objects, with the 1.0 data path through ibv_context_1_0::ops.
#include "dl_env.h"
#include "../../../src/facade/compat_1_0.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <unistd.h>
#include <cstring>
#include <algorithm>
#include <string>
#include <sys/wait.h>
#include <vector>

using namespace verbs_dl;

namespace {

const char *const kTwins[] = {
	"ibv_get_device_list", "ibv_free_device_list", "ibv_get_device_name", "ibv_get_device_guid",
	"ibv_open_device",     "ibv_close_device",     "ibv_get_async_event", "ibv_ack_async_event",
	"ibv_query_device",    "ibv_query_port",       "ibv_query_gid",       "ibv_query_pkey",
	"ibv_alloc_pd",        "ibv_dealloc_pd",       "ibv_reg_mr",          "ibv_dereg_mr",
	"ibv_create_cq",       "ibv_resize_cq",        "ibv_destroy_cq",      "ibv_get_cq_event",
	"ibv_ack_cq_events",   "ibv_create_srq",       "ibv_modify_srq",      "ibv_query_srq",
	"ibv_destroy_srq",     "ibv_create_qp",        "ibv_query_qp",        "ibv_modify_qp",
	"ibv_destroy_qp",      "ibv_create_ah",        "ibv_destroy_ah",      "ibv_attach_mcast",
	"ibv_detach_mcast",
};

// What the fake provider saw of the last post_send / post_recv.
struct Seen {
	std::vector<struct ibv_send_wr> sends;
	std::vector<struct ibv_recv_wr> recvs;
	int polls = 0;
	int live = 0;
} g_seen;

struct ibv_pd *p_alloc_pd(struct ibv_context *)
{
	g_seen.live++;
	auto *pd = static_cast<struct ibv_pd *>(calloc(1, sizeof(struct ibv_pd)));
	pd->handle = 21;
	return pd;
}
int p_dealloc_pd(struct ibv_pd *pd)
{
	g_seen.live--;
	free(pd);
	return 0;
}
struct ibv_mr *p_reg_mr(struct ibv_pd *, void *, size_t, uint64_t, int access)
{
	g_seen.live++;
	auto *vmr = static_cast<struct verbs_mr *>(calloc(1, sizeof(struct verbs_mr)));
	vmr->access = access;
	vmr->ibv_mr.lkey = 0x11;
	vmr->ibv_mr.rkey = 0x22;
	return &vmr->ibv_mr;
}
int p_dereg_mr(struct verbs_mr *vmr)
{
	g_seen.live--;
	free(vmr);
	return 0;
}
struct ibv_cq *p_create_cq(struct ibv_context *, int cqe, struct ibv_comp_channel *, int)
{
	g_seen.live++;
	auto *cq = static_cast<struct verbs_cq *>(calloc(1, sizeof(struct verbs_cq)));
	cq->cq.cqe = cqe;
	return &cq->cq;
}
int p_destroy_cq(struct ibv_cq *cq)
{
	g_seen.live--;
	free(cq);
	return 0;
}
int p_poll_cq(struct ibv_cq *, int n, struct ibv_wc *wc)
{
	g_seen.polls++;
	if (n < 1)
		return 0;
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = 77;
	return 1;
}
struct ibv_qp *p_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	g_seen.live++;
	auto *vqp = static_cast<struct verbs_qp *>(calloc(1, sizeof(struct verbs_qp)));
	vqp->qp.context = pd->context;
	vqp->qp.pd = pd;
	vqp->qp.qp_context = attr->qp_context;
	vqp->qp.send_cq = attr->send_cq;
	vqp->qp.recv_cq = attr->recv_cq;
	vqp->qp.qp_type = attr->qp_type;
	vqp->qp.qp_num = 0x99;
	attr->cap.max_inline_data = 64;
	return &vqp->qp;
}
int p_destroy_qp(struct ibv_qp *qp)
{
	g_seen.live--;
	free(qp);
	return 0;
}
int p_modify_qp(struct ibv_qp *, struct ibv_qp_attr *, int)
{
	return 0;
}
int p_post_send(struct ibv_qp *, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	g_seen.sends.clear();
	for (; wr; wr = wr->next)
		g_seen.sends.push_back(*wr);
	// Reject the second request to check the bad_wr mapping.
	if (g_seen.sends.size() > 1) {
		*bad = nullptr;
		return EINVAL;
	}
	return 0;
}
int p_post_recv(struct ibv_qp *, struct ibv_recv_wr *wr, struct ibv_recv_wr **)
{
	g_seen.recvs.clear();
	for (; wr; wr = wr->next)
		g_seen.recvs.push_back(*wr);
	return 0;
}
struct ibv_ah *p_create_ah(struct ibv_pd *, struct ibv_ah_attr *)
{
	g_seen.live++;
	return static_cast<struct ibv_ah *>(calloc(1, sizeof(struct ibv_ah)));
}
int p_destroy_ah(struct ibv_ah *ah)
{
	g_seen.live--;
	free(ah);
	return 0;
}
int p_query_device_ex(struct ibv_context *, const struct ibv_query_device_ex_input *,
		      struct ibv_device_attr_ex *attr, size_t size)
{
	memset(attr, 0, size);
	attr->orig_attr.max_qp = 5;
	return 0;
}

struct verbs_context_ops make_ops()
{
	struct verbs_context_ops ops = {};
	ops.alloc_pd = p_alloc_pd;
	ops.dealloc_pd = p_dealloc_pd;
	ops.reg_mr = p_reg_mr;
	ops.dereg_mr = p_dereg_mr;
	ops.create_cq = p_create_cq;
	ops.destroy_cq = p_destroy_cq;
	ops.poll_cq = p_poll_cq;
	ops.create_qp = p_create_qp;
	ops.destroy_qp = p_destroy_qp;
	ops.modify_qp = p_modify_qp;
	ops.post_send = p_post_send;
	ops.post_recv = p_post_recv;
	ops.create_ah = p_create_ah;
	ops.destroy_ah = p_destroy_ah;
	ops.query_device_ex = p_query_device_ex;
	return ops;
}
const struct verbs_context_ops kOps = make_ops();

class Compat10 : public ::testing::Test {
protected:
	static void SetUpTestSuite()
	{
		ASSERT_TRUE(lib.load(OPENVERBS_LIB));
	}
	template <typename F> F v10(const char *name)
	{
		auto f = lib.vsym<F>(name, "IBVERBS_1.0");
		EXPECT_NE(f, nullptr) << name << "@IBVERBS_1.0 missing";
		return f;
	}
	static Lib lib;
};
Lib Compat10::lib;

} // namespace

TEST_F(Compat10, EveryTwinExistsAndDiffersFromTheCurrentVersion)
{
	for (const char *name : kTwins) {
		void *old = dlvsym(lib.handle, name, "IBVERBS_1.0");
		void *cur = dlvsym(lib.handle, name, "IBVERBS_1.1");
		EXPECT_NE(old, nullptr) << name << "@IBVERBS_1.0 not exported (the version script must not "
					   "make IBVERBS_1.0 names local: see cmake/GenVersionScript.cmake)";
		EXPECT_NE(cur, nullptr) << name << "@@IBVERBS_1.1";
		EXPECT_NE(old, cur) << name;
		EXPECT_EQ(dlsym(lib.handle, name), cur) << name << ": default must be 1.1";
	}
}

TEST_F(Compat10, DeviceListOnAHostWithoutDevices)
{
	auto get = v10<struct ibv_device_1_0 **(*)(int *)>("ibv_get_device_list");
	auto put = v10<void (*)(struct ibv_device_1_0 **)>("ibv_free_device_list");
	ASSERT_TRUE(get && put);
	int n = -1;
	struct ibv_device_1_0 **list = get(&n);
	ASSERT_NE(list, nullptr);
	ASSERT_GE(n, 0);
	EXPECT_EQ(list[n], nullptr);
	for (int i = 0; i < n; i++)
		EXPECT_NE(list[i]->real_device, nullptr);
	put(list);
}

TEST_F(Compat10, WholeObjectLifecycleThroughOldAbi)
{
	g_seen = Seen();
	struct verbs_device *vdev = fake_device(&kOps);
	struct ibv_device_1_0 dev10 = {};
	dev10.real_device = &vdev->device;

	auto open10 = v10<struct ibv_context_1_0 *(*)(struct ibv_device_1_0 *)>("ibv_open_device");
	auto close10 = v10<int (*)(struct ibv_context_1_0 *)>("ibv_close_device");
	auto name10 = v10<const char *(*)(struct ibv_device_1_0 *)>("ibv_get_device_name");
	auto qdev10 = v10<int (*)(struct ibv_context_1_0 *, struct ibv_device_attr *)>("ibv_query_device");
	auto apd10 = v10<struct ibv_pd_1_0 *(*)(struct ibv_context_1_0 *)>("ibv_alloc_pd");
	auto dpd10 = v10<int (*)(struct ibv_pd_1_0 *)>("ibv_dealloc_pd");
	auto reg10 = v10<struct ibv_mr_1_0 *(*)(struct ibv_pd_1_0 *, void *, size_t, int)>("ibv_reg_mr");
	auto dereg10 = v10<int (*)(struct ibv_mr_1_0 *)>("ibv_dereg_mr");
	auto ccq10 = v10<struct ibv_cq_1_0 *(*)(struct ibv_context_1_0 *, int, void *,
						struct ibv_comp_channel *, int)>("ibv_create_cq");
	auto dcq10 = v10<int (*)(struct ibv_cq_1_0 *)>("ibv_destroy_cq");
	auto cqp10 = v10<struct ibv_qp_1_0 *(*)(struct ibv_pd_1_0 *, struct ibv_qp_init_attr_1_0 *)>(
		"ibv_create_qp");
	auto mqp10 = v10<int (*)(struct ibv_qp_1_0 *, struct ibv_qp_attr *, int)>("ibv_modify_qp");
	auto dqp10 = v10<int (*)(struct ibv_qp_1_0 *)>("ibv_destroy_qp");
	auto cah10 = v10<struct ibv_ah_1_0 *(*)(struct ibv_pd_1_0 *, struct ibv_ah_attr *)>("ibv_create_ah");
	auto dah10 = v10<int (*)(struct ibv_ah_1_0 *)>("ibv_destroy_ah");
	ASSERT_FALSE(::testing::Test::HasFailure());

	EXPECT_STREQ(name10(&dev10), "fake0");
	struct ibv_context_1_0 *ctx = open10(&dev10);
	ASSERT_NE(ctx, nullptr);
	EXPECT_EQ(ctx->device, &dev10);
	EXPECT_NE(ctx->real_context, nullptr);
	EXPECT_EQ(ctx->cmd_fd, -1);

	struct ibv_device_attr dattr;
	ASSERT_EQ(qdev10(ctx, &dattr), 0);
	EXPECT_EQ(dattr.max_qp, 5);

	struct ibv_pd_1_0 *pd = apd10(ctx);
	ASSERT_NE(pd, nullptr);
	EXPECT_EQ(pd->context, ctx);
	EXPECT_EQ(pd->handle, 21u);
	EXPECT_EQ(pd->real_pd->context, ctx->real_context);

	char buf[256];
	struct ibv_mr_1_0 *mr = reg10(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(mr, nullptr);
	EXPECT_EQ(mr->pd, pd);
	EXPECT_EQ(mr->lkey, 0x11u);
	EXPECT_EQ(mr->rkey, 0x22u);

	int cq_cookie;
	struct ibv_cq_1_0 *cq = ccq10(ctx, 8, &cq_cookie, nullptr, 0);
	ASSERT_NE(cq, nullptr);
	EXPECT_EQ(cq->cq_context, &cq_cookie);
	EXPECT_EQ(cq->cqe, 8);
	EXPECT_EQ(cq->real_cq->cq_context, cq) << "real CQ must lead back to the wrapper";

	// 1.0 inline ibv_poll_cq: cq->context->ops.poll_cq(cq, ...)
	struct ibv_wc wc;
	ASSERT_NE(ctx->ops.poll_cq, nullptr);
	EXPECT_EQ(ctx->ops.poll_cq(cq, 1, &wc), 1);
	EXPECT_EQ(wc.wr_id, 77u);

	int qp_cookie;
	struct ibv_qp_init_attr_1_0 qinit = {};
	qinit.qp_context = &qp_cookie;
	qinit.send_cq = cq;
	qinit.recv_cq = cq;
	qinit.qp_type = IBV_QPT_UD;
	struct ibv_qp_1_0 *qp = cqp10(pd, &qinit);
	ASSERT_NE(qp, nullptr);
	EXPECT_EQ(qp->qp_num, 0x99u);
	EXPECT_EQ(qp->qp_context, &qp_cookie);
	EXPECT_EQ(qp->send_cq, cq);
	EXPECT_EQ(qinit.cap.max_inline_data, 64u);
	EXPECT_EQ(qp->real_qp->send_cq, cq->real_cq);

	struct ibv_qp_attr attr = {};
	attr.qp_state = IBV_QPS_INIT;
	EXPECT_EQ(mqp10(qp, &attr, IBV_QP_STATE), 0);
	EXPECT_EQ(qp->state, IBV_QPS_INIT);

	struct ibv_ah_attr ah_attr = {};
	ah_attr.dlid = 1;
	struct ibv_ah_1_0 *ah = cah10(pd, &ah_attr);
	ASSERT_NE(ah, nullptr);
	EXPECT_EQ(ah->pd, pd);

	// 1.0 post_send: old work request layout, AH given as its 1.0 wrapper.
	struct ibv_sge sge = {reinterpret_cast<uintptr_t>(buf), 16, mr->lkey};
	struct ibv_send_wr_1_0 wr[2] = {};
	wr[0].wr_id = 5;
	wr[0].sg_list = &sge;
	wr[0].num_sge = 1;
	wr[0].opcode = IBV_WR_SEND;
	wr[0].send_flags = IBV_SEND_SIGNALED;
	wr[0].wr.ud.ah = ah;
	wr[0].wr.ud.remote_qpn = 0x42;
	wr[0].wr.ud.remote_qkey = 0x1111;
	struct ibv_send_wr_1_0 *bad = nullptr;
	ASSERT_EQ(ctx->ops.post_send(qp, wr, &bad), 0);
	ASSERT_EQ(g_seen.sends.size(), 1u);
	EXPECT_EQ(g_seen.sends[0].wr_id, 5u);
	EXPECT_EQ(g_seen.sends[0].wr.ud.ah, ah->real_ah);
	EXPECT_EQ(g_seen.sends[0].wr.ud.remote_qpn, 0x42u);
	EXPECT_EQ(g_seen.sends[0].wr.ud.remote_qkey, 0x1111u);
	EXPECT_EQ(g_seen.sends[0].send_flags, static_cast<unsigned>(IBV_SEND_SIGNALED));

	wr[0].next = &wr[1];
	wr[1].wr_id = 6;
	wr[1].wr.ud.ah = ah;
	EXPECT_EQ(ctx->ops.post_send(qp, wr, &bad), EINVAL);
	EXPECT_EQ(g_seen.sends.size(), 2u);

	struct ibv_recv_wr_1_0 rwr = {};
	rwr.wr_id = 9;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	struct ibv_recv_wr_1_0 *rbad = nullptr;
	ASSERT_EQ(ctx->ops.post_recv(qp, &rwr, &rbad), 0);
	ASSERT_EQ(g_seen.recvs.size(), 1u);
	EXPECT_EQ(g_seen.recvs[0].wr_id, 9u);
	EXPECT_EQ(g_seen.recvs[0].sg_list, &sge);
	EXPECT_EQ(g_seen.recvs[0].next, nullptr);

	EXPECT_EQ(dah10(ah), 0);
	EXPECT_EQ(dqp10(qp), 0);
	EXPECT_EQ(dcq10(cq), 0);
	EXPECT_EQ(dereg10(mr), 0);
	EXPECT_EQ(dpd10(pd), 0);
	EXPECT_EQ(close10(ctx), 0);
	EXPECT_EQ(g_seen.live, 0);
	free(vdev);
}

TEST_F(Compat10, NullArgumentsGiveEinval)
{
	auto apd10 = v10<void *(*)(void *)>("ibv_alloc_pd");
	auto dpd10 = v10<int (*)(void *)>("ibv_dealloc_pd");
	auto open10 = v10<void *(*)(void *)>("ibv_open_device");
	auto cqp10 = v10<void *(*)(void *, void *)>("ibv_create_qp");
	ASSERT_FALSE(::testing::Test::HasFailure());
	errno = 0;
	EXPECT_EQ(apd10(nullptr), nullptr);
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(dpd10(nullptr), EINVAL);
	EXPECT_EQ(open10(nullptr), nullptr);
	EXPECT_EQ(cqp10(nullptr, nullptr), nullptr);
}

// The strings and rate tables are printed by Debian's tools and compared
// with rdma-core's output: they must be identical value for value.
TEST(Differential, StringsAndRatesMatchDebian)
{
	if (access(DEBIAN_LIB, R_OK))
		GTEST_SKIP() << DEBIAN_LIB << " not installed";
	Lib ours, deb;
	ASSERT_TRUE(ours.load(OPENVERBS_LIB));
	ASSERT_TRUE(deb.load(DEBIAN_LIB));
	for (const char *name : {"ibv_node_type_str", "ibv_port_state_str", "ibv_event_type_str",
				 "ibv_wc_status_str"}) {
		auto a = ours.sym<const char *(*)(int)>(name);
		auto b = deb.sym<const char *(*)(int)>(name);
		ASSERT_TRUE(a && b) << name;
		for (int v = -3; v < 64; v++)
			EXPECT_STREQ(a(v), b(v)) << name << "(" << v << ")";
	}
	for (const char *name : {"ibv_rate_to_mult", "ibv_rate_to_mbps"}) {
		auto a = ours.sym<int (*)(int)>(name);
		auto b = deb.sym<int (*)(int)>(name);
		for (int v = -3; v < 64; v++)
			EXPECT_EQ(a(v), b(v)) << name << "(" << v << ")";
	}
	auto m1 = ours.sym<int (*)(int)>("mult_to_ibv_rate");
	auto m2 = deb.sym<int (*)(int)>("mult_to_ibv_rate");
	for (int v = -3; v < 1000; v++)
		EXPECT_EQ(m1(v), m2(v)) << "mult_to_ibv_rate(" << v << ")";
	auto b1 = ours.sym<int (*)(int)>("mbps_to_ibv_rate");
	auto b2 = deb.sym<int (*)(int)>("mbps_to_ibv_rate");
	auto r2m = deb.sym<int (*)(int)>("ibv_rate_to_mbps");
	for (int r = 0; r < 64; r++) {
		const int mbps = r2m(r);
		for (int v : {mbps - 1, mbps, mbps + 1})
			EXPECT_EQ(b1(v), b2(v)) << "mbps_to_ibv_rate(" << v << ")";
	}
}

namespace {

// Output of verbs_diff_probe with the given LD_LIBRARY_PATH ("" = Debian's).
std::string probe_output(const char *libdir)
{
	int fds[2];
	if (pipe(fds))
		return "pipe failed";
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		if (*libdir)
			setenv("LD_LIBRARY_PATH", libdir, 1);
		else
			unsetenv("LD_LIBRARY_PATH");
		unsetenv("LD_PRELOAD");
		execl(DIFF_PROBE, DIFF_PROBE, static_cast<char *>(nullptr));
		_exit(127);
	}
	close(fds[1]);
	std::string out;
	char buf[4096];
	ssize_t n;
	while ((n = read(fds[0], buf, sizeof(buf))) > 0)
		out.append(buf, static_cast<size_t>(n));
	close(fds[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		out += "<probe status " + std::to_string(status) + ">";
	return out;
}

} // namespace

// The same fake provider under both libraries: every observable step of the
// scenario in diff_probe.cpp must be identical.
TEST(DifferentialFake, SameProviderSameAnswers)
{
	if (access(DEBIAN_LIB, R_OK))
		GTEST_SKIP() << DEBIAN_LIB << " not installed";
	const std::string deb = probe_output("");
	const std::string ours = probe_output(OPENVERBS_LIBDIR);
	ASSERT_NE(deb.find("close=0"), std::string::npos) << deb;
	std::vector<std::string> a, b;
	for (auto *v : {&deb, &ours}) {
		auto &dst = v == &deb ? a : b;
		size_t pos = 0;
		while (pos < v->size()) {
			size_t nl = v->find('\n', pos);
			dst.push_back(v->substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
			pos = nl == std::string::npos ? v->size() : nl + 1;
		}
	}
	for (size_t i = 0; i < std::max(a.size(), b.size()); i++)
		EXPECT_EQ(i < b.size() ? b[i] : "<missing>", i < a.size() ? a[i] : "<missing>")
			<< "step " << i << " (ours vs Debian's)";
}
