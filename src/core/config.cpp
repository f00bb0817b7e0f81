#include "core/config.h"

#include "common/env.h"
#include "common/log.h"

#include <infiniband/openverbs.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <dirent.h>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace ov::core {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::string_view next_token(std::string_view &line)
{
	size_t b = 0;
	while (b < line.size() && is_space(line[b]))
		++b;
	size_t e = b;
	while (e < line.size() && !is_space(line[e]))
		++e;
	std::string_view tok = line.substr(b, e - b);
	line.remove_prefix(e);
	return tok;
}

bool valid_driver_name(std::string_view name)
{
	if (name.empty() || name.size() > 200)
		return false;
	for (char c : name)
		if (c == '\0' || static_cast<unsigned char>(c) < 0x20)
			return false;
	return true;
}

void bad_line(Config &cfg, const std::string &origin, unsigned lineno, const std::string &why)
{
	char buf[512];
	snprintf(buf, sizeof(buf), "%s:%u: %s", origin.c_str(), lineno, why.c_str());
	cfg.problems.emplace_back(buf);
	log(LOG_WARN, "libibverbs: Warning: ignoring bad config line %s\n", buf);
}

// Reads a small config file: open, read until a short read, close (no
// fstat: a config file is a handful of bytes and this runs in every process).
bool read_file(int dirfd, const char *name, std::string &out)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0 && errno == ELOOP) // a symlinked config file is fine
		fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return false;
	char buf[4096];
	ssize_t n;
	bool ok = true;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		out.append(buf, static_cast<size_t>(n));
		if (static_cast<size_t>(n) < sizeof(buf))
			break;
		if (out.size() > (1u << 20)) { // not a config file
			ok = false;
			break;
		}
	}
	if (n < 0)
		ok = false; // e.g. EISDIR
	close(fd);
	return ok;
}

} // namespace

void parse_config_text(std::string_view text, const std::string &origin, Config &cfg)
{
	unsigned lineno = 0;
	while (!text.empty()) {
		size_t nl = text.find('\n');
		std::string_view line = text.substr(0, nl);
		text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
		++lineno;
		std::string_view rest = line;
		std::string_view key = next_token(rest);
		if (key.empty() || key[0] == '#')
			continue;
		std::string_view value = next_token(rest);
		std::string_view extra = next_token(rest);
		if (key == "driver") {
			if (!valid_driver_name(value) || !extra.empty()) {
				bad_line(cfg, origin, lineno, "expected 'driver NAME'");
				continue;
			}
			std::string name(value);
			if (std::find(cfg.drivers.begin(), cfg.drivers.end(), name) == cfg.drivers.end())
				cfg.drivers.push_back(std::move(name));
		} else if (key == "soft_devices") {
			unsigned long n = 0;
			std::string v(value);
			if (!extra.empty() || !parse_uint(v.c_str(), OPENVERBS_MAX_SOFT_DEVICES, &n)) {
				bad_line(cfg, origin, lineno, "expected 'soft_devices N' with N <= 256");
				continue;
			}
			cfg.soft_devices = static_cast<long>(n);
		} else if (key == "soft_roce") {
			std::vector<std::string> names;
			if (!extra.empty() || value.empty() || !parse_roce_interfaces(value, names)) {
				bad_line(cfg, origin, lineno,
					 "expected 'soft_roce IFNAME[,IFNAME...]' (network interfaces)");
				continue;
			}
			cfg.soft_roce = std::move(names);
			cfg.soft_roce_set = true;
		} else {
			bad_line(cfg, origin, lineno, "unknown directive '" + std::string(key) + "'");
		}
	}
}

void read_config_dirs(const std::vector<std::string> &dirs, Config &cfg)
{
	std::set<std::string> seen_files;
	for (const auto &dir : dirs) {
		DIR *d = opendir(dir.c_str());
		if (!d)
			continue;
		std::vector<std::string> names;
		while (dirent *de = readdir(d)) {
			std::string name = de->d_name;
			static const std::string suffix = ".driver";
			if (name.size() <= suffix.size() ||
			    name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
				continue;
			names.push_back(std::move(name));
		}
		std::sort(names.begin(), names.end());
		for (const auto &name : names) {
			if (!seen_files.insert(name).second)
				continue;
			std::string text;
			if (!read_file(dirfd(d), name.c_str(), text)) {
				log(LOG_WARN, "libibverbs: Warning: cannot read config file %s/%s\n",
				    dir.c_str(), name.c_str());
				continue;
			}
			parse_config_text(text, dir + "/" + name, cfg);
		}
		closedir(d);
	}
}

} // namespace ov::core
