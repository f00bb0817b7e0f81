// libFuzzer target: the sysfs attribute files of discovery. The input holds
// four attribute contents (each a little-endian u16 length, then the
// bytes): ibdev, dev, abi_version of class/infiniband_verbs/uverbsN and
// node_type of class/infiniband/fz0 (the seeds name fz0 in ibdev). They are
// written into a private temporary sysfs tree, read by
// ov::core::discover_sysfs and read_uverbs_abi, and each content is also
// read back through read_attr_at with every small buffer size and parsed by
// leading_uint. Checked beyond "no crash": read_attr_at's result is a
// NUL-terminated text of the reported length, and accepted entries carry
// NUL-terminated names.
#include "core/discovery.h"
#include "core/sysfs.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

char g_root[] = "/tmp/ov-sysfs-fuzz-XXXXXX"; // outlives every static object

const std::string &root()
{
	static std::string r = [] {
		if (!mkdtemp(g_root))
			abort();
		fs::create_directories(std::string(g_root) + "/class/infiniband/fz0");
		atexit([] {
			std::error_code ec;
			fs::remove_all(g_root, ec);
		});
		return std::string(g_root);
	}();
	return r;
}

void put(const std::string &path, const uint8_t *p, size_t n)
{
	int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0)
		abort();
	if (n && write(fd, p, n) != static_cast<ssize_t>(n))
		abort();
	close(fd);
}

void check_attr(const std::string &path, size_t content_len)
{
	char buf[80];
	for (size_t size = 1; size <= sizeof(buf); size += 13) {
		memset(buf, 'X', sizeof(buf));
		ssize_t n = ov::core::read_attr_at(AT_FDCWD, path.c_str(), buf, size);
		if (n < 0)
			continue;
		if (static_cast<size_t>(n) >= size || buf[n] != '\0' ||
		    static_cast<size_t>(n) > content_len)
			abort();
		unsigned long v;
		ov::core::leading_uint(buf, &v);
	}
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const kAttrs[] = {"ibdev", "dev", "abi_version", "node_type"};
	static unsigned round;
	// Alternate the entry's name so discovery's per-entry cache never
	// serves the previous input.
	std::string cls = root() + "/class/infiniband_verbs";
	std::string entry = cls + "/uverbs" + std::to_string(round++ & 1);
	fs::remove_all(cls);
	fs::create_directories(entry);
	for (const char *a : kAttrs) {
		size_t n = 0;
		if (size >= 2) {
			n = data[0] | (data[1] << 8);
			data += 2;
			size -= 2;
		}
		if (n > size)
			n = size;
		std::string path = std::string(a) == "node_type" ? root() + "/class/infiniband/fz0/node_type"
								 : entry + "/" + a;
		put(path, data, n);
		check_attr(path, n);
		data += n;
		size -= n;
	}
	put(cls + "/abi_version", data, size);

	ov::core::SysfsDevList found;
	ov::core::discover_sysfs(root(), found);
	for (const auto &d : found) {
		if (!memchr(d->ibdev_name, '\0', sizeof(d->ibdev_name)) ||
		    !memchr(d->sysfs_name, '\0', sizeof(d->sysfs_name)) ||
		    !memchr(d->ibdev_path, '\0', sizeof(d->ibdev_path)))
			abort();
	}
	unsigned abi;
	ov::core::read_uverbs_abi(root(), &abi);
	return 0;
}
