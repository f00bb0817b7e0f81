/* The client's first connection set-up steps timed the way cmtime times
 * them, but without cmtime's own bookkeeping: N ids go through each step
 * together (rdma_create_id for all, then rdma_resolve_addr for all and their
 * N RDMA_CM_EVENT_ADDR_RESOLVED events, then rdma_resolve_route and its
 * events, then rdma_destroy_id), and the clock is read once before and once
 * after each step, where cmtime (rdma-core 44's rdmacm-utils) reads it twice
 * per id per step. Under qemu's TCG those reads are dear (the guest's
 * clocksource is the emulated HPET: bench/rdmacm/clock_floor.c), so this
 * shows what the library itself costs per id, for the software CM and the
 * kernel's alike. No server is needed: the steps before rdma_connect only
 * resolve.
 *
 *   cm_steps ADDR [N] [ROUNDS]   (defaults 100 and 3)
 *
 * ADDR: an IPv4 address the CM resolves to an RDMA device (127.0.0.1 for
 * the software device with RDMAV_SOFT_DEVICES set, the address of rxe0 for
 * the kernel's). Each round uses fresh ids on the same event channel; the
 * first round also pays for the library's first use of the device (its
 * open, as with cmtime). Prints one line per round and step:
 *   cm_steps ROUND STEP US_PER_ID
 * with STEP create_id, resolve_addr, resolve_route or destroy. Exit status 0,
 * 1 when a call or an event fails (the line says which). */
#include <rdma/rdma_cma.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* Waits for n events of kind want on ch; 0, or -1 after printing why. */
static int drain(struct rdma_event_channel *ch, int n, enum rdma_cm_event_type want)
{
	for (int i = 0; i < n; i++) {
		struct rdma_cm_event *ev;
		if (rdma_get_cm_event(ch, &ev)) {
			fprintf(stderr, "cm_steps: rdma_get_cm_event: %s\n", strerror(errno));
			return -1;
		}
		int ok = ev->event == want && ev->status == 0;
		if (!ok)
			fprintf(stderr, "cm_steps: event %s (status %d), wanted %s\n",
				rdma_event_str(ev->event), ev->status, rdma_event_str(want));
		rdma_ack_cm_event(ev);
		if (!ok)
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: cm_steps ADDR [N] [ROUNDS]\n");
		return 2;
	}
	int n = argc > 2 ? atoi(argv[2]) : 100;
	int rounds = argc > 3 ? atoi(argv[3]) : 3;
	struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(7471)};
	if (n <= 0 || rounds <= 0 || inet_pton(AF_INET, argv[1], &dst.sin_addr) != 1) {
		fprintf(stderr, "cm_steps: bad arguments\n");
		return 2;
	}
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id **ids = calloc((size_t)n, sizeof(*ids));
	if (!ch || !ids) {
		fprintf(stderr, "cm_steps: no event channel: %s\n", strerror(errno));
		return 1;
	}
	for (int r = 1; r <= rounds; r++) {
		double t0 = now_us();
		for (int i = 0; i < n; i++)
			if (rdma_create_id(ch, &ids[i], NULL, RDMA_PS_TCP)) {
				fprintf(stderr, "cm_steps: rdma_create_id: %s\n", strerror(errno));
				return 1;
			}
		double t1 = now_us();
		for (int i = 0; i < n; i++)
			if (rdma_resolve_addr(ids[i], NULL, (struct sockaddr *)&dst, 2000)) {
				fprintf(stderr, "cm_steps: rdma_resolve_addr: %s\n", strerror(errno));
				return 1;
			}
		if (drain(ch, n, RDMA_CM_EVENT_ADDR_RESOLVED))
			return 1;
		double t2 = now_us();
		for (int i = 0; i < n; i++)
			if (rdma_resolve_route(ids[i], 2000)) {
				fprintf(stderr, "cm_steps: rdma_resolve_route: %s\n", strerror(errno));
				return 1;
			}
		if (drain(ch, n, RDMA_CM_EVENT_ROUTE_RESOLVED))
			return 1;
		double t3 = now_us();
		for (int i = 0; i < n; i++)
			rdma_destroy_id(ids[i]);
		double t4 = now_us();
		printf("cm_steps %d create_id %.2f\n", r, (t1 - t0) / n);
		printf("cm_steps %d resolve_addr %.2f\n", r, (t2 - t1) / n);
		printf("cm_steps %d resolve_route %.2f\n", r, (t3 - t2) / n);
		printf("cm_steps %d destroy %.2f\n", r, (t4 - t3) / n);
	}
	rdma_destroy_event_channel(ch);
	free(ids);
	return 0;
}
