#!/bin/bash
# Test-bed group of bench/roce (issue 16's guest targets). Not picked up by
# the normal test-bed runs: bench/roce/run-vm.sh passes it with --group.
#
# In one guest, across the same kind of link (a veth pair):
#   - ours: our RoCE v2 device (sroce0, our libibverbs) on each end of the
#     pair ovq0/ovq1, each end in a network namespace of its own;
#   - rxe: the kernel's soft-RoCE (Debian's libibverbs and provider) on each
#     end of the pair ovk0/ovk1. rxe's UDP socket lives in the root
#     namespace only, so both ends stay there; policy routing makes the
#     datagrams really cross the pair: the output lookup of each end's
#     address from the other end's interface uses a table with the pair's
#     subnet on that interface (before the local table), and each end accepts
#     the other's local source address (accept_local). Without it the kernel
#     would route them through lo.
# Debian's ib_write_bw (64 KiB) and ib_write_lat (8 B) run as pairs on both,
# alternating, OV_ROCE_BENCH_ROUNDS (3) rounds. Writes "KEY VALUE" lines to
# $OV_LOGDIR/numbers.txt: ours_bw / rxe_bw (MB/s, perftest's BW average) and
# ours_lat / rxe_lat (us, t_typical) and udp_dev_lat (us, median one-way of
# udp_pingpong -d across ovq0/ovq1), one line per round; run-vm.sh prints
# the medians and ratios. A result line is PASS when the measurement itself
# succeeded; the targets are judged by run-vm.sh.
# shellcheck source=tests/vm/lib.sh disable=SC2154
. "$OV_REPO/tests/vm/lib.sh"
ov_require_ours "the RoCE v2 software device is the project's"

numbers=$OV_LOGDIR/numbers.txt
: >"$numbers"
setup_log=$OV_LOGDIR/setup.log
rounds=${OV_ROCE_BENCH_ROUNDS:-3}
t0=$(ov_now)
(
  set -x
  # ours: two namespaces.
  ip netns add ovqa && ip netns add ovqb &&
    ip link add ovq0 type veth peer name ovq1 &&
    ip link set ovq0 netns ovqa && ip link set ovq1 netns ovqb &&
    ip -n ovqa addr add 10.81.0.1/24 dev ovq0 && ip -n ovqb addr add 10.81.0.2/24 dev ovq1 &&
    ip -n ovqa link set lo up && ip -n ovqb link set lo up &&
    ip -n ovqa link set ovq0 up && ip -n ovqb link set ovq1 up &&
    # rxe: both ends in the root namespace, datagrams forced over the pair.
    ip link add ovk0 type veth peer name ovk1 &&
    ip addr add 10.82.0.1/24 dev ovk0 && ip addr add 10.82.0.2/24 dev ovk1 &&
    ip link set ovk0 up && ip link set ovk1 up &&
    for d in all ovk0 ovk1; do
      sysctl -qw net.ipv4.conf.$d.accept_local=1 && sysctl -qw net.ipv4.conf.$d.rp_filter=0 || exit 1
    done &&
    ip route add 10.82.0.0/24 dev ovk0 src 10.82.0.1 table 182 &&
    ip route add 10.82.0.0/24 dev ovk1 src 10.82.0.2 table 183 &&
    ip rule add pref 10 oif ovk0 lookup 182 &&
    ip rule add pref 11 oif ovk1 lookup 183 &&
    ip neigh replace 10.82.0.2 lladdr "$(cat /sys/class/net/ovk1/address)" dev ovk0 nud permanent &&
    ip neigh replace 10.82.0.1 lladdr "$(cat /sys/class/net/ovk0/address)" dev ovk1 nud permanent &&
    rdma link add rxk0 type rxe netdev ovk0 && rdma link add rxk1 type rxe netdev ovk1
) >"$setup_log" 2>&1 || {
  ov_result FAIL setup "$t0" "(veth pairs, routing or rxe: $(ov_tail "$setup_log"))"
  exit 1
}
for _ in {1..100}; do
  ip -n ovqa link show ovq0 | grep -q 'state UP' && ip -n ovqb link show ovq1 | grep -q 'state UP' && break
  ov_sleep 0.1
done
. "$OV_REPO/tests/roce/vm-roce-link.sh"
g0=$(roce_rxe_gid rxk0 10.82.0.1) && g1=$(roce_rxe_gid rxk1 10.82.0.2) || {
  ov_result FAIL setup "$t0" "(no RoCE v2 GIDs on rxk0/rxk1)"; exit 1
}
ov_result PASS setup "$t0" "(rxk0 GID $g0, rxk1 GID $g1; route to 10.82.0.2: $(ip route get 10.82.0.2 oif ovk0 | head -n1))"

kern="env -u LD_LIBRARY_PATH -u LD_PRELOAD"
udp=$OV_BUILD_DIR/bench/roce_udp_pingpong
a="ip netns exec ovqa env RDMAV_SOFT_ROCE=ovq0"
b="ip netns exec ovqb env RDMAV_SOFT_ROCE=ovq1"
# Under TCG tens of MB/s: bandwidth over perftest's default 5000 messages
# (steady state: shorter runs are dominated by their start), latency over
# short runs (-F: perftest's clock check is noisy).
bw="ib_write_bw -s 65536 -n ${OV_ROCE_BENCH_BW_ITERS:-5000} -F"
lat="ib_write_lat -s 8 -n ${OV_ROCE_BENCH_LAT_ITERS:-300} -F"
# keep KEY NAME COLUMN SIZE: the client's figure from NAME's log. Under
# TCG perftest now and then prints 0.00 or inf from its own clock for a run
# that went through: such a figure is no measurement, and is written as
# "unusable KEY FIGURE NAME" (run-vm.sh names it and leaves it out).
keep() {
  local v
  v=$(sed -n '/^+ client:/,$p' "$OV_LOGDIR/$2.log" | awk -v c="$3" -v s="$4" '$1 == s { v = $c } END { print v }')
  [ -n "$v" ] || return 0
  if [[ $v =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v x="$v" 'BEGIN { exit !(x > 0) }'; then
    echo "$1 $v" >>"$numbers"
  else
    echo "unusable $1 $v $2" >>"$numbers"
  fi
}
for ((r = 1; r <= rounds; r++)); do
  ov_pair "ours-bw-$r" tcp:18515 "$a $bw -d sroce0 -x 1" "$b $bw -d sroce0 -x 1 10.81.0.1"
  keep ours_bw "ours-bw-$r" 4 65536
  ov_pair "rxe-bw-$r" tcp:18515 "$kern $bw -d rxk0 -x $g0" "$kern $bw -d rxk1 -x $g1 10.82.0.1"
  keep rxe_bw "rxe-bw-$r" 4 65536
  ov_pair "ours-lat-$r" tcp:18515 "$a $lat -d sroce0 -x 1" "$b $lat -d sroce0 -x 1 10.81.0.1"
  keep ours_lat "ours-lat-$r" 5 8
  ov_pair "rxe-lat-$r" tcp:18515 "$kern $lat -d rxk0 -x $g0" "$kern $lat -d rxk1 -x $g1 10.82.0.1"
  keep rxe_lat "rxe-lat-$r" 5 8
  # The floor under ours: the exchange's two datagrams (WRITE and ACK, one
  # GSO train) through sockets set up as the device's, no RDMA work.
  ov_pair "udp-dev-$r" udp:18600 "ip netns exec ovqa $udp -d ovq0 -n ${OV_ROCE_BENCH_LAT_ITERS:-300}" \
    "ip netns exec ovqb $udp -d ovq1 -n ${OV_ROCE_BENCH_LAT_ITERS:-300} 10.81.0.1"
  v=$(sed -n 's/.*device-socket median_us \([0-9.]*\).*/\1/p' "$OV_LOGDIR/udp-dev-$r.log" | tail -n1)
  [ -n "$v" ] && echo "udp_dev_lat $v" >>"$numbers"
done
# The rxe pair must have crossed the link: ovk1 received what ovk0 sent.
echo "link ovk1 rx_bytes $(cat /sys/class/net/ovk1/statistics/rx_bytes)" >>"$numbers"
echo "link ovq1 rx_bytes $(ip netns exec ovqb cat /sys/class/net/ovq1/statistics/rx_bytes)" >>"$numbers"
exit "$ov_failed"
