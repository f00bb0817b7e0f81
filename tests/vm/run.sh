#!/bin/bash
# openverbs real-kernel test bed: boots Debian's kernel under qemu (TCG), creates
# soft-RoCE rxe0 and soft-iWARP siw0 in the guest and runs test groups there with
# Debian's unmodified programs against the library under test.
# See tests/vm/README.md for the options, the outputs and the group contract.
set -uo pipefail

export PATH=$PATH:/usr/sbin:/sbin   # modprobe, depmod for non-root users
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

usage() {
  cat <<EOF
usage: $0 [options]
  --lib DIR          library under test: DIR first on LD_LIBRARY_PATH (default BUILD/lib)
  --preload          LD_PRELOAD DIR's libibverbs.so.1 (and libibumad.so.3, librdmacm.so.1) instead
  --baseline         run against Debian's installed libraries
  --root DIR         boot DIR (a Debian root, e.g. tests/roots) as the guest's root
                     instead of the host's /: programs and libraries come from DIR's
                     system paths, no LD_LIBRARY_PATH/LD_PRELOAD (mode 'system').
                     DIR must be writable by this script (it creates the mount
                     points of the repository, build tree, kernel and results in it)
                     and needs bash, kmod and iproute2
  --only GROUP...    run only these groups (see --list)
  --skip GROUP...    run every group but these
  --kernel PKG       Debian kernel image package or glob (default: what
                     linux-image-amd64 depends on), e.g. 'linux-image-6.12.*+deb12-amd64'
  --build-dir DIR    build tree (default $repo/build): results go to DIR/vm-results,
                     the cache is $OPENVERBS_VM_CACHE, else ${OPENVERBS_CACHE:-/var/cache/openverbs}/vm
                     (kept between runs and clones)
  --timeout S        kill the guest after S seconds (default ${OPENVERBS_VM_TIMEOUT:-600})
  --boot-timeout S   kill the guest if it has not reached stage 2 after S seconds (120)
  --test-timeout S   per-program limit inside the guest (90)
  --group FILE       also run FILE (an executable group script) as a group
  --list             list the groups and exit
  --cmdline ARGS     more kernel parameters for the guest (e.g. 'clocksource=hpet'; later ones win)
  --debug-hang WHERE make the guest hang on purpose, to test the timeouts: 'boot'
                     (in stage 1: --boot-timeout) or 'tests' (after rxe0: --timeout)
EOF
}

mode=ld_library_path lib="" root_dir="" only=() skip=() extra=() kernel="" build="" list=0 hang="" cmdline_extra=""
timeout_s=${OPENVERBS_VM_TIMEOUT:-600} boot_timeout=120 test_timeout=90
while [ $# -gt 0 ]; do
  case $1 in
    --lib) lib=${2:?--lib needs a directory}; shift 2 ;;
    --lib=*) lib=${1#*=}; shift ;;
    --preload) mode=preload; shift ;;
    --baseline) mode=baseline; shift ;;
    --root) root_dir=${2:?--root needs a directory}; shift 2 ;;
    --only) shift; while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do only+=("$1"); shift; done
            [ ${#only[@]} -gt 0 ] || { echo "vm: --only needs group names" >&2; exit 2; } ;;
    --skip) shift; while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do skip+=("$1"); shift; done
            [ ${#skip[@]} -gt 0 ] || { echo "vm: --skip needs group names" >&2; exit 2; } ;;
    --kernel) kernel=${2:?--kernel needs a package}; shift 2 ;;
    --build-dir) build=${2:?--build-dir needs a directory}; shift 2 ;;
    --timeout) timeout_s=${2:?}; shift 2 ;;
    --boot-timeout) boot_timeout=${2:?}; shift 2 ;;
    --test-timeout) test_timeout=${2:?}; shift 2 ;;
    --group) extra+=("$(readlink -f "${2:?--group needs a file}")"); shift 2 ;;
    --cmdline) cmdline_extra=${2?--cmdline needs parameters}; shift 2 ;;
    --list) list=1; shift ;;
    --debug-hang) hang=${2:?--debug-hang needs boot or tests}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "vm: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done
case $hang in ''|boot|tests) ;; *) echo "vm: --debug-hang takes 'boot' or 'tests'" >&2; exit 2 ;; esac
if [ -n "$root_dir" ]; then
  [ "$mode" = ld_library_path ] && [ -z "$lib" ] ||
    { echo "vm: --root excludes --lib, --preload and --baseline" >&2; exit 2; }
  [ -x "$root_dir/bin/bash" ] || { echo "vm: --root $root_dir: no bin/bash there" >&2; exit 2; }
  root_dir=$(cd "$root_dir" && pwd)
  mode=system
fi
for v in "$timeout_s" "$boot_timeout" "$test_timeout"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "vm: timeouts are whole seconds, not '$v'" >&2; exit 2; }
done

die() { echo "vm: error: $*" >&2; exit 2; }
now() { echo "${EPOCHREALTIME//[!0-9]/}"; }
secs() { local d=$(( $2 - $1 )); printf '%d.%01d' $((d / 1000000)) $((d % 1000000 / 100000)); }
t_start=$(now)

# ------------------------------------------------------------------ groups
declare -A group_path=()
group_names=()
add_group() {
  local name=$1 path=$2
  [ -x "$path" ] || return 0
  if [ -n "${group_path[$name]:-}" ]; then die "two groups named '$name': ${group_path[$name]} and $path"; fi
  group_path[$name]=$path; group_names+=("$name")
}
for f in "$here"/groups/*.sh; do add_group "$(basename "$f" .sh)" "$f"; done
for f in "$repo"/tests/*/vm-group-*.sh "$repo"/tests/*/*/vm-group-*.sh; do
  b=$(basename "$f" .sh); add_group "${b#vm-group-}" "$f"
done
for f in "${extra[@]}"; do
  [ -x "$f" ] || die "--group $f: not an executable file"
  b=$(basename "$f" .sh); add_group "${b#vm-group-}" "$f"
done
if [ "$list" = 1 ]; then
  for g in "${group_names[@]}"; do printf '%-16s %s\n' "$g" "${group_path[$g]#"$repo"/}"; done
  exit 0
fi
selected=()
if [ ${#only[@]} -gt 0 ]; then
  for g in "${only[@]}"; do
    [ -n "${group_path[$g]:-}" ] || die "no group '$g' (groups: ${group_names[*]})"
    selected+=("$g")
  done
elif [ ${#extra[@]} -gt 0 ]; then
  for f in "${extra[@]}"; do b=$(basename "$f" .sh); selected+=("${b#vm-group-}"); done
else
  for g in "${group_names[@]}"; do
    for k in "${skip[@]}"; do [ "$g" = "$k" ] && continue 2; done
    selected+=("$g")
  done
fi
for k in "${skip[@]}"; do
  [ -n "${group_path[$k]:-}" ] || die "--skip: no group '$k' (groups: ${group_names[*]})"
done
[ ${#selected[@]} -gt 0 ] || die "no test groups found"

# ------------------------------------------------------------------ host packages
pkgs="qemu-system-x86 busybox-static kmod cpio gzip xz-utils binutils gcc make libc6-dev
      iproute2 ibverbs-utils ibverbs-providers libibverbs1 librdmacm1 rdmacm-utils perftest"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
  [ "$(id -u)" = 0 ] || die "missing Debian packages:$missing (run as root, or: apt-get install$missing)"
  echo "vm: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || die "apt-get update failed"
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null || die "apt-get install$missing failed"
fi
for t in qemu-system-x86_64 busybox modprobe depmod cpio ip rdma make gcc readelf timeout flock; do
  command -v "$t" >/dev/null || die "required program '$t' not found"
done

# ------------------------------------------------------------------ library under test
build_given=$build
build=${build:-$repo/build}
mkdir -p "$build" || die "cannot create build tree $build"
build=$(cd "$build" && pwd)
lib_dir="" preload=""
if [ "$mode" = baseline ] || [ "$mode" = system ]; then
  [ -z "$lib" ] || die "--baseline and --lib exclude each other"
else
  lib=${lib:-$build/lib}
  [ -d "$lib" ] || die "library directory $lib does not exist (build the project first, or pass --lib DIR or --baseline)"
  lib_dir=$(cd "$lib" && pwd)
  "$here/check-lib.sh" "$mode" "$lib_dir" ||
    die "the library in $lib_dir is not usable by Debian's programs (see above); no guest was started"
  preload=$lib_dir/libibverbs.so.1
  [ -e "$lib_dir/libibumad.so.3" ] && preload="$preload $lib_dir/libibumad.so.3"
  [ -e "$lib_dir/librdmacm.so.1" ] && preload="$preload $lib_dir/librdmacm.so.1"
fi

# The build tree whose programs the groups may use: --lib X/lib of a CMake
# build tree X means X, unless --build-dir says otherwise.
ov_build_dir=$build
if [ -z "$build_given" ] && [ -n "$lib_dir" ] && [ "$(basename "$lib_dir")" = lib ] &&
   [ -f "$(dirname "$lib_dir")/CMakeCache.txt" ]; then
  ov_build_dir=$(dirname "$lib_dir")
fi

# Programs of the build tree that groups run even under --baseline (a fresh
# checkout has none): built here when missing.
need_targets=()
for g in "${selected[@]}"; do
  case $g in
    umad) [ -x "$ov_build_dir/bin/umad_probe" ] || need_targets+=(umad_probe) ;;
  esac
done
if [ ${#need_targets[@]} -gt 0 ]; then
  echo "vm: building ${need_targets[*]} in $ov_build_dir (log $ov_build_dir/vm-build.log)"
  { [ -f "$ov_build_dir/CMakeCache.txt" ] ||
      cmake -S "$repo" -B "$ov_build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo; } >"$ov_build_dir/vm-build.log" 2>&1 &&
    cmake --build "$ov_build_dir" -j"$(nproc)" --target "${need_targets[@]}" >>"$ov_build_dir/vm-build.log" 2>&1 ||
    die "could not build ${need_targets[*]} for the selected groups (log $ov_build_dir/vm-build.log)"
fi

# ------------------------------------------------------------------ kernel
cache=${OPENVERBS_VM_CACHE:-${OPENVERBS_CACHE:-/var/cache/openverbs}/vm}
t_prep=$(now)
kdir=$("$here/prepare-kernel.sh" "$cache" "$kernel" | tail -n1) || die "kernel preparation failed"
[ -f "$kdir/.ready" ] || die "kernel preparation failed"
kver=$(cat "$kdir/kver")
echo "vm: kernel $kver ($(cat "$kdir/.ready")), prepared in $(secs "$t_prep" "$(now)") s"

# ------------------------------------------------------------------ results folder
stamp=$(date -u +%Y%m%d-%H%M%S)
res=$build/vm-results/$stamp-$mode
n=1; while [ -e "$res" ]; do res=$build/vm-results/$stamp-$mode-$n; n=$((n + 1)); done
mkdir -p "$res/logs" || die "cannot create $res"
ln -sfn "$(basename "$res")" "$build/vm-results/latest"
: >"$res/results.txt"; : >"$res/events.txt"

# --root: the guest's root is DIR; the host paths the guest needs are bound
# into it from a second, read-only share of the host's / (stage 1).
root_share=/ root_args=() root_append=""
if [ -n "$root_dir" ]; then
  binds="$repo $ov_build_dir $kdir/root"
  for d in $binds $res; do
    mkdir -p "$root_dir$d" || die "--root: cannot create the mount point $root_dir$d"
  done
  root_share=$root_dir
  root_args=(-fsdev local,id=hostfs,path=/,security_model=none,readonly=on,multidevs=remap
             -device virtio-9p-pci,fsdev=hostfs,mount_tag=hostfs)
  root_append=" ov_root=1 ov_binds=${binds// /,}"
fi

groups_arg=""
for g in "${selected[@]}"; do groups_arg="$groups_arg $g=${group_path[$g]}"; done
{
  q() { printf '%s=%q\n' "$1" "$2"; }
  q OV_KROOT "$kdir/root"; q OV_KVER "$kver"
  q OV_MODE "$mode"; q OV_LIB_DIR "$lib_dir"; q OV_PRELOAD "$preload"
  q OV_REPO "$repo"; q OV_BUILD_DIR "$ov_build_dir"
  q OV_RESULTS "$res"
  q RXE_DEV rxe0; q RXE_IP 10.77.0.1; q SIW_DEV siw0; q SIW_IP 10.77.1.1
  q OV_GROUPS "${groups_arg# }"
  q OV_TEST_TIMEOUT "$test_timeout"; q OV_GROUP_TIMEOUT "$((timeout_s - 20))"
  q OV_DEBUG_HANG "${hang:-0}"
  # The benchmarks' settings (BENCH_ROUNDS, BENCH_CONNECTIONS,
  # OV_ROCE_BENCH_*: bench/README.md), which their guest groups read; the
  # guest sees no other variable of the host's environment.
  while IFS= read -r v; do printf 'export %s=%q\n' "$v" "${!v}"; done < <(compgen -e | grep -E '^(BENCH_|OV_ROCE_BENCH_)')
} >"$res/guest.env"

# ------------------------------------------------------------------ boot
case "$res$kdir$here" in *[[:space:]]*) die "paths with white space cannot go on the kernel command line: $res $kdir $here" ;; esac
qpid="" qemu_real=""
cleanup() {
  if [ -n "$qpid" ] && kill -0 "$qpid" 2>/dev/null; then
    kill -TERM "$qpid" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$qpid" 2>/dev/null || break; sleep 0.5; done
    [ -n "$qemu_real" ] || qemu_real=$(cat "$res/qemu.pid" 2>/dev/null || true)
    if [ -n "$qemu_real" ] && grep -q qemu "/proc/$qemu_real/comm" 2>/dev/null; then
      kill -KILL "$qemu_real" 2>/dev/null
    fi
    kill -KILL "$qpid" 2>/dev/null
    wait "$qpid" 2>/dev/null
  fi
}
trap 'cleanup' EXIT
trap 'cleanup; exit 130' INT TERM

echo "vm: mode $mode${lib_dir:+, library $lib_dir}${root_dir:+, root $root_dir}; groups: ${selected[*]}"
echo "vm: results in $res"
kernel_image=$kdir/vmlinuz
[ -f "$kdir/vmlinux" ] && kernel_image=$kdir/vmlinux   # direct (PVH) boot, see prepare-kernel.sh
# A guest whose kernel panics before stage 2 (before any program of the run
# has started) is booted again, once: under TCG on a loaded host Debian's 6.12
# kernels have died in early boot ("Fatal exception in interrupt", CR2 0,
# 1.4 s after start, one boot in the CI's 2026-11-30 run) with nothing of the
# library under test loaded. The first console is kept as console-boot1.log.
for attempt in 1 2; do
  t_qemu=$(now)
  # Backstop: even if this script is killed outright, qemu dies shortly after the limit.
  # clocksource=tsc tsc=reliable: without them the kernel's TSC synchronisation check fails
  # under TCG ("Marking TSC unstable due to TSCs unsynchronized") and the guest reads the
  # emulated HPET, a device access under qemu's global lock for every clock read
  # (gettimeofday() 0.65 us against 0.07 with the TSC, bench/rdmacm/clock_floor.c): programs
  # that read the clock (benchmarks, timers) measured the emulator. qemu's TCG TSC follows the
  # host's (invariant) TSC, the same on both vCPUs. --cmdline clocksource=hpet restores it.
  # no_timer_check: under TCG on a loaded host the kernel's IO-APIC timer probe can miss
  # its ticks and panic ("IO-APIC + timer doesn't work!", seen with 6.12 at load 12).
  timeout -k 5 $((timeout_s + 30)) qemu-system-x86_64 \
    -name openverbs-vm -accel tcg,thread=multi -cpu max -smp 2 -m 1024 \
    -nodefaults -no-user-config -display none -no-reboot \
    -pidfile "$res/qemu.pid" \
    -kernel "$kernel_image" -initrd "$kdir/initrd.img" \
    -append "console=ttyS0 panic=-1 no_timer_check clocksource=tsc tsc=reliable quiet loglevel=4 cryptomgr.notests ov_stage2=$here/guest-init.sh ov_results=$res ov_kroot=$kdir/root ov_kver=$kver${hang:+ ov_hang=$hang}$root_append${cmdline_extra:+ $cmdline_extra}" \
    -chardev file,id=con,path="$res/console.log" -serial chardev:con \
    -fsdev local,id=hostroot,path="$root_share",security_model=none,readonly=on,multidevs=remap \
    -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
    -fsdev local,id=results,path="$res",security_model=none,multidevs=remap \
    -device virtio-9p-pci,fsdev=results,mount_tag=results \
    "${root_args[@]}" \
    >"$res/qemu.log" 2>&1 </dev/null &
  qpid=$!
  for _ in $(seq 50); do [ -s "$res/qemu.pid" ] || ! kill -0 "$qpid" 2>/dev/null && break; sleep 0.1; done
  qemu_real=$(cat "$res/qemu.pid" 2>/dev/null || true)
  echo "vm: qemu pid ${qemu_real:-unknown}"

  printed=0 t_rxe="" verdict="" stage2=0
  show_new() {
    local lines i
    local n
    mapfile -t lines <"$res/results.txt"
    n=${#lines[@]}
    # A line the guest is still writing is printed next time.
    [ "$n" -gt 0 ] && [ -n "$(tail -c 1 "$res/results.txt")" ] && n=$((n - 1))
    for ((i = printed; i < n; i++)); do echo "${lines[i]}"; done
    [ "$n" -gt "$printed" ] && printed=$n
  }
  while kill -0 "$qpid" 2>/dev/null; do
    show_new
    if [ "$stage2" = 0 ] && grep -q '^STAGE2 ' "$res/events.txt"; then stage2=1; fi
    if [ -z "$t_rxe" ] && grep -q '^RXE0 ' "$res/events.txt"; then
      t_rxe=$(now)
      echo "vm: qemu start to rxe0: $(secs "$t_qemu" "$t_rxe") s (guest uptime $(sed -n 's/^RXE0 //p' "$res/events.txt") s)"
    fi
    el=$(( ($(now) - t_qemu) / 1000000 ))
    if [ "$stage2" = 0 ] && [ "$el" -ge "$boot_timeout" ]; then
      verdict="guest did not reach stage 2 within ${boot_timeout}s (console: $res/console.log)"; break
    fi
    if [ "$el" -ge "$timeout_s" ]; then
      verdict="guest still running after ${timeout_s}s: killed (console: $res/console.log)"; break
    fi
    sleep 0.2
  done
  if [ -n "$verdict" ]; then
    cleanup
  else
    wait "$qpid"; qrc=$?
    [ "$qrc" = 0 ] || verdict="qemu exited with status $qrc (log: $res/qemu.log)"
  fi
  if [ "$attempt" = 1 ] && [ "$stage2" = 0 ] && ! grep -q '^DONE ' "$res/events.txt" &&
     grep -q 'Kernel panic' "$res/console.log" 2>/dev/null; then
    echo "vm: the guest's kernel panicked before stage 2: booting it again once (first console: $res/console-boot1.log)"
    grep -m1 'Kernel panic' "$res/console.log" | sed 's/^/vm: console: /'
    mv "$res/console.log" "$res/console-boot1.log"
    : >"$res/results.txt"; : >"$res/events.txt"; rm -f "$res/qemu.pid"
    qpid="" qemu_real=""
    continue
  fi
  break
done
qpid=""
show_new
t_end=$(now)

# ------------------------------------------------------------------ verdict
fail_line() { echo "FAIL $1 $(secs "$t_qemu" "$t_end") ($2)" | tee -a "$res/results.txt"; }
if ! grep -q '^DONE ' "$res/events.txt"; then
  [ -n "$verdict" ] || verdict="guest stopped before finishing (console: $res/console.log)"
  fail_line vm/run "$verdict"
  grep -h 'OV-STAGE[12]-FAILED' "$res/console.log" 2>/dev/null | head -n3 | sed 's/^/vm: /'
  tail -n 5 "$res/console.log" 2>/dev/null | sed 's/^/vm: console: /'
  if grep -q 'soft lockup' "$res/console.log" 2>/dev/null; then
    echo "vm: the guest's CPUs were starved (soft lockups): is the host overloaded? load average $(cut -d' ' -f1-3 /proc/loadavg)"
  fi
fi
if grep -q '^FAIL setup/' "$res/results.txt"; then :; else
  for g in "${selected[@]}"; do
    grep -q "^GROUP $g " "$res/events.txt" || fail_line "$g/not-run" "group did not run to completion"
  done
fi
# A left-over qemu would be a harness bug: say so loudly.
if [ -n "$qemu_real" ] && [ -d "/proc/$qemu_real" ] && grep -q qemu "/proc/$qemu_real/comm" 2>/dev/null; then
  kill -KILL "$qemu_real" 2>/dev/null
  fail_line vm/cleanup "qemu pid $qemu_real outlived the run and was killed"
fi

npass=$(grep -c '^PASS ' "$res/results.txt")
nfail=$(grep -c '^FAIL ' "$res/results.txt")
nxfail=$(grep -c '^XFAIL ' "$res/results.txt")
nskip=$(grep -c '^SKIP ' "$res/results.txt")
{
  echo "kernel $kver; mode $mode${lib_dir:+ ($lib_dir)}${root_dir:+ (root $root_dir)}"
  [ -n "$t_rxe" ] && echo "qemu start to rxe0: $(secs "$t_qemu" "$t_rxe") s"
  echo "guest run: $(secs "$t_qemu" "$t_end") s; total wall time: $(secs "$t_start" "$t_end") s; host load average $(cut -d" " -f1-3 /proc/loadavg)"
} | tee "$res/summary.txt" | sed 's/^/vm: /'
summary="$npass passed, $nfail failed"
[ "$nxfail" -gt 0 ] && summary="$summary, $nxfail expected failures"
[ "$nskip" -gt 0 ] && summary="$summary, $nskip skipped"
echo "$summary" | tee -a "$res/summary.txt"
# A run that reported nothing at all failed somewhere; one whose groups all
# skipped (e.g. --baseline --only soft-verbs) did not.
if [ "$nfail" -gt 0 ] || [ $((npass + nxfail + nskip)) = 0 ]; then exit 1; fi
exit 0
