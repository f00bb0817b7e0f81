#include "core/sysfs.h"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace ov::core {

ssize_t read_attr_at(int dirfd, const char *name, char *buf, size_t size) noexcept
{
	if (!name || !buf || size == 0) {
		errno = EINVAL;
		return -1;
	}
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t len;
	do {
		len = read(fd, buf, size);
	} while (len < 0 && errno == EINTR);
	int saved = errno;
	close(fd);
	errno = saved;
	if (len < 0)
		return -1;
	if (len > 0 && buf[len - 1] == '\n') {
		buf[--len] = '\0';
	} else if (static_cast<size_t>(len) < size) {
		buf[len] = '\0';
	} else {
		errno = EOVERFLOW;
		return -1;
	}
	return len;
}

bool leading_uint(const char *text, unsigned long *out) noexcept
{
	if (!text || *text < '0' || *text > '9')
		return false;
	unsigned long v = 0;
	for (; *text >= '0' && *text <= '9'; ++text) {
		unsigned long d = static_cast<unsigned long>(*text - '0');
		if (v > (~0UL - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

} // namespace ov::core
