#!/bin/sh
# One side of roce.ack_psn (tests/roce/CMakeLists.txt), as netns_pair.sh
# starts it: "ack_psn_side.sh -p PORT RC_CHECK ARGS... [SERVER]". Without
# SERVER (the first side) rc_check's receiving side on sroce0; with it,
# ack_psn_peer.py, a scripted requester, against that one.
port=$2 rcc=$3; shift 3
for last; do :; done
case $last in
  *.*.*.*) exec python3 "$(dirname "$0")/ack_psn_peer.py" -p "$port" "$last" ;;
  *) exec "$rcc" -p "$port" "$@" ;;
esac
