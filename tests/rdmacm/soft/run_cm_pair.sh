#!/bin/sh
# Runs one rdma_cm program pair (Debian's unmodified binaries) on the soft
# devices with our librdmacm and libibverbs, in a private /dev/shm:
#   run_cm_pair.sh LIBDIR TIMEOUT "SERVER COMMAND" "CLIENT COMMAND" [--server-stays]
#                  [--tcp-port PORT]
# --server-stays: the server never exits by itself (cmtime's): it is
# stopped once the client is done, and only the client's status counts.
# The client starts once the server's CM socket exists (the software CM
# binds /dev/shm/openverbs-<uid>/cm/<ps>-<port>-<addr> when it listens), or
# with --tcp-port, once the server listens on that TCP port (programs that
# meet first over a socket of their own, as libfabric's fi_pingpong does).
# --tcp-port auto picks a port nobody listens on (runs on one host share the
# network namespace) and passes it to both commands as $OV_TCP_PORT.
# Passes when both exit 0 within TIMEOUT seconds. (A program that exits
# without destroying its listening id leaves its socket path behind, as fio's
# server does; the software CM reclaims such a path at the next bind, so it
# is not checked here.)
set -u
# shellcheck source=tests/perftest_rerun.sh
. "$(dirname "$0")/../../perftest_rerun.sh"
perftest_rerun "$0" "$@"
if [ "${OV_CM_PAIR_INNER:-}" != 1 ]; then
  export OV_CM_PAIR_INNER=1
  exec sh "$(dirname "$0")/private_shm.sh" "$1" sh "$0" "$@"
fi
lib=$1 limit=$2 server=$3 client=$4
shift 4
stays= tcp_port=
while [ $# -gt 0 ]; do
  case "$1" in
  --server-stays) stays=$1 ;;
  --tcp-port) tcp_port=$2; shift ;;
  *) echo "run_cm_pair.sh: unknown option $1"; exit 2 ;;
  esac
  shift
done
dir="/dev/shm/openverbs-$(id -u)/cm"
# Whether something listens on TCP port $1 (state 0A in /proc/net/tcp{,6}).
listening() {
  hex=$(printf '%04X' "$1")
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
    awk -v p=":$hex" '$2 ~ p"$" && $4 == "0A" { found = 1 } END { exit !found }'
}
if [ "$tcp_port" = auto ]; then
  i=0
  while :; do
    tcp_port=$(( $(od -An -N2 -tu2 /dev/urandom) % 20000 + 40000 ))
    listening "$tcp_port" || break
    i=$((i + 1)); [ $i -lt 50 ] || { echo "FAIL: no free TCP port"; exit 1; }
  done
fi
export OV_TCP_PORT="$tcp_port"
# Whether the server is ready for the client.
ready() {
  if [ -n "$tcp_port" ]; then
    listening "$tcp_port"
  else
    ls "$dir" 2>/dev/null | grep -q -- '-'
  fi
}
log=$(mktemp)
timeout "$limit" sh -c "$server" > "$log" 2>&1 &
spid=$!
i=0
while [ $i -lt 600 ] && ! ready; do
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
