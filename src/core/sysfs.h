// Reading small sysfs attribute files the way libibverbs does (facts 1.3):
// one read(), a trailing newline removed, the text NUL-terminated.
#pragma once

#include <cstddef>
#include <sys/types.h>

namespace ov::core {

// Reads `name` relative to `dirfd` (AT_FDCWD for a plain path) into `buf`.
// Returns the length of the text (newline stripped, NUL-terminated), or -1
// with errno set: the open/read errno, or EOVERFLOW when the content fills
// `size` completely without a newline (it could not be terminated).
ssize_t read_attr_at(int dirfd, const char *name, char *buf, size_t size) noexcept;

// Parses the leading decimal number of an attribute ("1: CA" -> 1).
bool leading_uint(const char *text, unsigned long *out) noexcept;

} // namespace ov::core
