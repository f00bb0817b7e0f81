#!/bin/sh
# Runs gid_table (GID table and port MTU kept current) on sroce0 over one end of a veth
# pair in a network namespace of its own. Root (exit 77 otherwise).
#   gid_table.sh LIBDIR GID_TABLE_BINARY
set -u
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
LIB=$1; BIN=$2
exec unshare --net --mount --propagation private sh -c '
  mount -t tmpfs tmpfs /dev/shm || exit 1
  ip link add ovg0 type veth peer name ovg1 || exit 1
  ip link set lo up; ip link set ovg0 up; ip link set ovg1 up
  ip addr add 10.77.0.1/24 dev ovg0 || exit 1
  RDMAV_SOFT_ROCE=ovg0 LD_LIBRARY_PATH="$0" timeout 60 "$1" sroce0 ovg0
' "$LIB" "$BIN"
