#!/bin/sh
# rdma-core's own test suite (Debian's python3-pyverbs, run_tests.py, from an
# unpacked copy) on the RoCE v2 software device: sroce0 on one end of a veth
# pair in a network namespace of its own, GID index 1 (the IPv4 address).
# The suite makes both ends of its connections in one process, on the one
# device, so every packet leaves through the device's socket and comes back
# to it. Passes when the suite reports no failure and no error and at least
# MIN_OK tests ran to "ok" (so that a test skipped where it used to pass is
# seen: the skips are the device's documented limits, openverbs-roce(7),
# and tests of other vendors' devices).
#
#   pyverbs_sroce.sh LIBDIR MIN_OK [run_tests.py ARGS...]
#
# Root only (namespaces); exit 77 (skipped) otherwise or without python3-pyverbs.
set -u
LIB=$(cd "$1" && pwd); MIN_OK=$2; shift 2
src=/usr/share/doc/rdma-core/tests
[ -f "$src/run_tests.py" ] || { echo "SKIP: rdma-core's tests not installed (python3-pyverbs)"; exit 77; }
# shellcheck source=tests/roce/ns_setup.sh
. "$(dirname "$0")/ns_setup.sh"
ovroce_private_mounts "$0" "$LIB" "$MIN_OK" "$@"
work=$(mktemp -d /tmp/ovroce-pyverbs.XXXXXX)
ns=ovpy$$ nsp=ovpyp$$ va=ovpa$$ vb=ovpb$$
cleanup() { ip netns del $ns 2>/dev/null; ip netns del $nsp 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
cp -r "$src" "$work/tests" && find "$work/tests" -name '*.gz' -exec gunzip -f {} + || exit 1
ovroce_veth $ns $nsp $va $vb
ip -n $ns addr add 10.233.0.1/24 dev $va && ip -n $nsp addr add 10.233.0.2/24 dev $vb || exit 1
i=0
until ip -n $ns link show $va | grep -q 'state UP'; do
  i=$((i + 1))
  [ $i -le 200 ] || { echo "FAIL: the veth pair is not up after 10 s"; exit 1; }
  sleep 0.05
done
# Debian's python (a python3 earlier on PATH may lack pyverbs).
(cd "$work" && ip netns exec $ns env LD_LIBRARY_PATH="$LIB" RDMAV_SOFT_ROCE=$va \
  timeout 900 /usr/bin/python3 tests/run_tests.py --dev sroce0 --gid 1 -v "$@") > "$work/log" 2>&1
rc=$?
ok=$(grep -c '\.\.\. ok$' "$work/log")
summary=$(grep -E '^(OK|FAILED)' "$work/log" | tail -1)
echo "run_tests.py --dev sroce0 --gid 1: exit $rc, $ok ok; $(grep '^Ran ' "$work/log" | tail -1); ${summary:-no summary}"
grep -E '^(FAIL|ERROR):' "$work/log"
if [ $rc -ne 0 ] || [ "${summary#OK}" = "$summary" ]; then
  tail -40 "$work/log"; echo "FAIL"; exit 1
fi
if [ "$ok" -lt "$MIN_OK" ]; then
  grep -o "skipped '.*'" "$work/log" | sort | uniq -c | sort -rn
  echo "FAIL: $ok tests ok, fewer than $MIN_OK"; exit 1
fi
exit 0
