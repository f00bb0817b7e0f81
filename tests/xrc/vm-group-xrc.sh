#!/bin/bash
# XRC and parent/thread domains on the real kernel (rxe0, siw0): Debian's
# libibverbs and the library under test must give the same answer to every
# call of xrc_probe (built as $OV_BUILD_DIR/bin/xrc_probe). Neither rxe nor
# siw implements XRC, thread or parent domains, so Debian answers EOPNOTSUPP
# (or the kernel's errno) and so must we. Each line of Debian's output is
# one test: PASS when ours printed the same line.
. "$OV_REPO/tests/vm/lib.sh"
# It compares Debian's library with ours itself: nothing to learn under --baseline.
ov_require_ours "compares Debian's library with the project's in one run"

probe=$OV_BUILD_DIR/bin/xrc_probe

compare() {
  local dev=$1 deb=$OV_LOGDIR/$1-debian.txt ours=$OV_LOGDIR/$1-ours.txt t0 line key n=0
  t0=$(ov_now)
  env -u LD_LIBRARY_PATH -u LD_PRELOAD timeout -k 5 "$OV_TEST_TIMEOUT" "$probe" "$dev" >"$deb" 2>"$deb.err"
  local rc_deb=$?
  timeout -k 5 "$OV_TEST_TIMEOUT" "$probe" "$dev" >"$ours" 2>"$ours.err"
  local rc_ours=$?
  # The "ours" run must really have loaded the library under test.
  if [ "$OV_MODE" != baseline ] && ! grep -q "loaded: *$OV_LIB_DIR/" "$ours.err"; then
    ov_result FAIL "$dev/library-under-test" "$t0" "($(grep loaded: "$ours.err"))"
  elif [ "$OV_MODE" != baseline ]; then
    ov_result PASS "$dev/library-under-test" "$t0"
  fi
  if [ "$rc_ours" != "$rc_deb" ]; then
    ov_result FAIL "$dev/exit-status" "$t0" "(debian $rc_deb, ours $rc_ours: $(ov_tail "$ours.err"))"
  else
    ov_result PASS "$dev/exit-status" "$t0"
  fi
  # Debian's answers must be EOPNOTSUPP-style refusals for the verbs the
  # issue names (not a crash, not a success): checked on Debian's side.
  if ! grep -q '^ibv_open_xrcd file,O_CREAT: fail errno=EOPNOTSUPP$' "$deb" ||
     ! grep -q '^ibv_alloc_td: fail errno=EOPNOTSUPP$' "$deb" ||
     ! grep -q '^ibv_alloc_parent_domain pd+td: fail errno=EOPNOTSUPP$' "$deb"; then
    ov_result FAIL "$dev/debian-refuses" "$t0" "(unexpected Debian answers, see $deb)"
  else
    ov_result PASS "$dev/debian-refuses" "$t0"
  fi
  while IFS= read -r line; do
    n=$((n + 1))
    key=${line%%:*}
    key=$(printf '%s' "$key" | tr -c 'A-Za-z0-9_.=,+-' '_' | cut -c1-90)
    if grep -qxF -- "$line" "$ours"; then
      ov_result PASS "$dev/$n-$key" "$t0"
    else
      ov_result FAIL "$dev/$n-$key" "$t0" "(debian: '$line' ours: '$(sed -n "${n}p" "$ours")')"
    fi
  done <"$deb"
}

if [ ! -x "$probe" ]; then
  ov_result FAIL build "$(ov_now)" "($probe missing: build the xrc_probe target)"
  exit 1
fi
compare "$RXE_DEV"
compare "$SIW_DEV"
exit "$ov_failed"
