#!/usr/bin/env python3
"""Compile-time proof that kern-abi.h's field copies match the kernel structs.

    check_layouts.py --source-root <repo> --compiler gcc --lang c --workdir <dir>

Writes a translation unit of static assertions and compiles it (C11 or
C++17, -Wall -Wextra -Werror):

  * every `_OV_ANON_<struct>` of <infiniband/kern-abi-fields.h>, wrapped in
    a struct, has the uapi struct's size and alignment, and each member the
    uapi member's offset and size (so a member the derivation dropped or
    altered changes a number the compiler computes from the uapi header);
  * every request head `struct ibv_<cmd>` that kern-abi.h declares measures
    header + kernel struct, `core_payload` follows the header, and each
    kernel member named on the head (cmd.pd_handle) sits at header +
    the kernel's offset with the kernel's size; IBV_ABI_REQ(<enum>) is
    that head.

Member names come from the uapi headers through the generator's own parser;
offsets and sizes come from the compiler. Exit 0 = all hold, 1 = a check
failed (compiler output printed), 2 = tool failure.
"""

import argparse
import os
import re
import subprocess
import sys


def load_generator(root):
    sys.path.insert(0, os.path.join(root, "cmake"))
    import gen_kern_abi_fields  # noqa: E402
    return gen_kern_abi_fields


# Member-declaring macros of the uapi headers: the member name is the last
# argument; True when the member is an array without bound.
UAPI_MEMBER_MACROS = {"RDMA_UAPI_PTR": False, "RDMA_ATOMIC_UAPI": False,
                      "__DECLARE_FLEX_ARRAY": True}


def member_names(gen, stmt):
    """[(name, unbounded array?)] of one member declaration; bit-fields left out."""
    stmt = stmt.rstrip(";").strip()
    m = re.match(r'^(struct|union)\s*(__attribute__\s*\(\(.*?\)\)\s*)?\{(.*)\}\s*(.*)$', stmt, re.S)
    if m and not m.group(4).strip():
        out = []                                 # anonymous: its members join ours
        for inner in gen.split_members(m.group(3), "nested"):
            out += member_names(gen, inner)
        return out
    if m:
        stmt = "%s x %s" % (m.group(1), m.group(4))   # named nested aggregate: keep declarators
    call = re.match(r'^(\w+)\s*\((.*)\)$', stmt, re.S)
    if call:
        if call.group(1) not in UAPI_MEMBER_MACROS:
            raise SystemExit("MACHINERY ERROR: unknown member macro in %r" % stmt)
        return [(call.group(2).split(",")[-1].strip(), UAPI_MEMBER_MACROS[call.group(1)])]
    out = []
    for piece in stmt.split(","):
        d = re.search(r'(\w+)\s*((?:\[[^\]]*\]\s*)*)(:\s*\w+)?\s*$', piece.strip())
        if not d:
            raise SystemExit("MACHINERY ERROR: cannot read a declarator in %r" % stmt)
        if d.group(3):
            continue
        out.append((d.group(1), "[]" in d.group(2).replace(" ", "")))
    return out


DECL_RE = re.compile(r'^_OV_DECLARE_CMD(_EX)?\(\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*,', re.M)


def build_source(gen, root, uapi_dir):
    headers = gen.UAPI_HEADERS
    lines = ["#include <stddef.h>", "#include <infiniband/kern-abi.h>"]
    lines += ["#include <rdma/%s>" % h for h in headers]
    lines += ["#ifdef __cplusplus", "#define OV_SA static_assert", "#define OV_AL alignof",
              "#else", "#define OV_SA _Static_assert", "#define OV_AL _Alignof", "#endif",
              "#define OV_MSIZE(T, m) sizeof(((T *)0)->m)", ""]
    n_structs = n_asserts = 0
    members_of = {}
    for h in headers:
        for name, _attrs, members in gen.parse_header(os.path.join(uapi_dir, h)):
            names = []
            for stmt in members:
                names += member_names(gen, stmt)
            members_of[name] = names
            if not members:
                continue
            n_structs += 1
            w = "struct ov_w_%s" % name
            k = "struct %s" % name
            lines.append("%s { _OV_ANON_%s };" % (w, name))
            lines.append('OV_SA(sizeof(%s) == sizeof(%s), "%s: size");' % (w, k, name))
            lines.append('OV_SA(OV_AL(%s) == OV_AL(%s), "%s: alignment");' % (w, k, name))
            n_asserts += 2
            for m, unbounded in names:
                lines.append('OV_SA(offsetof(%s, %s) == offsetof(%s, %s), "%s.%s: offset");'
                             % (w, m, k, m, name, m))
                n_asserts += 1
                if not unbounded:
                    lines.append('OV_SA(OV_MSIZE(%s, %s) == OV_MSIZE(%s, %s), "%s.%s: size");'
                                 % (w, m, k, m, name, m))
                    n_asserts += 1
    with open(os.path.join(root, "include", "infiniband", "kern-abi.h"), encoding="utf-8") as f:
        kabi_text = f.read()
    heads = DECL_RE.findall(kabi_text)
    if not heads:
        raise SystemExit("MACHINERY ERROR: no _OV_DECLARE_CMD in kern-abi.h")
    lines.append("")
    lines.append('OV_SA(sizeof(struct ib_uverbs_cmd_hdr) == 8, "cmd_hdr");')
    lines.append('OV_SA(sizeof(struct ex_hdr) == 24, "ex_hdr");')
    lines.append('OV_SA(offsetof(struct ex_hdr, ex_hdr) == 8, "ex_hdr.ex_hdr");')
    n_asserts += 3
    for ex, enum, head, kabi in heads:
        hdr = "sizeof(struct ex_hdr)" if ex else "sizeof(struct ib_uverbs_cmd_hdr)"
        t = "struct %s" % head
        k = "struct %s" % kabi
        if kabi not in members_of:
            raise SystemExit("MACHINERY ERROR: %s uses %s, not in the uapi headers" % (head, kabi))
        lines.append('OV_SA(sizeof(%s) == %s + sizeof(%s), "%s: size");' % (t, hdr, k, head))
        lines.append('OV_SA(offsetof(%s, core_payload) == %s, "%s.core_payload");' % (t, hdr, head))
        lines.append('OV_SA(sizeof(IBV_ABI_REQ(%s)) == sizeof(%s), "IBV_ABI_REQ(%s)");'
                     % (enum, t, enum))
        n_asserts += 3
        for m, unbounded in members_of[kabi]:
            lines.append('OV_SA(offsetof(%s, %s) == %s + offsetof(%s, %s), "%s.%s: offset");'
                         % (t, m, hdr, k, m, head, m))
            n_asserts += 1
            if not unbounded:
                lines.append('OV_SA(OV_MSIZE(%s, %s) == OV_MSIZE(%s, %s), "%s.%s: size");'
                             % (t, m, k, m, head, m))
                n_asserts += 1
    return "\n".join(lines) + "\n", n_structs, len(heads), n_asserts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--source-root", required=True)
    ap.add_argument("--uapi-dir", default="/usr/include/rdma")
    ap.add_argument("--compiler", required=True)
    ap.add_argument("--lang", choices=("c", "c++"), required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    gen = load_generator(args.source_root)
    try:
        source, n_structs, n_heads, n_asserts = build_source(gen, args.source_root, args.uapi_dir)
    except gen.DeriveError as e:
        print("MACHINERY ERROR: %s" % e)
        return 2
    os.makedirs(args.workdir, exist_ok=True)
    ext = "c" if args.lang == "c" else "cpp"
    path = os.path.join(args.workdir, "kabi_layouts_%s.%s" % (os.path.basename(args.compiler), ext))
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    std = "-std=c11" if args.lang == "c" else "-std=c++17"
    cmd = [args.compiler, "-x", args.lang, std, "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
           "-I", os.path.join(args.source_root, "include"), path]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as e:
        print("MACHINERY ERROR: %s: %s" % (args.compiler, e))
        return 2
    if proc.returncode != 0:
        print("FAIL: %s (%s)\n%s" % (" ".join(cmd), path, proc.stdout[:20000]))
        return 1
    print("PASS: %d field lists and %d request heads, %d static assertions (%s %s)"
          % (n_structs, n_heads, n_asserts, args.compiler, std))
    return 0


if __name__ == "__main__":
    sys.exit(main())
