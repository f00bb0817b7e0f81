/*
 * sim_nodeinfo: opens the default umad port, registers a directed-route SMP
 * agent and asks the local node for its NodeInfo (SubnGet, hop count 0),
 * then checks the answer against umad_get_port().  Run under ibsim with
 * LD_PRELOAD=libumad2sim.so (tests/umad/ibsim-compare.sh); exit 0 = pass.
 */
#include <infiniband/umad.h>
#include <infiniband/umad_sm.h>
#include <infiniband/umad_types.h>

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define FAIL(...) do { fprintf(stderr, "sim_nodeinfo: " __VA_ARGS__); fputc('\n', stderr); return 1; } while (0)

int main(void)
{
	umad_port_t port;
	memset(&port, 0, sizeof(port));
	if (umad_init() < 0)
		FAIL("umad_init failed");
	int r = umad_get_port(NULL, 0, &port);
	if (r < 0)
		FAIL("umad_get_port: %d", r);
	printf("port %s:%d lid %u state %u guid 0x%016" PRIx64 "\n", port.ca_name, port.portnum,
	       port.base_lid, port.state, (uint64_t)be64toh(port.port_guid));

	int fd = umad_open_port(NULL, 0);
	if (fd < 0)
		FAIL("umad_open_port: %d", fd);
	long mask[16 / sizeof(long)];
	memset(mask, 0, sizeof(mask));
	int agent = umad_register(fd, UMAD_CLASS_SUBN_DIRECTED_ROUTE, 1, 0, mask);
	if (agent < 0)
		FAIL("umad_register: %d", agent);
	struct umad_reg_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.mgmt_class = UMAD_CLASS_PERF_MGMT;
	attr.mgmt_class_version = 1;
	uint32_t agent2 = 0;
	r = umad_register2(fd, &attr, &agent2);
	if (r)
		FAIL("umad_register2 (old-ioctl fallback): %d", r);
	printf("agents %d %u size %zu\n", agent, agent2, umad_size());

	size_t len = umad_size() + 256;
	void *umad = umad_alloc(1, len);
	struct umad_smp *smp = umad_get_mad(umad);
	smp->base_version = UMAD_BASE_VERSION;
	smp->mgmt_class = UMAD_CLASS_SUBN_DIRECTED_ROUTE;
	smp->class_version = 1;
	smp->method = UMAD_METHOD_GET;
	smp->tid = htobe64(0x1234567890ULL);
	smp->attr_id = htobe16(UMAD_SM_ATTR_NODE_INFO);
	smp->dr_slid = htobe16(0xffff);
	smp->dr_dlid = htobe16(0xffff);
	umad_set_addr(umad, 0xffff, 0, 0, 0);
	r = umad_send(fd, agent, umad, 256, 200, 3);
	if (r < 0)
		FAIL("umad_send: %d errno %d", r, errno);

	void *resp = umad_alloc(1, len);
	int length = 256;
	r = umad_recv(fd, resp, &length, 5000);
	if (r < 0)
		FAIL("umad_recv: %d errno %d", r, errno);
	if (r != agent)
		FAIL("answer for agent %d, expected %d", r, agent);
	if (umad_status(resp))
		FAIL("umad_status %d", umad_status(resp));
	struct umad_smp *ans = umad_get_mad(resp);
	if (ans->method != UMAD_METHOD_GET_RESP || be16toh(ans->attr_id) != UMAD_SM_ATTR_NODE_INFO)
		FAIL("unexpected answer method 0x%x attr 0x%x", ans->method, be16toh(ans->attr_id));
	/* The kernel owns the upper 32 TID bits (the agent's hi_tid). */
	if ((be64toh(ans->tid) & 0xffffffffULL) != 0x34567890ULL)
		FAIL("tid mismatch: 0x%016" PRIx64, (uint64_t)be64toh(ans->tid));
	/* NodeInfo: NodeGUID at byte 12, PortGUID at byte 20 of the data. */
	uint64_t node_guid, port_guid;
	memcpy(&node_guid, ans->data + 12, 8);
	memcpy(&port_guid, ans->data + 20, 8);
	printf("NodeInfo: len %d type %u ports %u node_guid 0x%016" PRIx64 " port_guid 0x%016" PRIx64 "\n",
	       length, ans->data[2], ans->data[3], (uint64_t)be64toh(node_guid),
	       (uint64_t)be64toh(port_guid));
	if (port_guid != port.port_guid)
		FAIL("NodeInfo PortGUID differs from umad_get_port's");

	if (umad_unregister(fd, agent) || umad_unregister(fd, (int)agent2))
		FAIL("umad_unregister failed");
	umad_free(umad);
	umad_free(resp);
	umad_close_port(fd);
	umad_release_port(&port);
	umad_done();
	printf("PASS\n");
	return 0;
}
