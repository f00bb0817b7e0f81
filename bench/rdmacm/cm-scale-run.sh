#!/bin/sh
# How the software devices' connection set-up scales with the number of
# connections a process holds (the CM's time-outs, its links, the device's
# arena and QP list): Debian's cmtime on soft0 through our librdmacm, on the
# host, with SMALL (100) and LARGE (1900) simultaneous connections, each step
# in us per connection; the anchor is the same step at SMALL, and the ratio
# LARGE/SMALL is the growth (1.0: the step's cost per connection does not
# depend on how many connections there are). Median of BENCH_ROUNDS (3)
# alternating rounds. Information: no issue sets a target. Runs in a
# private /dev/shm (root).
#   bench/rdmacm/cm-scale-run.sh BUILD_DIR [SMALL] [LARGE]
set -eu
B=$(cd "$1" && pwd); S=${2:-100}; L=${3:-1900}; R=${BENCH_ROUNDS:-3}
if [ "${OV_BENCH_INNER:-}" != 1 ]; then
  export OV_BENCH_INNER=1
  exec sh "$(dirname "$0")/../../tests/rdmacm/soft/private_shm.sh" "$B/lib" sh "$0" "$@"
fi
command -v cmtime > /dev/null || { echo "bench-cm-scale: cmtime (rdmacm-utils) is missing" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
port=$((30000 + $$ % 20000))
run() { # CONNECTIONS OUT: cmtime's table (step: total max min us/conn)
  cmtime -b 127.0.0.1 -p $port > /dev/null 2>&1 & s=$!
  sleep 0.3
  cmtime -s 127.0.0.1 -p $port -c "$1" > "$2" 2>&1 || { echo "bench-cm-scale: cmtime -c $1 failed:" >&2; cat "$2" >&2; kill $s; exit 1; }
  kill $s 2>/dev/null; wait $s 2>/dev/null || true
  port=$((port + 1))
}
for i in $(seq 1 "$R"); do
  run "$S" "$tmp/s$i"; run "$L" "$tmp/l$i"
done
python3 - "$tmp" "$R" "$S" "$L" <<'PY'
import statistics, sys, re, os
tmp, rounds, small, large = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def table(path):
    out = {}
    for line in open(path):
        m = re.match(r'^(\w[\w ]*\w)\s*:\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$', line)
        if m:
            out[m.group(1)] = float(m.group(5))
    return out
s = [table(os.path.join(tmp, 's%d' % i)) for i in range(1, rounds + 1)]
l = [table(os.path.join(tmp, 'l%d' % i)) for i in range(1, rounds + 1)]
print("cmtime on soft0, us per connection (median of %d rounds)" % rounds)
print("%-14s %12s %12s %8s" % ("step", small + " conns", large + " conns", "growth"))
for step in s[0]:
    a = statistics.median(t[step] for t in s)
    b = statistics.median(t[step] for t in l)
    print("%-14s %12.2f %12.2f %8.2f" % (step, a, b, b / a if a else float('nan')))
PY
