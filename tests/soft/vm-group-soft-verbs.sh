#!/bin/bash
# The software device inside the test bed's guest, next to kernel rxe: the
# same Debian programs as the rxe-verbs group, on soft0 (RDMAV_SOFT_DEVICES=1),
# so one run compares both devices. Run by tests/vm/run.sh (group soft-verbs).
. "$OV_REPO/tests/vm/lib.sh"
ov_require_ours "soft0 is the project's software device"
export RDMAV_SOFT_DEVICES=1
# The device keeps its shared state in /dev/shm: give the guest one.
if ! mountpoint -q /dev/shm 2>/dev/null; then
  mkdir -p /dev/shm && mount -t tmpfs -o mode=1777 tmpfs /dev/shm
fi
d=soft0
ov_run ibv_devices --expect soft0 -- ibv_devices
ov_run ibv_devinfo -- ibv_devinfo -d $d
ov_pair ibv_rc_pingpong tcp:18515 "ibv_rc_pingpong -d $d -n 100" "ibv_rc_pingpong -d $d -n 100 127.0.0.1"
ov_pair ibv_rc_pingpong_e tcp:18515 "ibv_rc_pingpong -d $d -n 100 -e" "ibv_rc_pingpong -d $d -n 100 -e 127.0.0.1"
ov_pair ibv_uc_pingpong tcp:18515 "ibv_uc_pingpong -d $d -n 100" "ibv_uc_pingpong -d $d -n 100 127.0.0.1"
ov_pair ibv_ud_pingpong tcp:18515 "ibv_ud_pingpong -d $d -n 100" "ibv_ud_pingpong -d $d -n 100 127.0.0.1"
ov_pair ibv_srq_pingpong tcp:18515 "ibv_srq_pingpong -d $d -n 100" "ibv_srq_pingpong -d $d -n 100 127.0.0.1"
ov_pair ibv_xsrq_pingpong tcp:18515 "ibv_xsrq_pingpong -d $d -n 100" "ibv_xsrq_pingpong -d $d -n 100 127.0.0.1"
exit "$ov_failed"
