# Reads the verbose output of rdma-core's pyverbs suite (run_tests.py -v) and
# prints one line per test: "module.Class.test outcome", outcome one of ok,
# skipped, skipped-qp (skipped because creating a QP failed with EOPNOTSUPP:
# "... QP ... is not supported"), FAIL, ERROR, error-qp (below), xfail, xpass. A docstring, when a test has one, is
# printed on its own line between the test's name and the outcome.
function emit(id, rest) {
  o = rest
  sub(/.* \.\.\. /, "", o)
  if (o ~ /^skipped/) o = (o ~ /QP .*is not supported/ ? "skipped-qp" : "skipped")
  else if (o ~ /^expected failure/) o = "xfail"
  else if (o ~ /^unexpected success/) o = "xpass"
  else if (o !~ /^(ok|FAIL|ERROR)$/) { pending = id; return }
  if (!(id in out))
    order[++n] = id
  out[id] = o
  pending = ""
}
# The tracebacks after the run: "ERROR: test (module.Class.test)".
/^(ERROR|FAIL): [A-Za-z_0-9]+ \([A-Za-z_0-9.]+\)/ {
  tb = $3; gsub(/[()]/, "", tb)
  next
}
# error-qp: creating a QP failed with an errno the provider did not set (libsiw's
# create_qp returns NULL without setting errno on one mmap key), so pyverbs
# reports what an earlier call left: 0, or ENOSPC (28), which rdma-core 64's
# library leaves from a uverbs ioctl its set-up runs before every test (strace
# of its siw0 run in the test bed, 2026-11-29).
tb != "" && /Failed to create QP\. Errno: (0|28),/ && out[tb] == "ERROR" {
  out[tb] = "error-qp"
  next
}
# A test that prints on stdout gets its outcome on a later line of its own.
pending != "" && /^(ok|FAIL|ERROR|skipped.*|expected failure|unexpected success)$/ {
  emit(pending, " ... " $0)
  next
}
/^[A-Za-z_0-9]+ \([A-Za-z_0-9.]+\)/ {
  id = $2; gsub(/[()]/, "", id)
  if ($0 ~ / \.\.\. /) emit(id, $0)
  next
}
/ \.\.\. / && id != "" { emit(id, $0) }
END { for (i = 1; i <= n; i++) print order[i] " " out[order[i]] }
