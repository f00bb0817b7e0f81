/* SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB) */
/*
 * openverbs: <infiniband/ib_user_ioctl_verbs.h>
 *
 * The uverbs ioctl ABI enums and structs (access flags, QP/SRQ/WQ types,
 * flow-action ESP descriptors, driver ids, ...) belong to the kernel; this
 * header takes them from the installed kernel uapi (linux-libc-dev) rather
 * than carrying a private copy.  rdma-core 44 installs its own copy under
 * this name, so applications keep including it from here.
 *
 * Users that want real pointer types in RDMA_UAPI_PTR() members define
 * RDMA_UAPI_PTR before including this file (verbs_api.h does).
 */
#ifndef OPENVERBS_INFINIBAND_IB_USER_IOCTL_VERBS_H
#define OPENVERBS_INFINIBAND_IB_USER_IOCTL_VERBS_H

#include <linux/types.h>
#include <linux/version.h>
#include <rdma/ib_user_ioctl_verbs.h>

/*
 * rdma-core 44 knows one driver id more than the Linux 6.1 uapi: the
 * Microsoft Azure Network Adapter (added to the kernel's enum rdma_driver_id
 * in 6.2).  With an older uapi header it is supplied here as an enumerator
 * of the same value (an enum cannot be extended, so it lives in an anonymous
 * one).  Newer uapi headers define the enumerator themselves.
 */
#if !defined(LINUX_VERSION_CODE) || LINUX_VERSION_CODE < KERNEL_VERSION(6, 2, 0)
enum { RDMA_DRIVER_MANA = 20 };
#endif

#endif /* OPENVERBS_INFINIBAND_IB_USER_IOCTL_VERBS_H */
