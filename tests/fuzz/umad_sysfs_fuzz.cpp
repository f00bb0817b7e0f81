// libFuzzer target: the sysfs attribute readers and parsers of libibumad.
// The input is written as an attribute file (any bytes, any length) and read
// back through read_string/read_uint/read_guid/read_gid with a buffer size
// taken from the first byte; the parsers also get the raw text.  Built with
// clang -fsanitize=fuzzer,address,undefined (tests/fuzz/CMakeLists.txt).
#include "umad/internal.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <unistd.h>

namespace {
std::string &dir()
{
	static std::string d = [] {
		char tmpl[] = "/tmp/umad-fuzz-XXXXXX";
		const char *made = mkdtemp(tmpl);
		return std::string(made ? made : "/tmp");
	}();
	return d;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	using namespace ov::umad;
	std::string path = dir() + "/attr";
	int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) < 0) {
		close(fd);
		return 0;
	}
	close(fd);

	int max_len = size ? 1 + data[0] % 80 : 1;
	char buf[96];
	memset(buf, 'X', sizeof(buf));
	read_string(dir().c_str(), "attr", buf, max_len);
	unsigned u;
	read_uint(dir().c_str(), "attr", &u);
	__be64 guid;
	read_guid(dir().c_str(), "attr", &guid);
	union umad_gid gid;
	read_gid(dir().c_str(), "attr", &gid);

	std::string text(reinterpret_cast<const char *>(data), size); // NUL-terminated copy
	parse_uint(text.c_str());
	parse_guid(text.c_str(), &guid);
	parse_gid(text.c_str(), &gid);
	uint16_t groups[16];
	parse_hex_groups(text.c_str(), groups, 16);
	return 0;
}
