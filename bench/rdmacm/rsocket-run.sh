#!/bin/sh
# rsockets on the software device against plain TCP over loopback, side by
# side in one run (issue 13's targets):
#   * Debian's rstream on soft0 (our librdmacm + libibverbs) versus
#     `rstream -T s` (the same program on kernel TCP sockets, 127.0.0.1):
#     bandwidth of 64 KiB transfers (target >= 2x TCP) and latency of 64 B
#     ping-pong (target <= 0.5x TCP);
#   * iperf3, a plain TCP program, under Debian's librspreload.so over soft0
#     versus iperf3 on kernel TCP: the bandwidth ratio is reported.
# Each figure is the median of BENCH_ROUNDS (default 5) rounds; the rounds of
# the two sides alternate. Everything runs in a private /dev/shm.
#   bench/rdmacm/rsocket-run.sh [BUILD_DIR]
set -eu
B=$(cd "${1:-build}" && pwd)
if [ "${OV_RS_BENCH_INNER:-}" != 1 ]; then
  export OV_RS_BENCH_INNER=1
  exec unshare --mount --propagation private sh -c \
    'mount -t tmpfs tmpfs /dev/shm && exec sh "$0" "$1"' "$0" "$B"
fi
ROUNDS=${BENCH_ROUNDS:-5}
LAT_ITERS=${BENCH_LAT_ITERS:-20000}
BW_XFERS=${BENCH_BW_XFERS:-5000}
IPERF_BYTES=${BENCH_IPERF_BYTES:-2G}
PRELOAD=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
ip=127.0.0.1
port=7600
cmdir="/dev/shm/openverbs-$(id -u)/cm"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ours() { env LD_LIBRARY_PATH="$B/lib" RDMAV_SOFT_DEVICES=1 "$@"; }

# pair KIND ARGS...: one rstream server/client pair; prints the client's
# result line. KIND rs (rsockets on soft0) or tcp.
pair() {
  kind=$1; shift
  port=$((port + 1))
  if [ "$kind" = rs ]; then run=ours; extra=""; else run=env; extra="-T s"; fi
  $run rstream -b $ip -p $port $extra "$@" > "$tmp/srv" 2>&1 &
  spid=$!
  i=0
  while [ $i -lt 100 ]; do
    if [ "$kind" = rs ]; then ls "$cmdir" 2>/dev/null | grep -q -- "-$port-" && break
    else ss -ltn 2>/dev/null | grep -q ":$port " && break; fi
    sleep 0.05; i=$((i + 1))
  done
  $run rstream -s $ip -p $port $extra "$@" > "$tmp/cli" 2>&1 || { cat "$tmp/cli" "$tmp/srv" >&2; }
  wait $spid || true
  grep '^custom' "$tmp/cli"
}

iperf() {
  kind=$1
  port=$((port + 1))
  if [ "$kind" = rs ]; then pre="env LD_LIBRARY_PATH=$B/lib RDMAV_SOFT_DEVICES=1 LD_PRELOAD=$PRELOAD"; else pre=env; fi
  $pre iperf3 -s -1 -B $ip -p $port > "$tmp/isrv" 2>&1 &
  spid=$!
  sleep 0.5
  $pre iperf3 -c $ip -p $port -n "$IPERF_BYTES" -f g > "$tmp/icli" 2>&1 || cat "$tmp/icli" >&2
  wait $spid || true
  # the receiver's line of the summary, in Gbit/s
  awk '/receiver/ { for (i = 1; i <= NF; i++) if ($i ~ /bits\/sec/) print $(i-1) }' "$tmp/icli" | tail -1
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

: > "$tmp/rs_lat"; : > "$tmp/tcp_lat"; : > "$tmp/rs_bw"; : > "$tmp/tcp_bw"
: > "$tmp/rs_ip"; : > "$tmp/tcp_ip"
r=1
while [ $r -le "$ROUNDS" ]; do
  # latency: 64 B, one transfer per iteration (ping-pong): usec/xfer
  pair rs -S 64 -C 1 -I "$LAT_ITERS" | awk '{ print $NF }' >> "$tmp/rs_lat"
  pair tcp -S 64 -C 1 -I "$LAT_ITERS" | awk '{ print $NF }' >> "$tmp/tcp_lat"
  # bandwidth: 64 KiB transfers, one iteration: Gb/sec
  pair rs -S 65536 -C "$BW_XFERS" | awk '{ print $(NF - 1) }' >> "$tmp/rs_bw"
  pair tcp -S 65536 -C "$BW_XFERS" | awk '{ print $(NF - 1) }' >> "$tmp/tcp_bw"
  iperf rs >> "$tmp/rs_ip"
  iperf tcp >> "$tmp/tcp_ip"
  r=$((r + 1))
done

rs_lat=$(median < "$tmp/rs_lat"); tcp_lat=$(median < "$tmp/tcp_lat")
rs_bw=$(median < "$tmp/rs_bw"); tcp_bw=$(median < "$tmp/tcp_bw")
rs_ip=$(median < "$tmp/rs_ip"); tcp_ip=$(median < "$tmp/tcp_ip")
verdict() { awk -v r="$1" -v t="$2" -v dir="$3" 'BEGIN { ok = (dir == "min") ? r >= t : r <= t; print ok ? "met" : "NOT met" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
lat_r=$(ratio "$rs_lat" "$tcp_lat"); bw_r=$(ratio "$rs_bw" "$tcp_bw"); ip_r=$(ratio "$rs_ip" "$tcp_ip")
echo "rsockets on soft0 vs TCP loopback, median of $ROUNDS rounds ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
printf '%-34s %12s %12s %8s  %s\n' measure rsockets tcp ratio target
printf '%-34s %12s %12s %8s  %s\n' "rstream 64 B latency (us/xfer)" "$rs_lat" "$tcp_lat" "$lat_r" "<= 0.5: $(verdict "$lat_r" 0.5 max)"
printf '%-34s %12s %12s %8s  %s\n' "rstream 64 KiB bandwidth (Gb/s)" "$rs_bw" "$tcp_bw" "$bw_r" ">= 2: $(verdict "$bw_r" 2 min)"
printf '%-34s %12s %12s %8s  %s\n' "iperf3 + librspreload (Gbit/s)" "$rs_ip" "$tcp_ip" "$ip_r" "reported"
echo "per round: rs_lat [$(tr '\n' ' ' < "$tmp/rs_lat")] tcp_lat [$(tr '\n' ' ' < "$tmp/tcp_lat")]"
echo "           rs_bw [$(tr '\n' ' ' < "$tmp/rs_bw")] tcp_bw [$(tr '\n' ' ' < "$tmp/tcp_bw")]"
echo "           rs_iperf [$(tr '\n' ' ' < "$tmp/rs_ip")] tcp_iperf [$(tr '\n' ' ' < "$tmp/tcp_ip")]"
