#!/bin/bash
# Test-bed group of the control-path benchmark (issue 3). Not picked up by the
# normal test-bed runs: bench/verbs/run-vm.sh passes it with --group.
#
# On rxe0 (Debian's provider librxe in both cases) it measures, with our
# libibverbs (LD_LIBRARY_PATH=$OV_LIB_DIR) and with Debian's (no
# LD_LIBRARY_PATH; verbs_cycle has no RPATH):
#   - userspace instructions of one verbs_cycle (open device .. close) under
#     callgrind, only the cycle (--instr-atstart=no + the program's
#     CALLGRIND_START/STOP_INSTRUMENTATION): verbs_cycle is linked -z now like
#     Debian's programs (the target is judged on it); verbs_cycle_lazy, the
#     same program with lazy binding, is measured for information;
#   - resident set size right after ibv_open_device (verbs_cycle --rss,
#     median of 3 processes).
# Writes the numbers to $OV_LOGDIR/numbers.txt ("KEY VALUE" lines) and keeps
# the callgrind out files (callgrind.{ours,debian}.out and the lazy runs'
# callgrind.{ours,debian}-lazy.out) there;
# run-vm.sh prints the table on the host. A result line is PASS when the
# measurement itself succeeded; the targets are judged by run-vm.sh.
#
# The 64 target: when run-vm.sh found a 64 build tree (BUILD/abi64) and
# rdma-core 64's release build, it names them in $OV_BUILD_DIR/bench/verbs64.env
# (B64=..., ANCHOR64=...), and the same cycle is measured once more with the
# 64 tree's verbs_cycle (built against the 64 headers) and rdma-core 64's own
# provider librxe-rdmav64.so: with our 64 library (ir_ours64) and with
# rdma-core 64's (ir_anchor64).
. "$OV_REPO/tests/vm/lib.sh"
ov_require_ours "compares the project's library with Debian's"

bin=$OV_BUILD_DIR/bench/verbs_cycle
bin_lazy=$OV_BUILD_DIR/bench/verbs_cycle_lazy
numbers=$OV_LOGDIR/numbers.txt
: >"$numbers"
dev=${RXE_DEV:-rxe0}
gid=${RXE_GID_INDEX:-}
printf 'device %s\ngid_index %s\n' "$dev" "$gid" >>"$numbers"

B64="" ANCHOR64=""
# shellcheck source=/dev/null
[ -r "$OV_BUILD_DIR/bench/verbs64.env" ] && . "$OV_BUILD_DIR/bench/verbs64.env"

# run_lib WHICH CMD...: CMD with the library WHICH (ours|debian|ours64|anchor64)
# selected. Our 64 library finds rdma-core 64's providers through
# OPENVERBS_PROVIDER_DIR; rdma-core 64's has their folder compiled in.
run_lib() {
  local which=$1; shift
  case $which in
    ours) env -u LD_PRELOAD LD_LIBRARY_PATH="$OV_LIB_DIR" "$@" ;;
    ours64) env -u LD_PRELOAD LD_LIBRARY_PATH="$B64/lib" OPENVERBS_PROVIDER_DIR="$ANCHOR64/usr/lib/libibverbs" "$@" ;;
    anchor64) env -u LD_PRELOAD LD_LIBRARY_PATH="$ANCHOR64/usr/lib" "$@" ;;
    *) env -u LD_LIBRARY_PATH -u LD_PRELOAD "$@" ;;
  esac
}

# The library that WHICH's out file shows was loaded (ob= lines name objects).
loaded_ibverbs() {
  grep -oE '^c?ob=(\([0-9]+\) )?[^ ]*libibverbs\.so[^ ]*' "$1" | sed -E 's/^c?ob=(\([0-9]+\) )?//' | sort -u | head -n1
}

# callgrind WHICH [lazy]: verbs_cycle (linked -z now), or with lazy the
# lazily bound verbs_cycle_lazy, whose run also counts the dynamic linker's
# binding of the program's first calls.
callgrind() {
  local which=$1 tag=$1 t0 log out rc ir lib want prog=$bin
  if [ "${2:-}" = lazy ]; then tag=$1-lazy; prog=$bin_lazy; fi
  case $which in ours64|anchor64) prog=$B64/bench/verbs_cycle ;; esac
  t0=$(ov_now); log=$OV_LOGDIR/callgrind-$tag.log; out=$OV_LOGDIR/callgrind.$tag.out
  rm -f "$out"
  { echo "+ valgrind --tool=callgrind --instr-atstart=no $prog $dev $gid ($which)"
    run_lib "$which" timeout -k 5 "$OV_TEST_TIMEOUT" valgrind --tool=callgrind --instr-atstart=no \
      --callgrind-out-file="$out" "$prog" "$dev" $gid; } >"$log" 2>&1
  rc=$?
  ir=$(awk '$1 == "totals:" { print $2; exit } $1 == "summary:" { s = $2 } END { if (s != "") print s }' "$out" 2>/dev/null | head -n1)
  lib=$(loaded_ibverbs "$out" 2>/dev/null)
  case $which in
    ours) want=$OV_LIB_DIR/ ;;
    ours64) want=$B64/lib/ ;;
    anchor64) want=$ANCHOR64/usr/lib/ ;;
    *) want=/usr/lib/x86_64-linux-gnu/ ;;
  esac
  if [ "$rc" != 0 ]; then
    ov_check "callgrind-$tag" "$log" "$rc" "" "$t0"
  elif [ -z "$ir" ] || [ "$ir" = 0 ]; then
    ov_result FAIL "callgrind-$tag" "$t0" "(no instruction total in $out)"
  elif [ "${lib#"$want"}" = "$lib" ]; then
    ov_result FAIL "callgrind-$tag" "$t0" "(wrong library loaded: '${lib:-none}', expected one in $want)"
  else
    echo "ir_$tag $ir" >>"$numbers"
    echo "lib_$tag $lib" >>"$numbers"
    ov_result PASS "callgrind-$tag" "$t0" "($ir instructions, $lib)"
  fi
}

rss() {
  local which=$1 t0 log rc=0 i v b
  t0=$(ov_now); log=$OV_LOGDIR/rss-$which.log
  : >"$log"
  for i in 1 2 3; do
    run_lib "$which" timeout -k 5 "$OV_TEST_TIMEOUT" "$bin" "$dev" --rss >>"$log" 2>&1 || { rc=$?; break; }
    rc=0
  done
  if [ "$rc" != 0 ]; then ov_check "rss-$which" "$log" "$rc" "" "$t0"; return; fi
  # Median of the three (no process substitution: the guest has no /dev/fd).
  b=$(awk '$1 == "rss_kib_before_open" { print $2 }' "$log" | sort -n | sed -n 2p)
  v=$(awk '$1 == "rss_kib_after_open" { print $2 }' "$log" | sort -n | sed -n 2p)
  if [ -z "$b" ] || [ -z "$v" ]; then
    ov_result FAIL "rss-$which" "$t0" "(no RSS lines; log $log)"; return
  fi
  # Resident KiB per mapped object, from the first run.
  awk '$1 == "rss_kib_before_open" && ++n == 2 { exit } $1 == "rss_map" { print $2, $3 }' "$log" >"$OV_LOGDIR/rss-maps-$which.txt"
  echo "rss_before_$which $b" >>"$numbers"
  echo "rss_after_$which $v" >>"$numbers"
  ov_result PASS "rss-$which" "$t0" "($v KiB after open, $b KiB before)"
}

t0=$(ov_now)
for f in "$bin" "$bin_lazy"; do
  if [ ! -x "$f" ]; then
    ov_result FAIL setup "$t0" "($f not built)"; exit 1
  fi
done
if ! command -v valgrind >/dev/null; then
  ov_result FAIL setup "$t0" "(valgrind is not installed on the host)"; exit 1
fi
if [ -z "$gid" ]; then
  ov_result FAIL setup "$t0" "(RXE_GID_INDEX is not set)"; exit 1
fi

callgrind debian
callgrind ours
callgrind debian lazy
callgrind ours lazy
if [ -n "$B64" ] && [ -x "$B64/bench/verbs_cycle" ] && [ -f "$ANCHOR64/usr/lib/libibverbs/librxe-rdmav64.so" ]; then
  callgrind anchor64
  callgrind ours64
fi
rss debian
rss ours
exit "$ov_failed"
