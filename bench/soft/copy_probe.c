/* Cost probe for the software device's data path on the machine it runs on
 * (meant for the test bed's guest, where qemu TCG emulates every instruction
 * and the costs differ from the host's): bandwidth of several ways to copy a
 * message between two buffers, and the price of the system calls the data
 * path may make. Prints one line per measure. Not a test.
 *   usage: soft_copy_probe [message bytes, default 65536] */
#define _GNU_SOURCE
#include <cpuid.h>
#include <immintrin.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef void (*copy_fn)(void *, const void *, size_t);

static void c_memcpy(void *d, const void *s, size_t n) { memcpy(d, s, n); }

static void c_movsb(void *d, const void *s, size_t n)
{
	__asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

static void c_movsq(void *d, const void *s, size_t n)
{
	size_t q = n / 8;
	__asm__ volatile("rep movsq" : "+D"(d), "+S"(s), "+c"(q) : : "memory");
}

static void c_u64(void *d, const void *s, size_t n)
{
	uint64_t *dp = d;
	const uint64_t *sp = s;
	for (size_t i = 0; i < n / 8; i += 4) {
		uint64_t a = sp[i], b = sp[i + 1], c = sp[i + 2], e = sp[i + 3];
		dp[i] = a;
		dp[i + 1] = b;
		dp[i + 2] = c;
		dp[i + 3] = e;
	}
}

static void c_sse2(void *d, const void *s, size_t n)
{
	__m128i *dp = d;
	const __m128i *sp = s;
	for (size_t i = 0; i < n / 16; i += 4) {
		__m128i a = _mm_loadu_si128(sp + i), b = _mm_loadu_si128(sp + i + 1);
		__m128i c = _mm_loadu_si128(sp + i + 2), e = _mm_loadu_si128(sp + i + 3);
		_mm_storeu_si128(dp + i, a);
		_mm_storeu_si128(dp + i + 1, b);
		_mm_storeu_si128(dp + i + 2, c);
		_mm_storeu_si128(dp + i + 3, e);
	}
}

__attribute__((target("avx2"))) static void c_avx2(void *d, const void *s, size_t n)
{
	__m256i *dp = d;
	const __m256i *sp = s;
	for (size_t i = 0; i < n / 32; i += 4) {
		__m256i a = _mm256_loadu_si256(sp + i), b = _mm256_loadu_si256(sp + i + 1);
		__m256i c = _mm256_loadu_si256(sp + i + 2), e = _mm256_loadu_si256(sp + i + 3);
		_mm256_storeu_si256(dp + i, a);
		_mm256_storeu_si256(dp + i + 1, b);
		_mm256_storeu_si256(dp + i + 2, c);
		_mm256_storeu_si256(dp + i + 3, e);
	}
}

__attribute__((target("avx2"))) static void c_avx2x8(void *d, const void *s, size_t n)
{
	__m256i *dp = d;
	const __m256i *sp = s;
	for (size_t i = 0; i < n / 32; i += 8) {
		__m256i a = _mm256_loadu_si256(sp + i), b = _mm256_loadu_si256(sp + i + 1);
		__m256i c = _mm256_loadu_si256(sp + i + 2), e = _mm256_loadu_si256(sp + i + 3);
		__m256i f = _mm256_loadu_si256(sp + i + 4), g = _mm256_loadu_si256(sp + i + 5);
		__m256i h = _mm256_loadu_si256(sp + i + 6), k = _mm256_loadu_si256(sp + i + 7);
		_mm256_storeu_si256(dp + i, a);
		_mm256_storeu_si256(dp + i + 1, b);
		_mm256_storeu_si256(dp + i + 2, c);
		_mm256_storeu_si256(dp + i + 3, e);
		_mm256_storeu_si256(dp + i + 4, f);
		_mm256_storeu_si256(dp + i + 5, g);
		_mm256_storeu_si256(dp + i + 6, h);
		_mm256_storeu_si256(dp + i + 7, k);
	}
}

__attribute__((target("avx2"))) static void c_avx2nt(void *d, const void *s, size_t n)
{
	__m256i *dp = d;
	const __m256i *sp = s;
	for (size_t i = 0; i < n / 32; i += 4) {
		__m256i a = _mm256_loadu_si256(sp + i), b = _mm256_loadu_si256(sp + i + 1);
		__m256i c = _mm256_loadu_si256(sp + i + 2), e = _mm256_loadu_si256(sp + i + 3);
		_mm256_stream_si256(dp + i, a);
		_mm256_stream_si256(dp + i + 1, b);
		_mm256_stream_si256(dp + i + 2, c);
		_mm256_stream_si256(dp + i + 3, e);
	}
	_mm_sfence();
}

static void bw(const char *name, copy_fn f, char *src, char *dst, size_t size, size_t slots)
{
	size_t reps = 0;
	double t0 = now(), t;
	do {
		for (int k = 0; k < 16; k++, reps++) {
			size_t o = (reps % slots) * size;
			f(dst + o, src + o, size);
		}
		t = now() - t0;
	} while (t < 0.5);
	printf("copy %-8s %8.1f MB/s\n", name, (double)size * reps / t / 1e6);
}

static void cost(const char *name, void (*op)(void *), void *arg)
{
	size_t reps = 0;
	double t0 = now(), t;
	do {
		for (int k = 0; k < 64; k++, reps++)
			op(arg);
		t = now() - t0;
	} while (t < 0.3);
	printf("cost %-20s %8.3f us\n", name, t / reps * 1e6);
}

static void op_getpid(void *a) { (void)a; syscall(SYS_getpid); }
static void op_clock(void *a) { (void)a; struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); }
static void op_yield(void *a) { (void)a; sched_yield(); }
static void op_kill0(void *a) { (void)a; kill(getppid(), 0); }
struct pvm { char *src, *dst; size_t n; };
static void op_pvm(void *a)
{
	struct pvm *p = a;
	struct iovec l = {p->dst, p->n}, r = {p->src, p->n};
	process_vm_readv(getpid(), &l, 1, &r, 1, 0);
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : 65536;
	size = (size + 127) & ~(size_t)127;
	size_t slots = 8;
	char *src = aligned_alloc(4096, size * slots), *dst = aligned_alloc(4096, size * slots);
	if (!src || !dst)
		return 1;
	memset(src, 1, size * slots);
	memset(dst, 2, size * slots);
	unsigned a, b, c, d;
	int erms = 0, fsrm = 0, avx2 = 0;
	if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
		erms = (b >> 9) & 1;
		avx2 = (b >> 5) & 1;
		fsrm = (d >> 4) & 1;
	}
	printf("size %zu, cpu: erms %d fsrm %d avx2 %d\n", size, erms, fsrm, avx2);
	bw("memcpy", c_memcpy, src, dst, size, slots);
	bw("movsb", c_movsb, src, dst, size, slots);
	bw("movsq", c_movsq, src, dst, size, slots);
	bw("u64x4", c_u64, src, dst, size, slots);
	bw("sse2x4", c_sse2, src, dst, size, slots);
	if (avx2)
{
		bw("avx2x4", c_avx2, src, dst, size, slots);
		bw("avx2x8", c_avx2x8, src, dst, size, slots);
		bw("avx2nt", c_avx2nt, src, dst, size, slots);
	}
	if (getenv("PROBE_COPY_ONLY"))
		return 0;
	cost("getpid", op_getpid, NULL);
	cost("clock_gettime", op_clock, NULL);
	cost("sched_yield", op_yield, NULL);
	cost("kill(ppid,0)", op_kill0, NULL);
	struct pvm p = {src, dst, size};
	cost("process_vm_readv", op_pvm, &p);
	return 0;
}
