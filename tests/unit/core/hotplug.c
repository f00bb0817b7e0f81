/* Device hot-plug through one process: lists the devices, runs the shell
 * command argv[1] (adds a device), lists again, runs argv[2] (removes it),
 * lists again, while still holding the second list. Prints each list as
 * "list<N>: name name ..." and "held: <name of the added device>" at the end
 * (read through the held list after the device vanished). */
#include <infiniband/verbs.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct ibv_device **show(int round)
{
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);

	if (!l) {
		printf("list%d: NULL\n", round);
		exit(1);
	}
	printf("list%d:", round);
	for (int i = 0; i < n; ++i)
		printf(" %s", ibv_get_device_name(l[i]));
	printf("\n");
	return l;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s ADD-CMD DEL-CMD NAME\n", argv[0]);
		return 2;
	}
	ibv_free_device_list(show(0));
	if (system(argv[1]) != 0)
		return 3;
	struct ibv_device **held = show(1);
	if (system(argv[2]) != 0)
		return 4;
	ibv_free_device_list(show(2));
	for (struct ibv_device **d = held; *d; ++d)
		if (!strcmp((*d)->name, argv[3]))
			printf("held: %s\n", (*d)->name);
	ibv_free_device_list(held);
	return 0;
}
