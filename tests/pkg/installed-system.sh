#!/bin/sh
# installed-system.sh SUITE
#
# Proof on an installed system (SUITE: bookworm or trixie):
#  1. builds the packages (packaging/build-deb.sh SUITE), and the same tree
#     again at a higher version (VERSION+1, for the upgrade path);
#  2. takes a cached root of SUITE with Debian's ibverbs-utils, perftest,
#     python3-pyverbs, infiniband-diags, ibsim-utils, opensm, ...
#     (tests/pkg/root-packages.txt; tests/roots/make-root.sh) and, in an
#     overlay kept for this run:
#  3. apt-get install ./*.deb: ours replace libibverbs1, libibumad3
#     (librdmacm1) while every installed reverse dependency stays;
#  4. runs tests/pkg/in-root.sh ours: dpkg -S names our packages; Debian's
#     programs from /usr/bin, no LD_LIBRARY_PATH/LD_PRELOAD, on soft0;
#     infiniband-diags on ibsim;
#  5. goes back to Debian's libraries (apt-get install libibverbs1 ...; our
#     packages are removed by their Conflicts) and runs in-root.sh debian;
#     infiniband-diags print byte-identical output in both phases;
#  6. installs ours again, then the higher version over it (our package
#     replacing itself), and runs in-root.sh ours once more.
# Prints one line per test and "N passed, N failed". Exit status 0 = all
# passed. Work files: build/pkg-test/SUITE/ (logs under out-*/logs).
set -u
suite=${1:?usage: installed-system.sh SUITE}
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$repo/build/pkg-test/$suite
. "$repo/tests/pkg/common.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (debootstrap, chroot)"; exit 0; }

rm -rf "$work"
mkdir -p "$work"
t0=$(date +%s)

# 1. Packages: this tree's version, and one higher.
if ! sh "$repo/packaging/build-deb.sh" "$suite" > "$work/build-v1.log" 2>&1; then
  tail -20 "$work/build-v1.log"; line FAIL build-deb "($work/build-v1.log)"; finish
fi
v1dir=$repo/build/deb/$suite
v1=$(dpkg-deb -f "$(ls "$v1dir"/libibverbs1-openverbs_*.deb | head -1)" Version)
v2="$v1+1"
if ! sh "$repo/packaging/build-deb.sh" --no-lintian --version "$v2" --out "$work/v2" "$suite" \
     > "$work/build-v2.log" 2>&1; then
  tail -20 "$work/build-v2.log"; line FAIL build-deb-v2 "($work/build-v2.log)"; finish
fi
v2dir=$work/v2/$suite
line PASS build-deb "($v1 and $v2, $(( $(date +%s) - t0 )) s)"

# 2. The root: Debian's programs, Debian's libraries.
t=$(date +%s)
test_root
line PASS make-root "($root, $(( $(date +%s) - t )) s)"
state=$work/state
in_root() { sh "$repo/tests/roots/enter.sh" --write "$state" "$@"; }
rdmacm_ours=0
ls "$v1dir"/librdmacm1-openverbs_*.deb > /dev/null 2>&1 && rdmacm_ours=1

# phase NAME ours|debian: in-root.sh in a private network namespace.
phase() {
  mkdir -p "$work/out-$1"
  in_root --net --bind "$repo:/src" --bind-rw "$work/out-$1:/out" "$root" \
    sh /src/tests/pkg/in-root.sh "$2" /out > "$work/out-$1/results.txt" 2>&1
  while read -r st name rest; do
    case $st in PASS|FAIL) line "$st" "$1/$name" "$rest";; esac
  done < "$work/out-$1/results.txt"
  grep -Eq '^(PASS|FAIL) ' "$work/out-$1/results.txt" || line FAIL "$1/no-results" "($work/out-$1/results.txt)"
}

# 3-4. Ours installed over Debian's.
install_debs install-ours "$v1dir" "$state"
phase ours ours

# 5. Back to Debian's libraries.
back="libibverbs1 libibumad3"
if [ "$rdmacm_ours" = 1 ]; then
  case $suite in trixie) back="$back librdmacm1t64";; *) back="$back librdmacm1";; esac
fi
if in_root "$root" sh -c "apt-get install -y --purge $back || { apt-get update -q && apt-get install -y --purge $back; }" \
     > "$work/back-to-debian.log" 2>&1; then
  line PASS back-to-debian "(apt-get install --purge $back)"
else
  tail -15 "$work/back-to-debian.log"; line FAIL back-to-debian "($work/back-to-debian.log)"; finish
fi
phase debian debian

# The diags' outputs (and exit codes) with ours and with Debian's libibumad.
if [ -f "$work/out-ours/ibsim/index-system" ] && [ -f "$work/out-debian/ibsim/index-system" ] &&
   diff -r "$work/out-ours/ibsim" "$work/out-debian/ibsim" > "$work/ibsim.diff" 2>&1; then
  line PASS ibsim-identical "($(grep -c . "$work/out-ours/ibsim/index-system") commands byte-identical)"
else
  head -20 "$work/ibsim.diff"; line FAIL ibsim-identical "($work/ibsim.diff)"
fi

# 6. Ours again, then the higher version over it.
install_debs reinstall-ours "$v1dir" "$state"
install_debs upgrade-ours "$v2dir" "$state"
got=$(in_root "$root" dpkg-query -W -f '${Version}' libibverbs1-openverbs 2>/dev/null)
if [ "$got" = "$v2" ]; then line PASS upgraded-version "($got)"
else line FAIL upgraded-version "(libibverbs1-openverbs is '$got', wanted $v2)"
fi
phase upgraded ours
echo "pkg-$suite: $(( $(date +%s) - t0 )) s in all" >&2
finish
