/* openverbs software RDMA device: what the core asks the soft provider.
 *
 * A soft device has no kernel and no sysfs directory, so the few library
 * verbs that rdma-core answers from the kernel or from sysfs without a
 * provider op (ibv_query_gid / _ibv_query_gid_ex / _ibv_query_gid_table,
 * ibv_query_pkey, ibv_create_comp_channel) must ask the provider. The soft
 * provider publishes this table as the `driver_data` of every entry of its
 * match table, so the core reaches it as
 *   verbs_get_device(ctx->device)->sysfs->match->driver_data
 * for devices whose sysfs entry has VSYSFS_SOFT set.
 *
 * Proposed for include/infiniband/openverbs.h (owned by the core helper);
 * kept here until it moves there. Layout: version 1, append-only.
 */
#ifndef OPENVERBS_SOFT_HOOKS_H
#define OPENVERBS_SOFT_HOOKS_H

#include <infiniband/verbs.h>
#include <stdint.h>

#define OPENVERBS_SOFT_HOOKS_VERSION 1

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
};

#endif
