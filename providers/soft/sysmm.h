// openverbs software RDMA device: the device's own memory-management calls,
// made with syscall(2) straight to the kernel.
//
// Programs and libraries interpose mmap, munmap, mremap and madvise (UCX's
// memory hooks, for one; UCX 1.13's mremap hook drops the fifth argument,
// the new address of MREMAP_FIXED), so the device never calls those libc
// symbols for its own mappings: what it asks is exactly what the kernel
// does (mmap(2), munmap(2), mremap(2), madvise(2), memfd_create(2)).
// Each returns what the libc function would: MAP_FAILED / -1 with errno.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

namespace ovsoft {

static inline void *sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return reinterpret_cast<void *>(syscall(SYS_mmap, addr, len, prot, flags, fd, off));
}

static inline int sys_munmap(void *addr, size_t len)
{
	return int(syscall(SYS_munmap, addr, len));
}

// Always five arguments (new_addr is ignored without MREMAP_FIXED).
static inline void *sys_mremap(void *old_addr, size_t old_len, size_t new_len, int flags,
			       void *new_addr)
{
	return reinterpret_cast<void *>(
		syscall(SYS_mremap, old_addr, old_len, new_len, flags, new_addr));
}

static inline int sys_madvise(void *addr, size_t len, int advice)
{
	return int(syscall(SYS_madvise, addr, len, advice));
}

static inline int sys_memfd_create(const char *name, unsigned flags)
{
	return int(syscall(SYS_memfd_create, name, flags));
}

// pwrite(2) of whole pages of the application's memory into a memfd (the
// copy that registration makes): like a DMA engine it reads the bytes
// around the registered object too, which an instrumented pwrite
// (AddressSanitizer's interceptor) would report as an overflow.
static inline ssize_t sys_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	return ssize_t(syscall(SYS_pwrite64, fd, buf, len, off));
}

// Copies whole pages (len a multiple of 8) from src to dst as the device
// does: bytes around the registered object are read too, which
// AddressSanitizer would report, so under it this copy is not instrumented
// (nor turned into a memcpy call, which it intercepts).
#if defined(__SANITIZE_ADDRESS__)
__attribute__((no_sanitize("address"), optimize("no-tree-loop-distribute-patterns"))) static inline void
copy_pages(void *dst, const void *src, size_t len)
{
	auto *d = static_cast<uint64_t *>(dst);
	auto *s = static_cast<const uint64_t *>(src);
	for (size_t i = 0; i < len / 8; i++)
		d[i] = s[i];
}
#else
static inline void copy_pages(void *dst, const void *src, size_t len)
{
	__builtin_memcpy(dst, src, len);
}
#endif

} // namespace ovsoft
