/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * openverbs: <infiniband/tm_types.h>
 *
 * Wire headers of hardware tag matching (ibv_post_srq_ops(3),
 * IBV_SRQT_TM): the tag-matching header (TMH) that precedes every tagged
 * message and the rendezvous header (RVH) that follows it in rendezvous
 * requests.  All multi-byte fields are big endian.
 */
#ifndef _TM_TYPES_H
#define _TM_TYPES_H

#include <linux/types.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ibv_tmh.opcode */
enum ibv_tmh_op {
	IBV_TMH_NO_TAG = 0,	/* untagged message */
	IBV_TMH_RNDV = 1,	/* rendezvous request, an RVH follows */
	IBV_TMH_FIN = 2,	/* rendezvous completion */
	IBV_TMH_EAGER = 3,	/* tagged eager message */
};

struct ibv_tmh {
	uint8_t opcode;		/* enum ibv_tmh_op */
	uint8_t reserved[3];
	__be32 app_ctx;		/* opaque to the hardware */
	__be64 tag;
};

/* Where the sender's rendezvous data can be read from. */
struct ibv_rvh {
	__be64 va;
	__be32 rkey;
	__be32 len;
};

#ifdef __cplusplus
}
#endif

#endif /* _TM_TYPES_H */
