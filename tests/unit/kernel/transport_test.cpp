// RDMA_VERBS_IOCTL encoding, chained provider buffers, write()/extended
// write()/INVOKE_WRITE encoding, errno passthrough and the context probe.
#include "fake_kernel.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

using namespace ov::kernel;
using kt::FakeContext;
using kt::FakeKernel;

namespace {

// The 16 bytes of one attribute, built from the uapi struct.
struct ib_uverbs_attr make_attr(uint16_t id, uint16_t len, uint16_t flags, uint64_t data)
{
	struct ib_uverbs_attr a;
	std::memset(&a, 0, sizeof(a));
	a.attr_id = id;
	a.len = len;
	a.flags = flags;
	a.data = data;
	return a;
}

void expect_attr_bytes(const struct ib_uverbs_attr &got, const struct ib_uverbs_attr &want)
{
	EXPECT_EQ(0, std::memcmp(&got, &want, sizeof(want)))
		<< "attr " << got.attr_id << " len " << got.len << " flags " << got.flags << " data " << got.data
		<< " (want id " << want.attr_id << " len " << want.len << " flags " << want.flags << " data "
		<< want.data << ")";
}

} // namespace

TEST(Ioctl, HeaderAndAttributesAreEncodedAsTheUapiStructs)
{
	FakeKernel k;
	FakeContext c(true, RDMA_DRIVER_SIW);
	CommandBuffer cmdb(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE, 8);
	ASSERT_TRUE(cmdb.ok());

	uint32_t small = 0x11223344;
	unsigned char big[20];
	std::memset(big, 0xab, sizeof(big));
	uint32_t out_val = 0;
	cmdb.in_u32(UVERBS_ATTR_CREATE_CQ_CQE, small);                          // inlined
	cmdb.in(UVERBS_ATTR_CREATE_CQ_USER_HANDLE, big, sizeof(big));             // pointer
	cmdb.const_in(UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, 7);                      // u64 inline
	cmdb.in_obj(UVERBS_ATTR_CREATE_CQ_HANDLE, 99);                            // idr in .data
	EXPECT_EQ(nullptr, cmdb.in_fd(UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, -1));   // absent
	cmdb.in_fd(UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, 5);
	cmdb.out_ptr(UVERBS_ATTR_CREATE_CQ_RESP_CQE, &out_val);

	ASSERT_EQ(0, run_ioctl(c.ctx(), cmdb.get()));
	ASSERT_EQ(1u, k.ioctls.size());
	const auto &call = k.ioctls[0];
	EXPECT_EQ(42, call.fd);
	EXPECT_EQ((unsigned long)RDMA_VERBS_IOCTL, call.request);

	struct ib_uverbs_ioctl_hdr want_hdr;
	std::memset(&want_hdr, 0, sizeof(want_hdr));
	want_hdr.length = sizeof(struct ib_uverbs_ioctl_hdr) + 6 * sizeof(struct ib_uverbs_attr);
	want_hdr.object_id = UVERBS_OBJECT_CQ;
	want_hdr.method_id = UVERBS_METHOD_CQ_CREATE;
	want_hdr.num_attrs = 6;
	want_hdr.driver_id = RDMA_DRIVER_SIW;
	EXPECT_EQ(0, std::memcmp(call.hdr_raw, &want_hdr, sizeof(want_hdr)));
	EXPECT_EQ(24u, sizeof(struct ib_uverbs_ioctl_hdr));
	EXPECT_EQ(16u, sizeof(struct ib_uverbs_attr));

	ASSERT_EQ(6u, call.attrs.size());
	const uint16_t M = UVERBS_ATTR_F_MANDATORY;
	uint64_t inl = 0;
	std::memcpy(&inl, &small, sizeof(small));
	expect_attr_bytes(call.attrs[0], make_attr(UVERBS_ATTR_CREATE_CQ_CQE, 4, M, inl));
	expect_attr_bytes(call.attrs[1], make_attr(UVERBS_ATTR_CREATE_CQ_USER_HANDLE, 20, M, (uintptr_t)big));
	EXPECT_EQ(0, std::memcmp(call.payload[1].data(), big, sizeof(big)));
	expect_attr_bytes(call.attrs[2], make_attr(UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, 8, M, 7));
	expect_attr_bytes(call.attrs[3], make_attr(UVERBS_ATTR_CREATE_CQ_HANDLE, 0, M, 99));
	expect_attr_bytes(call.attrs[4], make_attr(UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, 0, M, 5));
	expect_attr_bytes(call.attrs[5], make_attr(UVERBS_ATTR_CREATE_CQ_RESP_CQE, 4, M, (uintptr_t)&out_val));
}

TEST(Ioctl, LinkedBuffersAreAppendedAndGetTheOutputsBack)
{
	FakeKernel k;
	FakeContext c;
	// A provider's buffer, laid out as DECLARE_COMMAND_BUFFER would.
	CommandBuffer drv(UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE, 3);
	uint32_t uhw = 0xcafe;
	drv.set_uhw(nullptr, 0, 0, nullptr, 0, 0); // nothing
	struct ib_uverbs_attr *uhw_in = drv.in_uhw(UVERBS_ATTR_UHW_IN, &uhw, sizeof(uhw));
	drv->uhw_in_idx = (uint8_t)(uhw_in - drv->hdr.attrs);
	struct ib_uverbs_attr *drv_out = drv.out_obj(0x1005);

	EXPECT_EQ(5u, final_num_attrs(3, drv.get()));
	CommandBuffer cmdb(UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE, 3, drv.get());
	cmdb.in_obj(UVERBS_ATTR_CREATE_QP_PD_HANDLE, 3);

	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *hdr) {
		struct ib_uverbs_attr *o = kt::live_attr(hdr, 0x1005);
		o->data = 1234;
		o->flags |= UVERBS_ATTR_F_VALID_OUTPUT;
		return 0;
	};
	ASSERT_EQ(0, run_ioctl(c.ctx(), cmdb.get()));
	const auto &call = k.ioctls.at(0);
	ASSERT_EQ(3u, call.attrs.size());
	EXPECT_EQ(UVERBS_ATTR_CREATE_QP_PD_HANDLE, call.attrs[0].attr_id);
	EXPECT_EQ(UVERBS_ATTR_UHW_IN, call.attrs[1].attr_id);
	// UHW_IN of at most 8 bytes is inlined only when sent.
	uint64_t want = 0;
	std::memcpy(&want, &uhw, sizeof(uhw));
	EXPECT_EQ(want, call.attrs[1].data);
	EXPECT_EQ(0x1005, call.attrs[2].attr_id);
	EXPECT_EQ(1234u, read_obj(drv_out));
	EXPECT_TRUE(drv_out->flags & UVERBS_ATTR_F_VALID_OUTPUT);
}

TEST(Ioctl, BufferErrorIsEinvalWithoutASyscall)
{
	FakeKernel k;
	FakeContext c;
	CommandBuffer cmdb(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT, 1);
	static unsigned char huge[70000];
	cmdb.in(UVERBS_ATTR_QUERY_PORT_RESP, huge, sizeof(huge));
	errno = 0;
	EXPECT_EQ(EINVAL, run_ioctl(c.ctx(), cmdb.get()));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_TRUE(k.ioctls.empty());
}

TEST(Ioctl, TooManyAttributesFlagTheBuffer)
{
	FakeKernel k;
	FakeContext c;
	CommandBuffer cmdb(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT, 1);
	EXPECT_NE(nullptr, cmdb.const_in(1, 1));
	EXPECT_EQ(nullptr, cmdb.const_in(2, 2));
	EXPECT_EQ(EINVAL, run_ioctl(c.ctx(), cmdb.get()));
	EXPECT_TRUE(k.ioctls.empty());
}

TEST(Ioctl, ChainThatDoesNotFitIsEnospc)
{
	FakeKernel k;
	FakeContext c;
	CommandBuffer drv(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT, 2);
	drv.const_in(0x1000, 1);
	drv.const_in(0x1001, 2);
	// A final buffer sized without the link (a provider bug).
	CommandBuffer cmdb(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT, 1);
	cmdb->next = drv.get();
	cmdb.const_in(1, 1);
	EXPECT_EQ(ENOSPC, run_ioctl(c.ctx(), cmdb.get()));
	EXPECT_TRUE(k.ioctls.empty());
}

TEST(Ioctl, KernelErrnoPassesThroughUnchanged)
{
	FakeKernel k;
	FakeContext c;
	for (int err : {EFAULT, ENOSPC, EOPNOTSUPP, EPERM, EIO, ENOMEM}) {
		k.on_ioctl = [err](struct ib_uverbs_ioctl_hdr *) { return err; };
		CommandBuffer cmdb(UVERBS_OBJECT_PD, UVERBS_METHOD_PD_DESTROY, 1);
		cmdb.in_obj(UVERBS_ATTR_DESTROY_PD_HANDLE, 1);
		errno = 0;
		EXPECT_EQ(err, run_ioctl(c.ctx(), cmdb.get()));
		EXPECT_EQ(err, errno);
	}
}

TEST(Probe, InvokeWriteIsDetectedFromTheKernelsAnswer)
{
	FakeKernel k;
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return ENOSPC; };
	EXPECT_TRUE(probe_ioctl_write(7));
	const auto &call = k.ioctls.at(0);
	EXPECT_EQ(7, call.fd);
	EXPECT_EQ(UVERBS_OBJECT_DEVICE, call.hdr().object_id);
	EXPECT_EQ(UVERBS_METHOD_INVOKE_WRITE, call.hdr().method_id);
	ASSERT_EQ(1u, call.attrs.size());
	expect_attr_bytes(call.attrs[0], make_attr(UVERBS_ATTR_WRITE_CMD, 8, UVERBS_ATTR_F_MANDATORY,
						   IB_USER_VERBS_CMD_QUERY_DEVICE));

	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return EPROTONOSUPPORT; };
	EXPECT_FALSE(probe_ioctl_write(7));
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return ENOTTY; };
	errno = 1234;
	EXPECT_FALSE(probe_ioctl_write(7, RDMA_DRIVER_RXE));
	EXPECT_EQ(1234, errno) << "the probe leaves errno alone";
	EXPECT_EQ((uint32_t)RDMA_DRIVER_RXE, k.ioctls.back().hdr().driver_id);
	size_t n = k.ioctls.size();
	EXPECT_FALSE(probe_ioctl_write(-1));
	EXPECT_EQ(n, k.ioctls.size()) << "no device fd, no syscall";
}

TEST(Probe, AsyncFdComesFromTheFdOutAttribute)
{
	FakeKernel k;
	FakeContext c;
	c.ctx()->async_fd = -1;
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *hdr) {
		kt::live_attr(hdr, UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE)->data = 17;
		return 0;
	};
	ASSERT_EQ(0, alloc_async_fd(c.ctx()));
	EXPECT_EQ(17, c.ctx()->async_fd);
	EXPECT_EQ(UVERBS_OBJECT_ASYNC_EVENT, k.ioctls.at(0).hdr().object_id);
	EXPECT_EQ(UVERBS_METHOD_ASYNC_EVENT_ALLOC, k.ioctls.at(0).hdr().method_id);
}

// ---------------------------------------------------------------------------
// write() protocols

namespace {

// struct ibv_alloc_pd of kern-abi.h plus 8 bytes of driver data.
// (The uapi structs end in flexible arrays, so their fields are spelled out.)
struct ProviderAllocPd {
	struct ib_uverbs_cmd_hdr hdr;
	uint64_t response; // struct ib_uverbs_alloc_pd
	uint64_t drv;
};
static_assert(sizeof(struct ib_uverbs_alloc_pd) == 8, "alloc_pd core is the response pointer");
struct ProviderAllocPdResp {
	uint32_t pd_handle; // struct ib_uverbs_alloc_pd_resp
	uint32_t drv;
};
static_assert(sizeof(struct ib_uverbs_alloc_pd_resp) == 4, "alloc_pd resp is the handle");
struct ib_uverbs_alloc_pd_resp *core(ProviderAllocPdResp &r)
{
	return reinterpret_cast<struct ib_uverbs_alloc_pd_resp *>(&r);
}

} // namespace

TEST(Write, LegacyWriteIsHeaderCoreAndDriverData)
{
	FakeKernel k;
	FakeContext c(false);
	ProviderAllocPd cmd = {};
	cmd.drv = 0x0102030405060708ULL;
	ProviderAllocPdResp resp = {};
	struct ibv_pd pd = {};
	k.on_write = [&](const void *, size_t) {
		resp.pd_handle = 77;
		return 0;
	};
	ASSERT_EQ(0, ibv_cmd_alloc_pd(c.ctx(), &pd, reinterpret_cast<struct ibv_alloc_pd *>(&cmd), sizeof(cmd),
				      core(resp), sizeof(resp)));
	EXPECT_EQ(77u, pd.handle);
	EXPECT_EQ(c.ctx(), pd.context);
	ASSERT_EQ(1u, k.writes.size());
	EXPECT_TRUE(k.ioctls.empty());

	ProviderAllocPd want = {};
	want.hdr.command = IB_USER_VERBS_CMD_ALLOC_PD;
	want.hdr.in_words = sizeof(ProviderAllocPd) / 4;
	want.hdr.out_words = sizeof(ProviderAllocPdResp) / 4;
	want.response = (uintptr_t)&resp;
	want.drv = cmd.drv;
	ASSERT_EQ(sizeof(want), k.writes[0].bytes.size());
	EXPECT_EQ(0, std::memcmp(k.writes[0].bytes.data(), &want, sizeof(want)));
	EXPECT_EQ(42, k.writes[0].fd);
}

TEST(Write, WriteCommandsUseWriteAlsoWhenTheTunnelExists)
{
	FakeKernel k;
	FakeContext c(true);
	ProviderAllocPd cmd = {};
	cmd.drv = 0x0102030405060708ULL;
	ProviderAllocPdResp resp = {};
	struct ibv_pd pd = {};
	k.on_write = [&](const void *, size_t) {
		resp.pd_handle = 78;
		return 0;
	};
	ASSERT_EQ(0, ibv_cmd_alloc_pd(c.ctx(), &pd, reinterpret_cast<struct ibv_alloc_pd *>(&cmd), sizeof(cmd),
				      core(resp), sizeof(resp)));
	EXPECT_EQ(78u, pd.handle);
	EXPECT_TRUE(k.ioctls.empty());
	ASSERT_EQ(1u, k.writes.size());
	ProviderAllocPd want = {};
	want.hdr.command = IB_USER_VERBS_CMD_ALLOC_PD;
	want.hdr.in_words = sizeof(ProviderAllocPd) / 4;
	want.hdr.out_words = sizeof(ProviderAllocPdResp) / 4;
	want.response = (uintptr_t)&resp;
	want.drv = cmd.drv;
	ASSERT_EQ(sizeof(want), k.writes[0].bytes.size());
	EXPECT_EQ(0, std::memcmp(k.writes[0].bytes.data(), &want, sizeof(want)));

	// Kernel errors other than EACCES are the answer: no second attempt.
	k.on_write = [](const void *, size_t) { return EINVAL; };
	errno = 0;
	EXPECT_EQ(EINVAL, ibv_cmd_alloc_pd(c.ctx(), &pd, reinterpret_cast<struct ibv_alloc_pd *>(&cmd),
					   sizeof(cmd), core(resp), sizeof(resp)));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(2u, k.writes.size());
	EXPECT_TRUE(k.ioctls.empty());
}

TEST(Write, SizesOutsideTheWriteHeaderTakeTheTunnel)
{
	FakeKernel k;
	FakeContext c(true);
	alignas(8) unsigned char req[kHdrSize + 8 + 6] = {};
	uint32_t resp[2] = {};
	// 6 bytes of driver data cannot be counted in 4-byte words.
	ASSERT_EQ(0, send_write(c.ctx(), IB_USER_VERBS_CMD_ALLOC_PD, req, kHdrSize + 8, sizeof(req), resp, 4,
				sizeof(resp)));
	EXPECT_TRUE(k.writes.empty());
	const auto &call = k.ioctls.at(0);
	EXPECT_EQ(UVERBS_METHOD_INVOKE_WRITE, call.hdr().method_id);
	ASSERT_NE(nullptr, call.find(UVERBS_ATTR_UHW_IN));
	EXPECT_EQ(6u, call.find(UVERBS_ATTR_UHW_IN)->len);

	// Without a tunnel the write() goes out as before (the kernel judges it).
	FakeContext w(false);
	ASSERT_EQ(0, send_write(w.ctx(), IB_USER_VERBS_CMD_ALLOC_PD, req, kHdrSize + 8, sizeof(req), resp, 4,
				sizeof(resp)));
	ASSERT_EQ(1u, k.writes.size());
	EXPECT_EQ(sizeof(req), k.writes[0].bytes.size());
}

TEST(Write, InvokeWriteTunnelCarriesCoreAndUhwAsAttributes)
{
	FakeKernel k;
	FakeContext c(true);
	ProviderAllocPd cmd = {};
	cmd.drv = 0x1122334455667788ULL;
	ProviderAllocPdResp resp = {};
	struct ibv_pd pd = {};
	// write() refused (credentials changed since the device was opened):
	// the same command goes through the tunnel.
	k.on_write = [](const void *, size_t) { return EACCES; };
	ASSERT_EQ(0, ibv_cmd_alloc_pd(c.ctx(), &pd, reinterpret_cast<struct ibv_alloc_pd *>(&cmd), sizeof(cmd),
				      core(resp), sizeof(resp)));
	EXPECT_EQ(1u, k.writes.size());
	const auto &call = k.ioctls.at(0);
	EXPECT_EQ(UVERBS_OBJECT_DEVICE, call.hdr().object_id);
	EXPECT_EQ(UVERBS_METHOD_INVOKE_WRITE, call.hdr().method_id);
	const uint16_t M = UVERBS_ATTR_F_MANDATORY;
	ASSERT_EQ(5u, call.attrs.size());
	expect_attr_bytes(call.attrs[0], make_attr(UVERBS_ATTR_WRITE_CMD, 8, M, IB_USER_VERBS_CMD_ALLOC_PD));
	// CORE_IN is the 8-byte ib_uverbs_alloc_pd (just `response`), inlined.
	expect_attr_bytes(call.attrs[1], make_attr(UVERBS_ATTR_CORE_IN, 8, M, (uintptr_t)&resp));
	expect_attr_bytes(call.attrs[2], make_attr(UVERBS_ATTR_CORE_OUT, 4, M, (uintptr_t)&resp));
	expect_attr_bytes(call.attrs[3], make_attr(UVERBS_ATTR_UHW_IN, 8, M, cmd.drv));
	expect_attr_bytes(call.attrs[4], make_attr(UVERBS_ATTR_UHW_OUT, 4, M, (uintptr_t)&resp.drv));
}

TEST(Write, TheTunnelIsProbedOnFirstNeedOnce)
{
	FakeKernel k;
	FakeContext c;
	c.priv.ioctl_write = kIoctlWriteUnknown; // as a freshly opened context
	ProviderAllocPd cmd = {};
	ProviderAllocPdResp resp = {};
	struct ibv_pd pd = {};
	auto alloc_pd = [&] {
		return ibv_cmd_alloc_pd(c.ctx(), &pd, reinterpret_cast<struct ibv_alloc_pd *>(&cmd), sizeof(cmd),
					core(resp), sizeof(resp));
	};
	// write() accepted: the tunnel is never asked about.
	ASSERT_EQ(0, alloc_pd());
	EXPECT_TRUE(k.ioctls.empty());
	EXPECT_EQ(kIoctlWriteUnknown, c.priv.ioctl_write);

	// write() refused: the probe, then the command through the tunnel.
	k.on_write = [](const void *, size_t) { return EACCES; };
	k.on_ioctl = [&](struct ib_uverbs_ioctl_hdr *) { return k.ioctls.size() == 1 ? ENOSPC : 0; };
	ASSERT_EQ(0, alloc_pd());
	ASSERT_EQ(2u, k.ioctls.size());
	EXPECT_EQ(UVERBS_METHOD_INVOKE_WRITE, k.ioctls[0].hdr().method_id);
	ASSERT_EQ(1u, k.ioctls[0].attrs.size()) << "the probe: WRITE_CMD alone";
	EXPECT_EQ(5u, k.ioctls[1].attrs.size()) << "the tunnelled command";
	EXPECT_EQ(kIoctlWriteYes, c.priv.ioctl_write);
	ASSERT_EQ(0, alloc_pd());
	EXPECT_EQ(3u, k.ioctls.size()) << "probed once per context";

	// A kernel without the tunnel: the refusal is the answer, probed once.
	FakeKernel k2;
	FakeContext old;
	old.priv.ioctl_write = kIoctlWriteUnknown;
	k2.on_write = [](const void *, size_t) { return EACCES; };
	k2.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return EPROTONOSUPPORT; };
	for (int i = 0; i < 2; i++) {
		errno = 0;
		EXPECT_EQ(EACCES, ibv_cmd_alloc_pd(old.ctx(), &pd, reinterpret_cast<struct ibv_alloc_pd *>(&cmd),
						   sizeof(cmd), core(resp), sizeof(resp)));
		EXPECT_EQ(EACCES, errno);
	}
	EXPECT_EQ(1u, k2.ioctls.size());
	EXPECT_EQ(kIoctlWriteNo, old.priv.ioctl_write);
}

TEST(Write, ExtendedWriteHasTheExHeader)
{
	FakeKernel k;
	FakeContext c(false);
	LegacyReqEx<ib_uverbs_ex_modify_cq> cmd = {};
	struct ibv_cq cq = {};
	cq.context = c.ctx();
	cq.handle = 5;
	struct ibv_modify_cq_attr attr = {};
	attr.attr_mask = IBV_CQ_ATTR_MODERATE;
	attr.moderate.cq_count = 16;
	attr.moderate.cq_period = 100;
	ASSERT_EQ(0, ibv_cmd_modify_cq(&cq, &attr, reinterpret_cast<struct ibv_modify_cq *>(&cmd), sizeof(cmd)));
	ASSERT_EQ(1u, k.writes.size());
	decltype(cmd) want = {};
	want.hdr.command = IB_USER_VERBS_CMD_FLAG_EXTENDED | IB_USER_VERBS_EX_CMD_MODIFY_CQ;
	want.hdr.in_words = sizeof(want.core) / 8;
	want.hdr.out_words = 0;
	want.ex_hdr.provider_in_words = 0;
	want.ex_hdr.provider_out_words = 0;
	want.ex_hdr.response = 0;
	want.core.cq_handle = 5;
	want.core.attr_mask = IBV_CQ_ATTR_MODERATE;
	want.core.attr.cq_count = 16;
	want.core.attr.cq_period = 100;
	ASSERT_EQ(sizeof(want), k.writes[0].bytes.size());
	EXPECT_EQ(0, std::memcmp(k.writes[0].bytes.data(), &want, sizeof(want)));

	// With a tunnel, write() is still used first.
	FakeContext t(true);
	cq.context = t.ctx();
	ASSERT_EQ(0, ibv_cmd_modify_cq(&cq, &attr, reinterpret_cast<struct ibv_modify_cq *>(&cmd), sizeof(cmd)));
	ASSERT_EQ(2u, k.writes.size());
	EXPECT_TRUE(k.ioctls.empty());
	EXPECT_EQ(0, std::memcmp(k.writes[1].bytes.data(), &want, sizeof(want)));

	// Through the tunnel (write() refused with EACCES) the command number
	// keeps the extended flag.
	k.on_write = [](const void *, size_t) { return EACCES; };
	ASSERT_EQ(0, ibv_cmd_modify_cq(&cq, &attr, reinterpret_cast<struct ibv_modify_cq *>(&cmd), sizeof(cmd)));
	const auto &call = k.ioctls.at(0);
	EXPECT_EQ(IB_USER_VERBS_CMD_FLAG_EXTENDED | IB_USER_VERBS_EX_CMD_MODIFY_CQ,
		  call.find(UVERBS_ATTR_WRITE_CMD)->data);
	ASSERT_NE(nullptr, call.find(UVERBS_ATTR_CORE_IN));
	EXPECT_EQ(sizeof(want.core), call.find(UVERBS_ATTR_CORE_IN)->len);
	EXPECT_EQ(nullptr, call.find(UVERBS_ATTR_CORE_OUT));
}

TEST(Write, WriteErrnoPassesThrough)
{
	FakeKernel k;
	FakeContext c(false);
	k.on_write = [](const void *, size_t) { return EBADF; };
	struct ibv_cq cq = {};
	cq.context = c.ctx();
	errno = 0;
	EXPECT_EQ(EBADF, ibv_cmd_req_notify_cq(&cq, 1));
	EXPECT_EQ(EBADF, errno);
	LegacyReq<ib_uverbs_req_notify_cq> want = {};
	want.hdr.command = IB_USER_VERBS_CMD_REQ_NOTIFY_CQ;
	want.hdr.in_words = sizeof(want) / 4;
	want.core.solicited_only = 1;
	EXPECT_EQ(0, std::memcmp(k.writes.at(0).bytes.data(), &want, sizeof(want)));
}

TEST(Ioctl, ProviderBuffersFromCmdIoctlHelpersInteroperate)
{
	// A provider builds its driver attributes with the cmd_ioctl.h macros and
	// chains them to a final buffer it also declares with them.
	FakeKernel k;
	FakeContext c;
	DECLARE_COMMAND_BUFFER(drv, UVERBS_OBJECT_DM, UVERBS_METHOD_DM_ALLOC, 2);
	fill_attr_in_uint32(drv, 0x1000, 0xabcd);
	struct ib_uverbs_attr *drv_out = fill_attr_out_obj(drv, 0x1001);
	DECLARE_COMMAND_BUFFER_LINK(cmdb, UVERBS_OBJECT_DM, UVERBS_METHOD_DM_ALLOC, 1, drv);
	struct ib_uverbs_attr *h = fill_attr_out_obj(cmdb, UVERBS_ATTR_ALLOC_DM_HANDLE);
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *hdr) {
		kt::live_attr(hdr, UVERBS_ATTR_ALLOC_DM_HANDLE)->data = 5;
		kt::live_attr(hdr, 0x1001)->data = 6;
		return 0;
	};
	ASSERT_EQ(0, execute_ioctl(c.ctx(), cmdb));
	const auto &call = k.ioctls.at(0);
	ASSERT_EQ(3u, call.attrs.size());
	EXPECT_EQ(UVERBS_ATTR_ALLOC_DM_HANDLE, call.attrs[0].attr_id);
	EXPECT_EQ(0x1000, call.attrs[1].attr_id);
	EXPECT_EQ(0xabcdu, call.attrs[1].data);
	EXPECT_EQ(0x1001, call.attrs[2].attr_id);
	EXPECT_EQ(sizeof(struct ib_uverbs_ioctl_hdr) + 3 * sizeof(struct ib_uverbs_attr), call.hdr().length);
	EXPECT_EQ(5u, read_attr_obj(UVERBS_ATTR_ALLOC_DM_HANDLE, h));
	EXPECT_EQ(6u, read_attr_obj(0x1001, drv_out));
}

TEST(Ioctl, LargeBuffersLiveOnTheHeap)
{
	FakeKernel k;
	FakeContext c;
	CommandBuffer cmdb(UVERBS_OBJECT_FLOW_ACTION, UVERBS_METHOD_FLOW_ACTION_ESP_CREATE, 100);
	ASSERT_TRUE(cmdb.ok());
	for (uint16_t i = 0; i < 100; ++i)
		ASSERT_NE(nullptr, cmdb.const_in(i, i));
	EXPECT_EQ(nullptr, cmdb.const_in(100, 100));
	cmdb->buffer_error = 0;
	ASSERT_EQ(0, run_ioctl(c.ctx(), cmdb.get()));
	ASSERT_EQ(100u, k.ioctls.at(0).attrs.size());
	EXPECT_EQ(99u, k.ioctls[0].attrs[99].data);
}

TEST(Write, LegacyRequestNeedsEnoughHeadroom)
{
	// A UHW whose headroom cannot hold the request (a provider passing a
	// smaller head than the command needs) is refused, not overrun.
	uint64_t drv = 0;
	CommandBuffer link(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE, 2);
	link.set_uhw(&drv, 0, sizeof(drv), nullptr, 0, 0);
	ASSERT_NE(0xFF, link->uhw_in_idx);
	LegacyReq<ib_uverbs_create_cq> onstack;
	EXPECT_EQ(nullptr, legacy_req(link.get(), &onstack, sizeof(onstack.core)));
	// Without UHW the stack copy is used.
	CommandBuffer none(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE, 2);
	EXPECT_EQ(&onstack.core, legacy_req(none.get(), &onstack, sizeof(onstack.core)));
	EXPECT_EQ(sizeof(onstack) / 4, onstack.hdr.in_words);
}
