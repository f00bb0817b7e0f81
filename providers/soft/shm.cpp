// openverbs software RDMA device: shared segment, arena, rings, notifications.
#include "shm.h"
#include "keys.h"
#include "log.h"
#include "sysmm.h"
#include <infiniband/openverbs.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <ctime>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ovsoft {

// ---------------------------------------------------------------- mutexes

void shm_mutex_init(ShmMutex *m)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&m->m, &a);
	pthread_mutexattr_destroy(&a);
}

void shm_lock(ShmMutex *m)
{
	int rc = pthread_mutex_lock(&m->m);
	if (rc == EOWNERDEAD) {
		// The holder died: the tables it was editing are checked entry by
		// entry by every reader anyway, so the lock is simply taken over.
		pthread_mutex_consistent(&m->m);
	}
}

void shm_unlock(ShmMutex *m) { pthread_mutex_unlock(&m->m); }

// ---------------------------------------------------------------- processes

uint64_t process_start_time(int32_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	const char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	// Fields after the command name start at field 3 (state); start time is 22.
	int field = 2;
	for (; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	return strtoull(p, nullptr, 10);
}

bool process_alive(int32_t pid, uint64_t start_time)
{
	if (pid <= 0)
		return false;
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return false;
	if (start_time) {
		uint64_t now = process_start_time(pid);
		if (now && now != start_time)
			return false; // pid reused by another process
		if (!now)
			return false; // vanished (or a zombie being reaped)
	}
	return true;
}

// ---------------------------------------------------------------- header

static uint32_t header_checksum(const SegmentHeader *h)
{
	// FNV-1a over the identity fields.
	uint32_t x = 2166136261u;
	auto mix = [&](const void *p, size_t n) {
		auto b = static_cast<const uint8_t *>(p);
		for (size_t i = 0; i < n; i++) {
			x ^= b[i];
			x *= 16777619u;
		}
	};
	mix(&h->magic, sizeof(h->magic));
	mix(&h->version, sizeof(h->version));
	mix(&h->device_index, sizeof(h->device_index));
	mix(&h->size, sizeof(h->size));
	mix(&h->uid, sizeof(h->uid));
	mix(&h->arena_offset, sizeof(h->arena_offset));
	mix(&h->arena_size, sizeof(h->arena_size));
	return x;
}

static constexpr uint64_t header_bytes()
{
	return (sizeof(SegmentHeader) + 4095) & ~uint64_t(4095);
}

static constexpr uint64_t segment_bytes() { return header_bytes() + kArenaSize; }

// Arena blocks: a header in front of every block. A freed block also
// keeps when it was freed and its place in the reuse queue (reuse_alloc).
struct BlockHeader {
	uint64_t size;  // whole block, multiple of 64
	uint32_t free;
	uint32_t owner;
	uint64_t magic;
	uint64_t freed_ms; // CLOCK_MONOTONIC_COARSE ms at the free; 0 never used
	uint64_t prev;     // reuse queue: neighbours' offsets in the arena, kNone at its ends
	uint64_t next;
	uint32_t queued;   // kQueued while in the reuse queue
	uint32_t pad0;
	uint64_t pad1;
};
static_assert(sizeof(BlockHeader) == 64);
inline constexpr uint64_t kBlockMagic = 0x424c4f434b4f5621ull;
inline constexpr uint32_t kQueued = 0x51554555; // "QUEU"
inline constexpr uint64_t kNone = UINT64_MAX;

// How long a freed block rests before the reuse path hands it out again,
// and how many queued blocks one reuse search looks at.
inline constexpr uint64_t kReuseQuarantineMs = 10;
inline constexpr unsigned kReuseSteps = 16;

static uint64_t coarse_ms()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

static void arena_init(Segment *seg)
{
	auto *b = reinterpret_cast<BlockHeader *>(seg->arena());
	b->size = seg->hdr->arena_size;
	b->free = 1;
	b->owner = UINT32_MAX;
	b->magic = kBlockMagic;
	b->freed_ms = 0;
	b->queued = 0;
	seg->hdr->arena_hint = 0;
	seg->hdr->reuse_head = seg->hdr->reuse_tail = kNone;
}

static inline bool block_sound(const BlockHeader *b, uint64_t off, uint64_t size)
{
	return b->magic == kBlockMagic && b->size >= 64 && b->size % 64 == 0 && b->size <= size - off;
}

// Whether `off` can name a block header of an arena of `size` bytes.
static inline bool offset_sound(const uint8_t *a, uint64_t off, uint64_t size)
{
	return off % 64 == 0 && off < size && size - off >= sizeof(BlockHeader) &&
	       block_sound(reinterpret_cast<const BlockHeader *>(a + off), off, size);
}

// ---- The reuse queue: the freed blocks, oldest first, linked through
// their headers (offsets in the arena), under the device lock. Every link
// is checked before it is followed; a queue found inconsistent (a damaged
// segment) is dropped, which costs reuse only: the next-fit search still
// finds every free block.

static BlockHeader *queued_at(Segment *seg, uint64_t off)
{
	uint8_t *a = seg->arena();
	if (!offset_sound(a, off, seg->hdr->arena_size))
		return nullptr;
	auto *b = reinterpret_cast<BlockHeader *>(a + off);
	return b->free == 1 && b->queued == kQueued ? b : nullptr;
}

static void queue_drop(Segment *seg)
{
	seg->hdr->reuse_head = seg->hdr->reuse_tail = kNone;
}

static void queue_append(Segment *seg, uint64_t off)
{
	SegmentHeader *h = seg->hdr;
	auto *b = reinterpret_cast<BlockHeader *>(seg->arena() + off);
	BlockHeader *t = h->reuse_tail == kNone ? nullptr : queued_at(seg, h->reuse_tail);
	if (h->reuse_tail != kNone && (!t || t->next != kNone))
		queue_drop(seg), t = nullptr;
	b->queued = kQueued;
	b->next = kNone;
	b->prev = t ? h->reuse_tail : kNone;
	if (t)
		t->next = off;
	else
		h->reuse_head = off;
	h->reuse_tail = off;
}

// Puts the block at `by` in the place of the queued block at `off` in the
// reuse queue (by == kNone: closes the gap); the block at `off` leaves it.
static void queue_replace(Segment *seg, uint64_t off, uint64_t by)
{
	SegmentHeader *h = seg->hdr;
	auto *b = reinterpret_cast<BlockHeader *>(seg->arena() + off);
	b->queued = 0;
	BlockHeader *p = b->prev == kNone ? nullptr : queued_at(seg, b->prev);
	BlockHeader *n = b->next == kNone ? nullptr : queued_at(seg, b->next);
	if ((b->prev == kNone ? h->reuse_head != off : !p || p->next != off) ||
	    (b->next == kNone ? h->reuse_tail != off : !n || n->prev != off)) {
		queue_drop(seg);
		return;
	}
	uint64_t for_prev = b->next, for_next = b->prev; // the neighbours' new links
	if (by != kNone) {
		auto *r = reinterpret_cast<BlockHeader *>(seg->arena() + by);
		r->queued = kQueued;
		r->prev = b->prev;
		r->next = b->next;
		for_prev = for_next = by;
	}
	(p ? p->next : h->reuse_head) = for_prev;
	(n ? n->prev : h->reuse_tail) = for_next;
}

// Whether a free block has rested long enough to be reused. A stamp from
// the future (another time namespace, a damaged header) does not hold the
// block back.
static inline bool rested(const BlockHeader *b, uint64_t now)
{
	return now < b->freed_ms || now - b->freed_ms >= kReuseQuarantineMs;
}

// Merges the free blocks that follow the free block at `off` into it,
// taking them out of the reuse queue; with `only_rested`, only queued
// blocks that have rested at `now` (a resting block ends the merge: it is
// never handed out inside a merged one; nor does space never used join a
// queued block, or the reuse path would walk on through fresh pages). The
// hint always names a block header: one that named a swallowed block moves
// to the merged one. The merged block counts as freed when the latest of
// its parts was.
static void merge_following(Segment *seg, uint64_t off, bool only_rested = false,
			    uint64_t now = 0)
{
	uint8_t *a = seg->arena();
	uint64_t size = seg->hdr->arena_size;
	auto *b = reinterpret_cast<BlockHeader *>(a + off);
	for (;;) {
		uint64_t n = off + b->size;
		if (n + sizeof(BlockHeader) > size)
			return;
		auto *nb = reinterpret_cast<BlockHeader *>(a + n);
		if (!nb->free || !block_sound(nb, n, size) ||
		    (only_rested && (nb->queued != kQueued || !rested(nb, now))))
			return;
		if (nb->queued == kQueued)
			queue_replace(seg, n, kNone);
		b->size += nb->size;
		if (nb->freed_ms > b->freed_ms)
			b->freed_ms = nb->freed_ms;
		nb->magic = 0;
		if (seg->hdr->arena_hint == n)
			seg->hdr->arena_hint = off;
	}
}

// Takes `need` bytes of the free block at `off` (which holds that many):
// the rest, 128 bytes or more, stays a free block behind it, in the
// block's place in the reuse queue if it was queued.
static uint64_t take_block(Segment *seg, uint64_t off, uint64_t need, uint32_t owner)
{
	uint8_t *a = seg->arena();
	auto *b = reinterpret_cast<BlockHeader *>(a + off);
	uint64_t rest_off = kNone;
	if (b->size - need >= 128) {
		rest_off = off + need;
		auto *rest = reinterpret_cast<BlockHeader *>(a + rest_off);
		rest->size = b->size - need;
		rest->free = 1;
		rest->owner = UINT32_MAX;
		rest->magic = kBlockMagic;
		rest->freed_ms = b->freed_ms;
		rest->queued = 0;
		b->size = need;
	}
	if (b->queued == kQueued)
		queue_replace(seg, off, rest_off);
	b->queued = 0;
	b->free = 0;
	b->owner = owner;
	// Offset of the payload, relative to the segment start.
	return seg->hdr->arena_offset + off + sizeof(BlockHeader);
}

// The reuse path: blocks freed earlier are handed out again, oldest first,
// before the next-fit search goes on into space never used. So a device
// whose objects come and go (a CM server's QPs and CQs, connection after
// connection) keeps using the same pages; with next fit alone every ring
// landed on fresh pages of the arena (a shared-memory page fault, the
// page's allocation and zeroing, per connection and side: about a fifth of
// a connect/disconnect cycle) and the whole arena ended up resident. One
// search looks at kReuseSteps queued blocks at most.
//
// A freed block rests kReuseQuarantineMs before it is reused: a peer that
// looked the object up just before it was destroyed (a completion pushed
// into a CQ ring, a receive WQE taken from a queue) is long done with the
// memory before another object gets it.
static uint64_t reuse_alloc(Segment *seg, uint64_t need, uint32_t owner)
{
	uint64_t off = seg->hdr->reuse_head;
	if (off == kNone)
		return 0;
	uint64_t now = coarse_ms();
	for (unsigned step = 0; step < kReuseSteps && off != kNone; step++) {
		BlockHeader *b = queued_at(seg, off);
		if (!b) {
			queue_drop(seg);
			return 0;
		}
		if (rested(b, now)) {
			// Freed neighbours that rested too join it: the pieces a
			// split leaves grow back into blocks that fit.
			merge_following(seg, off, true, now);
			if (b->size >= need)
				return take_block(seg, off, need, owner);
		}
		off = b->next;
	}
	return 0;
}

// Next fit: the search starts at the block after the last allocation
// (SegmentHeader::arena_hint) and wraps around once, so a device with
// thousands of QPs and CQs does not walk every block in front of the free
// space on each allocation (first fit did: a fifth of a busy CM server's
// time). Free blocks are merged with the free blocks that follow them as
// the search passes. A hint that does not name a block header (a damaged
// segment) restarts the search at 0. The reuse path (reuse_alloc) goes
// first.
uint64_t arena_alloc(Segment *seg, uint64_t bytes, uint32_t owner)
{
	uint64_t need = (bytes + sizeof(BlockHeader) + 63) & ~uint64_t(63);
	uint64_t size = seg->hdr->arena_size;
	uint8_t *a = seg->arena();
	uint64_t &hint = seg->hdr->arena_hint;
	if (need < bytes) // overflow
		return 0;
	if (!offset_sound(a, hint, size))
		hint = 0;
	if (uint64_t got = reuse_alloc(seg, need, owner))
		return got;
	uint64_t start = hint;
	bool wrapped = start == 0;
	for (uint64_t off = start;;) {
		if (off + sizeof(BlockHeader) > size) {
			if (wrapped)
				return 0;
			wrapped = true;
			off = 0;
		}
		if (wrapped && start && off >= start)
			return 0; // back where the search began
		auto *b = reinterpret_cast<BlockHeader *>(a + off);
		if (!block_sound(b, off, size)) {
			softlog(1, "soft%d: arena damaged at offset %llu", seg->index,
				(unsigned long long)off);
			hint = 0;
			return 0;
		}
		if (b->free) {
			merge_following(seg, off);
			if (b->size >= need) {
				uint64_t got = take_block(seg, off, need, owner);
				hint = off + b->size < size ? off + b->size : 0;
				return got;
			}
		}
		off += b->size;
	}
}

// A block freed: stamped, and queued for reuse.
static void block_freed(Segment *seg, BlockHeader *b)
{
	b->free = 1;
	b->owner = UINT32_MAX;
	b->freed_ms = coarse_ms();
	queue_append(seg, uint64_t(reinterpret_cast<uint8_t *>(b) - seg->arena()));
}

void arena_free(Segment *seg, uint64_t off)
{
	if (off < seg->hdr->arena_offset + sizeof(BlockHeader) || off >= seg->size)
		return;
	auto *b = reinterpret_cast<BlockHeader *>(seg->base + off - sizeof(BlockHeader));
	if (b->magic != kBlockMagic || b->free)
		return;
	block_freed(seg, b);
}

static void arena_free_owner(Segment *seg, uint32_t owner)
{
	uint64_t size = seg->hdr->arena_size;
	uint8_t *a = seg->arena();
	for (uint64_t off = 0; off + sizeof(BlockHeader) <= size;) {
		auto *b = reinterpret_cast<BlockHeader *>(a + off);
		if (!block_sound(b, off, size))
			return;
		if (!b->free && b->owner == owner)
			block_freed(seg, b);
		off += b->size;
	}
}

// Checks the ring header at `r`, which has `room` bytes mapped behind it.
static RingHeader *ring_checked(uint8_t *at, uint64_t room)
{
	if (room < sizeof(RingHeader))
		return nullptr;
	auto *r = reinterpret_cast<RingHeader *>(at);
	uint32_t cap = r->capacity, cell = r->cell_size;
	if (r->magic != kRingMagic || cap < 2 || (cap & (cap - 1)) || cell < 16 || cell % 8)
		return nullptr;
	if (uint64_t(cap) * cell > room - sizeof(RingHeader))
		return nullptr;
	return r;
}

// A ring in an owner's memfd (parent-domain allocators): mapped through the
// peer mapping cache, checked against the file's size.
static RingHeader *ring_memfd(const RingLoc &loc)
{
	int32_t pid = __atomic_load_n(&loc.pid, __ATOMIC_RELAXED);
	int32_t fd = __atomic_load_n(&loc.memfd, __ATOMIC_RELAXED);
	uint32_t ino = __atomic_load_n(&loc.memfd_ino, __ATOMIC_RELAXED);
	uint64_t off = __atomic_load_n(&loc.memfd_off, __ATOMIC_RELAXED);
	if (pid <= 0 || fd < 0 || !ino || off % 64)
		return nullptr;
	uint64_t fsize = 0;
	uint8_t *b = peer_map(pid, fd, ino, &fsize);
	if (!b || off >= fsize)
		return nullptr;
	return ring_checked(b + off, fsize - off);
}

RingHeader *Segment::ring(const RingLoc &loc) const
{
	// The default case (no allocator) is as lean as a bare arena offset: a
	// non-zero `off` means the arena whatever `kind` says (memfd locators
	// carry off = 0), and the bounds checks alone make it safe.
	uint64_t off = __atomic_load_n(&loc.off, __ATOMIC_ACQUIRE);
	if (__builtin_expect(off != 0, 1)) {
		RingHeader *r = ring_header_at(off);
		if (!r)
			return nullptr;
		uint32_t cap = r->capacity, cell = r->cell_size;
		if (r->magic != kRingMagic || cap < 2 || (cap & (cap - 1)) || cell < 16 || cell % 8)
			return nullptr;
		if (off + sizeof(RingHeader) + uint64_t(cap) * cell > size)
			return nullptr;
		return r;
	}
	uint32_t kind = __atomic_load_n(&loc.kind, __ATOMIC_RELAXED);
	return kind == RING_MEMFD ? ring_memfd(loc) : nullptr;
}

// ---------------------------------------------------------------- rings

void ring_init(RingHeader *r, uint32_t cell_size, uint32_t capacity, uint32_t owner)
{
	r->cell_size = cell_size;
	r->capacity = capacity;
	r->owner = owner;
	r->enq.store(0, std::memory_order_relaxed);
	r->deq.store(0, std::memory_order_relaxed);
	for (uint32_t i = 0; i < capacity; i++) {
		auto *seq = reinterpret_cast<std::atomic<uint64_t> *>(r->cells + uint64_t(i) * cell_size);
		seq->store(i, std::memory_order_relaxed);
	}
	std::atomic_thread_fence(std::memory_order_release);
	r->magic = kRingMagic;
}

static inline std::atomic<uint64_t> *cell_seq(RingHeader *r, uint64_t pos)
{
	return reinterpret_cast<std::atomic<uint64_t> *>(
		r->cells + (pos & (r->capacity - 1)) * uint64_t(r->cell_size));
}

void *ring_claim(RingHeader *r, uint64_t *out_pos)
{
	uint64_t pos = r->enq.load(std::memory_order_relaxed);
	for (;;) {
		auto *seq = cell_seq(r, pos);
		uint64_t s = seq->load(std::memory_order_acquire);
		int64_t diff = int64_t(s) - int64_t(pos);
		if (diff == 0) {
			if (r->enq.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
				*out_pos = pos;
				return reinterpret_cast<uint8_t *>(seq) + 8;
			}
		} else if (diff < 0) {
			return nullptr; // full
		} else {
			// Another producer took pos: enq has moved on. A sequence
			// ahead of an enq that has not moved is a damaged ring
			// (no producer can write one): refused as full, never
			// spun on.
			uint64_t now = r->enq.load(std::memory_order_relaxed);
			if (now == pos)
				return nullptr;
			pos = now;
		}
	}
}

void ring_publish(RingHeader *r, void *cell, uint64_t pos)
{
	auto *seq = reinterpret_cast<std::atomic<uint64_t> *>(static_cast<uint8_t *>(cell) - 8);
	seq->store(pos + 1, std::memory_order_release);
}

bool ring_pop(RingHeader *r, void *out, size_t bytes)
{
	uint64_t pos = r->deq.load(std::memory_order_relaxed);
	size_t max = r->cell_size - 8;
	if (bytes > max)
		bytes = max;
	for (;;) {
		auto *seq = cell_seq(r, pos);
		uint64_t s = seq->load(std::memory_order_acquire);
		int64_t diff = int64_t(s) - int64_t(pos + 1);
		if (diff == 0) {
			if (r->deq.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
				const uint8_t *cell = reinterpret_cast<uint8_t *>(seq) + 8;
				// A completion (the common size) is copied inline.
				if (bytes == sizeof(struct ibv_wc))
					memcpy(out, cell, sizeof(struct ibv_wc));
				else
					memcpy(out, cell, bytes);
				seq->store(pos + r->capacity, std::memory_order_release);
				return true;
			}
		} else if (diff < 0) {
			return false; // empty
		} else {
			// Another consumer took pos: deq has moved on. A sequence
			// ahead of a deq that has not moved is a damaged ring:
			// read as empty, never spun on.
			uint64_t now = r->deq.load(std::memory_order_relaxed);
			if (now == pos)
				return false;
			pos = now;
		}
	}
}

void *ring_published(RingHeader *r, uint64_t pos)
{
	auto *seq = cell_seq(r, pos);
	if (seq->load(std::memory_order_acquire) != pos + 1)
		return nullptr;
	return reinterpret_cast<uint8_t *>(seq) + 8;
}

uint64_t ring_count(const RingHeader *r)
{
	uint64_t e = r->enq.load(std::memory_order_acquire);
	uint64_t d = r->deq.load(std::memory_order_acquire);
	return e > d ? e - d : 0;
}

// ---------------------------------------------------------------- attach

struct Attached {
	Segment *seg;
	int refs;
};
static pthread_mutex_t g_attach_lock = PTHREAD_MUTEX_INITIALIZER;
static Attached g_attached[2 * OPENVERBS_MAX_SOFT_DEVICES]; // soft<N>, then sroce<N>

static int user_dir(char *buf, size_t len)
{
	uid_t uid = geteuid();
	snprintf(buf, len, "/dev/shm/openverbs-%u", (unsigned)uid);
	if (mkdir(buf, 0700) != 0 && errno != EEXIST)
		return errno;
	struct stat st;
	if (lstat(buf, &st) != 0)
		return errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 077)) {
		softlog(1, "%s is not a private directory of uid %u: refusing it", buf,
			(unsigned)uid);
		return EPERM;
	}
	return 0;
}

static void reap_locked(Segment *seg, bool include_self);

#ifdef MADV_POPULATE_WRITE
static constexpr int kPopulateWrite = MADV_POPULATE_WRITE;
#else
static constexpr int kPopulateWrite = 23; // <linux/mman.h>, Linux 5.14
#endif

// Maps the pages of what attach's check reads, one call per range
// (MADV_POPULATE_WRITE, Linux 5.14; an older kernel faults them in one by
// one): the fixed fields and the process table, the small tables whole,
// the large ones up to their extents. The pages above an extent stay
// untouched: a segment made by a process that holds few objects costs a
// later process a few dozen pages, not the tables' 5 MB.
static void populate_tables(Segment *seg)
{
	const SegmentHeader *h = seg->hdr;
	const TableExtents &x = h->extents;
	auto range = [](const void *p, uint64_t n) {
		uintptr_t a = uintptr_t(p) & ~uintptr_t(4095);
		uintptr_t e = (uintptr_t(p) + n + 4095) & ~uintptr_t(4095);
		if (n)
			sys_madvise(reinterpret_cast<void *>(a), e - a, kPopulateWrite);
	};
	range(h, uint64_t(reinterpret_cast<const uint8_t *>(h->qps) - seg->base));
	range(h->qps, uint64_t(extent_end(x.qps, kMaxQps)) * sizeof(QpEntry));
	range(h->cqs, uint64_t(extent_end(x.cqs, kMaxCqs)) * sizeof(CqEntry));
	range(h->srqs, uint64_t(extent_end(x.srqs, kMaxSrqs)) * sizeof(SrqEntry));
	range(h->mrs, uint64_t(extent_end(x.mrs, kMaxMrs)) * sizeof(MrEntry));
	range(h->xrcds, sizeof(h->xrcds));
	range(h->xrcd_refs, uint64_t(extent_end(x.xrcd_refs, kMaxXrcdRefs)) * sizeof(XrcdRef));
	range(h->mcast, sizeof(h->mcast));
	range(h->qp_refs, uint64_t(extent_end(x.qp_refs, kMaxQpHandleRefs)) * sizeof(QpHandleRef));
	range(&h->flow_lock, sizeof(h->flow_lock));
	range(h->flows, uint64_t(extent_end(x.flows, kMaxFlows)) * sizeof(FlowEntry));
}

static int map_segment(Segment *seg)
{
	seg->size = segment_bytes();
	void *p = sys_mmap(nullptr, seg->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
		       seg->fd, 0);
	if (p == MAP_FAILED)
		return errno;
	seg->base = static_cast<uint8_t *>(p);
	seg->hdr = static_cast<SegmentHeader *>(p);
	return 0;
}

// Locks on the segment file (open file description locks, dropped by the
// kernel when the last descriptor closes, i.e. also when a process dies):
//   byte 0: held exclusively while a process attaches or detaches;
//   byte 1: held shared by every attached process for as long as it is
//           attached. Getting it exclusively means nobody else is attached.
static int range_lock(int fd, short type, off_t start, bool wait)
{
	struct flock fl = {};
	fl.l_type = type;
	fl.l_whence = SEEK_SET;
	fl.l_start = start;
	fl.l_len = 1;
	return fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) == 0 ? 0 : errno;
}

const char *segment_header_defect(const SegmentHeader *h, uint64_t file_size, int index,
				  uint32_t uid)
{
	if (file_size != segment_bytes())
		return "file size does not match this layout";
	if (h->magic != kMagic)
		return "bad magic";
	if (h->version != kLayoutVersion)
		return "another layout version";
	if (h->size != segment_bytes())
		return "recorded size does not match this layout";
	if (h->uid != uid)
		return "another user's segment";
	if (h->device_index != uint32_t(index))
		return "another device's segment";
	if (h->checksum != header_checksum(h))
		return "header checksum mismatch";
	if (h->arena_offset != header_bytes() || h->arena_size != kArenaSize)
		return "arena placement does not match this layout";
	if (h->arena_initialised != 1)
		return "arena never initialised";
	return nullptr;
}

// A ring locator: none, an arena ring inside the arena (64-byte aligned,
// room for its header), or a memfd locator (checked again when mapped).
static const char *ring_loc_defect(const SegmentHeader *h, const RingLoc &l)
{
	uint32_t kind = __atomic_load_n(&l.kind, __ATOMIC_RELAXED);
	uint64_t off = __atomic_load_n(&l.off, __ATOMIC_RELAXED);
	if (kind > RING_MEMFD)
		return "unknown ring locator kind";
	if (off) {
		uint64_t lo = h->arena_offset + sizeof(BlockHeader);
		if (off < lo || (off & 63) || off > h->arena_offset + h->arena_size ||
		    h->arena_offset + h->arena_size - off < sizeof(RingHeader))
			return "ring offset outside the arena";
	} else if (kind == RING_ARENA) {
		return "arena ring without an offset";
	}
	return nullptr;
}

const char *segment_tables_defect(const SegmentHeader *h)
{
	auto ld = [](const uint32_t &v) { return __atomic_load_n(&v, __ATOMIC_RELAXED); };
	const TableExtents &x = h->extents;
	auto past = [](const TableExtent &t, uint32_t max) {
		return t.used.load(std::memory_order_relaxed) > max;
	};
	if (past(x.qps, kMaxQps) || past(x.cqs, kMaxCqs) || past(x.srqs, kMaxSrqs) ||
	    past(x.mrs, kMaxMrs) || past(x.xrcd_refs, kMaxXrcdRefs) ||
	    past(x.qp_refs, kMaxQpHandleRefs) || past(x.flows, kMaxFlows))
		return "table extent past the table's end";
	for (const ProcEntry &p : h->procs)
		if (p.in_use.load(std::memory_order_relaxed) > 1)
			return "process entry: bad state";
	for (const QpEntry &q : in_extent(h->qps, x.qps)) {
		uint32_t slot = q.slot.load(std::memory_order_relaxed);
		if (slot > SLOT_LIVE)
			return "QP entry: bad slot state";
		if (slot != SLOT_LIVE)
			continue;
		if (q.state.load(std::memory_order_relaxed) > IBV_QPS_ERR)
			return "QP entry: bad QP state";
		if (ld(q.owner) >= kMaxProcs)
			return "QP entry: owner out of range";
		if (ld(q.srq) > kMaxSrqs || ld(q.recv_cq) > kMaxCqs || ld(q.xrcd) > kMaxXrcds)
			return "QP entry: SRQ, CQ or XRC domain out of range";
		if (const char *d = ring_loc_defect(h, q.rq_ring))
			return d;
	}
	for (const CqEntry &c : in_extent(h->cqs, x.cqs)) {
		uint32_t slot = c.slot.load(std::memory_order_relaxed);
		if (slot > SLOT_LIVE)
			return "CQ entry: bad slot state";
		if (slot != SLOT_LIVE)
			continue;
		if (ld(c.owner) >= kMaxProcs)
			return "CQ entry: owner out of range";
		if (c.armed.load(std::memory_order_relaxed) > 2)
			return "CQ entry: bad arm state";
		if (const char *d = ring_loc_defect(h, c.ring))
			return d;
	}
	for (const SrqEntry &r : in_extent(h->srqs, x.srqs)) {
		uint32_t slot = r.slot.load(std::memory_order_relaxed);
		if (slot > SLOT_LIVE)
			return "SRQ entry: bad slot state";
		if (slot != SLOT_LIVE)
			continue;
		if (ld(r.owner) >= kMaxProcs)
			return "SRQ entry: owner out of range";
		if (ld(r.xrcd) > kMaxXrcds || ld(r.cq) > kMaxCqs)
			return "SRQ entry: XRC domain or CQ out of range";
		uint64_t tm = __atomic_load_n(&r.tm_off, __ATOMIC_RELAXED);
		if (tm && (tm < h->arena_offset || (tm & 7) ||
			   tm > h->arena_offset + h->arena_size ||
			   h->arena_offset + h->arena_size - tm < sizeof(TmList)))
			return "SRQ entry: tag list outside the arena";
		if (const char *d = ring_loc_defect(h, r.ring))
			return d;
	}
	for (const MrEntry &m : in_extent(h->mrs, x.mrs)) {
		uint32_t kind = m.kind.load(std::memory_order_relaxed);
		if (kind > KEY_MW)
			return "key entry: unknown kind";
		if (kind == KEY_FREE)
			continue;
		if (ld(m.owner) >= kMaxProcs)
			return "key entry: owner out of range";
		if (ld(m.parent) > kMaxMrs)
			return "key entry: window parent out of range";
		if ((ld(m.key) >> 8) == 0 || (ld(m.key) >> 8) - 1 != uint32_t(&m - h->mrs))
			return "key entry: key does not name its own slot";
	}
	for (const XrcdEntry &x : h->xrcds)
		if (x.in_use > 1)
			return "XRC domain entry: bad state";
	for (const XrcdRef &r : in_extent(h->xrcd_refs, x.xrcd_refs))
		if (r.in_use > 1 || (r.in_use && (r.xrcd >= kMaxXrcds || r.proc >= kMaxProcs)))
			return "XRC domain reference: out of range";
	for (const QpHandleRef &r : in_extent(h->qp_refs, x.qp_refs))
		if (r.in_use > 1 || (r.in_use && (r.qp >= kMaxQps || r.proc >= kMaxProcs)))
			return "QP handle reference: out of range";
	for (const McastEntry &g : h->mcast) {
		if (g.in_use > 1)
			return "multicast entry: bad state";
		for (uint32_t qpn : g.qpn)
			if (qpn && (qpn < kQpnBase || qpn - kQpnBase >= kMaxQps))
				return "multicast entry: QP number out of range";
	}
	for (const FlowEntry &f : in_extent(h->flows, x.flows)) {
		uint32_t u = f.in_use.load(std::memory_order_relaxed);
		if (u > 1)
			return "flow entry: bad state";
		if (u && (ld(f.owner) >= kMaxProcs || ld(f.qp) >= kMaxQps ||
			  ld(f.specs_len) > kFlowSpecBytes || ld(f.rss_log_size) > 6))
			return "flow entry: out of range";
	}
	return nullptr;
}

const char *arena_defect(const uint8_t *arena, uint64_t arena_size)
{
	uint64_t off = 0;
	while (off < arena_size) {
		if (arena_size - off < sizeof(BlockHeader))
			return "arena: a block header runs past the end";
		BlockHeader b;
		memcpy(&b, arena + off, sizeof(b));
		if (b.magic != kBlockMagic)
			return "arena: bad block magic";
		if (b.size < 64 || b.size % 64 || b.size > arena_size - off)
			return "arena: bad block size";
		if (b.free > 1)
			return "arena: bad block state";
		off += b.size;
	}
	return nullptr;
}

uint64_t segment_size() { return segment_bytes(); }

void segment_format(uint8_t *base, int index, uint32_t uid)
{
	Segment seg;
	seg.base = base;
	seg.hdr = reinterpret_cast<SegmentHeader *>(base);
	SegmentHeader *h = seg.hdr;
	h->magic = kMagic;
	h->version = kLayoutVersion;
	h->device_index = index;
	h->size = segment_bytes();
	h->uid = uid;
	h->arena_offset = header_bytes();
	h->arena_size = kArenaSize;
	h->checksum = header_checksum(h);
	shm_mutex_init(&h->lock);
	shm_mutex_init(&h->atomic_lock);
	shm_mutex_init(&h->flow_lock);
	h->next_pd_id.store(1);
	h->next_xrcd_id.store(1);
	h->key_gen.store(1);
	arena_init(&seg);
	h->arena_initialised = 1;
}

void segment_seal(SegmentHeader *h) { h->checksum = header_checksum(h); }

static void init_header(Segment *seg, int index)
{
	segment_format(seg->base, index, geteuid());
}

static int attach_new(int index, const char *name, Segment *seg)
{
	char dir[96];
	int rc = user_dir(dir, sizeof(dir));
	if (rc)
		return rc;
	if (name)
		snprintf(seg->path, sizeof(seg->path), "%s/%s", dir, name);
	else
		snprintf(seg->path, sizeof(seg->path), "%s/soft%d", dir, index);
	seg->index = index;
	// The header names the device kind, not the process's numbering: every
	// process names a RoCE device's interface sroce<N> with its own N.
	int hdr_index = name ? OPENVERBS_MAX_SOFT_DEVICES : index;
	for (int tries = 0; tries < 100; tries++) {
		int fd = open(seg->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0) {
			if (errno == ENOENT && tries < 99) { // directory removed meanwhile
				user_dir(dir, sizeof(dir));
				continue;
			}
			return errno;
		}
		auto fail = [&](int e) {
			if (seg->base)
				sys_munmap(seg->base, seg->size);
			seg->base = nullptr;
			seg->hdr = nullptr;
			close(fd);
			seg->fd = -1;
			return e;
		};
		if ((rc = range_lock(fd, F_WRLCK, 0, true)))
			return fail(rc);
		struct stat st;
		if (fstat(fd, &st) != 0)
			return fail(errno);
		if (st.st_nlink == 0) { // unlinked by a departing last user: retry
			close(fd);
			continue;
		}
		if (st.st_uid != geteuid() || (st.st_mode & 077) || !S_ISREG(st.st_mode)) {
			softlog(1, "%s has wrong owner or mode: refusing it", seg->path);
			return fail(EPERM);
		}
		seg->fd = fd;
		// Nobody attached (every user holds byte 1 shared): whatever the
		// file holds is left over from dead processes, start afresh.
		bool alone = range_lock(fd, F_WRLCK, 1, false) == 0;
		if (alone) {
			if (st.st_size && uint64_t(st.st_size) == segment_bytes()) {
				if ((rc = map_segment(seg)))
					return fail(rc);
				if (const char *d = segment_header_defect(seg->hdr, uint64_t(st.st_size),
									 hdr_index, geteuid()))
					softlog(2, "%s: damaged or foreign segment with no user (%s): "
						   "reinitialised", seg->path, d);
				sys_munmap(seg->base, seg->size);
				seg->base = nullptr;
			}
			if (ftruncate(fd, 0) != 0 || ftruncate(fd, segment_bytes()) != 0)
				return fail(errno);
			if ((rc = map_segment(seg)))
				return fail(rc);
			init_header(seg, hdr_index);
		} else {
			if (uint64_t(st.st_size) != segment_bytes()) {
				softlog(1, "%s: size %lld does not match this layout: damaged or foreign "
					   "segment in use, not trusting it", seg->path, (long long)st.st_size);
				return fail(EPROTO);
			}
			if ((rc = map_segment(seg)))
				return fail(rc);
			if (const char *d = segment_header_defect(seg->hdr, uint64_t(st.st_size),
								 hdr_index, geteuid())) {
				softlog(1, "%s: damaged segment header while in use (%s): not trusting it",
					seg->path, d);
				return fail(EPROTO);
			}
			// The tables and the arena, as they stand between two holders
			// of the device lock. The pages the check reads are mapped
			// first, a few calls instead of a fault per page.
			populate_tables(seg);
			shm_lock(&seg->hdr->lock);
			const char *d = segment_tables_defect(seg->hdr);
			if (!d)
				d = arena_defect(seg->arena(), seg->hdr->arena_size);
			shm_unlock(&seg->hdr->lock);
			if (d) {
				softlog(1, "%s: damaged segment while in use (%s): not trusting it",
					seg->path, d);
				return fail(EPROTO);
			}
		}
		if ((rc = range_lock(fd, F_RDLCK, 1, false)))
			return fail(rc);
		SegmentHeader *h = seg->hdr;
		// Register this process.
		shm_lock(&h->lock);
		reap_locked(seg, false);
		int32_t pid = getpid();
		uint32_t slot = UINT32_MAX;
		for (uint32_t i = 0; i < kMaxProcs; i++) {
			if (h->procs[i].in_use.load() && h->procs[i].pid == pid) {
				slot = i;
				break;
			}
		}
		if (slot == UINT32_MAX) {
			for (uint32_t i = 0; i < kMaxProcs; i++) {
				if (!h->procs[i].in_use.load()) {
					slot = i;
					h->procs[i].pid = pid;
					h->procs[i].start_time = process_start_time(pid);
					h->procs[i].contexts = 0;
					h->procs[i].in_use.store(1);
					break;
				}
			}
		}
		shm_unlock(&h->lock);
		range_lock(fd, F_UNLCK, 0, false);
		if (slot == UINT32_MAX)
			return fail(EAGAIN);
		seg->my_proc = slot;
		return 0;
	}
	return EAGAIN;
}

bool segment_present(int index)
{
	if (index < 0 || index >= OPENVERBS_MAX_SOFT_DEVICES)
		return false;
	char path[128];
	snprintf(path, sizeof(path), "/dev/shm/openverbs-%u/soft%d", unsigned(geteuid()), index);
	struct stat st;
	return lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
}

// fork(): a child starts with the attachments' lock free, whichever thread
// of the parent held it (its exit handler detaches what it inherited).
static void attach_atfork_child()
{
	pthread_mutex_init(&g_attach_lock, nullptr);
}

__attribute__((constructor)) static void attach_init()
{
	pthread_atfork(nullptr, nullptr, attach_atfork_child);
}

int segment_attach(int index, Segment **out, const char *name)
{
	if (index < 0 || index >= 2 * OPENVERBS_MAX_SOFT_DEVICES ||
	    (index >= OPENVERBS_MAX_SOFT_DEVICES) != (name != nullptr))
		return EINVAL;
	pthread_mutex_lock(&g_attach_lock);
	Attached &a = g_attached[index];
	if (a.seg && segment_inherited(a.seg)) {
		// Inherited over fork(): the child needs its own registration.
		a.seg = nullptr;
		a.refs = 0;
	}
	if (!a.seg) {
		auto *seg = new (std::nothrow) Segment();
		if (!seg) {
			pthread_mutex_unlock(&g_attach_lock);
			return ENOMEM;
		}
		int rc = attach_new(index, name, seg);
		if (rc) {
			delete seg;
			pthread_mutex_unlock(&g_attach_lock);
			return rc;
		}
		a.seg = seg;
		a.refs = 0;
	}
	a.refs++;
	shm_lock(&a.seg->hdr->lock);
	a.seg->hdr->procs[a.seg->my_proc].contexts++;
	shm_unlock(&a.seg->hdr->lock);
	*out = a.seg;
	pthread_mutex_unlock(&g_attach_lock);
	return 0;
}

bool qp_ref_add(SegmentHeader *h, uint32_t qp, uint32_t proc)
{
	for (auto &r : in_extent(h->qp_refs, h->extents.qp_refs))
		if (r.in_use && r.qp == qp && r.proc == proc) {
			r.count++;
			return true;
		}
	int i = extent_take(h->extents.qp_refs, kMaxQpHandleRefs,
			    [&](uint32_t k) { return !h->qp_refs[k].in_use; });
	if (i < 0)
		return false;
	h->qp_refs[i] = QpHandleRef{1, qp, proc, 1};
	return true;
}

// Frees handle reference r (device lock held).
static void qp_ref_free(SegmentHeader *h, QpHandleRef &r)
{
	r = QpHandleRef{};
	extent_release(h->extents.qp_refs, uint32_t(&r - h->qp_refs));
}

uint32_t qp_ref_drop(SegmentHeader *h, uint32_t qp, uint32_t proc)
{
	for (auto &r : in_extent(h->qp_refs, h->extents.qp_refs))
		if (r.in_use && r.qp == qp && r.proc == proc) {
			if (r.count > 1)
				return --r.count;
			qp_ref_free(h, r);
			return 0;
		}
	return 0;
}

void qp_ref_clear(SegmentHeader *h, uint32_t qp)
{
	for (auto &r : in_extent(h->qp_refs, h->extents.qp_refs))
		if (r.in_use && r.qp == qp)
			qp_ref_free(h, r);
}

bool qp_hand_over(SegmentHeader *h, uint32_t qp)
{
	QpEntry &q = h->qps[qp];
	for (auto &r : in_extent(h->qp_refs, h->extents.qp_refs)) {
		if (!r.in_use || r.qp != qp || r.proc == q.owner || r.proc >= kMaxProcs ||
		    !h->procs[r.proc].in_use.load())
			continue;
		q.owner = r.proc;
		q.owner_pid = h->procs[r.proc].pid;
		// Affiliated events of an XRC receive QP do not depend on the owner:
		// every holder's watchdog reports them for its own handle
		// (context.cpp, xrc_recv_watch).
		return true;
	}
	return false;
}

// QP entry s is free again (device lock held).
static void qp_slot_free(SegmentHeader *h, uint32_t s)
{
	QpEntry &q = h->qps[s];
	q.state.store(IBV_QPS_ERR);
	q.generation++;
	q.slot.store(SLOT_FREE);
	extent_release(h->extents.qps, s);
}

static void free_owned(Segment *seg, uint32_t p)
{
	SegmentHeader *h = seg->hdr;
	TableExtents &x = h->extents;
	// XRC receive QPs: drop this process's handles; a QP that others still
	// hold survives (and changes owner when p owned it).
	for (auto &r : in_extent(h->qp_refs, x.qp_refs)) {
		if (!r.in_use || r.proc != p)
			continue;
		uint32_t s = r.qp;
		uint32_t n = r.count;
		qp_ref_free(h, r);
		if (s >= kMaxQps)
			continue;
		QpEntry &q = h->qps[s];
		if (q.slot.load() != SLOT_LIVE || q.qp_type != IBV_QPT_XRC_RECV)
			continue;
		q.handles = q.handles > n ? q.handles - n : 0;
		if (q.handles && q.owner == p && !qp_hand_over(h, s))
			q.handles = 0; // nobody else is recorded: the owner loop frees it
		if (!q.handles && q.owner != p) {
			qp_slot_free(h, s);
			qp_ref_clear(h, s);
		}
	}
	for (uint32_t s = 0, n = extent_end(x.qps, kMaxQps); s < n; s++) {
		QpEntry &q = h->qps[s];
		if (q.slot.load() == SLOT_LIVE && q.owner == p) {
			if (q.qp_type == IBV_QPT_XRC_RECV)
				qp_ref_clear(h, s);
			qp_slot_free(h, s);
		}
	}
	for (auto &c : in_extent(h->cqs, x.cqs))
		if (c.slot.load() == SLOT_LIVE && c.owner == p) {
			c.generation++;
			c.slot.store(SLOT_FREE);
			extent_release(x.cqs, uint32_t(&c - h->cqs));
		}
	for (auto &s : in_extent(h->srqs, x.srqs))
		if (s.slot.load() == SLOT_LIVE && s.owner == p) {
			s.error.store(1);
			s.generation++;
			s.slot.store(SLOT_FREE);
			extent_release(x.srqs, uint32_t(&s - h->srqs));
		}
	for (auto &m : in_extent(h->mrs, x.mrs))
		if (m.kind.load() != KEY_FREE && kld(m.owner) == p) {
			uint64_t ws = key_write_lock(m);
			m.kind.store(KEY_FREE, std::memory_order_relaxed);
			key_write_unlock(m, ws);
			extent_release(x.mrs, uint32_t(&m - h->mrs));
		}
	for (auto &r : in_extent(h->xrcd_refs, x.xrcd_refs)) {
		if (r.in_use && r.proc == p) {
			if (r.xrcd < kMaxXrcds) {
				XrcdEntry &e = h->xrcds[r.xrcd];
				if (e.in_use && e.refs >= r.count)
					e.refs -= r.count;
				else
					e.refs = 0;
				if (e.in_use && !e.refs)
					e.in_use = 0;
			}
			r.in_use = 0;
			extent_release(x.xrcd_refs, uint32_t(&r - h->xrcd_refs));
		}
	}
	shm_lock(&h->flow_lock);
	for (auto &f : in_extent(h->flows, x.flows))
		if (f.in_use.load() && f.owner == p) {
			f.generation++;
			f.in_use.store(0);
			extent_release(x.flows, uint32_t(&f - h->flows));
		}
	shm_unlock(&h->flow_lock);
	for (auto &g : h->mcast) {
		if (!g.in_use)
			continue;
		for (auto &qpn : g.qpn) {
			uint32_t s = qpn - kQpnBase;
			if (qpn && (s >= kMaxQps || h->qps[s].slot.load() != SLOT_LIVE))
				qpn = 0;
		}
	}
	arena_free_owner(seg, p);
}

static void reap_locked(Segment *seg, bool include_self)
{
	SegmentHeader *h = seg->hdr;
	int32_t me = getpid();
	for (uint32_t i = 0; i < kMaxProcs; i++) {
		ProcEntry &p = h->procs[i];
		if (!p.in_use.load())
			continue;
		if (p.pid == me && !include_self)
			continue;
		if (p.pid == me || !process_alive(p.pid, p.start_time)) {
			if (p.pid != me)
				softlog(3, "soft%d: reclaiming state of dead process %d", seg->index,
					p.pid);
			free_owned(seg, i);
			p.in_use.store(0);
		}
	}
}

void segment_reap(Segment *seg)
{
	shm_lock(&seg->hdr->lock);
	reap_locked(seg, false);
	shm_unlock(&seg->hdr->lock);
}

static void notify_cache_drop_all();
static void peer_map_drop_all();

void segment_detach(Segment *seg)
{
	pthread_mutex_lock(&g_attach_lock);
	Attached *a = nullptr;
	for (auto &e : g_attached)
		if (e.seg == seg)
			a = &e;
	if (!a) {
		pthread_mutex_unlock(&g_attach_lock);
		return;
	}
	SegmentHeader *h = seg->hdr;
	if (segment_inherited(seg)) {
		// Inherited over fork() (a child closing a device, or exiting:
		// soft_exit): the registration, the objects and the file's locks
		// (open file description locks, shared with the parent's
		// descriptor) are the parent's. The child drops its mapping and
		// its descriptor only, as a child's exit leaves a kernel device's
		// objects to the parent.
		if (--a->refs <= 0) {
			a->seg = nullptr;
			sys_munmap(seg->base, seg->size);
			close(seg->fd);
			delete seg;
		}
		pthread_mutex_unlock(&g_attach_lock);
		return;
	}
	shm_lock(&h->lock);
	if (h->procs[seg->my_proc].contexts)
		h->procs[seg->my_proc].contexts--;
	shm_unlock(&h->lock);
	if (--a->refs > 0) {
		pthread_mutex_unlock(&g_attach_lock);
		return;
	}
	a->seg = nullptr;
	range_lock(seg->fd, F_WRLCK, 0, true);
	shm_lock(&h->lock);
	free_owned(seg, seg->my_proc);
	h->procs[seg->my_proc].in_use.store(0);
	reap_locked(seg, false);
	shm_unlock(&h->lock);
	// Last user (no other process holds byte 1): remove the state.
	range_lock(seg->fd, F_UNLCK, 1, false);
	bool anyone = range_lock(seg->fd, F_WRLCK, 1, false) != 0;
	if (!anyone) {
		unlink(seg->path);
		char dir[96];
		snprintf(dir, sizeof(dir), "/dev/shm/openverbs-%u", (unsigned)geteuid());
		rmdir(dir); // fails quietly while other devices are in use
	}
	sys_munmap(seg->base, seg->size);
	close(seg->fd); // drops the locks
	delete seg;
	// The process's last device closed: what it cached to reach its peers
	// (event-pipe writers, peer mappings) goes too.
	bool last = true;
	for (auto &e : g_attached)
		last = last && !e.seg;
	pthread_mutex_unlock(&g_attach_lock);
	if (last) {
		notify_cache_drop_all();
		peer_map_drop_all();
	}
}

// ---------------------------------------------------------------- notify

struct NotifyFd {
	int32_t pid;
	int target_fd;
	uint32_t ino;
	int fd;
};
static pthread_mutex_t g_notify_lock = PTHREAD_MUTEX_INITIALIZER;
static NotifyFd g_notify[128];
static unsigned g_notify_next;

// Closes every cached writer (the process's last context has closed).
static void notify_cache_drop_all()
{
	pthread_mutex_lock(&g_notify_lock);
	for (auto &n : g_notify)
		if (n.fd > 0) {
			close(n.fd);
			n = NotifyFd{};
		}
	pthread_mutex_unlock(&g_notify_lock);
}

int notify_pipe(int32_t pid, int fd, uint32_t ino, const void *buf, size_t len)
{
	if (fd < 0 || pid <= 0)
		return EINVAL;
	pthread_mutex_lock(&g_notify_lock);
	int wfd = -1;
	for (auto &n : g_notify)
		if (n.fd > 0 && n.pid == pid && n.target_fd == fd && n.ino == ino) {
			wfd = n.fd;
			break;
		}
	if (wfd < 0) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
		int nfd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (nfd < 0) {
			int e = errno;
			pthread_mutex_unlock(&g_notify_lock);
			return e;
		}
		struct stat st;
		if (fstat(nfd, &st) != 0 || !S_ISFIFO(st.st_mode) || uint32_t(st.st_ino) != ino) {
			close(nfd);
			pthread_mutex_unlock(&g_notify_lock);
			return ESTALE;
		}
		NotifyFd &slot = g_notify[g_notify_next++ % 128];
		if (slot.fd > 0)
			close(slot.fd);
		slot = NotifyFd{pid, fd, ino, nfd};
		wfd = nfd;
	}
	ssize_t n = write(wfd, buf, len);
	int rc = n == ssize_t(len) ? 0 : (n < 0 ? errno : EIO);
	pthread_mutex_unlock(&g_notify_lock);
	return rc;
}

// ---------------------------------------------------------------- peer memory

struct PeerMap {
	int32_t pid;
	int fd;
	uint32_t ino;
	uint8_t *base;
	uint64_t size;
	uint64_t used;
};
static pthread_mutex_t g_map_lock = PTHREAD_MUTEX_INITIALIZER;
static PeerMap g_maps[256];
std::atomic<uint64_t> g_peer_map_generation{0};
static uint64_t g_map_clock;

// ---- Map-use sections and retired mappings (see shm.h).

std::atomic<uint64_t> g_map_epoch{1};
thread_local MapTls t_map __attribute__((tls_model("initial-exec")));
static std::atomic<MapReader *> g_readers{nullptr};
static pthread_key_t g_reader_key;
static pthread_once_t g_reader_once = PTHREAD_ONCE_INIT;

// A thread's record goes back to the pool when the thread exits.
static void reader_release(void *p)
{
	auto *r = static_cast<MapReader *>(p);
	r->epoch.store(0, std::memory_order_release);
	r->used.store(0, std::memory_order_release);
}

// In a child after fork(): only the forking thread exists there.
static void readers_atfork_child()
{
	for (MapReader *r = g_readers.load(); r; r = r->next)
		if (r != t_map.rec) {
			r->epoch.store(0, std::memory_order_relaxed);
			r->used.store(0, std::memory_order_relaxed);
		}
}

static void reader_key_init()
{
	pthread_key_create(&g_reader_key, reader_release);
	pthread_atfork(nullptr, nullptr, readers_atfork_child);
}

MapReader *map_reader_register()
{
	pthread_once(&g_reader_once, reader_key_init);
	MapReader *r = nullptr;
	for (MapReader *x = g_readers.load(std::memory_order_acquire); x && !r; x = x->next) {
		uint32_t free_rec = 0;
		if (x->used.compare_exchange_strong(free_rec, 1))
			r = x;
	}
	if (!r) {
		// Records are never freed (threads come and go; the pool is
		// bounded by the largest number of threads alive at once).
		r = new MapReader{};
		r->used.store(1, std::memory_order_relaxed);
		MapReader *head = g_readers.load(std::memory_order_relaxed);
		do
			r->next = head;
		while (!g_readers.compare_exchange_weak(head, r, std::memory_order_release,
							std::memory_order_relaxed));
	}
	t_map.rec = r;
	pthread_setspecific(g_reader_key, r);
	return r;
}

struct RetiredMap {
	uint8_t *base;
	uint64_t size;
	uint64_t epoch; // g_map_epoch when retired
	RetiredMap *next;
};
static RetiredMap *g_retired; // under g_map_lock
static std::atomic<uint32_t> g_retired_count{0};

// g_map_lock held. Unmaps every retired mapping that no section can use:
// retired at epoch e, while every thread inside a section entered at an
// epoch after e (it loaded g_map_epoch after the retirement, so it also
// sees the generation change and never looks the old mapping up again).
static void reclaim_locked()
{
	if (!g_retired)
		return;
	std::atomic_thread_fence(std::memory_order_seq_cst);
	uint64_t oldest = UINT64_MAX;
	for (MapReader *r = g_readers.load(std::memory_order_acquire); r; r = r->next) {
		uint64_t e = r->epoch.load(std::memory_order_seq_cst);
		if (e && e < oldest)
			oldest = e;
	}
	for (RetiredMap **pp = &g_retired; *pp;) {
		RetiredMap *m = *pp;
		if (m->epoch < oldest) {
			syscall(SYS_munmap, m->base, m->size);
			*pp = m->next;
			delete m;
			g_retired_count.fetch_sub(1, std::memory_order_relaxed);
		} else {
			pp = &m->next;
		}
	}
}

// g_map_lock held, the generation already bumped.
static void retire_map(uint8_t *base, uint64_t size)
{
	auto *m = new (std::nothrow) RetiredMap{base, size, 0, g_retired};
	if (!m)
		return; // keep it mapped for ever rather than unmap it too early
	m->epoch = g_map_epoch.fetch_add(1, std::memory_order_seq_cst);
	g_retired = m;
	g_retired_count.fetch_add(1, std::memory_order_relaxed);
	reclaim_locked();
}

void peer_map_reclaim()
{
	if (!g_retired_count.load(std::memory_order_relaxed))
		return;
	pthread_mutex_lock(&g_map_lock);
	reclaim_locked();
	pthread_mutex_unlock(&g_map_lock);
}

// Retires every cached peer mapping (the process's last context has
// closed): each is unmapped once no section can still use it.
static void peer_map_drop_all()
{
	pthread_mutex_lock(&g_map_lock);
	bool any = false;
	for (auto &m : g_maps)
		if (m.base) {
			if (!any)
				g_peer_map_generation.fetch_add(1, std::memory_order_seq_cst);
			any = true;
			retire_map(m.base, m.size);
			m = PeerMap{};
		}
	reclaim_locked();
	pthread_mutex_unlock(&g_map_lock);
}

uint8_t *peer_map(int32_t pid, int fd, uint32_t ino, uint64_t *size)
{
	// The last few mappings this thread used (a data path alternates
	// between a peer's receive ring, its memory region and its CQ ring);
	// the generation makes them stale when any mapping is replaced.
	std::atomic<uint64_t> &generation = g_peer_map_generation;
	constexpr unsigned kRecent = 4;
	thread_local PeerMap recent[kRecent];
	thread_local uint64_t recent_gen = ~0ull;
	thread_local unsigned recent_next;
	if (recent_gen == generation.load(std::memory_order_acquire)) {
		for (const PeerMap &r : recent)
			if (r.base && r.pid == pid && r.fd == fd && r.ino == ino) {
				*size = r.size;
				return r.base;
			}
	}
	auto remember = [&](const PeerMap &m) {
		uint64_t g = generation.load(std::memory_order_acquire);
		if (recent_gen != g) {
			for (PeerMap &r : recent)
				r = PeerMap{};
			recent_gen = g;
		}
		recent[recent_next++ % kRecent] = m;
	};
	pthread_mutex_lock(&g_map_lock);
	PeerMap *victim = &g_maps[0];
	for (auto &m : g_maps) {
		if (m.base && m.pid == pid && m.fd == fd && m.ino == ino) {
			m.used = ++g_map_clock;
			uint8_t *b = m.base;
			*size = m.size;
			remember(m);
			pthread_mutex_unlock(&g_map_lock);
			return b;
		}
		if (!m.base || m.used < victim->used)
			victim = &m;
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	int f = open(path, O_RDWR | O_CLOEXEC);
	uint8_t *base = nullptr;
	struct stat st;
	if (f >= 0 && fstat(f, &st) == 0 && S_ISREG(st.st_mode) && uint32_t(st.st_ino) == ino &&
	    st.st_size > 0) {
		void *p = sys_mmap(nullptr, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
		if (p != MAP_FAILED) {
			base = static_cast<uint8_t *>(p);
			if (victim->base) {
				generation.fetch_add(1, std::memory_order_seq_cst);
				retire_map(victim->base, victim->size);
			}
			*victim = PeerMap{pid, fd, ino, base, uint64_t(st.st_size), ++g_map_clock};
			*size = uint64_t(st.st_size);
			remember(*victim);
		}
	}
	int err = f < 0 ? errno : 0;
	if (f >= 0)
		close(f);
	pthread_mutex_unlock(&g_map_lock);
	if (!base) {
		// The data path falls back to process_vm_* for this memory: said
		// at VERBS_LOG_LEVEL=3, the first few times only (it is asked
		// again for every operation).
		static std::atomic<int> told{0};
		if (told.fetch_add(1, std::memory_order_relaxed) < 8)
			softlog(3, "cannot map file descriptor %d of process %d (inode %u): %s", fd, pid,
				ino, err ? strerror(err) : "not that file, empty, or mmap failed");
	}
	return base;
}

} // namespace ovsoft
