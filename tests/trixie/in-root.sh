#!/bin/sh
# in-root.sh GROUP: runs inside the Debian 13 root of trixie-root.sh (which
# binds our 56 build's libraries at /opt/openverbs/lib, this repository's
# tests/ at /opt/openverbs/tests and a work folder at /opt/openverbs/work).
# Debian 13's unmodified programs, our libraries first on LD_LIBRARY_PATH,
# the software device soft0 (RDMAV_SOFT_DEVICES=1; it needs only /dev/shm).
#
#   utils     ibverbs-utils: ibv_devices, ibv_devinfo -v, the rc/uc/ud/srq/
#             xsrq pingpong pairs
#   perftest  ib_{write,read,send,atomic}_bw and ib_{write,read,send}_lat pairs
#   pyverbs   rdma-core 56's Python test suite as Debian ships it
#             (/usr/share/doc/rdma-core/tests, run_tests.py) on soft0
#             (tests/soft/pyverbs_suite.sh): passes with 0 failures and
#             0 errors
#   diags     infiniband-diags on an ibsim fabric, byte-identical output with
#             Debian 13's libibumad and with ours (tests/umad/ibsim-compare.sh)
set -u
group=$1
T=/opt/openverbs/tests
LIB=/opt/openverbs/lib
WORK=/opt/openverbs/work
pass=0; fail=0
check() { # NAME COMMAND...
    name=$1; shift
    if "$@" > "$WORK/$group.$name.log" 2>&1; then
        pass=$((pass + 1)); echo "PASS $name"
    else
        fail=$((fail + 1)); echo "FAIL $name"; tail -15 "$WORK/$group.$name.log"
    fi
}
pair() { check "$1" sh $T/soft/run_pair.sh "$@"; }

case $group in
utils)
    check ibv_devices sh $T/soft/run_pair.sh --single $LIB 30 ibv_devices
    check ibv_devinfo_v sh $T/soft/run_pair.sh --single $LIB 30 ibv_devinfo -v
    for p in ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong ibv_srq_pingpong ibv_xsrq_pingpong; do
        check $p sh $T/soft/run_pair.sh $LIB 60 $p -d soft0
    done
    check ibv_rc_pingpong_events sh $T/soft/run_pair.sh $LIB 60 ibv_rc_pingpong -d soft0 -e
    ;;
perftest)
    for p in ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw ib_write_lat ib_read_lat ib_send_lat; do
        check $p sh $T/soft/run_pair.sh $LIB 120 $p -d soft0
    done
    ;;
pyverbs)
    # tests/soft/pyverbs_suite.sh: unpacked copy of the suite, private
    # /dev/shm, soft0's sysfs entries, `rdma link show -j` answered for
    # user-space devices (rdma-link-shim.sh) where RDMA netlink is missing.
    sh $T/soft/pyverbs_suite.sh $LIB $WORK/pyverbs
    if [ $? -eq 0 ]; then pass=1; else fail=1; fi
    ;;
diags)
    check ibsim_tools sh $T/umad/ibsim-compare.sh $LIB /tmp/ibsim-tools tools
    check ibsim_tools_2sw env UMAD_IBSIM_NET=$T/umad/ibsim-2sw.net \
        sh $T/umad/ibsim-compare.sh $LIB /tmp/ibsim-tools-2sw tools
    ;;
*) echo "usage: $0 utils|perftest|pyverbs|diags"; exit 2 ;;
esac
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
