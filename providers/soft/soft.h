// openverbs software RDMA device: the provider's per-process objects.
//
// Each verbs object embeds the struct the library and the application see
// (first member, so the pointers convert both ways) and refers to its shared
// counterpart in the device segment (shm.h) by slot number.
#pragma once

#include <infiniband/driver.h>
#include <infiniband/openverbs.h>

#include "queue_mem.h"
#include "shm.h"

#include <atomic>
#include <cstdint>
#include <pthread.h>
#include <sched.h>

namespace ovsoft {

// Limits reported by query_device and enforced by every verb.
inline constexpr uint32_t kMaxQpWr = 16384;
inline constexpr uint32_t kMaxSge = 32;
inline constexpr uint32_t kMaxInline = 512;
// 2^18 completions per CQ (a 16 MiB ring): libfabric's verbs;ofi_rxm asks
// for (128 + 128) x 1024 by default (MSG queue sizes times its universe
// size) and does not shrink the request to the device's max_cqe.
inline constexpr uint32_t kMaxCqe = 262144;
inline constexpr uint32_t kMaxSrqWr = 16384;
inline constexpr uint32_t kMaxRdAtom = 128;
inline constexpr uint64_t kMaxMrSize = 1ull << 40;
inline constexpr uint32_t kMaxMsgSize = 1u << 31;
inline constexpr uint32_t kUdMtu = 4096;
// The port's GID table: kGidTableLen entries (ibv_port_attr.gid_tbl_len),
// of which only index 0 holds a GID (fe80::<node GUID>); the others are
// empty, as the unused entries of an HCA's table are: ibv_query_gid reads
// them as the zero GID, ibv_query_gid_ex fails with ENODATA,
// ibv_query_gid_table skips them, and an address vector may not name them
// as its source GID (EINVAL).
inline constexpr uint32_t kGidTableLen = 16;
inline constexpr uint32_t kGidPopulated = 1;
inline constexpr uint32_t kPkeyTableLen = 1;
// ibv_device_attr.vendor_id (an IEEE OUI for hardware): the bytes 4f 56 53,
// "OVS" (openverbs soft). Its first octet has the locally administered and
// group bits set, which no IEEE-assigned OUI has, so it names no real
// vendor. Documented in openverbs-soft(7).
inline constexpr uint32_t kVendorId = 0x4f5653;
#if _OPENVERBS_ABI >= 56
// ibv_device_attr_ex.device_cap_flags_ex bit of a device that executes
// flushes to global visibility: IB_UVERBS_DEVICE_FLUSH_GLOBAL of enum
// ib_uverbs_device_cap_flags (<rdma/ib_user_verbs.h>, Linux 6.2; older uapi
// headers, Debian 12's among them, lack it). Flushes to persistence
// (IB_UVERBS_DEVICE_FLUSH_PERSISTENT, bit 39) are not offered: registered
// memory is ordinary RAM.
inline constexpr uint64_t kDeviceFlushGlobal = 1ull << 38;
#endif

// ibv_device_attr_ex.device_cap_flags_ex bit of a device that executes
// ATOMIC WRITE (ibv_wr_atomic_write(3)): IB_UVERBS_DEVICE_ATOMIC_WRITE of
// enum ib_uverbs_device_cap_flags (<rdma/ib_user_verbs.h>, Linux 6.2; older
// uapi headers lack it).
inline constexpr uint64_t kDeviceAtomicWrite = 1ull << 40;

// IB "RNR NAK timer" field values, in units of 10 microseconds (value 0
// means 655.36 ms). Source: InfiniBand Architecture Specification, table of
// RNR timer encodings (also ibv_modify_qp(3), min_rnr_timer).
inline constexpr uint32_t kRnrTimer10us[32] = {
	65536, 1,    2,    3,    4,    6,    8,    12,   16,    24,    32,
	48,    64,   96,   128,  192,  256,  384,  512,  768,   1024,  1536,
	2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};

struct SoftDevice {
	struct verbs_device vdev;
	int index; // soft<index>; RoCE devices: kRoceIndexBase + N for sroce<N>
	char roce_if[16]; // RoCE v2 device (roce/): its network interface, "" otherwise
	// soft<index>'s port has an Ethernet link layer (RDMAV_SOFT_LINK_LAYER,
	// read when the device is listed): RoCE v2 addressing (GRH required,
	// no LID) and raw packet QPs (raw.cpp).
	bool eth;
};

// Raw packet QPs (raw.cpp): the largest frame a raw packet QP sends or a
// receive buffer is offered (an Ethernet frame of a 9000-byte MTU with a
// VLAN tag), the smallest (an Ethernet header).
inline constexpr uint32_t kRawMaxFrame = 9018;
inline constexpr uint32_t kRawMinFrame = 14;
// Indirection tables per context (rss_caps.max_rwq_indirection_tables).
inline constexpr uint32_t kMaxIndTables = 256;

// RoCE v2 devices (providers/soft/roce/): the transport state of a context
// and of a QP. Null on the shared-memory devices.
struct RoceCtx;
struct RoceQp;
inline constexpr int kRoceIndexBase = OPENVERBS_MAX_SOFT_DEVICES;

struct SoftQp;
struct SoftPd;
struct SoftTd;

struct SoftContext {
	struct verbs_context vctx;
	int index;
	Segment *seg;
	int async_wr;       // write end of the async event pipe
	uint32_t async_ino; // inode of the pipe (peers check it)
	pthread_mutex_t lock;
	SoftQp *qps;        // this context's QPs (progress thread, watchdog)
	bool long_sleep;    // under lock: the progress thread sleeps for seconds (no QP)
	pthread_t thread;
	bool thread_started;
	std::atomic<bool> stop;
	pthread_mutex_t wake_lock;
	pthread_cond_t wake;
	uint64_t wakes; // wake_progress calls, under wake_lock: none is lost
	SoftPd *dead_pds;   // freed parent domains (under lock; freed at close)
	SoftTd *dead_tds;   // freed thread domains (under lock; freed at close)
	SoftContext *next_ctx; // global list (exit handler)
	RoceCtx *roce;         // RoCE v2 device: its transport (roce/roce.h)
	bool eth;              // the port's link layer is Ethernet (SoftDevice::eth)
	std::atomic<uint32_t> ind_tables; // live indirection tables (kMaxIndTables)
};

struct SoftPd {
	struct ibv_pd pd;
	uint32_t id;
	bool parent;        // a parent domain (alloc_parent_domain)
	struct ibv_pd *real; // parent domains: the PD they wrap
	struct ibv_td *td;
	void *pd_context;
	void *(*alloc)(struct ibv_pd *, void *, size_t, size_t, uint64_t);
	void (*free)(struct ibv_pd *, void *, void *, uint64_t);
	// QPs, SRQs, CQs and MRs created on this PD / parent domain: dealloc_pd
	// answers EBUSY while any is alive.
	std::atomic<int> users;
	// A freed parent domain stays allocated, marked dead, until its context
	// is closed (so a second ibv_dealloc_pd never touches freed memory).
	bool dead;
	SoftPd *next_dead;
};

struct SoftTd {
	struct ibv_td td;
	std::atomic<int> refs;
	// The thread domain's guard: held by the application's thread inside
	// post_send (and the other send-queue verbs) of any QP created under a
	// parent domain with this TD, and by the progress thread while it
	// retries, flushes or errors such a QP. It serialises the only two
	// parties that touch those send queues and completion lanes (the
	// application by contract never uses one TD from two threads at once).
	std::atomic<bool> busy;
	// Freed TDs stay allocated, marked dead, until the context is closed:
	// ibv_dealloc_td(3) reads td->context before the library can answer
	// EINVAL for a second call.
	bool dead;
	SoftTd *next_dead;
};

struct SoftDm;

struct SoftMr {
	struct verbs_mr vmr;
	uint32_t slot;
	int share; // slot of the shareable backing (mr.cpp), -1 none
	SoftDm *dm; // device memory it registers (ibv_reg_dm_mr), or null
};

// The shareable file behind a memory region's pages (MrEntry::memfd): the
// owner's descriptor (-1: none), its inode, and the file offset of the
// first byte of the part it backs: [win_lo, win_hi) of the region, in bytes
// from its start (win_hi 0: the whole region). Peers reach the rest with
// process_vm_* (MrEntry::share_lo, share_hi).
struct MrBacking {
	int32_t fd;
	uint32_t ino;
	uint64_t file_off;
	uint64_t win_lo = 0, win_hi = 0;
};
// mr.cpp: gives mr a key for [addr, addr+length) of this process at
// iova, backed by b, and fills its public fields; false when the key table
// is full.
bool mr_publish(struct ibv_pd *ibpd, SoftMr *mr, void *addr, uint64_t iova, size_t length,
		int access, const MrBacking &b);

struct SoftMw {
	struct ibv_mw mw;
	uint32_t slot;
};

// A thread-domain CQ's process-local completion lane: send completions of
// the QPs of the same thread domain, written by whoever holds the TD's guard
// (the application's thread in post_send, or the progress thread) and read by
// poll_cq in the application's thread. One producer at a time and one
// consumer: a single-producer / single-consumer ring of plain loads and
// stores (acquire/release on the indices), no read-modify-write. Completions
// from other parties (peers' receive completions, non-TD QPs) keep arriving
// in the shared ring.
struct CqLane {
	std::atomic<uint32_t> tail; // next cell to write (producer)
	std::atomic<uint32_t> head; // next cell to read (consumer)
	uint32_t mask;              // cells - 1 (a power of two minus one)
	struct ibv_wc *cells;       // nullptr: not a thread-domain CQ
};

struct SoftCq {
	struct verbs_cq vcq;
	uint32_t slot;
	uint32_t capacity;
	RingHeader *ring;
	uint64_t ring_off;   // arena offset of the ring, 0 when ring_buf holds it
	QueueBuf ring_buf;   // the ring from the parent domain's allocator
	// Serialises pollers of the shared ring (not taken when td_mode): a
	// one-word guard (guard_lock), not a pthread mutex.
	std::atomic<bool> poll_busy;
	// Cells of the shared ring marked purged (CqeCell::purged) and not yet
	// polled: while non-zero, polls take the path that skips them.
	std::atomic<uint32_t> purged;
	bool td_mode;        // created under a parent domain with a thread domain
	CqLane lane;         // td_mode: send completions of the same TD's QPs
	QueueBuf lane_buf;   // the lane's cells (parent domain's allocator or calloc)
	CqEntry *entry;      // td_mode: this CQ's entry in the segment (lane_push)
	std::atomic<int> users; // QPs / SRQs using it
	bool ex;             // created with create_cq_ex
	struct SoftPd *pd;   // parent domain given at creation (counted), or null
	uint64_t wc_flags;
	bool stamp;          // completion timestamps asked for (clock.cpp)
	CqeCell cur;         // the completion start_poll/next_poll returned
};

struct SoftSrq {
	struct verbs_srq vsrq;
	uint32_t slot;
	uint32_t max_wr;
	uint32_t max_sge;
	RingHeader *ring;
	uint64_t ring_off;   // arena offset of the ring, 0 when ring_buf holds it
	QueueBuf ring_buf;   // the ring from the parent domain's allocator
	pthread_mutex_t post_lock;
	SoftCq *cq;          // XRC and TM SRQ
	std::atomic<int> users;
	struct SoftPd *pd;   // counted in pd->users
	// Rings replaced by a resize (ibv_modify_srq IBV_SRQ_MAX_WR): peers may
	// still hold them for a moment, so they are freed with the SRQ.
	struct SrqOldRing *old_rings;
	uint64_t tm_off;     // TM SRQ: arena offset of its tag list (SrqEntry::tm_off)
	uint32_t tm_max_ops; // TM SRQ: tm_cap.max_ops it was created with
};

struct SoftAh {
	struct ibv_ah ah;
	struct ibv_ah_attr attr;
};

struct SoftXrcd {
	struct verbs_xrcd vxrcd;
	uint32_t slot;
	// This handle's XRC SRQs and XRC_RECV QP handles (created or opened):
	// close_xrcd answers EBUSY while any is alive.
	std::atomic<int> users;
};

// One send work request as the engine executes it.
struct SoftWr {
	uint64_t wr_id;
	uint32_t opcode;     // enum ibv_wr_opcode
	uint32_t send_flags;
	uint32_t imm;        // network order, or the rkey to invalidate
	uint32_t num_sge;
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t remote_qpn; // UD
	uint32_t remote_qkey;
	uint32_t xrc_srqn;
	uint64_t compare_add;
	uint64_t swap;
	// IBV_WR_FLUSH (ibv_wr_flush(3), rdma-core 56): bytes at remote_addr,
	// placement type bits (enum ibv_placement_type), selectivity level
	// (enum ibv_selectivity_level).
	uint64_t flush_len;
	uint8_t flush_type;
	uint8_t flush_level;
	struct ibv_ah_attr ah; // UD destination
	bool has_ah;
	// Memory window bind
	struct ibv_mw *mw;
	uint32_t bind_rkey;
	struct ibv_mw_bind_info bind;
	// Retry bookkeeping
	int rnr_left;
	int retry_left;
	uint64_t due_ns;
	uint32_t inline_len;
	struct ibv_sge sge[kMaxSge];
	uint8_t inline_data[kMaxInline];
};

// The FIN of a rendezvous (tag matching) that this QP's own receive queue
// is owed: deliver_tm fills it, the requester sends it after the request's
// send completion, as the responder's reply would follow the
// acknowledgement (send_fin in responder.cpp).
struct PendingFin {
	bool due;
	uint8_t tmh[16];
	uint32_t src_qp;
	uint16_t slid;
	uint8_t sl;
};

struct SoftQp {
	struct verbs_qp vqp;
	SoftContext *ctx;
	uint32_t slot;
	uint32_t qpn;
	QpEntry *entry;       // this QP's entry in ctx->seg
	PendingFin fin;
	enum ibv_qp_type type;
	SoftCq *scq;
	SoftCq *rcq;
	SoftSrq *srq;
	SoftXrcd *xrcd;
	struct SoftPd *pd;    // counted in pd->users (null for XRC_RECV)
	uint32_t pd_id;
	struct ibv_qp_cap cap;
	bool sq_sig_all;
	bool opened;          // made by ibv_open_qp (XRC target handle)
	RingHeader *rq;
	uint64_t rq_off;      // arena offset of the receive ring, 0 when none or in rq_buf
	QueueBuf rq_buf;      // receive ring from the parent domain's allocator
	QueueBuf sq_buf;      // memory of `sq` (calloc or the allocator)
	QueueBuf staged_buf;  // memory of `staged` when the allocator gave it
	uint32_t rq_cell;
	// The send queue's guard (qp_sq_lock): sq_busy, or for a QP created
	// under a parent domain with a thread domain the TD's busy flag: the
	// application serialises every use of such a QP (ibv_alloc_td(3)), so
	// one flag per TD guards all its QPs against the progress thread.
	std::atomic<bool> sq_busy;
	std::atomic<bool> *sq_guard;
	pthread_mutex_t rq_lock;
	// The send CQ's lane when the send CQ belongs to the same thread domain:
	// send completions go there instead of the shared ring.
	CqLane *lane;
	// Pending send work (in order): a ring of SoftWr of depth max_send_wr.
	SoftWr *sq;
	uint32_t sq_depth;
	uint32_t sq_head, sq_count;
	// Attributes (query_qp reports them back).
	struct ibv_qp_attr attr;
	uint64_t alive_checked_ns; // last time the responder's process was seen alive
	uint64_t alive_tsc;        // time-stamp counter at the last liveness look (responder)
	// The responder's device segment for attr.ah_attr (exec_wr's cache,
	// under the send-queue guard; nullptr: look it up) and the process that
	// looked it up (a forked child looks again).
	Segment *rseg;
	int32_t rseg_pid;
	// The peer mapping exec_wr used last (peer_map's answer for pid, fd,
	// ino; under the send-queue guard), valid while g_peer_map_generation
	// is still gen. base nullptr: none.
	struct PeerCache {
		uint8_t *base;
		uint64_t size;
		uint64_t gen;
		int32_t pid;
		int32_t fd;
		uint32_t ino;
	} peer;
	// The fast paths' checks (requester.cpp; under the send-queue guard),
	// kept for the last memory region an RDMA WRITE went to (wcache), the
	// last receive buffer a message went to (rcache: the responder's
	// region, checked for local writes) and the last region a request read
	// from (lcache). A cached check holds while the region's entry keeps
	// the sequence value it was read at (MrEntry::seq, keys.h); entry
	// nullptr: nothing cached.
	struct RemoteWriteCache {
		const MrEntry *entry; // in seg, the responder's device segment
		Segment *seg;
		uint64_t seq;
		uint64_t map_gen;     // g_peer_map_generation when mapped (peer regions)
		uint64_t lo, hi;      // addresses (iova) reachable through delta
		uint64_t delta;       // our pointer to iova x is x + delta
		uint32_t rkey;        // the key (rkey or, in rcache, lkey)
		int32_t owner_pid;
		uint32_t pd_id;
		int32_t my_pid;       // who filled it (a forked child fills its own)
		uint32_t owner;       // the owner's process slot
	} wcache, rcache;
	struct LocalSrcCache {
		const MrEntry *entry; // in ctx->seg
		uint64_t seq;
		uint64_t lo, hi;
		uint64_t delta;
		uint32_t lkey;
		int32_t my_pid;
	} lcache;
	// qp_ex staging between wr_start and wr_complete.
	SoftWr *staged;
	uint32_t staged_count;
	uint32_t staged_cap;
	int staged_err;
	std::atomic<bool> flushed; // the watchdog peeks without the guard
	// XRC_RECV handles: the QpEntry::error_seq last reported to this handle.
	uint32_t fatal_seen;
	SoftQp *next, *prev; // the context's list (qp_link), guarded by its lock
	RoceQp *roce;         // RoCE v2 device: the QP's transport (roce/roce.h)
	// Raw packet QPs (raw.cpp). wq: the receive queue of an ibv_wq (no
	// send queue; ibv_modify_wq moves it). rss: a receive-only QP that
	// spreads what its flows steer over an indirection table's WQs.
	bool wq;
	bool rss;
	struct SoftIndTable *ind;
	uint8_t rss_key[kRssKeyLen];
	uint64_t rss_fields;
	std::atomic<int> flows; // live flow rules steering to this QP
};

// An ibv_wq (raw.cpp): a receive queue, kept as a QP slot of its own
// without a send queue, so that frames reach it as they reach a raw packet
// QP's receive queue.
struct SoftWq {
	struct ibv_wq wq;
	SoftQp *qp;
	std::atomic<int> users; // indirection tables naming it
};

// An ibv_rwq_ind_table: 2^log_size WQs (process-local; flows copy it).
struct SoftIndTable {
	struct ibv_rwq_ind_table t;
	uint32_t log_size;
	SoftWq *wqs[kRssMaxTable];
	std::atomic<int> users; // RSS QPs using it
};

// sq_count is changed under the send-queue guard only, but the progress
// thread peeks at it without the guard (to skip idle QPs): those changes and
// the peek are relaxed atomic accesses (plain moves on x86).
static inline uint32_t sq_pending(const SoftQp *qp)
{
	return __atomic_load_n(&qp->sq_count, __ATOMIC_RELAXED);
}
static inline void sq_set_pending(SoftQp *qp, uint32_t n)
{
	__atomic_store_n(&qp->sq_count, n, __ATOMIC_RELAXED);
}

// A one-word guard (the thread domain's SoftTd::busy, a CQ's poll_busy):
// one atomic exchange to take it, one release store to give it back; a
// waiter yields the CPU between attempts. Its holders run a bounded piece
// of the data path (no blocking call), or, for poll_busy, the application's
// own start_poll .. end_poll section.
static inline void guard_lock(std::atomic<bool> *g)
{
	while (g->exchange(true, std::memory_order_acquire))
		sched_yield();
}
static inline void guard_unlock(std::atomic<bool> *g)
{
	g->store(false, std::memory_order_release);
}
static inline void td_guard_lock(std::atomic<bool> *g) { guard_lock(g); }
static inline void td_guard_unlock(std::atomic<bool> *g) { guard_unlock(g); }

// The send queue guard: the QP's own sq_busy, or for thread-domain QPs the
// TD's guard (qp->sq_guard points to the one in use). Holders run a bounded
// piece of the data path, as hardware providers do under their send-queue
// spinlocks.
// Holding the guard is also a map-use section (shm.h): peer mappings looked
// up under it stay mapped until it is released.
// Wakes the context's progress thread (a request waits for its retry time,
// or the thread is to stop).
static inline void wake_progress(SoftContext *ctx)
{
	pthread_mutex_lock(&ctx->wake_lock);
	ctx->wakes++;
	pthread_cond_signal(&ctx->wake);
	pthread_mutex_unlock(&ctx->wake_lock);
}

// True when a queued request waits for a retry (its due time), which only
// the progress thread runs. Caller holds the send-queue guard.
static inline bool sq_has_due(const SoftQp *qp)
{
	for (uint32_t i = 0, h = qp->sq_head; i < qp->sq_count; i++, h = (h + 1) % qp->sq_depth)
		if (qp->sq[h].due_ns)
			return true;
	return false;
}

static inline void qp_sq_lock(SoftQp *qp)
{
	map_use_enter();
	guard_lock(qp->sq_guard);
}
// True when acquired.
static inline bool qp_sq_trylock(SoftQp *qp)
{
	map_use_enter();
	if (!qp->sq_guard->exchange(true, std::memory_order_acquire))
		return true;
	map_use_leave();
	return false;
}
static inline void qp_sq_unlock(SoftQp *qp)
{
	guard_unlock(qp->sq_guard);
	map_use_leave();
}

// Thread-domain CQs: takes up to n completions from the lane (see CqLane);
// the application's thread only. Returns how many.
static inline int lane_poll(CqLane *l, int n, struct ibv_wc *wc)
{
	uint32_t h = l->head.load(std::memory_order_relaxed);
	uint32_t t = l->tail.load(std::memory_order_acquire);
	int got = 0;
	while (got < n && h != t)
		wc[got++] = l->cells[h++ & l->mask];
	if (got)
		l->head.store(h, std::memory_order_release);
	return got;
}

static inline SoftContext *to_sctx(struct ibv_context *c)
{
	return reinterpret_cast<SoftContext *>(
		reinterpret_cast<char *>(c) - offsetof(SoftContext, vctx.context));
}
static inline SoftQp *to_sqp(struct ibv_qp *q) { return reinterpret_cast<SoftQp *>(q); }
static inline SoftCq *to_scq(struct ibv_cq *c) { return reinterpret_cast<SoftCq *>(c); }
static inline SoftSrq *to_ssrq(struct ibv_srq *s) { return reinterpret_cast<SoftSrq *>(s); }
static inline SoftPd *to_spd(struct ibv_pd *p) { return reinterpret_cast<SoftPd *>(p); }

// Stable identifiers of soft<index>: node GUID = port GUID = system image GUID.
uint64_t device_guid(int index); // host order
// The shared segment of the device that address vector ah names (the QP's
// own device, or another soft device of the user's fabric); nullptr when
// that device cannot be reached (responder.cpp).
Segment *responder_segment(SoftQp *qp, const struct ibv_ah_attr &ah);
// Detaches the other devices' segments responder_segment attached (exit).
void routes_release();
inline uint16_t device_lid(int index) { return uint16_t(index + 1); }

// The engine, split by role (engine.h): requester.cpp, completer.cpp,
// responder.cpp and dma.cpp.
int soft_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
// Moves a thread-domain CQ's waiting completions, in order, into `cells`
// (n of them, a power of two, at least as many as wait) and makes it the
// lane's buffer; the caller holds the TD's guard, is the consumer and frees
// the old buffer.
void lane_move(CqLane *l, struct ibv_wc *cells, uint32_t n);
uint32_t lane_count(const CqLane *l);
int submit_wrs(SoftQp *qp, SoftWr *wrs, uint32_t n);
// Checks one ibv_send_wr against qp (type, opcode, SGE count, inline size)
// and copies it into w (inline data copied). 0 or EINVAL.
int convert_wr(SoftQp *qp, const struct ibv_send_wr *wr, SoftWr &w);
// Runs qp's queued send work if its send-queue guard is free. Returns when
// what is left needs the progress thread again: 0 nothing left, 1 as soon as
// possible (no due time, or the guard was busy), else a now_ns() time.
uint64_t progress_qp(SoftQp *qp, bool force);
void qp_to_error(SoftQp *qp, bool fatal_event);
void flush_rq(SoftQp *qp);
// The completion of send request w (when it is signaled, or failed): into
// the lane of a thread-domain send CQ, else the send CQ's shared ring; the
// opcode follows w's (completer.cpp, for transports other than the engine's).
void send_complete(SoftQp *qp, const SoftWr &w, enum ibv_wc_status st, uint32_t len);
// The key-table work of local operation w (IBV_WR_BIND_MW, IBV_WR_LOCAL_INV)
// on qp's device: its completion status (requester.cpp).
enum ibv_wc_status run_local_op(SoftQp *qp, SoftWr &w);
// The IBV_WR_BIND_MW request of ibv_bind_mw(3) for type 1 window ibmw: the
// window's next R_Key (its key byte plus one), the caller's wr_id, flags and
// bind_info (mw.cpp).
void type1_bind_wr(SoftWr &w, struct ibv_mw *ibmw, const struct ibv_mw_bind *bind);
// After a receive was taken from an SRQ's ring: IBV_EVENT_SRQ_LIMIT_REACHED
// to its owner when the armed limit is crossed (completer.cpp).
void srq_limit_check(Segment *seg, SrqEntry &s, RingHeader *ring);
// The tag-matching list of TM SRQ entry s, mapped in this process, or
// nullptr when s has none or its locator or header is damaged
// (responder.cpp).
TmList *tm_list(Segment *seg, const SrqEntry &s);
int cq_push(Segment *seg, uint32_t cq_slot, const struct ibv_wc &wc, bool solicited);
// After the owner armed cq (armed value a: 1 any, 2 solicited only): sends
// the completion event at once when the CQ already holds a completion the
// arm asks for and nobody has polled (completer.cpp).
void cq_arm_pending(Segment *seg, SoftCq *cq, uint32_t a);
// cq_push of a tag-matching receive: with the message's tag and the TMH's
// app_ctx (CqeCell::tm_tag, tm_priv; ibv_wc_read_tm_info).
int cq_push_tm(Segment *seg, uint32_t cq_slot, const struct ibv_wc &wc, uint64_t tag,
	       uint32_t priv);
void async_notify(Segment *seg, int32_t pid, int fd, uint32_t ino, uint64_t element,
		  uint32_t type);
uint64_t now_ns();
void init_qp_ex_ops(SoftQp *qp);

// odp.cpp: on-demand paging.
// Faults [addr, addr+len) of this process in for a read (or a write); false
// when a page is not mapped or lacks the permission.
bool odp_fault(uint64_t addr, uint64_t len, bool write);
// The odp_caps and xrc_odp_caps of ibv_query_device_ex.
void odp_caps(struct ibv_device_attr_ex &a);
// An implicit ODP registration: IBV_ACCESS_ON_DEMAND, NULL, SIZE_MAX.
bool odp_implicit(const void *addr, size_t length, int access);
int soft_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
		   struct ibv_sge *sg_list, uint32_t num_sge);

// clock.cpp: the device clock (completion timestamps,
// ibv_query_rt_values_ex(3)): CLOCK_MONOTONIC in nanoseconds, so
// hca_core_clock is 1 GHz.
inline constexpr uint64_t kDeviceClockKhz = 1000000;
uint64_t device_clock();
int soft_query_rt_values(struct ibv_context *context, struct ibv_values_ex *values);
// Completion timestamps of an extended CQ with wc_flags set: the entry's
// stamp flag and the read_completion_ts / _wallclock_ns accessors.
void cq_ex_timestamps(SoftCq *cq);

// dm.cpp: device memory (ibv_alloc_dm(3)).
inline constexpr uint64_t kMaxDmSize = 1ull << 20; // per process
struct ibv_dm *soft_alloc_dm(struct ibv_context *context, struct ibv_alloc_dm_attr *attr);
int soft_free_dm(struct ibv_dm *dm);
struct ibv_dm *soft_import_dm(struct ibv_context *context, uint32_t handle);
void soft_unimport_dm(struct ibv_dm *dm);
struct ibv_mr *soft_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t offset,
			      size_t length, unsigned int access);
// A DM region deregistered: its device memory has one user less.
void dm_mr_gone(SoftDm *dm);
// raw.cpp: raw packet QPs, flow steering, WQs and RSS.
struct ibv_flow *soft_create_flow(struct ibv_qp *qp, struct ibv_flow_attr *attr);
int soft_destroy_flow(struct ibv_flow *flow);
struct ibv_wq *soft_create_wq(struct ibv_context *context, struct ibv_wq_init_attr *attr);
int soft_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *attr);
int soft_destroy_wq(struct ibv_wq *wq);
struct ibv_rwq_ind_table *soft_create_rwq_ind_table(struct ibv_context *context,
						   struct ibv_rwq_ind_table_init_attr *attr);
int soft_destroy_rwq_ind_table(struct ibv_rwq_ind_table *t);
// The raw_packet_caps, rss_caps and max_wq_type_rq of ibv_query_device_ex
// (an Ethernet port's device only).
void raw_caps(struct ibv_device_attr_ex &a);
// The Toeplitz hash of `len` bytes of input under key (at least len + 4
// bytes), as RSS computes it.
uint32_t toeplitz_hash(const uint8_t *key, size_t key_len, const uint8_t *in, size_t len);

// The shared-memory device's operations (context.cpp): RoCE contexts start from
// them and replace the transport's (roce/device.cpp).
const struct verbs_context_ops &soft_context_ops();

} // namespace ovsoft
