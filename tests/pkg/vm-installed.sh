#!/bin/sh
# vm-installed.sh SUITE
#
# The real kernel with the installed system: boots the Debian root of SUITE
# (tests/roots, with tests/pkg/root-packages.txt) in the qemu test bed
# (tests/vm/run.sh --root) twice, once as Debian made it and once with our
# packages installed by apt, and runs Debian's ibverbs-utils and perftest
# groups (rxe-verbs, rxe-perftest, siw-verbs, siw-perftest) and rdma-core's
# pyverbs suite on rxe0 and siw0 (tests/pkg/vm/system.sh) from the system
# paths, no LD_LIBRARY_PATH/LD_PRELOAD. Passes when both runs give the same
# outcome for every test (and every pyverbs test), Debian's root names
# libibverbs1 and ours libibverbs1-openverbs for libibverbs.so.1.
# Kernels: bookworm boots Debian 12's default (6.1); trixie boots
# bookworm's linux-image-6.12.*+deb12-amd64 (trixie's own 6.12 image
# panicked early in 3 of 6 TCG boots here). Both cached under
# ${OPENVERBS_CACHE:-/var/cache/openverbs}/vm. Work files: build/pkg-vm/SUITE.
set -u
export LC_ALL=C
suite=${1:?usage: vm-installed.sh SUITE}
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$repo/build/pkg-vm/$suite
export OPENVERBS_VM_CACHE=${OPENVERBS_VM_CACHE:-${OPENVERBS_CACHE:-/var/cache/openverbs}/vm}
case $suite in
  bookworm) kernel="";;
  trixie) kernel='linux-image-6.12.*+deb12-amd64';;
  *) echo "vm-installed: unknown suite $suite" >&2; exit 2;;
esac
. "$repo/tests/pkg/common.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (debootstrap, chroot, overlay mounts)"; exit 0; }
t0=$(date +%s)
rm -rf "$work"
mkdir -p "$work"

# The packages pkg_installed_SUITE built from this tree, else a new build.
if ! sh "$repo/packaging/build-deb.sh" --reuse --no-lintian "$suite" > "$work/build.log" 2>&1; then
  tail -20 "$work/build.log"; line FAIL build-deb "($work/build.log)"; finish
fi
debs=$repo/build/deb/$suite
test_root
# Our packages, installed by apt into an overlay layer of the root.
install_debs install-ours "$debs" "$work/ours"
mkdir -p "$work/debian/upper" "$work/debian/work"

# boot SIDE: the root (with SIDE's layer on top) in the test bed.
boot() {
  side=$1
  mkdir -p "$work/$side/merged"
  unshare --mount --propagation private sh -c '
    mount -t overlay overlay -o "lowerdir=$1,upperdir=$2/upper,workdir=$2/work" "$2/merged" || exit 2
    shift 3
    exec "$@"' sh "$root" "$work/$side" - \
    "$repo/tests/vm/run.sh" --root "$work/$side/merged" --build-dir "$work/$side" \
      ${kernel:+--kernel "$kernel"} --group "$repo/tests/pkg/vm/system.sh" \
      --only rxe-verbs rxe-perftest siw-verbs siw-perftest system > "$work/$side.log" 2>&1
  rc=$?
  res=$work/$side/vm-results/latest
  if [ -f "$res/results.txt" ] && ! grep -q '^FAIL vm/run ' "$res/results.txt"; then
    line PASS "boot-$side" "(run.sh exit $rc: $(tail -1 "$work/$side.log"); $(sed -n 's/^guest run: \([0-9.]*\) s.*/guest run \1 s/p' "$res/summary.txt"))"
  else
    tail -15 "$work/$side.log"; line FAIL "boot-$side" "($work/$side.log)"
  fi
}
boot debian
boot ours
rd=$work/debian/vm-results/latest; ro=$work/ours/vm-results/latest

# Same outcome for every test of the groups.
# (The pyverbs lines are compared per test below.)
outcomes() { awk '$1 ~ /^(PASS|FAIL|XFAIL|SKIP)$/ && $2 !~ /^system\/pyverbs-/ { print $1, $2 }' "$1/results.txt" | sort; }
outcomes "$rd" > "$work/debian.outcomes" 2>/dev/null
outcomes "$ro" > "$work/ours.outcomes" 2>/dev/null
n=$(grep -c . "$work/ours.outcomes")
if [ "$n" -gt 0 ] && cmp -s "$work/debian.outcomes" "$work/ours.outcomes"; then
  line PASS same-outcomes "($n tests: $(awk '{ print $1 }' "$work/ours.outcomes" | sort | uniq -c | awk '{ printf "%s%s %s", sep, $1, $2; sep = ", " }'))"
else
  diff "$work/debian.outcomes" "$work/ours.outcomes" | head -20
  line FAIL same-outcomes "(debian vs ours: $work/*.outcomes)"
fi
# pyverbs, per test: the same outcome, or a difference listed with its
# reason in vm-known-differences.txt.
for dev in rxe0 siw0; do
  f=logs/system/pyverbs-$dev.outcomes
  n=$(grep -c . "$ro/$f" 2>/dev/null || echo 0)
  sed -e 's/#.*//' "$repo/tests/pkg/vm-known-differences.txt" |
    awk -v s="$suite" -v d="$dev" '$1 == s && $2 == d { print $3, ($4 < $5 ? $4 " " $5 : $5 " " $4) }' |
    sort > "$work/known-$dev"
  # A suite that crashed under Debian's libraries (rdma-core 56.1's on rxe0
  # and 6.12 ends with SIGSEGV in test_mlx5_cq) is compared on the tests it
  # reached; the group's note names the crash.
  cut=""
  if grep -q 'exit 139' "$rd/results.txt" 2>/dev/null && grep -q "system/pyverbs-$dev .*exit 139" "$rd/results.txt"; then
    cut="; Debian's run crashed (SIGSEGV) after $(grep -c . "$rd/$f") tests: compared on those"
    join -o 0,1.2,2.2 "$rd/$f" "$ro/$f" 2>/dev/null | awk '$2 != $3' | sort > "$work/diff-$dev"
  else
    join -a1 -a2 -e none -o 0,1.2,2.2 "$rd/$f" "$ro/$f" 2>/dev/null |
      awk '$2 != $3' | sort > "$work/diff-$dev"
  fi
  # A listed difference is accepted in either direction (flaky tests).
  awk '{ print $1, ($2 < $3 ? $2 " " $3 : $3 " " $2) }' "$work/diff-$dev" | sort -o "$work/diff-$dev"
  # Known lines are patterns: a difference matches one when its outcomes are
  # the listed pair and its test name matches the glob (* and ? only).
  awk 'FNR == NR { g = $1; gsub(/[.]/, "[.]", g); gsub(/[*]/, ".*", g); gsub(/[?]/, ".", g)
                   pat[NR] = "^" g "$"; pair[NR] = $2 " " $3; n = NR; next }
       { hit = 0; for (i = 1; i <= n; i++) if ($1 ~ pat[i] && $2 " " $3 == pair[i]) { hit = i; break }
         print (hit ? "known " hit : "unknown"), $0 }' "$work/known-$dev" "$work/diff-$dev" > "$work/match-$dev"
  unknown=$(awk '$1 == "unknown" { print $2, $3, $4 }' "$work/match-$dev" | head -10 | tr '\n' ';')
  gone=$(awk 'FNR == NR { if ($1 == "known") used[$2] = 1; next } !(FNR in used) { print $1 }' "$work/match-$dev" "$work/known-$dev" | tr '\n' ' ')
  known=$(grep -c '^known' "$work/match-$dev")
  note=""
  [ "$known" -gt 0 ] && note="; $known known difference(s): vm-known-differences.txt"
  [ -n "$gone" ] && note="$note; listed but gone: $gone"
  note="$note$cut"
  if [ "$n" -gt 0 ] && [ -z "$unknown" ]; then
    line PASS "pyverbs-$dev-same" "($n tests: $(awk '{ print $2 }' "$ro/$f" | sort | uniq -c | awk '{ printf "%s%s %s", sep, $1, $2; sep = ", " }')$note)"
  else
    line FAIL "pyverbs-$dev-same" "(test debian ours, first 10: ${unknown:-no outcomes}; $work/diff-$dev$cut)"
  fi
done
for side in debian ours; do
  want=libibverbs1; [ "$side" = ours ] && want=libibverbs1-openverbs
  got=$(cat "$work/$side/vm-results/latest/logs/system/owner.log" 2>/dev/null)
  case $got in
    "libibverbs.so.1: $want ;"*) line PASS "owner-$side" "($got)";;
    *) line FAIL "owner-$side" "(wanted $want: '$got')";;
  esac
done
echo "vm-$suite: $(( $(date +%s) - t0 )) s in all" >&2
finish
