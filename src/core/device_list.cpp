#include "core/device_list.h"

#include "common/log.h"
#include "core/config.h"
#include "core/context.h"
#include "core/discovery.h"
#include "core/providers.h"
#include "core/settings.h"

#include <infiniband/openverbs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <sys/stat.h>
#include <string_view>
#include <unordered_map>

namespace ov::core {
namespace {

// uverbs ABI range the library speaks (rdma-core's IB_USER_VERBS_MIN/MAX).
constexpr unsigned kMinUverbsAbi = 3;
constexpr unsigned kMaxUverbsAbi = 6;

struct DeviceList {
	std::mutex lock;
	bool configured = false;
	Config config;
	ProviderLoader loader;
	std::vector<verbs_device *> devices; // each holds one reference
	std::vector<std::string> notes;
	bool uverbs_abi_ok = false;
	std::string why_empty;      // the last scan's reason when it found no device
	std::string why_empty_said; // the reason last logged (said once per change)
};

DeviceList &list()
{
	static auto *l = new DeviceList(); // outlives every static destructor
	return *l;
}

void note(DeviceList &l, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void note(DeviceList &l, int level, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	log(level, "libibverbs: %s\n", buf);
	try {
		l.notes.emplace_back(buf);
	} catch (...) {
	}
}

ibv_transport_type transport_for(ibv_node_type t)
{
	switch (t) {
	case IBV_NODE_CA:
	case IBV_NODE_SWITCH:
	case IBV_NODE_ROUTER: return IBV_TRANSPORT_IB;
	case IBV_NODE_RNIC: return IBV_TRANSPORT_IWARP;
	case IBV_NODE_USNIC: return IBV_TRANSPORT_USNIC;
	case IBV_NODE_USNIC_UDP: return IBV_TRANSPORT_USNIC_UDP;
	case IBV_NODE_UNSPECIFIED: return IBV_TRANSPORT_UNSPECIFIED;
	default: return IBV_TRANSPORT_UNKNOWN;
	}
}

// Whether the cached device is the same kernel object as the fresh entry.
bool same_device(const verbs_sysfs_dev *a, const verbs_sysfs_dev *b)
{
	if ((a->flags & VSYSFS_SOFT) || (b->flags & VSYSFS_SOFT))
		return (a->flags & VSYSFS_SOFT) && (b->flags & VSYSFS_SOFT) &&
		       strcmp(a->ibdev_name, b->ibdev_name) == 0;
	if (strcmp(a->sysfs_name, b->sysfs_name) != 0 || a->sysfs_cdev != b->sysfs_cdev)
		return false;
	if (a->ibdev_idx != -1 || b->ibdev_idx != -1) // netlink: the index is unique
		return a->ibdev_idx == b->ibdev_idx && strcmp(a->ibdev_name, b->ibdev_name) == 0;
	return a->time_created.tv_sec == b->time_created.tv_sec &&
	       a->time_created.tv_nsec == b->time_created.tv_nsec;
}

// alloc_device + the core's fields (facts 1.4). Takes `dev` on success.
verbs_device *try_provider(DeviceList &l, const verbs_device_ops *ops, SysfsDevPtr &dev)
{
	std::string why;
	if (!provider_accepts(ops, dev.get(), &why)) {
		log(LOG_DEBUG, "libibverbs: %s: %s\n", dev->ibdev_name, why.c_str());
		return nullptr;
	}
	verbs_device *vdev = ops->alloc_device(dev.get());
	if (!vdev) {
		note(l, LOG_ERR, "provider %s could not allocate a device for %s", ops->name,
		     dev->ibdev_name);
		warn_stderr("Fatal: couldn't allocate device for %s\n", dev->ibdev_name);
		return nullptr;
	}
	ibv_device *ib = &vdev->device;
	vdev->ops = ops;
	vdev->refcount = 1;
	ib->node_type = dev->node_type;
	ib->transport_type = transport_for(dev->node_type);
	snprintf(ib->dev_name, sizeof(ib->dev_name), "%s", dev->sysfs_name);
	snprintf(ib->dev_path, sizeof(ib->dev_path), "%s/class/infiniband_verbs/%s",
		 settings().sysfs_root.c_str(), dev->sysfs_name);
	snprintf(ib->name, sizeof(ib->name), "%s", dev->ibdev_name);
	snprintf(ib->ibdev_path, sizeof(ib->ibdev_path), "%s", dev->ibdev_path);
	vdev->sysfs = dev.release();
	log(LOG_INFO, "libibverbs: %s bound to provider %s\n", ib->name, ops->name);
	return vdev;
}

// Matching order of facts 1.4: providers listing the device's driver id
// first, then every provider in registration order.
verbs_device *try_all(DeviceList &l, SysfsDevPtr &dev)
{
	auto providers = registered_providers();
	if (dev->driver_id != 0)
		for (const verbs_device_ops *ops : providers)
			if (table_has_driver_id(ops, dev->driver_id))
				if (verbs_device *v = try_provider(l, ops, dev))
					return v;
	for (const verbs_device_ops *ops : providers)
		if (verbs_device *v = try_provider(l, ops, dev))
			return v;
	return nullptr;
}

// The project's own config folders (override, build tree) are read on the
// first scan: they may ask for soft devices. The system folders
// (/etc/libibverbs.d, shared with Debian's library, which would reject a
// soft_devices line) are read only when every configured provider must be
// loaded, exactly when rdma-core reads them.
void configure(DeviceList &l)
{
	if (l.configured)
		return;
	l.configured = true;
	const Settings &s = settings();
	read_config_dirs(s.own_config_dirs, l.config);
	std::vector<std::string> names = l.config.drivers;
	for (const auto &n : s.env_drivers)
		names.push_back(n);
	l.loader.set_configured(std::move(names));
}

void load_all_configured(DeviceList &l)
{
	const Settings &s = settings();
	Config all;
	read_config_dirs(s.config_dirs, all);
	std::vector<std::string> names = all.drivers;
	for (const auto &n : s.env_drivers)
		names.push_back(n);
	l.loader.set_configured(std::move(names));
	l.loader.load_all();
}

unsigned soft_device_count(const DeviceList &l)
{
	const Settings &s = settings();
	if (s.soft_devices >= 0)
		return static_cast<unsigned>(s.soft_devices);
	if (l.config.soft_devices >= 0)
		return static_cast<unsigned>(l.config.soft_devices);
	return 0;
}

int scan(DeviceList &l, SysfsDevList &found)
{
	const Settings &s = settings();
	int rc = s.use_netlink ? discover_netlink(found) : -EOPNOTSUPP;
	if (rc == -ENOMEM)
		return ENOMEM;
	l.why_empty.clear();
	if (rc == 0 && found.empty())
		l.why_empty = "the kernel's RDMA netlink lists no RDMA device";
	if (rc < 0) {
		std::string nl = s.use_netlink ? std::string("no RDMA netlink (") + strerror(-rc) + ")"
					       : "netlink discovery off";
		log(LOG_DEBUG, "libibverbs: %s, scanning sysfs\n", nl.c_str());
		rc = discover_sysfs(s.sysfs_root, found);
		if (rc == -ENOMEM)
			return ENOMEM;
		std::string cls = s.sysfs_root + "/class/infiniband";
		if (rc < 0) {
			struct stat st;
			bool ib = stat(cls.c_str(), &st) == 0;
			l.why_empty = nl + ", no " + cls + "_verbs" +
				      (ib ? std::string(" (") + cls + " exists: is ib_uverbs loaded?)"
					  : std::string(", no ") + cls +
						    ": this kernel has no RDMA support loaded");
		} else if (found.empty()) {
			l.why_empty = nl + ", " + cls + "_verbs lists no device";
		}
		if (!found.empty() && !l.uverbs_abi_ok) {
			unsigned abi = 0;
			if (read_uverbs_abi(s.sysfs_root, &abi) < 0 || abi < kMinUverbsAbi ||
			    abi > kMaxUverbsAbi) {
				note(l, LOG_ERR,
				     "uverbs ABI version unreadable or outside %u..%u: ignoring %zu device(s)",
				     kMinUverbsAbi, kMaxUverbsAbi, found.size());
				l.why_empty = "uverbs ABI version unreadable or unsupported";
				found.clear();
			} else {
				l.uverbs_abi_ok = true;
			}
		}
	}
	size_t before = found.size();
	filter_accessible(s.cdev_dir, found);
	if (before && found.empty())
		l.why_empty = "no character device under " + s.cdev_dir + " for the " +
			      std::to_string(before) + " device(s) found";
	add_soft_devices(soft_device_count(l), s.sysfs_root, found);
	add_soft_roce_devices(s.soft_roce_set ? s.soft_roce : l.config.soft_roce, s.sysfs_root, found);
	return 0;
}

// An empty list gets one info line (each time the reason changes) saying why,
// and how to get the software device when none is configured.
void explain_empty(DeviceList &l)
{
	if (!l.devices.empty()) {
		l.why_empty_said.clear();
		return;
	}
	std::string why = l.why_empty.empty() ? "no provider claimed the devices found" : l.why_empty;
	if (why == l.why_empty_said)
		return;
	l.why_empty_said = why;
	if (soft_device_count(l) == 0)
		log(LOG_INFO,
		    "libibverbs: no RDMA device: %s. RDMAV_SOFT_DEVICES=1 in the environment (or a "
		    "line 'soft_devices 1' in libibverbs.d) presents the software device soft0, "
		    "see openverbs-soft(7)\n",
		    why.c_str());
	else
		log(LOG_INFO, "libibverbs: no RDMA device: %s\n", why.c_str());
}

int refresh(DeviceList &l)
{
	configure(l);
	l.notes.clear();
	SysfsDevList found;
	if (int rc = scan(l, found))
		return rc;

	// Keep devices that are still there; drop the others. The scan's entries
	// are indexed by name (a uverbs node's sysfs name, or a software
	// device's name: each unique within one scan), so a warm call costs one
	// lookup per known device, not a pass over the whole scan.
	std::unordered_map<std::string_view, size_t> by_node, by_soft;
	by_node.reserve(found.size());
	for (size_t i = 0; i < found.size(); i++) {
		if (!found[i])
			continue;
		if (found[i]->flags & VSYSFS_SOFT)
			by_soft.emplace(found[i]->ibdev_name, i);
		else
			by_node.emplace(found[i]->sysfs_name, i);
	}
	std::vector<verbs_device *> kept;
	kept.reserve(l.devices.size() + found.size());
	for (verbs_device *vdev : l.devices) {
		bool present = false;
		if (const verbs_sysfs_dev *s = vdev->sysfs) {
			auto &index = (s->flags & VSYSFS_SOFT) ? by_soft : by_node;
			auto it = index.find((s->flags & VSYSFS_SOFT) ? s->ibdev_name : s->sysfs_name);
			if (it != index.end()) {
				SysfsDevPtr &f = found[it->second];
				if (f && same_device(s, f.get())) {
					// The key views f's name: out of the index first.
					index.erase(it);
					f.reset();
					present = true;
				}
			}
		}
		if (present)
			kept.push_back(vdev);
		else
			device_put(&vdev->device);
	}
	l.devices = std::move(kept);

	// Match the new ones, loading providers only as needed.
	std::vector<SysfsDevPtr *> unmatched;
	for (auto &f : found) {
		if (!f)
			continue;
		verbs_device *v = try_all(l, f);
		if (!v) {
			for (const auto &name : candidate_providers(f.get())) {
				if (!l.loader.known(name))
					continue;
				LoadOutcome out = l.loader.load(name);
				if (!out.loaded) {
					note(l, LOG_WARN, "%s needs provider %s: %s", f->ibdev_name, name.c_str(),
					     out.reason.c_str());
					warn_stderr("Warning: couldn't load driver '%s': %s\n", name.c_str(),
						    out.reason.c_str());
					continue;
				}
				if ((v = try_all(l, f)))
					break;
			}
		}
		if (v)
			l.devices.push_back(v);
		else
			unmatched.push_back(&f);
	}
	if (!unmatched.empty() && !l.loader.loaded_all()) {
		load_all_configured(l);
		std::vector<SysfsDevPtr *> still;
		for (SysfsDevPtr *f : unmatched) {
			if (verbs_device *v = try_all(l, *f))
				l.devices.push_back(v);
			else
				still.push_back(f);
		}
		unmatched = std::move(still);
	}
	for (SysfsDevPtr *f : unmatched) {
		note(l, LOG_WARN, "no provider for %s (driver id %u)", (*f)->ibdev_name,
		     (*f)->driver_id);
		if (settings().show_warnings)
			warn_stderr("Warning: no userspace device-specific driver found for %s\n",
				    (*f)->ibdev_path);
	}
	explain_empty(l);
	return 0;
}

} // namespace

void device_hold(ibv_device *dev) noexcept
{
	verbs_device *vdev = verbs_get_device(dev);
	vdev->refcount.fetch_add(1);
}

void device_put(ibv_device *dev) noexcept
{
	verbs_device *vdev = verbs_get_device(dev);
	if (vdev->refcount.fetch_sub(1) != 1)
		return;
	verbs_sysfs_dev *sysfs = vdev->sysfs;
	if (vdev->ops && vdev->ops->uninit_device)
		vdev->ops->uninit_device(vdev);
	free(sysfs);
}

int get_device_list(std::vector<ibv_device *> &out)
{
	library_init(); // also reached from ibv_import_device
	DeviceList &l = list();
	std::lock_guard<std::mutex> g(l.lock);
	try {
		if (int rc = refresh(l))
			return rc;
		out.clear();
		out.reserve(l.devices.size());
		for (verbs_device *v : l.devices) {
			device_hold(&v->device);
			out.push_back(&v->device);
		}
	} catch (...) {
		for (ibv_device *d : out)
			device_put(d);
		out.clear();
		return ENOMEM;
	}
	return 0;
}

std::vector<std::string> last_scan_notes()
{
	DeviceList &l = list();
	std::lock_guard<std::mutex> g(l.lock);
	return l.notes;
}

void reset_device_list_for_tests()
{
	DeviceList &l = list();
	std::lock_guard<std::mutex> g(l.lock);
	for (verbs_device *v : l.devices)
		device_put(&v->device);
	l.devices.clear();
	l.configured = false;
	l.config = Config{};
	l.loader = ProviderLoader{};
	l.notes.clear();
	l.uverbs_abi_ok = false;
	l.why_empty.clear();
	l.why_empty_said.clear();
}

} // namespace ov::core
