# shellcheck shell=bash disable=SC2034
# Helpers for test-bed groups (bash; source it from a group script):
#   . "$OV_REPO/tests/vm/lib.sh"
# Every helper prints exactly one result line on stdout:
#   PASS|FAIL|XFAIL <group>/<name> <seconds> [free-form note]
# and keeps the test's own output in $OV_LOGDIR/<name>.log.
# Tunables from the environment: OV_TEST_TIMEOUT (seconds per program, default 90).

OV_GROUP=${OV_GROUP:-$(basename "$0" .sh)}
OV_GROUP=${OV_GROUP#vm-group-}
OV_LOGDIR=${OV_LOGDIR:-${OV_RESULTS:-/tmp}/logs/$OV_GROUP}
OV_TEST_TIMEOUT=${OV_TEST_TIMEOUT:-90}
mkdir -p "$OV_LOGDIR"
ov_failed=0

# ov_sleep SECONDS: sleeps without starting a process (every exec is slow
# under TCG): a read with a timeout on a pipe that never delivers.
exec {ov_sleep_fd}<> <(:)
ov_sleep() { read -r -t "$1" -u "$ov_sleep_fd" _; return 0; }

# ov_tcp_listening PORT [PID]: a TCP socket (v4 or v6) listens on PORT in the
# network namespace of PID (default: ours).
ov_tcp_listening() {
  local hex f sl local_addr rem st _ pid=${2:-self}
  printf -v hex '%04X' "$1"
  for f in /proc/"$pid"/net/tcp /proc/"$pid"/net/tcp6; do
    while read -r sl local_addr rem st _; do
      [ "$st" = 0A ] && [ "${local_addr##*:}" = "$hex" ] && return 0
    done <"$f"
  done 2>/dev/null
  return 1
}

# ov_udp_bound PORT [PID]: a UDP socket (v4 or v6) is bound to PORT in the
# network namespace of PID (default: ours).
ov_udp_bound() {
  local hex f sl local_addr _ pid=${2:-self}
  printf -v hex '%04X' "$1"
  for f in /proc/"$pid"/net/udp /proc/"$pid"/net/udp6; do
    while read -r sl local_addr _; do
      [ "${local_addr##*:}" = "$hex" ] && return 0
    done <"$f"
  done 2>/dev/null
  return 1
}

# Microseconds since the epoch, without starting a process.
ov_now() { echo "${EPOCHREALTIME//[!0-9]/}"; }
ov_secs() { local d=$(( $(ov_now) - $1 )); printf '%d.%02d' $((d / 1000000)) $((d % 1000000 / 10000)); }

# ov_result STATUS NAME START_US [note]
ov_result() {
  local st=$1 name=$2 t0=$3; shift 3
  [ "$st" = FAIL ] && ov_failed=1
  echo "$st $OV_GROUP/$name $(ov_secs "$t0")${*:+ $*}"
}

# ov_loader_error LOG: true when the log shows the dynamic loader refusing a library.
ov_loader_error() {
  grep -qE 'error while loading shared libraries|symbol lookup error|version `[^'"'"']*'"'"' not found|cannot be preloaded' "$1"
}

# ov_check NAME LOG RC [PATTERN] START_US [NOTE]: PASS when RC is 0 and (if
# given) the log matches the extended regular expression PATTERN. A failure's
# note is NOTE, or else the log's last meaningful line.
ov_check() {
  local name=$1 log=$2 rc=$3 pat=${4:-} t0=$5 tail=${6:-} core=""
  [ -n "$tail" ] || tail=$(ov_tail "$log")
  ov_backtraces "$log" && core="; a core's backtraces are in $log"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    ov_result FAIL "$name" "$t0" "(timed out after ${OV_TEST_TIMEOUT}s; log $log$core)"
  elif [ "$rc" != 0 ]; then
    ov_result FAIL "$name" "$t0" "(exit $rc: $tail$core)"
  elif [ -n "$pat" ] && ! grep -qE -- "$pat" "$log"; then
    ov_result FAIL "$name" "$t0" "(output lacks /$pat/; log $log)"
  else
    ov_result PASS "$name" "$t0"
  fi
}

# ov_backtraces LOG: a program of the test that died of a signal left a core
# in $OV_CORE_DIR (guest-init.sh points the kernel's core_pattern there, as
# core.<path with ! for />.<pid>): append every thread's backtrace to LOG, so
# that a crash seen once in CI can be read afterwards, then keep the core
# under $OV_LOGDIR/cores for gdb on the host.
# True when there was one.
ov_backtraces() {
  local log=$1 core exe found=1
  [ -n "${OV_CORE_DIR:-}" ] && [ -d "$OV_CORE_DIR" ] || return 1
  for core in "$OV_CORE_DIR"/core.*; do
    [ -f "$core" ] || continue
    found=0
    exe=${core##*/core.}; exe=${exe%.*}; exe=${exe//!//}
    {
      echo "+ core dump of $exe: ${core##*/} (kept in $OV_LOGDIR/cores)"
      timeout 120 gdb -batch -nx -q -ex 'info sharedlibrary' -ex 'thread apply all bt' \
        "$exe" "$core" 2>&1 | grep -v '^\[New LWP'
    } >>"$log"
    mkdir -p "$OV_LOGDIR/cores" && mv "$core" "$OV_LOGDIR/cores/"
  done
  return $found
}

# Last meaningful line of a log, for the result note.
ov_tail() { grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -n1 | cut -c1-160; }

# ov_run NAME [--expect REGEX] -- CMD...: one program; PASS when it exits 0.
ov_run() {
  local name=$1 pat="" t0 log rc; shift
  if [ "${1:-}" = --expect ]; then pat=$2; shift 2; fi
  [ "${1:-}" = -- ] && shift
  log=$OV_LOGDIR/$name.log; t0=$(ov_now)
  { echo "+ $*"; timeout -k 5 "$OV_TEST_TIMEOUT" "$@"; } >"$log" 2>&1; rc=$?
  ov_check "$name" "$log" "$rc" "$pat" "$t0"
}

# ov_wait_listen KIND PID: waits until the server started as PID (through
# timeout(1)) is ready, or dead.
#   KIND tcp:PORT  a TCP socket listens on PORT (ibverbs-utils, perftest)
#   KIND udp:PORT  a UDP socket is bound to PORT (bench/roce's udp_pingpong)
#   KIND cm        an rdma_cm id is listening (perftest -R, rdma_server ...)
#   KIND roce      a server of ours on an sroce device opened it (UDP port 4791
#                  bound in its network namespace): rdma_cm over sroce
#   KIND sleep:S   S seconds, for a server that listens for nothing (a
#                  multicast receiver joining its group: mckey)
ov_wait_listen() {
  local kind=$1 pid=$2 i
  for ((i = 0; i < OV_TEST_TIMEOUT * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || return 1
    case $kind in
      tcp:*)
        # In the server's network namespace (a server started as
        # "ip netns exec NS ..." listens there): PID is timeout(1), the
        # server its child.
        local srv=""
        read -r srv _ <"/proc/$pid/task/$pid/children" 2>/dev/null
        ov_tcp_listening "${kind#tcp:}" "${srv:-self}" && return 0 ;;
      udp:*)
        # A UDP server bound to the port in its network namespace (PID is
        # timeout(1), the server its child).
        local child=""
        read -r child _ <"/proc/$pid/task/$pid/children" 2>/dev/null
        [ -n "$child" ] && ov_udp_bound "${kind#udp:}" "$child" && return 0 ;;
      roce)
        # A server on our RoCE v2 device (sroce): its device's UDP port
        # 4791 is bound in the server's network namespace (the device
        # opens when the id binds, the listen follows at once): PID is
        # timeout(1), the server its child; then a moment for the listen.
        local child=""
        read -r child _ <"/proc/$pid/task/$pid/children" 2>/dev/null
        if [ -n "$child" ] && ov_udp_bound 4791 "$child"; then ov_sleep 1; return 0; fi ;;
      sleep:*)
        ov_sleep "${kind#sleep:}"; return 0 ;;
      cm)
        # Only this server's listener counts (a previous server's may linger):
        # PID is timeout(1), the server is its child.
        local child=""
        read -r child _ <"/proc/$pid/task/$pid/children" 2>/dev/null
        # The kernel shows LISTEN before its IB CM listens for the service
        # ID (rdma_listen sets the state first): a REQ in between gets REJ 8
        # (invalid service ID), seen under TCG on a loaded host; a moment more.
        if [ -n "$child" ] && rdma res show cm_id 2>/dev/null |
          grep -qE "state LISTEN.* pid $child( |$)"; then ov_sleep 1; return 0; fi ;;
    esac
    ov_sleep 0.1
  done
  return 1
}

# ov_pair NAME WAIT "SERVER CMD" "CLIENT CMD": client/server pair on this host.
# WAIT as for ov_wait_listen. PASS when both exit 0.
ov_pair() {
  local name=$1 wait=$2 srv=$3 cli=$4 t0 log rc src spid
  log=$OV_LOGDIR/$name.log; t0=$(ov_now)
  : >"$log"
  echo "+ server: $srv" >>"$log"
  # shellcheck disable=SC2086
  timeout -k 5 "$OV_TEST_TIMEOUT" $srv >"$log.server" 2>&1 &
  spid=$!
  if ! ov_wait_listen "$wait" "$spid"; then
    kill "$spid" 2>/dev/null; wait "$spid"; src=$?
    cat "$log.server" >>"$log"; rm -f "$log.server"
    ov_result FAIL "$name" "$t0" "(server never listened, exit $src: $(ov_tail "$log"))"
    return
  fi
  echo "+ client: $cli" >>"$log"
  # shellcheck disable=SC2086
  timeout -k 5 "$OV_TEST_TIMEOUT" $cli >"$log.client" 2>&1; rc=$?
  [ "$rc" = 0 ] || { ov_sleep 0.5; kill "$spid" 2>/dev/null; }
  wait "$spid"; src=$?
  # The note of a failed pair: each failed side's last line (a server that
  # fails because its client did would hide the client's reason).
  local note=""
  [ "$rc" = 0 ] || note="client: $(ov_tail "$log.client")"
  [ "$src" = 0 ] || note="${note:+$note; }server (exit $src): $(ov_tail "$log.server")"
  { cat "$log.client"; echo "+ server output (exit $src):"; cat "$log.server"; } >>"$log"
  rm -f "$log.server" "$log.client"
  if [ "$rc" = 0 ] && [ "$src" != 0 ]; then rc=$src; fi
  ov_check "$name" "$log" "$rc" "" "$t0" "$note"
}

# ov_pair_retry: ov_pair, run up to twice more (RETRY_RUNS runs in all, 3 by
# default) while a run fails with a symptom known not to be ours (a kernel
# device under qemu, a program's own race): RETRY_SYMPTOM, an extended
# regular expression set by the group, with RETRY_REASON for the note. The failed runs' logs are kept as NAME.run1.log, NAME.run2.log and
# the result line says how many runs it took. Two runs in a row hit siw's
# connection race once in a CI run under load (2026-11-25).
ov_pair_retry() {
  local name=$1 line run=1
  line=$(ov_pair "$@")
  while [ "$run" -lt "${RETRY_RUNS:-3}" ] && [[ $line == FAIL* ]] && [ -n "${RETRY_SYMPTOM:-}" ] &&
     grep -qE -- "$RETRY_SYMPTOM" "$OV_LOGDIR/$name.log"; do
    cp "$OV_LOGDIR/$name.log" "$OV_LOGDIR/$name.run$run.log"
    run=$((run + 1))
    line="$(ov_pair "$@") (run $run: the runs before hit /$RETRY_SYMPTOM/, $RETRY_REASON)"
  done
  [[ $line == FAIL* ]] && ov_failed=1
  echo "$line"
}

# ov_xfail NAME "REASON" REGEX -- CMD...: a known-unsupported case. XFAIL when the
# program fails and its output matches REGEX (the known symptom); FAIL when it
# passes or fails some other way (for example, the library did not load).
ov_xfail() {
  local name=$1 reason=$2 pat=$3 t0 log rc; shift 3
  [ "${1:-}" = -- ] && shift
  log=$OV_LOGDIR/$name.log; t0=$(ov_now)
  { echo "+ $*"; timeout -k 5 "$OV_TEST_TIMEOUT" "$@"; } >"$log" 2>&1; rc=$?
  ov_xcheck "$name" "$reason" "$pat" "$log" "$rc" "$t0"
}

# ov_xfail_pair NAME "REASON" REGEX WAIT "SERVER CMD" "CLIENT CMD": the same for a
# pair; the server is given a short time to listen (it may refuse at once).
ov_xfail_pair() {
  local name=$1 reason=$2 pat=$3 wait=$4 srv=$5 cli=$6 t0 log rc src spid cpid i
  log=$OV_LOGDIR/$name.log; t0=$(ov_now)
  echo "+ server: $srv" >"$log"
  # shellcheck disable=SC2086
  timeout -k 5 "$OV_TEST_TIMEOUT" $srv >"$log.server" 2>&1 &
  spid=$!
  if ov_wait_listen "$wait" "$spid"; then
    echo "+ client: $cli" >>"$log"
    # shellcheck disable=SC2086
    timeout -k 5 "$OV_TEST_TIMEOUT" $cli >>"$log" 2>&1 &
    cpid=$!
    # A failed peer can leave the other side waiting for a message that never
    # comes: once one side has exited, the other gets 3 s to finish.
    while kill -0 "$cpid" 2>/dev/null && kill -0 "$spid" 2>/dev/null; do ov_sleep 0.1; done
    for ((i = 0; i < 30; i++)); do
      kill -0 "$cpid" 2>/dev/null || kill -0 "$spid" 2>/dev/null || break
      ov_sleep 0.1
    done
    kill "$cpid" "$spid" 2>/dev/null
    wait "$cpid"; rc=$?
    wait "$spid"; src=$?
    echo "+ client exit $rc after $(ov_secs "$t0") s" >>"$log"
    [ "$rc" = 0 ] && rc=$src
  else
    wait "$spid"; rc=$?; src=$rc
  fi
  { echo "+ server output (exit $src):"; cat "$log.server"; } >>"$log"; rm -f "$log.server"
  ov_xcheck "$name" "$reason" "$pat" "$log" "$rc" "$t0"
}

ov_xcheck() {
  local name=$1 reason=$2 pat=$3 log=$4 rc=$5 t0=$6
  ov_backtraces "$log"
  if [ "$rc" = 0 ]; then
    ov_result FAIL "$name" "$t0" "(expected to fail: $reason; it passed)"
  elif ov_loader_error "$log"; then
    ov_result FAIL "$name" "$t0" "(library did not load: $(ov_tail "$log"))"
  elif grep -qE -- "$pat" "$log"; then
    ov_result XFAIL "$name" "$t0" "($reason)"
  else
    ov_result FAIL "$name" "$t0" "(failed, but not with the known symptom /$pat/: $(ov_tail "$log"))"
  fi
}

# ov_require_ours "REASON": for groups that test what only the project's library
# has (the software device, ...). Under --baseline (Debian's libraries) it prints
#   SKIP <group>/all 0.00 (REASON)
# and ends the group; otherwise it returns.
ov_require_ours() {
  if [ "${OV_MODE:-}" = baseline ]; then
    echo "SKIP $OV_GROUP/all 0.00 (baseline run: ${1:-needs the library of this project})"
    exit 0
  fi
}

# A group ends with: exit "$ov_failed"   (0 when nothing failed)
