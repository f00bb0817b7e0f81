#!/usr/bin/env python3
"""Derive <infiniband/kern-abi-fields.h> from the kernel's uapi headers.

    gen_kern_abi_fields.py [--uapi-dir /usr/include/rdma] --output FILE
    gen_kern_abi_fields.py [--uapi-dir /usr/include/rdma] --check FILE

For every top-level `struct NAME { ... };` of the uapi headers listed in
UAPI_HEADERS, the generated header defines

    _OV_FIELDS_NAME   the struct's member declarations, token for token as
                      the uapi header writes them (its own types, array
                      bounds and nested anonymous unions), comments and
                      layout of the text dropped;
    _OV_ANON_NAME     `struct <attributes> { _OV_FIELDS_NAME };`: an
                      anonymous struct with the same members and the same
                      packing/alignment attributes as the uapi struct.

kern-abi.h puts _OV_ANON_<kernel struct> next to `core_payload` in every
request head, and DECLARE_DRV_CMD puts _OV_ANON_<driver struct> next to
`drv_payload`, so that code can name the kernel's and the driver's fields
directly on the request (cmd.pd_handle), as in rdma-core 44.

The output depends only on the uapi headers' content (not on their path or
on the date), so the file is committed and a test (tests/kabi) runs this
script with --check against the system's linux-libc-dev: any difference
fails and is printed as a unified diff.  Regenerate with
    python3 cmake/gen_kern_abi_fields.py --output include/infiniband/kern-abi-fields.h

A provider built out of tree against a uapi header not listed here can run
this script on that header (--headers) or define _OV_ANON_<name> itself.

Exit status: 0 written / up to date, 1 out of date (--check), 2 the input
cannot be derived mechanically (a construct this script does not know).
"""

import argparse
import difflib
import os
import re
import sys

# The uverbs core header and the per-driver ABI headers of linux-libc-dev
# whose structs providers pass to DECLARE_DRV_CMD.
UAPI_HEADERS = [
    "ib_user_verbs.h",
    "bnxt_re-abi.h",
    "cxgb4-abi.h",
    "efa-abi.h",
    "erdma-abi.h",
    "hns-abi.h",
    "irdma-abi.h",
    "mlx4-abi.h",
    "mlx5-abi.h",
    "mthca-abi.h",
    "ocrdma-abi.h",
    "qedr-abi.h",
    "rdma_user_rxe.h",
    "rvt-abi.h",
    "siw-abi.h",
    "vmw_pvrdma-abi.h",
]

OUTPUT_NAME = "kern-abi-fields.h"


class DeriveError(Exception):
    pass


def strip_comments(text):
    """Drop /* */ and // comments; keep line structure for error messages."""
    def blank(m):
        return re.sub(r'[^\n]', ' ', m.group(0))
    text = re.sub(r'/\*.*?\*/', blank, text, flags=re.S)
    return re.sub(r'//[^\n]*', '', text)


def drop_preprocessor(text, header):
    """Remove preprocessor lines (with their continuations) outside braces.

    A directive inside a struct body would make the member list depend on
    configuration; that is refused rather than guessed."""
    out, depth, cont = [], 0, False
    for lineno, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if cont or stripped.startswith("#"):
            if depth:
                raise DeriveError("%s:%d: preprocessor line inside a braced body"
                                  % (header, lineno))
            cont = stripped.endswith("\\")
            out.append("")
            continue
        depth += line.count("{") - line.count("}")
        out.append(line)
    return "\n".join(out)


def normalize(text):
    """One statement on one line: single spaces, none inside brackets."""
    text = re.sub(r'\s+', ' ', text).strip()
    text = re.sub(r'\s*([\[\](),;])\s*', r'\1', text)
    text = re.sub(r',', ', ', text)
    text = re.sub(r'\s*([{}])\s*', r' \1 ', text)
    text = re.sub(r'\s+', ' ', text).strip()
    text = re.sub(r';(?=\S)', '; ', text)
    return re.sub(r'\} ;', '};', text)


def split_members(body, where):
    """Top-level member declarations of a struct body, each ending in ';'."""
    members, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        if ch in "{(":
            depth += 1
        elif ch in "})":
            depth -= 1
            if depth < 0:
                raise DeriveError("%s: unbalanced braces" % where)
        elif ch == ";" and depth == 0:
            stmt = normalize(body[start:i + 1])
            if stmt != ";":
                members.append(stmt)
            start = i + 1
    if body[start:].strip():
        raise DeriveError("%s: text after the last member: %r" % (where, body[start:].strip()))
    return members


STRUCT_RE = re.compile(r'\b(struct|union|enum)\s+(\w+)\s*\{|\{')
ATTR_RE = re.compile(r'^(__attribute__\s*\(\(.*\)\)\s*)+$', re.S)


def parse_header(path):
    """[(struct name, attributes or '', [member declarations])] in file order."""
    header = os.path.basename(path)
    with open(path, encoding="utf-8") as f:
        text = drop_preprocessor(strip_comments(f.read()), header)
    found, pos = [], 0
    while True:
        m = STRUCT_RE.search(text, pos)
        if not m:
            break
        open_at = m.end() - 1
        depth, i = 0, open_at
        while True:
            if i >= len(text):
                raise DeriveError("%s: unterminated braces at offset %d" % (header, open_at))
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        body = text[open_at + 1:i]
        semi = text.find(";", i)
        trailer = text[i + 1:semi].strip()
        pos = semi + 1
        if m.group(1) != "struct":
            continue                      # enums, unions, function bodies: not ours
        name = m.group(2)
        where = "%s: struct %s" % (header, name)
        if re.search(r'\b(struct|union|enum)\s+\w+\s*\{', body):
            raise DeriveError("%s: defines a named type inside its body" % where)
        if trailer and not ATTR_RE.match(trailer):
            raise DeriveError("%s: unexpected text after the body: %r" % (where, trailer))
        attrs = normalize(trailer) if trailer else ""
        found.append((name, attrs, split_members(body, where)))
    return found


def generate(uapi_dir, headers):
    lines = [
        "/*",
        " * openverbs: member lists of the kernel's uverbs and driver ABI structs.",
        " *",
        " * GENERATED by cmake/gen_kern_abi_fields.py from the kernel uapi headers",
        " * of linux-libc-dev (<rdma/ib_user_verbs.h> and the driver ABI headers named",
        " * below); do not edit. tests/kabi checks that it matches the installed",
        " * headers.",
        " *",
        " * _OV_FIELDS_<struct>: the struct's members as the uapi header declares them.",
        " * _OV_ANON_<struct>: an anonymous struct with those members and the uapi",
        " * struct's attributes, used by <infiniband/kern-abi.h> so that a request",
        " * can name the kernel's (and the driver's) fields directly. The types and",
        " * constants named here come from the uapi header, which the user of a macro",
        " * includes (kern-abi.h includes <rdma/ib_user_verbs.h>).",
        " */",
        "#ifndef INFINIBAND_KERN_ABI_FIELDS_H",
        "#define INFINIBAND_KERN_ABI_FIELDS_H",
    ]
    seen = {}
    for h in headers:
        path = os.path.join(uapi_dir, h)
        if not os.path.exists(path):
            raise DeriveError("%s: not found (is linux-libc-dev installed?)" % path)
        lines += ["", "/* <rdma/%s> */" % h]
        for name, attrs, members in parse_header(path):
            if name in seen:
                raise DeriveError("struct %s defined by both %s and %s" % (name, seen[name], h))
            seen[name] = h
            lines.append("")
            if members:
                lines.append("#define _OV_FIELDS_%s \\" % name)
                for k, m in enumerate(members):
                    lines.append("\t%s%s" % (m, " \\" if k + 1 < len(members) else ""))
            else:
                lines.append("#define _OV_FIELDS_%s" % name)
            anon = "struct %s{ _OV_FIELDS_%s };" % (attrs + " " if attrs else "", name)
            lines.append("#define _OV_ANON_%s %s" % (name, anon))
    lines += ["", "#endif /* INFINIBAND_KERN_ABI_FIELDS_H */", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--uapi-dir", default="/usr/include/rdma")
    ap.add_argument("--headers", default=",".join(UAPI_HEADERS),
                    help="comma-separated basenames under --uapi-dir")
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--output", help="write the generated header here")
    group.add_argument("--check", help="compare this file with a fresh generation")
    args = ap.parse_args()
    try:
        text = generate(args.uapi_dir, [h for h in args.headers.split(",") if h])
    except (DeriveError, OSError, UnicodeDecodeError) as e:
        print("gen_kern_abi_fields: cannot derive: %s" % e, file=sys.stderr)
        return 2
    if args.output:
        tmp = args.output + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, args.output)
        return 0
    try:
        with open(args.check, encoding="utf-8") as f:
            have = f.read()
    except OSError as e:
        print("FAIL: cannot read %s: %s" % (args.check, e))
        return 1
    if have == text:
        print("PASS: %s matches a fresh derivation from %s (%s)"
              % (args.check, args.uapi_dir, args.headers.replace(",", " ")))
        return 0
    diff = difflib.unified_diff(have.splitlines(True), text.splitlines(True),
                                fromfile=args.check, tofile="derived from " + args.uapi_dir)
    print("FAIL: %s differs from the uapi headers; regenerate with\n"
          "  python3 cmake/gen_kern_abi_fields.py --uapi-dir %s --output %s"
          % (args.check, args.uapi_dir, args.check))
    sys.stdout.writelines(diff)
    return 1


if __name__ == "__main__":
    sys.exit(main())
