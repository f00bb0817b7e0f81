// libibverbs.d configuration (rdma-core's *.driver files, plus one openverbs
// directive). Each file in a config directory whose name ends in ".driver"
// holds lines of the form
//     driver NAME          provider to consider (lib<NAME>-rdmav34.so)
//     soft_devices N       openverbs: synthesise N software devices (honoured
//                          only in the project's own config folders)
//     soft_roce IFNAME[,IFNAME...]  openverbs: RoCE v2 software devices on
//                          those network interfaces (same folders)
// '#' starts a comment line; blank lines are ignored. Anything else is
// reported (one warning per bad line naming the file) and skipped.
#pragma once

#include <infiniband/openverbs.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace ov::core {

// Splits "eth0,veth1" into interface names: each 1..15 characters without
// '/', ':', '%', ',' or white space, not "." or "..", at most
// OPENVERBS_MAX_SOFT_ROCE of them, no duplicates kept. False (out cleared)
// when the text is malformed; an empty text is an empty list.
inline bool parse_roce_interfaces(std::string_view text, std::vector<std::string> &out)
{
	out.clear();
	while (!text.empty()) {
		size_t comma = text.find(',');
		std::string_view name = text.substr(0, comma);
		text.remove_prefix(comma == std::string_view::npos ? text.size() : comma + 1);
		bool ok = !name.empty() && name.size() < 16 && name != "." && name != "..";
		for (char c : name)
			ok = ok && c > ' ' && c < 0x7f && c != '/' && c != ':' && c != '%';
		if (!ok || (comma != std::string_view::npos && text.empty())) {
			out.clear();
			return false;
		}
		if (std::find(out.begin(), out.end(), name) == out.end())
			out.emplace_back(name);
		if (out.size() > OPENVERBS_MAX_SOFT_ROCE) {
			out.clear();
			return false;
		}
	}
	return true;
}

struct Config {
	std::vector<std::string> drivers; // in discovery order, without duplicates
	long soft_devices = -1;           // last soft_devices line, -1 if none
	bool soft_roce_set = false;       // a soft_roce line was read
	std::vector<std::string> soft_roce; // its interfaces (last line wins)
	std::vector<std::string> problems;// human-readable reasons for skipped lines
};

// Parses the text of one config file (`origin` names it in diagnostics).
void parse_config_text(std::string_view text, const std::string &origin, Config &cfg);

// Reads every *.driver file of each directory (in order; files of one
// directory sorted by name; a file name already seen in an earlier
// directory is skipped so an override directory can mask a system file).
void read_config_dirs(const std::vector<std::string> &dirs, Config &cfg);

} // namespace ov::core
