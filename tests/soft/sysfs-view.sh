#!/bin/sh
# sysfs-view.sh [--net IFNAME]
#
# Gives the software devices the sysfs entries rdma-core's Python test suite
# reads for every device it tests, in the CALLER'S OWN MOUNT NAMESPACE (run
# it as root inside `unshare --mount --propagation private`, without root
# inside `unshare --user --map-current-user --keep-caps --mount`, or in a
# root entered with tests/roots/enter.sh): nothing outside that namespace
# changes.
# The software devices exist only in user space, so the kernel has no
# /sys/class/infiniband/softN; the suite reads
#   /sys/class/infiniband/DEV/ports/PORT/pkeys/INDEX  (utils.get_pkey_from_kernel:
#       test_get_pkey_index compares it with ibv_get_pkey_index(3))
#   /sys/class/infiniband/DEV/device/net/IFNAME       (base.py: the network
#       interface whose address the rdma_cm tests use; only with --net)
# The library under test (LD_LIBRARY_PATH, RDMAV_SOFT_DEVICES as for the
# suite) lists the devices and answers the P_Key tables through Debian's
# pyverbs, so the files hold what ibv_query_pkey(3) says, in the kernel's
# format ("0xffff"). Everything else under /sys/class stays as it was: a
# tmpfs is put over /sys/class/infiniband when the kernel has that folder
# (ib_core loaded), else over /sys/class, and the entries it hides are bound
# (folders) or copied (the class's relative symbolic links) back in.
# Exit status 0 = the entries exist.
set -eu
net=""
if [ "${1:-}" = --net ]; then net=$2; shift 2; fi
# Mounting needs CAP_SYS_ADMIN over this mount namespace: root's, or the
# capabilities a user holds in a user namespace of their own.
[ "$(id -u)" = 0 ] || grep -q '^CapEff:.*[1-9a-f]' /proc/self/status ||
  { echo "sysfs-view: needs the right to mount (root, or a user namespace of one's own)" >&2; exit 1; }

tables=$(/usr/bin/python3 - <<'EOF'
import pyverbs.device as d
for dev in d.get_device_list():
    name = dev.name.decode()
    if not name.startswith('soft'):
        continue
    with d.Context(name=name) as ctx:
        for port in range(1, ctx.query_device().phys_port_cnt + 1):
            for i in range(ctx.query_port(port).pkey_tbl_len):
                print(name, port, i, '0x%04x' % ctx.query_pkey(port, i))
EOF
)
[ -n "$tables" ] || { echo "sysfs-view: the library lists no software device" >&2; exit 1; }

if [ -d /sys/class/infiniband ]; then base=/sys/class/infiniband; else base=/sys/class; fi
orig=$(mktemp -d /tmp/ov-sysfs.XXXXXX)
mount --bind "$base" "$orig"
mount -t tmpfs -o mode=0755 ovsysfs "$base"
for e in "$orig"/* "$orig"/.[!.]*; do
  [ -e "$e" ] || [ -L "$e" ] || continue
  n=${e##*/}
  if [ -L "$e" ]; then
    cp -P "$e" "$base/$n"
  elif [ -d "$e" ]; then
    mkdir "$base/$n" && mount --rbind "$e" "$base/$n"
  fi
done
ib=$base
[ "$base" = /sys/class ] && { mkdir -p /sys/class/infiniband; ib=/sys/class/infiniband; }
printf '%s\n' "$tables" | while read -r dev port index pkey; do
  mkdir -p "$ib/$dev/ports/$port/pkeys"
  echo "$pkey" > "$ib/$dev/ports/$port/pkeys/$index"
  if [ -n "$net" ]; then mkdir -p "$ib/$dev/device/net/$net"; fi
done
