/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * openverbs: <infiniband/ib_user_ioctl_verbs.h>
 *
 * The uverbs ioctl ABI enums and structs (access flags, QP/SRQ/WQ types,
 * flow-action ESP descriptors, driver ids, ...) belong to the kernel; this
 * header takes them from the installed kernel uapi (linux-libc-dev) rather
 * than carrying a private copy.  rdma-core installs its own copy under
 * this name, so applications keep including it from here; what a target
 * release has beyond the installed uapi header is supplied below.
 *
 * Users that want real pointer types in RDMA_UAPI_PTR() members define
 * RDMA_UAPI_PTR before including this file (verbs_api.h does).
 */
#ifndef OPENVERBS_INFINIBAND_IB_USER_IOCTL_VERBS_H
#define OPENVERBS_INFINIBAND_IB_USER_IOCTL_VERBS_H

#include <linux/types.h>
#include <linux/version.h>
#include <infiniband/openverbs_abi.h>

/*
 * rdma-core 56 (Debian 13) has struct ib_uverbs_query_port_resp_ex with
 * active_speed_ex (Linux 6.9 and later); older uapi headers end it with
 * reserved[6].  With such a header, and unless the uapi header was already
 * included, its struct is taken under a reserved name and the 56 layout
 * (same size, same leading members) is declared here under the real one.
 */
#if _OPENVERBS_ABI >= 56 && defined(LINUX_VERSION_CODE) && \
	LINUX_VERSION_CODE < KERNEL_VERSION(6, 9, 0) && !defined(IB_USER_IOCTL_VERBS_H)
#define ib_uverbs_query_port_resp_ex __openverbs_uapi_query_port_resp_ex
#include <rdma/ib_user_ioctl_verbs.h>
#undef ib_uverbs_query_port_resp_ex
struct ib_uverbs_query_port_resp_ex {
	struct ib_uverbs_query_port_resp legacy_resp;
	__u16 port_cap_flags2;
	__u8 reserved[2];
	__u32 active_speed_ex;	/* IB_SPEED_* of the kernel, 0: not reported */
};
#else
#include <rdma/ib_user_ioctl_verbs.h>
#endif

/*
 * rdma-core 44 knows one driver id more than the Linux 6.1 uapi: the
 * Microsoft Azure Network Adapter (added to the kernel's enum rdma_driver_id
 * in 6.2).  With an older uapi header it is supplied here as an enumerator
 * of the same value (an enum cannot be extended, so it lives in an anonymous
 * one).  Newer uapi headers define the enumerator themselves.
 */
#if !defined(LINUX_VERSION_CODE) || LINUX_VERSION_CODE < KERNEL_VERSION(6, 2, 0)
enum { RDMA_DRIVER_MANA = 20 };
/* rdma-core 56 (and Linux 6.2): memory that may be the target of a flush. */
#if _OPENVERBS_ABI >= 56
enum {
	IB_UVERBS_ACCESS_FLUSH_GLOBAL = 1 << 8,
	IB_UVERBS_ACCESS_FLUSH_PERSISTENT = 1 << 9,
};
#endif
#endif

/*
 * rdma-core 64's copy of the uapi has names that no linux-libc-dev up to 6.12
 * (Debian 13) declares: a driver id (the AMD Pensando ionic device), a core
 * capability bit and the descriptor of a buffer given to the kernel by
 * dma-buf or by address.  They are supplied here for those headers.
 */
#if _OPENVERBS_ABI >= 64 && \
	(!defined(LINUX_VERSION_CODE) || LINUX_VERSION_CODE < KERNEL_VERSION(6, 13, 0))
enum { RDMA_DRIVER_IONIC = RDMA_DRIVER_MANA + 1 };
/* the kernel checks the driver data's unused bytes are zero */
enum { IB_UVERBS_CORE_SUPPORT_ROBUST_UDATA = 1 << 1 };

/* How struct ib_uverbs_buffer_desc names its memory. */
enum ib_uverbs_buffer_type {
	IB_UVERBS_BUFFER_TYPE_DMABUF,
	IB_UVERBS_BUFFER_TYPE_VA,
};

/* One buffer passed to the kernel: a dma-buf (fd, addr = offset in it) or
 * user memory (addr = virtual address); flags must be understood by the
 * kernel, optional_flags may be ignored by it (none defined yet). */
struct ib_uverbs_buffer_desc {
	__u32 type;		/* enum ib_uverbs_buffer_type */
	__s32 fd;
	__u32 flags;
	__u32 optional_flags;
	__aligned_u64 addr;
	__aligned_u64 length;	/* bytes */
};
#endif

#endif /* OPENVERBS_INFINIBAND_IB_USER_IOCTL_VERBS_H */
