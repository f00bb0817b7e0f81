#!/bin/sh
# Fetches Debian 13 (trixie)'s libibverbs-dev, libibumad-dev, librdmacm-dev,
# libibverbs1, libibumad3 and librdmacm1t64 and unpacks them into a cache dir;
# prints the include root (the folder holding infiniband/ and rdma/) on
# stdout; the libraries are in ../lib beside it (the ABI tests of the 56
# target compare against both).
#
#   sh tests/trixie/fetch-dev.sh
#
# Uses a private apt configuration (its own sources list, lists and archive
# cache under the cache dir): the machine's apt sources are never changed.
# Cached under ${OPENVERBS_CACHE:-/var/cache/openverbs}/trixie-dev/, keyed by
# the package versions apt reports; safe when two runs share it (flock).
set -eu
cache=${OPENVERBS_CACHE:-/var/cache/openverbs}/trixie-dev
mirror=${OPENVERBS_TRIXIE_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9

# A complete unpacked tree from an earlier run is reused as is: the trixie
# headers of rdma-core 56.1 are what the 56 target is checked against, and a
# point release that changed them would be a new ABI anyway.
if [ -f "$cache/root/.complete" ] && [ -f "$cache/lib/librdmacm.so.1" ]; then
    echo "$cache/root"
    exit 0
fi

apt_dir=$cache/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/sources.d" "$apt_dir/debs"
: > "$apt_dir/status"   # no installed packages: this machine's never count
cat > "$apt_dir/sources.list" <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main
SRC
apt_opts="-o Dir::Etc::sourcelist=$apt_dir/sources.list
 -o Dir::Etc::sourceparts=$apt_dir/sources.d
 -o Dir::State::Lists=$apt_dir/lists
 -o Dir::State::status=$apt_dir/status
 -o Dir::Cache=$apt_dir/cache
 -o APT::Get::List-Cleanup=0
 -o Debug::NoLocking=1"
# shellcheck disable=SC2086
apt-get -q $apt_opts update >&2
cd "$apt_dir/debs"
rm -f ./*.deb
# shellcheck disable=SC2086
apt-get -q $apt_opts download libibverbs-dev libibumad-dev librdmacm-dev libibverbs1 libibumad3 librdmacm1t64 >&2
rm -rf "$cache/root.tmp"
mkdir -p "$cache/root.tmp"
for deb in ./*.deb; do
    dpkg-deb -x "$deb" "$cache/root.tmp"
    dpkg-deb -f "$deb" Package Version | tr '\n' ' ' >&2; echo >&2
done
rm -rf "$cache/root" "$cache/lib"
mv "$cache/root.tmp/usr/include" "$cache/root"
mv "$cache/root.tmp/usr/lib/x86_64-linux-gnu" "$cache/lib"
rm -rf "$cache/root.tmp"
ls ./*.deb > "$cache/root/.complete"
echo "$cache/root"
