#!/bin/sh
# The RoCE v2 software device on a real link, on the host (issue 16's host
# targets): two network namespaces joined by a veth pair (made here, as root),
# sroce0 on each end; Debian's perftest through our libibverbs across them,
# side by side in the same rounds with the same link's kernel anchors:
#   * ib_write_bw, 64 KiB messages, against iperf3 (kernel TCP, one stream)
#     over the same pair: target >= 0.5x;
#   * ib_write_lat, 8 B, against udp_pingpong (bench/roce/udp_pingpong.c:
#     8-byte UDP datagrams bounced over the same pair, spinning on the socket
#     as ib_write_lat spins on its CQ): target <= 1.5x. The same ping-pong
#     with blocking receives is printed for information, and with what the
#     device puts on the wire per exchange (an RDMA WRITE and the ACK of the
#     peer's, one GSO train received with UDP_GRO: udp_pingpong -t), the
#     socket layer's own share of the latency, and that train through
#     sockets set up as the device sets up its own (udp_pingpong -d IFNAME:
#     unconnected dual-stack, bound to the interface, packet information
#     both ways): what the device costs with no RDMA work at all.
# Every program runs as the user "nobody" (no capability: the device's socket
# gets the default receive buffer, as an ordinary user's would), in a private
# /dev/shm. Each figure is the median of BENCH_ROUNDS (default 5) rounds in
# which the programs alternate; every round is printed. The rounds run at
# each MTU of BENCH_MTUS (default "1500 9000"); the targets are judged at
# the first.
#   bench/roce/run.sh [BUILD_DIR]
# Exit status 0 when both targets are met, 1 when one is missed, 2 when
# nothing could be measured (77: not root, no namespaces).
set -u
B=$(cd "${1:-build}" && pwd)
if [ "$(id -u)" != 0 ]; then echo "bench/roce: needs root to make namespaces"; exit 77; fi
if [ -z "${OV_ROCE_BENCH_INNER:-}" ]; then
  exec unshare --mount --propagation private env OV_ROCE_BENCH_INNER=1 sh "$0" "$B"
fi
mount -t tmpfs tmpfs /dev/shm || exit 2
mount -t tmpfs tmpfs /run 2>/dev/null || true
ROUNDS=${BENCH_ROUNDS:-5}
BW_ITERS=${BENCH_BW_ITERS:-20000}
LAT_ITERS=${BENCH_LAT_ITERS:-20000}
IPERF_SECONDS=${BENCH_IPERF_SECONDS:-3}
udp=$B/bench/roce_udp_pingpong
[ -x "$udp" ] || { echo "bench/roce: $udp is missing (cmake --build B --target roce_udp_pingpong)"; exit 2; }

tag=$$
nsa=ovba$tag; nsb=ovbb$tag; va=ovbva$tag; vb=ovbvb$tag
ipa=10.232.0.1 ipb=10.232.0.2
tmp=$(mktemp -d /tmp/ovroce-bench.XXXXXX)
chmod 755 "$tmp"
cleanup() { [ -n "${OV_ROCE_BENCH_KEEP:-}" ] && cp -r "$tmp" /tmp/ovroce-bench-kept; ip netns del $nsa 2>/dev/null; ip netns del $nsb 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
ip netns add $nsa && ip netns add $nsb || { echo "bench/roce: no network namespaces"; exit 77; }
ip link add $va type veth peer name $vb && ip link set $va netns $nsa && ip link set $vb netns $nsb &&
  ip -n $nsa addr add $ipa/24 dev $va && ip -n $nsb addr add $ipb/24 dev $vb &&
  ip -n $nsa link set lo up && ip -n $nsb link set lo up &&
  ip -n $nsa link set $va up && ip -n $nsb link set $vb up || { echo "bench/roce: veth pair failed"; exit 2; }
i=0
until ip -n $nsa link show $va | grep -q 'state UP' && ip -n $nsb link show $vb | grep -q 'state UP'; do
  i=$((i + 1)); [ $i -le 200 ] || { echo "bench/roce: the veth pair is not up"; exit 2; }
  sleep 0.05
done

# as NS IFNAME PROGRAM...: PROGRAM as nobody in NS, our library first, its
# side of the link named for the RoCE device.
as() {
  ns=$1; ifn=$2; shift 2
  ip netns exec "$ns" setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
    env LD_LIBRARY_PATH="$B/lib" RDMAV_SOFT_ROCE="$ifn" timeout 120 "$@"
}
# wait_sock tcp|udp NS PORT: until a socket of NS is bound to PORT.
wait_sock() {
  i=0
  hex=$(printf ':%04X ' "$3")
  while [ $i -lt 200 ] && ! ip netns exec "$2" cat /proc/net/$1 /proc/net/${1}6 2>/dev/null | grep -q "$hex"; do
    sleep 0.05; i=$((i + 1))
  done
}
port=18700
next() { port=$((port + 1)); }
# pair tcp|udp SERVER_CMD... -- CLIENT_CMD...: server in A, client in B (the
# client's last argument is A's address); both use $port, which each round's
# step moves on (next). The client's output is in $tmp/cli.
pair() {
  proto=$1; shift
  srv=""
  while [ "$1" != -- ]; do srv="$srv $1"; shift; done
  shift
  # shellcheck disable=SC2086
  as $nsa $va $srv > "$tmp/srv" 2>&1 &
  spid=$!
  wait_sock "$proto" $nsa $port
  as $nsb $vb "$@" > "$tmp/cli" 2>&1 || { echo "client failed: $*" >&2; cat "$tmp/cli" "$tmp/srv" >&2; }
  wait $spid || { echo "server failed: $srv" >&2; cat "$tmp/srv" >&2; }
}

# One set of rounds at each MTU of BENCH_MTUS (default "1500 9000": the
# veth's default, where the path MTU is 1024 and a 64 KiB WRITE is 64
# packets, and jumbo frames, where it is 4096 and 16 packets); the targets
# are judged at the first one. Both ends of the pair get the MTU.
MTUS=${BENCH_MTUS:-1500 9000}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b > 0) printf "%.2f", a / b; else print "n/a" }'; }
verdict() { awk -v r="$1" -v t="$2" -v dir="$3" 'BEGIN { if (r == "n/a") { print "not measured"; exit }
  ok = (dir == "min") ? r >= t : r <= t; print ok ? "met" : "NOT met" }'; }
status=0
judged=""
for mtu in $MTUS; do
  ip -n $nsa link set $va mtu "$mtu" && ip -n $nsb link set $vb mtu "$mtu" || { echo "bench/roce: MTU $mtu refused"; exit 2; }
  : > "$tmp/rd_bw"; : > "$tmp/tcp_bw"; : > "$tmp/rd_lat"; : > "$tmp/udp_lat"; : > "$tmp/udpb_lat"; : > "$tmp/udpt_lat"; : > "$tmp/udpd_lat"
  r=1
  while [ "$r" -le "$ROUNDS" ]; do
    next
    # 64 KiB RDMA WRITEs: perftest's BW average in Gb/s (--report_gbits).
    pair tcp ib_write_bw -d sroce0 -x 1 -s 65536 -n "$BW_ITERS" -F --report_gbits -p "$port" -- \
      ib_write_bw -d sroce0 -x 1 -s 65536 -n "$BW_ITERS" -F --report_gbits -p "$port" $ipa
    awk '$1 == 65536 { print $4 }' "$tmp/cli" | tail -1 >> "$tmp/rd_bw"
    next
    # iperf3, one TCP stream: the receiver's Gbit/s.
    pair tcp iperf3 -s -1 -p "$port" -- iperf3 -c $ipa -p "$port" -t "$IPERF_SECONDS" -f g
    awk '/receiver/ { for (i = 1; i <= NF; i++) if ($i ~ /bits\/sec/) print $(i-1) }' "$tmp/cli" | tail -1 >> "$tmp/tcp_bw"
    next
    # 8 B RDMA WRITE latency: perftest's t_typical (median), in us.
    pair tcp ib_write_lat -d sroce0 -x 1 -s 8 -n "$LAT_ITERS" -F -p "$port" -- \
      ib_write_lat -d sroce0 -x 1 -s 8 -n "$LAT_ITERS" -F -p "$port" $ipa
    awk '$1 == 8 { print $5 }' "$tmp/cli" | tail -1 >> "$tmp/rd_lat"
    next
    # 8 B UDP ping-pong, spinning and blocking: median one-way, in us.
    pair udp "$udp" -s 8 -n "$LAT_ITERS" -p "$port" -- "$udp" -s 8 -n "$LAT_ITERS" -p "$port" $ipa
    sed -n 's/.*median_us \([0-9.]*\).*/\1/p' "$tmp/cli" >> "$tmp/udp_lat"
    next
    pair udp "$udp" -b -s 8 -n "$LAT_ITERS" -p "$port" -- "$udp" -b -s 8 -n "$LAT_ITERS" -p "$port" $ipa
    sed -n 's/.*median_us \([0-9.]*\).*/\1/p' "$tmp/cli" >> "$tmp/udpb_lat"
    next
    # The socket layer's share: per exchange what the device sends (the
    # WRITE and the ACK of the peer's, one GSO train), spinning.
    pair udp "$udp" -t -s 8 -n "$LAT_ITERS" -p "$port" -- "$udp" -t -s 8 -n "$LAT_ITERS" -p "$port" $ipa
    sed -n 's/.*median_us \([0-9.]*\).*/\1/p' "$tmp/cli" >> "$tmp/udpt_lat"
    next
    # The same train through the device's socket set-up (udp_pingpong -d).
    pair udp "$udp" -d $va -s 8 -n "$LAT_ITERS" -p "$port" -- "$udp" -d $vb -s 8 -n "$LAT_ITERS" -p "$port" $ipa
    sed -n 's/.*median_us \([0-9.]*\).*/\1/p' "$tmp/cli" >> "$tmp/udpd_lat"
    r=$((r + 1))
  done
  rd_bw=$(median < "$tmp/rd_bw"); tcp_bw=$(median < "$tmp/tcp_bw")
  rd_lat=$(median < "$tmp/rd_lat"); udp_lat=$(median < "$tmp/udp_lat"); udpb_lat=$(median < "$tmp/udpb_lat")
  udpt_lat=$(median < "$tmp/udpt_lat"); udpd_lat=$(median < "$tmp/udpd_lat")
  bw_r=$(ratio "$rd_bw" "$tcp_bw"); lat_r=$(ratio "$rd_lat" "$udp_lat"); latb_r=$(ratio "$rd_lat" "$udpb_lat")
  latt_r=$(ratio "$rd_lat" "$udpt_lat"); floor_r=$(ratio "$udpt_lat" "$udp_lat")
  latd_r=$(ratio "$rd_lat" "$udpd_lat"); floord_r=$(ratio "$udpd_lat" "$udp_lat")
  echo "RoCE v2 software device across a veth pair between two namespaces, MTU $mtu, median of $ROUNDS rounds"
  echo "($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg) at the end)"
  printf '%-40s %10s %10s %7s  %s\n' measure sroce0 anchor ratio target
  printf '%-40s %10s %10s %7s  %s\n' "ib_write_bw 64 KiB vs iperf3 (Gbit/s)" "$rd_bw" "$tcp_bw" "$bw_r" ">= 0.5: $(verdict "$bw_r" 0.5 min)"
  printf '%-40s %10s %10s %7s  %s\n' "ib_write_lat 8 B vs UDP spin (us)" "$rd_lat" "$udp_lat" "$lat_r" "<= 1.5: $(verdict "$lat_r" 1.5 max)"
  printf '%-40s %10s %10s %7s  %s\n' "ib_write_lat 8 B vs UDP blocking (us)" "$rd_lat" "$udpb_lat" "$latb_r" "reported"
  printf '%-40s %10s %10s %7s  %s\n' "ib_write_lat 8 B vs UDP WRITE+ACK train" "$rd_lat" "$udpt_lat" "$latt_r" "reported (the train: ${floor_r}x UDP spin)"
  printf '%-40s %10s %10s %7s  %s\n' "ib_write_lat 8 B vs train, device socket" "$rd_lat" "$udpd_lat" "$latd_r" "reported (the train so: ${floord_r}x UDP spin)"
  echo "per round: ib_write_bw [$(tr '\n' ' ' < "$tmp/rd_bw")] iperf3 [$(tr '\n' ' ' < "$tmp/tcp_bw")]"
  echo "           ib_write_lat [$(tr '\n' ' ' < "$tmp/rd_lat")] udp spin [$(tr '\n' ' ' < "$tmp/udp_lat")] udp blocking [$(tr '\n' ' ' < "$tmp/udpb_lat")] udp train [$(tr '\n' ' ' < "$tmp/udpt_lat")] device socket [$(tr '\n' ' ' < "$tmp/udpd_lat")]"
  echo
  if [ -z "$judged" ]; then
    judged=$mtu
    case "$bw_r$lat_r" in *n/a*) status=2 ;; esac
    if [ $status = 0 ] && ! { [ "$(verdict "$bw_r" 0.5 min)" = met ] && [ "$(verdict "$lat_r" 1.5 max)" = met ]; }; then
      status=1
    fi
  fi
done
echo "targets judged at MTU $judged"
exit $status
