#!/usr/bin/env python3
"""Compare the declarations of two copies of the verbs/umad public headers.

    compare_layouts.py --ours <repo>/include [--reference /usr/include]
                       --headers verbs.h,verbs_api.h,... --workdir <dir>

The reference side is Debian's headers (libibverbs-dev, libibumad-dev) unless
told otherwise.  Both sides are read by clang (see headerscan.py); the union
of their names is compared, then one generated C program, compiled once per
side, prints for every name present on both sides:

  record      sizeof, alignof
  field       offsetof, sizeof, alignof, basic type (bit-fields: the bits a
              field occupies, found by storing all ones into a zeroed object)
  enum        sizeof, signedness of the enum type
  enumerator  value, size and signedness of its type
  typedef     sizeof, alignof, aliased type compatible with the reference's
  fieldtype   (every non-bit-field member) type compatible with the
              reference's, up to typedef spelling
  variable    sizeof
  macro       object-like: integer value (+size, signedness), else string
              contents, else a constant pointer value, else the identifier it
              aliases; function-like: number of parameters only
  function    type compatible with the reference's (__builtin_types_compatible_p
              against the type-name clang prints for it), and from the AST:
              parameter count, variadic, static, inline

Exclusions, always listed in the output: include guards (empty macros named
*_H / *_H_), function-like macro bodies (only the arity is compared), object-
like macros that are none of the forms above, and any item that compiles on
neither side (e.g. sizeof of an opaque struct).

Exit status 0 when everything matches, 1 on any difference, 2 when the
machinery itself failed.  Every difference is printed with its name.
"""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import headerscan  # noqa: E402
import probe       # noqa: E402

GUARD = re.compile(r'^_*[A-Z0-9_]*_H_*$')
IDENT = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')
RESERVED = re.compile(r'^(__|_[A-Z])')


def is_guard(name, macro):
    _file, kind, body = macro
    return kind == "object" and body == "" and bool(GUARD.match(name))


def build_items(key, inv, ref=None):
    """C statements measuring `key` (a "kind name" string), in order of choice.

    ref is the reference side's Inventory: a function's type is checked on
    both sides against the reference's spelling of it.
    """
    kind, name = key.split(" ", 1)
    k = probe.c_string(key)
    if kind in ("fieldtype", "typedeftype"):
        # Same type as the reference's member/typedef, up to typedef
        # spelling (catches void * against struct x *, and the like).
        if kind == "fieldtype":
            cname, path = name.split(".", 1)
            field = next(f for f in ref.records[cname].fields if f.path == path)
            expr, spelled = "((%s *)0)->%s" % (cname, path), field.qualtype
        else:
            expr, spelled = "*(%s *)0" % name, ref.typedef_types[name]
        return ['{ _Static_assert(__builtin_types_compatible_p(__typeof__(%s), '
                '__typeof__(%s)), "type"); printf("%%s type=compatible\\n", %s); }'
                % (expr, spelled, k)]
    if kind == "function":
        # Same parameter and return types, up to typedef spelling:
        # __typeof__ accepts the type-name clang printed for the reference.
        spelled = (ref or inv).function_types.get(name, "")
        return ['{ _Static_assert(__builtin_types_compatible_p(__typeof__(%s), '
                '__typeof__(%s)), "type"); printf("%%s type=compatible\\n", %s); }'
                % (name, spelled, k)]
    if kind == "record":
        return ['printf("%%s size=%%zu align=%%zu\\n", %s, sizeof(%s), _Alignof(%s));'
                % (k, name, name)]
    if kind == "field":
        cname, path = name.split(".", 1)
        rec = inv.records[cname]
        field = next(f for f in rec.fields if f.path == path)
        expr = "((%s *)0)->%s" % (cname, path)
        if field.bitfield:
            return ['{ %s ov_o; memset(&ov_o, 0, sizeof ov_o); ov_o.%s = -1; '
                    'ov_bits(%s, &ov_o, sizeof ov_o); printf("%%s kind=%%s\\n", %s, OV_KIND(ov_o.%s)); }'
                    % (cname, path, k, k, path)]
        if field.flexible:
            return ['printf("%%s offset=%%zu align=%%zu kind=flexible-array\\n", %s, '
                    'offsetof(%s, %s), _Alignof(__typeof__(%s[0])));' % (k, cname, path, expr)]
        return ['printf("%%s offset=%%zu size=%%zu align=%%zu kind=%%s\\n", %s, offsetof(%s, %s), '
                'sizeof(%s), _Alignof(__typeof__(%s)), OV_KIND(%s));'
                % (k, cname, path, expr, expr, expr)]
    if kind == "enum":
        return ['printf("%%s size=%%zu signed=%%d\\n", %s, sizeof(enum %s), (enum %s)-1 < 0);'
                % (k, name, name)]
    if kind == "enumerator":
        return ["OV_INT(%s, %s);" % (k, name)]
    if kind == "typedef":
        return ['printf("%%s size=%%zu align=%%zu\\n", %s, sizeof(%s), _Alignof(%s));'
                % (k, name, name)]
    if kind == "variable":
        return ['printf("%%s size=%%zu\\n", %s, sizeof(%s));' % (k, name)]
    if kind == "macro":
        # Tried in this order; the first form that compiles on a side wins.
        return [
            "{ enum { ov_c = sizeof(char[((%s) | 1) ? 1 : 1]) }; OV_INT(%s, %s); }"
            % (name, k, name),
            "{ const char *ov_s = _Generic((%s), char *: (%s), const char *: (%s)); "
            "ov_str(%s, ov_s); }" % (name, name, name, k),
            '{ _Static_assert(__builtin_constant_p((uintptr_t)(%s)), "c"); '
            'printf("%%s pointer=%%#llx\\n", %s, (unsigned long long)(uintptr_t)(%s)); }'
            % (name, k, name),
        ]
    return []


def measure(keys, invs, includes, workdir, ref=None):
    """Run the staged probes on both sides.

    Returns (facts, failed): facts[side][key] is what the program printed;
    failed[side][key] is the last compiler error for keys no form compiled.
    """
    facts = {side: {} for side in invs}
    failed = {side: {} for side in invs}
    pending = {side: list(keys) for side in invs}
    stage = 0
    while any(pending.values()):
        for side, inv in invs.items():
            items = []
            for key in pending[side]:
                forms = build_items(key, inv, ref)
                if stage < len(forms):
                    items.append((key, forms[stage]))
            got, dropped = probe.run(items, includes,
                                     headerscan._include_args(inv.root),
                                     workdir, "%s-stage%d" % (side, stage))
            facts[side].update(got)
            for key, err in dropped.items():
                failed[side][key] = err
            for key in got:
                failed[side].pop(key, None)
            pending[side] = [key for key, _code in items if key in dropped]
        stage += 1
    return facts, failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--ours", required=True, help="include root of the headers under test")
    ap.add_argument("--reference", default="/usr/include",
                    help="include root of the reference headers (Debian's)")
    ap.add_argument("--headers", required=True, help="comma-separated basenames")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--clang", default="clang")
    ap.add_argument("--ours-label", default="ours")
    ap.add_argument("--reference-label", default="Debian")
    ap.add_argument("--listed-only", action="store_true",
                    help="compare only names declared in the listed headers themselves "
                         "(for headers such as librdmacm's that include the verbs "
                         "headers, which have their own test)")
    args = ap.parse_args()
    headers = [h for h in args.headers.split(",") if h]
    lo, lr = args.ours_label, args.reference_label

    problems = []
    notes = []

    def problem(text):
        problems.append(text)

    try:
        ref = headerscan.scan(args.reference, headers, args.workdir, args.clang, "ref")
    except headerscan.ScanError as e:
        print("MACHINERY ERROR: the reference headers cannot be read:\n%s" % e)
        return 2
    if ref.missing:
        print("MACHINERY ERROR: reference headers missing under %s: %s"
              % (args.reference, ", ".join(ref.missing)))
        return 2
    try:
        ours = headerscan.scan(args.ours, headers, args.workdir, args.clang, "ours")
    except headerscan.ScanError as e:
        print("FAIL: %s headers do not compile together:\n%s" % (lo, e))
        return 1

    for h in ours.missing:
        problem("header missing in %s: infiniband/%s" % (lo, h))
    for leak in ours.leaks:
        problem("%s header uses a file outside %s: %s" % (lo, args.ours, leak))

    # Include guards are private to each implementation.
    guards = {}
    for side in (ref, ours):
        for name, macro in list(side.macros.items()):
            if is_guard(name, macro):
                guards.setdefault(name, macro[0])
                del side.macros[name]

    names_ref = ref.names()
    names_ours = ours.names()
    if args.listed_only:
        names_ref = {k: v for k, v in names_ref.items() if v in headers}
        names_ours = {k: v for k, v in names_ours.items() if v in headers}
    present_both = [h for h in headers if h in ours.present]
    # Names in headers we do not have yet are reported per header, not per name.
    missing_hdr = set(ours.missing)
    only_ref = sorted(k for k in names_ref if k not in names_ours)
    only_ours = sorted(k for k in names_ours if k not in names_ref)
    missing_by_header = {}
    for key in only_ref:
        h = names_ref[key]
        if h in missing_hdr:
            missing_by_header.setdefault(h, 0)
            missing_by_header[h] += 1
        else:
            problem("missing in %s: %s (%s declares it in %s)" % (lo, key, lr, h))
    for h, count in sorted(missing_by_header.items()):
        problem("missing in %s: all %d names of %s (header absent)" % (lo, count, h))
    for key in only_ours:
        name = key.split(" ", 1)[1].split(".")[0].split(" ")[-1]
        if RESERVED.match(name):
            # Identifiers reserved for the implementation (C11 7.1.3) cannot
            # clash with a program's names; extra ones are allowed, listed.
            notes.append("extra reserved name in %s, allowed: %s (%s)"
                         % (lo, key, names_ours[key]))
            continue
        problem("not in %s: %s (%s declares it in %s)" % (lr, key, lo, names_ours[key]))

    # A name may live in another header if the expected one includes it.
    common = sorted(k for k in names_ref if k in names_ours)
    for key in common:
        want, have = names_ref[key], names_ours[key]
        if want != have and have not in ours.closure.get(want, set()):
            problem("%s: %s declares it in %s, %s in %s, which %s %s does not include"
                    % (key, lr, want, lo, have, lo, want))

    # Facts the AST already gives: functions and function-like macros.
    for key in common:
        kind, name = key.split(" ", 1)
        if kind == "function":
            a, b = ref.functions[name][1], ours.functions[name][1]
            if a != b:
                problem("%s: %s %s, %s %s" % (key, lr, a, lo, b))
        elif kind == "macro":
            a, b = ref.macros[name], ours.macros[name]
            if a[1] != b[1]:
                problem("%s: %s-like in %s, %s-like in %s" % (key, a[1], lr, b[1], lo))
            elif a[1] == "function" and a[2] != b[2]:
                problem("%s: %s in %s, %s in %s" % (key, a[2], lr, b[2], lo))

    # Everything else is measured by the generated program.
    measured = [k for k in common
                if not (k.startswith("macro ") and ref.macros[k[6:]][1] == "function")]
    # Type checks derived from the names above, where the reference's
    # spelling of the type can be written back as a type-name.
    def writable(spelled):
        return spelled and not any(w in spelled for w in ("unnamed", "anonymous", "(at "))
    for key in list(measured):
        kind, name = key.split(" ", 1)
        if kind == "field":
            cname, path = name.split(".", 1)
            field = next(f for f in ref.records[cname].fields if f.path == path)
            if not field.bitfield and writable(field.qualtype):
                measured.append("fieldtype " + name)
        elif kind == "typedef" and writable(ref.typedef_types.get(name)):
            measured.append("typedeftype " + name)
    func_macros = sorted(k[6:] for k in common
                         if k.startswith("macro ") and ref.macros[k[6:]][1] == "function")
    invs = {"ref": ref, "ours": ours}
    try:
        facts, failed = measure(measured, invs, present_both, args.workdir, ref)
    except probe.ProbeError as e:
        print("MACHINERY ERROR: %s" % e)
        return 2

    excluded = []
    for key in measured:
        a, b = facts["ref"].get(key), facts["ours"].get(key)
        if key.startswith(("fieldtype ", "typedeftype ")) and a is not None and b is None:
            kind, name = key.split(" ", 1)
            spelled = (ref.typedef_types.get(name) if kind == "typedeftype" else
                       next(f.qualtype for f in ref.records[name.split(".", 1)[0]].fields
                            if f.path == name.split(".", 1)[1]))
            problem("%s: type differs from %s's '%s' (%s)"
                    % (key, lr, spelled, failed["ours"].get(key, "?")))
            continue
        if a is None and b is None:
            name = key.split(" ", 1)[1]
            if key.startswith("macro ") and IDENT.match(ref.macros[name][2] or "-") \
                    and IDENT.match(ours.macros[name][2] or "-"):
                if ref.macros[name][2] != ours.macros[name][2]:
                    problem("%s: aliases %s in %s, %s in %s"
                            % (key, ref.macros[name][2], lr, ours.macros[name][2], lo))
                continue
            why = failed["ref"].get(key, "")
            if key.startswith("macro "):
                why = "expands to '%s'" % ref.macros[name][2]
                if ref.macros[name][2] != ours.macros[name][2]:
                    problem("%s: not measurable and spelled differently: %s '%s', %s '%s'"
                            % (key, lr, ref.macros[name][2], lo, ours.macros[name][2]))
            excluded.append("%s (%s)" % (key, why))
        elif a is None:
            problem("%s: measurable in %s (%s) but not in %s" % (key, lo, b, lr))
        elif b is None:
            problem("%s: does not compile against %s headers: %s (%s: %s)"
                    % (key, lo, failed["ours"].get(key, "?"), lr, a))
        elif a != b:
            problem("%s: %s %s, %s %s" % (key, lr, a, lo, b))

    # Report.
    print("layout comparison: %s headers at %s against %s headers at %s"
          % (lo, args.ours, lr, args.reference))
    print("  names: %d in %s, %d in %s, %d measured on both sides"
          % (len(names_ref), lr, len(names_ours), lo, len(measured)))
    print("EXCLUSIONS (not compared by value):")
    print("  include guards (%d): %s" % (len(guards), " ".join(sorted(guards))))
    print("  function-like macros, arity only (%d): %s"
          % (len(func_macros), " ".join(func_macros)))
    for line in excluded:
        print("  " + line)
    for note in notes:
        print("NOTE: " + note)
    if problems:
        print("DIFFERENCES (%d):" % len(problems))
        for p in problems:
            print("  " + p)
        print("FAIL")
        return 1
    print("PASS: every name and value matches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
