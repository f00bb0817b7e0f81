/*
 * openverbs: the provider interface (rdma-core's private ABI, IBVERBS_PRIVATE_34).
 *
 * This header is for provider plugins (lib<name>-rdmav34.so), not for
 * applications. Every structure here is shared with providers compiled
 * against rdma-core 44, so sizes, member order and offsets are fixed; each
 * structure says which of its members providers rely on.
 *
 * A provider registers a `struct verbs_device_ops` from a constructor
 * (PROVIDER_DRIVER). The library matches devices found in sysfs/netlink
 * against the provider's match table, asks it to allocate a `verbs_device`,
 * and later a context (`alloc_context`), into which the provider installs its
 * `struct verbs_context_ops` with verbs_set_ops().
 */
#ifndef INFINIBAND_DRIVER_H
#define INFINIBAND_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <errno.h>
#include <sys/types.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <infiniband/kern-abi.h>
#include <infiniband/cmd_ioctl.h>

#ifdef __cplusplus
#include <atomic>
typedef std::atomic<int> verbs_atomic_int;
extern "C" {
#else
#include <stdatomic.h>
typedef atomic_int verbs_atomic_int;
#endif

/* ccan-style intrusive list node (two pointers), as rdma-core's providers see it. */
#ifndef CCAN_LIST_H
struct list_node {
	struct list_node *next, *prev;
};
#endif

struct verbs_device;

/* ---------------------------------------------------------------------------
 * Logging: providers print through the library's log (VERBS_LOG_LEVEL,
 * VERBS_LOG_FILE). Levels as VERBS_LOG_LEVEL values.
 */
enum {
	VERBS_LOG_LEVEL_NONE,
	VERBS_LOG_ERR,
	VERBS_LOG_WARN,
	VERBS_LOG_INFO,
	VERBS_LOG_DEBUG,
};

void __verbs_log(struct verbs_context *ctx, uint32_t level, const char *fmt,
		 ...) __attribute__((format(printf, 3, 4)));

#define verbs_log(ctx, level, format, ...)                                     \
	__verbs_log(ctx, level, "%s: %s:%d: " format, (ctx)->context.device->name, \
		    __func__, __LINE__, ##__VA_ARGS__)
#define verbs_debug(ctx, format, ...)                                          \
	verbs_log(ctx, VERBS_LOG_DEBUG, format, ##__VA_ARGS__)
#define verbs_info(ctx, format, ...)                                           \
	verbs_log(ctx, VERBS_LOG_INFO, format, ##__VA_ARGS__)
#define verbs_warn(ctx, format, ...)                                           \
	verbs_log(ctx, VERBS_LOG_WARN, format, ##__VA_ARGS__)
#define verbs_err(ctx, format, ...)                                            \
	verbs_log(ctx, VERBS_LOG_ERR, format, ##__VA_ARGS__)
#ifdef VERBS_DEBUG
#define verbs_log_datapath(ctx, level, format, ...)                            \
	verbs_log(ctx, level, format, ##__VA_ARGS__)
#else
#define verbs_log_datapath(ctx, level, format, ...)                            \
	do {                                                                   \
	} while (0)
#endif
#define verbs_debug_datapath(ctx, format, ...)                                 \
	verbs_log_datapath(ctx, VERBS_LOG_DEBUG, format, ##__VA_ARGS__)
#define verbs_info_datapath(ctx, format, ...)                                  \
	verbs_log_datapath(ctx, VERBS_LOG_INFO, format, ##__VA_ARGS__)
#define verbs_warn_datapath(ctx, format, ...)                                  \
	verbs_log_datapath(ctx, VERBS_LOG_WARN, format, ##__VA_ARGS__)
#define verbs_err_datapath(ctx, format, ...)                                   \
	verbs_log_datapath(ctx, VERBS_LOG_ERR, format, ##__VA_ARGS__)

/* ---------------------------------------------------------------------------
 * Provider-side object wrappers. Each embeds the public object first, so a
 * pointer to the public object converts to the wrapper.
 */

/* verbs_xrcd.comp_mask bits */
enum verbs_xrcd_mask {
	VERBS_XRCD_HANDLE = 1 << 0,
	VERBS_XRCD_RESERVED = 1 << 1,
};

/* 16 bytes: xrcd 0, comp_mask 8, handle 12. */
struct verbs_xrcd {
	struct ibv_xrcd xrcd;
	uint32_t comp_mask;
	uint32_t handle; /* kernel handle, valid with VERBS_XRCD_HANDLE */
};

/* 160 bytes: srq 0, srq_type 128, xrcd 136, cq 144, srq_num 152. */
struct verbs_srq {
	struct ibv_srq srq;
	enum ibv_srq_type srq_type;
	struct verbs_xrcd *xrcd;
	struct ibv_cq *cq;
	uint32_t srq_num; /* XRC SRQ number, filled at creation */
};

enum verbs_qp_mask {
	VERBS_QP_XRCD = 1 << 0,
	VERBS_QP_EX = 1 << 1,
};

enum ibv_gid_type_sysfs {
	IBV_GID_TYPE_SYSFS_IB_ROCE_V1,
	IBV_GID_TYPE_SYSFS_ROCE_V2,
};

enum verbs_query_gid_attr_mask {
	VERBS_QUERY_GID_ATTR_GID = 1 << 0,
	VERBS_QUERY_GID_ATTR_TYPE = 1 << 1,
	VERBS_QUERY_GID_ATTR_NDEV_IFINDEX = 1 << 2,
};

/* verbs_mr.mr_type */
enum ibv_mr_type {
	IBV_MR_TYPE_MR,
	IBV_MR_TYPE_NULL_MR,
	IBV_MR_TYPE_IMPORTED_MR,
	IBV_MR_TYPE_DMABUF_MR,
};

/* 56 bytes: ibv_mr 0, mr_type 48, access 52. */
struct verbs_mr {
	struct ibv_mr ibv_mr;
	enum ibv_mr_type mr_type;
	int access;
};

static inline struct verbs_mr *verbs_get_mr(struct ibv_mr *mr)
{
	return (struct verbs_mr *)((char *)mr - offsetof(struct verbs_mr, ibv_mr));
}

/* 368 bytes: qp/qp_ex 0, comp_mask 352, xrcd 360. */
struct verbs_qp {
	union {
		struct ibv_qp qp;
		struct ibv_qp_ex qp_ex;
	};
	uint32_t comp_mask;
	struct verbs_xrcd *xrcd;
};

/* 288 bytes. */
struct verbs_cq {
	union {
		struct ibv_cq cq;
		struct ibv_cq_ex cq_ex;
	};
};

enum ibv_flow_action_type {
	IBV_FLOW_ACTION_UNSPECIFIED,
	IBV_FLOW_ACTION_ESP = 1,
};

/* 16 bytes: action 0, handle 8, type 12. */
struct verbs_flow_action {
	struct ibv_flow_action action;
	uint32_t handle;
	enum ibv_flow_action_type type;
};

/* 40 bytes: dm 0, handle 32. */
struct verbs_dm {
	struct ibv_dm dm;
	uint32_t handle;
};

#if _OPENVERBS_ABI >= 64
/* 16 bytes: dmah 0, handle 8 (rdma-core 64). */
struct verbs_dmah {
	struct ibv_dmah dmah;
	uint32_t handle;	/* the kernel's object handle */
};

static inline struct verbs_dmah *verbs_get_dmah(struct ibv_dmah *dmah)
{
	return (struct verbs_dmah *)((char *)dmah - offsetof(struct verbs_dmah, dmah));
}

/*
 * 32 bytes (rdma-core 64): a buffer of ibv_alloc_buf().  addr/size are the
 * whole allocation, pd the domain it is for; dmabuf_fd is the dma-buf that
 * backs it, or -1 for ordinary memory (registered by address).
 */
struct ibv_buf {
	void *addr;
	size_t size;
	struct ibv_pd *pd;
	int dmabuf_fd;
};

/* Fills a buffer handle for ordinary memory (dmabuf_fd -1). */
static inline void ibv_buf_init(struct ibv_buf *buf, struct ibv_pd *pd,
				void *addr, size_t size)
{
	buf->pd = pd;
	buf->addr = addr;
	buf->size = size;
	buf->dmabuf_fd = -1;
}
#endif

/* 16 bytes: counters 0, handle 8. */
struct verbs_counters {
	struct ibv_counters counters;
	uint32_t handle;
};

/* ---------------------------------------------------------------------------
 * Device matching.
 */
enum {
	VERBS_MATCH_SENTINEL = 0,
	VERBS_MATCH_PCI = 1,
	VERBS_MATCH_MODALIAS = 2,
	VERBS_MATCH_DRIVER_ID = 3,
};

/* One entry of a provider's match table (24 bytes), ended by a zero entry. */
struct verbs_match_ent {
	void *driver_data;
	union {
		const char *modalias;  /* VERBS_MATCH_MODALIAS: fnmatch() glob */
		uint64_t driver_id;    /* VERBS_MATCH_DRIVER_ID: enum rdma_driver_id */
	} u;
	uint16_t vendor;               /* VERBS_MATCH_PCI */
	uint16_t device;
	uint8_t kind;
};

#define VERBS_DRIVER_ID(_id)                                                   \
	{ .u = { .driver_id = (_id) }, .kind = VERBS_MATCH_DRIVER_ID }
#define VERBS_PCI_MATCH(_vendor, _device, _data)                               \
	{ .driver_data = (void *)(_data), .vendor = (_vendor),                 \
	  .device = (_device), .kind = VERBS_MATCH_PCI }
#define VERBS_MODALIAS_MATCH(_mod_str, _data)                                  \
	{ .driver_data = (void *)(_data), .u = { .modalias = (_mod_str) },     \
	  .kind = VERBS_MATCH_MODALIAS }
/* Matches an ibdev name that starts with the prefix ("rdma_device:N<name>"). */
#define VERBS_NAME_MATCH(_name_prefix, _data)                                  \
	VERBS_MODALIAS_MATCH("rdma_device:*N" _name_prefix "*", _data)
#define VERBS_PLATFORM_DEVICE(_name, _data)                                    \
	VERBS_MODALIAS_MATCH("platform:" _name, _data)
#define VERBS_MATCH_SENTINEL()                                                 \
	{ .kind = VERBS_MATCH_SENTINEL }

/* verbs_sysfs_dev.flags: what has been read so far. */
enum {
	VSYSFS_READ_MODALIAS = 1 << 0,
	VSYSFS_READ_NODE_GUID = 1 << 1,
};

/*
 * A device found by discovery (992 bytes). Providers read `abi_ver`,
 * `match` (->driver_data) and occasionally the names and paths.
 */
struct verbs_sysfs_dev {
	struct list_node entry;
	void *provider_data;
	const struct verbs_match_ent *match; /* the entry that matched */
	unsigned int flags;
	char sysfs_name[64];      /* uverbsN */
	dev_t sysfs_cdev;         /* /dev/infiniband/uverbsN device number */
	char ibdev_name[64];      /* e.g. rxe0 */
	char ibdev_path[256];     /* <sysfs>/class/infiniband/<ibdev> */
	char modalias[512];
	uint64_t node_guid;
	uint32_t driver_id;       /* enum rdma_driver_id, from netlink */
	enum ibv_node_type node_type;
	int ibdev_idx;            /* netlink device index */
	uint32_t num_ports;
	uint32_t abi_ver;         /* uverbs ABI of the character device */
	struct timespec time_created;
};

/* What a provider registers (72 bytes). Must never change. */
struct verbs_device_ops {
	const char *name;
	uint32_t match_min_abi_version;
	uint32_t match_max_abi_version;
	const struct verbs_match_ent *match_table;
	const struct verbs_device_ops **static_providers;
	/* Optional extra check after a table match; false rejects the device. */
	bool (*match_device)(struct verbs_sysfs_dev *sysfs_dev);
	struct verbs_context *(*alloc_context)(struct ibv_device *device,
					       int cmd_fd, void *private_data);
	struct verbs_context *(*import_context)(struct ibv_device *device,
						int cmd_fd);
	struct verbs_device *(*alloc_device)(struct verbs_sysfs_dev *sysfs_dev);
	void (*uninit_device)(struct verbs_device *device);
};

/*
 * A device as the library tracks it (712 bytes). `device` must be first;
 * providers identify their own devices by comparing `ops`.
 */
struct verbs_device {
	struct ibv_device device;
	const struct verbs_device_ops *ops;
	verbs_atomic_int refcount;
	struct list_node entry;
	struct verbs_sysfs_dev *sysfs; /* NULL for provider-made devices */
	uint64_t core_support;         /* IB_UVERBS_CORE_SUPPORT_* bits */
};

static inline struct verbs_device *verbs_get_device(const struct ibv_device *dev)
{
	return (struct verbs_device *)((char *)dev -
				       offsetof(struct verbs_device, device));
}

/*
 * The provider's operations (608 bytes, 76 pointers in alphabetical order,
 * rdma-core v36..v56). A NULL member means "not provided": the library keeps
 * its EOPNOTSUPP stub for that slot.
 */
struct verbs_context_ops {
	int (*advise_mr)(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
			 uint32_t flags, struct ibv_sge *sg_list,
			 uint32_t num_sges);
#if _OPENVERBS_ABI >= 64
	void *(*alloc_buf)(struct ibv_pd *pd, size_t size, struct ibv_buf **buf);
#endif
	struct ibv_dm *(*alloc_dm)(struct ibv_context *context,
				   struct ibv_alloc_dm_attr *attr);
#if _OPENVERBS_ABI >= 64
	struct ibv_dmah *(*alloc_dmah)(struct ibv_context *context,
				       struct ibv_dmah_init_attr *attr);
#endif
	struct ibv_mw *(*alloc_mw)(struct ibv_pd *pd, enum ibv_mw_type type);
	struct ibv_mr *(*alloc_null_mr)(struct ibv_pd *pd);
	struct ibv_pd *(*alloc_parent_domain)(
		struct ibv_context *context,
		struct ibv_parent_domain_init_attr *attr);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
	struct ibv_td *(*alloc_td)(struct ibv_context *context,
				   struct ibv_td_init_attr *init_attr);
	void (*async_event)(struct ibv_context *context,
			    struct ibv_async_event *event);
	int (*attach_counters_point_flow)(struct ibv_counters *counters,
					  struct ibv_counter_attach_attr *attr,
					  struct ibv_flow *flow);
	int (*attach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid,
			    uint16_t lid);
	int (*bind_mw)(struct ibv_qp *qp, struct ibv_mw *mw,
		       struct ibv_mw_bind *mw_bind);
	int (*close_xrcd)(struct ibv_xrcd *xrcd);
	void (*cq_event)(struct ibv_cq *cq);
	struct ibv_ah *(*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr);
	struct ibv_counters *(*create_counters)(
		struct ibv_context *context,
		struct ibv_counters_init_attr *init_attr);
	struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe,
				    struct ibv_comp_channel *channel,
				    int comp_vector);
	struct ibv_cq_ex *(*create_cq_ex)(
		struct ibv_context *context,
		struct ibv_cq_init_attr_ex *init_attr);
	struct ibv_flow *(*create_flow)(struct ibv_qp *qp,
					struct ibv_flow_attr *flow_attr);
	struct ibv_flow_action *(*create_flow_action_esp)(
		struct ibv_context *context,
		struct ibv_flow_action_esp_attr *attr);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd,
				    struct ibv_qp_init_attr *attr);
	struct ibv_qp *(*create_qp_ex)(struct ibv_context *context,
				       struct ibv_qp_init_attr_ex *qp_init_attr_ex);
	struct ibv_rwq_ind_table *(*create_rwq_ind_table)(
		struct ibv_context *context,
		struct ibv_rwq_ind_table_init_attr *init_attr);
	struct ibv_srq *(*create_srq)(struct ibv_pd *pd,
				      struct ibv_srq_init_attr *srq_init_attr);
	struct ibv_srq *(*create_srq_ex)(
		struct ibv_context *context,
		struct ibv_srq_init_attr_ex *srq_init_attr_ex);
	struct ibv_wq *(*create_wq)(struct ibv_context *context,
				    struct ibv_wq_init_attr *wq_init_attr);
#if _OPENVERBS_ABI >= 64
	int (*dealloc_dmah)(struct ibv_dmah *dmah);
#endif
	int (*dealloc_mw)(struct ibv_mw *mw);
	int (*dealloc_pd)(struct ibv_pd *pd);
	int (*dealloc_td)(struct ibv_td *td);
	int (*dereg_mr)(struct verbs_mr *vmr);
	int (*destroy_ah)(struct ibv_ah *ah);
	int (*destroy_counters)(struct ibv_counters *counters);
	int (*destroy_cq)(struct ibv_cq *cq);
	int (*destroy_flow)(struct ibv_flow *flow);
	int (*destroy_flow_action)(struct ibv_flow_action *action);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*destroy_rwq_ind_table)(struct ibv_rwq_ind_table *rwq_ind_table);
	int (*destroy_srq)(struct ibv_srq *srq);
	int (*destroy_wq)(struct ibv_wq *wq);
	int (*detach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid,
			    uint16_t lid);
#if _OPENVERBS_ABI >= 64
	int (*dm_export_dmabuf_fd)(struct ibv_dm *dm);
	void (*free_buf)(struct ibv_buf *buf);
#endif
	void (*free_context)(struct ibv_context *context);
	int (*free_dm)(struct ibv_dm *dm);
	int (*get_srq_num)(struct ibv_srq *srq, uint32_t *srq_num);
	struct ibv_dm *(*import_dm)(struct ibv_context *context,
				    uint32_t dm_handle);
	struct ibv_mr *(*import_mr)(struct ibv_pd *pd, uint32_t mr_handle);
	struct ibv_pd *(*import_pd)(struct ibv_context *context,
				    uint32_t pd_handle);
	int (*modify_cq)(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr);
	int (*modify_flow_action_esp)(struct ibv_flow_action *action,
				      struct ibv_flow_action_esp_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			 int attr_mask);
	int (*modify_qp_rate_limit)(struct ibv_qp *qp,
				    struct ibv_qp_rate_limit_attr *attr);
	int (*modify_srq)(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
			  int srq_attr_mask);
	int (*modify_wq)(struct ibv_wq *wq, struct ibv_wq_attr *wq_attr);
	struct ibv_qp *(*open_qp)(struct ibv_context *context,
				  struct ibv_qp_open_attr *attr);
	struct ibv_xrcd *(*open_xrcd)(
		struct ibv_context *context,
		struct ibv_xrcd_init_attr *xrcd_init_attr);
	int (*poll_cq)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr);
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr);
	int (*post_srq_ops)(struct ibv_srq *srq, struct ibv_ops_wr *op,
			    struct ibv_ops_wr **bad_op);
	int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *recv_wr,
			     struct ibv_recv_wr **bad_recv_wr);
	int (*query_device_ex)(struct ibv_context *context,
			       const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr,
			       size_t attr_size);
	int (*query_ece)(struct ibv_qp *qp, struct ibv_ece *ece);
	int (*query_port)(struct ibv_context *context, uint8_t port_num,
			  struct ibv_port_attr *port_attr);
#if _OPENVERBS_ABI >= 64
	int (*query_port_speed)(struct ibv_context *context, uint32_t port_num,
				uint64_t *speed);
#endif
	int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			int attr_mask, struct ibv_qp_init_attr *init_attr);
	int (*query_qp_data_in_order)(struct ibv_qp *qp, enum ibv_wr_opcode op,
				      uint32_t flags);
	int (*query_rt_values)(struct ibv_context *context,
			       struct ibv_values_ex *values);
	int (*query_srq)(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr);
	int (*read_counters)(struct ibv_counters *counters,
			     uint64_t *counters_value, uint32_t ncounters,
			     uint32_t flags);
	struct ibv_mr *(*reg_dm_mr)(struct ibv_pd *pd, struct ibv_dm *dm,
				    uint64_t dm_offset, size_t length,
				    unsigned int access);
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset,
					size_t length, uint64_t iova, int fd,
					int access);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length,
				 uint64_t hca_va, int access);
#if _OPENVERBS_ABI >= 64
	struct ibv_mr *(*reg_mr_ex)(struct ibv_pd *pd,
				    struct ibv_mr_init_attr *mr_init_attr);
#endif
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
	int (*rereg_mr)(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
			void *addr, size_t length, int access);
	int (*resize_cq)(struct ibv_cq *cq, int cqe);
	int (*set_ece)(struct ibv_qp *qp, struct ibv_ece *ece);
	void (*unimport_dm)(struct ibv_dm *dm);
	void (*unimport_mr)(struct ibv_mr *mr);
	void (*unimport_pd)(struct ibv_pd *pd);
};

/* ---------------------------------------------------------------------------
 * Registration and contexts.
 */

/* Called from the provider's constructor. The number is the private ABI
 * (IBVERBS_PRIVATE_34 up to rdma-core 56, IBVERBS_PRIVATE_64 in 64). */
#if _OPENVERBS_ABI >= 64
void verbs_register_driver_64(const struct verbs_device_ops *ops);
#define verbs_register_driver(ops) verbs_register_driver_64(ops)
#else
void verbs_register_driver_34(const struct verbs_device_ops *ops);
#define verbs_register_driver(ops) verbs_register_driver_34(ops)
#endif

/*
 * PROVIDER_DRIVER(name, ops): exports `verbs_provider_<name>` and registers
 * `ops` when the plugin is loaded.
 */
#define PROVIDER_DRIVER(provider_name, drv_struct)                             \
	extern const struct verbs_device_ops verbs_provider_##provider_name    \
		__attribute__((alias(#drv_struct)));                           \
	static __attribute__((constructor)) void                               \
	drv_##provider_name##_register_driver(void)                            \
	{                                                                      \
		verbs_register_driver(&drv_struct);                            \
	}

/*
 * Allocates alloc_size zeroed bytes holding the provider's context, whose
 * struct verbs_context lives at offset (size_t)context_offset, and
 * initialises it: device reference, cmd_fd, async_fd -1, EOPNOTSUPP stubs in
 * every op, driver_id. Returns the allocation, or NULL with errno set.
 * Use verbs_init_and_alloc_context() rather than calling it directly.
 */
void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd,
				    size_t alloc_size,
				    struct verbs_context *context_offset,
				    uint32_t driver_id);

#define verbs_init_and_alloc_context(ibdev, cmd_fd, drv_ctx_ptr, ctx_memb,     \
				     driver_id)                                \
	((__typeof__(drv_ctx_ptr))_verbs_init_and_alloc_context(              \
		ibdev, cmd_fd, sizeof(*(drv_ctx_ptr)),                         \
		&((__typeof__(drv_ctx_ptr))NULL)->ctx_memb, (driver_id)))

/* Releases what verbs_init_and_alloc_context set up (not the allocation). */
void verbs_uninit_context(struct verbs_context *context);

/* Installs the non-NULL members of ops (may be called several times). */
void verbs_set_ops(struct verbs_context *vctx,
		   const struct verbs_context_ops *ops);

/* Initialises the library-owned fields of a CQ the provider created. */
void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context,
		   struct ibv_comp_channel *channel, void *cq_context);

/* ibv_open_device() with provider private data passed to alloc_context. */
struct ibv_context *verbs_open_device(struct ibv_device *device,
				      void *private_data);

/* Reads <ibdev_path>/<fnfmt...> into buf (NUL terminated, trailing newline
 * removed). Returns the length read or -1 with errno. */
int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
			      struct verbs_sysfs_dev *sysfs_dev,
			      const char *fnfmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The sysfs root the library uses ($SYSFS_PATH or /sys), and a reader of
 * <dir>/<file> into buf (NUL terminated, trailing newline removed): the
 * length read, or -1 with errno. Kept for old providers and librdmacm. */
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
			size_t size);

/* GID type of a port's GID index (IBV_GID_TYPE_SYSFS_*). 0 or errno. */
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
		       unsigned int index, enum ibv_gid_type_sysfs *type);

/* Set by RDMAV_ALLOW_DISASSOC_DESTROY: a destroy that fails with EIO because
 * the device was disassociated counts as success. */
extern bool verbs_allow_disassociate_destroy;

/*
 * For destroy commands: true when the caller must stop and not use the
 * kernel's response. An EIO from a disassociated device, when
 * verbs_allow_disassociate_destroy is set, becomes success (*ret = 0) but
 * still returns true: the kernel filled no response.
 */
static inline bool verbs_is_destroy_err(int *ret)
{
	if (*ret == EIO && verbs_allow_disassociate_destroy) {
		*ret = 0;
		return true;
	}
	return *ret != 0;
}

/* True if input uses no bits outside supported. */
static inline bool check_comp_mask(uint64_t input, uint64_t supported)
{
	return (input & ~supported) == 0;
}

/* Parent-domain helpers for providers: the PD must be given ... */
static inline int
ibv_check_alloc_parent_domain(struct ibv_parent_domain_init_attr *attr)
{
	/* A parent domain always refines an existing protection domain. */
	if (!attr->pd) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

/* ... and a parent domain carries the context and handle of its PD. */
static inline void
ibv_initialize_parent_domain(struct ibv_pd *parent_domain,
			     struct ibv_pd *protection_domain)
{
	parent_domain->context = protection_domain->context;
	parent_domain->handle = protection_domain->handle;
}

/* ---------------------------------------------------------------------------
 * Kernel commands (one per uverbs method). Each returns 0 or an errno value
 * (the kernel's errno passed through), filling the object on success.
 * `cmd`/`resp` point to the provider's request/response, whose head is the
 * kern-abi.h type; the bytes after the head are sent as driver data (UHW).
 */
#if _OPENVERBS_ABI >= 64
/* rdma-core 64: fd_arr (NULL: none) is handed to the kernel with the command
 * (UVERBS_ATTR_GET_CONTEXT_FD_ARR; ioctl only). */
int ibv_cmd_get_context(struct verbs_context *context,
			struct ibv_get_context *cmd, size_t cmd_size,
			struct ibv_fd_arr *fd_arr,
			struct ib_uverbs_get_context_resp *resp,
			size_t resp_size);
/* rdma-core 64: the effective speed of a port in 100 Mb/s units
 * (UVERBS_METHOD_QUERY_PORT_SPEED; ioctl only). */
int ibv_cmd_query_port_speed(struct ibv_context *context, uint32_t port_num,
			     uint64_t *speed);
#else
int ibv_cmd_get_context(struct verbs_context *context,
			struct ibv_get_context *cmd, size_t cmd_size,
			struct ib_uverbs_get_context_resp *resp,
			size_t resp_size);
#endif
int ibv_cmd_query_context(struct ibv_context *ctx,
			  struct ibv_command_buffer *driver);
int ibv_cmd_query_device_any(struct ibv_context *context,
			     const struct ibv_query_device_ex_input *input,
			     struct ibv_device_attr_ex *attr, size_t attr_size,
			     struct ib_uverbs_ex_query_device_resp *resp,
			     size_t *resp_size);
int ibv_cmd_query_port(struct ibv_context *context, uint8_t port_num,
		       struct ibv_port_attr *port_attr,
		       struct ibv_query_port *cmd, size_t cmd_size);
int ibv_cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd,
		     struct ibv_alloc_pd *cmd, size_t cmd_size,
		     struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size);
int ibv_cmd_dealloc_pd(struct ibv_pd *pd);
int ibv_cmd_open_xrcd(struct ibv_context *context, struct verbs_xrcd *xrcd,
		      int vxrcd_size, struct ibv_xrcd_init_attr *attr,
		      struct ibv_open_xrcd *cmd, size_t cmd_size,
		      struct ib_uverbs_open_xrcd_resp *resp, size_t resp_size);
int ibv_cmd_close_xrcd(struct verbs_xrcd *xrcd);
int ibv_cmd_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
		   uint64_t hca_va, int access, struct verbs_mr *vmr,
		   struct ibv_reg_mr *cmd, size_t cmd_size,
		   struct ib_uverbs_reg_mr_resp *resp, size_t resp_size);
int ibv_cmd_rereg_mr(struct verbs_mr *vmr, uint32_t flags, void *addr,
		     size_t length, uint64_t hca_va, int access,
		     struct ibv_pd *pd, struct ibv_rereg_mr *cmd,
		     size_t cmd_sz, struct ib_uverbs_rereg_mr_resp *resp,
		     size_t resp_sz);
int ibv_cmd_dereg_mr(struct verbs_mr *vmr);
int ibv_cmd_query_mr(struct ibv_pd *pd, struct verbs_mr *vmr,
		     uint32_t mr_handle);
int ibv_cmd_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		      uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge);
#if _OPENVERBS_ABI >= 56
/* rdma-core 56: driver holds the provider's own attributes (NULL: none). */
int ibv_cmd_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
			  uint64_t iova, int fd, int access,
			  struct verbs_mr *vmr, struct ibv_command_buffer *driver);
#else
int ibv_cmd_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
			  uint64_t iova, int fd, int access,
			  struct verbs_mr *vmr);
#endif
int ibv_cmd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type,
		     struct ibv_mw *mw, struct ibv_alloc_mw *cmd,
		     size_t cmd_size, struct ib_uverbs_alloc_mw_resp *resp,
		     size_t resp_size);
int ibv_cmd_dealloc_mw(struct ibv_mw *mw);
int ibv_cmd_create_cq(struct ibv_context *context, int cqe,
		      struct ibv_comp_channel *channel, int comp_vector,
		      struct ibv_cq *cq, struct ibv_create_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_create_cq_resp *resp,
		      size_t resp_size);
/* cmd_flags of ibv_cmd_create_cq_ex(). */
enum create_cq_cmd_flags {
	/* The provider ignores a requested completion timestamp. */
	CREATE_CQ_CMD_FLAGS_TS_IGNORED_EX = 1 << 0,
#if _OPENVERBS_ABI >= 64
	/* rdma-core 64: the provider allocated the CQ ring itself and passes it
	 * in prov_attr->buffer, by address (VA) or as a dma-buf (DMABUF). */
	CREATE_CQ_CMD_FLAGS_WITH_MEM_VA = 1 << 1,
	CREATE_CQ_CMD_FLAGS_WITH_MEM_DMABUF = 1 << 2,
#endif
};

#if _OPENVERBS_ABI >= 64
/* 24 bytes (rdma-core 64): a CQ ring the provider allocated. */
struct verbs_create_cq_prov_attr {
	struct {
		uint64_t length;	/* bytes */
		union {
			uint8_t *ptr;	/* WITH_MEM_VA */
			struct {
				uint64_t offset;
				int fd;
			} dmabuf;	/* WITH_MEM_DMABUF */
		};
	} buffer;
};

/* rdma-core 64: prov_attr (NULL unless cmd_flags has WITH_MEM_*). */
int ibv_cmd_create_cq_ex(struct ibv_context *context,
			 const struct ibv_cq_init_attr_ex *cq_attr,
			 struct verbs_create_cq_prov_attr *prov_attr,
			 struct verbs_cq *cq, struct ibv_create_cq_ex *cmd,
			 size_t cmd_size,
			 struct ib_uverbs_ex_create_cq_resp *resp,
			 size_t resp_size, uint32_t cmd_flags);
int ibv_cmd_create_cq_ex2(struct ibv_context *context,
			  const struct ibv_cq_init_attr_ex *cq_attr,
			  struct verbs_create_cq_prov_attr *prov_attr,
			  struct verbs_cq *cq, struct ibv_create_cq_ex *cmd,
			  size_t cmd_size,
			  struct ib_uverbs_ex_create_cq_resp *resp,
			  size_t resp_size, uint32_t cmd_flags,
			  struct ibv_command_buffer *driver);
#else
int ibv_cmd_create_cq_ex(struct ibv_context *context,
			 const struct ibv_cq_init_attr_ex *cq_attr,
			 struct verbs_cq *cq, struct ibv_create_cq_ex *cmd,
			 size_t cmd_size,
			 struct ib_uverbs_ex_create_cq_resp *resp,
			 size_t resp_size, uint32_t cmd_flags);
#endif
#if _OPENVERBS_ABI >= 56 && _OPENVERBS_ABI < 64
/*
 * rdma-core 56: ibv_cmd_create_cq_ex() with the provider's own attributes
 * (driver, NULL: none) sent with the command; ibv_cmd_create_cq_ex() is this
 * with driver NULL.
 */
int ibv_cmd_create_cq_ex2(struct ibv_context *context,
			  const struct ibv_cq_init_attr_ex *cq_attr,
			  struct verbs_cq *cq, struct ibv_create_cq_ex *cmd,
			  size_t cmd_size,
			  struct ib_uverbs_ex_create_cq_resp *resp,
			  size_t resp_size, uint32_t cmd_flags,
			  struct ibv_command_buffer *driver);
#endif
int ibv_cmd_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc);
int ibv_cmd_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int ibv_cmd_resize_cq(struct ibv_cq *cq, int cqe, struct ibv_resize_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_resize_cq_resp *resp,
		      size_t resp_size);
int ibv_cmd_destroy_cq(struct ibv_cq *cq);
int ibv_cmd_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr,
		      struct ibv_modify_cq *cmd, size_t cmd_size);
int ibv_cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq,
		       struct ibv_srq_init_attr *attr,
		       struct ibv_create_srq *cmd, size_t cmd_size,
		       struct ib_uverbs_create_srq_resp *resp,
		       size_t resp_size);
int ibv_cmd_create_srq_ex(struct ibv_context *context, struct verbs_srq *srq,
			  struct ibv_srq_init_attr_ex *attr_ex,
			  struct ibv_create_xsrq *cmd, size_t cmd_size,
			  struct ib_uverbs_create_srq_resp *resp,
			  size_t resp_size);
int ibv_cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		       int srq_attr_mask, struct ibv_modify_srq *cmd,
		       size_t cmd_size);
int ibv_cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		      struct ibv_query_srq *cmd, size_t cmd_size);
int ibv_cmd_destroy_srq(struct ibv_srq *srq);
int ibv_cmd_create_qp(struct ibv_pd *pd, struct ibv_qp *qp,
		      struct ibv_qp_init_attr *attr, struct ibv_create_qp *cmd,
		      size_t cmd_size, struct ib_uverbs_create_qp_resp *resp,
		      size_t resp_size);
int ibv_cmd_create_qp_ex(struct ibv_context *context, struct verbs_qp *qp,
			 struct ibv_qp_init_attr_ex *attr_ex,
			 struct ibv_create_qp *cmd, size_t cmd_size,
			 struct ib_uverbs_create_qp_resp *resp,
			 size_t resp_size);
#if _OPENVERBS_ABI >= 64
/* rdma-core 64: driver (NULL: none) carries the provider's own attributes. */
int ibv_cmd_create_qp_ex2(struct ibv_context *context, struct verbs_qp *qp,
			  struct ibv_qp_init_attr_ex *qp_attr,
			  struct ibv_create_qp_ex *cmd, size_t cmd_size,
			  struct ib_uverbs_ex_create_qp_resp *resp,
			  size_t resp_size, struct ibv_command_buffer *driver);
#else
int ibv_cmd_create_qp_ex2(struct ibv_context *context, struct verbs_qp *qp,
			  struct ibv_qp_init_attr_ex *qp_attr,
			  struct ibv_create_qp_ex *cmd, size_t cmd_size,
			  struct ib_uverbs_ex_create_qp_resp *resp,
			  size_t resp_size);
#endif
int ibv_cmd_open_qp(struct ibv_context *context, struct verbs_qp *qp,
		    int vqp_sz, struct ibv_qp_open_attr *attr,
		    struct ibv_open_qp *cmd, size_t cmd_size,
		    struct ib_uverbs_create_qp_resp *resp, size_t resp_size);
int ibv_cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *qp_attr,
		     int attr_mask, struct ibv_qp_init_attr *qp_init_attr,
		     struct ibv_query_qp *cmd, size_t cmd_size);
int ibv_cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		      int attr_mask, struct ibv_modify_qp *cmd,
		      size_t cmd_size);
int ibv_cmd_modify_qp_ex(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			 int attr_mask, struct ibv_modify_qp_ex *cmd,
			 size_t cmd_size,
			 struct ib_uverbs_ex_modify_qp_resp *resp,
			 size_t resp_size);
int ibv_cmd_destroy_qp(struct ibv_qp *qp);
int ibv_cmd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr);
int ibv_cmd_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr);
int ibv_cmd_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad_wr);
int ibv_cmd_create_ah(struct ibv_pd *pd, struct ibv_ah *ah,
		      struct ibv_ah_attr *attr,
		      struct ib_uverbs_create_ah_resp *resp, size_t resp_size);
int ibv_cmd_destroy_ah(struct ibv_ah *ah);
int ibv_cmd_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
			 uint16_t lid);
int ibv_cmd_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
			 uint16_t lid);
int ibv_cmd_create_flow(struct ibv_qp *qp, struct ibv_flow *flow_id,
			struct ibv_flow_attr *flow_attr, void *ucmd,
			size_t ucmd_size);
int ibv_cmd_destroy_flow(struct ibv_flow *flow_id);
int ibv_cmd_create_flow_action_esp(struct ibv_context *ctx,
				   struct ibv_flow_action_esp_attr *attr,
				   struct verbs_flow_action *flow_action,
				   struct ibv_command_buffer *driver);
int ibv_cmd_modify_flow_action_esp(struct verbs_flow_action *flow_action,
				   struct ibv_flow_action_esp_attr *attr,
				   struct ibv_command_buffer *driver);
int ibv_cmd_destroy_flow_action(struct verbs_flow_action *action);
int ibv_cmd_create_wq(struct ibv_context *context,
		      struct ibv_wq_init_attr *wq_init_attr,
		      struct ibv_wq *wq, struct ibv_create_wq *cmd,
		      size_t cmd_size, struct ib_uverbs_ex_create_wq_resp *resp,
		      size_t resp_size);
int ibv_cmd_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *attr,
		      struct ibv_modify_wq *cmd, size_t cmd_size);
int ibv_cmd_destroy_wq(struct ibv_wq *wq);
int ibv_cmd_create_rwq_ind_table(struct ibv_context *context,
				 struct ibv_rwq_ind_table_init_attr *init_attr,
				 struct ibv_rwq_ind_table *rwq_ind_table,
				 struct ib_uverbs_ex_create_rwq_ind_table_resp *resp,
				 size_t resp_size);
int ibv_cmd_destroy_rwq_ind_table(struct ibv_rwq_ind_table *rwq_ind_table);
int ibv_cmd_create_counters(struct ibv_context *context,
			    struct ibv_counters_init_attr *init_attr,
			    struct verbs_counters *vcounters,
			    struct ibv_command_buffer *link);
int ibv_cmd_destroy_counters(struct verbs_counters *vcounters);
int ibv_cmd_read_counters(struct verbs_counters *vcounters,
			  uint64_t *counters_value, uint32_t ncounters,
			  uint32_t flags, struct ibv_command_buffer *link);
int ibv_cmd_alloc_dm(struct ibv_context *ctx,
		     const struct ibv_alloc_dm_attr *dm_attr,
		     struct verbs_dm *dm, struct ibv_command_buffer *link);
int ibv_cmd_free_dm(struct verbs_dm *dm);
int ibv_cmd_reg_dm_mr(struct ibv_pd *pd, struct verbs_dm *dm,
		      uint64_t offset, size_t length, unsigned int access,
		      struct verbs_mr *vmr, struct ibv_command_buffer *link);

#if _OPENVERBS_ABI >= 64
/*
 * rdma-core 64 (ioctl only; the kernel's errno, or EPROTONOSUPPORT/ENOTTY
 * from a kernel without the method).  alloc/free of a DMA handle with attr's
 * hints; the extended registration (the mask rules of ibv_reg_mr_ex(3), an
 * address-based request falls back to the REG_MR write command); a dma-buf
 * fd for the mmap page pg_off of the context (-1 and errno on failure).
 */
int ibv_cmd_alloc_dmah(struct ibv_context *ctx, struct verbs_dmah *st,
		       struct ibv_dmah_init_attr *attr);
int ibv_cmd_free_dmah(struct verbs_dmah *dmah);
int ibv_cmd_reg_mr_ex(struct ibv_pd *pd, struct verbs_mr *vmr,
		      struct ibv_mr_init_attr *mr_init_attr);
int ibv_cmd_export_dmabuf_fd(struct ibv_context *ctx, off_t pg_off);

/*
 * rdma-core 64: buffers from a Linux DMA-buf heap (/dev/dma_heap/), for
 * providers whose ibv_alloc_buf() must hand out memory shared with the host
 * of a confidential-computing guest ("system_cc_shared").  init: NULL and
 * errno when the heap cannot be opened; alloc: an mmap of size bytes and its
 * dma-buf fd in *dmabuf_fd, or NULL and errno; free: unmap and close.
 */
struct ibv_dmabuf_heap;
struct ibv_dmabuf_heap *ibv_dmabuf_heap_cc_shared_init(void);
void ibv_dmabuf_heap_destroy(struct ibv_dmabuf_heap *heap);
void *ibv_dmabuf_heap_alloc(struct ibv_dmabuf_heap *heap, size_t size,
			    int *dmabuf_fd);
void ibv_dmabuf_heap_free(void *buf, size_t size, int dmabuf_fd);
#endif

#ifdef __cplusplus
}
#endif

#endif /* INFINIBAND_DRIVER_H */
