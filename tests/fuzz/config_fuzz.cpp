// libFuzzer target: libibverbs.d config text (ov::core::parse_config_text):
// any bytes are one config file. Checked beyond "no crash": every driver
// name kept is valid (non-empty, no control character) and listed once, and
// soft_devices is -1 or a count within 0..256.
#include "core/config.h"

#include <cstdint>
#include <cstdlib>
#include <set>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ov::core::Config cfg;
	ov::core::parse_config_text(std::string_view(reinterpret_cast<const char *>(data), size),
				    "fuzz.driver", cfg);
	std::set<std::string> seen;
	for (const std::string &d : cfg.drivers) {
		if (d.empty() || !seen.insert(d).second)
			abort();
		for (char c : d)
			if (static_cast<unsigned char>(c) < 0x20)
				abort();
	}
	if (cfg.soft_devices < -1 || cfg.soft_devices > 256)
		abort();
	return 0;
}
