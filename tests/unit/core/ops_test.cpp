// Op tables: verbs_dummy_ops has no NULL slot and follows the EOPNOTSUPP
// conventions; verbs_set_ops copies non-NULL ops and mirrors them.
#include "core/context_private.h"
#include "core/ops.h"
#include "core/verbs/verbs.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

using ov::core::dummy_ops;

TEST(DummyOps, EverySlotIsSet)
{
	// rdma-core 64 added seven slots (alloc_buf, alloc_dmah, dealloc_dmah,
	// dm_export_dmabuf_fd, free_buf, query_port_speed, reg_mr_ex).
	static_assert(sizeof(verbs_context_ops) == (_OPENVERBS_ABI >= 64 ? 83 : 76) * sizeof(void *));
	void *slots[kVerbsOpsCount];
	memcpy(slots, &dummy_ops, sizeof(slots));
	for (size_t i = 0; i < kVerbsOpsCount; ++i)
		EXPECT_NE(slots[i], nullptr) << "slot " << i;
}

TEST(DummyOps, Conventions)
{
	errno = 0;
	EXPECT_EQ(dummy_ops.alloc_pd(nullptr), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
	errno = 0;
	EXPECT_EQ(dummy_ops.open_xrcd(nullptr, nullptr), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
	errno = 0;
	EXPECT_EQ(dummy_ops.import_dm(nullptr, 1), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
	EXPECT_EQ(dummy_ops.dealloc_pd(nullptr), EOPNOTSUPP);
	EXPECT_EQ(dummy_ops.query_port(nullptr, 1, nullptr), EOPNOTSUPP);
	EXPECT_EQ(dummy_ops.query_device_ex(nullptr, nullptr, nullptr, 0), EOPNOTSUPP);
	EXPECT_EQ(dummy_ops.poll_cq(nullptr, 1, nullptr), EOPNOTSUPP);
	EXPECT_EQ(dummy_ops.req_notify_cq(nullptr, 0), EOPNOTSUPP);
	EXPECT_EQ(dummy_ops.get_srq_num(nullptr, nullptr), EOPNOTSUPP);
	EXPECT_EQ(dummy_ops.query_qp_data_in_order(nullptr, IBV_WR_SEND, 0), 0);
	errno = 0;
	EXPECT_EQ(dummy_ops.rereg_mr(nullptr, 0, nullptr, nullptr, 0, 0), IBV_REREG_MR_ERR_INPUT);
	EXPECT_EQ(errno, EOPNOTSUPP);
	dummy_ops.async_event(nullptr, nullptr);
	dummy_ops.cq_event(nullptr);
	dummy_ops.free_context(nullptr);
	dummy_ops.unimport_pd(nullptr);
	dummy_ops.unimport_mr(nullptr);
	dummy_ops.unimport_dm(nullptr);
}

#if _OPENVERBS_ABI >= 64
// rdma-core 64's new slots without a provider op: DMA handles, port speed
// and dm export are not supported (pointer: NULL/errno, int: the errno
// value, export: -1/errno); buffers and reg_mr_ex have library defaults.
TEST(DummyOps, Conventions64)
{
	errno = 0;
	EXPECT_EQ(dummy_ops.alloc_dmah(nullptr, nullptr), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
	EXPECT_EQ(dummy_ops.dealloc_dmah(nullptr), EOPNOTSUPP);
	uint64_t speed = 7;
	EXPECT_EQ(dummy_ops.query_port_speed(nullptr, 1, &speed), EOPNOTSUPP);
	EXPECT_EQ(speed, 7u);
	errno = 0;
	EXPECT_EQ(dummy_ops.dm_export_dmabuf_fd(nullptr), -1);
	EXPECT_EQ(errno, EOPNOTSUPP);
	EXPECT_EQ(dummy_ops.alloc_buf, &ov::verbs::default_alloc_buf);
	EXPECT_EQ(dummy_ops.free_buf, &ov::verbs::default_free_buf);
	EXPECT_EQ(dummy_ops.reg_mr_ex, &ov::verbs::default_reg_mr_ex);
}
#endif

TEST(DummyOps, PostStubsReportTheFirstRequest)
{
	ibv_send_wr swr{};
	ibv_send_wr *sbad = nullptr;
	EXPECT_EQ(dummy_ops.post_send(nullptr, &swr, &sbad), EOPNOTSUPP);
	EXPECT_EQ(sbad, &swr);
	ibv_recv_wr rwr{};
	ibv_recv_wr *rbad = nullptr;
	EXPECT_EQ(dummy_ops.post_recv(nullptr, &rwr, &rbad), EOPNOTSUPP);
	EXPECT_EQ(rbad, &rwr);
	rbad = nullptr;
	EXPECT_EQ(dummy_ops.post_srq_recv(nullptr, &rwr, &rbad), EOPNOTSUPP);
	EXPECT_EQ(rbad, &rwr);
	ibv_ops_wr owr{};
	ibv_ops_wr *obad = nullptr;
	EXPECT_EQ(dummy_ops.post_srq_ops(nullptr, &owr, &obad), EOPNOTSUPP);
	EXPECT_EQ(obad, &owr);
}

namespace {

struct Ctx {
	verbs_context vctx{};
	verbs_ex_private priv{};
	Ctx()
	{
		vctx.priv = &priv;
		vctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
		ov::core::set_ops(&vctx, &dummy_ops);
	}
};

ibv_pd *my_alloc_pd(ibv_context *) { return reinterpret_cast<ibv_pd *>(0x1234); }
int my_poll_cq(ibv_cq *, int, ibv_wc *) { return 7; }
ibv_xrcd *my_open_xrcd(ibv_context *, ibv_xrcd_init_attr *) { return nullptr; }
ibv_flow *my_create_flow(ibv_qp *, ibv_flow_attr *) { return nullptr; }
void my_free_context(ibv_context *) {}

} // namespace

TEST(SetOps, MirrorsIntoEveryKindOfSlot)
{
	Ctx c;
	verbs_context_ops ops{};
	ops.alloc_pd = my_alloc_pd;          // COMPAT
	ops.poll_cq = my_poll_cq;            // LIVE
	ops.open_xrcd = my_open_xrcd;        // VCTX
	ops.create_flow = my_create_flow;    // FLOW
	ops.free_context = my_free_context;  // PRIV
	ov::core::set_ops(&c.vctx, &ops);

	EXPECT_EQ(c.priv.ops.alloc_pd, my_alloc_pd);
	EXPECT_EQ(reinterpret_cast<void *>(c.vctx.context.ops._compat_alloc_pd),
		  reinterpret_cast<void *>(my_alloc_pd));
	EXPECT_EQ(c.vctx.context.ops.poll_cq, my_poll_cq);
	EXPECT_EQ(c.vctx.open_xrcd, my_open_xrcd);
	EXPECT_EQ(c.vctx.ibv_create_flow, my_create_flow);
	EXPECT_EQ(c.priv.ops.free_context, my_free_context);
	// Untouched slots keep the dummies, in priv and in public.
	EXPECT_EQ(c.priv.ops.dealloc_pd, dummy_ops.dealloc_pd);
	EXPECT_EQ(c.vctx.close_xrcd, dummy_ops.close_xrcd);
	EXPECT_EQ(c.vctx.context.ops.req_notify_cq, dummy_ops.req_notify_cq);
}

TEST(SetOps, NullOpsNeverOverwriteAndLayeringWorks)
{
	Ctx c;
	verbs_context_ops first{};
	first.poll_cq = my_poll_cq;
	ov::core::set_ops(&c.vctx, &first);
	verbs_context_ops second{};
	second.alloc_pd = my_alloc_pd;
	ov::core::set_ops(&c.vctx, &second);
	EXPECT_EQ(c.priv.ops.poll_cq, my_poll_cq);
	EXPECT_EQ(c.priv.ops.alloc_pd, my_alloc_pd);
}

TEST(SetOps, PublicSlotsAreNeverNullAfterDummies)
{
	Ctx c;
	EXPECT_NE(c.vctx.open_xrcd, nullptr);
	EXPECT_NE(c.vctx.alloc_parent_domain, nullptr);
	EXPECT_NE(c.vctx.query_device_ex, nullptr);
	EXPECT_NE(c.vctx.ibv_destroy_flow, nullptr);
	EXPECT_NE(c.vctx.context.ops.post_send, nullptr);
	EXPECT_NE(c.vctx.context.ops._compat_async_event, nullptr);
	// Application inline code reaches the dummy, not a NULL pointer.
	ibv_xrcd_init_attr attr{};
	errno = 0;
	EXPECT_EQ(ibv_open_xrcd(&c.vctx.context, &attr), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
}

TEST(SetOps, DummyInstallEqualsSetOpsWithTheDummyTable)
{
	Ctx a, b;
	// Start both from the same non-zero bytes (Ctx installs the dummy table
	// itself), so a word the fast install writes but set_ops does not shows.
	for (Ctx *c : {&a, &b}) {
		memset(&c->vctx, 0x3C, sizeof(c->vctx));
		memset(&c->priv, 0, sizeof(c->priv));
		c->vctx.priv = &c->priv;
	}
	// Provider-owned fields around the slots must survive either way.
	a.vctx.sz = b.vctx.sz = 0x55;
	a.vctx.context.cmd_fd = b.vctx.context.cmd_fd = 9;
	ov::core::set_ops(&a.vctx, &dummy_ops);
	ov::core::set_dummy_ops(&b.vctx);
	EXPECT_EQ(0, memcmp(&a.priv.ops, &b.priv.ops, sizeof(a.priv.ops)));
	// Compare the whole verbs_context except the priv pointer (each Ctx
	// points at its own).
	b.vctx.priv = a.vctx.priv;
	EXPECT_EQ(0, memcmp(&a.vctx, &b.vctx, sizeof(a.vctx)));
}
