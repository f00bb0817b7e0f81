// Acceptance of parent and thread domains (issue 6) on the software device,
// through our real libibverbs.so.1 and providers/soft (no doubles).
//
//  - Allocators: every call of the application's alloc/free callbacks is
//    logged (order, size, alignment, resource type, pd, pd_context) while
//    CQs, QPs and SRQs are created and destroyed under a parent domain;
//    IBV_ALLOCATOR_USE_DEFAULT; NULL giving ENOMEM without a leak;
//  - traffic between two processes whose queues came from a private mmap
//    arena (the peer is this binary started again with --peer: fork + exec);
//  - objects under a thread domain carry traffic;
//  - the EBUSY rules and bad input (ibv_alloc_parent_domain(3),
//    ibv_alloc_td(3)), each a documented errno.
//
// Needs RDMAV_SOFT_DEVICES=2 (ctest sets it; main() too).
#include "../soft/soft_fixture.h"
#include <infiniband/openverbs.h>
#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <map>
#include <mutex>
#include <poll.h>
#include <set>
#include <string>
#include <thread>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <vector>

#include "../xrc/peer_process.h"
// White-box: the layout of the device segment (damaged-locator test).
#include "../../providers/soft/shm.h"

#include <fcntl.h>
#include <linux/mempolicy.h>
#include <sys/stat.h>
#include <sys/syscall.h>

namespace {

std::string g_self;

// ------------------------------------------------------------------ a private arena

// A bump allocator over one private anonymous mapping (zeroed pages, kept out
// of fork children with MADV_DONTFORK). Freed blocks are remembered, not
// reused, so that a double free or a free of a foreign pointer is detected.
class Arena {
public:
	explicit Arena(size_t bytes) : size_(bytes)
	{
		void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);
		base_ = p == MAP_FAILED ? nullptr : static_cast<char *>(p);
		if (base_)
			madvise(base_, bytes, MADV_DONTFORK);
	}
	~Arena()
	{
		if (base_)
			munmap(base_, size_);
	}
	void *alloc(size_t size, size_t align)
	{
		if (!base_ || !align || (align & (align - 1)))
			return nullptr;
		size_t at = (used_ + align - 1) & ~(align - 1);
		if (at + size > size_)
			return nullptr;
		used_ = at + size;
		return base_ + at;
	}
	bool contains(const void *p) const
	{
		auto *c = static_cast<const char *>(p);
		return base_ && c >= base_ && c < base_ + size_;
	}
	size_t used() const { return used_; }

private:
	char *base_ = nullptr;
	size_t size_ = 0, used_ = 0;
};

// ------------------------------------------------------------------ the allocator log

struct Call {
	bool is_alloc;
	ibv_pd *pd;
	void *pd_context;
	size_t size;
	size_t alignment;
	uint64_t type;
	void *ptr; // returned (alloc) or passed (free)
};

// Dirty: arena memory filled with 0xa5 (the provider must zero it).
enum class Mode { Arena, UseDefault, Null, FailNth, Dirty };

struct Log {
	std::mutex mu;
	std::vector<Call> calls;
	Arena arena{64u << 20};
	Mode mode = Mode::Arena;
	int fail_at = -1; // FailNth: the index of the alloc call that returns NULL
	int allocs = 0;

	std::vector<Call> take()
	{
		std::lock_guard<std::mutex> g(mu);
		std::vector<Call> out;
		out.swap(calls);
		return out;
	}
};

void *log_alloc(ibv_pd *pd, void *pd_context, size_t size, size_t alignment, uint64_t type)
{
	auto *log = static_cast<Log *>(pd_context);
	std::lock_guard<std::mutex> g(log->mu);
	void *ret = nullptr;
	int index = log->allocs++;
	switch (log->mode) {
	case Mode::Arena:
		ret = log->arena.alloc(size, alignment);
		break;
	case Mode::UseDefault:
		ret = IBV_ALLOCATOR_USE_DEFAULT;
		break;
	case Mode::Null:
		ret = nullptr;
		break;
	case Mode::FailNth:
		ret = index == log->fail_at ? nullptr : log->arena.alloc(size, alignment);
		break;
	case Mode::Dirty:
		ret = log->arena.alloc(size, alignment);
		if (ret)
			memset(ret, 0xa5, size);
		break;
	}
	log->calls.push_back({true, pd, pd_context, size, alignment, type, ret});
	return ret;
}

void log_free(ibv_pd *pd, void *pd_context, void *ptr, uint64_t type)
{
	auto *log = static_cast<Log *>(pd_context);
	std::lock_guard<std::mutex> g(log->mu);
	log->calls.push_back({false, pd, pd_context, 0, 0, type, ptr});
}

std::string describe(const std::vector<Call> &calls)
{
	std::string s;
	char line[160];
	for (const Call &c : calls) {
		snprintf(line, sizeof(line), "  %s size=%zu align=%zu type=0x%llx ptr=%p\n",
			 c.is_alloc ? "alloc" : "free ", c.size, c.alignment,
			 (unsigned long long)c.type, c.ptr);
		s += line;
	}
	return s.empty() ? "  (no calls)\n" : s;
}

// Checks what every provider call must satisfy and returns the buffers
// handed out (ptr -> resource type).
void check_allocs(const std::vector<Call> &calls, ibv_pd *parent, Log *log,
		  std::map<void *, uint64_t> *live)
{
	for (const Call &c : calls) {
		EXPECT_EQ(c.pd, parent);
		EXPECT_EQ(c.pd_context, static_cast<void *>(log));
		EXPECT_EQ(c.type >> 32, uint64_t(OPENVERBS_DRIVER_SOFT))
			<< "resource_type must be (driver id << 32) | code";
		EXPECT_NE(c.type & 0xffffffffu, 0u) << "resource code 0";
		if (c.is_alloc) {
			EXPECT_GT(c.size, 0u);
			EXPECT_TRUE(c.alignment && !(c.alignment & (c.alignment - 1)))
				<< "alignment " << c.alignment;
			if (c.ptr && c.ptr != IBV_ALLOCATOR_USE_DEFAULT) {
				EXPECT_EQ(uintptr_t(c.ptr) % c.alignment, 0u);
				(*live)[c.ptr] = c.type;
			}
		} else {
			auto it = live->find(c.ptr);
			if (it == live->end()) {
				ADD_FAILURE() << "free of a pointer alloc never returned: " << c.ptr;
				continue;
			}
			EXPECT_EQ(it->second, c.type) << "free with another resource type";
			live->erase(it);
		}
	}
}

std::set<uint64_t> types_of(const std::vector<Call> &calls)
{
	std::set<uint64_t> t;
	for (const Call &c : calls)
		if (c.is_alloc)
			t.insert(c.type);
	return t;
}

// ------------------------------------------------------------------ device helpers

using ov_test::open_soft;
using ov_test::poll_one;

ibv_cq *create_cq(ibv_context *ctx, ibv_pd *parent, int cqe = 64)
{
	ibv_cq_init_attr_ex a = {};
	a.cqe = uint32_t(cqe);
	a.wc_flags = IBV_WC_STANDARD_FLAGS;
	if (parent) {
		a.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
		a.parent_domain = parent;
	}
	ibv_cq_ex *cq = ibv_create_cq_ex(ctx, &a);
	return cq ? ibv_cq_ex_to_cq(cq) : nullptr;
}

ibv_qp *create_rc(ibv_pd *pd, ibv_cq *cq, ibv_srq *srq = nullptr)
{
	ibv_qp_init_attr a = {};
	a.send_cq = a.recv_cq = cq;
	a.srq = srq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = 32;
	a.cap.max_recv_wr = srq ? 0 : 32;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	return ibv_create_qp(pd, &a);
}

ibv_srq *create_srq(ibv_pd *pd)
{
	ibv_srq_init_attr a = {};
	a.attr.max_wr = 32;
	a.attr.max_sge = 1;
	return ibv_create_srq(pd, &a);
}

// Brings an RC QP to `last` (INIT, RTR or RTS) towards dest with the given
// retry settings (timeout is the IB exponent, 0 = none).
int connect_rc_to(ibv_qp *qp, uint32_t dest, ibv_qp_state last, uint8_t rnr_retry,
		  uint8_t timeout = 10, uint8_t retry_cnt = 7)
{
	ibv_qp_attr a = {};
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	int ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						IBV_QP_ACCESS_FLAGS);
	if (ret || last == IBV_QPS_INIT)
		return ret;
	a = {};
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.ah_attr.dlid = 1;
	a.ah_attr.port_num = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
					    IBV_QP_MIN_RNR_TIMER);
	if (ret || last == IBV_QPS_RTR)
		return ret;
	a = {};
	a.qp_state = IBV_QPS_RTS;
	a.timeout = timeout;
	a.retry_cnt = retry_cnt;
	a.rnr_retry = rnr_retry;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
					     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					     IBV_QP_MAX_QP_RD_ATOMIC);
}

int connect_rc(ibv_qp *qp, uint32_t dest)
{
	return connect_rc_to(qp, dest, IBV_QPS_RTS, 7);
}

int post_recv(ibv_qp *qp, ibv_srq *srq, ibv_mr *mr, void *buf, uint32_t len, uint64_t id)
{
	ibv_sge s = {uintptr_t(buf), len, mr->lkey};
	ibv_recv_wr wr = {}, *bad;
	wr.wr_id = id;
	wr.sg_list = &s;
	wr.num_sge = 1;
	return srq ? ibv_post_srq_recv(srq, &wr, &bad) : ibv_post_recv(qp, &wr, &bad);
}

int post_send(ibv_qp *qp, ibv_mr *mr, const void *buf, uint32_t len, uint64_t id)
{
	ibv_sge s = {uintptr_t(buf), len, mr->lkey};
	ibv_send_wr wr = {}, *bad;
	wr.wr_id = id;
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	return ibv_post_send(qp, &wr, &bad);
}

// One context, a PD and a parent domain whose allocators write to a log.
class Domains : public ::testing::Test {
protected:
	void SetUp() override
	{
		ctx = open_soft(0);
		ASSERT_NE(ctx, nullptr);
		pd = ibv_alloc_pd(ctx);
		ASSERT_NE(pd, nullptr);
	}
	void TearDown() override
	{
		if (parent) {
			EXPECT_EQ(ibv_dealloc_pd(parent), 0);
		}
		if (td) {
			EXPECT_EQ(ibv_dealloc_td(td), 0);
		}
		if (pd) {
			EXPECT_EQ(ibv_dealloc_pd(pd), 0);
		}
		if (ctx) {
			EXPECT_EQ(ibv_close_device(ctx), 0);
		}
	}
	ibv_pd *make_parent(bool allocators, ibv_td *with_td = nullptr)
	{
		ibv_parent_domain_init_attr a = {};
		a.pd = pd;
		a.td = with_td;
		a.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
		a.pd_context = &log;
		if (allocators) {
			a.comp_mask |= IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
			a.alloc = log_alloc;
			a.free = log_free;
		}
		return ibv_alloc_parent_domain(ctx, &a);
	}

	// A thread domain and a parent domain over it, without allocators
	// (`td`, `parent`; TearDown frees them).
	void make_td_parent()
	{
		ibv_td_init_attr ta = {};
		td = ibv_alloc_td(ctx, &ta);
		ASSERT_NE(td, nullptr) << strerror(errno);
		EXPECT_EQ(td->context, ctx);
		parent = make_parent(false, td);
		ASSERT_NE(parent, nullptr) << strerror(errno);
	}

	ibv_context *ctx = nullptr;
	ibv_pd *pd = nullptr, *parent = nullptr;
	ibv_td *td = nullptr;
	Log log;
};

// ------------------------------------------------------------------ allocator log

TEST_F(Domains, AllocatorCallsForCqQpSrqCreateAndDestroy)
{
	parent = make_parent(true);
	ASSERT_NE(parent, nullptr);
	EXPECT_EQ(parent->context, ctx);
	std::map<void *, uint64_t> live;

	ibv_cq *cq = create_cq(ctx, parent);
	ASSERT_NE(cq, nullptr) << strerror(errno);
	auto cq_calls = log.take();
	SCOPED_TRACE("CQ create:\n" + describe(cq_calls));
	EXPECT_FALSE(cq_calls.empty()) << "no allocator call for the CQ's queue";
	check_allocs(cq_calls, parent, &log, &live);
	size_t cq_live = live.size();

	ibv_srq *srq = create_srq(parent);
	ASSERT_NE(srq, nullptr) << strerror(errno);
	auto srq_calls = log.take();
	SCOPED_TRACE("SRQ create:\n" + describe(srq_calls));
	EXPECT_FALSE(srq_calls.empty()) << "no allocator call for the SRQ's queue";
	check_allocs(srq_calls, parent, &log, &live);

	ibv_qp *qp = create_rc(parent, cq);
	ASSERT_NE(qp, nullptr) << strerror(errno);
	auto qp_calls = log.take();
	SCOPED_TRACE("QP create:\n" + describe(qp_calls));
	EXPECT_FALSE(qp_calls.empty()) << "no allocator call for the QP's queues";
	check_allocs(qp_calls, parent, &log, &live);

	// Each kind of queue has its own resource code.
	for (uint64_t t : types_of(cq_calls)) {
		EXPECT_EQ(types_of(srq_calls).count(t), 0u) << "CQ and SRQ share type " << t;
		EXPECT_EQ(types_of(qp_calls).count(t), 0u) << "CQ and QP share type " << t;
	}
	for (uint64_t t : types_of(srq_calls))
		EXPECT_EQ(types_of(qp_calls).count(t), 0u) << "SRQ and QP share type " << t;

	// Destroy in reverse order: each destroy frees exactly its own buffers.
	size_t before = live.size();
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	auto qp_frees = log.take();
	SCOPED_TRACE("QP destroy:\n" + describe(qp_frees));
	check_allocs(qp_frees, parent, &log, &live);
	for (const Call &c : qp_frees)
		EXPECT_FALSE(c.is_alloc) << "allocation during destroy";
	size_t qp_allocs = 0;
	for (const Call &c : qp_calls)
		qp_allocs += c.is_alloc && c.ptr && c.ptr != IBV_ALLOCATOR_USE_DEFAULT;
	EXPECT_EQ(before - live.size(), qp_allocs);

	ASSERT_EQ(ibv_destroy_srq(srq), 0);
	check_allocs(log.take(), parent, &log, &live);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	check_allocs(log.take(), parent, &log, &live);
	EXPECT_TRUE(live.empty()) << live.size() << " buffers never freed";
	(void)cq_live;
}

TEST_F(Domains, UseDefaultFallsBackToTheProvider)
{
	log.mode = Mode::UseDefault;
	parent = make_parent(true);
	ASSERT_NE(parent, nullptr);
	ibv_cq *cq = create_cq(ctx, parent);
	ASSERT_NE(cq, nullptr);
	ibv_srq *srq = create_srq(parent);
	ASSERT_NE(srq, nullptr);
	ibv_qp *a = create_rc(parent, cq), *b = create_rc(parent, cq, srq);
	ASSERT_TRUE(a && b);
	auto calls = log.take();
	SCOPED_TRACE(describe(calls));
	EXPECT_FALSE(calls.empty()) << "the provider never asked the allocator";
	for (const Call &c : calls)
		EXPECT_TRUE(c.is_alloc);
	// Traffic over the provider's own buffers.
	static char buf[2][64];
	ibv_mr *mr = ibv_reg_mr(parent, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(mr, nullptr);
	ASSERT_EQ(connect_rc(a, b->qp_num), 0);
	ASSERT_EQ(connect_rc(b, a->qp_num), 0);
	ASSERT_EQ(post_recv(b, srq, mr, buf[1], 64, 7), 0);
	strcpy(buf[0], "default");
	ASSERT_EQ(post_send(a, mr, buf[0], 8, 1), 0);
	ibv_wc wc[2];
	ASSERT_TRUE(poll_one(cq, &wc[0]));
	ASSERT_TRUE(poll_one(cq, &wc[1]));
	EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
	EXPECT_EQ(wc[1].status, IBV_WC_SUCCESS);
	EXPECT_STREQ(buf[1], "default");
	EXPECT_EQ(ibv_destroy_qp(a), 0);
	EXPECT_EQ(ibv_destroy_qp(b), 0);
	EXPECT_EQ(ibv_destroy_srq(srq), 0);
	EXPECT_EQ(ibv_destroy_cq(cq), 0);
	EXPECT_EQ(ibv_dereg_mr(mr), 0);
	// USE_DEFAULT buffers belong to the provider: never handed to free.
	for (const Call &c : log.take())
		EXPECT_TRUE(c.is_alloc) << "free called for a USE_DEFAULT buffer";
}

TEST_F(Domains, NullAllocationIsEnomemWithoutLeak)
{
	log.mode = Mode::Null;
	parent = make_parent(true);
	ASSERT_NE(parent, nullptr);
	errno = 0;
	ibv_cq *cq = create_cq(ctx, parent);
	EXPECT_EQ(cq, nullptr);
	EXPECT_EQ(errno, ENOMEM);
	if (cq) {
		EXPECT_EQ(ibv_destroy_cq(cq), 0);
	}
	errno = 0;
	ibv_srq *srq = create_srq(parent);
	EXPECT_EQ(srq, nullptr);
	EXPECT_EQ(errno, ENOMEM);
	if (srq) {
		EXPECT_EQ(ibv_destroy_srq(srq), 0);
	}
	ibv_cq *plain = create_cq(ctx, nullptr);
	ASSERT_NE(plain, nullptr);
	errno = 0;
	ibv_qp *qp = create_rc(parent, plain);
	EXPECT_EQ(qp, nullptr);
	EXPECT_EQ(errno, ENOMEM);
	if (qp) {
		EXPECT_EQ(ibv_destroy_qp(qp), 0);
	}
	auto calls = log.take();
	SCOPED_TRACE(describe(calls));
	EXPECT_FALSE(calls.empty());
	for (const Call &c : calls)
		EXPECT_TRUE(c.is_alloc) << "free of a NULL allocation";

	// The second buffer of a QP fails: the first one is given back.
	log.mode = Mode::FailNth;
	log.allocs = 0;
	log.fail_at = 1;
	errno = 0;
	qp = create_rc(parent, plain);
	calls = log.take();
	SCOPED_TRACE("QP with its second allocation failing:\n" + describe(calls));
	if (qp) {
		// A provider with a single buffer per QP may succeed here.
		EXPECT_EQ(ibv_destroy_qp(qp), 0);
		calls = log.take();
	} else {
		EXPECT_EQ(errno, ENOMEM);
	}
	std::map<void *, uint64_t> live;
	std::vector<Call> all = calls;
	for (const Call &c : log.take())
		all.push_back(c);
	check_allocs(all, parent, &log, &live);
	EXPECT_TRUE(live.empty()) << live.size() << " buffers leaked by the failed create";
	EXPECT_EQ(ibv_destroy_cq(plain), 0);
}

TEST_F(Domains, ThreadDomainObjectsCarryTraffic)
{
	ASSERT_NO_FATAL_FAILURE(make_td_parent());
	ibv_cq *cq = create_cq(ctx, parent);
	ASSERT_NE(cq, nullptr);
	ibv_srq *srq = create_srq(parent);
	ASSERT_NE(srq, nullptr);
	ibv_qp *a = create_rc(parent, cq), *b = create_rc(parent, cq), *c = create_rc(parent, cq, srq);
	ASSERT_TRUE(a && b && c);
	static char buf[4][256];
	ibv_mr *mr = ibv_reg_mr(parent, buf, sizeof(buf),
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ASSERT_NE(mr, nullptr);
	EXPECT_EQ(mr->pd, parent);
	ASSERT_EQ(connect_rc(a, b->qp_num), 0);
	ASSERT_EQ(connect_rc(b, a->qp_num), 0);
	ibv_wc wc;
	for (int i = 0; i < 100; i++) {
		ASSERT_EQ(post_recv(b, nullptr, mr, buf[1], 256, 1000 + i), 0);
		snprintf(buf[0], 256, "td message %d", i);
		ASSERT_EQ(post_send(a, mr, buf[0], 256, i), 0);
		bool sent = false, recvd = false;
		for (int k = 0; k < 2; k++) {
			ASSERT_TRUE(poll_one(cq, &wc));
			ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
			sent |= wc.wr_id == uint64_t(i);
			recvd |= wc.wr_id == uint64_t(1000 + i);
		}
		ASSERT_TRUE(sent && recvd);
		ASSERT_STREQ(buf[1], buf[0]);
	}
	// RDMA write under the thread domain.
	ibv_sge s = {uintptr_t(buf[2]), 16, mr->lkey};
	strcpy(buf[2], "rdma write td");
	ibv_send_wr wr = {}, *bad;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = uintptr_t(buf[3]);
	wr.wr.rdma.rkey = mr->rkey;
	ASSERT_EQ(ibv_post_send(a, &wr, &bad), 0);
	ASSERT_TRUE(poll_one(cq, &wc));
	EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
	EXPECT_STREQ(buf[3], "rdma write td");

	// EBUSY rules while objects and the parent domain live.
	EXPECT_EQ(ibv_dealloc_td(td), EBUSY);
	EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);
	int busy = ibv_dealloc_pd(parent);
	EXPECT_EQ(busy, EBUSY) << "a parent domain with live QPs/CQs/SRQs/MRs was freed";
	if (!busy)
		parent = nullptr; // gone: the order checks below are moot
	EXPECT_EQ(ibv_dereg_mr(mr), 0);
	EXPECT_EQ(ibv_destroy_qp(a), 0);
	EXPECT_EQ(ibv_destroy_qp(b), 0);
	EXPECT_EQ(ibv_destroy_qp(c), 0);
	EXPECT_EQ(ibv_destroy_srq(srq), 0);
	EXPECT_EQ(ibv_destroy_cq(cq), 0);
	if (parent) {
		EXPECT_EQ(ibv_dealloc_td(td), EBUSY);
		EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);
		EXPECT_EQ(ibv_dealloc_pd(parent), 0);
		parent = nullptr;
	}
	EXPECT_EQ(ibv_dealloc_td(td), 0);
	td = nullptr;
}

// ------------------------------------------------------------------ two processes

// The peer (this binary with --peer): a parent domain with an arena
// allocator, an RC QP; prints "qpn", reads the test's QPN, echoes back every
// message it receives (count given on its command line), then prints the
// number of allocator calls and whether the buffers were all in the arena.
int peer_main(int rounds)
{
	setvbuf(stdout, nullptr, _IOLBF, 0);
	ibv_context *ctx = open_soft(0);
	if (!ctx)
		return 2;
	static Log log;
	ibv_pd *pd = ibv_alloc_pd(ctx);
	ibv_parent_domain_init_attr a = {};
	a.pd = pd;
	a.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT | IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
	a.pd_context = &log;
	a.alloc = log_alloc;
	a.free = log_free;
	ibv_pd *parent = pd ? ibv_alloc_parent_domain(ctx, &a) : nullptr;
	ibv_cq *cq = parent ? create_cq(ctx, parent) : nullptr;
	ibv_qp *qp = cq ? create_rc(parent, cq) : nullptr;
	static char buf[2][256];
	ibv_mr *mr = parent ? ibv_reg_mr(parent, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : nullptr;
	if (!qp || !mr) {
		printf("fail %d\n", errno);
		return 3;
	}
	printf("hello %u\n", qp->qp_num);
	unsigned dest = 0;
	if (scanf("%u", &dest) != 1 || connect_rc(qp, dest))
		return 4;
	if (post_recv(qp, nullptr, mr, buf[1], 256, 1))
		return 4;
	printf("ready\n");
	for (int i = 0; i < rounds; i++) {
		ibv_wc wc;
		do {
			if (!poll_one(cq, &wc, 20000))
				return 5;
		} while (wc.wr_id != 1);
		if (wc.status != IBV_WC_SUCCESS)
			return 6;
		memcpy(buf[0], buf[1], 256);
		buf[0][0] = 'R'; // mark the echo
		if (i + 1 < rounds && post_recv(qp, nullptr, mr, buf[1], 256, 1))
			return 8;
		if (post_send(qp, mr, buf[0], 256, 2))
			return 7;
	}
	// Drain the last send completions.
	usleep(100 * 1000);
	ibv_wc wc;
	while (ibv_poll_cq(cq, 1, &wc) > 0) {
	}
	auto calls = log.take();
	int allocs = 0, outside = 0;
	for (const Call &c : calls)
		if (c.is_alloc) {
			allocs++;
			outside += !log.arena.contains(c.ptr);
		}
	printf("allocs %d outside %d\n", allocs, outside);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(parent);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}

TEST_F(Domains, TrafficBetweenTwoProcessesOverArenaBuffers)
{
	const int rounds = 50;
	parent = make_parent(true);
	ASSERT_NE(parent, nullptr);
	ibv_pd *use = parent;
	ibv_cq *cq = create_cq(ctx, parent);
	ASSERT_NE(cq, nullptr);
	ibv_qp *qp = create_rc(use, cq);
	ASSERT_NE(qp, nullptr);
	static char buf[2][256];
	ibv_mr *mr = ibv_reg_mr(use, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(mr, nullptr);
	xrcpd::PeerProcess peer;
	std::string hello = peer.start({g_self, "--peer", std::to_string(rounds)});
	unsigned peer_qpn = 0;
	ASSERT_EQ(sscanf(hello.c_str(), "hello %u", &peer_qpn), 1) << hello;
	ASSERT_EQ(connect_rc(qp, peer_qpn), 0);
	ASSERT_EQ(peer.cmd("%u", qp->qp_num), "ready");
	for (int i = 0; i < rounds; i++) {
		ASSERT_EQ(post_recv(qp, nullptr, mr, buf[1], 256, 1000 + i), 0);
		snprintf(buf[0], 256, "ping %d through the arena", i);
		ASSERT_EQ(post_send(qp, mr, buf[0], 256, i), 0);
		ibv_wc wc;
		bool got = false;
		for (int k = 0; k < 2; k++) {
			ASSERT_TRUE(poll_one(cq, &wc, 20000)) << "round " << i << " completion " << k;
			ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
			got |= wc.wr_id == uint64_t(1000 + i);
		}
		ASSERT_TRUE(got);
		buf[0][0] = 'R';
		ASSERT_STREQ(buf[1], buf[0]);
	}
	std::string stats;
	// The peer prints its allocator statistics after the last echo.
	char line[128] = {};
	stats = peer.cmd("done");
	int allocs = -1, outside = -1;
	EXPECT_EQ(sscanf(stats.c_str(), "allocs %d outside %d", &allocs, &outside), 2) << stats;
	EXPECT_GT(allocs, 0) << "the peer's queues did not come from its allocator";
	EXPECT_EQ(outside, 0);
	(void)line;
	auto calls = log.take();
	SCOPED_TRACE(describe(calls));
	int mine = 0;
	for (const Call &c : calls)
		if (c.is_alloc) {
			mine++;
			EXPECT_TRUE(log.arena.contains(c.ptr));
		}
	EXPECT_GT(mine, 0) << "our queues did not come from the allocator";
	EXPECT_EQ(peer.stop(), 0);
	EXPECT_EQ(ibv_destroy_qp(qp), 0);
	EXPECT_EQ(ibv_destroy_cq(cq), 0);
	EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

// ------------------------------------------------------------------ the pages of the buffers

// The /proc/self/maps line of the mapping holding `p` ("" when unmapped).
std::string maps_line(const void *p)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return "";
	char line[512];
	std::string found;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && uintptr_t(p) >= lo && uintptr_t(p) < hi) {
			found = line;
			break;
		}
	}
	fclose(f);
	return found;
}

bool all_zero(const void *p, size_t n)
{
	auto *c = static_cast<const unsigned char *>(p);
	for (size_t i = 0; i < n; i++)
		if (c[i])
			return false;
	return true;
}

bool is_ring(uint64_t type)
{
	uint32_t code = uint32_t(type);
	return code == OPENVERBS_SOFT_RES_CQ_RING || code == OPENVERBS_SOFT_RES_QP_RQ_RING ||
	       code == OPENVERBS_SOFT_RES_SRQ_RING;
}

// The documented resource codes, the page-granular rings (shared pages while
// the queue lives) and the private pages given back to free.
TEST_F(Domains, RingsAreSharedPagesForTheLifeOfTheQueue)
{
	parent = make_parent(true);
	ASSERT_NE(parent, nullptr);
	const size_t page = size_t(sysconf(_SC_PAGESIZE));
	ibv_cq *cq = create_cq(ctx, parent);
	ASSERT_NE(cq, nullptr);
	ibv_srq *srq = create_srq(parent);
	ASSERT_NE(srq, nullptr);
	ibv_qp *qp = create_rc(parent, cq);
	ASSERT_NE(qp, nullptr);
	auto calls = log.take();
	SCOPED_TRACE(describe(calls));
	std::map<uint32_t, Call> by_code;
	for (const Call &c : calls)
		if (c.is_alloc)
			by_code[uint32_t(c.type)] = c;
	ASSERT_EQ(by_code.size(), 4u) << "CQ ring, SRQ ring, QP send queue, QP receive ring";
	EXPECT_EQ(calls.size(), 4u);
	for (uint32_t code : {OPENVERBS_SOFT_RES_CQ_RING, OPENVERBS_SOFT_RES_SRQ_RING,
			      OPENVERBS_SOFT_RES_QP_SQ, OPENVERBS_SOFT_RES_QP_RQ_RING}) {
		ASSERT_EQ(by_code.count(code), 1u) << "code " << code;
		const Call &c = by_code[code];
		EXPECT_EQ(c.type, OPENVERBS_SOFT_RESOURCE_TYPE(code));
		std::string m = maps_line(c.ptr);
		if (is_ring(c.type)) {
			EXPECT_EQ(c.alignment, page);
			EXPECT_EQ(c.size % page, 0u);
			EXPECT_NE(m.find("memfd:openverbs-soft-ring"), std::string::npos) << m;
		} else {
			EXPECT_EQ(c.alignment, 64u);
			EXPECT_GE(c.size, 32u * 512u) << "32 send work requests";
			EXPECT_EQ(m.find("memfd:"), std::string::npos) << m;
		}
	}
	// The order for a QP: send queue first, then the receive ring.
	std::vector<uint32_t> order;
	for (const Call &c : calls)
		order.push_back(uint32_t(c.type));
	EXPECT_EQ(order, (std::vector<uint32_t>{OPENVERBS_SOFT_RES_CQ_RING,
						OPENVERBS_SOFT_RES_SRQ_RING,
						OPENVERBS_SOFT_RES_QP_SQ,
						OPENVERBS_SOFT_RES_QP_RQ_RING}));
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	// Given back as private zero-filled pages, out of reach of fork children.
	for (const Call &c : log.take()) {
		ASSERT_FALSE(c.is_alloc);
		if (!is_ring(c.type))
			continue;
		std::string m = maps_line(c.ptr);
		EXPECT_EQ(m.find("memfd:"), std::string::npos) << m;
		EXPECT_NE(m.find("rw-p"), std::string::npos) << m;
		EXPECT_TRUE(all_zero(c.ptr, by_code[uint32_t(c.type)].size));
	}
}

// Dirty memory from the allocator: every buffer is zeroed before use, so
// traffic works (send queue, receive rings, CQ ring all from the arena).
TEST_F(Domains, DirtyAllocatorMemoryIsZeroedBeforeUse)
{
	log.mode = Mode::Dirty;
	parent = make_parent(true);
	ASSERT_NE(parent, nullptr);
	ibv_cq *cq = create_cq(ctx, parent);
	ASSERT_NE(cq, nullptr);
	ibv_srq *srq = create_srq(parent);
	ASSERT_NE(srq, nullptr);
	ibv_qp *a = create_rc(parent, cq), *b = create_rc(parent, cq, srq);
	ASSERT_TRUE(a && b);
	static char buf[2][64];
	ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(mr, nullptr);
	ASSERT_EQ(connect_rc(a, b->qp_num), 0);
	ASSERT_EQ(connect_rc(b, a->qp_num), 0);
	ibv_wc wc;
	EXPECT_EQ(ibv_poll_cq(cq, 1, &wc), 0) << "a completion out of dirty memory";
	for (int i = 0; i < 40; i++) { // more than the queues hold: the rings wrap
		ASSERT_EQ(post_recv(b, srq, mr, buf[1], 64, 100 + i), 0);
		snprintf(buf[0], 64, "dirty %d", i);
		ASSERT_EQ(post_send(a, mr, buf[0], 64, i), 0);
		for (int k = 0; k < 2; k++) {
			ASSERT_TRUE(poll_one(cq, &wc)) << i;
			ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
		}
		ASSERT_STREQ(buf[1], buf[0]);
	}
	EXPECT_EQ(ibv_destroy_qp(a), 0);
	EXPECT_EQ(ibv_destroy_qp(b), 0);
	EXPECT_EQ(ibv_destroy_srq(srq), 0);
	EXPECT_EQ(ibv_destroy_cq(cq), 0);
	EXPECT_EQ(ibv_dereg_mr(mr), 0);
	std::map<void *, uint64_t> live;
	check_allocs(log.take(), parent, &log, &live);
}

// ibv_resize_cq asks the allocator for the new ring, keeps the completions
// and frees the old ring.
TEST_F(Domains, ResizeCqTakesTheNewRingFromTheAllocator)
{
	parent = make_parent(true);
	ASSERT_NE(parent, nullptr);
	ibv_cq *cq = create_cq(ctx, parent, 4);
	ASSERT_NE(cq, nullptr);
	ibv_qp *a = create_rc(pd, cq), *b = create_rc(pd, cq);
	ASSERT_TRUE(a && b);
	static char buf[2][64];
	ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(mr, nullptr);
	ASSERT_EQ(connect_rc(a, b->qp_num), 0);
	ASSERT_EQ(connect_rc(b, a->qp_num), 0);
	ASSERT_EQ(post_recv(b, nullptr, mr, buf[1], 64, 7), 0);
	ASSERT_EQ(post_send(a, mr, buf[0], 8, 1), 0);
	usleep(20000); // both completions wait in the old ring
	auto created = log.take();
	ASSERT_EQ(created.size(), 1u) << describe(created);
	ASSERT_EQ(ibv_resize_cq(cq, 1000), 0);
	EXPECT_GE(cq->cqe, 1000);
	auto calls = log.take();
	SCOPED_TRACE(describe(calls));
	ASSERT_EQ(calls.size(), 2u);
	EXPECT_TRUE(calls[0].is_alloc);
	EXPECT_EQ(calls[0].type, OPENVERBS_SOFT_RESOURCE_TYPE(OPENVERBS_SOFT_RES_CQ_RING));
	EXPECT_GE(calls[0].size, 1000 * sizeof(ibv_wc));
	EXPECT_FALSE(calls[1].is_alloc);
	EXPECT_EQ(calls[1].ptr, created[0].ptr) << "the old ring is freed";
	EXPECT_EQ(calls[1].type, created[0].type);
	ibv_wc wc[2];
	ASSERT_TRUE(poll_one(cq, &wc[0]));
	ASSERT_TRUE(poll_one(cq, &wc[1]));
	EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
	EXPECT_EQ(wc[1].status, IBV_WC_SUCCESS);
	EXPECT_EQ(ibv_destroy_qp(a), 0);
	EXPECT_EQ(ibv_destroy_qp(b), 0);
	EXPECT_EQ(ibv_destroy_cq(cq), 0);
	EXPECT_EQ(ibv_dereg_mr(mr), 0);
	auto frees = log.take();
	ASSERT_EQ(frees.size(), 1u);
	EXPECT_EQ(frees[0].ptr, calls[0].ptr);
}

// The NUMA policy the application gave the range stays on the shared pages
// and on the pages given back.
TEST_F(Domains, NumaPolicyOfTheRangeIsKept)
{
	parent = make_parent(true);
	ASSERT_NE(parent, nullptr);
	const size_t page = size_t(sysconf(_SC_PAGESIZE));
	// The next arena allocation starts here: prefer node 0 for the range.
	char *next = static_cast<char *>(log.arena.alloc(page, page));
	ASSERT_NE(next, nullptr);
	unsigned long node0 = 1;
	ASSERT_EQ(syscall(SYS_mbind, next, 16 * page, MPOL_PREFERRED, &node0, 64, 0), 0)
		<< strerror(errno);
	ibv_cq *cq = create_cq(ctx, parent);
	ASSERT_NE(cq, nullptr);
	auto calls = log.take();
	ASSERT_EQ(calls.size(), 1u);
	void *ring = calls[0].ptr;
	EXPECT_GE(static_cast<char *>(ring), next);
	EXPECT_LE(static_cast<char *>(ring) + calls[0].size, next + 16 * page);
	auto policy = [](void *p) {
		int mode = -1;
		unsigned long mask[16] = {};
		if (syscall(SYS_get_mempolicy, &mode, mask, 1024, p, MPOL_F_ADDR) != 0)
			return -1;
		return mode;
	};
	EXPECT_EQ(policy(ring), MPOL_PREFERRED) << maps_line(ring);
	EXPECT_EQ(ibv_destroy_cq(cq), 0);
	EXPECT_EQ(policy(ring), MPOL_PREFERRED);
	log.take();
}

// Work requests of ibv_wr_start .. ibv_wr_complete are staged in a buffer
// from the allocator too.
TEST_F(Domains, WrStagingAreaFromTheAllocator)
{
	parent = make_parent(true);
	ASSERT_NE(parent, nullptr);
	ibv_cq *cq = create_cq(ctx, parent);
	ASSERT_NE(cq, nullptr);
	ibv_qp_init_attr_ex ax = {};
	ax.send_cq = ax.recv_cq = cq;
	ax.qp_type = IBV_QPT_RC;
	ax.cap.max_send_wr = ax.cap.max_recv_wr = 8;
	ax.cap.max_send_sge = ax.cap.max_recv_sge = 1;
	ax.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ax.pd = parent;
	ax.send_ops_flags = IBV_QP_EX_WITH_SEND;
	ibv_qp *a = ibv_create_qp_ex(ctx, &ax);
	ASSERT_NE(a, nullptr) << strerror(errno);
	auto calls = log.take();
	SCOPED_TRACE(describe(calls));
	std::set<uint64_t> types = types_of(calls);
	EXPECT_EQ(types.count(OPENVERBS_SOFT_RESOURCE_TYPE(OPENVERBS_SOFT_RES_QP_WR_STAGING)), 1u);
	std::map<void *, uint64_t> live;
	check_allocs(calls, parent, &log, &live);
	ibv_qp *b = create_rc(pd, cq);
	ASSERT_NE(b, nullptr);
	static char buf[2][64];
	ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(mr, nullptr);
	ASSERT_EQ(connect_rc(a, b->qp_num), 0);
	ASSERT_EQ(connect_rc(b, a->qp_num), 0);
	ASSERT_EQ(post_recv(b, nullptr, mr, buf[1], 64, 9), 0);
	strcpy(buf[0], "staged");
	ibv_qp_ex *x = ibv_qp_to_qp_ex(a);
	ASSERT_NE(x, nullptr);
	ibv_wr_start(x);
	x->wr_id = 5;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, mr->lkey, uintptr_t(buf[0]), 7);
	ASSERT_EQ(ibv_wr_complete(x), 0);
	ibv_wc wc;
	for (int k = 0; k < 2; k++) {
		ASSERT_TRUE(poll_one(cq, &wc));
		EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
	}
	EXPECT_STREQ(buf[1], "staged");
	EXPECT_EQ(ibv_destroy_qp(a), 0);
	EXPECT_EQ(ibv_destroy_qp(b), 0);
	EXPECT_EQ(ibv_destroy_cq(cq), 0);
	EXPECT_EQ(ibv_dereg_mr(mr), 0);
	check_allocs(log.take(), parent, &log, &live);
	EXPECT_TRUE(live.empty());
}

// The ring locator in the shared segment is data: a damaged one (wrong
// kind, pid, fd, inode or offset) makes the ring unreachable for the
// requester, never a crash, and the device works again once it is right.
TEST_F(Domains, DamagedRingLocatorIsRefused)
{
	parent = make_parent(true);
	ASSERT_NE(parent, nullptr);
	ibv_cq *rcq = create_cq(ctx, parent); // ring in memfd pages
	ibv_cq *scq = create_cq(ctx, nullptr);
	ASSERT_TRUE(rcq && scq);
	ibv_qp_init_attr qa = {};
	qa.send_cq = scq;
	qa.recv_cq = rcq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 16;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	ibv_qp *a = ibv_create_qp(pd, &qa), *b = ibv_create_qp(pd, &qa);
	ASSERT_TRUE(a && b);
	static char buf[2][64];
	ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(mr, nullptr);
	ASSERT_EQ(connect_rc(a, b->qp_num), 0);
	ASSERT_EQ(connect_rc(b, a->qp_num), 0);

	std::string path = "/dev/shm/openverbs-" + std::to_string(geteuid()) + "/soft0";
	int fd = open(path.c_str(), O_RDWR);
	ASSERT_GE(fd, 0);
	struct stat st;
	ASSERT_EQ(fstat(fd, &st), 0);
	void *m = mmap(nullptr, sizeof(ovsoft::SegmentHeader), PROT_READ | PROT_WRITE, MAP_SHARED,
		       fd, 0);
	close(fd);
	ASSERT_NE(m, MAP_FAILED);
	auto *h = static_cast<ovsoft::SegmentHeader *>(m);
	ovsoft::RingLoc &loc = h->cqs[rcq->handle].ring;
	ASSERT_EQ(loc.kind, uint32_t(ovsoft::RING_MEMFD));
	const ovsoft::RingLoc good = loc;
	auto damage = [&](const char *what, void (*f)(ovsoft::RingLoc &)) {
		SCOPED_TRACE(what);
		ovsoft::RingLoc bad = good;
		f(bad);
		loc = bad;
		ASSERT_EQ(post_recv(b, nullptr, mr, buf[1], 64, 1), 0);
		ASSERT_EQ(post_send(a, mr, buf[0], 8, 2), 0);
		ibv_wc wc;
		ASSERT_TRUE(poll_one(scq, &wc)) << "the requester is stuck";
		ibv_wc none;
		EXPECT_EQ(ibv_poll_cq(rcq, 1, &none), 0) << "completion through a damaged locator";
		loc = good;
	};
	damage("kind", [](ovsoft::RingLoc &l) { l.kind = 7; });
	damage("arena kind, no offset", [](ovsoft::RingLoc &l) { l.kind = ovsoft::RING_ARENA; });
	damage("arena kind, offset past the end", [](ovsoft::RingLoc &l) {
		l.kind = ovsoft::RING_ARENA;
		l.off = ~0ull - 100;
	});
	damage("pid", [](ovsoft::RingLoc &l) { l.pid = 1; });
	damage("negative fd", [](ovsoft::RingLoc &l) { l.memfd = -3; });
	damage("another fd", [](ovsoft::RingLoc &l) { l.memfd = 0; });
	damage("inode", [](ovsoft::RingLoc &l) { l.memfd_ino ^= 0x5a5a; });
	damage("offset past the file", [](ovsoft::RingLoc &l) { l.memfd_off = 1ull << 40; });
	damage("offset near the end", [](ovsoft::RingLoc &l) { l.memfd_off = l.bytes - 64; });
	damage("unaligned offset", [](ovsoft::RingLoc &l) { l.memfd_off = 8; });
	// Repaired: traffic flows again.
	ASSERT_EQ(post_recv(b, nullptr, mr, buf[1], 64, 3), 0);
	strcpy(buf[0], "again");
	ASSERT_EQ(post_send(a, mr, buf[0], 8, 4), 0);
	ibv_wc wc;
	ASSERT_TRUE(poll_one(rcq, &wc));
	EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
	EXPECT_EQ(wc.wr_id, 3u);
	EXPECT_STREQ(buf[1], "again");
	munmap(m, sizeof(ovsoft::SegmentHeader));
	EXPECT_EQ(ibv_destroy_qp(a), 0);
	EXPECT_EQ(ibv_destroy_qp(b), 0);
	EXPECT_EQ(ibv_destroy_cq(rcq), 0);
	EXPECT_EQ(ibv_destroy_cq(scq), 0);
	EXPECT_EQ(ibv_dereg_mr(mr), 0);
	log.take();
}

// A peer whose queues came from its allocator is killed: our requests to it
// end in error (never a crash), and after the reclaim new queues from the
// allocator carry traffic again.
TEST_F(Domains, KilledPeerWithAllocatorQueues)
{
	parent = make_parent(true);
	ASSERT_NE(parent, nullptr);
	ibv_cq *cq = create_cq(ctx, parent);
	ASSERT_NE(cq, nullptr);
	ibv_qp *qp = create_rc(parent, cq);
	ASSERT_NE(qp, nullptr);
	static char buf[2][256];
	ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(mr, nullptr);
	xrcpd::PeerProcess peer;
	std::string hello = peer.start({g_self, "--peer", "1"});
	unsigned peer_qpn = 0;
	ASSERT_EQ(sscanf(hello.c_str(), "hello %u", &peer_qpn), 1) << hello;
	ASSERT_EQ(connect_rc(qp, peer_qpn), 0);
	ASSERT_EQ(peer.cmd("%u", qp->qp_num), "ready");
	peer.kill_now();
	usleep(20000);
	ASSERT_EQ(post_send(qp, mr, buf[0], 256, 1), 0);
	ibv_wc wc;
	ASSERT_TRUE(poll_one(cq, &wc, 20000));
	EXPECT_TRUE(wc.status == IBV_WC_RETRY_EXC_ERR || wc.status == IBV_WC_WR_FLUSH_ERR)
		<< ibv_wc_status_str(wc.status);
	EXPECT_EQ(ibv_destroy_qp(qp), 0);

	// The device still serves new queues from the allocator.
	ibv_qp *a = create_rc(parent, cq), *b = create_rc(parent, cq);
	ASSERT_TRUE(a && b);
	ASSERT_EQ(connect_rc(a, b->qp_num), 0);
	ASSERT_EQ(connect_rc(b, a->qp_num), 0);
	ASSERT_EQ(post_recv(b, nullptr, mr, buf[1], 256, 8), 0);
	strcpy(buf[0], "after the kill");
	ASSERT_EQ(post_send(a, mr, buf[0], 32, 9), 0);
	for (int k = 0; k < 2; k++) {
		ASSERT_TRUE(poll_one(cq, &wc));
		EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
	}
	EXPECT_STREQ(buf[1], "after the kill");
	EXPECT_EQ(ibv_destroy_qp(a), 0);
	EXPECT_EQ(ibv_destroy_qp(b), 0);
	EXPECT_EQ(ibv_destroy_cq(cq), 0);
	EXPECT_EQ(ibv_dereg_mr(mr), 0);
	std::map<void *, uint64_t> live;
	check_allocs(log.take(), parent, &log, &live);
	EXPECT_TRUE(live.empty());
}

// ------------------------------------------------------------------ bad input

TEST_F(Domains, BadInput)
{
	ibv_context *other = open_soft(1);
	ASSERT_NE(other, nullptr);
	ibv_pd *other_pd = ibv_alloc_pd(other);
	ibv_td_init_attr ta = {};
	ibv_td *other_td = ibv_alloc_td(other, &ta);
	ASSERT_TRUE(other_pd && other_td);

	errno = 0;
	EXPECT_EQ(ibv_alloc_parent_domain(ctx, nullptr), nullptr);
	EXPECT_EQ(errno, EINVAL);
	ibv_parent_domain_init_attr pa = {};
	errno = 0;
	EXPECT_EQ(ibv_alloc_parent_domain(ctx, &pa), nullptr); // NULL pd
	EXPECT_EQ(errno, EINVAL);
	pa.pd = other_pd;
	errno = 0;
	EXPECT_EQ(ibv_alloc_parent_domain(ctx, &pa), nullptr); // foreign pd
	EXPECT_EQ(errno, EINVAL);
	pa.pd = pd;
	pa.td = other_td;
	errno = 0;
	EXPECT_EQ(ibv_alloc_parent_domain(ctx, &pa), nullptr); // foreign td
	EXPECT_EQ(errno, EINVAL);
	pa.td = nullptr;
	pa.comp_mask = 0x80;
	errno = 0;
	EXPECT_EQ(ibv_alloc_parent_domain(ctx, &pa), nullptr); // unknown comp_mask
	EXPECT_EQ(errno, EINVAL);
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
	pa.alloc = log_alloc;
	errno = 0;
	EXPECT_EQ(ibv_alloc_parent_domain(ctx, &pa), nullptr); // alloc without free
	EXPECT_EQ(errno, EINVAL);

	errno = 0;
	EXPECT_EQ(ibv_alloc_td(ctx, nullptr), nullptr);
	EXPECT_EQ(errno, EINVAL);
	ta.comp_mask = 1;
	errno = 0;
	EXPECT_EQ(ibv_alloc_td(ctx, &ta), nullptr);
	EXPECT_EQ(errno, EINVAL);
	ta.comp_mask = 0;

	// A parent domain of a parent domain; a CQ whose "parent" is a plain PD.
	pa = {};
	pa.pd = pd;
	ibv_pd *par = ibv_alloc_parent_domain(ctx, &pa);
	ASSERT_NE(par, nullptr);
	pa.pd = par;
	errno = 0;
	EXPECT_EQ(ibv_alloc_parent_domain(ctx, &pa), nullptr);
	EXPECT_EQ(errno, EINVAL);
	ibv_cq_init_attr_ex ca = {};
	ca.cqe = 8;
	ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
	ca.parent_domain = pd;
	errno = 0;
	EXPECT_EQ(ibv_create_cq_ex(ctx, &ca), nullptr);
	EXPECT_EQ(errno, EINVAL);
	ca.parent_domain = nullptr;
	errno = 0;
	EXPECT_EQ(ibv_create_cq_ex(ctx, &ca), nullptr);
	EXPECT_EQ(errno, EINVAL);

	EXPECT_EQ(ibv_dealloc_pd(par), 0);
	ibv_td stranger = {ctx};
	EXPECT_EQ(ibv_dealloc_td(&stranger), EINVAL); // never allocated

	EXPECT_EQ(ibv_dealloc_td(other_td), 0);
	EXPECT_EQ(ibv_dealloc_pd(other_pd), 0);
	EXPECT_EQ(ibv_close_device(other), 0);
}

// Double frees: each its own test (a crash must not hide the other checks).
TEST_F(Domains, DoubleDeallocParentDomainIsEinval)
{
	ibv_parent_domain_init_attr pa = {};
	pa.pd = pd;
	ibv_pd *par = ibv_alloc_parent_domain(ctx, &pa);
	ASSERT_NE(par, nullptr);
	EXPECT_EQ(ibv_dealloc_pd(par), 0);
	EXPECT_EQ(ibv_dealloc_pd(par), EINVAL);
}

TEST_F(Domains, DoubleDeallocTdIsEinval)
{
	ibv_td_init_attr ta = {};
	ibv_td *t = ibv_alloc_td(ctx, &ta);
	ASSERT_NE(t, nullptr);
	EXPECT_EQ(ibv_dealloc_td(t), 0);
	EXPECT_EQ(ibv_dealloc_td(t), EINVAL);
}

// ------------------------------------------------------------------ thread domains: retries, dead peers
//
// Objects under a thread domain send without locks; their send completions
// go through the CQ's process-local lane. What the application does not
// drive itself must still happen: RNR and timeout retries (by the context's
// progress thread, also while the application blocks on a completion
// channel), flushes when the QP fails, a killed peer. Every completion must
// arrive, in order, and nothing may hang.

// A CQ under `parent` (a parent domain) with an optional completion channel.
ibv_cq *td_create_cq(ibv_context *ctx, ibv_pd *parent, ibv_comp_channel *ch)
{
	ibv_cq_init_attr_ex a = {};
	a.cqe = 64;
	a.channel = ch;
	a.wc_flags = IBV_WC_STANDARD_FLAGS;
	a.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
	a.parent_domain = parent;
	ibv_cq_ex *cq = ibv_create_cq_ex(ctx, &a);
	return cq ? ibv_cq_ex_to_cq(cq) : nullptr;
}

// Polls until n completions arrived (or ms passed); returns them in order.
std::vector<ibv_wc> poll_n(ibv_cq *cq, int n, int ms = 5000)
{
	std::vector<ibv_wc> out;
	for (int i = 0; i < ms * 10 && int(out.size()) < n; i++) {
		ibv_wc wc[8];
		int got = ibv_poll_cq(cq, std::min(8, n - int(out.size())), wc);
		if (got < 0)
			break;
		out.insert(out.end(), wc, wc + got);
		if (!got)
			usleep(100);
	}
	return out;
}

TEST_F(Domains, ThreadDomainRnrRetryExceededAndRecoveryWhileBlocked)
{
	ASSERT_NO_FATAL_FAILURE(make_td_parent());
	ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	ASSERT_NE(ch, nullptr);
	ibv_cq *cq = td_create_cq(ctx, parent, ch);
	// The responder is an ordinary QP: another thread may post to it.
	ibv_cq *rcq = create_cq(ctx, nullptr);
	ASSERT_TRUE(cq && rcq);
	static char buf[2][256];
	ibv_mr *mr = ibv_reg_mr(parent, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ibv_mr *rmr = ibv_reg_mr(pd, buf[1], sizeof(buf[1]), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_TRUE(mr && rmr);

	// No RNR retries: the send fails at once, what follows is flushed.
	ibv_qp *a = create_rc(parent, cq), *b = create_rc(pd, rcq);
	ASSERT_TRUE(a && b);
	ASSERT_EQ(connect_rc_to(a, b->qp_num, IBV_QPS_RTS, 0), 0);
	ASSERT_EQ(connect_rc_to(b, a->qp_num, IBV_QPS_RTS, 0), 0);
	ASSERT_EQ(post_send(a, mr, buf[0], 16, 1), 0);
	ASSERT_EQ(post_send(a, mr, buf[0], 16, 2), 0);
	auto wcs = poll_n(cq, 2);
	ASSERT_EQ(wcs.size(), 2u);
	EXPECT_EQ(wcs[0].wr_id, 1u);
	EXPECT_EQ(wcs[0].status, IBV_WC_RNR_RETRY_EXC_ERR) << ibv_wc_status_str(wcs[0].status);
	EXPECT_EQ(wcs[1].wr_id, 2u);
	EXPECT_EQ(wcs[1].status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(wcs[1].status);
	EXPECT_EQ(ibv_destroy_qp(a), 0);
	EXPECT_EQ(ibv_destroy_qp(b), 0);

	// Retry for ever: three sends wait for receives. The application then
	// blocks on the completion channel; the receives are posted by another
	// thread to the (non-TD) responder, so only the progress thread can
	// complete the sends meanwhile.
	a = create_rc(parent, cq);
	b = create_rc(pd, rcq);
	ASSERT_TRUE(a && b);
	ASSERT_EQ(connect_rc_to(a, b->qp_num, IBV_QPS_RTS, 7), 0);
	ASSERT_EQ(connect_rc_to(b, a->qp_num, IBV_QPS_RTS, 7), 0);
	for (int i = 0; i < 3; i++) {
		snprintf(buf[0], 16, "rnr %d", i);
		ASSERT_EQ(post_send(a, mr, buf[0], 16, 10 + i), 0);
	}
	usleep(20000);
	ibv_wc wc;
	EXPECT_EQ(ibv_poll_cq(cq, 1, &wc), 0) << "completed without a receive";
	ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);
	std::thread responder([&] {
		usleep(50000);
		for (int i = 0; i < 3; i++)
			post_recv(b, nullptr, rmr, buf[1], 256, 100 + i);
	});
	pollfd pf = {ch->fd, POLLIN, 0};
	int ready = poll(&pf, 1, 5000);
	responder.join();
	ASSERT_EQ(ready, 1) << "no completion event while the application was blocked";
	ibv_cq *ev_cq = nullptr;
	void *ev_ctx = nullptr;
	ASSERT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
	EXPECT_EQ(ev_cq, cq);
	ibv_ack_cq_events(cq, 1);
	wcs = poll_n(cq, 3);
	ASSERT_EQ(wcs.size(), 3u);
	for (int i = 0; i < 3; i++) {
		EXPECT_EQ(wcs[i].wr_id, uint64_t(10 + i)) << "out of order";
		EXPECT_EQ(wcs[i].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wcs[i].status);
		EXPECT_EQ(wcs[i].opcode, IBV_WC_SEND);
		EXPECT_EQ(wcs[i].qp_num, a->qp_num);
	}
	wcs = poll_n(rcq, 3);
	ASSERT_EQ(wcs.size(), 3u);
	for (int i = 0; i < 3; i++)
		EXPECT_EQ(wcs[i].status, IBV_WC_SUCCESS);
	EXPECT_STREQ(buf[1], "rnr 2");

	EXPECT_EQ(ibv_destroy_qp(a), 0);
	EXPECT_EQ(ibv_destroy_qp(b), 0);
	EXPECT_EQ(ibv_dereg_mr(mr), 0);
	EXPECT_EQ(ibv_dereg_mr(rmr), 0);
	EXPECT_EQ(ibv_destroy_cq(cq), 0);
	EXPECT_EQ(ibv_destroy_cq(rcq), 0);
	EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

TEST_F(Domains, ThreadDomainRetryExceededInOrderWhenTheResponderIsNotReady)
{
	ASSERT_NO_FATAL_FAILURE(make_td_parent());
	ibv_cq *cq = td_create_cq(ctx, parent, nullptr);
	ASSERT_NE(cq, nullptr);
	static char buf[64];
	ibv_mr *mr = ibv_reg_mr(parent, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(mr, nullptr);
	// b never leaves INIT: a's packets are dropped, a retries (short
	// timeout, two retries) from the progress thread, then gives up.
	ibv_qp *a = create_rc(parent, cq), *b = create_rc(parent, cq);
	ASSERT_TRUE(a && b);
	ASSERT_EQ(connect_rc_to(b, a->qp_num, IBV_QPS_INIT, 0), 0);
	ASSERT_EQ(connect_rc_to(a, b->qp_num, IBV_QPS_RTS, 0, 1, 2), 0);
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(post_send(a, mr, buf, 8, i), 0);
	auto wcs = poll_n(cq, 4);
	ASSERT_EQ(wcs.size(), 4u);
	EXPECT_EQ(wcs[0].wr_id, 0u);
	EXPECT_EQ(wcs[0].status, IBV_WC_RETRY_EXC_ERR) << ibv_wc_status_str(wcs[0].status);
	for (int i = 1; i < 4; i++) {
		EXPECT_EQ(wcs[i].wr_id, uint64_t(i)) << "out of order";
		EXPECT_EQ(wcs[i].status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(wcs[i].status);
	}
	ibv_qp_attr at = {};
	ibv_qp_init_attr ia = {};
	ASSERT_EQ(ibv_query_qp(a, &at, IBV_QP_STATE, &ia), 0);
	EXPECT_EQ(at.qp_state, IBV_QPS_ERR);
	ibv_wc wc;
	EXPECT_EQ(ibv_poll_cq(cq, 1, &wc), 0);
	EXPECT_EQ(ibv_destroy_qp(a), 0);
	EXPECT_EQ(ibv_destroy_qp(b), 0);
	EXPECT_EQ(ibv_dereg_mr(mr), 0);
	EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

TEST_F(Domains, ThreadDomainKilledPeerCompletesEverythingWithoutHang)
{
	ASSERT_NO_FATAL_FAILURE(make_td_parent());
	ibv_cq *cq = td_create_cq(ctx, parent, nullptr);
	ASSERT_NE(cq, nullptr);
	ibv_qp *qp = create_rc(parent, cq);
	ASSERT_NE(qp, nullptr);
	static char buf[2][256];
	ibv_mr *mr = ibv_reg_mr(parent, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(mr, nullptr);
	// The peer (--peer 1) echoes one message, then waits for a second one
	// that never gets a receive: our second send waits on RNR (retried for
	// ever) until the peer is killed.
	xrcpd::PeerProcess peer;
	std::string hello = peer.start({g_self, "--peer", "1"});
	unsigned peer_qpn = 0;
	ASSERT_EQ(sscanf(hello.c_str(), "hello %u", &peer_qpn), 1) << hello;
	ASSERT_EQ(connect_rc(qp, peer_qpn), 0);
	ASSERT_EQ(post_recv(qp, nullptr, mr, buf[1], 256, 555), 0);
	ASSERT_EQ(post_recv(qp, nullptr, mr, buf[1], 256, 556), 0);
	ASSERT_EQ(peer.cmd("%u", qp->qp_num), "ready");
	strcpy(buf[0], "ping");
	ASSERT_EQ(post_send(qp, mr, buf[0], 256, 1), 0);
	auto wcs = poll_n(cq, 2, 20000);
	ASSERT_EQ(wcs.size(), 2u);
	for (const ibv_wc &w : wcs) {
		EXPECT_EQ(w.status, IBV_WC_SUCCESS) << ibv_wc_status_str(w.status);
		EXPECT_TRUE(w.wr_id == 1 || w.wr_id == 555) << w.wr_id;
	}
	EXPECT_STREQ(buf[1], "Ring");
	ASSERT_EQ(post_send(qp, mr, buf[0], 256, 2), 0);
	usleep(20000);
	ibv_wc wc;
	EXPECT_EQ(ibv_poll_cq(cq, 1, &wc), 0) << "the second send completed without a receive";
	peer.kill_now();
	// The waiting send ends (retry exceeded or flushed), the second receive
	// is flushed: both arrive, no hang.
	wcs = poll_n(cq, 2, 10000);
	ASSERT_EQ(wcs.size(), 2u);
	bool send_seen = false, recv_seen = false;
	for (const ibv_wc &w : wcs) {
		if (w.wr_id == 2) {
			send_seen = true;
			EXPECT_TRUE(w.status == IBV_WC_RETRY_EXC_ERR || w.status == IBV_WC_WR_FLUSH_ERR)
				<< ibv_wc_status_str(w.status);
		} else if (w.wr_id == 556) {
			recv_seen = true;
			EXPECT_EQ(w.status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(w.status);
		}
	}
	EXPECT_TRUE(send_seen && recv_seen);
	// Sending now: flushed at once.
	ASSERT_EQ(post_send(qp, mr, buf[0], 8, 3), 0);
	wcs = poll_n(cq, 1);
	ASSERT_EQ(wcs.size(), 1u);
	EXPECT_EQ(wcs[0].wr_id, 3u);
	EXPECT_EQ(wcs[0].status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(wcs[0].status);
	EXPECT_EQ(ibv_destroy_qp(qp), 0);
	EXPECT_EQ(ibv_dereg_mr(mr), 0);
	EXPECT_EQ(ibv_destroy_cq(cq), 0);
}


TEST_F(Domains, ThreadDomainCqExPollAndResizeKeepTheLaneInOrder)
{
	ASSERT_NO_FATAL_FAILURE(make_td_parent());
	ibv_cq_init_attr_ex ca = {};
	ca.cqe = 4;
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
	ca.parent_domain = parent;
	ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &ca);
	ASSERT_NE(cqx, nullptr);
	ibv_cq *cq = ibv_cq_ex_to_cq(cqx);
	static char buf[2][64];
	ibv_mr *mr = ibv_reg_mr(parent, buf, sizeof(buf),
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ASSERT_NE(mr, nullptr);
	ibv_qp *a = create_rc(parent, cq), *b = create_rc(parent, cq);
	ASSERT_TRUE(a && b);
	ASSERT_EQ(connect_rc(a, b->qp_num), 0);
	ASSERT_EQ(connect_rc(b, a->qp_num), 0);
	auto write = [&](uint64_t id) {
		ibv_sge s = {uintptr_t(buf[0]), 8, mr->lkey};
		ibv_send_wr wr = {}, *bad;
		wr.wr_id = id;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.sg_list = &s;
		wr.num_sge = 1;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = uintptr_t(buf[1]);
		wr.wr.rdma.rkey = mr->rkey;
		return ibv_post_send(a, &wr, &bad);
	};
	for (uint64_t i = 0; i < 3; i++)
		ASSERT_EQ(write(i), 0);
	// Growing the CQ keeps what waits in the lane, in order.
	ASSERT_EQ(ibv_resize_cq(cq, 2), EINVAL) << "shrunk below the waiting completions";
	ASSERT_EQ(ibv_resize_cq(cq, 32), 0);
	EXPECT_GE(cq->cqe, 32);
	for (uint64_t i = 3; i < 20; i++)
		ASSERT_EQ(write(i), 0);
	ibv_poll_cq_attr pa = {};
	ASSERT_EQ(ibv_start_poll(cqx, &pa), 0);
	uint64_t want = 0;
	do {
		EXPECT_EQ(cqx->wr_id, want);
		EXPECT_EQ(cqx->status, IBV_WC_SUCCESS);
		EXPECT_EQ(ibv_wc_read_opcode(cqx), IBV_WC_RDMA_WRITE);
		EXPECT_EQ(ibv_wc_read_qp_num(cqx), a->qp_num);
		want++;
	} while (ibv_next_poll(cqx) == 0);
	ibv_end_poll(cqx);
	EXPECT_EQ(want, 20u);
	EXPECT_EQ(ibv_start_poll(cqx, &pa), ENOENT);
	EXPECT_EQ(ibv_destroy_qp(a), 0);
	EXPECT_EQ(ibv_destroy_qp(b), 0);
	EXPECT_EQ(ibv_dereg_mr(mr), 0);
	EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

} // namespace

int main(int argc, char **argv)
{
	g_self = ov_test::self_exe();
	setenv("RDMAV_SOFT_DEVICES", "2", 0);
	if (argc == 3 && !strcmp(argv[1], "--peer"))
		return peer_main(atoi(argv[2]));
	::testing::InitGoogleTest(&argc, argv);
	return RUN_ALL_TESTS();
}
