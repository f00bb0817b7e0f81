#!/bin/sh
# make-root.sh [--quiet] SUITE [PACKAGE...]
#
# Prints the path of a cached Debian root (debootstrap, variant minbase) of
# SUITE (bookworm or trixie, or any suite debootstrap knows) with PACKAGE...
# installed, building it first when the cache has none. The cache lives in
# ${OPENVERBS_CACHE:-/var/cache/openverbs}/roots/SUITE-KEY, KEY being a hash of
# this script's ROOT_VERSION, the suite, the mirror and the sorted package
# list, so a changed list or script gets a new root. A root is built aside
# (SUITE-KEY.tmp.PID) and renamed into place when complete; a lock per key
# makes a second run with the same key wait and then reuse it. Roots of other
# keys are left alone (remove old ones with rm -rf when the cache grows).
#
# The mirror is $OPENVERBS_MIRROR, else the first URIs of this machine's
# /etc/apt/sources.list.d/debian.sources, else http://deb.debian.org/debian.
# A root with packages is a copy of the suite's base root (no packages, also
# cached) with the packages installed by apt-get inside it; maintainer
# scripts start no services there (/usr/sbin/policy-rc.d exits 101).
# This machine's own apt configuration is only read, never changed. The root's
# /etc/apt/sources.list names SUITE (and SUITE-updates) on the same mirror, so
# apt works inside it. Downloaded .debs are kept in
# ${OPENVERBS_CACHE}/roots/debs-SUITE (shared by every root of that suite).
#
# Treat a cached root as read-only: enter it with tests/roots/enter.sh, which
# puts writes into an overlay (--write DIR) or a throwaway tmpfs.
# Needs root and debootstrap (tests/deps.sh installs it). Exit status 0 =
# the root exists; its path is the only line on stdout.
set -eu
ROOT_VERSION=2

quiet=0
if [ "${1:-}" = --quiet ]; then quiet=1; shift; fi
[ $# -ge 1 ] || { echo "usage: $0 [--quiet] SUITE [PACKAGE...]" >&2; exit 2; }
suite=$1; shift
case $suite in *[!a-z0-9-]*|'') echo "make-root: bad suite '$suite'" >&2; exit 2;; esac
[ "$(id -u)" = 0 ] || { echo "make-root: needs root (debootstrap)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "make-root: debootstrap missing (sh tests/deps.sh)" >&2; exit 1; }

mirror=${OPENVERBS_MIRROR:-}
if [ -z "$mirror" ] && [ -r /etc/apt/sources.list.d/debian.sources ]; then
  mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources)
fi
mirror=${mirror:-http://deb.debian.org/debian}

pkgs=$(printf '%s\n' "$@" | sed '/^$/d' | sort -u | tr '\n' ' ' | sed 's/ $//')
key=$(printf 'v%s\n%s\n%s\n%s\n' "$ROOT_VERSION" "$suite" "$mirror" "$pkgs" | sha256sum | cut -c1-16)
cache=${OPENVERBS_CACHE:-/var/cache/openverbs}/roots
root=$cache/$suite-$key
mkdir -p "$cache"

say() { [ "$quiet" = 1 ] || echo "make-root: $*" >&2; }

if [ -f "$root/.openverbs-root" ]; then echo "$root"; exit 0; fi

exec 9>"$cache/.$suite-$key.lock"
flock 9
if [ -f "$root/.openverbs-root" ]; then echo "$root"; exit 0; fi

tmp=$root.tmp.$$
# A root left half-built by a killed run (its lock is gone) is removed.
rm -rf "$root".tmp.*
trap 'rm -rf "$tmp"' EXIT INT TERM
start=$(date +%s)
log=$cache/$suite-$key.log
: > "$log"
if [ -z "$pkgs" ]; then
  # The base root: debootstrap minbase, apt pointed at the mirror, no
  # service ever started by a package's maintainer scripts (policy-rc.d).
  exec 8>"$cache/.debs-$suite.lock"
  flock 8
  mkdir -p "$tmp" "$cache/debs-$suite"
  say "building $suite base root in $tmp from $mirror"
  if ! debootstrap --variant=minbase --components=main --cache-dir="$cache/debs-$suite" \
       "$suite" "$tmp" "$mirror" >> "$log" 2>&1; then
    tail -20 "$log" >&2
    echo "make-root: debootstrap failed (whole log: $log)" >&2
    exit 1
  fi
  flock -u 8
  {
    echo "deb $mirror $suite main"
    echo "deb $mirror $suite-updates main"
  } > "$tmp/etc/apt/sources.list"
  printf '#!/bin/sh\n# Roots made by tests/roots/make-root.sh start no services.\nexit 101\n' \
    > "$tmp/usr/sbin/policy-rc.d"
  chmod 755 "$tmp/usr/sbin/policy-rc.d"
  rm -f "$tmp"/var/cache/apt/archives/*.deb
else
  # A root with packages: a copy of the base root, then apt-get inside it
  # (apt resolves dependencies that debootstrap's --include does not).
  base=$(sh "$0" --quiet "$suite")
  say "building $suite root ($pkgs) in $tmp"
  cp -a --reflink=auto "$base" "$tmp"
  # shellcheck disable=SC2086
  if ! sh "$(dirname "$0")/enter.sh" --in-place "$tmp" sh -c \
       "apt-get update -q && apt-get install -y -q --no-install-recommends $pkgs && apt-get clean" \
       >> "$log" 2>&1; then
    tail -20 "$log" >&2
    echo "make-root: apt-get install failed (whole log: $log)" >&2
    exit 1
  fi
fi
printf 'suite=%s\nmirror=%s\npackages=%s\nversion=%s\n' "$suite" "$mirror" "$pkgs" "$ROOT_VERSION" \
  > "$tmp/.openverbs-root"
mv "$tmp" "$root"
trap - EXIT INT TERM
say "$root ready in $(( $(date +%s) - start )) s"
echo "$root"
