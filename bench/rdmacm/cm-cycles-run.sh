#!/bin/sh
# Connection set-up on the software devices (issue 13): full rdma_cm
# connect + disconnect cycles per second between two processes on soft0
# through our librdmacm (bench/rdmacm/cm_cycles.c: id, address and route
# resolution, QP, connect, disconnect, destroy), with and without QPs, beside
# the same number of kernel TCP connect/close cycles over 127.0.0.1 in the
# same run. Target: >= 20,000 rdma_cm cycles per second. Median of
# BENCH_ROUNDS (5) alternating rounds. Runs in a private /dev/shm.
#   bench/rdmacm/cm-cycles-run.sh BUILD_DIR [CYCLES]
set -eu
B=$(cd "$1" && pwd); N=${2:-5000}; R=${BENCH_ROUNDS:-5}
if [ "${OV_BENCH_INNER:-}" != 1 ]; then
  export OV_BENCH_INNER=1
  exec sh "$(dirname "$0")/../../tests/rdmacm/soft/private_shm.sh" "$B/lib" sh "$0" "$@"
fi
bin=$B/bin/cm_cycles
run() { # MODE-PREFIX PORT [--no-qp]: prints cycles per second
  "$bin" "${1}server" 127.0.0.1 "$2" "$N" ${3:-} & s=$!
  sleep 0.3
  out=$("$bin" "${1}client" 127.0.0.1 "$2" "$N" ${3:-})
  wait $s
  echo "$out" | sed -n 's/.*per_second \([0-9]*\).*/\1/p'
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
qp=""; noqp=""; tcp=""; port=30000
for i in $(seq 1 "$R"); do
  qp="$qp $(run '' $port)"; noqp="$noqp $(run '' $((port + 1)) --no-qp)"
  tcp="$tcp $(run tcp- $((port + 2)))"; port=$((port + 3))
done
mq=$(echo $qp | tr ' ' '\n' | median); mn=$(echo $noqp | tr ' ' '\n' | median)
mt=$(echo $tcp | tr ' ' '\n' | median)
printf '%-34s %12s %12s %8s\n' "cycles/s (median of $R, $N each)" "soft0 CM" "TCP anchor" "ratio"
printf '%-34s %12s %12s %8s\n' "connect+disconnect, with QPs" "$mq" "$mt" "$(awk "BEGIN{printf \"%.2f\", $mq/$mt}")"
printf '%-34s %12s %12s %8s\n' "connect+disconnect, no QP" "$mn" "$mt" "$(awk "BEGIN{printf \"%.2f\", $mn/$mt}")"
echo "target >= 20000/s with QPs: $([ "$mq" -ge 20000 ] && echo met || echo NOT met) (load: $(cut -d' ' -f1-3 /proc/loadavg))"
