#!/bin/sh
# header-layout.sh SRC_DIR WORKDIR [CC [OURS_INCLUDE [RELEASE_INCLUDE]]]:
# compiles header_layout.c against our include root (default SRC_DIR/include;
# a build tree's staged include/ for the ABI target) and against the
# release's headers (default Debian 12's /usr/include, libibumad-dev), in C
# and as C++, and requires identical output (sizes, offsets, constants,
# inline helpers).
set -u
src=$1; work=$2; cc=${3:-cc}; inc=${4:-$src/include}; ref=${5:-/usr/include}
[ -f "$ref/infiniband/umad.h" ] || { echo "FAIL: $ref/infiniband/umad.h missing (libibumad-dev)"; exit 1; }
mkdir -p "$work"
fail=0
for lang in c c++; do
  "$cc" -x $lang -Wall -Werror -Wno-deprecated-declarations -I"$inc" \
    -o "$work/ours-$lang" "$src/tests/umad/header_layout.c" || { echo "FAIL: ours ($lang) does not compile"; exit 1; }
  "$cc" -x $lang -Wall -Wno-deprecated-declarations -I"$ref" \
    -o "$work/debian-$lang" "$src/tests/umad/header_layout.c" || { echo "FAIL: Debian's ($lang) does not compile"; exit 1; }
  "$work/ours-$lang" > "$work/ours-$lang.txt"
  "$work/debian-$lang" > "$work/debian-$lang.txt"
  if cmp -s "$work/ours-$lang.txt" "$work/debian-$lang.txt"; then
    echo "PASS $lang: $(wc -l < "$work/ours-$lang.txt") layout facts identical"
  else
    echo "FAIL $lang"; diff "$work/debian-$lang.txt" "$work/ours-$lang.txt" | head -20; fail=1
  fi
done
# Each public header compiles on its own (self-contained), C and C++.
for h in umad umad_types umad_sa umad_sa_mcm umad_sm umad_cm umad_str; do
  for lang in c c++; do
    echo "#include <infiniband/$h.h>" | "$cc" -x $lang -Wall -Werror -I"$inc" -fsyntax-only - \
      || { echo "FAIL: $h.h is not self-contained ($lang)"; fail=1; }
  done
done
exit $fail
