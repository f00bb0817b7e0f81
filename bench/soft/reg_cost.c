// ibv_reg_mr + ibv_dereg_mr cost on a device (soft0 by default): the
// median over ROUNDS of each call and of the pair, for a region of touched
// memory (private anonymous, every page written first, as an application's
// buffer would be).
//   usage: soft_reg_cost [bytes [rounds [device]]]
// Prints: "reg_cost BYTES reg_us dereg_us pair_us" (medians).
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : 4096;
	int rounds = argc > 2 ? atoi(argv[2]) : 9;
	const char *want = argc > 3 ? argv[3] : "soft0";
	if (rounds < 1 || rounds > 100000 || !bytes)
		return 2;
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = NULL;
	for (int i = 0; list && i < n && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), want))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		fprintf(stderr, "reg_cost: no device %s\n", want);
		return 1;
	}
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	char *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!pd || buf == MAP_FAILED)
		return 1;
	memset(buf, 0x5a, bytes);
	double *reg = calloc(rounds, sizeof(double)), *dereg = calloc(rounds, sizeof(double));
	double *pair = calloc(rounds, sizeof(double));
	for (int r = 0; r < rounds; r++) {
		double t0 = now_us();
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, bytes,
					       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
						       IBV_ACCESS_REMOTE_READ);
		double t1 = now_us();
		if (!mr) {
			perror("ibv_reg_mr");
			return 1;
		}
		if (ibv_dereg_mr(mr)) {
			perror("ibv_dereg_mr");
			return 1;
		}
		double t2 = now_us();
		reg[r] = t1 - t0;
		dereg[r] = t2 - t1;
		pair[r] = t2 - t0;
		if (buf[bytes - 1] != 0x5a || buf[0] != 0x5a) {
			fprintf(stderr, "reg_cost: data changed\n");
			return 1;
		}
	}
	qsort(reg, rounds, sizeof(double), cmp);
	qsort(dereg, rounds, sizeof(double), cmp);
	qsort(pair, rounds, sizeof(double), cmp);
	printf("reg_cost %zu %.1f %.1f %.1f\n", bytes, reg[rounds / 2], dereg[rounds / 2],
	       pair[rounds / 2]);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
