#!/bin/bash
# Host side of the real-kernel test bed: fetches one of Debian's kernel image
# packages, extracts it into the cache (never installs it), builds siw.ko out of
# tree against the matching headers and source, and packs the busybox initramfs
# that mounts the host's root over virtio-9p.
#
# Usage: prepare-kernel.sh CACHE_DIR PACKAGE_OR_GLOB
# Prints, as the last line of stdout, the directory of the prepared kernel:
#   KDIR/vmlinuz  KDIR/initrd.img  KDIR/root/lib/modules/KVER/...  KDIR/kver
# Everything it downloads or builds stays under CACHE_DIR; a finished kernel is
# marked by KDIR/.ready and reused as is on the next run.
set -euo pipefail

cache=${1:?cache directory}
want=${2:-}
here=$(cd "$(dirname "$0")" && pwd)

t_begin=${EPOCHREALTIME//[!0-9]/}
# Messages carry the seconds since the start, to show where the time goes.
log() {
  local d=$(( ${EPOCHREALTIME//[!0-9]/} - t_begin ))
  printf 'vm-prepare: [%d.%d s] %s\n' $((d / 1000000)) $((d % 1000000 / 100000)) "$*" >&2
}
die() { echo "vm-prepare: error: $*" >&2; exit 1; }

mkdir -p "$cache/debs" "$cache/kernels"
cache=$(cd "$cache" && pwd)

# ---------------------------------------------------------------- package name
apt_has() { apt-cache show --no-all-versions "$1" >/dev/null 2>&1; }
apt_updated=0
apt_refresh() {
  [ "$apt_updated" = 1 ] && return 0
  [ "$(id -u)" = 0 ] || die "package lists lack what is needed and only root can run apt-get update"
  log "apt-get update"
  apt-get update -qq >&2 || die "apt-get update failed"
  apt_updated=1
}

# Resolves the default (what linux-image-amd64 depends on), an exact package name,
# or a shell glob such as 'linux-image-6.12.*+deb12-amd64' (newest match wins).
resolve_pkg() {
  local w=$1 p
  if [ -z "$w" ] || [ "$w" = linux-image-amd64 ]; then
    p=$(apt-cache depends linux-image-amd64 2>/dev/null |
        sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n1)
    echo "$p"; return
  fi
  case $w in
    *'*'*|*'?'*|*'['*)
      local n best=""
      while read -r n; do
        # shellcheck disable=SC2053
        [[ $n == $w ]] && best="$best$n"$'\n'
      done < <(apt-cache pkgnames linux-image- 2>/dev/null)
      printf '%s' "$best" | sort -V | tail -n1 ;;
    *) apt_has "$w" && echo "$w" ;;
  esac
}

# apt-cache takes seconds on a busy machine: remember the answer for as long
# as the package lists stay the same.
lists_stamp=$(stat -c %Y /var/lib/apt/lists 2>/dev/null || echo none)
memo=$cache/resolved/$(echo "${want:-default}" | md5sum | cut -c1-16)
pkg="" ver=""
if [ -f "$memo" ]; then
  read -r m_stamp m_pkg m_ver <"$memo" || true
  [ "$m_stamp" = "$lists_stamp" ] && pkg=$m_pkg ver=$m_ver
fi
if [ -z "$pkg" ] || [ -z "$ver" ]; then
  pkg=$(resolve_pkg "$want")
  if [ -z "$pkg" ]; then
    apt_refresh
    pkg=$(resolve_pkg "$want")
  fi
  [ -n "$pkg" ] || die "no Debian kernel image package matches '${want:-linux-image-amd64}'"
  case $pkg in linux-image-*) ;; *) die "'$pkg' is not a linux-image-* package" ;; esac
  ver=$(apt-cache show --no-all-versions "$pkg" | sed -n 's/^Version: //p' | head -n1)
  [ -n "$ver" ] || die "apt-cache knows no version of $pkg"
  mkdir -p "$cache/resolved"
  lists_stamp=$(stat -c %Y /var/lib/apt/lists 2>/dev/null || echo none)
  echo "$lists_stamp $pkg $ver" >"$memo"
fi
kver=${pkg#linux-image-}
kver=${kver%-unsigned}
kdir=$cache/kernels/$kver
# ---------------------------------------------------------------- initramfs
# Rebuilt (about a second) whenever stage 1 or the module list changes.
initrd_mods="virtio_pci 9pnet_virtio 9p crc32_generic ib_core ib_uverbs ib_umad rdma_ucm rdma_rxe siw dummy"
initrd_tools="/usr/sbin/ip /usr/bin/rdma"
# shellcheck disable=SC2086
initrd_key=v3-$(cat "$here/initramfs-init.sh" /bin/busybox $initrd_tools | md5sum | cut -d' ' -f1)-$(echo "$initrd_mods" | md5sum | cut -c1-8)
build_initramfs() {
  [ -f "$kdir/initrd.img" ] && [ "$(cat "$kdir/initrd.key" 2>/dev/null)" = "$initrd_key" ] && return 0
  log "packing the initramfs"
  local ird=$kdir/initramfs kind path b deps
  if LC_ALL=C readelf -l /bin/busybox 2>/dev/null | grep -q 'program interpreter'; then
    die "/bin/busybox is dynamically linked: the initramfs needs busybox-static"
  fi
  rm -rf "$ird"
  mkdir -p "$ird/bin" "$ird/lib/modules" "$ird/dev" "$ird/proc" "$ird/sys" "$ird/newroot"
  cp /bin/busybox "$ird/bin/busybox"
  for b in sh mount umount insmod switch_root mkdir cat echo sleep poweroff chmod; do
    ln -s busybox "$ird/bin/$b"
  done
  : >"$ird/modules.order"
  # Everything the guest needs is loaded from RAM by stage 1: exec'ing modprobe
  # over 9p under TCG costs a fraction of a second per call.
  # shellcheck disable=SC2086
  deps=$(modprobe -d "$kdir/root" -S "$kver" --show-depends -a $initrd_mods) ||
    die "modprobe cannot resolve $initrd_mods for $kver"
  while read -r kind path _; do
    [ "$kind" = insmod ] || continue
    b=$(basename "$path")
    case $b in
      *.ko.xz)  xz -dc "$path" >"$ird/lib/modules/${b%.xz}"; b=${b%.xz} ;;
      *.ko.zst) zstd -qdc "$path" >"$ird/lib/modules/${b%.zst}"; b=${b%.zst} ;;
      *.ko.gz)  gzip -dc "$path" >"$ird/lib/modules/${b%.gz}"; b=${b%.gz} ;;
      *)        cp "$path" "$ird/lib/modules/$b" ;;
    esac
      grep -qx "$b" "$ird/modules.order" || echo "$b" >>"$ird/modules.order"
  done <<<"$deps"
  # Our siw.ko carries debug information (5 MB): not needed to load it.
  strip --strip-debug "$ird/lib/modules/siw.ko"
  # iproute2's ip and rdma (with their libraries) create rxe0 and siw0 from
  # stage 1, before anything has to be loaded over 9p.
  for b in $initrd_tools; do
    [ -x "$b" ] || die "$b is missing (iproute2)"
    cp -L --parents "$b" "$ird"
    for path in $(ldd "$b" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) .*/\1/p'); do
      [ -e "$ird$path" ] || cp -L --parents "$path" "$ird"
    done
  done
  install -m 0755 "$here/initramfs-init.sh" "$ird/init"
  # Uncompressed: unpacking gzip costs the TCG guest about a second at boot.
  # Written aside and renamed: a run booting from this cache meanwhile keeps
  # reading a complete file.
  (cd "$ird" && find . | cpio -o -H newc --quiet) >"$kdir/initrd.img.tmp"
  mv -f "$kdir/initrd.img.tmp" "$kdir/initrd.img"
  echo "$initrd_key" >"$kdir/initrd.key"
}

# ---------------------------------------------------------------- direct boot
# Under TCG the bzImage spends ~4 s decompressing itself. Debian's kernels carry
# a PVH entry note, so qemu can start the uncompressed ELF directly: unpack the
# payload once (its place and size are in the bzImage setup header, see the
# kernel's Documentation/arch/x86/boot.rst) and keep it as KDIR/vmlinux.
le32() { od -An -t u4 -j "$2" -N 4 "$1" | tr -d ' '; }
extract_vmlinux() {
  [ -f "$kdir/vmlinux" ] || [ -f "$kdir/vmlinux.none" ] && return 0
  local z=$kdir/vmlinuz sects off len start magic out=$kdir/vmlinux.tmp
  sects=$(od -An -t u1 -j $((0x1f1)) -N 1 "$z" | tr -d ' ')
  [ "$sects" = 0 ] && sects=4
  off=$(le32 "$z" $((0x248))); len=$(le32 "$z" $((0x24c)))
  start=$(( (sects + 1) * 512 + off ))
  # (head closes the pipe early: no pipefail in here)
  magic=$(set +o pipefail; tail -c +$((start + 1)) "$z" | head -c 6 | od -An -t x1 | tr -d ' \n')
  ( set +o pipefail
  case $magic in
    fd377a585a00) tail -c +$((start + 1)) "$z" | head -c "$len" | xz -dc --single-stream >"$out" 2>/dev/null ;;
    28b52ffd*)    tail -c +$((start + 1)) "$z" | head -c $((len - 4)) | zstd -qdc >"$out" 2>/dev/null ;;
    1f8b*)        tail -c +$((start + 1)) "$z" | head -c "$len" | gzip -dc >"$out" 2>/dev/null ;;
    *)            : >"$out" ;;
  esac ) || true
  if [ -s "$out" ] && LC_ALL=C readelf -n "$out" 2>/dev/null | grep -q 'Xen.*(0x00000012)'; then
    mv "$out" "$kdir/vmlinux"
    log "unpacked the kernel for direct (PVH) boot"
  else
    rm -f "$out"; : >"$kdir/vmlinux.none"
    log "kernel has no PVH entry or an unknown compression ($magic): booting the bzImage"
  fi
}

if [ -f "$kdir/.ready" ] && [ "$(cat "$kdir/.ready")" = "$pkg $ver" ]; then
  log "using cached kernel $kver ($pkg $ver)"
  if [ "$(cat "$kdir/initrd.key" 2>/dev/null)" != "$initrd_key" ]; then
    exec 9>"$cache/.lock"; flock 9; build_initramfs
  fi
  if [ ! -f "$kdir/vmlinux" ] && [ ! -f "$kdir/vmlinux.none" ]; then
    exec 9>"$cache/.lock"; flock 9; extract_vmlinux
  fi
  echo "$kdir"; exit 0
fi

# One preparation at a time per cache (ctest may start two runs).
exec 9>"$cache/.lock"
flock 9
if [ -f "$kdir/.ready" ] && [ "$(cat "$kdir/.ready")" = "$pkg $ver" ]; then
  build_initramfs; extract_vmlinux; echo "$kdir"; exit 0
fi

log "preparing $pkg $ver (kernel $kver) in $kdir"
rm -rf "$kdir"
mkdir -p "$kdir"

# Downloads PKG=VERSION into the cache unless it is there already; prints the path.
fetch() {
  local p=$1 v=$2 f
  f=$(ls "$cache/debs/${p}_${v//:/%3a}_"*.deb 2>/dev/null | head -n1 || true)
  if [ -z "$f" ]; then
    (cd "$cache/debs" && apt-get -q -o APT::Sandbox::User=root download "$p=$v" >&2) ||
      { apt_refresh; (cd "$cache/debs" && apt-get -q -o APT::Sandbox::User=root download "$p=$v" >&2); } ||
      die "cannot download $p=$v"
    f=$(ls "$cache/debs/${p}_${v//:/%3a}_"*.deb 2>/dev/null | head -n1 || true)
  fi
  [ -n "$f" ] || die "download of $p=$v left no .deb"
  echo "$f"
}

# ---------------------------------------------------------------- image
img=$(fetch "$pkg" "$ver")
log "extracting $(basename "$img")"
dpkg -x "$img" "$kdir/root"
[ -f "$kdir/root/boot/vmlinuz-$kver" ] || die "$pkg has no /boot/vmlinuz-$kver"
ln -s "root/boot/vmlinuz-$kver" "$kdir/vmlinuz"
echo "$kver" >"$kdir/kver"

# ---------------------------------------------------------------- siw.ko
# Debian's kernels lack CONFIG_RDMA_SIW: build it from the matching source.
series=${kver%%-*}              # 6.1.0 or 6.12.117+deb12
series=$(echo "$series" | sed -E 's/^([0-9]+\.[0-9]+).*/\1/')
hdr_pkg=linux-headers-$kver
common_pkg=$(apt-cache show "$hdr_pkg=$ver" 2>/dev/null |
             grep -o 'linux-headers-[^ ,]*-common' | head -n1 || true)
kbuild_pkg=$(apt-cache show "$hdr_pkg=$ver" 2>/dev/null |
             grep -o 'linux-kbuild-[^ ,]*' | head -n1 || true)
[ -n "$common_pkg" ] && [ -n "$kbuild_pkg" ] ||
  die "cannot find the headers packages of $hdr_pkg=$ver"
src_pkg=linux-source-$series
# The headers depend on linux-kbuild-X.Y ">=" the image's version, and that
# package has uploads of its own (bookworm-security carried linux-kbuild-6.1
# 6.1.192-3 only, beside image and headers 6.1.192-2): the image's version
# when the archive has it, else the newest one that satisfies the dependency.
kbuild_ver=$ver
if ! apt-cache madison "$kbuild_pkg" 2>/dev/null | awk -F'|' '{gsub(/ /, "", $2); print $2}' |
     grep -qxF -- "$ver"; then
  kbuild_ver=$(apt-cache show --no-all-versions "$kbuild_pkg" 2>/dev/null | sed -n 's/^Version: //p' | head -n1)
  [ -n "$kbuild_ver" ] && dpkg --compare-versions "$kbuild_ver" ge "$ver" ||
    die "no version of $kbuild_pkg satisfies $hdr_pkg=$ver (needs >= $ver)"
fi

w=$kdir/siw-build
mkdir -p "$w/hdr"
log "fetching and extracting $hdr_pkg, $common_pkg, $kbuild_pkg"
for p in "$hdr_pkg" "$common_pkg" "$kbuild_pkg"; do
  v=$ver
  [ "$p" = "$kbuild_pkg" ] && v=$kbuild_ver
  dpkg -x "$(fetch "$p" "$v")" "$w/hdr"
done
log "fetching $src_pkg"
src_deb=$(fetch "$src_pkg" "$ver")
log "extracting drivers/infiniband/sw/siw from $src_pkg $ver"
dpkg --fsys-tarfile "$src_deb" |
  tar -xO "./usr/src/linux-source-$series.tar.xz" |
  xz -dc -T2 |
  tar -x -C "$w" --wildcards "linux-source-$series/drivers/infiniband/sw/siw/*"
siwsrc=$w/linux-source-$series/drivers/infiniband/sw/siw
[ -f "$siwsrc/siw_main.c" ] || die "siw sources missing in $src_pkg"
hdrdir=$w/hdr/usr/src/linux-headers-$kver
# The arch headers include the common Makefile by absolute path: point it at our copy.
sed -i "s#^include /usr/src/#include $w/hdr/usr/src/#" "$hdrdir/Makefile"
log "building siw.ko"
make -s -C "$hdrdir" M="$siwsrc" CONFIG_RDMA_SIW=m CONFIG_DEBUG_INFO_BTF_MODULES= \
     -j"$(nproc)" modules >"$w/build.log" 2>&1 ||
  { tail -n 30 "$w/build.log" >&2; die "siw.ko build failed (log: $w/build.log)"; }
mkdir -p "$kdir/root/lib/modules/$kver/extra"
cp "$siwsrc/siw.ko" "$kdir/root/lib/modules/$kver/extra/siw.ko"
depmod -b "$kdir/root" "$kver"
log "siw.ko built, modules indexed"
# The headers stay in the cache (KDIR/siw-build): deleting their 20k files
# costs more time than the disk space is worth.

build_initramfs
extract_vmlinux
echo "$pkg $ver" >"$kdir/.ready"
log "kernel $kver ready"
echo "$kdir"
