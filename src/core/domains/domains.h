// Protection, parent and thread domains: validation and lifetime in the core,
// for every provider (issue: parent and thread domains end to end).
//
// Applications reach ibv_alloc_parent_domain / ibv_alloc_td / ibv_dealloc_td
// through inline functions of verbs.h that call the public verbs_context
// slots; the core installs the lib_* functions below into those slots (see
// install_domain_ops) so that every provider gets the same argument checks
// and reference rules:
//  - a provider without the op keeps answering EOPNOTSUPP first, whatever the
//    arguments (as rdma-core's stubs do: Debian's librxe/libsiw);
//  - parent domain: attr and attr->pd non-NULL, pd and td of this context,
//    comp_mask within ALLOCATORS|PD_CONTEXT, ALLOCATORS needs alloc and free
//    (EINVAL otherwise);
//  - thread domain: attr non-NULL, comp_mask 0 (EINVAL otherwise);
//  - a PD or TD referenced by a live parent domain cannot be freed (EBUSY);
//  - freeing a TD, a parent domain or (once the process uses parent or thread
//    domains) a PD that is unknown or already freed gives EINVAL instead of
//    handing a dangling pointer to the provider. Before the first parent or
//    thread domain the PD bookkeeping is off (nothing can reference a PD), so
//    plain programs pay nothing for it.
// Source: ibv_alloc_parent_domain(3), ibv_alloc_td(3).
#pragma once

#include <infiniband/driver.h>

namespace ov::domains {

// Installs the lib_* wrappers into the public slots of a new context for the
// ops its provider implements, i.e. whose priv->ops entry differs from the
// core's EOPNOTSUPP stub in `dummy` (call after the provider's verbs_set_ops).
void install_domain_ops(struct verbs_context *vctx,
			const struct verbs_context_ops &dummy) noexcept;

ibv_pd *lib_alloc_parent_domain(ibv_context *ctx, ibv_parent_domain_init_attr *attr);
ibv_td *lib_alloc_td(ibv_context *ctx, ibv_td_init_attr *attr);
int lib_dealloc_td(ibv_td *td);

// Bookkeeping of PDs handed to the application (ibv_alloc_pd, ibv_import_pd,
// parent domains). note_pd_alloc never fails the caller: if memory for the
// record is missing, the PD is simply not tracked.
void note_pd_alloc(ibv_pd *pd) noexcept;
// Before asking the provider to free pd: 0, EBUSY (parent domains still use
// it) or EINVAL (unknown or already freed). Only PDs noted by note_pd_alloc
// are checked; others pass (0).
int check_dealloc_pd(ibv_pd *pd) noexcept;
// After the provider freed pd: forget it and drop its references.
void note_pd_freed(ibv_pd *pd) noexcept;

// True if pd is a live parent domain (for CQs created with
// IBV_CQ_INIT_ATTR_MASK_PD, whose parent_domain must be one).
bool is_parent_domain(ibv_pd *pd) noexcept;

// Test support: forget everything.
void reset_for_testing() noexcept;

} // namespace ov::domains
