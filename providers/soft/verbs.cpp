// openverbs software RDMA device: device, context and the control-path verbs.
//
// Behaviour follows the rdma-core 44 man pages (ibv_query_device(3),
// ibv_modify_qp(3), ibv_create_qp_ex(3), ibv_open_xrcd(3), ...) and the
// InfiniBand QP state machine; the data path is the engine (engine.h).
#include "soft.h"
#include "roce/roce.h"
#include "keys.h"
#include "log.h"
#include "sysmm.h"
#include <infiniband/openverbs.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <endian.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ovsoft {

// ------------------------------------------------------------------ logging

void softlog(int level, const char *fmt, ...)
{
	int saved = errno;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	// The library's logger (driver.h __verbs_log, the backend of rdma-core's
	// verbs_err/verbs_warn/... macros): VERBS_LOG_LEVEL and VERBS_LOG_FILE
	// apply as to the library's own messages.
	__verbs_log(nullptr, uint32_t(level), "libibverbs: soft: %s\n", msg);
	errno = saved;
}

uint64_t device_guid(int index)
{
	// "OV" (4f 56) in the top bytes, then the device number: the same value
	// the core puts in the device's sysfs entry (ibv_get_device_guid).
	return (0x4f56ull << 48) | uint64_t(uint32_t(index));
}

static inline uint32_t next_pow2(uint32_t v)
{
	uint32_t p = 1;
	while (p < v)
		p <<= 1;
	return p;
}

static inline int32_t self_pid() { return getpid(); }

static uint32_t fd_ino(int fd)
{
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0)
		return 0;
	return uint32_t(st.st_ino);
}

// ------------------------------------------------------------------ contexts list

static pthread_mutex_t g_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static SoftContext *g_contexts;

static void stop_thread(SoftContext *ctx)
{
	if (!ctx->thread_started)
		return;
	ctx->stop.store(true);
	pthread_mutex_lock(&ctx->wake_lock);
	pthread_cond_signal(&ctx->wake);
	pthread_mutex_unlock(&ctx->wake_lock);
	pthread_join(ctx->thread, nullptr);
	ctx->thread_started = false;
}

__attribute__((destructor)) static void soft_exit()
{
	// The process leaves without closing every device: give the shared
	// state back so that nothing stays behind in /dev/shm.
	pthread_mutex_lock(&g_ctx_lock);
	for (SoftContext *c = g_contexts; c; c = c->next_ctx) {
		stop_thread(c);
		if (c->roce)
			roce_close(c); // its receive thread writes into the segment
		if (c->seg) {
			segment_detach(c->seg);
			c->seg = nullptr;
		}
	}
	routes_release();
	pthread_mutex_unlock(&g_ctx_lock);
}

// ------------------------------------------------------------------ progress thread

// An XRC receive QP has no send queue and may be held by several processes
// (its creator and everyone who opened it). Like the kernel, which hands an
// affiliated event of such a QP to every holder, each holder's watchdog
// reports the QP's fatal error for its own handle, whichever process owns
// the QP at that moment (the owner may have exited and handed it over).
static void xrc_recv_watch(SoftContext *ctx, SoftQp *qp)
{
	QpEntry &e = ctx->seg->hdr->qps[qp->slot];
	uint32_t seq = e.error_seq.load();
	if (seq == qp->fatal_seen || e.slot.load() != SLOT_LIVE ||
	    e.qp_type != IBV_QPT_XRC_RECV || e.state.load() != IBV_QPS_ERR ||
	    !e.remote_error.load())
		return;
	qp->fatal_seen = seq;
	async_notify(ctx->seg, self_pid(), ctx->vctx.context.async_fd, ctx->async_ino,
		     uint64_t(uintptr_t(&qp->vqp.qp)), IBV_EVENT_QP_FATAL);
}

static void watchdog(SoftContext *ctx)
{
	Segment *seg = ctx->seg;
	for (SoftQp *qp = ctx->qps; qp; qp = qp->next) {
		if (qp->type == IBV_QPT_XRC_RECV) {
			xrc_recv_watch(ctx, qp);
			continue;
		}
		if (qp->opened || !qp->sq)
			continue;
		QpEntry &e = seg->hdr->qps[qp->slot];
		uint32_t st = e.state.load();
		if (st == IBV_QPS_ERR && !qp->flushed) {
			qp_sq_lock(qp);
			// Looked at again under the guard: meanwhile the application
			// may have reset the QP (and brought it up again).
			if (!qp->flushed && e.state.load() == IBV_QPS_ERR)
				qp_to_error(qp, e.remote_error.load() != 0);
			qp_sq_unlock(qp);
			continue;
		}
		// The peer's identity is written by modify_qp under the send-queue
		// guard: read it there, as one consistent pair.
		qp_sq_lock(qp);
		int32_t rpid = qp->remote_pid;
		uint64_t rstart = qp->remote_start;
		qp_sq_unlock(qp);
		if ((st == IBV_QPS_RTR || st == IBV_QPS_RTS) && rpid > 0 && rpid != self_pid() &&
		    qp->type == IBV_QPT_XRC_SEND && !process_alive(rpid, rstart)) {
			// An XRC receive QP outlives its creator while other processes
			// hold it: reclaim the dead process, then follow the QP's
			// current owner.
			Segment *rs = responder_segment(qp, qp->attr.ah_attr);
			if (!rs)
				rs = seg;
			segment_reap(rs);
			uint32_t ds = qp->attr.dest_qp_num - kQpnBase;
			if (qp->attr.dest_qp_num >= kQpnBase && ds < kMaxQps) {
				QpEntry &d = rs->hdr->qps[ds];
				int32_t pid = d.owner_pid;
				if (d.slot.load() == SLOT_LIVE && d.qp_type == IBV_QPT_XRC_RECV &&
				    pid > 0 && pid != rpid) {
					uint64_t start = process_start_time(pid);
					if (process_alive(pid, start)) {
						qp_sq_lock(qp);
						if (qp->remote_pid == rpid) {
							qp->remote_pid = pid;
							qp->remote_start = start;
						}
						qp_sq_unlock(qp);
						continue;
					}
				}
			}
		}
		if ((st == IBV_QPS_RTR || st == IBV_QPS_RTS) && rpid > 0 && rpid != self_pid() &&
		    qp->type != IBV_QPT_UD && !process_alive(rpid, rstart)) {
			qp_sq_lock(qp);
			// Only if the application has not meanwhile connected the QP
			// to another peer (or reset it).
			uint32_t now_st = e.state.load();
			if (qp->remote_pid == rpid && qp->remote_start == rstart &&
			    (now_st == IBV_QPS_RTR || now_st == IBV_QPS_RTS)) {
				softlog(3, "soft%d: QP 0x%x: peer process %d is gone", ctx->index,
					qp->qpn, rpid);
				qp_to_error(qp, true);
			}
			qp_sq_unlock(qp);
		}
	}
}

static void *progress_main(void *arg)
{
	auto *ctx = static_cast<SoftContext *>(arg);
	uint64_t last_watch = 0, last_reap = now_ns();
	while (!ctx->stop.load()) {
		uint64_t now = now_ns();
		uint64_t next_due = now + 20000000ull;
		pthread_mutex_lock(&ctx->lock);
		for (SoftQp *qp = ctx->qps; qp; qp = qp->next) {
			// A peek without the guard; the queue itself is read and run
			// under it (for thread-domain QPs: between the application's
			// verbs, see qp_sq_lock).
			if (sq_pending(qp)) {
				uint64_t due = progress_qp(qp, false);
				if (due == 1)
					due = now + 20000ull;
				if (due && due < next_due)
					next_due = due;
			}
		}
		if (now - last_watch > 20000000ull) {
			watchdog(ctx);
			last_watch = now;
		}
		pthread_mutex_unlock(&ctx->lock);
		peer_map_reclaim(); // retired peer mappings no section uses any more
		if (now - last_reap > 2000000000ull) {
			segment_reap(ctx->seg);
			last_reap = now;
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t after = now_ns();
		uint64_t wait_ns = next_due > after ? next_due - after : 1000ull;
		ts.tv_nsec += long(wait_ns);
		while (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&ctx->wake_lock);
		if (!ctx->stop.load())
			pthread_cond_timedwait(&ctx->wake, &ctx->wake_lock, &ts);
		pthread_mutex_unlock(&ctx->wake_lock);
	}
	return nullptr;
}

static void ensure_thread(SoftContext *ctx)
{
	if (ctx->thread_started)
		return;
	ctx->stop.store(false);
	if (pthread_create(&ctx->thread, nullptr, progress_main, ctx) == 0)
		ctx->thread_started = true;
	else
		softlog(1, "soft%d: cannot start the progress thread", ctx->index);
}

// ------------------------------------------------------------------ device queries

static int soft_query_device_ex(struct ibv_context *context,
				const struct ibv_query_device_ex_input *input,
				struct ibv_device_attr_ex *attr, size_t attr_size)
{
	if (!attr || attr_size < sizeof(struct ibv_device_attr))
		return EINVAL;
	if (input && input->comp_mask)
		return EINVAL;
	SoftContext *ctx = to_sctx(context);
	struct ibv_device_attr_ex a;
	memset(&a, 0, sizeof(a));
	struct ibv_device_attr &o = a.orig_attr;
	snprintf(o.fw_ver, sizeof(o.fw_ver), "openverbs-soft %d.0", 44);
	o.node_guid = htobe64(device_guid(ctx->index));
	o.sys_image_guid = o.node_guid;
	o.max_mr_size = kMaxMrSize;
	o.page_size_cap = 0xfffff000u;
	o.vendor_id = kVendorId;
	o.vendor_part_id = 0x4f56;
	o.hw_ver = 0;
	o.max_qp = kMaxQps;
	o.max_qp_wr = kMaxQpWr;
	o.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT |
			     IBV_DEVICE_N_NOTIFY_CQ | IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_XRC |
			     IBV_DEVICE_MEM_MGT_EXTENSIONS | IBV_DEVICE_MEM_WINDOW_TYPE_2B |
			     IBV_DEVICE_SRQ_RESIZE;
	o.max_sge = kMaxSge;
	o.max_sge_rd = kMaxSge;
	o.max_cq = kMaxCqs;
	o.max_cqe = kMaxCqe;
	o.max_mr = kMaxMrs;
	o.max_pd = 1 << 20;
	o.max_qp_rd_atom = kMaxRdAtom;
	o.max_qp_init_rd_atom = kMaxRdAtom;
	o.max_res_rd_atom = kMaxRdAtom * kMaxQps;
	o.atomic_cap = IBV_ATOMIC_GLOB;
	o.max_mw = kMaxMrs;
	o.max_mcast_grp = kMaxMcast;
	o.max_mcast_qp_attach = kMaxMcastAttach;
	o.max_total_mcast_qp_attach = kMaxMcast * kMaxMcastAttach;
	o.max_ah = 1 << 20;
	o.max_srq = kMaxSrqs;
	o.max_srq_wr = kMaxSrqWr;
	o.max_srq_sge = kMaxSge;
	o.max_pkeys = kPkeyTableLen;
	o.local_ca_ack_delay = 15;
	o.phys_port_cnt = 1;
	a.device_cap_flags_ex = o.device_cap_flags;
#if _OPENVERBS_ABI >= 56
	a.device_cap_flags_ex |= kDeviceFlushGlobal;
#endif
	a.phys_port_cnt_ex = 1;
	odp_caps(a);
	a.max_dm_size = kMaxDmSize;
	size_t n = attr_size < sizeof(a) ? attr_size : sizeof(a);
	memcpy(attr, &a, n);
	return 0;
}

static int soft_query_port(struct ibv_context *context, uint8_t port, struct ibv_port_attr *attr)
{
	if (port != 1 || !attr)
		return EINVAL;
	SoftContext *ctx = to_sctx(context);
	memset(attr, 0, sizeof(*attr));
	attr->state = IBV_PORT_ACTIVE;
	attr->max_mtu = IBV_MTU_4096;
	attr->active_mtu = IBV_MTU_4096;
	attr->gid_tbl_len = kGidTableLen;
	attr->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_SYS_IMAGE_GUID_SUP;
	attr->max_msg_sz = kMaxMsgSize;
	attr->pkey_tbl_len = kPkeyTableLen;
	attr->lid = device_lid(ctx->index);
	attr->sm_lid = 1;
	attr->lmc = 0;
	attr->max_vl_num = 1;
	attr->sm_sl = 0;
	attr->subnet_timeout = 18;
	attr->active_width = 2;  // 4X
	attr->active_speed = 64; // HDR
	attr->phys_state = 5;    // LinkUp
	attr->link_layer = IBV_LINK_LAYER_INFINIBAND;
	return 0;
}

#if _OPENVERBS_ABI >= 64
// rdma-core 64's ibv_query_port_speed(3): the port's bandwidth in units of
// 100 Mb/s, from the link soft_query_port describes (4X: four lanes at HDR's
// 50 Gb/s each, 200 Gb/s).
static int soft_query_port_speed(struct ibv_context *, uint32_t port, uint64_t *speed)
{
	if (port != 1 || !speed)
		return EINVAL;
	*speed = 4 * 500;
	return 0;
}
#endif

static int hook_query_gid(struct ibv_context *context, uint8_t port, int index, union ibv_gid *gid)
{
	if (context && to_sctx(context)->roce)
		return roce_query_gid(to_sctx(context), port, index, gid);
	if (!context || !gid || port != 1 || index < 0 || uint32_t(index) >= kGidTableLen)
		return EINVAL;
	SoftContext *ctx = to_sctx(context);
	uint64_t prefix = htobe64(0xfe80000000000000ull);
	uint64_t guid = htobe64(device_guid(ctx->index));
	memcpy(gid->raw, &prefix, 8);
	memcpy(gid->raw + 8, &guid, 8);
	return 0;
}

static int hook_query_gid_entry(struct ibv_context *context, uint32_t port, uint32_t index,
				struct ibv_gid_entry *entry)
{
	if (!context || !entry)
		return EINVAL;
	if (to_sctx(context)->roce)
		return roce_query_gid_entry(to_sctx(context), port, index, entry);
	if (port != 1 || index >= kGidTableLen)
		return EINVAL;
	memset(entry, 0, sizeof(*entry));
	hook_query_gid(context, 1, int(index), &entry->gid);
	entry->gid_index = index;
	entry->port_num = port;
	entry->gid_type = IBV_GID_TYPE_IB;
	return 0;
}

static int hook_query_pkey(struct ibv_context *context, uint8_t port, int index, __be16 *pkey)
{
	if (!context || !pkey || port != 1 || index < 0 || uint32_t(index) >= kPkeyTableLen)
		return EINVAL;
	*pkey = htobe16(0xffff);
	return 0;
}

static int hook_create_comp_channel(struct ibv_context *context, int *fd)
{
	if (!context || !fd)
		return EINVAL;
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		return errno;
	// The pipe reopened read/write through /proc (pipe(7): a FIFO opened
	// O_RDWR is its own writer), so a blocking read never sees end-of-file
	// and no writer end has to be kept: no limit on the number of
	// channels, nothing left behind when the channel is closed. Peers
	// open it for writing by /proc/<pid>/fd/<fd> (notify_pipe).
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p[0]);
	int rw = open(path, O_RDWR | O_CLOEXEC);
	int e = errno;
	close(p[0]);
	close(p[1]);
	if (rw < 0)
		return e;
	*fd = rw;
	return 0;
}

} // namespace ovsoft

extern "C" const struct openverbs_soft_hooks openverbs_soft_hooks_v1;
extern "C" const struct openverbs_soft_hooks openverbs_soft_hooks_v1 = {
	OPENVERBS_SOFT_HOOKS_VERSION,
	sizeof(struct openverbs_soft_hooks),
	ovsoft::hook_query_gid,
	ovsoft::hook_query_pkey,
	ovsoft::hook_create_comp_channel,
	ovsoft::hook_query_gid_entry,
};

namespace ovsoft {

// ------------------------------------------------------------------ PD / TD / parent domain

static struct ibv_pd *soft_alloc_pd(struct ibv_context *context)
{
	auto *pd = static_cast<SoftPd *>(calloc(1, sizeof(SoftPd)));
	if (!pd) {
		errno = ENOMEM;
		return nullptr;
	}
	SoftContext *ctx = to_sctx(context);
	pd->id = ctx->seg->hdr->next_pd_id.fetch_add(1);
	if (!pd->id)
		pd->id = ctx->seg->hdr->next_pd_id.fetch_add(1);
	pd->pd.context = context;
	pd->pd.handle = pd->id;
	return &pd->pd;
}

// ibv_import_pd(3): a PD of the device by handle (ibv_pd.handle, the
// device-wide PD number, in any context of the device, any process of the
// user). The new handle names the same PD: QPs, SRQs and MRs made on it
// meet those of the original (same number). EINVAL: 0 or a number the
// device never gave. ibv_unimport_pd frees the handle only;
// ibv_dealloc_pd of an imported PD does the same (a PD has no state of its
// own beyond its number).
static struct ibv_pd *soft_import_pd(struct ibv_context *context, uint32_t handle)
{
	SoftContext *ctx = to_sctx(context);
	uint32_t next = ctx->seg->hdr->next_pd_id.load();
	if (!handle || handle >= next) {
		errno = EINVAL;
		return nullptr;
	}
	auto *pd = static_cast<SoftPd *>(calloc(1, sizeof(SoftPd)));
	if (!pd) {
		errno = ENOMEM;
		return nullptr;
	}
	pd->id = handle;
	pd->pd.context = context;
	pd->pd.handle = handle;
	return &pd->pd;
}

static void soft_unimport_pd(struct ibv_pd *ibpd)
{
	free(to_spd(ibpd));
}

static int soft_dealloc_pd(struct ibv_pd *ibpd)
{
	SoftPd *pd = to_spd(ibpd);
	if (pd->dead)
		return EINVAL;
	if (pd->users.load())
		return EBUSY; // QPs, SRQs, CQs or MRs still use it
	if (!pd->parent) {
		free(pd);
		return 0;
	}
	if (pd->td)
		reinterpret_cast<SoftTd *>(pd->td)->refs.fetch_sub(1);
	SoftContext *ctx = to_sctx(ibpd->context);
	pthread_mutex_lock(&ctx->lock);
	pd->dead = true;
	pd->next_dead = ctx->dead_pds;
	ctx->dead_pds = pd;
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

static struct ibv_td *soft_alloc_td(struct ibv_context *context, struct ibv_td_init_attr *attr)
{
	if (!attr || attr->comp_mask) {
		errno = EINVAL;
		return nullptr;
	}
	auto *td = new (std::nothrow) SoftTd();
	if (!td) {
		errno = ENOMEM;
		return nullptr;
	}
	td->td.context = context;
	td->refs.store(0);
	return &td->td;
}

static int soft_dealloc_td(struct ibv_td *ibtd)
{
	auto *td = reinterpret_cast<SoftTd *>(ibtd);
	if (td->dead)
		return EINVAL;
	if (td->refs.load())
		return EBUSY;
	SoftContext *ctx = to_sctx(ibtd->context);
	pthread_mutex_lock(&ctx->lock);
	td->dead = true;
	td->next_dead = ctx->dead_tds;
	ctx->dead_tds = td;
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

static struct ibv_pd *soft_alloc_parent_domain(struct ibv_context *context,
					       struct ibv_parent_domain_init_attr *attr)
{
	uint32_t known = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
#if _OPENVERBS_ABI >= 64
	// Host memory is never protected from the device here (no confidential
	// computing), so allowing unprotected buffers changes nothing.
	known |= IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC;
#endif
	if (!attr || !attr->pd || (attr->comp_mask & ~known)) {
		errno = EINVAL;
		return nullptr;
	}
	auto *pd = static_cast<SoftPd *>(calloc(1, sizeof(SoftPd)));
	if (!pd) {
		errno = ENOMEM;
		return nullptr;
	}
	SoftPd *real = to_spd(attr->pd);
	pd->id = real->id;
	pd->parent = true;
	pd->real = attr->pd;
	pd->td = attr->td;
	if (attr->td)
		reinterpret_cast<SoftTd *>(attr->td)->refs.fetch_add(1);
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		pd->pd_context = attr->pd_context;
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		pd->alloc = attr->alloc;
		pd->free = attr->free;
	}
	pd->pd.context = context;
	pd->pd.handle = real->pd.handle;
	return &pd->pd;
}

// ------------------------------------------------------------------ memory keys

// Allocates a key slot (device lock held by the caller). Returns slot or -1.
static int key_slot_alloc(Segment *seg)
{
	static thread_local uint32_t hint;
	for (uint32_t i = 0; i < kMaxMrs; i++) {
		uint32_t s = (hint + i) % kMaxMrs;
		if (seg->hdr->mrs[s].kind.load() == KEY_FREE) {
			hint = s + 1;
			return int(s);
		}
	}
	return -1;
}

static uint32_t make_key(Segment *seg, uint32_t slot)
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
struct SharedRange {
	uintptr_t start, end;
	int fd;
	uint32_t ino;
	int refs;
};
static pthread_mutex_t g_share_lock = PTHREAD_MUTEX_INITIALIZER;
static SharedRange g_shared[1024];

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
// kernel lacks it.
template <class Pred> static bool every_vma(uintptr_t start, uintptr_t end, Pred ok)
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
		q.vma_name_addr = uintptr_t(name);
		q.vma_name_size = sizeof(name);
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
// with inode number `ino` at the offset registration gave it (offset 0 at
// `start`): the application may have unmapped a registered range, or mapped
// something else there, before deregistering it (UCX's registration cache
// deregisters freed memory at cleanup), and such pages are no longer ours to
// copy or replace.
static bool still_mapped_from(uintptr_t start, uintptr_t end, uint32_t ino)
{
	return every_vma(start, end, [&](const Vma &v) {
		return uint32_t(v.inode) == ino && v.shared && v.start >= start &&
		       v.offset == v.start - start;
	});
}

// [start, end) is private anonymous read/write memory (heap, anonymous mmap;
// not a stack, not named, not executable).
static bool anon_private_rw(uintptr_t start, uintptr_t end)
{
	return every_vma(start, end, [](const Vma &v) {
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
// the range cannot be protected or moved.
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

// Replaces [start, end) by a private anonymous copy (undoes the sharing).
// False when the range stays shared (it could not be protected).
static bool privatize(uintptr_t start, uintptr_t end, uint32_t ino, bool alone)
{
	// Absent in a child when the range was marked MADV_DONTFORK
	// (ibv_fork_init): nothing to do then.
	if (alone && sys_madvise(reinterpret_cast<void *>(start), end - start, MADV_NORMAL) != 0)
		return true;
	// Unmapped or mapped anew by the application since registration: its
	// memory now, left as it is (what is still mapped from the file keeps
	// the file's pages until the application unmaps it).
	if (!still_mapped_from(start, end, ino)) {
		softlog(3, "registered pages at %#lx (%lu bytes) were unmapped or replaced before "
			   "deregistration: left as they are",
			(unsigned long)start, (unsigned long)(end - start));
		return true;
	}
	size_t len = end - start;
	void *p = sys_mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return false;
	// The pages of a large copy allocated before the fence, in one call
	// (not one fault per page during the copy).
	if (len > 16 * 4096)
		sys_madvise(p, len, MADV_POPULATE_WRITE);
	bool ok = replace_range(start, len, true, alone, [&](void *at) {
		copy_pages(p, at, len);
		return p;
	});
	if (!ok) {
		sys_munmap(p, len);
		softlog(2, "registered pages at %#lx (%lu bytes) stay backed by a shared file: "
			   "they could not be write protected to copy them back",
			(unsigned long)start, (unsigned long)len);
	}
	return ok;
}

// Writes [src, src+len) at offset 0 of fd: the file's pages are allocated
// by the copy itself (never zeroed first, no page fault per page).
static bool fill_file(int fd, const void *src, size_t len)
{
	const char *b = static_cast<const char *>(src);
	for (size_t done = 0; done < len;) {
		ssize_t n = sys_pwrite(fd, b + done, len - done, off_t(done));
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
		errno = 0;
		unsigned long long x = strtoull(e, &endp, 0);
		return errno || *endp ? d : size_t(x);
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
// into private memory when the last of them is deregistered. A region whose
// pages only partly overlap a converted range is left as it is (peers use
// process_vm_*).
// Returns the slot or -1; *file_off is the file offset of addr.
static int share_region(void *addr, size_t len, uint64_t *file_off)
{
	uintptr_t a = uintptr_t(addr);
	if (len > SIZE_MAX - a - 4095)
		return -1;
	uintptr_t ps = a & ~uintptr_t(4095);
	uintptr_t pe = (a + len + 4095) & ~uintptr_t(4095);
	pthread_mutex_lock(&g_share_lock);
	int freeslot = -1;
	for (int i = 0; i < int(sizeof(g_shared) / sizeof(g_shared[0])); i++) {
		SharedRange &r = g_shared[i];
		if (!r.refs) {
			if (freeslot < 0)
				freeslot = i;
			continue;
		}
		if (ps >= r.start && pe <= r.end) {
			// A range the application has unmapped or replaced
			// since is not shared again: peers use process_vm_*.
			if (!still_mapped_from(r.start, r.end, r.ino)) {
				pthread_mutex_unlock(&g_share_lock);
				return -1;
			}
			r.refs++;
			*file_off = a - r.start;
			pthread_mutex_unlock(&g_share_lock);
			return i;
		}
		if (ps < r.end && pe > r.start) { // partial overlap: leave it alone
			pthread_mutex_unlock(&g_share_lock);
			return -1;
		}
	}
	int slot = -1;
	if (freeslot >= 0 && pe - ps <= share_max() && anon_private_rw(ps, pe)) {
		int fd = sys_memfd_create("openverbs-soft-mr", MFD_CLOEXEC);
		size_t n = pe - ps;
		bool ok = fd >= 0 && replace_range(ps, n, false, false, [&](void *at) {
			// The file holds every byte before its mapping replaces
			// the range (in one call: no window without a mapping).
			if (!fill_file(fd, at, n))
				return MAP_FAILED;
			return sys_mmap(at, n, PROT_READ | PROT_WRITE,
					MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd, 0);
		});
		if (ok) {
			g_shared[freeslot] = SharedRange{ps, pe, fd, fd_ino(fd), 1};
			*file_off = a - ps;
			slot = freeslot;
			fd = -1;
		}
		if (fd >= 0)
			close(fd);
	}
	pthread_mutex_unlock(&g_share_lock);
	return slot;
}

static void unshare_region(int slot)
{
	if (slot < 0)
		return;
	pthread_mutex_lock(&g_share_lock);
	SharedRange &r = g_shared[slot];
	if (r.refs && !--r.refs) {
		// Back to private memory: the pages go back to the allocator as
		// ordinary anonymous memory.
		privatize(r.start, r.end, r.ino, false);
		close(r.fd);
		r = SharedRange{};
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
	for (auto &r : g_shared)
		if (r.refs) {
			privatize(r.start, r.end, r.ino, true);
			close(r.fd);
			r = SharedRange{};
		}
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
static void share_caches_close()
{
	pthread_mutex_lock(&g_share_lock);
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
static uint64_t key_write_new(MrEntry &e, Segment *seg, uint32_t key, uint32_t pd_id,
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
// The whole region is shared when it has a slot (share_region).
static void fill_backing(MrEntry &e, const MrBacking &b, uint64_t iova, uint64_t length)
{
	kst(e.memfd, b.fd);
	kst(e.memfd_ino, b.fd >= 0 ? b.ino : 0u);
	kst(e.share_lo, b.fd >= 0 ? iova : 0u);
	kst(e.share_hi, b.fd >= 0 ? iova + length : 0u);
	kst(e.memfd_off, b.file_off);
}

static void fill_share(MrEntry &e, int share, uint64_t iova, uint64_t length, uint64_t file_off)
{
	fill_backing(e, MrBacking{share >= 0 ? g_shared[share].fd : -1,
				  share >= 0 ? g_shared[share].ino : 0u, file_off},
		     iova, length);
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

static struct ibv_mr *soft_reg_mr(struct ibv_pd *ibpd, void *addr, size_t length, uint64_t hca_va,
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
	if (!rc && !odp)
		rc = check_mapped(addr, length);
	if (rc) {
		errno = rc;
		return nullptr;
	}
	auto *mr = static_cast<SoftMr *>(calloc(1, sizeof(SoftMr)));
	if (!mr) {
		errno = ENOMEM;
		return nullptr;
	}
	uint64_t file_off = 0;
	mr->share = odp ? -1 : share_region(addr, length, &file_off);
	uint64_t iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : hca_va;
	MrBacking b = {mr->share >= 0 ? g_shared[mr->share].fd : -1,
		       mr->share >= 0 ? g_shared[mr->share].ino : 0u, file_off};
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
static struct ibv_mr *soft_import_mr(struct ibv_pd *ibpd, uint32_t handle)
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

static void soft_unimport_mr(struct ibv_mr *ibmr)
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
static struct ibv_dmah *soft_alloc_dmah(struct ibv_context *context, struct ibv_dmah_init_attr *attr)
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

static int soft_dealloc_dmah(struct ibv_dmah *dmah)
{
	free(verbs_get_dmah(dmah));
	return 0;
}

// ibv_reg_mr_ex(3) on soft devices: an address registration (the library
// has resolved IBV_REG_MR_MASK_BUF already) with an optional DMA handle of
// the same context; dma-buf registrations are not offered (EOPNOTSUPP).
static struct ibv_mr *soft_reg_mr_ex(struct ibv_pd *pd, struct ibv_mr_init_attr *attr)
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

static int soft_dereg_mr(struct verbs_mr *vmr)
{
	auto *mr = reinterpret_cast<SoftMr *>(vmr);
	SoftContext *ctx = to_sctx(vmr->ibv_mr.context);
	Segment *seg = ctx->seg;
	shm_lock(&seg->hdr->lock);
	MrEntry &e = seg->hdr->mrs[mr->slot];
	// Windows bound to this region become unusable: their parent_seq no
	// longer matches (keys.h).
	uint64_t ws = key_write_lock(e);
	if (e.kind.load(std::memory_order_relaxed) == KEY_MR && kld(e.key) == vmr->ibv_mr.lkey)
		e.kind.store(KEY_FREE, std::memory_order_relaxed);
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
static int soft_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd, void *addr,
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
	uint64_t file_off = 0;
	if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && !odp)
		mr->share = share_region(addr, length, &file_off);
	shm_lock(&seg->hdr->lock);
	MrEntry &e = seg->hdr->mrs[mr->slot];
	// Readers see the old registration or the new one, whole (keys.h).
	uint64_t ws = key_write_lock(e);
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		fill_share(e, mr->share, uintptr_t(addr), length, file_off);
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

static struct ibv_mw *soft_alloc_mw(struct ibv_pd *ibpd, enum ibv_mw_type type)
{
	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
		errno = EINVAL;
		return nullptr;
	}
	auto *mw = static_cast<SoftMw *>(calloc(1, sizeof(SoftMw)));
	if (!mw) {
		errno = ENOMEM;
		return nullptr;
	}
	Segment *seg = to_sctx(ibpd->context)->seg;
	shm_lock(&seg->hdr->lock);
	int slot = key_slot_alloc(seg);
	if (slot < 0) {
		shm_unlock(&seg->hdr->lock);
		free(mw);
		errno = ENOMEM;
		return nullptr;
	}
	MrEntry &e = seg->hdr->mrs[slot];
	uint32_t key = make_key(seg, slot);
	uint64_t ws = key_write_new(e, seg, key, to_spd(ibpd)->id, 0, 0, 0, 0, uint32_t(type));
	fill_share(e, -1, 0, 0, 0);
	e.kind.store(KEY_MW, std::memory_order_relaxed);
	key_write_unlock(e, ws);
	shm_unlock(&seg->hdr->lock);
	mw->slot = slot;
	mw->mw.context = ibpd->context;
	mw->mw.pd = ibpd;
	mw->mw.rkey = key;
	mw->mw.handle = slot;
	mw->mw.type = type;
	return &mw->mw;
}

static int soft_dealloc_mw(struct ibv_mw *ibmw)
{
	auto *mw = reinterpret_cast<SoftMw *>(ibmw);
	Segment *seg = to_sctx(ibmw->context)->seg;
	shm_lock(&seg->hdr->lock);
	MrEntry &e = seg->hdr->mrs[mw->slot];
	uint64_t ws = key_write_lock(e);
	if (e.kind.load(std::memory_order_relaxed) == KEY_MW && kld(e.owner) == seg->my_proc)
		e.kind.store(KEY_FREE, std::memory_order_relaxed);
	key_write_unlock(e, ws);
	shm_unlock(&seg->hdr->lock);
	free(mw);
	return 0;
}

static int soft_bind_mw(struct ibv_qp *ibqp, struct ibv_mw *ibmw, struct ibv_mw_bind *bind)
{
	if (!ibqp || !ibmw || !bind || ibmw->type != IBV_MW_TYPE_1)
		return EINVAL;
	SoftQp *qp = to_sqp(ibqp);
	if (qp->type == IBV_QPT_UD || !qp->sq)
		return EINVAL;
	if (bind->bind_info.mr && bind->bind_info.mr->pd != ibmw->pd)
		return EINVAL;
	SoftWr *w = static_cast<SoftWr *>(calloc(1, sizeof(SoftWr)));
	if (!w)
		return ENOMEM;
	w->wr_id = bind->wr_id;
	w->opcode = IBV_WR_BIND_MW;
	w->send_flags = bind->send_flags;
	w->mw = ibmw;
	w->bind_rkey = (ibmw->rkey & 0xffffff00u) | ((ibmw->rkey + 1) & 0xff);
	w->bind = bind->bind_info;
	uint32_t st = qp->entry->state.load();
	int rc = st == IBV_QPS_RTS || st == IBV_QPS_ERR ? submit_wrs(qp, w, 1) : EINVAL;
	free(w);
	return rc;
}

// ------------------------------------------------------------------ CQ

static void cq_ex_setup(SoftCq *cq);

static SoftCq *cq_create(SoftContext *ctx, int cqe, struct ibv_comp_channel *channel,
			 int comp_vector, bool ex, SoftPd *ppd)
{
	if (cqe < 1 || uint32_t(cqe) > kMaxCqe || comp_vector < 0 ||
	    comp_vector >= ctx->vctx.context.num_comp_vectors) {
		errno = EINVAL;
		return nullptr;
	}
	uint32_t chan_ino = 0;
	if (channel) {
		struct stat st;
		if (fstat(channel->fd, &st) != 0 || !S_ISFIFO(st.st_mode)) {
			softlog(1, "soft%d: completion channel fd %d is not a pipe: events cannot "
				   "be delivered", ctx->index, channel->fd);
			errno = EINVAL;
			return nullptr;
		}
		chan_ino = uint32_t(st.st_ino);
	}
	auto *cq = static_cast<SoftCq *>(calloc(1, sizeof(SoftCq)));
	if (!cq) {
		errno = ENOMEM;
		return nullptr;
	}
	uint32_t cap = next_pow2(uint32_t(cqe));
	if (cap < 2)
		cap = 2;
	uint32_t cell = (8 + sizeof(CqeCell) + 7) & ~7u;
	uint64_t bytes = sizeof(RingHeader) + uint64_t(cap) * cell;
	// The application's allocator is called before the device lock is taken.
	int rc = ring_buf_alloc(allocator_of(ppd ? &ppd->pd : nullptr), OPENVERBS_SOFT_RES_CQ_RING,
				bytes, &cq->ring_buf);
	if (rc) {
		free(cq);
		errno = rc;
		return nullptr;
	}
	Segment *seg = ctx->seg;
	shm_lock(&seg->hdr->lock);
	int slot = -1;
	for (uint32_t i = 0; i < kMaxCqs; i++)
		if (seg->hdr->cqs[i].slot.load() == SLOT_FREE) {
			slot = int(i);
			break;
		}
	uint64_t off = slot >= 0 && !cq->ring_buf.ptr ? arena_alloc(seg, bytes, seg->my_proc) : 0;
	if (slot < 0 || (!off && !cq->ring_buf.ptr)) {
		shm_unlock(&seg->hdr->lock);
		queue_buf_free(&cq->ring_buf);
		free(cq);
		errno = ENOMEM;
		return nullptr;
	}
	auto *ring = reinterpret_cast<RingHeader *>(off ? seg->base + off
						       : static_cast<uint8_t *>(cq->ring_buf.ptr));
	ring_init(ring, cell, cap, seg->my_proc);
	CqEntry &e = seg->hdr->cqs[slot];
	e.generation++;
	e.owner = seg->my_proc;
	e.owner_pid = self_pid();
	e.ring = off ? Segment::arena_loc(off) : ring_buf_loc(cq->ring_buf);
	e.user_handle = uintptr_t(&cq->vcq.cq);
	e.armed.store(0);
	e.overflow.store(0);
	e.channel_fd = channel ? channel->fd : -1;
	e.channel_ino = chan_ino;
	e.async_fd = ctx->vctx.context.async_fd;
	e.async_ino = ctx->async_ino;
	e.slot.store(SLOT_LIVE, std::memory_order_release);
	shm_unlock(&seg->hdr->lock);
	cq->slot = slot;
	cq->capacity = cap;
	cq->ring = ring;
	cq->ring_off = off;
	cq->ex = ex;
	if (ppd) {
		cq->pd = ppd;
		ppd->users.fetch_add(1);
		cq->td_mode = ppd->td != nullptr;
	}
	// The library's create_cq / create_cq_ex wrappers finish the public
	// fields (and count the channel reference); set what they rely on.
	cq->vcq.cq.context = &ctx->vctx.context;
	cq->vcq.cq.channel = channel;
	pthread_mutex_init(&cq->vcq.cq.mutex, nullptr);
	pthread_cond_init(&cq->vcq.cq.cond, nullptr);
	cq->vcq.cq.cqe = int(cap);
	cq->vcq.cq.handle = slot;
	return cq;
}

static struct ibv_cq *soft_create_cq(struct ibv_context *context, int cqe,
				     struct ibv_comp_channel *channel, int comp_vector)
{
	SoftCq *cq = cq_create(to_sctx(context), cqe, channel, comp_vector, false, nullptr);
	return cq ? &cq->vcq.cq : nullptr;
}

static int soft_destroy_cq(struct ibv_cq *ibcq);

static const uint64_t kSupportedWcFlags =
	IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
	IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
	IBV_WC_EX_WITH_DLID_PATH_BITS;

static struct ibv_cq_ex *soft_create_cq_ex(struct ibv_context *context,
					   struct ibv_cq_init_attr_ex *attr)
{
	if (!attr) {
		errno = EINVAL;
		return nullptr;
	}
	if (attr->comp_mask & ~uint32_t(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) {
		errno = EINVAL;
		return nullptr;
	}
	if (attr->wc_flags & ~kSupportedWcFlags) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (attr->flags & ~uint32_t(IBV_CREATE_CQ_ATTR_SINGLE_THREADED))) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	SoftPd *ppd = nullptr;
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) && attr->parent_domain) {
		ppd = to_spd(attr->parent_domain);
		if (attr->parent_domain->context != context || !ppd->parent || ppd->dead) {
			errno = EINVAL;
			return nullptr;
		}
	}
	SoftCq *cq = cq_create(to_sctx(context), int(attr->cqe), attr->channel,
			       int(attr->comp_vector), true, ppd);
	if (!cq)
		return nullptr;
	if (cq->td_mode) {
		// The thread-domain lane: process local, from the parent domain's
		// allocator when it has one.
		int rc = queue_buf_alloc(allocator_of(&cq->pd->pd), OPENVERBS_SOFT_RES_CQ_LANE,
					 size_t(cq->capacity) * sizeof(struct ibv_wc), 64,
					 &cq->lane_buf);
		if (rc) {
			soft_destroy_cq(&cq->vcq.cq);
			errno = rc;
			return nullptr;
		}
		cq->lane.cells = static_cast<struct ibv_wc *>(cq->lane_buf.ptr);
		cq->lane.mask = cq->capacity - 1;
		cq->entry = &to_sctx(context)->seg->hdr->cqs[cq->slot];
	}
	cq->wc_flags = attr->wc_flags;
	cq_ex_setup(cq);
	return &cq->vcq.cq_ex;
}

// The next completion of the shared ring that no QP reset removed (see
// cq_purge_qp), whole cell. False: the ring is empty.
static bool pop_unpurged(SoftCq *cq, CqeCell *c)
{
	while (ring_pop(cq->ring, c, sizeof(*c))) {
		if (!c->purged)
			return true;
		cq->purged.fetch_sub(1, std::memory_order_relaxed);
	}
	return false;
}

static __attribute__((noinline, cold)) int pop_ring_purging(SoftCq *cq, int got, int n,
							     struct ibv_wc *wc)
{
	CqeCell c;
	while (got < n && pop_unpurged(cq, &c))
		wc[got++] = c.wc;
	return got;
}

// The shared ring of a CQ into wc[got..n) (a completion's ibv_wc is the head
// of its cell, so it is copied straight to the caller). Kept out of line:
// a thread-domain poll served by the lane does not pay for its frame.
static inline __attribute__((always_inline)) int pop_ring(SoftCq *cq, int got, int n,
							 struct ibv_wc *wc)
{
	if (__builtin_expect(cq->purged.load(std::memory_order_relaxed) != 0, 0))
		return pop_ring_purging(cq, got, n, wc);
	while (got < n && ring_pop(cq->ring, &wc[got], sizeof(struct ibv_wc)))
		got++;
	return got;
}

static __attribute__((noinline)) int poll_ring(SoftCq *cq, int got, int n, struct ibv_wc *wc)
{
	return pop_ring(cq, got, n, wc);
}

static __attribute__((noinline)) int poll_ring_locked(SoftCq *cq, int n, struct ibv_wc *wc)
{
	guard_lock(&cq->poll_busy);
	int got = pop_ring(cq, 0, n, wc);
	guard_unlock(&cq->poll_busy);
	return got;
}

static int soft_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	SoftCq *cq = to_scq(ibcq);
	if (n < 0 || (n && !wc))
		return -EINVAL;
	if (!cq->td_mode)
		return poll_ring_locked(cq, n, wc);
	// Thread domain: the application serialises its polls. The send
	// completions of the TD's own QPs wait in the lane, everything else in
	// the shared ring.
	int got = lane_poll(&cq->lane, n, wc);
	return got < n ? poll_ring(cq, got, n, wc) : got;
}

static int soft_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	SoftCq *cq = to_scq(ibcq);
	Segment *seg = to_sctx(ibcq->context)->seg;
	seg->hdr->cqs[cq->slot].armed.store(solicited_only ? 2 : 1, std::memory_order_release);
	return 0;
}

static void soft_cq_event(struct ibv_cq *) {}

static int soft_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	SoftCq *cq = to_scq(ibcq);
	if (cqe < 1 || uint32_t(cqe) > kMaxCqe)
		return EINVAL;
	uint32_t cap = next_pow2(uint32_t(cqe));
	if (cap < 2)
		cap = 2;
	uint32_t cell = cq->ring->cell_size;
	uint64_t bytes = sizeof(RingHeader) + uint64_t(cap) * cell;
	// A CQ of a parent domain with allocators asks it for the new ring too
	// (before any lock is taken), and a thread-domain CQ that grows for a
	// larger lane.
	SoftPd *apd = allocator_of(cq->pd ? &cq->pd->pd : nullptr);
	QueueBuf nb, nlane;
	int rc = ring_buf_alloc(apd, OPENVERBS_SOFT_RES_CQ_RING, bytes, &nb);
	if (rc)
		return rc;
	if (cq->td_mode && cap > cq->lane.mask + 1) {
		rc = queue_buf_alloc(apd, OPENVERBS_SOFT_RES_CQ_LANE,
				     size_t(cap) * sizeof(struct ibv_wc), 64, &nlane);
		if (rc) {
			queue_buf_free(&nb);
			return rc;
		}
	}
	guard_lock(&cq->poll_busy);
	// A thread-domain CQ: the TD's guard keeps the progress thread away
	// from the lane (and the ring pointer it reads) meanwhile.
	std::atomic<bool> *guard =
		cq->td_mode ? &reinterpret_cast<SoftTd *>(cq->pd->td)->busy : nullptr;
	if (guard)
		td_guard_lock(guard);
	auto unlock = [&] {
		if (guard)
			td_guard_unlock(guard);
		guard_unlock(&cq->poll_busy);
	};
	if (ring_count(cq->ring) + (cq->td_mode ? lane_count(&cq->lane) : 0) > cap) {
		unlock();
		queue_buf_free(&nb);
		queue_buf_free(&nlane);
		return EINVAL;
	}
	Segment *seg = to_sctx(ibcq->context)->seg;
	shm_lock(&seg->hdr->lock);
	uint64_t off = nb.ptr ? 0 : arena_alloc(seg, bytes, seg->my_proc);
	if (!off && !nb.ptr) {
		shm_unlock(&seg->hdr->lock);
		unlock();
		queue_buf_free(&nlane);
		return ENOMEM;
	}
	auto *ring = reinterpret_cast<RingHeader *>(off ? seg->base + off
						       : static_cast<uint8_t *>(nb.ptr));
	ring_init(ring, cell, cap, seg->my_proc);
	CqEntry &e = seg->hdr->cqs[cq->slot];
	e.ring = off ? Segment::arena_loc(off) : ring_buf_loc(nb);
	CqeCell c;
	while (ring_pop(cq->ring, &c, sizeof(c))) {
		uint64_t pos;
		void *dst = ring_claim(ring, &pos);
		if (!dst)
			break;
		memcpy(dst, &c, sizeof(c));
		ring_publish(ring, dst, pos);
	}
	if (cq->ring_off)
		arena_free(seg, cq->ring_off);
	shm_unlock(&seg->hdr->lock);
	QueueBuf old = cq->ring_buf, old_lane;
	if (nlane.ptr) {
		lane_move(&cq->lane, static_cast<struct ibv_wc *>(nlane.ptr), cap);
		old_lane = cq->lane_buf;
		cq->lane_buf = nlane;
	}
	cq->ring = ring;
	cq->ring_off = off;
	cq->ring_buf = nb;
	cq->capacity = cap;
	ibcq->cqe = int(cap);
	unlock();
	queue_buf_free(&old);
	queue_buf_free(&old_lane);
	return 0;
}

static int soft_destroy_cq(struct ibv_cq *ibcq)
{
	SoftCq *cq = to_scq(ibcq);
	if (cq->users.load())
		return EBUSY;
	Segment *seg = to_sctx(ibcq->context)->seg;
	shm_lock(&seg->hdr->lock);
	CqEntry &e = seg->hdr->cqs[cq->slot];
	e.generation++;
	e.slot.store(SLOT_FREE, std::memory_order_release);
	if (cq->ring_off)
		arena_free(seg, cq->ring_off);
	shm_unlock(&seg->hdr->lock);
	queue_buf_free(&cq->ring_buf);
	if (cq->pd)
		cq->pd->users.fetch_sub(1);
	queue_buf_free(&cq->lane_buf);
	free(cq);
	return 0;
}

// cq_ex polling: start_poll takes the first completion, next_poll the
// following ones, read_* report fields of the current one.
static inline SoftCq *ex_cq(struct ibv_cq_ex *c) { return reinterpret_cast<SoftCq *>(c); }

static int ex_load(SoftCq *cq)
{
	if (cq->td_mode && lane_poll(&cq->lane, 1, &cq->cur.wc)) {
		cq->cur.solicited = 0;
		cq->vcq.cq_ex.status = cq->cur.wc.status;
		cq->vcq.cq_ex.wr_id = cq->cur.wc.wr_id;
		return 0;
	}
	if (!pop_unpurged(cq, &cq->cur))
		return ENOENT;
	cq->vcq.cq_ex.status = cq->cur.wc.status;
	cq->vcq.cq_ex.wr_id = cq->cur.wc.wr_id;
	return 0;
}

static int ex_start_poll(struct ibv_cq_ex *c, struct ibv_poll_cq_attr *attr)
{
	if (attr && attr->comp_mask)
		return EINVAL;
	SoftCq *cq = ex_cq(c);
	if (cq->td_mode)
		return ex_load(cq);
	guard_lock(&cq->poll_busy);
	int rc = ex_load(cq);
	if (rc)
		guard_unlock(&cq->poll_busy);
	return rc;
}
static int ex_next_poll(struct ibv_cq_ex *c) { return ex_load(ex_cq(c)); }
static void ex_end_poll(struct ibv_cq_ex *c)
{
	if (!ex_cq(c)->td_mode)
		guard_unlock(&ex_cq(c)->poll_busy);
}
static enum ibv_wc_opcode ex_opcode(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.opcode; }
static uint32_t ex_vendor_err(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.vendor_err; }
static uint32_t ex_byte_len(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.byte_len; }
static __be32 ex_imm(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.imm_data; }
static uint32_t ex_qp_num(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.qp_num; }
static uint32_t ex_src_qp(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.src_qp; }
static unsigned int ex_wc_flags(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.wc_flags; }
static uint32_t ex_slid(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.slid; }
static uint8_t ex_sl(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.sl; }
static uint8_t ex_dlid_path_bits(struct ibv_cq_ex *c) { return ex_cq(c)->cur.wc.dlid_path_bits; }

static void cq_ex_setup(SoftCq *cq)
{
	struct ibv_cq_ex &x = cq->vcq.cq_ex;
	x.start_poll = ex_start_poll;
	x.next_poll = ex_next_poll;
	x.end_poll = ex_end_poll;
	x.read_opcode = ex_opcode;
	x.read_vendor_err = ex_vendor_err;
	x.read_wc_flags = ex_wc_flags;
	if (cq->wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		x.read_byte_len = ex_byte_len;
	if (cq->wc_flags & IBV_WC_EX_WITH_IMM)
		x.read_imm_data = ex_imm;
	if (cq->wc_flags & IBV_WC_EX_WITH_QP_NUM)
		x.read_qp_num = ex_qp_num;
	if (cq->wc_flags & IBV_WC_EX_WITH_SRC_QP)
		x.read_src_qp = ex_src_qp;
	if (cq->wc_flags & IBV_WC_EX_WITH_SLID)
		x.read_slid = ex_slid;
	if (cq->wc_flags & IBV_WC_EX_WITH_SL)
		x.read_sl = ex_sl;
	if (cq->wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		x.read_dlid_path_bits = ex_dlid_path_bits;
	x.comp_mask = 0;
}

// ------------------------------------------------------------------ SRQ

// Size of a receive ring: `depth` WQEs (rounded up to a power of two) of
// `max_sge` scatter entries each.
struct RecvGeometry {
	uint32_t cap;
	uint32_t cell;
	uint64_t bytes() const { return sizeof(RingHeader) + uint64_t(cap) * cell; }
};

static RecvGeometry recv_geometry(uint32_t depth, uint32_t max_sge)
{
	uint32_t cap = next_pow2(depth ? depth : 1);
	uint32_t cell = (8 + sizeof(RecvWqe) + max_sge * sizeof(struct ibv_sge) + 7) & ~7u;
	if (cell < 32)
		cell = 32;
	return RecvGeometry{cap, cell};
}

// Sets up a receive ring (device lock held): in `app` when the allocator
// gave it, else cut from the arena (*off). ENOMEM when the arena is full.
static int recv_ring_alloc(Segment *seg, const RecvGeometry &g, const QueueBuf &app,
			   uint64_t *off, RingHeader **ring, RingLoc *loc)
{
	uint64_t o = 0;
	uint8_t *at = static_cast<uint8_t *>(app.ptr);
	if (!at) {
		o = arena_alloc(seg, g.bytes(), seg->my_proc);
		if (!o)
			return ENOMEM;
		at = seg->base + o;
	}
	auto *r = reinterpret_cast<RingHeader *>(at);
	ring_init(r, g.cell, g.cap, seg->my_proc);
	*off = o;
	*ring = r;
	*loc = o ? Segment::arena_loc(o) : ring_buf_loc(app);
	return 0;
}

static struct ibv_srq *srq_create(SoftContext *ctx, struct ibv_pd *pd,
				  struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq_attr &a = attr->attr;
	if (!a.max_wr || a.max_wr > kMaxSrqWr || a.max_sge > kMaxSge || a.srq_limit > a.max_wr) {
		errno = EINVAL;
		return nullptr;
	}
	bool xrc = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type == IBV_SRQT_XRC;
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC &&
	    attr->srq_type != IBV_SRQT_XRC) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	if (!pd || (xrc && (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd ||
			    !(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq))) {
		errno = EINVAL;
		return nullptr;
	}
	// Every object named must belong to this context (an XRCD, PD or CQ of
	// another device or context is EINVAL, as for a kernel device).
	struct ibv_context *self = &ctx->vctx.context;
	if (pd->context != self ||
	    (xrc && (attr->xrcd->context != self || attr->cq->context != self))) {
		errno = EINVAL;
		return nullptr;
	}
	auto *srq = static_cast<SoftSrq *>(calloc(1, sizeof(SoftSrq)));
	if (!srq) {
		errno = ENOMEM;
		return nullptr;
	}
	Segment *seg = ctx->seg;
	uint32_t max_sge = a.max_sge ? a.max_sge : 1;
	RecvGeometry geo = recv_geometry(a.max_wr, max_sge);
	int rc = ring_buf_alloc(allocator_of(pd), OPENVERBS_SOFT_RES_SRQ_RING, geo.bytes(),
				&srq->ring_buf);
	if (rc) {
		free(srq);
		errno = rc;
		return nullptr;
	}
	shm_lock(&seg->hdr->lock);
	int slot = -1;
	for (uint32_t i = 0; i < kMaxSrqs; i++)
		if (seg->hdr->srqs[i].slot.load() == SLOT_FREE) {
			slot = int(i);
			break;
		}
	uint32_t cap = geo.cap;
	RingLoc loc{};
	if (slot < 0 ||
	    recv_ring_alloc(seg, geo, srq->ring_buf, &srq->ring_off, &srq->ring, &loc)) {
		shm_unlock(&seg->hdr->lock);
		queue_buf_free(&srq->ring_buf);
		free(srq);
		errno = ENOMEM;
		return nullptr;
	}
	SrqEntry &e = seg->hdr->srqs[slot];
	e.generation++;
	e.owner = seg->my_proc;
	e.owner_pid = self_pid();
	e.srq_type = xrc ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
	e.pd_id = to_spd(pd)->id;
	e.xrcd = xrc ? reinterpret_cast<SoftXrcd *>(attr->xrcd)->slot + 1 : 0;
	e.cq = xrc ? to_scq(attr->cq)->slot + 1 : 0;
	e.ring = loc;
	e.user_handle = uintptr_t(&srq->vsrq.srq);
	e.limit.store(a.srq_limit);
	e.async_fd = ctx->vctx.context.async_fd;
	e.async_ino = ctx->async_ino;
	e.error.store(0);
	e.slot.store(SLOT_LIVE, std::memory_order_release);
	shm_unlock(&seg->hdr->lock);
	srq->slot = slot;
	srq->max_wr = cap;
	srq->max_sge = max_sge;
	pthread_mutex_init(&srq->post_lock, nullptr);
	struct ibv_srq &s = srq->vsrq.srq;
	s.context = &ctx->vctx.context;
	s.srq_context = attr->srq_context;
	s.pd = pd;
	srq->pd = to_spd(pd);
	srq->pd->users.fetch_add(1);
	s.handle = slot;
	s.events_completed = 0;
	pthread_mutex_init(&s.mutex, nullptr);
	pthread_cond_init(&s.cond, nullptr);
	srq->vsrq.srq_type = xrc ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
	srq->vsrq.srq_num = slot + kSrqnBase;
	if (xrc) {
		srq->vsrq.xrcd = reinterpret_cast<struct verbs_xrcd *>(attr->xrcd);
		srq->vsrq.cq = attr->cq;
		srq->cq = to_scq(attr->cq);
		srq->cq->users.fetch_add(1);
		reinterpret_cast<SoftXrcd *>(attr->xrcd)->users.fetch_add(1);
	}
	a.max_wr = cap;
	a.max_sge = max_sge;
	return &s;
}

static struct ibv_srq *soft_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	if (!pd || !attr) {
		errno = EINVAL;
		return nullptr;
	}
	struct ibv_srq_init_attr_ex ex = {};
	ex.srq_context = attr->srq_context;
	ex.attr = attr->attr;
	ex.comp_mask = IBV_SRQ_INIT_ATTR_PD;
	ex.pd = pd;
	struct ibv_srq *s = srq_create(to_sctx(pd->context), pd, &ex);
	if (s)
		attr->attr = ex.attr;
	return s;
}

static struct ibv_srq *soft_create_srq_ex(struct ibv_context *context,
					  struct ibv_srq_init_attr_ex *attr)
{
	if (!attr || !(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ||
	    (attr->comp_mask & ~uint32_t(IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
					 IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ))) {
		errno = attr && (attr->comp_mask & IBV_SRQ_INIT_ATTR_TM) ? EOPNOTSUPP : EINVAL;
		return nullptr;
	}
	return srq_create(to_sctx(context), attr->pd, attr);
}

struct SrqOldRing {
	uint64_t off;  // arena offset, 0 when buf holds it
	QueueBuf buf;
	SrqOldRing *next;
};

// Resizes the SRQ's ring to hold max_wr requests (rounded up to a power of
// two). EINVAL when more requests are queued than fit, ENOMEM when no
// memory is left. Requesters of other processes keep consuming meanwhile:
// the new ring is published first, then what is queued moves over, taken
// from the old ring one request at a time (a requester that still looks at
// the old ring takes a request there instead, never one twice). The old
// ring stays allocated until the SRQ is destroyed.
static int srq_resize(SoftSrq *srq, uint32_t max_wr)
{
	RecvGeometry geo = recv_geometry(max_wr, srq->max_sge);
	auto *old = static_cast<SrqOldRing *>(calloc(1, sizeof(SrqOldRing)));
	if (!old)
		return ENOMEM;
	QueueBuf nb;
	int rc = ring_buf_alloc(allocator_of(srq->vsrq.srq.pd), OPENVERBS_SOFT_RES_SRQ_RING,
				geo.bytes(), &nb);
	if (rc) {
		free(old);
		return rc;
	}
	pthread_mutex_lock(&srq->post_lock);
	if (ring_count(srq->ring) > geo.cap || geo.cell != srq->ring->cell_size) {
		pthread_mutex_unlock(&srq->post_lock);
		queue_buf_free(&nb);
		free(old);
		return EINVAL;
	}
	Segment *seg = to_sctx(srq->vsrq.srq.context)->seg;
	shm_lock(&seg->hdr->lock);
	uint64_t off = 0;
	RingHeader *ring = nullptr;
	RingLoc loc{};
	if (recv_ring_alloc(seg, geo, nb, &off, &ring, &loc)) {
		shm_unlock(&seg->hdr->lock);
		pthread_mutex_unlock(&srq->post_lock);
		queue_buf_free(&nb);
		free(old);
		return ENOMEM;
	}
	seg->hdr->srqs[srq->slot].ring = loc;
	shm_unlock(&seg->hdr->lock);
	alignas(8) uint8_t cell[sizeof(RecvWqe) + kMaxSge * sizeof(struct ibv_sge)];
	size_t bytes = geo.cell - 8;
	while (ring_pop(srq->ring, cell, bytes)) {
		uint64_t pos;
		void *dst = ring_claim(ring, &pos);
		if (!dst)
			break; // cannot happen: the new ring holds all that was queued
		memcpy(dst, cell, bytes);
		ring_publish(ring, dst, pos);
	}
	*old = SrqOldRing{srq->ring_off, srq->ring_buf, srq->old_rings};
	srq->old_rings = old;
	srq->ring = ring;
	srq->ring_off = off;
	srq->ring_buf = nb;
	srq->max_wr = geo.cap;
	pthread_mutex_unlock(&srq->post_lock);
	return 0;
}

static int soft_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	SoftSrq *srq = to_ssrq(ibsrq);
	if (!attr || (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
		return EINVAL;
	if (mask & IBV_SRQ_MAX_WR) {
		// The armed limit (or the one set by this call) must stay below
		// the new size.
		Segment *seg = to_sctx(ibsrq->context)->seg;
		uint32_t lim = (mask & IBV_SRQ_LIMIT) ? attr->srq_limit
						      : seg->hdr->srqs[srq->slot].limit.load();
		if (!attr->max_wr || attr->max_wr > kMaxSrqWr || lim > attr->max_wr)
			return EINVAL;
		if (int rc = srq_resize(srq, attr->max_wr))
			return rc;
	}
	if (mask & IBV_SRQ_LIMIT) {
		if (attr->srq_limit > srq->max_wr)
			return EINVAL;
		Segment *seg = to_sctx(ibsrq->context)->seg;
		seg->hdr->srqs[srq->slot].limit.store(attr->srq_limit);
	}
	return 0;
}

static int soft_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	SoftSrq *srq = to_ssrq(ibsrq);
	if (!attr)
		return EINVAL;
	Segment *seg = to_sctx(ibsrq->context)->seg;
	attr->max_wr = srq->max_wr;
	attr->max_sge = srq->max_sge;
	attr->srq_limit = seg->hdr->srqs[srq->slot].limit.load();
	return 0;
}

static int soft_destroy_srq(struct ibv_srq *ibsrq)
{
	SoftSrq *srq = to_ssrq(ibsrq);
	if (srq->users.load())
		return EBUSY;
	Segment *seg = to_sctx(ibsrq->context)->seg;
	shm_lock(&seg->hdr->lock);
	SrqEntry &e = seg->hdr->srqs[srq->slot];
	e.error.store(1);
	e.generation++;
	e.slot.store(SLOT_FREE, std::memory_order_release);
	if (srq->ring_off)
		arena_free(seg, srq->ring_off);
	for (SrqOldRing *o = srq->old_rings; o; o = o->next)
		if (o->off)
			arena_free(seg, o->off);
	shm_unlock(&seg->hdr->lock);
	queue_buf_free(&srq->ring_buf);
	while (SrqOldRing *o = srq->old_rings) {
		srq->old_rings = o->next;
		queue_buf_free(&o->buf);
		free(o);
	}
	if (srq->cq)
		srq->cq->users.fetch_sub(1);
	if (srq->pd)
		srq->pd->users.fetch_sub(1);
	if (srq->vsrq.srq_type == IBV_SRQT_XRC && srq->vsrq.xrcd)
		reinterpret_cast<SoftXrcd *>(srq->vsrq.xrcd)->users.fetch_sub(1);
	pthread_mutex_destroy(&srq->post_lock);
	free(srq);
	return 0;
}

static int post_recv_ring(RingHeader *ring, uint32_t max_sge, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad)
{
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || uint32_t(wr->num_sge) > max_sge || (wr->num_sge && !wr->sg_list)) {
			*bad = wr;
			return EINVAL;
		}
		uint64_t pos;
		void *cell = ring_claim(ring, &pos);
		if (!cell) {
			*bad = wr;
			return ENOMEM;
		}
		auto *wqe = static_cast<RecvWqe *>(cell);
		wqe->wr_id = wr->wr_id;
		wqe->num_sge = wr->num_sge;
		if (wr->num_sge)
			memcpy(wqe->sge, wr->sg_list, wr->num_sge * sizeof(struct ibv_sge));
		ring_publish(ring, cell, pos);
	}
	return 0;
}

static int soft_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			      struct ibv_recv_wr **bad)
{
	SoftSrq *srq = to_ssrq(ibsrq);
	// Against a concurrent resize (which moves the queue to a new ring).
	pthread_mutex_lock(&srq->post_lock);
	int rc = post_recv_ring(srq->ring, srq->max_sge, wr, bad);
	pthread_mutex_unlock(&srq->post_lock);
	return rc;
}

static int soft_get_srq_num(struct ibv_srq *ibsrq, uint32_t *num)
{
	SoftSrq *srq = to_ssrq(ibsrq);
	if (!num || srq->vsrq.srq_type != IBV_SRQT_XRC)
		return EINVAL;
	*num = srq->vsrq.srq_num;
	return 0;
}

// ------------------------------------------------------------------ XRC domains

static struct ibv_xrcd *soft_open_xrcd(struct ibv_context *context,
				       struct ibv_xrcd_init_attr *attr)
{
	if (!attr) {
		errno = EINVAL;
		return nullptr;
	}
	if (attr->comp_mask & ~uint32_t(IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS)) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	if ((attr->comp_mask & (IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS)) !=
	    (IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS)) {
		errno = EINVAL;
		return nullptr;
	}
	uint64_t dev = 0, ino = 0;
	bool anon = attr->fd == -1;
	if (!anon) {
		struct stat st;
		if (fstat(attr->fd, &st) != 0) {
			errno = EBADF;
			return nullptr;
		}
		dev = st.st_dev;
		ino = st.st_ino;
	} else if (attr->oflags & ~O_CREAT) {
		errno = EINVAL;
		return nullptr;
	}
	// ibv_open_xrcd(3): only O_CREAT and O_EXCL have a meaning.
	if (attr->oflags & ~(O_CREAT | O_EXCL)) {
		errno = EINVAL;
		return nullptr;
	}
	auto *x = static_cast<SoftXrcd *>(calloc(1, sizeof(SoftXrcd)));
	if (!x) {
		errno = ENOMEM;
		return nullptr;
	}
	Segment *seg = to_sctx(context)->seg;
	SegmentHeader *h = seg->hdr;
	shm_lock(&h->lock);
	int slot = -1;
	int err = 0;
	if (!anon)
		for (uint32_t i = 0; i < kMaxXrcds; i++)
			if (h->xrcds[i].in_use && !h->xrcds[i].anonymous && h->xrcds[i].dev == dev &&
			    h->xrcds[i].ino == ino)
				slot = int(i);
	if (slot >= 0 && (attr->oflags & O_EXCL) && (attr->oflags & O_CREAT))
		err = EINVAL;
	else if (slot < 0 && !(attr->oflags & O_CREAT) && !anon)
		err = EAGAIN;
	if (!err && slot < 0) {
		for (uint32_t i = 0; i < kMaxXrcds; i++)
			if (!h->xrcds[i].in_use) {
				slot = int(i);
				XrcdEntry &e = h->xrcds[i];
				e.in_use = 1;
				e.refs = 0;
				e.dev = dev;
				e.ino = ino;
				e.anonymous = anon;
				e.id = h->next_xrcd_id.fetch_add(1);
				break;
			}
		if (slot < 0)
			err = ENOMEM;
	}
	if (!err) {
		int r = -1;
		for (uint32_t i = 0; i < kMaxXrcdRefs; i++)
			if (h->xrcd_refs[i].in_use && h->xrcd_refs[i].xrcd == uint32_t(slot) &&
			    h->xrcd_refs[i].proc == seg->my_proc)
				r = int(i);
		if (r < 0)
			for (uint32_t i = 0; i < kMaxXrcdRefs; i++)
				if (!h->xrcd_refs[i].in_use) {
					r = int(i);
					h->xrcd_refs[i] = XrcdRef{1, uint32_t(slot), seg->my_proc, 0};
					break;
				}
		if (r < 0) {
			err = ENOMEM;
			if (!h->xrcds[slot].refs)
				h->xrcds[slot].in_use = 0;
		} else {
			h->xrcd_refs[r].count++;
			h->xrcds[slot].refs++;
		}
	}
	shm_unlock(&h->lock);
	if (err) {
		free(x);
		errno = err;
		return nullptr;
	}
	x->slot = slot;
	x->vxrcd.xrcd.context = context;
	x->vxrcd.comp_mask = VERBS_XRCD_HANDLE;
	x->vxrcd.handle = slot;
	return &x->vxrcd.xrcd;
}

static int soft_close_xrcd(struct ibv_xrcd *ibx)
{
	auto *x = reinterpret_cast<SoftXrcd *>(ibx);
	if (x->users.load())
		return EBUSY; // XRC SRQs or XRC_RECV QPs of this handle are alive
	Segment *seg = to_sctx(ibx->context)->seg;
	SegmentHeader *h = seg->hdr;
	shm_lock(&h->lock);
	for (auto &r : h->xrcd_refs)
		if (r.in_use && r.xrcd == x->slot && r.proc == seg->my_proc) {
			if (!--r.count)
				r.in_use = 0;
			break;
		}
	XrcdEntry &e = h->xrcds[x->slot];
	if (e.refs && !--e.refs)
		e.in_use = 0;
	shm_unlock(&h->lock);
	free(x);
	return 0;
}

// ------------------------------------------------------------------ QP

static const uint64_t kSendOps =
	IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
	IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
	IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
	IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV
#if _OPENVERBS_ABI >= 56
	| IBV_QP_EX_WITH_FLUSH
#endif
	;

static void qp_link(SoftContext *ctx, SoftQp *qp)
{
	pthread_mutex_lock(&ctx->lock);
	qp->next = ctx->qps;
	ctx->qps = qp;
	pthread_mutex_unlock(&ctx->lock);
}

static void qp_unlink(SoftContext *ctx, SoftQp *qp)
{
	pthread_mutex_lock(&ctx->lock);
	for (SoftQp **p = &ctx->qps; *p; p = &(*p)->next)
		if (*p == qp) {
			*p = qp->next;
			break;
		}
	pthread_mutex_unlock(&ctx->lock);
}

static void qp_init_public(SoftQp *qp, SoftContext *ctx, struct ibv_qp_init_attr_ex *a)
{
	struct ibv_qp &q = qp->vqp.qp;
	q.context = &ctx->vctx.context;
	q.qp_context = a->qp_context;
	q.pd = (a->comp_mask & IBV_QP_INIT_ATTR_PD) ? a->pd : nullptr;
	q.send_cq = a->send_cq;
	q.recv_cq = a->recv_cq;
	q.srq = a->srq;
	q.handle = qp->slot;
	q.qp_num = qp->qpn;
	q.state = IBV_QPS_RESET;
	q.qp_type = a->qp_type;
	q.events_completed = 0;
	pthread_mutex_init(&q.mutex, nullptr);
	pthread_cond_init(&q.cond, nullptr);
}

static struct ibv_qp *qp_create(SoftContext *ctx, struct ibv_qp_init_attr_ex *a)
{
	enum ibv_qp_type t = a->qp_type;
	if (t != IBV_QPT_RC && t != IBV_QPT_UC && t != IBV_QPT_UD && t != IBV_QPT_XRC_SEND &&
	    t != IBV_QPT_XRC_RECV) {
		errno = t == IBV_QPT_RAW_PACKET || t == IBV_QPT_DRIVER ? EOPNOTSUPP : EINVAL;
		return nullptr;
	}
	if (a->comp_mask & ~uint32_t(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
				     IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	if ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	if ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (a->send_ops_flags & ~kSendOps)) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	bool has_sq = t != IBV_QPT_XRC_RECV;
	bool has_rq = (t == IBV_QPT_RC || t == IBV_QPT_UC || t == IBV_QPT_UD) && !a->srq;
	struct ibv_pd *pd = (a->comp_mask & IBV_QP_INIT_ATTR_PD) ? a->pd : nullptr;
	SoftXrcd *xrcd = nullptr;
	if (t == IBV_QPT_XRC_RECV) {
		if (!(a->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !a->xrcd) {
			errno = EINVAL;
			return nullptr;
		}
		xrcd = reinterpret_cast<SoftXrcd *>(a->xrcd);
		if (a->xrcd->context != &ctx->vctx.context) {
			errno = EINVAL;
			return nullptr;
		}
	} else {
		if (!pd || !a->send_cq || (t != IBV_QPT_XRC_SEND && !a->recv_cq)) {
			errno = EINVAL;
			return nullptr;
		}
		if (pd->context != &ctx->vctx.context || a->send_cq->context != pd->context ||
		    (a->recv_cq && a->recv_cq->context != pd->context)) {
			errno = EINVAL;
			return nullptr;
		}
	}
	struct ibv_qp_cap &c = a->cap;
	if (t == IBV_QPT_XRC_SEND || t == IBV_QPT_XRC_RECV) {
		c.max_recv_wr = 0;
		c.max_recv_sge = 0;
	}
	if (t == IBV_QPT_XRC_RECV) {
		c.max_send_wr = c.max_send_sge = c.max_inline_data = 0;
	}
	if (c.max_send_wr > kMaxQpWr || c.max_recv_wr > kMaxQpWr || c.max_send_sge > kMaxSge ||
	    c.max_recv_sge > kMaxSge || c.max_inline_data > kMaxInline) {
		errno = EINVAL;
		return nullptr;
	}
	auto *qp = static_cast<SoftQp *>(calloc(1, sizeof(SoftQp)));
	if (!qp) {
		errno = ENOMEM;
		return nullptr;
	}
	qp->sq_guard = &qp->sq_busy;
	qp->ctx = ctx;
	qp->type = t;
	uint32_t recv_sge = c.max_recv_sge ? c.max_recv_sge : 1;
	RecvGeometry geo = recv_geometry(c.max_recv_wr, recv_sge);
	// Buffers from the parent domain's allocator (or our own), in this
	// order: send queue, receive ring, ibv_wr_* staging. Every error path
	// gives back what was obtained.
	SoftPd *apd = t == IBV_QPT_XRC_RECV ? nullptr : allocator_of(pd);
	auto undo = [&](int e) {
		queue_buf_free(&qp->staged_buf);
		queue_buf_free(&qp->rq_buf);
		queue_buf_free(&qp->sq_buf);
		free(qp);
		errno = e;
		return nullptr;
	};
	if (has_sq) {
		qp->sq_depth = c.max_send_wr ? c.max_send_wr : 1;
		int rc = queue_buf_alloc(apd, OPENVERBS_SOFT_RES_QP_SQ,
					 size_t(qp->sq_depth) * sizeof(SoftWr), 64, &qp->sq_buf);
		if (rc)
			return undo(rc);
		qp->sq = static_cast<SoftWr *>(qp->sq_buf.ptr);
	}
	if (has_rq) {
		int rc = ring_buf_alloc(apd, OPENVERBS_SOFT_RES_QP_RQ_RING, geo.bytes(), &qp->rq_buf);
		if (rc)
			return undo(rc);
	}
	if (has_sq && apd && (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
		int rc = queue_buf_alloc(apd, OPENVERBS_SOFT_RES_QP_WR_STAGING,
					 size_t(qp->sq_depth) * sizeof(SoftWr), 64, &qp->staged_buf);
		if (rc)
			return undo(rc);
		if (qp->staged_buf.pd) { // else USE_DEFAULT: qpex.cpp allocates on first use
			qp->staged = static_cast<SoftWr *>(qp->staged_buf.ptr);
			qp->staged_cap = qp->sq_depth;
		} else {
			queue_buf_free(&qp->staged_buf);
		}
	}
	Segment *seg = ctx->seg;
	uint32_t rq_cap = has_rq ? geo.cap : 0;
	RingLoc rq_loc{};
	shm_lock(&seg->hdr->lock);
	int slot = -1;
	for (uint32_t i = 0; i < kMaxQps; i++)
		if (seg->hdr->qps[i].slot.load() == SLOT_FREE) {
			slot = int(i);
			break;
		}
	if (slot < 0 ||
	    (t == IBV_QPT_XRC_RECV && !qp_ref_add(seg->hdr, uint32_t(slot), seg->my_proc)) ||
	    (has_rq && recv_ring_alloc(seg, geo, qp->rq_buf, &qp->rq_off, &qp->rq, &rq_loc))) {
		shm_unlock(&seg->hdr->lock);
		return undo(ENOMEM);
	}
	qp->slot = slot;
	qp->entry = &seg->hdr->qps[slot];
	qp->qpn = slot + kQpnBase;
	QpEntry &e = seg->hdr->qps[slot];
	e.generation++;
	e.state.store(IBV_QPS_RESET);
	e.owner = seg->my_proc;
	e.owner_pid = self_pid();
	e.qp_type = t;
	e.access = 0;
	e.pd_id = pd ? to_spd(pd)->id : 0;
	e.qkey = 0;
	e.dest_qpn = 0;
	e.srq = a->srq ? to_ssrq(a->srq)->slot + 1 : 0;
	e.recv_cq = a->recv_cq ? to_scq(a->recv_cq)->slot + 1 : 0;
	e.xrcd = xrcd ? xrcd->slot + 1 : 0;
	e.min_rnr_timer = 0;
	e.port_num = 1;
	e.sq_sig_all = a->sq_sig_all;
	e.handles = 1;
	e.rq_ring = rq_loc;
	e.remote_error.store(0);
	e.recv_lock.store(0);
	qp->fatal_seen = e.error_seq.load();
	e.slot.store(SLOT_LIVE, std::memory_order_release);
	shm_unlock(&seg->hdr->lock);

	qp->pd_id = e.pd_id;
	qp->scq = a->send_cq ? to_scq(a->send_cq) : nullptr;
	qp->rcq = a->recv_cq ? to_scq(a->recv_cq) : nullptr;
	qp->srq = a->srq ? to_ssrq(a->srq) : nullptr;
	qp->xrcd = xrcd;
	if (xrcd)
		xrcd->users.fetch_add(1);
	if (pd && t != IBV_QPT_XRC_RECV) {
		qp->pd = to_spd(pd);
		qp->pd->users.fetch_add(1);
		if (qp->pd->parent && qp->pd->td) {
			SoftTd *td = reinterpret_cast<SoftTd *>(qp->pd->td);
			qp->sq_guard = &td->busy;
			// Send completions into the send CQ's lane when that CQ
			// belongs to the same thread domain.
			if (qp->scq && qp->scq->td_mode && qp->scq->pd->td == qp->pd->td)
				qp->lane = &qp->scq->lane;
		}
	}
	if (qp->scq)
		qp->scq->users.fetch_add(1);
	if (qp->rcq)
		qp->rcq->users.fetch_add(1);
	if (qp->srq)
		qp->srq->users.fetch_add(1);
	qp->sq_sig_all = a->sq_sig_all;
	qp->rq_cell = qp->rq ? qp->rq->cell_size : 0;
	c.max_send_wr = has_sq ? qp->sq_depth : 0;
	c.max_recv_wr = has_rq ? rq_cap : 0;
	c.max_recv_sge = has_rq ? recv_sge : 0;
	// Inline capacity is at least the room of the work request's gather
	// list (16 bytes per SGE), as the kernel's rxe and hardware devices
	// report it: programs such as rdma_xclient post 16 inline bytes on a QP
	// created with one send SGE and no inline request. Every send-queue
	// entry holds kMaxInline bytes, so the raised value is always honoured.
	if (has_sq)
		c.max_inline_data = std::max<uint32_t>(
			c.max_inline_data,
			std::min<uint32_t>(kMaxInline, c.max_send_sge * uint32_t(sizeof(ibv_sge))));
	qp->cap = c;
	if (has_sq && !qp->cap.max_send_sge)
		qp->cap.max_send_sge = 0;
	pthread_mutex_init(&qp->rq_lock, nullptr);
	qp->attr.qp_state = IBV_QPS_RESET;
	qp->attr.cap = c;
	qp->attr.port_num = 1;
	qp_init_public(qp, ctx, a);
	qp->vqp.comp_mask = VERBS_QP_EX;
	if (xrcd) {
		qp->vqp.comp_mask |= VERBS_QP_XRCD;
		qp->vqp.xrcd = &xrcd->vxrcd;
	}
	init_qp_ex_ops(qp);
	qp_link(ctx, qp);
	ensure_thread(ctx);
	return &qp->vqp.qp;
}

static struct ibv_qp *soft_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	if (!pd || !attr) {
		errno = EINVAL;
		return nullptr;
	}
	struct ibv_qp_init_attr_ex ex = {};
	ex.qp_context = attr->qp_context;
	ex.send_cq = attr->send_cq;
	ex.recv_cq = attr->recv_cq;
	ex.srq = attr->srq;
	ex.cap = attr->cap;
	ex.qp_type = attr->qp_type;
	ex.sq_sig_all = attr->sq_sig_all;
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd;
	struct ibv_qp *qp = qp_create(to_sctx(pd->context), &ex);
	if (qp)
		attr->cap = ex.cap;
	return qp;
}

static struct ibv_qp *soft_create_qp_ex(struct ibv_context *context,
					struct ibv_qp_init_attr_ex *attr)
{
	if (!attr) {
		errno = EINVAL;
		return nullptr;
	}
	return qp_create(to_sctx(context), attr);
}

static struct ibv_qp *soft_open_qp(struct ibv_context *context, struct ibv_qp_open_attr *attr)
{
	const uint32_t need = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
	if (!attr || (attr->comp_mask & need) != need || !attr->xrcd ||
	    attr->qp_type != IBV_QPT_XRC_RECV) {
		errno = EINVAL;
		return nullptr;
	}
	SoftContext *ctx = to_sctx(context);
	Segment *seg = ctx->seg;
	auto *x = reinterpret_cast<SoftXrcd *>(attr->xrcd);
	uint32_t s = attr->qp_num - kQpnBase;
	if (attr->qp_num < kQpnBase || s >= kMaxQps || attr->xrcd->context != context) {
		errno = EINVAL;
		return nullptr;
	}
	auto *qp = static_cast<SoftQp *>(calloc(1, sizeof(SoftQp)));
	if (!qp) {
		errno = ENOMEM;
		return nullptr;
	}
	qp->sq_guard = &qp->sq_busy;
	shm_lock(&seg->hdr->lock);
	QpEntry &e = seg->hdr->qps[s];
	if (e.slot.load() != SLOT_LIVE || e.qp_type != IBV_QPT_XRC_RECV || e.xrcd != x->slot + 1) {
		shm_unlock(&seg->hdr->lock);
		free(qp);
		errno = EINVAL;
		return nullptr;
	}
	if (!qp_ref_add(seg->hdr, s, seg->my_proc)) {
		shm_unlock(&seg->hdr->lock);
		free(qp);
		errno = ENOMEM;
		return nullptr;
	}
	e.handles++;
	qp->fatal_seen = e.error_seq.load(); // errors before the open are not ours
	shm_unlock(&seg->hdr->lock);
	qp->ctx = ctx;
	qp->type = IBV_QPT_XRC_RECV;
	qp->slot = s;
	qp->entry = &seg->hdr->qps[s];
	qp->qpn = attr->qp_num;
	qp->opened = true;
	qp->xrcd = x;
	x->users.fetch_add(1);
	pthread_mutex_init(&qp->rq_lock, nullptr);
	struct ibv_qp_init_attr_ex a = {};
	a.qp_context = attr->qp_context;
	a.qp_type = IBV_QPT_XRC_RECV;
	qp_init_public(qp, ctx, &a);
	qp->vqp.qp.state = IBV_QPS_UNKNOWN;
	qp->vqp.comp_mask = VERBS_QP_XRCD;
	qp->vqp.xrcd = &x->vxrcd;
	qp->attr.qp_state = IBV_QPS_ERR;
	qp_link(ctx, qp);
	ensure_thread(ctx); // its watchdog reports the QP's events to this handle
	return &qp->vqp.qp;
}

static int soft_destroy_qp(struct ibv_qp *ibqp)
{
	SoftQp *qp = to_sqp(ibqp);
	SoftContext *ctx = qp->ctx;
	Segment *seg = ctx->seg;
	qp_unlink(ctx, qp);
	qp_sq_lock(qp); // waits for a running progress step
	qp_sq_unlock(qp);
	shm_lock(&seg->hdr->lock);
	QpEntry &e = seg->hdr->qps[qp->slot];
	if (e.slot.load() == SLOT_LIVE) {
		uint32_t mine = 0;
		if (e.qp_type == IBV_QPT_XRC_RECV)
			mine = qp_ref_drop(seg->hdr, qp->slot, seg->my_proc);
		if (e.qp_type == IBV_QPT_XRC_RECV && e.handles > 1) {
			e.handles--;
			// Our last handle of a QP we own: another holder takes it over.
			if (!mine && e.owner == seg->my_proc)
				qp_hand_over(seg->hdr, qp->slot);
		} else {
			if (e.qp_type == IBV_QPT_XRC_RECV)
				qp_ref_clear(seg->hdr, qp->slot);
			e.state.store(IBV_QPS_RESET);
			e.generation++;
			e.slot.store(SLOT_FREE, std::memory_order_release);
			if (qp->rq_off)
				arena_free(seg, qp->rq_off);
			qp->rq_off = 0;
			for (auto &g : seg->hdr->mcast)
				if (g.in_use)
					for (auto &q : g.qpn)
						if (q == qp->qpn)
							q = 0;
		}
	}
	shm_unlock(&seg->hdr->lock);
	if (qp->scq)
		qp->scq->users.fetch_sub(1);
	if (qp->rcq)
		qp->rcq->users.fetch_sub(1);
	if (qp->srq)
		qp->srq->users.fetch_sub(1);
	if (qp->xrcd)
		qp->xrcd->users.fetch_sub(1);
	if (qp->pd)
		qp->pd->users.fetch_sub(1);
	pthread_mutex_destroy(&qp->rq_lock);
	if (qp->staged_buf.ptr)
		queue_buf_free(&qp->staged_buf);
	else
		free(qp->staged);
	queue_buf_free(&qp->rq_buf);
	queue_buf_free(&qp->sq_buf);
	free(qp);
	return 0;
}

// ---- The QP state machine: required and optional attribute masks per
// transition and QP type, as one table (ibv_modify_qp(3); the InfiniBand
// specification's QP state transition tables; the kernel keeps the same kind
// of table in drivers/infiniband/core/verbs.c, qp_state_table).

struct Transition {
	uint32_t req;
	uint32_t opt;
};

// QP types as the table tells them apart (RC also stands for any other).
enum Kind { K_UD, K_UC, K_RC, K_XI, K_XT, K_N };

static Kind kind_of(enum ibv_qp_type t)
{
	switch (t) {
	case IBV_QPT_UD:
		return K_UD;
	case IBV_QPT_UC:
		return K_UC;
	case IBV_QPT_XRC_SEND:
		return K_XI;
	case IBV_QPT_XRC_RECV:
		return K_XT;
	default:
		return K_RC;
	}
}

// One allowed transition: the masks for UD, UC, RC, XRC_SEND, XRC_RECV
// (a kind with kind_ok false may not take it).
struct TransitionRow {
	bool valid;
	Transition by_kind[K_N];
	bool kind_ok[K_N];
};

inline constexpr int kQpStates = IBV_QPS_ERR + 1;

static constexpr std::array<std::array<TransitionRow, kQpStates>, kQpStates> make_qp_table()
{
	constexpr uint32_t P = IBV_QP_PKEY_INDEX, PO = IBV_QP_PORT, Q = IBV_QP_QKEY,
			   A = IBV_QP_ACCESS_FLAGS, AV = IBV_QP_AV, MTU = IBV_QP_PATH_MTU,
			   DQ = IBV_QP_DEST_QPN, RP = IBV_QP_RQ_PSN,
			   MDA = IBV_QP_MAX_DEST_RD_ATOMIC, RNRT = IBV_QP_MIN_RNR_TIMER,
			   SP = IBV_QP_SQ_PSN, TO = IBV_QP_TIMEOUT, RCNT = IBV_QP_RETRY_CNT,
			   RR = IBV_QP_RNR_RETRY, MQA = IBV_QP_MAX_QP_RD_ATOMIC, ALT = IBV_QP_ALT_PATH,
			   CS = IBV_QP_CUR_STATE, MIG = IBV_QP_PATH_MIG_STATE,
			   DRAIN = IBV_QP_EN_SQD_ASYNC_NOTIFY;
	std::array<std::array<TransitionRow, kQpStates>, kQpStates> t{};
	// (UD, UC, RC, XRC_SEND, XRC_RECV) masks; every type may take it.
	auto row = [](Transition ud, Transition uc, Transition rc, Transition xi, Transition xt) {
		return TransitionRow{true, {ud, uc, rc, xi, xt}, {true, true, true, true, true}};
	};
	auto same = [&](Transition m) { return row(m, m, m, m, m); };
	// Any state -> RESET or ERR, no attribute.
	for (int s = 0; s < kQpStates; s++) {
		t[s][IBV_QPS_RESET] = same({0, 0});
		t[s][IBV_QPS_ERR] = same({0, 0});
	}
	const Transition ud_init = {P | PO | Q, 0}, init = {P | PO | A, 0};
	t[IBV_QPS_RESET][IBV_QPS_INIT] = row(ud_init, init, init, init, init);
	t[IBV_QPS_INIT][IBV_QPS_INIT] = row({0, P | PO | Q}, {0, P | PO | A}, {0, P | PO | A},
					    {0, P | PO | A}, {0, P | PO | A});
	const Transition conn_rtr = {AV | MTU | DQ | RP, ALT | A | P};
	const Transition rc_rtr = {AV | MTU | DQ | RP | MDA | RNRT, ALT | A | P};
	t[IBV_QPS_INIT][IBV_QPS_RTR] = row({0, P | Q}, conn_rtr, rc_rtr, conn_rtr, rc_rtr);
	const Transition rc_rts = {SP | TO | RCNT | RR | MQA, CS | ALT | A | RNRT | MIG};
	t[IBV_QPS_RTR][IBV_QPS_RTS] = row({SP, CS | Q}, {SP, CS | ALT | A | MIG}, rc_rts, rc_rts,
					  {TO | SP, CS | ALT | A | RNRT | MIG});
	const Transition ud_re = {0, CS | Q}, uc_re = {0, CS | A | ALT | MIG},
			 rc_re = {0, CS | A | ALT | MIG | RNRT};
	t[IBV_QPS_RTS][IBV_QPS_RTS] = row(ud_re, uc_re, rc_re, rc_re, rc_re);
	t[IBV_QPS_RTS][IBV_QPS_SQD] = same({0, DRAIN});
	t[IBV_QPS_SQD][IBV_QPS_RTS] = row(ud_re, uc_re, rc_re, rc_re, rc_re);
	const Transition rc_sqd = {0, PO | AV | TO | RCNT | RR | MQA | MDA | ALT | A | P | RNRT | MIG};
	t[IBV_QPS_SQD][IBV_QPS_SQD] = row({0, P | Q}, {0, AV | ALT | A | P | MIG}, rc_sqd, rc_sqd,
					  rc_sqd);
	// SQE exists for unreliable types only.
	t[IBV_QPS_SQE][IBV_QPS_RTS] = row({0, CS | Q | A}, {0, CS | Q | A}, {}, {}, {});
	t[IBV_QPS_SQE][IBV_QPS_RTS].kind_ok[K_RC] = false;
	t[IBV_QPS_SQE][IBV_QPS_RTS].kind_ok[K_XI] = false;
	t[IBV_QPS_SQE][IBV_QPS_RTS].kind_ok[K_XT] = false;
	return t;
}

static constexpr auto kQpTable = make_qp_table();

// The masks of cur -> next for a QP of kind k; false when not allowed.
static bool transition(enum ibv_qp_state cur, enum ibv_qp_state next, Kind k, Transition *out)
{
	if (unsigned(cur) >= unsigned(kQpStates) || unsigned(next) >= unsigned(kQpStates))
		return false;
	const TransitionRow &r = kQpTable[cur][next];
	if (!r.valid || !r.kind_ok[k])
		return false;
	*out = r.by_kind[k];
	return true;
}

// Removes from a thread-domain CQ's lane the completions of QP qpn (the
// caller holds the TD's guard, so it is the lane's producer, and is the
// application's thread, its consumer). The others keep their order.
static void lane_purge(CqLane *l, uint32_t qpn)
{
	uint32_t h = l->head.load(std::memory_order_relaxed);
	uint32_t t = l->tail.load(std::memory_order_relaxed);
	uint32_t k = t;
	for (uint32_t i = t; i != h;) {
		--i;
		const struct ibv_wc &wc = l->cells[i & l->mask];
		if (wc.qp_num != qpn) {
			--k;
			if (k != i)
				l->cells[k & l->mask] = wc;
		}
	}
	l->head.store(k, std::memory_order_release);
}

// Removes from cq's shared ring the completions of QP qpn nobody has polled
// yet, as HCA drivers clean a CQ when one of its QPs is reset (rdma-core's
// mlx4 and mlx5 providers in their modify_qp to IBV_QPS_RESET): after
// ibv_modify_qp(3) to RESET returns, no completion of the QP's earlier life
// (flush errors included) reaches a poll. Completions are marked in place
// (CqeCell::purged) under the CQ's poll guard, the ring's only consumer;
// the order of the others is unchanged. A QP in RESET produces nothing,
// so none of its completions can arrive after the scan.
static void cq_purge_qp(SoftCq *cq, uint32_t qpn)
{
	if (!cq)
		return;
	guard_lock(&cq->poll_busy);
	RingHeader *r = cq->ring;
	uint64_t end = r->enq.load(std::memory_order_acquire);
	uint32_t n = 0;
	for (uint64_t pos = r->deq.load(std::memory_order_acquire); pos != end; pos++) {
		auto *c = static_cast<CqeCell *>(ring_published(r, pos));
		if (c && !c->purged && c->wc.qp_num == qpn) {
			c->purged = 1;
			n++;
		}
	}
	if (n)
		cq->purged.fetch_add(n, std::memory_order_relaxed);
	guard_unlock(&cq->poll_busy);
}

// The rights a responder QP may grant (ibv_modify_qp(3) qp_access_flags);
// with rdma-core 56 also the FLUSH placement types it accepts (a QP may
// accept persistent flushes even though no region can be their target:
// they then fail with a remote access error, as on rxe with ordinary RAM).
// IBV_ACCESS_ON_DEMAND is accepted and means nothing for a QP (rdma-core's
// ODP tests give a QP the access flags of their regions; kernels ignore it).
static const unsigned kQpAccess =
	IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
	IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ON_DEMAND
#if _OPENVERBS_ABI >= 56
	| IBV_ACCESS_FLUSH_GLOBAL | IBV_ACCESS_FLUSH_PERSISTENT
#endif
	;

static int soft_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	SoftQp *qp = to_sqp(ibqp);
	if (!attr)
		return EINVAL;
	SoftContext *ctx = qp->ctx;
	Segment *seg = ctx->seg;
	QpEntry &e = seg->hdr->qps[qp->slot];
	if (e.slot.load() != SLOT_LIVE)
		return EINVAL;
	auto cur = static_cast<enum ibv_qp_state>(e.state.load());
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur &&
	    !(cur == IBV_QPS_RTS && attr->cur_qp_state == IBV_QPS_SQE))
		return EINVAL;
	enum ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if (next > IBV_QPS_ERR)
		return EINVAL;
	Transition t;
	if (!transition(cur, next, kind_of(qp->type), &t))
		return EINVAL;
	uint32_t given = uint32_t(mask) & ~uint32_t(IBV_QP_STATE);
	if ((given & t.req) != t.req)
		return EINVAL;
	if (given & ~(t.req | t.opt)) {
		if (next != IBV_QPS_RESET && next != IBV_QPS_ERR)
			return EINVAL;
	}
	// Value checks.
	if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index >= kPkeyTableLen)
		return EINVAL;
	if ((mask & IBV_QP_PORT) && attr->port_num != 1)
		return EINVAL;
	if ((mask & IBV_QP_PATH_MTU) && (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096))
		return EINVAL;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && attr->max_rd_atomic > kMaxRdAtom)
		return EINVAL;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && attr->max_dest_rd_atomic > kMaxRdAtom)
		return EINVAL;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31)
		return EINVAL;
	if ((mask & IBV_QP_TIMEOUT) && attr->timeout > 31)
		return EINVAL;
	if ((mask & IBV_QP_RETRY_CNT) && attr->retry_cnt > 7)
		return EINVAL;
	if ((mask & IBV_QP_RNR_RETRY) && attr->rnr_retry > 7)
		return EINVAL;
	if ((mask & IBV_QP_ACCESS_FLAGS) && (attr->qp_access_flags & ~kQpAccess))
		return EINVAL;
	if ((mask & IBV_QP_DEST_QPN) && attr->dest_qp_num > 0xffffff)
		return EINVAL;
	if ((mask & IBV_QP_AV) && attr->ah_attr.port_num > 1)
		return EINVAL;
	if ((mask & IBV_QP_AV) && attr->ah_attr.is_global &&
	    attr->ah_attr.grh.sgid_index >= kGidTableLen)
		return EINVAL;

	// Apply.
	struct ibv_qp_attr &s = qp->attr;
	if (mask & IBV_QP_PKEY_INDEX)
		s.pkey_index = attr->pkey_index;
	if (mask & IBV_QP_PORT)
		s.port_num = attr->port_num;
	if (mask & IBV_QP_QKEY) {
		s.qkey = attr->qkey;
		e.qkey = attr->qkey;
	}
	if (mask & IBV_QP_ACCESS_FLAGS) {
		s.qp_access_flags = attr->qp_access_flags;
		e.access = attr->qp_access_flags;
	}
	if (mask & IBV_QP_AV) {
		s.ah_attr = attr->ah_attr;
		qp_sq_lock(qp);
		qp->rseg = nullptr; // exec_wr looks the responder's device up again
		qp_sq_unlock(qp);
	}
	if (mask & IBV_QP_ALT_PATH) {
		s.alt_ah_attr = attr->alt_ah_attr;
		s.alt_pkey_index = attr->alt_pkey_index;
		s.alt_port_num = attr->alt_port_num;
		s.alt_timeout = attr->alt_timeout;
	}
	if (mask & IBV_QP_PATH_MTU)
		s.path_mtu = attr->path_mtu;
	if (mask & IBV_QP_DEST_QPN) {
		s.dest_qp_num = attr->dest_qp_num;
		e.dest_qpn = attr->dest_qp_num;
	}
	if (mask & IBV_QP_RQ_PSN)
		s.rq_psn = attr->rq_psn;
	if (mask & IBV_QP_SQ_PSN)
		s.sq_psn = attr->sq_psn;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		s.max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		s.max_rd_atomic = attr->max_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER) {
		s.min_rnr_timer = attr->min_rnr_timer;
		e.min_rnr_timer = attr->min_rnr_timer;
	}
	if (mask & IBV_QP_TIMEOUT)
		s.timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		s.retry_cnt = attr->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		s.rnr_retry = attr->rnr_retry;
	if (mask & IBV_QP_PATH_MIG_STATE)
		s.path_mig_state = attr->path_mig_state;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		s.en_sqd_async_notify = attr->en_sqd_async_notify;

	if (next == cur && next != IBV_QPS_ERR && next != IBV_QPS_RESET)
		return 0;
	// The responder's process (RTR of a connected QP): set below under the
	// send-queue guard, where the watchdog reads it.
	bool set_peer = false;
	int32_t peer_pid = 0;
	uint64_t peer_start = 0;
	if (next == IBV_QPS_RTR && qp->type != IBV_QPT_UD) {
		uint32_t ds = s.dest_qp_num - kQpnBase;
		set_peer = true;
		Segment *rs = responder_segment(qp, s.ah_attr);
		if (rs && s.dest_qp_num >= kQpnBase && ds < kMaxQps &&
		    rs->hdr->qps[ds].slot.load() == SLOT_LIVE) {
			peer_pid = rs->hdr->qps[ds].owner_pid;
			// The start time the owner recorded in its process slot
			// when it attached (no /proc read per connection); read
			// from /proc only if the slot no longer names that pid.
			uint32_t o = rs->hdr->qps[ds].owner;
			const ProcEntry *pe = o < kMaxProcs ? &rs->hdr->procs[o] : nullptr;
			peer_start = pe && pe->in_use.load() && pe->pid == peer_pid ? pe->start_time
										    : 0;
			if (!peer_start)
				peer_start = process_start_time(peer_pid);
		}
	}
	if (next == IBV_QPS_ERR) {
		qp_sq_lock(qp);
		if (qp->opened || !qp->sq) {
			e.state.store(IBV_QPS_ERR);
			if (qp->rq)
				flush_rq(qp);
			qp->flushed = true;
		} else {
			qp_to_error(qp, false);
		}
	} else if (next == IBV_QPS_RESET) {
		qp_sq_lock(qp);
		e.state.store(IBV_QPS_RESET);
		qp->sq_head = 0;
		sq_set_pending(qp, 0);
		if (qp->rq) {
			uint8_t buf[sizeof(RecvWqe) + kMaxSge * sizeof(struct ibv_sge)];
			while (ring_pop(qp->rq, buf, sizeof(RecvWqe)))
				;
		}
		e.remote_error.store(0);
		qp->flushed = false;
		qp->remote_pid = 0;
		if (qp->lane)
			lane_purge(qp->lane, qp->qpn);
	} else {
		qp_sq_lock(qp);
		e.state.store(next, std::memory_order_release);
	}
	// Still under the send-queue guard: the watchdog's qp_to_error writes
	// the same fields under it.
	if (set_peer) {
		qp->remote_pid = peer_pid;
		qp->remote_start = peer_start;
	}
	s.qp_state = next;
	s.cur_qp_state = next;
	ibqp->state = next;
	qp_sq_unlock(qp);
	if (next == IBV_QPS_RESET && !qp->opened) {
		cq_purge_qp(qp->scq, qp->qpn);
		if (qp->rcq != qp->scq)
			cq_purge_qp(qp->rcq, qp->qpn);
	}
	if (next == IBV_QPS_RTS && sq_pending(qp))
		progress_qp(qp, true);
	return 0;
}

static int soft_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
			 struct ibv_qp_init_attr *init)
{
	SoftQp *qp = to_sqp(ibqp);
	if (!attr || !init)
		return EINVAL;
	Segment *seg = qp->ctx->seg;
	QpEntry &e = seg->hdr->qps[qp->slot];
	*attr = qp->attr;
	attr->qp_state = static_cast<enum ibv_qp_state>(e.state.load());
	attr->cur_qp_state = attr->qp_state;
	attr->cap = qp->cap;
	attr->sq_draining = 0;
	memset(init, 0, sizeof(*init));
	init->qp_context = ibqp->qp_context;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->cap = qp->cap;
	init->qp_type = qp->type;
	init->sq_sig_all = qp->sq_sig_all;
	return 0;
}

static int soft_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct ibv_recv_wr *dummy;
	if (!bad)
		bad = &dummy;
	if (!wr)
		return 0;
	SoftQp *qp = to_sqp(ibqp);
	if (!qp->rq) {
		*bad = wr;
		return EINVAL;
	}
	Segment *seg = qp->ctx->seg;
	uint32_t st = seg->hdr->qps[qp->slot].state.load();
	if (st == IBV_QPS_RESET) {
		*bad = wr;
		return EINVAL;
	}
	int rc = post_recv_ring(qp->rq, qp->cap.max_recv_sge, wr, bad);
	if (st == IBV_QPS_ERR)
		flush_rq(qp);
	return rc;
}

// ------------------------------------------------------------------ AH and multicast

static struct ibv_ah *soft_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	if (!pd || !attr || attr->port_num != 1 ||
	    (attr->is_global && attr->grh.sgid_index >= kGidTableLen)) {
		errno = EINVAL;
		return nullptr;
	}
	auto *ah = static_cast<SoftAh *>(calloc(1, sizeof(SoftAh)));
	if (!ah) {
		errno = ENOMEM;
		return nullptr;
	}
	ah->ah.context = pd->context;
	ah->ah.pd = pd;
	ah->attr = *attr;
	return &ah->ah;
}

static int soft_destroy_ah(struct ibv_ah *ah)
{
	free(ah);
	return 0;
}

static int soft_attach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	SoftQp *qp = to_sqp(ibqp);
	if (!gid || qp->type != IBV_QPT_UD || gid->raw[0] != 0xff)
		return EINVAL;
	Segment *seg = qp->ctx->seg;
	SegmentHeader *h = seg->hdr;
	shm_lock(&h->lock);
	McastEntry *g = nullptr;
	for (auto &m : h->mcast)
		if (m.in_use && !memcmp(m.gid, gid->raw, 16))
			g = &m;
	if (!g)
		for (auto &m : h->mcast)
			if (!m.in_use) {
				memset(&m, 0, sizeof(m));
				m.in_use = 1;
				m.lid = lid;
				memcpy(m.gid, gid->raw, 16);
				g = &m;
				break;
			}
	int rc = g ? ENOMEM : ENOMEM;
	if (g) {
		for (auto &q : g->qpn)
			if (q == qp->qpn) {
				rc = 0;
				break;
			}
		if (rc)
			for (auto &q : g->qpn)
				if (!q) {
					q = qp->qpn;
					rc = 0;
					break;
				}
	}
	shm_unlock(&h->lock);
	return rc;
}

static int soft_detach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	SoftQp *qp = to_sqp(ibqp);
	if (!gid)
		return EINVAL;
	SegmentHeader *h = qp->ctx->seg->hdr;
	int rc = EINVAL;
	shm_lock(&h->lock);
	for (auto &m : h->mcast) {
		if (!m.in_use || memcmp(m.gid, gid->raw, 16))
			continue;
		bool any = false;
		for (auto &q : m.qpn) {
			if (q == qp->qpn) {
				q = 0;
				rc = 0;
			}
			if (q)
				any = true;
		}
		if (!any)
			m.in_use = 0;
	}
	shm_unlock(&h->lock);
	return rc;
}

static void soft_async_event(struct ibv_context *, struct ibv_async_event *) {}

// ------------------------------------------------------------------ context

static void soft_free_context(struct ibv_context *context)
{
	SoftContext *ctx = to_sctx(context);
	stop_thread(ctx);
	if (ctx->roce)
		roce_close(ctx);
	pthread_mutex_lock(&g_ctx_lock);
	for (SoftContext **p = &g_contexts; *p; p = &(*p)->next_ctx)
		if (*p == ctx) {
			*p = ctx->next_ctx;
			break;
		}
	bool last = !g_contexts;
	pthread_mutex_unlock(&g_ctx_lock);
	if (last)
		share_caches_close();
	if (ctx->seg)
		segment_detach(ctx->seg);
	ctx->seg = nullptr;
	if (ctx->async_wr >= 0)
		close(ctx->async_wr);
	while (SoftPd *pd = ctx->dead_pds) {
		ctx->dead_pds = pd->next_dead;
		free(pd);
	}
	while (SoftTd *td = ctx->dead_tds) {
		ctx->dead_tds = td->next_dead;
		delete td;
	}
	pthread_mutex_destroy(&ctx->lock);
	pthread_mutex_destroy(&ctx->wake_lock);
	pthread_cond_destroy(&ctx->wake);
	verbs_uninit_context(&ctx->vctx);
	ctx->~SoftContext();
	free(ctx);
}

static const struct verbs_context_ops soft_ops = [] {
	struct verbs_context_ops o = {};
	o.alloc_mw = soft_alloc_mw;
	o.alloc_parent_domain = soft_alloc_parent_domain;
	o.alloc_pd = soft_alloc_pd;
	o.alloc_td = soft_alloc_td;
	o.async_event = soft_async_event;
	o.attach_mcast = soft_attach_mcast;
	o.bind_mw = soft_bind_mw;
	o.close_xrcd = soft_close_xrcd;
	o.cq_event = soft_cq_event;
	o.create_ah = soft_create_ah;
	o.create_cq = soft_create_cq;
	o.create_cq_ex = soft_create_cq_ex;
	o.create_qp = soft_create_qp;
	o.create_qp_ex = soft_create_qp_ex;
	o.create_srq = soft_create_srq;
	o.create_srq_ex = soft_create_srq_ex;
	o.dealloc_mw = soft_dealloc_mw;
	o.dealloc_pd = soft_dealloc_pd;
	o.dealloc_td = soft_dealloc_td;
	o.dereg_mr = soft_dereg_mr;
	o.destroy_ah = soft_destroy_ah;
	o.destroy_cq = soft_destroy_cq;
	o.destroy_qp = soft_destroy_qp;
	o.destroy_srq = soft_destroy_srq;
	o.detach_mcast = soft_detach_mcast;
	o.free_context = soft_free_context;
	o.get_srq_num = soft_get_srq_num;
	o.import_mr = soft_import_mr;
	o.import_pd = soft_import_pd;
	o.modify_qp = soft_modify_qp;
	o.modify_srq = soft_modify_srq;
	o.open_qp = soft_open_qp;
	o.open_xrcd = soft_open_xrcd;
	o.poll_cq = soft_poll_cq;
	o.post_recv = soft_post_recv;
	o.post_send = soft_post_send;
	o.post_srq_recv = soft_post_srq_recv;
	o.query_device_ex = soft_query_device_ex;
	o.advise_mr = soft_advise_mr;
	o.alloc_dm = soft_alloc_dm;
	o.free_dm = soft_free_dm;
	o.import_dm = soft_import_dm;
	o.unimport_dm = soft_unimport_dm;
	o.reg_dm_mr = soft_reg_dm_mr;
	o.query_port = soft_query_port;
#if _OPENVERBS_ABI >= 64
	o.alloc_dmah = soft_alloc_dmah;
	o.dealloc_dmah = soft_dealloc_dmah;
	o.reg_mr_ex = soft_reg_mr_ex;
#endif
#if _OPENVERBS_ABI >= 64
	o.query_port_speed = soft_query_port_speed;
#endif
	o.query_qp = soft_query_qp;
	o.query_srq = soft_query_srq;
	o.reg_mr = soft_reg_mr;
	o.req_notify_cq = soft_req_notify_cq;
	o.rereg_mr = soft_rereg_mr;
	o.resize_cq = soft_resize_cq;
	o.unimport_mr = soft_unimport_mr;
	o.unimport_pd = soft_unimport_pd;
	return o;
}();

const struct verbs_context_ops &soft_context_ops() { return soft_ops; }

// ibv_context.cmd_fd of a software device's context. There is no kernel
// file, but programs duplicate cmd_fd and hand it to ibv_import_device(3)
// (in the same process or, over a UNIX socket, in another one) to share the
// context's PDs and MRs. A memfd named after the device stands in: its name
// (/proc/self/fd/N reads "/memfd:openverbs-soft<index> (deleted)") tells
// which device it belongs to. Nothing is ever written to it. -1 when no
// memfd can be made (the context then has no cmd_fd, as before).
static int make_cmd_fd(int index)
{
	char name[32];
	snprintf(name, sizeof(name), "openverbs-soft%d", index);
	return sys_memfd_create(name, MFD_CLOEXEC);
}

// The index of the software device whose command fd `fd` is, or -1.
static int cmd_fd_index(int fd)
{
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		return -1;
	char path[64], link[128];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return -1;
	link[n] = 0;
	static const char kPrefix[] = "/memfd:openverbs-soft";
	if (strncmp(link, kPrefix, sizeof(kPrefix) - 1) != 0)
		return -1;
	const char *p = link + sizeof(kPrefix) - 1;
	char *end = nullptr;
	long index = strtol(p, &end, 10);
	if (end == p || *p == '-' || *p == '+' || strcmp(end, " (deleted)") != 0 || index < 0 ||
	    index >= long(OPENVERBS_MAX_SOFT_DEVICES))
		return -1;
	return int(index);
}

static struct verbs_context *soft_alloc_context(struct ibv_device *ibdev, int cmd_fd,
						void *private_data)
{
	auto *sdev = reinterpret_cast<SoftDevice *>(verbs_get_device(ibdev));
	if (cmd_fd < 0)
		cmd_fd = make_cmd_fd(sdev->index);
	SoftContext *ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, vctx,
							OPENVERBS_DRIVER_SOFT);
	if (!ctx)
		return nullptr;
	// The allocation is zeroed; construct the C++ members in place.
	new (&ctx->stop) std::atomic<bool>(false);
	ctx->index = sdev->index;
	ctx->async_wr = -1;
	pthread_mutex_init(&ctx->lock, nullptr);
	pthread_mutex_init(&ctx->wake_lock, nullptr);
	pthread_cond_init(&ctx->wake, nullptr);
	char roce_seg[64];
	int rc = sdev->roce_if[0] ? roce_segment_name(sdev, roce_seg, sizeof(roce_seg)) : 0;
	if (!rc)
		rc = segment_attach(sdev->index, &ctx->seg, sdev->roce_if[0] ? roce_seg : nullptr);
	int p[2] = {-1, -1};
	if (!rc && pipe2(p, O_CLOEXEC) != 0)
		rc = errno;
	if (!rc && sdev->roce_if[0] && (rc = roce_open(ctx, sdev)) != 0) {
		close(p[0]);
		close(p[1]);
	}
	if (rc) {
		if (!sdev->roce_if[0])
			softlog(1, "soft%d: cannot open the device: %s", sdev->index, strerror(rc));
		if (ctx->seg)
			segment_detach(ctx->seg);
		pthread_mutex_destroy(&ctx->lock);
		pthread_mutex_destroy(&ctx->wake_lock);
		pthread_cond_destroy(&ctx->wake);
		verbs_uninit_context(&ctx->vctx);
		free(ctx);
		errno = rc;
		return nullptr;
	}
	ctx->vctx.context.async_fd = p[0];
	ctx->async_wr = p[1];
	ctx->async_ino = fd_ino(p[0]);
	ctx->vctx.context.num_comp_vectors = 1;
	verbs_set_ops(&ctx->vctx, &soft_ops);
	if (ctx->roce)
		verbs_set_ops(&ctx->vctx, &roce_context_ops());
	// The port is ACTIVE from the start and never changes state, so no port
	// event is ever queued (an HCA reports port events on changes only; the
	// first event a program reads is one its own work caused).
	pthread_mutex_lock(&g_ctx_lock);
	ctx->next_ctx = g_contexts;
	g_contexts = ctx;
	pthread_mutex_unlock(&g_ctx_lock);
	return &ctx->vctx;
}

// ibv_import_device(3) for a software device's command fd (see
// make_cmd_fd): a new context of the same device, owning cmd_fd. Objects are
// device-wide (the shared segment), so the original context's PDs and MRs
// can then be imported by handle (soft_import_pd, soft_import_mr), in this
// process or another one of the same user. NULL with errno: ENODEV when
// cmd_fd is not this device's (the library then asks the next device; the
// fd stays open), else as ibv_open_device (cmd_fd closed).
static struct verbs_context *soft_import_context(struct ibv_device *ibdev, int cmd_fd)
{
	auto *sdev = reinterpret_cast<SoftDevice *>(verbs_get_device(ibdev));
	if (cmd_fd_index(cmd_fd) != sdev->index) {
		errno = ENODEV;
		return nullptr;
	}
	return soft_alloc_context(ibdev, cmd_fd, nullptr);
}

static struct verbs_device *soft_alloc_device(struct verbs_sysfs_dev *sysfs_dev)
{
	if (sysfs_dev->flags & VSYSFS_SOFT_ROCE)
		return roce_alloc_device(sysfs_dev);
	int index = -1;
	const char *name = sysfs_dev->ibdev_name;
	if (strncmp(name, OPENVERBS_SOFT_NAME, strlen(OPENVERBS_SOFT_NAME)) == 0) {
		char *end;
		long v = strtol(name + strlen(OPENVERBS_SOFT_NAME), &end, 10);
		if (*end == 0 && end != name + strlen(OPENVERBS_SOFT_NAME) && v >= 0 &&
		    v < OPENVERBS_MAX_SOFT_DEVICES)
			index = int(v);
	}
	if (index < 0) {
		softlog(2, "%s is not a software device name (soft0..soft%d)", name,
			OPENVERBS_MAX_SOFT_DEVICES - 1);
		errno = EINVAL;
		return nullptr;
	}
	auto *dev = static_cast<SoftDevice *>(calloc(1, sizeof(SoftDevice)));
	if (!dev) {
		errno = ENOMEM;
		return nullptr;
	}
	dev->index = index;
	return &dev->vdev;
}

static void soft_uninit_device(struct verbs_device *vdev)
{
	free(reinterpret_cast<SoftDevice *>(vdev));
}

static const struct verbs_match_ent soft_match_table[] = {
	{.driver_data = const_cast<openverbs_soft_hooks *>(&openverbs_soft_hooks_v1),
	 .u = {.driver_id = OPENVERBS_DRIVER_SOFT},
	 .vendor = 0,
	 .device = 0,
	 .kind = VERBS_MATCH_DRIVER_ID},
	VERBS_NAME_MATCH(OPENVERBS_SOFT_NAME, &openverbs_soft_hooks_v1),
	VERBS_MATCH_SENTINEL(),
};

static bool soft_match_device(struct verbs_sysfs_dev *sysfs_dev)
{
	// Only the core's synthesised entries: never a kernel device that
	// happens to be called "soft...".
	return (sysfs_dev->flags & VSYSFS_SOFT) != 0;
}

} // namespace ovsoft

extern "C" {
extern const struct verbs_device_ops soft_dev_ops;
const struct verbs_device_ops soft_dev_ops = {
	.name = "soft",
	.match_min_abi_version = 0,
	.match_max_abi_version = 0xffffffffu,
	.match_table = ovsoft::soft_match_table,
	.static_providers = nullptr,
	.match_device = ovsoft::soft_match_device,
	.alloc_context = ovsoft::soft_alloc_context,
	.import_context = ovsoft::soft_import_context,
	.alloc_device = ovsoft::soft_alloc_device,
	.uninit_device = ovsoft::soft_uninit_device,
};
__attribute__((visibility("default"))) PROVIDER_DRIVER(soft, soft_dev_ops)
}
