#!/bin/bash
# Test-bed group of the connection set-up benchmark (issue 13). Not picked up
# by the normal test-bed runs: bench/rdmacm/cmtime-vm.sh passes it with
# --group.
#
# Debian's cmtime (rdmacm-utils, unmodified) in one guest, BENCH_ROUNDS
# rounds (default 3) of, in turn:
#   soft0        our librdmacm + libibverbs, RDMAV_SOFT_DEVICES=1, 127.0.0.1
#                (the software CM in user space);
#   rxe0-debian  Debian's libraries on rxe0 ($RXE_IP): the kernel's CM, the
#                anchor;
#   rxe0-ours    our libraries on rxe0 (kernel CM through our library), for
#                information.
# Each run is a server (cmtime -b ADDR -p PORT) and a client making
# BENCH_CONNECTIONS (default 100) connections (cmtime -s ADDR -p PORT -c N);
# the client's table gives microseconds per connection for every step.
# Writes "CONFIG ROUND STEP US_PER_CONN" lines to $OV_LOGDIR/numbers.txt
# (STEP: create_id resolve_addr resolve_route create_qp connect disconnect
# destroy); cmtime-vm.sh prints the table. A result line is PASS when the
# measurement itself succeeded; the targets are judged by cmtime-vm.sh.
. "$OV_REPO/tests/vm/lib.sh"
ov_require_ours "compares the software device with rxe0"
if ! mountpoint -q /dev/shm 2>/dev/null; then
  mkdir -p /dev/shm && mount -t tmpfs -o mode=1777 tmpfs /dev/shm
fi
rounds=${BENCH_ROUNDS:-3}
conns=${BENCH_CONNECTIONS:-100}
numbers=$OV_LOGDIR/numbers.txt
: >"$numbers"
# Address-space randomisation off in the guest (BENCH_ASLR=on keeps it), for
# every configuration alike, and one untimed warm-up round of each. Under
# qemu's TCG a guest program's code runs only after qemu has translated it,
# and a translation is kept per virtual address: a fresh process whose
# libraries land at new addresses translates all its user-space code again
# (in this guest about 9 ms in the software CM's first rdma_resolve_addr,
# 1.8 ms when the addresses repeat), while the kernel's CM, at fixed
# addresses, was translated once for the whole boot. That cost belongs to the
# emulator, not to either CM (a real CPU or KVM has no such step), so both
# sides run with repeatable addresses and their code translated.
aslr_was=$(cat /proc/sys/kernel/randomize_va_space 2>/dev/null)
if [ "${BENCH_ASLR:-off}" != on ] && [ -n "$aslr_was" ]; then
  echo 0 >/proc/sys/kernel/randomize_va_space
  trap 'echo "$aslr_was" >/proc/sys/kernel/randomize_va_space' EXIT
fi
echo "aslr $(cat /proc/sys/kernel/randomize_va_space 2>/dev/null || echo '?') warmup ${BENCH_WARMUP:-1}" >"$OV_LOGDIR/settings.txt"
port=7600

# cfg_env CONFIG: the env(1) command line that selects the configuration's
# libraries and devices (an array, so that "CMD &" stays one process: $! is
# then timeout(1), whose child is cmtime, as ov_wait_listen expects).
cfg_env() {
  case $1 in
    soft0) pre=(env -u LD_PRELOAD LD_LIBRARY_PATH="$OV_LIB_DIR" RDMAV_SOFT_DEVICES=1) ;;
    rxe0-ours) pre=(env -u LD_PRELOAD -u RDMAV_SOFT_DEVICES LD_LIBRARY_PATH="$OV_LIB_DIR") ;;
    *) pre=(env -u LD_LIBRARY_PATH -u LD_PRELOAD -u RDMAV_SOFT_DEVICES) ;;
  esac
}

# The server listens: on soft0 its CM socket exists, on rxe0 the kernel
# lists its listening cm_id.
wait_server() {
  local cfg=$1 pid=$2 i
  if [ "$cfg" != soft0 ]; then ov_wait_listen cm "$pid"; return; fi
  for ((i = 0; i < OV_TEST_TIMEOUT * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || return 1
    ls "/dev/shm/openverbs-$(id -u)/cm/" 2>/dev/null | grep -q -- "^tcp-$port-" && return 0
    ov_sleep 0.1
  done
  return 1
}

# one CONFIG ROUND: one server/client pair; its steps into numbers.txt.
one() {
  local cfg=$1 r=$2 addr log t0 spid rc pre out=$numbers
  [ "$r" -ge 1 ] || out=$OV_LOGDIR/warmup.txt
  cfg_env "$cfg"
  port=$((port + 1))
  [ "$cfg" = soft0 ] && addr=127.0.0.1 || addr=$RXE_IP
  log=$OV_LOGDIR/cmtime-$cfg-$r.log; t0=$(ov_now)
  echo "+ server: cmtime -b $addr -p $port ($cfg)" >"$log"
  "${pre[@]}" timeout -k 5 "$OV_TEST_TIMEOUT" cmtime -b "$addr" -p "$port" >"$log.server" 2>&1 &
  spid=$!
  if ! wait_server "$cfg" "$spid"; then
    kill "$spid" 2>/dev/null; wait "$spid"
    cat "$log.server" >>"$log"; rm -f "$log.server"
    ov_result FAIL "cmtime-$cfg-$r" "$t0" "(server never listened: $(ov_tail "$log"))"
    return
  fi
  echo "+ client: cmtime -s $addr -p $port -c $conns" >>"$log"
  "${pre[@]}" timeout -k 5 "$OV_TEST_TIMEOUT" cmtime -s "$addr" -p "$port" -c "$conns" >>"$log" 2>&1
  rc=$?
  kill "$spid" 2>/dev/null; wait "$spid"
  { echo "+ server output:"; cat "$log.server"; } >>"$log"; rm -f "$log.server"
  # "create id    :   total   max   min   us/conn": the last column.
  awk -v c="$cfg" -v r="$r" -F: '
    /^(create id|resolve addr|resolve route|create qp|connect|disconnect|destroy) *:/ {
      s = $1; sub(/ +$/, "", s); gsub(/ /, "_", s); n = split($2, f, " "); print c, r, s, f[n] }' \
    "$log" >>"$out"
  if [ "$rc" = 0 ] && [ "$(grep -c "^$cfg $r " "$out")" = 7 ]; then
    ov_result PASS "cmtime-$cfg-$r" "$t0"
  else
    ov_result FAIL "cmtime-$cfg-$r" "$t0" "(exit $rc: $(ov_tail "$log"))"
  fi
}

# Warm-up rounds are numbered from 1-BENCH_WARMUP to 0; cmtime-vm.sh reads
# rounds 1 and later only.
for ((r = 1 - ${BENCH_WARMUP:-1}; r <= rounds; r++)); do
  for cfg in soft0 rxe0-debian rxe0-ours; do one "$cfg" "$r"; done
done
# The same client steps timed per step instead of per id
# (bench/rdmacm/cm_steps.c): "steps CONFIG ROUND STEP US_PER_ID" lines.
if [ -x "$OV_BUILD_DIR/bin/cm_steps" ]; then
  for cfg in soft0 rxe0-debian; do
    cfg_env "$cfg"
    [ "$cfg" = soft0 ] && addr=127.0.0.1 || addr=$RXE_IP
    log=$OV_LOGDIR/cm_steps-$cfg.log; t0=$(ov_now)
    "${pre[@]}" timeout -k 5 "$OV_TEST_TIMEOUT" "$OV_BUILD_DIR/bin/cm_steps" "$addr" "$conns" "$rounds" >"$log" 2>&1
    rc=$?
    awk -v c="$cfg" '$1 == "cm_steps" { print "steps", c, $2, $3, $4 }' "$log" >>"$numbers"
    if [ "$rc" = 0 ]; then ov_result PASS "cm_steps-$cfg" "$t0"
    else ov_result FAIL "cm_steps-$cfg" "$t0" "(exit $rc: $(ov_tail "$log"))"; fi
  done
fi
# cmtime's own bookkeeping per connection (bench/rdmacm/clock_floor.c):
# "floor 0 clock US" in numbers.txt.
if [ -x "$OV_BUILD_DIR/bin/clock_floor" ]; then
  "$OV_BUILD_DIR/bin/clock_floor" "$conns" >"$OV_LOGDIR/clock_floor.log" 2>&1
  awk '$1 == "clock_floor" { print "floor 0 clock", $2 }' "$OV_LOGDIR/clock_floor.log" >>"$numbers"
fi
exit "$ov_failed"
