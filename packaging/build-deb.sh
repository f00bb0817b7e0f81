#!/bin/sh
# build-deb.sh [--version V] [--out DIR] [--no-lintian] [--reuse] [SUITE...]
#
# Builds the Debian packages of this tree for each SUITE (default: bookworm,
# and trixie when the tree has the rdma-core 56 ABI target) and writes them
# to build/deb/SUITE/*.deb (or DIR/SUITE/*.deb):
#   libibverbs1-openverbs   takes the place of Debian's libibverbs1
#   libibumad3-openverbs    ... of libibumad3
#   librdmacm1-openverbs    ... of librdmacm1 / librdmacm1t64 (when the tree
#                           builds librdmacm.so.1)
#   libopenverbs-dev        ... of libibverbs-dev, libibumad-dev (librdmacm-dev)
#   openverbs-soft-provider the software device's provider and its libibverbs.d file
#
# Each suite is built inside a cached Debian root of that suite
# (tests/roots/make-root.sh), so the packages link that release's libc and
# libnl: bookworm builds the 44 ABI target (rdma-core 44.0, Debian 12),
# trixie the 56 target (rdma-core 56.1, Debian 13). The tree is bound
# read-only; the CMake build tree (build/deb-work/SUITE/obj) is kept, so a
# second run only relinks what changed. Then lintian (the suite's own) runs
# on the result; its output is in build/deb/SUITE/lintian.txt and any tag
# of severity error or warning fails the build.
#
# Version: V, else $OPENVERBS_DEB_VERSION, else RDMA+ovN (RDMA = the rdma-core
# release of the ABI, N = commits on HEAD, so a later commit gets a higher
# version; a tree with uncommitted changes gets .dSECONDS appended). The
# changelog entry names the commit.
# --reuse: keep DIR/SUITE as it is when it was built from this same tree
# (commit and uncommitted changes, recorded in DIR/SUITE/.source-id) with the
# same options. Needs root (debootstrap, chroot). Exit status 0 = every suite built clean.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
version=${OPENVERBS_DEB_VERSION:-}
lintian=1
reuse=0
outbase=$repo/build/deb
while [ $# -gt 0 ]; do
  case $1 in
    --version) version=$2; shift 2;;
    --no-lintian) lintian=0; shift;;
    --reuse) reuse=1; shift;;
    --out) mkdir -p "$2"; outbase=$(cd "$2" && pwd); shift 2;;
    -*) echo "build-deb: unknown option $1" >&2; exit 2;;
    *) break;;
  esac
done

has_abi56() { grep -qs 'OPENVERBS_ABIS.*56' "$repo/cmake/OpenverbsAbi.cmake"; }
has_rdmacm() { grep -rqs 'OUTPUT_NAME rdmacm' "$repo/src"; }

if [ $# -eq 0 ]; then
  set -- bookworm
  if has_abi56; then set -- "$@" trixie
  else echo "build-deb: this tree has no rdma-core 56 target (-DOPENVERBS_ABI=56): trixie skipped" >&2
  fi
fi

# Build dependencies inside the root (the packages' Build-Depends, dpkg's
# tools and lintian).
BUILD_ROOT_PKGS="build-essential cmake g++ make pkgconf libnl-3-dev libnl-route-3-dev zlib1g-dev debhelper fakeroot
  dpkg-dev file lintian"

commit_version() {
  count=$(git -C "$repo" rev-list --count HEAD 2>/dev/null || echo 0)
  v="ov$count"
  if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    v="$v.d$(date -u +%s)"
  fi
  echo "$v"
}

build_suite() {
  suite=$1
  case $suite in
    bookworm) abi=44; rdma=44.0; debver=44.0-2; rdmacm_names="librdmacm1";
              standards=4.6.2;;
    trixie)   abi=56; rdma=56.1; debver=56.1-1; rdmacm_names="librdmacm1t64, librdmacm1";
              standards=4.7.2;;
    *) echo "build-deb: unknown suite $suite (bookworm, trixie)" >&2; return 2;;
  esac
  if [ "$abi" = 56 ] && ! has_abi56; then
    echo "build-deb: $suite needs the 56 ABI target, which this tree does not have" >&2; return 1
  fi
  ver=${version:-$rdma+$(commit_version)}
  out=$outbase/$suite
  source_id=$( { git -C "$repo" rev-parse HEAD; git -C "$repo" diff HEAD; echo "$version"; } 2>/dev/null | sha256sum | cut -c1-16)
  if [ "$reuse" = 1 ] && [ "$(cat "$out/.source-id" 2>/dev/null)" = "$source_id" ] && ls "$out"/*.deb > /dev/null 2>&1; then
    echo "build-deb: $suite: reusing $out (built from this tree)" >&2
    ls "$out"/*.deb
    return 0
  fi
  work=$repo/build/deb-work/$suite
  # One build per suite and tree at a time (they share build/deb-work/SUITE).
  mkdir -p "$work"
  exec 7>"$work.lock"
  flock 7
  # shellcheck disable=SC2086
  root=$(sh "$repo/tests/roots/make-root.sh" "$suite" $BUILD_ROOT_PKGS) || return 1

  # The debian/ folder: the templates, control and changelog for this suite.
  rm -rf "$work/pkg"
  mkdir -p "$work/pkg/debian" "$work/obj" "$out"
  cp "$here/debian/"* "$work/pkg/debian/"
  rm -f "$work/pkg/debian/control.in" "$work/pkg/debian/rdmacm.stanza"
  stanza=""; dev_dep=""; dev_prov=""; dev_conf=""; rdmacm=""
  if has_rdmacm; then
    rdmacm=${rdmacm_names%%,*}
    prov=$(echo "$rdmacm_names" | awk -F', *' -v v="$debver" \
      '{ for (i = 1; i <= NF; i++) printf "%s%s (= %s)", (i > 1 ? ", " : ""), $i, v }')
    stanza=$(sed -e "s/@RDMACM_PROVIDES@/$prov/" -e "s/@RDMACM_NAMES@/$rdmacm_names/" \
      -e "s/@RDMA_VERSION@/$rdma/" "$here/debian/rdmacm.stanza")
    dev_dep=" librdmacm1-openverbs (= \${binary:Version}),"
    dev_prov=", librdmacm-dev (= $debver)"
    dev_conf=", librdmacm-dev"
  else
    rm -f "$work/pkg/debian/librdmacm1-openverbs.install"
  fi
  awk -v stanza="$stanza" '$0 == "@RDMACM_STANZA@" { print stanza; print ""; next } { print }' \
    "$here/debian/control.in" |
    sed -e "s/@DEBIAN_VERSION@/$debver/g" -e "s/@RDMA_VERSION@/$rdma/g" \
        -e "s/@STANDARDS@/$standards/" \
        -e "s/@RDMACM_DEV_DEPENDS@/$dev_dep/" -e "s/@RDMACM_DEV_PROVIDES@/$dev_prov/" \
        -e "s/@RDMACM_DEV_CONFLICTS@/$dev_conf/g" > "$work/pkg/debian/control"
  cat > "$work/pkg/debian/changelog" <<EOF
openverbs ($ver) $suite; urgency=medium

  * Built from the openverbs tree (commit $(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown))
    by packaging/build-deb.sh for $suite (rdma-core $rdma ABI).

 -- openverbs project <openverbs@example.invalid>  $(date -R -u -d @"${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)}")
EOF
  mkdir -p "$work/pkg/debian/source"
  echo "3.0 (native)" > "$work/pkg/debian/source/format"

  echo "build-deb: $suite $ver (ABI $abi) in $root" >&2
  rm -f "$work"/*.deb "$work"/*.ddeb "$work"/*.buildinfo "$work"/*.changes
  log=$work/build.log
  if ! sh "$repo/tests/roots/enter.sh" --bind "$repo:/src" --bind-rw "$work:/build" \
       --env DEB_BUILD_OPTIONS="noddebs parallel=$(nproc)" \
       --env OV_ABI="$abi" --env OV_RDMA_VERSION="$rdma" --env OV_RDMACM="$rdmacm" \
       --cwd /build/pkg "$root" \
       dpkg-buildpackage -b -us -uc > "$log" 2>&1; then
    tail -30 "$log" >&2
    echo "build-deb: $suite: dpkg-buildpackage failed (log: $log)" >&2
    return 1
  fi
  rm -f "$out"/*.deb "$out/.source-id"
  cp "$work"/*.deb "$out/"
  echo "$source_id" > "$out/.source-id"
  if [ "$lintian" = 1 ]; then
    sh "$repo/tests/roots/enter.sh" --bind "$out:/debs" "$root" \
      sh -c 'lintian --no-cfg --fail-on none --display-info --suppress-tags-from-file /dev/null /debs/*.deb' \
      > "$out/lintian.txt" 2>&1 || true
    if grep -E '^[EW]: ' "$out/lintian.txt" >&2; then
      echo "build-deb: $suite: lintian errors or warnings above ($out/lintian.txt; packaging/README.md lists the accepted ones)" >&2
      return 1
    fi
  fi
  echo "build-deb: $suite: $(ls "$out"/*.deb | wc -l) packages in $out" >&2
  ls "$out"/*.deb
}

rc=0
for s in "$@"; do build_suite "$s" || rc=1; done
exit $rc
