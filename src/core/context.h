// Contexts: creation through a provider, the library ops, teardown, import,
// and the asynchronous event queue (facts 1.6, 1.8).
#pragma once

#include <infiniband/driver.h>

#include <cstddef>
#include <cstdint>

namespace ov::core {

// verbs_init_context: takes a device reference, fills the library fields of
// the embedded ibv_context (device, cmd_fd, async_fd -1, mutex, abi_compat,
// sz), allocates priv (or uses `embedded`, zeroed memory that lives as long
// as the context), installs the dummy ops and probes INVOKE_WRITE.
// 0, or an errno value; on failure cmd_fd is closed and nothing is held.
int init_context(verbs_context *vctx, ibv_device *dev, int cmd_fd, uint32_t driver_id,
		 verbs_ex_private *embedded = nullptr) noexcept;

// _verbs_init_and_alloc_context: one calloc for the provider's alloc_size
// bytes and, after them, the context's priv; init_context on the
// verbs_context at `offset`. NULL with errno on failure (cmd_fd closed).
void *init_and_alloc_context(ibv_device *dev, int cmd_fd, size_t alloc_size, size_t offset,
			     uint32_t driver_id) noexcept;

// verbs_uninit_context: frees priv (unless embedded), closes cmd_fd and async_fd, drops the
// device reference. The provider frees its own allocation afterwards.
void uninit_context(verbs_context *vctx) noexcept;

// The library's entries in the public slots (create_cq_ex, query_port, the
// _compat_ slots of old binaries and the 1.1.8 flow placeholders).
void set_lib_ops(verbs_context *vctx) noexcept;

// verbs_open_device / ibv_open_device: NULL with errno on failure.
ibv_context *open_device(ibv_device *dev, void *private_data) noexcept;
// ibv_import_device: NULL with errno (EINVAL neither a char device nor a
// software device's cmd_fd, ENODEV no such device, EOPNOTSUPP provider
// cannot import).
ibv_context *import_device(int cmd_fd) noexcept;
// ibv_close_device: provider free_context. Always 0.
int close_device(ibv_context *ctx) noexcept;

// Opens /dev/infiniband/<name> (O_RDWR|O_CLOEXEC) and checks it is the
// character device `cdev` (0: any), falling back to /dev/char/MAJ:MIN.
// fd or -1 with errno.
int open_cdev(const char *name, dev_t cdev) noexcept;

// ibv_get_async_event / ibv_ack_async_event.
int get_async_event(ibv_context *ctx, ibv_async_event *event) noexcept;
void ack_async_event(ibv_async_event *event) noexcept;

// One-time library initialisation (fork safety, disassociation flag,
// RLIMIT_MEMLOCK warning); run by the first get_device_list.
void library_init() noexcept;

} // namespace ov::core
