#!/bin/bash
# The RoCE v2 software device against the kernel's soft-RoCE on one wire (test
# bed guest, tests/vm): a veth pair, one end (ovr0, 10.78.0.1) in the guest's
# root namespace with the kernel device rxe1 on it, driven by Debian's own
# libibverbs and rxe provider; the other end (ovr1, 10.78.0.2) in the network
# namespace "ovroce" with our device sroce0 on it (RDMAV_SOFT_ROCE=ovr1, our
# libibverbs). Debian's unmodified programs run as pairs in both directions
# (our side as server and as client), so every packet crosses between the
# kernel's RoCE v2 implementation and ours: headers, ICRC, PSNs, ACKs.
# shellcheck source=tests/vm/lib.sh disable=SC2154
. "$OV_REPO/tests/vm/lib.sh"
ov_require_ours "the RoCE v2 software device is the project's"

. "$OV_REPO/tests/roce/vm-roce-link.sh"
ns=ovroce
kip=10.78.0.1 oip=10.78.0.2
roce_rxe_link $ns rxe1 ovr0 ovr1 $kip $oip

kern="env -u LD_LIBRARY_PATH -u LD_PRELOAD"
ours="ip netns exec $ns env RDMAV_SOFT_ROCE=ovr1 VERBS_LOG_LEVEL=3"

# both NAME TOOL GIDFLAG ARGS...: TOOL with our side as server (kernel as
# client), then the reverse.
both() {
  local name=$1 tool=$2 gf=$3; shift 3
  ov_pair "$name-ours-server" tcp:18515 "$ours $tool -d sroce0 $gf 1 $*" \
    "$kern $tool -d rxe1 $gf $kgid $* $oip"
  ov_pair "$name-rxe-server" tcp:18515 "$kern $tool -d rxe1 $gf $kgid $*" \
    "$ours $tool -d sroce0 $gf 1 $* $kip"
}

# Short runs: the guest runs under TCG (a few MB/s).
n=${OV_PINGPONG_ITERS:-50}
both ibv_rc_pingpong ibv_rc_pingpong -g -n "$n"
both ibv_uc_pingpong ibv_uc_pingpong -g -n "$n"
both ibv_ud_pingpong ibv_ud_pingpong -g -n "$n" -s 1024
both ibv_srq_pingpong ibv_srq_pingpong -g -n 20
# (perftest gives no report when its clock calibration is noisy, as it is
# under TCG with short runs: -n 500, -F.)
for prog in ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw; do
  both "$prog" "$prog" -x -n 500 -F
done
both ib_write_lat ib_write_lat -x -n 200 -F
# rc_check (ours, tests/roce/rc_check.c; on the kernel's side it runs on
# Debian's libibverbs and rxe): SENDs, RDMA WRITE + READ back and atomics
# checked byte for byte and value for value.
rcc=$OV_BUILD_DIR/bin/roce_rc_check
both rc_check "$rcc" -g -n 20 -s 65536
# rc_check -w: memory windows (type 1 and 2), SEND with invalidate and
# IBV_SEND_FENCE between the kernel's rxe and our device, both directions.
both rc_check-windows "$rcc" -g -n 10 -s 65536 -w
# The same through the extended send API (ibv_wr_*) on both sides.
both rc_check-windows-ex "$rcc" -g -n 10 -s 65536 -w -x
# UD multicast (rc_check -u -m: the receiver attaches to ::ffff:239.1.2.3,
# the sender sends to the group). Our device receiving from rxe; and rxe
# receiving from ours, with the guest's root namespace joined to the group on
# ovr0 by a socket of its own: Debian 12's rxe does not join the IP group of
# an IPv4-mapped MGID itself (without that join the kernel's IP layer drops
# the datagrams before rxe sees them: 0 of 200 arrived, 2026-11-30).
ov_pair ud_check-mcast-ours-server tcp:18515 "$ours $rcc -d sroce0 -g 1 -u -m -n 200 -s 1024" \
  "$kern $rcc -d rxe1 -g $kgid -u -m -n 200 -s 1024 $oip"
python3 -c 'import socket, struct, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, struct.pack("4s4si",
    socket.inet_aton("239.1.2.3"), socket.inet_aton("0.0.0.0"), socket.if_nametoindex("ovr0")))
time.sleep(60)' >>"$setup_log" 2>&1 &
joiner=$!
ov_sleep 1
ov_pair ud_check-mcast-rxe-server tcp:18515 "$kern $rcc -d rxe1 -g $kgid -u -m -n 200 -s 1024" \
  "$ours $rcc -d sroce0 -g 1 -u -m -n 200 -s 1024 $kip"
kill $joiner 2>/dev/null
# The same, and UD (rc_check -u), with the kernel's netem on both ends of the
# link: 1 % each of loss, duplication and damage, and 1 % of the datagrams
# held back 1 ms (overtaken by the others: reordering). Every RC transfer exactly once, in
# order, with its bytes; UD may lose datagrams but never delivers wrong ones.
# (Damage to rxe's datagrams reaches our socket, the UDP checksum does not
# stop it, and our ICRC check drops it: icrc=N in our side's counters.)
t0=$(ov_now)
netem="netem delay 1ms reorder 99% loss 1% duplicate 1% corrupt 1%"
# shellcheck disable=SC2086
if { tc qdisc add dev ovr0 root $netem && ip netns exec $ns tc qdisc add dev ovr1 root $netem; } \
  >>"$setup_log" 2>&1; then
  ov_result PASS netem "$t0"
  both rc_check-netem "$rcc" -g -n 20 -s 65536
  both rc_check-windows-netem "$rcc" -g -n 10 -s 65536 -w -L
  both ud_check-netem "$rcc" -g -u -n 500 -s 1024
else
  ov_result FAIL netem "$t0" "(tc qdisc add ... netem: $(ov_tail "$setup_log"))"
fi
# Ours against ours under the same netem (the kernel's faults instead of the
# device's own fault-injection point): sroce0 in two more namespaces joined
# by a second veth pair.
t0=$(ov_now)
if (
  set -x
  ip netns add ovroce_a && ip netns add ovroce_b &&
    ip link add ovs0 type veth peer name ovs1 &&
    ip link set ovs0 netns ovroce_a && ip link set ovs1 netns ovroce_b &&
    ip -n ovroce_a addr add 10.79.0.1/24 dev ovs0 && ip -n ovroce_b addr add 10.79.0.2/24 dev ovs1 &&
    ip -n ovroce_a link set ovs0 up && ip -n ovroce_b link set ovs1 up &&
    ip netns exec ovroce_a tc qdisc add dev ovs0 root $netem &&
    ip netns exec ovroce_b tc qdisc add dev ovs1 root $netem
) >>"$setup_log" 2>&1; then
  for _ in {1..100}; do
    ip -n ovroce_a link show ovs0 | grep -q 'state UP' && ip -n ovroce_b link show ovs1 | grep -q 'state UP' && break
    ov_sleep 0.1
  done
  ov_result PASS netem-ours-ours "$t0"
  a="ip netns exec ovroce_a env RDMAV_SOFT_ROCE=ovs0 VERBS_LOG_LEVEL=3"
  b="ip netns exec ovroce_b env RDMAV_SOFT_ROCE=ovs1 VERBS_LOG_LEVEL=3"
  ov_pair rc_check-netem-ours-ours tcp:18515 "$a $rcc -d sroce0 -g 1 -n 20 -s 65536" \
    "$b $rcc -d sroce0 -g 1 -n 20 -s 65536 10.79.0.1"
  ov_pair ud_check-netem-ours-ours tcp:18515 "$a $rcc -d sroce0 -g 1 -u -n 500 -s 1024" \
    "$b $rcc -d sroce0 -g 1 -u -n 500 -s 1024 10.79.0.1"
else
  ov_result FAIL netem-ours-ours "$t0" "(second veth pair or netem: $(ov_tail "$setup_log"))"
fi
exit "$ov_failed"
