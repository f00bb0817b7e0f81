// ibv_cmd_* semantics: argument validation (XRC rules), copy-back of the
// kernel's answers into the provider's objects, size-aware device queries.
#include "fake_kernel.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

using namespace ov::kernel;
using kt::FakeContext;
using kt::FakeKernel;

TEST(Xrcd, OpenValidatesCompMask)
{
	FakeKernel k;
	FakeContext c;
	struct verbs_xrcd xrcd = {};
	LegacyReq<ib_uverbs_open_xrcd> cmd = {};
	struct ib_uverbs_open_xrcd_resp resp = {};
	struct ibv_xrcd_init_attr attr = {};
	auto open = [&]() {
		return ibv_cmd_open_xrcd(c.ctx(), &xrcd, sizeof(xrcd), &attr,
					 reinterpret_cast<struct ibv_open_xrcd *>(&cmd), sizeof(cmd), &resp,
					 sizeof(resp));
	};
	attr.comp_mask = IBV_XRCD_INIT_ATTR_RESERVED;
	EXPECT_EQ(EOPNOTSUPP, open());
	attr.comp_mask = IBV_XRCD_INIT_ATTR_FD;
	EXPECT_EQ(EINVAL, open());
	attr.comp_mask = IBV_XRCD_INIT_ATTR_OFLAGS;
	EXPECT_EQ(EINVAL, open());
	EXPECT_TRUE(k.ioctls.empty());

	attr.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	attr.fd = -1;
	attr.oflags = 0100; // O_CREAT
	// A write command: sent with write() (the context's tunnel is only the
	// fallback for EACCES), the response reached through `response`.
	k.on_write = [&](const void *buf, size_t) {
		auto *req = static_cast<const LegacyReq<ib_uverbs_open_xrcd> *>(buf);
		reinterpret_cast<struct ib_uverbs_open_xrcd_resp *>((uintptr_t)req->core.response)->xrcd_handle = 31;
		return 0;
	};
	ASSERT_EQ(0, open());
	EXPECT_EQ(31u, xrcd.handle);
	EXPECT_EQ((uint32_t)VERBS_XRCD_HANDLE, xrcd.comp_mask);
	EXPECT_EQ(c.ctx(), xrcd.xrcd.context);
	EXPECT_TRUE(k.ioctls.empty());
	const auto &call = k.writes.at(0);
	ASSERT_GE(call.bytes.size(), sizeof(LegacyReq<ib_uverbs_open_xrcd>));
	LegacyReq<ib_uverbs_open_xrcd> sent;
	std::memcpy(&sent, call.bytes.data(), sizeof(sent));
	EXPECT_EQ((uint32_t)IB_USER_VERBS_CMD_OPEN_XRCD, sent.hdr.command);
	EXPECT_EQ((uintptr_t)&resp, sent.core.response);
	EXPECT_EQ(0xffffffffu, sent.core.fd);
	EXPECT_EQ(0100u, sent.core.oflags);

	// A provider built with a verbs_xrcd lacking `handle` gets no handle.
	struct verbs_xrcd small = {};
	ASSERT_EQ(0, ibv_cmd_open_xrcd(c.ctx(), &small, offsetof(struct verbs_xrcd, handle), &attr,
				       reinterpret_cast<struct ibv_open_xrcd *>(&cmd), sizeof(cmd), &resp, sizeof(resp)));
	EXPECT_EQ(0u, small.comp_mask);
	EXPECT_EQ(0u, small.handle);
}

TEST(Xrc, SrqNeedsXrcdAndCq)
{
	FakeKernel k;
	FakeContext c;
	struct ibv_pd pd = {};
	pd.context = c.ctx();
	pd.handle = 1;
	struct verbs_xrcd xrcd = {};
	xrcd.handle = 44;
	struct ibv_cq cq = {};
	cq.handle = 55;
	struct verbs_srq srq = {};
	LegacyReq<ib_uverbs_create_xsrq> cmd = {};
	struct ib_uverbs_create_srq_resp resp = {};
	struct ibv_srq_init_attr_ex attr = {};
	attr.pd = &pd;
	attr.srq_type = IBV_SRQT_XRC;
	attr.xrcd = &xrcd.xrcd;
	attr.cq = &cq;
	attr.attr.max_wr = 16;
	auto create = [&]() {
		return ibv_cmd_create_srq_ex(c.ctx(), &srq, &attr, reinterpret_cast<struct ibv_create_xsrq *>(&cmd),
					     sizeof(cmd), &resp, sizeof(resp));
	};
	attr.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD;
	EXPECT_EQ(EINVAL, create());
	attr.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_CQ;
	EXPECT_EQ(EINVAL, create());
	attr.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_XRCD;
	EXPECT_EQ(EINVAL, create()) << "PD is required";
	attr.comp_mask = IBV_SRQ_INIT_ATTR_RESERVED;
	EXPECT_EQ(EOPNOTSUPP, create());
	EXPECT_TRUE(k.ioctls.empty());

	attr.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_XRCD;
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *hdr) {
		kt::live_attr(hdr, UVERBS_ATTR_CREATE_SRQ_HANDLE)->data = 66;
		*reinterpret_cast<uint32_t *>(
			(uintptr_t)kt::live_attr(hdr, UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM)->data) = 0x77;
		*reinterpret_cast<uint32_t *>(
			(uintptr_t)kt::live_attr(hdr, UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR)->data) = 32;
		return 0;
	};
	ASSERT_EQ(0, create());
	const auto &call = k.ioctls.at(0);
	EXPECT_EQ(UVERBS_OBJECT_SRQ, call.hdr().object_id);
	EXPECT_EQ(44u, call.find(UVERBS_ATTR_CREATE_SRQ_XRCD_HANDLE)->data);
	EXPECT_EQ(55u, call.find(UVERBS_ATTR_CREATE_SRQ_CQ_HANDLE)->data);
	EXPECT_EQ((uint64_t)IBV_SRQT_XRC, call.find(UVERBS_ATTR_CREATE_SRQ_TYPE)->data);
	EXPECT_EQ(43u, call.find(UVERBS_ATTR_CREATE_SRQ_EVENT_FD)->data);
	EXPECT_EQ(66u, srq.srq.handle);
	EXPECT_EQ(0x77u, srq.srq_num);
	EXPECT_EQ(IBV_SRQT_XRC, srq.srq_type);
	EXPECT_EQ(&xrcd, srq.xrcd);
	EXPECT_EQ(&cq, srq.cq);
	EXPECT_EQ(32u, attr.attr.max_wr);
	EXPECT_EQ(&pd, srq.srq.pd);
	EXPECT_EQ(c.ctx(), srq.srq.context);
}

TEST(Xrc, RecvQpPassesTheXrcdHandle)
{
	FakeKernel k;
	FakeContext c;
	struct verbs_xrcd xrcd = {};
	xrcd.handle = 88;
	struct verbs_qp qp = {};
	LegacyReq<ib_uverbs_create_qp> cmd = {};
	struct ib_uverbs_create_qp_resp resp = {};
	struct ibv_qp_init_attr_ex attr = {};
	attr.qp_type = IBV_QPT_XRC_RECV;
	attr.comp_mask = IBV_QP_INIT_ATTR_PD;
	auto create = [&]() {
		return ibv_cmd_create_qp_ex(c.ctx(), &qp, &attr, reinterpret_cast<struct ibv_create_qp *>(&cmd),
					    sizeof(cmd), &resp, sizeof(resp));
	};
	EXPECT_EQ(EINVAL, create()) << "XRC_RECV needs an XRCD";
	attr.comp_mask = IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
	attr.xrcd = &xrcd.xrcd;
	EXPECT_EQ(EINVAL, create()) << "create_qp_ex accepts only PD|XRCD|SEND_OPS_FLAGS";
	EXPECT_TRUE(k.ioctls.empty());

	attr.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *hdr) {
		kt::live_attr(hdr, UVERBS_ATTR_CREATE_QP_HANDLE)->data = 5;
		*reinterpret_cast<uint32_t *>(
			(uintptr_t)kt::live_attr(hdr, UVERBS_ATTR_CREATE_QP_RESP_QP_NUM)->data) = 0x123;
		return 0;
	};
	ASSERT_EQ(0, create());
	const auto &call = k.ioctls.at(0);
	EXPECT_EQ(88u, call.find(UVERBS_ATTR_CREATE_QP_XRCD_HANDLE)->data);
	EXPECT_EQ(nullptr, call.find(UVERBS_ATTR_CREATE_QP_PD_HANDLE));
	EXPECT_EQ(nullptr, call.find(UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE));
	EXPECT_EQ(5u, qp.qp.handle);
	EXPECT_EQ(0x123u, qp.qp.qp_num);
	EXPECT_EQ((uint32_t)VERBS_QP_XRCD, qp.comp_mask);
	EXPECT_EQ(&xrcd, qp.xrcd);
	EXPECT_EQ(IBV_QPS_RESET, qp.qp.state);

	// In write mode the XRCD travels as pd_handle.
	FakeContext w(false);
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return ENOTTY; };
	k.writes.clear();
	ASSERT_EQ(0, ibv_cmd_create_qp_ex(w.ctx(), &qp, &attr, reinterpret_cast<struct ibv_create_qp *>(&cmd),
					  sizeof(cmd), &resp, sizeof(resp)));
	LegacyReq<ib_uverbs_create_qp> sent;
	std::memcpy(&sent, k.writes.at(0).bytes.data(), sizeof(sent));
	EXPECT_EQ((uint32_t)IB_USER_VERBS_CMD_CREATE_QP, sent.hdr.command);
	EXPECT_EQ(88u, sent.core.pd_handle);
	EXPECT_EQ((uint8_t)IBV_QPT_XRC_RECV, sent.core.qp_type);
}

TEST(Xrc, OpenQpValidatesAndFills)
{
	FakeKernel k;
	FakeContext c(false);
	struct verbs_xrcd xrcd = {};
	xrcd.handle = 9;
	struct verbs_qp qp = {};
	LegacyReq<ib_uverbs_open_qp> cmd = {};
	struct ib_uverbs_create_qp_resp resp = {};
	struct ibv_qp_open_attr attr = {};
	auto open = [&]() {
		return ibv_cmd_open_qp(c.ctx(), &qp, sizeof(qp), &attr, reinterpret_cast<struct ibv_open_qp *>(&cmd),
				       sizeof(cmd), &resp, sizeof(resp));
	};
	attr.comp_mask = IBV_QP_OPEN_ATTR_RESERVED;
	EXPECT_EQ(EOPNOTSUPP, open());
	attr.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_TYPE;
	EXPECT_EQ(EINVAL, open());
	attr.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_TYPE | IBV_QP_OPEN_ATTR_XRCD;
	attr.xrcd = &xrcd.xrcd;
	attr.qp_num = 0x4242;
	attr.qp_type = IBV_QPT_XRC_RECV;
	k.on_write = [&](const void *, size_t) {
		resp.qp_handle = 3;
		return 0;
	};
	ASSERT_EQ(0, open());
	LegacyReq<ib_uverbs_open_qp> sent;
	std::memcpy(&sent, k.writes.at(0).bytes.data(), sizeof(sent));
	EXPECT_EQ((uint32_t)IB_USER_VERBS_CMD_OPEN_QP, sent.hdr.command);
	EXPECT_EQ(9u, sent.core.pd_handle);
	EXPECT_EQ(0x4242u, sent.core.qpn);
	EXPECT_EQ(3u, qp.qp.handle);
	EXPECT_EQ(0x4242u, qp.qp.qp_num);
	EXPECT_EQ(IBV_QPS_UNKNOWN, qp.qp.state);
	EXPECT_EQ(nullptr, qp.qp.pd);
	EXPECT_EQ(&xrcd, qp.xrcd);
}

TEST(Device, QueryDeviceAnyIsSizeAware)
{
	FakeKernel k;
	FakeContext c(false);
	k.on_write = [](const void *buf, size_t) {
		auto *h = static_cast<const struct ib_uverbs_cmd_hdr *>(buf);
		if (h->command == (IB_USER_VERBS_CMD_FLAG_EXTENDED | IB_USER_VERBS_EX_CMD_QUERY_DEVICE)) {
			auto *ex = reinterpret_cast<const struct ib_uverbs_ex_cmd_hdr *>(h + 1);
			auto *r = reinterpret_cast<struct ib_uverbs_ex_query_device_resp *>((uintptr_t)ex->response);
			r->base.max_qp = 100;
			r->base.phys_port_cnt = 1;
			r->hca_core_clock = 1000;
			r->max_dm_size = 4096;
			// an old kernel answering up to hca_core_clock only
			r->response_length = offsetof(struct ib_uverbs_ex_query_device_resp, hca_core_clock) +
					     sizeof(r->hca_core_clock);
			return 0;
		}
		auto *q = reinterpret_cast<const struct ib_uverbs_query_device *>(h + 1);
		auto *r = reinterpret_cast<struct ib_uverbs_query_device_resp *>((uintptr_t)q->response);
		r->max_qp = 50;
		r->phys_port_cnt = 2;
		return 0;
	};
	struct ibv_device_attr_ex attr;
	std::memset(&attr, 0xff, sizeof(attr));
	ASSERT_EQ(0, ibv_cmd_query_device_any(c.ctx(), nullptr, &attr, sizeof(attr), nullptr, nullptr));
	EXPECT_EQ(100, attr.orig_attr.max_qp);
	EXPECT_EQ(1000u, attr.hca_core_clock);
	EXPECT_EQ(0u, attr.max_dm_size) << "beyond response_length stays zero";
	EXPECT_EQ(1u, attr.phys_port_cnt_ex);

	// Only the legacy part asked for: the basic command, nothing past it touched.
	struct {
		struct ibv_device_attr a;
		unsigned char guard[16];
	} small;
	std::memset(&small, 0xee, sizeof(small));
	ASSERT_EQ(0, ibv_cmd_query_device_any(c.ctx(), nullptr, reinterpret_cast<struct ibv_device_attr_ex *>(&small),
					      sizeof(small.a), nullptr, nullptr));
	EXPECT_EQ(50, small.a.max_qp);
	EXPECT_EQ(2, small.a.phys_port_cnt);
	for (unsigned char g : small.guard)
		EXPECT_EQ(0xee, g);
	EXPECT_EQ((uint32_t)IB_USER_VERBS_CMD_QUERY_DEVICE,
		  reinterpret_cast<const struct ib_uverbs_cmd_hdr *>(k.writes.back().bytes.data())->command);

	// Bad sizes and input.
	EXPECT_EQ(EINVAL, ibv_cmd_query_device_any(c.ctx(), nullptr, &attr, sizeof(attr.orig_attr) - 1, nullptr,
						   nullptr));
	struct ibv_query_device_ex_input in = {};
	in.comp_mask = 1;
	EXPECT_EQ(EINVAL, ibv_cmd_query_device_any(c.ctx(), &in, &attr, sizeof(attr), nullptr, nullptr));

	// Kernels without EX_QUERY_DEVICE: the basic one is used instead.
	k.on_write = [](const void *buf, size_t) {
		auto *h = static_cast<const struct ib_uverbs_cmd_hdr *>(buf);
		if (h->command & IB_USER_VERBS_CMD_FLAG_EXTENDED)
			return EOPNOTSUPP;
		auto *q = reinterpret_cast<const struct ib_uverbs_query_device *>(h + 1);
		reinterpret_cast<struct ib_uverbs_query_device_resp *>((uintptr_t)q->response)->max_cq = 7;
		return 0;
	};
	ASSERT_EQ(0, ibv_cmd_query_device_any(c.ctx(), nullptr, &attr, sizeof(attr), nullptr, nullptr));
	EXPECT_EQ(7, attr.orig_attr.max_cq);
	EXPECT_EQ(0u, attr.hca_core_clock);
}

TEST(Device, QueryPortByIoctlAndByWrite)
{
	FakeKernel k;
	FakeContext c;
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *hdr) {
		auto *out = kt::live_attr(hdr, UVERBS_ATTR_QUERY_PORT_RESP);
		auto *r = reinterpret_cast<struct ib_uverbs_query_port_resp_ex *>((uintptr_t)out->data);
		r->legacy_resp.state = IBV_PORT_ACTIVE;
		r->legacy_resp.gid_tbl_len = 1024;
		r->legacy_resp.link_layer = IBV_LINK_LAYER_ETHERNET;
		r->port_cap_flags2 = 0x20;
		return 0;
	};
	LegacyReq<ib_uverbs_query_port> cmd = {};
	struct ibv_port_attr pa = {};
	ASSERT_EQ(0, ibv_cmd_query_port(c.ctx(), 1, &pa, reinterpret_cast<struct ibv_query_port *>(&cmd), sizeof(cmd)));
	EXPECT_EQ(IBV_PORT_ACTIVE, pa.state);
	EXPECT_EQ(1024, pa.gid_tbl_len);
	EXPECT_EQ(IBV_LINK_LAYER_ETHERNET, pa.link_layer);
	EXPECT_EQ(0x20, pa.port_cap_flags2);
	const auto &call = k.ioctls.at(0);
	EXPECT_EQ(UVERBS_METHOD_QUERY_PORT, call.hdr().method_id);
	EXPECT_EQ(1u, call.find(UVERBS_ATTR_QUERY_PORT_PORT_NUM)->data);
	EXPECT_EQ(sizeof(struct ib_uverbs_query_port_resp_ex), call.find(UVERBS_ATTR_QUERY_PORT_RESP)->len);

	FakeContext w(false);
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return ENOTTY; };
	k.on_write = [](const void *buf, size_t) {
		auto *q = reinterpret_cast<const struct ib_uverbs_query_port *>(
			static_cast<const char *>(buf) + sizeof(struct ib_uverbs_cmd_hdr));
		reinterpret_cast<struct ib_uverbs_query_port_resp *>((uintptr_t)q->response)->lid = 0x11;
		return 0;
	};
	struct ibv_port_attr pw = {};
	ASSERT_EQ(0, ibv_cmd_query_port(w.ctx(), 2, &pw, reinterpret_cast<struct ibv_query_port *>(&cmd), sizeof(cmd)));
	EXPECT_EQ(0x11, pw.lid);
	LegacyReq<ib_uverbs_query_port> sent;
	std::memcpy(&sent, k.writes.at(0).bytes.data(), sizeof(sent));
	EXPECT_EQ((uint32_t)IB_USER_VERBS_CMD_QUERY_PORT, sent.hdr.command);
	EXPECT_EQ(sizeof(sent) / 4, sent.hdr.in_words);
	EXPECT_EQ(sizeof(struct ib_uverbs_query_port_resp) / 4, sent.hdr.out_words);
	EXPECT_EQ(2, sent.core.port_num);
}

TEST(Device, GetContextByIoctlAndByWrite)
{
	FakeKernel k;
	FakeContext c;
	struct verbs_device dev = {};
	c.ctx()->device = &dev.device;
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *hdr) {
		*reinterpret_cast<uint32_t *>(
			(uintptr_t)kt::live_attr(hdr, UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS)->data) = 3;
		*reinterpret_cast<uint64_t *>(
			(uintptr_t)kt::live_attr(hdr, UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT)->data) = 1;
		return 0;
	};
	kt::WithDrv<LegacyReq<ib_uverbs_get_context>, 8> cmd;
	kt::WithDrv<struct ib_uverbs_get_context_resp, 8> resp;
	ASSERT_EQ(0, ibv_cmd_get_context(&c.vctx, cmd.as<struct ibv_get_context>(), sizeof(cmd),
					 OV_GET_CONTEXT_FD_ARR resp.head(), sizeof(resp)));
	EXPECT_EQ(3, c.ctx()->num_comp_vectors);
	EXPECT_EQ(1u, dev.core_support);
	const auto &call = k.ioctls.at(0);
	EXPECT_EQ(UVERBS_METHOD_GET_CONTEXT, call.hdr().method_id);
	ASSERT_NE(nullptr, call.find(UVERBS_ATTR_UHW_IN));
	EXPECT_EQ(8u, call.find(UVERBS_ATTR_UHW_IN)->len);
	ASSERT_NE(nullptr, call.find(UVERBS_ATTR_UHW_OUT));
	EXPECT_EQ((uintptr_t)resp.drv(), call.find(UVERBS_ATTR_UHW_OUT)->data);

	FakeContext w(false);
	w.ctx()->device = &dev.device;
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return ENOTTY; };
	k.on_write = [&](const void *, size_t) {
		resp.head()->async_fd = 21;
		resp.head()->num_comp_vectors = 4;
		return 0;
	};
	ASSERT_EQ(0, ibv_cmd_get_context(&w.vctx, cmd.as<struct ibv_get_context>(), sizeof(cmd),
					 OV_GET_CONTEXT_FD_ARR resp.head(), sizeof(resp)));
	EXPECT_EQ(21, w.ctx()->async_fd);
	EXPECT_EQ(4, w.ctx()->num_comp_vectors);
	const auto &wr = k.writes.at(0);
	ASSERT_EQ(sizeof(cmd), wr.bytes.size());
	struct ib_uverbs_cmd_hdr h;
	std::memcpy(&h, wr.bytes.data(), sizeof(h));
	EXPECT_EQ((uint32_t)IB_USER_VERBS_CMD_GET_CONTEXT, h.command);
	EXPECT_EQ(sizeof(cmd) / 4, h.in_words);
	EXPECT_EQ(sizeof(resp) / 4, h.out_words);
}

TEST(Qp, CreateQpIoctlAttributesAndCaps)
{
	FakeKernel k;
	FakeContext c;
	struct ibv_pd pd = {};
	pd.context = c.ctx();
	pd.handle = 2;
	struct ibv_cq scq = {}, rcq = {};
	scq.handle = 10;
	rcq.handle = 11;
	struct ibv_qp qp = {};
	struct ibv_qp_init_attr attr = {};
	attr.send_cq = &scq;
	attr.recv_cq = &rcq;
	attr.qp_type = IBV_QPT_RC;
	attr.sq_sig_all = 1;
	attr.cap.max_send_wr = 8;
	attr.cap.max_recv_wr = 9;
	LegacyReq<ib_uverbs_create_qp> cmd = {};
	struct ib_uverbs_create_qp_resp resp = {};
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *hdr) {
		kt::live_attr(hdr, UVERBS_ATTR_CREATE_QP_HANDLE)->data = 70;
		*reinterpret_cast<uint32_t *>(
			(uintptr_t)kt::live_attr(hdr, UVERBS_ATTR_CREATE_QP_RESP_QP_NUM)->data) = 0x11;
		auto *cap = reinterpret_cast<struct ib_uverbs_qp_cap *>(
			(uintptr_t)kt::live_attr(hdr, UVERBS_ATTR_CREATE_QP_RESP_CAP)->data);
		cap->max_send_wr = 16;
		cap->max_inline_data = 64;
		return 0;
	};
	ASSERT_EQ(0, ibv_cmd_create_qp(&pd, &qp, &attr, reinterpret_cast<struct ibv_create_qp *>(&cmd), sizeof(cmd),
				       &resp, sizeof(resp)));
	const auto &call = k.ioctls.at(0);
	EXPECT_EQ(UVERBS_OBJECT_QP, call.hdr().object_id);
	EXPECT_EQ(2u, call.find(UVERBS_ATTR_CREATE_QP_PD_HANDLE)->data);
	EXPECT_EQ(10u, call.find(UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE)->data);
	EXPECT_EQ(11u, call.find(UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE)->data);
	EXPECT_EQ((uint64_t)IBV_QPT_RC, call.find(UVERBS_ATTR_CREATE_QP_TYPE)->data);
	EXPECT_EQ((uint64_t)IB_UVERBS_QP_CREATE_SQ_SIG_ALL, call.find(UVERBS_ATTR_CREATE_QP_FLAGS)->data);
	EXPECT_EQ(43u, call.find(UVERBS_ATTR_CREATE_QP_EVENT_FD)->data);
	EXPECT_EQ(sizeof(struct ib_uverbs_qp_cap), call.find(UVERBS_ATTR_CREATE_QP_CAP)->len);
	EXPECT_EQ(nullptr, call.find(UVERBS_ATTR_UHW_IN)) << "no driver data, no UHW";
	EXPECT_EQ(70u, qp.handle);
	EXPECT_EQ(0x11u, qp.qp_num);
	EXPECT_EQ(16u, attr.cap.max_send_wr);
	EXPECT_EQ(64u, attr.cap.max_inline_data);
	EXPECT_EQ(&pd, qp.pd);
	EXPECT_EQ(&scq, qp.send_cq);
	EXPECT_EQ(IBV_QPS_RESET, qp.state);
	EXPECT_EQ(0u, qp.events_completed);
}

TEST(Qp, ModifyQpCopiesOnlyMaskedFields)
{
	FakeKernel k;
	FakeContext c(false);
	struct ibv_qp qp = {};
	qp.context = c.ctx();
	qp.handle = 6;
	struct ibv_qp_attr attr = {};
	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = IBV_MTU_1024;
	attr.dest_qp_num = 0x99;
	attr.qkey = 0x1234; // not in the mask
	attr.ah_attr.dlid = 3;
	attr.ah_attr.port_num = 1;
	attr.ah_attr.is_global = 1;
	attr.ah_attr.grh.sgid_index = 1;
	attr.ah_attr.grh.dgid.raw[15] = 7;
	int mask = IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_AV;
	LegacyReq<ib_uverbs_modify_qp> cmd = {};
	ASSERT_EQ(0, ibv_cmd_modify_qp(&qp, &attr, mask, reinterpret_cast<struct ibv_modify_qp *>(&cmd), sizeof(cmd)));
	LegacyReq<ib_uverbs_modify_qp> want = {};
	want.hdr.command = IB_USER_VERBS_CMD_MODIFY_QP;
	want.hdr.in_words = sizeof(want) / 4;
	want.core.qp_handle = 6;
	want.core.attr_mask = (uint32_t)mask;
	want.core.qp_state = IBV_QPS_RTR;
	want.core.path_mtu = IBV_MTU_1024;
	want.core.dest_qp_num = 0x99;
	want.core.dest.dlid = 3;
	want.core.dest.port_num = 1;
	want.core.dest.is_global = 1;
	want.core.dest.sgid_index = 1;
	want.core.dest.dgid[15] = 7;
	ASSERT_EQ(sizeof(want), k.writes.at(0).bytes.size());
	EXPECT_EQ(0, std::memcmp(k.writes[0].bytes.data(), &want, sizeof(want)));

	EXPECT_EQ(EOPNOTSUPP, ibv_cmd_modify_qp(&qp, &attr, IBV_QP_RATE_LIMIT,
						reinterpret_cast<struct ibv_modify_qp *>(&cmd), sizeof(cmd)));
}

// The errno contract of the provider-facing commands: a failure returns an
// errno value and leaves errno equal to it (providers such as libsiw return
// NULL from create_qp after ibv_cmd_create_qp fails without setting errno
// themselves), and a success leaves errno alone (never 0).
TEST(Qp, CommandsKeepTheErrnoContract)
{
	FakeKernel k;
	FakeContext c;
	struct ibv_pd pd = {};
	pd.context = c.ctx();
	struct ibv_cq cq = {};
	struct ibv_qp qp = {};
	struct ibv_qp_init_attr attr = {};
	attr.send_cq = attr.recv_cq = &cq;
	attr.qp_type = IBV_QPT_RC;
	LegacyReq<ib_uverbs_create_qp> cmd = {};
	struct ib_uverbs_create_qp_resp resp = {};
	auto create = [&] {
		return ibv_cmd_create_qp(&pd, &qp, &attr, reinterpret_cast<struct ibv_create_qp *>(&cmd),
					 sizeof(cmd), &resp, sizeof(resp));
	};
	// The kernel refuses through ioctl.
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return ENOMEM; };
	errno = 0;
	EXPECT_EQ(ENOMEM, create());
	EXPECT_EQ(ENOMEM, errno);
	// No ioctl method: the write() fallback, refused by the kernel.
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return EPROTONOSUPPORT; };
	k.on_write = [](const void *, size_t) { return EOPNOTSUPP; };
	errno = 0;
	EXPECT_EQ(EOPNOTSUPP, create());
	EXPECT_EQ(EOPNOTSUPP, errno);
	// Successes leave errno alone: create (write), modify, destroy.
	k.on_write = [](const void *buf, size_t) {
		auto *h = static_cast<const struct ib_uverbs_cmd_hdr *>(buf);
		if (h->command == IB_USER_VERBS_CMD_CREATE_QP) {
			auto *req = reinterpret_cast<const struct ib_uverbs_create_qp *>(h + 1);
			auto *r = reinterpret_cast<struct ib_uverbs_create_qp_resp *>((uintptr_t)req->response);
			r->qp_handle = 5;
			r->qpn = 0x22;
		}
		return 0;
	};
	errno = EILSEQ;
	ASSERT_EQ(0, create());
	EXPECT_EQ(EILSEQ, errno);
	EXPECT_EQ(0x22u, qp.qp_num);
	struct ibv_qp_attr qa = {};
	qa.qp_state = IBV_QPS_INIT;
	LegacyReq<ib_uverbs_modify_qp> mcmd = {};
	ASSERT_EQ(0, ibv_cmd_modify_qp(&qp, &qa, IBV_QP_STATE, reinterpret_cast<struct ibv_modify_qp *>(&mcmd),
				       sizeof(mcmd)));
	EXPECT_EQ(EILSEQ, errno);
	struct ibv_qp_init_attr qi = {};
	LegacyReq<ib_uverbs_query_qp> qcmd = {};
	ASSERT_EQ(0, ibv_cmd_query_qp(&qp, &qa, IBV_QP_STATE, &qi, reinterpret_cast<struct ibv_query_qp *>(&qcmd),
				      sizeof(qcmd)));
	EXPECT_EQ(EILSEQ, errno);
	// A check of the library's own: the value is errno too.
	errno = 0;
	EXPECT_EQ(EOPNOTSUPP, ibv_cmd_modify_qp(&qp, &qa, IBV_QP_RATE_LIMIT,
						reinterpret_cast<struct ibv_modify_qp *>(&mcmd), sizeof(mcmd)));
	EXPECT_EQ(EOPNOTSUPP, errno);
	errno = EILSEQ;
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return 0; };
	ASSERT_EQ(0, ibv_cmd_destroy_qp(&qp));
	EXPECT_EQ(EILSEQ, errno);
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return EBUSY; };
	errno = 0;
	EXPECT_EQ(EBUSY, ibv_cmd_destroy_qp(&qp));
	EXPECT_EQ(EBUSY, errno);
}

TEST(Qp, PostSendMarshalsWorkRequests)
{
	FakeKernel k;
	FakeContext c(false);
	struct ibv_qp qp = {};
	qp.context = c.ctx();
	qp.handle = 4;
	qp.qp_type = IBV_QPT_RC;
	struct ibv_sge sge[2] = {{0x1000, 64, 7}, {0x2000, 32, 8}};
	struct ibv_send_wr wr2 = {};
	wr2.wr_id = 2;
	wr2.opcode = IBV_WR_SEND;
	struct ibv_send_wr wr1 = {};
	wr1.wr_id = 1;
	wr1.next = &wr2;
	wr1.sg_list = sge;
	wr1.num_sge = 2;
	wr1.opcode = IBV_WR_RDMA_WRITE;
	wr1.wr.rdma.remote_addr = 0xabc;
	wr1.wr.rdma.rkey = 5;
	k.on_write = [](const void *buf, size_t) {
		auto *req = static_cast<const LegacyReq<ib_uverbs_post_send> *>(buf);
		reinterpret_cast<struct ib_uverbs_post_send_resp *>((uintptr_t)req->core.response)->bad_wr = 2;
		return EINVAL;
	};
	struct ibv_send_wr *bad = nullptr;
	EXPECT_EQ(EINVAL, ibv_cmd_post_send(&qp, &wr1, &bad));
	EXPECT_EQ(&wr2, bad);
	const auto &bytes = k.writes.at(0).bytes;
	ASSERT_EQ(sizeof(LegacyReq<ib_uverbs_post_send>) + 2 * sizeof(struct ib_uverbs_send_wr) +
			  2 * sizeof(struct ib_uverbs_sge),
		  bytes.size());
	LegacyReq<ib_uverbs_post_send> head;
	std::memcpy(&head, bytes.data(), sizeof(head));
	EXPECT_EQ((uint32_t)IB_USER_VERBS_CMD_POST_SEND, head.hdr.command);
	EXPECT_EQ(bytes.size() / 4, head.hdr.in_words);
	EXPECT_EQ(4u, head.core.qp_handle);
	EXPECT_EQ(2u, head.core.wr_count);
	EXPECT_EQ(2u, head.core.sge_count);
	EXPECT_EQ(sizeof(struct ib_uverbs_send_wr), head.core.wqe_size);
	struct ib_uverbs_send_wr w;
	std::memcpy(&w, bytes.data() + sizeof(head), sizeof(w));
	EXPECT_EQ(1u, w.wr_id);
	EXPECT_EQ(2u, w.num_sge);
	EXPECT_EQ((uint32_t)IBV_WR_RDMA_WRITE, w.opcode);
	EXPECT_EQ(0xabcu, w.wr.rdma.remote_addr);
	EXPECT_EQ(5u, w.wr.rdma.rkey);
	struct ib_uverbs_sge s;
	std::memcpy(&s, bytes.data() + sizeof(head) + 2 * sizeof(w) + sizeof(s), sizeof(s));
	EXPECT_EQ(0x2000u, s.addr);
	EXPECT_EQ(32u, s.length);
	EXPECT_EQ(8u, s.lkey);
}

TEST(Qp, PostRecvAndSrqRecvMarshalAndNameTheBadRequest)
{
	FakeKernel k;
	FakeContext c(false);
	struct ibv_qp qp = {};
	qp.context = c.ctx();
	qp.handle = 6;
	struct ibv_srq srq = {};
	srq.context = c.ctx();
	srq.handle = 9;
	struct ibv_sge sge[3] = {{0x1000, 64, 7}, {0x2000, 32, 8}, {0x3000, 16, 9}};
	struct ibv_recv_wr wr3 = {};
	wr3.wr_id = 3;
	wr3.sg_list = &sge[2];
	wr3.num_sge = 1;
	struct ibv_recv_wr wr2 = {};
	wr2.wr_id = 2;
	wr2.next = &wr3;
	struct ibv_recv_wr wr1 = {};
	wr1.wr_id = 1;
	wr1.next = &wr2;
	wr1.sg_list = sge;
	wr1.num_sge = 2;
	uint32_t kernel_bad = 0;
	int kernel_ret = 0;
	k.on_write = [&](const void *buf, size_t) {
		auto *req = static_cast<const LegacyReq<ib_uverbs_post_recv> *>(buf);
		reinterpret_cast<struct ib_uverbs_post_recv_resp *>((uintptr_t)req->core.response)->bad_wr = kernel_bad;
		return kernel_ret;
	};
	struct ibv_recv_wr *bad = nullptr;

	// The kernel names the third request.
	kernel_bad = 3;
	kernel_ret = ENOMEM;
	EXPECT_EQ(ENOMEM, ibv_cmd_post_recv(&qp, &wr1, &bad));
	EXPECT_EQ(&wr3, bad);
	// A failure naming none: the head of the list.
	kernel_bad = 0;
	kernel_ret = EINVAL;
	bad = nullptr;
	EXPECT_EQ(EINVAL, ibv_cmd_post_srq_recv(&srq, &wr1, &bad));
	EXPECT_EQ(&wr1, bad);
	// Success leaves *bad_wr alone; a bad_wr past the list is ignored.
	kernel_bad = 4;
	kernel_ret = 0;
	bad = nullptr;
	EXPECT_EQ(0, ibv_cmd_post_srq_recv(&srq, &wr1, &bad));
	EXPECT_EQ(nullptr, bad);

	ASSERT_EQ(3u, k.writes.size());
	const uint32_t commands[] = {IB_USER_VERBS_CMD_POST_RECV, IB_USER_VERBS_CMD_POST_SRQ_RECV,
				     IB_USER_VERBS_CMD_POST_SRQ_RECV};
	const uint32_t handles[] = {6, 9, 9};
	for (size_t n = 0; n < 3; ++n) {
		const auto &bytes = k.writes[n].bytes;
		LegacyReq<ib_uverbs_post_recv> head;
		ASSERT_EQ(sizeof(head) + 3 * sizeof(struct ib_uverbs_recv_wr) + 3 * sizeof(struct ib_uverbs_sge),
			  bytes.size());
		std::memcpy(&head, bytes.data(), sizeof(head));
		EXPECT_EQ(commands[n], head.hdr.command) << n;
		EXPECT_EQ(handles[n], head.core.qp_handle) << n;
		EXPECT_EQ(3u, head.core.wr_count);
		EXPECT_EQ(3u, head.core.sge_count);
		EXPECT_EQ(sizeof(struct ib_uverbs_recv_wr), head.core.wqe_size);
		struct ib_uverbs_recv_wr w[3];
		std::memcpy(w, bytes.data() + sizeof(head), sizeof(w));
		EXPECT_EQ(1u, w[0].wr_id);
		EXPECT_EQ(2u, w[0].num_sge);
		EXPECT_EQ(0u, w[1].num_sge);
		EXPECT_EQ(3u, w[2].wr_id);
		EXPECT_EQ(1u, w[2].num_sge);
		struct ib_uverbs_sge sg[3];
		std::memcpy(sg, bytes.data() + sizeof(head) + sizeof(w), sizeof(sg));
		for (int i = 0; i < 3; ++i) {
			EXPECT_EQ(sge[i].addr, sg[i].addr) << i;
			EXPECT_EQ(sge[i].length, sg[i].length) << i;
			EXPECT_EQ(sge[i].lkey, sg[i].lkey) << i;
		}
	}
}

TEST(Cq, PollCqCopiesCompletions)
{
	FakeKernel k;
	FakeContext c(true);
	struct ibv_cq cq = {};
	cq.context = c.ctx();
	cq.handle = 1;
	k.on_write = [](const void *buf, size_t) {
		auto *req = static_cast<const LegacyReq<ib_uverbs_poll_cq> *>(buf);
		auto *r = reinterpret_cast<struct ib_uverbs_poll_cq_resp *>((uintptr_t)req->core.response);
		r->count = 1;
		r->wc[0].wr_id = 77;
		r->wc[0].byte_len = 128;
		r->wc[0].status = IBV_WC_SUCCESS;
		return 0;
	};
	struct ibv_wc wc[4] = {};
	EXPECT_EQ(1, ibv_cmd_poll_cq(&cq, 4, wc));
	EXPECT_EQ(77u, wc[0].wr_id);
	EXPECT_EQ(128u, wc[0].byte_len);
	LegacyReq<ib_uverbs_poll_cq> sent;
	ASSERT_EQ(sizeof(sent), k.writes.at(0).bytes.size());
	std::memcpy(&sent, k.writes[0].bytes.data(), sizeof(sent));
	EXPECT_EQ((uint32_t)IB_USER_VERBS_CMD_POLL_CQ, sent.hdr.command);
	EXPECT_EQ((sizeof(struct ib_uverbs_poll_cq_resp) + 4 * sizeof(struct ib_uverbs_wc)) / 4, sent.hdr.out_words);
	EXPECT_EQ(4u, sent.core.ne);

	k.on_write = [](const void *, size_t) { return EIO; };
	errno = 0;
	EXPECT_EQ(-1, ibv_cmd_poll_cq(&cq, 4, wc));
	EXPECT_EQ(EIO, errno);
}

TEST(BadInput, NullArgumentsAreEinvalNotCrashes)
{
	FakeKernel k;
	EXPECT_EQ(EINVAL, ibv_cmd_dealloc_pd(nullptr));
	EXPECT_EQ(EINVAL, ibv_cmd_destroy_cq(nullptr));
	EXPECT_EQ(EINVAL, ibv_cmd_destroy_qp(nullptr));
	EXPECT_EQ(EINVAL, ibv_cmd_alloc_pd(nullptr, nullptr, nullptr, 0, nullptr, 0));
	EXPECT_EQ(EINVAL, execute_ioctl(nullptr, nullptr));
	EXPECT_EQ(-1, ibv_cmd_poll_cq(nullptr, 1, nullptr));
	EXPECT_TRUE(k.ioctls.empty());
	EXPECT_TRUE(k.writes.empty());
}

TEST(Flow, SpecsAreTranslatedToKernelSpecs)
{
	FakeKernel k;
	FakeContext c(false);
	struct ibv_qp qp = {};
	qp.context = c.ctx();
	qp.handle = 3;
	struct {
		struct ibv_flow_attr attr;
		struct ibv_flow_spec_eth eth;
		struct ibv_flow_spec_ipv4 ipv4;
		struct ibv_flow_spec_tcp_udp tcp;
	} rule = {};
	// Specs follow each other without padding, as ibv_create_flow expects.
	static_assert(offsetof(decltype(rule), eth) == sizeof(struct ibv_flow_attr), "eth follows the attr");
	static_assert(offsetof(decltype(rule), ipv4) == offsetof(decltype(rule), eth) + sizeof(rule.eth), "packed");
	static_assert(offsetof(decltype(rule), tcp) == offsetof(decltype(rule), ipv4) + sizeof(rule.ipv4), "packed");
	rule.attr.type = IBV_FLOW_ATTR_NORMAL;
	rule.attr.size = sizeof(rule);
	rule.attr.num_of_specs = 3;
	rule.attr.port = 1;
	rule.eth.type = IBV_FLOW_SPEC_ETH;
	rule.eth.size = sizeof(rule.eth);
	rule.eth.val.ether_type = 0x0800;
	rule.eth.mask.ether_type = 0xffff;
	rule.ipv4.type = IBV_FLOW_SPEC_IPV4;
	rule.ipv4.size = sizeof(rule.ipv4);
	rule.ipv4.val.dst_ip = 0x0a000001;
	rule.ipv4.mask.dst_ip = 0xffffffff;
	rule.tcp.type = IBV_FLOW_SPEC_TCP;
	rule.tcp.size = sizeof(rule.tcp);
	rule.tcp.val.dst_port = 80;
	rule.tcp.mask.dst_port = 0xffff;
	k.on_write = [](const void *buf, size_t) {
		auto *ex = reinterpret_cast<const struct ib_uverbs_ex_cmd_hdr *>(
			static_cast<const char *>(buf) + sizeof(struct ib_uverbs_cmd_hdr));
		reinterpret_cast<struct ib_uverbs_create_flow_resp *>((uintptr_t)ex->response)->flow_handle = 12;
		return 0;
	};
	uint64_t ucmd = 0x77;
	struct ibv_flow flow = {};
	ASSERT_EQ(0, ibv_cmd_create_flow(&qp, &flow, &rule.attr, &ucmd, sizeof(ucmd)));
	EXPECT_EQ(12u, flow.handle);
	EXPECT_EQ(c.ctx(), flow.context);

	const auto &b = k.writes.at(0).bytes;
	const size_t head = sizeof(LegacyReqEx<ib_uverbs_create_flow>);
	const size_t specs = sizeof(struct ib_uverbs_flow_spec_eth) + 24 /* IPv4 addresses only */ +
			     sizeof(struct ib_uverbs_flow_spec_tcp_udp);
	ASSERT_EQ(head + specs + sizeof(ucmd), b.size());
	LegacyReqEx<ib_uverbs_create_flow> h;
	std::memcpy(&h, b.data(), sizeof(h));
	EXPECT_EQ(IB_USER_VERBS_CMD_FLAG_EXTENDED | IB_USER_VERBS_EX_CMD_CREATE_FLOW, h.hdr.command);
	EXPECT_EQ((sizeof(h.core) + specs) / 8, h.hdr.in_words);
	EXPECT_EQ(1u, h.ex_hdr.provider_in_words);
	EXPECT_EQ(3u, h.core.qp_handle);
	EXPECT_EQ(specs, h.core.flow_attr.size);
	EXPECT_EQ(3, h.core.flow_attr.num_of_specs);
	EXPECT_EQ(1, h.core.flow_attr.port);

	struct ib_uverbs_flow_spec_eth eth;
	std::memcpy(&eth, b.data() + head, sizeof(eth));
	EXPECT_EQ((uint32_t)IBV_FLOW_SPEC_ETH, eth.type);
	EXPECT_EQ(sizeof(eth), eth.size);
	EXPECT_EQ(0x0800, eth.val.ether_type);
	EXPECT_EQ(0xffff, eth.mask.ether_type);
	const unsigned char *ip = b.data() + head + sizeof(eth);
	struct ib_uverbs_flow_spec_hdr iph;
	std::memcpy(&iph, ip, sizeof(iph));
	EXPECT_EQ((uint32_t)IBV_FLOW_SPEC_IPV4, iph.type);
	EXPECT_EQ(24, iph.size);
	uint32_t dst_val, dst_mask;
	std::memcpy(&dst_val, ip + 8 + 4, 4);
	std::memcpy(&dst_mask, ip + 16 + 4, 4);
	EXPECT_EQ(0x0a000001u, dst_val);
	EXPECT_EQ(0xffffffffu, dst_mask);
	struct ib_uverbs_flow_spec_tcp_udp tcp;
	std::memcpy(&tcp, ip + 24, sizeof(tcp));
	EXPECT_EQ((uint32_t)IBV_FLOW_SPEC_TCP, tcp.type);
	EXPECT_EQ(80, tcp.val.dst_port);
	uint64_t drv;
	std::memcpy(&drv, b.data() + head + specs, sizeof(drv));
	EXPECT_EQ(0x77u, drv);

	// An unknown spec type is refused before anything is sent.
	rule.tcp.type = (enum ibv_flow_spec_type)0x77;
	EXPECT_EQ(EINVAL, ibv_cmd_create_flow(&qp, &flow, &rule.attr, nullptr, 0));
	EXPECT_EQ(1u, k.writes.size());
}

TEST(IoctlOnly, CountersWithAProviderLink)
{
	FakeKernel k;
	FakeContext c;
	CommandBuffer drv(UVERBS_OBJECT_COUNTERS, UVERBS_METHOD_COUNTERS_CREATE, 1);
	drv.const_in(0x1000, 9);
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *hdr) {
		if (auto *h = kt::live_attr(hdr, UVERBS_ATTR_CREATE_COUNTERS_HANDLE))
			h->data = 8;
		return 0;
	};
	struct verbs_counters vc = {};
	struct ibv_counters_init_attr init = {};
	ASSERT_EQ(0, ibv_cmd_create_counters(c.ctx(), &init, &vc, drv.get()));
	EXPECT_EQ(8u, vc.handle);
	EXPECT_EQ(c.ctx(), vc.counters.context);
	const auto &call = k.ioctls.at(0);
	EXPECT_EQ(UVERBS_OBJECT_COUNTERS, call.hdr().object_id);
	ASSERT_EQ(2u, call.attrs.size());
	EXPECT_EQ(0x1000, call.attrs[1].attr_id);

	init.comp_mask = 1;
	EXPECT_EQ(EOPNOTSUPP, ibv_cmd_create_counters(c.ctx(), &init, &vc, nullptr));

	uint64_t values[3] = {};
	ASSERT_EQ(0, ibv_cmd_read_counters(&vc, values, 3, IB_UVERBS_READ_COUNTERS_PREFER_CACHED, nullptr));
	const auto &rd = k.ioctls.back();
	EXPECT_EQ(UVERBS_METHOD_COUNTERS_READ, rd.hdr().method_id);
	EXPECT_EQ(24u, rd.find(UVERBS_ATTR_READ_COUNTERS_BUFF)->len);
	EXPECT_EQ(8u, rd.find(UVERBS_ATTR_READ_COUNTERS_HANDLE)->data);

	// No write equivalent: ENOTTY stays ENOTTY.
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return ENOTTY; };
	EXPECT_EQ(ENOTTY, ibv_cmd_destroy_counters(&vc));
	EXPECT_TRUE(k.writes.empty());
}

TEST(IoctlOnly, DmMrMustBeZeroBased)
{
	FakeKernel k;
	FakeContext c;
	struct ibv_pd pd = {};
	pd.context = c.ctx();
	struct verbs_dm dm = {};
	struct verbs_mr mr = {};
	EXPECT_EQ(EINVAL, ibv_cmd_reg_dm_mr(&pd, &dm, 0, 64, IBV_ACCESS_LOCAL_WRITE, &mr, nullptr));
	EXPECT_TRUE(k.ioctls.empty());
	ASSERT_EQ(0, ibv_cmd_reg_dm_mr(&pd, &dm, 0, 64, IBV_ACCESS_ZERO_BASED, &mr, nullptr));
	EXPECT_EQ(UVERBS_METHOD_DM_MR_REG, k.ioctls.at(0).hdr().method_id);
	EXPECT_EQ(64u, mr.ibv_mr.length);
	EXPECT_EQ(IBV_MR_TYPE_MR, mr.mr_type);
}

TEST(BadInput, ShortProviderBuffersAreRefusedUntouched)
{
	FakeKernel k;
	FakeContext c(false);
	struct ibv_pd pd = {};
	pd.context = c.ctx();
	unsigned char small[8];
	std::memset(small, 0x5a, sizeof(small));
	struct ib_uverbs_alloc_pd_resp resp = {};
	EXPECT_EQ(EINVAL, ibv_cmd_alloc_pd(c.ctx(), &pd, reinterpret_cast<struct ibv_alloc_pd *>(small), sizeof(small),
					   &resp, sizeof(resp)));
	struct ibv_qp qp = {};
	qp.context = c.ctx();
	struct ibv_qp_attr attr = {};
	EXPECT_EQ(EINVAL, ibv_cmd_modify_qp(&qp, &attr, IBV_QP_STATE, reinterpret_cast<struct ibv_modify_qp *>(small),
					    sizeof(small)));
	for (unsigned char b : small)
		EXPECT_EQ(0x5a, b);
	EXPECT_TRUE(k.writes.empty());
}

#if _OPENVERBS_ABI >= 56
// rdma-core 56: ibv_cmd_create_cq_ex2 sends the provider's own attributes
// (linked command buffer) with the CQ_CREATE method; ibv_cmd_create_cq_ex is
// the same without them.
TEST(Abi56, CreateCqEx2CarriesTheProviderAttributes)
{
	FakeKernel k;
	FakeContext c;
	CommandBuffer drv(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE, 1);
	drv.const_in(0x1000 /* a driver attribute id */, 7);
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *hdr) {
		if (auto *h = kt::live_attr(hdr, UVERBS_ATTR_CREATE_CQ_HANDLE))
			h->data = 5;
		if (auto *cqe = kt::live_attr(hdr, UVERBS_ATTR_CREATE_CQ_RESP_CQE))
			*reinterpret_cast<uint32_t *>((uintptr_t)cqe->data) = 31;
		return 0;
	};
	LegacyReqEx<ib_uverbs_ex_create_cq> cmd = {};
	struct ib_uverbs_ex_create_cq_resp resp = {};
	struct verbs_cq cq = {};
	struct ibv_cq_init_attr_ex attr = {};
	attr.cqe = 16;
	ASSERT_EQ(0, ibv_cmd_create_cq_ex2(c.ctx(), &attr, OV_CQ_PROV_ATTR &cq, reinterpret_cast<struct ibv_create_cq_ex *>(&cmd),
					   sizeof(cmd), &resp, sizeof(resp), 0, drv.get()));
	EXPECT_EQ(5u, cq.cq.handle);
	EXPECT_EQ(31, cq.cq.cqe);
	const auto &call = k.ioctls.at(0);
	EXPECT_EQ(UVERBS_METHOD_CQ_CREATE, call.hdr().method_id);
	ASSERT_NE(nullptr, call.find(0x1000));
	EXPECT_EQ(7u, call.find(0x1000)->data);
	EXPECT_EQ(16u, call.find(UVERBS_ATTR_CREATE_CQ_CQE)->data);

	ASSERT_EQ(0, ibv_cmd_create_cq_ex2(c.ctx(), &attr, OV_CQ_PROV_ATTR &cq, reinterpret_cast<struct ibv_create_cq_ex *>(&cmd),
					   sizeof(cmd), &resp, sizeof(resp), 0, nullptr));
	EXPECT_EQ(nullptr, k.ioctls.at(1).find(0x1000));
	EXPECT_EQ(EINVAL, ibv_cmd_create_cq_ex2(nullptr, &attr, OV_CQ_PROV_ATTR &cq, nullptr, 0, nullptr, 0, 0, nullptr));
}

// rdma-core 56: the eighth argument of ibv_cmd_reg_dmabuf_mr.
TEST(Abi56, RegDmabufMrWithProviderAttributes)
{
	FakeKernel k;
	FakeContext c;
	struct ibv_pd pd = {};
	pd.context = c.ctx();
	pd.handle = 3;
	CommandBuffer drv(UVERBS_OBJECT_MR, UVERBS_METHOD_REG_DMABUF_MR, 1);
	drv.const_in(0x1001, 42);
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *hdr) {
		if (auto *h = kt::live_attr(hdr, UVERBS_ATTR_REG_DMABUF_MR_HANDLE))
			h->data = 9;
		if (auto *l = kt::live_attr(hdr, UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY))
			*reinterpret_cast<uint32_t *>((uintptr_t)l->data) = 0x111;
		if (auto *r = kt::live_attr(hdr, UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY))
			*reinterpret_cast<uint32_t *>((uintptr_t)r->data) = 0x222;
		return 0;
	};
	struct verbs_mr mr = {};
	ASSERT_EQ(0, ibv_cmd_reg_dmabuf_mr(&pd, 4096, 8192, 0x10000, 17, IBV_ACCESS_LOCAL_WRITE, &mr, drv.get()));
	EXPECT_EQ(9u, mr.ibv_mr.handle);
	EXPECT_EQ(0x111u, mr.ibv_mr.lkey);
	EXPECT_EQ(0x222u, mr.ibv_mr.rkey);
	EXPECT_EQ(8192u, mr.ibv_mr.length);
	EXPECT_EQ(IBV_MR_TYPE_DMABUF_MR, mr.mr_type);
	const auto &call = k.ioctls.at(0);
	EXPECT_EQ(UVERBS_METHOD_REG_DMABUF_MR, call.hdr().method_id);
	EXPECT_EQ(17u, call.find(UVERBS_ATTR_REG_DMABUF_MR_FD)->data);
	EXPECT_EQ(3u, call.find(UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE)->data);
	ASSERT_NE(nullptr, call.find(0x1001));
	EXPECT_EQ(42u, call.find(0x1001)->data);
	ASSERT_EQ(0, ibv_cmd_reg_dmabuf_mr(&pd, 0, 64, 0, 17, 0, &mr, nullptr));
	EXPECT_EQ(nullptr, k.ioctls.at(1).find(0x1001));
	EXPECT_EQ(EINVAL, ibv_cmd_reg_dmabuf_mr(nullptr, 0, 64, 0, 17, 0, &mr, nullptr));
}

// rdma-core 56: ibv_port_attr.active_speed_ex from the kernel's extended
// response (0 through the legacy write command).
TEST(Abi56, QueryPortActiveSpeedEx)
{
	FakeKernel k;
	FakeContext c;
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *hdr) {
		auto *out = kt::live_attr(hdr, UVERBS_ATTR_QUERY_PORT_RESP);
		auto *r = reinterpret_cast<struct ib_uverbs_query_port_resp_ex *>((uintptr_t)out->data);
		r->legacy_resp.active_speed = 0x80;
		r->active_speed_ex = 0x100; // XDR
		return 0;
	};
	LegacyReq<ib_uverbs_query_port> cmd = {};
	struct ibv_port_attr pa = {};
	ASSERT_EQ(0, ibv_cmd_query_port(c.ctx(), 1, &pa, reinterpret_cast<struct ibv_query_port *>(&cmd), sizeof(cmd)));
	EXPECT_EQ(0x80, pa.active_speed);
	EXPECT_EQ(0x100u, pa.active_speed_ex);
	static_assert(sizeof(struct ibv_port_attr) == 56, "rdma-core 56 layout");
	static_assert(offsetof(struct ib_uverbs_query_port_resp_ex, active_speed_ex) == 44, "uapi layout");
}
#endif

#if _OPENVERBS_ABI >= 64
// rdma-core 64's new ioctl-only commands. Object, method and attribute ids
// are positions in the kernel's enums (rdma/ib_user_ioctl_cmds.h as rdma-core
// 64 ships it; newer than any installed uapi here): DMAH is the object after ASYNC_EVENT (its ALLOC method 0,
// attributes HANDLE 0, CPU_ID 1, TPH_MEM_TYPE 2, PH 3); QUERY_PORT_SPEED the
// device method after QUERY_GID_ENTRY (PORT_NUM 0, RESP 1).
TEST(Abi64, AllocDmahSendsOnlyTheHintsOfItsMask)
{
	FakeKernel k;
	FakeContext c;
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *hdr) {
		kt::live_attr(hdr, 0)->data = 9;
		return 0;
	};
	struct verbs_dmah dmah = {};
	struct ibv_dmah_init_attr attr = {};
	attr.comp_mask = IBV_DMAH_INIT_ATTR_MASK_CPU_ID | IBV_DMAH_INIT_ATTR_MASK_PH;
	attr.cpu_id = 3;
	attr.ph = 2;
	attr.tph_mem_type = IBV_TPH_MEM_TYPE_PM; // not in the mask: not sent
	ASSERT_EQ(0, ibv_cmd_alloc_dmah(c.ctx(), &dmah, &attr));
	EXPECT_EQ(9u, dmah.handle);
	EXPECT_EQ(c.ctx(), dmah.dmah.context);
	const auto &call = k.ioctls.at(0);
	EXPECT_EQ(UVERBS_OBJECT_ASYNC_EVENT + 1, call.hdr().object_id);
	EXPECT_EQ(0, call.hdr().method_id);
	ASSERT_NE(nullptr, call.find(1));
	EXPECT_EQ(3u, call.find(1)->data);
	EXPECT_EQ(nullptr, call.find(2));
	ASSERT_NE(nullptr, call.find(3));
	EXPECT_EQ(1u, call.find(3)->len);

	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return EPROTONOSUPPORT; };
	EXPECT_EQ(EPROTONOSUPPORT, ibv_cmd_alloc_dmah(c.ctx(), &dmah, &attr));
}

TEST(Abi64, QueryPortSpeedReadsTheKernelsAnswer)
{
	FakeKernel k;
	FakeContext c;
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *hdr) {
		*reinterpret_cast<uint64_t *>((uintptr_t)kt::live_attr(hdr, 1)->data) = 4000;
		return 0;
	};
	uint64_t speed = 0;
	ASSERT_EQ(0, ibv_cmd_query_port_speed(c.ctx(), 2, &speed));
	EXPECT_EQ(4000u, speed);
	const auto &call = k.ioctls.at(0);
	EXPECT_EQ(UVERBS_OBJECT_DEVICE, call.hdr().object_id);
	EXPECT_EQ(UVERBS_METHOD_QUERY_GID_ENTRY + 1, call.hdr().method_id);
	ASSERT_NE(nullptr, call.find(0));
	EXPECT_EQ(2u, call.find(0)->data);
	EXPECT_EQ(sizeof(uint64_t), call.find(1)->len);

	// Kernels up to 6.12 do not know the method: their error, nothing else.
	k.on_ioctl = [](struct ib_uverbs_ioctl_hdr *) { return EPROTONOSUPPORT; };
	EXPECT_EQ(EPROTONOSUPPORT, ibv_cmd_query_port_speed(c.ctx(), 1, &speed));
	EXPECT_TRUE(k.writes.empty());
}
#endif
