# Sourced by the RoCE test scripts that make network namespaces.
#
# ovroce_private_mounts SCRIPT ARGS... skips the test (exit 77) unless root,
# runs SCRIPT ARGS again in a private mount namespace (OVROCE_INNER set
# there), and in that one mounts a /dev/shm and a /run of the run's own (the
# device segments, and the namespaces' names under /run/netns, are seen by
# this run only).
ovroce_private_mounts() {
  if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root to make namespaces"; exit 77; fi
  if [ -z "${OVROCE_INNER:-}" ]; then
    exec unshare --mount --propagation private env OVROCE_INNER=1 sh "$@"
  fi
  mount -t tmpfs tmpfs /dev/shm || exit 1
  mount -t tmpfs tmpfs /run 2>/dev/null || true
}

# ovroce_veth NS PEER_NS END PEER_END: two network namespaces joined by a
# veth pair (END in NS, PEER_END in PEER_NS), both ends and NS's loopback up;
# skips the test (exit 77) without namespaces. The caller gives addresses
# and removes the namespaces.
ovroce_veth() {
  ip netns add "$1" && ip netns add "$2" || { echo "SKIP: no network namespaces"; exit 77; }
  ip link add "$3" type veth peer name "$4" || { echo "FAIL: no veth"; exit 1; }
  ip link set "$3" netns "$1" && ip link set "$4" netns "$2" || exit 1
  ip -n "$1" link set lo up && ip -n "$1" link set "$3" up && ip -n "$2" link set "$4" up || exit 1
}
