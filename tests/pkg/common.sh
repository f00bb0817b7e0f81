# Shared by tests/pkg/installed-system.sh and vm-installed.sh (sourced; the
# caller sets suite, repo, work).
passed=0; failed=0

# line STATUS NAME [NOTE]: one result line, counted.
line() {
  echo "$1 $suite/$2${3:+ $3}"
  if [ "$1" = PASS ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}

# finish: the totals; exit 0 only if something passed and nothing failed.
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" = 0 ] && [ "$passed" -gt 0 ]
  exit $?
}

# test_root: the cached root of $suite with Debian's programs
# (root-packages.txt); sets root.
test_root() {
  # shellcheck disable=SC2046
  root=$(sh "$repo/tests/roots/make-root.sh" "$suite" $(cat "$repo/tests/pkg/root-packages.txt")) ||
    { line FAIL make-root; finish; }
}

# install_debs NAME DIR STATE: apt-get install DIR/*.deb into the root's
# overlay layer STATE (network only if apt's lists are stale).
install_debs() {
  if sh "$repo/tests/roots/enter.sh" --write "$3" --bind "$2:/debs" "$root" sh -c \
       'cd /debs && { apt-get install -y ./*.deb || { apt-get update -q && apt-get install -y ./*.deb; }; }' \
       > "$work/$1.log" 2>&1; then
    line PASS "$1" "($(ls "$2"/*.deb | wc -l) packages)"
  else
    tail -15 "$work/$1.log"; line FAIL "$1" "($work/$1.log)"; finish
  fi
}
