// The per-context ioctl→write fallback: ENOTTY, EPROTONOSUPPORT, mandatory
// driver attributes, fallback_require_ex, fallback_ioctl_only, and the legacy
// request rebuilt in place before the provider's driver data.
#include "fake_kernel.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

using namespace ov::kernel;
using kt::FakeContext;
using kt::FakeKernel;

namespace {

// struct ibv_create_cq of kern-abi.h followed by a provider's driver data,
// and the matching response, as a provider (e.g. rxe) lays them out.
using ProviderCreateCq = kt::WithDrv<LegacyReq<ib_uverbs_create_cq>, 16>;
using ProviderCreateCqResp = kt::WithDrv<struct ib_uverbs_create_cq_resp, 8>;

int create_cq(FakeContext &c, ProviderCreateCq &cmd, ProviderCreateCqResp &resp, struct ibv_cq &cq)
{
	return ibv_cmd_create_cq(c.ctx(), 64, nullptr, 2, &cq, cmd.as<struct ibv_create_cq>(), sizeof(cmd),
				 resp.head(), sizeof(resp));
}

} // namespace

TEST(Fallback, EnottyMarksEveryOpLegacyAndWritesInPlace)
{
	FakeKernel k;
	FakeContext c(false); // a kernel without ioctl has no INVOKE_WRITE either
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return ENOTTY; };
	ProviderCreateCq cmd;
	cmd.drv()[0] = 0xd0d0;
	cmd.drv()[1] = 0xd1d1;
	ProviderCreateCqResp resp;
	struct ibv_cq cq = {};
	k.on_write = [&](const void *, size_t) {
		resp.head()->cq_handle = 9;
		resp.head()->cqe = 127;
		*resp.drv() = 0x5555;
		return 0;
	};
	ASSERT_EQ(0, create_cq(c, cmd, resp, cq));
	EXPECT_EQ(9u, cq.handle);
	EXPECT_EQ(127, cq.cqe);
	EXPECT_EQ(c.ctx(), cq.context);
	for (unsigned b = 0; b < kVerbsOpsCount; ++b)
		EXPECT_TRUE(c.bit(b)) << b;

	// One write, of the provider's own buffer: header + core + driver data.
	ASSERT_EQ(1u, k.writes.size());
	ProviderCreateCq want;
	want.head()->hdr.command = IB_USER_VERBS_CMD_CREATE_CQ;
	want.head()->hdr.in_words = sizeof(ProviderCreateCq) / 4;
	want.head()->hdr.out_words = sizeof(ProviderCreateCqResp) / 4;
	want.head()->core.response = (uintptr_t)&resp;
	want.head()->core.user_handle = (uintptr_t)&cq;
	want.head()->core.cqe = 64;
	want.head()->core.comp_vector = 2;
	want.head()->core.comp_channel = -1;
	want.drv()[0] = 0xd0d0;
	want.drv()[1] = 0xd1d1;
	ASSERT_EQ(sizeof(want), k.writes[0].bytes.size());
	EXPECT_EQ(0, std::memcmp(k.writes[0].bytes.data(), &want, sizeof(want)));
	EXPECT_EQ(0, std::memcmp(&cmd, &want, sizeof(want))) << "built in the provider's buffer";

	// From now on no ioctl is tried for any op.
	size_t n = k.ioctls.size();
	ASSERT_EQ(0, create_cq(c, cmd, resp, cq));
	struct ibv_pd pd = {};
	pd.context = c.ctx();
	ASSERT_EQ(0, ibv_cmd_dealloc_pd(&pd));
	EXPECT_EQ(n, k.ioctls.size());
	EXPECT_EQ(3u, k.writes.size());
}

TEST(Fallback, EprotonosupportMarksOnlyThatOp)
{
	FakeKernel k;
	FakeContext c(false);
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *hdr) {
		return hdr->object_id == UVERBS_OBJECT_QP ? EPROTONOSUPPORT : 0;
	};
	struct ibv_qp qp = {};
	qp.context = c.ctx();
	qp.handle = 12;
	pthread_mutex_init(&qp.mutex, nullptr);
	pthread_cond_init(&qp.cond, nullptr);
	k.on_write = [](const void *buf, size_t) {
		// The kernel reports no events for this QP.
		auto *req = static_cast<const LegacyReq<ib_uverbs_destroy_qp> *>(buf);
		auto *r = reinterpret_cast<struct ib_uverbs_destroy_qp_resp *>((uintptr_t)req->core.response);
		r->events_reported = 0;
		return 0;
	};
	ASSERT_EQ(0, ibv_cmd_destroy_qp(&qp));
	EXPECT_TRUE(c.bit(OV_FALLBACK_BIT(destroy_qp)));
	for (unsigned b = 0; b < kVerbsOpsCount; ++b) {
		if (b != OV_FALLBACK_BIT(destroy_qp)) {
			EXPECT_FALSE(c.bit(b)) << b;
		}
	}
	ASSERT_EQ(1u, k.writes.size());
	LegacyReq<ib_uverbs_destroy_qp> want = {};
	want.hdr.command = IB_USER_VERBS_CMD_DESTROY_QP;
	want.hdr.in_words = sizeof(want) / 4;
	want.hdr.out_words = sizeof(struct ib_uverbs_destroy_qp_resp) / 4;
	want.core.qp_handle = 12;
	LegacyReq<ib_uverbs_destroy_qp> got;
	ASSERT_EQ(sizeof(got), k.writes[0].bytes.size());
	std::memcpy(&got, k.writes[0].bytes.data(), sizeof(got));
	want.core.response = got.core.response; // a stack address
	EXPECT_EQ(0, std::memcmp(&got, &want, sizeof(want)));

	// Other objects still go through ioctl.
	struct ibv_pd pd = {};
	pd.context = c.ctx();
	size_t n = k.ioctls.size();
	ASSERT_EQ(0, ibv_cmd_dealloc_pd(&pd));
	EXPECT_EQ(n + 1, k.ioctls.size());
	EXPECT_EQ(1u, k.writes.size());
}

TEST(Fallback, OtherErrorsDoNotFallBack)
{
	FakeKernel k;
	FakeContext c;
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return EINVAL; };
	ProviderCreateCq cmd;
	ProviderCreateCqResp resp;
	struct ibv_cq cq = {};
	EXPECT_EQ(EINVAL, create_cq(c, cmd, resp, cq));
	EXPECT_TRUE(k.writes.empty());
	for (unsigned b = 0; b < kVerbsOpsCount; ++b)
		EXPECT_FALSE(c.bit(b));
}

TEST(Fallback, LegacyModeRules)
{
	int ret = 0;
	CommandBuffer drv(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE, 4);
	CommandBuffer cmdb(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE, 2, drv.get());
	EXPECT_EQ(Fallback::TryWrite, legacy_mode(cmdb.get(), &ret));

	// Mandatory UHW attributes can be carried by write().
	uint32_t x = 0;
	drv.in_uhw(UVERBS_ATTR_UHW_IN, &x, sizeof(x));
	drv.out(UVERBS_ATTR_UHW_OUT, &x, sizeof(x));
	EXPECT_EQ(Fallback::TryWrite, legacy_mode(cmdb.get(), &ret));

	// An optional driver attribute is dropped silently ...
	drv.const_in(0x1010, 1)->flags = 0;
	EXPECT_EQ(Fallback::TryWrite, legacy_mode(cmdb.get(), &ret));

	// ... a mandatory one cannot be expressed.
	drv.const_in(0x1011, 1);
	errno = 0;
	EXPECT_EQ(Fallback::Error, legacy_mode(cmdb.get(), &ret));
	EXPECT_EQ(EOPNOTSUPP, ret);
	EXPECT_EQ(EOPNOTSUPP, errno);

	// Our own attributes are never checked (they are rebuilt for write()).
	CommandBuffer drv2(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE, 1);
	CommandBuffer cmdb2(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE, 2, drv2.get());
	cmdb2.const_in(UVERBS_ATTR_CREATE_CQ_CQE, 1);
	EXPECT_EQ(Fallback::TryWrite, legacy_mode(cmdb2.get(), &ret));
	drv2->fallback_require_ex = 1;
	EXPECT_EQ(Fallback::TryWriteEx, legacy_mode(cmdb2.get(), &ret));
	cmdb2.ioctl_only();
	EXPECT_EQ(Fallback::Error, legacy_mode(cmdb2.get(), &ret));
	EXPECT_EQ(EOPNOTSUPP, ret);
}

TEST(Fallback, RequireExSendsTheExtendedCommandWithDriverData)
{
	FakeKernel k;
	FakeContext c;
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return EPROTONOSUPPORT; };
	using ProviderCreateCqEx = kt::WithDrv<LegacyReqEx<ib_uverbs_ex_create_cq>, 8>;
	ProviderCreateCqEx cmd;
	*cmd.drv() = 0xabcdef;
	kt::WithDrv<struct ib_uverbs_ex_create_cq_resp, 8> resp;
	struct verbs_cq cq = {};
	struct ibv_cq_init_attr_ex attr = {};
	attr.cqe = 32;
	attr.comp_vector = 1;
	attr.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
	attr.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
	k.on_write = [&](const void *, size_t) {
		resp.head()->base.cq_handle = 4;
		resp.head()->base.cqe = 63;
		return 0;
	};
	ASSERT_EQ(0, ibv_cmd_create_cq_ex(c.ctx(), &attr, OV_CQ_PROV_ATTR &cq, cmd.as<struct ibv_create_cq_ex>(), sizeof(cmd),
					  resp.head(), sizeof(resp), 0));
	EXPECT_EQ(4u, cq.cq.handle);
	EXPECT_EQ(63, cq.cq.cqe);
	ASSERT_EQ(1u, k.writes.size());
	ProviderCreateCqEx want;
	auto *w = want.head();
	w->hdr.command = IB_USER_VERBS_CMD_FLAG_EXTENDED | IB_USER_VERBS_EX_CMD_CREATE_CQ;
	w->hdr.in_words = sizeof(w->core) / 8;
	w->hdr.out_words = sizeof(struct ib_uverbs_ex_create_cq_resp) / 8;
	w->ex_hdr.response = (uintptr_t)&resp;
	w->ex_hdr.provider_in_words = 1;
	w->ex_hdr.provider_out_words = 1;
	w->core.user_handle = (uintptr_t)&cq;
	w->core.cqe = 32;
	w->core.comp_vector = 1;
	w->core.comp_channel = -1;
	w->core.flags = IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN;
	*want.drv() = 0xabcdef;
	ASSERT_EQ(sizeof(want), k.writes[0].bytes.size());
	EXPECT_EQ(0, std::memcmp(k.writes[0].bytes.data(), &want, sizeof(want)));
}

TEST(Fallback, TimestampIgnoredByProviderAllowsTheBasicCommand)
{
	FakeKernel k;
	FakeContext c;
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return ENOTTY; };
	LegacyReqEx<ib_uverbs_ex_create_cq> cmd = {};
	struct ib_uverbs_ex_create_cq_resp resp = {};
	struct verbs_cq cq = {};
	struct ibv_cq_init_attr_ex attr = {};
	attr.cqe = 8;
	attr.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	ASSERT_EQ(0, ibv_cmd_create_cq_ex(c.ctx(), &attr, OV_CQ_PROV_ATTR &cq, reinterpret_cast<struct ibv_create_cq_ex *>(&cmd),
					  sizeof(cmd), &resp, sizeof(resp), 1 /* CREATE_CQ_CMD_FLAGS_TS_IGNORED_EX */));
	ASSERT_EQ(1u, k.writes.size());
	struct ib_uverbs_cmd_hdr hdr;
	std::memcpy(&hdr, k.writes[0].bytes.data(), sizeof(hdr));
	EXPECT_EQ((uint32_t)IB_USER_VERBS_CMD_CREATE_CQ, hdr.command);

	// Without the provider's consent the extended command is required.
	ASSERT_EQ(0, ibv_cmd_create_cq_ex(c.ctx(), &attr, OV_CQ_PROV_ATTR &cq, reinterpret_cast<struct ibv_create_cq_ex *>(&cmd),
					  sizeof(cmd), &resp, sizeof(resp), 0));
	std::memcpy(&hdr, k.writes[1].bytes.data(), sizeof(hdr));
	EXPECT_EQ(IB_USER_VERBS_CMD_FLAG_EXTENDED | IB_USER_VERBS_EX_CMD_CREATE_CQ, hdr.command);
}

TEST(Fallback, ImportedContextsCannotCreateSrqsByWrite)
{
	FakeKernel k;
	FakeContext c;
	c.priv.imported = true;
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return ENOTTY; };
	struct ibv_pd pd = {};
	pd.context = c.ctx();
	struct ibv_srq srq = {};
	struct ibv_srq_init_attr attr = {};
	attr.attr.max_wr = 4;
	attr.attr.max_sge = 1;
	LegacyReq<ib_uverbs_create_srq> cmd = {};
	struct ib_uverbs_create_srq_resp resp = {};
	EXPECT_EQ(EOPNOTSUPP, ibv_cmd_create_srq(&pd, &srq, &attr, reinterpret_cast<struct ibv_create_srq *>(&cmd),
						 sizeof(cmd), &resp, sizeof(resp)));
	EXPECT_TRUE(k.writes.empty());
}

TEST(Fallback, DisassociatedDestroyCountsAsSuccessWhenAllowed)
{
	FakeKernel k;
	FakeContext c;
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return EIO; };
	struct ibv_cq cq = {};
	cq.context = c.ctx();
	pthread_mutex_init(&cq.mutex, nullptr);
	pthread_cond_init(&cq.cond, nullptr);
	cq.comp_events_completed = 3; // would never match: success must not wait

	verbs_allow_disassociate_destroy = false;
	EXPECT_EQ(EIO, ibv_cmd_destroy_cq(&cq));
	verbs_allow_disassociate_destroy = true;
	EXPECT_EQ(0, ibv_cmd_destroy_cq(&cq));
	struct ibv_pd pd = {};
	pd.context = c.ctx();
	EXPECT_EQ(0, ibv_cmd_dealloc_pd(&pd));
	verbs_allow_disassociate_destroy = false;
	EXPECT_EQ(EIO, ibv_cmd_dealloc_pd(&pd));
}

// ---------------------------------------------------------------------------
// The shared destroy path (destroy_handle): what each destroy sends by ioctl
// and, after the fallback, by write.

namespace {

// The kernel's answer to a legacy write: zeroed response of `size` bytes at
// the address the request names (plain head: core.response; extended head:
// ex_hdr.response).
void zero_plain_resp(const void *buf, size_t size)
{
	auto *req = static_cast<const LegacyReq<ib_uverbs_destroy_cq> *>(buf);
	std::memset(reinterpret_cast<void *>((uintptr_t)req->core.response), 0, size);
}

template <class Obj> void init_sync(Obj &o, FakeContext &c)
{
	o.context = c.ctx();
	pthread_mutex_init(&o.mutex, nullptr);
	pthread_cond_init(&o.cond, nullptr);
}

} // namespace

TEST(Destroy, IoctlCarriesTheAnswerThenTheHandle)
{
	FakeKernel k;
	FakeContext c;
	struct ibv_cq cq = {};
	struct ibv_qp qp = {};
	struct ibv_srq srq = {};
	init_sync(cq, c);
	init_sync(qp, c);
	init_sync(srq, c);
	cq.handle = 3;
	qp.handle = 4;
	srq.handle = 5;
	ASSERT_EQ(0, ibv_cmd_destroy_cq(&cq));
	ASSERT_EQ(0, ibv_cmd_destroy_qp(&qp));
	ASSERT_EQ(0, ibv_cmd_destroy_srq(&srq));
	ASSERT_EQ(3u, k.ioctls.size());
	struct Want {
		uint16_t object, method, resp_attr, handle_attr;
		size_t resp_len;
		uint32_t handle;
	} want[] = {
		{UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_DESTROY, UVERBS_ATTR_DESTROY_CQ_RESP, UVERBS_ATTR_DESTROY_CQ_HANDLE,
		 sizeof(struct ib_uverbs_destroy_cq_resp), 3},
		{UVERBS_OBJECT_QP, UVERBS_METHOD_QP_DESTROY, UVERBS_ATTR_DESTROY_QP_RESP, UVERBS_ATTR_DESTROY_QP_HANDLE,
		 sizeof(struct ib_uverbs_destroy_qp_resp), 4},
		{UVERBS_OBJECT_SRQ, UVERBS_METHOD_SRQ_DESTROY, UVERBS_ATTR_DESTROY_SRQ_RESP,
		 UVERBS_ATTR_DESTROY_SRQ_HANDLE, sizeof(struct ib_uverbs_destroy_srq_resp), 5},
	};
	for (size_t i = 0; i < 3; ++i) {
		const kt::IoctlCall &call = k.ioctls[i];
		EXPECT_EQ(want[i].object, call.hdr().object_id) << i;
		EXPECT_EQ(want[i].method, call.hdr().method_id) << i;
		ASSERT_EQ(2u, call.attrs.size()) << i;
		EXPECT_EQ(want[i].resp_attr, call.attrs[0].attr_id) << i;
		EXPECT_EQ(want[i].resp_len, call.attrs[0].len) << i;
		EXPECT_EQ(want[i].handle_attr, call.attrs[1].attr_id) << i;
		EXPECT_EQ(want[i].handle, call.attrs[1].data) << i;
	}
	EXPECT_TRUE(k.writes.empty());
}

TEST(Destroy, WqIoctlAnswersTheCountWriteTheWholeResponse)
{
	{
		FakeKernel k;
		FakeContext c;
		struct ibv_wq wq = {};
		init_sync(wq, c);
		wq.handle = 8;
		ASSERT_EQ(0, ibv_cmd_destroy_wq(&wq));
		ASSERT_EQ(1u, k.ioctls.size());
		const kt::IoctlCall &call = k.ioctls[0];
		EXPECT_EQ(UVERBS_OBJECT_WQ, call.hdr().object_id);
		EXPECT_EQ(UVERBS_METHOD_WQ_DESTROY, call.hdr().method_id);
		ASSERT_EQ(2u, call.attrs.size());
		EXPECT_EQ(UVERBS_ATTR_DESTROY_WQ_RESP, call.attrs[0].attr_id);
		EXPECT_EQ(sizeof(uint32_t), call.attrs[0].len);
		EXPECT_EQ(UVERBS_ATTR_DESTROY_WQ_HANDLE, call.attrs[1].attr_id);
		EXPECT_EQ(8u, call.attrs[1].data);
	}
	{
		FakeKernel k;
		FakeContext c(false);
		k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return ENOTTY; };
		k.on_write = [](const void *buf, size_t) {
			auto *req = static_cast<const LegacyReqEx<ib_uverbs_ex_destroy_wq> *>(buf);
			std::memset(reinterpret_cast<void *>((uintptr_t)req->ex_hdr.response), 0,
				    sizeof(struct ib_uverbs_ex_destroy_wq_resp));
			return 0;
		};
		struct ibv_wq wq = {};
		init_sync(wq, c);
		wq.handle = 8;
		ASSERT_EQ(0, ibv_cmd_destroy_wq(&wq));
		ASSERT_EQ(1u, k.writes.size());
		LegacyReqEx<ib_uverbs_ex_destroy_wq> got;
		ASSERT_EQ(sizeof(got), k.writes[0].bytes.size());
		std::memcpy(&got, k.writes[0].bytes.data(), sizeof(got));
		EXPECT_EQ(IB_USER_VERBS_CMD_FLAG_EXTENDED | IB_USER_VERBS_EX_CMD_DESTROY_WQ, got.hdr.command);
		EXPECT_EQ(sizeof(got.core) / 8, got.hdr.in_words);
		EXPECT_EQ(sizeof(struct ib_uverbs_ex_destroy_wq_resp) / 8, got.hdr.out_words);
		EXPECT_NE(0u, got.ex_hdr.response);
		EXPECT_EQ(8u, got.core.wq_handle);
	}
}

TEST(Destroy, LegacyWritesOfCqAndSrqAnswerTheirResponse)
{
	FakeKernel k;
	FakeContext c(false);
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return ENOTTY; };
	size_t resp_size = 0;
	k.on_write = [&](const void *buf, size_t) {
		zero_plain_resp(buf, resp_size);
		return 0;
	};
	struct ibv_cq cq = {};
	init_sync(cq, c);
	cq.handle = 21;
	resp_size = sizeof(struct ib_uverbs_destroy_cq_resp);
	ASSERT_EQ(0, ibv_cmd_destroy_cq(&cq));
	struct ibv_srq srq = {};
	init_sync(srq, c);
	srq.handle = 22;
	resp_size = sizeof(struct ib_uverbs_destroy_srq_resp);
	ASSERT_EQ(0, ibv_cmd_destroy_srq(&srq));
	ASSERT_EQ(2u, k.writes.size());

	LegacyReq<ib_uverbs_destroy_cq> cq_req;
	ASSERT_EQ(sizeof(cq_req), k.writes[0].bytes.size());
	std::memcpy(&cq_req, k.writes[0].bytes.data(), sizeof(cq_req));
	EXPECT_EQ(IB_USER_VERBS_CMD_DESTROY_CQ, cq_req.hdr.command);
	EXPECT_EQ(sizeof(cq_req) / 4, cq_req.hdr.in_words);
	EXPECT_EQ(sizeof(struct ib_uverbs_destroy_cq_resp) / 4, cq_req.hdr.out_words);
	EXPECT_EQ(21u, cq_req.core.cq_handle);

	LegacyReq<ib_uverbs_destroy_srq> srq_req;
	ASSERT_EQ(sizeof(srq_req), k.writes[1].bytes.size());
	std::memcpy(&srq_req, k.writes[1].bytes.data(), sizeof(srq_req));
	EXPECT_EQ(IB_USER_VERBS_CMD_DESTROY_SRQ, srq_req.hdr.command);
	EXPECT_EQ(sizeof(struct ib_uverbs_destroy_srq_resp) / 4, srq_req.hdr.out_words);
	EXPECT_EQ(22u, srq_req.core.srq_handle);
}

TEST(Destroy, HandleOnlyDestroysSendNoAnswer)
{
	FakeKernel k;
	FakeContext c(false);
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return ENOTTY; };
	struct ibv_rwq_ind_table table = {};
	table.context = c.ctx();
	table.ind_tbl_handle = 31;
	struct ibv_flow flow = {};
	flow.context = c.ctx();
	flow.handle = 32;
	struct ibv_mw mw = {};
	mw.context = c.ctx();
	mw.handle = 33;
	ASSERT_EQ(0, ibv_cmd_destroy_rwq_ind_table(&table));
	ASSERT_EQ(0, ibv_cmd_destroy_flow(&flow));
	ASSERT_EQ(0, ibv_cmd_dealloc_mw(&mw));
	ASSERT_EQ(3u, k.writes.size());

	LegacyReqEx<ib_uverbs_ex_destroy_rwq_ind_table> t;
	ASSERT_EQ(sizeof(t), k.writes[0].bytes.size());
	std::memcpy(&t, k.writes[0].bytes.data(), sizeof(t));
	EXPECT_EQ(IB_USER_VERBS_CMD_FLAG_EXTENDED | IB_USER_VERBS_EX_CMD_DESTROY_RWQ_IND_TBL, t.hdr.command);
	EXPECT_EQ(0u, t.hdr.out_words);
	EXPECT_EQ(0u, t.ex_hdr.response);
	EXPECT_EQ(31u, t.core.ind_tbl_handle);

	LegacyReqEx<ib_uverbs_destroy_flow> f;
	ASSERT_EQ(sizeof(f), k.writes[1].bytes.size());
	std::memcpy(&f, k.writes[1].bytes.data(), sizeof(f));
	EXPECT_EQ(IB_USER_VERBS_CMD_FLAG_EXTENDED | IB_USER_VERBS_EX_CMD_DESTROY_FLOW, f.hdr.command);
	EXPECT_EQ(0u, f.hdr.out_words);
	EXPECT_EQ(32u, f.core.flow_handle);

	LegacyReq<ib_uverbs_dealloc_mw> m;
	ASSERT_EQ(sizeof(m), k.writes[2].bytes.size());
	std::memcpy(&m, k.writes[2].bytes.data(), sizeof(m));
	EXPECT_EQ(IB_USER_VERBS_CMD_DEALLOC_MW, m.hdr.command);
	EXPECT_EQ(0u, m.hdr.out_words);
	EXPECT_EQ(33u, m.core.mw_handle);
}

TEST(Destroy, FailureIsReturnedWithoutWaiting)
{
	FakeKernel k;
	FakeContext c;
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return EBUSY; };
	struct ibv_srq srq = {};
	init_sync(srq, c);
	srq.events_completed = 7; // would never match: a failure must not wait
	EXPECT_EQ(EBUSY, ibv_cmd_destroy_srq(&srq));
	EXPECT_EQ(EBUSY, errno);
	struct ibv_wq wq = {};
	init_sync(wq, c);
	wq.events_completed = 7;
	EXPECT_EQ(EBUSY, ibv_cmd_destroy_wq(&wq));
	EXPECT_TRUE(k.writes.empty());
}

// The legacy SRQ creates (CREATE_SRQ, CREATE_XSRQ) built in the provider's
// request, driver data kept, the answer applied to the SRQ.
TEST(Fallback, SrqCreateByWriteBasicAndXrc)
{
	FakeKernel k;
	FakeContext c(false);
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return ENOTTY; };
	struct ibv_pd pd = {};
	pd.context = c.ctx();
	pd.handle = 2;
	uint32_t srqn = 0;
	k.on_write = [&](const void *buf, size_t) {
		// CREATE_SRQ and CREATE_XSRQ both lead with `response`.
		auto *req = static_cast<const LegacyReq<ib_uverbs_create_srq> *>(buf);
		auto *r = reinterpret_cast<struct ib_uverbs_create_srq_resp *>((uintptr_t)req->core.response);
		r->srq_handle = 70;
		r->max_wr = 128;
		r->max_sge = 6;
		r->srqn = srqn;
		return 0;
	};

	using ProviderCreateSrq = kt::WithDrv<LegacyReq<ib_uverbs_create_srq>, 8>;
	using ProviderCreateSrqResp = kt::WithDrv<struct ib_uverbs_create_srq_resp, 8>;
	ProviderCreateSrq cmd;
	*cmd.drv() = 0xabcdef;
	ProviderCreateSrqResp resp;
	struct ibv_srq srq = {};
	struct ibv_srq_init_attr attr = {};
	attr.attr.max_wr = 100;
	attr.attr.max_sge = 5;
	attr.attr.srq_limit = 9;
	srqn = 0x99; // not reported for a basic SRQ
	ASSERT_EQ(0, ibv_cmd_create_srq(&pd, &srq, &attr, cmd.as<struct ibv_create_srq>(), sizeof(cmd), resp.head(),
					sizeof(resp)));
	EXPECT_EQ(70u, srq.handle);
	EXPECT_EQ(128u, attr.attr.max_wr);
	EXPECT_EQ(6u, attr.attr.max_sge);
	ASSERT_EQ(1u, k.writes.size());
	ASSERT_EQ(sizeof(cmd), k.writes[0].bytes.size());
	ProviderCreateSrq got;
	std::memcpy(got.bytes, k.writes[0].bytes.data(), sizeof(got.bytes));
	EXPECT_EQ(IB_USER_VERBS_CMD_CREATE_SRQ, got.head()->hdr.command);
	EXPECT_EQ(sizeof(cmd) / 4, got.head()->hdr.in_words);
	EXPECT_EQ(sizeof(resp) / 4, got.head()->hdr.out_words);
	EXPECT_EQ((uintptr_t)resp.head(), got.head()->core.response);
	EXPECT_EQ((uintptr_t)&srq, got.head()->core.user_handle);
	EXPECT_EQ(2u, got.head()->core.pd_handle);
	EXPECT_EQ(100u, got.head()->core.max_wr);
	EXPECT_EQ(5u, got.head()->core.max_sge);
	EXPECT_EQ(9u, got.head()->core.srq_limit);
	EXPECT_EQ(0xabcdefu, *got.drv());

	struct verbs_xrcd xrcd = {};
	xrcd.handle = 44;
	struct ibv_cq cq = {};
	cq.handle = 55;
	struct verbs_srq vsrq = {};
	LegacyReq<ib_uverbs_create_xsrq> xcmd = {};
	struct ib_uverbs_create_srq_resp xresp = {};
	struct ibv_srq_init_attr_ex ex = {};
	ex.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_XRCD;
	ex.pd = &pd;
	ex.srq_type = IBV_SRQT_XRC;
	ex.xrcd = &xrcd.xrcd;
	ex.cq = &cq;
	ex.attr.max_wr = 16;
	ex.attr.max_sge = 1;
	srqn = 0x77;
	ASSERT_EQ(0, ibv_cmd_create_srq_ex(c.ctx(), &vsrq, &ex, reinterpret_cast<struct ibv_create_xsrq *>(&xcmd),
					   sizeof(xcmd), &xresp, sizeof(xresp)));
	EXPECT_EQ(70u, vsrq.srq.handle);
	EXPECT_EQ(0x77u, vsrq.srq_num);
	EXPECT_EQ(&xrcd, vsrq.xrcd);
	EXPECT_EQ(128u, ex.attr.max_wr);
	ASSERT_EQ(2u, k.writes.size());
	LegacyReq<ib_uverbs_create_xsrq> xgot;
	ASSERT_EQ(sizeof(xgot), k.writes[1].bytes.size());
	std::memcpy(&xgot, k.writes[1].bytes.data(), sizeof(xgot));
	EXPECT_EQ(IB_USER_VERBS_CMD_CREATE_XSRQ, xgot.hdr.command);
	EXPECT_NE(0u, xgot.core.response); // no driver data: a response on the stack
	EXPECT_EQ((uintptr_t)&vsrq.srq, xgot.core.user_handle);
	EXPECT_EQ((uint32_t)IBV_SRQT_XRC, xgot.core.srq_type);
	EXPECT_EQ(2u, xgot.core.pd_handle);
	EXPECT_EQ(55u, xgot.core.cq_handle);
	EXPECT_EQ(44u, xgot.core.xrcd_handle);
	EXPECT_EQ(16u, xgot.core.max_wr);
	EXPECT_EQ(1u, xgot.core.max_sge);
	EXPECT_EQ(0u, xgot.core.max_num_tags);
}
