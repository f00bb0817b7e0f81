#!/bin/sh
# Installs, from Debian's archive, everything the build and the tests need.
# Safe to run again: apt-get skips what is already there.
set -e
PKGS="cmake g++ gcc make pkg-config python3 git
  libnl-3-dev libnl-route-3-dev zlib1g-dev libisal2 libgtest-dev libgmock-dev googletest libbenchmark-dev
  ibverbs-utils ibverbs-providers libibverbs1 libibverbs-dev librdmacm1 librdmacm-dev rdmacm-utils perftest python3-pyverbs fio libfabric-bin qperf
  libibumad3 libibumad-dev ibsim-utils opensm infiniband-diags
  qemu-system-x86 busybox-static kmod cpio iproute2
  abi-compliance-checker abi-dumper valgrind ucx-utils openmpi-bin libopenmpi-dev strace clang psmisc
  debootstrap debhelper fakeroot lintian
  ninja-build cython3 python3-dev libudev-dev iperf3 dpkg-dev"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "deps: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing
fi
