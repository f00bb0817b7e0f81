// The verbs logic of libibverbs (namespace ov::verbs): what every public verb
// does between the facade's argument checks and the provider's op.
//
// Conventions: the facade (src/facade/verbs_*.cpp) has already rejected NULL
// objects, so these functions assume their object arguments are valid. They
// follow the calling convention of the verb they implement (errno value,
// -1 with errno, or NULL with errno) and never throw.
#pragma once

#include <infiniband/driver.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#include <cstddef>
#include <cstdint>
#include <sys/types.h>

namespace ov::verbs {

// ---- queries (query.cpp) --------------------------------------------------
int query_device(struct ibv_context *ctx, struct ibv_device_attr *attr) noexcept;
int query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr,
	       size_t attr_len) noexcept;
int query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid) noexcept;
int query_pkey(struct ibv_context *ctx, uint8_t port, int index, __be16 *pkey) noexcept;
int get_pkey_index(struct ibv_context *ctx, uint8_t port, __be16 pkey) noexcept;
// 0 or errno; fallback_mask selects the VERBS_QUERY_GID_ATTR_* fields the
// sysfs fallback fills.
int query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
		 struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size,
		 uint32_t fallback_mask) noexcept;
ssize_t query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries,
			size_t max_entries, uint32_t flags, size_t entry_size) noexcept;
int query_gid_type(struct ibv_context *ctx, uint8_t port, unsigned int index,
		   enum ibv_gid_type_sysfs *type) noexcept;
// Index of gid with the given sysfs type on port, or -1 with errno.
int find_gid_index(struct ibv_context *ctx, uint8_t port, const union ibv_gid *gid,
		   enum ibv_gid_type_sysfs type) noexcept;
// Reads <ibdev_path>/<rel> (NUL terminated, trailing newline dropped);
// length or -1 with errno.
int read_ibdev_file(struct ibv_device *dev, char *buf, size_t size, const char *fmt, ...) noexcept
	__attribute__((format(printf, 4, 5)));

// ---- objects (objects.cpp) -------------------------------------------------
struct ibv_pd *alloc_pd(struct ibv_context *ctx) noexcept;
int dealloc_pd(struct ibv_pd *pd) noexcept;
struct ibv_mr *reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
			    unsigned int access) noexcept;
struct ibv_mr *reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova,
			     int fd, int access) noexcept;
int rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length,
	     int access) noexcept;
int dereg_mr(struct ibv_mr *mr) noexcept;
struct ibv_pd *import_pd(struct ibv_context *ctx, uint32_t handle) noexcept;
void unimport_pd(struct ibv_pd *pd) noexcept;
struct ibv_mr *import_mr(struct ibv_pd *pd, uint32_t handle) noexcept;
void unimport_mr(struct ibv_mr *mr) noexcept;
struct ibv_dm *import_dm(struct ibv_context *ctx, uint32_t handle) noexcept;
void unimport_dm(struct ibv_dm *dm) noexcept;

struct ibv_comp_channel *create_comp_channel(struct ibv_context *ctx) noexcept;
int destroy_comp_channel(struct ibv_comp_channel *channel) noexcept;
void init_cq(struct ibv_cq *cq, struct ibv_context *ctx, struct ibv_comp_channel *channel,
	     void *cq_context) noexcept;
struct ibv_cq *create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
			 struct ibv_comp_channel *channel, int comp_vector) noexcept;
int resize_cq(struct ibv_cq *cq, int cqe) noexcept;
int destroy_cq(struct ibv_cq *cq) noexcept;
int get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context) noexcept;
void ack_cq_events(struct ibv_cq *cq, unsigned int nevents) noexcept;

struct ibv_srq *create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr) noexcept;
int modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask) noexcept;
int query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr) noexcept;
int destroy_srq(struct ibv_srq *srq) noexcept;

struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr) noexcept;
int query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
	     struct ibv_qp_init_attr *init_attr) noexcept;
int modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask) noexcept;
int destroy_qp(struct ibv_qp *qp) noexcept;
struct ibv_qp_ex *qp_to_qp_ex(struct ibv_qp *qp) noexcept;
int query_ece(struct ibv_qp *qp, struct ibv_ece *ece) noexcept;
int set_ece(struct ibv_qp *qp, struct ibv_ece *ece) noexcept;
int query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags) noexcept;

struct ibv_ah *create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr) noexcept;
int destroy_ah(struct ibv_ah *ah) noexcept;
int attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid) noexcept;
int detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid) noexcept;

// ---- address handles from completions (ah.cpp) ----------------------------
int init_ah_from_wc(struct ibv_context *ctx, uint8_t port, struct ibv_wc *wc,
		    struct ibv_grh *grh, struct ibv_ah_attr *ah_attr) noexcept;
int resolve_eth_l2_from_gid(struct ibv_context *ctx, struct ibv_ah_attr *attr,
			    uint8_t eth_mac[6], uint16_t *vid) noexcept;

#if _OPENVERBS_ABI >= 64
// ---- rdma-core 64: extended registration and buffers (mr_ex.cpp) ------------
// ibv_reg_mr_ex(3): resolves IBV_REG_MR_MASK_BUF, protects pinned memory
// across fork(), calls the provider's reg_mr_ex and fills the MR's common
// fields; NULL with errno. `in` is not modified.
struct ibv_mr *reg_mr_ex(struct ibv_pd *pd, const struct ibv_mr_init_attr *in) noexcept;
struct ibv_mr *reg_buf_mr(struct ibv_pd *pd, struct ibv_buf *buf, void *addr, size_t length,
			  int access) noexcept;
// The default ops of a provider without its own (dummy_ops): page-aligned
// memory for alloc_buf, and reg_mr_ex translated to reg_mr / reg_dmabuf_mr
// (EOPNOTSUPP for what those cannot express, EINVAL for a bad mask).
void *default_alloc_buf(struct ibv_pd *pd, size_t size, struct ibv_buf **buf) noexcept;
void default_free_buf(struct ibv_buf *buf) noexcept;
struct ibv_mr *default_reg_mr_ex(struct ibv_pd *pd, struct ibv_mr_init_attr *attr) noexcept;

#endif
// ---- fork protection (fork.cpp) -------------------------------------------
int fork_init() noexcept;
enum ibv_fork_status fork_status() noexcept;
int dontfork_range(void *base, size_t size) noexcept;
int dofork_range(void *base, size_t size) noexcept;
// Whether the kernel reports copy-on-fork for pinned pages (netlink
// RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK), read once and cached.
bool kernel_copy_on_fork() noexcept;
// For tests: number of tracked ranges and the refcount covering addr.
size_t fork_range_count() noexcept;
int fork_refcount_at(uintptr_t addr) noexcept;
// For tests: forget all state (as if ibv_fork_init had never run).
void fork_reset_for_tests() noexcept;

// ---- strings and rates (strings.cpp) --------------------------------------
const char *node_type_str(enum ibv_node_type type) noexcept;
const char *port_state_str(enum ibv_port_state state) noexcept;
const char *event_type_str(enum ibv_event_type event) noexcept;
const char *wc_status_str(enum ibv_wc_status status) noexcept;
#if _OPENVERBS_ABI >= 56
// ibv_wr_opcode_str(3) (rdma-core 56): never NULL, "unknown" for no opcode.
const char *wr_opcode_str(enum ibv_wr_opcode opcode) noexcept;
#endif
int rate_to_mult(enum ibv_rate rate) noexcept;
enum ibv_rate mult_to_rate(int mult) noexcept;
int rate_to_mbps(enum ibv_rate rate) noexcept;
enum ibv_rate mbps_to_rate(int mbps) noexcept;

// ---- marshalling (marshall.cpp) -------------------------------------------
void copy_ah_attr_from_kern(struct ibv_ah_attr *dst, const struct ib_uverbs_ah_attr *src) noexcept;
void copy_qp_attr_from_kern(struct ibv_qp_attr *dst, const struct ib_uverbs_qp_attr *src) noexcept;
void copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, const struct ib_user_path_rec *src) noexcept;
void copy_path_rec_to_kern(struct ib_user_path_rec *dst, const struct ibv_sa_path_rec *src) noexcept;

// ---- async events -----------------------------------------------------------
// Which member of ibv_async_event.element an event type fills
// (ibv_get_async_event(3)): the affiliated CQ, QP, SRQ or WQ, else the port
// number (port and device events).
enum class EventElement { Cq, Qp, Srq, Wq, Port };
constexpr EventElement event_element(enum ibv_event_type type) noexcept
{
	switch (type) {
	case IBV_EVENT_CQ_ERR:
		return EventElement::Cq;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return EventElement::Qp;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		return EventElement::Srq;
	case IBV_EVENT_WQ_FATAL:
		return EventElement::Wq;
	default:
		return EventElement::Port;
	}
}

} // namespace ov::verbs
