// libibverbs.d configuration (rdma-core's *.driver files, plus one openverbs
// directive). Each file in a config directory whose name ends in ".driver"
// holds lines of the form
//     driver NAME          provider to consider (lib<NAME>-rdmav34.so)
//     soft_devices N       openverbs: synthesise N software devices (honoured
//                          only in the project's own config folders)
// '#' starts a comment line; blank lines are ignored. Anything else is
// reported (one warning per bad line naming the file) and skipped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ov::core {

struct Config {
	std::vector<std::string> drivers; // in discovery order, without duplicates
	long soft_devices = -1;           // last soft_devices line, -1 if none
	std::vector<std::string> problems;// human-readable reasons for skipped lines
};

// Parses the text of one config file (`origin` names it in diagnostics).
void parse_config_text(std::string_view text, const std::string &origin, Config &cfg);

// Reads every *.driver file of each directory (in order; files of one
// directory sorted by name; a file name already seen in an earlier
// directory is skipped so an override directory can mask a system file).
void read_config_dirs(const std::vector<std::string> &dirs, Config &cfg);

} // namespace ov::core
