#!/bin/sh
# build-tree.sh SOURCE TREE SANITIZER: configures and builds the sanitizer
# tree TREE of SOURCE (OPENVERBS_SANITIZE=SANITIZER: address or thread),
# without fuzzers (the benchmarks stay: tests use some of their programs).
# Run by the ctest fixture
# sanitize.SANITIZER.build (tests/sanitize/CMakeLists.txt).
set -e
src=$1 tree=$2 kind=$3
mkdir -p "$tree"
log=$tree/build.log
start=$(date +%s)
if ! { cmake -S "$src" -B "$tree" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DOPENVERBS_SANITIZE="$kind" -DOPENVERBS_BUILD_FUZZ=OFF &&
       nice cmake --build "$tree" -j"$(nproc)"; } >"$log" 2>&1; then
  tail -n 60 "$log"
  echo "FAIL: the $kind tree did not build (log $log)"
  exit 1
fi
echo "built the $kind tree $tree in $(( $(date +%s) - start )) s"
