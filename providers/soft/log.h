// openverbs software RDMA device: diagnostics.
//
// Levels follow VERBS_LOG_LEVEL (1 error, 2 warning, 3 info, 4 debug).
// Messages go through the library's logger (__verbs_log of driver.h), so
// VERBS_LOG_FILE applies (and setuid programs get nothing); each is one line
// prefixed "libibverbs: soft: ". errno is preserved.
#pragma once

namespace ovsoft {
void softlog(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
}
