#!/bin/bash
# Where the software device's time goes inside the test bed's guest: copy
# methods and system call costs (soft_copy_probe, alone and beside a
# process spinning on the other vCPU), the guest's clock source, then the
# perftest bandwidth tests on soft0 under `strace -c -f` (system calls per
# run, both sides; perftest's own numbers are meaningless under strace).
# Run it alone (groups given with --group run by themselves):
#   tests/vm/run.sh --lib B/lib --build-dir B --group bench/soft/vm-probe.sh
# Results: B/vm-results/latest/logs/vm-probe/.
. "$OV_REPO/tests/vm/lib.sh"
export RDMAV_SOFT_DEVICES=1
if ! mountpoint -q /dev/shm 2>/dev/null; then
  mkdir -p /dev/shm && mount -t tmpfs -o mode=1777 tmpfs /dev/shm
fi
ov_run copy_probe -- "$OV_BUILD_DIR/bin/soft_copy_probe" 65536
# The same while another process spins on the other vCPU (a busy-polling peer).
( while :; do :; done ) &
spin=$!
ov_run copy_probe_spinning_peer -- env PROBE_COPY_ONLY=1 "$OV_BUILD_DIR/bin/soft_copy_probe" 65536
kill "$spin"; wait "$spin" 2>/dev/null
cat /sys/devices/system/clocksource/clocksource0/current_clocksource > "$OV_LOGDIR/clocksource.txt" 2>&1
n=${OV_PERFTEST_ITERS:-1000}
for t in ib_write_bw ib_read_bw ib_send_bw; do
  if command -v strace >/dev/null; then
    ov_pair "$t-strace" tcp:18515 \
      "strace -c -f -o $OV_LOGDIR/$t.server.strace $t -d soft0 -n $n -F" \
      "strace -c -f -o $OV_LOGDIR/$t.client.strace $t -d soft0 -n $n -F 127.0.0.1"
  fi
done
exit "$ov_failed"
