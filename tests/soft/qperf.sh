#!/bin/sh
# qperf (Debian's, unmodified) on soft0 through our libibverbs: a server and
# a client on one host, in a private /dev/shm (a mount namespace of its own
# when the caller may make one; else the shared one, under ctest's
# soft_device lock).
#   qperf.sh LIBDIR [TEST...]
# Default tests: the set (rc_lat rc_bw rc_rdma_write_lat
# rc_rdma_read_bw ud_lat uc_lat rc_compare_swap_mr), polling the CQs (-cp1),
# one second each. Passes when the client exits 0 and reports a figure for
# every test, and no process of the pair reports an error.
set -u
if [ "${OV_QPERF_INNER:-}" != 1 ]; then
  command -v qperf > /dev/null || { echo "FAIL: qperf is not installed (tests/deps.sh)"; exit 1; }
  lib=$(cd "$1" && pwd); shift
  export OV_QPERF_INNER=1 OV_LIB="$lib"
  if [ "$(id -u)" = 0 ] && unshare --mount --propagation private true 2>/dev/null; then
    exec unshare --mount --propagation private sh "$0" "$@"
  fi
  export OV_QPERF_SHARED_SHM=1
  exec sh "$0" "$@"
fi
if [ "${OV_QPERF_SHARED_SHM:-}" != 1 ]; then
  mount -t tmpfs tmpfs /dev/shm || { echo "FAIL: no private /dev/shm"; exit 1; }
fi
[ $# -gt 0 ] || set -- rc_lat rc_bw rc_rdma_write_lat rc_rdma_read_bw ud_lat uc_lat rc_compare_swap_mr
export LD_LIBRARY_PATH="$OV_LIB" RDMAV_SOFT_DEVICES=1
logdir=$(mktemp -d /tmp/ovsoft-qperf.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
timeout 600 qperf -lp "$port" > "$logdir/server" 2>&1 &
spid=$!
hex=$(printf ':%04X ' "$port"); i=0
while [ $i -lt 200 ] && ! grep -q "$hex" /proc/net/tcp /proc/net/tcp6 2>/dev/null; do
  kill -0 $spid 2>/dev/null || break
  sleep 0.05; i=$((i + 1))
done
timeout 600 qperf -lp "$port" -t "${OV_QPERF_TIME:-1}" localhost -cp1 "$@" > "$logdir/client" 2>&1
crc=$?
kill $spid 2>/dev/null; wait $spid 2>/dev/null
echo "== client: qperf localhost -cp1 $* (exit $crc)"; cat "$logdir/client"
echo "== server"; cat "$logdir/server"
fail=""
[ $crc -eq 0 ] || fail="client exited $crc"
for t in "$@"; do
  # Each test prints its name and then "<figure> = <value> <unit>".
  awk -v t="$t:" '$1 == t {getline; if ($2 == "=" && $3 + 0 > 0) ok = 1} END {exit !ok}' \
    "$logdir/client" || fail="$fail; no figure for $t"
done
if grep -qiE 'fail|error|unable|invalid' "$logdir/client" "$logdir/server"; then
  fail="$fail; errors reported"
fi
rm -rf "$logdir"
[ -z "$fail" ] || { echo "FAIL: ${fail#; }"; exit 1; }
echo "PASS"
