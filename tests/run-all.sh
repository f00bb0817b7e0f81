#!/bin/sh
# Builds everything and runs every test (unit, ABI, software device, umad,
# fuzzing, soak, and the real-kernel suite in the qemu test bed). Exit
# status 0 = all passed.
#
# The sanitizer trees (labels asan, tsan: tests/sanitize/README.md) build the
# project twice more; they run here only with OPENVERBS_SANITIZERS=1 until a
# complete clean run on the CI machine has been timed (issue 17).
set -e
cd "$(dirname "$0")/.."
sh tests/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)"
if [ "${OPENVERBS_SANITIZERS:-0}" = 1 ]; then
  ctest --test-dir build --output-on-failure -j2 --timeout 1500
else
  ctest --test-dir build --output-on-failure -j2 --timeout 1500 -LE '^(asan|tsan)$'
fi
