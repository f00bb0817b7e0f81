#!/bin/sh
# Builds everything and runs every test (unit, ABI, software device, umad,
# and the real-kernel suite in the qemu test bed). Exit status 0 = all passed.
set -e
cd "$(dirname "$0")/.."
sh tests/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j2 --timeout 1500
