#!/bin/sh
# differential.sh PROBE OUR_LIB_DIR FIXTURES WORKDIR
#
# Reads every sysfs fixture (make_fixtures.py) with Debian's libibumad and
# with ours and requires identical reports from PROBE (umad_probe), field by
# field.  Each run happens in a private mount namespace in which a tmpfs copy
# of the fixture is mounted over /sys/class, so both libraries read the real
# path /sys/class/infiniband.  Ours is also run once per fixture through
# OPENVERBS_UMAD_SYSFS_ROOT (no namespace) to check the override.  The str and
# mad probes need no fixture.  Needs root (unshare -m, mount): fails otherwise.
set -u
probe=$1; ours=$2; fx=$3; work=$4
if [ "$(id -u)" != 0 ]; then
  echo "FAIL: the differential test needs root (mount namespace over /sys/class)"
  exit 1
fi
if ! unshare -m true 2>/dev/null; then
  echo "FAIL: unshare -m does not work here (no mount namespaces)"
  exit 1
fi
[ -f /usr/lib/x86_64-linux-gnu/libibumad.so.3 ] || { echo "FAIL: Debian's libibumad3 missing"; exit 1; }
rm -rf "$work"; mkdir -p "$work"
mask() { sed -e 's/ibwarn: \[[0-9]*\]/ibwarn: [PID]/' "$@"; }
in_ns() { # FIXTURE cmd...: /sys/class replaced by a tmpfs copy of FIXTURE/class
  f=$1; shift
  unshare -m sh -c 'mount -t tmpfs none /sys/class && cp -a "$0"/class/. /sys/class/ && exec "$@"' "$f" "$@"
}
fail=0
compare() { # NAME
  if cmp -s "$work/$1.debian" "$work/$1.ours"; then
    echo "PASS $1 ($(wc -l < "$work/$1.ours") lines)"
  else
    echo "FAIL $1"; diff "$work/$1.debian" "$work/$1.ours" | head -20; fail=1
  fi
}
for s in $(cat "$fx/SCENARIOS"); do
  in_ns "$fx/$s" env -u LD_LIBRARY_PATH "$probe" sysfs 2>&1 | mask > "$work/$s.debian"
  in_ns "$fx/$s" env LD_LIBRARY_PATH="$ours" "$probe" sysfs 2>&1 | mask > "$work/$s.ours"
  compare "$s"
  # The override reads the same tmpfs copy through another path (a bind
  # mount, so readdir order is the same): same report once the root is
  # written back as /sys.
  mkdir -p "$work/root-$s/class"
  in_ns "$fx/$s" sh -c 'mount --bind /sys/class "$0/class" && exec "$@"' "$work/root-$s" \
    env OPENVERBS_UMAD_SYSFS_ROOT="$work/root-$s" LD_LIBRARY_PATH="$ours" "$probe" sysfs 2>&1 \
    | mask | sed -e "s#$work/root-$s/#/sys/#g" > "$work/$s-override.ours"
  cp "$work/$s.debian" "$work/$s-override.debian"
  compare "$s-override"
done
for m in str mad; do
  env -u LD_LIBRARY_PATH "$probe" $m 2>&1 | mask > "$work/$m.debian"
  env LD_LIBRARY_PATH="$ours" "$probe" $m 2>&1 | mask > "$work/$m.ours"
  compare "$m"
done
# The probe must really have used each library.
env LD_LIBRARY_PATH="$ours" LD_DEBUG=libs "$probe" str 2>&1 >/dev/null | grep -q "$ours/libibumad.so.3" \
  || { echo "FAIL: probe did not load $ours/libibumad.so.3"; fail=1; }
exit $fail
