#!/bin/sh
# pyverbs.sh LIBDIR [TEST...]: rdma-core 64's own Python test suite (pyverbs
# and tests/ of the anchor, unmodified) on soft0 with the libraries of LIBDIR
# (a 64 build's lib/, our librdmacm included) first on LD_LIBRARY_PATH and
# the anchor's after them. Prints the suite's
# summary line and "ok N failed N errors N skipped N".
#
# The suite looks the device up outside libibverbs: `rdma link show -j`
# (answered for the soft devices by tests/trixie/rdma-link-shim.sh, first on
# PATH) and sysfs (a tmpfs over /sys/class in this run's private mount
# namespace names soft0's port 1 with P_Key 0xffff and "lo" as its netdev).
# /dev/shm is private too. Exit status 0 only with no failure and no error.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ "${OV_ANCHOR64_INNER:-}" != 1 ]; then
  [ $# -ge 1 ] || { echo "usage: $0 LIBDIR [TEST...]" >&2; exit 2; }
  anchor=$(sh "$here/build.sh" --quiet) || exit $?
  lib=$(cd "$1" && pwd); shift
  export OV_ANCHOR64_INNER=1 OV_ANCHOR64="$anchor" OV_LIB="$lib"
  exec unshare --mount --propagation private sh "$0" "$@"
fi
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /sys/class
mkdir -p /sys/class/infiniband/soft0/ports/1/pkeys /sys/class/infiniband/soft0/device/net/lo
echo 0xffff > /sys/class/infiniband/soft0/ports/1/pkeys/0
shim=$(mktemp -d)
trap 'rm -rf "$shim"' EXIT
cp "$here/../trixie/rdma-link-shim.sh" "$shim/rdma"
chmod +x "$shim/rdma"
cd "$OV_ANCHOR64/tests"
export RDMAV_SOFT_DEVICES=1 PYTHONPATH="$OV_ANCHOR64/python"
export LD_LIBRARY_PATH="$OV_LIB:$OV_ANCHOR64/usr/lib" PATH="$shim:$OV_ANCHOR64/usr/bin:$PATH"
out=$(timeout 1500 /usr/bin/python3 run_tests.py --dev soft0 -v "$@" 2>&1) || true
echo "$out"
ok=$(echo "$out" | grep -cE '\.\.\. ok$' || true)
failed=$(echo "$out" | grep -cE '^FAIL: ' || true)
errors=$(echo "$out" | grep -cE '^ERROR: ' || true)
skipped=$(echo "$out" | grep -cE '\.\.\. skipped' || true)
echo "ok $ok failed $failed errors $errors skipped $skipped"
[ "$failed" = 0 ] && [ "$errors" = 0 ]
