// Process-wide settings of the core, read once from the environment and the
// file system: where sysfs and the character devices are, which config and
// provider directories to search, which extra providers to load, and the
// behaviour switches of rdma-core 44 (facts 1.2).
//
// Every path-changing variable is read through ov::secure_env(), so a setuid
// or setgid program always gets the built-in defaults.
#pragma once

#include <string>
#include <vector>

namespace ov::core {

struct Settings {
	std::string sysfs_root;                // $SYSFS_PATH without trailing '/', else "/sys"
	std::string cdev_dir;                  // "/dev/infiniband" (tests may redirect it)
	std::vector<std::string> config_dirs;  // searched in order, first match of a name wins
	std::vector<std::string> own_config_dirs; // override + build tree: read at every first scan
	std::vector<std::string> provider_dirs;// searched in order for lib<name>-rdmav34.so
	std::vector<std::string> own_provider_dirs; // override + build tree: loaded without config
	std::vector<std::string> env_drivers;  // RDMAV_DRIVERS / IBV_DRIVERS entries
	long soft_devices = -1;                // RDMAV_SOFT_DEVICES, -1 when unset
	bool soft_roce_set = false;            // RDMAV_SOFT_ROCE given (even empty)
	std::vector<std::string> soft_roce;    // its interface names, in order
	bool show_warnings = false;            // IBV_SHOW_WARNINGS
	bool fork_safe = false;                // RDMAV_FORK_SAFE / IBV_FORK_SAFE
	bool allow_disassoc_destroy = false;   // RDMAV_ALLOW_DISASSOC_DESTROY / MLX4_DEVICE_FATAL_CLEANUP
	bool use_netlink = true;               // false only in white-box tests
};

// The settings of this process (computed on first use, thread safe).
const Settings &settings();

// Test seam: recompute the settings from the current environment, then let
// `edit` adjust them (e.g. redirect cdev_dir, disable netlink). Must not be
// called while another thread uses the library.
void reload_settings_for_tests(void (*edit)(Settings &) = nullptr);

// Directory holding the loaded libibverbs.so.1 (found with dladdr), or "".
std::string library_dir();

} // namespace ov::core
