// Device memory on the software device (providers/soft/dm.cpp):
// ibv_alloc_dm(3) limits and errors, ibv_memcpy_to_dm(3) /
// ibv_memcpy_from_dm(3) in 32-bit words, ibv_reg_dm_mr(3) (zero-based
// regions; the allocation stays while one is registered), traffic from and
// into device memory, a peer process writing it through a region's rkey,
// and ibv_import_dm(3) from a context imported from a duplicated cmd_fd.
#include "../soft_fixture.h"

#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <unistd.h>
#include <vector>

// small_region_test.cpp
::testing::AssertionResult soft_writer_peer(ibv_pd *pd, uint64_t addr, uint32_t rkey,
					    uint32_t len, unsigned long ino);

namespace {

using namespace ov_test;

struct DmDel { void operator()(ibv_dm *d) const { ibv_free_dm(d); } };
using Dm = std::unique_ptr<ibv_dm, DmDel>;

// Every right a device memory region may have (no window binding).
constexpr int kDmAccess = IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE |
			  IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

ibv_dm *alloc(ibv_context *ctx, size_t len, uint32_t log_align = 0, uint32_t comp_mask = 0)
{
	ibv_alloc_dm_attr a = {len, log_align, comp_mask};
	return ibv_alloc_dm(ctx, &a);
}

class SoftDm : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_TRUE(p.connect_pair(IBV_QPT_RC, kAllAccess));
		ibv_device_attr_ex a = {};
		ASSERT_EQ(ibv_query_device_ex(p.ctx.get(), nullptr, &a), 0);
		max = a.max_dm_size;
	}
	Pair p;
	uint64_t max = 0;
};

TEST_F(SoftDm, AllocationLimitsAndErrors)
{
	EXPECT_EQ(max, 1u << 20);
	for (const auto &bad : std::vector<std::vector<uint64_t>>{
		     {0, 0, 0}, {max + 1, 0, 0}, {64, 17, 0}, {64, 0, 1}}) {
		errno = 0;
		EXPECT_EQ(alloc(p.ctx.get(), bad[0], uint32_t(bad[1]), uint32_t(bad[2])), nullptr);
		EXPECT_EQ(errno, EINVAL);
	}
	// The process's device memory is bounded by max_dm_size.
	Dm half(alloc(p.ctx.get(), max / 2, 6));
	ASSERT_TRUE(half) << strerror(errno);
	EXPECT_TRUE(half->comp_mask & IBV_DM_MASK_HANDLE);
	errno = 0;
	EXPECT_EQ(alloc(p.ctx.get(), max / 2 + 4), nullptr);
	EXPECT_EQ(errno, ENOMEM);
	Dm rest(alloc(p.ctx.get(), max / 2));
	EXPECT_TRUE(rest);
	rest.reset();
	half.reset();
	Dm all(alloc(p.ctx.get(), max));
	EXPECT_TRUE(all);
}

TEST_F(SoftDm, CopiesMoveWordsInsideTheAllocation)
{
	Dm dm(alloc(p.ctx.get(), 100));
	ASSERT_TRUE(dm);
	std::vector<char> back(100, 'x');
	ASSERT_EQ(ibv_memcpy_from_dm(back.data(), dm.get(), 0, 100), 0);
	EXPECT_EQ(back, std::vector<char>(100, 0)); // starts zeroed
	const char data[] = "device memory words.";
	ASSERT_EQ(ibv_memcpy_to_dm(dm.get(), 8, data, 20), 0);
	ASSERT_EQ(ibv_memcpy_from_dm(back.data(), dm.get(), 8, 20), 0);
	EXPECT_EQ(memcmp(back.data(), data, 20), 0);
	// Offsets and lengths in words, inside the 100 bytes.
	EXPECT_EQ(ibv_memcpy_to_dm(dm.get(), 3, data, 4), EINVAL);
	EXPECT_EQ(ibv_memcpy_to_dm(dm.get(), 4, data, 3), EINVAL);
	EXPECT_EQ(ibv_memcpy_to_dm(dm.get(), 104, data, 4), EINVAL);
	EXPECT_EQ(ibv_memcpy_to_dm(dm.get(), 0, back.data(), 104), EINVAL);
	EXPECT_EQ(ibv_memcpy_from_dm(back.data(), dm.get(), 3, 4), EINVAL);
	EXPECT_EQ(ibv_memcpy_from_dm(back.data(), dm.get(), 96, 8), EINVAL);
	EXPECT_EQ(ibv_memcpy_from_dm(back.data(), dm.get(), 96, 4), 0);
}

TEST_F(SoftDm, RegistrationChecksAndKeepsTheAllocation)
{
	ibv_dm *dm = alloc(p.ctx.get(), 256);
	ASSERT_TRUE(dm);
	const uint64_t dm_access = kDmAccess;
	for (const auto &bad : std::vector<std::vector<uint64_t>>{
		     {0, 256, kAllAccess},                          // not zero-based
		     {0, 256, dm_access | IBV_ACCESS_ON_DEMAND},    // not for device memory
		     {0, 256, dm_access | IBV_ACCESS_MW_BIND},
		     {0, 260, dm_access}, {8, 252, dm_access}, {300, 0, dm_access},
		     {0, 16, IBV_ACCESS_ZERO_BASED | IBV_ACCESS_REMOTE_WRITE}}) {
		errno = 0;
		EXPECT_EQ(ibv_reg_dm_mr(p.pd.get(), dm, bad[0], bad[1], unsigned(bad[2])), nullptr)
			<< bad[0] << " " << bad[1] << " " << bad[2];
		EXPECT_EQ(errno, EINVAL);
	}
	// Another context's PD.
	Ctx other(open_soft());
	ASSERT_TRUE(other);
	Pd opd(ibv_alloc_pd(other.get()));
	ASSERT_TRUE(opd);
	EXPECT_EQ(ibv_reg_dm_mr(opd.get(), dm, 0, 16, kDmAccess), nullptr);
	ibv_mr *mr = ibv_reg_dm_mr(p.pd.get(), dm, 128, 128, kDmAccess);
	ASSERT_TRUE(mr) << strerror(errno);
	EXPECT_EQ(mr->addr, nullptr);
	EXPECT_EQ(mr->length, 128u);
	Mr empty(ibv_reg_dm_mr(p.pd.get(), dm, 256, 0, kDmAccess));
	EXPECT_TRUE(empty);
	EXPECT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, kDmAccess),
		  IBV_REREG_MR_ERR_CMD);
	EXPECT_EQ(ibv_free_dm(dm), EBUSY);
	EXPECT_EQ(ibv_dereg_mr(mr), 0);
	empty.reset();
	EXPECT_EQ(ibv_free_dm(dm), 0);
}

// Sends from and into device memory, and an RDMA write into it, at
// zero-based addresses.
TEST_F(SoftDm, TrafficFromAndIntoDeviceMemory)
{
	Dm src(alloc(p.ctx.get(), 4096)), dst(alloc(p.ctx.get(), 4096));
	ASSERT_TRUE(src && dst);
	Mr ms(ibv_reg_dm_mr(p.pd.get(), src.get(), 0, 4096, kDmAccess));
	Mr md(ibv_reg_dm_mr(p.pd.get(), dst.get(), 1024, 2048, kDmAccess));
	ASSERT_TRUE(ms && md);
	std::vector<char> pattern(4096);
	for (size_t i = 0; i < pattern.size(); i++)
		pattern[i] = char(i * 7 + 1);
	ASSERT_EQ(ibv_memcpy_to_dm(src.get(), 0, pattern.data(), 4096), 0);
	// Send 1000 bytes from DM offset 100 into the second region's offset 24.
	ASSERT_EQ(post_recv_one(p.b.get(), reinterpret_cast<void *>(24), 1000, md->lkey), 0);
	ASSERT_EQ(post_one(p.a.get(), IBV_WR_SEND, reinterpret_cast<void *>(100), 1000, ms->lkey), 0);
	ibv_wc wc;
	ASSERT_TRUE(poll_one(p.cqa.get(), &wc));
	EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_TRUE(poll_one(p.cqb.get(), &wc));
	EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
	std::vector<char> back(1000);
	ASSERT_EQ(ibv_memcpy_from_dm(back.data(), dst.get(), 1024 + 24, 1000), 0);
	EXPECT_EQ(memcmp(back.data(), pattern.data() + 100, 1000), 0);
	// RDMA write past the region's end: a remote access error.
	ASSERT_EQ(post_one(p.a.get(), IBV_WR_RDMA_WRITE, nullptr, 64, ms->lkey, 2000, md->rkey), 0);
	ASSERT_TRUE(poll_one(p.cqa.get(), &wc));
	EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
}

// A peer process writes and reads device memory through the region's rkey.
TEST_F(SoftDm, PeerProcessReachesDeviceMemory)
{
	Dm dm(alloc(p.ctx.get(), 4096));
	ASSERT_TRUE(dm);
	Mr mr(ibv_reg_dm_mr(p.pd.get(), dm.get(), 0, 4096, kDmAccess));
	ASSERT_TRUE(mr);
	EXPECT_TRUE(soft_writer_peer(p.pd.get(), 200, mr->rkey, 1000, 0));
	std::vector<char> back(1008);
	ASSERT_EQ(ibv_memcpy_from_dm(back.data(), dm.get(), 196, 1008), 0);
	EXPECT_EQ(back[3], 0);
	EXPECT_EQ(back[4], 'W');
	EXPECT_EQ(back[1003], 'W');
	EXPECT_EQ(back[1004], 0);
}

TEST_F(SoftDm, ImportedContextSharesTheAllocation)
{
	Dm dm(alloc(p.ctx.get(), 512));
	ASSERT_TRUE(dm);
	Ctx imported(ibv_import_device(dup(p.ctx->cmd_fd)));
	ASSERT_TRUE(imported) << strerror(errno);
	ibv_dm *im = ibv_import_dm(imported.get(), dm->handle);
	ASSERT_TRUE(im) << strerror(errno);
	EXPECT_EQ(im->handle, dm->handle);
	uint32_t word = 0x12345678, got = 0;
	ASSERT_EQ(ibv_memcpy_to_dm(dm.get(), 64, &word, 4), 0);
	ASSERT_EQ(ibv_memcpy_from_dm(&got, im, 64, 4), 0);
	EXPECT_EQ(got, word);
	word = 0x9abcdef0;
	ASSERT_EQ(ibv_memcpy_to_dm(im, 68, &word, 4), 0);
	ASSERT_EQ(ibv_memcpy_from_dm(&got, dm.get(), 68, 4), 0);
	EXPECT_EQ(got, word);
	EXPECT_EQ(ibv_free_dm(im), EINVAL); // released by unimport
	ibv_unimport_dm(im);
	errno = 0;
	EXPECT_EQ(ibv_import_dm(imported.get(), 255), nullptr);
	EXPECT_EQ(errno, EINVAL);
}

} // namespace
