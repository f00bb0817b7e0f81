#!/bin/sh
# Runs a command in its own mount namespace with a fresh /dev/shm, so the
# soft devices' segments and CM sockets of this run meet nobody else's.
# Usage: private_shm.sh LIBDIR COMMAND [ARGS...]
# (LIBDIR goes first on LD_LIBRARY_PATH; RDMAV_SOFT_DEVICES defaults to 2.)
lib=$1; shift
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export RDMAV_SOFT_DEVICES="${RDMAV_SOFT_DEVICES:-2}"
if ! unshare --mount --propagation private true 2>/dev/null; then
  echo "FAIL: unshare --mount does not work here (needs root or user namespaces)"
  exit 1
fi
exec unshare --mount --propagation private sh -c 'mount -t tmpfs tmpfs /dev/shm && exec "$@"' sh "$@"
