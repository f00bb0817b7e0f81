#!/bin/sh
# build-tree.sh SOURCE TREE SANITIZER: configures and builds the sanitizer
# tree TREE of SOURCE (OPENVERBS_SANITIZE=SANITIZER: address or thread),
# without fuzzers; only the target sanitize_targets (tests/CMakeLists.txt:
# the programs of the suites that run there and what they need).
# Run by the ctest fixture
# sanitize.SANITIZER.build (tests/sanitize/CMakeLists.txt).
set -e
src=$1 tree=$2 kind=$3
mkdir -p "$tree"
log=$tree/build.log
start=$(date +%s)
if ! { cmake -S "$src" -B "$tree" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DOPENVERBS_SANITIZE="$kind" -DOPENVERBS_BUILD_FUZZ=OFF &&
       nice cmake --build "$tree" -j"$(nproc)" --target sanitize_targets; } >"$log" 2>&1; then
  tail -n 60 "$log"
  echo "FAIL: the $kind tree did not build (log $log)"
  exit 1
fi
echo "built the $kind tree $tree in $(( $(date +%s) - start )) s"
