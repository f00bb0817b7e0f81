#!/usr/bin/env python3
"""Header self-containment: one header, alone, in one language.

    check_header.py --compiler cc --lang c --include <repo>/include
                    --header verbs.h --workdir <dir>

Compiles a translation unit holding only `#include <infiniband/HEADER>` as
C11 (-std=c11) or C++17 (-std=c++17) with -Wall -Wextra -Werror, then checks
from the dependency list that every infiniband/ header it used came from the
tree under test (a header we lack must not be silently replaced by Debian's
copy in /usr/include).

Exception, by design: arch.h and sa-kern-abi.h announce with #warning that
they are obsolete (as rdma-core's do), so -Wno-error=cpp is added for them.
Exit 0 = compiles cleanly, 1 = it does not (compiler output printed).
"""

import argparse
import os
import subprocess
import sys

# Headers whose #warning is intended behaviour.
OBSOLETE = {"arch.h", "sa-kern-abi.h"}
# librdmacm's public headers (include/rdma/): must come from the tree too.
RDMACM = {"rdma_cma.h", "rdma_cma_abi.h", "rdma_verbs.h", "rsocket.h"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--compiler", required=True)
    ap.add_argument("--lang", choices=("c", "c++"), required=True)
    ap.add_argument("--include", required=True)
    ap.add_argument("--header", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()

    os.makedirs(args.workdir, exist_ok=True)
    stem = "%s.%s" % (args.header.replace(".", "_").replace("/", "_"), "c" if args.lang == "c" else "cpp")
    src = os.path.join(args.workdir, stem)
    deps = src + ".d"
    # A bare name is one of infiniband/; "rdma/<name>" (librdmacm's) as is.
    path = args.header if "/" in args.header else "infiniband/" + args.header
    with open(src, "w") as f:
        f.write("#include <%s>\n" % path)
    std = "-std=c11" if args.lang == "c" else "-std=c++17"
    cmd = [args.compiler, "-x", args.lang, std, "-Wall", "-Wextra", "-Werror",
           "-I", args.include, "-c", src, "-o", os.devnull, "-MD", "-MF", deps]
    if args.header in OBSOLETE:
        cmd.append("-Wno-error=cpp")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        print("FAIL: %s does not compile alone as %s:" % (path, std))
        print("  " + " ".join(cmd))
        print(proc.stdout)
        return 1

    # The include root may be a staged tree of symbolic links (a build
    # tree's include/): the folders its links point into are ours too.
    def real_dirs(sub):
        top = os.path.join(args.include, sub)
        dirs = {os.path.realpath(top)}
        if os.path.isdir(top):
            dirs |= {os.path.dirname(os.path.realpath(os.path.join(top, n)))
                     for n in os.listdir(top) if n.endswith(".h")}
        return dirs
    ours, ours_rdma = real_dirs("infiniband"), real_dirs("rdma")
    foreign = []
    with open(deps) as f:
        for word in f.read().replace("\\\n", " ").split():
            real = os.path.realpath(word) if word.endswith(".h") else ""
            if os.path.basename(os.path.dirname(real)) == "infiniband" and \
                    os.path.dirname(real) not in ours:
                foreign.append(real)
            # librdmacm's headers share /usr/include/rdma with the kernel's.
            if os.path.basename(real) in RDMACM and \
                    os.path.dirname(real) not in ours_rdma:
                foreign.append(real)
    if foreign:
        print("FAIL: %s uses headers from outside %s: %s"
              % (path, args.include, " ".join(sorted(set(foreign)))))
        return 1
    if proc.stdout.strip():
        print(proc.stdout)
    print("PASS: %s compiles alone as %s with -Wall -Wextra -Werror"
          % (path, std))
    return 0


if __name__ == "__main__":
    sys.exit(main())
