#!/bin/bash
# ibverbs-utils (Debian's, unmodified) on soft-RoCE: rxe0, RoCE v2 over IPv4,
# GID index $RXE_GID_INDEX. Server and client run in the same guest; -n keeps
# the exchange short (the guest runs under TCG).
# shellcheck source=tests/vm/lib.sh disable=SC2154
. "$OV_REPO/tests/vm/lib.sh"
d=$RXE_DEV g=$RXE_GID_INDEX
n=${OV_PINGPONG_ITERS:-200}

# pp NAME TOOL ARGS...: server and client of one ping-pong tool.
pp() {
  local name=$1 tool=$2; shift 2
  ov_pair "$name" tcp:18515 "$tool -d $d -g $g -n $n $*" "$tool -d $d -g $g -n $n $* 127.0.0.1"
}

ov_run ibv_devices --expect "^[[:space:]]*${d}[[:space:]]" -- ibv_devices
ov_run ibv_devinfo-v --expect "hca_id:[[:space:]]*$d" -- ibv_devinfo -v -d "$d"
pp ibv_rc_pingpong ibv_rc_pingpong
pp ibv_rc_pingpong-e ibv_rc_pingpong -e
pp ibv_uc_pingpong ibv_uc_pingpong
# UD messages must fit the path MTU (1024 on a 1500-byte netdev).
pp ibv_ud_pingpong ibv_ud_pingpong -s 1024
pp ibv_srq_pingpong ibv_srq_pingpong
ov_xfail ibv_xsrq_pingpong "rxe has no XRC: ibv_open_xrcd fails" "Couldn't Open the XRC Domain" \
  -- ibv_xsrq_pingpong -d "$d" -g "$g"
exit "$ov_failed"
