#!/bin/sh
# Runs one of Debian's unmodified RDMA programs on the software device, as a
# server/client pair over a free TCP port, with our libibverbs first on
# LD_LIBRARY_PATH and RDMAV_SOFT_DEVICES=1.
#
#   run_pair.sh LIBDIR TIMEOUT PROGRAM [ARGS...]         server + client
#   run_pair.sh --single LIBDIR TIMEOUT PROGRAM [ARGS...] one process
#   run_pair.sh --async LIBDIR TIMEOUT PATTERN PROGRAM [ARGS...]
#        runs PROGRAM until TIMEOUT and passes if its output matches PATTERN
#
# The client gets "localhost" appended. "%PORT%" in ARGS is replaced by the
# port. Passes when both exit 0 (and, when no other process uses the device,
# nothing of the device is left in /dev/shm).
set -u
# shellcheck source=tests/perftest_rerun.sh
. "$(dirname "$0")/../perftest_rerun.sh"
perftest_rerun "$0" "$@"
mode=pair
case "$1" in --single) mode=single; shift ;; --async) mode=async; shift ;; esac
LIB=$1; TMO=$2; shift 2
pattern=""
if [ $mode = async ]; then pattern=$1; shift; fi
export LD_LIBRARY_PATH="$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export RDMAV_SOFT_DEVICES=1
shmdir="/dev/shm/openverbs-$(id -u)"
logdir=$(mktemp -d /tmp/ovsoft-test.XXXXXX)
trap 'rm -rf "$logdir"' EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

check_clean() {
  # Only meaningful when no other process has the device open.
  if [ -e "$shmdir" ] && ! fuser -s "$shmdir"/* 2>/dev/null; then
    sleep 0.2
    if ls "$shmdir"/soft* >/dev/null 2>&1 && ! fuser -s "$shmdir"/* 2>/dev/null; then
      echo "FAIL: state left in $shmdir after all processes exited:"; ls -la "$shmdir"
      return 1
    fi
  fi
  return 0
}

case $mode in
single)
  timeout "$TMO" "$@"; rc=$?
  [ $rc -eq 0 ] || { echo "FAIL: $1 exited $rc"; exit 1; }
  check_clean || exit 1
  exit 0 ;;
async)
  timeout "$TMO" "$@" > "$logdir/out" 2>&1
  cat "$logdir/out"
  grep -q "$pattern" "$logdir/out" || { echo "FAIL: no '$pattern' in the output"; exit 1; }
  exit 0 ;;
esac

PORT=$(free_port)
args=""
for a in "$@"; do args="$args $(printf '%s' "$a" | sed "s/%PORT%/$PORT/g")"; done
# shellcheck disable=SC2086
set -- $args
prog=$1; shift
case $prog in
  ib_*) portopt="-p $PORT" ;;
  *) portopt="-p $PORT" ;;
esac
# shellcheck disable=SC2086
timeout "$TMO" "$prog" $portopt "$@" > "$logdir/server" 2>&1 &
spid=$!
hex=$(printf ':%04X ' "$PORT")
i=0
while [ $i -lt 200 ] && ! grep -q "$hex" /proc/net/tcp /proc/net/tcp6 2>/dev/null; do
  kill -0 $spid 2>/dev/null || break
  sleep 0.05; i=$((i + 1))
done
# shellcheck disable=SC2086
timeout "$TMO" "$prog" $portopt "$@" localhost > "$logdir/client" 2>&1
crc=$?
wait $spid
src=$?
echo "== server ($prog $portopt $*): exit $src"; cat "$logdir/server"
echo "== client: exit $crc"; cat "$logdir/client"
[ $src -eq 0 ] && [ $crc -eq 0 ] || { echo "FAIL: server $src, client $crc"; exit 1; }
check_clean || exit 1
exit 0
