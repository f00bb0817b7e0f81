// Provider plugins: registration, lazy loading and device matching.
//
// A provider is lib<name>-rdmav34.so; its constructor calls
// verbs_register_driver_34(ops). The core dlopens only what a present device
// needs: first the provider named after the device's driver id or its ibdev
// name prefix, and only when a device is still unmatched, every configured
// provider (rdma-core's behaviour). Matching follows facts 1.4.
#pragma once

#include <infiniband/driver.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ov::core {

// ---- registry (filled by verbs_register_driver_34) ----
void register_provider(const verbs_device_ops *ops) noexcept;
std::vector<const verbs_device_ops *> registered_providers();
// Test seam: forget every registration (the dlopen handles stay loaded).
void clear_providers_for_tests();

// ---- matching ----
// The match table entry for a device (driver id, then name, then modalias
// including PCI ids); nullptr when none. Reads the modalias lazily.
const verbs_match_ent *match_table_entry(const verbs_device_ops *ops, verbs_sysfs_dev *dev);
// True if the table lists `driver_id` (never for RDMA_DRIVER_UNKNOWN).
bool table_has_driver_id(const verbs_device_ops *ops, uint32_t driver_id);
// Full decision for one provider: table, match_device callback, ABI range.
// Sets dev->match. `why` gets the reason on refusal.
bool provider_accepts(const verbs_device_ops *ops, verbs_sysfs_dev *dev, std::string *why);

// Provider names guessed from a device, most specific first ("rxe" from
// RDMA_DRIVER_RXE, "mlx5" from "mlx5_0", "soft" from the soft driver id).
std::vector<std::string> candidate_providers(const verbs_sysfs_dev *dev);
const char *provider_for_driver_id(uint32_t driver_id);

// ---- loading ----
struct LoadOutcome {
	bool loaded = false;      // dlopen succeeded and a provider registered
	std::string reason;       // why not (missing file, dlopen error, ...)
	std::string path;         // file tried
};

class ProviderLoader {
public:
	// `configured`: names from config files and RDMAV_DRIVERS, in order.
	void set_configured(std::vector<std::string> names) { configured_ = std::move(names); }
	// True when `name` may be loaded for a device that needs it: named in
	// RDMAV_DRIVERS or an own config file, or its file exists in one of the
	// provider directories (no config file has to be read for that).
	bool known(const std::string &name) const;
	// dlopen lib<name>-rdmav34.so once; later calls return the first outcome.
	LoadOutcome load(const std::string &name);
	// Loads every configured provider and everything in the override and
	// build-tree provider directories. Returns how many loaded now.
	unsigned load_all();
	bool loaded_all() const { return loaded_all_; }
	const std::vector<std::pair<std::string, LoadOutcome>> &outcomes() const { return tried_; }

private:
	std::string locate(const std::string &name, std::string *searched) const;
	std::vector<std::string> configured_;
	std::vector<std::pair<std::string, LoadOutcome>> tried_;
	bool loaded_all_ = false;
};

} // namespace ov::core
