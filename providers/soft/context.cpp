// openverbs software RDMA device: the device and its contexts.
//
// Behaviour follows the rdma-core 44 man pages (ibv_query_device(3),
// ibv_modify_qp(3), ibv_create_qp_ex(3), ibv_open_xrcd(3), ...) and the
// InfiniBand QP state machine; the data path is the engine (engine.h).
//
// This file: logging, device open and close (context list, operations
// table, command fds), device queries and the core's hooks, and the
// progress thread with its watchdog. The objects are in their own files
// (objects.h).
#include "objects.h"

#include <strings.h>
#include <sys/syscall.h>

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

uint32_t fd_ino(int fd)
{
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0)
		return 0;
	return uint32_t(st.st_ino);
}

// ------------------------------------------------------------------ contexts list

static pthread_mutex_t g_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static SoftContext *g_contexts;

// fork(): the child starts with the context list's lock free, whichever
// thread of the parent held it, so its exit handler (soft_exit) never waits
// for a thread it does not have (shm.cpp does the same for the attachments'
// lock). The forking thread does not hold the lock across the fork:
// librdmacm's fork handler, which runs after this one's prepare, takes its
// device lock, which it holds while it opens a device (ThreadSanitizer: a
// possible deadlock). Each change of the list is one store, so the child
// sees it whole. An inherited context's progress thread stays marked
// started: a child that uses the context starts none (ThreadSanitizer cannot
// follow a thread started in a child of a threaded process), and glibc marks
// the parent's threads ended in the child, so the exit handler's join returns.
static void contexts_atfork_child()
{
	pthread_mutex_init(&g_ctx_lock, nullptr);
}

__attribute__((constructor)) static void contexts_init()
{
	pthread_atfork(nullptr, nullptr, contexts_atfork_child);
}

static void stop_thread(SoftContext *ctx)
{
	if (!ctx->thread_started)
		return;
	ctx->stop.store(true);
	wake_progress(ctx);
	pthread_join(ctx->thread, nullptr);
	ctx->thread_started = false;
}

__attribute__((destructor)) static void soft_exit()
{
	// The process leaves without closing every device: give the shared
	// state back so that nothing stays behind in /dev/shm.
	pthread_mutex_lock(&g_ctx_lock);
	// Every transport first (a receive thread shared by contexts of one
	// RoCE device writes into each one's segment), then the segments.
	for (SoftContext *c = g_contexts; c; c = c->next_ctx) {
		stop_thread(c);
		if (c->roce)
			roce_close(c);
	}
	for (SoftContext *c = g_contexts; c; c = c->next_ctx) {
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

// A QP that another process (or the context's own data path, after a
// failed request) moved to the error state is flushed here. A peer process
// that is gone is no error of this QP by itself: as an HCA's RC QP stays in
// its state when its idle peer disappears, the requests that need the peer
// end with IBV_WC_RETRY_EXC_ERR after the QP's timeout and retry count
// (exec_wr: a responder that is gone never acknowledges), and receives
// stay posted. Flushing them at once turned a peer's normal exit into
// an error: ibv_rc_pingpong's client polled its last receive together with
// a flushed one after its server had exited.
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
		if (e.state.load() == IBV_QPS_ERR && !qp->flushed) {
			qp_sq_lock(qp);
			// Looked at again under the guard: meanwhile the application
			// may have reset the QP (and brought it up again).
			if (!qp->flushed && e.state.load() == IBV_QPS_ERR)
				qp_to_error(qp, e.remote_error.load() != 0);
			qp_sq_unlock(qp);
		}
	}
}

static void *progress_main(void *arg)
{
	auto *ctx = static_cast<SoftContext *>(arg);
	uint64_t last_watch = 0, last_reap = now_ns();
	while (!ctx->stop.load()) {
		// A wake-up that comes while this pass runs is not lost: the
		// wait below does not start when one came.
		pthread_mutex_lock(&ctx->wake_lock);
		uint64_t wakes = ctx->wakes;
		pthread_mutex_unlock(&ctx->wake_lock);
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
		// Without QPs there is nothing to watch: the next look is the
		// segment's reaping (every 2 s), not 50 wake-ups a second for an
		// idle process (a server between its connections); the next QP
		// wakes the thread (qp_link).
		ctx->long_sleep = !ctx->qps;
		if (!ctx->qps)
			next_due = std::max(last_reap + 2000000000ull, now + 20000000ull);
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
		if (!ctx->stop.load() && ctx->wakes == wakes)
			pthread_cond_timedwait(&ctx->wake, &ctx->wake_lock, &ts);
		pthread_mutex_unlock(&ctx->wake_lock);
	}
	return nullptr;
}

void ensure_thread(SoftContext *ctx)
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
	a.device_cap_flags_ex |= kDeviceAtomicWrite;
	a.phys_port_cnt_ex = 1;
	odp_caps(a);
	a.max_dm_size = kMaxDmSize;
	// Tag matching on RC QPs (TM SRQs: srq.cpp, responder.cpp).
	a.tm_caps.max_rndv_hdr_size = kTmMaxRndvHdr;
	a.tm_caps.max_num_tags = kTmMaxTags;
	a.tm_caps.flags = IBV_TM_CAP_RC;
	a.tm_caps.max_ops = kTmMaxOps;
	a.tm_caps.max_sge = kTmMaxSge;
	a.completion_timestamp_mask = ~uint64_t(0);
	a.hca_core_clock = kDeviceClockKhz;
	if (ctx->eth)
		raw_caps(a);
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
	if (ctx->eth) {
		// An Ethernet port: RoCE v2 addressing by GID, no subnet manager,
		// no LID (the kernel reports a RoCE port the same way).
		attr->link_layer = IBV_LINK_LAYER_ETHERNET;
		attr->lid = 0;
		attr->sm_lid = 0;
		attr->subnet_timeout = 0;
		attr->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
	}
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
	if (uint32_t(index) >= kGidPopulated) {
		memset(gid->raw, 0, sizeof(gid->raw)); // an empty entry
		return 0;
	}
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
	if (index >= kGidPopulated)
		return ENODATA; // an empty entry
	memset(entry, 0, sizeof(*entry));
	hook_query_gid(context, 1, int(index), &entry->gid);
	entry->gid_index = index;
	entry->port_num = port;
	entry->gid_type = to_sctx(context)->eth ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_IB;
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
	o.post_srq_ops = soft_post_srq_ops;
	o.query_device_ex = soft_query_device_ex;
	o.create_flow = soft_create_flow;
	o.destroy_flow = soft_destroy_flow;
	o.create_wq = soft_create_wq;
	o.modify_wq = soft_modify_wq;
	o.destroy_wq = soft_destroy_wq;
	o.create_rwq_ind_table = soft_create_rwq_ind_table;
	o.destroy_rwq_ind_table = soft_destroy_rwq_ind_table;
	o.advise_mr = soft_advise_mr;
	o.query_rt_values = soft_query_rt_values;
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
// which device it belongs to: soft<N> has index N, sroce<N> kRoceIndexBase + N. Nothing is ever written to it. -1 when no
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
	    index >= long(kRoceIndexBase + OPENVERBS_MAX_SOFT_DEVICES))
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
	ctx->eth = sdev->eth && !sdev->roce_if[0];
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
	// RDMAV_SOFT_LINK_LAYER=ethernet: every soft device's port is an
	// Ethernet port (openverbs-soft(7), "Ethernet link layer").
	const char *ll = secure_getenv("RDMAV_SOFT_LINK_LAYER");
	if (ll && !strcasecmp(ll, "ethernet"))
		dev->eth = true;
	else if (ll && *ll && strcasecmp(ll, "infiniband"))
		softlog(1, "RDMAV_SOFT_LINK_LAYER=%s: not ethernet or infiniband, ignored", ll);
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
