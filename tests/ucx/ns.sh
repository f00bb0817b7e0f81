#!/bin/sh
# Runs a command on the software devices after the project's one-time set-up
# (tools/openverbs-soft-setup), inside a private mount namespace so that the
# host's /dev, /sys and /dev/shm never change:
#
#   ns.sh [--openib] LIBDIR SETUP COMMAND [ARGS...]
#
# - /dev becomes an overlay of itself (upper layer on a tmpfs): SETUP creates
#   /dev/infiniband/soft0 and soft1 there, as it would on the host; /dev/pts is
#   mounted back and /dev/shm is a fresh tmpfs (the devices' segments are private
#   to the run).
# - --openib: Open MPI's openib BTL needs /sys/class/infiniband, a directory the
#   kernel creates when ib_core is loaded (SETUP --openib runs modprobe ib_core).
#   A test must not load modules into the host's kernel (and the CI kernel has
#   none), so when the directory is absent /sys/class is replaced, in the
#   namespace only, by a tmpfs holding bind mounts of every class and an empty
#   infiniband/: what loading ib_core adds. SETUP --openib then finds it and
#   --check confirms both parts.
# - COMMAND runs with RDMAV_SOFT_DEVICES=2 and LIBDIR first on LD_LIBRARY_PATH.
#
# Needs root (mount namespaces with overlayfs); anyone else gets exit code 77,
# which the tests declare as SKIP_RETURN_CODE, and the reason.
set -eu
openib=0
if [ "${1:-}" = --openib ]; then openib=1; shift; fi
LIB=$1 SETUP=$2
shift 2

if [ "$(id -u)" != 0 ]; then
	echo "SKIP: needs root: the set-up step (openverbs-soft-setup) writes /dev/infiniband," \
		"done here in a private mount namespace with an overlay of /dev"
	exit 77
fi

if [ -z "${OV_UCX_NS:-}" ]; then
	# The namespace's scratch mounts go on an empty folder removed afterwards.
	OV_UCX_NS=$(mktemp -d /tmp/ov-ucx-ns.XXXXXX)
	export OV_UCX_NS
	if [ $openib = 1 ]; then set -- --openib "$LIB" "$SETUP" "$@"; else set -- "$LIB" "$SETUP" "$@"; fi
	rc=0
	unshare --mount --propagation private sh "$0" "$@" || rc=$?
	rmdir "$OV_UCX_NS"
	exit $rc
fi

work=$OV_UCX_NS
mount -t tmpfs -o mode=0700 tmpfs "$work"
mkdir "$work/up" "$work/work" "$work/dev"
# Keep the submounts of /dev reachable before the overlay hides them.
mount --rbind /dev "$work/dev"
if ! mount -t overlay overlay -o "lowerdir=/dev,upperdir=$work/up,workdir=$work/work" /dev; then
	echo "SKIP: overlayfs over /dev is not available here"
	exit 77
fi
[ -d "$work/dev/pts" ] && mount --rbind "$work/dev/pts" /dev/pts
mount -t tmpfs tmpfs /dev/shm

if [ $openib = 1 ] && [ ! -d /sys/class/infiniband ]; then
	mkdir "$work/class"
	mount --bind /sys/class "$work/class"
	mount -t tmpfs -o mode=0755 tmpfs /sys/class
	for c in "$work/class"/*; do
		n=${c##*/}
		mkdir "/sys/class/$n"
		mount --bind "$c" "/sys/class/$n"
	done
	mkdir /sys/class/infiniband
fi

if [ $openib = 1 ]; then
	sh "$SETUP" -n 2 --openib
else
	sh "$SETUP" -n 2
fi

export RDMAV_SOFT_DEVICES=2
export LD_LIBRARY_PATH="$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# UCX's defaults, memory hooks included: nothing of the caller's UCX settings.
for v in $(env | sed -n 's/^\(UCX_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
"$@"
