#!/bin/bash
# Stage 2 of the test-bed guest: PID 1 on the host's root (read-only 9p).
# Sets up the guest, creates rxe0 and siw0 on dummy netdevs, runs the selected
# groups and powers off. Talks to the host only through files in $ov_results
# (the writable 9p share, mounted at the same path as on the host):
#   guest.env    written by the host: settings (see run.sh)
#   results.txt  result lines, appended as they come; the host prints them
#   events.txt   milestones: "STAGE2 <uptime>", "RXE0 <uptime>", "DONE <uptime>"
#   logs/        one folder per group, one log per test; setup.log; dmesg.txt
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export LC_ALL=C HOME=/tmp TERM=dumb

res=${ov_results:-}
halt() {
  # PID 1 must never exit (the kernel would panic); external programs stop
  # working once the root share goes away, so spin in the shell itself.
  sync
  echo o >/proc/sysrq-trigger
  while :; do :; done
}
if [ -z "$res" ] || [ ! -f "$res/guest.env" ]; then
  echo "OV-STAGE2-FAILED: no results share at '$res'" >/dev/console
  halt
fi
uptime_s() { local u; read -r u _ </proc/uptime; echo "$u"; }
event() { echo "$* $(uptime_s)" >>"$res/events.txt"; }
event STAGE2

exec >>"$res/logs/setup.log" 2>&1
set -x
# shellcheck source=/dev/null
. "$res/guest.env"

fatal() {
  set +x
  echo "FAIL setup/$1 0.00 ($2)" >>"$res/results.txt"
  dmesg >"$res/logs/dmesg.txt" 2>&1
  event DONE
  halt
}

# Stage 1 loaded the modules from RAM; anything missing is asked for here.
need=""
for m in ib_core ib_uverbs ib_umad rdma_ucm rdma_rxe siw dummy; do
  [ -d "/sys/module/$m" ] || need="$need $m"
done
if [ -n "$need" ]; then
  /run/ov-modprobe -a $need || fatal modprobe "modprobe$need failed"
fi

# Stage 1 normally created the devices already (see logs/stage1.log).
if [ ! -d "/sys/class/infiniband/$RXE_DEV" ] || [ ! -d "/sys/class/infiniband/$SIW_DEV" ]; then
  ip link show dum0 >/dev/null 2>&1 || ip -batch - <<EOF || fatal netdev "cannot create the dummy netdevs"
link set lo up
link add dum0 type dummy
addr add $RXE_IP/24 dev dum0
link set dum0 up
link add dum1 type dummy
addr add $SIW_IP/24 dev dum1
link set dum1 up
EOF
  if [ ! -d "/sys/class/infiniband/$RXE_DEV" ]; then
    rdma link add "$RXE_DEV" type rxe netdev dum0 || fatal rxe "rdma link add $RXE_DEV type rxe failed"
    event RXE0
  fi
  if [ ! -d "/sys/class/infiniband/$SIW_DEV" ]; then
    rdma link add "$SIW_DEV" type siw netdev dum1 || fatal siw "rdma link add $SIW_DEV type siw failed"
    event SIW0
  fi
fi

# The IPv4-mapped RoCE v2 GID of rxe0 (::ffff:RXE_IP); read the table in one go.
ip_hex=$(printf '%02x%02x:%02x%02x' ${RXE_IP//./ })
sysd=/sys/class/infiniband/$RXE_DEV/ports/1
RXE_GID_INDEX=""
for _ in {1..100}; do
  for f in $(grep -l "0000:0000:0000:0000:0000:ffff:$ip_hex" "$sysd"/gids/* 2>/dev/null); do
    n=${f##*/}
    if grep -q 'RoCE v2' "$sysd/gid_attrs/types/$n" 2>/dev/null; then RXE_GID_INDEX=$n; break; fi
  done
  [ -n "$RXE_GID_INDEX" ] && break
  sleep 0.1
done
[ -n "$RXE_GID_INDEX" ] || fatal gid "no RoCE v2 GID ::ffff:$RXE_IP on $RXE_DEV"
export RXE_GID_INDEX
echo "RXE_GID_INDEX=$RXE_GID_INDEX" >>"$res/events.txt"
rdma link show
for f in /sys/class/infiniband/*/ports/1/gids/0; do echo "$f: $(cat "$f")"; done

[ "${OV_DEBUG_HANG:-0}" = tests ] && { set +x; while :; do :; done; }

# The library under test, for the groups only (setup tools stay on Debian's).
case $OV_MODE in
  ld_library_path) export LD_LIBRARY_PATH=$OV_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ;;
  preload)         export LD_PRELOAD=$OV_PRELOAD ;;
esac
export OV_LIB_DIR OV_MODE OV_REPO OV_BUILD_DIR OV_RESULTS RXE_DEV RXE_IP SIW_DEV SIW_IP
export OV_TEST_TIMEOUT

# A program that dies of a signal leaves a core here; ov_check (lib.sh) puts
# its backtraces into the test's log (a crash seen once in CI stays readable).
export OV_CORE_DIR=$res/cores
mkdir -p "$OV_CORE_DIR"
echo "$OV_CORE_DIR/core.%E.%p" >/proc/sys/kernel/core_pattern
ulimit -c unlimited

# A library that cannot even be loaded fails the run here, once, not per test.
ibv_devices >"$res/logs/library-check.log" 2>&1
rc=$?
if grep -qE 'error while loading shared libraries|symbol lookup error|cannot be preloaded|not found' \
     "$res/logs/library-check.log"; then
  fatal library "programs cannot load the library under test: $(grep -v '^$' "$res/logs/library-check.log" | head -n1)"
fi
echo "ibv_devices exit $rc"

set +x
for entry in $OV_GROUPS; do
  name=${entry%%=*} script=${entry#*=}
  mkdir -p "$res/logs/$name"
  echo "== group $name ($script)"
  t0=${EPOCHREALTIME//[!0-9]/}
  (
    cd /tmp || exit 1
    export OV_GROUP=$name OV_LOGDIR=$res/logs/$name
    timeout -k 10 "$OV_GROUP_TIMEOUT" "$script" 2>"$res/logs/$name/stderr.log"
  ) | while IFS= read -r line; do
    case $line in
      PASS\ *|FAIL\ *|XFAIL\ *|SKIP\ *) echo "$line" >>"$res/results.txt"
                                         echo "$line" >>"$res/logs/$name/results.txt" ;;
      *) echo "$line" >>"$res/logs/$name/stdout.log" ;;
    esac
  done
  rc=${PIPESTATUS[0]}
  # Cores of tests whose result the group wrote itself (ov_result): their
  # backtraces go to the group's own file.
  if compgen -G "$OV_CORE_DIR/core.*" >/dev/null; then
    (OV_GROUP=$name OV_LOGDIR=$res/logs/$name
     . "$OV_REPO/tests/vm/lib.sh" && ov_backtraces "$res/logs/$name/cores.log")
  fi
  d=$(( ${EPOCHREALTIME//[!0-9]/} - t0 ))
  secs=$(printf '%d.%02d' $((d / 1000000)) $((d % 1000000 / 10000)))
  nlines=$(cat "$res/logs/$name/results.txt" 2>/dev/null | wc -l)
  nfail=$(grep -c '^FAIL ' "$res/logs/$name/results.txt" 2>/dev/null)
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "FAIL $name/group-timeout $secs (group ran over ${OV_GROUP_TIMEOUT}s)" >>"$res/results.txt"
  elif [ "$rc" != 0 ] && [ "${nfail:-0}" = 0 ]; then
    echo "FAIL $name/group-exit $secs (group script exited $rc; see $res/logs/$name/stderr.log)" >>"$res/results.txt"
  elif [ "$nlines" = 0 ]; then
    echo "FAIL $name/no-results $secs (group printed no result line)" >>"$res/results.txt"
  fi
  echo "GROUP $name $rc $secs" >>"$res/events.txt"
done

unset LD_LIBRARY_PATH LD_PRELOAD
dmesg >"$res/logs/dmesg.txt" 2>&1
event DONE
halt
