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
if [ "${OPENVERBS_SANITIZERS:-1}" = 0 ]; then
  ctest --test-dir build --output-on-failure -j2 --timeout 1500 -LE '^(asan|tsan)$'
else
  ctest --test-dir build --output-on-failure -j2 --timeout 1500
fi
