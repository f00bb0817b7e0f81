// Library-side ops that the core installs into every context it opens.
//
// rdma-core 44 never lets applications reach two provider ops directly:
// `verbs_context::create_cq_ex` and `verbs_context::query_port` point at
// library wrappers (set_lib_ops), which validate and then call the provider
// op from the authoritative table (get_ops(ctx)). The `core` helper stores
// these two functions into those public slots after the provider's
// alloc_context returned; the `verbs` helper (src/core/verbs) owns them.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

namespace ov {

// verbs_context::create_cq_ex. Rejects wc_flags outside
// IBV_CREATE_CQ_SUP_WC_FLAGS (errno EOPNOTSUPP, NULL), else calls the
// provider's create_cq_ex and initialises the library fields of the CQ
// (context, channel reference, cq_context, event counters, mutex/cond) as
// verbs_init_cq() does. NULL context or attr: NULL, errno EINVAL.
// Source: ibv_create_cq_ex(3).
struct ibv_cq_ex *lib_create_cq_ex(struct ibv_context *context,
				   struct ibv_cq_init_attr_ex *cq_attr) noexcept;

// verbs_context::query_port, reached by the ibv_query_port() macro of
// verbs.h through ___ibv_query_port(ctx, port, attr, sizeof(*attr)).
// port_attr_len is the caller's sizeof(struct ibv_port_attr): applications
// built against older headers pass a smaller struct; the provider always
// gets a full, zeroed struct and only port_attr_len bytes are copied back.
// Returns 0 or an errno value (EINVAL for NULL context/attr).
// Source: ibv_query_port(3).
int lib_query_port(struct ibv_context *context, uint8_t port_num,
		   struct ibv_port_attr *port_attr, size_t port_attr_len) noexcept;

} // namespace ov
