#!/bin/sh
# pyverbs_suite.sh [--eth] [--user USER] [--min-ok N] [--min-ok-user N] LIBDIR [WORKDIR]
#
# rdma-core's own test suite as the distribution ships it (python3-pyverbs:
# /usr/share/doc/rdma-core/tests, unmodified; Debian gzips the larger files,
# so it runs from an unpacked copy) by `run_tests.py --dev soft0`, with
# LIBDIR (our libibverbs.so.1, librdmacm.so.1, the soft provider) first on
# LD_LIBRARY_PATH and RDMAV_SOFT_DEVICES=1. Used by ctest soft.pyverbs_suite
# and soft.pyverbs_suite_user (Debian 12's suite on the host, rdma-core 44)
# and by tests/trixie/in-root.sh (Debian 13's, rdma-core 56.1, inside a
# Debian 13 root).
#
# Runs in its own mount namespace: a private /dev/shm, and the sysfs
# entries the suite reads for soft0 (sysfs-view.sh: its P_Key table, and
# lo as its network interface, so the suite's rdma_cm tests run over
# 127.0.0.1, which the software CM serves). OV_PYVERBS_TESTS (e.g.
# test_mr) narrows the run to some of the suite's modules or tests.
# Where `rdma link show -j` fails (no RDMA netlink)
# tests/trixie/rdma-link-shim.sh stands in for it on PATH (rdma-core 56's
# suite asks it for every test's set-up).
#
# Run by root, it reserves 2 MiB huge pages for the suite's huge-page tests
# (test_huge_page_traffic, test_odp_rc_huge_*: they skip when none are
# reserved): OV_PYVERBS_HUGEPAGES (default 8) more than the system has,
# given back when the run ends (relative, so overlapping runs each give back
# their own). When the kernel cannot find the memory those tests skip with
# the suite's reason.
#
# Without root it needs no privilege: the mount namespace belongs to a user
# namespace of its own (unshare --user --map-current-user --keep-caps), in
# which the user keeps their own uid and holds capabilities over that
# namespace only; the suite itself then runs with every capability dropped
# (setpriv), exactly as the user, so the tests that ask for root
# (os.geteuid() == 0) see a user. It reserves no huge page (that is root's):
# the huge-page tests get what the system has reserved (nr_hugepages), and
# skip when that is none. Exit status 77 when the kernel gives the user no
# user namespace. --user USER, by root: runs so as USER (setpriv), with the
# libraries and these scripts copied to a folder USER may read (a build
# tree under a root-only folder is out of its reach) and the suite in a
# work folder of USER's; WORKDIR then receives the log.
#
# --eth: soft0 gets an Ethernet port (RDMAV_SOFT_LINK_LAYER=ethernet:
# RoCE v2 GIDs, raw packet QPs, flow steering, RSS; openverbs-soft(7)), and
# the run without root maps the user to uid 0 of its user namespace
# (unshare --map-root-user) instead of keeping their uid: the suite asks for
# euid 0 before it tries raw packet QPs ("Must be run by root on Ethernet
# link layer"), which the device itself does not need. The suite still runs
# with every capability dropped, and nothing outside the namespace is
# reachable as root. As root, --eth runs as root with the Ethernet port.
#
# Passes when the suite ran and reports no failure and no error, and at
# least N tests passed: --min-ok N when it runs as root, --min-ok-user N
# when it runs without root (default 0). Prints the counts and each skipped
# test with the suite's reason; the whole log is WORKDIR/pyverbs.log
# (default: a temporary folder, removed).
set -u
if [ "${OV_PYVERBS_SUITE_INNER:-}" != 1 ]; then
  as_user= min_ok=0 min_ok_user=0 eth=
  while [ $# -gt 0 ]; do
    case $1 in
      --eth) eth=--eth; shift ;;
      --user) as_user=$2; shift 2 ;;
      --min-ok) min_ok=$2; shift 2 ;;
      --min-ok-user) min_ok_user=$2; shift 2 ;;
      *) break ;;
    esac
  done
  if [ -n "$as_user" ] && [ "$(id -u)" = 0 ]; then
    id "$as_user" > /dev/null || { echo "FAIL: no user $as_user"; exit 1; }
    here=$(cd "$(dirname "$0")" && pwd)
    stage=$(mktemp -d /tmp/ov-pyverbs-user.XXXXXX)
    trap 'rm -rf "$stage"' EXIT
    trap 'exit 130' INT TERM
    { cp -r "$1" "$stage/lib" && mkdir "$stage/soft" "$stage/trixie" "$stage/work" &&
      cp "$here/pyverbs_suite.sh" "$here/sysfs-view.sh" "$stage/soft/" &&
      cp "$here/../trixie/rdma-link-shim.sh" "$stage/trixie/" &&
      chmod -R a+rX "$stage" && chown "$as_user" "$stage/work"; } ||
      { echo "FAIL: cannot stage the libraries and scripts for $as_user"; exit 1; }
    setpriv --reuid="$as_user" --regid="$(id -g "$as_user")" --clear-groups --reset-env \
      env PATH="$PATH" HOME="$stage/work" OV_PYVERBS_TESTS="${OV_PYVERBS_TESTS:-}" \
      sh "$stage/soft/pyverbs_suite.sh" $eth --min-ok-user "$min_ok_user" "$stage/lib" "$stage/work/run"
    rc=$?
    if [ -n "${2:-}" ]; then mkdir -p "$2" && cp "$stage/work/run/pyverbs.log" "$2/"; fi
    exit $rc
  fi
  lib=$(cd "$1" && pwd)
  work=${2:-}
  work_tmp=
  if [ -z "$work" ]; then work=$(mktemp -d /tmp/ov-pyverbs.XXXXXX); work_tmp=$work; fi
  mkdir -p "$work"
  huge=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
  added=0
  give_back() {
    if [ "$added" -gt 0 ]; then
      back=$(( $(cat "$huge") - added )); [ "$back" -ge 0 ] || back=0
      echo "$back" > "$huge" || echo "WARN: could not give back $added huge pages ($huge)"
    fi
    [ -z "$work_tmp" ] || rm -rf "$work_tmp"
  }
  trap give_back EXIT
  trap 'exit 130' INT TERM
  want=${OV_PYVERBS_HUGEPAGES:-8}
  if [ "$(id -u)" = 0 ] && [ -w "$huge" ] && [ "$want" -gt 0 ]; then
    before=$(cat "$huge")
    if echo $((before + want)) > "$huge" 2>/dev/null; then
      added=$(( $(cat "$huge") - before ))
      [ "$added" -gt 0 ] || added=0
    fi
    echo "reserved $added huge pages of 2 MiB for the run (the system had $before)"
  fi
  src=/usr/share/doc/rdma-core/tests
  [ -f "$src/run_tests.py" ] || { echo "FAIL: rdma-core's tests not installed (python3-pyverbs, tests/deps.sh)"; exit 1; }
  rm -rf "$work/tests" && cp -r "$src" "$work/tests" && find "$work/tests" -name '*.gz' -exec gunzip -f {} +
  export OV_PYVERBS_SUITE_INNER=1 OV_LIB="$lib" OV_WORK="$work" OV_HERE="$(cd "$(dirname "$0")" && pwd)"
  export OV_ETH="$eth"
  if [ "$(id -u)" = 0 ]; then
    export OV_USERNS= OV_MIN_OK="$min_ok"
    unshare --mount --propagation private sh "$0"
    exit $?
  fi
  export OV_USERNS=1 OV_MIN_OK="$min_ok_user"
  map=--map-current-user
  [ -z "$eth" ] || map=--map-root-user
  userns="unshare --user $map --keep-caps --mount --propagation private"
  if ! $userns true 2>/dev/null; then
    echo "SKIP: without root the run needs a user namespace, which this kernel refuses ($userns)"
    exit 77
  fi
  $userns sh "$0"
  exit $?
fi

export LD_LIBRARY_PATH="$OV_LIB" RDMAV_SOFT_DEVICES=1
[ -z "$OV_ETH" ] || export RDMAV_SOFT_LINK_LAYER=ethernet
log=$OV_WORK/pyverbs.log
mount -t tmpfs tmpfs /dev/shm || { echo "FAIL: no private /dev/shm"; exit 1; }
sh "$OV_HERE/sysfs-view.sh" --net lo || { echo "FAIL: sysfs entries for soft0"; exit 1; }
if ! rdma link show -j > /dev/null 2>&1; then
  mkdir -p "$OV_WORK/shim"
  cp "$OV_HERE/../trixie/rdma-link-shim.sh" "$OV_WORK/shim/rdma" && chmod 755 "$OV_WORK/shim/rdma"
  export PATH="$OV_WORK/shim:$PATH"
fi
cd "$OV_WORK"
# Without root the suite runs with no capability at all, not even over this
# user namespace's mounts.
drop=
[ -z "$OV_USERNS" ] || drop="setpriv --inh-caps=-all --ambient-caps=-all --bounding-set=-all"
echo "suite runs as $(id -un) (uid $(id -u))${drop:+, no capabilities}${OV_ETH:+, soft0 with an Ethernet port}"
timeout 1200 $drop /usr/bin/python3 tests/run_tests.py --dev soft0 -v ${OV_PYVERBS_TESTS:-} > "$log" 2>&1
rc=$?
ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in.*/\1/p' "$log")
summary=$(grep -E '^(OK|FAILED)' "$log" | tail -1)
bad=$(grep -cE '^(FAIL|ERROR): ' "$log")
skipped=$(grep -cE " \.\.\. skipped " "$log")
# Passed: neither skipped nor failed (a test that prints something puts its
# "ok" on a later line, so counting "... ok" misses it).
ok=$(( ${ran:-0} - skipped - bad ))
echo "rdma-core suite on soft0: rc=$rc ran=${ran:-?} ok=$ok skipped=$skipped failed+errors=$bad: ${summary:-no summary}"
echo "skipped (test: reason):"
# A test with a docstring prints its name on one line and the outcome after
# the docstring's first line.
awk '/^test[a-zA-Z0-9_]* \(/ { name = $1 }
     / \.\.\. skipped / { sub(/.* \.\.\. skipped /, ""); print "  " name ": " $0 }' "$log" | sort
grep -E '^(FAIL|ERROR): ' "$log"
if [ $rc -eq 0 ] && [ -n "$ran" ] && [ "$bad" = 0 ] && echo "$summary" | grep -q '^OK'; then
  if [ "$ok" -ge "$OV_MIN_OK" ]; then echo PASS; exit 0; fi
  echo "FAIL: $ok passed, fewer than the $OV_MIN_OK expected"
  exit 1
fi
tail -40 "$log"
echo "FAIL (log: $log)"
exit 1
