/* An LD_PRELOAD shim that interposes mmap, munmap and mremap the way UCX
 * 1.13's memory hooks do (ucm/mmap): every call is observed, and the mremap
 * hook has four parameters, so the fifth argument of MREMAP_FIXED (the new
 * address) never reaches the kernel; this shim passes 0 in its place (UCX
 * passes whatever the register held). A library that moves its own mappings
 * through these symbols gets them moved to the wrong place (address 0 when
 * the caller may map there, as root). Counters let a test see the calls. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

unsigned long ovshim_mremap_calls;

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

int munmap(void *addr, size_t len)
{
	return (int)syscall(SYS_munmap, addr, len);
}

void *mremap(void *old_addr, size_t old_len, size_t new_len, int flags, ...)
{
	__atomic_fetch_add(&ovshim_mremap_calls, 1, __ATOMIC_RELAXED);
	/* The fifth argument is dropped, as by a four-parameter hook. */
	return (void *)syscall(SYS_mremap, old_addr, old_len, new_len, flags, (void *)0);
}
