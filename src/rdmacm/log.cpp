#include "log.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <netinet/in.h>
#include <sys/socket.h>

namespace ov::cm::log {

const char *addr_text(const sockaddr *a, char *buf, unsigned long len) noexcept
{
	if (!a)
		return "(none)";
	if (a->sa_family == AF_INET)
		inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in *>(a)->sin_addr, buf,
			  static_cast<socklen_t>(len));
	else if (a->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6 *>(a)->sin6_addr, buf,
			  static_cast<socklen_t>(len));
	else
		snprintf(buf, len, "(family %d)", a->sa_family);
	return buf;
}

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
