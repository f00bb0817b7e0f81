/* Times ibv_get_device_list + ibv_free_device_list in the library found on
 * LD_LIBRARY_PATH.
 *   device_list_bench cold        one first call in this fresh process (ns)
 *   device_list_bench warm N      median of N calls after a first one (ns)
 * Prints "<ns> <devices>" on stdout. */
#include <infiniband/verbs.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long one(int *n)
{
	long long t0 = now_ns();
	struct ibv_device **l = ibv_get_device_list(n);
	long long t1;

	if (!l) {
		perror("ibv_get_device_list");
		exit(1);
	}
	ibv_free_device_list(l);
	t1 = now_ns();
	return t1 - t0;
}

static int cmp(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int n = 0;

	if (argc >= 2 && !strcmp(argv[1], "cold")) {
		long long t = one(&n);
		printf("%lld %d\n", t, n);
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "warm")) {
		int iters = atoi(argv[2]);
		long long *t;

		if (iters <= 0)
			return 2;
		t = calloc(iters, sizeof(*t));
		one(&n);
		for (int i = 0; i < iters; ++i)
			t[i] = one(&n);
		qsort(t, iters, sizeof(*t), cmp);
		printf("%lld %d\n", t[iters / 2], n);
		free(t);
		return 0;
	}
	fprintf(stderr, "usage: %s cold | warm N\n", argv[0]);
	return 2;
}
