#!/bin/bash
# Tests of the test bed itself (tests/vm/run.sh), as the issue's acceptance asks:
#   - a library directory whose libibverbs.so.1 is a text file, or a real shared
#     object missing the symbols Debian's programs need, fails in seconds with a
#     clear message and without booting a guest (LD_LIBRARY_PATH and LD_PRELOAD);
#   - a guest that hangs is killed by the timeout, the run is reported failed,
#     and no qemu process is left behind.
# Usage: selftest.sh [--build-dir DIR] [--kernel PKG]
# Prints PASS|FAIL lines like the groups and exits 0 when all passed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$repo/build kernel_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$2; shift 2 ;;
    --kernel) kernel_args=(--kernel "$2"); shift 2 ;;
    *) echo "selftest: unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$build" && build=$(cd "$build" && pwd)
# Share the kernel cache of the real runs instead of preparing a new one.
export OPENVERBS_VM_CACHE=${OPENVERBS_VM_CACHE:-${OPENVERBS_CACHE:-/var/cache/openverbs}/vm}
work=$build/vm-selftest
rm -rf "$work"; mkdir -p "$work"
failed=0

now() { echo "${EPOCHREALTIME//[!0-9]/}"; }
secs() { local d=$(( $(now) - $1 )); printf '%d.%02d' $((d / 1000000)) $((d % 1000000 / 10000)); }
result() { [ "$1" = FAIL ] && failed=1; echo "$1 vm-harness/$2 $(secs "$3")${4:+ ($4)}"; }

# expect_fast_failure NAME MAX_SECONDS REGEX -- run.sh ARGS...: run.sh must exit
# non-zero within MAX_SECONDS, print REGEX, and start no guest.
expect_fast_failure() {
  local name=$1 max=$2 pat=$3 t0 rc log=$work/$1.log; shift 3; [ "$1" = -- ] && shift
  t0=$(now)
  "$here/run.sh" --build-dir "$work/build" "$@" >"$log" 2>&1; rc=$?
  local el=$(( ($(now) - t0) / 1000000 ))
  if [ "$rc" = 0 ]; then result FAIL "$name" "$t0" "run.sh passed; log $log"
  elif [ "$el" -gt "$max" ]; then result FAIL "$name" "$t0" "took ${el}s, more than ${max}s"
  elif ! grep -qE -- "$pat" "$log"; then result FAIL "$name" "$t0" "message lacks /$pat/; log $log"
  elif grep -q 'results in ' "$log"; then result FAIL "$name" "$t0" "a guest was started; log $log"
  else result PASS "$name" "$t0" "$(grep -m1 -E -- "$pat" "$log" | cut -c1-110)"
  fi
}

# 1. A text file named libibverbs.so.1.
mkdir -p "$work/textlib"
echo "this is not a library" >"$work/textlib/libibverbs.so.1"
expect_fast_failure text-file 20 'is not an ELF file' -- --lib "$work/textlib" --only rxe-verbs
expect_fast_failure text-file-preload 20 'is not an ELF file' -- --lib "$work/textlib" --preload --only rxe-verbs

# 2. A real shared object named libibverbs.so.1 that exports almost nothing.
mkdir -p "$work/nosyms"
printf 'int ibv_fork_init(void) { return 0; }\n' >"$work/nosyms/stub.c"
if gcc -shared -fPIC -Wl,-soname,libibverbs.so.1 -o "$work/nosyms/libibverbs.so.1" "$work/nosyms/stub.c" 2>"$work/nosyms/cc.log"; then
  expect_fast_failure missing-symbols 30 "version .* not found|undefined symbol" -- --lib "$work/nosyms" --only rxe-verbs
  expect_fast_failure missing-symbols-preload 30 "version .* not found|undefined symbol" -- --lib "$work/nosyms" --preload --only rxe-verbs
else
  result FAIL missing-symbols "$(now)" "cannot build the stub library: $(tail -n1 "$work/nosyms/cc.log")"
fi

# 3. A wrong SONAME and a missing directory.
mkdir -p "$work/soname" && gcc -shared -fPIC -Wl,-soname,libfoo.so.1 -o "$work/soname/libibverbs.so.1" "$work/nosyms/stub.c" &&
  expect_fast_failure wrong-soname 20 "has SONAME 'libfoo.so.1'" -- --lib "$work/soname" --only rxe-verbs
expect_fast_failure missing-dir 20 'does not exist' -- --lib "$work/no-such-dir" --only rxe-verbs

# 4. A guest that hangs is killed at the limit, reported failed, and no qemu
#    is left: once after rxe0 (--timeout), once before stage 2 (--boot-timeout).
# hang_case NAME WHERE OPTION LIMIT MESSAGE
hang_case() {
  local name=$1 where=$2 opt=$3 limit=$4 msg=$5 t0 rc el qpid left log=$work/$1.log
  t0=$(now)
  "$here/run.sh" --build-dir "$work/build" --baseline --only rxe-verbs "${kernel_args[@]}" \
    --debug-hang "$where" "$opt" "$limit" >"$log" 2>&1; rc=$?
  el=$(( ($(now) - t0) / 1000000 ))
  qpid=$(sed -n 's/^vm: qemu pid \([0-9]*\)$/\1/p' "$log")
  left=""
  if [ -n "$qpid" ] && [ -d "/proc/$qpid" ] && grep -q qemu "/proc/$qpid/comm" 2>/dev/null; then left=$qpid; fi
  if [ "$rc" = 0 ]; then result FAIL "$name" "$t0" "run.sh passed; log $log"
  elif [ -n "$left" ]; then result FAIL "$name" "$t0" "qemu pid $left still running"; kill -KILL "$left"
  elif ! grep -q "$msg" "$log"; then result FAIL "$name" "$t0" "no '$msg' message; log $log"
  elif ! grep -q '^FAIL vm/run ' "$log"; then result FAIL "$name" "$t0" "not reported as a failure; log $log"
  elif [ -z "$qpid" ]; then result FAIL "$name" "$t0" "qemu never started; log $log"
  elif [ "$el" -gt $((limit + 60)) ]; then result FAIL "$name" "$t0" "took ${el}s for a ${limit}s limit (kernel preparation included)"
  else result PASS "$name" "$t0" "killed at the ${limit}s limit, run took ${el}s, qemu $qpid gone"
  fi
}
hang_case hung-guest tests --timeout 45 "still running after 45s: killed"
hang_case hung-boot boot --boot-timeout 30 "did not reach stage 2 within 30s"

echo "vm-harness: logs in $work"
exit "$failed"
