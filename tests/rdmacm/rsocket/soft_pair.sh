#!/bin/sh
# Debian's unmodified rsockets programs on the software device soft0, with
# our librdmacm.so.1 and libibverbs.so.1, in a private /dev/shm:
#   soft_pair.sh LIBDIR TIMEOUT rstream|rstream-small|rstream-async|riostream|rcopy|preload
# Server and client talk over 127.0.0.1 (the software CM maps local
# addresses to soft0). `preload` runs iperf3, a plain TCP program, under
# Debian's librspreload.so on both sides.
set -u
if [ "${OV_RS_PAIR_INNER:-}" != 1 ]; then
  export OV_RS_PAIR_INNER=1 RDMAV_SOFT_DEVICES=1
  exec sh "$(dirname "$0")/../soft/private_shm.sh" "$1" sh "$0" "$@"
fi
lib=$1 limit=$2 what=$3
dir="/dev/shm/openverbs-$(id -u)/cm"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
preload=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
ip=127.0.0.1 port=7471
srv_forever=0
case $what in
  rstream) server="rstream -b $ip -p $port -S 65536 -C 200 -T v"
           client="rstream -s $ip -p $port -S 65536 -C 200 -T v" ;;
  rstream-small) server="rstream -b $ip -p $port -S 64 -C 5000 -T v"
           client="rstream -s $ip -p $port -S 64 -C 5000 -T v" ;;
  rstream-async) server="rstream -b $ip -p $port -S 100000 -C 100 -T a -T n"
           client="rstream -s $ip -p $port -S 100000 -C 100 -T a -T n" ;;
  riostream) server="riostream -b $ip -p $port -S 65536 -C 200"
           client="riostream -s $ip -p $port -S 65536 -C 200" ;;
  rcopy) head -c 5000000 /dev/urandom > "$work/src"
         server="rcopy -p $port"; srv_forever=1
         client="rcopy $work/src $ip:$work/dst -p $port" ;;
  preload) server="env LD_PRELOAD=$preload iperf3 -s -1 -B $ip -p $port"
           client="env LD_PRELOAD=$preload iperf3 -c $ip -p $port -n 50M" ;;
  *) echo "unknown pair $what"; exit 2 ;;
esac
log="$work/server.log"
timeout "$limit" sh -c "exec $server" > "$log" 2>&1 &
spid=$!
i=0
while [ $i -lt 200 ] && ! ls "$dir" 2>/dev/null | grep -q -- '-'; do
  kill -0 $spid 2>/dev/null || break
  sleep 0.05; i=$((i + 1))
done
status=0
# The server must listen through the software CM (for iperf3: librspreload
# turned its TCP socket into an rsocket rather than falling back to TCP).
if ! ls "$dir" 2>/dev/null | grep -q -- "-$port-"; then
  echo "FAIL: no rdma_cm listener on port $port (server: $server)"; cat "$log"
  kill $spid 2>/dev/null; exit 1
fi
echo "+ $client"
timeout "$limit" sh -c "exec $client" || status=$?
if [ $srv_forever = 1 ]; then
  sleep 0.3; kill $spid 2>/dev/null; wait $spid
  if [ $status -eq 0 ] && ! cmp "$work/src" "$work/dst"; then
    echo "FAIL: copied file differs"; status=1
  fi
else
  wait $spid || { s=$?; [ $status -eq 0 ] && status=$s; }
fi
echo "-- server ($server):"; cat "$log"
[ $status -eq 0 ] && echo PASS || echo "FAIL ($status)"
exit $status
