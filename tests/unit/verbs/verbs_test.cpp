// Unit tests of the verbs (src/core/verbs + src/facade/verbs_*.cpp) on the
// fake provider of fake_provider.h.
#include "fake_provider.h"

#include "core/context_private.h"
#include "core/verbs/verbs.h"

#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <netinet/ip.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace verbs_test;

// librdmacm's marshalling helpers have no public header in rdma-core 44.
extern "C" {
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);
}

namespace {

struct ibv_gid_entry query_entry(struct ibv_context *ctx, uint32_t port, uint32_t index, int *ret)
{
	struct ibv_gid_entry e;
	memset(&e, 0xee, sizeof(e));
	*ret = ibv_query_gid_ex(ctx, port, index, &e, 0);
	return e;
}

} // namespace

// ---- queries -------------------------------------------------------------

TEST_F(VerbsTest, QueryDeviceAsksProviderForTheBasicStructOnly)
{
	struct ibv_device_attr attr;
	ASSERT_EQ(ibv_query_device(ctx, &attr), 0);
	EXPECT_EQ(fake().device_attr_size, sizeof(struct ibv_device_attr));
	EXPECT_STREQ(attr.fw_ver, "1.2.3");
	EXPECT_EQ(attr.max_qp, 77);
}

TEST_F(VerbsTest, QueryDevicePassesProviderErrno)
{
	struct ibv_device_attr attr;
	fake().fail_errno = EIO;
	EXPECT_EQ(ibv_query_device(ctx, &attr), EIO);
}

TEST_F(VerbsTest, QueryPortMacroFillsTheWholeStruct)
{
	struct ibv_port_attr attr;
	memset(&attr, 0xff, sizeof(attr));
	ASSERT_EQ(ibv_query_port(ctx, 1, &attr), 0);
	EXPECT_EQ(attr.state, IBV_PORT_ACTIVE);
	EXPECT_EQ(attr.lid, 7);
	EXPECT_EQ(attr.flags, 0x5a);
	EXPECT_EQ(attr.port_cap_flags2, 0xabcd);
}

TEST_F(VerbsTest, QueryPortWithOldStructSizeCopiesOnlyThatMuch)
{
	unsigned char buf[sizeof(struct ibv_port_attr) + 8];
	memset(buf, 0xcc, sizeof(buf));
	// An application built with the 48-byte struct of older headers.
	ASSERT_EQ(vctx->query_port(ctx, 1, reinterpret_cast<struct ibv_port_attr *>(buf), 48), 0);
	auto *attr = reinterpret_cast<struct ibv_port_attr *>(buf);
	EXPECT_EQ(attr->state, IBV_PORT_ACTIVE);
	EXPECT_EQ(attr->flags, 0x5a);
	for (size_t i = 48; i < sizeof(buf); i++)
		EXPECT_EQ(buf[i], 0xcc) << "byte " << i << " written past the caller's struct";
}

TEST_F(VerbsTest, ExportedQueryPortFillsTheLegacyHead)
{
	unsigned char buf[sizeof(struct ibv_port_attr)];
	memset(buf, 0xcc, sizeof(buf));
#undef ibv_query_port
	ASSERT_EQ(ibv_query_port(ctx, 1, reinterpret_cast<struct _compat_ibv_port_attr *>(buf)), 0);
	EXPECT_EQ(buf[48], 0xcc);
	EXPECT_EQ(reinterpret_cast<struct ibv_port_attr *>(buf)->lid, 7);
}

TEST_F(VerbsTest, QueryPortPassesProviderErrno)
{
	struct ibv_port_attr attr;
	EXPECT_EQ(___ibv_query_port(ctx, 2, &attr), EINVAL);
	fake().fail_errno = ENODEV;
	EXPECT_EQ(___ibv_query_port(ctx, 1, &attr), ENODEV);
}

TEST_F(VerbsTest, QueryGidReadsSysfsWhenTheKernelHasNoIoctl)
{
	add_gid(1, 0, "fe80:0000:0000:0000:0011:2233:4455:6677", "IB/RoCE v1");
	union ibv_gid gid;
	ASSERT_EQ(ibv_query_gid(ctx, 1, 0, &gid), 0);
	const uint8_t want[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77};
	EXPECT_EQ(memcmp(gid.raw, want, 16), 0);
}

TEST_F(VerbsTest, QueryGidOfEmptySlotIsZero)
{
	add_gid(1, 1, "0000:0000:0000:0000:0000:0000:0000:0000", nullptr);
	union ibv_gid gid;
	memset(&gid, 0xff, sizeof(gid));
	ASSERT_EQ(ibv_query_gid(ctx, 1, 1, &gid), 0);
	const union ibv_gid zero = {};
	EXPECT_EQ(memcmp(&gid, &zero, sizeof(gid)), 0);
}

TEST_F(VerbsTest, QueryGidMissingFileFailsWithMinusOne)
{
	union ibv_gid gid;
	errno = 0;
	EXPECT_EQ(ibv_query_gid(ctx, 1, 3, &gid), -1);
	EXPECT_NE(errno, 0);
}

TEST_F(VerbsTest, QueryGidExGivesTypeAndIndexes)
{
	fake().link_layer = IBV_LINK_LAYER_ETHERNET;
	add_gid(1, 0, "fe80:0000:0000:0000:0011:2233:4455:6677", "IB/RoCE v1");
	add_gid(1, 1, ipv4_gid_text(10, 77, 0, 1), "RoCE v2", "lo");
	int ret;
	struct ibv_gid_entry e = query_entry(ctx, 1, 0, &ret);
	ASSERT_EQ(ret, 0);
	EXPECT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V1);
	EXPECT_EQ(e.gid_index, 0u);
	EXPECT_EQ(e.port_num, 1u);
	EXPECT_EQ(e.ndev_ifindex, 0u);
	e = query_entry(ctx, 1, 1, &ret);
	ASSERT_EQ(ret, 0);
	EXPECT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2);
	EXPECT_EQ(e.ndev_ifindex, 1u); // "lo"
	EXPECT_EQ(e.gid.raw[10], 0xff);
	EXPECT_EQ(e.gid.raw[15], 1);
}

TEST_F(VerbsTest, QueryGidExOnInfiniBandIsTypeIb)
{
	add_gid(1, 0, "fe80:0000:0000:0000:0011:2233:4455:6677", nullptr);
	// IB ports have no gid_attrs folder at all.
	int ret;
	struct ibv_gid_entry e = query_entry(ctx, 1, 0, &ret);
	ASSERT_EQ(ret, 0);
	EXPECT_EQ(e.gid_type, IBV_GID_TYPE_IB);
}

TEST_F(VerbsTest, QueryGidExEmptySlotIsEnodata)
{
	add_gid(1, 2, "0000:0000:0000:0000:0000:0000:0000:0000", nullptr);
	int ret;
	query_entry(ctx, 1, 2, &ret);
	EXPECT_EQ(ret, ENODATA);
}

TEST_F(VerbsTest, QueryGidExRejectsFlagsWithoutKernel)
{
	add_gid(1, 0, "fe80:0000:0000:0000:0011:2233:4455:6677", "IB/RoCE v1");
	struct ibv_gid_entry e;
	EXPECT_EQ(_ibv_query_gid_ex(ctx, 1, 0, &e, 1, sizeof(e)), EOPNOTSUPP);
	EXPECT_EQ(_ibv_query_gid_ex(ctx, 1, 0, &e, 0, sizeof(e) - 1), EINVAL);
}

TEST_F(VerbsTest, QueryGidTableSkipsEmptySlots)
{
	fake().link_layer = IBV_LINK_LAYER_ETHERNET;
	fake().gid_tbl_len = 4;
	add_gid(1, 0, "fe80:0000:0000:0000:0011:2233:4455:6677", "IB/RoCE v1");
	add_gid(1, 1, "0000:0000:0000:0000:0000:0000:0000:0000", nullptr);
	add_gid(1, 2, ipv4_gid_text(10, 0, 0, 2), "RoCE v2");
	add_gid(1, 3, "0000:0000:0000:0000:0000:0000:0000:0000", nullptr);
	struct ibv_gid_entry table[8];
	ssize_t n = ibv_query_gid_table(ctx, table, 8, 0);
	ASSERT_EQ(n, 2);
	EXPECT_EQ(table[0].gid_index, 0u);
	EXPECT_EQ(table[0].gid_type, IBV_GID_TYPE_ROCE_V1);
	EXPECT_EQ(table[1].gid_index, 2u);
	EXPECT_EQ(table[1].gid_type, IBV_GID_TYPE_ROCE_V2);
	// Too small an array: -EINVAL once a further valid entry shows up.
	EXPECT_EQ(ibv_query_gid_table(ctx, table, 1, 0), -EINVAL);
	EXPECT_EQ(ibv_query_gid_table(ctx, table, 2, 0), 2);
}

TEST_F(VerbsTest, QueryGidTypePrivateSymbol)
{
	add_gid(1, 0, ipv4_gid_text(10, 0, 0, 2), "RoCE v2");
	add_gid(1, 1, "fe80:0000:0000:0000:0011:2233:4455:6677", "IB/RoCE v1");
	add_gid(1, 2, "0000:0000:0000:0000:0000:0000:0000:0000", nullptr);
	enum ibv_gid_type_sysfs type;
	// A success leaves the caller's errno alone (the lookup clears it
	// inside to tell an empty file from a failed read).
	errno = EOPNOTSUPP;
	ASSERT_EQ(ibv_query_gid_type(ctx, 1, 0, &type), 0);
	EXPECT_EQ(type, IBV_GID_TYPE_SYSFS_ROCE_V2);
	EXPECT_EQ(errno, EOPNOTSUPP);
	ASSERT_EQ(ibv_query_gid_type(ctx, 1, 1, &type), 0);
	EXPECT_EQ(type, IBV_GID_TYPE_SYSFS_IB_ROCE_V1);
	ASSERT_EQ(ibv_query_gid_type(ctx, 1, 2, &type), 0);
	EXPECT_EQ(type, IBV_GID_TYPE_SYSFS_IB_ROCE_V1);
	EXPECT_EQ(errno, EOPNOTSUPP);
}

TEST_F(VerbsTest, QueryGidTypeUnknownStringFails)
{
	add_gid(1, 0, ipv4_gid_text(10, 0, 0, 2), "RoCE v9");
	enum ibv_gid_type_sysfs type;
	EXPECT_EQ(ibv_query_gid_type(ctx, 1, 0, &type), -1);
}

TEST_F(VerbsTest, PkeysInNetworkOrderAndIndexLookup)
{
	write_sysfs("ports/1/pkeys/0", "0xffff\n");
	write_sysfs("ports/1/pkeys/1", "0x8001\n");
	__be16 pkey;
	ASSERT_EQ(ibv_query_pkey(ctx, 1, 1, &pkey), 0);
	EXPECT_EQ(pkey, htons(0x8001));
	EXPECT_EQ(ibv_get_pkey_index(ctx, 1, htons(0x8001)), 1);
	EXPECT_EQ(ibv_get_pkey_index(ctx, 1, htons(0xffff)), 0);
	EXPECT_EQ(ibv_get_pkey_index(ctx, 1, htons(0x1234)), -1);
	EXPECT_EQ(ibv_query_pkey(ctx, 1, 2, &pkey), -1);
}

TEST_F(VerbsTest, PkeyGarbageIsRejected)
{
	write_sysfs("ports/1/pkeys/0", "zzz\n");
	__be16 pkey;
	EXPECT_EQ(ibv_query_pkey(ctx, 1, 0, &pkey), -1);
	EXPECT_EQ(errno, EINVAL);
}

// ---- PD and MR ---------------------------------------------------------------

TEST_F(VerbsTest, AllocPdSetsContextAndPassesErrno)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	ASSERT_NE(pd, nullptr);
	EXPECT_EQ(pd->context, ctx);
	EXPECT_EQ(ibv_dealloc_pd(pd), 0);
	fake().fail_errno = ENOMEM;
	errno = 0;
	EXPECT_EQ(ibv_alloc_pd(ctx), nullptr);
	EXPECT_EQ(errno, ENOMEM);
}

TEST_F(VerbsTest, DeallocPdPassesProviderError)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	fake().fail_errno = EBUSY;
	EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);
	EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

TEST_F(VerbsTest, RegMrFillsLibraryFields)
{
	char buf[4096];
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(mr, nullptr);
	EXPECT_EQ(mr->context, ctx);
	EXPECT_EQ(mr->pd, pd);
	EXPECT_EQ(mr->addr, buf);
	EXPECT_EQ(mr->length, sizeof(buf));
	EXPECT_EQ(fake().last_iova, reinterpret_cast<uintptr_t>(buf));
	EXPECT_EQ(ibv_dereg_mr(mr), 0);
	EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

TEST_F(VerbsTest, RegMrIovaPassesIova)
{
	char buf[64];
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr = ibv_reg_mr_iova(pd, buf, sizeof(buf), 0x10000, 0);
	ASSERT_NE(mr, nullptr);
	EXPECT_EQ(fake().last_iova, 0x10000u);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
}

TEST_F(VerbsTest, OptionalAccessBitsDroppedUnlessKernelSupportsThem)
{
	char buf[64];
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	const unsigned access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING;
	struct ibv_mr *mr = ibv_reg_mr_iova2(pd, buf, sizeof(buf), 0, access);
	ASSERT_NE(mr, nullptr);
	EXPECT_EQ(fake().last_access, IBV_ACCESS_LOCAL_WRITE);
	ibv_dereg_mr(mr);

	vdev->core_support = IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS;
	mr = ibv_reg_mr_iova2(pd, buf, sizeof(buf), 0, access);
	ASSERT_NE(mr, nullptr);
	EXPECT_EQ(static_cast<unsigned>(fake().last_access), access);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
}

TEST_F(VerbsTest, RegMrFailurePassesErrno)
{
	char buf[64];
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	fake().fail_errno = EFAULT;
	errno = 0;
	EXPECT_EQ(ibv_reg_mr(pd, buf, sizeof(buf), 0), nullptr);
	EXPECT_EQ(errno, EFAULT);
	ibv_dealloc_pd(pd);
}

TEST_F(VerbsTest, RegDmabufMrSetsOffsetAsAddr)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr = ibv_reg_dmabuf_mr(pd, 0x2000, 4096, 0x2000, 3, 0);
	ASSERT_NE(mr, nullptr);
	EXPECT_EQ(mr->addr, reinterpret_cast<void *>(0x2000));
	EXPECT_EQ(mr->length, 4096u);
	EXPECT_EQ(mr->pd, pd);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
}

TEST_F(VerbsTest, ReregMrInputChecks)
{
	char buf[64];
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), 0);
	ASSERT_NE(mr, nullptr);
	EXPECT_EQ(ibv_rereg_mr(mr, 1 << 5, nullptr, nullptr, 0, 0), IBV_REREG_MR_ERR_INPUT);
	EXPECT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, nullptr, 0, 0),
		  IBV_REREG_MR_ERR_INPUT);
	EXPECT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE),
		  IBV_REREG_MR_ERR_INPUT);
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(fake().rereg_flags, -1) << "provider reached despite bad input";

	char other[128];
	ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, other, sizeof(other), 0), 0);
	EXPECT_EQ(mr->addr, other);
	EXPECT_EQ(mr->length, sizeof(other));

	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, nullptr, 0, 0), 0);
	EXPECT_EQ(mr->pd, pd2);

	fake().fail_errno = EINVAL;
	EXPECT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, 1), IBV_REREG_MR_ERR_CMD);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_dealloc_pd(pd2);
}

TEST_F(VerbsTest, ReregOfImportedMrIsRejected)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr = ibv_import_mr(pd, 99);
	ASSERT_NE(mr, nullptr);
	EXPECT_EQ(mr->handle, 99u);
	EXPECT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, 1),
		  IBV_REREG_MR_ERR_INPUT);
	ibv_unimport_mr(mr);
	ibv_dealloc_pd(pd);
}

TEST_F(VerbsTest, ImportPdAndUnimport)
{
	struct ibv_pd *pd = ibv_import_pd(ctx, 42);
	ASSERT_NE(pd, nullptr);
	EXPECT_EQ(pd->handle, 42u);
	ibv_unimport_pd(pd);
	fake().fail_errno = EBADF;
	EXPECT_EQ(ibv_import_pd(ctx, 1), nullptr);
	EXPECT_EQ(errno, EBADF);
}

TEST_F(VerbsTest, UnimplementedOpsAnswerEopnotsupp)
{
	// import_dm and unimport_dm are not in the fake: the dummy ops answer.
	errno = 0;
	EXPECT_EQ(ibv_import_dm(ctx, 1), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
	// A provider without create_qp_ex (libsiw): ibv_create_qp_ex with more
	// than the PD in comp_mask (pyverbs' random masks add CREATE_FLAGS)
	// fails with EOPNOTSUPP, which rdma-core's tests take as a skip.
	struct ibv_qp_init_attr_ex qx = {};
	qx.qp_type = IBV_QPT_RC;
	qx.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
	errno = 0;
	EXPECT_EQ(ibv_create_qp_ex(ctx, &qx), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
}

// ---- CQs and channels ------------------------------------------------------

TEST_F(VerbsTest, CreateCqInitialisesLibraryFields)
{
	int cookie;
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, &cookie, nullptr, 0);
	ASSERT_NE(cq, nullptr);
	EXPECT_EQ(cq->context, ctx);
	EXPECT_EQ(cq->cq_context, &cookie);
	EXPECT_EQ(cq->channel, nullptr);
	EXPECT_EQ(cq->comp_events_completed, 0u);
	EXPECT_EQ(cq->cqe, 16);
	EXPECT_EQ(ibv_resize_cq(cq, 32), 0);
	EXPECT_EQ(cq->cqe, 32);
	EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

TEST_F(VerbsTest, ChannelRefcountFollowsCqs)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	ASSERT_NE(ch, nullptr);
	EXPECT_EQ(ch->context, ctx);
	EXPECT_GE(ch->fd, 0);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, nullptr, ch, 0);
	ASSERT_NE(cq, nullptr);
	EXPECT_EQ(ch->refcnt, 1);
	EXPECT_EQ(ibv_destroy_comp_channel(ch), EBUSY);
	fake().fail_errno = EIO;
	EXPECT_EQ(ibv_destroy_cq(cq), EIO);
	EXPECT_EQ(ch->refcnt, 1) << "a failed destroy must keep the channel reference";
	EXPECT_EQ(ibv_destroy_cq(cq), 0);
	EXPECT_EQ(ch->refcnt, 0);
	EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

TEST_F(VerbsTest, CompletionEventRoundTrip)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	ASSERT_NE(ch, nullptr);
	int cookie;
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, &cookie, ch, 0);
	ASSERT_NE(cq, nullptr);
	// What the device does: one event record naming the CQ's user handle,
	// written through the channel's pipe opened for writing by its /proc
	// name (channel->fd is the pipe's read end; the soft device's
	// notify_pipe writes the same way).
	struct ib_uverbs_comp_event_desc desc = {};
	desc.cq_handle = reinterpret_cast<uintptr_t>(cq);
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", ch->fd);
	int wfd = open(path, O_WRONLY | O_CLOEXEC);
	ASSERT_GE(wfd, 0) << strerror(errno);
	ASSERT_EQ(write(wfd, &desc, sizeof(desc)), static_cast<ssize_t>(sizeof(desc)));
	close(wfd);
	struct pollfd pfd = {ch->fd, POLLIN, 0};
	ASSERT_EQ(poll(&pfd, 1, 1000), 1) << "channel fd must work with poll";

	struct ibv_cq *ev_cq = nullptr;
	void *ev_ctx = nullptr;
	ASSERT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
	EXPECT_EQ(ev_cq, cq);
	EXPECT_EQ(ev_ctx, &cookie);
	EXPECT_EQ(fake().cq_events, 1);
	ibv_ack_cq_events(cq, 1);
	EXPECT_EQ(cq->comp_events_completed, 1u);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_EQ(ibv_destroy_comp_channel(ch), 0);
}

TEST_F(VerbsTest, GetCqEventOnNonBlockingEmptyChannel)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	ASSERT_NE(ch, nullptr);
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	struct ibv_cq *cq;
	void *c;
	EXPECT_EQ(ibv_get_cq_event(ch, &cq, &c), -1);
	EXPECT_EQ(errno, EAGAIN);
	ASSERT_EQ(ibv_destroy_comp_channel(ch), 0);
}

TEST_F(VerbsTest, CreateCqExValidatesWcFlags)
{
	struct ibv_cq_init_attr_ex attr = {};
	attr.cqe = 8;
	attr.wc_flags = 1ULL << 40;
	errno = 0;
	EXPECT_EQ(ibv_create_cq_ex(ctx, &attr), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
	EXPECT_EQ(fake().calls, 0);

	int cookie;
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	attr.wc_flags = IBV_WC_STANDARD_FLAGS;
	attr.channel = ch;
	attr.cq_context = &cookie;
	struct ibv_cq_ex *cq = ibv_create_cq_ex(ctx, &attr);
	ASSERT_NE(cq, nullptr);
	struct ibv_cq *base = ibv_cq_ex_to_cq(cq);
	EXPECT_EQ(base->context, ctx);
	EXPECT_EQ(base->channel, ch);
	EXPECT_EQ(base->cq_context, &cookie);
	EXPECT_EQ(ch->refcnt, 1);
	EXPECT_EQ(ibv_destroy_cq(base), 0);
	EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

TEST_F(VerbsTest, VerbsInitCqForProviders)
{
	struct ibv_cq cq;
	memset(&cq, 0xab, sizeof(cq));
	verbs_init_cq(&cq, ctx, nullptr, nullptr);
	EXPECT_EQ(cq.context, ctx);
	EXPECT_EQ(cq.async_events_completed, 0u);
	pthread_mutex_lock(&cq.mutex); // initialised
	pthread_mutex_unlock(&cq.mutex);
}

// ---- SRQ, QP, AH, multicast ------------------------------------------------

TEST_F(VerbsTest, SrqLifecycle)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	int cookie;
	struct ibv_srq_init_attr init = {};
	init.srq_context = &cookie;
	init.attr.max_wr = 10;
	init.attr.max_sge = 1;
	struct ibv_srq *srq = ibv_create_srq(pd, &init);
	ASSERT_NE(srq, nullptr);
	EXPECT_EQ(srq->context, ctx);
	EXPECT_EQ(srq->pd, pd);
	EXPECT_EQ(srq->srq_context, &cookie);
	EXPECT_EQ(init.attr.max_wr, 64u);
	struct ibv_srq_attr attr = {};
	EXPECT_EQ(ibv_query_srq(srq, &attr), 0);
	EXPECT_EQ(attr.max_wr, 64u);
	fake().fail_errno = EINVAL;
	EXPECT_EQ(ibv_modify_srq(srq, &attr, IBV_SRQ_LIMIT), EINVAL);
	EXPECT_EQ(ibv_destroy_srq(srq), 0);
	ibv_dealloc_pd(pd);
}

TEST_F(VerbsTest, QpStateTracksModifyAndQuery)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
	struct ibv_qp_init_attr init = {};
	init.send_cq = cq;
	init.recv_cq = cq;
	init.qp_type = IBV_QPT_RC;
	init.cap.max_send_wr = 1;
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	ASSERT_NE(qp, nullptr);
	EXPECT_EQ(qp->state, IBV_QPS_RESET);
	EXPECT_EQ(ibv_qp_to_qp_ex(qp), nullptr);

	struct ibv_qp_attr attr = {};
	attr.qp_state = IBV_QPS_INIT;
	ASSERT_EQ(ibv_modify_qp(qp, &attr, IBV_QP_STATE), 0);
	EXPECT_EQ(qp->state, IBV_QPS_INIT);

	attr.qp_state = IBV_QPS_RTR;
	fake().fail_errno = EINVAL;
	EXPECT_EQ(ibv_modify_qp(qp, &attr, IBV_QP_STATE), EINVAL);
	EXPECT_EQ(qp->state, IBV_QPS_INIT) << "failed modify must not change the state";

	// Without IBV_QP_STATE in the mask the state field is left alone.
	attr.qp_state = IBV_QPS_ERR;
	ASSERT_EQ(ibv_modify_qp(qp, &attr, IBV_QP_PKEY_INDEX), 0);
	EXPECT_EQ(qp->state, IBV_QPS_INIT);

	struct ibv_qp_init_attr qinit;
	qp->state = IBV_QPS_UNKNOWN;
	ASSERT_EQ(ibv_query_qp(qp, &attr, IBV_QP_STATE, &qinit), 0);
	EXPECT_EQ(qp->state, IBV_QPS_INIT);

	auto *vqp = reinterpret_cast<struct verbs_qp *>(qp);
	vqp->comp_mask |= VERBS_QP_EX;
	EXPECT_EQ(ibv_qp_to_qp_ex(qp), &vqp->qp_ex);

	struct ibv_ece ece = {};
	EXPECT_EQ(ibv_query_ece(qp, &ece), 0);
	EXPECT_EQ(ece.vendor_id, 0x15b3u);
	fake().fail_errno = EOPNOTSUPP;
	EXPECT_EQ(ibv_set_ece(qp, &ece), EOPNOTSUPP);
#if _OPENVERBS_ABI >= 56
	// rdma-core 56: the provider answers with capability bits (the fake: 1,
	// WHOLE_MSG); RETURN_CAPS asks for the vector, in which WHOLE_MSG
	// implies ALIGNED_128_BYTES; unknown flags answer 0 without asking.
	EXPECT_EQ(ibv_query_qp_data_in_order(qp, IBV_WR_RDMA_WRITE, 0), 1);
	EXPECT_EQ(ibv_query_qp_data_in_order(qp, IBV_WR_RDMA_WRITE, IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS),
		  IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG | IBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES);
	EXPECT_EQ(fake().last_data_in_order_flags, (unsigned)IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS);
	fake().last_data_in_order_flags = 0;
	EXPECT_EQ(ibv_query_qp_data_in_order(qp, IBV_WR_RDMA_WRITE, 2), 0);
	EXPECT_EQ(fake().last_data_in_order_flags, 0u);
#else
	EXPECT_EQ(ibv_query_qp_data_in_order(qp, IBV_WR_RDMA_WRITE, 3), 1);
	EXPECT_EQ(fake().last_data_in_order_flags, 3u);
#endif

	union ibv_gid mgid = {};
	mgid.raw[0] = 0xff;
	EXPECT_EQ(ibv_attach_mcast(qp, &mgid, 0xc001), 0);
	EXPECT_EQ(fake().mcast_attached, 1);
	EXPECT_EQ(ibv_detach_mcast(qp, &mgid, 0xc001), 0);
	EXPECT_EQ(fake().mcast_attached, 0);

	EXPECT_EQ(ibv_destroy_qp(qp), 0);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
}

TEST_F(VerbsTest, CreateAhSetsContextAndPd)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_ah_attr attr = {};
	attr.dlid = 3;
	attr.port_num = 1;
	struct ibv_ah *ah = ibv_create_ah(pd, &attr);
	ASSERT_NE(ah, nullptr);
	EXPECT_EQ(ah->context, ctx);
	EXPECT_EQ(ah->pd, pd);
	EXPECT_EQ(ibv_destroy_ah(ah), 0);
	fake().fail_errno = ENOMEM;
	EXPECT_EQ(ibv_create_ah(pd, &attr), nullptr);
	EXPECT_EQ(errno, ENOMEM);
	ibv_dealloc_pd(pd);
}

TEST_F(VerbsTest, InitAhFromWcWithoutGrh)
{
	struct ibv_wc wc = {};
	wc.slid = 9;
	wc.sl = 2;
	wc.dlid_path_bits = 1;
	struct ibv_grh grh = {};
	struct ibv_ah_attr ah;
	ASSERT_EQ(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &ah), 0);
	EXPECT_EQ(ah.dlid, 9);
	EXPECT_EQ(ah.sl, 2);
	EXPECT_EQ(ah.src_path_bits, 1);
	EXPECT_EQ(ah.port_num, 1);
	EXPECT_EQ(ah.is_global, 0);
}

TEST_F(VerbsTest, InitAhFromWcIbGrh)
{
	// IB: GRH with next header 0x1b; our GID is the GRH's destination.
	add_gid(1, 0, "fe80:0000:0000:0000:0000:0000:0000:0001", nullptr);
	add_gid(1, 1, "fe80:0000:0000:0000:0000:0000:0000:0002", nullptr);
	struct ibv_wc wc = {};
	wc.wc_flags = IBV_WC_GRH;
	wc.slid = 4;
	struct ibv_grh grh = {};
	grh.version_tclass_flow = htonl((6u << 28) | (0x12u << 20) | 0xabcde);
	grh.next_hdr = 0x1b;
	grh.hop_limit = 7;
	grh.dgid.raw[0] = 0xfe;
	grh.dgid.raw[1] = 0x80;
	grh.dgid.raw[15] = 2;
	grh.sgid.raw[0] = 0xfe;
	grh.sgid.raw[1] = 0x80;
	grh.sgid.raw[15] = 9;
	struct ibv_ah_attr ah;
	ASSERT_EQ(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &ah), 0);
	EXPECT_EQ(ah.is_global, 1);
	EXPECT_EQ(ah.grh.sgid_index, 1);
	EXPECT_EQ(ah.grh.dgid.raw[15], 9);
	EXPECT_EQ(ah.grh.flow_label, 0xabcdeu);
	EXPECT_EQ(ah.grh.traffic_class, 0x12);
	EXPECT_EQ(ah.grh.hop_limit, 7);
	EXPECT_EQ(ah.dlid, 4);
}

TEST_F(VerbsTest, InitAhFromWcRoceV2Ipv4)
{
	fake().link_layer = IBV_LINK_LAYER_ETHERNET;
	add_gid(1, 0, "fe80:0000:0000:0000:0000:0000:0000:0001", "IB/RoCE v1");
	add_gid(1, 1, ipv4_gid_text(10, 77, 0, 1), "IB/RoCE v1");
	add_gid(1, 2, ipv4_gid_text(10, 77, 0, 1), "RoCE v2");
	struct ibv_wc wc = {};
	wc.wc_flags = IBV_WC_GRH;
	struct ibv_grh grh = {};
	// The IPv4 header sits in the last 20 bytes of the 40-byte GRH area.
	struct iphdr ip = {};
	ip.version = 4;
	ip.ihl = 5;
	ip.ttl = 64;
	ip.tos = 0x20;
	ip.protocol = IPPROTO_UDP;
	ip.saddr = inet_addr("10.77.0.9");
	ip.daddr = inet_addr("10.77.0.1");
	uint32_t sum = 0;
	const auto *w = reinterpret_cast<const uint16_t *>(&ip);
	for (int i = 0; i < 10; i++)
		sum += w[i];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	ip.check = static_cast<uint16_t>(~sum);
	memcpy(reinterpret_cast<char *>(&grh) + 20, &ip, sizeof(ip));
	struct ibv_ah_attr ah;
	ASSERT_EQ(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &ah), 0);
	EXPECT_EQ(ah.grh.sgid_index, 2) << "must pick the RoCE v2 entry";
	EXPECT_EQ(ah.grh.hop_limit, 64);
	EXPECT_EQ(ah.grh.traffic_class, 0x20);
	EXPECT_EQ(ah.grh.dgid.raw[10], 0xff);
	EXPECT_EQ(ah.grh.dgid.raw[15], 9);
}

TEST_F(VerbsTest, InitAhFromWcUnknownNextHeader)
{
	struct ibv_wc wc = {};
	wc.wc_flags = IBV_WC_GRH;
	struct ibv_grh grh = {};
	grh.version_tclass_flow = htonl(6u << 28);
	grh.next_hdr = 0x99;
	struct ibv_ah_attr ah;
	EXPECT_EQ(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &ah), -1);
	EXPECT_EQ(errno, EPROTONOSUPPORT);
	grh.version_tclass_flow = 0; // neither IPv6 nor IPv4
	EXPECT_EQ(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &ah), -1);
}

TEST_F(VerbsTest, CreateAhFromWc)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_wc wc = {};
	wc.slid = 5;
	struct ibv_grh grh = {};
	struct ibv_ah *ah = ibv_create_ah_from_wc(pd, &wc, &grh, 1);
	ASSERT_NE(ah, nullptr);
	ibv_destroy_ah(ah);
	ibv_dealloc_pd(pd);
}

TEST_F(VerbsTest, ResolveL2NeedsGlobalAttr)
{
	struct ibv_ah_attr attr = {};
	uint8_t mac[6];
	uint16_t vid;
	EXPECT_EQ(ibv_resolve_eth_l2_from_gid(ctx, &attr, mac, &vid), -EINVAL);
}

TEST_F(VerbsTest, ResolveL2MulticastAndLinkLocal)
{
	add_gid(1, 0, "fe80:0000:0000:0000:0000:0000:0000:0001", "IB/RoCE v1");
	struct ibv_ah_attr attr = {};
	attr.is_global = 1;
	attr.port_num = 1;
	uint8_t mac[6];
	uint16_t vid = 0;
	// IPv6 multicast ff02::1:ff00:0001 -> 33:33:ff:00:00:01
	const uint8_t mgid[16] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 1};
	memcpy(attr.grh.dgid.raw, mgid, 16);
	ASSERT_EQ(ibv_resolve_eth_l2_from_gid(ctx, &attr, mac, &vid), 0);
	const uint8_t want[6] = {0x33, 0x33, 0xff, 0, 0, 1};
	EXPECT_EQ(memcmp(mac, want, 6), 0);
	EXPECT_EQ(vid, 0xffff);
	// fe80::0211:22ff:fe33:4455 -> 00:11:22:33:44:55
	const uint8_t ll[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
	memcpy(attr.grh.dgid.raw, ll, 16);
	ASSERT_EQ(ibv_resolve_eth_l2_from_gid(ctx, &attr, mac, &vid), 0);
	const uint8_t want2[6] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55};
	EXPECT_EQ(memcmp(mac, want2, 6), 0);
}

TEST_F(VerbsTest, ResolveL2OfALocalAddressIsTheInterfaceMac)
{
	// GID 0 lives on "lo"; the destination 127.0.0.1 is this host.
	add_gid(1, 0, ipv4_gid_text(127, 0, 0, 1), "RoCE v2", "lo");
	struct ibv_ah_attr attr = {};
	attr.is_global = 1;
	attr.port_num = 1;
	attr.grh.sgid_index = 0;
	attr.grh.dgid.raw[10] = 0xff;
	attr.grh.dgid.raw[11] = 0xff;
	attr.grh.dgid.raw[12] = 127;
	attr.grh.dgid.raw[15] = 1;
	uint8_t mac[6];
	memset(mac, 0xaa, sizeof(mac));
	uint16_t vid = 0;
	ASSERT_EQ(ibv_resolve_eth_l2_from_gid(ctx, &attr, mac, &vid), 0);
	const uint8_t zero[6] = {};
	EXPECT_EQ(memcmp(mac, zero, 6), 0) << "loopback has the all-zero MAC";
	EXPECT_EQ(vid, 0xffff);
}

// ---- helpers without objects ------------------------------------------------

TEST(VerbsStrings, KnownAndUnknownValues)
{
	EXPECT_STREQ(ibv_node_type_str(IBV_NODE_CA), "InfiniBand channel adapter");
	EXPECT_STREQ(ibv_node_type_str(static_cast<enum ibv_node_type>(-1)), "unknown");
	EXPECT_STREQ(ibv_port_state_str(IBV_PORT_ACTIVE), "active");
	EXPECT_STREQ(ibv_port_state_str(static_cast<enum ibv_port_state>(99)), "unknown");
	EXPECT_STREQ(ibv_event_type_str(IBV_EVENT_GID_CHANGE), "GID table change");
	EXPECT_STREQ(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR), "Work Request Flushed Error");
	EXPECT_STREQ(ibv_wc_status_str(static_cast<enum ibv_wc_status>(-5)), "unknown");
}

TEST(VerbsRates, RoundTrips)
{
	EXPECT_EQ(ibv_rate_to_mult(IBV_RATE_10_GBPS), 4);
	EXPECT_EQ(mult_to_ibv_rate(4), IBV_RATE_10_GBPS);
	EXPECT_EQ(ibv_rate_to_mult(IBV_RATE_14_GBPS), -1);
	EXPECT_EQ(ibv_rate_to_mbps(IBV_RATE_100_GBPS), 103125);
	EXPECT_EQ(mbps_to_ibv_rate(103125), IBV_RATE_100_GBPS);
	EXPECT_EQ(mbps_to_ibv_rate(100000), IBV_RATE_MAX);
	EXPECT_EQ(ibv_rate_to_mbps(IBV_RATE_MAX), -1);
}

TEST(VerbsMarshall, QpAttrFromKernel)
{
	struct ib_uverbs_qp_attr k = {};
	k.qp_state = IBV_QPS_RTS;
	k.dest_qp_num = 0x4567;
	k.max_send_wr = 9;
	k.ah_attr.dlid = 0x1234;
	k.ah_attr.grh.dgid[3] = 0x77;
	k.ah_attr.grh.flow_label = 0x12345;
	k.alt_timeout = 14;
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	ibv_copy_qp_attr_from_kern(&a, &k);
	EXPECT_EQ(a.qp_state, IBV_QPS_RTS);
	EXPECT_EQ(a.dest_qp_num, 0x4567u);
	EXPECT_EQ(a.cap.max_send_wr, 9u);
	EXPECT_EQ(a.ah_attr.dlid, 0x1234);
	EXPECT_EQ(a.ah_attr.grh.dgid.raw[3], 0x77);
	EXPECT_EQ(a.ah_attr.grh.flow_label, 0x12345u);
	EXPECT_EQ(a.alt_timeout, 14);
}

TEST(VerbsMarshall, PathRecordRoundTrip)
{
	struct ibv_sa_path_rec rec;
	memset(&rec, 0, sizeof(rec));
	rec.dgid.raw[0] = 0xfe;
	rec.sgid.raw[15] = 3;
	rec.dlid = htons(5);
	rec.pkey = htons(0xffff);
	rec.mtu = IBV_MTU_4096;
	rec.rate = 16;
	rec.packet_life_time = 18;
	rec.numb_path = 1;
	rec.reversible = 1;
	struct ib_user_path_rec k;
	memset(&k, 0, sizeof(k));
	ibv_copy_path_rec_to_kern(&k, &rec);
	EXPECT_EQ(k.dlid, htons(5));
	EXPECT_EQ(k.mtu, static_cast<__u32>(IBV_MTU_4096));
	struct ibv_sa_path_rec back;
	memset(&back, 0, sizeof(back));
	ibv_copy_path_rec_from_kern(&back, &k);
	EXPECT_EQ(memcmp(&back, &rec, sizeof(rec)), 0);
}

TEST(VerbsMarshall, PathRecordEveryFieldBothWays)
{
	// Distinct values in every field the two layouts share, in each direction.
	struct ibv_sa_path_rec rec;
	memset(&rec, 0, sizeof(rec));
	for (unsigned i = 0; i < 16; ++i) {
		rec.dgid.raw[i] = (uint8_t)(0x10 + i);
		rec.sgid.raw[i] = (uint8_t)(0x40 + i);
	}
	rec.dlid = htons(0x1111);
	rec.slid = htons(0x2222);
	rec.raw_traffic = 1;
	rec.flow_label = htonl(0x33333);
	rec.hop_limit = 4;
	rec.traffic_class = 5;
	rec.reversible = 1;
	rec.numb_path = 6;
	rec.pkey = htons(0x7777);
	rec.sl = 8;
	rec.mtu_selector = 2;
	rec.mtu = IBV_MTU_2048;
	rec.rate_selector = 1;
	rec.rate = 9;
	rec.packet_life_time_selector = 3;
	rec.packet_life_time = 10;
	rec.preference = 11;
	struct ib_user_path_rec k;
	memset(&k, 0xee, sizeof(k));
	ibv_copy_path_rec_to_kern(&k, &rec);
	EXPECT_EQ(0, memcmp(k.dgid, rec.dgid.raw, 16));
	EXPECT_EQ(0, memcmp(k.sgid, rec.sgid.raw, 16));
	EXPECT_EQ(k.dlid, htons(0x1111));
	EXPECT_EQ(k.slid, htons(0x2222));
	EXPECT_EQ(k.raw_traffic, 1u);
	EXPECT_EQ(k.flow_label, htonl(0x33333));
	EXPECT_EQ(k.hop_limit, 4);
	EXPECT_EQ(k.traffic_class, 5);
	EXPECT_EQ(k.reversible, 1u);
	EXPECT_EQ(k.numb_path, 6);
	EXPECT_EQ(k.pkey, htons(0x7777));
	EXPECT_EQ(k.sl, 8);
	EXPECT_EQ(k.mtu_selector, 2);
	EXPECT_EQ(k.mtu, static_cast<__u32>(IBV_MTU_2048));
	EXPECT_EQ(k.rate_selector, 1);
	EXPECT_EQ(k.rate, 9);
	EXPECT_EQ(k.packet_life_time_selector, 3);
	EXPECT_EQ(k.packet_life_time, 10);
	EXPECT_EQ(k.preference, 11);

	struct ibv_sa_path_rec back;
	memset(&back, 0, sizeof(back));
	ibv_copy_path_rec_from_kern(&back, &k);
	EXPECT_EQ(memcmp(&back, &rec, sizeof(rec)), 0);
}

TEST(VerbsEvents, ElementOfEveryEventType)
{
	using ov::verbs::event_element;
	using ov::verbs::EventElement;
	EXPECT_EQ(EventElement::Cq, event_element(IBV_EVENT_CQ_ERR));
	for (enum ibv_event_type t : {IBV_EVENT_QP_FATAL, IBV_EVENT_QP_REQ_ERR, IBV_EVENT_QP_ACCESS_ERR,
				      IBV_EVENT_COMM_EST, IBV_EVENT_SQ_DRAINED, IBV_EVENT_PATH_MIG,
				      IBV_EVENT_PATH_MIG_ERR, IBV_EVENT_QP_LAST_WQE_REACHED})
		EXPECT_EQ(EventElement::Qp, event_element(t)) << t;
	EXPECT_EQ(EventElement::Srq, event_element(IBV_EVENT_SRQ_ERR));
	EXPECT_EQ(EventElement::Srq, event_element(IBV_EVENT_SRQ_LIMIT_REACHED));
	EXPECT_EQ(EventElement::Wq, event_element(IBV_EVENT_WQ_FATAL));
	for (enum ibv_event_type t : {IBV_EVENT_DEVICE_FATAL, IBV_EVENT_PORT_ACTIVE, IBV_EVENT_PORT_ERR,
				      IBV_EVENT_LID_CHANGE, IBV_EVENT_PKEY_CHANGE, IBV_EVENT_SM_CHANGE,
				      IBV_EVENT_CLIENT_REREGISTER, IBV_EVENT_GID_CHANGE})
		EXPECT_EQ(EventElement::Port, event_element(t)) << t;
}

#if _OPENVERBS_ABI >= 56
// ibv_wr_opcode_str(3), rdma-core 56: its names, "unknown" otherwise.
TEST(Abi56, WrOpcodeStr)
{
	EXPECT_STREQ(ibv_wr_opcode_str(IBV_WR_RDMA_WRITE), "rdma-write");
	EXPECT_STREQ(ibv_wr_opcode_str(IBV_WR_RDMA_WRITE_WITH_IMM), "rdma-write-with-imm");
	EXPECT_STREQ(ibv_wr_opcode_str(IBV_WR_SEND), "send");
	EXPECT_STREQ(ibv_wr_opcode_str(IBV_WR_SEND_WITH_IMM), "send-with-imm");
	EXPECT_STREQ(ibv_wr_opcode_str(IBV_WR_RDMA_READ), "rdma-read");
	EXPECT_STREQ(ibv_wr_opcode_str(IBV_WR_ATOMIC_CMP_AND_SWP), "atomic-cmp-and-swp");
	EXPECT_STREQ(ibv_wr_opcode_str(IBV_WR_ATOMIC_FETCH_AND_ADD), "atomic-fetch-and-add");
	EXPECT_STREQ(ibv_wr_opcode_str(IBV_WR_LOCAL_INV), "local-inv");
	EXPECT_STREQ(ibv_wr_opcode_str(IBV_WR_BIND_MW), "bind-mw");
	EXPECT_STREQ(ibv_wr_opcode_str(IBV_WR_SEND_WITH_INV), "send-with-inv");
	EXPECT_STREQ(ibv_wr_opcode_str(IBV_WR_TSO), "tso");
	EXPECT_STREQ(ibv_wr_opcode_str(IBV_WR_DRIVER1), "driver1");
	EXPECT_STREQ(ibv_wr_opcode_str(IBV_WR_FLUSH), "flush");
	EXPECT_STREQ(ibv_wr_opcode_str(IBV_WR_ATOMIC_WRITE), "atomic-write");
	EXPECT_STREQ(ibv_wr_opcode_str(static_cast<enum ibv_wr_opcode>(12)), "unknown");
	EXPECT_STREQ(ibv_wr_opcode_str(static_cast<enum ibv_wr_opcode>(16)), "unknown");
	EXPECT_STREQ(ibv_wr_opcode_str(static_cast<enum ibv_wr_opcode>(-1)), "unknown");
}
#endif
