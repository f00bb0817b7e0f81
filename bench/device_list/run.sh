#!/bin/bash
# ibv_get_device_list: openverbs vs Debian's libibverbs on fake sysfs trees
# with 1, 16, 128 and 512 devices (named rxeN, served by Debian's rxe
# provider in both cases).
#
#   bench/device_list/run.sh [BUILD_DIR]      (root; default BUILD_DIR=build)
#
# Runs inside a private mount namespace (unshare -m) whose /dev is a tmpfs
# with /dev/infiniband/uverbsN created by mknod, so both libraries pass
# their access check; nothing outside the namespace changes. The host has
# no RDMA netlink, so both libraries take their sysfs path ($SYSFS_PATH).
# cold = the first call in a fresh process (median of RUNS processes; it
# includes reading libibverbs.d and loading providers); warm = median of a
# call repeated in one process. Ratios are Debian / openverbs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(readlink -f "${1:-$repo/build}")
bin=$build/bin/device_list_bench
[ -x "$bin" ] || { echo "build $bin first (cmake --build $build --target device_list_bench)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "needs root (unshare -m, mount, mknod)" >&2; exit 2; }
RUNS=${RUNS:-21}

if [ "${1:-}" != --inside ] && [ -z "${OV_BENCH_INSIDE:-}" ]; then
  exec env OV_BENCH_INSIDE=1 unshare -m --propagation private "$0" "$build"
fi

tmp=$(mktemp -d)
trap 'umount "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
mount -t tmpfs tmpfs "$tmp"   # sysfs lives in memory too
mount -t tmpfs tmpfs /dev
mknod -m 666 /dev/null c 1 3
mknod -m 666 /dev/zero c 1 5
mknod -m 666 /dev/urandom c 1 9
mkdir /dev/infiniband

make_tree() { # N: fresh sysfs tree and character devices
  local n=$1 i
  rm -rf "$tmp/sys" /dev/infiniband/*
  mkdir -p "$tmp/sys/class/infiniband_verbs" "$tmp/sys/class/infiniband"
  echo 6 >"$tmp/sys/class/infiniband_verbs/abi_version"
  for ((i = 0; i < n; i++)); do
    d=$tmp/sys/class/infiniband_verbs/uverbs$i
    mkdir -p "$d" "$tmp/sys/class/infiniband/rxe$i"
    echo "rxe$i" >"$d/ibdev"
    echo "$((231 + i / 64)):$((192 + i % 64))" >"$d/dev"
    echo 1 >"$d/abi_version"
    echo "1: CA" >"$tmp/sys/class/infiniband/rxe$i/node_type"
    mknod "/dev/infiniband/uverbs$i" c $((231 + i / 64)) $((192 + i % 64))
  done
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

cold() { # LIBMODE
  local i
  for ((i = 0; i < RUNS; i++)); do
    if [ "$1" = ours ]; then
      SYSFS_PATH=$tmp/sys LD_LIBRARY_PATH=$build/lib "$bin" cold
    else
      SYSFS_PATH=$tmp/sys env -u LD_LIBRARY_PATH "$bin" cold
    fi
  done | awk '{print $1}' | median
}
warm() { # LIBMODE ITERS
  if [ "$1" = ours ]; then
    SYSFS_PATH=$tmp/sys LD_LIBRARY_PATH=$build/lib "$bin" warm "$2"
  else
    SYSFS_PATH=$tmp/sys env -u LD_LIBRARY_PATH "$bin" warm "$2"
  fi
}

printf '%-8s %-5s %14s %14s %8s\n' devices kind "debian(us)" "openverbs(us)" ratio
for n in 1 16 128 512; do
  make_tree "$n"
  # Both must see every device, or the comparison is meaningless.
  got_o=$(warm ours 1 | awk '{print $2}'); got_d=$(warm debian 1 | awk '{print $2}')
  [ "$got_o" = "$n" ] && [ "$got_d" = "$n" ] ||
    { echo "device count mismatch for $n: openverbs $got_o, Debian $got_d" >&2; exit 1; }
  c_d=$(cold debian); c_o=$(cold ours)
  iters=$(( n >= 128 ? 101 : 1001 ))
  w_d=$(warm debian $iters | awk '{print $1}'); w_o=$(warm ours $iters | awk '{print $1}')
  awk -v n="$n" -v d="$c_d" -v o="$c_o" 'BEGIN {printf "%-8s %-5s %14.1f %14.1f %7.1fx\n", n, "cold", d/1000, o/1000, d/o}'
  awk -v n="$n" -v d="$w_d" -v o="$w_o" 'BEGIN {printf "%-8s %-5s %14.1f %14.1f %7.1fx\n", n, "warm", d/1000, o/1000, d/o}'
done
