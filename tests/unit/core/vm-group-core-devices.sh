#!/bin/bash
# Discovery and contexts on the real kernel (rxe0, siw0): Debian's
# ibv_devices / ibv_devinfo print exactly what they print on Debian's own
# library; discovery goes through netlink and loads only the providers the
# present devices need; devices appear and vanish between two calls in one
# process.
. "$OV_REPO/tests/vm/lib.sh"

deb() { env -u LD_LIBRARY_PATH -u LD_PRELOAD "$@"; }

# same NAME CMD...: PASS when the output (stdout+stderr) under the library
# under test equals the output under Debian's library.
same() {
  local name=$1 t0 rc_d rc_o; shift
  t0=$(ov_now)
  deb "$@" >"$OV_LOGDIR/$name.debian" 2>&1; rc_d=$?
  timeout -k 5 "$OV_TEST_TIMEOUT" "$@" >"$OV_LOGDIR/$name.ours" 2>&1; rc_o=$?
  if [ "$rc_d" != "$rc_o" ]; then
    ov_result FAIL "$name" "$t0" "(exit $rc_o, Debian's $rc_d; logs $OV_LOGDIR/$name.*)"
  elif ! diff -u "$OV_LOGDIR/$name.debian" "$OV_LOGDIR/$name.ours" >"$OV_LOGDIR/$name.diff"; then
    ov_result FAIL "$name" "$t0" "(output differs: $(head -c 300 "$OV_LOGDIR/$name.diff" | tr '\n' ' '))"
  else
    ov_result PASS "$name" "$t0"
  fi
}

same ibv_devices ibv_devices
same ibv_devinfo ibv_devinfo
same ibv_devinfo-v-rxe ibv_devinfo -v -d "$RXE_DEV"
same ibv_devinfo-v-siw ibv_devinfo -v -d "$SIW_DEV"

if [ "$OV_MODE" = baseline ]; then
  t0=$(ov_now)
  ov_result SKIP netlink-lazy-loading "$t0" "(openverbs only)"
  ov_result SKIP open-contexts "$t0" "(openverbs only)"
  ov_result SKIP hotplug "$t0" "(openverbs only)"
  exit "$ov_failed"
fi

# Netlink discovery, only rxe and siw dlopen'ed.
t0=$(ov_now)
log=$OV_LOGDIR/netlink-lazy-loading.log
VERBS_LOG_LEVEL=4 VERBS_LOG_FILE=$log ibv_devices >/dev/null 2>&1
if grep -q "scanning sysfs" "$log"; then
  ov_result FAIL netlink-lazy-loading "$t0" "(fell back to sysfs; log $log)"
elif ! grep -q "loaded provider rxe" "$log" || ! grep -q "loaded provider siw" "$log"; then
  ov_result FAIL netlink-lazy-loading "$t0" "(rxe/siw not loaded; log $log)"
elif grep "loaded provider" "$log" | grep -vqE "provider (rxe|siw) "; then
  ov_result FAIL netlink-lazy-loading "$t0" "(loaded providers no device needs; log $log)"
else
  ov_result PASS netlink-lazy-loading "$t0"
fi

ov_run open-contexts --expect "open $RXE_DEV cmd_fd=[0-9]+" -- "$OV_BUILD_DIR/bin/core_probe"
if ! grep -qE "open $SIW_DEV cmd_fd=[0-9]+" "$OV_LOGDIR/open-contexts.log"; then
  ov_result FAIL open-contexts-siw "$(ov_now)" "(siw0 not opened; log $OV_LOGDIR/open-contexts.log)"
fi

ip link add dum9 type dummy && ip link set dum9 up
ov_run hotplug --expect "held: rxe9" -- "$OV_BUILD_DIR/bin/core_hotplug" \
  "rdma link add rxe9 type rxe netdev dum9" "rdma link delete rxe9" rxe9
log=$OV_LOGDIR/hotplug.log
if ! grep -qE "^list1:.* rxe9" "$log" || grep -qE "^list2:.* rxe9" "$log"; then
  ov_result FAIL hotplug-lists "$(ov_now)" "(rxe9 did not appear then vanish; log $log)"
fi
ip link delete dum9 2>/dev/null
exit "$ov_failed"
