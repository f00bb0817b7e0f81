#include "log.h"

#include <cerrno>
#include <cstdio>

namespace ov::cm::log {

void write(int level, const char *fmt, ...) noexcept
{
	int saved = errno;
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	ov::log(level, "librdmacm: %s\n", line);
	errno = saved;
}

} // namespace ov::cm::log
