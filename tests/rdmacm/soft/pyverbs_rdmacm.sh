#!/bin/sh
# rdma-core 44's own rdmacm tests (Debian's python3-pyverbs, tests/test_rdmacm.py,
# unmodified) on soft0 with our librdmacm and libibverbs:
#   pyverbs_rdmacm.sh LIBDIR
# The tests look for the device's network interface in sysfs
# (/sys/class/infiniband/<dev>/device/net/) and use its first address; soft0
# has no sysfs entry, so inside this run's own mount namespace a tmpfs over
# /sys/class names "lo" for soft0 (127.0.0.1, which the software CM serves).
# Every test must pass: a skipped test fails the run.
set -eu
if [ "${OV_PYVERBS_INNER:-}" != 1 ]; then
  src=/usr/share/doc/rdma-core/tests
  [ -f "$src/test_rdmacm.py" ] || { echo "FAIL: python3-pyverbs not installed (tests/deps.sh)"; exit 1; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cp -r "$src" "$work/tests"
  find "$work/tests" -name '*.gz' -exec gunzip -f {} +
  export OV_PYVERBS_INNER=1 OV_PYVERBS_WORK="$work"
  sh "$(dirname "$0")/private_shm.sh" "$1" sh "$0" "$@"
  exit $?
fi
mount -t tmpfs tmpfs /sys/class
mkdir -p /sys/class/infiniband/soft0/device/net/lo
cd "$OV_PYVERBS_WORK"
out=$(timeout 600 /usr/bin/python3 tests/run_tests.py --dev soft0 -v test_rdmacm 2>&1) || { echo "$out"; echo FAIL; exit 1; }
echo "$out"
if echo "$out" | grep -q 'skipped'; then echo "FAIL: tests were skipped"; exit 1; fi
echo "$out" | grep -q '^OK$' || { echo FAIL; exit 1; }
echo PASS
