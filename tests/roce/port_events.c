/* Port state events of a device: opens DEV, says "ready" with its port's
 * state, then waits (at most 20 s) for the async events that the test's
 * script causes by taking the interface down and up again: it must get
 * IBV_EVENT_PORT_ERR for port 1 and then IBV_EVENT_PORT_ACTIVE, each with
 * ibv_query_port agreeing (IBV_PORT_DOWN, then IBV_PORT_ACTIVE), and no other
 * event. Exit status 0 when it did.
 *
 *   port_events DEV */
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: port_events DEV\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = NULL;
	for (int i = 0; list && i < n && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		fprintf(stderr, "port_events: cannot open %s\n", argv[1]);
		return 1;
	}
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, 1, &pa)) {
		fprintf(stderr, "port_events: query_port failed\n");
		return 1;
	}
	printf("ready: port 1 %s\n", ibv_port_state_str(pa.state));
	const enum ibv_event_type want[2] = {IBV_EVENT_PORT_ERR, IBV_EVENT_PORT_ACTIVE};
	const enum ibv_port_state state[2] = {IBV_PORT_DOWN, IBV_PORT_ACTIVE};
	int got = 0, bad = 0;
	while (got < 2) {
		struct pollfd pf = {ctx->async_fd, POLLIN, 0};
		if (poll(&pf, 1, 20000) != 1) {
			fprintf(stderr, "port_events: no event within 20 s (%d of 2 seen)\n", got);
			return 1;
		}
		struct ibv_async_event ev;
		if (ibv_get_async_event(ctx, &ev)) {
			fprintf(stderr, "port_events: ibv_get_async_event failed\n");
			return 1;
		}
		int port = ev.element.port_num;
		enum ibv_event_type t = ev.event_type;
		ibv_ack_async_event(&ev);
		if (ibv_query_port(ctx, 1, &pa))
			pa.state = IBV_PORT_NOP;
		printf("event %s, port %d; query_port: %s\n", ibv_event_type_str(t), port,
		       ibv_port_state_str(pa.state));
		if (t != want[got] || port != 1 || pa.state != state[got]) {
			fprintf(stderr, "port_events: wanted %s with the port %s\n",
				ibv_event_type_str(want[got]), ibv_port_state_str(state[got]));
			bad++;
		}
		got++;
	}
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return bad ? 1 : 0;
}
