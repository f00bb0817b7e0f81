#!/bin/bash
# Connection set-up, software CM versus the kernel's (issue 13): Debian's
# cmtime on soft0 (our librdmacm, the CM in user space) beside the same
# program on rxe0 with Debian's libraries (the kernel's CM, the anchor) and
# on rxe0 with ours, in one guest of the qemu test bed (tests/vm), rounds
# alternating (bench/rdmacm/cmtime-group.sh). Prints microseconds per
# connection for every step (median of the rounds, and every round), and
# rxe0/soft0; target: soft0 at least 10x faster than rxe0 (Debian's
# libraries) in every step.
#
#   bench/rdmacm/cmtime-vm.sh [BUILD_DIR]      (default: build)
#   bench/rdmacm/cmtime-vm.sh --report BUILD_DIR/vm-results/<run>  (table only)
#
# Builds nothing: needs BUILD_DIR/lib (cmake --build BUILD_DIR --target
# rdmacm ibverbs soft_provider clock_floor cm_steps; without bin/clock_floor
# the line on cmtime's own clock reads is left out, without bin/cm_steps the
# table of the client's steps timed per step). The build tree must be visible to the guest
# (not under /tmp or /run). Environment: BENCH_ROUNDS (3),
# BENCH_CONNECTIONS (100), VM_BENCH_TIMEOUT (whole guest, s, 1800),
# VM_BENCH_TEST_TIMEOUT (per program, s, 300), BENCH_ASLR (off: the guest's
# address-space randomisation is off during the runs; on keeps it) and
# BENCH_WARMUP (1: untimed rounds of each configuration first); why:
# cmtime-group.sh.
# Exit status: 0 targets met, 1 a target not met, 2 no measurement.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
group=$here/cmtime-group.sh
name=$(basename "$group" .sh)
log=$(mktemp /tmp/ov-bench-cmtime.XXXXXX)
trap 'rm -f "$log"' EXIT
if [ "${1:-}" = --report ]; then
  res=$(cd "${2:?--report needs a vm-results run folder}" && pwd)
else
  B=${1:-$repo/build}
  [ -d "$B" ] || { echo "bench-cmtime: no build directory $B" >&2; exit 2; }
  B=$(cd "$B" && pwd)
  for f in "$B/lib/librdmacm.so.1" "$B/lib/libibverbs.so.1"; do
    [ -e "$f" ] || { echo "bench-cmtime: $f is missing (cmake --build $B --target rdmacm ibverbs soft_provider)" >&2; exit 2; }
  done
  case $B in /tmp/*|/run/*) echo "bench-cmtime: the guest cannot see $B (under /tmp or /run)" >&2; exit 2 ;; esac
  export BENCH_ROUNDS=${BENCH_ROUNDS:-3} BENCH_CONNECTIONS=${BENCH_CONNECTIONS:-100}
  "$repo/tests/vm/run.sh" --build-dir "$B" --lib "$B/lib" --group "$group" \
    --timeout "${VM_BENCH_TIMEOUT:-1800}" --test-timeout "${VM_BENCH_TEST_TIMEOUT:-300}" 2>&1 | tee "$log"
  res=$(sed -n 's/^vm: results in //p' "$log" | tail -n1)
fi
num=$res/logs/$name/numbers.txt
if [ -z "$res" ] || [ ! -s "$num" ]; then
  echo "bench-cmtime: the guest produced no numbers (${res:-no results folder})" >&2; exit 2
fi
# med CONFIG STEP: the median over the rounds; all CONFIG STEP: every round.
# median: the median of the numbers on standard input, one a line.
median() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
med() { awk -v c="$1" -v s="$2" '$1 == c && $3 == s { print $4 }' "$num" | median; }
all() { awk -v c="$1" -v s="$2" '$1 == c && $3 == s { printf "%s%s", sep, $4; sep = " " }' "$num"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "-"; else printf "%.1f", a / b }'; }
rounds=$(awk '$1 != "floor" && $1 != "steps" { print $2 }' "$num" | sort -u | wc -l)
# settings.txt: "aslr VALUE warmup N" (cmtime-group.sh).
read -r _ aslr _ warm < "$res/logs/$name/settings.txt" 2>/dev/null
echo "guest: kernel.randomize_va_space=${aslr:-?} (BENCH_ASLR=on keeps 2), ${warm:-0} untimed warm-up round(s) of each configuration; both: cmtime-group.sh's comment"
echo "cmtime, us per connection (median of $rounds rounds, $(grep -h -m1 -o 'cmtime -s [^ ]* -p [0-9]* -c [0-9]*' "$res/logs/$name/cmtime-soft0-1.log" 2>/dev/null | awk '{print $NF}') connections); results $res"
printf '%-14s %10s %12s %10s %12s %10s  %s\n' step soft0 rxe0-debian "rxe/soft" rxe0-ours "rxe/soft" "target rxe0-debian/soft0 >= 10"
met=1
for s in create_id resolve_addr resolve_route create_qp connect disconnect destroy; do
  a=$(med soft0 $s); b=$(med rxe0-debian $s); c=$(med rxe0-ours $s)
  r=$(ratio "$b" "$a")
  v=$(awk -v r="$r" 'BEGIN { print (r != "-" && r >= 10) ? "met" : "NOT met" }')
  [ "$v" = met ] || met=0
  printf '%-14s %10s %12s %10s %12s %10s  %s\n' "$s" "${a:-?}" "${b:-?}" "$r" "${c:-?}" "$(ratio "$c" "$a")" "$v"
done
fl=$(awk '$1 == "floor" { print $4 }' "$num")
cs=$(awk '$1 == "clocksource" { print $2 }' "$res/logs/$name/clock_floor.log" 2>/dev/null)
[ -n "$fl" ] && echo "cmtime's own two gettimeofday() per connection: $fl us (clocksource ${cs:-?}); every soft0 step includes them, and a step whose 10x budget (rxe0-debian/10) they fill cannot meet the target"
# steps CONFIG ROUND STEP US (bench/rdmacm/cm_steps.c): the first round,
# and the median of the later ones.
steps_first() { awk -v c="$1" -v s="$2" '$1 == "steps" && $2 == c && $3 == 1 && $4 == s { print $5 }' "$num"; }
steps_later() { awk -v c="$1" -v s="$2" '$1 == "steps" && $2 == c && $3 > 1 && $4 == s { print $5 }' "$num" | median; }
if grep -q '^steps ' "$num"; then
  echo "the client's steps timed per step, not per id (bench/rdmacm/cm_steps.c: no clock read per id; information), us per id:"
  printf '%-14s %12s %12s %9s %12s %12s %9s
' step soft0-first rxe0-first rxe/soft soft0-later rxe0-later rxe/soft
  for s in create_id resolve_addr resolve_route destroy; do
    a=$(steps_first soft0 $s); b=$(steps_first rxe0-debian $s)
    c=$(steps_later soft0 $s); d=$(steps_later rxe0-debian $s)
    printf '%-14s %12s %12s %9s %12s %12s %9s
' "$s" "${a:-?}" "${b:-?}" "$(ratio "$b" "$a")" \
      "${c:-?}" "${d:-?}" "$(ratio "$d" "$c")"
  done
fi
echo "every round (us/conn):"
for s in create_id resolve_addr resolve_route create_qp connect disconnect destroy; do
  printf '  %-14s soft0 [%s]  rxe0-debian [%s]  rxe0-ours [%s]\n' "$s" "$(all soft0 $s)" "$(all rxe0-debian $s)" "$(all rxe0-ours $s)"
done
[ "$met" = 1 ] && exit 0 || exit 1
