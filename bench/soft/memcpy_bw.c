/* Single-thread memcpy bandwidth of this machine, the anchor of the soft
 * device's RDMA write bandwidth target. Prints "<bytes> <GB/s>" for one size
 * (argument, default 1 MiB): the median of 9 runs, each copying about 1 GiB
 * between two buffers (out of cache for sizes beyond the LLC), timed in CPU
 * time of the copying thread. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	/* CPU time of this thread: the result stays meaningful when the
	 * machine is shared (wall time would count time spent descheduled). */
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : (1u << 20);
	size_t span = 64u << 20; /* rotate through 64 MiB so caches do not help */
	if (span < size * 2)
		span = size * 2;
	char *src = aligned_alloc(4096, span), *dst = aligned_alloc(4096, span);
	if (!src || !dst)
		return 1;
	memset(src, 1, span);
	memset(dst, 2, span);
	size_t slots = span / size;
	size_t reps = (1u << 30) / size;
	if (reps < 16)
		reps = 16;
	double r[9];
	for (int k = 0; k < 9; k++) {
		double t0 = now();
		for (size_t i = 0; i < reps; i++) {
			size_t o = (i % slots) * size;
			memcpy(dst + o, src + o, size);
		}
		double t = now() - t0;
		r[k] = (double)size * reps / t / 1e9;
	}
	qsort(r, 9, sizeof(r[0]), cmp);
	printf("%zu %.2f\n", size, r[4]);
	free(src);
	free(dst);
	return 0;
}
