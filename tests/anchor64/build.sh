#!/bin/sh
# build.sh [--quiet] [--release]
#
# Prints the path of a cached build of the rdma-core 64.0 anchor (the reference
# release of the 64 ABI target), building it first when the cache has none.
#
# --release: the libraries, providers and tools built as Debian builds them
# (CMAKE_BUILD_TYPE=Release: -O2 -g -DNDEBUG, with dpkg-buildflags' CFLAGS and
# LDFLAGS for hardening=+all), without pyverbs and dumps, in a key of its own.
# The programs of the test bed and the benchmarks run on this one: the
# default build keeps rdma-core's assertions, and one of them (siw's
# destroy_cq asserts that its spin lock is taken) aborts every program that
# destroys a siw CQ; and -Og is not the optimisation a distribution ships.
#
# Tarball: $OPENVERBS_ANCHOR64_TARBALL, else
# ${OPENVERBS_CACHE:-/var/cache/openverbs}/anchors/rdma-core-64.0.tar.xz (copied
# there from ../shared/anchors beside the checkout when it is missing). Its
# SHA-256 must be the one pinned below. Without it the script prints why and
# exits 77 (ctest: skipped).
#
# Result: ${OPENVERBS_CACHE}/anchor64/KEY (KEY: the tarball's hash, this
# script's ANCHOR_VERSION and the compiler), holding
#   usr/lib/      libibverbs.so.1, libibumad.so.3, librdmacm.so.1, libmlx5/...
#   usr/lib/libibverbs/   the providers (librxe-rdmav64.so, libsiw-rdmav64.so, ...)
#   usr/bin/      the tools (ibv_devinfo, ibv_rc_pingpong, ... rping, ...)
#   usr/include/  the installed headers
#   etc/libibverbs.d/     the providers' *.driver files
#   python/       pyverbs (PYTHONPATH)
#   tests/        pyverbs' test suite (python3 tests/run_tests.py)
#   dumps/        abi-dumper dumps of libibverbs, libibumad, librdmacm
#   env.sh        sourceable: ANCHOR64, PATH-free variables for the tests
# Built with -g -Og (debug information for abi-dumper), IOCTL_MODE both and
# Debian's hardening link flags (relro, BIND_NOW). Dumps: make_dumps below. The tree is built aside (KEY.tmp.PID), installed with
# DESTDIR and renamed into place when complete; a lock per key makes a second
# run wait and reuse it. The anchor's compiled-in paths (provider directory,
# config directory) point into the final directory.
#
# Needs cmake, ninja, gcc, libnl-3-dev, libnl-route-3-dev, libudev-dev,
# Debian's python3-dev and cython3 (pyverbs is built for /usr/bin/python3 and
# runs with it) and abi-dumper (tests/deps.sh installs them).
set -eu
ANCHOR_VERSION=3
DUMP_VERSION=2
SHA256=e722c228ddb2c666f9dd3c52b749313e096f3f0cda8a0a77678e9939843d1904

quiet=0 variant=debug
while [ $# -gt 0 ]; do
  case $1 in
    --quiet) quiet=1 ;;
    --release) variant=release ;;
    *) echo "anchor64: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
say() { [ "$quiet" = 1 ] || echo "anchor64: $*" >&2; }

cache=${OPENVERBS_CACHE:-/var/cache/openverbs}
tarball=${OPENVERBS_ANCHOR64_TARBALL:-$cache/anchors/rdma-core-64.0.tar.xz}
# The workspace's copy (../shared/anchors beside the checkout) seeds the
# cache, where clones made elsewhere (CI) find it.
shared=$(cd "$(dirname "$0")/../../.." && pwd)/shared/anchors/rdma-core-64.0.tar.xz
if [ ! -r "$tarball" ] && [ -z "${OPENVERBS_ANCHOR64_TARBALL:-}" ] && [ -r "$shared" ] &&
   [ "$(sha256sum <"$shared" | cut -d' ' -f1)" = "$SHA256" ]; then
  if mkdir -p "$cache/anchors" 2>/dev/null && cp "$shared" "$tarball.tmp.$$" 2>/dev/null; then
    mv -f "$tarball.tmp.$$" "$tarball"
  else
    rm -f "$tarball.tmp.$$"
    tarball=$shared
  fi
fi
if [ ! -r "$tarball" ]; then
  echo "anchor64: no rdma-core 64.0 tarball at $tarball (set OPENVERBS_ANCHOR64_TARBALL)" >&2
  exit 77
fi
for tool in cmake ninja cython3 abi-dumper; do
  command -v $tool >/dev/null || { echo "anchor64: $tool missing (sh tests/deps.sh)" >&2; exit 1; }
done

cc=${CC:-cc}
if [ "$variant" = release ]; then
  # Debian's flags for rdma-core (debian/rules: hardening=+all, Release).
  rel_cflags=$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get CFLAGS)
  rel_ldflags=$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get LDFLAGS)
  key=$(printf 'v%s\n%s\n%s\nrelease %s %s\n' "$ANCHOR_VERSION" "$SHA256" "$($cc --version | head -1)" \
          "$rel_cflags" "$rel_ldflags" | sha256sum | cut -c1-16)
else
  key=$(printf 'v%s\n%s\n%s\n' "$ANCHOR_VERSION" "$SHA256" "$($cc --version | head -1)" |
        sha256sum | cut -c1-16)
fi
dest=$cache/anchor64/$key
mkdir -p "$cache/anchor64"
# The dumps are a step of their own (DUMP_VERSION), redone in place under the
# lock when the way they are made changes, without rebuilding the anchor.
# abi-dumper reads the unstripped libraries' debug information, restricted to
# the types of the headers rdma-core stages for its build (public and
# provider-facing: libibverbs/, libibumad/, librdmacm/, kernel-headers/), as
# rdma-core's own ABI files are. The headers are real copies (abi-dumper does
# not follow symbolic links).
make_dumps() { # $1: anchor tree (with usr/lib), $2: log
  work=$(mktemp -d) || return 1
  mkdir -p "$work/h/infiniband" "$work/h/rdma" "$work/dumps"
  tar -xJf "$tarball" -C "$work" --wildcards 'rdma-core-64.0/libibverbs/*.h' \
    'rdma-core-64.0/libibumad/*.h' 'rdma-core-64.0/librdmacm/*.h' 'rdma-core-64.0/kernel-headers/rdma/*.h' &&
  cp "$work"/rdma-core-64.0/libibverbs/*.h "$work"/rdma-core-64.0/libibumad/*.h "$work/h/infiniband/" &&
  cp "$work"/rdma-core-64.0/librdmacm/*.h "$work"/rdma-core-64.0/kernel-headers/rdma/*.h "$work/h/rdma/" ||
    { rm -rf "$work"; return 1; }
  for lib in ibverbs:libibverbs.so.1 ibumad:libibumad.so.3 rdmacm:librdmacm.so.1; do
    name=${lib%%:*}; file=${lib#*:}
    abi-dumper "$1/usr/lib/$file" -o "$work/dumps/$name.dump" -lver 64.0 \
      -public-headers "$work/h" >> "$2" 2>&1 ||
      { tail -20 "$2" >&2; echo "anchor64: abi-dumper failed on $file" >&2; rm -rf "$work"; return 1; }
  done
  echo "$DUMP_VERSION" > "$work/dumps/.version"
  rm -rf "$1/dumps.new" && mv "$work/dumps" "$1/dumps.new" && rm -rf "$1/dumps" && mv "$1/dumps.new" "$1/dumps"
  rm -rf "$work"
}
dumps_current() { [ "$variant" = release ] || [ "$(cat "$1/dumps/.version" 2>/dev/null)" = "$DUMP_VERSION" ]; }

# $cache/anchor64/current names the anchor of this key for CMake, which must
# know the reference's paths at configure time (the 64 target's tests).
publish() { [ "$variant" = release ] && return 0; ln -sfn "$key" "$cache/anchor64/current.$$" && mv -T "$cache/anchor64/current.$$" "$cache/anchor64/current"; }
if [ -f "$dest/.openverbs-anchor" ] && dumps_current "$dest"; then publish; echo "$dest"; exit 0; fi

exec 9>"$cache/anchor64/.$key.lock"
flock 9
if [ -f "$dest/.openverbs-anchor" ]; then
  dumps_current "$dest" || make_dumps "$dest" "$cache/anchor64/$key.log" || exit 1
  publish; echo "$dest"; exit 0
fi

sum=$(sha256sum "$tarball" | cut -d' ' -f1)
if [ "$sum" != "$SHA256" ]; then
  echo "anchor64: $tarball has SHA-256 $sum, expected $SHA256" >&2
  exit 1
fi

tmp=$dest.tmp.$$
rm -rf "$dest".tmp.*
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir -p "$tmp/work"
log=$cache/anchor64/$key.log
say "building rdma-core 64.0 in $tmp (log: $log)"
start=$(date +%s)
tar -xJf "$tarball" -C "$tmp/work"
src=$tmp/work/rdma-core-64.0
if [ "$variant" = release ]; then
  build_type=Release cflags_var=CMAKE_C_FLAGS cflags=$rel_cflags ldflags=$rel_ldflags no_pyverbs=1
else
  build_type=Debug cflags_var=CMAKE_C_FLAGS_DEBUG cflags="-g -Og" ldflags="-Wl,-z,relro -Wl,-z,now" no_pyverbs=0
fi
{
  cmake -S "$src" -B "$tmp/work/build" -G Ninja \
    -DCMAKE_BUILD_TYPE=$build_type "-D$cflags_var=$cflags" -DNO_PYVERBS=$no_pyverbs \
    -DCMAKE_SHARED_LINKER_FLAGS="$ldflags" \
    -DCMAKE_MODULE_LINKER_FLAGS="$ldflags" \
    -DCMAKE_EXE_LINKER_FLAGS="$ldflags" \
    -DCMAKE_INSTALL_PREFIX="$dest/usr" -DCMAKE_INSTALL_LIBDIR=lib \
    -DCMAKE_INSTALL_SYSCONFDIR="$dest/etc" -DCMAKE_INSTALL_RUNDIR="$dest/run" \
    -DCMAKE_INSTALL_UDEV_RULESDIR="$dest/udev" -DCMAKE_INSTALL_SYSTEMD_SERVICEDIR="$dest/systemd" \
    -DCMAKE_INSTALL_INITDDIR="$dest/init.d" -DCMAKE_INSTALL_PERLDIR="$dest/perl" \
    -DCMAKE_INSTALL_PYTHON_ARCH_LIB="$dest/python" -DSYSUSERS_DIR="$dest/sysusers" \
    -DCMAKE_INSTALL_DOCDIR="$dest/doc" -DNO_MAN_PAGES=1 -DIOCTL_MODE=both \
    -DPYTHON_EXECUTABLE=/usr/bin/python3
  nice ninja -C "$tmp/work/build" -j"${OPENVERBS_JOBS:-2}"
  DESTDIR="$tmp/destdir" ninja -C "$tmp/work/build" install
} > "$log" 2>&1 || { tail -30 "$log" >&2; echo "anchor64: build failed (log: $log)" >&2; exit 1; }

# The install went to DESTDIR + final path; lift it to the top of the tree.
mv "$tmp/destdir$dest"/* "$tmp/"
rm -rf "$tmp/destdir"
tests=$(find "$tmp" -name run_tests.py -path '*/tests/*' | head -1)
[ -n "$tests" ] && mv "$(dirname "$tests")" "$tmp/tests"
[ -x "$tmp/usr/bin/ibv_devinfo" ] && [ -f "$tmp/usr/lib/libibverbs.so.1" ] &&
  [ -f "$tmp/usr/lib/libibverbs/librxe-rdmav64.so" ] &&
  { [ "$variant" = release ] || { [ -d "$tmp/python/pyverbs" ] && [ -f "$tmp/tests/run_tests.py" ]; }; } ||
  { echo "anchor64: install incomplete (log: $log)" >&2; exit 1; }

rm -rf "$tmp/work"
[ "$variant" = release ] || make_dumps "$tmp" "$log" || exit 1
printf 'ANCHOR64=%s\n' "$dest" > "$tmp/env.sh"
touch "$tmp/.openverbs-anchor"
mv "$tmp" "$dest"
trap - EXIT INT TERM
publish
say "built in $(( $(date +%s) - start )) s"
echo "$dest"
