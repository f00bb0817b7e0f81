/* The floor under the soft device's latencies on this machine: ping-pongs
 * between two threads on CPUs 0 and 1 through bare cache lines, no verbs.
 *
 *   soft_line_floor [ITERATIONS]    (default 500000 round trips, 3 runs)
 *
 * Prints "W_NS S_NS": the median one-way time, in nanoseconds, of
 *   W  ib_write_lat's pattern: each side spins on its own data line, then
 *      writes the peer's (what one RDMA WRITE and a poll of memory need);
 *   S  the least a two-sided RC SEND needs: each side spins on its own
 *      completion line; then it posts a receive (writes its own receive
 *      line), takes the peer's posted receive (reads the peer's receive line:
 *      the buffer and length the RC checks need) and writes the peer's
 *      completion line (payload inline).
 * qperf's rc_lat on soft0 is judged against ib_write_lat (bench/soft/run.sh);
 * S / W is what the pattern itself costs more, the rest is the device's.
 * Lines are 128 bytes apart (the adjacent-line prefetcher pairs 64-byte
 * lines). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct line {
	_Alignas(128) _Atomic uint64_t v;
};

static struct line data[2], cq[2], rq[2];
static long iters = 500000;
static int model; /* 0: W, 1: S */

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static void *side(void *arg)
{
	int me = (int)(intptr_t)arg, peer = !me;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(me % CPU_SETSIZE, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set); /* best effort */
	for (long i = 1; i <= iters; i++) {
		/* Side 0 starts; each side waits for the peer's message i (side 0:
		 * i - 1, its own first send needs none). */
		uint64_t want = me == 0 ? (uint64_t)(i - 1) : (uint64_t)i;
		_Atomic uint64_t *mine = model ? &cq[me].v : &data[me].v;
		if (want)
			while (atomic_load_explicit(mine, memory_order_acquire) != want)
				;
		if (model) {
			atomic_store_explicit(&rq[me].v, (uint64_t)i, memory_order_release);
			(void)atomic_load_explicit(&rq[peer].v, memory_order_acquire);
			atomic_store_explicit(&cq[peer].v, (uint64_t)i, memory_order_release);
		} else {
			atomic_store_explicit(&data[peer].v, (uint64_t)i, memory_order_release);
		}
	}
	return NULL;
}

static double run(int m)
{
	model = m;
	for (int i = 0; i < 2; i++) {
		atomic_store(&data[i].v, 0);
		atomic_store(&cq[i].v, 0);
		atomic_store(&rq[i].v, 0);
	}
	pthread_t t[2];
	double t0 = now_ns();
	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, side, (void *)(intptr_t)i))
			exit(1);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return (now_ns() - t0) / (2.0 * (double)iters);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		iters = atol(argv[1]);
	if (iters < 1)
		iters = 1;
	double w[3], s[3];
	for (int r = 0; r < 3; r++) {
		w[r] = run(0);
		s[r] = run(1);
	}
	qsort(w, 3, sizeof(w[0]), cmp);
	qsort(s, 3, sizeof(s[0]), cmp);
	printf("%.1f %.1f\n", w[1], s[1]);
	return 0;
}
