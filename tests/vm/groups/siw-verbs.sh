#!/bin/bash
# ibverbs-utils (Debian's, unmodified) on soft-iWARP siw0. Device queries work;
# the ping-pong tools exchange addresses over TCP and connect their QPs with
# ibv_modify_qp, which iWARP refuses (it connects through rdma_cm only), and
# siw implements RC QPs only (no UC, no UD). (ibv_srq_pingpong fails like
# ibv_rc_pingpong, only slower: not repeated here.)
# shellcheck source=tests/vm/lib.sh disable=SC2154
. "$OV_REPO/tests/vm/lib.sh"
d=$SIW_DEV

ov_run ibv_devinfo-v --expect "hca_id:[[:space:]]*$d" -- ibv_devinfo -v -d "$d"
why="iWARP connects through rdma_cm only: ibv_modify_qp to RTS fails"
ov_xfail_pair ibv_rc_pingpong "$why" "Failed to modify QP to RTS" tcp:18515 \
  "ibv_rc_pingpong -d $d -g 0" "ibv_rc_pingpong -d $d -g 0 127.0.0.1"
for t in ibv_uc_pingpong ibv_ud_pingpong; do
  ov_xfail_pair "$t" "siw has RC QPs only: ibv_create_qp fails" \
    "Couldn't create QP" tcp:18515 "$t -d $d -g 0" "$t -d $d -g 0 127.0.0.1"
done
exit "$ov_failed"
