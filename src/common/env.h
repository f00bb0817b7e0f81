// Environment access for every layer of openverbs.
//
// Variables that redirect paths or select code (SYSFS_PATH, RDMAV_DRIVERS,
// OPENVERBS_*_DIR, VERBS_LOG_FILE, ...) must never be honoured in a setuid or
// setgid program: read them with secure_env(), which returns nullptr there.
#pragma once

namespace ov {

// getenv() unless the process runs with elevated privileges (AT_SECURE, or
// real and effective ids differ); then nullptr.
const char *secure_env(const char *name) noexcept;

// True when the process is setuid/setgid (environment overrides are ignored).
bool process_is_privileged() noexcept;

// Parses a non-negative decimal integer; false on empty, junk or overflow.
bool parse_uint(const char *text, unsigned long max, unsigned long *out) noexcept;

} // namespace ov
