/* Lists the devices the library finds, opens and closes each one.
 * Output: "devices N", then per device "dev NAME" and "open NAME cmd_fd=FD"
 * or "open NAME failed errno=E". */
#include <infiniband/verbs.h>

#include <errno.h>
#include <stdio.h>

int main(void)
{
	int n = -1;
	struct ibv_device **list = ibv_get_device_list(&n);

	if (!list) {
		printf("list NULL errno=%d\n", errno);
		return 1;
	}
	printf("devices %d\n", n);
	for (int i = 0; i < n; ++i) {
		struct ibv_context *ctx;

		printf("dev %s\n", ibv_get_device_name(list[i]));
		ctx = ibv_open_device(list[i]);
		if (!ctx) {
			printf("open %s failed errno=%d\n", list[i]->name, errno);
			continue;
		}
		printf("open %s cmd_fd=%d\n", list[i]->name, ctx->cmd_fd);
		ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
	return 0;
}
