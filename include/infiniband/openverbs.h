/* openverbs extensions to the provider-facing ABI of libibverbs.
 *
 * Nothing here exists in rdma-core 44: these are the few constants that the
 * openverbs core and its own providers (providers/soft) agree on. Debian's
 * providers never see them.
 */
#ifndef INFINIBAND_OPENVERBS_H
#define INFINIBAND_OPENVERBS_H

#include <stdint.h>
#include <infiniband/verbs.h>

/* Driver id of the openverbs software device ("soft0", "soft1", ...).
 * Stored in verbs_sysfs_dev.driver_id of the synthesised entries and usable
 * in a VERBS_DRIVER_ID() match entry. The kernel's enum rdma_driver_id ends
 * far below this value (RDMA_DRIVER_MANA = 20 in Linux 6.1), so it can never
 * collide with a device the kernel reports. */
#define OPENVERBS_DRIVER_SOFT 0x4f56

/* Name prefix of the software devices; the soft provider matches them with
 * VERBS_NAME_MATCH(OPENVERBS_SOFT_NAME, NULL). */
#define OPENVERBS_SOFT_NAME "soft"

/* Bit in verbs_sysfs_dev.flags marking a synthesised software device: it has
 * no character device (sysfs_cdev 0, empty sysfs_name), the core opens it with
 * cmd_fd = -1 and allocates no async event fd for it. rdma-core uses bits 0
 * and 1 (VSYSFS_READ_MODALIAS, VSYSFS_READ_NODE_GUID). */
#define VSYSFS_SOFT (1U << 31)

/* Environment variable asking for N software devices (0 to 256); a config
 * file line "soft_devices N" in libibverbs.d does the same, the environment
 * wins. */
#define OPENVERBS_SOFT_DEVICES_ENV "RDMAV_SOFT_DEVICES"
#define OPENVERBS_MAX_SOFT_DEVICES 256

/* RoCE v2 software devices: one per network interface named in
 * RDMAV_SOFT_ROCE=IFNAME[,IFNAME...] (or a config file line
 * "soft_roce IFNAME[,IFNAME...]"; the environment wins; ignored in setuid
 * programs), called sroce0, sroce1, ... in the order given. Their entries
 * carry VSYSFS_SOFT and VSYSFS_SOFT_ROCE, driver_id OPENVERBS_DRIVER_SOFT,
 * and the interface name in `modalias` as "openverbs-roce:IFNAME". The
 * soft provider serves them (openverbs-soft(7), ROCE). */
#define OPENVERBS_SOFT_ROCE_ENV "RDMAV_SOFT_ROCE"
#define OPENVERBS_SOFT_ROCE_NAME "sroce"
#define OPENVERBS_SOFT_ROCE_MODALIAS "openverbs-roce:"
#define OPENVERBS_MAX_SOFT_ROCE 64
#define VSYSFS_SOFT_ROCE (1U << 30)

/* Resource types the soft provider passes to the `alloc` and `free`
 * callbacks of a parent domain created with
 * IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS (ibv_alloc_parent_domain(3)):
 * OPENVERBS_SOFT_RESOURCE_TYPE(code) = (OPENVERBS_DRIVER_SOFT << 32) | code,
 * one code per kind of buffer. `free` receives the type `alloc` was called
 * with. Rings ("shared") are asked for in whole pages (size a multiple of the
 * page size, alignment = page size) because the provider replaces those pages
 * by shared ones that other processes map; openverbs-soft(7) describes it. */
enum openverbs_soft_resource {
	/* Completion ring of a CQ (shared; also on ibv_resize_cq). */
	OPENVERBS_SOFT_RES_CQ_RING = 1,
	/* Send queue of a QP: max_send_wr work request slots (process local,
	 * alignment 64). */
	OPENVERBS_SOFT_RES_QP_SQ = 2,
	/* Receive ring of a QP without an SRQ (shared). */
	OPENVERBS_SOFT_RES_QP_RQ_RING = 3,
	/* Receive ring of an SRQ (shared). */
	OPENVERBS_SOFT_RES_SRQ_RING = 4,
	/* Staging area of ibv_wr_start() .. ibv_wr_complete() for QPs created
	 * with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS (process local, alignment 64). */
	OPENVERBS_SOFT_RES_QP_WR_STAGING = 5,
	/* CQs of a parent domain with a thread domain: the lane that holds the
	 * send completions of that thread domain's QPs, one struct ibv_wc per
	 * CQ entry (process local, alignment 64; also on ibv_resize_cq when
	 * the CQ grows). */
	OPENVERBS_SOFT_RES_CQ_LANE = 6,
};

#define OPENVERBS_SOFT_RESOURCE_TYPE(code) \
	(((uint64_t)OPENVERBS_DRIVER_SOFT << 32) | (uint64_t)(code))

/* What the core asks the soft provider. A soft device has no kernel and no
 * sysfs directory, so the few library verbs that rdma-core answers from the
 * kernel or from sysfs without a provider op (ibv_query_gid,
 * _ibv_query_gid_ex, _ibv_query_gid_table, ibv_query_gid_type,
 * ibv_query_pkey, ibv_create_comp_channel) ask the provider through this
 * table. The soft provider publishes it as the `driver_data` of every entry
 * of its match table, so the core reaches it as
 *   verbs_get_device(ctx->device)->sysfs->match->driver_data
 * for devices whose sysfs entry has VSYSFS_SOFT set. Layout: append-only. */
#define OPENVERBS_SOFT_HOOKS_VERSION 2

struct openverbs_soft_hooks {
	uint32_t version; /* OPENVERBS_SOFT_HOOKS_VERSION */
	uint32_t size;    /* sizeof(struct openverbs_soft_hooks) */
	/* GID `index` of port `port_num`: 0, or EINVAL (port not 1, index out
	 * of gid_tbl_len). The GID is fe80::<port GUID>. */
	int (*query_gid)(struct ibv_context *context, uint8_t port_num, int index,
			 union ibv_gid *gid);
	/* P_Key `index` (network order): 0 or EINVAL; the table is {0xffff}. */
	int (*query_pkey)(struct ibv_context *context, uint8_t port_num, int index,
			  __be16 *pkey);
	/* A completion channel fd for ibv_create_comp_channel: the read end of
	 * a pipe (O_CLOEXEC, blocking). Events arrive as the kernel's
	 * struct ib_uverbs_comp_event_desc (8 bytes: cq_handle = the struct
	 * ibv_cq * of the CQ), so ibv_get_cq_event reads it exactly as for a
	 * kernel channel; ibv_destroy_comp_channel just closes it. 0 or errno. */
	int (*create_comp_channel)(struct ibv_context *context, int *fd);
	/* Version 2: GID entry `index` of port `port_num` with its type and
	 * network interface, as ibv_query_gid_ex(3) reports it: 0, ENODATA
	 * (empty slot) or EINVAL (bad port or index). NULL: the entry is
	 * query_gid's GID with type IBV_GID_TYPE_IB and no interface. */
	int (*query_gid_entry)(struct ibv_context *context, uint32_t port_num,
			       uint32_t index, struct ibv_gid_entry *entry);
};

#endif /* INFINIBAND_OPENVERBS_H */
