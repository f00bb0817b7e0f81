#!/bin/bash
# librdmacm on soft-RoCE rxe0 (real kernel CM): see vm-rdmacm-common.sh.
DEV=$RXE_DEV IP=$RXE_IP
# perftest's -R connects twice, and its client's second REQ can reach the
# kernel before the server listens again: REJ 8 (no listener for the service
# ID), after which Debian's perftest 4.5 calls rdma_resolve_addr with a stale
# id and dies of SIGSEGV. 1 run in 40 of ib_write_lat -R, with Debian's
# library (--baseline) as with ours (tests/vm loops, 2026-11-28).
RETRY_SYMPTOM='Event: RDMA_CM_EVENT_REJECTED; error: 8\.'
RETRY_REASON="perftest's second connection before its server listens again, Debian's library shows it too"
# shellcheck source=tests/rdmacm/kernel/vm-rdmacm-common.sh
. "$OV_REPO/tests/rdmacm/kernel/vm-rdmacm-common.sh"
rdmacm_connected
ov_pair rping-q cm "rping -s -q -a $IP -C 10 -V" "rping -c -q -a $IP -C 10 -V"
rdmacm_datagram
rdmacm_pyverbs
exit "$ov_failed"
