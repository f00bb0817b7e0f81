/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * openverbs: <infiniband/verbs.h>, the public libibverbs API.
 *
 * Binary compatible with rdma-core 44's libibverbs.so.1: every type, member
 * offset, enum value and static inline function below has the layout and the
 * dispatch of the rdma-core 44 header (sources: the rdma-core 44 ABI dump,
 * Debian's ibv_*(3) man pages, the kernel uapi <rdma/ib_user_verbs.h> and
 * <rdma/ib_user_ioctl_verbs.h>).  The inline functions are compiled into the
 * applications, so which slot of struct ibv_context_ops / struct
 * verbs_context / struct ibv_qp_ex / struct ibv_cq_ex they call is ABI too.
 *
 * Error conventions (ibv_*(3)): functions returning int return 0 or a
 * positive errno value; functions returning a pointer return NULL and set
 * errno.
 */
#ifndef INFINIBAND_VERBS_H
#define INFINIBAND_VERBS_H

#include <stdint.h>
#include <pthread.h>
#include <stddef.h>
#include <errno.h>
#include <string.h>
#include <linux/types.h>
#include <sys/types.h>
#include <infiniband/openverbs_abi.h>
#if _OPENVERBS_ABI >= 56
#include <linux/if_ether.h>
#endif
#include <infiniband/verbs_api.h>

#ifdef __cplusplus
#include <limits>
#endif

#if __GNUC__ >= 3
#define __attribute_const __attribute__((const))
#else
#define __attribute_const
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ==== GIDs ==== */

/* A 128-bit global identifier; both views are in network byte order. */
union ibv_gid {
	uint8_t raw[16];
	struct {
		__be64 subnet_prefix;
		__be64 interface_id;
	} global;
};

/* The kind of a GID table entry (ibv_query_gid_ex(3)). */
enum ibv_gid_type {
	IBV_GID_TYPE_IB,
	IBV_GID_TYPE_ROCE_V1,
	IBV_GID_TYPE_ROCE_V2,
};

/* One GID table entry as returned by ibv_query_gid_ex(3)/_table(3). */
struct ibv_gid_entry {
	union ibv_gid gid;
	uint32_t gid_index;
	uint32_t port_num;
	uint32_t gid_type;	/* enum ibv_gid_type */
	uint32_t ndev_ifindex;	/* 0 when no net device is attached */
};

/* True when member fld of type lies inside the first sz bytes. */
#define vext_field_avail(type, fld, sz) (offsetof(type, fld) < (sz))

/* ==== Devices ==== */

enum ibv_node_type {
	IBV_NODE_UNKNOWN = -1,
	IBV_NODE_CA = 1,
	IBV_NODE_SWITCH,
	IBV_NODE_ROUTER,
	IBV_NODE_RNIC,
	IBV_NODE_USNIC,
	IBV_NODE_USNIC_UDP,
	IBV_NODE_UNSPECIFIED,
};

enum ibv_transport_type {
	IBV_TRANSPORT_UNKNOWN = -1,
	IBV_TRANSPORT_IB = 0,
	IBV_TRANSPORT_IWARP,
	IBV_TRANSPORT_USNIC,
	IBV_TRANSPORT_USNIC_UDP,
	IBV_TRANSPORT_UNSPECIFIED,
};

/* ibv_device_attr.device_cap_flags (ibv_query_device(3)). */
enum ibv_device_cap_flags {
	IBV_DEVICE_RESIZE_MAX_WR = 1,
	IBV_DEVICE_BAD_PKEY_CNTR = 1 << 1,
	IBV_DEVICE_BAD_QKEY_CNTR = 1 << 2,
	IBV_DEVICE_RAW_MULTI = 1 << 3,
	IBV_DEVICE_AUTO_PATH_MIG = 1 << 4,
	IBV_DEVICE_CHANGE_PHY_PORT = 1 << 5,
	IBV_DEVICE_UD_AV_PORT_ENFORCE = 1 << 6,
	IBV_DEVICE_CURR_QP_STATE_MOD = 1 << 7,
	IBV_DEVICE_SHUTDOWN_PORT = 1 << 8,
	IBV_DEVICE_INIT_TYPE = 1 << 9,
	IBV_DEVICE_PORT_ACTIVE_EVENT = 1 << 10,
	IBV_DEVICE_SYS_IMAGE_GUID = 1 << 11,
	IBV_DEVICE_RC_RNR_NAK_GEN = 1 << 12,
	IBV_DEVICE_SRQ_RESIZE = 1 << 13,
	IBV_DEVICE_N_NOTIFY_CQ = 1 << 14,
	IBV_DEVICE_MEM_WINDOW = 1 << 17,
	IBV_DEVICE_UD_IP_CSUM = 1 << 18,
	IBV_DEVICE_XRC = 1 << 20,
	IBV_DEVICE_MEM_MGT_EXTENSIONS = 1 << 21,
	IBV_DEVICE_MEM_WINDOW_TYPE_2A = 1 << 23,
	IBV_DEVICE_MEM_WINDOW_TYPE_2B = 1 << 24,
	IBV_DEVICE_RC_IP_CSUM = 1 << 25,
	IBV_DEVICE_RAW_IP_CSUM = 1 << 26,
	IBV_DEVICE_MANAGED_FLOW_STEERING = 1 << 29,
};

/* Result of ibv_is_fork_initialized(3). */
enum ibv_fork_status {
	IBV_FORK_DISABLED,
	IBV_FORK_ENABLED,
	IBV_FORK_UNNEEDED,
};

/* ibv_device_attr_ex.device_cap_flags_ex bits beyond the 32-bit enum. */
#define IBV_DEVICE_RAW_SCATTER_FCS (1ULL << 34)
#define IBV_DEVICE_PCI_WRITE_END_PADDING (1ULL << 36)
#if _OPENVERBS_ABI >= 64
/* rdma-core 64: DMA of the device goes through bounce buffers (confidential
 * computing guests); see IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC. */
#define IBV_DEVICE_CC_DMA_BOUNCE (1ULL << 41)
#endif

enum ibv_atomic_cap {
	IBV_ATOMIC_NONE,
	IBV_ATOMIC_HCA,
	IBV_ATOMIC_GLOB,
};

/* ==== Device memory (ibv_alloc_dm(3)) ==== */

struct ibv_alloc_dm_attr {
	size_t length;		/* bytes */
	uint32_t log_align_req;	/* log2 of the required alignment */
	uint32_t comp_mask;
};

enum ibv_dm_mask {
	IBV_DM_MASK_HANDLE = 1 << 0,
};

struct ibv_dm {
	struct ibv_context *context;
	int (*memcpy_to_dm)(struct ibv_dm *dm, uint64_t dm_offset,
			    const void *host_addr, size_t length);
	int (*memcpy_from_dm)(void *host_addr, struct ibv_dm *dm,
			      uint64_t dm_offset, size_t length);
	uint32_t comp_mask;	/* IBV_DM_MASK_HANDLE: handle is valid */
	uint32_t handle;
};

/* ==== Device attributes (ibv_query_device(3), ibv_query_device_ex(3)) ==== */

struct ibv_device_attr {
	char fw_ver[64];
	__be64 node_guid;
	__be64 sys_image_guid;
	uint64_t max_mr_size;
	uint64_t page_size_cap;
	uint32_t vendor_id;
	uint32_t vendor_part_id;
	uint32_t hw_ver;
	int max_qp;
	int max_qp_wr;
	unsigned int device_cap_flags;	/* enum ibv_device_cap_flags */
	int max_sge;
	int max_sge_rd;
	int max_cq;
	int max_cqe;
	int max_mr;
	int max_pd;
	int max_qp_rd_atom;
	int max_ee_rd_atom;
	int max_res_rd_atom;
	int max_qp_init_rd_atom;
	int max_ee_init_rd_atom;
	enum ibv_atomic_cap atomic_cap;
	int max_ee;
	int max_rdd;
	int max_mw;
	int max_raw_ipv6_qp;
	int max_raw_ethy_qp;
	int max_mcast_grp;
	int max_mcast_qp_attach;
	int max_total_mcast_qp_attach;
	int max_ah;
	int max_fmr;
	int max_map_per_fmr;
	int max_srq;
	int max_srq_wr;
	int max_srq_sge;
	uint16_t max_pkeys;
	uint8_t local_ca_ack_delay;
	uint8_t phys_port_cnt;
};

/* On-demand paging: per-transport operations that may fault. */
enum ibv_odp_transport_cap_bits {
	IBV_ODP_SUPPORT_SEND = 1 << 0,
	IBV_ODP_SUPPORT_RECV = 1 << 1,
	IBV_ODP_SUPPORT_WRITE = 1 << 2,
	IBV_ODP_SUPPORT_READ = 1 << 3,
	IBV_ODP_SUPPORT_ATOMIC = 1 << 4,
	IBV_ODP_SUPPORT_SRQ_RECV = 1 << 5,
#if _OPENVERBS_ABI >= 64
	IBV_ODP_SUPPORT_FLUSH = 1 << 6,		/* rdma-core 64 */
	IBV_ODP_SUPPORT_ATOMIC_WRITE = 1 << 7,	/* rdma-core 64 */
#endif
};

struct ibv_odp_caps {
	uint64_t general_caps;	/* enum ibv_odp_general_caps */
	struct {
		uint32_t rc_odp_caps;	/* enum ibv_odp_transport_cap_bits */
		uint32_t uc_odp_caps;
		uint32_t ud_odp_caps;
	} per_transport_caps;
};

enum ibv_odp_general_caps {
	IBV_ODP_SUPPORT = 1 << 0,
	IBV_ODP_SUPPORT_IMPLICIT = 1 << 1,
};

struct ibv_tso_caps {
	uint32_t max_tso;	/* bytes */
	uint32_t supported_qpts;	/* bit (1 << enum ibv_qp_type) */
};

/* Receive-side scaling: hash functions and the packet fields hashed. */
enum ibv_rx_hash_function_flags {
	IBV_RX_HASH_FUNC_TOEPLITZ = 1 << 0,
};

enum ibv_rx_hash_fields {
	IBV_RX_HASH_SRC_IPV4 = 1 << 0,
	IBV_RX_HASH_DST_IPV4 = 1 << 1,
	IBV_RX_HASH_SRC_IPV6 = 1 << 2,
	IBV_RX_HASH_DST_IPV6 = 1 << 3,
	IBV_RX_HASH_SRC_PORT_TCP = 1 << 4,
	IBV_RX_HASH_DST_PORT_TCP = 1 << 5,
	IBV_RX_HASH_SRC_PORT_UDP = 1 << 6,
	IBV_RX_HASH_DST_PORT_UDP = 1 << 7,
	IBV_RX_HASH_IPSEC_SPI = 1 << 8,
	IBV_RX_HASH_INNER = (1UL << 31),
};

struct ibv_rss_caps {
	uint32_t supported_qpts;
	uint32_t max_rwq_indirection_tables;
	uint32_t max_rwq_indirection_table_size;
	uint64_t rx_hash_fields_mask;	/* enum ibv_rx_hash_fields */
	uint8_t rx_hash_function;	/* enum ibv_rx_hash_function_flags */
};

struct ibv_packet_pacing_caps {
	uint32_t qp_rate_limit_min;	/* kbps */
	uint32_t qp_rate_limit_max;	/* kbps */
	uint32_t supported_qpts;
};

enum ibv_raw_packet_caps {
	IBV_RAW_PACKET_CAP_CVLAN_STRIPPING = 1 << 0,
	IBV_RAW_PACKET_CAP_SCATTER_FCS = 1 << 1,
	IBV_RAW_PACKET_CAP_IP_CSUM = 1 << 2,
	IBV_RAW_PACKET_CAP_DELAY_DROP = 1 << 3,
};

/* Tag matching capabilities (ibv_query_device_ex(3)). */
enum ibv_tm_cap_flags {
	IBV_TM_CAP_RC = 1 << 0,
};

struct ibv_tm_caps {
	uint32_t max_rndv_hdr_size;
	uint32_t max_num_tags;
	uint32_t flags;		/* enum ibv_tm_cap_flags */
	uint32_t max_ops;
	uint32_t max_sge;
};

struct ibv_cq_moderation_caps {
	uint16_t max_cq_count;
	uint16_t max_cq_period;	/* microseconds */
};

enum ibv_pci_atomic_op_size {
	IBV_PCI_ATOMIC_OPERATION_4_BYTE_SIZE_SUP = 1 << 0,
	IBV_PCI_ATOMIC_OPERATION_8_BYTE_SIZE_SUP = 1 << 1,
	IBV_PCI_ATOMIC_OPERATION_16_BYTE_SIZE_SUP = 1 << 2,
};

/* Supported operand sizes (enum ibv_pci_atomic_op_size) per operation. */
struct ibv_pci_atomic_caps {
	uint16_t fetch_add;
	uint16_t swap;
	uint16_t compare_swap;
};

/* ibv_query_device_ex(3) input; comp_mask must be 0. */
struct ibv_query_device_ex_input {
	uint32_t comp_mask;
};

struct ibv_device_attr_ex {
	struct ibv_device_attr orig_attr;
	uint32_t comp_mask;
	struct ibv_odp_caps odp_caps;
	uint64_t completion_timestamp_mask;
	uint64_t hca_core_clock;	/* kHz */
	uint64_t device_cap_flags_ex;
	struct ibv_tso_caps tso_caps;
	struct ibv_rss_caps rss_caps;
	uint32_t max_wq_type_rq;
	struct ibv_packet_pacing_caps packet_pacing_caps;
	uint32_t raw_packet_caps;	/* enum ibv_raw_packet_caps */
	struct ibv_tm_caps tm_caps;
	struct ibv_cq_moderation_caps cq_mod_caps;
	uint64_t max_dm_size;
	struct ibv_pci_atomic_caps pci_atomic_caps;
	uint32_t xrc_odp_caps;
	uint32_t phys_port_cnt_ex;
};

/* ==== Ports (ibv_query_port(3)) ==== */

enum ibv_mtu {
	IBV_MTU_256 = 1,
	IBV_MTU_512 = 2,
	IBV_MTU_1024 = 3,
	IBV_MTU_2048 = 4,
	IBV_MTU_4096 = 5,
};

enum ibv_port_state {
	IBV_PORT_NOP = 0,
	IBV_PORT_DOWN = 1,
	IBV_PORT_INIT = 2,
	IBV_PORT_ARMED = 3,
	IBV_PORT_ACTIVE = 4,
	IBV_PORT_ACTIVE_DEFER = 5,
};

/* ibv_port_attr.link_layer */
enum {
	IBV_LINK_LAYER_UNSPECIFIED,
	IBV_LINK_LAYER_INFINIBAND,
	IBV_LINK_LAYER_ETHERNET,
};

/* ibv_port_attr.port_cap_flags (the IB PortInfo CapabilityMask). */
enum ibv_port_cap_flags {
	IBV_PORT_SM = 1 << 1,
	IBV_PORT_NOTICE_SUP = 1 << 2,
	IBV_PORT_TRAP_SUP = 1 << 3,
	IBV_PORT_OPT_IPD_SUP = 1 << 4,
	IBV_PORT_AUTO_MIGR_SUP = 1 << 5,
	IBV_PORT_SL_MAP_SUP = 1 << 6,
	IBV_PORT_MKEY_NVRAM = 1 << 7,
	IBV_PORT_PKEY_NVRAM = 1 << 8,
	IBV_PORT_LED_INFO_SUP = 1 << 9,
	IBV_PORT_SYS_IMAGE_GUID_SUP = 1 << 11,
	IBV_PORT_PKEY_SW_EXT_PORT_TRAP_SUP = 1 << 12,
	IBV_PORT_EXTENDED_SPEEDS_SUP = 1 << 14,
	IBV_PORT_CAP_MASK2_SUP = 1 << 15,
	IBV_PORT_CM_SUP = 1 << 16,
	IBV_PORT_SNMP_TUNNEL_SUP = 1 << 17,
	IBV_PORT_REINIT_SUP = 1 << 18,
	IBV_PORT_DEVICE_MGMT_SUP = 1 << 19,
	IBV_PORT_VENDOR_CLASS_SUP = 1 << 20,
	IBV_PORT_DR_NOTICE_SUP = 1 << 21,
	IBV_PORT_CAP_MASK_NOTICE_SUP = 1 << 22,
	IBV_PORT_BOOT_MGMT_SUP = 1 << 23,
	IBV_PORT_LINK_LATENCY_SUP = 1 << 24,
	IBV_PORT_CLIENT_REG_SUP = 1 << 25,
	IBV_PORT_IP_BASED_GIDS = 1 << 26,
};

/* ibv_port_attr.port_cap_flags2 (PortInfo CapabilityMask2). */
enum ibv_port_cap_flags2 {
	IBV_PORT_SET_NODE_DESC_SUP = 1 << 0,
	IBV_PORT_INFO_EXT_SUP = 1 << 1,
	IBV_PORT_VIRT_SUP = 1 << 2,
	IBV_PORT_SWITCH_PORT_STATE_TABLE_SUP = 1 << 3,
	IBV_PORT_LINK_WIDTH_2X_SUP = 1 << 4,
	IBV_PORT_LINK_SPEED_HDR_SUP = 1 << 5,
	IBV_PORT_LINK_SPEED_NDR_SUP = 1 << 10,
#if _OPENVERBS_ABI >= 56
	IBV_PORT_LINK_SPEED_XDR_SUP = 1 << 12,
#endif
};

struct ibv_port_attr {
	enum ibv_port_state state;
	enum ibv_mtu max_mtu;
	enum ibv_mtu active_mtu;
	int gid_tbl_len;
	uint32_t port_cap_flags;	/* enum ibv_port_cap_flags */
	uint32_t max_msg_sz;
	uint32_t bad_pkey_cntr;
	uint32_t qkey_viol_cntr;
	uint16_t pkey_tbl_len;
	uint16_t lid;
	uint16_t sm_lid;
	uint8_t lmc;
	uint8_t max_vl_num;
	uint8_t sm_sl;
	uint8_t subnet_timeout;
	uint8_t init_type_reply;
	uint8_t active_width;
	uint8_t active_speed;
	uint8_t phys_state;
	uint8_t link_layer;	/* IBV_LINK_LAYER_* */
	uint8_t flags;		/* IBV_QPF_GRH_REQUIRED */
	uint16_t port_cap_flags2;	/* enum ibv_port_cap_flags2 */
#if _OPENVERBS_ABI >= 56
	/*
	 * rdma-core 56: the active speed as the kernel's extended value
	 * (IB_SPEED_* bits, including XDR), 0 when the kernel or device does
	 * not report one (then active_speed alone holds the speed).
	 */
	uint32_t active_speed_ex;
#endif
};

/* ==== Asynchronous events (ibv_get_async_event(3)) ==== */

enum ibv_event_type {
	IBV_EVENT_CQ_ERR,
	IBV_EVENT_QP_FATAL,
	IBV_EVENT_QP_REQ_ERR,
	IBV_EVENT_QP_ACCESS_ERR,
	IBV_EVENT_COMM_EST,
	IBV_EVENT_SQ_DRAINED,
	IBV_EVENT_PATH_MIG,
	IBV_EVENT_PATH_MIG_ERR,
	IBV_EVENT_DEVICE_FATAL,
	IBV_EVENT_PORT_ACTIVE,
	IBV_EVENT_PORT_ERR,
	IBV_EVENT_LID_CHANGE,
	IBV_EVENT_PKEY_CHANGE,
	IBV_EVENT_SM_CHANGE,
	IBV_EVENT_SRQ_ERR,
	IBV_EVENT_SRQ_LIMIT_REACHED,
	IBV_EVENT_QP_LAST_WQE_REACHED,
	IBV_EVENT_CLIENT_REREGISTER,
	IBV_EVENT_GID_CHANGE,
	IBV_EVENT_WQ_FATAL,
#if _OPENVERBS_ABI >= 64
	/* rdma-core 64: the effective speed of a port changed
	 * (ibv_query_port_speed(3) tells the new one). */
	IBV_EVENT_DEVICE_SPEED_CHANGE,
#endif
};

/* element: the object the event concerns, chosen by event_type. */
struct ibv_async_event {
	union {
		struct ibv_cq *cq;
		struct ibv_qp *qp;
		struct ibv_srq *srq;
		struct ibv_wq *wq;
		int port_num;
	} element;
	enum ibv_event_type event_type;
};

/* ==== Work completions (ibv_poll_cq(3), ibv_create_cq_ex(3)) ==== */

enum ibv_wc_status {
	IBV_WC_SUCCESS,
	IBV_WC_LOC_LEN_ERR,
	IBV_WC_LOC_QP_OP_ERR,
	IBV_WC_LOC_EEC_OP_ERR,
	IBV_WC_LOC_PROT_ERR,
	IBV_WC_WR_FLUSH_ERR,
	IBV_WC_MW_BIND_ERR,
	IBV_WC_BAD_RESP_ERR,
	IBV_WC_LOC_ACCESS_ERR,
	IBV_WC_REM_INV_REQ_ERR,
	IBV_WC_REM_ACCESS_ERR,
	IBV_WC_REM_OP_ERR,
	IBV_WC_RETRY_EXC_ERR,
	IBV_WC_RNR_RETRY_EXC_ERR,
	IBV_WC_LOC_RDD_VIOL_ERR,
	IBV_WC_REM_INV_RD_REQ_ERR,
	IBV_WC_REM_ABORT_ERR,
	IBV_WC_INV_EECN_ERR,
	IBV_WC_INV_EEC_STATE_ERR,
	IBV_WC_FATAL_ERR,
	IBV_WC_RESP_TIMEOUT_ERR,
	IBV_WC_GENERAL_ERR,
	IBV_WC_TM_ERR,
	IBV_WC_TM_RNDV_INCOMPLETE,
};

/* Text for a completion status (ibv_wc_status_str(3)); never NULL. */
const char *ibv_wc_status_str(enum ibv_wc_status status);

enum ibv_wc_opcode {
	IBV_WC_SEND,
	IBV_WC_RDMA_WRITE,
	IBV_WC_RDMA_READ,
	IBV_WC_COMP_SWAP,
	IBV_WC_FETCH_ADD,
	IBV_WC_BIND_MW,
	IBV_WC_LOCAL_INV,
	IBV_WC_TSO,
#if _OPENVERBS_ABI >= 56
	IBV_WC_FLUSH,			/* 8: ibv_wr_flush() completed */
#endif
	IBV_WC_ATOMIC_WRITE = 9,
	/* Receive-side opcodes have bit 7 set. */
	IBV_WC_RECV = 1 << 7,
	IBV_WC_RECV_RDMA_WITH_IMM,

	IBV_WC_TM_ADD,
	IBV_WC_TM_DEL,
	IBV_WC_TM_SYNC,
	IBV_WC_TM_RECV,
	IBV_WC_TM_NO_TAG,
	IBV_WC_DRIVER1,
	IBV_WC_DRIVER2,
	IBV_WC_DRIVER3,
};

enum {
	IBV_WC_IP_CSUM_OK_SHIFT = 2,
};

/* ibv_cq_init_attr_ex.wc_flags: which fields ibv_wc_read_*() may read. */
enum ibv_create_cq_wc_flags {
	IBV_WC_EX_WITH_BYTE_LEN = 1 << 0,
	IBV_WC_EX_WITH_IMM = 1 << 1,
	IBV_WC_EX_WITH_QP_NUM = 1 << 2,
	IBV_WC_EX_WITH_SRC_QP = 1 << 3,
	IBV_WC_EX_WITH_SLID = 1 << 4,
	IBV_WC_EX_WITH_SL = 1 << 5,
	IBV_WC_EX_WITH_DLID_PATH_BITS = 1 << 6,
	IBV_WC_EX_WITH_COMPLETION_TIMESTAMP = 1 << 7,
	IBV_WC_EX_WITH_CVLAN = 1 << 8,
	IBV_WC_EX_WITH_FLOW_TAG = 1 << 9,
	IBV_WC_EX_WITH_TM_INFO = 1 << 10,
	IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK = 1 << 11,
};

/* The fields struct ibv_wc always carries. */
enum {
	IBV_WC_STANDARD_FLAGS = IBV_WC_EX_WITH_BYTE_LEN |
				IBV_WC_EX_WITH_IMM |
				IBV_WC_EX_WITH_QP_NUM |
				IBV_WC_EX_WITH_SRC_QP |
				IBV_WC_EX_WITH_SLID |
				IBV_WC_EX_WITH_SL |
				IBV_WC_EX_WITH_DLID_PATH_BITS,
};

/* Every wc_flags bit the library accepts in ibv_create_cq_ex(3). */
enum {
	/* int operands: C++20 deprecates "|" between different enum types */
	IBV_CREATE_CQ_SUP_WC_FLAGS =
		(int)IBV_WC_STANDARD_FLAGS |
		(int)IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
		(int)IBV_WC_EX_WITH_CVLAN |
		(int)IBV_WC_EX_WITH_FLOW_TAG |
		(int)IBV_WC_EX_WITH_TM_INFO |
		(int)IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
};

/* ibv_wc.wc_flags */
enum ibv_wc_flags {
	IBV_WC_GRH = 1 << 0,
	IBV_WC_WITH_IMM = 1 << 1,
	IBV_WC_IP_CSUM_OK = 1 << IBV_WC_IP_CSUM_OK_SHIFT,
	IBV_WC_WITH_INV = 1 << 3,
	IBV_WC_TM_SYNC_REQ = 1 << 4,
	IBV_WC_TM_MATCH = 1 << 5,
	IBV_WC_TM_DATA_VALID = 1 << 6,
};

struct ibv_wc {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t vendor_err;
	uint32_t byte_len;
	/*
	 * imm_data (network order) when wc_flags has IBV_WC_WITH_IMM;
	 * invalidated_rkey when it has IBV_WC_WITH_INV.
	 */
	union {
		__be32 imm_data;
		uint32_t invalidated_rkey;
	};
	uint32_t qp_num;
	uint32_t src_qp;
	unsigned int wc_flags;	/* enum ibv_wc_flags */
	uint16_t pkey_index;
	uint16_t slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
};

/* ==== Memory registration and protection ==== */

/* Access rights of MRs, MWs and QPs (ibv_reg_mr(3)). */
enum ibv_access_flags {
	IBV_ACCESS_LOCAL_WRITE = 1,
	IBV_ACCESS_REMOTE_WRITE = (1 << 1),
	IBV_ACCESS_REMOTE_READ = (1 << 2),
	IBV_ACCESS_REMOTE_ATOMIC = (1 << 3),
	IBV_ACCESS_MW_BIND = (1 << 4),
	IBV_ACCESS_ZERO_BASED = (1 << 5),
	IBV_ACCESS_ON_DEMAND = (1 << 6),
	IBV_ACCESS_HUGETLB = (1 << 7),
#if _OPENVERBS_ABI >= 56
	/* The region may be the target of a flush to global visibility /
	 * to persistence (ibv_wr_flush(3)). */
	IBV_ACCESS_FLUSH_GLOBAL = (1 << 8),
	IBV_ACCESS_FLUSH_PERSISTENT = (1 << 9),
#endif
	IBV_ACCESS_RELAXED_ORDERING = IBV_ACCESS_OPTIONAL_FIRST,
};

/* Memory-window binding parameters (ibv_bind_mw(3)). */
struct ibv_mw_bind_info {
	struct ibv_mr *mr;
	uint64_t addr;
	uint64_t length;
	unsigned int mw_access_flags;	/* enum ibv_access_flags */
};

struct ibv_pd {
	struct ibv_context *context;
	uint32_t handle;
};

/* Thread domains (ibv_alloc_td(3)). */
struct ibv_td_init_attr {
	uint32_t comp_mask;
};

struct ibv_td {
	struct ibv_context *context;
};

/* XRC domains (ibv_open_xrcd(3)). */
enum ibv_xrcd_init_attr_mask {
	IBV_XRCD_INIT_ATTR_FD = 1 << 0,
	IBV_XRCD_INIT_ATTR_OFLAGS = 1 << 1,
	IBV_XRCD_INIT_ATTR_RESERVED = 1 << 2,
};

struct ibv_xrcd_init_attr {
	uint32_t comp_mask;	/* enum ibv_xrcd_init_attr_mask */
	int fd;			/* file naming the domain, or -1 */
	int oflags;		/* O_CREAT, O_EXCL */
};

struct ibv_xrcd {
	struct ibv_context *context;
};

/* ibv_rereg_mr(3) flags. */
enum ibv_rereg_mr_flags {
	IBV_REREG_MR_CHANGE_TRANSLATION = (1 << 0),
	IBV_REREG_MR_CHANGE_PD = (1 << 1),
	IBV_REREG_MR_CHANGE_ACCESS = (1 << 2),
	IBV_REREG_MR_FLAGS_SUPPORTED = ((IBV_REREG_MR_CHANGE_ACCESS << 1) - 1),
};

struct ibv_mr {
	struct ibv_context *context;
	struct ibv_pd *pd;
	void *addr;
	size_t length;
	uint32_t handle;
	uint32_t lkey;
	uint32_t rkey;
};

enum ibv_mw_type {
	IBV_MW_TYPE_1 = 1,
	IBV_MW_TYPE_2 = 2,
};

struct ibv_mw {
	struct ibv_context *context;
	struct ibv_pd *pd;
	uint32_t rkey;
	uint32_t handle;
	enum ibv_mw_type type;
};

#if _OPENVERBS_ABI >= 64
/* A DMA handle (ibv_alloc_dmah(3), rdma-core 64): steering hints (TPH) the
 * device attaches to the DMA of MRs registered with it. */
struct ibv_dmah {
	struct ibv_context *context;
};

/* A buffer of ibv_alloc_buf(3) (rdma-core 64); opaque to applications. */
struct ibv_buf;

/* comp_mask of struct ibv_mr_init_attr: which optional fields are valid. */
enum ibv_mr_init_attr_mask {
	IBV_REG_MR_MASK_IOVA = 1 << 0,
	IBV_REG_MR_MASK_ADDR = 1 << 1,
	IBV_REG_MR_MASK_FD = 1 << 2,
	IBV_REG_MR_MASK_FD_OFFSET = 1 << 3,
	IBV_REG_MR_MASK_DMAH = 1 << 4,
	IBV_REG_MR_MASK_BUF = 1 << 5,
};

/* ibv_reg_mr_ex(3): one registration request; fields beyond length and
 * access are read only when their comp_mask bit is set. */
struct ibv_mr_init_attr {
	size_t length;		/* bytes */
	int access;		/* enum ibv_access_flags */
	uint64_t comp_mask;	/* enum ibv_mr_init_attr_mask */
	uint64_t iova;		/* address the MR is known by (IOVA) */
	void *addr;		/* start of the memory (ADDR) */
	int fd;			/* dma-buf file descriptor (FD) */
	uint64_t fd_offset;	/* offset of the region in the dma-buf (FD_OFFSET) */
	struct ibv_dmah *dmah;	/* DMA handle (DMAH) */
	struct ibv_buf *buf;	/* buffer of ibv_alloc_buf() (BUF); needs ADDR */
};
#endif

/* ==== Addressing ==== */

struct ibv_global_route {
	union ibv_gid dgid;
	uint32_t flow_label;
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
};

/* The IB global route header as it arrives ahead of UD payloads. */
struct ibv_grh {
	__be32 version_tclass_flow;
	__be16 paylen;
	uint8_t next_hdr;
	uint8_t hop_limit;
	union ibv_gid sgid;
	union ibv_gid dgid;
};

/* Static rates (ibv_modify_qp(3)); values follow the IB encoding. */
enum ibv_rate {
	IBV_RATE_MAX = 0,
	IBV_RATE_2_5_GBPS = 2,
	IBV_RATE_5_GBPS = 5,
	IBV_RATE_10_GBPS = 3,
	IBV_RATE_20_GBPS = 6,
	IBV_RATE_30_GBPS = 4,
	IBV_RATE_40_GBPS = 7,
	IBV_RATE_60_GBPS = 8,
	IBV_RATE_80_GBPS = 9,
	IBV_RATE_120_GBPS = 10,
	IBV_RATE_14_GBPS = 11,
	IBV_RATE_56_GBPS = 12,
	IBV_RATE_112_GBPS = 13,
	IBV_RATE_168_GBPS = 14,
	IBV_RATE_25_GBPS = 15,
	IBV_RATE_100_GBPS = 16,
	IBV_RATE_200_GBPS = 17,
	IBV_RATE_300_GBPS = 18,
	IBV_RATE_28_GBPS = 19,
	IBV_RATE_50_GBPS = 20,
	IBV_RATE_400_GBPS = 21,
	IBV_RATE_600_GBPS = 22,
	IBV_RATE_800_GBPS = 23,
	IBV_RATE_1200_GBPS = 24,
};

/*
 * Rate conversions (ibv_rate_to_mult(3), ibv_rate_to_mbps(3)): multiples
 * of 2.5 Gbit/s and Mbit/s; unknown input gives 0 / -1 / IBV_RATE_MAX.
 */
int __attribute_const ibv_rate_to_mult(enum ibv_rate rate);
enum ibv_rate __attribute_const mult_to_ibv_rate(int mult);
int __attribute_const ibv_rate_to_mbps(enum ibv_rate rate);
enum ibv_rate __attribute_const mbps_to_ibv_rate(int mbps);

struct ibv_ah_attr {
	struct ibv_global_route grh;
	uint16_t dlid;
	uint8_t sl;
	uint8_t src_path_bits;
	uint8_t static_rate;	/* enum ibv_rate */
	uint8_t is_global;
	uint8_t port_num;
};

/* ==== Shared receive queues (ibv_create_srq(3), ibv_create_srq_ex(3)) ==== */

enum ibv_srq_attr_mask {
	IBV_SRQ_MAX_WR = 1 << 0,
	IBV_SRQ_LIMIT = 1 << 1,
};

struct ibv_srq_attr {
	uint32_t max_wr;
	uint32_t max_sge;
	uint32_t srq_limit;
};

struct ibv_srq_init_attr {
	void *srq_context;
	struct ibv_srq_attr attr;
};

enum ibv_srq_type {
	IBV_SRQT_BASIC,
	IBV_SRQT_XRC,
	IBV_SRQT_TM,
};

enum ibv_srq_init_attr_mask {
	IBV_SRQ_INIT_ATTR_TYPE = 1 << 0,
	IBV_SRQ_INIT_ATTR_PD = 1 << 1,
	IBV_SRQ_INIT_ATTR_XRCD = 1 << 2,
	IBV_SRQ_INIT_ATTR_CQ = 1 << 3,
	IBV_SRQ_INIT_ATTR_TM = 1 << 4,
	IBV_SRQ_INIT_ATTR_RESERVED = 1 << 5,
};

/* Tag-matching SRQ sizing. */
struct ibv_tm_cap {
	uint32_t max_num_tags;
	uint32_t max_ops;
};

/* Starts with the fields of struct ibv_srq_init_attr (same offsets). */
struct ibv_srq_init_attr_ex {
	void *srq_context;
	struct ibv_srq_attr attr;

	uint32_t comp_mask;	/* enum ibv_srq_init_attr_mask */
	enum ibv_srq_type srq_type;
	struct ibv_pd *pd;
	struct ibv_xrcd *xrcd;
	struct ibv_cq *cq;
	struct ibv_tm_cap tm_cap;
};

/* ==== Work queues and indirection tables (ibv_create_wq(3), ibv_create_rwq_ind_table(3)) ==== */

enum ibv_wq_type {
	IBV_WQT_RQ,
};

enum ibv_wq_init_attr_mask {
	IBV_WQ_INIT_ATTR_FLAGS = 1 << 0,
	IBV_WQ_INIT_ATTR_RESERVED = 1 << 1,
};

enum ibv_wq_flags {
	IBV_WQ_FLAGS_CVLAN_STRIPPING = 1 << 0,
	IBV_WQ_FLAGS_SCATTER_FCS = 1 << 1,
	IBV_WQ_FLAGS_DELAY_DROP = 1 << 2,
	IBV_WQ_FLAGS_PCI_WRITE_END_PADDING = 1 << 3,
	IBV_WQ_FLAGS_RESERVED = 1 << 4,
};

struct ibv_wq_init_attr {
	void *wq_context;
	enum ibv_wq_type wq_type;
	uint32_t max_wr;
	uint32_t max_sge;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	uint32_t comp_mask;	/* enum ibv_wq_init_attr_mask */
	uint32_t create_flags;	/* enum ibv_wq_flags */
};

enum ibv_wq_state {
	IBV_WQS_RESET,
	IBV_WQS_RDY,
	IBV_WQS_ERR,
	IBV_WQS_UNKNOWN,
};

enum ibv_wq_attr_mask {
	IBV_WQ_ATTR_STATE = 1 << 0,
	IBV_WQ_ATTR_CURR_STATE = 1 << 1,
	IBV_WQ_ATTR_FLAGS = 1 << 2,
	IBV_WQ_ATTR_RESERVED = 1 << 3,
};

struct ibv_wq_attr {
	uint32_t attr_mask;	/* enum ibv_wq_attr_mask */
	enum ibv_wq_state wq_state;
	enum ibv_wq_state curr_wq_state;
	uint32_t flags;		/* enum ibv_wq_flags */
	uint32_t flags_mask;
};

struct ibv_rwq_ind_table {
	struct ibv_context *context;
	int ind_tbl_handle;
	int ind_tbl_num;
	uint32_t comp_mask;
};

enum ibv_ind_table_init_attr_mask {
	IBV_CREATE_IND_TABLE_RESERVED = (1 << 0),
};

struct ibv_rwq_ind_table_init_attr {
	uint32_t log_ind_tbl_size;
	struct ibv_wq **ind_tbl;	/* 1 << log_ind_tbl_size entries */
	uint32_t comp_mask;
};

/* ==== Queue pairs (ibv_create_qp(3), ibv_create_qp_ex(3), ibv_modify_qp(3)) ==== */

enum ibv_qp_type {
	IBV_QPT_RC = 2,
	IBV_QPT_UC,
	IBV_QPT_UD,
	IBV_QPT_RAW_PACKET = 8,
	IBV_QPT_XRC_SEND = 9,
	IBV_QPT_XRC_RECV,
	IBV_QPT_DRIVER = 0xff,
};

struct ibv_qp_cap {
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;	/* bytes */
};

struct ibv_qp_init_attr {
	void *qp_context;
	struct ibv_cq *send_cq;
	struct ibv_cq *recv_cq;
	struct ibv_srq *srq;
	struct ibv_qp_cap cap;
	enum ibv_qp_type qp_type;
	int sq_sig_all;
};

enum ibv_qp_init_attr_mask {
	IBV_QP_INIT_ATTR_PD = 1 << 0,
	IBV_QP_INIT_ATTR_XRCD = 1 << 1,
	IBV_QP_INIT_ATTR_CREATE_FLAGS = 1 << 2,
	IBV_QP_INIT_ATTR_MAX_TSO_HEADER = 1 << 3,
	IBV_QP_INIT_ATTR_IND_TABLE = 1 << 4,
	IBV_QP_INIT_ATTR_RX_HASH = 1 << 5,
	IBV_QP_INIT_ATTR_SEND_OPS_FLAGS = 1 << 6,
};

enum ibv_qp_create_flags {
	IBV_QP_CREATE_BLOCK_SELF_MCAST_LB = 1 << 1,
	IBV_QP_CREATE_SCATTER_FCS = 1 << 8,
	IBV_QP_CREATE_CVLAN_STRIPPING = 1 << 9,
	IBV_QP_CREATE_SOURCE_QPN = 1 << 10,
	IBV_QP_CREATE_PCI_WRITE_END_PADDING = 1 << 11,
};

/* ibv_qp_init_attr_ex.send_ops_flags: the ibv_wr_*() builders wanted. */
enum ibv_qp_create_send_ops_flags {
	IBV_QP_EX_WITH_RDMA_WRITE = 1 << 0,
	IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM = 1 << 1,
	IBV_QP_EX_WITH_SEND = 1 << 2,
	IBV_QP_EX_WITH_SEND_WITH_IMM = 1 << 3,
	IBV_QP_EX_WITH_RDMA_READ = 1 << 4,
	IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP = 1 << 5,
	IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD = 1 << 6,
	IBV_QP_EX_WITH_LOCAL_INV = 1 << 7,
	IBV_QP_EX_WITH_BIND_MW = 1 << 8,
	IBV_QP_EX_WITH_SEND_WITH_INV = 1 << 9,
	IBV_QP_EX_WITH_TSO = 1 << 10,
#if _OPENVERBS_ABI >= 56
	IBV_QP_EX_WITH_FLUSH = 1 << 11,
#endif
	IBV_QP_EX_WITH_ATOMIC_WRITE = 1 << 12,
};

/* RSS configuration of a receive QP built on an indirection table. */
struct ibv_rx_hash_conf {
	uint8_t rx_hash_function;	/* enum ibv_rx_hash_function_flags */
	uint8_t rx_hash_key_len;	/* bytes at rx_hash_key */
	uint8_t *rx_hash_key;
	uint64_t rx_hash_fields_mask;	/* enum ibv_rx_hash_fields */
};

/* Starts with the fields of struct ibv_qp_init_attr (same offsets). */
struct ibv_qp_init_attr_ex {
	void *qp_context;
	struct ibv_cq *send_cq;
	struct ibv_cq *recv_cq;
	struct ibv_srq *srq;
	struct ibv_qp_cap cap;
	enum ibv_qp_type qp_type;
	int sq_sig_all;

	uint32_t comp_mask;	/* enum ibv_qp_init_attr_mask */
	struct ibv_pd *pd;
	struct ibv_xrcd *xrcd;
	uint32_t create_flags;	/* enum ibv_qp_create_flags */
	uint16_t max_tso_header;
	struct ibv_rwq_ind_table *rwq_ind_tbl;
	struct ibv_rx_hash_conf rx_hash_conf;
	uint32_t source_qpn;
	uint64_t send_ops_flags;	/* enum ibv_qp_create_send_ops_flags */
};

/* ibv_open_qp(3) */
enum ibv_qp_open_attr_mask {
	IBV_QP_OPEN_ATTR_NUM = 1 << 0,
	IBV_QP_OPEN_ATTR_XRCD = 1 << 1,
	IBV_QP_OPEN_ATTR_CONTEXT = 1 << 2,
	IBV_QP_OPEN_ATTR_TYPE = 1 << 3,
	IBV_QP_OPEN_ATTR_RESERVED = 1 << 4,
};

struct ibv_qp_open_attr {
	uint32_t comp_mask;	/* enum ibv_qp_open_attr_mask */
	uint32_t qp_num;
	struct ibv_xrcd *xrcd;
	void *qp_context;
	enum ibv_qp_type qp_type;
};

/* ibv_modify_qp(3)/ibv_query_qp(3) attr_mask. */
enum ibv_qp_attr_mask {
	IBV_QP_STATE = 1 << 0,
	IBV_QP_CUR_STATE = 1 << 1,
	IBV_QP_EN_SQD_ASYNC_NOTIFY = 1 << 2,
	IBV_QP_ACCESS_FLAGS = 1 << 3,
	IBV_QP_PKEY_INDEX = 1 << 4,
	IBV_QP_PORT = 1 << 5,
	IBV_QP_QKEY = 1 << 6,
	IBV_QP_AV = 1 << 7,
	IBV_QP_PATH_MTU = 1 << 8,
	IBV_QP_TIMEOUT = 1 << 9,
	IBV_QP_RETRY_CNT = 1 << 10,
	IBV_QP_RNR_RETRY = 1 << 11,
	IBV_QP_RQ_PSN = 1 << 12,
	IBV_QP_MAX_QP_RD_ATOMIC = 1 << 13,
	IBV_QP_ALT_PATH = 1 << 14,
	IBV_QP_MIN_RNR_TIMER = 1 << 15,
	IBV_QP_SQ_PSN = 1 << 16,
	IBV_QP_MAX_DEST_RD_ATOMIC = 1 << 17,
	IBV_QP_PATH_MIG_STATE = 1 << 18,
	IBV_QP_CAP = 1 << 19,
	IBV_QP_DEST_QPN = 1 << 20,
	/* bits 21..24 are kernel-internal */
	IBV_QP_RATE_LIMIT = 1 << 25,
};

#if _OPENVERBS_ABI >= 56
/* flags of ibv_query_qp_data_in_order(3) (rdma-core 56). */
enum ibv_query_qp_data_in_order_flags {
	/* answer with a vector of the capabilities below instead of 0/1 */
	IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS = 1 << 0,
#if _OPENVERBS_ABI >= 64
	/* rdma-core 64: the device's own guarantee, before the host's PCIe
	 * ordering is taken into account */
	IBV_QUERY_QP_DATA_IN_ORDER_DEVICE_ONLY = 1 << 1,
#endif
};

/* Capability bits of ibv_query_qp_data_in_order(3) (rdma-core 56). */
enum ibv_query_qp_data_in_order_caps {
	/* the data of one whole message is written in order */
	IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG = 1 << 0,
	/* data is written in order in aligned 128-byte blocks */
	IBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES = 1 << 1,
};
#endif

enum ibv_qp_state {
	IBV_QPS_RESET,
	IBV_QPS_INIT,
	IBV_QPS_RTR,
	IBV_QPS_RTS,
	IBV_QPS_SQD,
	IBV_QPS_SQE,
	IBV_QPS_ERR,
	IBV_QPS_UNKNOWN,
};

enum ibv_mig_state {
	IBV_MIG_MIGRATED,
	IBV_MIG_REARM,
	IBV_MIG_ARMED,
};

struct ibv_qp_attr {
	enum ibv_qp_state qp_state;
	enum ibv_qp_state cur_qp_state;
	enum ibv_mtu path_mtu;
	enum ibv_mig_state path_mig_state;
	uint32_t qkey;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint32_t dest_qp_num;
	unsigned int qp_access_flags;	/* enum ibv_access_flags */
	struct ibv_qp_cap cap;
	struct ibv_ah_attr ah_attr;
	struct ibv_ah_attr alt_ah_attr;
	uint16_t pkey_index;
	uint16_t alt_pkey_index;
	uint8_t en_sqd_async_notify;
	uint8_t sq_draining;
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t min_rnr_timer;
	uint8_t port_num;
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t alt_port_num;
	uint8_t alt_timeout;
	uint32_t rate_limit;	/* kbps */
};

/* ibv_modify_qp_rate_limit(3) */
struct ibv_qp_rate_limit_attr {
	uint32_t rate_limit;	/* kbps, 0 = unlimited */
	uint32_t max_burst_sz;	/* bytes */
	uint16_t typical_pkt_sz;	/* bytes */
	uint32_t comp_mask;
};

/* ==== Work requests (ibv_post_send(3), ibv_post_recv(3)) ==== */

enum ibv_wr_opcode {
	IBV_WR_RDMA_WRITE,
	IBV_WR_RDMA_WRITE_WITH_IMM,
	IBV_WR_SEND,
	IBV_WR_SEND_WITH_IMM,
	IBV_WR_RDMA_READ,
	IBV_WR_ATOMIC_CMP_AND_SWP,
	IBV_WR_ATOMIC_FETCH_AND_ADD,
	IBV_WR_LOCAL_INV,
	IBV_WR_BIND_MW,
	IBV_WR_SEND_WITH_INV,
	IBV_WR_TSO,
	IBV_WR_DRIVER1,
#if _OPENVERBS_ABI >= 56
	IBV_WR_FLUSH = 14,
#endif
	IBV_WR_ATOMIC_WRITE = 15,
};

#if _OPENVERBS_ABI >= 56
/*
 * Name of a work request opcode (ibv_wr_opcode_str(3), rdma-core 56), e.g.
 * "RDMA_WRITE" for IBV_WR_RDMA_WRITE; "unknown" for a value that is no
 * opcode. Never NULL.
 */
const char *ibv_wr_opcode_str(enum ibv_wr_opcode opcode);
#endif

enum ibv_send_flags {
	IBV_SEND_FENCE = 1 << 0,
	IBV_SEND_SIGNALED = 1 << 1,
	IBV_SEND_SOLICITED = 1 << 2,
	IBV_SEND_INLINE = 1 << 3,
	IBV_SEND_IP_CSUM = 1 << 4,
};

#if _OPENVERBS_ABI >= 56
/* type of ibv_wr_flush(3): which point the data must reach (bit set). */
enum ibv_placement_type {
	IBV_FLUSH_GLOBAL = 1U << 0,	/* visible to every agent */
	IBV_FLUSH_PERSISTENT = 1U << 1,	/* persistent (survives power loss) */
};

/* level of ibv_wr_flush(3): what is flushed. */
enum ibv_selectivity_level {
	IBV_FLUSH_RANGE = 0,		/* the given range of the region */
	IBV_FLUSH_MR,			/* the whole region of the rkey */
};
#endif

/* A host buffer for ibv_wr_set_inline_data_list(). */
struct ibv_data_buf {
	void *addr;
	size_t length;
};

/* A scatter/gather element: registered memory addr..addr+length. */
struct ibv_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

struct ibv_send_wr {
	uint64_t wr_id;
	struct ibv_send_wr *next;
	struct ibv_sge *sg_list;
	int num_sge;
	enum ibv_wr_opcode opcode;
	unsigned int send_flags;	/* enum ibv_send_flags */
	/* imm_data in network order; invalidate_rkey for SEND_WITH_INV */
	union {
		__be32 imm_data;
		uint32_t invalidate_rkey;
	};
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
			struct ibv_ah *ah;
			uint32_t remote_qpn;
			uint32_t remote_qkey;
		} ud;
	} wr;
	union {
		struct {
			uint32_t remote_srqn;
		} xrc;
	} qp_type;
	union {
		struct {
			struct ibv_mw *mw;
			uint32_t rkey;
			struct ibv_mw_bind_info bind_info;
		} bind_mw;
		struct {
			void *hdr;
			uint16_t hdr_sz;
			uint16_t mss;
		} tso;
	};
};

struct ibv_recv_wr {
	uint64_t wr_id;
	struct ibv_recv_wr *next;
	struct ibv_sge *sg_list;
	int num_sge;
};

/* Tag-matching list operations (ibv_post_srq_ops(3)). */
enum ibv_ops_wr_opcode {
	IBV_WR_TAG_ADD,
	IBV_WR_TAG_DEL,
	IBV_WR_TAG_SYNC,
};

enum ibv_ops_flags {
	IBV_OPS_SIGNALED = 1 << 0,
	IBV_OPS_TM_SYNC = 1 << 1,
};

struct ibv_ops_wr {
	uint64_t wr_id;
	struct ibv_ops_wr *next;
	enum ibv_ops_wr_opcode opcode;
	int flags;		/* enum ibv_ops_flags */
	struct {
		uint32_t unexpected_cnt;
		uint32_t handle;
		struct {
			uint64_t recv_wr_id;
			struct ibv_sge *sg_list;
			int num_sge;
			uint64_t tag;
			uint64_t mask;
		} add;
	} tm;
};

/* ibv_bind_mw(3) */
struct ibv_mw_bind {
	uint64_t wr_id;
	unsigned int send_flags;	/* enum ibv_send_flags */
	struct ibv_mw_bind_info bind_info;
};

/* ==== Verbs objects ==== */

struct ibv_srq {
	struct ibv_context *context;
	void *srq_context;
	struct ibv_pd *pd;
	uint32_t handle;

	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t events_completed;
};

/*
 * A receive work queue.  post_recv is the provider's entry point, called
 * by ibv_post_wq_recv(); mutex/cond/events_completed serve
 * ibv_ack_async_event() and are set up by ibv_create_wq().
 */
struct ibv_wq {
	struct ibv_context *context;
	void *wq_context;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	uint32_t wq_num;
	uint32_t handle;
	enum ibv_wq_state state;
	enum ibv_wq_type wq_type;
	int (*post_recv)(struct ibv_wq *current, struct ibv_recv_wr *recv_wr,
			 struct ibv_recv_wr **bad_recv_wr);
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t events_completed;
	uint32_t comp_mask;
};

struct ibv_qp {
	struct ibv_context *context;
	void *qp_context;
	struct ibv_pd *pd;
	struct ibv_cq *send_cq;
	struct ibv_cq *recv_cq;
	struct ibv_srq *srq;
	uint32_t handle;
	uint32_t qp_num;
	enum ibv_qp_state state;
	enum ibv_qp_type qp_type;

	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t events_completed;
};

/*
 * The extended QP (ibv_create_qp_ex(3) with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
 * ibv_wr_post(3)).  qp_base must stay first: ibv_qp_to_qp_ex() and the
 * providers convert between the two by address.  The wr_* members are the
 * provider's work-request builders called by the ibv_wr_*() inlines below;
 * wr_id and wr_flags (enum ibv_send_flags) apply to the next request.
 */
struct ibv_qp_ex {
	struct ibv_qp qp_base;
	uint64_t comp_mask;

	uint64_t wr_id;
	unsigned int wr_flags;

	void (*wr_atomic_cmp_swp)(struct ibv_qp_ex *qp, uint32_t rkey,
				  uint64_t remote_addr, uint64_t compare,
				  uint64_t swap);
	void (*wr_atomic_fetch_add)(struct ibv_qp_ex *qp, uint32_t rkey,
				    uint64_t remote_addr, uint64_t add);
	void (*wr_bind_mw)(struct ibv_qp_ex *qp, struct ibv_mw *mw,
			   uint32_t rkey,
			   const struct ibv_mw_bind_info *bind_info);
	void (*wr_local_inv)(struct ibv_qp_ex *qp, uint32_t invalidate_rkey);
	void (*wr_rdma_read)(struct ibv_qp_ex *qp, uint32_t rkey,
			     uint64_t remote_addr);
	void (*wr_rdma_write)(struct ibv_qp_ex *qp, uint32_t rkey,
			      uint64_t remote_addr);
	void (*wr_rdma_write_imm)(struct ibv_qp_ex *qp, uint32_t rkey,
				  uint64_t remote_addr, __be32 imm_data);

	void (*wr_send)(struct ibv_qp_ex *qp);
	void (*wr_send_imm)(struct ibv_qp_ex *qp, __be32 imm_data);
	void (*wr_send_inv)(struct ibv_qp_ex *qp, uint32_t invalidate_rkey);
	void (*wr_send_tso)(struct ibv_qp_ex *qp, void *hdr, uint16_t hdr_sz,
			    uint16_t mss);

	void (*wr_set_ud_addr)(struct ibv_qp_ex *qp, struct ibv_ah *ah,
			       uint32_t remote_qpn, uint32_t remote_qkey);
	void (*wr_set_xrc_srqn)(struct ibv_qp_ex *qp, uint32_t remote_srqn);

	void (*wr_set_inline_data)(struct ibv_qp_ex *qp, void *addr,
				   size_t length);
	void (*wr_set_inline_data_list)(struct ibv_qp_ex *qp, size_t num_buf,
					const struct ibv_data_buf *buf_list);
	void (*wr_set_sge)(struct ibv_qp_ex *qp, uint32_t lkey, uint64_t addr,
			   uint32_t length);
	void (*wr_set_sge_list)(struct ibv_qp_ex *qp, size_t num_sge,
				const struct ibv_sge *sg_list);

	void (*wr_start)(struct ibv_qp_ex *qp);
	int (*wr_complete)(struct ibv_qp_ex *qp);
	void (*wr_abort)(struct ibv_qp_ex *qp);

	void (*wr_atomic_write)(struct ibv_qp_ex *qp, uint32_t rkey,
				uint64_t remote_addr,
				const void *atomic_wr);
#if _OPENVERBS_ABI >= 56
	/* rdma-core 56: ibv_wr_flush(3); type is enum ibv_placement_type
	 * bits, level an enum ibv_selectivity_level. */
	void (*wr_flush)(struct ibv_qp_ex *qp, uint32_t rkey,
			 uint64_t remote_addr, size_t len, uint8_t type,
			 uint8_t level);
#endif
};

/*
 * The ibv_qp_ex view of a QP created with ibv_create_qp_ex(3); NULL with
 * errno EOPNOTSUPP when the QP was not created as an extended QP
 * (ibv_wr_post(3)).
 */
struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp);

/* ibv_wr_post(3) builders: each calls the matching ibv_qp_ex slot. */
static inline void ibv_wr_atomic_cmp_swp(struct ibv_qp_ex *qp, uint32_t rkey,
					 uint64_t remote_addr, uint64_t compare,
					 uint64_t swap)
{
	qp->wr_atomic_cmp_swp(qp, rkey, remote_addr, compare, swap);
}

static inline void ibv_wr_atomic_fetch_add(struct ibv_qp_ex *qp, uint32_t rkey,
					   uint64_t remote_addr, uint64_t add)
{
	qp->wr_atomic_fetch_add(qp, rkey, remote_addr, add);
}

static inline void ibv_wr_bind_mw(struct ibv_qp_ex *qp, struct ibv_mw *mw,
				  uint32_t rkey,
				  const struct ibv_mw_bind_info *bind_info)
{
	qp->wr_bind_mw(qp, mw, rkey, bind_info);
}

static inline void ibv_wr_local_inv(struct ibv_qp_ex *qp,
				    uint32_t invalidate_rkey)
{
	qp->wr_local_inv(qp, invalidate_rkey);
}

static inline void ibv_wr_rdma_read(struct ibv_qp_ex *qp, uint32_t rkey,
				    uint64_t remote_addr)
{
	qp->wr_rdma_read(qp, rkey, remote_addr);
}

static inline void ibv_wr_rdma_write(struct ibv_qp_ex *qp, uint32_t rkey,
				     uint64_t remote_addr)
{
	qp->wr_rdma_write(qp, rkey, remote_addr);
}

static inline void ibv_wr_atomic_write(struct ibv_qp_ex *qp, uint32_t rkey,
				       uint64_t remote_addr,
				       const void *atomic_wr)
{
	qp->wr_atomic_write(qp, rkey, remote_addr, atomic_wr);
}

#if _OPENVERBS_ABI >= 56
static inline void ibv_wr_flush(struct ibv_qp_ex *qp, uint32_t rkey,
				uint64_t remote_addr, size_t len, uint8_t type,
				uint8_t level)
{
	qp->wr_flush(qp, rkey, remote_addr, len, type, level);
}
#endif

static inline void ibv_wr_rdma_write_imm(struct ibv_qp_ex *qp, uint32_t rkey,
					 uint64_t remote_addr, __be32 imm_data)
{
	qp->wr_rdma_write_imm(qp, rkey, remote_addr, imm_data);
}

static inline void ibv_wr_send(struct ibv_qp_ex *qp)
{
	qp->wr_send(qp);
}

static inline void ibv_wr_send_imm(struct ibv_qp_ex *qp, __be32 imm_data)
{
	qp->wr_send_imm(qp, imm_data);
}

static inline void ibv_wr_send_inv(struct ibv_qp_ex *qp,
				   uint32_t invalidate_rkey)
{
	qp->wr_send_inv(qp, invalidate_rkey);
}

static inline void ibv_wr_send_tso(struct ibv_qp_ex *qp, void *hdr,
				   uint16_t hdr_sz, uint16_t mss)
{
	qp->wr_send_tso(qp, hdr, hdr_sz, mss);
}

static inline void ibv_wr_set_ud_addr(struct ibv_qp_ex *qp, struct ibv_ah *ah,
				      uint32_t remote_qpn, uint32_t remote_qkey)
{
	qp->wr_set_ud_addr(qp, ah, remote_qpn, remote_qkey);
}

static inline void ibv_wr_set_xrc_srqn(struct ibv_qp_ex *qp,
				       uint32_t remote_srqn)
{
	qp->wr_set_xrc_srqn(qp, remote_srqn);
}

static inline void ibv_wr_set_inline_data(struct ibv_qp_ex *qp, void *addr,
					  size_t length)
{
	qp->wr_set_inline_data(qp, addr, length);
}

static inline void ibv_wr_set_inline_data_list(struct ibv_qp_ex *qp,
					       size_t num_buf,
					       const struct ibv_data_buf *buf_list)
{
	qp->wr_set_inline_data_list(qp, num_buf, buf_list);
}

static inline void ibv_wr_set_sge(struct ibv_qp_ex *qp, uint32_t lkey,
				  uint64_t addr, uint32_t length)
{
	qp->wr_set_sge(qp, lkey, addr, length);
}

static inline void ibv_wr_set_sge_list(struct ibv_qp_ex *qp, size_t num_sge,
				       const struct ibv_sge *sg_list)
{
	qp->wr_set_sge_list(qp, num_sge, sg_list);
}

static inline void ibv_wr_start(struct ibv_qp_ex *qp)
{
	qp->wr_start(qp);
}

/* Posts the batch built since ibv_wr_start(); 0 or an errno value. */
static inline int ibv_wr_complete(struct ibv_qp_ex *qp)
{
	return qp->wr_complete(qp);
}

static inline void ibv_wr_abort(struct ibv_qp_ex *qp)
{
	qp->wr_abort(qp);
}

/* Enhanced connection establishment data (ibv_query_ece(3)). */
#if _OPENVERBS_ABI >= 64
/* A set of file descriptors handed to the kernel (ibv_cmd_get_context). */
struct ibv_fd_arr {
	int *arr;
	uint32_t count;
};

#endif
struct ibv_ece {
	uint32_t vendor_id;	/* PCI vendor id of the HCA */
	uint32_t options;	/* vendor-defined */
	uint32_t comp_mask;
};

/* ==== Completion channels and completion queues ==== */

struct ibv_comp_channel {
	struct ibv_context *context;
	int fd;
	int refcnt;
};

struct ibv_cq {
	struct ibv_context *context;
	struct ibv_comp_channel *channel;
	void *cq_context;
	uint32_t handle;
	int cqe;

	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t comp_events_completed;
	uint32_t async_events_completed;
};

/* ibv_start_poll(3) */
struct ibv_poll_cq_attr {
	uint32_t comp_mask;
};

/* Tag-matching data of a completion (ibv_wc_read_tm_info()). */
struct ibv_wc_tm_info {
	uint64_t tag;
	uint32_t priv;
};

/*
 * The extended CQ (ibv_create_cq_ex(3)).  Its head has the layout of
 * struct ibv_cq; status and wr_id describe the current completion while
 * polling, the read_* members are the provider's field readers.
 */
struct ibv_cq_ex {
	struct ibv_context *context;
	struct ibv_comp_channel *channel;
	void *cq_context;
	uint32_t handle;
	int cqe;

	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t comp_events_completed;
	uint32_t async_events_completed;

	uint32_t comp_mask;
	enum ibv_wc_status status;
	uint64_t wr_id;
	int (*start_poll)(struct ibv_cq_ex *current,
			  struct ibv_poll_cq_attr *attr);
	int (*next_poll)(struct ibv_cq_ex *current);
	void (*end_poll)(struct ibv_cq_ex *current);
	enum ibv_wc_opcode (*read_opcode)(struct ibv_cq_ex *current);
	uint32_t (*read_vendor_err)(struct ibv_cq_ex *current);
	uint32_t (*read_byte_len)(struct ibv_cq_ex *current);
	__be32 (*read_imm_data)(struct ibv_cq_ex *current);
	uint32_t (*read_qp_num)(struct ibv_cq_ex *current);
	uint32_t (*read_src_qp)(struct ibv_cq_ex *current);
	unsigned int (*read_wc_flags)(struct ibv_cq_ex *current);
	uint32_t (*read_slid)(struct ibv_cq_ex *current);
	uint8_t (*read_sl)(struct ibv_cq_ex *current);
	uint8_t (*read_dlid_path_bits)(struct ibv_cq_ex *current);
	uint64_t (*read_completion_ts)(struct ibv_cq_ex *current);
	uint16_t (*read_cvlan)(struct ibv_cq_ex *current);
	uint32_t (*read_flow_tag)(struct ibv_cq_ex *current);
	void (*read_tm_info)(struct ibv_cq_ex *current,
			     struct ibv_wc_tm_info *tm_info);
	uint64_t (*read_completion_wallclock_ns)(struct ibv_cq_ex *current);
};

/* The struct ibv_cq view of an extended CQ (same object). */
static inline struct ibv_cq *ibv_cq_ex_to_cq(struct ibv_cq_ex *cq)
{
	return (struct ibv_cq *)cq;
}

/* ibv_modify_cq(3) */
enum ibv_cq_attr_mask {
	IBV_CQ_ATTR_MODERATE = 1 << 0,
	IBV_CQ_ATTR_RESERVED = 1 << 1,
};

struct ibv_moderate_cq {
	uint16_t cq_count;
	uint16_t cq_period;	/* microseconds */
};

struct ibv_modify_cq_attr {
	uint32_t attr_mask;	/* enum ibv_cq_attr_mask */
	struct ibv_moderate_cq moderate;
};

/*
 * Polling an extended CQ (ibv_create_cq_ex(3)): ibv_start_poll() returns 0
 * when a completion is available, ENOENT when the CQ is empty (then
 * ibv_end_poll() must not be called) or another errno value;
 * ibv_next_poll() returns 0 or ENOENT; ibv_end_poll() releases the CQ.
 * The ibv_wc_read_*() readers return fields of the current completion and
 * may only be used for fields requested in wc_flags at creation.
 */
static inline int ibv_start_poll(struct ibv_cq_ex *cq,
				 struct ibv_poll_cq_attr *attr)
{
	return cq->start_poll(cq, attr);
}

static inline int ibv_next_poll(struct ibv_cq_ex *cq)
{
	return cq->next_poll(cq);
}

static inline void ibv_end_poll(struct ibv_cq_ex *cq)
{
	cq->end_poll(cq);
}

static inline enum ibv_wc_opcode ibv_wc_read_opcode(struct ibv_cq_ex *cq)
{
	return cq->read_opcode(cq);
}

static inline uint32_t ibv_wc_read_vendor_err(struct ibv_cq_ex *cq)
{
	return cq->read_vendor_err(cq);
}

static inline uint32_t ibv_wc_read_byte_len(struct ibv_cq_ex *cq)
{
	return cq->read_byte_len(cq);
}

static inline __be32 ibv_wc_read_imm_data(struct ibv_cq_ex *cq)
{
	return cq->read_imm_data(cq);
}

/* The invalidated rkey shares the immediate-data slot (IBV_WC_WITH_INV). */
static inline uint32_t ibv_wc_read_invalidated_rkey(struct ibv_cq_ex *cq)
{
#ifdef __CHECKER__
	return (__attribute__((force)) uint32_t)cq->read_imm_data(cq);
#else
	return cq->read_imm_data(cq);
#endif
}

static inline uint32_t ibv_wc_read_qp_num(struct ibv_cq_ex *cq)
{
	return cq->read_qp_num(cq);
}

static inline uint32_t ibv_wc_read_src_qp(struct ibv_cq_ex *cq)
{
	return cq->read_src_qp(cq);
}

static inline unsigned int ibv_wc_read_wc_flags(struct ibv_cq_ex *cq)
{
	return cq->read_wc_flags(cq);
}

static inline uint32_t ibv_wc_read_slid(struct ibv_cq_ex *cq)
{
	return cq->read_slid(cq);
}

static inline uint8_t ibv_wc_read_sl(struct ibv_cq_ex *cq)
{
	return cq->read_sl(cq);
}

static inline uint8_t ibv_wc_read_dlid_path_bits(struct ibv_cq_ex *cq)
{
	return cq->read_dlid_path_bits(cq);
}

static inline uint64_t ibv_wc_read_completion_ts(struct ibv_cq_ex *cq)
{
	return cq->read_completion_ts(cq);
}

static inline uint64_t ibv_wc_read_completion_wallclock_ns(struct ibv_cq_ex *cq)
{
	return cq->read_completion_wallclock_ns(cq);
}

static inline uint16_t ibv_wc_read_cvlan(struct ibv_cq_ex *cq)
{
	return cq->read_cvlan(cq);
}

static inline uint32_t ibv_wc_read_flow_tag(struct ibv_cq_ex *cq)
{
	return cq->read_flow_tag(cq);
}

static inline void ibv_wc_read_tm_info(struct ibv_cq_ex *cq,
				       struct ibv_wc_tm_info *tm_info)
{
	cq->read_tm_info(cq, tm_info);
}

/*
 * Posts a chain of receive requests to a work queue (ibv_post_wq_recv(3)):
 * 0, or an errno value with *bad_recv_wr at the first failed request.
 */
static inline int ibv_post_wq_recv(struct ibv_wq *wq,
				   struct ibv_recv_wr *recv_wr,
				   struct ibv_recv_wr **bad_recv_wr)
{
	return wq->post_recv(wq, recv_wr, bad_recv_wr);
}

struct ibv_ah {
	struct ibv_context *context;
	struct ibv_pd *pd;
	uint32_t handle;
};

/* ==== Flow steering (ibv_create_flow(3)) ==== */

enum ibv_flow_flags {
	IBV_FLOW_ATTR_FLAGS_DONT_TRAP = 1 << 1,
	IBV_FLOW_ATTR_FLAGS_EGRESS = 1 << 2,
};

enum ibv_flow_attr_type {
	IBV_FLOW_ATTR_NORMAL = 0x0,	/* steer by the specs */
	IBV_FLOW_ATTR_ALL_DEFAULT = 0x1,	/* catch-all */
	IBV_FLOW_ATTR_MC_DEFAULT = 0x2,	/* catch-all multicast */
	IBV_FLOW_ATTR_SNIFFER = 0x3,	/* copy of all port traffic */
};

/*
 * Spec kinds.  IBV_FLOW_SPEC_INNER may be or'ed into a header spec type to
 * match the inner (tunnelled) header; values 0x1000 and up are actions.
 */
enum ibv_flow_spec_type {
	IBV_FLOW_SPEC_ETH = 0x20,
	IBV_FLOW_SPEC_IPV4 = 0x30,
	IBV_FLOW_SPEC_IPV6 = 0x31,
	IBV_FLOW_SPEC_IPV4_EXT = 0x32,
	IBV_FLOW_SPEC_ESP = 0x34,
	IBV_FLOW_SPEC_TCP = 0x40,
	IBV_FLOW_SPEC_UDP = 0x41,
	IBV_FLOW_SPEC_VXLAN_TUNNEL = 0x50,
	IBV_FLOW_SPEC_GRE = 0x51,
	IBV_FLOW_SPEC_MPLS = 0x60,
	IBV_FLOW_SPEC_INNER = 0x100,
	IBV_FLOW_SPEC_ACTION_TAG = 0x1000,
	IBV_FLOW_SPEC_ACTION_DROP = 0x1001,
	IBV_FLOW_SPEC_ACTION_HANDLE = 0x1002,
	IBV_FLOW_SPEC_ACTION_COUNT = 0x1003,
};

/*
 * Each spec is { type, size, val, mask }: size is the byte size of the
 * spec struct, val/mask the header fields (network byte order) and which
 * bits of them must match.
 */
#if _OPENVERBS_ABI >= 56
#define ETHERNET_LL_SIZE ETH_ALEN
#endif
struct ibv_flow_eth_filter {
	uint8_t dst_mac[6];
	uint8_t src_mac[6];
	uint16_t ether_type;
	uint16_t vlan_tag;	/* 802.1Q TCI */
};

struct ibv_flow_spec_eth {
	enum ibv_flow_spec_type type;
	uint16_t size;
	struct ibv_flow_eth_filter val;
	struct ibv_flow_eth_filter mask;
};

struct ibv_flow_ipv4_filter {
	uint32_t src_ip;
	uint32_t dst_ip;
};

struct ibv_flow_spec_ipv4 {
	enum ibv_flow_spec_type type;
	uint16_t size;
	struct ibv_flow_ipv4_filter val;
	struct ibv_flow_ipv4_filter mask;
};

struct ibv_flow_ipv4_ext_filter {
	uint32_t src_ip;
	uint32_t dst_ip;
	uint8_t proto;
	uint8_t tos;
	uint8_t ttl;
	uint8_t flags;
};

struct ibv_flow_spec_ipv4_ext {
	enum ibv_flow_spec_type type;
	uint16_t size;
	struct ibv_flow_ipv4_ext_filter val;
	struct ibv_flow_ipv4_ext_filter mask;
};

struct ibv_flow_ipv6_filter {
	uint8_t src_ip[16];
	uint8_t dst_ip[16];
	uint32_t flow_label;
	uint8_t next_hdr;
	uint8_t traffic_class;
	uint8_t hop_limit;
};

struct ibv_flow_spec_ipv6 {
	enum ibv_flow_spec_type type;
	uint16_t size;
	struct ibv_flow_ipv6_filter val;
	struct ibv_flow_ipv6_filter mask;
};

struct ibv_flow_esp_filter {
	uint32_t spi;
	uint32_t seq;
};

struct ibv_flow_spec_esp {
	enum ibv_flow_spec_type type;
	uint16_t size;
	struct ibv_flow_esp_filter val;
	struct ibv_flow_esp_filter mask;
};

struct ibv_flow_tcp_udp_filter {
	uint16_t dst_port;
	uint16_t src_port;
};

struct ibv_flow_spec_tcp_udp {
	enum ibv_flow_spec_type type;
	uint16_t size;
	struct ibv_flow_tcp_udp_filter val;
	struct ibv_flow_tcp_udp_filter mask;
};

struct ibv_flow_gre_filter {
	/* C, K and S bits, reserved0 and version of the GRE header */
	uint16_t c_ks_res0_ver;
	uint16_t protocol;
	uint32_t key;
};

struct ibv_flow_spec_gre {
	enum ibv_flow_spec_type type;
	uint16_t size;
	struct ibv_flow_gre_filter val;
	struct ibv_flow_gre_filter mask;
};

struct ibv_flow_mpls_filter {
	uint32_t label;	/* the whole 32-bit MPLS entry */
};

struct ibv_flow_spec_mpls {
	enum ibv_flow_spec_type type;
	uint16_t size;
	struct ibv_flow_mpls_filter val;
	struct ibv_flow_mpls_filter mask;
};

struct ibv_flow_tunnel_filter {
	uint32_t tunnel_id;	/* e.g. the VXLAN VNI */
};

struct ibv_flow_spec_tunnel {
	enum ibv_flow_spec_type type;
	uint16_t size;
	struct ibv_flow_tunnel_filter val;
	struct ibv_flow_tunnel_filter mask;
};

/* Action: report tag_id in the completion's flow tag. */
struct ibv_flow_spec_action_tag {
	enum ibv_flow_spec_type type;
	uint16_t size;
	uint32_t tag_id;
};

/* Action: drop matching packets. */
struct ibv_flow_spec_action_drop {
	enum ibv_flow_spec_type type;
	uint16_t size;
};

/* Action: apply a flow action (ibv_create_flow_action_esp(3)). */
struct ibv_flow_spec_action_handle {
	enum ibv_flow_spec_type type;
	uint16_t size;
	const struct ibv_flow_action *action;
};

/* Action: count matching packets/bytes (ibv_create_counters(3)). */
struct ibv_flow_spec_counter_action {
	enum ibv_flow_spec_type type;
	uint16_t size;
	struct ibv_counters *counters;
};

/* Any one spec; hdr gives its type and size. */
struct ibv_flow_spec {
	union {
		struct {
			enum ibv_flow_spec_type type;
			uint16_t size;
		} hdr;
		struct ibv_flow_spec_eth eth;
		struct ibv_flow_spec_ipv4 ipv4;
		struct ibv_flow_spec_tcp_udp tcp_udp;
		struct ibv_flow_spec_ipv4_ext ipv4_ext;
		struct ibv_flow_spec_ipv6 ipv6;
		struct ibv_flow_spec_esp esp;
		struct ibv_flow_spec_tunnel tunnel;
		struct ibv_flow_spec_gre gre;
		struct ibv_flow_spec_mpls mpls;
		struct ibv_flow_spec_action_tag flow_tag;
		struct ibv_flow_spec_action_drop drop;
		struct ibv_flow_spec_action_handle handle;
		struct ibv_flow_spec_counter_action flow_count;
	};
};

/*
 * A flow rule: this header is followed in memory by num_of_specs specs
 * (size is the total byte size of header plus specs).
 */
struct ibv_flow_attr {
	uint32_t comp_mask;
	enum ibv_flow_attr_type type;
	uint16_t size;
	uint16_t priority;
	uint8_t num_of_specs;
	uint8_t port;
	uint32_t flags;		/* enum ibv_flow_flags */
};

struct ibv_flow {
	uint32_t comp_mask;
	struct ibv_context *context;
	uint32_t handle;
};

struct ibv_flow_action {
	struct ibv_context *context;
};

enum ibv_flow_action_esp_mask {
	IBV_FLOW_ACTION_ESP_MASK_ESN = 1UL << 0,
};

/* ibv_create_flow_action_esp(3) */
struct ibv_flow_action_esp_attr {
	struct ibv_flow_action_esp *esp_attr;

	enum ibv_flow_action_esp_keymat keymat_proto;
	uint16_t keymat_len;
	void *keymat_ptr;

	enum ibv_flow_action_esp_replay replay_proto;
	uint16_t replay_len;
	void *replay_ptr;

	struct ibv_flow_action_esp_encap *esp_encap;

	uint32_t comp_mask;	/* enum ibv_flow_action_esp_mask */
	uint32_t esn;
};

/* ==== Devices and contexts ==== */

struct ibv_device;
struct ibv_context;

/* Obsolete: kept only so that struct ibv_device keeps its layout. */
struct _ibv_device_ops {
	struct ibv_context *(*_dummy1)(struct ibv_device *device, int cmd_fd);
	void (*_dummy2)(struct ibv_context *context);
};

enum {
	IBV_SYSFS_NAME_MAX = 64,
	IBV_SYSFS_PATH_MAX = 256,
};

/*
 * An RDMA device as listed by ibv_get_device_list(3).  name is the kernel
 * device (mlx5_0), dev_name the uverbs node (uverbs0), dev_path its sysfs
 * directory and ibdev_path the device's infiniband class directory.
 */
struct ibv_device {
	struct _ibv_device_ops _ops;
	enum ibv_node_type node_type;
	enum ibv_transport_type transport_type;
	char name[IBV_SYSFS_NAME_MAX];
	char dev_name[IBV_SYSFS_NAME_MAX];
	char dev_path[IBV_SYSFS_PATH_MAX];
	char ibdev_path[IBV_SYSFS_PATH_MAX];
};

struct _compat_ibv_port_attr;

/*
 * The dispatch table inside struct ibv_context.  Only the named members
 * are called by inline functions; the _compat_ slots exist for binaries
 * built against libibverbs 1.1 headers and are filled by the library.
 */
struct ibv_context_ops {
	int (*_compat_query_device)(struct ibv_context *context,
				    struct ibv_device_attr *device_attr);
	int (*_compat_query_port)(struct ibv_context *context,
				  uint8_t port_num,
				  struct _compat_ibv_port_attr *port_attr);
	void *(*_compat_alloc_pd)(void);
	void *(*_compat_dealloc_pd)(void);
	void *(*_compat_reg_mr)(void);
	void *(*_compat_rereg_mr)(void);
	void *(*_compat_dereg_mr)(void);
	struct ibv_mw *(*alloc_mw)(struct ibv_pd *pd, enum ibv_mw_type type);
	int (*bind_mw)(struct ibv_qp *qp, struct ibv_mw *mw,
		       struct ibv_mw_bind *mw_bind);
	int (*dealloc_mw)(struct ibv_mw *mw);
	void *(*_compat_create_cq)(void);
	int (*poll_cq)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
	void *(*_compat_cq_event)(void);
	void *(*_compat_resize_cq)(void);
	void *(*_compat_destroy_cq)(void);
	void *(*_compat_create_srq)(void);
	void *(*_compat_modify_srq)(void);
	void *(*_compat_query_srq)(void);
	void *(*_compat_destroy_srq)(void);
	int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *recv_wr,
			     struct ibv_recv_wr **bad_recv_wr);
	void *(*_compat_create_qp)(void);
	void *(*_compat_query_qp)(void);
	void *(*_compat_modify_qp)(void);
	void *(*_compat_destroy_qp)(void);
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr);
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr);
	void *(*_compat_create_ah)(void);
	void *(*_compat_destroy_ah)(void);
	void *(*_compat_attach_mcast)(void);
	void *(*_compat_detach_mcast)(void);
	void *(*_compat_async_event)(void);
};

/*
 * An open device (ibv_open_device(3)).  cmd_fd is the uverbs command file,
 * async_fd the file ibv_get_async_event(3) reads.  abi_compat is
 * __VERBS_ABI_IS_EXTENDED when this context is embedded in a struct
 * verbs_context.
 */
struct ibv_context {
	struct ibv_device *device;
	struct ibv_context_ops ops;
	int cmd_fd;
	int async_fd;
	int num_comp_vectors;
	pthread_mutex_t mutex;
	void *abi_compat;
};

/* ibv_cq_init_attr_ex.comp_mask */
enum ibv_cq_init_attr_mask {
	IBV_CQ_INIT_ATTR_MASK_FLAGS = 1 << 0,
	IBV_CQ_INIT_ATTR_MASK_PD = 1 << 1,
};

/* ibv_cq_init_attr_ex.flags */
enum ibv_create_cq_attr_flags {
	IBV_CREATE_CQ_ATTR_SINGLE_THREADED = 1 << 0,
	IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN = 1 << 1,
};

/* ibv_create_cq_ex(3) */
struct ibv_cq_init_attr_ex {
	uint32_t cqe;		/* minimum number of entries */
	void *cq_context;
	struct ibv_comp_channel *channel;	/* may be NULL */
	uint32_t comp_vector;	/* < ibv_context.num_comp_vectors */
	uint64_t wc_flags;	/* enum ibv_create_cq_wc_flags */
	uint32_t comp_mask;	/* enum ibv_cq_init_attr_mask */
	uint32_t flags;		/* enum ibv_create_cq_attr_flags */
	struct ibv_pd *parent_domain;	/* with IBV_CQ_INIT_ATTR_MASK_PD */
};

/* ibv_alloc_parent_domain(3) */
enum ibv_parent_domain_init_attr_mask {
	IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS = 1 << 0,
	IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT = 1 << 1,
#if _OPENVERBS_ABI >= 64
	/* rdma-core 64: buffers may be allocated unprotected on a
	 * confidential-computing guest (IBV_DEVICE_CC_DMA_BOUNCE) */
	IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC = 1 << 2,
#endif
};

/*
 * Returned by a parent domain's alloc() callback to let the provider
 * allocate the buffer itself.
 */
#define IBV_ALLOCATOR_USE_DEFAULT ((void *)-1)

struct ibv_parent_domain_init_attr {
	struct ibv_pd *pd;	/* the protection domain to extend */
	struct ibv_td *td;	/* optional thread domain */
	uint32_t comp_mask;	/* enum ibv_parent_domain_init_attr_mask */
	void *(*alloc)(struct ibv_pd *pd, void *pd_context, size_t size,
		       size_t alignment, uint64_t resource_type);
	void (*free)(struct ibv_pd *pd, void *pd_context, void *ptr,
		     uint64_t resource_type);
	void *pd_context;
};

/* Counters (ibv_create_counters(3), ibv_attach_counters_point_flow(3)). */
struct ibv_counters_init_attr {
	uint32_t comp_mask;
};

struct ibv_counters {
	struct ibv_context *context;
};

enum ibv_counter_description {
	IBV_COUNTER_PACKETS,
	IBV_COUNTER_BYTES,
};

struct ibv_counter_attach_attr {
	enum ibv_counter_description counter_desc;
	uint32_t index;		/* position in the counters array */
	uint32_t comp_mask;
};

/* ibv_read_counters(3) flags */
enum ibv_read_counters_flags {
	IBV_READ_COUNTERS_ATTR_PREFER_CACHED = 1 << 0,
};

/* ibv_query_rt_values_ex(3) */
enum ibv_values_mask {
	IBV_VALUES_MASK_RAW_CLOCK = 1 << 0,
	IBV_VALUES_MASK_RESERVED = 1 << 1,
};

struct ibv_values_ex {
	uint32_t comp_mask;	/* enum ibv_values_mask: requested/valid */
	struct timespec raw_clock;
};

/*
 * The library's full context.  It "grows up": entries added in later
 * releases are placed *before* the older ones, so every extension slot
 * keeps a fixed negative distance from the embedded struct ibv_context,
 * which must stay the last member.  sz is the size the library filled in;
 * verbs_get_ctx_op() uses it to tell whether a slot exists.  The layout
 * is ABI (rdma-core 44 ABI dump: 648 bytes, context at offset 320).
 */
struct verbs_ex_private;

#if _OPENVERBS_ABI >= 64
/* TPH memory type of a DMA handle (ibv_alloc_dmah(3)). */
enum ibv_tph_mem_type {
	IBV_TPH_MEM_TYPE_VM,	/* volatile memory */
	IBV_TPH_MEM_TYPE_PM,	/* persistent memory */
};

/* comp_mask of struct ibv_dmah_init_attr. */
enum ibv_dmah_init_attr_mask {
	IBV_DMAH_INIT_ATTR_MASK_CPU_ID = 1 << 0,
	IBV_DMAH_INIT_ATTR_MASK_PH = 1 << 1,
	IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE = 1 << 2,
};

/* ibv_alloc_dmah(3): the steering hints; a field counts when its bit is set. */
struct ibv_dmah_init_attr {
	uint32_t comp_mask;	/* enum ibv_dmah_init_attr_mask */
	uint32_t cpu_id;	/* CPU whose cache the DMA should target */
	uint8_t ph;		/* PCIe processing hint */
	uint8_t tph_mem_type;	/* enum ibv_tph_mem_type */
};

#endif
struct verbs_context {
#if _OPENVERBS_ABI >= 64
	/* rdma-core 64's slots: the struct grows downwards, so these come
	 * first and every older member keeps its distance to context. */
	void (*free_buf)(struct ibv_buf *buf);
	void *(*alloc_buf)(struct ibv_pd *pd, size_t size,
			   struct ibv_buf **buf);
	int (*dm_export_dmabuf_fd)(struct ibv_dm *dm);
	struct ibv_mr *(*reg_mr_ex)(struct ibv_pd *pd,
				    struct ibv_mr_init_attr *mr_init_attr);
	int (*dealloc_dmah)(struct ibv_dmah *dmah);
	struct ibv_dmah *(*alloc_dmah)(struct ibv_context *context,
				       struct ibv_dmah_init_attr *attr);
#endif
	int (*query_port)(struct ibv_context *context, uint8_t port_num,
			  struct ibv_port_attr *port_attr,
			  size_t port_attr_len);
	int (*advise_mr)(struct ibv_pd *pd,
			 enum ibv_advise_mr_advice advice,
			 uint32_t flags,
			 struct ibv_sge *sg_list,
			 uint32_t num_sges);
	struct ibv_mr *(*alloc_null_mr)(struct ibv_pd *pd);
	int (*read_counters)(struct ibv_counters *counters,
			     uint64_t *counters_value,
			     uint32_t ncounters,
			     uint32_t flags);
	int (*attach_counters_point_flow)(struct ibv_counters *counters,
					  struct ibv_counter_attach_attr *attr,
					  struct ibv_flow *flow);
	struct ibv_counters *(*create_counters)(struct ibv_context *context,
						struct ibv_counters_init_attr *init_attr);
	int (*destroy_counters)(struct ibv_counters *counters);
	struct ibv_mr *(*reg_dm_mr)(struct ibv_pd *pd, struct ibv_dm *dm,
				    uint64_t dm_offset, size_t length,
				    unsigned int access);
	struct ibv_dm *(*alloc_dm)(struct ibv_context *context,
				   struct ibv_alloc_dm_attr *attr);
	int (*free_dm)(struct ibv_dm *dm);
	int (*modify_flow_action_esp)(struct ibv_flow_action *action,
				      struct ibv_flow_action_esp_attr *attr);
	int (*destroy_flow_action)(struct ibv_flow_action *action);
	struct ibv_flow_action *(*create_flow_action_esp)(struct ibv_context *context,
							  struct ibv_flow_action_esp_attr *esp);
	int (*modify_qp_rate_limit)(struct ibv_qp *qp,
				    struct ibv_qp_rate_limit_attr *attr);
	struct ibv_pd *(*alloc_parent_domain)(struct ibv_context *context,
					      struct ibv_parent_domain_init_attr *attr);
	int (*dealloc_td)(struct ibv_td *td);
	struct ibv_td *(*alloc_td)(struct ibv_context *context,
				   struct ibv_td_init_attr *init_attr);
	int (*modify_cq)(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr);
	int (*post_srq_ops)(struct ibv_srq *srq, struct ibv_ops_wr *op,
			    struct ibv_ops_wr **bad_op);
	int (*destroy_rwq_ind_table)(struct ibv_rwq_ind_table *rwq_ind_table);
	struct ibv_rwq_ind_table *(*create_rwq_ind_table)(struct ibv_context *context,
							  struct ibv_rwq_ind_table_init_attr *init_attr);
	int (*destroy_wq)(struct ibv_wq *wq);
	int (*modify_wq)(struct ibv_wq *wq, struct ibv_wq_attr *wq_attr);
	struct ibv_wq *(*create_wq)(struct ibv_context *context,
				    struct ibv_wq_init_attr *wq_init_attr);
	int (*query_rt_values)(struct ibv_context *context,
			       struct ibv_values_ex *values);
	struct ibv_cq_ex *(*create_cq_ex)(struct ibv_context *context,
					  struct ibv_cq_init_attr_ex *init_attr);
	struct verbs_ex_private *priv;	/* library-private state */
	int (*query_device_ex)(struct ibv_context *context,
			       const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr,
			       size_t attr_size);
	int (*ibv_destroy_flow)(struct ibv_flow *flow);
	void (*ABI_placeholder2)(void);	/* libibverbs 1.1.8 compatibility */
	struct ibv_flow *(*ibv_create_flow)(struct ibv_qp *qp,
					    struct ibv_flow_attr *flow_attr);
	void (*ABI_placeholder1)(void);	/* libibverbs 1.1.8 compatibility */
	struct ibv_qp *(*open_qp)(struct ibv_context *context,
				  struct ibv_qp_open_attr *attr);
	struct ibv_qp *(*create_qp_ex)(struct ibv_context *context,
				       struct ibv_qp_init_attr_ex *qp_init_attr_ex);
	int (*get_srq_num)(struct ibv_srq *srq, uint32_t *srq_num);
	struct ibv_srq *(*create_srq_ex)(struct ibv_context *context,
					 struct ibv_srq_init_attr_ex *srq_init_attr_ex);
	struct ibv_xrcd *(*open_xrcd)(struct ibv_context *context,
				      struct ibv_xrcd_init_attr *xrcd_init_attr);
	int (*close_xrcd)(struct ibv_xrcd *xrcd);
	uint64_t _ABI_placeholder3;
	size_t sz;		/* sizeof(struct verbs_context) as filled */
	struct ibv_context context;	/* must be last */
};

/* Value of ibv_context.abi_compat for contexts inside a verbs_context. */
#define __VERBS_ABI_IS_EXTENDED ((void *)UINTPTR_MAX)

/*
 * The verbs_context around ctx, or NULL for a context that is not
 * extended (abi_compat != __VERBS_ABI_IS_EXTENDED).
 */
static inline struct verbs_context *verbs_get_ctx(struct ibv_context *ctx)
{
	if (ctx->abi_compat != __VERBS_ABI_IS_EXTENDED)
		return NULL;

	/* container_of, spelled out to keep the global namespace clean */
	return (struct verbs_context *)(((uintptr_t)ctx) -
					offsetof(struct verbs_context,
						 context));
}

/*
 * The verbs_context of ctx if it is extended, large enough (sz) to hold
 * the member op, and that member is set; NULL otherwise.
 */
#define verbs_get_ctx_op(ctx, op)                                            \
	({                                                                     \
		struct verbs_context *__vctx = verbs_get_ctx(ctx);             \
		(!__vctx ||                                                    \
		 (__vctx->sz < sizeof(*__vctx) -                               \
				       offsetof(struct verbs_context, op)) ||  \
		 !__vctx->op) ?                                                \
			NULL :                                                 \
			__vctx;                                                \
	})

/* ==== Device list and device contexts ==== */

/*
 * The NULL-terminated list of RDMA devices (ibv_get_device_list(3)); the
 * count goes to *num_devices when it is not NULL (0 on failure).  NULL with
 * errno ENOMEM on failure; a host without RDMA support gets an empty list,
 * not an error.  Free with ibv_free_device_list().
 */
struct ibv_device **ibv_get_device_list(int *num_devices);

#ifdef RDMA_STATIC_PROVIDERS
/*
 * Static linking (rdma-core's libibverbs.a only; the shared library has no
 * ibv_static_providers): -DRDMA_STATIC_PROVIDERS=mlx5,efa,... names up to
 * 19 providers (or "all") to register before the device list is built.
 * Unused positions are filled with the "none" provider.
 */
#if _OPENVERBS_ABI >= 64
/* rdma-core 64: up to 20 providers (ionic joined). */
#define _RDMA_STATIC_PREFIX_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11,    \
			     _12, _13, _14, _15, _16, _17, _18, _19, _20, ...) \
	&verbs_provider_##_1, &verbs_provider_##_2, &verbs_provider_##_3,      \
	&verbs_provider_##_4, &verbs_provider_##_5, &verbs_provider_##_6,      \
	&verbs_provider_##_7, &verbs_provider_##_8, &verbs_provider_##_9,      \
	&verbs_provider_##_10, &verbs_provider_##_11, &verbs_provider_##_12,   \
	&verbs_provider_##_13, &verbs_provider_##_14, &verbs_provider_##_15,   \
	&verbs_provider_##_16, &verbs_provider_##_17, &verbs_provider_##_18,   \
	&verbs_provider_##_19, &verbs_provider_##_20
#define _RDMA_STATIC_PREFIX(arg)                                             \
	_RDMA_STATIC_PREFIX_(arg, none, none, none, none, none, none, none,   \
			     none, none, none, none, none, none, none, none,  \
			     none, none, none, none)
#else
#define _RDMA_STATIC_PREFIX_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11,    \
			     _12, _13, _14, _15, _16, _17, _18, _19, ...)     \
	&verbs_provider_##_1, &verbs_provider_##_2, &verbs_provider_##_3,      \
	&verbs_provider_##_4, &verbs_provider_##_5, &verbs_provider_##_6,      \
	&verbs_provider_##_7, &verbs_provider_##_8, &verbs_provider_##_9,      \
	&verbs_provider_##_10, &verbs_provider_##_11, &verbs_provider_##_12,   \
	&verbs_provider_##_13, &verbs_provider_##_14, &verbs_provider_##_15,   \
	&verbs_provider_##_16, &verbs_provider_##_17, &verbs_provider_##_18,   \
	&verbs_provider_##_19
#define _RDMA_STATIC_PREFIX(arg)                                             \
	_RDMA_STATIC_PREFIX_(arg, none, none, none, none, none, none, none,   \
			     none, none, none, none, none, none, none, none,  \
			     none, none, none)
#endif

struct verbs_device_ops;
extern const struct verbs_device_ops verbs_provider_bnxt_re;
extern const struct verbs_device_ops verbs_provider_cxgb4;
extern const struct verbs_device_ops verbs_provider_efa;
extern const struct verbs_device_ops verbs_provider_erdma;
extern const struct verbs_device_ops verbs_provider_hfi1verbs;
extern const struct verbs_device_ops verbs_provider_hns;
extern const struct verbs_device_ops verbs_provider_ipathverbs;
extern const struct verbs_device_ops verbs_provider_irdma;
#if _OPENVERBS_ABI >= 64
extern const struct verbs_device_ops verbs_provider_ionic;
#endif
extern const struct verbs_device_ops verbs_provider_mana;
extern const struct verbs_device_ops verbs_provider_mlx4;
extern const struct verbs_device_ops verbs_provider_mlx5;
extern const struct verbs_device_ops verbs_provider_mthca;
extern const struct verbs_device_ops verbs_provider_ocrdma;
extern const struct verbs_device_ops verbs_provider_qedr;
extern const struct verbs_device_ops verbs_provider_rxe;
extern const struct verbs_device_ops verbs_provider_siw;
extern const struct verbs_device_ops verbs_provider_vmw_pvrdma;
extern const struct verbs_device_ops verbs_provider_all;
extern const struct verbs_device_ops verbs_provider_none;

/* Registers the listed providers; the list ends with NULL. */
void ibv_static_providers(void *unused, ...);

static inline struct ibv_device **__ibv_get_device_list(int *num_devices)
{
	ibv_static_providers(NULL, _RDMA_STATIC_PREFIX(RDMA_STATIC_PROVIDERS),
			     NULL);
	return ibv_get_device_list(num_devices);
}

#define ibv_get_device_list(num_devices) __ibv_get_device_list(num_devices)
#endif

/* Releases a list from ibv_get_device_list() (ibv_get_device_list(3)). */
void ibv_free_device_list(struct ibv_device **list);

/* Kernel name of the device, e.g. "mlx5_0" (ibv_get_device_name(3)). */
const char *ibv_get_device_name(struct ibv_device *device);

/* Kernel index of the device, or -1 (ibv_get_device_index(3)). */
int ibv_get_device_index(struct ibv_device *device);

/* Node GUID, network byte order (ibv_get_device_guid(3)). */
__be64 ibv_get_device_guid(struct ibv_device *device);

/* Opens a device; NULL with errno set on failure (ibv_open_device(3)). */
struct ibv_context *ibv_open_device(struct ibv_device *device);

/* Closes a context; 0 or -1 (ibv_close_device(3)). */
int ibv_close_device(struct ibv_context *context);

/*
 * Imports a context from a uverbs command fd shared by another process
 * (ibv_import_device(3)); NULL with errno set on failure.
 */
struct ibv_context *ibv_import_device(int cmd_fd);

/* Imports a PD by kernel handle (ibv_import_pd(3)). */
struct ibv_pd *ibv_import_pd(struct ibv_context *context,
			     uint32_t pd_handle);

/* Releases an imported PD without destroying it (ibv_unimport_pd(3)). */
void ibv_unimport_pd(struct ibv_pd *pd);

/* Imports an MR by kernel handle (ibv_import_mr(3)). */
struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle);

/* Releases an imported MR without deregistering it (ibv_unimport_mr(3)). */
void ibv_unimport_mr(struct ibv_mr *mr);

/* Imports device memory by kernel handle (ibv_import_dm(3)). */
struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle);

/* Releases imported device memory (ibv_import_dm(3)). */
void ibv_unimport_dm(struct ibv_dm *dm);

/*
 * Waits for the next asynchronous event (ibv_get_async_event(3)); 0 or -1.
 * Every event must be acknowledged with ibv_ack_async_event().
 */
int ibv_get_async_event(struct ibv_context *context,
			struct ibv_async_event *event);

/*
 * Acknowledges an event from ibv_get_async_event(); destroying the object
 * it names waits for all its events to be acknowledged.
 */
void ibv_ack_async_event(struct ibv_async_event *event);

/* ibv_query_device(3): 0 or an errno value. */
int ibv_query_device(struct ibv_context *context,
		     struct ibv_device_attr *device_attr);

/*
 * The exported ibv_query_port symbol keeps the libibverbs 1.1 port
 * attribute layout; applications reach it through the ibv_query_port()
 * macro below, which passes the size of the caller's struct.
 */
int ibv_query_port(struct ibv_context *context, uint8_t port_num,
		   struct _compat_ibv_port_attr *port_attr);

/*
 * ibv_query_port(3): 0 or an errno value.  Uses the context's
 * size-aware query_port slot; contexts without one fall back to the
 * exported ibv_query_port on a zeroed attribute struct.
 */
static inline int ___ibv_query_port(struct ibv_context *context,
				    uint8_t port_num,
				    struct ibv_port_attr *port_attr)
{
	struct verbs_context *vctx = verbs_get_ctx_op(context, query_port);

	if (!vctx) {
		memset(port_attr, 0, sizeof(*port_attr));
		return ibv_query_port(context, port_num,
				      (struct _compat_ibv_port_attr *)port_attr);
	}

	return vctx->query_port(context, port_num, port_attr,
				sizeof(*port_attr));
}

#define ibv_query_port(context, port_num, port_attr)                         \
	___ibv_query_port(context, port_num, port_attr)

/* ibv_query_gid(3): 0 or -1. */
int ibv_query_gid(struct ibv_context *context, uint8_t port_num,
		  int index, union ibv_gid *gid);

/* Size-aware entry point behind ibv_query_gid_ex() (IBVERBS_1.11). */
int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
		      uint32_t gid_index, struct ibv_gid_entry *entry,
		      uint32_t flags, size_t entry_size);

/*
 * One GID table entry (ibv_query_gid_ex(3)); flags must be 0.  0 or an
 * errno value (ENODATA for an empty entry, EINVAL for bad arguments).
 */
static inline int ibv_query_gid_ex(struct ibv_context *context,
				   uint32_t port_num, uint32_t gid_index,
				   struct ibv_gid_entry *entry, uint32_t flags)
{
	return _ibv_query_gid_ex(context, port_num, gid_index, entry, flags,
				 sizeof(*entry));
}

/* Size-aware entry point behind ibv_query_gid_table() (IBVERBS_1.11). */
ssize_t _ibv_query_gid_table(struct ibv_context *context,
			     struct ibv_gid_entry *entries, size_t max_entries,
			     uint32_t flags, size_t entry_size);

/*
 * All valid GID entries of the device (ibv_query_gid_table(3)); the
 * number of entries written, or a negative errno value.
 */
static inline ssize_t ibv_query_gid_table(struct ibv_context *context,
					  struct ibv_gid_entry *entries,
					  size_t max_entries, uint32_t flags)
{
	return _ibv_query_gid_table(context, entries, max_entries, flags,
				    sizeof(*entries));
}

/* ibv_query_pkey(3): P_Key in network byte order; 0 or -1. */
int ibv_query_pkey(struct ibv_context *context, uint8_t port_num,
		   int index, __be16 *pkey);

/* Index of a P_Key in the port's table, or -1 (ibv_get_pkey_index(3)). */
int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num,
		       __be16 pkey);

/* ==== Protection domains, flows and memory ==== */

/* ibv_alloc_pd(3): NULL with errno set on failure. */
struct ibv_pd *ibv_alloc_pd(struct ibv_context *context);

/* ibv_dealloc_pd(3): 0 or an errno value. */
int ibv_dealloc_pd(struct ibv_pd *pd);

/*
 * ibv_create_flow(3): NULL with errno EOPNOTSUPP when the provider has no
 * flow steering, or the provider's errno.
 */
static inline struct ibv_flow *ibv_create_flow(struct ibv_qp *qp,
					       struct ibv_flow_attr *flow)
{
	struct verbs_context *vctx = verbs_get_ctx_op(qp->context,
						      ibv_create_flow);

	if (!vctx) {
		errno = EOPNOTSUPP;
		return NULL;
	}

	return vctx->ibv_create_flow(qp, flow);
}

/* ibv_destroy_flow(3): 0, EOPNOTSUPP, or the provider's errno value. */
static inline int ibv_destroy_flow(struct ibv_flow *flow_id)
{
	struct verbs_context *vctx = verbs_get_ctx_op(flow_id->context,
						      ibv_destroy_flow);

	if (!vctx)
		return EOPNOTSUPP;
	return vctx->ibv_destroy_flow(flow_id);
}

/* ibv_create_flow_action_esp(3): NULL with errno EOPNOTSUPP if absent. */
static inline struct ibv_flow_action *
ibv_create_flow_action_esp(struct ibv_context *ctx,
			   struct ibv_flow_action_esp_attr *esp)
{
	struct verbs_context *vctx = verbs_get_ctx_op(ctx,
						      create_flow_action_esp);

	if (!vctx) {
		errno = EOPNOTSUPP;
		return NULL;
	}

	return vctx->create_flow_action_esp(ctx, esp);
}

/* ibv_modify_flow_action_esp(3): 0, EOPNOTSUPP or an errno value. */
static inline int
ibv_modify_flow_action_esp(struct ibv_flow_action *action,
			   struct ibv_flow_action_esp_attr *esp)
{
	struct verbs_context *vctx = verbs_get_ctx_op(action->context,
						      modify_flow_action_esp);

	if (!vctx)
		return EOPNOTSUPP;

	return vctx->modify_flow_action_esp(action, esp);
}

/* ibv_destroy_flow_action(3): 0, EOPNOTSUPP or an errno value. */
static inline int ibv_destroy_flow_action(struct ibv_flow_action *action)
{
	struct verbs_context *vctx = verbs_get_ctx_op(action->context,
						      destroy_flow_action);

	if (!vctx)
		return EOPNOTSUPP;

	return vctx->destroy_flow_action(action);
}

/*
 * ibv_open_xrcd(3): NULL with errno EOPNOTSUPP when the provider has no
 * open_xrcd, or the provider's errno.
 */
static inline struct ibv_xrcd *
ibv_open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *xrcd_init_attr)
{
	struct verbs_context *vctx = verbs_get_ctx_op(context, open_xrcd);

	if (!vctx) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return vctx->open_xrcd(context, xrcd_init_attr);
}

/*
 * ibv_close_xrcd(3): 0 or an errno value.  Calls the close_xrcd slot
 * directly: an XRCD only exists on contexts that provide it.
 */
static inline int ibv_close_xrcd(struct ibv_xrcd *xrcd)
{
	struct verbs_context *vctx = verbs_get_ctx(xrcd->context);

	return vctx->close_xrcd(xrcd);
}

/* ibv_reg_mr_iova2(3): like ibv_reg_mr_iova(), also accepting
 * optional access flags.  NULL with errno set on failure. */
struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				uint64_t iova, unsigned int access);

/*
 * ibv_reg_mr(3): NULL with errno set on failure.  The exported symbol; see
 * the ibv_reg_mr() macro below.
 */
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			  int access);

/*
 * Chooses the entry point for ibv_reg_mr(): when access is known at
 * compile time to hold no optional flag, the plain ibv_reg_mr symbol
 * (works with old libraries); otherwise ibv_reg_mr_iova2 with iova = addr.
 */
__attribute__((__always_inline__)) static inline struct ibv_mr *
__ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, unsigned int access,
	     int is_access_const)
{
	if (is_access_const && (access & IBV_ACCESS_OPTIONAL_RANGE) == 0)
		return ibv_reg_mr(pd, addr, length, (int)access);

	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, access);
}

#define ibv_reg_mr(pd, addr, length, access)                                 \
	__ibv_reg_mr(pd, addr, length, access,                               \
		     __builtin_constant_p(                                     \
			     ((int)(access) & IBV_ACCESS_OPTIONAL_RANGE) == 0))

/*
 * ibv_reg_mr_iova(3): like ibv_reg_mr() with the address the remote side
 * uses (iova) given separately.  The exported symbol; see the macro below.
 */
struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
			       uint64_t iova, int access);

/* Same dispatch rule as __ibv_reg_mr(). */
__attribute__((__always_inline__)) static inline struct ibv_mr *
__ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
		  unsigned int access, int is_access_const)
{
	if (is_access_const && (access & IBV_ACCESS_OPTIONAL_RANGE) == 0)
		return ibv_reg_mr_iova(pd, addr, length, iova, (int)access);

	return ibv_reg_mr_iova2(pd, addr, length, iova, access);
}

#define ibv_reg_mr_iova(pd, addr, length, iova, access)                      \
	__ibv_reg_mr_iova(pd, addr, length, iova, access,                    \
			  __builtin_constant_p(                                \
				  ((access) & IBV_ACCESS_OPTIONAL_RANGE) == 0))

/*
 * ibv_reg_dmabuf_mr(3): registers offset..offset+length of the dma-buf fd,
 * seen remotely at iova.  NULL with errno set on failure.
 */
struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				 size_t length, uint64_t iova,
				 int fd, int access);

/* Negative results of ibv_rereg_mr(3). */
enum ibv_rereg_mr_err_code {
	/* Bad arguments; the MR is unchanged and still usable. */
	IBV_REREG_MR_ERR_INPUT = -1,
	/* Fork protection of the new range could not be set up; the MR is
	 * unchanged and still usable. */
	IBV_REREG_MR_ERR_DONT_FORK_NEW = -2,
	/* The MR was re-registered, but fork protection of the old range
	 * could not be lifted. */
	IBV_REREG_MR_ERR_DO_FORK_OLD = -3,
	/* The device refused the command; do not use the MR any more. */
	IBV_REREG_MR_ERR_CMD = -4,
	/* The device refused the command and the fork protection of the new
	 * range could not be undone; do not use the MR any more. */
	IBV_REREG_MR_ERR_CMD_AND_DO_FORK_NEW = -5,
};

/* ibv_rereg_mr(3): 0 or an enum ibv_rereg_mr_err_code value. */
int ibv_rereg_mr(struct ibv_mr *mr, int flags,
		 struct ibv_pd *pd, void *addr,
		 size_t length, int access);

/* ibv_dereg_mr(3): 0 or an errno value. */
int ibv_dereg_mr(struct ibv_mr *mr);

/*
 * ibv_alloc_mw(3): NULL with errno EOPNOTSUPP when the context has no
 * alloc_mw, or the provider's errno.
 */
static inline struct ibv_mw *ibv_alloc_mw(struct ibv_pd *pd,
					  enum ibv_mw_type type)
{
	if (!pd->context->ops.alloc_mw) {
		errno = EOPNOTSUPP;
		return NULL;
	}

	return pd->context->ops.alloc_mw(pd, type);
}

/* ibv_dealloc_mw(3): 0 or an errno value. */
static inline int ibv_dealloc_mw(struct ibv_mw *mw)
{
	return mw->context->ops.dealloc_mw(mw);
}

/*
 * Next rkey for a memory window: the low 8 bits (the key tag) are
 * incremented modulo 256, the index bits are kept (ibv_inc_rkey(3)).
 */
static inline uint32_t ibv_inc_rkey(uint32_t rkey)
{
	const uint32_t tag_mask = 0x000000ff;
	uint8_t tag = (uint8_t)((rkey + 1) & tag_mask);

	return (rkey & ~tag_mask) | tag;
}

/*
 * ibv_bind_mw(3) for type 1 windows: EINVAL for a type 2 window or for a
 * non-zero range without an MR, EPERM when the MR is in another PD;
 * otherwise the provider's result.
 */
static inline int ibv_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
			      struct ibv_mw_bind *mw_bind)
{
	if (mw->type != IBV_MW_TYPE_1)
		return EINVAL;

	if (!mw_bind->bind_info.mr &&
	    (mw_bind->bind_info.addr || mw_bind->bind_info.length))
		return EINVAL;

	if (mw_bind->bind_info.mr && mw_bind->bind_info.mr->pd != mw->pd)
		return EPERM;

	return mw->context->ops.bind_mw(qp, mw, mw_bind);
}

/* ==== Completion channels and CQs ==== */

/* ibv_create_comp_channel(3): NULL with errno set on failure. */
struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context);

/* ibv_destroy_comp_channel(3): 0 or an errno value (EBUSY while in use). */
int ibv_destroy_comp_channel(struct ibv_comp_channel *channel);

/* ibv_create_cq(3): NULL with errno set on failure. */
struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe,
			     void *cq_context,
			     struct ibv_comp_channel *channel,
			     int comp_vector);

/*
 * ibv_create_cq_ex(3): NULL with errno EOPNOTSUPP when the context has no
 * create_cq_ex, otherwise the library's/provider's errno (EINVAL for
 * unsupported wc_flags or comp_mask bits).
 */
static inline struct ibv_cq_ex *
ibv_create_cq_ex(struct ibv_context *context,
		 struct ibv_cq_init_attr_ex *cq_attr)
{
	struct verbs_context *vctx = verbs_get_ctx_op(context, create_cq_ex);

	if (!vctx) {
		errno = EOPNOTSUPP;
		return NULL;
	}

	return vctx->create_cq_ex(context, cq_attr);
}

/* ibv_resize_cq(3): 0 or an errno value. */
int ibv_resize_cq(struct ibv_cq *cq, int cqe);

/* ibv_destroy_cq(3): 0 or an errno value. */
int ibv_destroy_cq(struct ibv_cq *cq);

/* ibv_get_cq_event(3): 0 or -1. */
int ibv_get_cq_event(struct ibv_comp_channel *channel,
		     struct ibv_cq **cq, void **cq_context);

/* ibv_ack_cq_events(3) */
void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents);

/*
 * ibv_poll_cq(3): number of completions written to wc (0..num_entries),
 * or a negative value on error.
 */
static inline int ibv_poll_cq(struct ibv_cq *cq, int num_entries,
			      struct ibv_wc *wc)
{
	return cq->context->ops.poll_cq(cq, num_entries, wc);
}

/* ibv_req_notify_cq(3): 0 or an errno value. */
static inline int ibv_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	return cq->context->ops.req_notify_cq(cq, solicited_only);
}

/* ibv_modify_cq(3): 0, EOPNOTSUPP when absent, or an errno value. */
static inline int ibv_modify_cq(struct ibv_cq *cq,
				struct ibv_modify_cq_attr *attr)
{
	struct verbs_context *vctx = verbs_get_ctx_op(cq->context, modify_cq);

	if (!vctx)
		return EOPNOTSUPP;

	return vctx->modify_cq(cq, attr);
}

/* ==== Shared receive queues ==== */

/* ibv_create_srq(3): NULL with errno set on failure. */
struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
			       struct ibv_srq_init_attr *srq_init_attr);

/*
 * ibv_create_srq_ex(3).  A request that only names a PD (and at most the
 * type IBV_SRQT_BASIC) is served by ibv_create_srq(); anything else needs
 * the context's create_srq_ex and fails with errno EOPNOTSUPP without it.
 */
static inline struct ibv_srq *
ibv_create_srq_ex(struct ibv_context *context,
		  struct ibv_srq_init_attr_ex *srq_init_attr_ex)
{
	struct verbs_context *vctx;
	uint32_t mask = srq_init_attr_ex->comp_mask;

	if (!(mask & ~(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE)) &&
	    (mask & IBV_SRQ_INIT_ATTR_PD) &&
	    (!(mask & IBV_SRQ_INIT_ATTR_TYPE) ||
	     (srq_init_attr_ex->srq_type == IBV_SRQT_BASIC)))
		return ibv_create_srq(srq_init_attr_ex->pd,
				      (struct ibv_srq_init_attr *)srq_init_attr_ex);

	vctx = verbs_get_ctx_op(context, create_srq_ex);
	if (!vctx) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return vctx->create_srq_ex(context, srq_init_attr_ex);
}

/* ibv_modify_srq(3): 0 or an errno value. */
int ibv_modify_srq(struct ibv_srq *srq,
		   struct ibv_srq_attr *srq_attr,
		   int srq_attr_mask);

/* ibv_query_srq(3): 0 or an errno value. */
int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr);

/* ibv_get_srq_num(3): 0, EOPNOTSUPP when absent, or an errno value. */
static inline int ibv_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num)
{
	struct verbs_context *vctx = verbs_get_ctx_op(srq->context,
						      get_srq_num);

	if (!vctx)
		return EOPNOTSUPP;

	return vctx->get_srq_num(srq, srq_num);
}

/* ibv_destroy_srq(3): 0 or an errno value. */
int ibv_destroy_srq(struct ibv_srq *srq);

/*
 * ibv_post_srq_recv(3): 0, or an errno value with *bad_recv_wr at the
 * first request that failed.
 */
static inline int ibv_post_srq_recv(struct ibv_srq *srq,
				    struct ibv_recv_wr *recv_wr,
				    struct ibv_recv_wr **bad_recv_wr)
{
	return srq->context->ops.post_srq_recv(srq, recv_wr, bad_recv_wr);
}

/*
 * ibv_post_srq_ops(3): tag-matching list operations.  Without provider
 * support *bad_op = op and EOPNOTSUPP is returned.
 */
static inline int ibv_post_srq_ops(struct ibv_srq *srq,
				   struct ibv_ops_wr *op,
				   struct ibv_ops_wr **bad_op)
{
	struct verbs_context *vctx;

	vctx = verbs_get_ctx_op(srq->context, post_srq_ops);
	if (!vctx) {
		*bad_op = op;
		return EOPNOTSUPP;
	}
	return vctx->post_srq_ops(srq, op, bad_op);
}

/* ==== Queue pairs, thread and parent domains ==== */

/* ibv_create_qp(3): NULL with errno set on failure. */
struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr);

/*
 * ibv_create_qp_ex(3).  comp_mask == IBV_QP_INIT_ATTR_PD is served by
 * ibv_create_qp(); anything else needs the context's create_qp_ex and
 * fails with errno EOPNOTSUPP without it.
 */
static inline struct ibv_qp *
ibv_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *qp_init_attr_ex)
{
	struct verbs_context *vctx;
	uint32_t mask = qp_init_attr_ex->comp_mask;

	if (mask == IBV_QP_INIT_ATTR_PD)
		return ibv_create_qp(qp_init_attr_ex->pd,
				     (struct ibv_qp_init_attr *)qp_init_attr_ex);

	vctx = verbs_get_ctx_op(context, create_qp_ex);
	if (!vctx) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return vctx->create_qp_ex(context, qp_init_attr_ex);
}

/* ibv_alloc_td(3): NULL with errno EOPNOTSUPP when absent. */
static inline struct ibv_td *ibv_alloc_td(struct ibv_context *context,
					  struct ibv_td_init_attr *init_attr)
{
	struct verbs_context *vctx;

	vctx = verbs_get_ctx_op(context, alloc_td);
	if (!vctx) {
		errno = EOPNOTSUPP;
		return NULL;
	}

	return vctx->alloc_td(context, init_attr);
}

/* ibv_dealloc_td(3): 0, EOPNOTSUPP when absent, or an errno value. */
static inline int ibv_dealloc_td(struct ibv_td *td)
{
	struct verbs_context *vctx;

	vctx = verbs_get_ctx_op(td->context, dealloc_td);
	if (!vctx)
		return EOPNOTSUPP;

	return vctx->dealloc_td(td);
}

/*
 * ibv_alloc_parent_domain(3): NULL with errno EOPNOTSUPP when absent.
 * The result is freed with ibv_dealloc_pd().
 */
static inline struct ibv_pd *
ibv_alloc_parent_domain(struct ibv_context *context,
			struct ibv_parent_domain_init_attr *attr)
{
	struct verbs_context *vctx;

	vctx = verbs_get_ctx_op(context, alloc_parent_domain);
	if (!vctx) {
		errno = EOPNOTSUPP;
		return NULL;
	}

	return vctx->alloc_parent_domain(context, attr);
}

/* ibv_query_rt_values_ex(3): 0, EOPNOTSUPP when absent, or an errno value. */
static inline int
ibv_query_rt_values_ex(struct ibv_context *context,
		       struct ibv_values_ex *values)
{
	struct verbs_context *vctx;

	vctx = verbs_get_ctx_op(context, query_rt_values);
	if (!vctx)
		return EOPNOTSUPP;

	return vctx->query_rt_values(context, values);
}

/*
 * ibv_query_device_ex(3): 0 or an errno value; EINVAL when input has a
 * non-zero comp_mask.  When the context has no query_device_ex, or it
 * reports EOPNOTSUPP/ENOSYS, attr is zeroed and only orig_attr is filled
 * by ibv_query_device().
 */
static inline int
ibv_query_device_ex(struct ibv_context *context,
		    const struct ibv_query_device_ex_input *input,
		    struct ibv_device_attr_ex *attr)
{
	struct verbs_context *vctx;
	int ret;

	if (input && input->comp_mask)
		return EINVAL;

	vctx = verbs_get_ctx_op(context, query_device_ex);
	if (vctx) {
		ret = vctx->query_device_ex(context, input, attr,
					    sizeof(*attr));
		if (ret != EOPNOTSUPP && ret != ENOSYS)
			return ret;
	}

	memset(attr, 0, sizeof(*attr));
	return ibv_query_device(context, &attr->orig_attr);
}

/* ibv_open_qp(3): NULL with errno EOPNOTSUPP when absent. */
static inline struct ibv_qp *
ibv_open_qp(struct ibv_context *context, struct ibv_qp_open_attr *qp_open_attr)
{
	struct verbs_context *vctx = verbs_get_ctx_op(context, open_qp);

	if (!vctx) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return vctx->open_qp(context, qp_open_attr);
}

/* ibv_modify_qp(3): 0 or an errno value. */
int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		  int attr_mask);

/*
 * ibv_modify_qp_rate_limit(3): 0, EOPNOTSUPP when absent, or an errno
 * value.
 */
static inline int
ibv_modify_qp_rate_limit(struct ibv_qp *qp,
			 struct ibv_qp_rate_limit_attr *attr)
{
	struct verbs_context *vctx;

	vctx = verbs_get_ctx_op(qp->context, modify_qp_rate_limit);
	if (!vctx)
		return EOPNOTSUPP;

	return vctx->modify_qp_rate_limit(qp, attr);
}

/*
 * ibv_query_qp_data_in_order(3): 1 when the data of one operation of type
 * op (RDMA read, RDMA write or send) arriving at qp is written to memory in
 * order, so that the CPU may poll the data instead of the completion; 0
 * otherwise.  flags must be 0 (rdma-core 44); from rdma-core 56 flags may be
 * IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS, and the answer is then a vector of
 * enum ibv_query_qp_data_in_order_caps bits.
 */
int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op,
			       uint32_t flags);

/* ibv_query_qp(3): 0 or an errno value. */
int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		 int attr_mask,
		 struct ibv_qp_init_attr *init_attr);

/* ibv_destroy_qp(3): 0 or an errno value. */
int ibv_destroy_qp(struct ibv_qp *qp);

/* ==== Work queues and RSS indirection tables ==== */

/*
 * ibv_create_wq(3): NULL with errno EOPNOTSUPP when absent.  The WQ's
 * event bookkeeping (events_completed, mutex, cond) is initialised here.
 */
static inline struct ibv_wq *ibv_create_wq(struct ibv_context *context,
					   struct ibv_wq_init_attr *wq_init_attr)
{
	struct verbs_context *vctx = verbs_get_ctx_op(context, create_wq);
	struct ibv_wq *wq;

	if (!vctx) {
		errno = EOPNOTSUPP;
		return NULL;
	}

	wq = vctx->create_wq(context, wq_init_attr);
	if (wq) {
		wq->events_completed = 0;
		pthread_mutex_init(&wq->mutex, NULL);
		pthread_cond_init(&wq->cond, NULL);
	}

	return wq;
}

/* ibv_modify_wq(3): 0, EOPNOTSUPP when absent, or an errno value. */
static inline int ibv_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *wq_attr)
{
	struct verbs_context *vctx = verbs_get_ctx_op(wq->context, modify_wq);

	if (!vctx)
		return EOPNOTSUPP;

	return vctx->modify_wq(wq, wq_attr);
}

/* ibv_destroy_wq(3): 0, EOPNOTSUPP when absent, or an errno value. */
static inline int ibv_destroy_wq(struct ibv_wq *wq)
{
	struct verbs_context *vctx;

	vctx = verbs_get_ctx_op(wq->context, destroy_wq);
	if (!vctx)
		return EOPNOTSUPP;

	return vctx->destroy_wq(wq);
}

/* ibv_create_rwq_ind_table(3): NULL with errno EOPNOTSUPP when absent. */
static inline struct ibv_rwq_ind_table *
ibv_create_rwq_ind_table(struct ibv_context *context,
			 struct ibv_rwq_ind_table_init_attr *init_attr)
{
	struct verbs_context *vctx;

	vctx = verbs_get_ctx_op(context, create_rwq_ind_table);
	if (!vctx) {
		errno = EOPNOTSUPP;
		return NULL;
	}

	return vctx->create_rwq_ind_table(context, init_attr);
}

/*
 * ibv_destroy_rwq_ind_table(3): 0, EOPNOTSUPP when absent, or an errno
 * value.
 */
static inline int ibv_destroy_rwq_ind_table(struct ibv_rwq_ind_table *rwq_ind_table)
{
	struct verbs_context *vctx;

	vctx = verbs_get_ctx_op(rwq_ind_table->context, destroy_rwq_ind_table);
	if (!vctx)
		return EOPNOTSUPP;

	return vctx->destroy_rwq_ind_table(rwq_ind_table);
}

/*
 * ibv_post_send(3): 0, or an errno value with *bad_wr at the first
 * request that failed.
 */
static inline int ibv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
				struct ibv_send_wr **bad_wr)
{
	return qp->context->ops.post_send(qp, wr, bad_wr);
}

/* ibv_post_recv(3): as ibv_post_send(). */
static inline int ibv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
				struct ibv_recv_wr **bad_wr)
{
	return qp->context->ops.post_recv(qp, wr, bad_wr);
}

/* ==== Address handles and multicast ==== */

/* ibv_create_ah(3): NULL with errno set on failure. */
struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);

/*
 * ibv_init_ah_from_wc(3): fills ah_attr to reply to the sender of a UD
 * completion (grh is the GRH that preceded the payload); 0 or -1.
 */
int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num,
			struct ibv_wc *wc, struct ibv_grh *grh,
			struct ibv_ah_attr *ah_attr);

/* ibv_create_ah_from_wc(3): NULL with errno set on failure. */
struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
				     struct ibv_grh *grh, uint8_t port_num);

/* ibv_destroy_ah(3): 0 or an errno value. */
int ibv_destroy_ah(struct ibv_ah *ah);

/* ibv_attach_mcast(3): 0 or an errno value. */
int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
		     uint16_t lid);

/* ibv_detach_mcast(3): 0 or an errno value. */
int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
		     uint16_t lid);

/* ==== fork() support and strings ==== */

/* ibv_fork_init(3): 0 or an errno value. */
int ibv_fork_init(void);

/* ibv_is_fork_initialized(3) */
enum ibv_fork_status ibv_is_fork_initialized(void);

/* Printable names (ibv_node_type_str(3) and friends); never NULL. */
const char *ibv_node_type_str(enum ibv_node_type node_type);

/* Name of a port state (ibv_port_state_str(3)); never NULL. */
const char *ibv_port_state_str(enum ibv_port_state port_state);

/* Description of an event type (ibv_event_type_str(3)); never NULL. */
const char *ibv_event_type_str(enum ibv_event_type event);

#if _OPENVERBS_ABI < 56
#define ETHERNET_LL_SIZE 6
#endif

/*
 * RoCE: resolves the destination MAC (ETHERNET_LL_SIZE bytes) and VLAN id
 * of attr's GID through the kernel's neighbour tables; 0 on success,
 * non-zero on failure.
 */
int ibv_resolve_eth_l2_from_gid(struct ibv_context *context,
				struct ibv_ah_attr *attr,
				uint8_t eth_mac[ETHERNET_LL_SIZE],
				uint16_t *vid);

/* Whether a supported_qpts bit set (e.g. tso_caps) has qpt. */
static inline int ibv_is_qpt_supported(uint32_t caps, enum ibv_qp_type qpt)
{
	return !!(caps & (1 << qpt));
}

/* ==== Counters ==== */

/* ibv_create_counters(3): NULL with errno EOPNOTSUPP when absent. */
static inline struct ibv_counters *ibv_create_counters(struct ibv_context *context,
						       struct ibv_counters_init_attr *init_attr)
{
	struct verbs_context *vctx;

	vctx = verbs_get_ctx_op(context, create_counters);
	if (!vctx) {
		errno = EOPNOTSUPP;
		return NULL;
	}

	return vctx->create_counters(context, init_attr);
}

/* ibv_destroy_counters(3): 0, EOPNOTSUPP when absent, or an errno value. */
static inline int ibv_destroy_counters(struct ibv_counters *counters)
{
	struct verbs_context *vctx;

	vctx = verbs_get_ctx_op(counters->context, destroy_counters);
	if (!vctx)
		return EOPNOTSUPP;

	return vctx->destroy_counters(counters);
}

/*
 * ibv_attach_counters_point_flow(3): 0, EOPNOTSUPP when absent, or an
 * errno value.
 */
static inline int ibv_attach_counters_point_flow(struct ibv_counters *counters,
						 struct ibv_counter_attach_attr *attr,
						 struct ibv_flow *flow)
{
	struct verbs_context *vctx;

	vctx = verbs_get_ctx_op(counters->context, attach_counters_point_flow);
	if (!vctx)
		return EOPNOTSUPP;

	return vctx->attach_counters_point_flow(counters, attr, flow);
}

/*
 * ibv_read_counters(3): ncounters values into counters_value; flags are
 * enum ibv_read_counters_flags.  0, EOPNOTSUPP when absent, or an errno
 * value.
 */
static inline int ibv_read_counters(struct ibv_counters *counters,
				    uint64_t *counters_value,
				    uint32_t ncounters,
				    uint32_t flags)
{
	struct verbs_context *vctx;

	vctx = verbs_get_ctx_op(counters->context, read_counters);
	if (!vctx)
		return EOPNOTSUPP;

	return vctx->read_counters(counters, counters_value, ncounters, flags);
}

/* ==== RoCE v2 helpers ==== */

#define IB_ROCE_UDP_ENCAP_VALID_PORT_MIN (0xC000)
#define IB_ROCE_UDP_ENCAP_VALID_PORT_MAX (0xFFFF)
#define IB_GRH_FLOWLABEL_MASK (0x000FFFFF)

/*
 * The RoCE v2 UDP source port derived from a 20-bit flow label: the top
 * 6 bits are folded onto the low 14 bits and the result is placed in the
 * range IB_ROCE_UDP_ENCAP_VALID_PORT_MIN..MAX.
 */
static inline uint16_t ibv_flow_label_to_udp_sport(uint32_t fl)
{
	uint32_t low = fl & 0x03FFF;
	uint32_t high = fl & 0xFC000;

	low ^= high >> 14;
	return (uint16_t)(low | IB_ROCE_UDP_ENCAP_VALID_PORT_MIN);
}

/* ==== Device memory and special MRs ==== */

/*
 * ibv_alloc_dm(3): device memory of attr->length bytes; NULL with errno
 * EOPNOTSUPP when absent.
 */
static inline struct ibv_dm *ibv_alloc_dm(struct ibv_context *context,
					  struct ibv_alloc_dm_attr *attr)
{
	struct verbs_context *vctx = verbs_get_ctx_op(context, alloc_dm);

	if (!vctx) {
		errno = EOPNOTSUPP;
		return NULL;
	}

	return vctx->alloc_dm(context, attr);
}

/* ibv_free_dm(3): 0, EOPNOTSUPP when absent, or an errno value. */
static inline int ibv_free_dm(struct ibv_dm *dm)
{
	struct verbs_context *vctx = verbs_get_ctx_op(dm->context, free_dm);

	if (!vctx)
		return EOPNOTSUPP;

	return vctx->free_dm(dm);
}

/* ibv_memcpy_to_dm(3): 0 or an errno value. */
static inline int ibv_memcpy_to_dm(struct ibv_dm *dm, uint64_t dm_offset,
				   const void *host_addr, size_t length)
{
	return dm->memcpy_to_dm(dm, dm_offset, host_addr, length);
}

/* ibv_memcpy_from_dm(3): 0 or an errno value. */
static inline int ibv_memcpy_from_dm(void *host_addr, struct ibv_dm *dm,
				     uint64_t dm_offset, size_t length)
{
	return dm->memcpy_from_dm(host_addr, dm, dm_offset, length);
}

/*
 * ibv_alloc_null_mr(3): an MR whose writes are dropped and reads return
 * zero; NULL with errno EOPNOTSUPP when absent.
 */
static inline struct ibv_mr *ibv_alloc_null_mr(struct ibv_pd *pd)
{
	struct verbs_context *vctx;

	vctx = verbs_get_ctx_op(pd->context, alloc_null_mr);
	if (!vctx) {
		errno = EOPNOTSUPP;
		return NULL;
	}

	return vctx->alloc_null_mr(pd);
}

/*
 * ibv_reg_dm_mr(3): registers dm_offset..+length of device memory; NULL
 * with errno EOPNOTSUPP when absent.
 */
static inline struct ibv_mr *ibv_reg_dm_mr(struct ibv_pd *pd,
					   struct ibv_dm *dm, uint64_t dm_offset,
					   size_t length, unsigned int access)
{
	struct verbs_context *vctx = verbs_get_ctx_op(pd->context, reg_dm_mr);

	if (!vctx) {
		errno = EOPNOTSUPP;
		return NULL;
	}

	return vctx->reg_dm_mr(pd, dm, dm_offset, length, access);
}

/*
 * ibv_advise_mr(3): prefetch hints for ODP memory; 0, EOPNOTSUPP when
 * absent, or an errno value.
 */
static inline int ibv_advise_mr(struct ibv_pd *pd,
				enum ibv_advise_mr_advice advice,
				uint32_t flags,
				struct ibv_sge *sg_list,
				uint32_t num_sge)
{
	struct verbs_context *vctx;

	vctx = verbs_get_ctx_op(pd->context, advise_mr);
	if (!vctx)
		return EOPNOTSUPP;

	return vctx->advise_mr(pd, advice, flags, sg_list, num_sge);
}

/* ==== Enhanced connection establishment ==== */

/* ibv_query_ece(3): 0 or an errno value (EOPNOTSUPP when unsupported). */
int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece);

/* ibv_set_ece(3): 0 or an errno value (EOPNOTSUPP when unsupported). */
int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece);

#if _OPENVERBS_ABI >= 64
/* ==== rdma-core 64: DMA handles, extended registration, buffers, speed ==== */

/*
 * ibv_alloc_dmah(3): a DMA handle with attr's steering hints.  NULL with
 * errno on failure: EOPNOTSUPP when the provider (or the kernel) has none,
 * EINVAL for a bad attribute.
 */
struct ibv_dmah *ibv_alloc_dmah(struct ibv_context *context,
				struct ibv_dmah_init_attr *attr);

/* ibv_alloc_dmah(3): frees a DMA handle; 0 or an errno value (EBUSY while an
 * MR uses it, EOPNOTSUPP). */
int ibv_dealloc_dmah(struct ibv_dmah *dmah);

/*
 * ibv_reg_mr_ex(3): registers memory described by *mr_init_attr (an address
 * or a dma-buf fd and offset, optionally an IOVA, a DMA handle or a buffer of
 * ibv_alloc_buf()); the attr is not modified.  NULL with errno on failure:
 * EINVAL for a contradictory mask, EOPNOTSUPP for what the provider cannot
 * do, or the kernel's error.
 */
struct ibv_mr *ibv_reg_mr_ex(struct ibv_pd *pd,
			     struct ibv_mr_init_attr *mr_init_attr);

/*
 * ibv_query_port_speed(3): the effective speed of a port in units of
 * 100 Mb/s in *port_speed.  0 or an errno value (EOPNOTSUPP when unknown).
 */
int ibv_query_port_speed(struct ibv_context *context, uint32_t port_num,
			 uint64_t *port_speed);

/* ibv_dm_export_dmabuf_fd(3): a dma-buf fd for device memory, or -1 with
 * errno (EOPNOTSUPP when unsupported). */
int ibv_dm_export_dmabuf_fd(struct ibv_dm *dm);

/*
 * ibv_alloc_buf(3): size bytes of at least page-aligned memory allocated the
 * way the provider prefers for DMA; *buf receives the handle for
 * ibv_reg_buf_mr() and ibv_free_buf().  NULL with errno (ENOMEM) on failure.
 */
void *ibv_alloc_buf(struct ibv_pd *pd, size_t size, struct ibv_buf **buf);

/* ibv_alloc_buf(3): frees a buffer of ibv_alloc_buf(). */
void ibv_free_buf(struct ibv_buf *buf);

/*
 * ibv_reg_buf_mr(3): registers addr..addr+length inside a buffer of
 * ibv_alloc_buf() (same pd).  NULL with errno: EINVAL when the range leaves
 * the buffer or pd differs, else as ibv_reg_mr_ex().
 */
struct ibv_mr *ibv_reg_buf_mr(struct ibv_pd *pd, struct ibv_buf *buf,
			      void *addr, size_t length, int access);

#endif /* _OPENVERBS_ABI >= 64 */

#ifdef __cplusplus
}
#endif

#undef __attribute_const

#endif /* INFINIBAND_VERBS_H */
