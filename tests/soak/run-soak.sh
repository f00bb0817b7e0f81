#!/bin/sh
# run-soak.sh SOAK [SECONDS]: runs the soak program in a private /dev/shm
# (a tmpfs in a private mount namespace, so its leak check sees only its own
# segments and other runs never meet it). SECONDS defaults to
# $OPENVERBS_SOAK_SECONDS, else 120.
soak=$1 secs=${2:-${OPENVERBS_SOAK_SECONDS:-120}}
if [ "$(id -u)" = 0 ]; then
  exec unshare --mount --propagation private sh -c 'mount -t tmpfs tmpfs /dev/shm && exec "$0" "$1"' "$soak" "$secs"
fi
# Unprivileged: a user namespace gives the same private tmpfs.
exec unshare --user --map-root-user --mount --propagation private \
  sh -c 'mount -t tmpfs tmpfs /dev/shm && exec "$0" "$1"' "$soak" "$secs"
