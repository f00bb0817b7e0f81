#!/usr/bin/env python3
"""Self-checks of the kern-abi field machinery (generator and layout checker).

    selftest.py --source-root <repo> --workdir <dir> [--compiler gcc]

  1. the generator's output for a synthetic uapi header (comments, constants,
     nested anonymous union, flexible array, packed struct) is exactly the
     expected text, and the packed copy has the packed layout;
  2. it refuses what it cannot derive mechanically (exit 2): a preprocessor
     line inside a body, a named type defined inside a body, a declarator
     after a body, a missing header;
  3. --check passes on an unchanged header and fails, with a diff naming the
     new member, once the uapi header gains a member;
  4. check_layouts.py fails on a copy of the committed field lists with one
     member dropped, and on one with two members swapped.
Exit 0 = all hold, 1 = one did not (printed).
"""

import argparse
import os
import shutil
import subprocess
import sys

PLAIN = """/* SPDX-free synthetic uapi header for the self-test */
#ifndef SYNTH_H
#define SYNTH_H
#include <linux/types.h>
#define SYNTH_N 3
enum { SYNTH_A = 1 };
struct t_plain {
	__u32 a;   /* trailing comment */
	__u32 b[SYNTH_N];
	// line comment
	union {
		__u64 c;
		__u64 d;
	};
	__aligned_u64 data[];
};

struct t_packed {
	__u32 x;
	__u64   y;
} __attribute__((packed));
#endif
"""

EXPECTED = """#define _OV_FIELDS_t_plain \\
	__u32 a; \\
	__u32 b[SYNTH_N]; \\
	union { __u64 c; __u64 d; }; \\
	__aligned_u64 data[];
#define _OV_ANON_t_plain struct { _OV_FIELDS_t_plain };

#define _OV_FIELDS_t_packed \\
	__u32 x; \\
	__u64 y;
#define _OV_ANON_t_packed struct __attribute__((packed)) { _OV_FIELDS_t_packed };
"""

REFUSED = {
    "pp-in-body": "struct s {\n\t__u32 a;\n#ifdef X\n\t__u32 b;\n#endif\n};\n",
    "named-inner": "struct s {\n\tstruct inner { __u32 a; } i;\n};\n",
    "declarator": "struct s {\n\t__u32 a;\n} instance;\n",
}

failures = []


def check(cond, what):
    print("%s: %s" % ("ok" if cond else "FAIL", what))
    if not cond:
        failures.append(what)


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--source-root", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--compiler", default="gcc")
    args = ap.parse_args()
    root = os.path.abspath(args.source_root)
    gen = os.path.join(root, "cmake", "gen_kern_abi_fields.py")
    work = os.path.abspath(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    uapi = os.path.join(work, "uapi")
    os.makedirs(uapi)

    # 1. exact output, and the packed copy's layout.
    with open(os.path.join(uapi, "synth.h"), "w") as f:
        f.write(PLAIN)
    out = os.path.join(work, "fields.h")
    p = run([sys.executable, gen, "--uapi-dir", uapi, "--headers", "synth.h", "--output", out])
    check(p.returncode == 0, "generator runs on the synthetic header" + p.stdout)
    text = open(out).read() if os.path.exists(out) else ""
    check(EXPECTED in text, "synthetic output is the expected text")
    if EXPECTED not in text:
        print(text)
    probe = os.path.join(work, "probe.c")
    with open(probe, "w") as f:
        f.write('#include <stddef.h>\n#include "uapi/synth.h"\n#include "fields.h"\n'
                "struct w_packed { _OV_ANON_t_packed };\n"
                "struct w_plain { _OV_ANON_t_plain };\n"
                "_Static_assert(sizeof(struct w_packed) == sizeof(struct t_packed), \"packed\");\n"
                "_Static_assert(sizeof(struct w_packed) == 12, \"packed is 12\");\n"
                "_Static_assert(offsetof(struct w_plain, d) == offsetof(struct t_plain, d), \"d\");\n"
                "_Static_assert(offsetof(struct w_plain, data) == offsetof(struct t_plain, data),"
                " \"data\");\n")
    p = run([args.compiler, "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
             "-I", work, probe])
    check(p.returncode == 0, "generated copies have the uapi layout (packed: 12 bytes)"
          + ("\n" + p.stdout if p.returncode else ""))

    # 2. refusals.
    for name, body in REFUSED.items():
        d = os.path.join(work, "refuse-" + name)
        os.makedirs(d)
        with open(os.path.join(d, "bad.h"), "w") as f:
            f.write(body)
        p = run([sys.executable, gen, "--uapi-dir", d, "--headers", "bad.h",
                 "--output", os.path.join(d, "out.h")])
        check(p.returncode == 2 and "cannot derive" in p.stdout,
              "refuses %s with exit 2 (%s)" % (name, p.stdout.strip()))
    p = run([sys.executable, gen, "--uapi-dir", uapi, "--headers", "absent.h",
             "--output", os.path.join(work, "absent.h")])
    check(p.returncode == 2 and "not found" in p.stdout, "refuses a missing header (exit 2)")

    # 3. --check.
    p = run([sys.executable, gen, "--uapi-dir", uapi, "--headers", "synth.h", "--check", out])
    check(p.returncode == 0, "--check passes on an unchanged header")
    with open(os.path.join(uapi, "synth.h"), "w") as f:
        f.write(PLAIN.replace("__u32 a;", "__u32 a;\n\t__u32 added_member;"))
    p = run([sys.executable, gen, "--uapi-dir", uapi, "--headers", "synth.h", "--check", out])
    check(p.returncode == 1 and "+\t__u32 added_member; \\" in p.stdout,
          "--check fails with a diff naming a member the uapi gained")

    # 4. the layout checker sees a dropped and a swapped member.
    for name, old, new in (
            ("dropped", "\t__u32 comp_vector; \\\n", ""),
            ("swapped", "\t__u32 cqe; \\\n\t__u32 comp_vector; \\\n",
             "\t__u32 comp_vector; \\\n\t__u32 cqe; \\\n")):
        copy = os.path.join(work, "tree-" + name)
        shutil.copytree(os.path.join(root, "include"), os.path.join(copy, "include"))
        shutil.copytree(os.path.join(root, "cmake"), os.path.join(copy, "cmake"))
        fields = os.path.join(copy, "include", "infiniband", "kern-abi-fields.h")
        text = open(fields).read()
        start = text.index("#define _OV_FIELDS_ib_uverbs_create_cq \\\n")
        end = text.index("#define _OV_ANON_ib_uverbs_create_cq ", start)
        block = text[start:end]
        if old not in block:
            check(False, "mutation %s applies to _OV_FIELDS_ib_uverbs_create_cq" % name)
            continue
        with open(fields, "w") as f:
            f.write(text[:start] + block.replace(old, new) + text[end:])
        p = run([sys.executable, os.path.join(root, "tests", "kabi", "check_layouts.py"),
                 "--source-root", copy, "--compiler", args.compiler, "--lang", "c",
                 "--workdir", os.path.join(copy, "work")])
        check(p.returncode == 1 and "ib_uverbs_create_cq" in p.stdout,
              "check_layouts.py fails on a %s member of ib_uverbs_create_cq" % name)

    if failures:
        print("FAIL: %d self-check(s) failed" % len(failures))
        return 1
    print("PASS: generator and layout checker behave as specified")
    return 0


if __name__ == "__main__":
    sys.exit(main())
