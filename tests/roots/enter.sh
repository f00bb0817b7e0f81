#!/bin/sh
# enter.sh [OPTIONS] ROOT [COMMAND [ARG...]]
#
# Runs COMMAND (default: bash) as root inside the Debian root ROOT (made by
# make-root.sh) in private mount and PID namespaces: ROOT itself is never
# written. The root is seen through an overlay whose upper layer is
#   --write DIR   DIR/upper (kept: a later call with the same DIR sees what
#                 an earlier one installed; one call at a time per DIR), or
#   (default)     a tmpfs thrown away when COMMAND ends, or
#   --in-place    none: ROOT itself is written (make-root.sh uses this on a
#                 root it is still building; never on a cached root).
# Inside: a fresh /proc, the host's /sys and /dev (bind), a private tmpfs on
# /dev/shm, /tmp and /run, the host's /etc/resolv.conf (for apt), and
#   --bind SRC[:DST]   SRC bound read-only at DST (default: the same path)
#   --bind-rw SRC[:DST] the same, writable
#   --env NAME=VALUE   added to the otherwise clean environment
#   --cwd DIR          working directory inside (default /)
#   --net              a private network namespace with only lo (up): TCP
#                      ports and abstract sockets never meet other runs' (no
#                      network beyond the root: not for apt)
# The environment is cleared (no LD_LIBRARY_PATH, no LD_PRELOAD): PATH, HOME,
# LANG=C.UTF-8, DEBIAN_FRONTEND=noninteractive and the --env values only.
# Every process started inside ends with COMMAND (PID namespace).
# Exit status: COMMAND's.
set -eu
write=""; inplace=0; net=""; binds=""; envs=""; cwd=/
nl='
'
while [ $# -gt 0 ]; do
  case $1 in
    --write) write=$2; shift 2;;
    --in-place) inplace=1; shift;;
    --net) net=--net; shift;;
    --bind) binds="$binds${nl}ro $2"; shift 2;;
    --bind-rw) binds="$binds${nl}rw $2"; shift 2;;
    --env) envs="$envs${nl}$2"; shift 2;;
    --cwd) cwd=$2; shift 2;;
    --inner) shift; break;;
    --) shift; break;;
    -*) echo "enter: unknown option $1" >&2; exit 2;;
    *) break;;
  esac
done

if [ "${OV_ENTER_INNER:-}" != 1 ]; then
  [ $# -ge 1 ] || { echo "usage: $0 [--write DIR] [--bind SRC[:DST]] [--env N=V] ROOT [CMD...]" >&2; exit 2; }
  [ -f "$1/.openverbs-root" ] || [ "$inplace" = 1 ] || { echo "enter: $1 is not a root made by make-root.sh" >&2; exit 2; }
  [ "$(id -u)" = 0 ] || { echo "enter: needs root" >&2; exit 1; }
  if [ -n "$write" ]; then mkdir -p "$write"; write=$(cd "$write" && pwd); fi
  export OV_ENTER_NET="$net" OV_ENTER_INNER=1 OV_ENTER_WRITE="$write" OV_ENTER_INPLACE="$inplace" OV_ENTER_BINDS="$binds" \
    OV_ENTER_ENVS="$envs" OV_ENTER_CWD="$cwd"
  exec unshare --mount --pid --fork $net --propagation private -- sh "$0" --inner "$@"
fi

# Inside the new namespaces (PID 1 of its own PID namespace).
root=$1; shift
[ -z "$OV_ENTER_NET" ] || ip link set lo up
[ $# -ge 1 ] || set -- /bin/bash
stage=$(mktemp -d /tmp/ov-enter.XXXXXX)
mount -t tmpfs -o mode=0755 ovstage "$stage"
if [ -n "$OV_ENTER_WRITE" ]; then
  upper=$OV_ENTER_WRITE/upper; work=$OV_ENTER_WRITE/work
  mkdir -p "$upper" "$work"
else
  upper=$stage/upper; work=$stage/work
  mkdir -p "$upper" "$work"
fi
mnt=$stage/root
mkdir -p "$mnt"
if [ "$OV_ENTER_INPLACE" = 1 ]; then
  mount --bind "$root" "$mnt"
else
  mount -t overlay overlay -o "lowerdir=$root,upperdir=$upper,workdir=$work" "$mnt"
fi
mount -t proc proc "$mnt/proc"
mount --rbind /sys "$mnt/sys"
mount --rbind /dev "$mnt/dev"
mount -t tmpfs -o mode=1777 shm "$mnt/dev/shm"
mount -t tmpfs -o mode=1777 tmp "$mnt/tmp"
mount -t tmpfs -o mode=0755 run "$mnt/run"
mkdir -p "$mnt/run/lock"
if [ -r /etc/resolv.conf ]; then
  rm -f "$mnt/etc/resolv.conf"
  cat /etc/resolv.conf > "$mnt/etc/resolv.conf"
fi
printf '%s\n' "$OV_ENTER_BINDS" | while read -r mode spec; do
  [ -n "$spec" ] || continue
  src=${spec%%:*}; dst=${spec#*:}
  [ "$dst" != "$spec" ] || dst=$src
  if [ -d "$src" ]; then mkdir -p "$mnt$dst"; else mkdir -p "$(dirname "$mnt$dst")"; : > "$mnt$dst"; fi
  mount --rbind "$src" "$mnt$dst"
  [ "$mode" = rw ] || mount -o remount,bind,ro "$mnt$dst"
done
# The clean environment: fixed values, then the --env values, then COMMAND.
k=$#
IFS=$nl
for e in $OV_ENTER_ENVS; do [ -n "$e" ] && set -- "$@" "$e"; done
unset IFS
i=0
while [ $i -lt $k ]; do a=$1; shift; set -- "$@" "$a"; i=$((i + 1)); done
set -- env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive TERM="${TERM:-dumb}" "$@"
rc=0
chroot "$mnt" sh -c 'cd "$1" && shift && exec "$@"' sh "$OV_ENTER_CWD" "$@" || rc=$?
cd /
umount -l "$stage" 2>/dev/null || true
rmdir "$stage" 2>/dev/null || true
exit $rc
