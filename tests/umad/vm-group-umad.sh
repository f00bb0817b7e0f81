#!/bin/bash
# libibumad on the real kernel (qemu test bed, tests/vm): ib_umad is loaded
# and rxe0 is a RoCE (Ethernet link layer) device.
#  - umad_get_port on rxe0 returns what sysfs says (link layer Ethernet, ...)
#  - the default CA/port choice is rdma-core's: an explicit port on a RoCE
#    link is refused, and the whole discovery report (umad_probe sysfs) is
#    identical with Debian's libibumad and with the library under test
#  - Debian's ibstat prints the same with both libraries
# Commands run with the library under test (the harness exports
# LD_LIBRARY_PATH or LD_PRELOAD); "debian" runs drop those variables.
. "$OV_REPO/tests/vm/lib.sh"
d=${RXE_DEV:-rxe0}
sys=/sys/class/infiniband/$d/ports/1

probe=""
for p in "${OV_BUILD_DIR:+$OV_BUILD_DIR/bin/umad_probe}" "$OV_REPO/build/bin/umad_probe"; do
  [ -n "$p" ] && [ -x "$p" ] && { probe=$p; break; }
done
debian() { env -u LD_LIBRARY_PATH -u LD_PRELOAD "$@"; }
mask() { sed -e 's/ibwarn: \[[0-9]*\]/ibwarn: [PID]/g'; }

# same NAME -- CMD...: PASS when CMD prints the same with both libraries.
same() {
  local name=$1 t0 log; shift; [ "$1" = -- ] && shift
  log=$OV_LOGDIR/$name.log; t0=$(ov_now)
  timeout -k 5 "$OV_TEST_TIMEOUT" "$@" 2>&1 | mask > "$log.ours"
  debian timeout -k 5 "$OV_TEST_TIMEOUT" "$@" 2>&1 | mask > "$log.debian"
  if ov_loader_error "$log.ours"; then
    ov_result FAIL "$name" "$t0" "(library did not load: $(ov_tail "$log.ours"))"
  elif cmp -s "$log.ours" "$log.debian"; then
    cp "$log.ours" "$log"; ov_result PASS "$name" "$t0"
  else
    diff "$log.debian" "$log.ours" > "$log"
    ov_result FAIL "$name" "$t0" "(output differs from Debian's libibumad; log $log)"
  fi
}

t0=$(ov_now)
if [ -z "$probe" ]; then
  ov_result FAIL probe "$t0" "(umad_probe not built: cmake --build BUILD --target umad_probe)"
  exit 1
fi
if [ ! -d "$sys" ]; then
  ov_result FAIL sysfs "$t0" "($sys missing: no $d in the guest)"
  exit 1
fi

# 0. The programs really load the library under test (Debian's in baseline).
t0=$(ov_now); log=$OV_LOGDIR/library-under-test.log
want_lib='(/usr)?/lib/x86_64-linux-gnu/libibumad\.so\.3' # Debian's (usrmerge)
[ "${OV_MODE:-}" != baseline ] && [ -n "${OV_LIB_DIR:-}" ] && want_lib=$OV_LIB_DIR/libibumad.so.3
LD_TRACE_LOADED_OBJECTS=1 "$probe" > "$log" 2>&1
if grep -qE "libibumad\.so\.3 => $want_lib |^[[:space:]]*$want_lib " "$log"; then
  ov_result PASS library-under-test "$t0"
else
  ov_result FAIL library-under-test "$t0" "($want_lib not loaded; log $log)"
fi

# 1. umad_get_port(rxe0, 1) against sysfs, field by field.
name=get_port-$d; log=$OV_LOGDIR/$name.log; t0=$(ov_now)
out=$(timeout -k 5 "$OV_TEST_TIMEOUT" "$probe" port "$d" 1 2>&1)
echo "$out" > "$log"
lead() { sed -e 's/^\([0-9xa-fA-F]*\).*/\1/' "$1"; }
gid=$(tr -d ':\n' < "$sys/gids/0")
npkeys=$(ls "$sys/pkeys" | grep -c '^[0-9]*$')
want="get_port($d, 1) = 0
   ca_name=$d portnum=1 base_lid=$(($(lead "$sys/lid"))) lmc=$(($(lead "$sys/lid_mask_count"))) sm_lid=$(($(lead "$sys/sm_lid"))) sm_sl=$(($(lead "$sys/sm_sl"))) state=$(($(lead "$sys/state"))) phys_state=$(($(lead "$sys/phys_state"))) rate=$(($(lead "$sys/rate"))) capmask=$(printf '0x%08x' $(($(lead "$sys/cap_mask")))) gid_prefix=0x${gid:0:16} port_guid=0x${gid:16:16} link_layer=$(cat "$sys/link_layer") pkeys_size=$npkeys"
got=$(echo "$out" | head -2 | sed -e 's/ pkeys=.*//')
{ echo "--- expected from sysfs"; echo "$want"; } >> "$log"
if [ "$got" = "$want" ] && grep -q 'link_layer=Ethernet' "$log"; then
  ov_result PASS "$name" "$t0"
else
  ov_result FAIL "$name" "$t0" "(umad_get_port differs from sysfs; log $log)"
fi

# 2. rdma-core's default choice: an explicit port on a RoCE link is refused
#    (falls back to "mthca0" -> -EIO) ...
ov_run default-port-skips-roce --expect '^get_port\(NULL, 1\) = -5$' -- "$probe" port - 1
# ... and the whole discovery report matches Debian's library.
same discovery-report -- "$probe" sysfs

# 3. Debian's ibstat, unmodified, with both libraries.
same ibstat -- ibstat
same ibstat-ca -- ibstat "$d"
same ibstat-list -- ibstat -l
same ibstat-guids -- ibstat -p
exit "$ov_failed"
