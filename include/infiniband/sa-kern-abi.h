/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * openverbs: <infiniband/sa-kern-abi.h>
 *
 * Obsolete: the kernel's path record is struct ib_user_path_rec from the
 * kernel uapi <rdma/ib_user_sa.h>.  The old names below alias it, as in
 * rdma-core 44, which also warns when this header is used.
 */
#ifndef INFINIBAND_SA_KERN_ABI_H
#define INFINIBAND_SA_KERN_ABI_H

#warning "This header is obsolete, use rdma/ib_user_sa.h instead"

#include <linux/types.h>
#include <rdma/ib_user_sa.h>

#define ib_kern_path_rec ib_user_path_rec
#define ibv_kern_path_rec ib_user_path_rec

#endif /* INFINIBAND_SA_KERN_ABI_H */
