/*
 * umad_probe: prints, field by field, everything libibumad reports about the
 * local devices, so that two libibumad implementations can be compared by
 * running this one program against each (tests/umad/differential.sh).
 *
 *   umad_probe sysfs     device discovery, umad_get_ca/port, portguids, issm
 *   umad_probe str       every *_str helper over its input domain
 *   umad_probe mad       umad_set_*, umad_get_*, umad_dump on a local buffer
 *   umad_probe port CA PORT   one umad_get_port() ("-" for a NULL CA name)
 *
 * Output goes to stdout; umad_dump writes to stderr (with the pid, which the
 * comparison masks).
 */
#include <infiniband/umad.h>
#include <infiniband/umad_str.h>
#include <infiniband/umad_types.h>

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_port(const char *tag, const umad_port_t *p)
{
	printf("%s ca_name=%.20s portnum=%d base_lid=%u lmc=%u sm_lid=%u sm_sl=%u "
	       "state=%u phys_state=%u rate=%u capmask=0x%08x gid_prefix=0x%016" PRIx64
	       " port_guid=0x%016" PRIx64 " link_layer=%.20s pkeys_size=%u pkeys=",
	       tag, p->ca_name, p->portnum, p->base_lid, p->lmc, p->sm_lid, p->sm_sl,
	       p->state, p->phys_state, p->rate, be32toh(p->capmask),
	       (uint64_t)be64toh(p->gid_prefix), (uint64_t)be64toh(p->port_guid),
	       p->link_layer, p->pkeys_size);
	for (unsigned i = 0; p->pkeys && i < p->pkeys_size; i++)
		printf("%s%04x", i ? "," : "", p->pkeys[i]);
	printf("\n");
}

static void probe_ca(const char *name)
{
	umad_ca_t ca;
	memset(&ca, 0, sizeof(ca));
	int rc = umad_get_ca(name, &ca);
	printf("get_ca(%s) = %d\n", name ? name : "NULL", rc);
	if (rc < 0)
		return;
	printf("  ca_name=%.20s node_type=%u numports=%d fw_ver=%.20s ca_type=%.40s "
	       "hw_ver=%.20s node_guid=0x%016" PRIx64 " system_guid=0x%016" PRIx64 "\n",
	       ca.ca_name, ca.node_type, ca.numports, ca.fw_ver, ca.ca_type, ca.hw_ver,
	       (uint64_t)be64toh(ca.node_guid), (uint64_t)be64toh(ca.system_guid));
	for (int i = 0; i < UMAD_CA_MAX_PORTS; i++) {
		if (!ca.ports[i])
			continue;
		char tag[32];
		snprintf(tag, sizeof(tag), "  port[%d]", i);
		print_port(tag, ca.ports[i]);
	}
	printf("  release_ca = %d\n", umad_release_ca(&ca));
}

static void probe_port(const char *name, int portnum)
{
	umad_port_t port;
	memset(&port, 0, sizeof(port));
	int rc = umad_get_port(name, portnum, &port);
	printf("get_port(%s, %d) = %d\n", name ? name : "NULL", portnum, rc);
	if (rc < 0)
		return;
	print_port("  ", &port);
	printf("  release_port = %d pkeys=%s size=%u\n", umad_release_port(&port),
	       port.pkeys ? "set" : "NULL", port.pkeys_size);
}

static void probe_portguids(const char *name, int max)
{
	__be64 g[16];
	memset(g, 0xee, sizeof(g));
	int rc = umad_get_ca_portguids(name, max >= 0 ? g : NULL, max);
	printf("get_ca_portguids(%s, %d) = %d:", name ? name : "NULL", max, rc);
	for (int i = 0; i < rc && i < 16 && max >= 0; i++)
		printf(" 0x%016" PRIx64, (uint64_t)be64toh(g[i]));
	printf("\n");
}

static void probe_issm(const char *name, int portnum)
{
	char path[64];
	strcpy(path, "<untouched>");
	int rc = umad_get_issm_path(name, portnum, path, sizeof(path));
	printf("get_issm_path(%s, %d) = %d %s\n", name ? name : "NULL", portnum, rc,
	       rc == 0 ? path : "");
}

static int do_sysfs(void)
{
	printf("init = %d\n", umad_init());

	char cas[UMAD_MAX_DEVICES][UMAD_CA_NAME_LEN];
	memset(cas, 0, sizeof(cas));
	int n = umad_get_cas_names(cas, UMAD_MAX_DEVICES);
	printf("get_cas_names = %d:", n);
	for (int i = 0; i < n && i < UMAD_MAX_DEVICES; i++)
		printf(" %.20s", cas[i]);
	printf("\n");
	char one[1][UMAD_CA_NAME_LEN];
	memset(one, 0, sizeof(one));
	n = umad_get_cas_names(one, 1);
	printf("get_cas_names(max 1) = %d: %.20s\n", n, one[0]);

	errno = 0;
	struct umad_device_node *list = umad_get_ca_device_list();
	size_t count = 0;
	printf("get_ca_device_list (errno %d):", list ? 0 : errno);
	for (struct umad_device_node *d = list; d; d = d->next, count++)
		printf(" %s", d->ca_name);
	printf("\n");
	/* readdir order differs between trees: print the sorted list too. */
	int rc = umad_sort_ca_device_list(&list, 0);
	printf("sort_ca_device_list(0) = %d:", rc);
	for (struct umad_device_node *d = list; d; d = d->next)
		printf(" %s", d->ca_name);
	printf("\n");
	rc = umad_sort_ca_device_list(&list, count);
	printf("sort_ca_device_list(%zu) = %d\n", count, rc);
	umad_free_ca_device_list(list);

	const char *extra[] = {"nosuchdev", "mthca0", NULL};
	probe_ca(NULL);
	for (int i = 0; i < (int)(sizeof(cas) / sizeof(cas[0])) && cas[i][0]; i++)
		probe_ca(cas[i]);
	for (int i = 0; extra[i]; i++)
		probe_ca(extra[i]);

	for (int p = 0; p <= 3; p++)
		probe_port(NULL, p);
	for (int i = 0; i < (int)(sizeof(cas) / sizeof(cas[0])) && cas[i][0]; i++)
		for (int p = 0; p <= 13; p++)
			probe_port(cas[i], p);
	for (int i = 0; extra[i]; i++)
		probe_port(extra[i], 1);

	probe_portguids(NULL, 16);
	for (int i = 0; i < (int)(sizeof(cas) / sizeof(cas[0])) && cas[i][0]; i++) {
		probe_portguids(cas[i], 16);
		probe_portguids(cas[i], 1);
		probe_portguids(cas[i], -1);
	}
	probe_portguids("nosuchdev", 16);

	probe_issm(NULL, 0);
	for (int i = 0; i < (int)(sizeof(cas) / sizeof(cas[0])) && cas[i][0]; i++)
		for (int p = 0; p <= 3; p++)
			probe_issm(cas[i], p);
	probe_issm("nosuchdev", 1);

	/* No /dev/infiniband in the test's namespace: the error paths. */
	int fd = umad_open_port(NULL, 0);
	printf("open_port(NULL, 0) = %d size %zu\n", fd < 0 ? fd : 0, umad_size());
	fd = umad_open_port("nosuchdev", 1);
	printf("open_port(nosuchdev, 1) = %d\n", fd < 0 ? fd : 0);
	if (cas[0][0]) {
		fd = umad_open_port(cas[0], 0);
		printf("open_port(%s, 0) = %d\n", cas[0], fd < 0 ? fd : 0);
	}
	printf("done = %d\n", umad_done());
	return 0;
}

static int do_str(void)
{
	const uint8_t classes[] = {0x00, 0x01, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
				   0x09, 0x10, 0x21, 0x30, 0x81, 0xff};
	for (int c = 0; c < 256; c++)
		printf("class %02x %s\n", c, umad_class_str((uint8_t)c));
	for (size_t i = 0; i < sizeof(classes); i++) {
		for (int m = 0; m < 256; m++)
			printf("method %02x %02x %s\n", classes[i], m,
			       umad_method_str(classes[i], (uint8_t)m));
		for (int a = 0; a < 0x10000; a++) {
			if (a > 0x100 && a != 0xff90 && a != 0xff00 && (a & 0xff) != 0x11)
				continue;
			printf("attr %02x %04x %s\n", classes[i], a,
			       umad_attribute_str(classes[i], htobe16((uint16_t)a)));
		}
	}
	for (int s = 0; s < 0x10000; s++)
		printf("status %04x %s | %s\n", s,
		       umad_common_mad_status_str(htobe16((uint16_t)s)),
		       umad_sa_mad_status_str(htobe16((uint16_t)s)));
	return 0;
}

static int do_mad(void)
{
	unsigned char buf[512];
	memset(buf, 0x5a, sizeof(buf));
	printf("size = %zu\n", umad_size());
	printf("get_mad offset = %td\n", (unsigned char *)umad_get_mad(buf) - buf);
	printf("set_addr = %d\n", umad_set_addr(buf, 0x1234, 0x10203, 7, 0x80010000));
	ib_mad_addr_t grh;
	memset(&grh, 0, sizeof(grh));
	for (int i = 0; i < 16; i++)
		grh.gid[i] = (uint8_t)(0xf0 + i);
	grh.flow_label = 0x12345;
	grh.hop_limit = 63;
	grh.traffic_class = 9;
	printf("set_grh = %d\n", umad_set_grh(buf, &grh));
	printf("set_pkey = %d\n", umad_set_pkey(buf, 3));
	printf("get_pkey = %d\n", umad_get_pkey(buf));
	printf("status = %d\n", umad_status(buf));
	printf("get_mad_addr offset = %td\n", (unsigned char *)umad_get_mad_addr(buf) - buf);
	for (size_t i = 0; i < 88; i++)
		printf("%02x%s", buf[i], (i % 16 == 15) ? "\n" : " ");
	printf("\n");
	fflush(stdout);
	umad_dump(buf);
	printf("set_grh(NULL) = %d\n", umad_set_grh(buf, NULL));
	printf("set_addr_net = %d\n",
	       umad_set_addr_net(buf, htobe16(5), htobe32(1), 2, htobe32(0x80010000)));
	for (size_t i = 0; i < 88; i++)
		printf("%02x%s", buf[i], (i % 16 == 15) ? "\n" : " ");
	printf("\n");
	printf("debug(-1) = %d\n", umad_debug(-1));
	printf("debug(0) = %d\n", umad_debug(0));
	fflush(stdout);
	umad_addr_dump(umad_get_mad_addr(buf));
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "sysfs";
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "sysfs"))
		return do_sysfs();
	if (!strcmp(mode, "str"))
		return do_str();
	if (!strcmp(mode, "mad"))
		return do_mad();
	if (!strcmp(mode, "port") && argc == 4) {
		const char *ca = strcmp(argv[2], "-") ? argv[2] : NULL;
		probe_port(ca, atoi(argv[3]));
		return 0;
	}
	fprintf(stderr, "usage: umad_probe sysfs|str|mad|port CA PORT\n");
	return 2;
}
