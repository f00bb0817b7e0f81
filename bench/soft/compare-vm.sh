#!/bin/sh
# Software device vs kernel rxe inside the test bed's guest, from one run of
#   tests/vm/run.sh --only soft-perftest rxe-perftest [--lib BUILD/lib]
# (the same perftest commands on soft0 and rxe0). Prints each test's result
# on both devices and soft/rxe (target: bandwidth >= 10x rxe).
#   usage: bench/soft/compare-vm.sh VM_RESULTS_DIR
set -u
R=${1:?usage: compare-vm.sh VM_RESULTS_DIR}
printf '%-14s %14s %14s %10s\n' test soft0 rxe0 soft/rxe
for t in ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw ib_write_lat; do
  s="$R/logs/soft-perftest/$t.log"; r="$R/logs/rxe-perftest/$t.log"
  case $t in
    *_lat) col=5; unit=us ;;   # t_typical
    *) col=4; unit=MB/s ;;     # BW average
  esac
  sv=$(awk -v c=$col '/^ *#bytes/ {getline; print $c; exit}' "$s" 2>/dev/null)
  rv=$(awk -v c=$col '/^ *#bytes/ {getline; print $c; exit}' "$r" 2>/dev/null)
  if [ -z "$sv" ] || [ -z "$rv" ]; then printf '%-14s %14s %14s %10s\n' "$t" "${sv:-?}" "${rv:-?}" -; continue; fi
  if [ $unit = us ]; then
    ratio=$(awk -v a="$rv" -v b="$sv" 'BEGIN { printf "%.1fx faster", a / b }')
  else
    ratio=$(awk -v a="$sv" -v b="$rv" 'BEGIN { printf "%.1fx", (b > 0 ? a / b : 0) }')
  fi
  printf '%-14s %11s %s %11s %s %10s\n' "$t" "$sv" "$unit" "$rv" "$unit" "$ratio"
done
