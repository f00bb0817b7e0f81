#!/bin/sh
# layout-diff.sh OLD_ROOT OLD_LABEL [WORKDIR]
#
# Prints every difference between the public headers of an older release (an
# include root holding infiniband/, e.g. /usr/include for Debian 12's rdma-core
# 44) and rdma-core 64's installed headers (the anchor, built by build.sh),
# name by name: sizes, offsets, enum and macro values, prototypes. It is the
# generator of tests/abi (layout/compare_layouts.py, the one that proves the
# 44 target's layouts), pointed at two releases instead of ours and Debian's;
# tests/anchor64/layouts-56-to-64.txt is its output for rdma-core 56.1.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { echo "usage: $0 OLD_ROOT OLD_LABEL [WORKDIR]" >&2; exit 2; }
old=$1; label=$2; work=${3:-$(mktemp -d)}
anchor=$(sh "$here/build.sh" --quiet) || exit $?
status=0
for set in verbs.h,verbs_api.h,opcode.h,arch.h,sa.h,sa-kern-abi.h,tm_types.h,ib_user_ioctl_verbs.h \
           umad.h,umad_types.h,umad_cm.h,umad_sa.h,umad_sa_mcm.h,umad_sm.h,umad_str.h; do
  mkdir -p "$work/${set%%.*}"
  python3 "$here/../abi/layout/compare_layouts.py" --ours "$old" --ours-label "$label" \
    --reference "$anchor/usr/include" --reference-label 64 --headers "$set" \
    --workdir "$work/${set%%.*}" | sed "s|$anchor/usr/include|<anchor>/usr/include|; s|$old|<$label>|" || status=1
done
exit 0
