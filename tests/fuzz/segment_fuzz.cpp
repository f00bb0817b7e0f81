// libFuzzer target: the software device's checks of a segment it attaches
// to (providers/soft/shm.cpp: segment_header_defect, segment_tables_defect,
// arena_defect). A segment file is shared with every process of the user,
// so attach must refuse a damaged one and never trust it.
//
// The target formats one sound segment (segment_format: header, empty
// tables, one free arena block; the arena's 256 MiB are reserved, not
// touched), then damages it with the input, runs the three checks in
// attach's order and undoes the damage. The input is a flags byte, then
// patches: a 4-byte little-endian offset (taken modulo the header and the
// first 64 KiB of the arena), a length byte (1..32) and that many bytes.
// Flags: bit 0 recomputes the header checksum after patching (so that the
// table checks are reached with damaged identity fields too), bit 1 gives
// a file size one page short, bit 2 another device index, bit 3 another uid.
//
// A segment the checks accept is then used as the provider uses one: every
// index a live entry below its table's extent holds is followed into its
// table and every arena ring it names is resolved (Segment::ring), read
// to its last cell, popped and claimed (ring_pop and ring_claim must
// return), and the arena is allocated from and freed (use_arena). The patches reach the extents too (they sit in the header): a
// check that let an extent past its table's end through would have the
// scans read outside the table. A check that let a bad index or ring
// through shows up as an AddressSanitizer or UndefinedBehaviorSanitizer
// report, a fault or a timeout, and fails the run.
// Built with clang -fsanitize=fuzzer,address,undefined (tests/fuzz/CMakeLists.txt).
#include "shm.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace ovsoft {
// The provider's logger goes to the library's (__verbs_log in libibverbs),
// which this target does not link: the checks report through their return
// values, and shm.cpp's messages are dropped here.
void softlog(int, const char *, ...) {}
} // namespace ovsoft

using namespace ovsoft;

namespace {

constexpr uint64_t kArenaWindow = 64 * 1024;

struct Fixture {
	uint8_t *base = nullptr;
	uint64_t size = 0;
	uint64_t header = 0; // bytes before the arena
	uint32_t uid = 0;
	Fixture()
	{
		size = segment_size();
		void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED)
			abort();
		base = static_cast<uint8_t *>(p);
		uid = uint32_t(getuid());
		segment_format(base, 0, uid);
		header = reinterpret_cast<SegmentHeader *>(base)->arena_offset;
	}
};

Fixture &fixture()
{
	static Fixture f;
	return f;
}

// Reads the bytes [p, p+n): a sanitizer or a fault reports any outside
// the segment.
uint8_t touch(const void *p, size_t n)
{
	auto *b = static_cast<const volatile uint8_t *>(p);
	return n ? uint8_t(b[0] ^ b[n - 1]) : 0;
}

uint8_t use_ring(const Segment &seg, const RingLoc &loc)
{
	// Memfd locators (off 0) name another process's memory: attach checks
	// their fields only, and ring() maps them later (checked again then).
	if (!__atomic_load_n(&loc.off, __ATOMIC_RELAXED))
		return 0;
	RingHeader *r = seg.ring(loc);
	if (!r)
		return 0;
	uint64_t bytes = uint64_t(r->capacity) * r->cell_size;
	uint8_t x = touch(r->cells, bytes);
	// Then popped and claimed as consumers and producers do: on a damaged
	// ring (sequence numbers, counters) both must return, never spin, and
	// stay inside its cells. The ring's bytes are put back afterwards, so
	// that each input starts from the same segment.
	if (sizeof(RingHeader) + bytes > (1u << 16))
		return x;
	std::vector<uint8_t> saved(reinterpret_cast<uint8_t *>(r),
				   reinterpret_cast<uint8_t *>(r) + sizeof(RingHeader) + bytes);
	alignas(8) uint8_t out[512];
	for (uint32_t i = 0; i <= r->capacity && ring_pop(r, out, sizeof(out)); i++)
		x ^= out[0];
	uint64_t pos = 0;
	if (void *cell = ring_claim(r, &pos))
		x ^= *static_cast<uint8_t *>(cell);
	memcpy(r, saved.data(), saved.size());
	return x;
}

// What the provider does with an accepted segment's tables: every entry
// below a table's extent (the provider scans no further), every index it
// holds followed, every arena ring resolved and read.
uint8_t use_segment(const Segment &seg)
{
	const SegmentHeader *h = seg.hdr;
	uint8_t x = 0;
	for (const QpEntry &q : in_extent(h->qps, h->extents.qps)) {
		if (q.slot.load(std::memory_order_relaxed) != SLOT_LIVE)
			continue;
		x ^= touch(&h->procs[q.owner], sizeof(ProcEntry));
		if (q.srq)
			x ^= touch(&h->srqs[q.srq - 1], sizeof(SrqEntry));
		if (q.recv_cq)
			x ^= touch(&h->cqs[q.recv_cq - 1], sizeof(CqEntry));
		if (q.xrcd)
			x ^= touch(&h->xrcds[q.xrcd - 1], sizeof(XrcdEntry));
		x ^= use_ring(seg, q.rq_ring);
	}
	for (const CqEntry &c : in_extent(h->cqs, h->extents.cqs)) {
		if (c.slot.load(std::memory_order_relaxed) != SLOT_LIVE)
			continue;
		x ^= touch(&h->procs[c.owner], sizeof(ProcEntry));
		x ^= use_ring(seg, c.ring);
	}
	for (const SrqEntry &s : in_extent(h->srqs, h->extents.srqs)) {
		if (s.slot.load(std::memory_order_relaxed) != SLOT_LIVE)
			continue;
		x ^= touch(&h->procs[s.owner], sizeof(ProcEntry));
		if (s.xrcd)
			x ^= touch(&h->xrcds[s.xrcd - 1], sizeof(XrcdEntry));
		if (s.cq)
			x ^= touch(&h->cqs[s.cq - 1], sizeof(CqEntry));
		x ^= use_ring(seg, s.ring);
	}
	for (const MrEntry &m : in_extent(h->mrs, h->extents.mrs)) {
		if (m.kind.load(std::memory_order_relaxed) == KEY_FREE)
			continue;
		x ^= touch(&h->procs[m.owner], sizeof(ProcEntry));
		if (m.parent)
			x ^= touch(&h->mrs[m.parent - 1], sizeof(MrEntry));
		if (&h->mrs[(m.key >> 8) - 1] != &m)
			abort(); // the table check promises a key names its own slot
	}
	for (const XrcdRef &r : in_extent(h->xrcd_refs, h->extents.xrcd_refs))
		if (r.in_use)
			x ^= touch(&h->xrcds[r.xrcd], sizeof(XrcdEntry)) ^
			     touch(&h->procs[r.proc], sizeof(ProcEntry));
	for (const QpHandleRef &r : in_extent(h->qp_refs, h->extents.qp_refs))
		if (r.in_use)
			x ^= touch(&h->qps[r.qp], sizeof(QpEntry)) ^
			     touch(&h->procs[r.proc], sizeof(ProcEntry));
	for (const McastEntry &g : h->mcast)
		for (uint32_t qpn : g.qpn)
			if (qpn)
				x ^= touch(&h->qps[qpn - kQpnBase], sizeof(QpEntry));
	return x;
}

// Allocates from the accepted arena and frees as the provider does
// (arena_alloc, arena_free), whatever the chain, the next-fit hint and the
// reuse queue (SegmentHeader::arena_hint, reuse_head, reuse_tail and the
// blocks' links, which the patches reach): every call must return, and
// every offset it gives must lie inside the arena. Sizes stay small, so
// what the calls write (block headers) stays inside the first
// kArenaWindow + kAllocSlack bytes, saved and put back by the caller.
constexpr uint64_t kAllocSlack = 8192;
uint8_t use_arena(Segment &seg, const uint8_t *data, size_t size)
{
	const SegmentHeader *h = seg.hdr;
	uint64_t got[8] = {};
	uint8_t x = 0;
	for (size_t i = 0; i < 8; i++) {
		uint64_t bytes = 1 + (i < size ? data[i] : 0) * 4u; // 1..1021
		got[i] = arena_alloc(&seg, bytes, 0);
		if (got[i] && (got[i] < h->arena_offset + 64 ||
			       got[i] + bytes > h->arena_offset + h->arena_size))
			abort(); // an allocation outside the arena
		if (got[i])
			x ^= touch(seg.base + got[i], bytes);
		if (i % 3 == 2 && got[i - 1]) {
			arena_free(&seg, got[i - 1]); // a hole for the next calls
			got[i - 1] = 0;
		}
	}
	for (uint64_t g : got)
		if (g)
			arena_free(&seg, g);
	return x;
}

struct Undo {
	uint64_t off;
	std::vector<uint8_t> old;
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Fixture &f = fixture();
	if (!size)
		return 0;
	uint8_t flags = data[0];
	size_t i = 1;
	std::vector<Undo> undo;
	const uint64_t span = f.header + kArenaWindow;
	while (i + 5 <= size) {
		uint32_t off32;
		memcpy(&off32, data + i, 4);
		uint64_t off = off32 % span;
		size_t len = 1 + data[i + 4] % 32;
		i += 5;
		len = std::min({len, size - i, size_t(span - off)});
		if (!len)
			break;
		undo.push_back(Undo{off, std::vector<uint8_t>(f.base + off, f.base + off + len)});
		memcpy(f.base + off, data + i, len);
		i += len;
	}
	auto *h = reinterpret_cast<SegmentHeader *>(f.base);
	uint32_t old_checksum = h->checksum;
	if (flags & 1)
		segment_seal(h);

	uint64_t file_size = (flags & 2) ? f.size - 4096 : f.size;
	int index = (flags & 4) ? 1 : 0;
	uint32_t uid = (flags & 8) ? f.uid + 1 : f.uid;
	// attach's order (shm.cpp, attach_new): header, then tables, then arena.
	const char *d = segment_header_defect(h, file_size, index, uid);
	if (!d)
		d = segment_tables_defect(h);
	if (!d)
		d = arena_defect(f.base + h->arena_offset, h->arena_size);
	if (!d) {
		Segment seg;
		seg.base = f.base;
		seg.hdr = h;
		seg.size = f.size;
		seg.index = index;
		volatile uint8_t sink = use_segment(seg);
		uint8_t *arena = f.base + h->arena_offset;
		std::vector<uint8_t> saved(arena, arena + kArenaWindow + kAllocSlack);
		uint64_t hint = h->arena_hint, head = h->reuse_head, tail = h->reuse_tail;
		sink = sink ^ use_arena(seg, data, size);
		memcpy(arena, saved.data(), saved.size());
		h->arena_hint = hint;
		h->reuse_head = head;
		h->reuse_tail = tail;
		(void)sink;
	}

	h->checksum = old_checksum;
	for (auto it = undo.rbegin(); it != undo.rend(); ++it)
		memcpy(f.base + it->off, it->old.data(), it->old.size());
	return 0;
}
