// The kernel connection manager's command protocol (/dev/infiniband/rdma_cm,
// <rdma/rdma_user_cm.h>, ABI 4): one write(2) of header + command per
// operation, the answer written by the kernel at cmd.response. Every
// command rdma-core 44's librdmacm issues is here, with the same bytes.
#pragma once

#include "../backend.h"

#include <sys/types.h>

namespace ov::cm::kernel {

// Syscall seam: unit tests replace it to see every byte sent to the kernel
// and to answer as the kernel would (ScopedSyscalls; not thread-safe).
struct Syscalls {
	int (*open)(const char *path, int flags);
	ssize_t (*write)(int fd, const void *buf, size_t count);
	int (*close)(int fd);
	int (*poll_in)(int fd, int timeout_ms); // 1 readable, 0 not, -1 errno
};
Syscalls &syscalls() noexcept;

class ScopedSyscalls {
public:
	explicit ScopedSyscalls(const Syscalls &replacement) noexcept;
	~ScopedSyscalls();
	ScopedSyscalls(const ScopedSyscalls &) = delete;
	ScopedSyscalls &operator=(const ScopedSyscalls &) = delete;

private:
	Syscalls saved_;
};

inline constexpr const char *kDevicePath = "/dev/infiniband/rdma_cm";

// Sends one command: header + `len` bytes of payload. 0, or a positive
// errno (ENODATA for a short write, as rdma-core reports it).
int execute(int fd, uint32_t cmd, const void *payload, uint16_t len, uint16_t out_len) noexcept;

} // namespace ov::cm::kernel
