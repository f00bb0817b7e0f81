#!/bin/sh
# check-anchor.sh: the anchor (rdma-core 64.0, built by build.sh) is what the
# 64 target's tests take it for: its libraries export exactly the symbol lists
# committed here (rdma-core-64-*.symbols, the reference the 64 target is built
# to), its providers carry the 64 suffix and registration symbol, its tools and
# pyverbs are present, and abi-dumper's dumps hold the records the layout tests
# need. Exit 77 when the anchor cannot be built (no tarball).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
abi=$here/../abi
anchor=$(sh "$here/build.sh" --quiet) || exit $?
fail=0
for lib in libibverbs.so.1 libibumad.so.3 librdmacm.so.1; do
  python3 "$abi/check_symbols.py" --lib "$anchor/usr/lib/$lib" --soname "$lib" \
    --debian "$here/rdma-core-64-$lib.symbols" || fail=1
done
for p in rxe siw; do
  f=$anchor/usr/lib/libibverbs/lib$p-rdmav64.so
  if ! readelf --dyn-syms -W "$f" | grep -q 'verbs_register_driver_64@IBVERBS_PRIVATE_64'; then
    echo "FAIL: $f does not import verbs_register_driver_64@IBVERBS_PRIVATE_64"; fail=1
  fi
done
for t in ibv_devinfo ibv_rc_pingpong ibv_ud_pingpong ibv_srq_pingpong ibv_xsrq_pingpong; do
  [ -x "$anchor/usr/bin/$t" ] || { echo "FAIL: $t missing"; fail=1; }
done
PYTHONPATH=$anchor/python LD_LIBRARY_PATH=$anchor/usr/lib /usr/bin/python3 -c 'import pyverbs.device' ||
  { echo "FAIL: pyverbs does not import"; fail=1; }
for rec in verbs_context verbs_context_ops ibv_mr_init_attr verbs_dmah; do
  grep -q "'Name' => 'struct $rec'" "$anchor/dumps/ibverbs.dump" ||
    { echo "FAIL: ibverbs.dump has no record $rec"; fail=1; }
done
[ $fail = 0 ] && echo "anchor64: $anchor checked"
exit $fail
