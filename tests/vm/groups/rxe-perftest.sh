#!/bin/bash
# perftest (Debian's, unmodified) on soft-RoCE rxe0, out-of-band exchange over
# TCP, GID index $RXE_GID_INDEX. Small iteration counts: the guest runs under TCG.
# shellcheck source=tests/vm/lib.sh disable=SC2154
. "$OV_REPO/tests/vm/lib.sh"
d=$RXE_DEV x=$RXE_GID_INDEX
n=${OV_PERFTEST_ITERS:-1000}

for t in ib_write_bw ib_read_bw ib_send_bw ib_write_lat ib_atomic_bw; do
  ov_pair "$t" tcp:18515 "$t -d $d -x $x -n $n -F" "$t -d $d -x $x -n $n -F 127.0.0.1"
done
exit "$ov_failed"
