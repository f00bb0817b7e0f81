// Fork protection: the reference-counted MADV_DONTFORK ranges behind
// ibv_fork_init(3), ibv_dontfork_range and ibv_dofork_range, checked on real
// memory with a real fork().
#include "fake_provider.h"

#include "core/verbs/verbs.h"

#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <csignal>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

// Exported by libibverbs but declared in no public header of rdma-core 44.
extern "C" {
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);
}

namespace {

class ForkTest : public ::testing::Test {
protected:
	void SetUp() override
	{
		if (ov::verbs::kernel_copy_on_fork())
			GTEST_SKIP() << "kernel copies pinned pages on fork: protection unneeded";
		ov::verbs::fork_reset_for_tests();
		page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
		mem = static_cast<char *>(mmap(nullptr, 8 * page, PROT_READ | PROT_WRITE,
					       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
		ASSERT_NE(mem, MAP_FAILED);
	}
	void TearDown() override
	{
		if (mem && mem != MAP_FAILED)
			munmap(mem, 8 * page);
		ov::verbs::fork_reset_for_tests();
	}

	// True if a forked child can read addr (a DONTFORK page is absent there).
	static bool child_can_read(const char *addr)
	{
		pid_t pid = fork();
		if (pid == 0) {
			volatile char c = *addr;
			(void)c;
			_exit(0);
		}
		int status = 0;
		waitpid(pid, &status, 0);
		return WIFEXITED(status) && WEXITSTATUS(status) == 0;
	}

	size_t page = 0;
	char *mem = nullptr;
};

} // namespace

TEST_F(ForkTest, StatusFollowsInit)
{
	EXPECT_EQ(ibv_is_fork_initialized(), IBV_FORK_DISABLED);
	ASSERT_EQ(ibv_fork_init(), 0);
	EXPECT_EQ(ibv_is_fork_initialized(), IBV_FORK_ENABLED);
	EXPECT_EQ(ibv_fork_init(), 0) << "a second call is harmless";
}

TEST_F(ForkTest, WithoutInitRangesAreNoOpsAndInitBecomesTooLate)
{
	EXPECT_EQ(ibv_dontfork_range(mem, page), 0);
	EXPECT_TRUE(child_can_read(mem));
	EXPECT_EQ(ibv_fork_init(), EINVAL);
}

TEST_F(ForkTest, OverlappingRangesAreReferenceCounted)
{
	ASSERT_EQ(ibv_fork_init(), 0);
	// Two registrations sharing page 1: [0,2) and [1,3).
	ASSERT_EQ(ibv_dontfork_range(mem, 2 * page), 0);
	ASSERT_EQ(ibv_dontfork_range(mem + page + 10, page), 0);
	EXPECT_EQ(ov::verbs::fork_refcount_at(reinterpret_cast<uintptr_t>(mem)), 1);
	EXPECT_EQ(ov::verbs::fork_refcount_at(reinterpret_cast<uintptr_t>(mem + page)), 2);
	EXPECT_EQ(ov::verbs::fork_refcount_at(reinterpret_cast<uintptr_t>(mem + 2 * page)), 1);
	EXPECT_FALSE(child_can_read(mem + page));

	ASSERT_EQ(ibv_dofork_range(mem, 2 * page), 0);
	EXPECT_TRUE(child_can_read(mem)) << "page 0 released";
	EXPECT_FALSE(child_can_read(mem + page)) << "page 1 still used by the second range";
	EXPECT_FALSE(child_can_read(mem + 2 * page));

	ASSERT_EQ(ibv_dofork_range(mem + page + 10, page), 0);
	EXPECT_TRUE(child_can_read(mem + page));
	EXPECT_TRUE(child_can_read(mem + 2 * page));
	EXPECT_EQ(ov::verbs::fork_range_count(), 0u);
}

TEST_F(ForkTest, UnalignedRangeCoversWholePages)
{
	ASSERT_EQ(ibv_fork_init(), 0);
	ASSERT_EQ(ibv_dontfork_range(mem + page - 1, 2), 0); // straddles pages 0 and 1
	EXPECT_FALSE(child_can_read(mem));
	EXPECT_FALSE(child_can_read(mem + page));
	EXPECT_TRUE(child_can_read(mem + 2 * page));
	ASSERT_EQ(ibv_dofork_range(mem + page - 1, 2), 0);
	EXPECT_EQ(ov::verbs::fork_range_count(), 0u);
}

TEST_F(ForkTest, FailedMadviseRollsBack)
{
	ASSERT_EQ(ibv_fork_init(), 0);
	// Pages 4..7 unmapped: the range [2,6) half fails.
	munmap(mem + 4 * page, 4 * page);
	EXPECT_EQ(ibv_dontfork_range(mem + 2 * page, 4 * page), -1);
	EXPECT_EQ(ov::verbs::fork_range_count(), 0u) << "nothing may stay counted";
	EXPECT_TRUE(child_can_read(mem + 2 * page)) << "advice undone";
	munmap(mem, 4 * page);
	mem = nullptr;
}

TEST_F(ForkTest, RegMrProtectsAndDeregReleases)
{
	ASSERT_EQ(ibv_fork_init(), 0);
	verbs_test::VerbsTest *unused = nullptr;
	(void)unused;
	ASSERT_EQ(ibv_dontfork_range(mem, page), 0);
	ASSERT_EQ(ibv_dofork_range(mem, page), 0);
	EXPECT_EQ(ibv_dofork_range(mem, page), 0) << "releasing twice is ignored";
	EXPECT_EQ(ov::verbs::fork_range_count(), 0u);
}

TEST_F(ForkTest, ZeroLengthIsNoOp)
{
	ASSERT_EQ(ibv_fork_init(), 0);
	EXPECT_EQ(ibv_dontfork_range(mem, 0), 0);
	EXPECT_EQ(ov::verbs::fork_range_count(), 0u);
}

class ForkMrTest : public verbs_test::VerbsTest {};

TEST_F(ForkMrTest, RegisteredMemoryIsHiddenFromChildrenUntilDereg)
{
	if (ov::verbs::kernel_copy_on_fork())
		GTEST_SKIP();
	ov::verbs::fork_reset_for_tests();
	ASSERT_EQ(ibv_fork_init(), 0);
	const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
	auto *mem = static_cast<char *>(mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE,
					     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr = ibv_reg_mr(pd, mem, page, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(mr, nullptr);
	EXPECT_EQ(ov::verbs::fork_refcount_at(reinterpret_cast<uintptr_t>(mem)), 1);
	// A failed registration leaves no reference behind.
	verbs_test::fake().fail_errno = EFAULT;
	EXPECT_EQ(ibv_reg_mr(pd, mem + page, page, 0), nullptr);
	EXPECT_EQ(ov::verbs::fork_refcount_at(reinterpret_cast<uintptr_t>(mem + page)), 0);
	// On-demand paging MRs are never pinned: no protection.
	struct ibv_mr *odp = ibv_reg_mr(pd, mem + page, page, IBV_ACCESS_ON_DEMAND);
	ASSERT_NE(odp, nullptr);
	EXPECT_EQ(ov::verbs::fork_refcount_at(reinterpret_cast<uintptr_t>(mem + page)), 0);
	EXPECT_EQ(ibv_dereg_mr(odp), 0);
	EXPECT_EQ(ibv_dereg_mr(mr), 0);
	EXPECT_EQ(ov::verbs::fork_range_count(), 0u);
	ibv_dealloc_pd(pd);
	munmap(mem, 2 * page);
	ov::verbs::fork_reset_for_tests();
}
