#!/bin/sh
# run-tree.sh TREE SANITIZER LABELS EXCLUDE: runs the tests of the sanitizer
# tree TREE whose labels match LABELS, except the names matching EXCLUDE
# (tests/sanitize/README.md says why each is left out). The sanitizer
# options make every finding fatal; nothing is suppressed.
tree=$1 kind=$2 labels=$3 exclude=$4
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:exitcode=66
start=$(date +%s)
ctest --test-dir "$tree" -L "$labels" -E "$exclude" -j2 --timeout 900 --output-on-failure \
  >"$tree/run.log" 2>&1
rc=$?
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Exception" "$tree/run.log" | head -n 80
echo "ran the $kind tests in $(( $(date +%s) - start )) s (log $tree/run.log)"
exit $rc
