// openverbs software RDMA device: memory regions: keys, registration with
// its shareable backing (memfd), re-registration, import and DMA handles.
#include "objects.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

namespace ovsoft {

// ------------------------------------------------------------------ memory keys

// Allocates a key slot (device lock held by the caller): the lowest free
// one as far as the table's extent tells (shm.h, extent_take). A slot
// used again soon is told apart by the key's low byte (make_key). Returns
// the slot or -1.
int key_slot_alloc(Segment *seg)
{
	SegmentHeader *h = seg->hdr;
	return extent_take(h->extents.mrs, kMaxMrs,
			   [&](uint32_t s) { return h->mrs[s].kind.load() == KEY_FREE; });
}

void key_slot_free(Segment *seg, uint32_t slot)
{
	extent_release(seg->hdr->extents.mrs, slot);
}

uint32_t make_key(Segment *seg, uint32_t slot)
{
	uint32_t gen = seg->hdr->key_gen.fetch_add(1) & 0xff;
	return ((slot + 1) << 8) | gen;
}

static const int kKnownAccess =
	IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
	IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |
	IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING
#if _OPENVERBS_ABI >= 56
	| IBV_ACCESS_FLUSH_GLOBAL | IBV_ACCESS_FLUSH_PERSISTENT
#endif
	;

// Access flags of a memory region (ibv_reg_mr(3), ibv_rereg_mr(3)): 0, EINVAL
// for unknown bits or remote write/atomic without local write, EOPNOTSUPP for
// IBV_ACCESS_FLUSH_PERSISTENT (the device does not advertise flushes to
// persistence; the kernel's ib_check_mr_access answers the same).
static int check_access(int access)
{
	if (access & ~kKnownAccess)
		return EINVAL;
#if _OPENVERBS_ABI >= 56
	if (access & IBV_ACCESS_FLUSH_PERSISTENT)
		return EOPNOTSUPP;
#endif
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return EINVAL;
	return 0;
}

static int check_mapped(void *addr, size_t length)
{
	uintptr_t a = uintptr_t(addr) & ~uintptr_t(4095);
	uintptr_t e = uintptr_t(addr) + length;
	if (e < uintptr_t(addr))
		return EFAULT;
	// madvise(MADV_NORMAL) fails with ENOMEM on any unmapped page in range.
	if (sys_madvise(reinterpret_cast<void *>(a), e - a, MADV_NORMAL) != 0)
		return EFAULT;
	return 0;
}

// ---- Shareable backing of registered memory.
//
// To let peers move data with plain loads and stores (no system call per
// operation), registration replaces the pages of the region, in place, by a
// shared mapping of a memfd with the same contents (mremap over the old
// mapping, so the addresses and the data stay). Only private anonymous
// read/write memory (heap, anonymous mmap) is converted; anything else (file
// mappings, stacks, read-only memory, ranges partly converted already) stays
// as it is and peers reach it with process_vm_*.
//
// No write is lost: while the pages are copied and replaced (at
// registration, and back at the last deregistration) the range is write
// protected with userfaultfd(2) (UFFDIO_REGISTER_MODE_WP and
// UFFDIO_WRITEPROTECT of ioctl_userfaultfd(2)); a thread that writes there
// meanwhile waits in its page fault, and when the userfaultfd is closed after
// the replacement it retries the write, which lands in the new pages. Where
// userfaultfd is not available (kernel, seccomp policy, or
// vm.unprivileged_userfaultfd=0 with a kernel older than UFFD_USER_MODE_ONLY)
// nothing is converted: peers use process_vm_*, slower but exact. With
// UFFD_USER_MODE_ONLY (unprivileged processes) a system call that writes
// into the range during those few milliseconds fails with EFAULT instead of
// waiting. After ibv_fork_init(3) the new mapping is advised MADV_DONTFORK
// again (the replacement drops the advice of the old one), so fork()
// children still do not get registered pages. Documented in
// openverbs-soft(7). All calls go to the kernel directly (sysmm.h).
//
// The files: a converted range of up to kPoolRange bytes takes pages of a
// pool file of the process (kPoolBytes, sparse), at offsets no other range
// is ever given, and gives them back at deregistration by punching a hole
// (fallocate(2)); a larger one (OPENVERBS_SOFT_SHARE_MAX above it) gets a
// memfd of its own. A pool spares each registration the creation and the
// teardown of a file (about a third of a small registration's cost), and
// peers map it once for all the process's small regions. Offsets are never
// reused, so a peer that still writes through a stale mapping of a
// deregistered range can only fill that hole again (a page the pool holds
// until it is closed), never reach another region; a pool whose offsets are
// used up is closed once its last range is gone. Holes are punched a span
// at a time: the ranges freed one after the other at adjacent offsets (the
// common case: a buffer registered and deregistered again and again) wait
// in one span, punched when it reaches kPunchSpan bytes or the next freed
// range does not adjoin it (so at most that much memory waits per pool).
struct SharedRange {
	uintptr_t start, end;
	int fd;
	uint32_t ino;
	int refs;
	uint64_t off; // file offset of start
	int pool;     // index in g_pools, or -1: fd is the range's own memfd
};
static pthread_mutex_t g_share_lock = PTHREAD_MUTEX_INITIALIZER;
static SharedRange g_shared[1024];
// Slots of g_shared below this index may be in use (scans stop there).
static int g_shared_top;

struct PoolFile {
	int fd = -1;
	uint32_t ino = 0;
	uint64_t next = 0; // first offset never given out
	int ranges = 0;    // live ranges in it
	uint64_t punch_lo = 0, punch_hi = 0; // freed, hole not punched yet
};
constexpr uint64_t kPoolBytes = uint64_t(1) << 30;
constexpr uint64_t kPoolRange = uint64_t(64) << 20;
constexpr uint64_t kPunchSpan = uint64_t(1) << 20;
static PoolFile g_pools[8];
static int g_pool_cur = -1; // the pool new ranges come from, or -1

static void pool_punch(PoolFile &p);

// Closes pool i (its pages go with the file, unless the application still
// maps some: the freed ones are punched first); its slot is free again
// (g_share_lock held).
static void pool_close(int i)
{
	pool_punch(g_pools[i]);
	close(g_pools[i].fd);
	g_pools[i] = PoolFile{};
	if (g_pool_cur == i)
		g_pool_cur = -1;
}

// Gives back the pages of p's freed span (g_share_lock held).
static void pool_punch(PoolFile &p)
{
	if (p.punch_hi > p.punch_lo)
		fallocate(p.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off_t(p.punch_lo),
			  off_t(p.punch_hi - p.punch_lo));
	p.punch_lo = p.punch_hi = 0;
}

// n bytes (whole pages, at most kPoolRange) of a pool file: its index, and
// the offset in *off; -1 when no pool can be had (the caller makes a file
// of its own then). g_share_lock held.
static int pool_take(uint64_t n, uint64_t *off)
{
	int c = g_pool_cur;
	if (c >= 0 && g_pools[c].next + n > kPoolBytes) {
		if (!g_pools[c].ranges)
			pool_close(c);
		else
			pool_punch(g_pools[c]);
		g_pool_cur = c = -1; // used up: closed with its last range
	}
	if (c < 0) {
		for (int i = 0; i < int(sizeof(g_pools) / sizeof(g_pools[0])) && c < 0; i++)
			if (g_pools[i].fd < 0)
				c = i;
		if (c < 0)
			return -1;
		int fd = sys_memfd_create("openverbs-soft-mr", MFD_CLOEXEC);
		if (fd < 0)
			return -1;
		if (ftruncate(fd, off_t(kPoolBytes)) != 0) {
			close(fd);
			return -1;
		}
		g_pools[c] = PoolFile{fd, fd_ino(fd), 0, 0};
		g_pool_cur = c;
	}
	PoolFile &p = g_pools[c];
	*off = p.next;
	p.next += n;
	p.ranges++;
	return c;
}

// A range [off, off+n) of pool i is gone; its pages are given back when
// `release` (not while the application still maps them).
static void pool_drop(int i, uint64_t off, uint64_t n, bool release)
{
	PoolFile &p = g_pools[i];
	if (release) {
		if (p.punch_hi != off) {
			pool_punch(p);
			p.punch_lo = off;
		}
		p.punch_hi = off + n;
		if (p.punch_hi - p.punch_lo >= kPunchSpan)
			pool_punch(p);
	}
	if (!--p.ranges && i != g_pool_cur)
		pool_close(i); // its pages go with the file
}

// Spare pages: a small range's new pages at registration (pool pages) and
// at deregistration (private anonymous pages) are cut from a spare mapping
// made for kSpareBytes at a time and populated (MAP_POPULATE), so no call
// allocates them one range at a time. Registration copies the bytes into the
// shared spare with plain stores (no pwrite) and maps those pages of the
// pool over the range (MAP_FIXED: they hold every byte before they replace
// it); the spare keeps its own mapping of them, unused, until it is dropped
// (a hole punched in the pool unmaps that too). Deregistration moves the
// anonymous spare's pages into place (replace_range's mremap). The shared
// spare maps offsets of the current pool (taken from it as one range; each
// range cut from it counts as a range of its own). g_share_lock held. A
// fork() child unmaps the parent's spares first thing (the shared one maps
// the parent's file).
struct Spare {
	uint8_t *base = nullptr; // the mapping (nullptr: none)
	uint8_t *p = nullptr;    // next unused byte
	size_t left = 0;         // bytes from p
	int pool = -1;           // shared spare: its pool and the file offset of p
	uint64_t off = 0;
};
constexpr size_t kSpareBytes = size_t(128) << 10;
constexpr size_t kSpareMax = size_t(16) << 10; // larger ranges map their own pages
static Spare g_spare_file, g_spare_anon;

// Unmaps spare s (the anonymous spare: what is left of it, the rest was
// moved away); `give_back`: the unused pool pages of the shared spare are
// given back and its range dropped (not in a fork() child, whose pools are
// the parent's).
static void spare_drop(Spare &s, bool give_back)
{
	if (s.base && s.pool >= 0)
		sys_munmap(s.base, kSpareBytes);
	else if (s.base && s.left)
		sys_munmap(s.p, s.left);
	if (give_back && s.pool >= 0)
		pool_drop(s.pool, s.off, s.left, s.left != 0);
	s = Spare{};
}

// n bytes (whole pages, at most kSpareMax) of populated private anonymous
// memory from the anonymous spare; nullptr when none can be mapped.
static uint8_t *spare_anon_take(size_t n)
{
	Spare &s = g_spare_anon;
	if (s.left < n) {
		spare_drop(s, false);
		void *p = sys_mmap(nullptr, kSpareBytes, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (p == MAP_FAILED)
			return nullptr;
		s.base = s.p = static_cast<uint8_t *>(p);
		s.left = kSpareBytes;
	}
	uint8_t *r = s.p;
	s.p += n;
	s.left -= n;
	return r;
}

// n bytes (whole pages, at most kSpareMax) of populated pool pages, a range
// of their own in pool *pool at file offset *off: the shared spare's
// mapping of them (never unmapped alone), or nullptr when none can be had.
static uint8_t *spare_file_take(size_t n, int *pool, uint64_t *off)
{
	Spare &s = g_spare_file;
	if (s.left < n) {
		spare_drop(s, true);
		uint64_t o = 0;
		int i = pool_take(kSpareBytes, &o);
		if (i < 0)
			return nullptr;
		void *p = sys_mmap(nullptr, kSpareBytes, PROT_READ | PROT_WRITE,
				   MAP_SHARED | MAP_POPULATE, g_pools[i].fd, off_t(o));
		if (p == MAP_FAILED) {
			pool_drop(i, o, kSpareBytes, true);
			return nullptr;
		}
		auto *b = static_cast<uint8_t *>(p);
		s = Spare{b, b, kSpareBytes, i, o};
	}
	uint8_t *r = s.p;
	*pool = s.pool;
	*off = s.off;
	g_pools[s.pool].ranges++;
	s.p += n;
	s.off += n;
	s.left -= n;
	return r;
}

// /proc/self/maps of this process, kept open for PROCMAP_QUERY (-1: not
// opened yet; reopened in a child, whose maps are its own).
static int g_maps_fd = -1;

// PROCMAP_QUERY, the ioctl of /proc/PID/maps that answers for one address
// (Linux 6.11, <linux/fs.h>; older uapi headers lack it): the layout and
// values of the kernel's struct procmap_query.
struct ProcmapQuery {
	uint64_t size, query_flags, query_addr, vma_start, vma_end, vma_flags, vma_page_size,
		vma_offset, inode;
	uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};
constexpr unsigned long kProcmapQuery = _IOWR('f', 17, ProcmapQuery);
constexpr uint64_t kVmaReadable = 1, kVmaWritable = 2, kVmaExecutable = 4, kVmaShared = 8;

// One mapping of this process, as PROCMAP_QUERY or /proc/self/maps gives it.
struct Vma {
	uintptr_t start, end;
	uint64_t offset, inode;
	bool readable, writable, executable, shared;
	bool anon; // no file behind it, and no name or "[heap]" (not a stack)
};

// True when the mappings of [start, end) cover it without a gap and `ok`
// holds for each of them (called in address order). Asks the kernel with
// PROCMAP_QUERY, one mapping at a time; reads /proc/self/maps where the
// kernel lacks it. Without `names` a file mapping's path is not asked for
// (the kernel builds it for every query that has room for it) and Vma::anon
// is false for a mapping with a file behind it only: a named anonymous
// mapping or a stack counts as anonymous then.
template <class Pred> static bool every_vma(uintptr_t start, uintptr_t end, bool names, Pred ok)
{
	if (g_maps_fd < 0)
		g_maps_fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	uintptr_t covered = start;
	while (g_maps_fd >= 0 && covered < end) {
		// Room for any name (a file's path): a longer one fails the
		// query (ENAMETOOLONG) and sends every check to the maps file.
		char name[PATH_MAX];
		ProcmapQuery q = {};
		q.size = sizeof(q);
		q.query_addr = covered;
		if (names) {
			q.vma_name_addr = uintptr_t(name);
			q.vma_name_size = sizeof(name);
		}
		if (ioctl(g_maps_fd, kProcmapQuery, &q) != 0) {
			if (errno == ENOENT) // a gap
				return false;
			break; // no PROCMAP_QUERY: the maps file below
		}
		Vma v = {uintptr_t(q.vma_start), uintptr_t(q.vma_end), q.vma_offset, q.inode,
			 (q.vma_flags & kVmaReadable) != 0, (q.vma_flags & kVmaWritable) != 0,
			 (q.vma_flags & kVmaExecutable) != 0, (q.vma_flags & kVmaShared) != 0,
			 q.inode == 0 && q.dev_major == 0 && q.dev_minor == 0 &&
				 (q.vma_name_size == 0 || strcmp(name, "[heap]") == 0)};
		if (v.start > covered || v.end <= covered || !ok(v))
			return false;
		covered = v.end;
	}
	if (covered >= end)
		return true;
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return false;
	char line[512];
	bool good = true;
	while (good && covered < end && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, inode;
		unsigned dev_major, dev_minor;
		char perms[8];
		unsigned long long off;
		int name_at = 0;
		if (sscanf(line, "%lx-%lx %7s %llx %x:%x %lu %n", &lo, &hi, perms, &off, &dev_major,
			   &dev_minor, &inode, &name_at) < 7 ||
		    strlen(perms) < 4)
			continue;
		if (hi <= covered)
			continue;
		const char *name = name_at ? line + name_at : "";
		Vma v = {lo, hi, off, inode, perms[0] == 'r', perms[1] == 'w', perms[2] == 'x',
			 perms[3] == 's',
			 inode == 0 && dev_major == 0 && dev_minor == 0 &&
				 (name[0] == '\n' || name[0] == 0 || strncmp(name, "[heap]", 6) == 0)};
		good = v.start <= covered && ok(v);
		covered = hi;
	}
	fclose(f);
	return good && covered >= end;
}

// True when every page of [start, end) is still mapped shared from the file
// with inode number `ino` at the offset registration gave it (offset `off`
// at `start`): the application may have unmapped a registered range, or mapped
// something else there, before deregistering it (UCX's registration cache
// deregisters freed memory at cleanup), and such pages are no longer ours to
// copy or replace.
//
// A mapping may begin before start or end after end: the kernel merges the
// mappings of adjacent ranges that are adjacent in the file too (two ranges
// of a pool file registered one after the other), so what is checked is
// that each mapping puts file offset off at address start.
static bool still_mapped_from(uintptr_t start, uintptr_t end, uint32_t ino, uint64_t off)
{
	return every_vma(start, end, false, [&](const Vma &v) {
		return uint32_t(v.inode) == ino && v.shared && v.offset + start == off + v.start;
	});
}

// [start, end) is private anonymous read/write memory (heap, anonymous mmap;
// not a stack, not named, not executable).
static bool anon_private_rw(uintptr_t start, uintptr_t end)
{
	return every_vma(start, end, true, [](const Vma &v) {
		return v.anon && v.readable && v.writable && !v.executable && !v.shared;
	});
}

// userfaultfd features this code uses that older uapi headers lack
// (<linux/userfaultfd.h> of Linux 6.4: write protection of pages never
// touched yet).
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif

// The process's userfaultfd for write fences, opened once (creating one
// costs more than the rest of a small registration) with the features the
// kernel grants (g_uffd_features); -1 when there is none. Used under
// g_share_lock only; a child closes its copy.
static int g_uffd = -1;
static uint64_t g_uffd_features;
static bool g_uffd_tried;

static int open_uffd(uint64_t features, uint64_t *got)
{
	int f = int(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
	if (f < 0 && errno == EPERM)
		f = int(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
	if (f < 0)
		return -1;
	struct uffdio_api api = {};
	api.api = UFFD_API;
	api.features = features;
	if (ioctl(f, UFFDIO_API, &api) != 0) {
		close(f);
		return -1;
	}
	*got = api.features;
	return f;
}

static int fence_uffd()
{
	if (!g_uffd_tried) {
		g_uffd_tried = true;
		uint64_t want = UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_HUGETLBFS_SHMEM;
		g_uffd = open_uffd(want | UFFD_FEATURE_WP_UNPOPULATED, &g_uffd_features);
		if (g_uffd < 0)
			g_uffd = open_uffd(want, &g_uffd_features);
		if (g_uffd < 0)
			g_uffd = open_uffd(UFFD_FEATURE_PAGEFAULT_FLAG_WP, &g_uffd_features);
		if (g_uffd >= 0 && !(g_uffd_features & UFFD_FEATURE_PAGEFAULT_FLAG_WP)) {
			close(g_uffd);
			g_uffd = -1;
		}
	}
	return g_uffd;
}

// Makes writers of a range wait while it is copied and replaced (see
// above). done() wakes them once the range is replaced; undo() (or the
// destructor, when done() was not called) lifts the protection of a range
// that stays as it was.
struct WriteFence {
	int fd = -1;
	uintptr_t start = 0;
	size_t len = 0;
	~WriteFence() { undo(); }
	void wake()
	{
		struct uffdio_range r = {start, len};
		ioctl(fd, UFFDIO_WAKE, &r);
	}
	// The range was replaced by a new mapping (not registered with the
	// userfaultfd): waiting writers retry there.
	void done()
	{
		if (fd >= 0)
			wake();
		fd = -1;
	}
	void undo()
	{
		if (fd < 0)
			return;
		struct uffdio_writeprotect wp = {};
		wp.range.start = start;
		wp.range.len = len;
		wp.mode = 0; // lifts the protection and wakes the writers
		ioctl(fd, UFFDIO_WRITEPROTECT, &wp);
		struct uffdio_range r = {start, len};
		ioctl(fd, UFFDIO_UNREGISTER, &r);
		wake();
		fd = -1;
	}
	// Write-protects [s, s+l): every page, touched or not, of private
	// anonymous memory (shmem: the memfd's pages, all present).
	bool protect(uintptr_t s, size_t l, bool shmem)
	{
		int f = fence_uffd();
		if (f < 0 || (shmem && !(g_uffd_features & UFFD_FEATURE_WP_HUGETLBFS_SHMEM)))
			return false;
		// Without write protection of untouched pages, touch them first
		// (a write there would otherwise fault in a page nobody copies).
		if (!shmem && !(g_uffd_features & UFFD_FEATURE_WP_UNPOPULATED) &&
		    sys_madvise(reinterpret_cast<void *>(s), l, MADV_POPULATE_WRITE) != 0)
			return false;
		struct uffdio_register reg = {};
		reg.range.start = s;
		reg.range.len = l;
		reg.mode = UFFDIO_REGISTER_MODE_WP;
		if (ioctl(f, UFFDIO_REGISTER, &reg) != 0)
			return false;
		fd = f;
		start = s;
		len = l;
		struct uffdio_writeprotect wp = {};
		wp.range.start = s;
		wp.range.len = l;
		wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
		if (ioctl(f, UFFDIO_WRITEPROTECT, &wp) != 0) {
			undo();
			return false;
		}
		return true;
	}
};

// After ibv_fork_init(3) registered ranges are MADV_DONTFORK; a replaced
// mapping gets the advice again (the library's reference counts stay
// right: it advises MADV_DOFORK itself when the last registration goes).
static void keep_dontfork(uintptr_t start, size_t len)
{
	if (ibv_is_fork_initialized() == IBV_FORK_ENABLED)
		sys_madvise(reinterpret_cast<void *>(start), len, MADV_DONTFORK);
}

// Replaces [start, start+len) by a new mapping holding the range's bytes,
// writers of the range waiting meanwhile unless `alone` (a child after
// fork(): no other thread). `fill` runs behind the fence: it returns the new
// mapping (same length) with the bytes in it, or MAP_FAILED; or `at` itself
// when it has already put the new mapping there (with MAP_FIXED: only a
// mapping whose bytes were all in place before it became visible, so no
// write made after the swap is overwritten). False, nothing changed, when
// the range cannot be protected or moved. Once `fill` has returned a new
// mapping, it is replace_range's: moved into place, or unmapped on failure.
template <class Fill>
static bool replace_range(uintptr_t start, size_t len, bool shmem_source, bool alone, Fill fill)
{
	auto *at = reinterpret_cast<void *>(start);
	WriteFence fence;
	if (!alone && !fence.protect(start, len, shmem_source))
		return false;
	void *fresh = fill(at);
	if (fresh == MAP_FAILED)
		return false;
	void *q = fresh == at ? at
			      : sys_mremap(fresh, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, at);
	if (q != at) {
		// Failed: `fresh` is still where it was (with an interposed mremap
		// it could also have gone elsewhere: unmap wherever it is now).
		sys_munmap(q == MAP_FAILED ? fresh : q, len);
		return false;
	}
	fence.done(); // waiting writers retry on the new pages
	keep_dontfork(start, len);
	return true;
}

// What privatize did with a range.
enum Privatized {
	PRIV_DONE,   // private anonymous memory again: the file's pages are unused
	PRIV_ALONE,  // not ours to touch (unmapped, replaced, or absent in a child)
	PRIV_FAILED, // still mapped from the file (it could not be protected)
};

// Replaces [start, end), mapped from the file of inode ino at offset off,
// by a private anonymous copy (undoes the sharing).
static Privatized privatize(uintptr_t start, uintptr_t end, uint32_t ino, uint64_t off, bool alone)
{
	// Absent in a child when the range was marked MADV_DONTFORK
	// (ibv_fork_init): nothing to do then.
	if (alone && sys_madvise(reinterpret_cast<void *>(start), end - start, MADV_NORMAL) != 0)
		return PRIV_ALONE;
	// Unmapped or mapped anew by the application since registration: its
	// memory now, left as it is (what is still mapped from the file keeps
	// the file's pages until the application unmaps it).
	if (!still_mapped_from(start, end, ino, off)) {
		softlog(3, "registered pages at %#lx (%lu bytes) were unmapped or replaced before "
			   "deregistration: left as they are",
			(unsigned long)start, (unsigned long)(end - start));
		return PRIV_ALONE;
	}
	size_t len = end - start;
	// The private pages allocated before the fence, in the same call (not
	// one page fault per page during the copy); a small range's from the
	// spare.
	void *p = len <= kSpareMax ? spare_anon_take(len) : nullptr;
	if (!p)
		p = sys_mmap(nullptr, len, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED)
		return PRIV_FAILED;
	bool filled = false; // replace_range owns p from then on (unmaps it on failure)
	bool ok = replace_range(start, len, true, alone, [&](void *at) {
		filled = true;
		copy_pages(p, at, len);
		return p;
	});
	if (!ok) {
		if (!filled)
			sys_munmap(p, len);
		softlog(2, "registered pages at %#lx (%lu bytes) stay backed by a shared file: "
			   "they could not be write protected to copy them back",
			(unsigned long)start, (unsigned long)len);
	}
	return ok ? PRIV_DONE : PRIV_FAILED;
}

// Writes [src, src+len) at offset off of fd: the file's pages are
// allocated by the copy itself (never zeroed first, no page fault per page).
static bool fill_file(int fd, const void *src, size_t len, uint64_t off)
{
	const char *b = static_cast<const char *>(src);
	for (size_t done = 0; done < len;) {
		ssize_t n = sys_pwrite(fd, b + done, len - done, off_t(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		done += size_t(n);
	}
	return true;
}

// The largest region (in whole pages) whose pages registration converts:
// beyond it the copy would cost what a kernel device pays to pin far more
// memory (openverbs-soft(7)), so such a region stays where it is and peers
// reach it with process_vm_*. OPENVERBS_SOFT_SHARE_MAX (bytes; ignored in
// setuid programs) changes it.
static size_t share_max()
{
	static size_t v = [] {
		size_t d = size_t(64) << 20;
		const char *e = secure_getenv("OPENVERBS_SOFT_SHARE_MAX");
		if (!e || !*e)
			return d;
		char *endp = nullptr;
		const int saved = errno;
		errno = 0;
		unsigned long long x = strtoull(e, &endp, 0);
		bool bad = errno || *endp;
		errno = saved;
		return bad ? d : size_t(x);
	}();
	return v;
}

// Finds or makes the memfd backing the pages that hold [addr, addr+len),
// whole or in part: a region that starts or ends inside a page (a small
// buffer, a UD receive buffer with its GRH, an eager buffer) gets that
// whole page converted, so peers reach every byte of it with loads and
// stores. The rest of such a page (the process's other data) is converted
// with it, under the same write fence, so none of its writes is lost either;
// peers still reach only the region's bytes (every access is checked
// against the region's bounds first). Regions whose pages fall inside an
// already converted range share its memfd (two small regions in one page,
// or a small one inside a large one), counted in refs: the pages turn back
// into private memory when the last of them is deregistered.
// A region whose pages overlap one converted range in part (two buffers of
// an allocator side by side, the second registered after the first took
// the page they share) gets its pages beyond that range converted, on its
// larger side: the backing covers that part of the region only (b->win_lo,
// win_hi) and peers reach the bytes in the other range's pages with
// process_vm_*. Overlapping two ranges, the region stays private.
// Returns the slot and fills *b, or -1 (b->fd -1: peers use process_vm_*).
static int share_region(void *addr, size_t len, MrBacking *b)
{
	*b = MrBacking{-1, 0, 0};
	uintptr_t a = uintptr_t(addr);
	if (len > SIZE_MAX - a - 4095)
		return -1;
	uintptr_t ps = a & ~uintptr_t(4095);
	uintptr_t pe = (a + len + 4095) & ~uintptr_t(4095);
	pthread_mutex_lock(&g_share_lock);
	int freeslot = -1, overlap = -1;
	for (int i = 0; i < g_shared_top; i++) {
		SharedRange &r = g_shared[i];
		if (!r.refs) {
			if (freeslot < 0)
				freeslot = i;
			continue;
		}
		if (ps >= r.start && pe <= r.end) {
			// A range the application has unmapped or replaced
			// since is not shared again: peers use process_vm_*.
			if (!still_mapped_from(r.start, r.end, r.ino, r.off)) {
				pthread_mutex_unlock(&g_share_lock);
				softlog(3, "region at %#lx (%zu bytes) stays private: the converted "
					   "pages around it were unmapped or replaced", (unsigned long)a, len);
				return -1;
			}
			r.refs++;
			*b = MrBacking{r.fd, r.ino, r.off + (a - r.start)};
			pthread_mutex_unlock(&g_share_lock);
			return i;
		}
		if (ps < r.end && pe > r.start) {
			if (overlap >= 0) { // two ranges: leave it alone
				pthread_mutex_unlock(&g_share_lock);
				softlog(3, "region at %#lx (%zu bytes) stays private: its pages overlap "
					   "two converted ranges in part", (unsigned long)a, len);
				return -1;
			}
			overlap = i;
		}
	}
	// The pages to convert: all of the region's, or those beyond the range
	// it overlaps, on the side with more of them.
	uintptr_t cs = ps, ce = pe;
	if (overlap >= 0) {
		const SharedRange &r = g_shared[overlap];
		uintptr_t below = r.start > ps ? r.start - ps : 0;
		uintptr_t above = pe > r.end ? pe - r.end : 0;
		if (below >= above)
			ce = r.start;
		else
			cs = r.end;
	}
	if (freeslot < 0 && g_shared_top < int(sizeof(g_shared) / sizeof(g_shared[0])))
		freeslot = g_shared_top;
	int slot = -1;
	const char *why = freeslot < 0		 ? "no free slot for another converted range"
			  : ce - cs > share_max()	 ? "larger than OPENVERBS_SOFT_SHARE_MAX"
			  : !anon_private_rw(cs, ce) ? "not private anonymous read-write memory"
						     : nullptr;
	if (!why) {
		size_t n = ce - cs;
		uint64_t off = 0;
		int pool = -1;
		// A small range: pool pages of the spare, filled with plain
		// stores and moved into place.
		uint8_t *spare = n <= kSpareMax ? spare_file_take(n, &pool, &off) : nullptr;
		if (!spare && n <= kPoolRange)
			pool = pool_take(n, &off);
		int fd = pool >= 0 ? g_pools[pool].fd : sys_memfd_create("openverbs-soft-mr", MFD_CLOEXEC);
		bool ok = fd >= 0 && replace_range(cs, n, false, false, [&](void *at) -> void * {
			// The file holds every byte before its mapping replaces
			// the range (in one call: no window without a mapping).
			if (spare)
				copy_pages(spare, at, n);
			else if (!fill_file(fd, at, n, off))
				return MAP_FAILED;
			return sys_mmap(at, n, PROT_READ | PROT_WRITE,
					MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd, off_t(off));
		});
		if (ok) {
			uint32_t ino = pool >= 0 ? g_pools[pool].ino : fd_ino(fd);
			g_shared[freeslot] = SharedRange{cs, ce, fd, ino, 1, off, pool};
			g_shared_top = std::max(g_shared_top, freeslot + 1);
			// The region's bytes in [cs, ce).
			uintptr_t wl = std::max(a, cs), wh = std::min(a + len, ce);
			*b = MrBacking{fd, ino, off + (wl - cs)};
			if (overlap >= 0) {
				b->win_lo = wl - a;
				b->win_hi = wh - a;
			}
			slot = freeslot;
		} else if (pool >= 0) {
			// What the copy wrote (if anything) goes; the offsets
			// stay unused.
			pool_drop(pool, off, n, true);
		} else if (fd >= 0) {
			close(fd);
		}
		if (!ok)
			why = "its pages could not be converted";
	}
	pthread_mutex_unlock(&g_share_lock);
	if (slot < 0)
		softlog(3, "region at %#lx (%zu bytes) stays private: %s", (unsigned long)a, len, why);
	else if (overlap >= 0)
		softlog(4, "region at %#lx (%zu bytes): bytes %#lx-%#lx shared, the rest in "
			   "converted pages of another range", (unsigned long)a, len,
			(unsigned long)b->win_lo, (unsigned long)b->win_hi);
	return slot;
}

// Forgets shared range r (its pages turned back, or left to the
// application); the pool gives back the file's pages when `punch`.
static void forget_range(SharedRange &r, bool punch)
{
	if (r.pool >= 0) {
		pool_drop(r.pool, r.off, r.end - r.start, punch);
	} else {
		close(r.fd);
	}
	r = SharedRange{};
}

static void unshare_region(int slot)
{
	if (slot < 0)
		return;
	pthread_mutex_lock(&g_share_lock);
	SharedRange &r = g_shared[slot];
	if (r.refs && !--r.refs) {
		// Back to private memory: the pages go back to the allocator as
		// ordinary anonymous memory. The file's pages are then unused
		// (our mapping of them is gone); pages the application still
		// maps stay with it.
		forget_range(r, privatize(r.start, r.end, r.ino, r.off, false) == PRIV_DONE);
	}
	pthread_mutex_unlock(&g_share_lock);
}

// fork(): a child's copies of converted pages must not stay shared with the
// parent (its registrations are not valid there anyway, and the first and
// last page of a small region hold other data of the process). The child
// turns them back into private memory before fork() returns there, and the
// parent's fork() returns only once the child has done so: the child's
// copy is what the parent's memory held at fork(), not a later write of the
// forking thread. (Other threads of the parent that write into those pages
// during the child's copy, a few microseconds per page, can still be seen
// by the child; openverbs-soft(7).) After ibv_fork_init(3) converted pages
// are MADV_DONTFORK, the child has none of them and nobody waits.
static int g_fork_done[2] = {-1, -1};

static void share_atfork_prepare()
{
	pthread_mutex_lock(&g_share_lock);
	bool any = false;
	for (auto &r : g_shared)
		any = any || r.refs;
	if (any && ibv_is_fork_initialized() != IBV_FORK_ENABLED &&
	    pipe2(g_fork_done, O_CLOEXEC) != 0)
		g_fork_done[0] = g_fork_done[1] = -1;
}

static void share_atfork_parent()
{
	if (g_fork_done[1] >= 0) {
		close(g_fork_done[1]);
		char c;
		// The child closes its end when its pages are private (or exits).
		while (read(g_fork_done[0], &c, 1) < 0 && errno == EINTR)
			;
		close(g_fork_done[0]);
		g_fork_done[0] = g_fork_done[1] = -1;
	}
	pthread_mutex_unlock(&g_share_lock);
}

static void share_atfork_child()
{
	// The files are the parent's too: the child gives back no page of
	// them, it only closes its descriptors (and unmaps the spares: the
	// shared one maps the parent's pool, never to be used here).
	spare_drop(g_spare_file, false);
	spare_drop(g_spare_anon, false);
	for (auto &r : g_shared)
		if (r.refs) {
			privatize(r.start, r.end, r.ino, r.off, true);
			if (r.pool < 0)
				close(r.fd);
			r = SharedRange{};
		}
	g_shared_top = 0;
	for (PoolFile &p : g_pools)
		if (p.fd >= 0)
			close(p.fd);
	for (PoolFile &p : g_pools)
		p = PoolFile{};
	g_pool_cur = -1;
	// The parent's userfaultfd and maps: this process makes its own.
	if (g_uffd >= 0)
		close(g_uffd);
	g_uffd = -1;
	g_uffd_tried = false;
	if (g_maps_fd >= 0)
		close(g_maps_fd);
	g_maps_fd = -1;
	if (g_fork_done[1] >= 0) {
		close(g_fork_done[0]);
		close(g_fork_done[1]);
		g_fork_done[0] = g_fork_done[1] = -1;
	}
	pthread_mutex_init(&g_share_lock, nullptr);
}

// The process's last context has closed: its userfaultfd and its
// /proc/self/maps descriptor go too (the next registration that needs them
// opens them again).
void share_caches_close()
{
	pthread_mutex_lock(&g_share_lock);
	spare_drop(g_spare_file, true);
	spare_drop(g_spare_anon, false);
	for (int i = 0; i < int(sizeof(g_pools) / sizeof(g_pools[0])); i++) {
		if (g_pools[i].fd >= 0 && !g_pools[i].ranges)
			pool_close(i);
		else if (g_pools[i].fd >= 0)
			pool_punch(g_pools[i]);
	}
	if (g_uffd >= 0)
		close(g_uffd);
	g_uffd = -1;
	g_uffd_tried = false;
	if (g_maps_fd >= 0)
		close(g_maps_fd);
	g_maps_fd = -1;
	pthread_mutex_unlock(&g_share_lock);
}

__attribute__((constructor)) static void share_init()
{
	pthread_atfork(share_atfork_prepare, share_atfork_parent, share_atfork_child);
}

// Enters a write section of e (device lock held) and fills a new key's
// entry, this process its owner and nothing bound; the caller adds the
// backing and the kind, then leaves with key_write_unlock(e, returned).
uint64_t key_write_new(MrEntry &e, Segment *seg, uint32_t key, uint32_t pd_id,
		       uint32_t access, uint64_t addr, uint64_t iova, uint64_t length,
		       uint32_t mw_type)
{
	uint64_t ws = key_write_lock(e);
	kst(e.key, key);
	kst(e.owner, seg->my_proc);
	kst(e.owner_pid, self_pid());
	kst(e.pd_id, pd_id);
	kst(e.access, access);
	kst(e.addr, addr);
	kst(e.iova, iova);
	kst(e.length, length);
	kst(e.mw_type, mw_type);
	kst(e.parent, 0u);
	kst(e.parent_seq, 0u);
	kst(e.bound_qpn, 0u);
	return ws;
}

// Inside a write section of e (keys.h).
// The part b names of the region is shared (all of it unless share_region
// gave a window).
static void fill_backing(MrEntry &e, const MrBacking &b, uint64_t iova, uint64_t length)
{
	kst(e.memfd, b.fd);
	kst(e.memfd_ino, b.fd >= 0 ? b.ino : 0u);
	kst(e.share_lo, b.fd >= 0 ? iova + b.win_lo : 0u);
	kst(e.share_hi, b.fd >= 0 ? iova + (b.win_hi ? b.win_hi : length) : 0u);
	kst(e.memfd_off, b.file_off);
}

void clear_backing(MrEntry &e)
{
	fill_backing(e, MrBacking{-1, 0, 0}, 0, 0);
}

// Gives mr a key of the device for [addr, addr+length) of this process,
// accessed at iova, its whole range backed by b (b.fd < 0: no shareable
// backing, peers use process_vm_*), and fills its public fields. False
// when the key table is full (nothing changed then).
bool mr_publish(struct ibv_pd *ibpd, SoftMr *mr, void *addr, uint64_t iova, size_t length,
		int access, const MrBacking &b)
{
	Segment *seg = to_sctx(ibpd->context)->seg;
	shm_lock(&seg->hdr->lock);
	int slot = key_slot_alloc(seg);
	if (slot < 0) {
		shm_unlock(&seg->hdr->lock);
		return false;
	}
	MrEntry &e = seg->hdr->mrs[slot];
	uint32_t key = make_key(seg, slot);
	uint64_t ws = key_write_new(e, seg, key, to_spd(ibpd)->id, uint32_t(access), uintptr_t(addr),
				    iova, length, 0);
	fill_backing(e, b, iova, length);
	e.kind.store(KEY_MR, std::memory_order_relaxed);
	key_write_unlock(e, ws);
	shm_unlock(&seg->hdr->lock);
	mr->slot = slot;
	mr->vmr.mr_type = IBV_MR_TYPE_MR;
	mr->vmr.access = access;
	struct ibv_mr &m = mr->vmr.ibv_mr;
	m.context = ibpd->context;
	m.pd = ibpd;
	to_spd(ibpd)->users.fetch_add(1);
	m.addr = addr;
	m.length = length;
	m.handle = slot;
	m.lkey = m.rkey = key;
	return true;
}

struct ibv_mr *soft_reg_mr(struct ibv_pd *ibpd, void *addr, size_t length, uint64_t hca_va,
			   int access)
{
	// On-demand paging (odp.cpp): neither checked for mappings nor
	// converted; an implicit region (NULL, SIZE_MAX) covers the address
	// space at iova = virtual address.
	const bool odp = access & IBV_ACCESS_ON_DEMAND;
	const bool implicit = odp_implicit(addr, length, access);
	int rc = check_access(access);
	if (!rc && !implicit && (!length || length > kMaxMrSize))
		rc = EINVAL;
	if (!rc && implicit && hca_va)
		rc = EINVAL;
	if (rc) {
		errno = rc;
		return nullptr;
	}
	auto *mr = static_cast<SoftMr *>(calloc(1, sizeof(SoftMr)));
	if (!mr) {
		errno = ENOMEM;
		return nullptr;
	}
	MrBacking b{-1, 0, 0};
	mr->share = odp ? -1 : share_region(addr, length, &b);
	// A converted range is mapped (share_region found every page of it);
	// anything else is checked here, a region converted in part too.
	if (!odp && (mr->share < 0 || b.win_hi) && (rc = check_mapped(addr, length)) != 0) {
		unshare_region(mr->share);
		free(mr);
		errno = rc;
		return nullptr;
	}
	uint64_t iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : hca_va;
	if (!mr_publish(ibpd, mr, addr, iova, length, access, b)) {
		unshare_region(mr->share);
		free(mr);
		errno = ENOMEM;
		return nullptr;
	}
	return &mr->vmr.ibv_mr;
}

// ibv_import_mr(3): the memory region `handle` (ibv_mr.handle, its key
// slot) of the device, which must belong to pd's PD (EINVAL otherwise, or
// when it is no live region). Same keys and length; addr is NULL, as a
// kernel device reports an imported region. Its rkey works everywhere; its
// lkey as a local buffer only in the process that registered the memory
// (the pages are that process's). ibv_dereg_mr deregisters the region for
// everyone; ibv_unimport_mr frees the handle only.
struct ibv_mr *soft_import_mr(struct ibv_pd *ibpd, uint32_t handle)
{
	Segment *seg = to_sctx(ibpd->context)->seg;
	KeySnap m;
	if (handle >= kMaxMrs || !key_snapshot(seg->hdr->mrs[handle], m) || m.kind != KEY_MR ||
	    m.pd_id != to_spd(ibpd)->id) {
		errno = EINVAL;
		return nullptr;
	}
	auto *mr = static_cast<SoftMr *>(calloc(1, sizeof(SoftMr)));
	if (!mr) {
		errno = ENOMEM;
		return nullptr;
	}
	mr->slot = handle;
	mr->share = -1;
	mr->vmr.mr_type = IBV_MR_TYPE_IMPORTED_MR;
	mr->vmr.access = int(m.access);
	struct ibv_mr &r = mr->vmr.ibv_mr;
	r.context = ibpd->context;
	r.pd = ibpd;
	to_spd(ibpd)->users.fetch_add(1);
	r.addr = nullptr;
	r.length = m.length;
	r.handle = handle;
	r.lkey = r.rkey = m.key;
	return &r;
}

void soft_unimport_mr(struct ibv_mr *ibmr)
{
	if (ibmr->pd)
		to_spd(ibmr->pd)->users.fetch_sub(1);
	free(reinterpret_cast<SoftMr *>(verbs_get_mr(ibmr)));
}

#if _OPENVERBS_ABI >= 64
// rdma-core 64's DMA handles (ibv_alloc_dmah(3)): steering hints (PCIe TPH:
// the CPU whose cache should receive the device's writes, a processing hint,
// volatile or persistent memory) for the DMA of MRs registered with one. A
// software device's "DMA" is the CPU's own copy, so the hints are checked
// (as a kernel checks them: a known mask bit, PH 0..3, a memory type of the
// enum, a CPU the machine has) and kept, and change nothing else.
struct ibv_dmah *soft_alloc_dmah(struct ibv_context *context, struct ibv_dmah_init_attr *attr)
{
	constexpr uint32_t known = IBV_DMAH_INIT_ATTR_MASK_CPU_ID | IBV_DMAH_INIT_ATTR_MASK_PH |
				   IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE;
	int rc = 0;
	if (attr->comp_mask & ~known)
		rc = EOPNOTSUPP;
	else if ((attr->comp_mask & IBV_DMAH_INIT_ATTR_MASK_PH) && attr->ph > 3)
		rc = EINVAL;
	else if ((attr->comp_mask & IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE) &&
		 attr->tph_mem_type > IBV_TPH_MEM_TYPE_PM)
		rc = EINVAL;
	else if ((attr->comp_mask & IBV_DMAH_INIT_ATTR_MASK_CPU_ID) &&
		 (long)attr->cpu_id >= sysconf(_SC_NPROCESSORS_CONF))
		rc = EINVAL;
	if (rc) {
		errno = rc;
		return nullptr;
	}
	auto *d = static_cast<struct verbs_dmah *>(calloc(1, sizeof(struct verbs_dmah)));
	if (!d) {
		errno = ENOMEM;
		return nullptr;
	}
	d->dmah.context = context;
	return &d->dmah;
}

int soft_dealloc_dmah(struct ibv_dmah *dmah)
{
	free(verbs_get_dmah(dmah));
	return 0;
}

// ibv_reg_mr_ex(3) on soft devices: an address registration (the library
// has resolved IBV_REG_MR_MASK_BUF already) with an optional DMA handle of
// the same context; dma-buf registrations are not offered (EOPNOTSUPP).
struct ibv_mr *soft_reg_mr_ex(struct ibv_pd *pd, struct ibv_mr_init_attr *attr)
{
	const uint64_t mask = attr->comp_mask;
	int rc = 0;
	if (mask & ~uint64_t(IBV_REG_MR_MASK_IOVA | IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_DMAH))
		rc = EOPNOTSUPP;
	else if (!(mask & IBV_REG_MR_MASK_ADDR))
		rc = EINVAL;
	else if ((mask & IBV_REG_MR_MASK_DMAH) && (!attr->dmah || attr->dmah->context != pd->context))
		rc = EINVAL;
	else if ((mask & IBV_REG_MR_MASK_DMAH) && (attr->access & IBV_ACCESS_ON_DEMAND))
		rc = EINVAL; // hints are for pinned memory (rdma-core 64's tests expect a refusal)
	if (rc) {
		errno = rc;
		return nullptr;
	}
	uint64_t iova = (mask & IBV_REG_MR_MASK_IOVA) ? attr->iova : reinterpret_cast<uintptr_t>(attr->addr);
	return soft_reg_mr(pd, attr->addr, attr->length, iova, attr->access);
}
#endif

int soft_dereg_mr(struct verbs_mr *vmr)
{
	auto *mr = reinterpret_cast<SoftMr *>(vmr);
	SoftContext *ctx = to_sctx(vmr->ibv_mr.context);
	Segment *seg = ctx->seg;
	shm_lock(&seg->hdr->lock);
	MrEntry &e = seg->hdr->mrs[mr->slot];
	// Windows bound to this region become unusable: their parent_seq no
	// longer matches (keys.h).
	uint64_t ws = key_write_lock(e);
	if (e.kind.load(std::memory_order_relaxed) == KEY_MR && kld(e.key) == vmr->ibv_mr.lkey) {
		e.kind.store(KEY_FREE, std::memory_order_relaxed);
		key_slot_free(seg, mr->slot);
	}
	key_write_unlock(e, ws);
	shm_unlock(&seg->hdr->lock);
	unshare_region(mr->share);
	if (mr->dm)
		dm_mr_gone(mr->dm);
	if (vmr->ibv_mr.pd)
		to_spd(vmr->ibv_mr.pd)->users.fetch_sub(1);
	free(mr);
	return 0;
}

static int rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd, void *addr,
		    size_t length, int access);

// ibv_rereg_mr(3): 0, or an errno value also left in errno (the library
// answers IBV_REREG_MR_ERR_CMD and keeps errno, as a failed command would).
int soft_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd, void *addr,
		  size_t length, int access)
{
	int rc = rereg_mr(vmr, flags, pd, addr, length, access);
	if (rc)
		errno = rc;
	return rc;
}

static int rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd, void *addr,
		    size_t length, int access)
{
	auto *mr = reinterpret_cast<SoftMr *>(vmr);
	if (flags & ~(IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD |
		      IBV_REREG_MR_CHANGE_ACCESS))
		return EINVAL;
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		if (int rc = check_access(access))
			return rc;
	// A region stays on-demand paged, or pinned, for its whole life (the
	// two are backed differently); an implicit region keeps its range.
	const bool odp = vmr->access & IBV_ACCESS_ON_DEMAND;
	// Device memory regions keep their memory (ibv_reg_dm_mr(3)).
	if (mr->dm && (flags & (IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS)))
		return EOPNOTSUPP;
	if ((flags & IBV_REREG_MR_CHANGE_ACCESS) && odp != bool(access & IBV_ACCESS_ON_DEMAND))
		return EOPNOTSUPP;
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		if (odp_implicit(vmr->ibv_mr.addr, vmr->ibv_mr.length, vmr->access))
			return EOPNOTSUPP;
		if (!length || length > kMaxMrSize || (!odp && check_mapped(addr, length)))
			return EINVAL;
	}
	if ((flags & IBV_REREG_MR_CHANGE_PD) && !pd)
		return EINVAL;
	Segment *seg = to_sctx(vmr->ibv_mr.context)->seg;
	// The new backing first (slow: it may convert pages), outside the
	// entry's write section; the old one goes once the entry no longer
	// names it.
	int old_share = mr->share;
	MrBacking nb{-1, 0, 0};
	if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && !odp)
		mr->share = share_region(addr, length, &nb);
	shm_lock(&seg->hdr->lock);
	MrEntry &e = seg->hdr->mrs[mr->slot];
	// Readers see the old registration or the new one, whole (keys.h).
	uint64_t ws = key_write_lock(e);
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		fill_backing(e, nb, uintptr_t(addr), length);
		kst(e.addr, uintptr_t(addr));
		kst(e.iova, uintptr_t(addr));
		kst(e.length, length);
		vmr->ibv_mr.addr = addr;
		vmr->ibv_mr.length = length;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		kst(e.pd_id, to_spd(pd)->id);
		to_spd(pd)->users.fetch_add(1);
		if (vmr->ibv_mr.pd)
			to_spd(vmr->ibv_mr.pd)->users.fetch_sub(1);
		vmr->ibv_mr.pd = pd;
	}
	if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
		kst(e.access, uint32_t(access));
		vmr->access = access;
	}
	key_write_unlock(e, ws);
	shm_unlock(&seg->hdr->lock);
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION)
		unshare_region(old_share);
	return 0;
}

} // namespace ovsoft
