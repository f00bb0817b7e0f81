// Object layouts of the libibverbs 1.0 ABI (what binaries bound to the
// `@IBVERBS_1.0` symbols were compiled against). Each 1.0 object ends with a
// pointer to the current object it wraps. Offsets and sizes are rdma-core
// 44's (ABI dump, x86_64) and checked below.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <pthread.h>

extern "C" {

struct ibv_context_1_0;
struct ibv_cq_1_0;
struct ibv_srq_1_0;
struct ibv_qp_1_0;
struct ibv_ah_1_0;

struct ibv_device_1_0 {
	void *obsolete_sysfs_dev;
	void *obsolete_sysfs_ibdev;
	struct ibv_device *real_device;
	struct _ibv_device_ops _ops;
};

struct ibv_pd_1_0 {
	struct ibv_context_1_0 *context;
	uint32_t handle;
	struct ibv_pd *real_pd;
};

struct ibv_mr_1_0 {
	struct ibv_context_1_0 *context;
	struct ibv_pd_1_0 *pd;
	uint32_t handle;
	uint32_t lkey;
	uint32_t rkey;
	struct ibv_mr *real_mr;
};

struct ibv_srq_1_0 {
	struct ibv_context_1_0 *context;
	void *srq_context;
	struct ibv_pd_1_0 *pd;
	uint32_t handle;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t events_completed;
	struct ibv_srq *real_srq;
};

struct ibv_qp_init_attr_1_0 {
	void *qp_context;
	struct ibv_cq_1_0 *send_cq;
	struct ibv_cq_1_0 *recv_cq;
	struct ibv_srq_1_0 *srq;
	struct ibv_qp_cap cap;
	enum ibv_qp_type qp_type;
	int sq_sig_all;
};

struct ibv_send_wr_1_0 {
	struct ibv_send_wr_1_0 *next;
	uint64_t wr_id;
	struct ibv_sge *sg_list;
	int num_sge;
	enum ibv_wr_opcode opcode;
	int send_flags;
	__be32 imm_data;
	union {
		struct {
			uint64_t remote_addr;
			uint32_t rkey;
		} rdma;
		struct {
			uint64_t remote_addr;
			uint64_t compare_add;
			uint64_t swap;
			uint32_t rkey;
		} atomic;
		struct {
			struct ibv_ah_1_0 *ah;
			uint32_t remote_qpn;
			uint32_t remote_qkey;
		} ud;
	} wr;
};

struct ibv_recv_wr_1_0 {
	struct ibv_recv_wr_1_0 *next;
	uint64_t wr_id;
	struct ibv_sge *sg_list;
	int num_sge;
};

struct ibv_qp_1_0 {
	struct ibv_context_1_0 *context;
	void *qp_context;
	struct ibv_pd_1_0 *pd;
	struct ibv_cq_1_0 *send_cq;
	struct ibv_cq_1_0 *recv_cq;
	struct ibv_srq_1_0 *srq;
	uint32_t handle;
	uint32_t qp_num;
	enum ibv_qp_state state;
	enum ibv_qp_type qp_type;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t events_completed;
	struct ibv_qp *real_qp;
};

struct ibv_cq_1_0 {
	struct ibv_context_1_0 *context;
	void *cq_context;
	uint32_t handle;
	int cqe;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t comp_events_completed;
	uint32_t async_events_completed;
	struct ibv_cq *real_cq;
};

struct ibv_ah_1_0 {
	struct ibv_context_1_0 *context;
	struct ibv_pd_1_0 *pd;
	uint32_t handle;
	struct ibv_ah *real_ah;
};

// The 1.0 dispatch table: only the data-path slots are filled.
struct ibv_context_ops_1_0 {
	int (*query_device)(struct ibv_context *, struct ibv_device_attr *);
	int (*query_port)(struct ibv_context *, uint8_t, struct ibv_port_attr *);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	int (*dealloc_pd)(struct ibv_pd *);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
	int (*dereg_mr)(struct ibv_mr *);
	struct ibv_cq *(*create_cq)(struct ibv_context *, int, struct ibv_comp_channel *, int);
	int (*poll_cq)(struct ibv_cq_1_0 *, int, struct ibv_wc *);
	int (*req_notify_cq)(struct ibv_cq_1_0 *, int);
	void (*cq_event)(struct ibv_cq *);
	int (*resize_cq)(struct ibv_cq *, int);
	int (*destroy_cq)(struct ibv_cq *);
	struct ibv_srq *(*create_srq)(struct ibv_pd *, struct ibv_srq_init_attr *);
	int (*modify_srq)(struct ibv_srq *, struct ibv_srq_attr *, int);
	int (*query_srq)(struct ibv_srq *, struct ibv_srq_attr *);
	int (*destroy_srq)(struct ibv_srq *);
	int (*post_srq_recv)(struct ibv_srq_1_0 *, struct ibv_recv_wr_1_0 *,
			     struct ibv_recv_wr_1_0 **);
	struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
	int (*query_qp)(struct ibv_qp *, struct ibv_qp_attr *, int, struct ibv_qp_init_attr *);
	int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
	int (*destroy_qp)(struct ibv_qp *);
	int (*post_send)(struct ibv_qp_1_0 *, struct ibv_send_wr_1_0 *, struct ibv_send_wr_1_0 **);
	int (*post_recv)(struct ibv_qp_1_0 *, struct ibv_recv_wr_1_0 *, struct ibv_recv_wr_1_0 **);
	struct ibv_ah *(*create_ah)(struct ibv_pd *, struct ibv_ah_attr *);
	int (*destroy_ah)(struct ibv_ah *);
	int (*attach_mcast)(struct ibv_qp *, union ibv_gid *, uint16_t);
	int (*detach_mcast)(struct ibv_qp *, union ibv_gid *, uint16_t);
};

struct ibv_context_1_0 {
	struct ibv_device_1_0 *device;
	struct ibv_context_ops_1_0 ops;
	int cmd_fd;
	int async_fd;
	int num_comp_vectors;
	struct ibv_context *real_context;
};

} // extern "C"

// Layouts of rdma-core 44 (ABI dump, x86_64).
static_assert(sizeof(ibv_device_1_0) == 40 && offsetof(ibv_device_1_0, real_device) == 16);
static_assert(sizeof(ibv_pd_1_0) == 24 && offsetof(ibv_pd_1_0, real_pd) == 16);
static_assert(sizeof(ibv_mr_1_0) == 40 && offsetof(ibv_mr_1_0, real_mr) == 32);
static_assert(sizeof(ibv_srq_1_0) == 136 && offsetof(ibv_srq_1_0, events_completed) == 120 &&
	      offsetof(ibv_srq_1_0, real_srq) == 128);
static_assert(sizeof(ibv_qp_init_attr_1_0) == 64 && offsetof(ibv_qp_init_attr_1_0, qp_type) == 52);
static_assert(sizeof(ibv_send_wr_1_0) == 72 && offsetof(ibv_send_wr_1_0, wr) == 40);
static_assert(sizeof(ibv_recv_wr_1_0) == 32);
static_assert(sizeof(ibv_qp_1_0) == 168 && offsetof(ibv_qp_1_0, events_completed) == 152 &&
	      offsetof(ibv_qp_1_0, real_qp) == 160);
static_assert(sizeof(ibv_cq_1_0) == 128 && offsetof(ibv_cq_1_0, comp_events_completed) == 112 &&
	      offsetof(ibv_cq_1_0, real_cq) == 120);
static_assert(sizeof(ibv_ah_1_0) == 32 && offsetof(ibv_ah_1_0, real_ah) == 24);
static_assert(sizeof(ibv_context_ops_1_0) == 216 && offsetof(ibv_context_ops_1_0, post_recv) == 176);
static_assert(sizeof(ibv_context_1_0) == 248 && offsetof(ibv_context_1_0, cmd_fd) == 224 &&
	      offsetof(ibv_context_1_0, real_context) == 240);
