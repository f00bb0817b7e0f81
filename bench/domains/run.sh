#!/bin/sh
# Issue 6 benchmark: one post_send + poll_cq pair on soft0, without and with a
# thread domain, in userspace instructions (callgrind, only the measured
# loop) and in ns (CLOCK_MONOTONIC, median of 5 runs), printed side by side
# with the ratio. The issue asks for at least 20% fewer instructions on the
# thread-domain path.
#
#   bench/domains/run.sh BUILD_DIR [ITERATIONS]
set -eu
B=$(cd "$1" && pwd); N=${2:-20000}
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export RDMAV_SOFT_DEVICES=1
bin=$B/bench/td_bench
tmp=$(mktemp -d /tmp/ov-tdbench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

instr() { # MODE -> instructions per pair
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$tmp/cg.$1" \
    "$bin" "$1" 2000 >/dev/null 2>"$tmp/vg.$1"
  # "Collected" is the count of the instrumented loop (every thread).
  awk '/Collected :/ { print $NF / 2000; exit }' "$tmp/vg.$1"
}
ns() { # MODE -> median ns per pair of 5 runs
  for r in 1 2 3 4 5; do "$bin" "$1" "$N" | awk '{print $3}'; done | sort -n | sed -n 3p
}

ip=$(instr plain); it=$(instr td)
np=$(ns plain); nt=$(ns td)
printf '%-28s %14s %14s %10s\n' "post_send+poll_cq on soft0" "no TD" "thread domain" "td/no-td"
printf '%-28s %14.0f %14.0f %10.3f\n' "instructions per pair" "$ip" "$it" "$(echo "$it $ip" | awk '{print $1/$2}')"
printf '%-28s %14.1f %14.1f %10.3f\n' "ns per pair (median of 5)" "$np" "$nt" "$(echo "$nt $np" | awk '{print $1/$2}')"
echo "$it $ip" | awk '$2 <= 0 { print "no instruction count (callgrind failed?)"; exit 1 } { r = 1 - $1/$2; printf "thread domain saves %.1f%% of the instructions (goal: >= 20%%): %s\n", r*100, (r >= 0.20) ? "MET" : "NOT MET" }'
