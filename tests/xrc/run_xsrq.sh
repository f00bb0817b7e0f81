#!/bin/sh
# Debian's unmodified ibv_xsrq_pingpong on the software device: one server
# (-c CLIENTS) and CLIENTS client processes started at once, all with our
# libibverbs first on LD_LIBRARY_PATH and RDMAV_SOFT_DEVICES=1. Every process
# opens the XRC domain of /tmp/xrc_domain (as the program always does), so
# they all share one domain on soft0.
#
#   run_xsrq.sh LIBDIR CLIENTS TIMEOUT [EXTRA ARGS...]
#
# Passes when the server and every client exit 0.
set -u
LIB=$1; N=$2; TMO=$3; shift 3
export LD_LIBRARY_PATH="$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export RDMAV_SOFT_DEVICES=1
logdir=$(mktemp -d /tmp/ov-xsrq.XXXXXX)
trap 'rm -rf "$logdir"' EXIT

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
timeout "$TMO" ibv_xsrq_pingpong -d soft0 -p "$PORT" -c "$N" "$@" >"$logdir/server" 2>&1 &
spid=$!
hex=$(printf ':%04X ' "$PORT")
i=0
while [ $i -lt 400 ] && ! grep -q "$hex" /proc/net/tcp /proc/net/tcp6 2>/dev/null; do
  kill -0 $spid 2>/dev/null || break
  sleep 0.05; i=$((i + 1))
done
pids=""
c=1
while [ $c -le "$N" ]; do
  timeout "$TMO" ibv_xsrq_pingpong -d soft0 -p "$PORT" "$@" localhost >"$logdir/client$c" 2>&1 &
  pids="$pids $!"
  c=$((c + 1))
done
fail=0
c=1
for p in $pids; do
  wait "$p"; rc=$?
  echo "== client $c: exit $rc"; cat "$logdir/client$c"
  [ $rc -eq 0 ] || fail=1
  c=$((c + 1))
done
wait $spid; src=$?
echo "== server (-c $N $*): exit $src"; cat "$logdir/server"
[ $src -eq 0 ] || fail=1
[ $fail -eq 0 ] || { echo "FAIL"; exit 1; }
echo "PASS: server and $N clients"
exit 0
