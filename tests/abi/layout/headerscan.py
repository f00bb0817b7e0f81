"""Inventory of what a set of C headers declares, read from clang itself.

Used by compare_layouts.py (our headers against Debian's) and by
compare_dump.py (our headers against rdma-core's abi-dumper file).

One "side" is an include root (a folder holding infiniband/<name>.h).  For a
side we compile one translation unit that includes every requested header
that exists there, and ask clang for

  * the JSON AST (-Xclang -ast-dump=json): records (struct/union, with nested
    and anonymous members), enums and their constants, typedefs, functions
    and global variables;
  * the preprocessed output with definitions kept in place (-E -dD): every
    macro and whether it is object-like or function-like;
  * the dependency list of each header compiled alone (-M): which files a
    header pulls in, so that a name declared in a helper header still counts
    as "provided by" the header that includes it.

Every declaration is attributed to the file it is written in; only files
under <root>/infiniband/ count, and the kernel uapi headers under
/usr/include/rdma/ (the project takes kernel structs from linux-libc-dev by
#include, so a public header may provide names through them).  Nothing here
knows about verbs or umad.
"""

import json
import os
import re
import subprocess
import sys

sys.setrecursionlimit(200000)


class ScanError(Exception):
    """clang could not process a side's headers (message holds its output)."""


class Field:
    """One member of a record, addressed by its C access path.

    path:     "a", "u.b", "arr[0].c" (anonymous members add no component)
    bitfield: True for bit-fields (no offsetof possible)
    flexible: True for a flexible array member (no sizeof possible)
    qualtype: clang's spelling of the type (informational only)
    """

    def __init__(self, path, bitfield, flexible, qualtype):
        self.path = path
        self.bitfield = bitfield
        self.flexible = flexible
        self.qualtype = qualtype


class Record:
    """A struct or union that C code can name.

    cname:   how C refers to it: "struct ibv_qp", "union ibv_gid", or the
             typedef name of an anonymous record.
    file:    header (basename) that declares it.
    complete: False for a forward declaration only.
    fields:  list of Field, in declaration order, nested members flattened.
    direct:  the record's direct members in order, as (name, Field-or-None,
             [leaf paths]) tuples; an anonymous member has name "".  Used to
             compare against abi-dumper, which lists direct members only.
    """

    def __init__(self, cname, file):
        self.cname = cname
        self.file = file
        self.complete = False
        self.fields = []
        self.direct = []


class Inventory:
    """Everything one side declares, keyed by the names C uses."""

    def __init__(self, root):
        self.root = root
        self.present = []        # requested headers that exist on this side
        self.missing = []        # requested headers that do not
        self.records = {}        # cname -> Record
        self.enums = {}          # "enum X" -> file
        self.enumerators = {}    # NAME -> file
        self.typedefs = {}       # NAME -> file
        self.typedef_types = {}  # NAME -> clang's spelling of the aliased type
        self.functions = {}      # NAME -> (file, dict of facts)
        self.function_types = {} # NAME -> clang's spelling of its type
        self.variables = {}      # NAME -> file
        self.macros = {}         # NAME -> (file, "object"|"function", body)
        self.closure = {}        # header -> set of infiniband/ files it includes
        self.leaks = []          # files used from outside this side's root

    def names(self):
        """All declared names as "kind name" strings, with their file."""
        out = {}
        for cname, rec in self.records.items():
            out["record " + cname] = rec.file
            for f in rec.fields:
                out["field %s.%s" % (cname, f.path)] = rec.file
        for kind, table in (("enum", self.enums),
                            ("enumerator", self.enumerators),
                            ("typedef", self.typedefs),
                            ("variable", self.variables)):
            for name, file in table.items():
                out["%s %s" % (kind, name)] = file
        for name, (file, _facts) in self.functions.items():
            out["function " + name] = file
        for name, (file, _kind, _body) in self.macros.items():
            out["macro " + name] = file
        return out


def _run(cmd, what):
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    except OSError as e:
        raise ScanError("%s: cannot run %s: %s" % (what, cmd[0], e))
    if proc.returncode != 0:
        raise ScanError("%s failed (%s):\n%s" % (what, " ".join(cmd),
                                                  proc.stderr.strip()))
    return proc.stdout


def _include_args(root):
    # /usr/include is a system directory already; naming it with -I would
    # only demote it, so it is left implicit.
    if os.path.realpath(root) == "/usr/include":
        return []
    return ["-I", root]


# Kernel uapi headers (linux-libc-dev) that the public headers may include to
# provide declarations: what they declare counts, labelled "rdma/<name>".
UAPI_DIR = os.path.realpath("/usr/include/rdma")


def header_path(h):
    """Path under an include root of a requested header: a bare basename is
    one of infiniband/; "rdma/<name>" (librdmacm's headers) is taken as is."""
    return h if "/" in h else "infiniband/" + h


def side_dirs(root, sub):
    """Real folders that hold the headers of root/sub (sub: "infiniband" or
    "rdma"): the folder itself and, for a staged tree of symbolic links (a
    build tree's include/ beside its generated openverbs_abi.h), the folders
    the links point into.  clang reports real paths."""
    top = os.path.join(root, sub)
    dirs = {os.path.realpath(top)}
    if os.path.isdir(top):
        for name in os.listdir(top):
            if name.endswith(".h"):
                dirs.add(os.path.dirname(os.path.realpath(os.path.join(top, name))))
    return frozenset(dirs)


class SideDirs:
    """The real folders of one side's infiniband/ and rdma/ headers."""

    def __init__(self, root):
        self.infiniband = side_dirs(root, "infiniband")
        self.rdma = side_dirs(root, "rdma")


def owner_of(path, wanted_dir):
    """Label of the header a declaration belongs to, or None to ignore it.

    wanted_dir is the side's SideDirs.  A header of the side's infiniband/
    folder is labelled by its basename; one of the side's rdma/ folder
    (librdmacm's public headers) and a kernel uapi header by
    "rdma/<basename>" (Debian installs both kinds in the one folder
    /usr/include/rdma); anything else is ignored.
    """
    if not path:
        return None
    real = os.path.realpath(path)
    folder = os.path.dirname(real)
    if folder in wanted_dir.infiniband:
        return os.path.basename(real)
    if folder == UAPI_DIR or folder in wanted_dir.rdma:
        return "rdma/" + os.path.basename(real)
    return None


def _annotate_files(tree):
    """Store in every declaration node the file it appears in ("_file").

    clang writes a location's "file" only when it differs from the previous
    location it printed, so the current file is a running state that has to
    be followed through the whole document in order.  For a location inside
    a macro expansion the declaration belongs where the macro is expanded.
    """
    current = [None]

    def bare(loc):
        if isinstance(loc, dict) and "file" in loc:
            current[0] = loc["file"]

    def walk(obj):
        if isinstance(obj, list):
            for value in obj:
                walk(value)
            return
        if not isinstance(obj, dict):
            return
        decl_file = None
        for key, value in obj.items():
            if key == "loc" and isinstance(value, dict):
                if "spellingLoc" in value or "expansionLoc" in value:
                    bare(value.get("spellingLoc"))
                    bare(value.get("expansionLoc"))
                else:
                    bare(value)
                decl_file = current[0]
            elif key == "includedFrom":
                continue        # names the includer; not a location
            elif key in ("begin", "end", "spellingLoc", "expansionLoc"):
                walk(value)
                bare(value)
            elif isinstance(value, (dict, list)):
                walk(value)
            elif key == "file":
                current[0] = value
        if decl_file is not None:
            obj["_file"] = decl_file

    walk(tree)


class _AstReader:
    """Turns the (file-annotated) JSON AST of one side into an Inventory."""

    def __init__(self, inv, wanted_dir):
        self.inv = inv
        self.wanted_dir = wanted_dir   # SideDirs of the side

    def header_of(self, path):
        return owner_of(path, self.wanted_dir)

    def read(self, tu):
        _annotate_files(tu)
        pending_anon = None      # an unnamed top-level record awaiting its typedef
        for node in tu.get("inner", []):
            header = self.header_of(node.get("_file"))
            kind = node.get("kind")
            if header is None or node.get("isImplicit"):
                pending_anon = None
                continue
            if kind == "RecordDecl":
                if node.get("name"):
                    self._record(node, "%s %s" % (node["tagUsed"], node["name"]), header)
                    pending_anon = None
                else:
                    pending_anon = node
                continue
            if kind == "TypedefDecl":
                qual = node.get("type", {}).get("qualType", "")
                if pending_anon is not None and ("unnamed" in qual or "anonymous" in qual):
                    # typedef struct { ... } name;  C names it by the typedef.
                    self._record(pending_anon, node["name"], header)
                self.inv.typedefs[node["name"]] = header
                self.inv.typedef_types[node["name"]] = qual
            elif kind == "EnumDecl":
                self._enum(node, header)
            elif kind == "FunctionDecl":
                self._function(node, header)
            elif kind == "VarDecl":
                self.inv.variables[node["name"]] = header
            pending_anon = None

    def _enum(self, node, header):
        if node.get("name"):
            self.inv.enums[node["name"]] = header
        for child in node.get("inner", []):
            if child.get("kind") == "EnumConstantDecl":
                self.inv.enumerators[child["name"]] = header

    def _function(self, node, header):
        params = [c for c in node.get("inner", []) if c.get("kind") == "ParmVarDecl"]
        facts = {
            "params": len(params),
            "variadic": bool(node.get("variadic")),
            "inline": bool(node.get("inline")),
            "static": node.get("storageClass") == "static",
        }
        old = self.inv.functions.get(node["name"])
        if old is not None:
            # A later definition may add "inline"; keep what any decl said.
            for key in ("inline", "static"):
                facts[key] = facts[key] or old[1][key]
        self.inv.functions[node["name"]] = (header, facts)
        self.inv.function_types[node["name"]] = node.get("type", {}).get("qualType", "")

    def _record(self, node, cname, header):
        rec = self.inv.records.get(cname)
        if rec is None:
            rec = Record(cname, header)
            self.inv.records[cname] = rec
        if not node.get("completeDefinition"):
            return
        rec.complete = True
        rec.file = header
        rec.fields = []
        rec.direct = []
        self._members(node, "", rec, rec.direct)

    def _members(self, node, prefix, rec, direct):
        """Flatten the members of node into rec.fields (paths after prefix).

        direct, when not None, receives node's own members for the dump
        comparison.  An unnamed record followed by the field using it is how
        C writes "struct { ... } name;" and "union { ... };".
        """
        pending_anon = None
        for child in node.get("inner", []):
            kind = child.get("kind")
            if kind == "RecordDecl":
                if child.get("name"):
                    # A named record declared inside another is file scope in C.
                    cname = "%s %s" % (child["tagUsed"], child["name"])
                    self._record(child, cname, rec.file)
                    pending_anon = None
                else:
                    pending_anon = child
                continue
            if kind == "EnumDecl":
                self._enum(child, rec.file)
                pending_anon = None
                continue
            if kind != "FieldDecl":
                continue
            qual = child.get("type", {}).get("qualType", "")
            inline = None
            if pending_anon is not None and ("unnamed" in qual or "anonymous" in qual):
                inline = pending_anon
            pending_anon = None
            name = child.get("name")
            if not name:
                # Anonymous member: its fields are reached directly.
                if inline is None:
                    continue
                first = len(rec.fields)
                self._members(inline, prefix, rec, None)
                if direct is not None:
                    direct.append(("", None, [f.path for f in rec.fields[first:]]))
                continue
            path = prefix + name
            field = Field(path, bool(child.get("isBitfield")),
                          qual.endswith("[]"), qual)
            rec.fields.append(field)
            first = len(rec.fields)
            if inline is not None:
                dims = qual.count("[")
                self._members(inline, path + "[0]" * dims + ".", rec, None)
            if direct is not None:
                direct.append((name, field, [f.path for f in rec.fields[first:]]))


_LINEMARK = re.compile(r'^# \d+ "(.*)"( \d+)*$')
_DEFINE = re.compile(r'^#define ([A-Za-z_][A-Za-z0-9_]*)(\(?)(.*)$')
_UNDEF = re.compile(r'^#undef ([A-Za-z_][A-Za-z0-9_]*)')


def _read_macros(inv, text, header_of):
    current = None
    for line in text.splitlines():
        mark = _LINEMARK.match(line)
        if mark:
            current = header_of(mark.group(1))
            continue
        if current is None:
            continue
        m = _DEFINE.match(line)
        if m:
            kind = "function" if m.group(2) else "object"
            body = m.group(3)
            if kind == "function":
                # Only the number of parameters is kept ("arity=N").
                params = body.split(")", 1)[0].strip()
                body = "arity=%d" % (len(params.split(",")) if params else 0)
            inv.macros[m.group(1)] = (current, kind, " ".join(body.split()))
            continue
        m = _UNDEF.match(line)
        if m and m.group(1) in inv.macros and inv.macros[m.group(1)][0] == current:
            del inv.macros[m.group(1)]


def scan(root, headers, workdir, clang="clang", tag="side"):
    """Build the Inventory of `headers` (basenames) under root/infiniband."""
    inv = Inventory(root)
    wanted_dir = SideDirs(root)
    for h in headers:
        (inv.present if os.path.isfile(os.path.join(root, header_path(h)))
         else inv.missing).append(h)
    if not inv.present:
        return inv
    os.makedirs(workdir, exist_ok=True)
    inc = _include_args(root)
    # -Wno-#warnings: arch.h and sa-kern-abi.h announce they are obsolete.
    flags = ["-std=gnu11", "-Wno-#warnings"] + inc
    tu = os.path.join(workdir, "%s-all.c" % tag)
    with open(tu, "w") as f:
        for h in inv.present:
            f.write("#include <%s>\n" % header_path(h))
    reader = _AstReader(inv, wanted_dir)

    # Which files each header pulls in (alone), and whether any infiniband/
    # header came from outside this side's root (ours falling back to
    # Debian's copy would hide a missing header).
    for h in inv.present:
        one = os.path.join(workdir, "%s-one.c" % tag)
        with open(one, "w") as f:
            f.write("#include <%s>\n" % header_path(h))
        deps = _run([clang, "-M"] + flags + [one], "clang -M for " + h)
        files = set()
        for word in deps.replace("\\\n", " ").split():
            if word.endswith(":") or not word.endswith(".h"):
                continue
            real = os.path.realpath(word)
            label = owner_of(real, wanted_dir)
            if label and label in headers and \
                    real != os.path.realpath(os.path.join(root, header_path(label))):
                inv.leaks.append("%s includes %s" % (h, real))
            elif label:
                files.add(label)
            elif os.path.basename(os.path.dirname(real)) == "infiniband":
                inv.leaks.append("%s includes %s" % (h, real))
        inv.closure[h] = files

    ast = _run([clang, "-Xclang", "-ast-dump=json", "-fsyntax-only"] + flags + [tu],
               "clang AST dump")
    reader.read(json.loads(ast))
    pre = _run([clang, "-E", "-dD"] + flags + [tu], "clang -E -dD")
    _read_macros(inv, pre, reader.header_of)
    return inv
