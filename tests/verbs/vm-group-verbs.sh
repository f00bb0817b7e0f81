#!/bin/bash
# Every verb, Debian's libibverbs against ours, on the same kernel device.
#
# verb_walk (built as $OV_BUILD_DIR/bin/verb_walk) calls each verb once and
# prints one line per call: return value, errno and the stable fields of the
# result. It runs first with Debian's library, then with the library under
# test (the environment the harness set up), on rxe0 and on siw0. Each line
# of Debian's output is one test: PASS when ours printed the same line.
. "$OV_REPO/tests/vm/lib.sh"
# It compares Debian's library with ours itself: nothing to learn under --baseline.
ov_require_ours "compares Debian's library with the project's in one run"

walker=$OV_BUILD_DIR/bin/verb_walk

# compare DEV: one result line per verb line of Debian's output.
compare() {
  local dev=$1 deb=$OV_LOGDIR/$1-debian.txt ours=$OV_LOGDIR/$1-ours.txt t0 line key prev="" n=0
  t0=$(ov_now)
  env -u LD_LIBRARY_PATH -u LD_PRELOAD timeout -k 5 "$OV_TEST_TIMEOUT" "$walker" "$dev" "$2" >"$deb" 2>"$deb.err"
  local rc_deb=$?
  timeout -k 5 "$OV_TEST_TIMEOUT" "$walker" "$dev" "$2" >"$ours" 2>"$ours.err"
  local rc_ours=$?
  if [ "$rc_ours" != "$rc_deb" ]; then
    ov_result FAIL "$dev/exit-status" "$t0" "(debian $rc_deb, ours $rc_ours: $(ov_tail "$ours.err"))"
  else
    ov_result PASS "$dev/exit-status" "$t0"
  fi
  while IFS= read -r line; do
    n=$((n + 1))
    # Detail lines ("  ...") belong to the verb line before them.
    if [[ $line == "  "* ]]; then key="$prev:${line#  }"; key=${key%%=*}; else key=${line%% ret=*}; key=${key%% ok}; key=${key%% NULL*}; prev=$key; fi
    key=$(printf '%s' "$key" | tr -c 'A-Za-z0-9_.:@()-' '_' | cut -c1-90)
    if grep -qxF -- "$line" "$ours"; then
      ov_result PASS "$dev/$n-$key" "$t0"
    else
      local mine
      mine=$(sed -n "${n}p" "$ours")
      ov_result FAIL "$dev/$n-$key" "$t0" "(debian: '$line' ours: '$mine')"
    fi
  done <"$deb"
}

if [ ! -x "$walker" ]; then
  ov_result FAIL build "$(ov_now)" "($walker missing: build the verb_walk target)"
  exit 1
fi
compare "$RXE_DEV" "$RXE_GID_INDEX"
compare "$SIW_DEV" 0
exit "$ov_failed"
