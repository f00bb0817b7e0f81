#!/bin/sh
# Software device vs kernel rxe inside the test bed's guest, from one or more
# runs of
#   tests/vm/run.sh --only soft-perftest rxe-perftest [--lib BUILD/lib]
# (the same perftest commands on soft0 and rxe0). Prints each test's result
# on both devices and soft/rxe per run (target: bandwidth >= 10x rxe), and,
# given several runs, the median ratio per test.
#
# The client's line is used. perftest prints 0.00 there when its own clock
# calibration failed (it says "Correlation coefficient r^2 ... < 0.9": the
# guest's vCPU was preempted while it calibrated); the server side then
# measured the same transfer and its line is used instead, marked "(s)",
# by the same rule for both devices.
#   usage: bench/soft/compare-vm.sh VM_RESULTS_DIR [VM_RESULTS_DIR...]
set -u
[ $# -ge 1 ] || { echo "usage: compare-vm.sh VM_RESULTS_DIR [VM_RESULTS_DIR...]" >&2; exit 2; }
tests="ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw ib_write_lat"

# value LOG COLUMN: the client's result, else the server's (suffix " s").
value() {
  awk -v c="$2" '/^ *#bytes/ {getline; n++; v[n] = $c}
    END { if (n >= 1 && v[1] + 0 > 0) print v[1]; else if (n >= 2 && v[2] + 0 > 0) print v[2] " s" }' "$1" 2>/dev/null
}

ratios=$(mktemp)
trap 'rm -f "$ratios"' EXIT
for R in "$@"; do
  echo "== $R"
  printf '%-14s %16s %16s %12s\n' test soft0 rxe0 soft/rxe
  for t in $tests; do
    s="$R/logs/soft-perftest/$t.log"; r="$R/logs/rxe-perftest/$t.log"
    case $t in
      *_lat) col=5; unit=us ;;   # t_typical
      *) col=4; unit=MB/s ;;     # BW average
    esac
    sv=$(value "$s" $col); rv=$(value "$r" $col)
    if [ -z "$sv" ] || [ -z "$rv" ]; then printf '%-14s %16s %16s %12s\n' "$t" "${sv:-?}" "${rv:-?}" -; continue; fi
    sn=${sv% s}; rn=${rv% s}
    [ "$sn" = "$sv" ] && sm="" || sm="(s)"
    [ "$rn" = "$rv" ] && rm="" || rm="(s)"
    if [ $unit = us ]; then
      ratio=$(awk -v a="$rn" -v b="$sn" 'BEGIN { printf "%.1f", a / b }'); suffix="x faster"
    else
      ratio=$(awk -v a="$sn" -v b="$rn" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }'); suffix=x
    fi
    echo "$t $ratio" >>"$ratios"
    printf '%-14s %9s %-4s%3s %9s %-4s%3s %11s\n' "$t" "$sn" "$unit" "$sm" "$rn" "$unit" "$rm" "$ratio$suffix"
  done
done
if [ $# -gt 1 ]; then
  echo "== median soft/rxe over $# runs"
  for t in $tests; do
    grep "^$t " "$ratios" | awk '{print $2}' | sort -g |
      awk -v t="$t" '{v[NR] = $1} END { if (NR) printf "%-14s %6.1fx  (runs: %d)\n", t,
        (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), NR }'
  done
fi
