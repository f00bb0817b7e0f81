#!/bin/bash
# Test-bed group for a booted Debian root (tests/vm/run.sh --root, used by
# tests/pkg/vm-installed.sh): which package owns the libraries, and rdma-core's
# own test suite (Debian's python3-pyverbs, shipped compressed under
# /usr/share/doc/rdma-core/tests) on rxe0 and siw0 from the system paths.
# The per-test outcomes go to $OV_LOGDIR/pyverbs-DEV.outcomes; the caller
# compares them between the root with our packages and Debian's own.
# shellcheck source=tests/vm/lib.sh disable=SC2154
. "$OV_REPO/tests/vm/lib.sh"

t0=$(ov_now)
owner=$(dpkg -S /usr/lib/x86_64-linux-gnu/libibverbs.so.1 2>&1 | sed 's/:.*//' | sort -u | tr '\n' ' ')
umad=$(dpkg -S /usr/lib/x86_64-linux-gnu/libibumad.so.3 2>&1 | sed 's/:.*//' | sort -u | tr '\n' ' ')
echo "libibverbs.so.1: $owner; libibumad.so.3: $umad" >"$OV_LOGDIR/owner.log"
if [ -n "$owner" ] && [ -z "${LD_LIBRARY_PATH:-}${LD_PRELOAD:-}" ]; then
  ov_result PASS owner "$t0" "(libibverbs.so.1: ${owner% }; libibumad.so.3: ${umad% })"
else
  ov_result FAIL owner "$t0" "(owner '${owner}', LD_LIBRARY_PATH '${LD_LIBRARY_PATH:-}', LD_PRELOAD '${LD_PRELOAD:-}')"
fi

if [ ! -d /usr/share/doc/rdma-core/tests ]; then
  ov_result FAIL pyverbs "$(ov_now)" "(python3-pyverbs is not installed in this root)"
  exit "$ov_failed"
fi
rm -rf /tmp/pyverbs-tests
cp -r /usr/share/doc/rdma-core/tests /tmp/pyverbs-tests
gunzip -f /tmp/pyverbs-tests/*.gz
for dev in "$RXE_DEV" "$SIW_DEV"; do
  t0=$(ov_now)
  args=(--dev "$dev")
  [ "$dev" = "$RXE_DEV" ] && args+=(--gid "$RXE_GID_INDEX")
  log=$OV_LOGDIR/pyverbs-$dev.log
  (cd /tmp/pyverbs-tests && timeout -k 5 "${OV_PYVERBS_TIMEOUT:-600}" python3 run_tests.py "${args[@]}" -v) >"$log" 2>&1
  rc=$?
  awk -f "$OV_REPO/tests/pkg/pyverbs-outcomes.awk" "$log" | sort >"$OV_LOGDIR/pyverbs-$dev.outcomes"
  ran=$(grep -E '^Ran [0-9]+ tests' "$log" | tail -1)
  sum=$(grep -E '^(OK|FAILED)' "$log" | tail -1)
  if [ -n "$ran" ]; then
    ov_result PASS "pyverbs-$dev" "$t0" "($ran: $sum; exit $rc; outcomes compared by the caller)"
  else
    ov_result FAIL "pyverbs-$dev" "$t0" "(the suite did not finish, exit $rc; $log)"
  fi
done
exit "$ov_failed"
