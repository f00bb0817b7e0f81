#!/bin/sh
# Checks tests/perftest_rerun.sh with stand-in programs: a pair that fails
# with one of perftest's own two failures runs again (at most three runs in
# all, each rerun announced), any other result is final at once.
set -u
unset OV_PAIR_RUN # the runs below must be the outer ones
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/ov-pair-rerun.XXXXXX)
trap 'rm -rf "$work"' EXIT
failed=0
# stand_in NAME BODY: a script that sources the rerun and then runs BODY
# (which may count its runs in $work/NAME.runs).
stand_in() {
  cat >"$work/$1.sh" <<SCRIPT
. "$here/../perftest_rerun.sh"
perftest_rerun "\$0" "\$@"
echo run >>"$work/$1.runs"
$2
SCRIPT
}
# check NAME WANT_RC WANT_RUNS: runs the stand-in and checks its exit status
# and how often its body ran.
check() {
  sh "$work/$1.sh" >"$work/$1.out" 2>&1
  rc=$?
  runs=$(wc -l <"$work/$1.runs" 2>/dev/null || echo 0)
  if [ "$rc" = "$2" ] && [ "$runs" -eq "$3" ]; then
    echo "ok: $1 (exit $rc after $runs runs)"
  else
    echo "FAIL: $1: exit $rc after $runs runs, expected exit $2 after $3"; cat "$work/$1.out"
    failed=1
  fi
}
stand_in calib_once 'if [ "$(wc -l <'"$work"'/calib_once.runs)" -eq 1 ]; then
  echo "Correlation coefficient r^2: 0.89 < 0.9"; echo "Can'"'"'t produce a report"; exit 1; fi
exit 0'
check calib_once 0 2
grep -q "^== perftest could not calibrate its clock (host load): run 2 of the pair" \
  "$work/calib_once.out" || { echo "FAIL: calib_once: the rerun is not announced"; failed=1; }
stand_in rej_always 'echo "Event: RDMA_CM_EVENT_REJECTED; error: 8."; exit 1'
check rej_always 1 3
stand_in other_failure 'echo "Couldn'"'"'t connect"; exit 1'
check other_failure 1 1
stand_in skipped 'echo "Correlation coefficient r^2: 0.5 < 0.9"; echo "Can'"'"'t produce a report"; exit 77'
check skipped 77 1
stand_in passes 'exit 0'
check passes 0 1
exit $failed
