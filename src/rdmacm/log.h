// librdmacm's diagnostics: the levels and sink of libibverbs' logger
// (VERBS_LOG_LEVEL 0..4, VERBS_LOG_FILE; src/common/log.h), each line
// prefixed "librdmacm: " and ended with a newline. Nothing is printed unless
// the user asks; errno is preserved.
#pragma once

#include "common/log.h"

struct sockaddr;

namespace ov::cm::log {

// Text of a socket address for diagnostics ("10.0.0.1", "::1", "(none)").
const char *addr_text(const struct sockaddr *a, char *buf, unsigned long len) noexcept;

void write(int level, const char *fmt, ...) noexcept __attribute__((format(printf, 2, 3)));

#define OV_CM_LOG_LEVEL(name, level)                                                               \
	template <typename... A> inline void name(const char *fmt, A... a) noexcept                \
	{                                                                                          \
		if (ov::log_level() >= (level))                                                    \
			write((level), fmt, a...);                                                 \
	}
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-security"
OV_CM_LOG_LEVEL(err, ov::LOG_ERR)
OV_CM_LOG_LEVEL(warn, ov::LOG_WARN)
OV_CM_LOG_LEVEL(info, ov::LOG_INFO)
OV_CM_LOG_LEVEL(debug, ov::LOG_DEBUG)
#pragma GCC diagnostic pop
#undef OV_CM_LOG_LEVEL

} // namespace ov::cm::log
