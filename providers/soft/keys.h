// openverbs software RDMA device: the shared key table (SegmentHeader::mrs),
// its one reader/writer protocol.
//
// Every memory key (memory region or memory window) has an entry that many
// processes read lock-free on their data paths and that its owner (and, for
// SEND_WITH_INV, a remote requester) changes. ibv_rereg_mr(3) keeps the key,
// so a reader must never combine fields of two registrations; a window's
// parent must never be cleared once the slot holds another window.
//
// Protocol (a sequence lock, as the kernel's seqcount_t): MrEntry::seq is
// even while the entry is stable and odd while a writer changes it; every
// write section makes it grow by 2. Every field is read and written with
// relaxed atomic accesses (plain moves on x86), ordered by the sequence:
//  - readers (key_read, key_snapshot, and check_rkey's in-place variant):
//    load seq (acquire), give up on odd, read the fields, fence (acquire),
//    load seq again; equal values mean a consistent snapshot. A snapshot
//    keeps its seq: key_unchanged(entry, seq) (one load) tells later that
//    the entry still holds exactly what was read (the fast write path's
//    cached checks rely on that, and a window records its parent's seq);
//  - writers enter with a compare-and-swap from an even value to the next
//    odd one and leave with a release store of the next even value.
//    key_write_lock waits for a stable entry (the control path: the device
//    lock is held, so the only other writers are short data-path sections);
//    key_write_lock_if enters only if the entry still has the seq a
//    snapshot was validated at (SEND_WITH_INV, LOCAL_INV, MW bind), so an
//    entry changed meanwhile (deallocated, reused, rebound) is left alone.
// A writer that died inside its section leaves seq odd: readers then treat
// the key as invalid, and the next control-path writer (device lock held)
// takes the entry over after a bounded wait.
#pragma once

#include "shm.h"

#include <atomic>
#include <cstdint>
#include <sched.h>

namespace ovsoft {

template <class T> static inline T kld(const T &f)
{
	return __atomic_load_n(&f, __ATOMIC_RELAXED);
}
template <class T, class V> static inline void kst(T &f, V v)
{
	__atomic_store_n(&f, T(v), __ATOMIC_RELAXED);
}

// A consistent copy of one entry (the fields of MrEntry, see shm.h).
struct KeySnap {
	const MrEntry *entry;
	uint64_t seq;
	uint32_t kind;
	uint32_t key;
	uint32_t owner;
	int32_t owner_pid;
	uint32_t pd_id;
	uint32_t access;
	uint64_t addr;
	uint64_t iova;
	uint64_t length;
	uint32_t mw_type;
	uint32_t parent;
	uint64_t parent_seq;
	uint32_t bound_qpn;
	int32_t memfd;
	uint32_t memfd_ino;
	uint64_t share_lo;
	uint64_t share_hi;
	uint64_t memfd_off;
};

// The entry a key names (slot = key >> 8, minus one), or nullptr.
static inline MrEntry *key_entry(const Segment *seg, uint32_t key)
{
	uint32_t slot = (key >> 8) - 1;
	if ((key >> 8) == 0 || slot >= kMaxMrs)
		return nullptr;
	return &seg->hdr->mrs[slot];
}

// One attempt at a consistent copy of e. False when a writer was inside.
static inline bool key_snapshot_once(const MrEntry &e, KeySnap &o)
{
	uint64_t s = e.seq.load(std::memory_order_acquire);
	if (s & 1)
		return false;
	o.entry = &e;
	o.seq = s;
	o.kind = e.kind.load(std::memory_order_relaxed);
	o.key = kld(e.key);
	o.owner = kld(e.owner);
	o.owner_pid = kld(e.owner_pid);
	o.pd_id = kld(e.pd_id);
	o.access = kld(e.access);
	o.addr = kld(e.addr);
	o.iova = kld(e.iova);
	o.length = kld(e.length);
	o.mw_type = kld(e.mw_type);
	o.parent = kld(e.parent);
	o.parent_seq = kld(e.parent_seq);
	o.bound_qpn = kld(e.bound_qpn);
	o.memfd = kld(e.memfd);
	o.memfd_ino = kld(e.memfd_ino);
	o.share_lo = kld(e.share_lo);
	o.share_hi = kld(e.share_hi);
	o.memfd_off = kld(e.memfd_off);
	std::atomic_thread_fence(std::memory_order_acquire);
	return e.seq.load(std::memory_order_relaxed) == s;
}

// A consistent copy of e, retried a bounded number of times while writers
// come and go. False: the entry kept changing (treated as an invalid key).
static inline bool key_snapshot(const MrEntry &e, KeySnap &o)
{
	for (int i = 0; i < 64; i++) {
		if (key_snapshot_once(e, o))
			return true;
		if (i >= 8)
			sched_yield();
	}
	return false;
}

// The live entry of `key` (a memory region or a window, with exactly this
// key) as a consistent snapshot. False: unknown, free, or another key.
static inline bool key_read(const Segment *seg, uint32_t key, KeySnap &o)
{
	const MrEntry *e = key_entry(seg, key);
	return e && key_snapshot(*e, o) && o.kind != KEY_FREE && o.key == key;
}

// Whether e still holds exactly the snapshot numbered seq.
static inline bool key_unchanged(const MrEntry *e, uint64_t seq)
{
	return e->seq.load(std::memory_order_acquire) == seq;
}

// Enters a write section on e if it is still at seq (an even value from a
// snapshot). False: the entry changed since.
static inline bool key_write_lock_if(MrEntry &e, uint64_t seq)
{
	if (seq & 1)
		return false;
	if (!e.seq.compare_exchange_strong(seq, seq + 1, std::memory_order_acquire,
					   std::memory_order_relaxed))
		return false;
	std::atomic_thread_fence(std::memory_order_release);
	return true;
}

// Enters a write section on e whatever it holds (control path, device lock
// held). Returns the seq to pass to key_write_unlock.
static inline uint64_t key_write_lock(MrEntry &e)
{
	for (int i = 0;; i++) {
		uint64_t s = e.seq.load(std::memory_order_relaxed);
		if (!(s & 1) && key_write_lock_if(e, s))
			return s;
		if ((s & 1) && i > 100000) {
			// A writer died inside its section (data-path sections are a
			// few dozen instructions): take the entry over.
			if (e.seq.compare_exchange_strong(s, s + 2, std::memory_order_acquire))
				return s + 1;
		}
		sched_yield();
	}
}

// Leaves the write section entered at seq.
static inline void key_write_unlock(MrEntry &e, uint64_t seq)
{
	e.seq.store(seq + 2, std::memory_order_release);
}

// Whether [addr, addr+len) lies inside the snapshot's range (iova based).
static inline bool key_range_ok(const KeySnap &m, uint64_t addr, uint64_t len)
{
	if (addr < m.iova)
		return false;
	uint64_t off = addr - m.iova;
	return off <= m.length && len <= m.length - off;
}

// Whether window snapshot m may be used through responder QP dqpn: bound,
// to that QP if it is of type 2, and its region unchanged since the bind
// (responder.cpp).
bool window_usable(Segment *seg, const KeySnap &m, uint32_t dqpn);

// SEND_WITH_INV's invalidation of the window checked as `inv`: only if its
// entry still holds exactly that: a window deallocated, reused or rebound
// since is someone else's now and stays as it is (responder.cpp; the RoCE
// transport's responder uses it too).
void invalidate_window(const KeySnap &inv);

} // namespace ovsoft
