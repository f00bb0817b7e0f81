// Argument checks shared by the exported verbs (src/facade/verbs_*.cpp).
//
// A context is usable when it was made by this library: ibv_context's
// abi_compat marks the extended verbs_context and priv holds the op table.
// Objects are usable when non-NULL and attached to a usable context.
#pragma once

#include "core/context_private.h"

#include <cerrno>

namespace ov::facade {

inline bool ctx_ok(struct ibv_context *ctx) noexcept
{
	if (!ctx)
		return false;
	struct verbs_context *vctx = verbs_get_ctx(ctx);
	return vctx && vctx->priv;
}

template <typename Obj> inline bool obj_ok(Obj *obj) noexcept
{
	return obj && ctx_ok(obj->context);
}

// int verbs: return the errno value and leave it in errno.
inline int fail(int err) noexcept
{
	errno = err;
	return err;
}

// pointer verbs: NULL with errno.
template <typename T = void> inline T *fail_null(int err) noexcept
{
	errno = err;
	return nullptr;
}

} // namespace ov::facade
