#!/bin/bash
# Test-bed group guest64 of tests/anchor64/vm.sh (not picked up by the normal test-bed
# runs: vm.sh passes it with --group, in --baseline mode). In one guest it
# runs, once with rdma-core 64's own libraries (side "anchor") and once with
# the 64 target's libraries of $OV_BUILD_DIR/lib in front of them (side
# "ours"), always with rdma-core 64's own programs and providers
# (librxe-rdmav64.so, libsiw-rdmav64.so of the anchor's release build, as
# a distribution builds them):
#   - the ibverbs-utils groups of the test bed (tests/vm/groups/rxe-verbs.sh,
#     siw-verbs.sh) with the anchor's ibv_* programs first on PATH; their
#     result lines are named guest64-SIDE/rxe-verbs/TEST;
#   - rdma-core 64's pyverbs suite on rxe0 and siw0, one result line per run
#     and the per-test outcomes in $OV_LOGDIR/SIDE/pyverbs-DEV.outcomes.
# vm.sh compares the two sides on the host. The anchor's directories come from
# $OV_BUILD_DIR/anchor64-vm.env, written by vm.sh: ANCHOR64 (the release
# build: libraries, providers, programs) and ANCHOR64_PY (the default build,
# which has pyverbs and its suite; its modules load the libraries found first
# on LD_LIBRARY_PATH).
# shellcheck source=tests/vm/lib.sh disable=SC2154
. "$OV_REPO/tests/vm/lib.sh"

t0=$(ov_now)
env_file=$OV_BUILD_DIR/anchor64-vm.env
ANCHOR64="" ANCHOR64_PY=""
# shellcheck source=/dev/null
[ -r "$env_file" ] && . "$env_file"
lib=$OV_BUILD_DIR/lib
if [ -z "$ANCHOR64" ] || [ ! -x "$ANCHOR64/usr/bin/ibv_devinfo" ] ||
   [ ! -f "$ANCHOR64/usr/lib/libibverbs/librxe-rdmav64.so" ] || [ ! -f "$ANCHOR64_PY/tests/run_tests.py" ]; then
  ov_result FAIL setup "$t0" "(no rdma-core 64 anchor named by $env_file)"; exit 1
fi
if [ ! -f "$lib/libibverbs.so.1" ]; then
  ov_result FAIL setup "$t0" "(no 64 target library in $lib)"; exit 1
fi
base_group=$OV_GROUP base_logdir=$OV_LOGDIR
for side in anchor ours; do
  # The environment of every program of this side: the anchor's programs
  # always; our libraries first on the path for "ours", with the anchor's
  # provider folder named (our 64 library looks for lib<name>-rdmav64.so
  # there; the anchor's library has that folder compiled in).
  if [ "$side" = ours ]; then
    side_env=(LD_LIBRARY_PATH="$lib:$ANCHOR64/usr/lib" OPENVERBS_PROVIDER_DIR="$ANCHOR64/usr/lib/libibverbs")
  else
    side_env=(LD_LIBRARY_PATH="$ANCHOR64/usr/lib")
  fi
  side_env+=(PATH="$ANCHOR64/usr/bin:$PATH" PYTHONPATH="$ANCHOR64_PY/python")
  mkdir -p "$base_logdir/$side"

  # Which libibverbs.so.1 the programs of this side load.
  t0=$(ov_now)
  want=$lib/libibverbs.so.1
  [ "$side" = anchor ] && want=$ANCHOR64/usr/lib/libibverbs.so.1
  got=$(env -u LD_PRELOAD "${side_env[@]}" LD_TRACE_LOADED_OBJECTS=1 "$ANCHOR64/usr/bin/ibv_devinfo" 2>&1 |
        sed -n 's/^[[:space:]]*libibverbs\.so\.1 => \([^ ]*\) .*/\1/p')
  if [ "$(readlink -f "${got:-/none}")" = "$(readlink -f "$want")" ]; then
    OV_GROUP=$base_group-$side ov_result PASS library "$t0" "($got)"
  else
    OV_GROUP=$base_group-$side ov_result FAIL library "$t0" "(loads '${got:-nothing}', wanted $want)"
    continue
  fi

  for g in rxe-verbs siw-verbs; do
    env -u LD_PRELOAD "${side_env[@]}" OV_GROUP="$base_group-$side/$g" \
      OV_LOGDIR="$base_logdir/$side/$g" "$OV_REPO/tests/vm/groups/$g.sh" ||
      ov_failed=1
  done

  rm -rf /tmp/pyverbs-tests
  cp -r "$ANCHOR64_PY/tests" /tmp/pyverbs-tests
  for dev in "$RXE_DEV" "$SIW_DEV"; do
    t0=$(ov_now)
    args=(--dev "$dev")
    [ "$dev" = "$RXE_DEV" ] && args+=(--gid "$RXE_GID_INDEX")
    log=$base_logdir/$side/pyverbs-$dev.log
    (cd /tmp/pyverbs-tests &&
      env -u LD_PRELOAD "${side_env[@]}" timeout -k 5 "${OV_PYVERBS_TIMEOUT:-900}" \
        /usr/bin/python3 run_tests.py "${args[@]}" -v) >"$log" 2>&1
    rc=$?
    awk -f "$OV_REPO/tests/pkg/pyverbs-outcomes.awk" "$log" | sort >"$base_logdir/$side/pyverbs-$dev.outcomes"
    ran=$(grep -E '^Ran [0-9]+ tests' "$log" | tail -1)
    sum=$(grep -E '^(OK|FAILED)' "$log" | tail -1)
    if [ -n "$ran" ]; then
      OV_GROUP=$base_group-$side ov_result PASS "pyverbs-$dev" "$t0" "($ran: $sum; exit $rc; outcomes compared on the host)"
    else
      OV_GROUP=$base_group-$side ov_result FAIL "pyverbs-$dev" "$t0" "(the suite did not finish, exit $rc; $log)"
    fi
  done
done
exit "$ov_failed"
