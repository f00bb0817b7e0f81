#!/bin/bash
# vm.sh BUILD64 | --report RESULTS: the 64 target on the real kernel. Boots the qemu test bed
# (tests/vm/run.sh) with Debian's 6.12 kernel (linux-image-6.12.*+deb12-amd64)
# and runs the group guest64.sh there: rdma-core 64's own programs, providers
# (librxe-rdmav64.so, libsiw-rdmav64.so) and pyverbs suite on rxe0 and siw0,
# once with rdma-core 64's own libraries and once with the libraries of
# BUILD64/lib (a 64 tree) in front of them. Then compares the two sides:
#   - every ibverbs-utils test (rxe-verbs, siw-verbs groups) has the same
#     outcome (PASS/XFAIL) under both;
#   - every pyverbs test has the same outcome on rxe0 and on siw0, except the
#     differences listed with their reason in vm-known-differences.txt.
# Prints one PASS/FAIL line per comparison and the ok counts of the suites;
# exit status 0 when every comparison passed. The anchor is built (or found
# in the cache) by build.sh (77 without its tarball); the kernel and siw.ko
# are cached in ${OPENVERBS_VM_CACHE:-${OPENVERBS_CACHE:-/var/cache/openverbs}/vm}
# (shared with the other test-bed users). Results: BUILD64/vm-results/latest.
# --report RESULTS compares the sides of an earlier run's results folder again.
set -u
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
t0=$(date +%s)
fails=0
line() { echo "$1 anchor64-vm/$2 ${3:-}"; [ "$1" = FAIL ] && fails=$((fails + 1)); return 0; }
if [ "${1:-}" = --report ]; then
  res=$(cd "${2:?--report needs a results folder}" && pwd) || exit 2
else
  b64=${1:?usage: vm.sh BUILD64 | --report RESULTS}
  b64=$(cd "$b64" && pwd) || exit 2
  [ -f "$b64/lib/libibverbs.so.1" ] || { echo "anchor64-vm: no $b64/lib/libibverbs.so.1" >&2; exit 2; }
  anchor=$(sh "$here/build.sh" --quiet) || exit $?
  release=$(sh "$here/build.sh" --quiet --release) || exit $?
  export OPENVERBS_VM_CACHE=${OPENVERBS_VM_CACHE:-${OPENVERBS_CACHE:-/var/cache/openverbs}/vm}
  printf 'ANCHOR64=%q\nANCHOR64_PY=%q\n' "$release" "$(readlink -f "$anchor")" >"$b64/anchor64-vm.env"
  "$repo/tests/vm/run.sh" --baseline --build-dir "$b64" --kernel 'linux-image-6.12.*+deb12-amd64' \
    --group "$here/guest64.sh" --timeout "${OPENVERBS_VM_TIMEOUT:-2400}" --test-timeout 120 >"$b64/anchor64-vm.log" 2>&1
  rc=$?
  cat "$b64/anchor64-vm.log"
  res=$(sed -n 's/^vm: results in //p' "$b64/anchor64-vm.log" | tail -n1)
  if [ -z "$res" ] || [ ! -f "$res/results.txt" ] || grep -q '^FAIL vm/run ' "$res/results.txt"; then
    line FAIL boot "(run.sh exit $rc; $b64/anchor64-vm.log)"
    exit 1
  fi
fi
logs=$res/logs/guest64

# The programs' outcomes, side by side: "TEST STATUS" per side.
side_outcomes() {
  awk -v p="guest64-$1/" '$1 ~ /^(PASS|FAIL|XFAIL|SKIP)$/ && index($2, p) == 1 && $2 !~ /\/pyverbs-/ {
    print substr($2, length(p) + 1), $1 }' "$res/results.txt" | sort
}
side_outcomes anchor >"$logs/anchor.outcomes"
side_outcomes ours >"$logs/ours.outcomes"
n=$(grep -c . "$logs/anchor.outcomes")
if [ "$n" -gt 0 ] && cmp -s "$logs/anchor.outcomes" "$logs/ours.outcomes"; then
  line PASS programs-same "($n tests: $(awk '{ print $2 }' "$logs/ours.outcomes" | sort | uniq -c |
    awk '{ printf "%s%s %s", s, $1, $2; s = ", " }'))"
else
  diff "$logs/anchor.outcomes" "$logs/ours.outcomes" | head -20
  line FAIL programs-same "(anchor vs ours: $logs/{anchor,ours}.outcomes)"
fi
# Every program test of the anchor's own run passed or failed as the group
# expects (rxe has no XRC, iWARP connects only through rdma_cm).
if grep -q '^FAIL guest64-anchor/' "$res/results.txt"; then
  line FAIL anchor-programs "(rdma-core 64's own library failed a test: $(grep '^FAIL guest64-anchor/' "$res/results.txt" | head -3 | tr '\n' ';'))"
fi

# pyverbs, per test: the same outcome, or a listed known difference (either direction).
counts() { awk '{ print $2 }' "$1" | sort | uniq -c | awk '{ printf "%s%s %s", s, $1, $2; s = ", " }'; }
for dev in rxe0 siw0; do
  a=$logs/anchor/pyverbs-$dev.outcomes o=$logs/ours/pyverbs-$dev.outcomes
  na=$(grep -c . "$a" 2>/dev/null || echo 0)
  join -a1 -a2 -e none -o 0,1.2,2.2 "$a" "$o" 2>/dev/null | awk '$2 != $3' >"$logs/diff-$dev"
  unknown=$(sed -e 's/#.*//' "$here/vm-known-differences.txt" |
    awk -v d="$dev" 'FNR == NR { if ($1 == d) { g = $2; gsub(/[.]/, "[.]", g); gsub(/[*]/, ".*", g)
                       pat[++n] = "^" g "$"; pair[n] = ($3 < $4 ? $3 " " $4 : $4 " " $3) } next }
                     { p = ($2 < $3 ? $2 " " $3 : $3 " " $2); hit = 0
                       for (i = 1; i <= n; i++) if ($1 ~ pat[i] && p == pair[i]) hit = 1
                       if (!hit) print $1, $2, $3 }' - "$logs/diff-$dev")
  known=$(( $(grep -c . "$logs/diff-$dev") - $(printf '%s' "$unknown" | grep -c .) ))
  note="anchor: $(counts "$a"); ours: $(counts "$o")"
  [ "$known" -gt 0 ] && note="$note; $known known difference(s), vm-known-differences.txt"
  if [ "$na" -gt 0 ] && [ -z "$unknown" ]; then
    line PASS "pyverbs-$dev-same" "($na tests; $note)"
  else
    line FAIL "pyverbs-$dev-same" "(test anchor ours: $(printf '%s' "$unknown" | head -10 | tr '\n' ';'); $note)"
  fi
done
echo "anchor64-vm: $(( $(date +%s) - t0 )) s; results $res"
[ "$fails" = 0 ]
