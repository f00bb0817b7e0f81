// XRC command encoding against the kernel uapi structs (<rdma/ib_user_verbs.h>,
// <rdma/ib_user_ioctl_cmds.h>), through the transport's syscall seam: the
// requests the kernel would receive for OPEN_XRCD / CLOSE_XRCD / CREATE_XSRQ
// in both the ioctl and the plain write() protocol, and the kernel's errno
// (the whole fd/oflags matrix is decided by the kernel) passed through
// unchanged. Complements tests/unit/kernel/commands_test.cpp (validation,
// XRC_RECV and OPEN_QP), whose FakeKernel double this test reuses.
#include "fake_kernel.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>

using namespace ov::kernel;
using kt::FakeContext;
using kt::FakeKernel;

namespace {

template <class T> T sent_as(const kt::WriteCall &w)
{
	T out;
	EXPECT_GE(w.bytes.size(), sizeof(T));
	std::memcpy(&out, w.bytes.data(), std::min(sizeof(T), w.bytes.size()));
	return out;
}

int open_xrcd(FakeContext &c, verbs_xrcd *xrcd, int fd, int oflags,
	      ib_uverbs_open_xrcd_resp *resp)
{
	LegacyReq<ib_uverbs_open_xrcd> cmd = {};
	ibv_xrcd_init_attr attr = {};
	attr.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	attr.fd = fd;
	attr.oflags = oflags;
	return ibv_cmd_open_xrcd(c.ctx(), xrcd, sizeof(*xrcd), &attr,
				 reinterpret_cast<struct ibv_open_xrcd *>(&cmd), sizeof(cmd), resp,
				 sizeof(*resp));
}

} // namespace

TEST(XrcEncoding, OpenXrcdByWriteCarriesFdAndOflags)
{
	FakeKernel k;
	FakeContext c(false);
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return ENOTTY; };
	verbs_xrcd xrcd = {};
	ib_uverbs_open_xrcd_resp resp = {};
	k.on_write = [&](const void *, size_t) {
		resp.xrcd_handle = 17;
		return 0;
	};
	ASSERT_EQ(0, open_xrcd(c, &xrcd, 7, O_CREAT | O_EXCL, &resp));
	ASSERT_EQ(1u, k.writes.size());
	auto sent = sent_as<LegacyReq<ib_uverbs_open_xrcd>>(k.writes[0]);
	EXPECT_EQ((uint32_t)IB_USER_VERBS_CMD_OPEN_XRCD, sent.hdr.command);
	EXPECT_EQ(37u, sent.hdr.command) << "uverbs write command number of OPEN_XRCD";
	EXPECT_EQ(sizeof(sent) / 4, sent.hdr.in_words);
	EXPECT_EQ(sizeof(resp) / 4, sent.hdr.out_words);
	EXPECT_EQ(7u, sent.core.fd);
	EXPECT_EQ(uint32_t(O_CREAT | O_EXCL), sent.core.oflags);
	EXPECT_EQ(uint64_t(uintptr_t(&resp)), sent.core.response);
	EXPECT_EQ(17u, xrcd.handle);
	EXPECT_EQ(c.ctx(), xrcd.xrcd.context);
}

TEST(XrcEncoding, KernelErrnoOfTheOflagMatrixPassesThrough)
{
	// The kernel answers EAGAIN (no domain, no O_CREAT), EINVAL (O_EXCL and
	// it exists), EBADF (fd not open): the library must not rewrite them,
	// whichever protocol carries OPEN_XRCD (write(), or the INVOKE_WRITE
	// ioctl tunnel).
	for (int e : {EAGAIN, EINVAL, EBADF, EOPNOTSUPP}) {
		FakeKernel k;
		FakeContext c;
		k.on_ioctl = [e](struct ib_uverbs_ioctl_hdr *) { return e; };
		k.on_write = [e](const void *, size_t) { return e; };
		verbs_xrcd xrcd = {};
		ib_uverbs_open_xrcd_resp resp = {};
		errno = 0;
		EXPECT_EQ(e, open_xrcd(c, &xrcd, 3, 0, &resp)) << e;
		EXPECT_EQ(0u, xrcd.comp_mask & VERBS_XRCD_HANDLE) << "no handle on failure";
	}
}

TEST(XrcEncoding, CloseXrcdByIoctlAndByWrite)
{
	FakeKernel k;
	FakeContext c;
	verbs_xrcd xrcd = {};
	xrcd.xrcd.context = c.ctx();
	xrcd.handle = 12;
	xrcd.comp_mask = VERBS_XRCD_HANDLE;
	ASSERT_EQ(0, ibv_cmd_close_xrcd(&xrcd));
	ASSERT_EQ(1u, k.ioctls.size());
	const auto &call = k.ioctls[0];
	EXPECT_EQ(UVERBS_OBJECT_XRCD, call.hdr().object_id);
	EXPECT_EQ(UVERBS_METHOD_XRCD_DESTROY, call.hdr().method_id);
	ASSERT_NE(nullptr, call.find(UVERBS_ATTR_DESTROY_XRCD_HANDLE));
	EXPECT_EQ(12u, call.find(UVERBS_ATTR_DESTROY_XRCD_HANDLE)->data);

	// The kernel refuses while SRQs/QPs use the domain: EBUSY unchanged.
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return EBUSY; };
	EXPECT_EQ(EBUSY, ibv_cmd_close_xrcd(&xrcd));

	// A kernel without the ioctl path: write CLOSE_XRCD (38).
	FakeContext w(false);
	xrcd.xrcd.context = w.ctx();
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return ENOTTY; };
	k.writes.clear();
	ASSERT_EQ(0, ibv_cmd_close_xrcd(&xrcd));
	ASSERT_EQ(1u, k.writes.size());
	auto sent = sent_as<LegacyReq<ib_uverbs_close_xrcd>>(k.writes[0]);
	EXPECT_EQ((uint32_t)IB_USER_VERBS_CMD_CLOSE_XRCD, sent.hdr.command);
	EXPECT_EQ(38u, sent.hdr.command);
	EXPECT_EQ(sizeof(sent) / 4, sent.hdr.in_words);
	EXPECT_EQ(0u, sent.hdr.out_words);
	EXPECT_EQ(12u, sent.core.xrcd_handle);
}

TEST(XrcEncoding, CreateXsrqByWrite)
{
	FakeKernel k;
	FakeContext c(false);
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return ENOTTY; };
	ibv_pd pd = {};
	pd.context = c.ctx();
	pd.handle = 3;
	verbs_xrcd xrcd = {};
	xrcd.handle = 44;
	ibv_cq cq = {};
	cq.handle = 55;
	verbs_srq srq = {};
	LegacyReq<ib_uverbs_create_xsrq> cmd = {};
	ib_uverbs_create_srq_resp resp = {};
	ibv_srq_init_attr_ex attr = {};
	attr.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
			 IBV_SRQ_INIT_ATTR_CQ;
	attr.pd = &pd;
	attr.srq_type = IBV_SRQT_XRC;
	attr.xrcd = &xrcd.xrcd;
	attr.cq = &cq;
	attr.attr.max_wr = 16;
	attr.attr.max_sge = 2;
	attr.attr.srq_limit = 4;
	k.on_write = [&](const void *buf, size_t) {
		// As the kernel does: answer through the command's response pointer.
		LegacyReq<ib_uverbs_create_xsrq> req;
		std::memcpy(&req, buf, sizeof(req));
		auto *out = reinterpret_cast<ib_uverbs_create_srq_resp *>(uintptr_t(req.core.response));
		out->srq_handle = 66;
		out->max_wr = 32;
		out->max_sge = 2;
		out->srqn = 0x77;
		return 0;
	};
	ASSERT_EQ(0, ibv_cmd_create_srq_ex(c.ctx(), &srq, &attr,
					   reinterpret_cast<struct ibv_create_xsrq *>(&cmd), sizeof(cmd),
					   &resp, sizeof(resp)));
	ASSERT_EQ(1u, k.writes.size());
	auto sent = sent_as<LegacyReq<ib_uverbs_create_xsrq>>(k.writes[0]);
	EXPECT_EQ((uint32_t)IB_USER_VERBS_CMD_CREATE_XSRQ, sent.hdr.command);
	EXPECT_EQ(39u, sent.hdr.command);
	EXPECT_EQ(uint32_t(IBV_SRQT_XRC), sent.core.srq_type);
	EXPECT_EQ(3u, sent.core.pd_handle);
	EXPECT_EQ(44u, sent.core.xrcd_handle);
	EXPECT_EQ(55u, sent.core.cq_handle);
	EXPECT_EQ(16u, sent.core.max_wr);
	EXPECT_EQ(2u, sent.core.max_sge);
	EXPECT_EQ(4u, sent.core.srq_limit);
	EXPECT_EQ(uint64_t(uintptr_t(&srq)), sent.core.user_handle);
	EXPECT_EQ(66u, srq.srq.handle);
	EXPECT_EQ(0x77u, srq.srq_num);
	EXPECT_EQ(32u, attr.attr.max_wr);
	EXPECT_EQ(&xrcd, srq.xrcd);
}
