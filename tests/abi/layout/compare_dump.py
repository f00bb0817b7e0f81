#!/usr/bin/env python3
"""Compare our headers' layouts with rdma-core 44's abi-dumper file.

    compare_dump.py --dump tests/abi/reference/ibverbs.dump --ours <repo>/include
                    --headers driver.h,kern-abi.h,... --workdir <dir>
                    [--debian-root /usr/include --debian-headers verbs.h,...]

The dump (Perl data written by abi-dumper from rdma-core's stable-v44 build)
holds in TypeInfo every type reachable from an exported symbol, with its
members, offsets and size.  For every struct/union of the dump that our
headers also define, this checks

  * the size;
  * the direct members, by name and in order (abi-dumper calls an anonymous
    member "unnamedN"; ours are matched as anonymous), hence their count;
  * every member reached through the record, nested anonymous members
    flattened to C access paths as in compare_layouts.py: offset and size;
and for every enum of the dump, each constant's value.

Records of the dump that only the provider-facing headers can supply (not in
Debian's public headers, not libc or kernel uapi, not rdma-core internals)
are required: if our headers lack one, that fails too.

Two properties of this particular dump are handled explicitly:
  * its member offsets were written by abi-dumper 1.2 reading a newer
    elfutils, which prints data_member_location in decimal where abi-dumper
    expects hex: offset 664 is stored as 0x664 = 1636.  The script detects
    this (no stored offset has a hex digit above 9 once printed in hex) and
    decodes it; the decoding is reported.
  * bit-field members are absent from the dump, so bit-fields are left out
    of the member lists on our side too (the record size still covers them);
    their placement is compared with --bitfields (reference/bitfields.txt,
    from the project's facts notes) instead, and a bit-field listed nowhere
    fails.

Exit status 0 = all match, 1 = differences (all printed), 2 = tool failure.
"""

import argparse
import difflib
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import headerscan        # noqa: E402
import compare_layouts   # noqa: E402
import probe             # noqa: E402

# Dump records that are not ours to provide: libc, kernel uapi (taken from
# linux-libc-dev by #include on both sides), rdma-core internals and the
# 1.0 compatibility structs private to its compat layer, and ccan's
# list_node (its layout is checked as part of struct verbs_device).
NOT_REQUIRED = re.compile(r'^(struct|union) (timespec|ib_uverbs_.*|ib_user_.*|'
                          r'verbs_ex_private|.*_1_0|_compat_ibv_port_attr|list_node|'
                          r'__pthread_\w+|pthread_\w+_t|__atomic_wide_counter|ibv_dmabuf_heap)$')

# abi-dumper names an unnamed struct/union after where it is written
# ("anon-struct-verbs.h-1203") in dumps of newer toolchains (the anchor of the
# 64 target); older dumps leave it nameless. Both mean "anonymous".
ANON_NAME = re.compile(r'^anon-(struct|union)-')


def load_typeinfo(path):
    """TypeInfo of an abi-dumper file, through perl (the file is Perl code)."""
    script = ('use JSON::PP; my $d = do $ARGV[0]; die "cannot load $ARGV[0]: $@ $!\\n" '
              'unless $d; print JSON::PP->new->canonical->encode($d->{TypeInfo});')
    proc = subprocess.run(["perl", "-e", script, os.path.abspath(path)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise SystemExit("MACHINERY ERROR: %s" % proc.stderr.strip())
    return json.loads(proc.stdout)


class Dump:
    def __init__(self, types):
        self.types = types
        self.by_name = {}
        for tid, t in types.items():
            if t.get("Name") and t.get("Type") in ("Struct", "Union", "Enum") and \
                    not ANON_NAME.match(t["Name"]):
                # Keep the definition with members when a name appears twice.
                old = self.by_name.get(t["Name"])
                if old is None or (not types[old].get("Memb") and t.get("Memb")):
                    self.by_name[t["Name"]] = tid
        offsets = [int(m["offset"]) for t in types.values()
                   for m in t.get("Memb", {}).values()
                   if isinstance(m, dict) and m.get("offset") not in (None, "")]
        # Decimal-read-as-hex: every stored value is hex of a decimal string.
        self.hex_misread = all(re.fullmatch(r'[0-9]+', "%x" % o) for o in offsets) and \
            any("%x" % o != str(o) for o in offsets)

    def offset(self, member):
        raw = member.get("offset")
        if raw in (None, ""):
            return None
        value = int(raw)
        return int("%x" % value) if self.hex_misread else value

    def size(self, tid):
        t = self.types.get(str(tid), {})
        if t.get("Type") == "Array" and t.get("Name", "").endswith("[]"):
            return None     # unknown bound (x[] or x[0]): abi-dumper's size is bogus
        return int(t["Size"]) if t.get("Size") not in (None, "") else None

    def anonymous_record(self, tid):
        """(record type id, array suffix) if tid is an unnamed struct/union."""
        t = self.types.get(str(tid), {})
        suffix = ""
        while t.get("Type") == "Array":
            suffix += "[0]"
            tid = t.get("BaseType")
            t = self.types.get(str(tid), {})
        if t.get("Type") in ("Struct", "Union") and (not t.get("Name") or ANON_NAME.match(t["Name"])):
            return str(tid), suffix
        return None, None

    def members(self, tid):
        memb = self.types[str(tid)].get("Memb", {})
        return [memb[k] for k in sorted(memb, key=int)]

    def direct_names(self, tid):
        return ["" if re.fullmatch(r'unnamed\d+', m["name"]) else m["name"]
                for m in self.members(tid)]

    def flatten(self, tid, prefix="", base=0, out=None):
        """{C access path: (offset, size)} for every member of a record."""
        out = {} if out is None else out
        for m in self.members(tid):
            off = self.offset(m)
            off = None if off is None or base is None else base + off
            inner, suffix = self.anonymous_record(m["type"])
            if re.fullmatch(r'unnamed\d+', m["name"]) and inner:
                self.flatten(inner, prefix, off, out)
                continue
            path = prefix + m["name"]
            out[path] = (off, self.size(m["type"]))
            if inner:
                self.flatten(inner, path + suffix + ".", off, out)
        return out


def parse_facts(text):
    return dict(kv.split("=", 1) for kv in text.split() if "=" in kv)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--dump", required=True)
    ap.add_argument("--ours", required=True, help="our include root")
    ap.add_argument("--headers", required=True, help="comma-separated basenames to read")
    ap.add_argument("--debian-root", default="/usr/include",
                    help="Debian's include root, to tell public records from provider ones")
    ap.add_argument("--debian-headers", default="",
                    help="Debian's public headers (comma-separated basenames)")
    ap.add_argument("--bitfields", help="expected bit-field placements (the dump has none)")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--clang", default="clang")
    args = ap.parse_args()

    dump = Dump(load_typeinfo(args.dump))
    headers = [h for h in args.headers.split(",") if h]
    problems, notes = [], []
    try:
        ours = headerscan.scan(args.ours, headers, args.workdir, args.clang, "dump-ours")
    except headerscan.ScanError as e:
        print("FAIL: our headers do not compile together:\n%s" % e)
        return 1
    for h in ours.missing:
        problems.append("header missing: infiniband/%s" % h)

    public = set()
    if args.debian_headers:
        deb = headerscan.scan(args.debian_root, args.debian_headers.split(","),
                              args.workdir, args.clang, "dump-debian")
        public = set(deb.records)

    dump_records = sorted(n for n, tid in dump.by_name.items()
                          if dump.types[tid]["Type"] in ("Struct", "Union"))
    common = [n for n in dump_records if n in ours.records]
    for name in dump_records:
        if name not in ours.records:
            if name in public or NOT_REQUIRED.match(name):
                notes.append("not defined by our headers (not required here): " + name)
            else:
                problems.append("%s: in rdma-core's dump, not defined by our headers" % name)

    # Measure what we need with the generated program (ours only).
    keys = []
    for name in common:
        rec = ours.records[name]
        keys.append("record " + name)
        keys += ["field %s.%s" % (name, f.path) for f in rec.fields if not f.bitfield]
    # Bit-fields: the dump has none; compare with the listed expectations.
    expected_bits = {}
    if args.bitfields:
        with open(args.bitfields) as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    where, mask = line.rsplit(None, 1)
                    expected_bits[where] = mask
    bit_keys = ["%s.%s" % (name, f.path) for name in common
                for f in ours.records[name].fields if f.bitfield]
    keys += ["field " + k for k in bit_keys]
    enum_names = sorted(n for n, tid in dump.by_name.items()
                        if dump.types[tid]["Type"] == "Enum")
    for ename in enum_names:
        for m in dump.members(dump.by_name[ename]):
            if m["name"] in ours.enumerators:
                keys.append("enumerator " + m["name"])
    try:
        facts, failed = compare_layouts.measure(keys, {"ours": ours}, ours.present, args.workdir)
    except probe.ProbeError as e:
        print("MACHINERY ERROR: %s" % e)
        return 2
    facts, failed = facts["ours"], failed["ours"]

    for name in common:
        rec = ours.records[name]
        tid = dump.by_name[name]
        if not rec.complete:
            if NOT_REQUIRED.match(name):
                notes.append("opaque in our headers, as intended: " + name)
            else:
                problems.append("%s: only declared (incomplete) in our headers" % name)
            continue
        got = facts.get("record " + name)
        if got is None:
            problems.append("%s: cannot measure: %s" % (name, failed.get("record " + name)))
            continue
        size = int(parse_facts(got)["size"])
        if dump.size(tid) is not None and size != dump.size(tid):
            problems.append("%s: size %d, rdma-core %d" % (name, size, dump.size(tid)))
        want = dump.direct_names(tid)
        have = [n for n, field, _leaves in rec.direct if field is None or not field.bitfield]
        if want != have:
            diff = [d for d in difflib.ndiff(want, have) if d[0] in "+-"]
            problems.append("%s: direct members differ (%d in rdma-core, %d ours; '' = "
                            "anonymous): %s" % (name, len(want), len(have), ", ".join(
                                "%s'%s'" % ("missing " if d[0] == "-" else "extra ", d[2:])
                                for d in diff)))
        flat = dump.flatten(tid)
        ours_paths = {f.path for f in rec.fields if not f.bitfield}
        for path, (off, msize) in flat.items():
            if path not in ours_paths:
                problems.append("%s.%s: in rdma-core, not in ours" % (name, path))
                continue
            text = facts.get("field %s.%s" % (name, path))
            if text is None:
                problems.append("%s.%s: cannot measure: %s"
                                % (name, path, failed.get("field %s.%s" % (name, path))))
                continue
            f = parse_facts(text)
            if off is not None and int(f["offset"]) != off:
                problems.append("%s.%s: offset %s, rdma-core %d" % (name, path, f["offset"], off))
            if msize is not None and "size" in f and int(f["size"]) != msize:
                problems.append("%s.%s: size %s, rdma-core %d" % (name, path, f["size"], msize))
        for path in sorted(ours_paths - set(flat)):
            problems.append("%s.%s: ours only, not in rdma-core" % (name, path))

    for key in bit_keys:
        text = facts.get("field " + key)
        got = parse_facts(text).get("bitmask") if text else None
        if key not in expected_bits:
            problems.append("%s: bit-field (%s) that neither the dump nor %s covers"
                            % (key, got, args.bitfields))
        elif got != expected_bits[key]:
            problems.append("%s: occupies %s, rdma-core %s" % (key, got, expected_bits[key]))
    for key in sorted(set(expected_bits) - set(bit_keys)):
        if key.rsplit(".", 1)[0] in ours.records:
            problems.append("%s: expected bit-field missing in ours" % key)

    checked_enums = 0
    for ename in enum_names:
        for m in dump.members(dump.by_name[ename]):
            value = m["value"]
            paren = re.search(r'\((-?\d+)\)', value)
            value = int(paren.group(1)) if paren else int(value)
            text = facts.get("enumerator " + m["name"])
            if m["name"] not in ours.enumerators:
                if ename in ("enum " + e for e in ours.enums):
                    problems.append("%s: %s missing" % (ename, m["name"]))
                continue
            checked_enums += 1
            if text is None or int(parse_facts(text)["value"]) != value:
                problems.append("%s: %s = %s, rdma-core %d" % (ename, m["name"],
                                parse_facts(text).get("value") if text else "?", value))

    print("dump comparison: %s against %s" % (args.ours, args.dump))
    print("  member offsets stored %s" % ("as decimal read as hex (decoded)"
                                          if dump.hex_misread else "as plain numbers"))
    print("  %d records compared (%s), %d enum constants compared"
          % (len(common), " ".join(n.split(" ", 1)[1] for n in common), checked_enums))
    print("  %d bit-fields compared with %s" % (len(bit_keys), args.bitfields))
    print("EXCLUSIONS: records listed below")
    by_kind = {}
    for n in notes:
        kind, _sep, what = n.partition(": ")
        by_kind.setdefault(kind, []).append(what)
    for kind, names in by_kind.items():
        print("NOTE: %s (%d): %s" % (kind, len(names), " ".join(
            x.split(" ", 1)[1] for x in names)))
    if problems:
        print("DIFFERENCES (%d):" % len(problems))
        for p in problems:
            print("  " + p)
        print("FAIL")
        return 1
    print("PASS: every compared record and enum matches the dump")
    return 0


if __name__ == "__main__":
    sys.exit(main())
