#include "core/settings.h"

#include "common/env.h"
#include "common/log.h"
#include "core/config.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <infiniband/openverbs.h>
#include <memory>
#include <atomic>
#include <mutex>

namespace ov::core {
namespace {

#ifndef OPENVERBS_CONFIG_DIR
#define OPENVERBS_CONFIG_DIR "/etc/libibverbs.d"
#endif
#ifndef OPENVERBS_PROVIDER_DIR
#define OPENVERBS_PROVIDER_DIR "/usr/lib/x86_64-linux-gnu/libibverbs"
#endif
#ifndef OPENVERBS_DEBIAN_PROVIDER_DIR
#define OPENVERBS_DEBIAN_PROVIDER_DIR "/usr/lib/x86_64-linux-gnu/libibverbs"
#endif

void add_unique(std::vector<std::string> &list, std::string dir)
{
	while (dir.size() > 1 && dir.back() == '/')
		dir.pop_back();
	if (dir.empty())
		return;
	for (const auto &d : list)
		if (d == dir)
			return;
	list.push_back(std::move(dir));
}

// Splits a RDMAV_DRIVERS-style list (':' separated, empty entries ignored).
void split_drivers(const char *text, std::vector<std::string> &out)
{
	if (!text)
		return;
	std::string cur;
	for (const char *p = text;; ++p) {
		if (*p == ':' || *p == '\0') {
			if (!cur.empty())
				out.push_back(cur);
			cur.clear();
			if (!*p)
				break;
		} else {
			cur.push_back(*p);
		}
	}
}

bool env_is_set(const char *name) { return getenv(name) != nullptr; }

// secure_env() semantics with the privilege check done once per computation
// (it costs four system calls each time).
struct Env {
	bool privileged = process_is_privileged();
	const char *get(const char *name) const { return privileged ? nullptr : getenv(name); }
};

Settings compute()
{
	Settings s;
	Env env;
	const char *sysfs = env.get("SYSFS_PATH");
	s.sysfs_root = (sysfs && *sysfs) ? sysfs : "/sys";
	while (s.sysfs_root.size() > 1 && s.sysfs_root.back() == '/')
		s.sysfs_root.pop_back();
	s.cdev_dir = "/dev/infiniband";

	std::string libdir = library_dir();
	if (const char *d = env.get("OPENVERBS_CONFIG_DIR"); d && *d)
		add_unique(s.own_config_dirs, d);
	if (!libdir.empty())
		add_unique(s.own_config_dirs, libdir + "/../etc/libibverbs.d");
	s.config_dirs = s.own_config_dirs;
	add_unique(s.config_dirs, OPENVERBS_CONFIG_DIR);
	add_unique(s.config_dirs, "/etc/libibverbs.d");

	if (const char *d = env.get("OPENVERBS_PROVIDER_DIR"); d && *d)
		add_unique(s.own_provider_dirs, d);
	if (!libdir.empty())
		add_unique(s.own_provider_dirs, libdir + "/libibverbs");
	s.provider_dirs = s.own_provider_dirs;
	add_unique(s.provider_dirs, OPENVERBS_PROVIDER_DIR);
	add_unique(s.provider_dirs, OPENVERBS_DEBIAN_PROVIDER_DIR);

	split_drivers(env.get("RDMAV_DRIVERS"), s.env_drivers);
	split_drivers(env.get("IBV_DRIVERS"), s.env_drivers);

	unsigned long n = 0;
	if (const char *v = env.get(OPENVERBS_SOFT_DEVICES_ENV)) {
		if (parse_uint(v, OPENVERBS_MAX_SOFT_DEVICES, &n))
			s.soft_devices = static_cast<long>(n);
	}
	if (const char *v = env.get(OPENVERBS_SOFT_ROCE_ENV)) {
		s.soft_roce_set = true;
		if (!parse_roce_interfaces(v, s.soft_roce))
			log(LOG_WARN, "libibverbs: %s=%s: expected interface names separated by commas "
					 "(at most %d): ignored\n",
			    OPENVERBS_SOFT_ROCE_ENV, v, OPENVERBS_MAX_SOFT_ROCE);
	}
	s.show_warnings = env_is_set("IBV_SHOW_WARNINGS");
	s.fork_safe = env_is_set("RDMAV_FORK_SAFE") || env_is_set("IBV_FORK_SAFE");
	s.allow_disassoc_destroy =
		env_is_set("RDMAV_ALLOW_DISASSOC_DESTROY") || env_is_set("MLX4_DEVICE_FATAL_CLEANUP");
	return s;
}

std::unique_ptr<Settings> g_settings;
std::once_flag g_once;
// Set once the settings exist: later calls skip std::call_once, whose
// every call goes through thread-local storage.
std::atomic<Settings *> g_ready{nullptr};

} // namespace

const Settings &settings()
{
	if (Settings *s = g_ready.load(std::memory_order_acquire))
		return *s;
	std::call_once(g_once, [] {
		g_settings = std::make_unique<Settings>(compute());
		g_ready.store(g_settings.get(), std::memory_order_release);
	});
	return *g_settings;
}

void reload_settings_for_tests(void (*edit)(Settings &))
{
	settings();
	Settings s = compute();
	if (edit)
		edit(s);
	*g_settings = std::move(s);
}

std::string library_dir()
{
	Dl_info info{};
	if (!dladdr(reinterpret_cast<void *>(&library_dir), &info) || !info.dli_fname)
		return {};
	std::string path = info.dli_fname;
	// Only a shared object has a meaningful directory; the static test
	// archive reports the test executable, whose directory is harmless.
	auto slash = path.rfind('/');
	if (slash == std::string::npos)
		return {};
	path.resize(slash);
	return path;
}

} // namespace ov::core
