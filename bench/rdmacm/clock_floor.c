/* The floor that cmtime's own bookkeeping puts under every per-connection
 * step it reports: rdmacm-utils' cmtime (rdma-core 44) reads the time with
 * gettimeofday() before and after each connection's call of a step, and
 * reports the step's whole time divided by the connections. This program
 * times exactly that bookkeeping alone, the way cmtime times a step: N
 * connections' pairs of gettimeofday() between two readings, divided by N.
 *
 *   clock_floor [N]     (default 100, as bench/rdmacm/cmtime-group.sh)
 *
 * Prints "clock_floor US" (the median of 5 rounds, microseconds per
 * connection) and the clocksource the kernel uses
 * (/sys/devices/system/clocksource/clocksource0/current_clocksource): under
 * qemu's TCG the test bed's guest reads the emulated HPET, so every read is
 * a system call and a device access. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static double now_us(void)
{
	struct timeval t;
	gettimeofday(&t, NULL);
	return t.tv_sec * 1e6 + t.tv_usec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100;
	if (n <= 0)
		n = 100;
	struct timeval *tv = calloc(2 * (size_t)n, sizeof(*tv));
	if (!tv)
		return 1;
	double r[5];
	for (int k = 0; k < 5; k++) {
		double t0 = now_us();
		for (int i = 0; i < n; i++) {
			gettimeofday(&tv[2 * i], NULL);
			gettimeofday(&tv[2 * i + 1], NULL);
		}
		r[k] = (now_us() - t0) / n;
	}
	qsort(r, 5, sizeof(r[0]), cmp);
	char cs[64] = "unknown";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
	if (f) {
		if (fgets(cs, sizeof(cs), f))
			cs[strcspn(cs, "\n")] = 0;
		fclose(f);
	}
	printf("clock_floor %.2f\nclocksource %s\n", r[2], cs);
	free(tv);
	return 0;
}
