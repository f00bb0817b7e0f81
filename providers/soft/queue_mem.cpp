// openverbs software RDMA device: memory of the queues (see queue_mem.h).
#include "queue_mem.h"
#include "engine.h"
#include "log.h"
#include "sysmm.h"
#include "soft.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <linux/mempolicy.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ovsoft {

static size_t page_size()
{
	static const size_t ps = size_t(sysconf(_SC_PAGESIZE));
	return ps;
}

static uint64_t resource_type(uint32_t code)
{
	return OPENVERBS_SOFT_RESOURCE_TYPE(code);
}

SoftPd *allocator_of(struct ibv_pd *ibpd)
{
	if (!ibpd)
		return nullptr;
	SoftPd *pd = to_spd(ibpd);
	return pd->parent && pd->alloc && pd->free ? pd : nullptr;
}

// `advice` (MADV_DONTFORK, MADV_DOFORK) on the whole pages inside [p, p+size):
// only those belong to the buffer alone.
static void fork_advice_inside(void *p, size_t size, int advice)
{
	uintptr_t lo = (uintptr_t(p) + page_size() - 1) & ~uintptr_t(page_size() - 1);
	uintptr_t hi = (uintptr_t(p) + size) & ~uintptr_t(page_size() - 1);
	if (hi > lo)
		sys_madvise(reinterpret_cast<void *>(lo), hi - lo, advice);
}

// The NUMA memory policy of the mapping at `addr` (get_mempolicy(2) with
// MPOL_F_ADDR), to be applied again with mbind(2) once the pages there are
// replaced. Two system calls at create/destroy; nothing on the data path.
struct MemPolicy {
	static constexpr unsigned long kMaxNode = 1024;
	int mode = MPOL_DEFAULT;
	unsigned long mask[kMaxNode / (8 * sizeof(unsigned long))] = {};
};

static bool policy_get(void *addr, MemPolicy *p)
{
	long rc = syscall(SYS_get_mempolicy, &p->mode, p->mask, MemPolicy::kMaxNode, addr,
			  MPOL_F_ADDR);
	return rc == 0 && p->mode != MPOL_DEFAULT;
}

static void policy_set(void *addr, size_t len, const MemPolicy &p)
{
	if (syscall(SYS_mbind, addr, len, p.mode, p.mask, MemPolicy::kMaxNode, 0) != 0)
		softlog(3, "mbind of a queue buffer (mode %d) failed: %s", p.mode,
			strerror(errno));
}

int queue_buf_alloc(SoftPd *pd, uint32_t code, size_t size, size_t align, QueueBuf *out)
{
	*out = QueueBuf{};
	if (!size)
		size = 1;
	if (pd) {
		uint64_t type = resource_type(code);
		void *p = pd->alloc(&pd->pd, pd->pd_context, size, align, type);
		if (!p)
			return ENOMEM;
		if (p != IBV_ALLOCATOR_USE_DEFAULT) {
			if (uintptr_t(p) % align) {
				softlog(1, "parent domain allocator returned %p for alignment %zu",
					p, align);
				pd->free(&pd->pd, pd->pd_context, p, type);
				return EINVAL;
			}
			memset(p, 0, size);
			fork_advice_inside(p, size, MADV_DONTFORK);
			*out = QueueBuf{p, size, type, pd, -1, 0};
			return 0;
		}
	}
	void *p = calloc(1, size);
	if (!p)
		return ENOMEM;
	*out = QueueBuf{p, size, 0, nullptr, -1, 0};
	return 0;
}

int ring_buf_alloc(SoftPd *pd, uint32_t code, uint64_t bytes, QueueBuf *out)
{
	*out = QueueBuf{};
	if (!pd)
		return 0;
	size_t ps = page_size();
	size_t size = size_t((bytes + ps - 1) & ~uint64_t(ps - 1));
	uint64_t type = resource_type(code);
	void *p = pd->alloc(&pd->pd, pd->pd_context, size, ps, type);
	if (!p)
		return ENOMEM;
	if (p == IBV_ALLOCATOR_USE_DEFAULT)
		return 0;
	int rc = 0;
	int fd = -1;
	struct stat st;
	MemPolicy pol;
	bool has_pol = false;
	if (uintptr_t(p) % ps) {
		softlog(1, "parent domain allocator returned %p for alignment %zu", p, ps);
		rc = EINVAL;
		goto fail;
	}
	has_pol = policy_get(p, &pol);
	fd = sys_memfd_create("openverbs-soft-ring", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, off_t(size)) != 0 || fstat(fd, &st) != 0) {
		rc = errno;
		goto fail;
	}
	// Replace the pages in place (MAP_FIXED swaps the mapping atomically,
	// there is no moment with a hole another thread could take).
	if (sys_mmap(p, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) != p) {
		rc = errno;
		if (rc == EINVAL) {
			// A mapping that cannot be split at base-page granularity:
			// the allocator's memory is a hugetlbfs huge page (mmap(2),
			// MAP_HUGETLB; munmap and MAP_FIXED need huge-page-aligned
			// ranges there). Peers cannot reach those pages, so the ring
			// goes to the device's shared arena, as with
			// IBV_ALLOCATOR_USE_DEFAULT, and the buffer goes back to the
			// allocator's free function.
			softlog(2, "queue buffer at %p (%zu bytes) cannot be shared in place "
				   "(huge pages?): the ring uses the device's arena", p, size);
			close(fd);
			pd->free(&pd->pd, pd->pd_context, p, type);
			return 0;
		}
		softlog(2, "cannot back the queue buffer at %p (%zu bytes) with shared pages: %s",
			p, size, strerror(rc));
		goto fail;
	}
	if (has_pol)
		policy_set(p, size, pol);
	sys_madvise(p, size, MADV_DONTFORK);
	*out = QueueBuf{p, size, type, pd, fd, uint32_t(st.st_ino)};
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	pd->free(&pd->pd, pd->pd_context, p, type);
	return rc ? rc : ENOMEM;
}

RingLoc ring_buf_loc(const QueueBuf &b)
{
	RingLoc l{};
	l.kind = RING_MEMFD;
	l.pid = my_pid();
	l.off = 0;
	l.memfd = b.memfd;
	l.memfd_ino = b.memfd_ino;
	l.memfd_off = 0;
	l.bytes = b.size;
	return l;
}

void queue_buf_free(QueueBuf *b)
{
	if (!b->ptr)
		return;
	if (!b->pd) {
		free(b->ptr);
		*b = QueueBuf{};
		return;
	}
	if (b->memfd >= 0) {
		// Fresh private anonymous pages where the shared ones were, with
		// the policy the range had. They go back to the application's
		// allocator, so a child of a later fork() must get them again
		// (a fresh mapping is inherited; MADV_DONTFORK there would leave
		// heap memory out of every child, which crashes it).
		MemPolicy pol;
		bool has_pol = policy_get(b->ptr, &pol);
		if (sys_mmap(b->ptr, b->size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == b->ptr) {
			if (has_pol)
				policy_set(b->ptr, b->size, pol);
		} else {
			softlog(1, "cannot give private pages back at %p: %s", b->ptr,
				strerror(errno));
		}
		close(b->memfd);
	} else {
		// The pages queue_buf_alloc kept from children are inherited
		// again before they go back to the application's allocator (heap
		// pages left MADV_DONTFORK are missing in every later child).
		fork_advice_inside(b->ptr, b->size, MADV_DOFORK);
	}
	b->pd->free(&b->pd->pd, b->pd->pd_context, b->ptr, b->type);
	*b = QueueBuf{};
}

} // namespace ovsoft
