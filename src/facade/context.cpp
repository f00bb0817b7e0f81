// Context entry points: ibv_open_device(3), ibv_close_device,
// ibv_import_device(3), ibv_get_async_event(3), ibv_ack_async_event, and the
// provider-facing context helpers of IBVERBS_PRIVATE_34.
#include "core/xrc/legacy_xrc.h"
#include "core/context.h"
#include "core/ops.h"
#include "facade/export.h"

#include <infiniband/driver.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdint>

// Opens a context on `device` (the provider's alloc_context gets the uverbs
// fd, or -1 for software and provider-made devices). NULL + errno on
// failure: EINVAL NULL device, the open(2) errno of the character device,
// ENODEV not the expected character device, the provider's errno.
// Source: ibv_open_device(3).
OV_EXPORT_V11 struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	if (!device) {
		errno = EINVAL;
		return nullptr;
	}
	return ov::core::open_device(device, nullptr);
}

// ibv_open_device with provider private data (mlx5dv_open_device).
OV_EXPORT struct ibv_context *verbs_open_device(struct ibv_device *device, void *private_data)
{
	if (!device) {
		errno = EINVAL;
		return nullptr;
	}
	return ov::core::open_device(device, private_data);
}

// Releases the context through the provider's free_context. Returns 0;
// -1 with errno EINVAL for NULL. Source: ibv_close_device(3).
OV_EXPORT_V11 int ibv_close_device(struct ibv_context *context)
{
	if (!context) {
		errno = EINVAL;
		return -1;
	}
	return ov::core::close_device(context);
}

// A context for a dup'ed cmd_fd of another context (the fd is owned by
// the new context and closed by ibv_close_device); also a software device's
// cmd_fd (openverbs-soft(7)). NULL + errno: EINVAL neither a character device
// nor a software device's cmd_fd, ENODEV no listed device has that dev_t,
// EOPNOTSUPP the provider cannot import. Source: ibv_import_device(3).
OV_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	return ov::core::import_device(cmd_fd);
}

// Blocks until the next async event of `context` (reads one
// ib_uverbs_async_event_desc from context->async_fd, <rdma/ib_user_verbs.h>),
// maps the element back to the CQ/QP/SRQ/WQ or port number. 0, or -1 with
// errno (EINVAL NULL argument, EAGAIN non-blocking fd without event, the
// read(2) errno). Source: ibv_get_async_event(3).
OV_EXPORT_V11 int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	if (!context || !event) {
		errno = EINVAL;
		return -1;
	}
	int ret = ov::core::get_async_event(context, event);
	if (!ret)
		ov::legacy_xrc::translate_event(event); // legacy_xrc.h event flag
	return ret;
}

// Acknowledges an event from ibv_get_async_event (counts it on its object so
// that destroy can finish). NULL is ignored. Source: ibv_get_async_event(3).
OV_EXPORT_V11 void ibv_ack_async_event(struct ibv_async_event *event)
{
	if (!event)
		return;
	ov::legacy_xrc::restore_event(event);
	ov::core::ack_async_event(event);
}

// Provider helper: allocates alloc_size zeroed bytes and initialises the
// verbs_context at offset (uintptr_t)context_offset. NULL + errno: EINVAL
// bad sizes, ENOMEM. cmd_fd is closed on failure.
OV_EXPORT void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd,
					      size_t alloc_size,
					      struct verbs_context *context_offset,
					      uint32_t driver_id)
{
	return ov::core::init_and_alloc_context(device, cmd_fd, alloc_size,
						reinterpret_cast<uintptr_t>(context_offset), driver_id);
}

// Provider helper: undoes the initialisation (priv, fds, device reference).
OV_EXPORT void verbs_uninit_context(struct verbs_context *context)
{
	if (context)
		ov::core::uninit_context(context);
}

// Provider helper: installs the non-NULL ops (facts 1.8).
OV_EXPORT void verbs_set_ops(struct verbs_context *vctx, const struct verbs_context_ops *ops)
{
	if (vctx && vctx->priv && ops)
		ov::core::set_ops(vctx, ops);
}

// Default versions of the verbs that also have an @IBVERBS_1.0 twin.
OV_DEFAULT_VERSION_1_1(ibv_ack_async_event);
OV_DEFAULT_VERSION_1_1(ibv_close_device);
OV_DEFAULT_VERSION_1_1(ibv_get_async_event);
OV_DEFAULT_VERSION_1_1(ibv_open_device);
