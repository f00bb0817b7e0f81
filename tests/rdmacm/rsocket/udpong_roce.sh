#!/bin/sh
# Debian's udpong (datagram rsockets) over the RoCE v2 software device
# sroce0 across two network namespaces (tests/roce/netns_pair.sh with
# OVROCE_CM=1 and OVROCE_READY_UDP=7174): the Ethernet link layer, so every
# address handle has a global route, and nothing shared but the link.
#   udpong_roce.sh server ADDR FLAG   udpong's server until FLAG exists
#   udpong_roce.sh client ADDR FLAG   echo of 64 and 1000 bytes, a burst of
#                                     1000-byte datagrams; then FLAG
# A client run passes when udpong printed its result line (it exits 0 after
# a failed custom run too). Sizes within the 1024-byte RoCE MTU of a
# 1500-byte link.
set -u
role=$1 addr=$2 flag=$3 port=7174
if [ "$role" = server ]; then
  rm -f "$flag"
  stdbuf -oL udpong -b "$addr" -p $port &
  pid=$!
  while [ ! -e "$flag" ] && kill -0 $pid 2>/dev/null; do sleep 0.2; done
  kill $pid 2>/dev/null; wait $pid
  rm -f "$flag"
  exit 0
fi
status=0
for args in "-C 200 -S 64 -T e" "-C 200 -S 1000 -T e" "-C 2000 -S 1000"; do
  echo "+ udpong -s $addr -p $port $args"
  # shellcheck disable=SC2086
  out=$(udpong -s "$addr" -p $port $args 2>&1)
  echo "$out"
  echo "$out" | grep -q '^custom' || { echo "FAIL: no result line"; status=1; }
done
touch "$flag"
exit $status
