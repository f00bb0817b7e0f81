/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * openverbs: <infiniband/ib.h>
 *
 * The AF_IB socket address family as librdmacm uses it: a 128-bit GID-style
 * address, a P_Key, a service ID with its mask and a scope.  Layouts match
 * rdma-core 44 (Debian 12's librdmacm-dev); the kernel side is struct
 * sockaddr_ib of the rdma_cm.  rdma_cm(7) describes when AF_IB is used.
 */
#ifndef _RDMA_IB_H
#define _RDMA_IB_H

#include <linux/types.h>
#include <string.h>
#include <endian.h>

#ifndef AF_IB
#define AF_IB 27
#endif
#ifndef PF_IB
#define PF_IB AF_IB
#endif

/* A 16-byte InfiniBand address; the same bytes as a GID. */
struct ib_addr {
	union {
		__u8 uib_addr8[16];
		__be16 uib_addr16[8];
		__be32 uib_addr32[4];
		__be64 uib_addr64[2];
	} ib_u;
#define sib_addr8 ib_u.uib_addr8
#define sib_addr16 ib_u.uib_addr16
#define sib_addr32 ib_u.uib_addr32
#define sib_addr64 ib_u.uib_addr64
#define sib_raw ib_u.uib_addr8
#define sib_subnet_prefix ib_u.uib_addr64[0]
#define sib_interface_id ib_u.uib_addr64[1]
};

/* True when every byte of the address is zero (the wildcard). */
static inline int ib_addr_any(const struct ib_addr *a)
{
	return ((a->sib_addr64[0] | a->sib_addr64[1]) == 0);
}

/*
 * True for the loopback address ::1.  (Tested byte by byte, so that the
 * header needs no htobe32(), which strict C11 does not declare.)
 */
static inline int ib_addr_loopback(const struct ib_addr *a)
{
	return ((a->sib_addr32[0] | a->sib_addr32[1] | a->sib_addr32[2]) == 0 &&
		a->sib_addr8[12] == 0 && a->sib_addr8[13] == 0 &&
		a->sib_addr8[14] == 0 && a->sib_addr8[15] == 1);
}

/* Stores four 32-bit words, given in network order, into the address. */
static inline void ib_addr_set(struct ib_addr *addr, __be32 w1, __be32 w2,
			       __be32 w3, __be32 w4)
{
	addr->sib_addr32[0] = w1;
	addr->sib_addr32[1] = w2;
	addr->sib_addr32[2] = w3;
	addr->sib_addr32[3] = w4;
}

/* memcmp() order of two addresses: 0 when equal. */
static inline int ib_addr_cmp(const struct ib_addr *a1, const struct ib_addr *a2)
{
	return memcmp(a1, a2, sizeof(struct ib_addr));
}

/* An AF_IB socket address (48 bytes, the size of the kernel's). */
struct sockaddr_ib {
	unsigned short int sib_family; /* AF_IB */
	__be16 sib_pkey;
	__be32 sib_flowinfo;
	struct ib_addr sib_addr;
	__be64 sib_sid;
	__be64 sib_sid_mask;
	__u64 sib_scope_id;
};

#endif /* _RDMA_IB_H */
