// SMI/GSI pairs (rdma-core 56, libibumad IBUMAD_1.4): which local device
// and port carry subnet management (SMI, QP0) and which general services
// (GSI, QP1).  Built only for OPENVERBS_ABI >= 56.
//
// Behaviour follows rdma-core 56's umad_get_smi_gsi_pairs(3) and
// umad_get_smi_gsi_pair_by_ca_name(3):
//  - every port (0..numports) of every device of umad_get_cas_names() is
//    read from sysfs; ports are grouped by port GUID, and each GUID is one
//    pair, in the order the GUIDs are first met;
//  - a GUID held by more than one port (a device split into a data device
//    and an SMI device, e.g. "mlx5_0" and "smi1" sharing the port GUID):
//    ports with IsSMDisabled set in the capability mask are the GSI side,
//    the others the SMI side;
//  - a GUID held by one port (a classic HCA or switch): the port is the GSI
//    side, and also the SMI side unless IsSMDisabled is set;
//  - the side's device name is the first device met, its preferred port the
//    first ACTIVE port of that side, else its first port;
//  - by name: the first pair (with enforce_smi: that has an SMI side) one of
//    whose sides is devname and has port portnum (0: any).
#include "umad/internal.h"

#if _OPENVERBS_ABI >= 56

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <endian.h>

namespace ov::umad {
namespace {

constexpr unsigned kPortActive = 4;

struct Side {
	char name[UMAD_CA_NAME_LEN];
	uint32_t port;
	bool any;
	bool active;
	uint64_t ports; // bit n: port n of the named device is on this side
};

struct PairWork {
	__be64 guid;
	Side smi, gsi;
};

// One port joins a side: the first device met names it; the first ACTIVE
// port (else the first port) is its preferred port.
void join(Side *side, const umad_port_t *port, const char *ca_name) noexcept
{
	if (!side->any || !strncmp(side->name, ca_name, UMAD_CA_NAME_LEN))
		side->ports |= port->portnum >= 0 && port->portnum < 64 ? 1ull << port->portnum : 0;
	if (!side->any) {
		snprintf(side->name, sizeof(side->name), "%s", ca_name);
		side->port = static_cast<uint32_t>(port->portnum);
		side->any = true;
		side->active = port->state == kPortActive;
		return;
	}
	if (!side->active && port->state == kPortActive &&
	    !strncmp(side->name, ca_name, UMAD_CA_NAME_LEN)) {
		side->port = static_cast<uint32_t>(port->portnum);
		side->active = true;
	}
}

// Calls fn(ca, port) for every port (0..numports) of every device listed.
template <class Fn>
void for_each_port(char (*names)[UMAD_CA_NAME_LEN], int ncas, Fn fn) noexcept
{
	for (int c = 0; c < ncas; ++c) {
		umad_ca_t ca;
		memset(&ca, 0, sizeof(ca));
		if (umad_get_ca(names[c], &ca) < 0)
			continue;
		for (int p = 0; p <= ca.numports; ++p)
			if (ca.ports[p])
				fn(ca, *ca.ports[p]);
		umad_release_ca(&ca);
	}
}

// Every pair of the local devices into work[0..max-1]; returns the count,
// or -1 when the device names cannot be listed.
int collect(PairWork *work, int max) noexcept
{
	static_assert(UMAD_MAX_DEVICES > 0);
	char names[UMAD_MAX_DEVICES][UMAD_CA_NAME_LEN];
	int ncas = umad_get_cas_names(names, UMAD_MAX_DEVICES);
	if (ncas < 0)
		return -1;
	// Pass 1: how many ports hold each GUID.
	struct Count {
		__be64 guid;
		int ports;
	};
	static constexpr int kMaxGuids = UMAD_MAX_PORTS;
	Count counts[kMaxGuids];
	int nguids = 0;
	for_each_port(names, ncas, [&](const umad_ca_t &, const umad_port_t &port) {
		int i = 0;
		while (i < nguids && counts[i].guid != port.port_guid)
			++i;
		if (i < nguids)
			++counts[i].ports;
		else if (nguids < kMaxGuids)
			counts[nguids++] = {port.port_guid, 1};
	});
	// Pass 2: the sides.
	int npairs = 0;
	for_each_port(names, ncas, [&](const umad_ca_t &ca, const umad_port_t &port) {
		int shared = 0;
		for (int i = 0; i < nguids; ++i)
			if (counts[i].guid == port.port_guid)
				shared = counts[i].ports;
		if (!shared)
			return; // beyond kMaxGuids distinct GUIDs
		int k = 0;
		while (k < npairs && work[k].guid != port.port_guid)
			++k;
		if (k == npairs) {
			if (npairs == max)
				return;
			memset(&work[k], 0, sizeof(work[k]));
			work[k].guid = port.port_guid;
			++npairs;
		}
		bool smi = is_smi_port(&port);
		if (shared > 1) {
			join(smi ? &work[k].smi : &work[k].gsi, &port, ca.ca_name);
		} else {
			if (smi)
				join(&work[k].smi, &port, ca.ca_name);
			join(&work[k].gsi, &port, ca.ca_name);
		}
	});
	return npairs;
}

void to_pair(const PairWork &w, struct umad_ca_pair *out) noexcept
{
	memset(out, 0, sizeof(*out));
	memcpy(out->smi_name, w.smi.name, sizeof(out->smi_name));
	out->smi_preferred_port = w.smi.port;
	memcpy(out->gsi_name, w.gsi.name, sizeof(out->gsi_name));
	out->gsi_preferred_port = w.gsi.port;
}

} // namespace
} // namespace ov::umad

using namespace ov::umad;

UMAD_EXPORT int umad_get_smi_gsi_pairs(struct umad_ca_pair cas[], size_t max)
{
	if (!max)
		return 0;
	if (!cas)
		return -1;
	memset(cas, 0, max * sizeof(cas[0]));
	PairWork work[UMAD_MAX_PORTS];
	int limit = max < UMAD_MAX_PORTS ? static_cast<int>(max) : UMAD_MAX_PORTS;
	int n = collect(work, limit);
	if (n < 0)
		return -1;
	for (int i = 0; i < n; ++i)
		to_pair(work[i], &cas[i]);
	if (debug_level())
		warn("umad_get_smi_gsi_pairs", "%d pairs", n);
	return n;
}

UMAD_EXPORT int umad_get_smi_gsi_pair_by_ca_name(const char *devname, uint8_t portnum,
						 struct umad_ca_pair *ca_pair,
						 unsigned enforce_smi)
{
	if (!ca_pair)
		return -1;
	PairWork work[UMAD_MAX_PORTS];
	int n = collect(work, UMAD_MAX_PORTS);
	if (n < 0)
		return -1;
	for (int i = 0; i < n; ++i) {
		const PairWork &w = work[i];
		if (!w.gsi.any || (enforce_smi && !w.smi.any))
			continue;
		const Side *named = nullptr;
		if (devname) {
			if (w.gsi.any && !strncmp(w.gsi.name, devname, UMAD_CA_NAME_LEN))
				named = &w.gsi;
			else if (w.smi.any && !strncmp(w.smi.name, devname, UMAD_CA_NAME_LEN))
				named = &w.smi;
			else
				continue;
		}
		if (portnum) {
			// The port number refers to the named device (the SMI side
			// when no name is given, the GSI side without an SMI side).
			const Side *side = named ? named : (w.smi.any ? &w.smi : &w.gsi);
			if (portnum >= 64 || !(side->ports & (1ull << portnum)))
				continue;
		}
		to_pair(w, ca_pair);
		return 0;
	}
	return 1;
}

#endif // _OPENVERBS_ABI >= 56
