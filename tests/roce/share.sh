#!/bin/sh
# Several processes on one RoCE v2 software device: who may share it.
# sroce0 on a veth end in a network namespace of its own; share_probe
# (tests/roce/share_probe.c) opens it and makes a QP1 (a UD QP with the GSI
# Q_Key, as a connection manager does):
#  1. the first process gets its QP1, and keeps its endpoint (the socket
#     file beside the segment) when a fork() child of it exits;
#  2. a second one, same /dev/shm, gets its own QP1 too;
#  3. one with a /dev/shm of its own (another device segment: another QP
#     number space) cannot open the device at all;
#  4. malformed datagrams handed to the first one's endpoint are dropped;
#  5. once the first is killed (SIGKILL), the next process to open the
#     device removes its endpoint file.
#
#   share.sh LIBDIR SHARE_PROBE_PROGRAM
#
# Root only (namespaces); exit 77 (skipped) otherwise.
set -u
LIB=$(cd "$1" && pwd); PROG=$2
# shellcheck source=tests/roce/ns_setup.sh
. "$(dirname "$0")/ns_setup.sh"
ovroce_private_mounts "$0" "$LIB" "$PROG"
ns=ovsh$$ nsp=ovshp$$ va=ovsa$$ vb=ovsb$$
dir=$(mktemp -d /tmp/ovroce-share.XXXXXX)
chmod 755 "$dir"
cleanup() { ip netns del $ns 2>/dev/null; ip netns del $nsp 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
ovroce_veth $ns $nsp $va $vb
ip -n $ns addr add 10.235.0.1/24 dev $va || exit 1
# probe NAME SECONDS [own|fork]: share_probe as "nobody" (own: a /dev/shm of
# its own; fork: a child of it exits first).
probe() {
  own="" fork=""
  [ "${3:-}" = own ] && own='mount -t tmpfs tmpfs /dev/shm && exec "$0" "$@"'
  [ "${3:-}" = fork ] && fork=fork
  ip netns exec $ns ${own:+sh -c "$own"} setpriv --reuid=65534 --regid=65534 --clear-groups \
    --inh-caps=-all env LD_LIBRARY_PATH="$LIB" RDMAV_SOFT_ROCE=$va VERBS_LOG_LEVEL=3 \
    timeout 60 "$PROG" sroce0 "$2" $fork > "$dir/$1" 2>&1
}
fail=0
expect() { # NAME LINE
  grep -qx "$2" "$dir/$1" || { echo "FAIL: $1: expected '$2'"; cat "$dir/$1"; fail=1; }
}
probe first 30 fork &
first=$!
i=0
until grep -q '^fork:' "$dir/first" 2>/dev/null; do
  i=$((i + 1)); [ $i -le 200 ] || { cat "$dir/first"; echo "FAIL: the first process did not start"; exit 1; }
  sleep 0.05
done
expect first "qp1: ok"
# Its fork() child's exit left its endpoint in place.
ep=$(ls /dev/shm/openverbs-65534/*.fwd-[0-9]* 2>/dev/null | head -1)
[ -n "$ep" ] || { echo "FAIL: no endpoint file beside the segment after a child's exit"; fail=1; }
probe second 0
expect second "open: ok"
expect second "qp1: ok"
probe other 0 own
expect other "open: Address already in use"
grep -q "shared with a process of another device segment" "$dir/other" ||
  { echo "FAIL: other: no diagnostic naming the other segment"; cat "$dir/other"; fail=1; }
# Malformed datagrams handed to the first process's endpoint (by a process
# of its user: another user cannot reach the directory): each dropped and
# logged, never handled.
if [ -n "$ep" ]; then
  ip netns exec $ns setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all /usr/bin/python3 -c '
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
hdr = struct.pack("<IIII", 0x4f565246, 0, 0, 0) + struct.pack("<H", 10) + bytes(26) + bytes(16)
for d in (b"short", b"\0" * 64 + b"payload", hdr[:-1], struct.pack("<H", 2).join([hdr[:16], hdr[18:]]) + b"x" * 40):
    s.sendto(d, sys.argv[1])
' "$ep"
  i=0
  until [ "$(grep -c 'handed on by a process of this user was dropped' "$dir/first")" -ge 4 ]; do
    i=$((i + 1)); [ $i -le 100 ] || { echo "FAIL: malformed handed datagrams not all dropped"; fail=1; break; }
    sleep 0.05
  done
fi
# SIGKILL: the next process to open the device removes the endpoint file.
pkill -KILL -f "share_probe sroce0 30"
wait $first 2>/dev/null
# (Until it is reaped: a zombie still counts as a process.)
i=0
while [ -n "$ep" ] && kill -0 "${ep##*fwd-}" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
probe after 0
expect after "open: ok"
expect after "qp1: ok"
[ -n "$ep" ] && [ -e "$ep" ] && { echo "FAIL: the killed process's endpoint file stayed"; fail=1; }
for f in first second other after; do echo "== $f"; cat "$dir/$f"; done
[ $fail -eq 0 ] || { echo FAIL; exit 1; }
echo "PASS"
