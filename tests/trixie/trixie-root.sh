#!/bin/sh
# trixie-root.sh LIB56 WORKDIR GROUP
#
# Issue 12's Debian 13 acceptance: Debian 13's own programs in a Debian 13
# root (tests/roots/make-root.sh trixie ..., cached), with our 56 build
# (LIB56: build/abi56/lib, libibverbs.so.1, libibumad.so.3 and the soft
# provider) first on the library path; GROUP is one of in-root.sh's groups.
# The root is entered with tests/roots/enter.sh (chroot in private mount and
# PID namespaces, writes thrown away, private /dev/shm). Logs stay in WORKDIR.
# Needs root. Exit status 0 = the group passed.
set -eu
lib=$1; work=$2; group=$3
here=$(cd "$(dirname "$0")" && pwd)
tests=$(dirname "$here")
[ -f "$lib/libibverbs.so.1" ] && [ -f "$lib/libibumad.so.3" ] || {
    echo "FAIL: $lib has no libibverbs.so.1/libibumad.so.3 (the abi56 tree is not built)"; exit 1; }
# Debian 13's packages of the acceptance: ibverbs-utils, perftest, pyverbs
# and rdma-core's test suite (python3-pyverbs, rdma-core), infiniband-diags
# on ibsim (ibsim-utils, opensm); iproute2 for the real `rdma`, psmisc for
# fuser (tests/soft/run_pair.sh).
root=$(sh "$tests/roots/make-root.sh" --quiet trixie ibverbs-utils perftest \
    python3-pyverbs rdma-core infiniband-diags ibsim-utils opensm iproute2 psmisc)
rm -rf "$work"; mkdir -p "$work" "$work/shim"
cp "$here/rdma-link-shim.sh" "$work/shim/rdma"
chmod 755 "$work/shim/rdma"
exec sh "$tests/roots/enter.sh" --bind "$lib:/opt/openverbs/lib" \
    --bind "$tests:/opt/openverbs/tests" --bind "$work/shim:/opt/openverbs/shim" \
    --bind-rw "$work:/opt/openverbs/work" \
    "$root" sh /opt/openverbs/tests/trixie/in-root.sh "$group"
