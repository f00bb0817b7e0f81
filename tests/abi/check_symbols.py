#!/usr/bin/env python3
"""Check a shared library's exported surface against the symbol tables.

    check_symbols.py --lib build/lib/libibverbs.so.1 --soname libibverbs.so.1
                     [--table src/facade/libibverbs.symbols] [--abi 44|56]
                     --debian tests/abi/debian-libibverbs.so.1.symbols
                     [--installed /usr/lib/x86_64-linux-gnu/libibverbs.so.1]

The library's dynamic symbol table (readelf --dyn-syms / -V) is normalised to
the format of Debian's lists:

    A NODE            a version node defined by the library
    T name@@NODE      a function, default version
    T name@NODE       a function, compat version
    B name@@NODE      a data object

and must equal
  * the project's table (--table), entry for entry, including each node's
    parent when the table names one; only the table's lines of ABI target
    --abi count (a line may end with "abi>=N", "abi<N" or "abi=N,M");
  * Debian's list, restricted to the version nodes Debian's list has (a
    missing, extra or re-versioned entry fails; extra entries are allowed only
    in nodes Debian does not have);
  * the installed Debian library (--installed, skipped when absent), the same
    way, plus each node's parent and the size of every data object (a copy
    relocation in a program depends on it).
It also checks the SONAME, BIND_NOW, that no C++ (_Z) symbol and no symbol
without a version is exported.  Exit status 0 = all good, 1 = differences
(each printed), 2 = the tool itself could not run.
"""

import argparse
import os
import re
import subprocess
import sys


class Surface:
    """Normalised exported surface of one library or table."""

    def __init__(self):
        self.entries = set()      # "T name@@NODE", "A NODE", ...
        self.parents = {}         # NODE -> parent NODE (when known)
        self.sizes = {}           # "name@@NODE" -> st_size for data objects
        self.unversioned = []     # exported names without a version
        self.bad_types = []       # exported symbols neither function nor object

    def nodes(self):
        return {e[2:] for e in self.entries if e.startswith("A ")}


def node_of(entry):
    """Version node of an entry ("A NODE" -> NODE, "T f@@NODE" -> NODE)."""
    if entry.startswith("A "):
        return entry[2:]
    return entry.rsplit("@", 1)[1]


def abi_condition_holds(cond, abi, where):
    """Evaluate a table line's target condition ("abi>=N", "abi<N",
    "abi=N[,M...]"), as cmake/OpenverbsAbiCondition.cmake does."""
    m = re.match(r"^abi(>=|<|=)([0-9]+(?:,[0-9]+)*)$", cond)
    if not m or (m.group(1) != "=" and "," in m.group(2)):
        raise SystemExit("%s: bad ABI target condition '%s'" % (where, cond))
    values = [int(v) for v in m.group(2).split(",")]
    if m.group(1) == ">=":
        return abi >= values[0]
    if m.group(1) == "<":
        return abi < values[0]
    return abi in values


def read_table(path, abi=None):
    """Read a table in Debian's list format (optionally "A NODE PARENT"),
    keeping the lines of ABI target `abi` (lines may end with a target
    condition; with abi None, a condition is an error: Debian's lists have
    none)."""
    s = Surface()
    with open(path) as f:
        raw_lines = list(enumerate(f, 1))
    # Node renames ("R OLD NEW cond") that hold for this target.
    renames = {}
    for number, raw in raw_lines:
        words = raw.split()
        if words and words[0] == "R":
            where = "%s:%d" % (path, number)
            if len(words) != 4 or abi is None:
                raise SystemExit("%s: cannot parse '%s'" % (where, raw.strip()))
            if abi_condition_holds(words[3], abi, where):
                renames[words[1]] = words[2]
    for number, raw in raw_lines:
        line = raw.strip()
        if not line or line.startswith("#") or line.split()[0] == "R":
            continue
        words = line.split()
        for old, new in renames.items():
            words = [new if w == old else re.sub(r"@%s$" % re.escape(old), "@" + new, w)
                     for w in words]
        if len(words) > 1 and words[-1].startswith("abi"):
            where = "%s:%d" % (path, number)
            if abi is None:
                raise SystemExit("%s: target condition without --abi" % where)
            if not abi_condition_holds(words[-1], abi, where):
                continue
            words = words[:-1]
        if words[0] == "A" and len(words) in (2, 3):
            s.entries.add("A " + words[1])
            if len(words) == 3:
                s.parents[words[1]] = words[2]
        elif words[0] in ("T", "B") and len(words) == 2 and "@" in words[1]:
            s.entries.add("%s %s" % (words[0], words[1]))
        else:
            raise SystemExit("%s:%d: cannot parse '%s'" % (path, number, line))
    return s


def run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        print("MACHINERY ERROR: %s: %s" % (" ".join(cmd), proc.stderr.strip()))
        sys.exit(2)
    return proc.stdout


_SYM = re.compile(r'^\s*\d+:\s+([0-9a-f]+)\s+(\d+|0x[0-9a-f]+)\s+(\w+)\s+(\w+)\s+(\w+)\s+(\S+)\s+(\S+)')
_VERDEF = re.compile(r'^\s*0x[0-9a-f]+: Rev: \d+\s+Flags: (\S+).*Name: (\S+)')
_PARENT = re.compile(r'^\s*0x[0-9a-f]+: Parent \d+: (\S+)')


def read_library(path):
    """Normalise the exported surface of an ELF shared object."""
    s = Surface()
    # Version definitions and their parents (the BASE entry is the soname).
    last = None
    for line in run(["readelf", "-V", "-W", path]).splitlines():
        m = _VERDEF.match(line)
        if m:
            last = None if "BASE" in m.group(1) else m.group(2)
            if last:
                s.entries.add("A " + last)
            continue
        m = _PARENT.match(line)
        if m and last and last not in s.parents:
            s.parents[last] = m.group(1)
    nodes = s.nodes()
    for line in run(["readelf", "--dyn-syms", "-W", path]).splitlines():
        m = _SYM.match(line)
        if not m:
            continue
        _value, size, typ, bind, _vis, ndx, name = m.groups()
        if ndx == "UND" or bind == "LOCAL":
            continue
        if ndx == "ABS" and typ == "OBJECT" and name.split("@")[0] in nodes:
            continue                       # the symbol naming a version node
        if "@" not in name:
            s.unversioned.append(name)
            continue
        if typ in ("FUNC", "IFUNC"):
            letter = "T"
        elif typ in ("OBJECT", "TLS", "COMMON"):
            letter = "B"
            s.sizes[name] = int(size, 0)
        else:
            s.bad_types.append("%s (%s)" % (name, typ))
            continue
        s.entries.add("%s %s" % (letter, name))
    return s


def read_dynamic(path):
    out = run(["readelf", "-d", "-W", path])
    soname = re.search(r'\(SONAME\)\s+Library soname: \[(.*)\]', out)
    bind_now = bool(re.search(r'\(FLAGS\)\s+.*\bBIND_NOW\b', out)) or \
        bool(re.search(r'\(FLAGS_1\)\s+Flags:.*\bNOW\b', out)) or \
        bool(re.search(r'\(BIND_NOW\)', out))
    return (soname.group(1) if soname else None), bind_now


class Problems:
    """Differences, merged when several references report the same one."""

    def __init__(self):
        self.items = {}          # message -> [which comparisons found it]

    def add(self, message, source=None):
        self.items.setdefault(message, [])
        if source and source not in self.items[message]:
            self.items[message].append(source)

    def lines(self):
        return ["%s%s" % (m, " (vs %s)" % ", ".join(s) if s else "")
                for m, s in self.items.items()]


def compare(problems, what, expected, actual, only_nodes=None):
    """Record every entry in one set and not the other (optionally per node)."""
    def keep(entry):
        return only_nodes is None or node_of(entry) in only_nodes
    missing = sorted(e for e in expected.entries - actual.entries if keep(e))
    extra = sorted(e for e in actual.entries - expected.entries if keep(e))
    # Present under another version: say so rather than missing + extra.
    def bare(e):
        return e.split()[0] + " " + e.split()[1].split("@")[0]
    extra_bare = {}
    for e in extra:
        extra_bare.setdefault(bare(e), []).append(e)
    for e in missing:
        moved = extra_bare.get(bare(e)) if not e.startswith("A ") else None
        if moved:
            problems.add("%s is exported as %s instead" % (e, ", ".join(moved)), what)
        else:
            problems.add("missing %s" % e, what)
    moved_targets = {m for e in missing if not e.startswith("A ")
                     for m in extra_bare.get(bare(e), [])}
    for e in extra:
        if e not in moved_targets:
            problems.add("extra %s" % e, what)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--lib", required=True, help="library under test")
    ap.add_argument("--soname", required=True)
    ap.add_argument("--table", help="the project's symbol table")
    ap.add_argument("--debian", required=True, help="Debian's symbol list")
    ap.add_argument("--installed", help="Debian's installed library (skipped if absent)")
    ap.add_argument("--abi", type=int, default=44,
                    help="ABI target: keeps the table lines of that target (default 44)")
    args = ap.parse_args()

    problems = Problems()
    debian = read_table(args.debian)
    table = None
    if args.table:
        if not os.path.isfile(args.table):
            problems.add("project table %s does not exist" % args.table)
        else:
            table = read_table(args.table, args.abi)
            # The table alone must already agree with Debian's list.
            compare(problems, "table against Debian list", debian, table, debian.nodes())

    if not os.path.isfile(args.lib):
        problems.add("library %s does not exist (not built?)" % args.lib)
        lib = None
    else:
        lib = read_library(args.lib)
        soname, bind_now = read_dynamic(args.lib)
        if soname != args.soname:
            problems.add("SONAME is %r, expected %r" % (soname, args.soname))
        if not bind_now:
            problems.add("not linked with BIND_NOW (-Wl,-z,now)")
        for e in sorted(lib.entries):
            if e.split()[1].startswith("_Z"):
                problems.add("C++ symbol exported: %s" % e)
        for name in sorted(lib.unversioned):
            problems.add("exported without a version: %s" % name)
        for name in sorted(lib.bad_types):
            problems.add("exported symbol of unexpected type: %s" % name)
        if table is not None:
            compare(problems, "table", table, lib)
            for node, parent in sorted(table.parents.items()):
                if node in lib.nodes() and lib.parents.get(node) != parent:
                    problems.add("node %s has parent %s, table says %s"
                                 % (node, lib.parents.get(node), parent))
        compare(problems, "Debian list", debian, lib, debian.nodes())

    if args.installed and os.path.isfile(args.installed) and lib is not None:
        inst = read_library(args.installed)
        compare(problems, "installed library", inst, lib, inst.nodes())
        for node in sorted(inst.nodes()):
            if table is not None and node in table.parents and \
                    table.parents[node] == lib.parents.get(node):
                continue        # reported once, against the table, below
            if node in lib.nodes() and lib.parents.get(node) != inst.parents.get(node):
                problems.add("node %s: parent %s, installed Debian library has %s"
                                % (node, lib.parents.get(node), inst.parents.get(node)))
        if table is not None:
            for node in sorted(inst.nodes()):
                if node in table.parents and table.parents[node] != inst.parents.get(node):
                    problems.add("table: node %s has parent %s, installed Debian library has %s"
                                    % (node, table.parents[node], inst.parents.get(node)))
        for name, size in sorted(inst.sizes.items()):
            if name in lib.sizes and lib.sizes[name] != size:
                problems.add("data object %s: size %d, installed Debian library %d"
                                % (name, lib.sizes[name], size))
    elif args.installed:
        print("note: %s not present, installed-library comparison skipped" % args.installed)

    label = args.lib
    if lib is not None:
        print("%s: %d entries in %d version nodes" % (label, len(lib.entries), len(lib.nodes())))
    if problems.items:
        print("DIFFERENCES (%d):" % len(problems.items))
        for p in problems.lines():
            print("  " + p)
        print("FAIL")
        return 1
    print("PASS: symbol set, versions, SONAME and BIND_NOW match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
