#!/bin/bash
# bench/roce in the qemu test bed (issue 16's guest targets): our RoCE v2
# device to our device across a veth pair, against the kernel's rxe to rxe
# across a veth pair, in the same guest (bench/roce/vm-bench.sh says how the
# rxe datagrams are made to cross the pair). Debian's ib_write_bw (64 KiB,
# target: ours >= 2x rxe) and ib_write_lat (8 B, target: ours <= rxe), median
# of the rounds; every round is printed. The guest emulates its CPU (TCG), so
# the absolute figures are far below the host's; the ratio is what counts.
#
#   bench/roce/run-vm.sh [BUILD_DIR]     (default: build; needs BUILD_DIR/lib
#                                         with the soft provider, outside /tmp)
#   bench/roce/run-vm.sh --report BUILD_DIR/vm-results/<run>   (table only)
# Environment: OV_ROCE_BENCH_ROUNDS (3), OV_ROCE_BENCH_BW_ITERS (5000,
# perftest's own default: steady state; runs of 300 spread ours over 40-72
# MB/s and rxe's over 26-32, runs of 1500 gave 72-74 and 28-29),
# OV_ROCE_BENCH_LAT_ITERS (300), VM_BENCH_TIMEOUT (whole guest, s, 1800),
# VM_BENCH_BOOT_TIMEOUT (until the guest's stage 2, s, 600: boots are slow on a
# loaded host).
# Exit status: 0 targets met, 1 a target not met, 2 no measurement.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
group=$here/vm-bench.sh
name=$(basename "$group" .sh)
log=$(mktemp /tmp/ov-bench-roce.XXXXXX)
trap 'rm -f "$log"' EXIT
if [ "${1:-}" = --report ]; then
  res=$(cd "${2:?--report needs a vm-results run folder}" && pwd)
else
  B=${1:-$repo/build}
  [ -d "$B" ] || { echo "bench-roce: no build directory $B" >&2; exit 2; }
  B=$(cd "$B" && pwd)
  for f in "$B/lib/libibverbs.so.1" "$B/lib/libibverbs/libsoft-rdmav34.so"; do
    [ -e "$f" ] || { echo "bench-roce: $f is missing (cmake --build $B --target ibverbs soft_provider)" >&2; exit 2; }
  done
  case $B in /tmp/*|/run/*) echo "bench-roce: the guest cannot see $B (under /tmp or /run)" >&2; exit 2 ;; esac
  env OV_ROCE_BENCH_ROUNDS="${OV_ROCE_BENCH_ROUNDS:-3}" \
    OV_ROCE_BENCH_BW_ITERS="${OV_ROCE_BENCH_BW_ITERS:-5000}" OV_ROCE_BENCH_LAT_ITERS="${OV_ROCE_BENCH_LAT_ITERS:-300}" \
    "$repo/tests/vm/run.sh" --build-dir "$B" --lib "$B/lib" --group "$group" \
    --timeout "${VM_BENCH_TIMEOUT:-1800}" --boot-timeout "${VM_BENCH_BOOT_TIMEOUT:-600}" 2>&1 | tee "$log"
  res=$(sed -n 's/^vm: results in //p' "$log" | tail -n1)
fi
num=${res:+$res/logs/$name/numbers.txt}
if [ -z "$res" ] || [ ! -s "$num" ]; then
  echo "bench-roce: the guest produced no numbers (${res:-no results folder})" >&2; exit 2
fi
all() { awk -v k="$1" '$1 == k { printf "%s ", $2 }' "$num"; }
median() { awk -v k="$1" '$1 == k { print $2 }' "$num" | sort -g |
  awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b > 0) printf "%.2f", a / b; else print "n/a" }'; }
verdict() { awk -v r="$1" -v t="$2" -v dir="$3" 'BEGIN { if (r == "n/a") { print "not measured"; exit }
  ok = (dir == "min") ? r >= t : r <= t; print ok ? "met" : "NOT met" }'; }
ob=$(median ours_bw); rb=$(median rxe_bw); ol=$(median ours_lat); rl=$(median rxe_lat)
bw_r=$(ratio "$ob" "$rb"); lat_r=$(ratio "$ol" "$rl")
echo "RoCE v2 across a veth pair in the test bed's guest (TCG): ours (sroce0) vs the kernel's rxe"
echo "median of $(awk '$1 == "ours_bw"' "$num" | wc -l) rounds; results in $res"
printf '%-32s %10s %10s %7s  %s\n' measure ours rxe ratio target
printf '%-32s %10s %10s %7s  %s\n' "ib_write_bw 64 KiB (MB/s)" "$ob" "$rb" "$bw_r" ">= 2: $(verdict "$bw_r" 2 min)"
printf '%-32s %10s %10s %7s  %s\n' "ib_write_lat 8 B (us)" "$ol" "$rl" "$lat_r" "<= 1: $(verdict "$lat_r" 1 max)"
ul=$(median udp_dev_lat)
printf '%-32s %10s %10s %7s  %s\n' "UDP train, device socket (us)" "$ul" "$rl" "$(ratio "$ul" "$rl")" "reported: the socket path alone (udp_pingpong -d)"
echo "per round: ours_bw [$(all ours_bw)] rxe_bw [$(all rxe_bw)]"
echo "           ours_lat [$(all ours_lat)] rxe_lat [$(all rxe_lat)] udp_dev_lat [$(all udp_dev_lat)]"
grep '^link ' "$num"
awk '$1 == "unusable" { printf "left out: %s printed %s for %s (perftest'"'"'s own clock under TCG)\n", $4, $3, $2 }' "$num"
case "$bw_r$lat_r" in *n/a*) exit 2 ;; esac
[ "$(verdict "$bw_r" 2 min)" = met ] && [ "$(verdict "$lat_r" 1 max)" = met ] || exit 1
exit 0
