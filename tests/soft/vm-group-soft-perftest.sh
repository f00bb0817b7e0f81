#!/bin/bash
# perftest (Debian's, unmodified) on the software device inside the guest, the
# same commands as the rxe-perftest group, so their logs compare soft0 and
# rxe0 bandwidth and latency in one run (bench/soft/compare-vm.sh prints the
# ratios from the logs). Run by tests/vm/run.sh (group soft-perftest).
. "$OV_REPO/tests/vm/lib.sh"
ov_require_ours "soft0 is the project's software device"
export RDMAV_SOFT_DEVICES=1
if ! mountpoint -q /dev/shm 2>/dev/null; then
  mkdir -p /dev/shm && mount -t tmpfs -o mode=1777 tmpfs /dev/shm
fi
d=soft0
n=${OV_PERFTEST_ITERS:-1000}
for t in ib_write_bw ib_read_bw ib_send_bw ib_write_lat ib_atomic_bw; do
  ov_pair "$t" tcp:18515 "$t -d $d -n $n -F" "$t -d $d -n $n -F 127.0.0.1"
done
exit "$ov_failed"
