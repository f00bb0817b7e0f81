#include "common/env.h"

#include <cerrno>
#include <cstdlib>
#include <sys/auxv.h>
#include <unistd.h>

namespace ov {

// Decided once per process, from the state at first use (like glibc's
// secure_getenv, which decides at program start): AT_SECURE, or real and
// effective ids that differ.
bool process_is_privileged() noexcept
{
	static const bool privileged = getauxval(AT_SECURE) || getuid() != geteuid() ||
				       getgid() != getegid();
	return privileged;
}

const char *secure_env(const char *name) noexcept
{
	if (process_is_privileged())
		return nullptr;
	return getenv(name);
}

bool parse_uint(const char *text, unsigned long max, unsigned long *out) noexcept
{
	if (!text || !*text)
		return false;
	for (const char *p = text; *p; ++p)
		if (*p < '0' || *p > '9')
			return false;
	const int saved = errno; // a success leaves the caller's errno alone
	errno = 0;
	char *end = nullptr;
	unsigned long v = strtoul(text, &end, 10);
	bool ok = !errno && !*end && v <= max;
	errno = saved;
	if (ok)
		*out = v;
	return ok;
}

} // namespace ov
