// Private per-context state of the core: what `verbs_context::priv` points to.
//
// Not visible to providers or applications (its layout is ours to choose);
// every layer of the library reaches the authoritative op table through
// get_ops(). Owned by the core; the kernel transport reads driver_id and
// the unsupported_ioctls bitmap and keeps ioctl_write.
#pragma once

#include <infiniband/driver.h>
#include <infiniband/openverbs.h>

#include <pthread.h>

#include <cstddef>
#include <cstdint>

// Number of op slots in struct verbs_context_ops (76 in rdma-core 44).
inline constexpr std::size_t kVerbsOpsCount = sizeof(struct verbs_context_ops) / sizeof(void *);

struct verbs_ex_private {
	// One bit per verbs_context_ops slot (bit = offsetof(op) / sizeof(void*)):
	// set once the kernel answered EPROTONOSUPPORT for that op's ioctl
	// method, or all bits after ENOTTY (no ioctl framework at all).
	uint64_t unsupported_ioctls[(kVerbsOpsCount + 63) / 64];
	uint32_t driver_id;        // enum rdma_driver_id given by the provider
	// Whether write() commands can be tunnelled through INVOKE_WRITE:
	// kIoctlWriteUnknown until the transport first needs to know (only a
	// refused write() or an odd-sized command does), then probed once.
	// Read and written with relaxed atomics (two threads may probe at once;
	// both store the same answer).
	uint8_t ioctl_write;
	bool imported;             // context made by ibv_import_device
	// Lives in the provider's context allocation (made by
	// _verbs_init_and_alloc_context), so verbs_uninit_context must not
	// free it: the provider's free() of its context releases it.
	bool embedded;
	struct verbs_context_ops ops; // authoritative op table (verbs_set_ops)
};

// Values of verbs_ex_private::ioctl_write.
inline constexpr uint8_t kIoctlWriteUnknown = 0;
inline constexpr uint8_t kIoctlWriteYes = 1;
inline constexpr uint8_t kIoctlWriteNo = 2;

// The authoritative op table of a context made by this library.
static inline const struct verbs_context_ops *get_ops(struct ibv_context *ctx)
{
	return &verbs_get_ctx(ctx)->priv->ops;
}

// Whether a device is one of the software devices (VSYSFS_SOFT).
static inline bool soft_device(const struct ibv_device *dev)
{
	const struct verbs_device *v = dev ? verbs_get_device(dev) : nullptr;
	return v && v->sysfs && (v->sysfs->flags & VSYSFS_SOFT);
}

// Whether commands of ctx go to a kernel through cmd_fd. A software device's
// context has a cmd_fd too (a stand-in file that ibv_import_device(3)
// recognises), never used for commands.
static inline bool kernel_cmd_fd(const struct ibv_context *ctx)
{
	return ctx->cmd_fd >= 0 && !soft_device(ctx->device);
}

// Bit index of an op in the unsupported_ioctls bitmap.
#define OV_CMD_BIT(op) (offsetof(struct verbs_context_ops, op) / sizeof(void *))

// The mutex and condition variable of a verbs object (ibv_context, ibv_cq,
// ibv_qp, ibv_srq, ibv_wq, the 1.0 wrappers): default attributes, set by
// assigning the static initialisers. POSIX defines them as equivalent to
// pthread_mutex_init/pthread_cond_init with NULL attributes (which cannot
// fail), and the assignment is a few stores instead of two library calls
// in every create verb.
static inline void init_object_sync(pthread_mutex_t *mutex, pthread_cond_t *cond)
{
	static constexpr pthread_mutex_t kMutex = PTHREAD_MUTEX_INITIALIZER;
	static constexpr pthread_cond_t kCond = PTHREAD_COND_INITIALIZER;
	*mutex = kMutex;
	if (cond)
		*cond = kCond;
}
