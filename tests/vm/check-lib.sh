#!/bin/bash
# Host-side check, before any guest boots, that Debian's programs and plugins
# used by the test bed can load the library under test. A library directory
# whose libibverbs.so.1 is not a shared object, has the wrong SONAME, or lacks
# symbols or version nodes those programs need fails here in a second with the
# loader's own words, instead of every test failing in the guest.
#
# Usage: check-lib.sh ld_library_path|preload DIR
# Exit 0 when usable; 1 (with messages on stderr) when not.
set -uo pipefail
mode=$1 dir=$2
err() { echo "vm: library check: $*" >&2; }

bad=0
# elf_so FILE SONAME: FILE is a 64-bit ELF shared object with that SONAME.
elf_so() {
  local f=$1 want=$2 magic hdr so
  magic=$(head -c 4 "$f" 2>/dev/null | od -An -c | tr -d ' \n')
  if [ "$magic" != '177ELF' ]; then
    err "$f is not an ELF file (a text file, a script or an unfinished build?): $(head -c 60 "$f" | tr -c '[:print:]' '.')"
    return 1
  fi
  hdr=$(LC_ALL=C readelf -h "$f" 2>&1)
  if ! grep -q 'Class:[[:space:]]*ELF64' <<<"$hdr" || ! grep -q 'Type:[[:space:]]*DYN' <<<"$hdr" ||
     ! grep -q 'Machine:[[:space:]]*Advanced Micro Devices X86-64' <<<"$hdr"; then
    err "$f is not an x86-64 ELF shared object"
    return 1
  fi
  so=$(LC_ALL=C readelf -d "$f" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  if [ "$so" != "$want" ]; then
    err "$f has SONAME '${so:-none}', expected '$want'"
    return 1
  fi
}

if [ ! -d "$dir" ]; then
  err "library directory $dir does not exist (build the project first, or pass --lib DIR or --baseline)"
  exit 1
fi
if [ ! -e "$dir/libibverbs.so.1" ]; then
  err "$dir has no libibverbs.so.1 (build the project first, or pass --lib DIR or --baseline)"
  exit 1
fi
elf_so "$dir/libibverbs.so.1" libibverbs.so.1 || bad=1
if [ -e "$dir/libibumad.so.3" ]; then elf_so "$dir/libibumad.so.3" libibumad.so.3 || bad=1; fi
if [ -e "$dir/librdmacm.so.1" ]; then elf_so "$dir/librdmacm.so.1" librdmacm.so.1 || bad=1; fi
[ "$bad" = 0 ] || exit 1

if [ "$mode" = preload ]; then
  pre="$dir/libibverbs.so.1"
  [ -e "$dir/libibumad.so.3" ] && pre="$pre $dir/libibumad.so.3"
  [ -e "$dir/librdmacm.so.1" ] && pre="$pre $dir/librdmacm.so.1"
  envs=(LD_PRELOAD="$pre")
else
  envs=(LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
fi
real=$(readlink -f "$dir/libibverbs.so.1")

# Everything the built-in groups start that links libibverbs.so.1.
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
objs=()
for p in ibv_devices ibv_devinfo ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong ibv_srq_pingpong \
         ibv_xsrq_pingpong ib_write_bw ib_read_bw ib_send_bw ib_write_lat ib_atomic_bw; do
  f=$(command -v "$p") || { err "Debian program $p is missing (ibverbs-utils / perftest)"; exit 1; }
  objs+=("$f")
done
for f in "/usr/lib/$arch/libibverbs/librxe-rdmav34.so" "/usr/lib/$arch/libibverbs/libsiw-rdmav34.so" \
         "/usr/lib/$arch/librdmacm.so.1"; do
  [ -e "$f" ] || { err "$f is missing (ibverbs-providers / librdmacm1)"; exit 1; }
  objs+=("$f")
done

nbad=0 failing=""
for f in "${objs[@]}"; do
  out=$(env "${envs[@]}" timeout 30 ldd -r "$f" 2>&1)
  probs=$(grep -E 'undefined symbol|not found|cannot be preloaded|error' <<<"$out" | sed 's/^[[:space:]]*//' | sort -u)
  if [ -n "$probs" ]; then
    nbad=$((nbad + 1))
    if [ "$nbad" -le 3 ]; then
      err "$(basename "$f") cannot use $dir/libibverbs.so.1:"
      head -n 6 <<<"$probs" | sed 's/^/    /' >&2
      n=$(wc -l <<<"$probs")
      [ "$n" -gt 6 ] && echo "    ... and $((n - 6)) more" >&2
    else
      failing="$failing $(basename "$f")"
    fi
    bad=1
    continue
  fi
  used=$(sed -n 's/^[[:space:]]*libibverbs\.so\.1 => \([^ ]*\) .*/\1/p' <<<"$out" | head -n1)
  if [ -z "$used" ] && [ "$mode" = preload ]; then
    used=$(grep -o "[^[:space:]]*/libibverbs\.so\.1 " <<<"$out" | head -n1 | tr -d ' ')
  fi
  if [ "$(readlink -f "${used:-/nonexistent}")" != "$real" ]; then
    err "$(basename "$f") loads ${used:-no libibverbs.so.1} instead of $dir/libibverbs.so.1"
    bad=1
  fi
done
[ -n "$failing" ] && err "the same for:$failing"
exit "$bad"
