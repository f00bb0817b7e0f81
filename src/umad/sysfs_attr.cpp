// Paths and sysfs attribute readers of libibumad (see internal.h).
#include "umad/internal.h"

#include "common/env.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <endian.h>
#include <fcntl.h>
#include <unistd.h>

namespace ov::umad {

namespace {

const char *root_or(const char *var, const char *fallback) noexcept
{
	const char *v = ov::secure_env(var);
	return (v && *v) ? v : fallback;
}

// One field of a ':'/' '/'\t'/'\n'-separated list, parsed like
// strtoul(field, NULL, 16) and truncated to 16 bits.
uint16_t parse_hex_field(const char *begin, const char *end) noexcept
{
	char field[64];
	size_t n = static_cast<size_t>(end - begin);
	if (n >= sizeof(field))
		n = sizeof(field) - 1;
	memcpy(field, begin, n);
	field[n] = '\0';
	return static_cast<uint16_t>(strtoul(field, nullptr, 16) & 0xffff);
}

bool is_separator(char c) noexcept
{
	return c == ':' || c == ' ' || c == '\t' || c == '\n';
}

} // namespace

const char *sys_root() noexcept { return root_or("OPENVERBS_UMAD_SYSFS_ROOT", "/sys"); }
const char *dev_root() noexcept { return root_or("OPENVERBS_UMAD_DEV_ROOT", "/dev"); }

bool make_path(char *out, size_t len, const char *fmt, ...) noexcept
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out, len, fmt, ap);
	va_end(ap);
	return n >= 0 && static_cast<size_t>(n) < len;
}

int read_string(const char *dir, const char *name, char *str, int max_len) noexcept
{
	char path[kPathMax];
	if (max_len <= 0)
		return -EINVAL;
	if (!make_path(path, sizeof(path), "%s/%s", dir, name))
		return -ENAMETOOLONG;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return errno > 0 ? -errno : -EIO;
	ssize_t r = read(fd, str, static_cast<size_t>(max_len));
	if (r < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return e > 0 ? -e : -EIO;
	}
	str[r < max_len ? r : max_len - 1] = '\0';
	if (char *nl = strrchr(str, '\n'))
		*nl = '\0';
	close(fd);
	return 0;
}

unsigned parse_uint(const char *text) noexcept
{
	return static_cast<unsigned>(strtoul(text, nullptr, 0));
}

int parse_hex_groups(const char *text, uint16_t *out, int count) noexcept
{
	const char *p = text;
	for (int i = 0; i < count; ++i) {
		if (!p)
			return -EINVAL; // ran out of fields
		const char *end = p;
		while (*end && !is_separator(*end))
			++end;
		out[i] = parse_hex_field(p, end);
		p = *end ? end + 1 : nullptr;
	}
	return 0;
}

int parse_guid(const char *text, __be64 *net_guid) noexcept
{
	uint16_t g[4];
	if (int r = parse_hex_groups(text, g, 4))
		return r;
	uint64_t v = 0;
	for (uint16_t part : g)
		v = (v << 16) | part;
	*net_guid = htobe64(v);
	return 0;
}

int parse_gid(const char *text, union umad_gid *gid) noexcept
{
	uint16_t g[8];
	if (int r = parse_hex_groups(text, g, 8))
		return r;
	for (int i = 0; i < 8; ++i)
		gid->raw_be16[i] = htobe16(g[i]);
	return 0;
}

int read_uint(const char *dir, const char *name, unsigned *value) noexcept
{
	char buf[32];
	if (int r = read_string(dir, name, buf, sizeof(buf)))
		return r;
	*value = parse_uint(buf);
	return 0;
}

int read_guid(const char *dir, const char *name, __be64 *net_guid) noexcept
{
	char buf[32];
	if (int r = read_string(dir, name, buf, sizeof(buf)))
		return r;
	return parse_guid(buf, net_guid);
}

int read_gid(const char *dir, const char *name, union umad_gid *gid) noexcept
{
	char buf[64];
	if (int r = read_string(dir, name, buf, sizeof(buf)))
		return r;
	return parse_gid(buf, gid);
}

} // namespace ov::umad
