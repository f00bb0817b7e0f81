#!/bin/sh
# abi-check.sh LIB WORKDIR: abi-dumper on our libibumad.so.3 (built with -g)
# and abi-compliance-checker against rdma-core stable-v44's ABI/ibumad.dump
# (../shared/abi/ibumad.dump, or $OPENVERBS_ABI_DIR/ibumad.dump).
set -u
lib=$1; work=$2
ref=${OPENVERBS_ABI_DIR:-$(cd "$(dirname "$0")/../../.." && pwd)/shared/abi}/ibumad.dump
for t in abi-dumper abi-compliance-checker; do
  command -v $t >/dev/null || { echo "FAIL: $t not installed (tests/deps.sh)"; exit 1; }
done
[ -f "$ref" ] || { echo "FAIL: reference dump $ref missing (set OPENVERBS_ABI_DIR)"; exit 1; }
rm -rf "$work"; mkdir -p "$work"
abi-dumper "$lib" -o "$work/ours.dump" -lver openverbs > "$work/dumper.log" 2>&1 \
  || { echo "FAIL: abi-dumper"; tail "$work/dumper.log"; exit 1; }
abi-compliance-checker -l ibumad -old "$ref" -new "$work/ours.dump" \
  -report-path "$work/report.html" > "$work/acc.log" 2>&1
rc=$?
cat "$work/acc.log"
grep -q 'Total binary compatibility problems: 0, warnings: 0' "$work/acc.log" &&
  grep -q 'Total source compatibility problems: 0, warnings: 0' "$work/acc.log" && [ $rc = 0 ] \
  || { echo "FAIL: see $work/report.html"; exit 1; }
