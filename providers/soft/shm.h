// openverbs software RDMA device: the per-user, per-device shared segment.
//
// Every process of one user that opens soft<N> maps the same segment
// (/dev/shm/openverbs-<uid>/soft<N>, directory 0700, file 0600). It holds the
// tables peers need to reach each other (processes, QPs, CQs, SRQs, memory
// keys, XRC domains, multicast groups) and an arena from which the shared
// rings (receive queues, shared receive queues, completion queues) are cut.
//
// Trust rule: the segment is writable by every process of the user, so it is
// data, never structure. Every index read from it is bounds-checked or masked
// before use and every arena offset is checked against the arena size;
// the header carries a magic, a layout version, the segment size and a
// checksum of those, verified on attach (a damaged header is refused with
// EPROTO and never repaired in place).
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <pthread.h>
#include <sys/types.h>

namespace ovsoft {

inline constexpr uint64_t kMagic = 0x4f56534f46543031ull; // "OVSOFT01"
inline constexpr uint32_t kLayoutVersion = 17;

// Table capacities (also the limits reported by ibv_query_device).
inline constexpr uint32_t kMaxProcs = 512;
inline constexpr uint32_t kMaxQps = 4096;
inline constexpr uint32_t kMaxCqs = 4096;
inline constexpr uint32_t kMaxSrqs = 1024;
inline constexpr uint32_t kMaxMrs = 32768; // memory regions + memory windows
inline constexpr uint32_t kMaxXrcds = 256;
inline constexpr uint32_t kMaxXrcdRefs = 2048;
inline constexpr uint32_t kMaxMcast = 256;
inline constexpr uint32_t kMaxQpHandleRefs = 4096; // (XRC_RECV QP, process) pairs
inline constexpr uint32_t kMaxMcastAttach = 16; // QPs per multicast group
inline constexpr uint32_t kMaxFlows = 256;      // flow steering rules (raw.cpp)
inline constexpr uint32_t kQpnBase = 0x20;      // QP numbers are slot + base
inline constexpr uint32_t kSrqnBase = 0x20;
inline constexpr uint64_t kArenaSize = 256ull << 20; // sparse: pages are touched on use

// Robust, process-shared mutex in the segment (EOWNERDEAD is recovered).
struct ShmMutex {
	pthread_mutex_t m;
};
void shm_mutex_init(ShmMutex *m);
void shm_lock(ShmMutex *m);
void shm_unlock(ShmMutex *m);

struct ProcEntry {
	std::atomic<uint32_t> in_use;
	int32_t pid;
	uint64_t start_time; // /proc/<pid>/stat field 22: tells a reused pid apart
	uint32_t contexts;   // open contexts of that process on this device
};

enum QpSlotState : uint32_t { SLOT_FREE = 0, SLOT_LIVE = 1 };

// Where a shared ring (CQ, QP receive queue, SRQ) lives, as peers read it.
//  RING_ARENA: in this segment's arena, at offset `off` from the segment
//    start (objects without a custom allocator, and USE_DEFAULT).
//  RING_MEMFD: in a buffer the owner's parent-domain allocator returned; the
//    owner replaced those pages in place by a shared mapping of a memfd, and
//    peers map that file through /proc/<pid>/fd/<memfd> (checked against
//    memfd_ino) with peer_map. The ring header is at file offset memfd_off
//    and the ring occupies `bytes` bytes.
// A non-zero `off` always means the arena (memfd locators carry off = 0), so
// the default path reads one field. Like everything in the segment, a
// locator is data: Segment::ring checks the bounds, the kind and the
// identity of the file before use.
enum RingKind : uint32_t { RING_NONE = 0, RING_ARENA = 1, RING_MEMFD = 2 };

struct RingLoc {
	uint32_t kind;       // RingKind
	int32_t pid;         // RING_MEMFD: the owner process
	uint64_t off;        // RING_ARENA: offset from the segment start
	int32_t memfd;       // RING_MEMFD: the owner's fd number of the memfd
	uint32_t memfd_ino;  // its inode number
	uint64_t memfd_off;  // offset of the ring header in the file
	uint64_t bytes;      // RING_MEMFD: header plus cells
};

// A QP as its peers see it. Written by the owner under the device lock
// (control path) and read lock-free by peers (data path).
struct QpEntry {
	std::atomic<uint32_t> slot;  // QpSlotState
	std::atomic<uint32_t> state; // enum ibv_qp_state
	uint32_t generation;
	uint32_t owner;      // process slot
	int32_t owner_pid;
	uint32_t qp_type;    // enum ibv_qp_type
	uint32_t access;     // IBV_ACCESS_REMOTE_* accepted as responder
	uint32_t pd_id;
	uint32_t qkey;
	uint32_t dest_qpn;
	uint32_t srq;        // SRQ slot + 1, 0 when the QP has its own RQ
	uint32_t recv_cq;    // CQ slot + 1
	uint32_t xrcd;       // XRC domain slot + 1 (XRC_RECV)
	uint32_t min_rnr_timer;
	uint32_t port_num;
	uint32_t sq_sig_all;
	uint32_t handles;    // XRC_RECV: live handles in all processes (qp_refs sums)
	RingLoc rq_ring;     // the receive ring (RING_NONE: SRQ or none)
	std::atomic<uint32_t> remote_error; // a peer put this QP in error
	std::atomic<uint32_t> recv_lock;    // serialises delivery into the RQ (spin)
	// Counts the times peers put this QP in error; never reset, so every
	// holder of an XRC receive QP tells a new error from one it reported.
	std::atomic<uint32_t> error_seq;
};

struct CqEntry {
	std::atomic<uint32_t> slot;
	uint32_t generation;
	uint32_t owner;
	int32_t owner_pid;
	RingLoc ring;         // the completion ring
	uint64_t user_handle; // owner's struct ibv_cq *
	std::atomic<uint32_t> armed; // 0 no, 1 next completion, 2 solicited only
	std::atomic<uint32_t> overflow;
	int32_t channel_fd;   // owner's completion channel fd (-1 none)
	uint32_t channel_ino;
	int32_t async_fd;
	uint32_t async_ino;
	// 1 when the owner asked for completion timestamps (create_cq_ex with
	// IBV_WC_EX_WITH_COMPLETION_TIMESTAMP*): pushers stamp CqeCell::ts.
	uint32_t stamp;
};

struct SrqEntry {
	std::atomic<uint32_t> slot;
	uint32_t generation;
	uint32_t owner;
	int32_t owner_pid;
	uint32_t srq_type; // enum ibv_srq_type
	uint32_t pd_id;
	uint32_t xrcd;     // slot + 1
	uint32_t cq;       // XRC and TM SRQ: completion queue slot + 1
	RingLoc ring;
	uint64_t user_handle;
	std::atomic<uint32_t> limit; // armed limit, 0 = not armed
	int32_t async_fd;
	uint32_t async_ino;
	std::atomic<uint32_t> error; // the owner destroyed or lost it
	uint64_t tm_off;   // TM SRQ: arena offset of its TmList, else 0
};

// ---- Tag matching (IBV_SRQT_TM; srq.cpp posts the list operations,
// responder.cpp matches arriving messages).
inline constexpr uint32_t kTmMaxTags = 256;      // ibv_tm_caps.max_num_tags
inline constexpr uint32_t kTmMaxOps = 256;       // ibv_tm_caps.max_ops
inline constexpr uint32_t kTmMaxSge = 4;         // ibv_tm_caps.max_sge
inline constexpr uint32_t kTmMaxRndvHdr = 64;    // ibv_tm_caps.max_rndv_hdr_size
inline constexpr uint32_t kTmListMagic = 0x544d4c53;

enum TmTagState : uint32_t { TAG_FREE = 0, TAG_POSTED = 1 };

// One entry of a tag-matching list: a receive buffer waiting for the
// message whose tag it matches (ibv_post_srq_ops(3), IBV_WR_TAG_ADD).
struct TmTag {
	uint32_t state;   // TmTagState
	uint32_t num_sge;
	uint64_t order;   // when it was added: of several matches the oldest wins
	uint64_t tag;
	uint64_t mask;
	uint64_t wr_id;   // the add's recv_wr_id, reported by its receive
	struct ibv_sge sge[kTmMaxSge];
};

// A TM SRQ's list, in the arena (like everything in the segment, data:
// tm_list in responder.cpp checks it before use). The handle of a tag is
// its index in tags[].
struct TmList {
	uint32_t magic;
	uint32_t max_tags;   // entries in tags[]
	ShmMutex lock;       // list operations against deliveries
	uint32_t unexpected; // tagged messages no entry matched, so far
	uint32_t sw_count;   // unexpected messages the owner reported handled
	uint64_t next_order;
	TmTag tags[];
};

enum MrKind : uint32_t { KEY_FREE = 0, KEY_MR = 1, KEY_MW = 2 };

// One memory key. Read and written only through keys.h (a sequence lock:
// `seq`), never field by field.
struct MrEntry {
	std::atomic<uint32_t> kind; // MrKind
	uint32_t key;       // lkey == rkey; low byte is the key generation
	uint32_t owner;
	int32_t owner_pid;
	uint32_t pd_id;
	uint32_t access;
	uint64_t addr;      // process virtual address of the first byte
	uint64_t iova;      // address the region is accessed by (hca_va)
	uint64_t length;
	uint32_t mw_type;   // KEY_MW: 1 or 2
	uint32_t parent;    // KEY_MW: MR slot + 1 it is bound to (0 = unbound)
	uint32_t bound_qpn; // type 2 windows: QP they were bound through
	uint64_t parent_seq; // KEY_MW: the parent's seq when bound (any change of
			     // the region - dereg, rereg, reuse - unbinds)
	// When the owner backs the region with a shareable memfd (the pages are
	// remapped in place at registration), peers map it and copy with plain
	// loads and stores: owner's fd number, its inode, and the offset of
	// `addr` in the file. memfd < 0: reach the memory with process_vm_*.
	// Only whole pages inside the region are converted: [share_lo,
	// share_hi) in the region's address space (iova), which starts at file
	// offset memfd_off.
	int32_t memfd;
	uint32_t memfd_ino;
	uint64_t share_lo;
	uint64_t share_hi;
	uint64_t memfd_off;
	// The sequence lock of keys.h: odd while a writer changes the entry,
	// grows by 2 with every change. Never reset, so an unchanged value
	// means the very same contents (the fast write path's cached checks).
	std::atomic<uint64_t> seq;
};

struct XrcdEntry {
	uint32_t in_use;
	uint32_t refs;
	uint64_t dev;  // st_dev of the file naming the domain (0 with no file)
	uint64_t ino;
	uint32_t id;   // unique across the device's life
	uint32_t anonymous;
};

struct XrcdRef {
	uint32_t in_use;
	uint32_t xrcd; // slot
	uint32_t proc;
	uint32_t count;
};

// One process's handles on one XRC_RECV QP (the creator's and those from
// ibv_open_qp). The QP lives while any process holds a handle; the reclaim
// of a dead process drops its handles and, when the QP's owner died while
// others still hold it, hands ownership to one of them.
struct QpHandleRef {
	uint32_t in_use;
	uint32_t qp;    // QP slot
	uint32_t proc;  // process slot
	uint32_t count; // handles of that process
};

// ---- Flow steering of raw packet QPs (raw.cpp): one rule of
// ibv_create_flow(3), kept so that any process of the device that sends a
// frame can steer it. Like everything in the segment, data: raw.cpp walks
// `specs` with bounds checks of its own and checks every slot it names.
inline constexpr uint32_t kFlowSpecBytes = 448; // the rule's specs, as given
inline constexpr uint32_t kRssMaxTable = 64;    // rss_caps.max_rwq_indirection_table_size
inline constexpr uint32_t kRssKeyLen = 40;      // Toeplitz key bytes

struct FlowEntry {
	std::atomic<uint32_t> in_use; // 0 free, 1 live
	uint32_t generation;
	uint32_t owner;      // process slot
	uint32_t qp;         // QP slot of the raw packet QP it steers to
	uint32_t type;       // enum ibv_flow_attr_type
	uint32_t priority;
	uint32_t num_specs;
	uint32_t specs_len;  // bytes used in specs
	// The QP is an RSS QP: frames go to rss_wq[hash mod table size], the
	// Toeplitz hash (key rss_key) of the header fields rss_fields names
	// (enum ibv_rx_hash_fields). Slots of the WQs' queues.
	uint32_t rss;
	uint32_t rss_log_size;
	uint64_t rss_fields;
	uint8_t rss_key[kRssKeyLen];
	uint32_t rss_wq[kRssMaxTable];
	alignas(8) uint8_t specs[kFlowSpecBytes];
};

struct McastEntry {
	uint32_t in_use;
	uint16_t lid;
	uint16_t pad;
	uint8_t gid[16];
	uint32_t qpn[kMaxMcastAttach]; // 0 = empty
};

// ---- The extent of a large table: entries are taken from the bottom up,
// so that a device that holds few objects keeps its tables short, and
// what reads a whole table (attach's check, the reclaim of a dead
// process, the allocators) reads only [0, used) and never maps the pages
// above it.
//   used: one past the highest entry ever taken since the segment was
//         formatted (never lowered). Every entry at or above it is free,
//         and zero in a sound segment; the data path, which bounds-checks
//         every index it reads, may still look one up by index.
//   low:  no free entry lies below it (a hint: lowered when an entry is
//         freed; a stale hint costs a scan or a larger extent, never a
//         wrong answer).
// Both change only under the lock that guards taking an entry of that
// table (the device lock; flow_lock for the flow table).
struct TableExtent {
	std::atomic<uint32_t> used;
	std::atomic<uint32_t> low;
};

// The extent's end, never past the table's capacity `max` (a damaged
// value cannot make a scan leave the table).
inline uint32_t extent_end(const TableExtent &t, uint32_t max)
{
	uint32_t u = t.used.load(std::memory_order_relaxed);
	return u < max ? u : max;
}

// Takes a free entry (is_free(i) true) of a table of `max` entries: the
// first free one at or above the hint, else the one at the extent's end
// (raising it), else, with the extent at the table's end, the first free
// one below the hint. -1 when the table is full. The caller holds the
// table's lock and makes the entry live (or leaves it free) before
// dropping it.
template <class IsFree> int extent_take(TableExtent &t, uint32_t max, IsFree is_free)
{
	uint32_t n = extent_end(t, max);
	uint32_t lo = t.low.load(std::memory_order_relaxed);
	if (lo > n)
		lo = n;
	for (uint32_t i = lo; i < n; i++)
		if (is_free(i)) {
			t.low.store(i, std::memory_order_relaxed);
			return int(i);
		}
	if (n < max) {
		t.used.store(n + 1, std::memory_order_relaxed);
		t.low.store(n, std::memory_order_relaxed);
		return int(n);
	}
	for (uint32_t i = 0; i < lo; i++)
		if (is_free(i)) {
			t.low.store(i, std::memory_order_relaxed);
			return int(i);
		}
	return -1;
}

// Entry `slot` was freed: the hint moves down to it.
inline void extent_release(TableExtent &t, uint32_t slot)
{
	if (slot < t.low.load(std::memory_order_relaxed))
		t.low.store(slot, std::memory_order_relaxed);
}

// The entries of `table` below its extent.
template <class T, size_t N> std::span<T> in_extent(T (&table)[N], const TableExtent &t)
{
	return std::span<T>(table, extent_end(t, uint32_t(N)));
}

struct TableExtents {
	TableExtent qps, cqs, srqs, mrs, xrcd_refs, qp_refs, flows;
};

struct SegmentHeader {
	uint64_t magic;
	uint32_t version;
	uint32_t device_index;
	uint64_t size;
	uint32_t uid;
	uint32_t checksum; // over the fields above
	ShmMutex lock;     // control path of the whole device
	ShmMutex atomic_lock; // serialises RDMA atomics device-wide
	std::atomic<uint32_t> next_pd_id;
	std::atomic<uint32_t> next_xrcd_id;
	std::atomic<uint32_t> key_gen;
	uint32_t arena_initialised;
	uint64_t arena_offset; // from the start of the segment
	uint64_t arena_size;
	// Where the next arena allocation starts looking (next fit): the
	// offset of a block header in the arena, kept one by every change of
	// the block chain (arena_alloc), under the device lock.
	uint64_t arena_hint;
	// The arena's reuse queue (shm.cpp, reuse_alloc): the freed blocks,
	// oldest first, as arena offsets of their headers; UINT64_MAX when empty.
	uint64_t reuse_head;
	uint64_t reuse_tail;
	TableExtents extents;
	ProcEntry procs[kMaxProcs];
	QpEntry qps[kMaxQps];
	CqEntry cqs[kMaxCqs];
	SrqEntry srqs[kMaxSrqs];
	MrEntry mrs[kMaxMrs];
	XrcdEntry xrcds[kMaxXrcds];
	XrcdRef xrcd_refs[kMaxXrcdRefs];
	McastEntry mcast[kMaxMcast];
	QpHandleRef qp_refs[kMaxQpHandleRefs];
	ShmMutex flow_lock;  // the flow table against senders steering frames
	FlowEntry flows[kMaxFlows];
};

// ---- Rings: bounded multi-producer / multi-consumer queues (per-cell
// sequence numbers), cells of fixed size. All positions are masked.
struct RingHeader {
	uint32_t magic;
	uint32_t cell_size; // bytes, multiple of 8, includes the 8-byte sequence
	uint32_t capacity;  // power of two
	uint32_t owner;     // process slot (reaping)
	alignas(64) std::atomic<uint64_t> enq;
	alignas(64) std::atomic<uint64_t> deq;
	alignas(64) uint8_t cells[];
};
inline constexpr uint32_t kRingMagic = 0x52494e47;

// Receive work request as kept in a shared ring.
struct RecvWqe {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t pad;
	struct ibv_sge sge[]; // num_sge entries (up to the queue's max_sge)
};

// Completion as kept in a CQ ring (an ibv_wc plus flags only we need).
// Cells are kCqeCellSize bytes, whole cache lines: the cell's sequence
// number, the ibv_wc and the two flags fill its first line, the only one a
// completion writes and a poll reads on the common path; ts and the
// tag-matching fields, in the second line, are written only when they have
// a meaning (a CQ that stamps, a tag-matching receive) and read only then.
struct CqeCell {
	struct ibv_wc wc;
	uint32_t solicited;
	// Written 0 with the completion. The CQ's owner sets it to 1 on a
	// completion it removed from the ring in place (a QP of the CQ went
	// to RESET: cq_purge_qp in qp.cpp); polls skip such cells.
	uint32_t purged;
	// The device clock (clock.cpp) when the completion was written, on CQs
	// whose CqEntry::stamp is set (left as it was otherwise).
	uint64_t ts;
	// Tag matching (ibv_wc_read_tm_info): the message's tag and the
	// TMH's app_ctx, on the receives of a TM SRQ that matched (wc_flags
	// has IBV_WC_TM_MATCH; left as they were otherwise).
	uint64_t tm_tag;
	uint32_t tm_priv;
	uint32_t pad;
};
inline constexpr uint32_t kCqeCellSize = 128;
static_assert(8 + offsetof(CqeCell, ts) == 64 && 8 + sizeof(CqeCell) <= kCqeCellSize,
	      "a completion's common fields fill the first cache line of its cell");

struct Segment {
	SegmentHeader *hdr = nullptr;
	uint8_t *base = nullptr;
	size_t size = 0;
	int fd = -1;
	int index = -1;
	uint32_t my_proc = UINT32_MAX; // my slot in procs[]
	char path[128] = {};

	uint8_t *arena() const { return base + hdr->arena_offset; }
	// The ring `loc` names, mapped into this process, or nullptr when the
	// locator or the ring header is out of bounds, stale or damaged.
	RingHeader *ring(const RingLoc &loc) const;
	// The ring header at arena offset off when it lies past the tables,
	// inside the mapping and aligned as a RingHeader must be; nullptr
	// otherwise. Reads nothing of the header (its fields are the caller's
	// to check): the bounds under Segment::ring and the fast message's
	// prefetch (requester.cpp).
	RingHeader *ring_header_at(uint64_t off) const
	{
		if (off < hdr->arena_offset || (off & 63) || off > size ||
		    size - off < sizeof(RingHeader))
			return nullptr;
		return reinterpret_cast<RingHeader *>(base + off);
	}
	// Locator of the arena ring at offset `off`.
	static RingLoc arena_loc(uint64_t off) { return RingLoc{RING_ARENA, 0, off, -1, 0, 0, 0}; }
};

// ---- Validation of a segment (attach refuses one that fails, with the
// defect in the diagnostic; the fuzz targets feed these functions arbitrary
// bytes). Pure functions of the bytes given: no lock, no global state. Each
// returns nullptr when sound, else a constant string naming the first
// defect found.
// The header of a segment file of `file_size` bytes of user `uid` whose
// header names device `index` (soft<index>'s index, or
// OPENVERBS_MAX_SOFT_DEVICES for a RoCE device): magic, layout version,
// sizes, identity, checksum, arena placement.
const char *segment_header_defect(const SegmentHeader *h, uint64_t file_size, int index,
				  uint32_t uid);
// The shared tables (what must hold whenever the device lock is free):
// no extent past its table; below each table's extent, slot states and
// kinds take known values, every index names an entry that exists, every
// ring locator names a ring inside the arena or a memfd. Entries above an
// extent are not read (they are free; see TableExtent).
const char *segment_tables_defect(const SegmentHeader *h);
// The arena's block chain: `arena_size` bytes at `arena`, blocks with
// their magic, sizes multiple of 64 that tile the arena exactly.
const char *arena_defect(const uint8_t *arena, uint64_t arena_size);
// The size of a segment of this layout (header, tables and arena).
uint64_t segment_size();
// Formats a new segment of segment_size() bytes at `base` for the device
// with header index `index` of user `uid`: header, empty tables, one free
// arena block (what attach does to a segment it creates; the fuzz target
// tests/fuzz/segment_fuzz.cpp starts from it).
void segment_format(uint8_t *base, int index, uint32_t uid);
// Recomputes the header's checksum over its identity fields.
void segment_seal(SegmentHeader *h);

// Attach this process to soft<index> (creating the segment when absent).
// Returns 0 or an errno value (EPROTO: damaged segment; EMFILE...).
// RoCE devices (index kRoceIndexBase + N, below 2 * OPENVERBS_MAX_SOFT_DEVICES)
// name their file: `name` (roce/device.cpp), else the file is soft<index>.
int segment_attach(int index, Segment **out, const char *name = nullptr);
// True when the shared segment of soft<index> exists (some process of this
// user has the device open, or had it). Never creates it.
bool segment_present(int index);
// Drop one context reference; the last one of the last live process unlinks
// the segment. In a fork() child (segment_inherited) only the child's
// mapping and descriptor go.
void segment_detach(Segment *seg);
// True when seg was attached by another process: this is a fork() child
// holding its parent's attachment (its registration, objects and locks are
// the parent's).
inline bool segment_inherited(const Segment *seg)
{
	return seg->hdr->procs[seg->my_proc].pid != getpid();
}
// Frees everything held by processes that died. Takes the device lock.
void segment_reap(Segment *seg);
// True when `pid` (started at start_time, 0 = unknown) still runs.
bool process_alive(int32_t pid, uint64_t start_time);
uint64_t process_start_time(int32_t pid);

// XRC_RECV handle bookkeeping, device lock held. qp_ref_add counts one more
// handle of process `proc` on QP slot `qp` (false: table full); qp_ref_drop
// removes one and returns how many that process still holds.
bool qp_ref_add(SegmentHeader *h, uint32_t qp, uint32_t proc);
uint32_t qp_ref_drop(SegmentHeader *h, uint32_t qp, uint32_t proc);
// Forgets every handle on QP slot `qp` (the QP is being freed).
void qp_ref_clear(SegmentHeader *h, uint32_t qp);
// Makes another process holding a handle on `qp` its owner (the owner
// released its last handle or died). False when nobody else holds one.
bool qp_hand_over(SegmentHeader *h, uint32_t qp);

// Arena allocation under the device lock; returns an offset or 0.
uint64_t arena_alloc(Segment *seg, uint64_t bytes, uint32_t owner);
void arena_free(Segment *seg, uint64_t off);

// Ring set-up in freshly allocated arena space. capacity: a power of two,
// at least 2 (with one cell, a published entry and a free one look alike;
// Segment::ring refuses such a ring).
void ring_init(RingHeader *r, uint32_t cell_size, uint32_t capacity, uint32_t owner);
// Claims a cell to write; returns nullptr when full. Publish with ring_publish.
void *ring_claim(RingHeader *r, uint64_t *pos);
void ring_publish(RingHeader *r, void *cell, uint64_t pos);
// Takes the oldest cell; copies `bytes` of it into out. False when empty.
bool ring_pop(RingHeader *r, void *out, size_t bytes);
uint64_t ring_count(const RingHeader *r);
// The cell at position pos if it holds a published, not yet taken entry
// (between deq and enq), else nullptr. Only for the ring's single consumer
// (nobody pops meanwhile): the cell stays valid until it pops it.
void *ring_published(RingHeader *r, uint64_t pos);

// Writes `len` bytes atomically (<= PIPE_BUF) into the pipe that process
// `pid` has open as fd `fd` with inode `ino` (checked, so a reused fd number
// never receives them). Returns 0 or an errno value.
int notify_pipe(int32_t pid, int fd, uint32_t ino, const void *buf, size_t len);

// Maps (shared, read/write) the memfd that process `pid` has open as `fd`
// with inode `ino`, once per process (cached). Returns the base address and
// the file size, or nullptr when it cannot be mapped.
uint8_t *peer_map(int32_t pid, int fd, uint32_t ino, uint64_t *size);
// Changes whenever peer_map replaces one of its mappings: a result of
// peer_map kept by a caller (across map-use sections) may be used again, in
// a later section, only while this value is the one read before the call.
extern std::atomic<uint64_t> g_peer_map_generation;

// ---- Map-use sections: when a replaced peer mapping may be unmapped.
//
// A pointer into a mapping returned by peer_map (a peer's memory region or
// ring) is used only inside a map-use section of the calling thread:
// between map_use_enter() and map_use_leave() (nestable). The send-queue
// guard (qp_sq_lock) is such a section, and so are cq_push and flush_rq.
// A mapping pushed out of peer_map's cache is retired, not unmapped: it is
// unmapped once every thread that was inside a section when it was retired
// has left that section (epoch-based reclamation: each thread announces the
// epoch it entered at; a mapping retired at epoch e is freed when no thread
// announces an epoch <= e). Nothing is freed on a timer, and a thread
// preempted in the middle of a copy keeps its mapping for as long as it
// needs it.
struct MapReader {
	std::atomic<uint64_t> epoch; // 0: outside any section
	std::atomic<uint32_t> used;  // a live thread owns this record
	MapReader *next;
};
struct MapTls {
	MapReader *rec;
	uint32_t depth;
};
extern std::atomic<uint64_t> g_map_epoch;
extern thread_local MapTls t_map __attribute__((tls_model("initial-exec")));
MapReader *map_reader_register();

static inline void map_use_enter()
{
	MapTls &t = t_map;
	if (t.depth++)
		return;
	MapReader *r = t.rec ? t.rec : map_reader_register();
	// seq_cst store: ordered before this thread's later loads of
	// g_peer_map_generation (see retire_map in shm.cpp).
	r->epoch.store(g_map_epoch.load(std::memory_order_acquire), std::memory_order_seq_cst);
}
static inline void map_use_leave()
{
	MapTls &t = t_map;
	if (--t.depth == 0)
		t.rec->epoch.store(0, std::memory_order_release);
}
// Unmaps the retired mappings no section can still use (cheap when none).
void peer_map_reclaim();
// RAII form.
struct MapUse {
	MapUse() { map_use_enter(); }
	~MapUse() { map_use_leave(); }
	MapUse(const MapUse &) = delete;
	MapUse &operator=(const MapUse &) = delete;
};

} // namespace ovsoft
