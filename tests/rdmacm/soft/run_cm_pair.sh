#!/bin/sh
# Runs one rdma_cm program pair (Debian's unmodified binaries) on the soft
# devices with our librdmacm and libibverbs, in a private /dev/shm:
#   run_cm_pair.sh LIBDIR TIMEOUT "SERVER COMMAND" "CLIENT COMMAND" [--server-stays]
# --server-stays: the server never exits by itself (cmtime's): it is
# stopped once the client is done, and only the client's status counts.
# The client starts once the server's CM socket exists (the software CM
# binds /dev/shm/openverbs-<uid>/cm/<ps>-<port>-<addr> when it listens).
# Passes when both exit 0 within TIMEOUT seconds. (A program that exits
# without destroying its listening id leaves its socket path behind, as fio's
# server does; the software CM reclaims such a path at the next bind, so it
# is not checked here.)
set -u
if [ "${OV_CM_PAIR_INNER:-}" != 1 ]; then
  export OV_CM_PAIR_INNER=1
  exec sh "$(dirname "$0")/private_shm.sh" "$1" sh "$0" "$@"
fi
lib=$1 limit=$2 server=$3 client=$4 stays=${5:-}
dir="/dev/shm/openverbs-$(id -u)/cm"
log=$(mktemp)
timeout "$limit" sh -c "$server" > "$log" 2>&1 &
spid=$!
i=0
while [ $i -lt 600 ] && ! ls "$dir" 2>/dev/null | grep -q -- '-'; do
  kill -0 $spid 2>/dev/null || break
  sleep 0.05; i=$((i + 1))
done
status=0
timeout "$limit" sh -c "$client" || status=$?
if [ "$stays" = --server-stays ]; then
  kill $spid 2>/dev/null; wait $spid 2>/dev/null || true
else
  wait $spid || { s=$?; [ $status -eq 0 ] && status=$s; }
fi
echo "-- server ($server):"; cat "$log"; rm -f "$log"
[ $status -eq 0 ] && echo PASS || echo "FAIL ($status)"
exit $status
