#!/bin/sh
# Port state events on the RoCE v2 software device: sroce0 on one end of a
# veth pair in a network namespace of its own; port_events (tests/roce/
# port_events.c) waits for them while this script takes the interface down
# and brings it up again. It must see IBV_EVENT_PORT_ERR, then
# IBV_EVENT_PORT_ACTIVE, as a program on the kernel's rxe does.
#
#   port_events.sh LIBDIR PORT_EVENTS_PROGRAM
#
# Root only (namespaces); exit 77 (skipped) otherwise.
set -u
LIB=$(cd "$1" && pwd); PROG=$2
# shellcheck source=tests/roce/ns_setup.sh
. "$(dirname "$0")/ns_setup.sh"
ovroce_private_mounts "$0" "$LIB" "$PROG"
ns=ovpe$$ nsp=ovpep$$ va=ovea$$ vb=oveb$$
out=$(mktemp /tmp/ovroce-port.XXXXXX)
cleanup() { ip netns del $ns 2>/dev/null; ip netns del $nsp 2>/dev/null; rm -f "$out"; }
trap cleanup EXIT
ovroce_veth $ns $nsp $va $vb
ip -n $ns addr add 10.234.0.1/24 dev $va || exit 1
up() { ip -n $ns link show $va | grep -q 'state UP'; }
i=0
until up; do i=$((i + 1)); [ $i -le 200 ] || { echo "FAIL: the link is not up"; exit 1; }; sleep 0.05; done
ip netns exec $ns env LD_LIBRARY_PATH="$LIB" RDMAV_SOFT_ROCE=$va VERBS_LOG_LEVEL=3 \
  timeout 60 "$PROG" sroce0 > "$out" 2>&1 &
pid=$!
i=0
until grep -q '^ready' "$out"; do
  i=$((i + 1)); [ $i -le 200 ] && kill -0 $pid 2>/dev/null || { cat "$out"; echo "FAIL: not ready"; exit 1; }
  sleep 0.05
done
ip -n $ns link set $va down
sleep 0.5
ip -n $ns link set $va up
wait $pid
rc=$?
cat "$out"
[ $rc -eq 0 ] || { echo "FAIL: port_events exit $rc"; exit 1; }
exit 0
