#!/bin/sh
# shellcheck disable=SC2154 # ov_* come from the kernel command line
# Stage 1 of the test-bed guest (PID 1 inside the busybox initramfs).
# Loads, from RAM, the modules for virtio-9p and for RDMA (rxe, siw), mounts the
# host's root read-only over 9p with the guest's own filesystems and the
# writable results share on top of it, and hands over to stage 2
# (tests/vm/guest-init.sh on the shared root). Everything here runs from the
# initramfs because every exec over 9p is slow under TCG.
# Kernel command line: ov_stage2=PATH ov_results=PATH ov_kroot=DIR ov_kver=KVER
# [ov_root=1 ov_binds=DIR,DIR...]: the 9p root is a Debian root (run.sh --root),
# and the host's / comes as a second share (hostfs) from which the listed
# host folders (repository, build tree, kernel modules) are bound in place.
# It also creates rxe0 and siw0 (settings from the host's guest.env).

PATH=/bin
fail() {
  echo "OV-STAGE1-FAILED: $*"
  poweroff -f
  while :; do :; done
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

while read -r m; do
  [ -n "$m" ] || continue
  insmod "/lib/modules/$m" || echo "ov-stage1: insmod $m failed"
done </modules.order

r=/newroot
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=loose,ro hostroot $r ||
  fail "cannot mount the host root over virtio-9p"
if [ "$ov_root" != 1 ]; then
  [ -n "$ov_stage2" ] && [ -x "$r$ov_stage2" ] || fail "stage 2 '$ov_stage2' is not executable on the host root"
  [ -n "$ov_results" ] && [ -d "$r$ov_results" ] || fail "results folder '$ov_results' missing on the host root"
fi

# The guest gets its own writable /tmp and /var/tmp; a checkout or build tree
# that lives under the host's /tmp or /var/tmp (a CI clone, a cache named by
# OPENVERBS_CACHE: the kernel's modules, loaded on demand, and the rdma-core
# 64 anchor) must stay visible through them. Keep a view of the host's two
# folders under a RAM mount and bind those trees back later.
keep_tmp=""
keep() {
  case "$1" in
  /tmp/?*) t=${1#/tmp/}; keep_tmp="$keep_tmp /tmp/${t%%/*}" ;;
  /var/tmp/?*) t=${1#/var/tmp/}; keep_tmp="$keep_tmp /var/tmp/${t%%/*}" ;;
  esac
}
[ "$ov_root" = 1 ] || { keep "$ov_stage2"; keep "$ov_results"; keep "$ov_kroot"; }
if [ "$ov_root" != 1 ] && [ -f "$r$ov_results/guest.env" ]; then
  while IFS= read -r line; do
    case "$line" in OV_REPO=* | OV_BUILD_DIR=* | OV_LIB_DIR=*) keep "${line#*=}" ;; esac
  done <"$r$ov_results/guest.env"
fi
if [ -n "$keep_tmp" ]; then
  mount -t tmpfs -o mode=0755 tmpfs $r/mnt && mkdir -p $r/mnt/host-tmp $r/mnt/host-var-tmp &&
    mount -o bind $r/tmp $r/mnt/host-tmp && mount -o bind $r/var/tmp $r/mnt/host-var-tmp ||
    fail "cannot keep a view of the host's /tmp and /var/tmp"
fi

mount -t proc proc $r/proc &&
mount -t sysfs sysfs $r/sys &&
mount -t devtmpfs devtmpfs $r/dev &&
mount -t tmpfs -o mode=1777 tmpfs $r/tmp &&
mount -t tmpfs -o mode=0755 tmpfs $r/run || fail "cannot mount the guest's filesystems"
mkdir -p $r/dev/pts $r/dev/shm
mount -t devpts devpts $r/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $r/dev/shm
# bash process substitution (<(...)) and /dev/stdin-style paths need these.
ln -sf /proc/self/fd $r/dev/fd
ln -sf /proc/self/fd/0 $r/dev/stdin
ln -sf /proc/self/fd/1 $r/dev/stdout
ln -sf /proc/self/fd/2 $r/dev/stderr
mount -t tmpfs -o mode=1777 tmpfs $r/var/tmp 2>/dev/null
for d in $keep_tmp; do
  [ -d "$r$d" ] && continue
  case "$d" in
  /tmp/*) from=$r/mnt/host-tmp/${d#/tmp/} ;;
  *) from=$r/mnt/host-var-tmp/${d#/var/tmp/} ;;
  esac
  mkdir -p "$r$d" && mount -o bind "$from" "$r$d" ||
    fail "cannot bind the host's $d into the guest"
done
if [ "$ov_root" = 1 ]; then
  mkdir -p $r/run/ovhost &&
    mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=loose,ro hostfs $r/run/ovhost ||
    fail "cannot mount the host's / (hostfs) over virtio-9p"
  for d in $(echo "$ov_binds" | tr ',' ' '); do
    mkdir -p "$r$d" 2>/dev/null
    mount -o bind "$r/run/ovhost$d" "$r$d" || fail "cannot bind the host's $d into the root"
  done
  mkdir -p "$r$ov_results" 2>/dev/null
  [ -x "$r$ov_stage2" ] || fail "stage 2 '$ov_stage2' is not executable in the guest"
fi
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 results "$r$ov_results" ||
  fail "cannot mount the results share at $ov_results"

# The kernel's own module requests (crypto algorithms, "rdma link add ... type")
# go through the host's modprobe aimed at the extracted kernel.
cat >$r/run/ov-modprobe <<EOF
#!/bin/sh
exec /sbin/modprobe -d "$ov_kroot" -S "$ov_kver" "\$@"
EOF
chmod 0755 $r/run/ov-modprobe
echo /run/ov-modprobe >/proc/sys/kernel/modprobe

# rxe0 and siw0 on dummy netdevs, with iproute2 from the initramfs. Stage 2
# checks the result and retries with the host's tools if this failed.
res=$r$ov_results
up() { read -r u _ </proc/uptime; echo "$u"; }
if [ -f "$res/guest.env" ]; then
  . "$res/guest.env"
  {
    /usr/sbin/ip -batch - <<EOF
link set lo up
link add dum0 type dummy
addr add $RXE_IP/24 dev dum0
link set dum0 up
link add dum1 type dummy
addr add $SIW_IP/24 dev dum1
link set dum1 up
EOF
    /usr/bin/rdma link add "$RXE_DEV" type rxe netdev dum0 && echo "RXE0 $(up)" >>"$res/events.txt"
    /usr/bin/rdma link add "$SIW_DEV" type siw netdev dum1 && echo "SIW0 $(up)" >>"$res/events.txt"
  } >"$res/logs/stage1.log" 2>&1
fi

# --debug-hang boot: never reach stage 2 (tests the host's boot timeout).
if [ "$ov_hang" = boot ]; then while :; do :; done; fi

umount /proc /sys /dev 2>/dev/null
exec switch_root $r "$ov_stage2"
