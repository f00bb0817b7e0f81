#!/bin/sh
# gen-symbols.sh PACKAGE LIBRARY PROVIDED_NAME MINVER > debian/PACKAGE.symbols
#
# Writes the symbols file of PACKAGE from the exports of LIBRARY (as built):
# every symbol rdma-core exports maps to "PROVIDED_NAME (>= MINVER)" (the
# Debian library name, which Debian's package and ours both satisfy), and the
# symbols of openverbs' own version nodes (OPENVERBS_*) also to
# "PACKAGE (>= MINVER)", since only our library has them.
set -eu
pkg=$1; lib=$2; provided=$3; minver=$4
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
dpkg-gensymbols -q -p"$pkg" -e"$lib" -v"$minver" -O"$tmp" -c0
soname=$(awk 'NR == 1 { print $1 }' "$tmp")
echo "$soname $provided #MINVER#"
grep -q '@OPENVERBS_' "$tmp" && echo "| $pkg #MINVER#"
echo "* Build-Depends-Package: libopenverbs-dev"
grep '^ ' "$tmp" | awk -v v="$minver" '{ if ($1 ~ /@OPENVERBS_/) print " " $1 " " v " 1"; else print " " $1 " " v }'
