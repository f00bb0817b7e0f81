#include "common/log.h"

#include "common/env.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace ov {
namespace {

struct LogSink {
	int level = LOG_NONE;
	FILE *file = nullptr;
};

LogSink &sink() noexcept
{
	static LogSink s;
	static std::once_flag once;
	std::call_once(once, [] {
		unsigned long v = 0;
		if (parse_uint(getenv("VERBS_LOG_LEVEL"), 4, &v))
			s.level = static_cast<int>(v);
		const char *path = secure_env("VERBS_LOG_FILE");
		if (path && *path)
			s.file = fopen(path, "ae");
		// A level without a file: stderr, so that VERBS_LOG_LEVEL=3 alone
		// explains an empty device list (rdma-core's release builds print
		// nothing without VERBS_LOG_FILE; its debug builds use stderr).
		if (!s.file && s.level > LOG_NONE)
			s.file = stderr;
	});
	return s;
}

} // namespace

int log_level() noexcept { return sink().level; }

void vlog(int level, const char *fmt, va_list ap) noexcept
{
	int saved = errno;
	LogSink &s = sink();
	if (s.file && level <= s.level && level > LOG_NONE) {
		vfprintf(s.file, fmt, ap);
		fflush(s.file);
	}
	errno = saved;
}

void log(int level, const char *fmt, ...) noexcept
{
	va_list ap;
	va_start(ap, fmt);
	vlog(level, fmt, ap);
	va_end(ap);
}

void warn_stderr(const char *fmt, ...) noexcept
{
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	fputs("libibverbs: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	errno = saved;
}

} // namespace ov
