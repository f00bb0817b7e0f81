// Provider registration and the provider logging backend (IBVERBS_PRIVATE_34
// and the IBVERBS_1.1 compat stub).
#include "common/log.h"
#include "core/providers.h"
#include "facade/export.h"

#include <infiniband/driver.h>

#include <cstdarg>

// A data object with default visibility (driver.h already declares it
// extern "C").
#define OV_EXPORT_DATA __attribute__((visibility("default")))

// Set at library init from RDMAV_ALLOW_DISASSOC_DESTROY (or the legacy
// MLX4_DEVICE_FATAL_CLEANUP): destroy commands failing with EIO after a
// device disassociation count as success (verbs_is_destroy_err()).
OV_EXPORT_DATA bool verbs_allow_disassociate_destroy = false;

// Called by a provider's constructor (PROVIDER_DRIVER) while it is being
// dlopen'ed. Registering the same ops twice has no effect; ops without a
// name or alloc_device are ignored with a diagnostic.
// The name carries the private ABI: verbs_register_driver_34 up to rdma-core
// 56, verbs_register_driver_64 for the 64 target (driver.h's macro).
OV_EXPORT void verbs_register_driver(const struct verbs_device_ops *ops)
{
	ov::core::register_provider(ops);
}

// The pre-2017 registration entry point (libibverbs 1.1 providers). Such
// providers cannot work with this ABI; like rdma-core, accept and ignore.
// The init function type is the 1.1 ABI's (device from sysfs path and ABI).
typedef struct ibv_device *(*ibv_driver_init_func_1_1)(const char *uverbs_sys_path,
						       int abi_version);
OV_EXPORT void ov_register_driver_1_1(const char *name, ibv_driver_init_func_1_1 init_func);
OV_SYMVER(ov_register_driver_1_1, "ibv_register_driver@IBVERBS_1.1");
OV_EXPORT void ov_register_driver_1_1(const char *, ibv_driver_init_func_1_1)
{
	ov::log(ov::LOG_WARN, "libibverbs: ignoring a provider using the obsolete ibv_register_driver\n");
}

// Backend of the verbs_err/verbs_warn/verbs_info/verbs_debug macros: prints
// through VERBS_LOG_FILE when `level` <= VERBS_LOG_LEVEL.
OV_EXPORT void __verbs_log(struct verbs_context *ctx, uint32_t level, const char *fmt, ...)
{
	if (!fmt || static_cast<int>(level) > ov::log_level())
		return;
	va_list ap;
	va_start(ap, fmt);
	ov::vlog(static_cast<int>(level), fmt, ap);
	va_end(ap);
}
