// Test helpers for the core: temporary folders, environment overrides,
// fake sysfs trees and in-process fake providers, all RAII.
//
//   CoreEnv env;                                // fresh core state, netlink off
//   env.sysfs.add_device("uverbs0", "rxe0").node_type(1);
//   env.add_provider(FakeProvider("rxe").driver_id(RDMA_DRIVER_RXE));
//   auto list = env.device_list();               // ibv_get_device_list
#pragma once

#include "core/device_list.h"
#include "core/providers.h"
#include "core/settings.h"

#include <infiniband/driver.h>
#include <infiniband/openverbs.h>
#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace ovtest {

class TempDir {
public:
	TempDir()
	{
		char tmpl[] = "/tmp/ovcore.XXXXXX";
		const char *p = mkdtemp(tmpl);
		if (!p)
			throw std::runtime_error("mkdtemp");
		path_ = p;
	}
	~TempDir()
	{
		std::error_code ec;
		fs::remove_all(path_, ec);
	}
	TempDir(const TempDir &) = delete;
	TempDir &operator=(const TempDir &) = delete;
	const fs::path &path() const { return path_; }
	std::string str() const { return path_.string(); }
	fs::path operator/(const std::string &rel) const { return path_ / rel; }

	// Writes `text` to rel (creating parent folders).
	void write(const std::string &rel, const std::string &text) const
	{
		fs::path p = path_ / rel;
		fs::create_directories(p.parent_path());
		std::ofstream(p) << text;
	}

private:
	fs::path path_;
};

// Sets (or unsets, with nullopt) a variable for the lifetime of the object.
class ScopedEnv {
public:
	ScopedEnv(const char *name, std::optional<std::string> value) : name_(name)
	{
		if (const char *old = getenv(name))
			old_ = old;
		if (value)
			setenv(name, value->c_str(), 1);
		else
			unsetenv(name);
	}
	~ScopedEnv()
	{
		if (old_)
			setenv(name_.c_str(), old_->c_str(), 1);
		else
			unsetenv(name_.c_str());
	}
	ScopedEnv(const ScopedEnv &) = delete;
	ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
	std::string name_;
	std::optional<std::string> old_;
};

// A fake $SYSFS_PATH plus a fake /dev/infiniband.
class FakeSysfs {
public:
	explicit FakeSysfs(const TempDir &root) : root_(root)
	{
		root_.write("sys/class/infiniband_verbs/abi_version", "6\n");
		fs::create_directories(root_ / "dev/infiniband");
	}
	std::string sysfs() const { return (root_ / "sys").string(); }
	std::string cdev_dir() const { return (root_ / "dev/infiniband").string(); }

	struct Device {
		FakeSysfs *owner;
		std::string uverbs, ibdev;
		Device &node_type(const std::string &text)
		{
			owner->root_.write("sys/class/infiniband/" + ibdev + "/node_type", text);
			return *this;
		}
		Device &node_guid(const std::string &text)
		{
			owner->root_.write("sys/class/infiniband/" + ibdev + "/node_guid", text);
			return *this;
		}
		Device &modalias(const std::string &text)
		{
			owner->root_.write("sys/class/infiniband/" + ibdev + "/device/modalias", text);
			return *this;
		}
		Device &attr(const std::string &name, const std::string &text)
		{
			owner->root_.write("sys/class/infiniband_verbs/" + uverbs + "/" + name, text);
			return *this;
		}
		Device &remove_attr(const std::string &name)
		{
			fs::remove(owner->root_ / ("sys/class/infiniband_verbs/" + uverbs + "/" + name));
			return *this;
		}
		Device &hide_cdev()
		{
			fs::remove(owner->root_ / ("dev/infiniband/" + uverbs));
			return *this;
		}
	};

	// class/infiniband_verbs/<uverbs>/{ibdev,dev,abi_version}, the ibdev
	// folder with node_type "1: CA", and /dev/infiniband/<uverbs>.
	Device add_device(const std::string &uverbs, const std::string &ibdev, unsigned abi = 1)
	{
		unsigned minor = 192 + next_minor_++;
		root_.write("sys/class/infiniband_verbs/" + uverbs + "/ibdev", ibdev + "\n");
		root_.write("sys/class/infiniband_verbs/" + uverbs + "/dev",
			    "231:" + std::to_string(minor) + "\n");
		root_.write("sys/class/infiniband_verbs/" + uverbs + "/abi_version",
			    std::to_string(abi) + "\n");
		root_.write("sys/class/infiniband/" + ibdev + "/node_type", "1: CA\n");
		root_.write("dev/infiniband/" + uverbs, "");
		return Device{this, uverbs, ibdev};
	}
	void remove_device(const std::string &uverbs)
	{
		fs::remove_all(root_ / ("sys/class/infiniband_verbs/" + uverbs));
		fs::remove(root_ / ("dev/infiniband/" + uverbs));
	}

private:
	const TempDir &root_;
	unsigned next_minor_ = 0;
};

// In-process provider: a verbs_device_ops with a match table, counting
// alloc/uninit calls. Kept alive by CoreEnv (registration stores pointers).
struct FakeProvider {
	std::string name;
	std::vector<verbs_match_ent> table;
	std::deque<std::string> patterns; // storage for modalias strings
	verbs_device_ops ops{};
	uint32_t min_abi = 0, max_abi = 100;
	bool (*match_cb)(verbs_sysfs_dev *) = nullptr;
	int allocated = 0, uninit = 0;

	explicit FakeProvider(std::string n) : name(std::move(n)) {}
	FakeProvider &driver_id(uint32_t id)
	{
		verbs_match_ent e{};
		e.u.driver_id = id;
		e.kind = VERBS_MATCH_DRIVER_ID;
		table.push_back(e);
		return *this;
	}
	FakeProvider &name_match(const std::string &prefix)
	{
		patterns.push_back("rdma_device:*N" + prefix + "*");
		return modalias_entry(patterns.back());
	}
	FakeProvider &modalias(const std::string &glob)
	{
		patterns.push_back(glob);
		return modalias_entry(patterns.back());
	}
	FakeProvider &pci(uint16_t vendor, uint16_t device)
	{
		verbs_match_ent e{};
		e.vendor = vendor;
		e.device = device;
		e.kind = VERBS_MATCH_PCI;
		table.push_back(e);
		return *this;
	}
	FakeProvider &abi(uint32_t lo, uint32_t hi)
	{
		min_abi = lo;
		max_abi = hi;
		return *this;
	}

	// Finalises `ops` (call after the builder calls, before registering).
	const verbs_device_ops *finish();

private:
	FakeProvider &modalias_entry(const std::string &s)
	{
		verbs_match_ent e{};
		e.u.modalias = s.c_str();
		e.kind = VERBS_MATCH_MODALIAS;
		table.push_back(e);
		return *this;
	}
};

// A verbs_device made by a FakeProvider (knows its provider for counting).
struct FakeDevice {
	verbs_device vdev;
	FakeProvider *provider;
};

// Fake provider context: the verbs_context is embedded after some private
// bytes, as real providers do.
struct FakeContext {
	uint64_t before[3];
	verbs_context vctx;
	uint64_t after;
};

FakeProvider *provider_of(const verbs_device_ops *ops);

// Fresh core state for one test: settings re-read with netlink disabled,
// /dev/infiniband, config and provider folders redirected into a TempDir,
// no registered provider, empty device cache.
class CoreEnv {
public:
	CoreEnv();
	~CoreEnv();

	TempDir tmp;
	FakeSysfs sysfs{tmp};

	FakeProvider &add_provider(FakeProvider p);
	// Applies environment changes made after construction.
	void reload();

	// ibv_get_device_list as a vector (list freed immediately: the devices
	// stay referenced by the cache while present).
	std::vector<std::string> device_names();

	std::deque<FakeProvider> providers;
};

} // namespace ovtest
