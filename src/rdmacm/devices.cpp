// Library state and the list of devices (rdma-core 44 cma.c: ucma_init,
// ucma_get_device, rdma_get_devices). Device contexts are opened on first
// use and stay open for the life of the process, as rdma-core's do; each
// device's PD is shared by the ids bound to it and freed with the last one.
#include "cm.h"
#include "log.h"

#include <infiniband/ib.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace ov::cm {
namespace {

struct Library {
	std::mutex mu;
	// Set (release, under mu) once the device list is in; read first
	// without mu: every id and channel call asks, after the first only
	// this load.
	std::atomic<bool> ready{false};
	std::vector<ibv_device **> lists; // every device list taken (kept: devs point into them)
	std::deque<Device> devs;	   // a deque: ids keep Device pointers across growth
	int abi = 4;
	bool af_ib = false;
};

Library &lib() noexcept
{
	static Library *l = new Library; // never destroyed: ids may outlive exit handlers
	return *l;
}

// The kernel CM's ABI version (3 or 4), read from sysfs; absent files mean
// "assume the current one" as rdma-core does.
int read_abi(int &abi) noexcept
{
	const char *paths[] = {"/sys/class/misc/rdma_cm/abi_version",
			       "/sys/class/infiniband_ucma/abi_version"};
	for (const char *p : paths) {
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		char buf[16] = {};
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		abi = static_cast<int>(strtol(buf, nullptr, 10));
		if (abi < 3 || abi > 4) {
			log::err("kernel rdma_cm ABI version %d is not one of 3..4", abi);
			return -1;
		}
		return 0;
	}
	return 0;
}

// Adds the devices of `list` not known yet (by index, else GUID). The
// number added (the library then keeps the list), or -1 when out of memory.
int add_devices(Library &l, ibv_device **list) noexcept
{
	int added = 0;
	try {
		l.lists.push_back(list);
		for (ibv_device **p = list; *p; p++) {
			int index = ibv_get_device_index(*p);
			uint64_t guid = ibv_get_device_guid(*p);
			bool known = false;
			for (const Device &d : l.devs)
				known |= index >= 0 ? d.index == index : d.guid == guid;
			if (known)
				continue;
			Device d;
			d.ibdev = *p;
			d.guid = guid;
			d.index = index;
			l.devs.push_back(std::move(d));
			added++;
		}
		if (!added)
			l.lists.pop_back();
		return added;
	} catch (...) {
		if (!l.lists.empty() && l.lists.back() == list)
			l.lists.pop_back();
		return -1;
	}
}

Device *find_device(Library &l, uint64_t guid, uint32_t index) noexcept
{
	for (Device &d : l.devs)
		if (index != kInvalidDevIndex ? d.index == static_cast<int>(index) : d.guid == guid)
			return &d;
	return nullptr;
}

int open_device(Device &d) noexcept
{
	if (d.verbs)
		return 0;
	ibv_context *ctx = ibv_open_device(d.ibdev);
	if (!ctx) {
		log::err("cannot open device %s: %s", ibv_get_device_name(d.ibdev), strerror(errno));
		return -1;
	}
	ibv_device_attr attr;
	int ret = ibv_query_device(ctx, &attr);
	if (ret) {
		log::err("ibv_query_device(%s): %s", ibv_get_device_name(d.ibdev), strerror(ret));
		ibv_close_device(ctx);
		return fail(ret);
	}
	d.port_cnt = attr.phys_port_cnt;
	d.link_layer.assign(d.port_cnt, IBV_LINK_LAYER_UNSPECIFIED);
	for (int p = 1; p <= d.port_cnt; p++) {
		ibv_port_attr pa;
		if (!ibv_query_port(ctx, static_cast<uint8_t>(p), &pa))
			d.link_layer[p - 1] = pa.link_layer;
	}
	d.max_qpsize = attr.max_qp_wr;
	d.max_initiator_depth = static_cast<uint8_t>(attr.max_qp_init_rd_atom);
	d.max_responder_resources = static_cast<uint8_t>(attr.max_qp_rd_atom);
	d.verbs = ctx;
	return 0;
}

// rdma-core's ucma_set_af_ib_support: AF_IB works when a wildcard AF_IB
// address can be bound.
void probe_af_ib() noexcept
{
	rdma_cm_id *id = nullptr;
	if (create_id(nullptr, &id, nullptr, RDMA_PS_IB, IBV_QPT_RC))
		return;
	sockaddr_ib sib = {};
	sib.sib_family = AF_IB;
	sib.sib_sid = htobe64(RDMA_IB_IP_PS_TCP);
	sib.sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK);
	lib().af_ib = true;
	int ret = bind_addr(*priv(id), reinterpret_cast<sockaddr *>(&sib), sizeof(sib));
	lib().af_ib = ret == 0;
	destroy_id(*priv(id));
	log::info("AF_IB addressing %s", lib().af_ib ? "supported" : "not supported by the kernel CM");
}

} // namespace

int init() noexcept
{
	Library &l = lib();
	if (l.ready.load(std::memory_order_acquire))
		return 0;
	{
		std::lock_guard<std::mutex> g(l.mu);
		if (l.ready.load(std::memory_order_relaxed))
			return 0;
		if (read_abi(l.abi))
			return fail(EPERM);
		int n = 0;
		ibv_device **list = ibv_get_device_list(&n);
		if (!list) {
			log::err("no RDMA device: ibv_get_device_list failed (%s)", strerror(errno));
			return fail(ENODEV);
		}
		if (n == 0) {
			ibv_free_device_list(list);
			log::err("no RDMA device: neither a kernel device nor a soft device "
				 "(RDMAV_SOFT_DEVICES) is present");
			return fail(ENODEV);
		}
		if (add_devices(l, list) < 0) {
			ibv_free_device_list(list);
			return fail(ENOMEM);
		}
		l.ready.store(true, std::memory_order_release);
	}
	probe_af_ib();
	return 0;
}

bool af_ib_support() noexcept { return lib().af_ib; }
int abi_version() noexcept { return lib().abi; }

socklen_t addrlen(const sockaddr *addr) noexcept
{
	if (!addr)
		return 0;
	switch (addr->sa_family) {
	case AF_INET:
		return sizeof(sockaddr_in);
	case AF_INET6:
		return sizeof(sockaddr_in6);
	case AF_IB:
		return af_ib_support() ? sizeof(sockaddr_ib) : 0;
	default:
		return 0;
	}
}

int get_device(Id &id, uint64_t guid, uint32_t index) noexcept
{
	Library &l = lib();
	std::lock_guard<std::mutex> g(l.mu);
	Device *dev = find_device(l, guid, index);
	if (!dev) {
		// A device added since the list was taken (as rdma-core 44 does,
		// the list is taken again).
		if (ibv_device **list = ibv_get_device_list(nullptr)) {
			if (add_devices(l, list) > 0)
				dev = find_device(l, guid, index);
			else
				ibv_free_device_list(list);
		}
	}
	if (!dev) {
		log::err("the CM bound the id to a device (GUID %016llx, index %d) that is not in "
			 "this process's device list",
			 static_cast<unsigned long long>(be64toh(guid)), static_cast<int>(index));
		return fail(ENODEV);
	}
	if (open_device(*dev))
		return -1;
	if (!dev->pd)
		dev->pd = ibv_alloc_pd(dev->verbs);
	if (!dev->pd)
		return -1;
	dev->refcnt++;
	id.dev = dev;
	id.pub.verbs = dev->verbs;
	id.pub.pd = dev->pd;
	return 0;
}

void put_device(Id &id) noexcept
{
	Library &l = lib();
	std::lock_guard<std::mutex> g(l.mu);
	Device *d = id.dev;
	id.dev = nullptr;
	if (!d || --d->refcnt)
		return;
	ibv_dealloc_pd(d->pd);
	d->pd = nullptr;
	if (d->xrcd)
		ibv_close_xrcd(d->xrcd);
	d->xrcd = nullptr;
}

int device_gid_index(uint64_t guid, uint8_t port, const ibv_gid &gid) noexcept
{
	Library &l = lib();
	std::lock_guard<std::mutex> g(l.mu);
	Device *dev = find_device(l, guid, kInvalidDevIndex);
	if (!dev || open_device(*dev))
		return -1;
	ibv_port_attr pa;
	if (ibv_query_port(dev->verbs, port, &pa))
		return -1;
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		ibv_gid cur;
		if (!ibv_query_gid(dev->verbs, port, i, &cur) && !memcmp(cur.raw, gid.raw, 16))
			return i;
	}
	return -1;
}

ibv_context *device_context(uint64_t guid) noexcept
{
	Library &l = lib();
	std::lock_guard<std::mutex> g(l.mu);
	Device *dev = find_device(l, guid, kInvalidDevIndex);
	if (!dev || open_device(*dev))
		return nullptr;
	return dev->verbs;
}

ibv_xrcd *get_xrcd(Device &dev) noexcept
{
	std::lock_guard<std::mutex> g(lib().mu);
	if (!dev.xrcd) {
		ibv_xrcd_init_attr attr = {};
		attr.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
		attr.fd = -1;
		attr.oflags = O_CREAT;
		dev.xrcd = ibv_open_xrcd(dev.verbs, &attr);
	}
	return dev.xrcd;
}

ibv_context **get_devices(int *num) noexcept
{
	ibv_context **out = nullptr;
	int n = 0;
	if (init() == 0) {
		Library &l = lib();
		std::lock_guard<std::mutex> g(l.mu);
		out = static_cast<ibv_context **>(calloc(l.devs.size() + 1, sizeof(*out)));
		if (out) {
			for (Device &d : l.devs) {
				if (open_device(d))
					continue; // a device that cannot be opened is left out
				out[n++] = d.verbs;
			}
		} else {
			errno = ENOMEM;
		}
	}
	if (num)
		*num = n;
	return out;
}

} // namespace ov::cm
