#!/bin/sh
# Builds everything and runs every test (unit, ABI, software device, umad,
# and the real-kernel suite in the qemu test bed). Exit status 0 = all passed.
set -e
cd "$(dirname "$0")/.."
sh tests/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)"
# Tests labelled open-gap prove features that are not there yet (listed in
# README.md, Status); `ctest --test-dir build -L open-gap` runs them.
ctest --test-dir build --output-on-failure -j2 --timeout 1500 -LE open-gap
