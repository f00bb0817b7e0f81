/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * openverbs: <infiniband/arch.h>
 *
 * Obsolete, kept for old sources: 64-bit host/network byte-order
 * conversion.  New code should use htobe64()/be64toh() from <endian.h>.
 * rdma-core 44 warns when this header is included and marks both helpers
 * deprecated; so does this one.
 */
#ifndef INFINIBAND_ARCH_H
#define INFINIBAND_ARCH_H

#include <stdint.h>
#include <endian.h>
#include <byteswap.h>

#warning "This header is obsolete."

#ifdef __cplusplus
extern "C" {
#endif

/* Host to network (big endian) order of a 64-bit value. */
static inline __attribute__((deprecated)) uint64_t htonll(uint64_t x)
{
#if __BYTE_ORDER == __LITTLE_ENDIAN
	return bswap_64(x);
#else
	return x;
#endif
}
#define htonll htonll

/* Network (big endian) to host order of a 64-bit value. */
static inline __attribute__((deprecated)) uint64_t ntohll(uint64_t x)
{
#if __BYTE_ORDER == __LITTLE_ENDIAN
	return bswap_64(x);
#else
	return x;
#endif
}
#define ntohll ntohll

#ifdef __cplusplus
}
#endif

#endif /* INFINIBAND_ARCH_H */
