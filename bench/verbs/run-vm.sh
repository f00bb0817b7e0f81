#!/bin/bash
# Issue 3 benchmark: one control-path cycle of the verbs on rxe0 in the qemu
# test bed (real kernel, Debian's provider librxe), our libibverbs against
# Debian's, measured in the same guest:
#   - userspace instructions (callgrind, only the cycle: open device, alloc PD,
#     reg MR, create CQ, create RC QP, modify to RTS, destroy all, close), with
#     the split per object (libibverbs / librxe / libc / ...);
#     target: ours / Debian's <= 0.8, judged on verbs_cycle linked -z now like
#     every Debian program; the lazily bound verbs_cycle_lazy (adds ld.so's
#     lazy binding, the same work for both libraries) is printed for information;
#   - resident set size right after ibv_open_device; target: ours <= Debian's.
# Prints the table with ratios and MET / NOT MET, then where our library
# spends its instructions (callgrind_annotate, self cost).
# The 64 target in the same run: when BUILD_DIR/abi64 (or $VM_BENCH_B64) is a
# 64 tree with lib/ and bench/verbs_cycle, the cycle is measured also with
# our 64 library and with rdma-core 64.0's own (its release build,
# tests/anchor64/build.sh --release: Debian's flags), both on rdma-core 64's
# provider librxe-rdmav64.so; target ours64/rdma-core 64 <= 0.8 as well.
#
#   bench/verbs/run-vm.sh [BUILD_DIR]     (default: build)
#   bench/verbs/run-vm.sh --report BUILD_DIR/vm-results/<run>   (table only)
#
# Builds nothing: needs BUILD_DIR/bench/verbs_cycle{,_lazy} and BUILD_DIR/lib
# (cmake --build BUILD_DIR --target verbs_cycle verbs_cycle_lazy ibverbs, or
# the target bench_verbs).
# The guest (tests/vm/run.sh) runs the group bench/verbs/verbs-cycle.sh; its
# raw numbers and callgrind out files stay in
# BUILD_DIR/vm-results/<run>/logs/verbs-cycle/.
# Environment: VM_BENCH_TIMEOUT (whole guest, s, default 1800),
# VM_BENCH_TEST_TIMEOUT (per program, s, default 900), OPENVERBS_VM_CACHE.
# Exit status: 0 targets met, 1 a target not met, 2 no measurement.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
group=$here/verbs-cycle.sh
name=$(basename "$group" .sh)
log=$(mktemp /tmp/ov-bench-verbs.XXXXXX)
trap 'rm -f "$log"' EXIT
if [ "${1:-}" = --report ]; then
  # Only print the table of an earlier run: --report BUILD_DIR/vm-results/<run>
  res=$(cd "${2:?--report needs a vm-results run folder}" && pwd)
else
  B=${1:-$repo/build}
  [ -d "$B" ] || { echo "bench-verbs: no build directory $B" >&2; exit 2; }
  B=$(cd "$B" && pwd)
  for f in "$B/bench/verbs_cycle" "$B/bench/verbs_cycle_lazy" "$B/lib/libibverbs.so.1"; do
    [ -e "$f" ] || { echo "bench-verbs: $f is missing (cmake --build $B --target verbs_cycle verbs_cycle_lazy ibverbs)" >&2; exit 2; }
  done
  # The judged program must be bound at load time, as Debian's programs are.
  if ! readelf -d "$B/bench/verbs_cycle" | grep -q 'FLAGS.*BIND_NOW'; then
    echo "bench-verbs: $B/bench/verbs_cycle is not linked -z now (rebuild it)" >&2; exit 2
  fi
  case $B in /tmp/*|/run/*) echo "bench-verbs: the guest cannot see $B (under /tmp or /run)" >&2; exit 2 ;; esac
  # The 64 target (optional): its tree and rdma-core 64's release build, named
  # for the guest in B/bench/verbs64.env.
  B64=${VM_BENCH_B64:-$B/abi64}
  rm -f "$B/bench/verbs64.env"
  if [ -x "$B64/bench/verbs_cycle" ] && [ -f "$B64/lib/libibverbs.so.1" ]; then
    B64=$(cd "$B64" && pwd)
    readelf -d "$B64/bench/verbs_cycle" | grep -q 'FLAGS.*BIND_NOW' ||
      { echo "bench-verbs: $B64/bench/verbs_cycle is not linked -z now (rebuild it)" >&2; exit 2; }
    if a64=$(sh "$repo/tests/anchor64/build.sh" --quiet --release); then
      printf 'B64=%q\nANCHOR64=%q\n' "$B64" "$a64" >"$B/bench/verbs64.env"
    else
      echo "bench-verbs: no rdma-core 64 release build: the 64 target is not measured" >&2
    fi
  else
    echo "bench-verbs: no 64 tree at $B64 (lib/, bench/verbs_cycle): the 64 target is not measured" >&2
  fi
  "$repo/tests/vm/run.sh" --build-dir "$B" --lib "$B/lib" --group "$group" \
    --timeout "${VM_BENCH_TIMEOUT:-1800}" --test-timeout "${VM_BENCH_TEST_TIMEOUT:-900}" 2>&1 | tee "$log"
  res=$(sed -n 's/^vm: results in //p' "$log" | tail -n1)
fi
dir=$res/logs/$name
num=$dir/numbers.txt
if [ -z "$res" ] || [ ! -s "$num" ]; then
  echo "bench-verbs: the guest produced no numbers (${res:-no results folder})" >&2; exit 2
fi
val() { awk -v k="$1" '$1 == k { print $2; exit }' "$num"; }

# Self cost (Ir) per object class, from a callgrind out file: cost lines count
# for the current ob=, except the line after calls= (the inclusive cost of a
# call, already counted in the callee).
split() {
  awk '
    function setob(s,   id) {
      if (match(s, /^\([0-9]+\)/)) {
        id = substr(s, RSTART, RLENGTH); s = substr(s, RLENGTH + 1); sub(/^ /, "", s)
        if (s != "") name[id] = s; return name[id]
      }
      return s
    }
    function class(o) {
      if (o ~ /libibverbs\.so/) return "libibverbs"
      if (o ~ /librxe/) return "librxe"
      if (o ~ /\/libc\.so/) return "libc"
      if (o ~ /ld-linux/) return "ld.so"
      if (o ~ /libstdc\+\+/) return "libstdc++"
      if (o ~ /verbs_cycle/) return "verbs_cycle"
      return "other"
    }
    /^ob=/ { cur = setob(substr($0, 4)); next }
    /^cob=/ { setob(substr($0, 5)); next }
    /^calls=/ { skip = 1; next }
    /^[0-9+*-]/ { if (skip) { skip = 0; next } c[class(cur)] += $2; next }
    END { for (k in c) print k, c[k] }' "$1"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "-"; else printf "%.3f", a / b }'; }
row() { printf '%-36s %14s %14s %9s\n' "$@"; }
# block OURS OTHER TITLE: the instruction rows of one pair of runs (OURS
# ours, ours-lazy or ours64; OTHER debian, debian-lazy or anchor64).
block() {
  local o=$1 d=$2 k a b
  declare -A so=() sd=()
  [ -s "$dir/callgrind.$o.out" ] && while read -r k a; do so[$k]=$a; done < <(split "$dir/callgrind.$o.out")
  [ -s "$dir/callgrind.$d.out" ] && while read -r k a; do sd[$k]=$a; done < <(split "$dir/callgrind.$d.out")
  a=$(val "ir_$o"); b=$(val "ir_$d")
  row "$3" "${a:-?}" "${b:-?}" "$(ratio "$a" "$b")"
  for k in libibverbs librxe libc libstdc++ ld.so verbs_cycle other; do
    [ -n "${so[$k]:-}${sd[$k]:-}" ] || continue
    row "  of which in $k" "${so[$k]:-0}" "${sd[$k]:-0}" "$(ratio "${so[$k]:-0}" "${sd[$k]:-0}")"
  done
}
ir_o=$(val ir_ours); ir_d=$(val ir_debian)
ro=$(val rss_after_ours); rd=$(val rss_after_debian)
bo=$(val rss_before_ours); bd=$(val rss_before_debian)
echo
echo "verbs control-path cycle on $(val device) (gid index $(val gid_index)), $(date -u +%FT%TZ)"
echo "results: $dir"
echo "ours:   $(val lib_ours)"
echo "debian: $(val lib_debian)"
row "" "openverbs" "debian" "ours/deb"
block ours debian "instructions, cycle (-z now)"
block ours-lazy debian-lazy "instructions, lazy program (info)"
row "RSS before open (KiB)" "${bo:-?}" "${bd:-?}" "$(ratio "$bo" "$bd")"
row "RSS after ibv_open_device (KiB)" "${ro:-?}" "${rd:-?}" "$(ratio "$ro" "$rd")"
row "  growth by open (KiB)" "$(( ${ro:-0} - ${bo:-0} ))" "$(( ${rd:-0} - ${bd:-0} ))" ""
ir_o64=$(val ir_ours64); ir_a64=$(val ir_anchor64)
if [ -n "$ir_o64$ir_a64" ]; then
  echo "the 64 target: ours64 $(val lib_ours64); rdma-core 64: $(val lib_anchor64)"
  row "" "openverbs 64" "rdma-core 64" "ratio"
  block ours64 anchor64 "instructions, cycle (-z now)"
fi

# Resident KiB per mapped object (first --rss run of each), where they differ.
if [ -s "$dir/rss-maps-ours.txt" ] && [ -s "$dir/rss-maps-debian.txt" ]; then
  echo "resident KiB per mapped object after open (where ours and Debian's differ):"
  awk '
    function key(p) { if (p ~ /\/libibverbs\.so/) return "libibverbs.so.1"; n = split(p, a, "/"); return a[n] }
    FNR == 1 { side++ }
    { k = key($2); v[side, k] += $1; seen[k] = 1 }
    END {
      for (k in seen) if (v[1, k] != v[2, k])
        printf "  %-34s %14d %14d %+9d\n", k, v[1, k], v[2, k], v[1, k] - v[2, k]
    }' "$dir/rss-maps-ours.txt" "$dir/rss-maps-debian.txt" | sort -k4,4gr
fi

# Inclusive instructions of each verb the cycle calls (the -z now runs):
# the largest inclusive entry of the exported function, any symbol version.
verb_incl() { # OUTFILE VERB
  awk -v v="$2" '
    { line = $0; sub(/ \[[^]]*\]$/, "", line)
      if (match(line, ":" v "(@@?IBVERBS_[0-9.]+)?$")) { c = $1; gsub(/,/, "", c); if (c + 0 > m) m = c + 0 } }
    END { print m + 0 }' "$1"
}
# per_verb OURS OTHER TITLE: that table for one pair of runs.
per_verb() {
  [ -s "$dir/callgrind.$1.out" ] && [ -s "$dir/callgrind.$2.out" ] &&
    command -v callgrind_annotate >/dev/null || return 0
  callgrind_annotate --auto=no --inclusive=yes --threshold=100 "$dir/callgrind.$1.out" >"$log.io" 2>/dev/null
  callgrind_annotate --auto=no --inclusive=yes --threshold=100 "$dir/callgrind.$2.out" >"$log.id" 2>/dev/null
  echo "$3"
  for v in ibv_open_device ibv_alloc_pd ibv_reg_mr ibv_create_cq ibv_create_qp ibv_cmd_query_port \
           ibv_query_gid ibv_modify_qp ibv_destroy_qp ibv_destroy_cq ibv_dereg_mr ibv_dealloc_pd \
           ibv_close_device; do
    a=$(verb_incl "$log.io" "$v"); b=$(verb_incl "$log.id" "$v")
    row "  $v" "$a" "$b" "$(ratio "$a" "$b")"
  done
  rm -f "$log.io" "$log.id"
}
per_verb ours debian "inclusive instructions per verb (-z now runs; includes librxe and libc below it):"
per_verb ours64 anchor64 "the same, 64 target (openverbs 64 / rdma-core 64):"

status=0
verdict() { # NAME OK(0/1) TEXT
  if [ "$2" = 1 ]; then echo "PASS $1: $3"; else echo "FAIL $1: $3"; status=1; fi
}
if [ -n "$ir_o" ] && [ -n "$ir_d" ]; then
  ok=$(awk -v a="$ir_o" -v b="$ir_d" 'BEGIN { print (a <= 0.8 * b) ? 1 : 0 }')
  verdict instructions "$ok" "ours/debian $(ratio "$ir_o" "$ir_d") = $ir_o/$ir_d, program linked -z now (target <= 0.8; lazy program, info: $(ratio "$(val ir_ours-lazy)" "$(val ir_debian-lazy)"))"
else
  echo "FAIL instructions: not measured (see $dir)"; status=2
fi
if [ -n "$ir_o64" ] && [ -n "$ir_a64" ]; then
  ok=$(awk -v a="$ir_o64" -v b="$ir_a64" 'BEGIN { print (a <= 0.8 * b) ? 1 : 0 }')
  verdict instructions64 "$ok" "ours64/rdma-core 64 $(ratio "$ir_o64" "$ir_a64") = $ir_o64/$ir_a64, 64 trees' program linked -z now, rdma-core 64's librxe-rdmav64.so (target <= 0.8)"
elif [ -s "${B:-/nonexistent}/bench/verbs64.env" ] || [ -n "$ir_o64$ir_a64" ]; then
  echo "FAIL instructions64: not measured (see $dir)"; status=2
fi
if [ -n "$ro" ] && [ -n "$rd" ]; then
  ok=$(( ro <= rd ? 1 : 0 ))
  verdict rss "$ok" "ours $ro KiB, debian $rd KiB after open (target: ours <= debian)"
else
  echo "FAIL rss: not measured (see $dir)"; status=2
fi

# top OUTFILE [REGEX]: the 15 functions with the most self instructions
# (only the lines matching REGEX, e.g. one object).
top() {
  callgrind_annotate --auto=no --threshold=100 "$1" 2>/dev/null |
    awk -v re="${2:-.}" 'f && /^-+$/ { next } f && NF && $0 ~ re { print; if (++n == 15) exit } /file:function/ { f = 1 }'
}
# Where the instructions go (self cost, -z now runs): the whole cycle of each
# run, then only our library's own functions.
if [ -s "$dir/callgrind.ours.out" ] && command -v callgrind_annotate >/dev/null; then
  echo
  echo "top functions by self instructions, our run:"
  top "$dir/callgrind.ours.out"
  echo "top functions by self instructions, Debian's run:"
  top "$dir/callgrind.debian.out"
  echo "top functions of our libibverbs:"
  top "$dir/callgrind.ours.out" "libibverbs\\.so"
fi
exit "$status"
