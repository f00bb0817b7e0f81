#!/bin/sh
# Debian's unmodified udpong (datagram rsockets) on the software device
# soft0, with our librdmacm.so.1 and libibverbs.so.1, in a private /dev/shm:
#   udpong_pair.sh LIBDIR TIMEOUT echo|bw|blocking|async|preload [ECHO_CLIENT]
# Server and client talk over 127.0.0.1. udpong checks each echo's sequence
# number and length and prints one result line per run; a run that fails
# prints none, so every client run must print its line. The client's exit
# status alone says nothing (udpong returns 0 after a failed custom run).
#   echo      echoes of 16 B to 2032 B (the largest datagram), 500 each
#   bw        one-way bursts (the server counts what arrived; datagrams
#             past its receive queue are dropped, as UDP drops them)
#   blocking  both sides with blocking calls (-T b)
#   async     both sides waiting in rpoll (-T a)
#   preload   the server is udpong in plain-socket mode (-T s) under
#             Debian's librspreload.so, which turns its UDP socket into a
#             datagram rsocket; clients: ECHO_CLIENT (udp_echo_client.c, a
#             plain UDP program, every byte checked) under librspreload.so,
#             and udpong's rsocket client
set -u
if [ "${OV_UDPONG_INNER:-}" != 1 ]; then
  export OV_UDPONG_INNER=1 RDMAV_SOFT_DEVICES=1
  exec sh "$(dirname "$0")/../soft/private_shm.sh" "$1" sh "$0" "$@"
fi
lib=$1 limit=$2 what=$3 echo_client=${4:-}
dir="/dev/shm/openverbs-$(id -u)/cm"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
preload=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
stdbuf=/usr/libexec/coreutils/libstdbuf.so
# A port of each pair's own: ctest -j runs pairs at once on the host's
# network namespace (one shared port made the second server's rbind fail
# with EADDRINUSE, and its clients talked to the other pair's server).
ip=127.0.0.1
case $what in echo) port=7174 ;; bw) port=7175 ;; blocking) port=7176 ;; async) port=7177 ;; *) port=7178 ;; esac
case $what in
  echo) server="udpong -b $ip -p $port"
        clients="" ; for s in 16 64 1000 1536 2032; do
          clients="$clients|udpong -s $ip -p $port -C 500 -S $s -T e"; done ;;
  bw) server="udpong -b $ip -p $port"
      clients="|udpong -s $ip -p $port -C 2000 -S 64|udpong -s $ip -p $port -C 2000 -S 1024" ;;
  blocking) server="udpong -b $ip -p $port -T b"
            clients="|udpong -s $ip -p $port -C 1000 -S 100 -T b -T e|udpong -s $ip -p $port -C 1000 -S 2000 -T b -T e" ;;
  async) server="udpong -b $ip -p $port -T a"
         clients="|udpong -s $ip -p $port -C 1000 -S 100 -T a -T e|udpong -s $ip -p $port -C 1000 -S 2000 -T a -T e" ;;
  preload) # stdbuf's own preload library too, for the login lines
           server="env LD_PRELOAD=$preload:$stdbuf _STDBUF_O=L udpong -b $ip -p $port -T s"
           clients="|env LD_PRELOAD=$preload $echo_client $ip $port 300 16 100 1000 2032|udpong -s $ip -p $port -C 300 -S 1000 -T e" ;;
  *) echo "unknown pair $what"; exit 2 ;;
esac
log="$work/server.log"
case $server in
  env*) timeout "$limit" sh -c "exec $server" > "$log" 2>&1 & ;;
  *) timeout "$limit" sh -c "exec stdbuf -oL $server" > "$log" 2>&1 & ;;
esac
spid=$!
# Ready once its UDP port is bound (/proc/net/udp: local address in hex).
hex=$(printf ':%04X ' $port)
i=0
while [ $i -lt 200 ] && ! grep -q "$hex" /proc/net/udp; do
  kill -0 $spid 2>/dev/null || break
  sleep 0.05; i=$((i + 1))
done
status=0
if ! grep -q "$hex" /proc/net/udp; then
  echo "FAIL: the server never bound port $port"; head -c 2000 "$log"
  kill $spid 2>/dev/null; exit 1
fi
n=0
IFS='|'
for c in $clients; do
  [ -n "$c" ] || continue
  n=$((n + 1))
  echo "+ $c"
  unset IFS
  out="$work/client.$n"
  timeout "$limit" sh -c "exec $c" > "$out" 2> "$out.err"; rc=$?
  IFS='|'
  cat "$out"; head -c 2000 "$out.err"
  case $c in
    udpong*) lines=$(grep -c '^custom' "$out") ;;
    *) lines=$(grep -c 'echoes intact' "$out") ;;
  esac
  if [ "$rc" -ne 0 ] || [ "$lines" -eq 0 ]; then
    echo "FAIL: client exited $rc with $lines result lines"; status=1
  fi
done
unset IFS
# The datagrams went through rsockets on soft0: the server's UD QP is bound
# to its address and port in the software CM's RDMA_PS_UDP space.
if ! ls "$dir" 2>/dev/null | grep -q -- "udp-$port-"; then
  echo "FAIL: no RDMA_PS_UDP id on port $port (the server did not use an rsocket)"
  ls -l "$dir" 2>&1; status=1
fi
kill $spid 2>/dev/null; wait $spid 2>/dev/null
logins=$(grep -c 'client login' "$log")
echo "-- server ($server): $logins client logins"
head -c 2000 "$log" | grep -v 'client login'
[ "$logins" -ge "$n" ] || { echo "FAIL: $logins logins for $n clients"; status=1; }
[ $status -eq 0 ] && echo PASS || echo "FAIL ($status)"
exit $status
