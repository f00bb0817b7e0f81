// openverbs software RDMA device: the engine's data movement (the "DMA").
//
// Copies between two mappings of this process, or to and from another
// process's memory (process_vm_writev/process_vm_readv), and the mappings of
// a peer's registered memory through its memfd. The process's cached pid
// and the engine's clock live here too. See engine.h for the split.
#include "engine.h"
#include "log.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <immintrin.h>
#include <sys/uio.h>
#include <unistd.h>

namespace ovsoft {

uint64_t now_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

// getpid() cached for the data path; refreshed in a child after fork().
int32_t g_pid;
static void pid_refresh() { g_pid = getpid(); }
__attribute__((constructor)) static void pid_init()
{
	pid_refresh();
	pthread_atfork(nullptr, nullptr, pid_refresh);
}

// The bytes [addr, addr+len) of region m (of another process) mapped into
// ours, or nullptr when the region is not backed by a shareable memfd.
// The peer's part of direct_ptr: the region's memfd fields (see MrEntry).
// pc: the caller's cache of the last mapping (or nullptr), tried first.
uint8_t *peer_direct(SoftQp::PeerCache *pc, int32_t pid, int32_t memfd, uint32_t ino,
		     uint64_t memfd_off, uint64_t share_lo, uint64_t share_hi, uint64_t addr,
		     uint64_t len)
{
	if (memfd < 0 || addr < share_lo || addr > share_hi || len > share_hi - addr)
		return nullptr;
	uint64_t size = 0;
	uint8_t *base;
	uint64_t gen = g_peer_map_generation.load(std::memory_order_acquire);
	if (pc && pc->base && pc->gen == gen && pc->pid == pid && pc->fd == memfd &&
	    pc->ino == ino) {
		base = pc->base;
		size = pc->size;
	} else {
		base = peer_map(pid, memfd, ino, &size);
		if (!base)
			return nullptr;
		if (pc)
			*pc = SoftQp::PeerCache{base, size, gen, pid, memfd, ino};
	}
	uint64_t off = memfd_off + (addr - share_lo);
	if (off > size || len > size - off)
		return nullptr;
	return base + off;
}


uint8_t *direct_ptr(const KeySnap &m, uint64_t addr, uint64_t len)
{
	if (m.owner_pid == my_pid())
		return reinterpret_cast<uint8_t *>(m.addr + (addr - m.iova));
	return peer_direct(nullptr, m.owner_pid, m.memfd, m.memfd_ino, m.memfd_off, m.share_lo,
			   m.share_hi, addr, len);
}

// ------------------------------------------------------------------ copies
//
// The device's data movement is a copy between two mappings of this process
// (its own buffers, or a peer's registered memory mapped through its memfd).
// Large copies take the faster of two routines, chosen once per process by
// a race (copy_choose below):
//  - libc's memmove. On hardware with fast `rep movsb` (ERMS/FSRM) glibc
//    uses that instruction, and it is the fastest: on this project's host
//    (2 cores, 2 MiB L2 each) 42 GB/s for 64 KiB in cache, 28.7 for 1 MiB,
//    against 31 and 23.8 for the loop below; UCX's posix transport, the
//    anchor of bench/soft, copies with memcpy.
//  - a plain loop of unaligned 32-byte AVX2 loads and stores, on CPUs with
//    AVX2. Where `rep movsb` is slow it is much faster: qemu's TCG (the
//    test bed's guest) emulates that instruction a byte at a time, about 5x
//    slower than the loop (bench/soft/copy_probe.c).
// Small copies and overlapping ranges always go to memcpy/memmove.
// OPENVERBS_SOFT_COPY=libc or =avx2 skips the race (read with
// secure_getenv: ignored in setuid programs); the choice is logged at
// VERBS_LOG_LEVEL 4.

static bool g_avx2;
__attribute__((constructor)) static void copy_init()
{
	__builtin_cpu_init();
	g_avx2 = __builtin_cpu_supports("avx2");
}

inline constexpr size_t kVectorCopyMin = 2048;

// 0: not chosen yet; kCopyLibc or kCopyAvx2 once copy_choose ran. Relaxed:
// every thread that reads 0 may run the race itself, and any answer is a
// correct copy.
enum : int { kCopyLibc = 1, kCopyAvx2 = 2 };
static std::atomic<int> g_copy{0};

__attribute__((target("avx2"))) static void copy_avx2(uint8_t *d, const uint8_t *s, size_t n)
{
	size_t i = 0;
	for (; i + 256 <= n; i += 256) {
		auto *sp = reinterpret_cast<const __m256i *>(s + i);
		auto *dp = reinterpret_cast<__m256i *>(d + i);
		__m256i a = _mm256_loadu_si256(sp), b = _mm256_loadu_si256(sp + 1);
		__m256i c = _mm256_loadu_si256(sp + 2), e = _mm256_loadu_si256(sp + 3);
		__m256i f = _mm256_loadu_si256(sp + 4), g = _mm256_loadu_si256(sp + 5);
		__m256i h = _mm256_loadu_si256(sp + 6), k = _mm256_loadu_si256(sp + 7);
		_mm256_storeu_si256(dp, a);
		_mm256_storeu_si256(dp + 1, b);
		_mm256_storeu_si256(dp + 2, c);
		_mm256_storeu_si256(dp + 3, e);
		_mm256_storeu_si256(dp + 4, f);
		_mm256_storeu_si256(dp + 5, g);
		_mm256_storeu_si256(dp + 6, h);
		_mm256_storeu_si256(dp + 7, k);
	}
	for (; i + 32 <= n; i += 32)
		_mm256_storeu_si256(reinterpret_cast<__m256i *>(d + i),
				    _mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + i)));
	if (i < n)
		memcpy(d + i, s + i, n - i);
}

// Which routine copies at least kVectorCopyMin bytes here (see above): three
// interleaved rounds of each over 32 KiB in cache (two copies a timing: long
// beside a clock read, which an emulated clock makes dear), the best of
// each, so that a preemption in one round does not decide; the loop only
// when strictly faster. Without memory for the buffers, the loop (what was
// used before the race).
static __attribute__((noinline, cold)) int copy_choose()
{
	const char *want = secure_getenv("OPENVERBS_SOFT_COPY");
	int kind;
	if (!g_avx2 || (want && strcmp(want, "libc") == 0)) {
		kind = kCopyLibc;
	} else if (want && strcmp(want, "avx2") == 0) {
		kind = kCopyAvx2;
	} else {
		constexpr size_t kBytes = 32768;
		auto *buf = static_cast<uint8_t *>(aligned_alloc(64, 2 * kBytes));
		kind = kCopyAvx2;
		if (buf) {
			for (size_t i = 0; i < 2 * kBytes; i++)
				buf[i] = uint8_t(i * 131u + 7u);
			uint64_t best_libc = UINT64_MAX, best_avx2 = UINT64_MAX;
			for (int round = 0; round < 3; round++) {
				uint64_t t0 = now_ns();
				for (int k = 0; k < 2; k++) {
					memmove(buf + kBytes, buf, kBytes);
					__asm__ volatile("" ::"r"(buf) : "memory");
				}
				uint64_t t1 = now_ns();
				for (int k = 0; k < 2; k++) {
					copy_avx2(buf + kBytes, buf, kBytes);
					__asm__ volatile("" ::"r"(buf) : "memory");
				}
				uint64_t t2 = now_ns();
				best_libc = std::min(best_libc, t1 - t0);
				best_avx2 = std::min(best_avx2, t2 - t1);
			}
			free(buf);
			kind = best_avx2 < best_libc ? kCopyAvx2 : kCopyLibc;
			softlog(4, "payload copies: libc %llu ns, AVX2 loop %llu ns per %zu KiB",
				(unsigned long long)best_libc / 2, (unsigned long long)best_avx2 / 2,
				kBytes / 1024);
		}
	}
	softlog(4, "payload copies of %zu bytes and more with %s", kVectorCopyMin,
		kind == kCopyAvx2 ? "the AVX2 loop" : "libc's memmove");
	g_copy.store(kind, std::memory_order_relaxed);
	return kind;
}

static inline bool copy_with_avx2()
{
	int k = g_copy.load(std::memory_order_relaxed);
	if (__builtin_expect(!k, 0))
		k = copy_choose();
	return k == kCopyAvx2;
}

#if defined(__SANITIZE_THREAD__)
// Under ThreadSanitizer: the device's payload copies are its DMA (memory of
// the application, or of another process, read and written as a NIC
// would, under no lock the application could share), so they are not
// instrumented and make no memmove call (which the runtime intercepts).
__attribute__((no_sanitize("thread"), optimize("no-tree-loop-distribute-patterns"))) static void
dma_copy(uint8_t *d, const uint8_t *s, size_t n)
{
	if (d < s)
		for (size_t i = 0; i < n; i++)
			d[i] = s[i];
	else
		for (size_t i = n; i--;)
			d[i] = s[i];
}
#endif

// memmove semantics (the ranges may overlap within one process).
void copy_bytes(void *dst, const void *src, size_t n)
{
	auto *d = static_cast<uint8_t *>(dst);
	auto *s = static_cast<const uint8_t *>(src);
#if defined(__SANITIZE_THREAD__)
	return dma_copy(d, s, n);
#endif
	if (n <= 16)
		return copy_small(d, s, n);
	if (n >= kVectorCopyMin && (d + n <= s || s + n <= d) && copy_with_avx2()) {
		copy_avx2(d, s, n);
		return;
	}
	memmove(d, s, n);
}

// Copies between my memory (local) and process pid's memory (remote).
// Returns 0, ESRCH (process gone) or EFAULT.
int move_bytes(int32_t pid, const struct iovec *local, int nl, const struct iovec *remote,
	       int nr, bool to_remote)
{
	uint64_t total = 0;
	for (int i = 0; i < nl; i++)
		total += local[i].iov_len;
	if (!total)
		return 0;
	if (pid == my_pid()) {
		if (nl == 1 && nr == 1 && remote[0].iov_len >= total) {
			if (to_remote)
				copy_bytes(remote[0].iov_base, local[0].iov_base, total);
			else
				copy_bytes(local[0].iov_base, remote[0].iov_base, total);
			return 0;
		}
		int li = 0, ri = 0;
		size_t lo = 0, ro = 0;
		while (li < nl && ri < nr) {
			size_t n = std::min(local[li].iov_len - lo, remote[ri].iov_len - ro);
			auto *l = static_cast<uint8_t *>(local[li].iov_base) + lo;
			auto *r = static_cast<uint8_t *>(remote[ri].iov_base) + ro;
			if (n) {
				if (to_remote)
					copy_bytes(r, l, n);
				else
					copy_bytes(l, r, n);
			}
			lo += n;
			ro += n;
			if (lo == local[li].iov_len) {
				li++;
				lo = 0;
			}
			if (ri < nr && ro == remote[ri].iov_len) {
				ri++;
				ro = 0;
			}
		}
		return 0;
	}
	ssize_t n = to_remote ? process_vm_writev(pid, local, nl, remote, nr, 0)
			      : process_vm_readv(pid, local, nl, remote, nr, 0);
	if (n < 0)
		return errno == ESRCH ? ESRCH : EFAULT;
	if (uint64_t(n) != total)
		return EFAULT;
	return 0;
}

} // namespace ovsoft
