// Fork protection of registered memory (ibv_fork_init(3),
// ibv_is_fork_initialized(3)).
//
// Once ibv_fork_init() ran (or RDMAV_FORK_SAFE / IBV_FORK_SAFE asked for it),
// every registered range is marked MADV_DONTFORK so a child does not get a
// copy-on-write view of pages the device writes to. Ranges may overlap, so
// the library keeps a reference count per page span: the first reference
// sets MADV_DONTFORK, the last release sets MADV_DOFORK again. With
// RDMAV_HUGEPAGES_SAFE the span is rounded to the page size of the mapping
// (read from /proc/self/smaps), so huge pages are advised whole.
// Kernels that copy pinned pages on fork themselves (netlink
// RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK) need none of this: IBV_FORK_UNNEEDED.
#include "core/verbs/verbs.h"
#include "common/env.h"
#include "core/discovery.h"


#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <map>
#include <mutex>
#include <vector>
#include <sys/mman.h>
#include <unistd.h>

namespace ov::verbs {

namespace {

// One span of pages [first, last] with the number of registrations covering
// it. Spans with refcount 0 are not stored.
struct Span {
	uintptr_t last;
	int refs;
};

struct ForkState {
	std::mutex lock;
	bool huge_pages = false;
	long page_size = 0;
	std::map<uintptr_t, Span> spans; // keyed by first byte
};

// Outside the state so that registrations without fork protection (the
// common case) neither allocate the state nor take its lock. Written under
// the state's lock except for too_late, which only ever goes to true.
std::atomic<bool> g_enabled{false};  // ibv_fork_init() succeeded
std::atomic<bool> g_too_late{false}; // memory was registered before ibv_fork_init()

ForkState &state()
{
	static ForkState *s = new ForkState(); // never destroyed: used until exit
	return *s;
}

// Page size of the mapping containing addr, from /proc/self/smaps.
long mapping_page_size(uintptr_t addr, long fallback)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	if (!f)
		return fallback;
	char line[512];
	bool inside = false;
	long result = fallback;
	while (fgets(line, sizeof(line), f)) {
		uintptr_t lo, hi;
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &lo, &hi) == 2) {
			if (inside)
				break;
			inside = addr >= lo && addr < hi;
			continue;
		}
		unsigned long kb;
		if (inside && sscanf(line, "KernelPageSize: %lu kB", &kb) == 1) {
			result = static_cast<long>(kb * 1024);
			break;
		}
	}
	fclose(f);
	return result;
}

// Splits the span containing `at` (if any) so that a span starts at `at`.
void split_at(std::map<uintptr_t, Span> &spans, uintptr_t at)
{
	auto it = spans.upper_bound(at);
	if (it == spans.begin())
		return;
	--it;
	if (it->first == at || it->second.last < at)
		return;
	Span tail = {it->second.last, it->second.refs};
	it->second.last = at - 1;
	spans.emplace(at, tail);
}

// Merges neighbouring spans with equal counts around [first, last].
void coalesce(std::map<uintptr_t, Span> &spans, uintptr_t first, uintptr_t last)
{
	auto it = spans.lower_bound(first);
	if (it != spans.begin())
		--it;
	while (it != spans.end() && it->first <= last) {
		auto next = std::next(it);
		if (next != spans.end() && it->second.last + 1 == next->first &&
		    it->second.refs == next->second.refs) {
			it->second.last = next->second.last;
			spans.erase(next);
			continue;
		}
		it = next;
	}
}

int advise(uintptr_t first, uintptr_t last, int advice)
{
	return madvise(reinterpret_cast<void *>(first), last - first + 1, advice);
}

// Adds delta (+1 or -1) to every page of [first, last]; madvise()s the
// pages whose count leaves or reaches zero. On failure the spans already
// changed are restored. Called with the lock held.
int change_range(ForkState &s, uintptr_t first, uintptr_t last, int delta)
{
	auto &spans = s.spans;
	split_at(spans, first);
	if (last != UINTPTR_MAX)
		split_at(spans, last + 1);
	if (delta > 0) {
		// Materialise the holes as zero-count spans so the walk sees them.
		uintptr_t cursor = first;
		for (;;) {
			auto it = spans.lower_bound(cursor);
			uintptr_t end;
			if (it == spans.end() || it->first > cursor) {
				end = (it == spans.end() || it->first - 1 > last) ? last : it->first - 1;
				spans.emplace(cursor, Span{end, 0});
			} else {
				end = it->second.last;
			}
			if (end >= last)
				break;
			cursor = end + 1;
		}
	}

	const int advice = delta > 0 ? MADV_DONTFORK : MADV_DOFORK;
	std::vector<uintptr_t> changed;
	for (auto it = spans.lower_bound(first); it != spans.end() && it->first <= last; ++it) {
		const int before = it->second.refs;
		if (delta < 0 && before == 0)
			continue; // releasing what was never protected: ignore
		const bool crossing = delta > 0 ? before == 0 : before == 1;
		if (crossing && advise(it->first, it->second.last, advice)) {
			int saved = errno;
			// madvise() may have advised part of the span before failing.
			advise(it->first, it->second.last, delta > 0 ? MADV_DOFORK : MADV_DONTFORK);
			for (uintptr_t key : changed) {
				Span &sp = spans.at(key);
				const bool was_crossing = delta > 0 ? sp.refs == 1 : sp.refs == 0;
				if (was_crossing)
					advise(key, sp.last, delta > 0 ? MADV_DOFORK : MADV_DONTFORK);
				sp.refs -= delta;
			}
			for (auto z = spans.begin(); z != spans.end();)
				z = z->second.refs == 0 ? spans.erase(z) : std::next(z);
			coalesce(spans, first, last);
			errno = saved;
			return -1;
		}
		it->second.refs += delta;
		changed.push_back(it->first);
	}
	for (auto z = spans.lower_bound(first); z != spans.end() && z->first <= last;)
		z = z->second.refs == 0 ? spans.erase(z) : std::next(z);
	coalesce(spans, first, last);
	return 0;
}

int madvise_range(void *base, size_t size, int delta)
{
	auto &s = state();
	if (!size)
		return 0;
	const uintptr_t addr = reinterpret_cast<uintptr_t>(base);
	long page = s.page_size;
	if (s.huge_pages)
		page = mapping_page_size(addr, page);
	const uintptr_t mask = ~static_cast<uintptr_t>(page - 1);
	if (addr + size < addr || addr + size + page - 1 < addr + size) {
		errno = EINVAL;
		return -1;
	}
	const uintptr_t first = addr & mask;
	const uintptr_t last = ((addr + size + static_cast<uintptr_t>(page) - 1) & mask) - 1;
	try {
		std::lock_guard<std::mutex> guard(s.lock);
		return change_range(s, first, last, delta);
	} catch (...) {
		errno = ENOMEM;
		return -1;
	}
}

} // namespace

bool kernel_copy_on_fork() noexcept
{
	// Asked once: the core's netlink query (RDMA_NLDEV_CMD_SYS_GET); no
	// answer (no RDMA netlink, old kernel) means the kernel does not copy.
	static const bool cached = [] {
		bool on = false;
		return ov::core::netlink_copy_on_fork(&on) == 0 && on;
	}();
	return cached;
}

int fork_init() noexcept
{
	auto &s = state();
	std::lock_guard<std::mutex> guard(s.lock);
	if (secure_env("RDMAV_HUGEPAGES_SAFE"))
		s.huge_pages = true;
	if (g_enabled.load())
		return 0;
	// rdma-core 44 reports a late call even when the kernel copies pinned
	// pages on fork (then the call has nothing else to do).
	if (g_too_late.load())
		return EINVAL;
	if (kernel_copy_on_fork())
		return 0;
	long page = sysconf(_SC_PAGESIZE);
	if (page <= 0)
		return errno ? errno : EINVAL;
	// Check that the kernel knows MADV_DONTFORK/MADV_DOFORK.
	void *probe = nullptr;
	if (posix_memalign(&probe, static_cast<size_t>(page), static_cast<size_t>(page)))
		return ENOMEM;
	int ret = madvise(probe, static_cast<size_t>(page), MADV_DONTFORK);
	if (!ret)
		ret = madvise(probe, static_cast<size_t>(page), MADV_DOFORK);
	free(probe);
	if (ret)
		return ENOSYS;
	s.page_size = page;
	g_enabled.store(true);
	return 0;
}

enum ibv_fork_status fork_status() noexcept
{
	if (kernel_copy_on_fork())
		return IBV_FORK_UNNEEDED;
	auto &s = state();
	std::lock_guard<std::mutex> guard(s.lock);
	return g_enabled.load() ? IBV_FORK_ENABLED : IBV_FORK_DISABLED;
}

namespace {

// Marks [base, base+size) as one more (+1, DONTFORK) or one fewer (-1,
// DOFORK) registration's range, when protection is on. Without it the
// call changes nothing, but ibv_fork_init() can no longer make earlier
// registrations safe.
int fork_range(void *base, size_t size, int delta) noexcept
{
	// As rdma-core: a registration racing with ibv_fork_init() in another
	// thread is not ordered against it.
	if (!g_enabled.load()) {
		g_too_late.store(true);
		return 0;
	}
	return madvise_range(base, size, delta);
}

} // namespace

int dontfork_range(void *base, size_t size) noexcept
{
	return fork_range(base, size, +1);
}

int dofork_range(void *base, size_t size) noexcept
{
	return fork_range(base, size, -1);
}

size_t fork_range_count() noexcept
{
	auto &s = state();
	std::lock_guard<std::mutex> guard(s.lock);
	return s.spans.size();
}

int fork_refcount_at(uintptr_t addr) noexcept
{
	auto &s = state();
	std::lock_guard<std::mutex> guard(s.lock);
	auto it = s.spans.upper_bound(addr);
	if (it == s.spans.begin())
		return 0;
	--it;
	return addr <= it->second.last ? it->second.refs : 0;
}

void fork_reset_for_tests() noexcept
{
	auto &s = state();
	std::lock_guard<std::mutex> guard(s.lock);
	s.spans.clear();
	g_enabled.store(false);
	g_too_late.store(false);
	s.huge_pages = false;
}

} // namespace ov::verbs
