// openverbs software RDMA device: what the control-path verbs' files share
// (internal).
//
// The verbs are split by object, as Linux's rxe is: context.cpp (device
// open and close, queries, the progress thread and its watchdog, the
// operations table), pd.cpp (PD, TD, parent domain), mr.cpp (memory keys,
// registration and its shareable backing, DMA handles), mw.cpp, cq.cpp,
// srq.cpp, xrc.cpp, qp.cpp (with the QP state machine) and ah.cpp (address
// handles and multicast). The data path is the engine (engine.h).
#pragma once

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
#include <sys/stat.h>
#include <unistd.h>

namespace ovsoft {

// The cells of a shared ring (receive queue, SRQ, CQ) for `depth` entries:
// a power of two, at least 2. A cell's sequence reads pos when free for
// position pos and pos + 1 once published; with one cell the free mark of
// the next lap is the published mark of this one, so a second entry would
// overwrite one not yet taken. Queues report this depth (the verbs allow
// more than was asked).
static inline uint32_t ring_capacity(uint32_t depth)
{
	uint32_t p = 2;
	while (p < depth)
		p <<= 1;
	return p;
}

// getpid() cached (dma.cpp: refreshed in a child after fork()): object
// creation records its owner without a system call.
extern int32_t g_pid;
static inline int32_t self_pid() { return g_pid; }

// The inode of open file fd, 0 when unknown.
uint32_t fd_ino(int fd);
// Starts ctx's progress thread (retries, the watchdog) if it is not running.
void ensure_thread(SoftContext *ctx);

// pd.cpp
struct ibv_pd *soft_alloc_pd(struct ibv_context *context);
struct ibv_pd *soft_import_pd(struct ibv_context *context, uint32_t handle);
void soft_unimport_pd(struct ibv_pd *ibpd);
int soft_dealloc_pd(struct ibv_pd *ibpd);
struct ibv_td *soft_alloc_td(struct ibv_context *context, struct ibv_td_init_attr *attr);
int soft_dealloc_td(struct ibv_td *ibtd);
struct ibv_pd *soft_alloc_parent_domain(struct ibv_context *context,
					struct ibv_parent_domain_init_attr *attr);

// mr.cpp
int key_slot_alloc(Segment *seg);
void key_slot_free(Segment *seg, uint32_t slot); // slot freed (device lock held)
uint32_t make_key(Segment *seg, uint32_t slot);
uint64_t key_write_new(MrEntry &e, Segment *seg, uint32_t key, uint32_t pd_id,
		       uint32_t access, uint64_t addr, uint64_t iova, uint64_t length,
		       uint32_t mw_type);
// Inside a write section of e: no shareable backing (peers use process_vm_*).
void clear_backing(MrEntry &e);
void share_caches_close();
struct ibv_mr *soft_reg_mr(struct ibv_pd *ibpd, void *addr, size_t length, uint64_t hca_va,
			   int access);
struct ibv_mr *soft_import_mr(struct ibv_pd *ibpd, uint32_t handle);
void soft_unimport_mr(struct ibv_mr *ibmr);
struct ibv_dmah *soft_alloc_dmah(struct ibv_context *context, struct ibv_dmah_init_attr *attr);
int soft_dealloc_dmah(struct ibv_dmah *dmah);
struct ibv_mr *soft_reg_mr_ex(struct ibv_pd *pd, struct ibv_mr_init_attr *attr);
int soft_dereg_mr(struct verbs_mr *vmr);
int soft_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd, void *addr,
		  size_t length, int access);

// mw.cpp
struct ibv_mw *soft_alloc_mw(struct ibv_pd *ibpd, enum ibv_mw_type type);
int soft_dealloc_mw(struct ibv_mw *ibmw);
int soft_bind_mw(struct ibv_qp *ibqp, struct ibv_mw *ibmw, struct ibv_mw_bind *bind);

// cq.cpp
struct ibv_cq *soft_create_cq(struct ibv_context *context, int cqe,
			      struct ibv_comp_channel *channel, int comp_vector);
struct ibv_cq_ex *soft_create_cq_ex(struct ibv_context *context,
				    struct ibv_cq_init_attr_ex *attr);
int soft_destroy_cq(struct ibv_cq *ibcq);
int soft_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc);
int soft_req_notify_cq(struct ibv_cq *ibcq, int solicited_only);
void soft_cq_event(struct ibv_cq *);
int soft_resize_cq(struct ibv_cq *ibcq, int cqe);

// srq.cpp

// Size of a receive ring: `depth` WQEs (rounded up to a power of two) of
// `max_sge` scatter entries each.
struct RecvGeometry {
	uint32_t cap;
	uint32_t cell;
	uint64_t bytes() const { return sizeof(RingHeader) + uint64_t(cap) * cell; }
};

RecvGeometry recv_geometry(uint32_t depth, uint32_t max_sge);
int recv_ring_alloc(Segment *seg, const RecvGeometry &g, const QueueBuf &app,
		    uint64_t *off, RingHeader **ring, RingLoc *loc);
int post_recv_ring(RingHeader *ring, uint32_t max_sge, struct ibv_recv_wr *wr,
		   struct ibv_recv_wr **bad);
struct ibv_srq *soft_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
struct ibv_srq *soft_create_srq_ex(struct ibv_context *context,
				   struct ibv_srq_init_attr_ex *attr);
int soft_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask);
int soft_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr);
int soft_destroy_srq(struct ibv_srq *ibsrq);
int soft_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad);
int soft_get_srq_num(struct ibv_srq *ibsrq, uint32_t *num);
int soft_post_srq_ops(struct ibv_srq *ibsrq, struct ibv_ops_wr *op, struct ibv_ops_wr **bad);

// xrc.cpp
struct ibv_xrcd *soft_open_xrcd(struct ibv_context *context,
				struct ibv_xrcd_init_attr *attr);
int soft_close_xrcd(struct ibv_xrcd *ibx);

// qp.cpp
struct ibv_qp *soft_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
struct ibv_qp *soft_create_qp_ex(struct ibv_context *context,
				 struct ibv_qp_init_attr_ex *attr);
struct ibv_qp *soft_open_qp(struct ibv_context *context, struct ibv_qp_open_attr *attr);
int soft_destroy_qp(struct ibv_qp *ibqp);
int soft_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask);
int soft_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		  struct ibv_qp_init_attr *init);
int soft_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
// The receive-only raw packet QP behind an ibv_wq (raw.cpp).
struct ibv_qp *soft_create_wq_qp(SoftContext *ctx, struct ibv_qp_init_attr_ex *attr);

// ah.cpp
struct ibv_ah *soft_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int soft_destroy_ah(struct ibv_ah *ah);
int soft_attach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid);
int soft_detach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid);

} // namespace ovsoft
