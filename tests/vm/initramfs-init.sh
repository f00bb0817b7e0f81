#!/bin/sh
# Stage 1 of the test-bed guest (PID 1 inside the busybox initramfs).
# Loads, from RAM, the modules for virtio-9p and for RDMA (rxe, siw), mounts the
# host's root read-only over 9p with the guest's own filesystems and the
# writable results share on top of it, and hands over to stage 2
# (tests/vm/guest-init.sh on the shared root). Everything here runs from the
# initramfs because every exec over 9p is slow under TCG.
# Kernel command line: ov_stage2=PATH ov_results=PATH ov_kroot=DIR ov_kver=KVER

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
[ -n "$ov_stage2" ] && [ -x "$r$ov_stage2" ] || fail "stage 2 '$ov_stage2' is not executable on the host root"
[ -n "$ov_results" ] && [ -d "$r$ov_results" ] || fail "results folder '$ov_results' missing on the host root"

mount -t proc proc $r/proc &&
mount -t sysfs sysfs $r/sys &&
mount -t devtmpfs devtmpfs $r/dev &&
mount -t tmpfs -o mode=1777 tmpfs $r/tmp &&
mount -t tmpfs -o mode=0755 tmpfs $r/run || fail "cannot mount the guest's filesystems"
mkdir -p $r/dev/pts $r/dev/shm
mount -t devpts devpts $r/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $r/dev/shm
mount -t tmpfs -o mode=1777 tmpfs $r/var/tmp 2>/dev/null
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

umount /proc /sys /dev 2>/dev/null
exec switch_root $r "$ov_stage2"
