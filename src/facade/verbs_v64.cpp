// The public verbs rdma-core 64 added (IBVERBS_1.15 .. 1.17), exported by
// the 64 target only: DMA handles, extended and buffer registration,
// provider-allocated buffers, port speed, dma-buf export of device memory.
// Each checks its arguments (EINVAL for NULL objects or attributes, where
// rdma-core dereferences them) and calls the provider's op through the
// authoritative table; ibv_reg_mr_ex's library part is in
// src/core/verbs/mr_ex.cpp. Man pages: ibv_alloc_dmah(3), ibv_reg_mr_ex(3),
// ibv_alloc_buf(3), ibv_query_port_speed(3), ibv_dm_export_dmabuf_fd(3).
#include "core/verbs/verbs.h"
#include "facade/export.h"
#include "facade/verbs_check.h"

#if _OPENVERBS_ABI >= 64

using ov::facade::ctx_ok;
using ov::facade::fail;
using ov::facade::fail_null;
using ov::facade::obj_ok;

OV_EXPORT struct ibv_dmah *ibv_alloc_dmah(struct ibv_context *context, struct ibv_dmah_init_attr *attr)
{
	if (!ctx_ok(context) || !attr)
		return fail_null<struct ibv_dmah>(EINVAL);
	return get_ops(context)->alloc_dmah(context, attr);
}

OV_EXPORT int ibv_dealloc_dmah(struct ibv_dmah *dmah)
{
	if (!obj_ok(dmah))
		return fail(EINVAL);
	return get_ops(dmah->context)->dealloc_dmah(dmah);
}

OV_EXPORT struct ibv_mr *ibv_reg_mr_ex(struct ibv_pd *pd, struct ibv_mr_init_attr *mr_init_attr)
{
	if (!obj_ok(pd) || !mr_init_attr)
		return fail_null<struct ibv_mr>(EINVAL);
	return ov::verbs::reg_mr_ex(pd, mr_init_attr);
}

OV_EXPORT struct ibv_mr *ibv_reg_buf_mr(struct ibv_pd *pd, struct ibv_buf *buf, void *addr, size_t length,
					int access)
{
	if (!obj_ok(pd) || !buf)
		return fail_null<struct ibv_mr>(EINVAL);
	return ov::verbs::reg_buf_mr(pd, buf, addr, length, access);
}

OV_EXPORT void *ibv_alloc_buf(struct ibv_pd *pd, size_t size, struct ibv_buf **buf)
{
	if (!obj_ok(pd) || !buf)
		return fail_null<void>(EINVAL);
	return get_ops(pd->context)->alloc_buf(pd, size, buf);
}

// A NULL handle is ignored, as free(NULL).
OV_EXPORT void ibv_free_buf(struct ibv_buf *buf)
{
	if (!buf || !obj_ok(buf->pd))
		return;
	get_ops(buf->pd->context)->free_buf(buf);
}

OV_EXPORT int ibv_query_port_speed(struct ibv_context *context, uint32_t port_num, uint64_t *port_speed)
{
	if (!ctx_ok(context) || !port_speed)
		return fail(EINVAL);
	return get_ops(context)->query_port_speed(context, port_num, port_speed);
}

OV_EXPORT int ibv_dm_export_dmabuf_fd(struct ibv_dm *dm)
{
	if (!obj_ok(dm)) {
		errno = EINVAL;
		return -1;
	}
	return get_ops(dm->context)->dm_export_dmabuf_fd(dm);
}

#endif // _OPENVERBS_ABI >= 64
