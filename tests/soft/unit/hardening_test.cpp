// Regression tests of issue 17 (software device, hardened): every test here
// failed on the provider as of 364aec8. Through the real libibverbs.so.1.
//
// Some cases need a process of their own (another RDMAV_SOFT_DEVICES value,
// an LD_PRELOAD shim, a crash that must not take the suite down): they
// re-execute this binary with "--soft-child <mode>" (hardening_child).
#include "../soft_fixture.h"
#include <infiniband/driver.h>
#include <infiniband/openverbs.h>
#include <infiniband/verbs.h>
#include "shm.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <functional>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <cstddef>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace ov_test;

namespace {

// Runs this binary as "--soft-child mode" with `env` added; returns its exit
// status (as waitpid) and its standard error in *err.
int run_child(const char *mode, const std::vector<std::string> &env, std::string *err)
{
	int p[2];
	if (pipe(p))
		return -1;
	pid_t c = fork();
	if (c == 0) {
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		for (const std::string &e : env)
			putenv(strdup(e.c_str()));
		std::string self = self_exe();
		execl(self.c_str(), self.c_str(), "--soft-child", mode, (char *)nullptr);
		_exit(127);
	}
	close(p[1]);
	char buf[4096];
	ssize_t n;
	while ((n = read(p[0], buf, sizeof(buf))) > 0)
		err->append(buf, size_t(n));
	close(p[0]);
	int st = 0;
	waitpid(c, &st, 0);
	return st;
}

// An anonymous shared mapping: registration never converts it (it is not
// private memory), so the device reaches it in place.
struct SharedBuf {
	char *p = nullptr;
	size_t len = 0;
	explicit SharedBuf(size_t n) : len(n)
	{
		void *m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		p = m == MAP_FAILED ? nullptr : static_cast<char *>(m);
	}
	~SharedBuf()
	{
		if (p)
			munmap(p, len);
	}
};

// ---------------------------------------------------------------- item 1

// Child: 256 devices listed, none refused, and a connected pair on soft255.
int child_many_devices()
{
	int n = 0;
	ibv_device **list = ibv_get_device_list(&n);
	if (!list || n != 256) {
		fprintf(stderr, "listed %d devices\n", n);
		return 1;
	}
	ibv_free_device_list(list);
	Pair p;
	auto r = p.connect_pair(IBV_QPT_RC, kAllAccess, 255);
	if (!r) {
		fprintf(stderr, "soft255: %s\n", r.message());
		return 2;
	}
	std::vector<char> src(4096, 'm'), dst(4096, 0);
	Mr ms(ibv_reg_mr(p.pd.get(), src.data(), src.size(), kAllAccess));
	Mr md(ibv_reg_mr(p.pd.get(), dst.data(), dst.size(), kAllAccess));
	if (!ms || !md)
		return 3;
	if (post_one(p.a.get(), IBV_WR_RDMA_WRITE, src.data(), 100, ms->lkey,
		     uintptr_t(dst.data()), md->rkey))
		return 4;
	ibv_wc wc;
	if (!poll_one(p.cqa.get(), &wc) || wc.status != IBV_WC_SUCCESS || dst[99] != 'm')
		return 5;
	return 0;
}

TEST(SoftHardening, TwoHundredFiftySixDevicesListedAndUsable)
{
	std::string err;
	int st = run_child("many-devices", {"RDMAV_SOFT_DEVICES=256"}, &err);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st << "\n" << err;
	EXPECT_EQ(err.find("couldn't allocate"), std::string::npos) << err;
}

// ---------------------------------------------------------------- item 2

// ibv_rereg_mr keeps the key: a requester must see either the old or the
// new registration, never the PD of one with the access of the other. The
// region flips between (pd, local write only) and (pd2, remote write): a
// remote write through a QP of pd is refused by both, so any byte landing
// in the target comes from a torn read. UC writes with two gather entries
// (the general path; failures are silent, the QP stays usable).
TEST(SoftHardening, ReregIsNeverSeenHalfOldHalfNew)
{
	Pair p;
	ASSERT_TRUE(p.connect_pair(IBV_QPT_UC, kAllAccess));
	Pd pd2(ibv_alloc_pd(p.ctx.get()));
	ASSERT_TRUE(pd2);
	SharedBuf target(65536);
	ASSERT_NE(target.p, nullptr);
	std::vector<char> src(64, 'T');
	Mr ms(ibv_reg_mr(p.pd.get(), src.data(), src.size(), kAllAccess));
	Mr mt(ibv_reg_mr(p.pd.get(), target.p, 4096, IBV_ACCESS_LOCAL_WRITE));
	ASSERT_TRUE(ms && mt);
	std::atomic<bool> stop{false};
	std::atomic<long> flips{0};
	std::thread flipper([&] {
		int flags = IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
		while (!stop.load()) {
			ibv_rereg_mr(mt.get(), flags, pd2.get(), nullptr, 0,
				     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
			ibv_rereg_mr(mt.get(), flags, p.pd.get(), nullptr, 0, IBV_ACCESS_LOCAL_WRITE);
			flips++;
		}
	});
	ibv_sge sg[2] = {{uintptr_t(src.data()), 4, ms->lkey},
			 {uintptr_t(src.data() + 4), 4, ms->lkey}};
	auto t0 = std::chrono::steady_clock::now();
	long ops = 0;
	while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(4)) {
		ibv_send_wr wr = {}, *bad;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.sg_list = sg;
		wr.num_sge = 2;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = uintptr_t(target.p) + 8 * (ops % 256);
		wr.wr.rdma.rkey = mt->rkey;
		ASSERT_EQ(ibv_post_send(p.a.get(), &wr, &bad), 0);
		ibv_wc wc;
		ASSERT_TRUE(poll_one(p.cqa.get(), &wc));
		ops++;
		if (target.p[8 * ((ops - 1) % 256)])
			break;
	}
	stop = true;
	flipper.join();
	int landed = 0;
	for (int i = 0; i < 4096; i++)
		landed += target.p[i] != 0;
	EXPECT_EQ(landed, 0) << "a refused write landed after " << ops << " writes, "
			     << flips.load() << " rereg pairs";
}

// ---------------------------------------------------------------- item 3

// SEND_WITH_INV looks the window up, delivers the message, then invalidates
// the window. A window deallocated meanwhile, whose slot went to a new
// window of someone else, must not be invalidated. The message is large so
// that its copy leaves time for the other thread's dealloc/alloc/bind.
TEST(SoftHardening, SendWithInvalidateLeavesAReusedWindowAlone)
{
	constexpr size_t kLen = 96u << 20;
	Pair p;
	ASSERT_TRUE(p.connect_pair(IBV_QPT_RC, kAllAccess));
	SharedBuf src(kLen), dst(kLen);
	ASSERT_TRUE(src.p && dst.p);
	memset(src.p, 's', kLen);
	Mr ms(ibv_reg_mr(p.pd.get(), src.p, kLen, kAllAccess));
	Mr md(ibv_reg_mr(p.pd.get(), dst.p, kLen, kAllAccess));
	std::vector<char> page(8192, 0);
	Mr mb(ibv_reg_mr(p.pd.get(), page.data(), page.size(), kAllAccess));
	ASSERT_TRUE(ms && md && mb);
	auto bind = [&](ibv_mw *mw, uint32_t *rkey) {
		ibv_send_wr wr = {}, *bad;
		wr.opcode = IBV_WR_BIND_MW;
		wr.bind_mw.mw = mw;
		wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
		wr.bind_mw.bind_info.mr = mb.get();
		wr.bind_mw.bind_info.addr = uintptr_t(page.data());
		wr.bind_mw.bind_info.length = 4096;
		wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
		*rkey = wr.bind_mw.rkey;
		return ibv_post_send(p.b.get(), &wr, &bad); // unsignaled
	};
	bool raced = false;
	for (int attempt = 0; attempt < 5 && !raced; attempt++) {
		ibv_mw *w = ibv_alloc_mw(p.pd.get(), IBV_MW_TYPE_2);
		ASSERT_NE(w, nullptr);
		uint32_t wkey;
		ASSERT_EQ(bind(w, &wkey), 0);
		ASSERT_EQ(post_recv_one(p.b.get(), dst.p, uint32_t(kLen), md->lkey), 0);
		std::atomic<bool> go{false};
		std::vector<ibv_mw *> extra;
		ibv_mw *w2 = nullptr;
		uint32_t w2key = 0;
		std::thread other([&] {
			while (!go.load())
				;
			usleep(3000);
			ibv_dealloc_mw(w);
			// A fresh thread scans the key table from its start: the
			// freed slot is the first free one it finds, or close.
			for (int i = 0; i < 40000; i++) {
				ibv_mw *m = ibv_alloc_mw(p.pd.get(), IBV_MW_TYPE_2);
				if (!m)
					break;
				if ((m->rkey >> 8) == (wkey >> 8)) {
					w2 = m;
					break;
				}
				extra.push_back(m);
			}
			if (w2)
				bind(w2, &w2key);
		});
		ibv_sge s = {uintptr_t(src.p), uint32_t(kLen), ms->lkey};
		ibv_send_wr wr = {}, *bad;
		wr.opcode = IBV_WR_SEND_WITH_INV;
		wr.sg_list = &s;
		wr.num_sge = 1;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.invalidate_rkey = wkey;
		go = true;
		ASSERT_EQ(ibv_post_send(p.a.get(), &wr, &bad), 0);
		other.join();
		for (ibv_mw *m : extra)
			ibv_dealloc_mw(m);
		ibv_wc wc;
		ASSERT_TRUE(poll_one(p.cqa.get(), &wc));
		if (wc.status != IBV_WC_SUCCESS) {
			// The window was gone before the send looked it up: the race
			// was missed. Start again on a fresh pair.
			ASSERT_TRUE(p.connect_pair(IBV_QPT_RC, kAllAccess));
			if (w2)
				ibv_dealloc_mw(w2);
			continue;
		}
		ASSERT_TRUE(poll_one(p.cqb.get(), &wc));
		ASSERT_NE(w2, nullptr);
		raced = true;
		// The new window still works.
		char word[8] = "window";
		ASSERT_EQ(post_one(p.a.get(), IBV_WR_RDMA_WRITE, word, 7, 0,
				   uintptr_t(page.data()), w2key, 2, IBV_SEND_SIGNALED | IBV_SEND_INLINE),
			  0);
		ASSERT_TRUE(poll_one(p.cqa.get(), &wc));
		EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << "the reused window was invalidated";
		EXPECT_STREQ(page.data(), "window");
		ibv_dealloc_mw(w2);
	}
	EXPECT_TRUE(raced) << "the dealloc never fell inside the send";
}

// ---------------------------------------------------------------- item 6

// ibv_wr_complete posts the whole batch or nothing (ibv_wr_post(3)): with
// two requests waiting in a send queue of four, a batch of four fails and
// none of it runs.
TEST(SoftHardening, WrCompleteIsAllOrNothing)
{
	Ctx ctx(open_soft());
	ASSERT_TRUE(ctx);
	Pd pd(ibv_alloc_pd(ctx.get()));
	Cq cqa(ibv_create_cq(ctx.get(), 64, nullptr, nullptr, 0));
	Cq cqb(ibv_create_cq(ctx.get(), 64, nullptr, nullptr, 0));
	ASSERT_TRUE(pd && cqa && cqb);
	ibv_qp_init_attr_ex qa = {};
	qa.qp_type = IBV_QPT_RC;
	qa.send_cq = cqa.get();
	qa.recv_cq = cqa.get();
	qa.cap.max_send_wr = 4;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_wr = 16;
	qa.cap.max_recv_sge = 1;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	qa.pd = pd.get();
	qa.send_ops_flags = IBV_QP_EX_WITH_SEND;
	Qp a(ibv_create_qp_ex(ctx.get(), &qa));
	ibv_qp_init_attr ib = {};
	ib.qp_type = IBV_QPT_RC;
	ib.send_cq = ib.recv_cq = cqb.get();
	ib.cap.max_send_wr = ib.cap.max_recv_wr = 16;
	ib.cap.max_send_sge = ib.cap.max_recv_sge = 1;
	Qp b(ibv_create_qp(pd.get(), &ib));
	ASSERT_TRUE(a && b);
	ASSERT_TRUE(bring_up(a.get(), b->qp_num, 1, kAllAccess));
	ASSERT_TRUE(bring_up(b.get(), a->qp_num, 1, kAllAccess));
	std::vector<char> buf(4096, 'w');
	Mr mr(ibv_reg_mr(pd.get(), buf.data(), buf.size(), kAllAccess));
	ASSERT_TRUE(mr);
	// Two sends wait for receive buffers (RNR, retried for ever).
	ASSERT_EQ(post_one(a.get(), IBV_WR_SEND, buf.data(), 8, mr->lkey, 0, 0, 1), 0);
	ASSERT_EQ(post_one(a.get(), IBV_WR_SEND, buf.data(), 8, mr->lkey, 0, 0, 2), 0);
	ibv_qp_ex *qx = ibv_qp_to_qp_ex(a.get());
	ibv_wr_start(qx);
	for (int i = 0; i < 4; i++) {
		qx->wr_id = 10 + i;
		qx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(qx);
		ibv_wr_set_sge(qx, mr->lkey, uintptr_t(buf.data()), 8);
	}
	EXPECT_NE(ibv_wr_complete(qx), 0);
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(post_recv_one(b.get(), buf.data() + 1024, 64, mr->lkey), 0);
	std::vector<uint64_t> ids;
	ibv_wc wc;
	while (poll_one(cqa.get(), &wc, 500))
		ids.push_back(wc.wr_id);
	EXPECT_EQ(ids, (std::vector<uint64_t>{1, 2})) << "part of the failed batch was posted";
}

// Completion channel fds from the provider's hook (openverbs.h, what the
// core may ask for ibv_create_comp_channel) are not limited to 64 per
// context: the read end never sees end-of-file while nothing was sent.
TEST(SoftHardening, HundredCompletionChannelsBlockUntilAnEvent)
{
	Ctx ctx(open_soft());
	ASSERT_TRUE(ctx);
	verbs_device *vdev = verbs_get_device(ctx->device);
	ASSERT_TRUE(vdev->sysfs && vdev->sysfs->match);
	auto *hooks = static_cast<const openverbs_soft_hooks *>(vdev->sysfs->match->driver_data);
	ASSERT_NE(hooks, nullptr);
	std::vector<int> fds;
	for (int i = 0; i < 100; i++) {
		int fd = -1;
		ASSERT_EQ(hooks->create_comp_channel(ctx.get(), &fd), 0) << i;
		fds.push_back(fd);
	}
	int eof = 0;
	for (int fd : fds) {
		struct pollfd pfd = {fd, POLLIN, 0};
		if (poll(&pfd, 1, 0) != 0)
			eof++;
	}
	EXPECT_EQ(eof, 0) << "channels whose read end is ready without any event";
	for (int fd : fds)
		close(fd);
}

// ---------------------------------------------------------------- item 5

// After ibv_fork_init, registered memory is MADV_DONTFORK (ibv_fork_init(3)):
// a child does not have those pages at all, also when the device backs them
// by a shareable file.
int child_dontfork()
{
	if (ibv_fork_init())
		return 10;
	Pair p;
	if (!p.connect_pair(IBV_QPT_RC, kAllAccess))
		return 11;
	size_t len = 16 * 4096;
	void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 12;
	memset(m, 'd', len);
	Mr mr(ibv_reg_mr(p.pd.get(), m, len, kAllAccess));
	if (!mr)
		return 13;
	pid_t c = fork();
	if (c == 0) {
		// MADV_NORMAL fails with ENOMEM where nothing is mapped.
		_exit(madvise(m, len, MADV_NORMAL) != 0 && errno == ENOMEM ? 0 : 1);
	}
	int st = 0;
	waitpid(c, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "the child has the registered pages\n");
		return 14;
	}
	// Still there and intact in the parent, also after deregistration.
	mr.reset();
	if (static_cast<char *>(m)[len - 1] != 'd')
		return 15;
	return 0;
}

TEST(SoftHardening, RegistrationKeepsDontforkAfterForkInit)
{
	std::string err;
	int st = run_child("dontfork", {}, &err);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st << "\n" << err;
}

// Under an interposed mremap that drops MREMAP_FIXED's new address (UCX
// 1.13's hooks), registration still converts the region in place: the
// device moves its mappings with syscall(2), not through libc's symbols.
// Nothing ends up mapped at address 0, the region's pages are the shared
// file's, and an RDMA write into it lands.
int child_interposed()
{
	Pair p;
	if (!p.connect_pair(IBV_QPT_RC, kAllAccess))
		return 60;
	size_t len = 8 * 4096;
	void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 61;
	memset(m, 'i', len);
	Mr mr(ibv_reg_mr(p.pd.get(), m, len, kAllAccess));
	std::vector<char> src(64, 'S');
	Mr ms(ibv_reg_mr(p.pd.get(), src.data(), src.size(), kAllAccess));
	if (!mr || !ms)
		return 62;
	bool at_zero = false, converted = false;
	if (FILE *f = fopen("/proc/self/maps", "r")) {
		char line[512];
		while (fgets(line, sizeof(line), f)) {
			unsigned long lo, hi;
			if (sscanf(line, "%lx-%lx", &lo, &hi) != 2)
				continue;
			if (lo == 0)
				at_zero = true;
			if (lo <= uintptr_t(m) && hi >= uintptr_t(m) + len &&
			    strstr(line, "openverbs-soft-mr"))
				converted = true;
		}
		fclose(f);
	}
	if (at_zero) {
		fprintf(stderr, "a mapping at address 0\n");
		return 63;
	}
	if (!converted) {
		fprintf(stderr, "the region was not converted in place\n");
		return 64;
	}
	if (post_one(p.a.get(), IBV_WR_RDMA_WRITE, src.data(), 64, ms->lkey,
		     uintptr_t(m) + 4096, mr->rkey))
		return 65;
	ibv_wc wc;
	if (!poll_one(p.cqa.get(), &wc) || wc.status != IBV_WC_SUCCESS)
		return 66;
	if (static_cast<char *>(m)[4096] != 'S' || static_cast<char *>(m)[4096 + 64] != 'i')
		return 67;
	mr.reset();
	return static_cast<char *>(m)[len - 1] == 'i' ? 0 : 68;
}

TEST(SoftHardening, RegistrationUnderInterposedMremap)
{
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
	// The sanitizers' runtimes interpose mmap/munmap/mremap themselves and
	// keep shadow memory for what they map; a shim that bypasses them
	// breaks the runtime, not the device.
	GTEST_SKIP() << "an mmap shim cannot run under a sanitizer runtime";
#endif
	std::string err;
	int st = run_child("interposed", {std::string("LD_PRELOAD=") + SOFT_MREMAP_SHIM}, &err);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
		<< (WIFSIGNALED(st) ? "killed by signal " : "status ")
		<< (WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st)) << "\n"
		<< err;
}

// Threads keep incrementing counters in the pages of a region while it is
// registered and deregistered many times: no increment is lost (a device
// never loses a write because the buffer was registered).
TEST(SoftHardening, RegistrationLosesNoConcurrentWrite)
{
	Ctx ctx(open_soft());
	ASSERT_TRUE(ctx);
	Pd pd(ibv_alloc_pd(ctx.get()));
	ASSERT_TRUE(pd);
	constexpr size_t kPages = 64;
	size_t len = kPages * 4096;
	void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(m, MAP_FAILED);
	auto *words = static_cast<volatile uint64_t *>(m);
	constexpr int kThreads = 2;
	std::atomic<bool> stop{false};
	std::vector<uint64_t> done(kThreads, 0);
	std::vector<std::thread> writers;
	for (int t = 0; t < kThreads; t++)
		writers.emplace_back([&, t] {
			uint64_t n = 0;
			while (!stop.load(std::memory_order_relaxed)) {
				// One counter per thread in every page.
				for (size_t pg = 0; pg < kPages; pg++)
					words[pg * 512 + t] = words[pg * 512 + t] + 1;
				n++;
			}
			done[t] = n;
		});
	int regs = 0;
	for (; regs < 200; regs++) {
		ibv_mr *mr = ibv_reg_mr(pd.get(), m, len, kAllAccess);
		ASSERT_NE(mr, nullptr);
		ASSERT_EQ(ibv_dereg_mr(mr), 0);
	}
	stop = true;
	for (auto &w : writers)
		w.join();
	int lost_pages = 0;
	for (int t = 0; t < kThreads; t++)
		for (size_t pg = 0; pg < kPages; pg++)
			lost_pages += words[pg * 512 + t] != done[t];
	EXPECT_EQ(lost_pages, 0) << "counters that lost increments over " << regs
				 << " registrations";
	munmap(m, len);
}

// ---------------------------------------------------------------- item 7

// The provider's diagnostics go through the library's logger: with
// VERBS_LOG_FILE set they land in that file (here: a damaged segment
// refused on attach), not on standard error.
int child_log_file()
{
	std::string path = "/dev/shm/openverbs-" + std::to_string(geteuid()) + "/soft3";
	Ctx keep(open_soft(3)); // a user, so the damage is refused, not rebuilt
	if (!keep)
		return 20;
	pid_t c = fork();
	if (c == 0) {
		int fd = open(path.c_str(), O_RDWR);
		const char junk[] = "damaged";
		if (fd < 0 || pwrite(fd, junk, sizeof(junk), 0) != ssize_t(sizeof(junk)))
			_exit(21);
		// A new process: the segment is attached afresh and refused.
		std::string self = self_exe();
		execl(self.c_str(), self.c_str(), "--soft-child", "open-soft3", (char *)nullptr);
		_exit(127);
	}
	int st = 0;
	waitpid(c, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 22;
}

int child_open_soft3()
{
	errno = 0;
	ibv_context *ctx = open_soft(3);
	return !ctx && errno == EPROTO ? 0 : 23;
}

TEST(SoftHardening, ProviderLogsThroughVerbsLogFile)
{
	char path[] = "/tmp/ovsoft-log-XXXXXX";
	int fd = mkstemp(path);
	ASSERT_GE(fd, 0);
	close(fd);
	std::string err;
	int st = run_child("log-file", {"VERBS_LOG_LEVEL=4", std::string("VERBS_LOG_FILE=") + path},
			   &err);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st << "\n" << err;
	std::string log;
	if (FILE *f = fopen(path, "r")) {
		char buf[4096];
		size_t n;
		while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
			log.append(buf, n);
		fclose(f);
	}
	unlink(path);
	EXPECT_NE(log.find("soft: "), std::string::npos) << "log file: " << log;
	EXPECT_NE(log.find("not trusting it"), std::string::npos) << "log file: " << log;
	EXPECT_EQ(err.find("soft: "), std::string::npos) << "stderr: " << err;
}

// ---------------------------------------------------------------- item 4

constexpr size_t kChurnBig = 128u << 20;
constexpr int kChurnSmall = 400;

// Peer of MappingInUseIsNeverUnmapped (stdin/stdout): two RC QPs, one big
// region and kChurnSmall one-page regions (each its own shareable file).
// Prints "qpn1 qpn2 bigkey bigaddr", then one "key addr" line per small
// region; reads the requester's two QPNs, connects, prints "ready"; on
// "check" prints how many bytes of the big region are not 'W'.
int child_churn_peer()
{
	Ctx ctx(open_soft());
	if (!ctx)
		return 30;
	Pd pd(ibv_alloc_pd(ctx.get()));
	Cq cq(ibv_create_cq(ctx.get(), 64, nullptr, nullptr, 0));
	if (!pd || !cq)
		return 31;
	auto make = [&] {
		ibv_qp_init_attr ia = {};
		ia.send_cq = ia.recv_cq = cq.get();
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		return ibv_create_qp(pd.get(), &ia);
	};
	Qp q1(make()), q2(make());
	void *big = mmap(nullptr, kChurnBig, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
	if (!q1 || !q2 || big == MAP_FAILED)
		return 32;
	memset(big, 'p', kChurnBig);
	Mr mbig(ibv_reg_mr(pd.get(), big, kChurnBig, kAllAccess));
	if (!mbig)
		return 33;
	printf("%u %u %u %llu\n", q1->qp_num, q2->qp_num, mbig->rkey,
	       (unsigned long long)uintptr_t(big));
	std::vector<Mr> small;
	for (int i = 0; i < kChurnSmall; i++) {
		void *pg = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);
		if (pg == MAP_FAILED)
			return 34;
		small.emplace_back(ibv_reg_mr(pd.get(), pg, 4096, kAllAccess));
		if (!small.back())
			return 35;
		printf("%u %llu\n", small.back()->rkey, (unsigned long long)uintptr_t(pg));
	}
	fflush(stdout);
	unsigned d1, d2;
	if (scanf("%u %u", &d1, &d2) != 2)
		return 36;
	if (!bring_up(q1.get(), d1, 1, kAllAccess) || !bring_up(q2.get(), d2, 1, kAllAccess))
		return 37;
	printf("ready\n");
	fflush(stdout);
	char word[16];
	if (scanf("%15s", word) != 1)
		return 38;
	size_t bad = 0;
	for (size_t i = 0; i < kChurnBig; i++)
		bad += static_cast<char *>(big)[i] != 'W';
	printf("%zu\n", bad);
	fflush(stdout);
	return 0;
}

// The requester's side, in a process of its own (a fault must not take
// the suite down): one thread writes the big region through its mapping
// while another makes the process map hundreds of other regions of the
// peer, pushing the big mapping out of the mapping cache. The mapping
// stays until the copy is over: no fault, every byte written.
int child_churn_requester()
{
	int to[2], from[2];
	if (pipe(to) || pipe(from))
		return 40;
	pid_t peer = fork();
	if (peer == 0) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		close(to[1]);
		close(from[0]);
		std::string self = self_exe();
		execl(self.c_str(), self.c_str(), "--soft-child", "churn-peer", (char *)nullptr);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	FILE *in = fdopen(to[1], "w"), *out = fdopen(from[0], "r");
	unsigned q1, q2, bigkey;
	unsigned long long bigaddr;
	if (fscanf(out, "%u %u %u %llu", &q1, &q2, &bigkey, &bigaddr) != 4)
		return 41;
	std::vector<std::pair<unsigned, unsigned long long>> small(kChurnSmall);
	for (auto &s : small)
		if (fscanf(out, "%u %llu", &s.first, &s.second) != 2)
			return 42;
	Pair p;
	p.max_send_wr = 8;
	if (!p.connect_pair(IBV_QPT_RC, kAllAccess))
		return 43;
	// Re-aim both QPs at the peer's.
	Qp a(p.a.release()), b(p.b.release());
	for (ibv_qp *q : {a.get(), b.get()}) {
		ibv_qp_attr at = {};
		at.qp_state = IBV_QPS_RESET;
		if (ibv_modify_qp(q, &at, IBV_QP_STATE))
			return 44;
	}
	if (!bring_up(a.get(), q1, 1, kAllAccess) || !bring_up(b.get(), q2, 1, kAllAccess))
		return 45;
	fprintf(in, "%u %u\n", a->qp_num, b->qp_num);
	fflush(in);
	char word[16];
	if (fscanf(out, "%15s", word) != 1 || strcmp(word, "ready"))
		return 46;
	void *src = mmap(nullptr, kChurnBig, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
			 0);
	if (src == MAP_FAILED)
		return 47;
	memset(src, 'W', kChurnBig);
	Mr ms(ibv_reg_mr(p.pd.get(), src, kChurnBig, kAllAccess));
	std::vector<char> word8(8, 'w');
	Mr mw(ibv_reg_mr(p.pd.get(), word8.data(), 8, kAllAccess));
	if (!ms || !mw)
		return 48;
	std::atomic<bool> go{false};
	int churn_bad = 0;
	std::thread churn([&] {
		while (!go.load())
			;
		usleep(1000);
		for (auto &s : small) {
			ibv_wc wc;
			if (post_one(b.get(), IBV_WR_RDMA_WRITE, word8.data(), 8, mw->lkey, s.second,
				     s.first) ||
			    !poll_one(p.cqb.get(), &wc) || wc.status != IBV_WC_SUCCESS)
				churn_bad++;
		}
	});
	go = true;
	int rc = post_one(a.get(), IBV_WR_RDMA_WRITE, src, uint32_t(kChurnBig), ms->lkey, bigaddr,
			  bigkey);
	churn.join();
	ibv_wc wc;
	if (rc || !poll_one(p.cqa.get(), &wc) || wc.status != IBV_WC_SUCCESS)
		return 49;
	if (churn_bad)
		return 50;
	fprintf(in, "check\n");
	fflush(in);
	size_t bad = 1;
	if (fscanf(out, "%zu", &bad) != 1 || bad)
		return 51;
	fclose(in);
	fclose(out);
	int st = 0;
	waitpid(peer, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 52;
}

TEST(SoftHardening, MappingInUseIsNeverUnmapped)
{
	std::string err;
	int st = run_child("churn-requester", {}, &err);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
		<< (WIFSIGNALED(st) ? "killed by signal " : "status ")
		<< (WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st)) << "\n"
		<< err;
}

// ---------------------------------------------------------------- item 8

// A segment whose tables or arena are damaged while it is in use is refused
// (EPROTO, with the defect in the diagnostic), not trusted: here the first
// arena block's magic, then a QP entry's slot state.
TEST(SoftHardening, DamagedTablesAndArenaAreRefused)
{
	std::string path = "/dev/shm/openverbs-" + std::to_string(geteuid()) + "/soft4";
	pid_t c = hold_soft_in_child(4);
	ASSERT_GT(c, 0);
	int fd = open(path.c_str(), O_RDWR);
	ASSERT_GE(fd, 0);
	uint64_t arena_offset = 0;
	ASSERT_EQ(pread(fd, &arena_offset, 8, offsetof(ovsoft::SegmentHeader, arena_offset)), 8);
	// Writes the 4-byte values at their offsets, opens the device (the
	// errno of a refusal, 0 when it opens), then puts the old values back.
	auto damage = [&](std::vector<std::pair<off_t, uint32_t>> patches) {
		std::vector<uint32_t> old(patches.size());
		for (size_t i = 0; i < patches.size(); i++) {
			EXPECT_EQ(pread(fd, &old[i], 4, patches[i].first), 4);
			EXPECT_EQ(pwrite(fd, &patches[i].second, 4, patches[i].first), 4);
		}
		errno = 0;
		ibv_context *ctx = open_soft(4);
		int e = errno;
		if (ctx)
			ibv_close_device(ctx);
		for (size_t i = patches.size(); i-- > 0;)
			EXPECT_EQ(pwrite(fd, &old[i], 4, patches[i].first), 4);
		return ctx ? 0 : e;
	};
	// The first arena block's magic (BlockHeader: size, free, owner, magic).
	EXPECT_EQ(damage({{off_t(arena_offset + 16), 0x12345678}}), EPROTO);
	// QP entry 7's slot state, inside the QP table's extent (8 entries).
	const off_t qp7 = off_t(offsetof(ovsoft::SegmentHeader, qps) + 7 * sizeof(ovsoft::QpEntry));
	const off_t qp_used = off_t(offsetof(ovsoft::SegmentHeader, extents.qps.used));
	EXPECT_EQ(damage({{qp_used, 8}, {qp7, 77}}), EPROTO);
	// An extent past its table's end.
	EXPECT_EQ(damage({{qp_used, ovsoft::kMaxQps + 1}}), EPROTO);
	EXPECT_EQ(damage({{off_t(offsetof(ovsoft::SegmentHeader, extents.mrs.used)),
			   ovsoft::kMaxMrs + 1}}),
		  EPROTO);
	// Above the extent (no QP taken yet) entries are free by definition:
	// attach does not read them, and a lookup by index bounds-checks what
	// it finds, as for damage done after attach.
	EXPECT_EQ(damage({{qp7, 77}}), 0);
	// Undamaged again: usable.
	ibv_context *ctx = open_soft(4);
	EXPECT_NE(ctx, nullptr) << strerror(errno);
	if (ctx)
		ibv_close_device(ctx);
	close(fd);
	kill(c, SIGKILL);
	waitpid(c, nullptr, 0);
	// The next user reclaims what the killed holder left; the last one
	// to leave removes the segment.
	ctx = open_soft(4);
	EXPECT_NE(ctx, nullptr) << strerror(errno);
	if (ctx)
		ibv_close_device(ctx);
	EXPECT_NE(access(path.c_str(), F_OK), 0) << path << " left behind";
}

// The arena's reuse path (shm.cpp, reuse_alloc). A destroyed CQ's ring
// rests 10 ms (a peer that looked the CQ up just before may still push
// into it): a CQ made at once gets other memory. After that the next CQ
// gets the freed memory, and CQs made and destroyed over and over keep
// using the same pages: the segment's resident pages stay flat (next fit
// alone put every ring on fresh pages, 9 more per CQ of 256 entries here).
TEST(SoftHardening, ArenaReusesFreedRingsAfterTheirQuarantine)
{
	std::string path = "/dev/shm/openverbs-" + std::to_string(geteuid()) + "/soft7";
	Ctx ctx(open_soft(7));
	ASSERT_TRUE(ctx) << strerror(errno);
	int fd = open(path.c_str(), O_RDONLY);
	ASSERT_GE(fd, 0) << strerror(errno);
	auto ring_off = [&](ibv_cq *cq) {
		uint64_t off = 0;
		off_t at = off_t(offsetof(ovsoft::SegmentHeader, cqs) +
				 cq->handle * sizeof(ovsoft::CqEntry) + offsetof(ovsoft::CqEntry, ring) +
				 offsetof(ovsoft::RingLoc, off));
		EXPECT_EQ(pread(fd, &off, sizeof(off), at), ssize_t(sizeof(off)));
		return off;
	};
	auto resident = [&]() {
		struct stat st;
		EXPECT_EQ(fstat(fd, &st), 0);
		void *m = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
		EXPECT_NE(m, MAP_FAILED);
		std::vector<unsigned char> in_core((size_t(st.st_size) + 4095) / 4096);
		EXPECT_EQ(mincore(m, size_t(st.st_size), in_core.data()), 0) << strerror(errno);
		munmap(m, size_t(st.st_size));
		size_t n = 0;
		for (unsigned char v : in_core)
			n += v & 1;
		return n;
	};
	// A pair that took 5 ms or more (a loaded machine) says nothing about
	// the quarantine: it is tried again. The oldest ring freed is the first.
	uint64_t first = 0;
	for (int tries = 0; tries < 5; tries++) {
		ibv_cq *a = ibv_create_cq(ctx.get(), 256, nullptr, nullptr, 0);
		ASSERT_NE(a, nullptr) << strerror(errno);
		uint64_t off = ring_off(a);
		ASSERT_NE(off, 0u);
		if (!first)
			first = off;
		auto t0 = std::chrono::steady_clock::now();
		ASSERT_EQ(ibv_destroy_cq(a), 0);
		ibv_cq *b = ibv_create_cq(ctx.get(), 256, nullptr, nullptr, 0);
		ASSERT_NE(b, nullptr) << strerror(errno);
		bool quick = std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(5);
		if (quick) {
			EXPECT_NE(ring_off(b), off) << "a ring freed a moment ago was handed out again";
		}
		ASSERT_EQ(ibv_destroy_cq(b), 0);
		if (quick)
			break;
	}
	usleep(30 * 1000);
	ibv_cq *c = ibv_create_cq(ctx.get(), 256, nullptr, nullptr, 0);
	ASSERT_NE(c, nullptr) << strerror(errno);
	EXPECT_EQ(ring_off(c), first) << "the rested ring was not reused";
	ASSERT_EQ(ibv_destroy_cq(c), 0);
	size_t before = resident();
	for (int i = 0; i < 40; i++) {
		usleep(12 * 1000);
		ibv_cq *d = ibv_create_cq(ctx.get(), 256, nullptr, nullptr, 0);
		ASSERT_NE(d, nullptr) << strerror(errno);
		ASSERT_EQ(ibv_destroy_cq(d), 0);
	}
	EXPECT_LE(resident(), before + 2) << "CQ churn went on to fresh pages";
	close(fd);
}

// A process that attaches to a device in use maps only the parts of the
// tables below their extents (shm.h, TableExtent): a device that holds a
// few objects costs it a few pages, not the tables' 5 MB (about 1,230
// pages, all of them mapped by every attach before the extents). Key slots
// are taken from the bottom: a region registered after a deregistration
// takes the freed slot, under another key.
TEST(SoftHardening, AttachMapsOnlyTheTablesInUse)
{
	std::string path = "/dev/shm/openverbs-" + std::to_string(geteuid()) + "/soft6";
	pid_t c = hold_soft_in_child(6);
	ASSERT_GT(c, 0);
	{
		Ctx ctx(open_soft(6));
		ASSERT_TRUE(ctx) << strerror(errno);
		Pd pd(ibv_alloc_pd(ctx.get()));
		ASSERT_TRUE(pd);
		static char buf[3][64];
		Mr a(ibv_reg_mr(pd.get(), buf[0], sizeof(buf[0]), IBV_ACCESS_LOCAL_WRITE));
		Mr b(ibv_reg_mr(pd.get(), buf[1], sizeof(buf[1]), IBV_ACCESS_LOCAL_WRITE));
		ASSERT_TRUE(a && b);
		uint32_t slot_a = a->handle, key_a = a->lkey;
		EXPECT_EQ(b->handle, slot_a + 1);
		a.reset();
		Mr d(ibv_reg_mr(pd.get(), buf[2], sizeof(buf[2]), IBV_ACCESS_LOCAL_WRITE));
		ASSERT_TRUE(d);
		EXPECT_EQ(d->handle, slot_a);
		EXPECT_NE(d->lkey, key_a);

		// The segment file's pages in memory (tmpfs: a page exists once
		// some process touched it).
		int fd = open(path.c_str(), O_RDONLY);
		ASSERT_GE(fd, 0);
		struct stat st;
		ASSERT_EQ(fstat(fd, &st), 0);
		void *m = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
		ASSERT_NE(m, MAP_FAILED);
		std::vector<unsigned char> in_core((size_t(st.st_size) + 4095) / 4096);
		ASSERT_EQ(mincore(m, size_t(st.st_size), in_core.data()), 0) << strerror(errno);
		size_t resident = 0;
		for (unsigned char v : in_core)
			resident += v & 1;
		munmap(m, size_t(st.st_size));
		EXPECT_LT(resident, 200u) << "pages of " << path << " in memory";
	}
	kill(c, SIGKILL);
	waitpid(c, nullptr, 0);
	// The next user reclaims what the killed holder left, and as the last
	// one to leave removes the segment (other tests check that none is left).
	ibv_context *ctx = open_soft(6);
	EXPECT_NE(ctx, nullptr) << strerror(errno);
	if (ctx)
		ibv_close_device(ctx);
	EXPECT_NE(access(path.c_str(), F_OK), 0) << path << " left behind";
}

// ---------------------------------------------------------------- soak finding 1

// Descriptors this process has open, and its mappings of the device's
// memfds (queues and shared regions, its own or its peers').
int count_fds()
{
	int n = 0;
	if (DIR *d = opendir("/proc/self/fd")) {
		while (dirent *e = readdir(d))
			n += e->d_name[0] != '.';
		closedir(d);
	}
	return n;
}

std::string list_fds()
{
	std::string out;
	if (DIR *d = opendir("/proc/self/fd")) {
		while (dirent *e = readdir(d)) {
			char target[256] = {};
			std::string p = std::string("/proc/self/fd/") + e->d_name;
			if (e->d_name[0] != '.' && readlink(p.c_str(), target, sizeof(target) - 1) > 0)
				out += std::string(" ") + e->d_name + "->" + target;
		}
		closedir(d);
	}
	return out;
}

int count_device_maps()
{
	int n = 0;
	if (FILE *f = fopen("/proc/self/maps", "r")) {
		char line[512];
		while (fgets(line, sizeof(line), f))
			n += strstr(line, "openverbs-soft-") != nullptr;
		fclose(f);
	}
	return n;
}

// The responder of fd-cycles, a process of its own on soft0: per cycle a
// CQ with a completion channel and an RC QP; prints its QP number, reads
// the requester's, posts a receive, arms the CQ, prints "ready", waits
// for the completion event (which the requester's process delivers
// through this process's channel pipe) and prints "got".
int fd_cycles_responder(FILE *in, FILE *out, int cycles)
{
	Ctx ctx(open_soft());
	if (!ctx)
		return 60;
	Pd pd(ibv_alloc_pd(ctx.get()));
	std::vector<char> buf(64);
	Mr mr(pd ? ibv_reg_mr(pd.get(), buf.data(), buf.size(), kAllAccess) : nullptr);
	if (!mr)
		return 61;
	for (int i = 0; i < cycles; i++) {
		ibv_comp_channel *ch = ibv_create_comp_channel(ctx.get());
		ibv_cq *cq = ch ? ibv_create_cq(ctx.get(), 16, nullptr, ch, 0) : nullptr;
		if (!cq)
			return 62;
		ibv_qp_init_attr ia = {};
		ia.send_cq = ia.recv_cq = cq;
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		ibv_qp *qp = ibv_create_qp(pd.get(), &ia);
		if (!qp)
			return 63;
		fprintf(out, "%u\n", qp->qp_num);
		fflush(out);
		unsigned dest;
		if (fscanf(in, "%u", &dest) != 1 || !bring_up(qp, dest, 1, kAllAccess) ||
		    post_recv_one(qp, buf.data(), uint32_t(buf.size()), mr->lkey) ||
		    ibv_req_notify_cq(cq, 0))
			return 64;
		fprintf(out, "ready\n");
		fflush(out);
		pollfd p = {ch->fd, POLLIN, 0};
		ibv_cq *ev_cq;
		void *ev_ctx;
		if (poll(&p, 1, 5000) != 1 || ibv_get_cq_event(ch, &ev_cq, &ev_ctx))
			return 65;
		ibv_ack_cq_events(ev_cq, 1);
		fprintf(out, "got\n");
		fflush(out);
		if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq) || ibv_destroy_comp_channel(ch))
			return 66;
	}
	return 0;
}

// Child: cycles of open, send to the responder (whose completion event
// this process writes into the responder's channel pipe), close; after
// each close this process has the descriptors it had before the cycle and
// no mapping of the device's memory left.
int child_fd_cycles()
{
	constexpr int kCycles = 4;
	int to[2], from[2];
	if (pipe(to) || pipe(from))
		return 50;
	pid_t peer = fork();
	if (peer == 0) {
		close(to[1]);
		close(from[0]);
		FILE *in = fdopen(to[0], "r"), *out = fdopen(from[1], "w");
		_exit(fd_cycles_responder(in, out, kCycles));
	}
	close(to[0]);
	close(from[1]);
	FILE *in = fdopen(to[1], "w"), *out = fdopen(from[0], "r");
	// Whatever the library keeps for the process (opened once) is counted
	// in the baseline.
	Ctx(open_soft()).reset();
	int before = count_fds();
	std::string before_list = list_fds();
	int rc = 0;
	for (int i = 0; i < kCycles && !rc; i++) {
		{
			Ctx ctx(open_soft());
			Pd pd(ctx ? ibv_alloc_pd(ctx.get()) : nullptr);
			Cq cq(pd ? ibv_create_cq(ctx.get(), 16, nullptr, nullptr, 0) : nullptr);
			if (!cq)
				return 51;
			ibv_qp_init_attr ia = {};
			ia.send_cq = ia.recv_cq = cq.get();
			ia.qp_type = IBV_QPT_RC;
			ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
			ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
			Qp qp(ibv_create_qp(pd.get(), &ia));
			std::vector<char> msg(64, 'f');
			Mr mr(ibv_reg_mr(pd.get(), msg.data(), msg.size(), kAllAccess));
			unsigned dest;
			char word[16];
			if (!qp || !mr || fscanf(out, "%u", &dest) != 1 ||
			    !bring_up(qp.get(), dest, 1, kAllAccess))
				return 52;
			fprintf(in, "%u\n", qp->qp_num);
			fflush(in);
			if (fscanf(out, "%15s", word) != 1 || strcmp(word, "ready"))
				return 53;
			ibv_wc wc;
			if (post_one(qp.get(), IBV_WR_SEND, msg.data(), uint32_t(msg.size()), mr->lkey) ||
			    !poll_one(cq.get(), &wc) || wc.status != IBV_WC_SUCCESS)
				return 54;
			if (fscanf(out, "%15s", word) != 1 || strcmp(word, "got"))
				return 55;
		}
		int now = count_fds(), maps = count_device_maps();
		if (now != before) {
			fprintf(stderr, "cycle %d: %d descriptors after ibv_close_device, %d before\n"
					"before:%s\nafter: %s\n",
				i, now, before, before_list.c_str(), list_fds().c_str());
			rc = 56;
		} else if (maps) {
			fprintf(stderr, "cycle %d: %d mappings of device memory after ibv_close_device\n",
				i, maps);
			rc = 57;
		}
	}
	fclose(in);
	fclose(out);
	int st = 0;
	waitpid(peer, &st, 0);
	if (!rc && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		rc = 58;
	return rc;
}

// A process that opens the device, delivers a completion event into
// another process's channel and closes the device keeps no descriptor
// (the cached writer of that process's pipe) and no mapping of the other
// process's memory (soak finding 1, tests/soak/FINDINGS.md).
TEST(SoftHardening, CloseDeviceLeavesNoPeerDescriptorOrMapping)
{
	std::string err;
	int st = run_child("fd-cycles", {}, &err);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
		<< (WIFSIGNALED(st) ? "killed by signal " : "status ")
		<< (WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st)) << "\n"
		<< err;
}

// A fast SEND first asks the CPU for the responder's lines it will meet
// (prefetch_message in providers/soft/requester.cpp), from the responder's
// QP entry, its receive ring's header and its CQ's entry, all of which a
// same-user peer can write. Damaged, they must cost nothing but a wasted
// hint: no read outside the mapping, and the message still arrives once
// the entry is whole again. Each case damages the entry while the responder
// has no receive posted (so nothing is consumed), sends, restores, posts
// the receive and checks both completions and the bytes.
TEST(SoftHardening, FastMessageOverDamagedResponderEntries)
{
	Pair p;
	ASSERT_TRUE(p.connect_pair(IBV_QPT_RC, kAllAccess, 7));
	std::string path = "/dev/shm/openverbs-" + std::to_string(geteuid()) + "/soft7";
	int fd = open(path.c_str(), O_RDWR);
	ASSERT_GE(fd, 0) << path << ": " << strerror(errno);
	struct stat st;
	ASSERT_EQ(fstat(fd, &st), 0);
	size_t size = size_t(st.st_size);
	auto *seg = static_cast<uint8_t *>(
		mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
	close(fd);
	ASSERT_NE(seg, MAP_FAILED);
	auto *hdr = reinterpret_cast<ovsoft::SegmentHeader *>(seg);
	ovsoft::QpEntry &b = hdr->qps[p.b->qp_num - ovsoft::kQpnBase];
	ASSERT_NE(b.recv_cq, 0u);
	ovsoft::CqEntry &bcq = hdr->cqs[b.recv_cq - 1];
	const uint64_t rq_off = b.rq_ring.off, cq_off = bcq.ring.off;
	const uint32_t recv_cq = b.recv_cq;
	// The responder's own receive ring header (in the arena, so where a
	// ring header may be), its geometry damaged and put back as it was:
	// cells that lie past the end whatever the position.
	ASSERT_GT(rq_off, 0u);
	ASSERT_LE(rq_off + sizeof(ovsoft::RingHeader), size);
	auto *fr = reinterpret_cast<ovsoft::RingHeader *>(seg + rq_off);

	void *src = aligned_alloc(4096, 4096), *dst = aligned_alloc(4096, 4096);
	ASSERT_TRUE(src && dst);
	Mr ms(ibv_reg_mr(p.pd.get(), src, 4096, kAllAccess));
	Mr md(ibv_reg_mr(p.pd.get(), dst, 4096, kAllAccess));
	ASSERT_TRUE(ms && md);
	// One message: sent with the entry as damage() leaves it, then the
	// entry restored and the receive posted; both completions must come.
	auto message = [&](int n, const std::function<void()> &damage,
			   const std::function<void()> &restore) {
		memset(src, 'a' + n % 26, 64);
		memset(dst, 0, 64);
		damage();
		int rc = post_one(p.a.get(), IBV_WR_SEND, src, 64, ms->lkey, 0, 0, 100 + n);
		restore();
		if (rc)
			return ::testing::AssertionFailure() << "case " << n << ": post " << rc;
		if (post_recv_one(p.b.get(), dst, 4096, md->lkey, 200 + n))
			return ::testing::AssertionFailure() << "case " << n << ": post_recv";
		ibv_wc wa = {}, wb = {};
		if (!poll_one(p.cqb.get(), &wb) || wb.status != IBV_WC_SUCCESS ||
		    wb.wr_id != uint64_t(200 + n))
			return ::testing::AssertionFailure() << "case " << n << ": receive "
							     << ibv_wc_status_str(wb.status);
		if (!poll_one(p.cqa.get(), &wa) || wa.status != IBV_WC_SUCCESS ||
		    wa.wr_id != uint64_t(100 + n))
			return ::testing::AssertionFailure() << "case " << n << ": send "
							     << ibv_wc_status_str(wa.status);
		if (memcmp(src, dst, 64) != 0)
			return ::testing::AssertionFailure() << "case " << n << ": bytes differ";
		return ::testing::AssertionSuccess();
	};
	auto none = [] {};
	// Warm the QP's caches (responder segment, source key) first.
	ASSERT_TRUE(message(0, none, none));
	auto rq_at = [&](uint64_t off) { return [&b, off] { b.rq_ring.off = off; }; };
	auto rq_back = [&] { b.rq_ring.off = rq_off; };
	int n = 1;
	// Far past the end (unmapped, or not even a canonical address), just
	// past it, straddling it, wrapping around (aligned, so only the bounds
	// check stands between it and a header 64 bytes before the mapping),
	// inside the header, and not aligned as a ring header (refused before
	// any read: UBSan reports a misaligned RingHeader otherwise).
	const uint64_t far = uint64_t(1) << 62, beyond = uint64_t(size) + (uint64_t(1) << 40);
	const uint64_t wraps = ~uint64_t(63);
	for (uint64_t off : {far, beyond, uint64_t(size), uint64_t(size - 8), uint64_t(size - 100),
			     ~uint64_t(0), ~uint64_t(0) - 100, wraps, uint64_t(8), rq_off + 8})
		EXPECT_TRUE(message(n++, rq_at(off), rq_back)) << "rq_ring.off " << off;
	// The damaged geometry: every cell past the mapping, whatever the position.
	struct Geometry { uint32_t capacity, cell_size; uint64_t deq; };
	for (Geometry g : {Geometry{0, 0xffffffff, 0xffffffff}, Geometry{0x80000000, 256, 0x7fffffff},
			   Geometry{1, 0xffffffff, ~uint64_t(0)}, Geometry{0, 0, 0}}) {
		const Geometry was = {fr->capacity, fr->cell_size, fr->deq.load()};
		auto damage = [&] {
			fr->capacity = g.capacity;
			fr->cell_size = g.cell_size;
			fr->deq.store(g.deq);
		};
		auto restore = [&] {
			fr->capacity = was.capacity;
			fr->cell_size = was.cell_size;
			fr->deq.store(was.deq);
		};
		EXPECT_TRUE(message(n++, damage, restore)) << "capacity " << g.capacity;
	}
	for (uint32_t cq : {0u, ovsoft::kMaxCqs + 1, ~0u})
		EXPECT_TRUE(message(n++, [&b, cq] { b.recv_cq = cq; }, [&] { b.recv_cq = recv_cq; }))
			<< "recv_cq " << cq;
	for (uint64_t off : {far, beyond, uint64_t(size), ~uint64_t(0), wraps, uint64_t(size - 64),
			     rq_off})
		EXPECT_TRUE(message(n++, [&bcq, off] { bcq.ring.off = off; },
				    [&] { bcq.ring.off = cq_off; }))
			<< "CQ ring.off " << off;
	munmap(seg, size);
	ms.reset();
	md.reset();
	free(src);
	free(dst);
}

} // namespace

#if defined(__SANITIZE_THREAD__)
// RegistrationLosesNoConcurrentWrite: the device copies the application's
// pages while other threads write them, as a DMA engine would; the copy is
// made safe by userfaultfd write protection (writers wait in their page
// fault), which ThreadSanitizer cannot see. That one copy is not a race.
extern "C" const char *__tsan_default_suppressions()
{
	return "race:replace_range\n";
}
#endif

// The child modes of this file; 127 for an unknown mode.
int hardening_child(const char *mode)
{
	if (!strcmp(mode, "many-devices"))
		return child_many_devices();
	if (!strcmp(mode, "dontfork"))
		return child_dontfork();
	if (!strcmp(mode, "churn-peer"))
		return child_churn_peer();
	if (!strcmp(mode, "churn-requester"))
		return child_churn_requester();
	if (!strcmp(mode, "interposed"))
		return child_interposed();
	if (!strcmp(mode, "log-file"))
		return child_log_file();
	if (!strcmp(mode, "open-soft3"))
		return child_open_soft3();
	if (!strcmp(mode, "fd-cycles"))
		return child_fd_cycles();
	return 127;
}
