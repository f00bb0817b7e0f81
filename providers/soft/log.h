// openverbs software RDMA device: diagnostics.
//
// Levels follow VERBS_LOG_LEVEL (1 error, 2 warning, 3 info, 4 debug). The
// level is read once with secure_getenv(), so setuid programs print nothing;
// messages go to stderr prefixed "libibverbs: soft: ". errno is preserved.
#pragma once

namespace ovsoft {
void softlog(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
}
