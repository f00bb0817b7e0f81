// CA and port discovery from sysfs: umad_get_ca/port and friends.
//
// Behaviour follows rdma-core 44's libibumad as observed (tests/umad/
// differential.sh compares both field by field on the fixtures of
// tests/umad/make_fixtures.py):
//  - a port is read from /sys/class/infiniband/<ca>/ports/<n>/; every numeric
//    attribute including rate is mandatory (-EIO), link_layer defaults to "IB";
//  - the device list is in readdir order and keeps node types 1..3 only;
//  - the default CA/port: first CA (readdir order) with an ACTIVE InfiniBand
//    port, else the first with a usable port, else "mthca0" port 1; switches
//    always use port 0.
#include "umad/internal.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <endian.h>

namespace ov::umad {
namespace {

constexpr const char kDefaultCa[] = "mthca0";
constexpr int kDefaultPort = 1;

constexpr unsigned kPortActive = 4;
constexpr unsigned kPhysLinkUp = 5;
constexpr unsigned kPhysDisabled = 3;
constexpr unsigned kNodeSwitch = 2;

// The CA name chosen by resolve_ca_name(): owned here, no strdup needed.
struct CaName {
	char name[256];
};

int sys_ib_dir(char *out, size_t len, const char *ca) noexcept
{
	return make_path(out, len, "%s/class/infiniband/%s", sys_root(), ca) ? 0 : -ENAMETOOLONG;
}

bool is_ib_node(const char *ca) noexcept
{
	char dir[kPathMax];
	unsigned type = 0;
	if (sys_ib_dir(dir, sizeof(dir), ca) || read_uint(dir, SYS_NODE_TYPE, &type) < 0)
		return false;
	return type >= 1 && type <= 3;
}

bool digits_only(const struct dirent *d)
{
	for (const char *p = d->d_name; *p; ++p)
		if (!isdigit(static_cast<unsigned char>(*p)))
			return false;
	return true;
}

int digit_filter(const struct dirent *d) { return digits_only(d) ? 1 : 0; }

void free_namelist(struct dirent **list, int n) noexcept
{
	if (!list)
		return;
	for (int i = 0; i < n; ++i)
		free(list[i]);
	free(list);
}

void release_port_mem(umad_port_t *port) noexcept
{
	free(port->pkeys);
	port->pkeys = nullptr;
	port->pkeys_size = 0;
}

// Reads the P_Key table: the digit-named files of <port_dir>/pkeys.
int read_pkeys(const char *port_dir, umad_port_t *port) noexcept
{
	char dir[kPathMax];
	if (!make_path(dir, sizeof(dir), "%s/pkeys", port_dir))
		return -EIO;
	struct dirent **names = nullptr;
	int n = scandir(dir, &names, digit_filter, nullptr);
	if (n <= 0) {
		warn("get_port", "no pkeys found for %s:%u (at dir %s)...", port->ca_name,
		     static_cast<unsigned>(port->portnum), dir);
		if (n == 0)
			free_namelist(names, 0);
		return -EIO;
	}
	auto *pkeys = static_cast<uint16_t *>(calloc(static_cast<size_t>(n), sizeof(uint16_t)));
	if (!pkeys) {
		warn("get_port", "calloc failed: %s", strerror(errno));
		free_namelist(names, n);
		return -EIO;
	}
	for (int i = 0; i < n; ++i) {
		unsigned long idx = strtoul(names[i]->d_name, nullptr, 0);
		unsigned value = 0;
		read_uint(dir, names[i]->d_name, &value);
		// A sparse table (index beyond the entry count) is ignored, not
		// written out of bounds.
		if (idx < static_cast<unsigned long>(n))
			pkeys[idx] = static_cast<uint16_t>(value);
	}
	free_namelist(names, n);
	port->pkeys = pkeys;
	port->pkeys_size = static_cast<unsigned>(n);
	return 0;
}

// Fills *port from <ports_dir>/<portnum>/; 0 or -EIO.
int get_port(const char *ca_name, const char *ports_dir, int portnum, umad_port_t *port) noexcept
{
	char dir[kPathMax];
	strncpy(port->ca_name, ca_name, sizeof(port->ca_name) - 1);
	port->portnum = portnum;
	port->pkeys = nullptr;

	if (!make_path(dir, sizeof(dir), "%s/%d", ports_dir, portnum))
		return -EIO;
	const struct {
		const char *name;
		unsigned *field;
	} numeric[] = {
		{SYS_PORT_LMC, &port->lmc},     {SYS_PORT_SMLID, &port->sm_lid},
		{SYS_PORT_SMSL, &port->sm_sl},  {SYS_PORT_LID, &port->base_lid},
		{SYS_PORT_STATE, &port->state}, {SYS_PORT_PHY_STATE, &port->phys_state},
		{SYS_PORT_RATE, &port->rate},
	};
	for (const auto &attr : numeric)
		if (read_uint(dir, attr.name, attr.field) < 0)
			return -EIO;
	unsigned capmask = 0;
	if (read_uint(dir, SYS_PORT_CAPMASK, &capmask) < 0)
		return -EIO;
	if (read_string(dir, SYS_PORT_LINK_LAYER, port->link_layer, UMAD_CA_NAME_LEN) < 0)
		snprintf(port->link_layer, sizeof(port->link_layer), "IB");
	port->capmask = htobe32(capmask);

	union umad_gid gid;
	if (read_gid(dir, SYS_PORT_GID, &gid) < 0)
		return -EIO;
	port->gid_prefix = gid.global.subnet_prefix;
	port->port_guid = gid.global.interface_id;

	return read_pkeys(dir, port);
}

void release_ca_ports(umad_ca_t *ca) noexcept
{
	int last = ca->numports;
	if (last < 0)
		last = 0;
	if (last >= UMAD_CA_MAX_PORTS)
		last = UMAD_CA_MAX_PORTS - 1;
	for (int i = 0; i <= last; ++i) {
		if (!ca->ports[i])
			continue;
		release_port_mem(ca->ports[i]);
		free(ca->ports[i]);
		ca->ports[i] = nullptr;
	}
}

// Port directory name -> number; -1 unless "0" or 1..UMAD_CA_MAX_PORTS-1
// (leading integer, as atoi reads it).
int port_dir_number(const char *name) noexcept
{
	if (!strcmp(name, "0"))
		return 0;
	long v = strtol(name, nullptr, 10);
	if (v <= 0 || v >= UMAD_CA_MAX_PORTS)
		return -1;
	return static_cast<int>(v);
}

int get_ca(const char *ca_name, umad_ca_t *ca) noexcept
{
	char dir[kPathMax];
	ca->numports = 0;
	memset(ca->ports, 0, sizeof(ca->ports));
	strncpy(ca->ca_name, ca_name, sizeof(ca->ca_name) - 1);
	ca->ca_name[sizeof(ca->ca_name) - 1] = '\0';

	if (sys_ib_dir(dir, sizeof(dir), ca->ca_name))
		return -ENAMETOOLONG;
	int r = read_uint(dir, SYS_NODE_TYPE, &ca->node_type);
	if (r < 0)
		return r;
	if (read_string(dir, SYS_CA_FW_VERS, ca->fw_ver, sizeof(ca->fw_ver)) < 0)
		ca->fw_ver[0] = '\0';
	if (read_string(dir, SYS_CA_HW_VERS, ca->hw_ver, sizeof(ca->hw_ver)) < 0)
		ca->hw_ver[0] = '\0';
	if (read_string(dir, SYS_CA_TYPE, ca->ca_type, sizeof(ca->ca_type)) < 0)
		ca->ca_type[0] = '\0';
	if ((r = read_guid(dir, SYS_CA_NODE_GUID, &ca->node_guid)) < 0)
		return r;
	if ((r = read_guid(dir, SYS_CA_SYS_GUID, &ca->system_guid)) < 0)
		return r;

	char ports_dir[kPathMax];
	if (!make_path(ports_dir, sizeof(ports_dir), "%s/%s", dir, SYS_CA_PORTS_DIR))
		return -ENAMETOOLONG;
	DIR *d = opendir(ports_dir);
	if (!d)
		return -ENOENT;
	struct dirent **names = nullptr;
	int n = scandir(ports_dir, &names, nullptr, alphasort);
	closedir(d);
	if (n < 0)
		return -EIO;

	int ret = 0;
	for (int i = 0; i < n && ret == 0; ++i) {
		const char *entry = names[i]->d_name;
		if (!strcmp(entry, ".") || !strcmp(entry, ".."))
			continue;
		int portnum = port_dir_number(entry);
		if (portnum < 0) {
			ret = -EIO;
			break;
		}
		if (ca->ports[portnum]) // "1" and "01": the same port, read once
			continue;
		auto *port = static_cast<umad_port_t *>(calloc(1, sizeof(umad_port_t)));
		if (!port) {
			ret = -ENOMEM;
			break;
		}
		if (get_port(ca_name, ports_dir, portnum, port) < 0) {
			release_port_mem(port);
			free(port);
			ret = -EIO;
			break;
		}
		ca->ports[portnum] = port;
		if (ca->numports < portnum)
			ca->numports = portnum;
	}
	free_namelist(names, n);
	if (ret < 0)
		release_ca_ports(ca);
	return ret;
}

// With *port > 0, checks that port; otherwise picks one.  Returns 1 for an
// ACTIVE port (or a switch), 0 for a usable one, -1 when none.  With
// smi_only (umad_open_smi_port), ports that are no SMI port (is_smi_port)
// are not usable.
int resolve_ca_port(const char *ca_name, int *port, bool smi_only) noexcept
{
	umad_ca_t ca;
	memset(&ca, 0, sizeof(ca));
	if (get_ca(ca_name, &ca) < 0)
		return -1;
	auto is_ib = [smi_only](const umad_port_t *p) {
		if (smi_only && !is_smi_port(p))
			return false;
		return !strcmp(p->link_layer, "InfiniBand") || !strcmp(p->link_layer, "IB");
	};
	int ret = -1;
	if (ca.node_type == kNodeSwitch) {
		*port = 0; // switch management port
		ret = 1;
	} else if (*port > 0) {
		const umad_port_t *p = *port <= ca.numports && *port < UMAD_CA_MAX_PORTS
					       ? ca.ports[*port] : nullptr;
		if (p && is_ib(p)) {
			if (p->state == kPortActive)
				ret = 1;
			else if (p->phys_state != kPhysDisabled)
				ret = 0;
		}
	} else {
		int active = -1, up = -1;
		for (int i = 0; i <= ca.numports; ++i) {
			const umad_port_t *p = ca.ports[i];
			if (!p || !is_ib(p))
				continue;
			if (up < 0 && p->phys_state == kPhysLinkUp)
				up = *port = i;
			if (p->state == kPortActive) {
				active = *port = i;
				break;
			}
		}
		if (active < 0 && up < 0) {
			// Last resort, link layer not checked (rdma-core 44 does the same).
			for (int i = 0; i <= ca.numports; ++i) {
				if (ca.ports[i] && ca.ports[i]->phys_state != kPhysDisabled &&
				    (!smi_only || is_smi_port(ca.ports[i]))) {
					up = *port = i;
					break;
				}
			}
		}
		ret = active >= 0 ? 1 : (up >= 0 ? 0 : -1);
	}
	if (debug_level())
		warn("resolve_ca_port", "ca %s port %d result %d", ca_name, *port, ret);
	release_ca_ports(&ca);
	return ret;
}

// Chooses the CA (and, with best_port, the port) a call refers to.
// 0 and out filled, or -1.  With smi_only only SMI ports count, a named
// port included (rdma-core 56's umad_open_smi_port), and there is no
// "mthca0" fallback.
int resolve_ca_name(const char *ca_in, int *best_port, CaName *out,
		    bool smi_only = false) noexcept
{
	auto set = [out](const char *name) {
		snprintf(out->name, sizeof(out->name), "%s", name);
		return 0;
	};
	if (ca_in && (!best_port || *best_port) && !smi_only)
		return set(ca_in);
	if (ca_in) {
		if (resolve_ca_port(ca_in, best_port, smi_only) < 0)
			return -1;
		return set(ca_in);
	}

	struct umad_device_node *list = umad_get_ca_device_list();
	if (!list)
		return -1;
	const struct umad_device_node *fallback = nullptr;
	int fallback_port = 0;
	for (const struct umad_device_node *node = list; node; node = node->next) {
		int port = best_port ? *best_port : 0;
		int type = resolve_ca_port(node->ca_name, &port, smi_only);
		if (type < 0)
			continue;
		if (type > 0) {
			if (best_port)
				*best_port = port;
			set(node->ca_name);
			umad_free_ca_device_list(list);
			return 0;
		}
		if (!fallback) {
			fallback = node;
			fallback_port = port;
		}
	}
	if (fallback) {
		if (best_port)
			*best_port = fallback_port;
		set(fallback->ca_name);
		umad_free_ca_device_list(list);
		return 0;
	}
	umad_free_ca_device_list(list);
	if (smi_only)
		return -1;
	if (best_port)
		*best_port = kDefaultPort;
	return set(kDefaultCa);
}

// /sys/class/infiniband_mad/umad<id>/{ibdev,port} -> id, or -1.
int dev_to_umad_id(const char *dev, unsigned port) noexcept
{
	for (int id = 0; id < UMAD_MAX_PORTS; ++id) {
		char dir[kPathMax];
		char umad_dev[UMAD_CA_NAME_LEN];
		unsigned umad_port = 0;
		if (!make_path(dir, sizeof(dir), "%s/class/infiniband_mad/umad%d", sys_root(), id))
			return -1;
		if (read_string(dir, SYS_IB_MAD_DEV, umad_dev, sizeof(umad_dev)) < 0)
			continue;
		if (read_uint(dir, SYS_IB_MAD_PORT, &umad_port) < 0)
			continue;
		if (strncmp(dev, umad_dev, UMAD_CA_NAME_LEN) || port != umad_port)
			continue;
		if (debug_level())
			warn("dev_to_umad_id", "mapped %s %u to %d", dev, port, id);
		return id;
	}
	return -1;
}

} // namespace

// The IsSMDisabled bit of PortInfo:CapabilityMask (IBA 14.2.5.6): set on
// the ports of a device whose subnet management goes through another
// (SMI) device.
constexpr uint32_t kCapIsSmDisabled = 1u << 10;

bool is_smi_port(const umad_port_t *port) noexcept
{
	return !(be32toh(port->capmask) & kCapIsSmDisabled);
}

// Used by port_io.cpp (umad_open_port, umad_open_smi_port): resolves
// (ca, port) to a umad index.
int resolve_umad_id(const char *ca_name, int portnum, int *umad_id, bool smi_only) noexcept
{
	CaName found;
	if (resolve_ca_name(ca_name, &portnum, &found, smi_only) < 0)
		return -ENODEV;
	int id = dev_to_umad_id(found.name, static_cast<unsigned>(portnum));
	if (id < 0)
		return -EINVAL;
	*umad_id = id;
	return 0;
}

} // namespace ov::umad

using namespace ov::umad;

UMAD_EXPORT int umad_init(void)
{
	if (debug_level())
		warn("umad_init", "umad_init");
	return 0;
}

UMAD_EXPORT int umad_done(void)
{
	if (debug_level())
		warn("umad_done", "umad_done");
	return 0;
}

UMAD_EXPORT int umad_get_cas_names(char cas[][UMAD_CA_NAME_LEN], int max)
{
	if (!cas && max > 0)
		return -EINVAL;
	char dir[kPathMax];
	if (!make_path(dir, sizeof(dir), "%s/class/infiniband", sys_root()))
		return -ENAMETOOLONG;
	struct dirent **names = nullptr;
	int n = scandir(dir, &names, nullptr, alphasort);
	int count = 0;
	if (n > 0) {
		for (int i = 0; i < n; ++i) {
			const char *name = names[i]->d_name;
			if (strcmp(name, ".") && strcmp(name, "..") &&
			    strlen(name) < UMAD_CA_NAME_LEN && count < max && is_ib_node(name))
				snprintf(cas[count++], UMAD_CA_NAME_LEN, "%s", name);
		}
		free_namelist(names, n);
	} else {
		// No sysfs class at all: rdma-core answers with its default CA name.
		if (n == 0)
			free_namelist(names, 0);
		if (max <= 0)
			return 0;
		snprintf(cas[0], UMAD_CA_NAME_LEN, "%s", kDefaultCa);
		count = 1;
	}
	return count;
}

UMAD_EXPORT int umad_get_ca_portguids(const char *ca_name, __be64 *portguids, int max)
{
	CaName found;
	if (resolve_ca_name(ca_name, nullptr, &found) < 0)
		return -ENODEV;
	umad_ca_t ca;
	memset(&ca, 0, sizeof(ca));
	if (umad_get_ca(found.name, &ca) < 0)
		return -1;
	int count = 0;
	if (portguids) {
		if (ca.numports + 1 > max) {
			release_ca_ports(&ca);
			return -ENOMEM;
		}
		for (int i = 0; i <= ca.numports; ++i)
			portguids[count++] = ca.ports[i] ? ca.ports[i]->port_guid : htobe64(0);
	}
	release_ca_ports(&ca);
	return count;
}

UMAD_EXPORT int umad_get_ca(const char *ca_name, umad_ca_t *ca)
{
	if (!ca)
		return -EINVAL;
	CaName found;
	if (resolve_ca_name(ca_name, nullptr, &found) < 0)
		return -ENODEV;
	return get_ca(found.name, ca);
}

UMAD_EXPORT int umad_release_ca(umad_ca_t *ca)
{
	if (!ca)
		return -ENODEV;
	release_ca_ports(ca);
	return 0;
}

UMAD_EXPORT int umad_get_port(const char *ca_name, int portnum, umad_port_t *port)
{
	if (!port)
		return -EINVAL;
	CaName found;
	if (resolve_ca_name(ca_name, &portnum, &found) < 0)
		return -ENODEV;
	char ports_dir[kPathMax];
	if (!make_path(ports_dir, sizeof(ports_dir), "%s/class/infiniband/%s/%s", sys_root(),
		       found.name, SYS_CA_PORTS_DIR))
		return -EIO;
	return get_port(found.name, ports_dir, portnum, port);
}

UMAD_EXPORT int umad_release_port(umad_port_t *port)
{
	if (!port)
		return -ENODEV;
	release_port_mem(port);
	return 0;
}

UMAD_EXPORT int umad_get_issm_path(const char *ca_name, int portnum, char path[], int max)
{
	if (!path || max <= 0)
		return -EINVAL;
	int id = -1;
	if (int r = resolve_umad_id(ca_name, portnum, &id, false))
		return r;
	snprintf(path, static_cast<size_t>(max), "%s/infiniband/issm%u", dev_root(),
		 static_cast<unsigned>(id));
	return 0;
}

UMAD_EXPORT struct umad_device_node *umad_get_ca_device_list(void)
{
	char dir[kPathMax];
	if (!make_path(dir, sizeof(dir), "%s/class/infiniband", sys_root())) {
		errno = ENAMETOOLONG;
		return nullptr;
	}
	DIR *d = opendir(dir);
	if (!d) {
		if (errno == ENOENT)
			errno = 0; // no RDMA devices: an empty list, not an error
		return nullptr;
	}
	struct umad_device_node *head = nullptr, *tail = nullptr;
	int err = 0;
	while (struct dirent *entry = readdir(d)) {
		if (!strcmp(entry->d_name, ".") || !strcmp(entry->d_name, ".."))
			continue;
		if (!is_ib_node(entry->d_name))
			continue;
		size_t len = strlen(entry->d_name) + 1;
		// One block: the node, then its name.
		auto *node = static_cast<struct umad_device_node *>(
			calloc(1, sizeof(struct umad_device_node) + len));
		if (!node) {
			err = ENOMEM;
			umad_free_ca_device_list(head);
			head = nullptr;
			break;
		}
		char *name = reinterpret_cast<char *>(node + 1);
		memcpy(name, entry->d_name, len);
		node->ca_name = name;
		if (tail)
			tail->next = node;
		else
			head = node;
		tail = node;
	}
	closedir(d);
	errno = err;
	return head;
}

UMAD_EXPORT void umad_free_ca_device_list(struct umad_device_node *head)
{
	while (head) {
		struct umad_device_node *next = head->next;
		free(head);
		head = next;
	}
}

namespace {
int compare_nodes(const void *a, const void *b)
{
	const auto *x = *static_cast<struct umad_device_node *const *>(a);
	const auto *y = *static_cast<struct umad_device_node *const *>(b);
	return strcmp(x->ca_name, y->ca_name);
}
} // namespace

UMAD_EXPORT int umad_sort_ca_device_list(struct umad_device_node **head, size_t size)
{
	if (!head)
		return -EINVAL;
	// The list's real length wins over `size` (a hint; 0 = count it).
	size_t count = 0;
	for (struct umad_device_node *n = *head; n; n = n->next)
		++count;
	(void)size;
	if (count < 2)
		return 0;
	auto **nodes = static_cast<struct umad_device_node **>(
		calloc(count, sizeof(struct umad_device_node *)));
	if (!nodes)
		return -ENOMEM;
	size_t i = 0;
	for (struct umad_device_node *n = *head; n; n = n->next)
		nodes[i++] = n;
	qsort(nodes, count, sizeof(*nodes), compare_nodes);
	for (i = 0; i + 1 < count; ++i)
		nodes[i]->next = nodes[i + 1];
	nodes[count - 1]->next = nullptr;
	*head = nodes[0];
	free(nodes);
	return 0;
}
