#!/usr/bin/env python3
"""Compile (and run) one test source of tests/kabi with -Wall -Wextra -Werror.

    run_compile.py --compiler gcc --lang c --include <repo>/include
                   --source drv_cmd.c --workdir <dir> [--run]
                   [--define NAME] [--expect-error REGEX]

--expect-error: the compilation must fail and its output match REGEX (a
check that something is rejected at compile time). Exit 0 = as expected,
1 = not, 2 = tool failure.
"""

import argparse
import os
import re
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--compiler", required=True)
    ap.add_argument("--lang", choices=("c", "c++"), required=True)
    ap.add_argument("--include", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--define", action="append", default=[])
    ap.add_argument("--expect-error")
    ap.add_argument("--run", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    std = "-std=c11" if args.lang == "c" else "-std=c++17"
    tag = "%s-%s%s" % (os.path.basename(args.source), os.path.basename(args.compiler),
                       "".join("-" + d for d in args.define))
    exe = os.path.join(args.workdir, tag)
    cmd = [args.compiler, "-x", args.lang, std, "-Wall", "-Wextra", "-Werror",
           "-I", args.include] + ["-D" + d for d in args.define] + [args.source, "-o", exe]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as e:
        print("MACHINERY ERROR: %s: %s" % (args.compiler, e))
        return 2
    if args.expect_error:
        if proc.returncode == 0:
            print("FAIL: %s compiled, expected an error matching %r" % (" ".join(cmd),
                                                                        args.expect_error))
            return 1
        if not re.search(args.expect_error, proc.stdout):
            print("FAIL: error output does not match %r:\n%s" % (args.expect_error, proc.stdout))
            return 1
        print("PASS: rejected as expected (%s %s): %s" % (args.compiler, std, next(
            (l.strip() for l in proc.stdout.splitlines() if re.search(args.expect_error, l)), "")))
        return 0
    if proc.returncode != 0:
        print("FAIL: %s\n%s" % (" ".join(cmd), proc.stdout))
        return 1
    if not args.run:
        print("PASS: %s compiles (%s %s)" % (args.source, args.compiler, std))
        return 0
    run = subprocess.run([exe], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(run.stdout, end="")
    if run.returncode != 0:
        print("FAIL: %s exited with %d" % (exe, run.returncode))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
