#!/bin/bash
# librdmacm on soft-RoCE rxe0 (real kernel CM): see vm-rdmacm-common.sh.
DEV=$RXE_DEV IP=$RXE_IP
# shellcheck source=tests/rdmacm/kernel/vm-rdmacm-common.sh
. "$OV_REPO/tests/rdmacm/kernel/vm-rdmacm-common.sh"
rdmacm_connected
ov_pair rping-q cm "rping -s -q -a $IP -C 10 -V" "rping -c -q -a $IP -C 10 -V"
rdmacm_datagram
rdmacm_pyverbs
exit "$ov_failed"
