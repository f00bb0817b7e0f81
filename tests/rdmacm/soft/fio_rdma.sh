#!/bin/sh
# One side of a fio rdma-engine pair (Debian's fio, unmodified) whose data is
# checked, run by run_cm_pair.sh in the pair's private /dev/shm:
#   fio_rdma.sh server|client write|read|send PORT
# send: fio checks every block itself (verify=crc32c: the client writes
#   checksummed blocks, the server verifies each one it receives). The
#   server's queue (iodepth 64) holds a receive for every block of the run
#   (4 MiB in 64 KiB blocks), so no SEND can find it empty: fio connects with
#   an RNR retry count of 0 and reposts a receive only after reaping its
#   completion, and a SEND that finds no receive fails at once on any RC
#   device (InfiniBand RNR rules), as fio's own comment in its engine warns.
# write/read (RDMA WRITE, RDMA READ): fio cannot verify these (the server
#   sees no per-block completion), so both sides keep their I/O buffers in
#   files (fio's mem=mmapshared:FILE; an existing file is kept) and the
#   client compares the two sets of iodepth buffers once fio is done. The
#   client's buffers are filled once by fio with its own random data
#   (scramble_buffers=0: never changed after); fio 3.33 picks the server's
#   buffer of each block at random, so the check is by content:
#   write: the server's buffers start zero-filled; each one must now hold
#     one of the client's buffers (or still be zero: never picked), and at
#     least one must have been written;
#   read: the server's buffers start random (not fio's data); each of the
#     client's buffers must now hold one of the server's.
set -eu
role=$1 mode=$2 port=$3
bs=65536 depth=4 size=4m
dir=/dev/shm/fio-rdma-test
mkdir -p "$dir"
srv="$dir/server.buf" cli="$dir/client.buf"
region=$((bs * depth))
common="--ioengine=rdma --port=$port --bs=$bs --size=$size"
case "$mode" in
send)
  if [ "$role" = server ]; then
    exec fio --name=server $common --rw=read --iodepth=64 --verify=crc32c
  fi
  exec fio --name=client $common --hostname=127.0.0.1 --verb=send --rw=write \
    --iodepth=$depth --verify=crc32c --do_verify=0
  ;;
write|read) ;;
*) echo "fio_rdma.sh: unknown mode $mode" >&2; exit 2 ;;
esac
# Files of twice the region: fio maps a little more than the buffers.
make_file() { # FILE SOURCE
  head -c $((region * 2)) "$2" > "$1"
}
if [ "$role" = server ]; then
  if [ "$mode" = write ]; then make_file "$srv" /dev/zero; else make_file "$srv" /dev/urandom; fi
  exec fio --name=server $common --rw=read --iodepth=$depth --mem=mmapshared:"$srv"
fi
make_file "$cli" /dev/zero
fio --name=client $common --hostname=127.0.0.1 --verb="$mode" --rw=write \
  --iodepth=$depth --scramble_buffers=0 --mem=mmapshared:"$cli"
blocks() { # FILE: the sorted checksums of its first $depth buffers
  k=0
  while [ $k -lt $depth ]; do
    dd if="$1" bs=$bs skip=$k count=1 status=none | md5sum
    k=$((k + 1))
  done | sort
}
blocks "$srv" > "$dir/server.sums"
blocks "$cli" > "$dir/client.sums"
zero=$(head -c $bs /dev/zero | md5sum)
if [ "$mode" = write ]; then
  # The server's buffers that are not zero must all be client buffers.
  written=$(grep -v -c -x -F "$zero" "$dir/server.sums" || true)
  stray=$(grep -v -x -F "$zero" "$dir/server.sums" | grep -v -c -x -F -f "$dir/client.sums" || true)
  ok=$([ "$written" -ge 1 ] && [ "$stray" -eq 0 ] && echo y || echo n)
else
  stray=$(grep -v -c -x -F -f "$dir/server.sums" "$dir/client.sums" || true)
  ok=$([ "$stray" -eq 0 ] && echo y || echo n)
fi
if [ $ok != y ]; then
  echo "FAIL: after RDMA $mode, buffers hold data that was never sent (server | client):"
  paste "$dir/server.sums" "$dir/client.sums"
  exit 1
fi
echo "fio_rdma.sh: after RDMA $mode every buffer holds data that was sent"
