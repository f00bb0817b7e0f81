#!/bin/sh
# Runs one of Debian's unmodified RDMA programs as a server/client pair on
# the RoCE v2 software device across two network namespaces joined by a veth
# pair. The namespaces, the link and the private /dev/shm are made here (as
# root); the programs themselves run as the unprivileged user "nobody", with
# our libibverbs first on LD_LIBRARY_PATH and RDMAV_SOFT_ROCE naming their
# side of the link (sroce0 in each namespace).
#
#   netns_pair.sh LIBDIR TIMEOUT PROGRAM [ARGS...]
#
# The client gets the server's IPv4 address appended (the programs' own TCP
# exchange). In ARGS, "%GID%" is the GID index of the IPv4 address (1:
# openverbs-roce(7), GID table), "%GIDLL%" the link-local default GID (0),
# "%GID6%" the ULA address fd00:231::1 or ::2 (2), and "%PORT%"
# the TCP port of the programs' own exchange. OPENVERBS_SOFT_ROCE_LOSS,
# _REORDER, _DUPLICATE and _CORRUPT (percent) pass through: each side drops,
# reorders, duplicates or damages that share of the datagrams it receives.
# OVROCE_CHECK_FAULTS=1 (with VERBS_LOG_LEVEL=3): the devices' counters at
# close must show every damaged datagram dropped by the ICRC check, each
# fault kind asked for injected, and a UD receiver's losses (rc_check -u)
# accounted for by the drops and damage.
# OVROCE_MALFORMED_MAD=1 (with OVROCE_CM, VERBS_LOG_LEVEL=3): malformed CM
# MADs (send_malformed.py --mad) reach the server's QP1 before the client
# starts; the server's log must show each kind dropped.
# OVROCE_MALFORMED=1 (with VERBS_LOG_LEVEL=3): malformed datagrams of each
# kind (send_malformed.py) reach the server's device before the client
# starts; its counters at close must show each one dropped.
# OVROCE_CM=1: an rdma_cm pair (our librdmacm's connection manager over
# sroce0): ARGS are the server's command, "--", then the client's; "%ADDR%"
# is the server's IPv4 address (10.231.0.1), "%ADDR6%" its IPv6 one; no
# port or address is added, and the client starts once the server's CM
# listens (its socket in /dev/shm/openverbs-65534/cm).
# OVROCE_READY_UDP=PORT (with OVROCE_CM): the client starts once the
# server's UDP port PORT is bound instead (datagram rsockets: udpong).
# OVROCE_NO_DROPS=1 (with VERBS_LOG_LEVEL=3): both devices' counters at
# close must show no datagram dropped (a CM MAD that found no receive
# posted on QP1 counts as a "state" drop).
# OVROCE_NO_RETRANSMITS=1 (with VERBS_LOG_LEVEL=3): neither device sent a
# packet again (on a link without faults, every request was acknowledged in
# time, also the last one before a side's disconnect).
# OVROCE_CLIENTS=N: N clients at once against the one server, all in the
# client namespace (N processes share that side's sroce0);
# OVROCE_SERVER_ARGS: arguments for the server only (ibv_xsrq_pingpong's
# "-c N").
# OVROCE_XRC_DOMAIN=1: /tmp/xrc_domain, whose XRC domain all of
# ibv_xsrq_pingpong's processes open, is a file of their user for this run.
# OPENVERBS_SOFT_SHARE_MAX passes through (0: no region is converted, so
# another process reaches every region with process_vm_*).
# OVROCE_KEEP_LOGS=DIR: the two sides' whole logs are copied to DIR (for
# loops that hunt a rare failure with VERBS_LOG_LEVEL=4).
# OVROCE_PAIRS=N: N pairs of the program at once, N servers in one namespace
# and N clients in the other (ports %PORT%, %PORT%+1, ...): N processes
# share each side's sroce0 (openverbs-roce(7)). With OVROCE_CM, give
# OVROCE_SIDE_SHM=1 too (each side's processes share a /dev/shm of their
# own).
# OVROCE_ONE_PORT=1 (with OVROCE_CM and OVROCE_PAIRS=N): the N servers take
# one port (%PORT%), each at an address of its own on the same interface
# (10.231.0.1, 10.231.0.11, 10.231.0.21, ...): %ADDR% is pair k's server's
# address, in both commands. A CM request must reach the process that
# listens at its destination address (with VERBS_LOG_LEVEL=4: no server's
# CM may log a request it has no listener for).
# Every pair must pass; with VERBS_LOG_LEVEL=3 the logs must show datagrams
# handed between the processes of a side (OVROCE_SHARE_NO_LOSS=1: at most
# 1 % of them lost on the way).
# Exit 77 (skipped) when not root or without network namespaces.
set -u
LIB=$1; TMO=$2; shift 2
if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root to make namespaces"; exit 77; fi
# shellcheck source=tests/perftest_rerun.sh
. "$(dirname "$0")/../perftest_rerun.sh"
perftest_rerun "$0" "$LIB" "$TMO" "$@"
# shellcheck source=tests/roce/ns_setup.sh
. "$(dirname "$0")/ns_setup.sh"
ovroce_private_mounts "$0" "$LIB" "$TMO" "$@"
tag=$$
nsa=ovra$tag; nsb=ovrb$tag; va=ovva$tag; vb=ovvb$tag
logdir=$(mktemp -d /tmp/ovroce-test.XXXXXX)
if [ -n "${OVROCE_XRC_DOMAIN:-}" ]; then
  # ibv_xsrq_pingpong's processes share the XRC domain of /tmp/xrc_domain
  # (a fixed name): here a file of the programs' user, for this run only
  # (bound over the name in the run's mount namespace; a root-owned one
  # that other tests left there cannot be opened by them).
  : > "$logdir/xrc_domain" && chown 65534:65534 "$logdir/xrc_domain" || exit 1
  [ -e /tmp/xrc_domain ] || : > /tmp/xrc_domain
  mount --bind "$logdir/xrc_domain" /tmp/xrc_domain || exit 1
fi
chmod 755 "$logdir"
cleanup() {
  ip netns del $nsa 2>/dev/null; ip netns del $nsb 2>/dev/null
  [ -n "${OVROCE_KEEP_LOGS:-}" ] && cp -r "$logdir" "$OVROCE_KEEP_LOGS"; rm -rf "$logdir"
}
trap cleanup EXIT
ip netns add $nsa && ip netns add $nsb || { echo "SKIP: no network namespaces"; exit 77; }
ip link add $va type veth peer name $vb || { echo "FAIL: no veth"; exit 1; }
ip link set $va netns $nsa && ip link set $vb netns $nsb || exit 1
ip -n $nsa addr add 10.231.0.1/24 dev $va && ip -n $nsb addr add 10.231.0.2/24 dev $vb || exit 1
# IPv6: no duplicate address detection, so that the link-local and the ULA
# addresses are usable (as sources) at once.
ip netns exec $nsa sysctl -qw net.ipv6.conf.$va.accept_dad=0 2>/dev/null
ip netns exec $nsb sysctl -qw net.ipv6.conf.$vb.accept_dad=0 2>/dev/null
ip -n $nsa addr add fd00:231::1/64 dev $va nodad 2>/dev/null
ip -n $nsb addr add fd00:231::2/64 dev $vb nodad 2>/dev/null
for n in $nsa $nsb; do ip -n $n link set lo up; done
ip -n $nsa link set $va up && ip -n $nsb link set $vb up || exit 1
# The operational state follows a moment later (the kernel's link watch):
# a device opened before that reports its port down (IFF_RUNNING unset).
i=0
until ip -n $nsa link show $va | grep -q 'state UP' && ip -n $nsb link show $vb | grep -q 'state UP'; do
  i=$((i + 1))
  [ $i -le 200 ] || { echo "FAIL: the veth pair is not up after 10 s"; exit 1; }
  sleep 0.05
done

port=18515
pairs=${OVROCE_PAIRS:-1}
# (With several pairs, each pair's port goes in later: %PORT% stays.)
pport=$port
[ "$pairs" -gt 1 ] && pport=%PORT%
# pair_addr K: the address of pair K's server (OVROCE_ONE_PORT: one each).
pair_addr() { if [ -n "${OVROCE_ONE_PORT:-}" ]; then echo "10.231.0.$((1 + 10 * $1))"; else echo 10.231.0.1; fi; }
paddr=10.231.0.1
if [ -n "${OVROCE_ONE_PORT:-}" ]; then
  paddr=%ADDR%; k=1
  while [ $k -lt "$pairs" ]; do ip -n $nsa addr add "$(pair_addr $k)/24" dev $va || exit 1; k=$((k + 1)); done
fi
args=""
for a in "$@"; do
  args="$args $(printf '%s' "$a" | sed "s/%PORT%/$pport/g; s/%ADDR6%/fd00:231::1/g; s/%ADDR%/$paddr/g; s/%GID6%/2/g; s/%GIDLL%/0/g; s/%GID%/1/g")"
done
# shellcheck disable=SC2086
set -- $args
# OVROCE_OWN_SHM=1: each side gets a /dev/shm of its own, so that the two
# processes share nothing but the link (the connection manager then meets
# only on the wire: InfiniBand CM MADs on QP1).
own_shm=""
[ -n "${OVROCE_OWN_SHM:-}" ] && own_shm='mount -t tmpfs tmpfs /dev/shm && exec "$0" "$@"'
# OVROCE_SIDE_SHM=1: each side's processes share a /dev/shm of that side
# (several pairs with the CM: the processes of a side share its device, the
# two sides share nothing but the link).
if [ -n "${OVROCE_SIDE_SHM:-}" ]; then
  mkdir -p "$logdir/shm-$nsa" "$logdir/shm-$nsb" && chmod 1777 "$logdir/shm-$nsa" "$logdir/shm-$nsb"
  own_shm='mount --bind "$OVROCE_SHM_DIR" /dev/shm && exec "$0" "$@"'
fi
run_as_user() { # NS IFNAME PROGRAM...
  ns=$1; ifn=$2; shift 2
  OVROCE_SHM_DIR="$logdir/shm-$ns" ip netns exec "$ns" ${own_shm:+sh -c "$own_shm"} setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
    env LD_LIBRARY_PATH="$LIB" RDMAV_SOFT_ROCE="$ifn" \
    ${OPENVERBS_SOFT_ROCE_LOSS:+OPENVERBS_SOFT_ROCE_LOSS=$OPENVERBS_SOFT_ROCE_LOSS} \
    ${OPENVERBS_SOFT_ROCE_REORDER:+OPENVERBS_SOFT_ROCE_REORDER=$OPENVERBS_SOFT_ROCE_REORDER} \
    ${OPENVERBS_SOFT_ROCE_DUPLICATE:+OPENVERBS_SOFT_ROCE_DUPLICATE=$OPENVERBS_SOFT_ROCE_DUPLICATE} \
    ${OPENVERBS_SOFT_ROCE_CORRUPT:+OPENVERBS_SOFT_ROCE_CORRUPT=$OPENVERBS_SOFT_ROCE_CORRUPT} \
    ${VERBS_LOG_LEVEL:+VERBS_LOG_LEVEL=$VERBS_LOG_LEVEL} \
    ${OPENVERBS_SOFT_SHARE_MAX:+OPENVERBS_SOFT_SHARE_MAX=$OPENVERBS_SOFT_SHARE_MAX} \
    timeout "$TMO" "$@"
}
# Several pairs: waits for the clients (pids $cpids) and the servers
# ($spids), prints their logs; bad=1 when one failed.
wait_pairs() {
  bad=0; k=0
  for p in $cpids; do wait "$p" || { echo "FAIL: client $k exited $?"; bad=1; }; k=$((k + 1)); done
  k=0
  for p in $spids; do wait "$p" || { echo "FAIL: server $k exited $?"; bad=1; }; k=$((k + 1)); done
  k=0
  while [ $k -lt "$pairs" ]; do
    echo "== server $k"; cat "$logdir/server$k"; echo "== client $k"; cat "$logdir/client$k"
    k=$((k + 1))
  done
}
if [ -n "${OVROCE_CM:-}" ]; then
  server="" client="" side=server
  for a in "$@"; do
    if [ "$a" = -- ] && [ $side = server ]; then side=client; continue; fi
    eval "$side=\"\$$side \$a\""
  done
fi
if [ -n "${OVROCE_CM:-}" ] && [ "$pairs" -gt 1 ]; then
  # Several rdma_cm pairs at once (OVROCE_SIDE_SHM=1): N servers on ports
  # %PORT%, %PORT%+1, ... (OVROCE_ONE_PORT: on %PORT% at N addresses),
  # ready once each has told its device that it listens (the markers beside
  # the side's segment), then N clients.
  # pair_cmd K COMMAND: COMMAND with pair K's port and address.
  pair_cmd() {
    pp=$((port + $1)); [ -n "${OVROCE_ONE_PORT:-}" ] && pp=$port
    printf '%s' "$2" | sed "s/%PORT%/$pp/g; s/%ADDR%/$(pair_addr "$1")/g"
  }
  k=0; spids=""
  while [ $k -lt "$pairs" ]; do
    # shellcheck disable=SC2086
    run_as_user $nsa $va $(pair_cmd $k "$server") > "$logdir/server$k" 2>&1 &
    spids="$spids $!"; k=$((k + 1))
  done
  i=0
  until [ "$(ls "$logdir/shm-$nsa/openverbs-65534/" 2>/dev/null | grep -c '\.listen-')" -ge "$pairs" ]; do
    i=$((i + 1)); [ $i -lt 400 ] || { echo "FAIL: the servers do not listen"; break; }
    sleep 0.05
  done
  k=0; cpids=""
  while [ $k -lt "$pairs" ]; do
    # shellcheck disable=SC2086
    run_as_user $nsb $vb $(pair_cmd $k "$client") > "$logdir/client$k" 2>&1 &
    cpids="$cpids $!"; k=$((k + 1))
  done
  wait_pairs
  if [ -n "${OVROCE_ONE_PORT:-}" ] && cat "$logdir"/server* | grep "no listener here"; then
    echo "FAIL: a CM request reached a process that does not listen at its address"; bad=1
  fi
  [ $bad -eq 0 ] || { echo FAIL; exit 1; }
  exit 0
fi
if [ -n "${OVROCE_CM:-}" ]; then
  # shellcheck disable=SC2086
  run_as_user $nsa $va $server > "$logdir/server" 2>&1 &
  spid=$!
  i=0
  # Ready: its CM socket exists (bound when it listens), seen through the
  # server's own root (its /dev/shm may be its own): $spid is the subshell,
  # its child timeout(1), and the server that one's child.
  # OVROCE_READY_UDP=PORT instead: its UDP socket is bound to PORT (a
  # datagram rsocket makes its CM id only when a peer first writes).
  ready() {
    if [ -n "${OVROCE_READY_UDP:-}" ]; then
      grep -q "$(printf ':%04X ' "$OVROCE_READY_UDP")" /proc/$c/net/udp /proc/$c/net/udp6 2>/dev/null
    else
      ls /proc/$c/root/dev/shm/openverbs-65534/cm 2>/dev/null | grep -q -- -
    fi
  }
  until c=$(pgrep -P "$(pgrep -P $spid | head -1)" 2>/dev/null | head -1) && [ -n "$c" ] && ready; do
    kill -0 $spid 2>/dev/null || break
    i=$((i + 1)); [ $i -lt 400 ] || break
    sleep 0.05
  done
  # The socket reserves the port at rdma_bind_addr; rdma_listen follows.
  # QP1's MADs are handled at once (the CM's progress thread), so a REQ
  # that came in between would get REJ 8 (invalid service ID), as from the
  # kernel's CM: a moment for the listen.
  sleep 1
  if [ -n "${OVROCE_MALFORMED_MAD:-}" ]; then
    # Malformed CM MADs to the server's QP1 before the client connects:
    # each dropped and counted (VERBS_LOG_LEVEL=3 logs each drop).
    ip netns exec $nsb python3 "$(dirname "$0")/send_malformed.py" --mad 10.231.0.2 10.231.0.1 2
    sleep 0.5
  fi
  set -- $client
  prog="$*"
elif [ "${OVROCE_PAIRS:-1}" -gt 1 ]; then
  # N servers, then N clients, all at once; each pair on a TCP port of its
  # own (the programs' exchange of QP numbers).
  prog=$1; shift
  n=$OVROCE_PAIRS; k=0; spids=""
  while [ $k -lt $n ]; do
    run_as_user $nsa $va "$prog" -p $((port + k)) "$@" > "$logdir/server$k" 2>&1 &
    spids="$spids $!"; k=$((k + 1))
  done
  k=0
  while [ $k -lt $n ]; do
    hex=$(printf ':%04X ' $((port + k))); i=0
    while [ $i -lt 200 ] && ! ip netns exec $nsa cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q "$hex"; do
      sleep 0.05; i=$((i + 1))
    done
    k=$((k + 1))
  done
  k=0; cpids=""
  while [ $k -lt $n ]; do
    run_as_user $nsb $vb "$prog" -p $((port + k)) "$@" 10.231.0.1 > "$logdir/client$k" 2>&1 &
    cpids="$cpids $!"; k=$((k + 1))
  done
  wait_pairs
  if [ -n "${VERBS_LOG_LEVEL:-}" ] && [ "$VERBS_LOG_LEVEL" -ge 3 ] && [ $bad -eq 0 ]; then
    # The kernel spreads a side's datagrams over its processes' sockets by
    # their addresses and ports: some reach the wrong process, which hands
    # them on.
    cat "$logdir"/server* "$logdir"/client* > "$logdir/all"
    handed=$(sed -n 's/.*QPs: \([0-9]*\) handed on, .*/\1/p' "$logdir/all" | awk '{s += $1} END {print s + 0}')
    lost=$(sed -n 's/.*handed on, \([0-9]*\) lost on the way.*/\1/p' "$logdir/all" | awk '{s += $1} END {print s + 0}')
    echo "== datagrams handed between processes: $handed, lost on the way: $lost"
    [ "$handed" -gt 0 ] || { echo "FAIL: no datagram was handed on between processes"; bad=1; }
    # (A receiver whose thread gets no core for 20 ms, as when other tests
    # fill both, loses what its queue cannot hold: rare, as on a wire.)
    if [ -n "${OVROCE_SHARE_NO_LOSS:-}" ] && [ $((lost * 100)) -gt "$handed" ]; then
      echo "FAIL: more than 1 % of the datagrams lost between processes"; bad=1
    fi
  fi
  [ $bad -eq 0 ] || { echo FAIL; exit 1; }
  exit 0
else
prog=$1; shift
# shellcheck disable=SC2086
run_as_user $nsa $va "$prog" -p $port "$@" ${OVROCE_SERVER_ARGS:-} > "$logdir/server" 2>&1 &
spid=$!
hex=$(printf ':%04X ' "$port")
i=0
while [ $i -lt 200 ] && ! ip netns exec $nsa cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q "$hex"; do
  kill -0 $spid 2>/dev/null || break
  sleep 0.05; i=$((i + 1))
done
fi
malformed=""
if [ -n "${OVROCE_MALFORMED:-}" ]; then
  # Bad input from the wire before the client starts: the server's device
  # must drop and count each kind, and the pair must still pass.
  malformed=$(ip netns exec $nsb python3 "$(dirname "$0")/send_malformed.py" 10.231.0.2 10.231.0.1 5 2>&1)
  echo "$malformed"
fi
if [ -n "${OVROCE_CM:-}" ]; then
  # shellcheck disable=SC2086
  run_as_user $nsb $vb $client > "$logdir/client" 2>&1
  crc=$?
elif [ "${OVROCE_CLIENTS:-1}" -gt 1 ]; then
  k=1; cpids=""
  while [ $k -le "$OVROCE_CLIENTS" ]; do
    run_as_user $nsb $vb "$prog" -p $port "$@" 10.231.0.1 > "$logdir/client$k" 2>&1 &
    cpids="$cpids $!"; k=$((k + 1))
  done
  crc=0; k=1
  for p in $cpids; do
    wait "$p" || { echo "FAIL: client $k exited $?"; crc=1; }
    { echo "-- client $k"; cat "$logdir/client$k"; } >> "$logdir/client"; k=$((k + 1))
  done
else
  run_as_user $nsb $vb "$prog" -p $port "$@" 10.231.0.1 > "$logdir/client" 2>&1
  crc=$?
fi
wait $spid
src=$?
if [ -n "${OVROCE_CM:-}" ]; then
  echo "== server ($server): exit $src"; cat "$logdir/server"
else
  echo "== server ($prog -p $port $* ${OVROCE_SERVER_ARGS:-}): exit $src"; cat "$logdir/server"
fi
echo "== client: exit $crc"; cat "$logdir/client"
if [ -n "${OVROCE_MALFORMED_MAD:-}" ] && [ $src -eq 0 ]; then
  for reason in length header attribute reserved field; do
    grep -q "malformed CM MAD dropped ($reason;" "$logdir/server" ||
      { echo "FAIL: no malformed CM MAD dropped as '$reason'"; src=1; }
  done
fi
# counters_are PATTERN: each side's device counters at close (the last
# "datagrams in, ..." line, VERBS_LOG_LEVEL=3) must match the shell PATTERN.
counters_are() {
  for side in server client; do
    line=$(grep "datagrams in,.* dropped:" "$logdir/$side" | tail -1)
    # shellcheck disable=SC2254
    case $line in
      $1) ;;
      "") echo "FAIL: $side: no device counters (VERBS_LOG_LEVEL=3?)"; src=1 ;;
      *) echo "FAIL: $side: ${line#*: }"; src=1 ;;
    esac
  done
}
if [ -n "${OVROCE_NO_DROPS:-}" ] && [ $src -eq 0 ] && [ $crc -eq 0 ]; then
  counters_are "*dropped: none"
fi
if [ -n "${OVROCE_NO_RETRANSMITS:-}" ] && [ $src -eq 0 ] && [ $crc -eq 0 ]; then
  counters_are "* 0 retransmissions*"
fi
if [ -n "$malformed" ] && [ $src -eq 0 ]; then
  # VERBS_LOG_LEVEL=3: the device's counters at close.
  for reason in short=10 length=5 icrc=5 opcode=5 version=5 qpn=5 pad=5; do
    grep -q "dropped:.* $reason" "$logdir/server" || { echo "FAIL: no '$reason' drop count"; src=1; }
  done
fi
if [ -n "${OVROCE_CHECK_FAULTS:-}" ] && [ $src -eq 0 ] && [ $crc -eq 0 ]; then
  # VERBS_LOG_LEVEL=3: each receiving side's injected faults and drops at
  # close. Every damaged datagram must have been dropped by the ICRC check
  # (a damaged one handled twice is counted twice); each kind of fault asked
  # for must have happened (on either side); a UD receiver's losses are the datagrams dropped
  # or damaged (rc_check -u has already failed on any garbage).
  seen=0 td=0 tr=0 tu=0 tc=0
  for side in server client; do
    line=$(grep "faults injected:" "$logdir/$side") || continue
    seen=1
    # shellcheck disable=SC2046
    set -- $(printf '%s\n' "$line" | sed 's/.*injected: \([0-9]*\) dropped, \([0-9]*\) reordered, \([0-9]*\) duplicated, \([0-9]*\) corrupted.*/\1 \2 \3 \4/')
    d=$1; r=$2; u=$3; c=$4
    icrc=$(grep -o " icrc=[0-9]*" "$logdir/$side" | tail -1 | cut -d= -f2)
    icrc=${icrc:-0}
    echo "== $side: injected $d dropped, $r reordered, $u duplicated, $c corrupted; $icrc dropped by the ICRC check"
    if [ "$icrc" -lt "$c" ] || [ "$icrc" -gt $((c + u)) ]; then
      echo "FAIL: $side: $c datagrams damaged but $icrc dropped by the ICRC check"; src=1
    fi
    td=$((td + d)); tr=$((tr + r)); tu=$((tu + u)); tc=$((tc + c))
    lost=$(sed -n 's/^ud: .* \([0-9]*\) lost,.*/\1/p' "$logdir/$side")
    if [ -n "$lost" ] && { [ "$lost" -lt "$d" ] || [ "$lost" -gt $((d + c)) ]; }; then
      echo "FAIL: $side: $lost UD datagrams lost, $d dropped and $c damaged"; src=1
    fi
  done
  [ $seen = 1 ] || { echo "FAIL: no fault counts (VERBS_LOG_LEVEL=3?)"; src=1; }
  for k in "LOSS $td" "REORDER $tr" "DUPLICATE $tu" "CORRUPT $tc"; do
    set -- $k
    eval "want=\${OPENVERBS_SOFT_ROCE_$1:-}"
    if [ -n "$want" ] && [ "$2" -eq 0 ]; then echo "FAIL: no $1 fault injected"; src=1; fi
  done
fi
if [ $src -ne 0 ] || [ $crc -ne 0 ]; then
  for n in $nsa $nsb; do
    echo "== UDP counters of $n:"; ip netns exec $n sh -c 'grep "^Udp:" /proc/net/snmp; grep "^Udp6" /proc/net/snmp6'
    ip -n $n -s link | grep -A1 -E "RX|TX" | head -8
  done
  echo "FAIL"; exit 1
fi
exit 0
