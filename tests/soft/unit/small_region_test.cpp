// Regions that do not cover a whole page (issue 14, item 3): a small buffer
// in the middle of a page, two regions in one page, a region whose end is in
// a partial page. Registration converts the pages that hold them (whole) to
// a shared file so a peer process reaches them with loads and stores; the
// rest of those pages is the process's own data and must keep every
// guarantee it had: no write lost, deregistration of one region leaving the
// other reachable, fork() giving the child what the parent held at fork,
// MADV_DONTFORK after ibv_fork_init covering the whole page.
//
// Peers are this binary re-executed as "--soft-small <mode>".
#include "../soft_fixture.h"
#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace ov_test;

namespace {

constexpr size_t kPage = 4096;

// The inode of the shared file the page holding p is a mapping of, when it
// is one of the device's region files; 0 otherwise. *page_off: that page's
// offset in the file (small regions share a file at offsets of their own).
unsigned long region_file_of(const void *p, unsigned long long *page_off = nullptr)
{
	unsigned long ino_found = 0;
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return 0;
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, ino;
		char perms[8], dev[16];
		unsigned long long off;
		if (sscanf(line, "%lx-%lx %7s %llx %15s %lu", &lo, &hi, perms, &off, dev, &ino) != 6)
			continue;
		if (uintptr_t(p) >= lo && uintptr_t(p) < hi) {
			if (strstr(line, "openverbs-soft-mr"))
				ino_found = ino;
			if (page_off)
				*page_off = off + ((uintptr_t(p) & ~uintptr_t(kPage - 1)) - lo);
			break;
		}
	}
	fclose(f);
	return ino_found;
}

// True when this process maps a file of inode ino (a peer's region).
bool maps_inode(unsigned long ino)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return false;
	char line[512];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, i;
		char perms[8], dev[16];
		unsigned long long off;
		if (sscanf(line, "%lx-%lx %7s %llx %15s %lu", &lo, &hi, perms, &off, dev, &i) == 6)
			found = i == ino && strstr(line, "openverbs-soft-mr");
	}
	fclose(f);
	return found;
}

// A page-aligned private anonymous buffer filled with `fill`.
struct Pages {
	char *p = nullptr;
	size_t len;
	Pages(size_t pages, char fill) : len(pages * kPage)
	{
		void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m != MAP_FAILED) {
			p = static_cast<char *>(m);
			memset(p, fill, len);
		}
	}
	~Pages()
	{
		if (p)
			munmap(p, len);
	}
};

bool all_are(const char *p, size_t n, char c)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != c)
			return false;
	return true;
}

// A peer process on soft0: RDMA WRITEs `len` bytes of 'W' to (addr, rkey)
// in this process through an RC QP connected to ours, reads them back, and
// says whether it reached the region through a mapping of the file of
// inode `ino` (no system call per operation) - see small_peer().
struct WriterPeer {
	Cq cq;
	Qp qp;

	// pd: the region's PD (our QP must be in it).
	::testing::AssertionResult run(ibv_pd *pd, uint64_t addr, uint32_t rkey, uint32_t len,
				       unsigned long ino)
	{
		cq.reset(ibv_create_cq(pd->context, 16, nullptr, nullptr, 0));
		if (!cq)
			return ::testing::AssertionFailure() << "CQ";
		ibv_qp_init_attr ia = {};
		ia.send_cq = ia.recv_cq = cq.get();
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		qp.reset(ibv_create_qp(pd, &ia));
		if (!qp)
			return ::testing::AssertionFailure() << "QP";
		FILE *in = nullptr, *out = nullptr;
		pid_t c = spawn_self("--soft-small", "writer", &in, &out);
		if (c < 0 || !in || !out)
			return ::testing::AssertionFailure() << "starting the peer";
		fprintf(in, "%u %llu %u %u %lu\n", qp->qp_num, (unsigned long long)addr, rkey, len,
			ino);
		fflush(in);
		unsigned peer_qpn = 0;
		char verdict[64] = {};
		bool up = fscanf(out, "%u", &peer_qpn) == 1 &&
			  bring_up(qp.get(), peer_qpn, 1, kAllAccess);
		fprintf(in, up ? "go\n" : "stop\n");
		fflush(in);
		if (up && fscanf(out, "%63s", verdict) != 1)
			verdict[0] = 0;
		fclose(in);
		fclose(out);
		int st = 0;
		waitpid(c, &st, 0);
		if (!up)
			return ::testing::AssertionFailure() << "connecting to the peer";
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || strcmp(verdict, "ok") != 0)
			return ::testing::AssertionFailure()
			       << "peer: " << verdict << ", status " << st;
		return ::testing::AssertionSuccess();
	}
};

int small_peer_writer()
{
	unsigned qpn = 0, rkey = 0, len = 0;
	unsigned long long addr = 0;
	unsigned long ino = 0;
	if (scanf("%u %llu %u %u %lu", &qpn, &addr, &rkey, &len, &ino) != 5 || len > kPage)
		return 2;
	ibv_context *ctx = open_soft();
	if (!ctx)
		return 3;
	ibv_pd *pd = ibv_alloc_pd(ctx);
	ibv_cq *cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
	std::vector<char> src(len, 'W'), back(len, 0);
	ibv_mr *ms = pd ? ibv_reg_mr(pd, src.data(), len, kAllAccess) : nullptr;
	ibv_mr *mb = pd ? ibv_reg_mr(pd, back.data(), len, kAllAccess) : nullptr;
	ibv_qp_init_attr ia = {};
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ibv_qp *qp = cq ? ibv_create_qp(pd, &ia) : nullptr;
	if (!ms || !mb || !qp)
		return 4;
	printf("%u\n", qp->qp_num);
	fflush(stdout);
	char word[16];
	if (scanf("%15s", word) != 1 || strcmp(word, "go") != 0)
		return 5;
	if (!bring_up(qp, qpn, 1, kAllAccess))
		return 6;
	const char *verdict = "ok";
	ibv_wc wc;
	if (post_one(qp, IBV_WR_RDMA_WRITE, src.data(), len, ms->lkey, addr, rkey) ||
	    !poll_one(cq, &wc) || wc.status != IBV_WC_SUCCESS)
		verdict = "write-failed";
	else if (post_one(qp, IBV_WR_RDMA_READ, back.data(), len, mb->lkey, addr, rkey) ||
		 !poll_one(cq, &wc) || wc.status != IBV_WC_SUCCESS)
		verdict = "read-failed";
	else if (back != src)
		verdict = "read-back-differs";
	else if (ino && !maps_inode(ino))
		verdict = "reached-without-a-mapping";
	printf("%s\n", verdict);
	fflush(stdout);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(ms);
	ibv_dereg_mr(mb);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}

// After ibv_fork_init(3), a child does not get the page holding a small
// registered buffer (rdma-core rounds MADV_DONTFORK out to whole pages);
// the parent's page, converted, keeps its bytes and the other data in it.
int small_dontfork()
{
	if (ibv_fork_init())
		return 10;
	Ctx ctx(open_soft());
	if (!ctx)
		return 11;
	Pd pd(ibv_alloc_pd(ctx.get()));
	Pages pg(3, 'n');
	if (!pd || !pg.p)
		return 12;
	char *page = pg.p + kPage;
	Mr mr(ibv_reg_mr(pd.get(), page + 100, 200, kAllAccess));
	if (!mr)
		return 13;
	if (!region_file_of(page))
		return 14;
	pid_t c = fork();
	if (c == 0) {
		bool gone = madvise(page, kPage, MADV_NORMAL) != 0 && errno == ENOMEM;
		bool others = madvise(pg.p, kPage, MADV_NORMAL) == 0 && pg.p[0] == 'n';
		_exit(gone && others ? 0 : 1);
	}
	int st = 0;
	waitpid(c, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "the child has the registered page, or lost the one beside it\n");
		return 15;
	}
	mr.reset();
	return all_are(pg.p, pg.len, 'n') ? 0 : 16;
}

// Regions larger than OPENVERBS_SOFT_SHARE_MAX (here 64 KiB) are not copied
// at registration: they stay private memory and a peer still reaches them
// (with process_vm_*); a region within the limit is converted.
int large_region()
{
	Ctx ctx(open_soft());
	if (!ctx)
		return 30;
	Pd pd(ibv_alloc_pd(ctx.get()));
	Pages big(32, 'n'), small(16, 'n');
	if (!pd || !big.p || !small.p)
		return 31;
	Mr mb(ibv_reg_mr(pd.get(), big.p, big.len, kAllAccess));
	Mr ms(ibv_reg_mr(pd.get(), small.p, small.len, kAllAccess));
	if (!mb || !ms)
		return 32;
	if (region_file_of(big.p) != 0 || region_file_of(big.p + big.len - 1) != 0) {
		fprintf(stderr, "a region above the limit was converted\n");
		return 33;
	}
	if (region_file_of(small.p) == 0) {
		fprintf(stderr, "a region within the limit was not converted\n");
		return 34;
	}
	WriterPeer w;
	auto r = w.run(pd.get(), uintptr_t(big.p + 70000), mb->rkey, 3000, 0);
	if (!r) {
		fprintf(stderr, "%s\n", r.message());
		return 35;
	}
	if (!all_are(big.p + 70000, 3000, 'W') || !all_are(big.p, 70000, 'n') ||
	    !all_are(big.p + 73000, big.len - 73000, 'n'))
		return 36;
	return 0;
}

int run_mode(const char *mode)
{
	FILE *err_in = nullptr;
	pid_t c = spawn_self("--soft-small", mode, nullptr, &err_in, true);
	if (c < 0 || !err_in)
		return -1;
	char buf[1024];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), err_in)) > 0)
		fwrite(buf, 1, n, stderr);
	fclose(err_in);
	int st = 0;
	waitpid(c, &st, 0);
	return st;
}

class SmallRegion : public ::testing::Test {
protected:
	void SetUp() override
	{
		ctx.reset(open_soft());
		ASSERT_TRUE(ctx);
		pd.reset(ibv_alloc_pd(ctx.get()));
		ASSERT_TRUE(pd);
	}
	Ctx ctx;
	Pd pd;
};

// A 200-byte region in the middle of a page: its page (only that one) is
// converted, a peer writes and reads it through a mapping, and nothing else
// of the page changes.
TEST_F(SmallRegion, PeerReachesItThroughAMappingAndTheRestOfThePageStays)
{
	Pages pg(3, 'n');
	ASSERT_TRUE(pg.p);
	char *page = pg.p + kPage;
	Mr mr(ibv_reg_mr(pd.get(), page + 100, 200, kAllAccess));
	ASSERT_TRUE(mr);
	unsigned long ino = region_file_of(page);
	EXPECT_NE(ino, 0u) << "the page of a small region was not converted";
	EXPECT_EQ(region_file_of(pg.p), 0u) << "a page outside the region was converted";
	EXPECT_EQ(region_file_of(pg.p + 2 * kPage), 0u);
	WriterPeer w;
	ASSERT_TRUE(w.run(pd.get(), uintptr_t(page + 100), mr->rkey, 200, ino));
	EXPECT_TRUE(all_are(page + 100, 200, 'W'));
	EXPECT_TRUE(all_are(pg.p, kPage + 100, 'n'));
	EXPECT_TRUE(all_are(page + 300, 2 * kPage - 300, 'n'));
	mr.reset();
	EXPECT_EQ(region_file_of(page), 0u) << "still shared after deregistration";
	EXPECT_TRUE(all_are(page + 100, 200, 'W'));
	EXPECT_TRUE(all_are(page + 300, kPage - 300, 'n'));
}

// Regions registered one after the other in adjacent pages take adjacent
// pages of one file, whose mappings the kernel merges into one: each still
// turns back into private memory at its deregistration, in either order (a
// page left shared would be shared with every fork() child), with its
// bytes.
TEST_F(SmallRegion, AdjacentRegionsOfOneFileTurnBackPrivate)
{
	for (int order = 0; order < 2; order++) {
		SCOPED_TRACE(order ? "second first" : "first first");
		Pages pg(4, 'a');
		ASSERT_TRUE(pg.p);
		Mr m1(ibv_reg_mr(pd.get(), pg.p + 8, kPage - 16, kAllAccess));
		Mr m2(ibv_reg_mr(pd.get(), pg.p + kPage + 8, kPage - 16, kAllAccess));
		Mr m3(ibv_reg_mr(pd.get(), pg.p + 2 * kPage + 8, kPage - 16, kAllAccess));
		ASSERT_TRUE(m1 && m2 && m3);
		for (int i = 0; i < 3; i++)
			ASSERT_NE(region_file_of(pg.p + i * kPage), 0u) << "page " << i;
		memset(pg.p + kPage, 'b', kPage);
		if (order) {
			m2.reset();
			EXPECT_EQ(region_file_of(pg.p + kPage), 0u) << "the middle page stayed shared";
			m3.reset();
			m1.reset();
		} else {
			m1.reset();
			m2.reset();
			m3.reset();
		}
		for (int i = 0; i < 3; i++)
			EXPECT_EQ(region_file_of(pg.p + i * kPage), 0u) << "page " << i << " stayed shared";
		EXPECT_TRUE(all_are(pg.p, kPage, 'a'));
		EXPECT_TRUE(all_are(pg.p + kPage, kPage, 'b'));
		EXPECT_TRUE(all_are(pg.p + 2 * kPage, 2 * kPage, 'a'));
	}
}

// Two buffers side by side that share a page (an allocator's neighbours),
// registered one after the other: the second one's pages beyond the first
// one's converted range are converted too, and a peer reaches them through
// a mapping; the bytes in the shared page (converted with the first) it
// reaches as well. Both orders: the second region above the first, and
// below it. Every byte lands where it belongs, nothing beside it changes.
TEST_F(SmallRegion, NeighboursSharingAPageAreBothReached)
{
	for (int below = 0; below < 2; below++) {
		SCOPED_TRACE(below ? "second region below the first" : "second region above the first");
		Pages pg(64, 'n');
		ASSERT_TRUE(pg.p);
		const size_t kLen = 100000; // 24.4 pages: each end inside a page
		char *lo = pg.p + 3000, *hi = lo + kLen;
		char *first = below ? hi : lo, *second = below ? lo : hi;
		Mr m1(ibv_reg_mr(pd.get(), first, kLen, kAllAccess));
		ASSERT_TRUE(m1);
		Mr m2(ibv_reg_mr(pd.get(), second, kLen, kAllAccess));
		ASSERT_TRUE(m2);
		// The page the two share, and a page of the second one's own.
		char *shared_page = reinterpret_cast<char *>(uintptr_t(hi) & ~uintptr_t(kPage - 1));
		char *own = below ? lo + 8000 : hi + 8000;
		unsigned long ino = region_file_of(own);
		ASSERT_NE(ino, 0u) << "the second region's own pages were not converted";
		ASSERT_NE(region_file_of(shared_page), 0u);
		WriterPeer w1, w2, w3;
		ASSERT_TRUE(w1.run(pd.get(), uintptr_t(own), m2->rkey, kPage, ino));
		// The second region's bytes in the shared page.
		char *edge = below ? hi - 300 : hi;
		ASSERT_TRUE(w2.run(pd.get(), uintptr_t(edge), m2->rkey, 300, 0));
		// The first region's bytes in the shared page, through its own key.
		char *edge1 = below ? hi : hi - 300;
		ASSERT_TRUE(w3.run(pd.get(), uintptr_t(edge1), m1->rkey, 300, 0));
		for (char *c = pg.p; c < pg.p + pg.len; c++) {
			bool written = (c >= own && c < own + kPage) || (c >= edge && c < edge + 300) ||
				       (c >= edge1 && c < edge1 + 300);
			ASSERT_EQ(*c, written ? 'W' : 'n') << "byte " << (c - pg.p);
		}
		m1.reset();
		m2.reset();
		for (char *c = pg.p; c < pg.p + pg.len; c += kPage)
			EXPECT_EQ(region_file_of(c), 0u) << "page " << (c - pg.p) / kPage << " stayed shared";
	}
}

// A UD receive buffer's shape: page-aligned start, end inside a page
// (ibv_ud_pingpong registers size + 40 bytes).
TEST_F(SmallRegion, EndInAPartialPageIsReachedThroughAMapping)
{
	Pages pg(3, 'n');
	ASSERT_TRUE(pg.p);
	Mr mr(ibv_reg_mr(pd.get(), pg.p, kPage + 40, kAllAccess));
	ASSERT_TRUE(mr);
	unsigned long ino = region_file_of(pg.p + kPage);
	EXPECT_NE(ino, 0u);
	WriterPeer w;
	ASSERT_TRUE(w.run(pd.get(), uintptr_t(pg.p + kPage), mr->rkey, 40, ino));
	EXPECT_TRUE(all_are(pg.p + kPage, 40, 'W'));
	EXPECT_TRUE(all_are(pg.p + kPage + 40, 2 * kPage - 40, 'n'));
}

// Two regions in one page: deregistering one leaves the other converted and
// reachable; the page is private again once both are gone.
TEST_F(SmallRegion, TwoRegionsShareAPageAndOneIsDeregistered)
{
	Pages pg(1, 'n');
	ASSERT_TRUE(pg.p);
	Mr a(ibv_reg_mr(pd.get(), pg.p + 64, 128, kAllAccess));
	Mr b(ibv_reg_mr(pd.get(), pg.p + 1024, 512, kAllAccess));
	ASSERT_TRUE(a && b);
	unsigned long ino = region_file_of(pg.p);
	ASSERT_NE(ino, 0u);
	a.reset();
	EXPECT_EQ(region_file_of(pg.p), ino) << "the page changed under the remaining region";
	WriterPeer w;
	ASSERT_TRUE(w.run(pd.get(), uintptr_t(pg.p + 1024), b->rkey, 512, ino));
	EXPECT_TRUE(all_are(pg.p + 1024, 512, 'W'));
	EXPECT_TRUE(all_are(pg.p, 1024, 'n'));
	EXPECT_TRUE(all_are(pg.p + 1536, kPage - 1536, 'n'));
	b.reset();
	EXPECT_EQ(region_file_of(pg.p), 0u);
	EXPECT_TRUE(all_are(pg.p + 1024, 512, 'W'));
	EXPECT_TRUE(all_are(pg.p + 1536, kPage - 1536, 'n'));
}

// The application unmaps a registered buffer (whole or in part) and
// deregisters it later (UCX's registration cache does so at cleanup):
// deregistration succeeds and touches nothing; memory mapped anew at that
// address is the application's and keeps its bytes; a new registration there
// reaches the new memory, never the old region's file.
TEST_F(SmallRegion, UnmappedOrReplacedBeforeDeregistrationIsLeftAlone)
{
	for (int mode = 0; mode < 3; mode++) {
		SCOPED_TRACE(mode == 0 ? "unmapped" : mode == 1 ? "second page unmapped" : "mapped anew");
		void *p = mmap(nullptr, 3 * kPage, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		ASSERT_NE(p, MAP_FAILED);
		char *c = static_cast<char *>(p);
		memset(p, 'o', 3 * kPage);
		ibv_mr *mr = ibv_reg_mr(pd.get(), c + 100, 2 * kPage, kAllAccess);
		ASSERT_TRUE(mr);
		unsigned long long page_off = 0;
		unsigned long ino = region_file_of(p, &page_off);
		ASSERT_NE(ino, 0u);
		if (mode == 1) {
			ASSERT_EQ(munmap(c + kPage, kPage), 0);
		} else {
			ASSERT_EQ(munmap(p, 3 * kPage), 0);
		}
		if (mode == 2) {
			void *q = mmap(p, 3 * kPage, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			ASSERT_EQ(q, p);
			memset(q, 'x', 3 * kPage);
			Mr again(ibv_reg_mr(pd.get(), c + 200, 64, kAllAccess));
			ASSERT_TRUE(again);
			unsigned long long q_off = 0;
			unsigned long q_ino = region_file_of(q, &q_off);
			EXPECT_FALSE(q_ino == ino && q_off == page_off)
				<< "the new memory got the old region's pages";
			WriterPeer w;
			ASSERT_TRUE(w.run(pd.get(), uintptr_t(c + 200), again->rkey, 64, 0));
			EXPECT_TRUE(all_are(c + 200, 64, 'W')) << "the peer's write went elsewhere";
			memset(c + 200, 'x', 64);
		}
		EXPECT_EQ(ibv_dereg_mr(mr), 0);
		if (mode == 2) {
			EXPECT_TRUE(all_are(c, 3 * kPage, 'x'));
		}
		if (mode == 1) {
			munmap(p, kPage);
			munmap(c + 2 * kPage, kPage);
		}
		if (mode == 2)
			munmap(p, 3 * kPage);
	}
}

// Threads keep incrementing counters in the part of the page outside a
// small region while it is registered and deregistered many times: no
// increment is lost.
TEST_F(SmallRegion, WritesBesideTheRegionAreNeverLost)
{
	Pages pg(2, 0);
	ASSERT_TRUE(pg.p);
	auto *words = reinterpret_cast<volatile uint64_t *>(pg.p);
	constexpr int kThreads = 2;
	// Counters of thread t: word 8*t of the first page and word 256+8*t of
	// the second; the region is bytes [2048, 2048+64) of the second page.
	std::atomic<bool> stop{false};
	std::vector<uint64_t> done(kThreads, 0);
	std::vector<std::thread> writers;
	for (int t = 0; t < kThreads; t++)
		writers.emplace_back([&, t] {
			uint64_t n = 0;
			while (!stop.load(std::memory_order_relaxed)) {
				words[8 * t] = words[8 * t] + 1;
				words[512 + 8 * t] = words[512 + 8 * t] + 1;
				words[512 + 400 + 8 * t] = words[512 + 400 + 8 * t] + 1;
				n++;
			}
			done[t] = n;
		});
	int regs = 0;
	for (; regs < 300; regs++) {
		ibv_mr *mr = ibv_reg_mr(pd.get(), pg.p + kPage + 2048, 64, kAllAccess);
		ASSERT_NE(mr, nullptr);
		ASSERT_EQ(ibv_dereg_mr(mr), 0);
	}
	stop = true;
	for (auto &w : writers)
		w.join();
	for (int t = 0; t < kThreads; t++) {
		EXPECT_EQ(words[8 * t], done[t]);
		EXPECT_EQ(words[512 + 8 * t], done[t]) << "thread " << t << " over " << regs;
		EXPECT_EQ(words[512 + 400 + 8 * t], done[t]);
	}
}

// fork() while a small region is registered: the child gets the page as it
// was at fork (not what the parent writes right after fork() returns), its
// writes stay its own, and the parent's page stays converted.
TEST_F(SmallRegion, ForkGivesTheChildThePageAsAtFork)
{
	Pages pg(1, 'P');
	ASSERT_TRUE(pg.p);
	Mr mr(ibv_reg_mr(pd.get(), pg.p + 100, 100, kAllAccess));
	ASSERT_TRUE(mr);
	unsigned long ino = region_file_of(pg.p);
	ASSERT_NE(ino, 0u);
	int go[2];
	ASSERT_EQ(pipe(go), 0);
	pid_t c = fork();
	if (c == 0) {
		char x;
		close(go[1]);
		// Wait until the parent has written after fork() returned.
		if (read(go[0], &x, 1) != 1)
			_exit(2);
		bool as_at_fork = all_are(pg.p, kPage, 'P');
		memset(pg.p, 'C', kPage);
		_exit(as_at_fork ? 0 : 1);
	}
	close(go[0]);
	memset(pg.p + 2000, 'Q', 100); // beside the region
	memset(pg.p + 100, 'R', 100);  // in it
	ASSERT_EQ(write(go[1], "x", 1), 1);
	close(go[1]);
	int st = 0;
	waitpid(c, &st, 0);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
		<< "the child saw the parent's writes made after fork (status " << st << ")";
	EXPECT_TRUE(all_are(pg.p + 2000, 100, 'Q'));
	EXPECT_TRUE(all_are(pg.p + 100, 100, 'R'));
	EXPECT_TRUE(all_are(pg.p + 2100, kPage - 2100, 'P')) << "the child's writes reached us";
	EXPECT_EQ(region_file_of(pg.p), ino);
}

TEST(SmallRegionProcess, DontforkAfterForkInitCoversTheWholePage)
{
	int st = run_mode("dontfork");
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
}

TEST(SmallRegionProcess, RegionAboveTheLimitIsNotCopiedAndStillReached)
{
	setenv("OPENVERBS_SOFT_SHARE_MAX", "65536", 1);
	int st = run_mode("large");
	unsetenv("OPENVERBS_SOFT_SHARE_MAX");
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
}

} // namespace

// WriterPeer for other files' tests (odp_test.cpp): a peer process writes
// and reads back `len` bytes at (addr, rkey) of a region in pd.
::testing::AssertionResult soft_writer_peer(ibv_pd *pd, uint64_t addr, uint32_t rkey,
					    uint32_t len, unsigned long ino)
{
	WriterPeer w;
	return w.run(pd, addr, rkey, len, ino);
}

// The peer modes of this file ("--soft-small <mode>"); 127 for an unknown one.
int small_region_child(const char *mode)
{
	if (!strcmp(mode, "writer"))
		return small_peer_writer();
	if (!strcmp(mode, "dontfork"))
		return small_dontfork();
	if (!strcmp(mode, "large"))
		return large_region();
	return 127;
}
