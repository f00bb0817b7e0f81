#!/bin/sh
# dgram_calls (dgram_calls.c) on Debian's librdmacm.so.1 and on ours (soft
# devices on, a private /dev/shm): the two must print the same lines.
#   dgram_calls_debian.sh LIBDIR PROGRAM
set -u
lib=$1 prog=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ ! -e /usr/lib/x86_64-linux-gnu/librdmacm.so.1 ]; then
  echo "SKIP: Debian's librdmacm1 is not installed"; exit 77
fi
env -u LD_LIBRARY_PATH -u LD_PRELOAD timeout 60 "$prog" > "$work/debian" 2>&1
RDMAV_SOFT_DEVICES=1 timeout 60 sh "$(dirname "$0")/../soft/private_shm.sh" "$lib" "$prog" > "$work/ours" 2>&1
echo "== Debian's librdmacm:"; cat "$work/debian"
if diff -u "$work/debian" "$work/ours"; then echo PASS; exit 0; fi
echo "FAIL: ours differs (above)"; exit 1
