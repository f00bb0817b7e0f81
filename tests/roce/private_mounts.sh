# Sourced by the RoCE test scripts that make network namespaces:
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
