#!/bin/bash
# perftest (Debian's, unmodified) on soft-iWARP siw0: iWARP connects through
# rdma_cm only, hence -R; the client reaches the server at $SIW_IP.
# shellcheck source=tests/vm/lib.sh disable=SC2154
. "$OV_REPO/tests/vm/lib.sh"
d=$SIW_DEV
n=${OV_PERFTEST_ITERS:-1000}

for t in ib_write_bw ib_read_bw ib_send_bw; do
  ov_pair "$t" cm "$t -d $d -R -n $n -F" "$t -d $d -R -n $n -F $SIW_IP"
done
exit "$ov_failed"
