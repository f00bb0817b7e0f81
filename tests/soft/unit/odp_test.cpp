// On-demand paging on the software device (providers/soft/odp.cpp):
// ibv_query_device_ex(3)'s odp_caps, regions registered with
// IBV_ACCESS_ON_DEMAND that follow the address space (memory unmapped and
// mapped anew after registration, never a crash on a page that is gone or
// read-only: a protection error instead), implicit ODP (NULL, SIZE_MAX),
// ibv_advise_mr(3)'s checks and prefetch, a peer process reaching an ODP
// region, and ibv_rereg_mr(3) keeping a region ODP or pinned.
#include "../soft_fixture.h"

#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

// small_region_test.cpp
::testing::AssertionResult soft_writer_peer(ibv_pd *pd, uint64_t addr, uint32_t rkey,
					    uint32_t len, unsigned long ino);

namespace {

using namespace ov_test;

constexpr size_t kPage = 4096;
constexpr int kOdpAccess = kAllAccess | IBV_ACCESS_ON_DEMAND;

// Anonymous pages, unmapped at the end unless the test did it.
struct Map {
	char *p = nullptr;
	size_t len = 0;
	Map(size_t n, int prot = PROT_READ | PROT_WRITE) : len(n)
	{
		void *m = mmap(nullptr, n, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		p = m == MAP_FAILED ? nullptr : static_cast<char *>(m);
	}
	~Map()
	{
		if (p)
			munmap(p, len);
	}
};

// One operation from a to b's memory, its completion on a's CQ: the status.
ibv_wc_status rdma(Pair &p, ibv_wr_opcode op, void *local, uint32_t len, uint32_t lkey,
		   uint64_t raddr, uint32_t rkey)
{
	if (post_one(p.a.get(), op, local, len, lkey, raddr, rkey, 3))
		return IBV_WC_GENERAL_ERR;
	ibv_wc wc;
	if (!poll_one(p.cqa.get(), &wc))
		return IBV_WC_GENERAL_ERR;
	return wc.status;
}

class SoftOdp : public ::testing::Test {
protected:
	void SetUp() override { ASSERT_TRUE(p.connect_pair(IBV_QPT_RC, kAllAccess)); }
	Pair p;
};

TEST_F(SoftOdp, DeviceReportsOdpAndImplicitOdpForEveryTransport)
{
	ibv_device_attr_ex a = {};
	ASSERT_EQ(ibv_query_device_ex(p.ctx.get(), nullptr, &a), 0);
	EXPECT_EQ(a.odp_caps.general_caps, uint64_t(IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT));
	const uint32_t rc = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
			    IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
	EXPECT_EQ(a.odp_caps.per_transport_caps.rc_odp_caps, rc);
	EXPECT_EQ(a.xrc_odp_caps, rc);
	EXPECT_TRUE(a.odp_caps.per_transport_caps.ud_odp_caps & IBV_ODP_SUPPORT_SEND);
	EXPECT_TRUE(a.odp_caps.per_transport_caps.uc_odp_caps & IBV_ODP_SUPPORT_WRITE);
}

// The region follows the address space: pages replaced after registration
// are the ones the device reads and writes; while they are unmapped, or
// read-only, operations fail with protection errors and nothing crashes.
TEST_F(SoftOdp, RegionFollowsMappingsAndFailsCleanlyOnMissingPages)
{
	Map target(2 * kPage), src(kPage);
	ASSERT_TRUE(target.p && src.p);
	Mr t(ibv_reg_mr(p.pd.get(), target.p, 2 * kPage, kOdpAccess));
	Mr s(ibv_reg_mr(p.pd.get(), src.p, kPage, kOdpAccess));
	ASSERT_TRUE(t && s) << strerror(errno);
	// Replace the target's pages after registration.
	void *again = mmap(target.p, 2 * kPage, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	ASSERT_EQ(again, target.p);
	memset(target.p, 'n', 2 * kPage);
	memset(src.p, 'w', kPage);
	EXPECT_EQ(rdma(p, IBV_WR_RDMA_WRITE, src.p, 100, s->lkey, uintptr_t(target.p) + 5000,
		       t->rkey),
		  IBV_WC_SUCCESS);
	EXPECT_EQ(target.p[4999], 'n');
	EXPECT_EQ(target.p[5000], 'w');
	EXPECT_EQ(target.p[5099], 'w');
	EXPECT_EQ(target.p[5100], 'n');
	EXPECT_EQ(rdma(p, IBV_WR_RDMA_READ, src.p, 64, s->lkey, uintptr_t(target.p), t->rkey),
		  IBV_WC_SUCCESS);
	EXPECT_EQ(src.p[0], 'n');

	// The second page goes: a write reaching it is a remote access error.
	ASSERT_EQ(munmap(target.p + kPage, kPage), 0);
	EXPECT_EQ(rdma(p, IBV_WR_RDMA_WRITE, src.p, 200, s->lkey, uintptr_t(target.p) + kPage - 100,
		       t->rkey),
		  IBV_WC_REM_ACCESS_ERR);
	// Remap it so the destructor's munmap covers mapped memory only.
	ASSERT_NE(mmap(target.p + kPage, kPage, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
		  MAP_FAILED);
}

TEST_F(SoftOdp, LocalGatherFromUnmappedPageIsALocalProtectionError)
{
	Map target(kPage);
	char *gone = static_cast<char *>(
		mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	ASSERT_TRUE(target.p && gone != MAP_FAILED);
	Mr t(ibv_reg_mr(p.pd.get(), target.p, kPage, kAllAccess));
	Mr s(ibv_reg_mr(p.pd.get(), gone, kPage, kOdpAccess));
	ASSERT_TRUE(t && s) << strerror(errno);
	ASSERT_EQ(munmap(gone, kPage), 0);
	EXPECT_EQ(rdma(p, IBV_WR_RDMA_WRITE, gone, 64, s->lkey, uintptr_t(target.p), t->rkey),
		  IBV_WC_LOC_PROT_ERR);
}

TEST_F(SoftOdp, ReadOnlyPagesRefuseWritesAndServeReads)
{
	Map ro(kPage), src(kPage);
	ASSERT_TRUE(ro.p && src.p);
	memset(ro.p, 'r', kPage);
	ASSERT_EQ(mprotect(ro.p, kPage, PROT_READ), 0);
	// An ODP region is not checked against the mappings at registration.
	Mr t(ibv_reg_mr(p.pd.get(), ro.p, kPage, kOdpAccess));
	Mr s(ibv_reg_mr(p.pd.get(), src.p, kPage, kAllAccess));
	ASSERT_TRUE(t && s) << strerror(errno);
	EXPECT_EQ(rdma(p, IBV_WR_RDMA_READ, src.p, 32, s->lkey, uintptr_t(ro.p), t->rkey),
		  IBV_WC_SUCCESS);
	EXPECT_EQ(src.p[31], 'r');
	EXPECT_EQ(rdma(p, IBV_WR_RDMA_WRITE, src.p, 32, s->lkey, uintptr_t(ro.p), t->rkey),
		  IBV_WC_REM_ACCESS_ERR);
	EXPECT_EQ(ro.p[0], 'r');
}

// Implicit ODP: one key for the whole address space, iova = address.
TEST_F(SoftOdp, ImplicitRegionCoversTheAddressSpace)
{
	Mr all(ibv_reg_mr(p.pd.get(), nullptr, SIZE_MAX, kOdpAccess));
	ASSERT_TRUE(all) << strerror(errno);
	EXPECT_EQ(all->addr, nullptr);
	EXPECT_EQ(all->length, SIZE_MAX);
	std::vector<char> a(3000, 'i'), b(3000, 0);
	EXPECT_EQ(rdma(p, IBV_WR_RDMA_WRITE, a.data(), 3000, all->lkey, uintptr_t(b.data()),
		       all->rkey),
		  IBV_WC_SUCCESS);
	EXPECT_EQ(a, b);
	// A send into a receive buffer of the implicit region.
	std::vector<char> r(64, 0);
	ASSERT_EQ(post_recv_one(p.b.get(), r.data(), 64, all->lkey), 0);
	ASSERT_EQ(post_one(p.a.get(), IBV_WR_SEND, a.data(), 64, all->lkey), 0);
	ibv_wc wc;
	ASSERT_TRUE(poll_one(p.cqa.get(), &wc));
	EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_TRUE(poll_one(p.cqb.get(), &wc));
	EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
	EXPECT_EQ(r[63], 'i');
	// Address 0 is in range, but not mapped: an error, not a crash.
	EXPECT_EQ(rdma(p, IBV_WR_RDMA_WRITE, a.data(), 8, all->lkey, 0, all->rkey),
		  IBV_WC_REM_ACCESS_ERR);
}

TEST_F(SoftOdp, ImplicitNeedsOnDemandAndAZeroIova)
{
	errno = 0;
	EXPECT_EQ(ibv_reg_mr(p.pd.get(), nullptr, SIZE_MAX, kAllAccess), nullptr);
	EXPECT_EQ(errno, EINVAL);
	errno = 0;
	EXPECT_EQ(ibv_reg_mr_iova(p.pd.get(), nullptr, SIZE_MAX, 4096, kOdpAccess), nullptr);
	EXPECT_EQ(errno, EINVAL);
	// An explicit ODP region keeps the size limit.
	errno = 0;
	EXPECT_EQ(ibv_reg_mr(p.pd.get(), reinterpret_cast<void *>(4096), SIZE_MAX - 4096,
			     kOdpAccess),
		  nullptr);
	EXPECT_EQ(errno, EINVAL);
}

TEST_F(SoftOdp, AdviseMrChecksItsInputAndPrefetches)
{
	Map m(4 * kPage);
	ASSERT_TRUE(m.p);
	Mr odp(ibv_reg_mr(p.pd.get(), m.p, 4 * kPage, kOdpAccess));
	Mr ro(ibv_reg_mr(p.pd.get(), m.p, kPage, IBV_ACCESS_ON_DEMAND));
	Mr pinned(ibv_reg_mr(p.pd.get(), m.p, kPage, kAllAccess));
	ASSERT_TRUE(odp && ro && pinned) << strerror(errno);
	ibv_sge sg = {uintptr_t(m.p), uint32_t(4 * kPage), odp->lkey};
	for (auto adv : {IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
			 IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT}) {
		EXPECT_EQ(ibv_advise_mr(p.pd.get(), adv, IBV_ADVISE_MR_FLAG_FLUSH, &sg, 1), 0);
		EXPECT_EQ(ibv_advise_mr(p.pd.get(), adv, 0, &sg, 1), 0);
	}
	EXPECT_EQ(ibv_advise_mr(p.pd.get(), ibv_advise_mr_advice(7), 0, &sg, 1), EOPNOTSUPP);
	EXPECT_EQ(ibv_advise_mr(p.pd.get(), IBV_ADVISE_MR_ADVICE_PREFETCH, 2, &sg, 1), EOPNOTSUPP);
	EXPECT_EQ(ibv_advise_mr(p.pd.get(), IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sg, 0), EINVAL);
	ibv_sge bad = sg;
	bad.length = uint32_t(4 * kPage + 1);
	EXPECT_EQ(ibv_advise_mr(p.pd.get(), IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &bad, 1), EINVAL);
	bad = {uintptr_t(m.p), 100, pinned->lkey}; // not an ODP region
	EXPECT_EQ(ibv_advise_mr(p.pd.get(), IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &bad, 1), EINVAL);
	bad = {uintptr_t(m.p), 100, ro->lkey}; // prefetch for writing, no local write
	EXPECT_EQ(ibv_advise_mr(p.pd.get(), IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, &bad, 1), EINVAL);
	EXPECT_EQ(ibv_advise_mr(p.pd.get(), IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &bad, 1), 0);
	bad = {uintptr_t(m.p), 100, odp->lkey + 0x1000}; // no such key
	EXPECT_EQ(ibv_advise_mr(p.pd.get(), IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &bad, 1), EINVAL);
	// Another PD's region.
	Pd other(ibv_alloc_pd(p.ctx.get()));
	ASSERT_TRUE(other);
	EXPECT_EQ(ibv_advise_mr(other.get(), IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sg, 1), EINVAL);
	// A synchronous prefetch of pages that are gone fails; a hint does not.
	ASSERT_EQ(munmap(m.p + 2 * kPage, kPage), 0);
	EXPECT_EQ(ibv_advise_mr(p.pd.get(), IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
				IBV_ADVISE_MR_FLAG_FLUSH, &sg, 1),
		  EFAULT);
	EXPECT_EQ(ibv_advise_mr(p.pd.get(), IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, &sg, 1), 0);
	ASSERT_NE(mmap(m.p + 2 * kPage, kPage, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
		  MAP_FAILED);
}

TEST_F(SoftOdp, ReregKeepsARegionOnDemandOrPinned)
{
	Map m(2 * kPage);
	ASSERT_TRUE(m.p);
	Mr odp(ibv_reg_mr(p.pd.get(), m.p, kPage, kOdpAccess));
	Mr pinned(ibv_reg_mr(p.pd.get(), m.p, kPage, kAllAccess));
	Mr all(ibv_reg_mr(p.pd.get(), nullptr, SIZE_MAX, kOdpAccess));
	ASSERT_TRUE(odp && pinned && all);
	EXPECT_EQ(ibv_rereg_mr(odp.get(), IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, kAllAccess),
		  IBV_REREG_MR_ERR_CMD);
	EXPECT_EQ(errno, EOPNOTSUPP);
	EXPECT_EQ(ibv_rereg_mr(pinned.get(), IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
			       kOdpAccess),
		  IBV_REREG_MR_ERR_CMD);
	EXPECT_EQ(ibv_rereg_mr(all.get(), IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, m.p, kPage, 0),
		  IBV_REREG_MR_ERR_CMD);
	// An ODP region moves to other memory and stays ODP.
	EXPECT_EQ(ibv_rereg_mr(odp.get(), IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, m.p + kPage,
			       kPage, 0),
		  0);
	std::vector<char> src(16, 'z');
	Mr s(ibv_reg_mr(p.pd.get(), src.data(), 16, kAllAccess));
	ASSERT_TRUE(s);
	EXPECT_EQ(rdma(p, IBV_WR_RDMA_WRITE, src.data(), 16, s->lkey, uintptr_t(m.p + kPage),
		       odp->rkey),
		  IBV_WC_SUCCESS);
	EXPECT_EQ(m.p[kPage + 15], 'z');
}

// A peer process writes and reads an ODP region of this process (through
// process_vm_writev/readv: the region has no shareable backing).
TEST_F(SoftOdp, PeerProcessWritesAndReadsAnOdpRegion)
{
	Map m(kPage);
	ASSERT_TRUE(m.p);
	Mr mr(ibv_reg_mr(p.pd.get(), m.p, kPage, kOdpAccess));
	ASSERT_TRUE(mr);
	// The peer of small_region_test.cpp: RDMA WRITE of 'W's, read back.
	EXPECT_TRUE(soft_writer_peer(p.pd.get(), uintptr_t(m.p + 100), mr->rkey, 1000, 0));
	EXPECT_EQ(m.p[99], 0);
	EXPECT_EQ(m.p[100], 'W');
	EXPECT_EQ(m.p[1099], 'W');
	EXPECT_EQ(m.p[1100], 0);
}

} // namespace
