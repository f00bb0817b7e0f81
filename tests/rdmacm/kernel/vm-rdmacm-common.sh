#!/bin/bash
# Debian's rdmacm-utils, perftest's -R mode and rdma-core's own rdmacm tests
# (python3-pyverbs) through librdmacm on one kernel device; sourced by the
# vm-group-rdmacm-*.sh groups with DEV and IP set. Each case expects what
# Debian's libraries do on that device (the --baseline run proves it): the
# cases a device cannot run are XFAIL with the symptom Debian's library shows.
# shellcheck source=tests/vm/lib.sh disable=SC2154
. "$OV_REPO/tests/vm/lib.sh"
n=${OV_PERFTEST_ITERS:-1000}

# A pair whose server does not listen (multicast receivers): the sender
# starts once the receiver has had time to join.
mc_pair() {
  local name=$1 srv=$2 cli=$3 t0 log rc src spid
  log=$OV_LOGDIR/$name.log; t0=$(ov_now)
  echo "+ receiver: $srv" >"$log"
  # shellcheck disable=SC2086
  timeout -k 5 "$OV_TEST_TIMEOUT" $srv >"$log.server" 2>&1 &
  spid=$!
  ov_sleep 2
  echo "+ sender: $cli" >>"$log"
  # shellcheck disable=SC2086
  timeout -k 5 "$OV_TEST_TIMEOUT" $cli >>"$log" 2>&1; rc=$?
  [ "$rc" = 0 ] || { ov_sleep 0.5; kill "$spid" 2>/dev/null; }
  wait "$spid"; src=$?
  { echo "+ receiver output (exit $src):"; cat "$log.server"; } >>"$log"; rm -f "$log.server"
  [ "$rc" = 0 ] && rc=$src
  ov_check "$name" "$log" "$rc" "" "$t0"
}

# A pair whose server serves forever (cmtime): the client's exit decides, the
# server is stopped afterwards.
srv_pair() {
  local name=$1 srv=$2 cli=$3 t0 log rc spid
  log=$OV_LOGDIR/$name.log; t0=$(ov_now)
  echo "+ server: $srv" >"$log"
  # shellcheck disable=SC2086
  timeout -k 5 "$OV_TEST_TIMEOUT" $srv >"$log.server" 2>&1 &
  spid=$!
  if ! ov_wait_listen cm "$spid"; then
    kill "$spid" 2>/dev/null; wait "$spid"
    cat "$log.server" >>"$log"; rm -f "$log.server"
    ov_result FAIL "$name" "$t0" "(server never listened: $(ov_tail "$log"))"
    return
  fi
  echo "+ client: $cli" >>"$log"
  # shellcheck disable=SC2086
  timeout -k 5 "$OV_TEST_TIMEOUT" $cli >>"$log" 2>&1; rc=$?
  kill "$spid" 2>/dev/null; wait "$spid"
  { echo "+ server output:"; cat "$log.server"; } >>"$log"; rm -f "$log.server"
  ov_check "$name" "$log" "$rc" "" "$t0"
}

# Which librdmacm.so.1 the programs load: the library under test (Debian's
# under --baseline). The dynamic loader's own listing, no program run.
rdmacm_which() {
  local t0 log want got
  t0=$(ov_now); log=$OV_LOGDIR/which-librdmacm.log
  want=$(readlink -f "${OV_LIB_DIR:-/usr/lib/x86_64-linux-gnu}/librdmacm.so.1")
  LD_TRACE_LOADED_OBJECTS=1 "$(command -v rping)" >"$log" 2>&1
  got=$(sed -n 's/.*librdmacm.so.1 => \([^ ]*\).*/\1/p; s/^[[:space:]]*\(\/[^ ]*librdmacm.so.1\) .*/\1/p' "$log" | head -n1)
  if [ -n "$got" ] && [ "$(readlink -f "$got")" = "$want" ]; then
    ov_result PASS which-librdmacm "$t0"
  else
    ov_result FAIL which-librdmacm "$t0" "(rping loads '${got:-nothing}', expected $want)"
  fi
}

# cm_pair: ov_pair_retry (tests/vm/lib.sh) with the group's RETRY_SYMPTOM.
cm_pair() { ov_pair_retry "$@"; }

rdmacm_connected() {
  rdmacm_which
  ov_pair rping cm "rping -s -a $IP -C 10 -V" "rping -c -a $IP -C 10 -V"
  ov_pair rping-S cm "rping -s -a $IP -C 5 -S 60000 -V" "rping -c -a $IP -C 5 -S 60000 -V"
  cm_pair ucmatose cm "ucmatose -b $IP" "ucmatose -s $IP"
  cm_pair ucmatose-c4 cm "ucmatose -b $IP -c 4 -C 20" "ucmatose -s $IP -c 4 -C 20"
  cm_pair ucmatose-migrate cm "ucmatose -b $IP -m" "ucmatose -s $IP -m"
  ov_pair rdma_server cm "rdma_server -s $IP" "rdma_client -s $IP"
  ov_pair rdma_xserver cm "rdma_xserver -c r" "rdma_xclient -s $IP -c r"
  srv_pair cmtime "cmtime -b $IP -c 20" "cmtime -s $IP -c 20"
  cm_pair ib_send_bw-R cm "ib_send_bw -d $DEV -R -n $n -F" "ib_send_bw -d $DEV -R -n $n -F $IP"
  cm_pair ib_write_lat-R cm "ib_write_lat -d $DEV -R -n $n -F" "ib_write_lat -d $DEV -R -n $n -F $IP"
}

rdmacm_datagram() {
  ov_pair udaddy cm "udaddy -b $IP" "udaddy -s $IP"
  ov_pair udaddy-c4 cm "udaddy -b $IP -c 4 -C 20" "udaddy -s $IP -c 4 -C 20"
  mc_pair mckey "mckey -m 239.1.1.1 -b $IP" "mckey -m 239.1.1.1 -s -b $IP"
  mc_pair mckey-sendonly "mckey -m 239.1.1.2 -b $IP" "mckey -m 239.1.1.2 -s -o -b $IP"
}

# rdma-core's python tests (python3-pyverbs): the tests ship gzipped under
# /usr/share/doc; they are unpacked into the guest's /tmp. They look for the
# device's network interface in sysfs, which rxe and siw (virtual devices)
# lack: sysfs_netdev.py adds the link in a private mount namespace, so the
# tests run instead of skipping. Every test must pass, none may be skipped.
rdmacm_pyverbs() {
  local t0 log rc
  t0=$(ov_now); log=$OV_LOGDIR/pyverbs-test_rdmacm.log
  rm -rf /tmp/pyt && mkdir -p /tmp/pyt && cp -r /usr/share/doc/rdma-core/tests /tmp/pyt/ &&
    gunzip -f /tmp/pyt/tests/*.gz
  (cd /tmp/pyt && timeout -k 5 $((OV_TEST_TIMEOUT * 4)) unshare --mount --propagation private \
     sh -c 'python3 "$0" "$1" "$2" && exec python3 tests/run_tests.py --dev "$1" -v test_rdmacm' \
     "$OV_REPO/tests/rdmacm/kernel/sysfs_netdev.py" "$DEV" "$IP") >"$log" 2>&1; rc=$?
  # The verdict line of unittest: "OK", "OK (skipped=N)" or "FAILED (...)".
  local verdict; verdict=$(grep -E '^(OK|FAILED)' "$log" | tail -n1)
  if [ "$rc" = 0 ] && [ "$verdict" = OK ]; then
    ov_result PASS pyverbs-test_rdmacm "$t0" "($(grep -cE ' \.\.\. ok$' "$log") tests)"
  elif [ "$rc" = 0 ] && [ -n "${PYVERBS_SKIP_OK:-}" ] && [[ $verdict == "OK (skipped="* ]] &&
       ! grep -E ' \.\.\. skipped ' "$log" | grep -qvE -- "$PYVERBS_SKIP_OK"; then
    # The tests themselves decline the device, for a reason the group names.
    ov_result SKIP pyverbs-test_rdmacm "$t0" "($verdict: $PYVERBS_SKIP_WHY)"
  else
    ov_result FAIL pyverbs-test_rdmacm "$t0" "(exit $rc: ${verdict:-$(ov_tail "$log")})"
  fi
}
