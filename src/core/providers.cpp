#include "core/providers.h"

#include "common/log.h"
#include "core/settings.h"
#include "core/sysfs.h"

#include <infiniband/openverbs.h>
#include <rdma/ib_user_ioctl_verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <mutex>
#include <sys/stat.h>
#include <unistd.h>

namespace ov::core {
namespace {

std::mutex g_registry_lock;
std::vector<const verbs_device_ops *> &registry()
{
	static auto *r = new std::vector<const verbs_device_ops *>(); // never destroyed: providers may register late
	return *r;
}

// The provider ABI is part of the plugin's name (lib<name>-rdmav<N>.so).
#if _OPENVERBS_ABI >= 64
constexpr const char *kSuffix = "-rdmav64.so";
constexpr const char *kPrivateNode = "IBVERBS_PRIVATE_64";
#else
constexpr const char *kSuffix = "-rdmav34.so";
constexpr const char *kPrivateNode = "IBVERBS_PRIVATE_34";
#endif

} // namespace

void register_provider(const verbs_device_ops *ops) noexcept
{
	if (!ops || !ops->name || !ops->alloc_device) {
		log(LOG_ERR, "libibverbs: a provider registered an incomplete verbs_device_ops, ignored\n");
		return;
	}
	std::lock_guard<std::mutex> g(g_registry_lock);
	auto &r = registry();
	if (std::find(r.begin(), r.end(), ops) != r.end())
		return;
	try {
		r.push_back(ops);
	} catch (...) {
		log(LOG_ERR, "libibverbs: out of memory registering provider %s\n", ops->name);
	}
}

std::vector<const verbs_device_ops *> registered_providers()
{
	std::lock_guard<std::mutex> g(g_registry_lock);
	return registry();
}

void clear_providers_for_tests()
{
	std::lock_guard<std::mutex> g(g_registry_lock);
	registry().clear();
}

// ---- matching ----

bool table_has_driver_id(const verbs_device_ops *ops, uint32_t driver_id)
{
	if (!ops->match_table || driver_id == RDMA_DRIVER_UNKNOWN)
		return false;
	for (const verbs_match_ent *e = ops->match_table; e->kind != VERBS_MATCH_SENTINEL; ++e)
		if (e->kind == VERBS_MATCH_DRIVER_ID && e->u.driver_id == driver_id)
			return true;
	return false;
}

static const verbs_match_ent *by_driver_id(const verbs_device_ops *ops, verbs_sysfs_dev *dev)
{
	if (dev->driver_id == RDMA_DRIVER_UNKNOWN)
		return nullptr;
	for (const verbs_match_ent *e = ops->match_table; e->kind != VERBS_MATCH_SENTINEL; ++e)
		if (e->kind == VERBS_MATCH_DRIVER_ID && e->u.driver_id == dev->driver_id)
			return e;
	return nullptr;
}

static const verbs_match_ent *by_name(const verbs_device_ops *ops, verbs_sysfs_dev *dev)
{
	char subject[16 + sizeof(dev->ibdev_name)];
	snprintf(subject, sizeof(subject), "rdma_device:N%s", dev->ibdev_name);
	for (const verbs_match_ent *e = ops->match_table; e->kind != VERBS_MATCH_SENTINEL; ++e)
		if (e->kind == VERBS_MATCH_MODALIAS && e->u.modalias &&
		    fnmatch(e->u.modalias, subject, 0) == 0)
			return e;
	return nullptr;
}

static void read_modalias(verbs_sysfs_dev *dev)
{
	if (dev->flags & VSYSFS_READ_MODALIAS)
		return;
	dev->flags |= VSYSFS_READ_MODALIAS;
	// Software devices have no sysfs: the core wrote theirs (RoCE devices
	// name their interface there), or left it empty.
	if (dev->flags & VSYSFS_SOFT)
		return;
	dev->modalias[0] = '\0';
	std::string path = std::string(dev->ibdev_path) + "/device/modalias";
	if (read_attr_at(AT_FDCWD, path.c_str(), dev->modalias, sizeof(dev->modalias)) <= 0)
		dev->modalias[0] = '\0';
}

static const verbs_match_ent *by_modalias(const verbs_device_ops *ops, verbs_sysfs_dev *dev)
{
	read_modalias(dev);
	if (!dev->modalias[0])
		return nullptr;
	for (const verbs_match_ent *e = ops->match_table; e->kind != VERBS_MATCH_SENTINEL; ++e) {
		if (e->kind == VERBS_MATCH_PCI) {
			char pattern[64];
			snprintf(pattern, sizeof(pattern), "pci:v%08Xd%08Xsv*", e->vendor, e->device);
			if (fnmatch(pattern, dev->modalias, 0) == 0)
				return e;
		} else if (e->kind == VERBS_MATCH_MODALIAS && e->u.modalias &&
			   fnmatch(e->u.modalias, dev->modalias, 0) == 0) {
			return e;
		}
	}
	return nullptr;
}

const verbs_match_ent *match_table_entry(const verbs_device_ops *ops, verbs_sysfs_dev *dev)
{
	if (!ops->match_table)
		return nullptr;
	if (const verbs_match_ent *e = by_driver_id(ops, dev))
		return e;
	if (const verbs_match_ent *e = by_name(ops, dev))
		return e;
	return by_modalias(ops, dev);
}

bool provider_accepts(const verbs_device_ops *ops, verbs_sysfs_dev *dev, std::string *why)
{
	dev->match = match_table_entry(ops, dev);
	if (ops->match_device) {
		// The callback decides on its own (it may refine or override the table).
		if (!ops->match_device(dev)) {
			if (why)
				*why = std::string("provider ") + ops->name + " declined the device";
			return false;
		}
	} else if (!dev->match) {
		if (why)
			*why = std::string("no match table entry of provider ") + ops->name;
		return false;
	}
	if (dev->abi_ver < ops->match_min_abi_version || dev->abi_ver > ops->match_max_abi_version) {
		// rdma-core prints this one unconditionally: the kernel and the
		// provider really disagree.
		warn_stderr("Warning: Driver %s does not support the kernel ABI of %u (supports %u to %u) for device %s\n",
			    ops->name, dev->abi_ver, ops->match_min_abi_version,
			    ops->match_max_abi_version, dev->ibdev_path);
		if (why) {
			char buf[160];
			snprintf(buf, sizeof(buf), "kernel ABI %u outside %s's range %u..%u", dev->abi_ver,
				 ops->name, ops->match_min_abi_version, ops->match_max_abi_version);
			*why = buf;
		}
		return false;
	}
	return true;
}

const char *provider_for_driver_id(uint32_t id)
{
	switch (id) {
	case RDMA_DRIVER_MLX5: return "mlx5";
	case RDMA_DRIVER_MLX4: return "mlx4";
	case RDMA_DRIVER_CXGB4: return "cxgb4";
	case RDMA_DRIVER_MTHCA: return "mthca";
	case RDMA_DRIVER_BNXT_RE: return "bnxt_re";
	case RDMA_DRIVER_OCRDMA: return "ocrdma";
	case RDMA_DRIVER_IRDMA: return "irdma";
	case RDMA_DRIVER_VMW_PVRDMA: return "vmw_pvrdma";
	case RDMA_DRIVER_QEDR: return "qedr";
	case RDMA_DRIVER_HNS: return "hns";
	case RDMA_DRIVER_RXE: return "rxe";
	case RDMA_DRIVER_HFI1: return "hfi1verbs";
	case RDMA_DRIVER_QIB: return "ipathverbs";
	case RDMA_DRIVER_EFA: return "efa";
	case RDMA_DRIVER_SIW: return "siw";
	case RDMA_DRIVER_ERDMA: return "erdma";
	case RDMA_DRIVER_MANA: return "mana";
	case OPENVERBS_DRIVER_SOFT: return OPENVERBS_SOFT_NAME;
	default: return nullptr;
	}
}

std::vector<std::string> candidate_providers(const verbs_sysfs_dev *dev)
{
	std::vector<std::string> out;
	if (const char *n = provider_for_driver_id(dev->driver_id))
		out.emplace_back(n);
	// "mlx5_0" -> "mlx5", "rxe0" -> "rxe", "bnxt_re1" -> "bnxt_re".
	std::string name = dev->ibdev_name;
	while (!name.empty() && name.back() >= '0' && name.back() <= '9')
		name.pop_back();
	while (!name.empty() && name.back() == '_')
		name.pop_back();
	if (!name.empty() && std::find(out.begin(), out.end(), name) == out.end())
		out.push_back(name);
	return out;
}

// ---- loading ----

std::string ProviderLoader::locate(const std::string &name, std::string *searched) const
{
	if (name.find('/') != std::string::npos) {
		// An absolute or relative path prefix, as rdma-core accepts in
		// RDMAV_DRIVERS: "<path>-rdmav34.so".
		std::string p = name + kSuffix;
		if (searched)
			*searched = p;
		return access(p.c_str(), F_OK) == 0 ? p : std::string();
	}
	std::string file = "lib" + name + kSuffix;
	for (const auto &dir : settings().provider_dirs) {
		std::string p = dir + "/" + file;
		if (searched) {
			if (!searched->empty())
				*searched += ", ";
			*searched += dir;
		}
		if (access(p.c_str(), F_OK) == 0)
			return p;
	}
	return {};
}

bool ProviderLoader::known(const std::string &name) const
{
	if (std::find(configured_.begin(), configured_.end(), name) != configured_.end())
		return true;
	return !locate(name, nullptr).empty();
}

LoadOutcome ProviderLoader::load(const std::string &name)
{
	for (const auto &t : tried_)
		if (t.first == name)
			return t.second;
	LoadOutcome out;
	std::string searched;
	out.path = locate(name, &searched);
	if (out.path.empty()) {
		out.reason = "no file lib" + name + kSuffix + " in " + searched;
	} else {
		size_t before = registered_providers().size();
		void *h = dlopen(out.path.c_str(), RTLD_NOW);
		if (!h) {
			const char *err = dlerror();
			out.reason = err ? err : "dlopen failed";
			if (out.reason.find("IBVERBS_PRIVATE_") != std::string::npos)
				out.reason += std::string(" (provider built for another private ABI; this library provides ") +
					      kPrivateNode + ")";
		} else if (registered_providers().size() == before) {
			out.reason = "loaded but registered no provider (not a libibverbs provider, or already registered)";
			out.loaded = true;
		} else {
			out.loaded = true;
		}
	}
	if (out.reason.empty())
		log(LOG_INFO, "libibverbs: loaded provider %s from %s\n", name.c_str(), out.path.c_str());
	else
		log(LOG_WARN, "libibverbs: provider %s: %s\n", name.c_str(), out.reason.c_str());
	try {
		tried_.emplace_back(name, out);
	} catch (...) {
	}
	return out;
}

unsigned ProviderLoader::load_all()
{
	loaded_all_ = true;
	std::vector<std::string> names = configured_;
	// The override and build-tree directories hold the project's own
	// providers, usable without a config file.
	for (const auto &dir : settings().own_provider_dirs) {
		if (DIR *d = opendir(dir.c_str())) {
			while (dirent *de = readdir(d)) {
				std::string f = de->d_name;
				size_t sl = strlen(kSuffix);
				if (f.size() > 3 + sl && f.compare(0, 3, "lib") == 0 &&
				    f.compare(f.size() - sl, sl, kSuffix) == 0) {
					std::string n = f.substr(3, f.size() - 3 - sl);
					if (std::find(names.begin(), names.end(), n) == names.end())
						names.push_back(n);
				}
			}
			closedir(d);
		}
	}
	unsigned count = 0;
	for (const auto &n : names) {
		bool before = false;
		for (const auto &t : tried_)
			before |= t.first == n;
		if (!before && load(n).loaded)
			++count;
	}
	return count;
}

} // namespace ov::core
