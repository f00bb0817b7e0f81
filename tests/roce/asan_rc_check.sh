#!/bin/sh
# rc_check (ours, tests/roce/rc_check.c) built with AddressSanitizer and
# UndefinedBehaviorSanitizer against the address sanitizer tree's libibverbs
# and soft provider (tests/sanitize: sanitize.address.build), run as a pair
# across the two network namespaces of netns_pair.sh: the RoCE device's
# transport and responder under the sanitizers (Debian's programs cannot
# load an instrumented library: tests/sanitize/README.md). RC, RC with
# memory windows and the extended send API, UD, XRC, and XRC with the
# receive QP and the SRQ in two processes, also through process_vm_*
# (OPENVERBS_SOFT_SHARE_MAX=0). Any sanitizer report, leaks included, fails.
#
#   asan_rc_check.sh TREE SOURCE_DIR
#
# Exit 77 (skipped) without the tree or without root.
set -u
tree=$1 src=$2
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
[ -e "$tree/lib/libibverbs.so.1" ] || { echo "SKIP: no sanitizer tree at $tree"; exit 77; }
bin=$(mktemp /tmp/ov-asan-rc-check.XXXXXX)
trap 'rm -f "$bin"' EXIT
gcc -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all \
  -o "$bin" "$src/tests/roce/rc_check.c" -I "$src/include" -I "$tree/include" \
  -L "$tree/lib" -libverbs || { echo "FAIL: rc_check does not build"; exit 1; }
chmod 755 "$bin"
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
fail=0
run() { # NAME [ENV=VALUE...] -- ARGS...
  name=$1; shift
  envs=""
  while [ "$1" != -- ]; do envs="$envs $1"; shift; done
  shift
  # shellcheck disable=SC2086
  out=$(env $envs sh "$src/tests/roce/netns_pair.sh" "$tree/lib" 120 "$bin" -d sroce0 -g %GID% "$@" 2>&1)
  rc=$?
  if [ $rc -ne 0 ] || echo "$out" | grep -q -E "Sanitizer|runtime error"; then
    echo "FAIL: $name"; echo "$out" | grep -v "^Udp\|^ \|RX:\|TX:" | tail -60; fail=1
  else
    echo "ok: $name"
  fi
}
run rc -- -n 50 -s 65536
run rc_windows_ex -- -n 20 -s 65536 -w -x
run ud -- -u -n 500 -s 1024
run xrc -- -X -n 50 -s 65536
run xrc_fork -- -X -F -P -n 30 -s 65536
run xrc_fork_vm OPENVERBS_SOFT_SHARE_MAX=0 -- -X -F -n 30 -s 65536
[ $fail -eq 0 ] || { echo FAIL; exit 1; }
exit 0
