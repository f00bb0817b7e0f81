#!/bin/sh
# Builds everything and runs every test (unit, ABI, software device, umad,
# fuzzing, soak, and the real-kernel suite in the qemu test bed). Exit
# status 0 = all passed.
#
# The sanitizer trees (labels asan, tsan: tests/sanitize/README.md) build the
# suites' programs twice more and run them; OPENVERBS_SANITIZERS=0 leaves
# them out (a quicker run by hand).
set -e
cd "$(dirname "$0")/.."
sh tests/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)"
# The software devices keep their shared segments in /dev/shm. As root the
# tests get a /dev/shm of their own (a private mount namespace), so that no
# other process on the machine (another run, a program of the user's, built
# from another version) meets this run's devices or leaves a segment in
# their way.
private_shm() {
  if [ "$(id -u)" = 0 ] && unshare --mount --propagation private true 2>/dev/null; then
    unshare --mount --propagation private sh -c 'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec "$@"' sh "$@"
  else
    "$@"
  fi
}
if [ "${OPENVERBS_SANITIZERS:-1}" = 0 ]; then
  private_shm ctest --test-dir build --output-on-failure -j2 --timeout 1500 -LE '^(asan|tsan)$'
else
  private_shm ctest --test-dir build --output-on-failure -j2 --timeout 1500
fi
