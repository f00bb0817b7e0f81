// Leveled diagnostics of libibverbs (VERBS_LOG_LEVEL / VERBS_LOG_FILE).
//
// Levels follow rdma-core's verbs_log levels: 0 none, 1 error, 2 warn,
// 3 info, 4 debug. Messages go to VERBS_LOG_FILE (opened once, append) when
// it is set and the process is not setuid, to stderr otherwise (nothing is
// printed at level 0, the default).
// Every call preserves errno.
#pragma once

#include <cstdarg>

namespace ov {

enum LogLevel : int { LOG_NONE = 0, LOG_ERR = 1, LOG_WARN = 2, LOG_INFO = 3, LOG_DEBUG = 4 };

// The level configured by VERBS_LOG_LEVEL (read once).
int log_level() noexcept;

void log(int level, const char *fmt, ...) noexcept __attribute__((format(printf, 2, 3)));
void vlog(int level, const char *fmt, va_list ap) noexcept;

// A warning the user must see whatever the log level: printed to stderr with
// the "libibverbs: " prefix rdma-core uses.
void warn_stderr(const char *fmt, ...) noexcept __attribute__((format(printf, 1, 2)));

} // namespace ov
