#!/usr/bin/env python3
"""abi-compliance-checker: our library against rdma-core 44's ABI dump.

    run_acc.py --name ibverbs --reference tests/abi/reference/ibverbs.dump
               (--lib build/lib/libibverbs.so.1 | --new-dump FILE)
               --workdir build/tests/abi/acc-ibverbs

1. abi-dumper writes the ABI of our library (built with debug info; the
   default RelWithDebInfo build has it) unless --new-dump is given.
2. Both dumps are normalised (see normalise_dump): the stored rdma-core dump
   has no header or source file names (Header => undef everywhere, empty
   Headers/Sources), and abi-compliance-checker silently checks nothing for
   such a dump (it reports 100% with 0 symbols).  Every symbol and type is
   therefore assigned to one pseudo header, in both dumps alike.
3. abi-compliance-checker -binary runs twice: an HTML report for people
   (path printed) and an XML report that this script reads.
The test fails on any binary compatibility problem as abi-compliance-checker
counts them (removed symbols, High and Medium severity) and prints each one;
Low and Safe findings (renamed parameters, _Bool spelled bool, ...) are
printed as warnings.
Exit 0 = compatible, 1 = problems, 2 = the tools failed.
"""

import argparse
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

# Perl, because the dumps are Perl data: give every symbol and named type the
# same pseudo header, drop source lists, write the result back.
NORMALISE = r'''
use strict; use Data::Dumper;
$Data::Dumper::Indent = 1; $Data::Dumper::Sortkeys = 1;
my ($in, $out) = @ARGV;
my $d = do $in or die "cannot load $in: $@ $!\n";
$d->{Headers} = { 'abi-all.h' => 1 };
$d->{Sources} = {};
for my $s (values %{$d->{SymbolInfo}}) { $s->{Header} = 'abi-all.h'; delete $s->{Source}; }
# A function exported under a default version through an ELF alias (ours:
# ov_v11_<name> bound to <name>@@NODE, beside a <name>@NODE twin) appears in
# the DWARF under its plain name only. Name the alias, as rdma-core's dump
# names its __<name>_1_1 symbols, so the checker pairs each version with the
# right function instead of mixing the twin's types in.
my $sv = $d->{SymbolVersion} || {};
my %by_version;
for my $local (keys %$sv) { push @{$by_version{$sv->{$local}}}, $local; }
for my $s (values %{$d->{SymbolInfo}}) {
    next if $s->{Alias} or $s->{MnglName} or !$s->{ShortName};
    my $ver = $sv->{$s->{ShortName}};
    next unless defined $ver and $ver =~ /\@\@/;
    my ($alias) = grep { $_ ne $s->{ShortName} } @{$by_version{$ver} || []};
    next unless $alias;
    $s->{Alias} = $alias;
    # The plain name is internal (hidden): only the alias carries the version.
    delete $sv->{$s->{ShortName}};
}
for my $t (values %{$d->{TypeInfo}}) {
    $t->{Header} = 'abi-all.h' if exists $t->{Header} or $t->{Type} =~ /^(Struct|Union|Enum|Typedef)$/;
    delete $t->{Source};
}
open my $f, '>', $out or die "cannot write $out: $!\n";
print $f Dumper($d);
'''

TIMEOUT = 240   # seconds per tool run; the whole test stays well under 5 minutes


def run(cmd, what):
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        print("MACHINERY ERROR: %s timed out after %ds" % (what, TIMEOUT))
        sys.exit(2)
    return proc


def normalise_dump(src, dst):
    proc = run(["perl", "-e", NORMALISE, os.path.abspath(src), os.path.abspath(dst)],
               "normalising " + src)
    if proc.returncode != 0:
        print("MACHINERY ERROR: normalising %s:\n%s" % (src, proc.stdout))
        sys.exit(2)


def describe(problem):
    """One line for a <problem>: its id and the change text, targets filled in."""
    change = problem.find("change")
    text = ""
    if change is not None:
        text = change.text or ""
        for attr, value in change.attrib.items():
            text = text.replace("@" + attr, value)
    return "%s: %s" % (problem.get("id"), text.strip())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--name", required=True, help="library name for the report")
    ap.add_argument("--reference", required=True, help="rdma-core's abi-dumper file")
    ap.add_argument("--lib", help="our shared library")
    ap.add_argument("--new-dump", help="use this dump instead of running abi-dumper")
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)

    if args.new_dump:
        new_raw = args.new_dump
    else:
        if not args.lib or not os.path.isfile(args.lib):
            print("FAIL: library %s does not exist (not built?)" % args.lib)
            return 1
        new_raw = os.path.join(args.workdir, "ours.dump")
        proc = run(["abi-dumper", args.lib, "-o", new_raw, "-lver", "ours", "-bin-only"],
                   "abi-dumper")
        if proc.returncode != 0 or not os.path.isfile(new_raw):
            print("MACHINERY ERROR: abi-dumper failed on %s:\n%s" % (args.lib, proc.stdout))
            return 2
        if "debug info" in proc.stdout.lower() and "not found" in proc.stdout.lower():
            print("FAIL: %s has no debug info; build with RelWithDebInfo or Debug\n%s"
                  % (args.lib, proc.stdout))
            return 1

    old = os.path.join(args.workdir, "reference.normalised.dump")
    new = os.path.join(args.workdir, "ours.normalised.dump")
    normalise_dump(args.reference, old)
    normalise_dump(new_raw, new)

    html = os.path.join(args.workdir, "compat_report.html")
    xml = os.path.join(args.workdir, "compat_report.xml")
    base = ["abi-compliance-checker", "-l", args.name, "-old", old, "-new", new, "-binary"]
    proc = run(base + ["-report-path", html], "abi-compliance-checker (html)")
    summary = [l for l in proc.stdout.splitlines()
               if l.startswith(("Binary compatibility", "Total binary"))]
    proc_xml = run(base + ["-report-format", "xml", "-report-path", xml],
                   "abi-compliance-checker (xml)")
    if not os.path.isfile(xml):
        print("MACHINERY ERROR: abi-compliance-checker wrote no report:\n%s"
              % (proc.stdout + proc_xml.stdout))
        return 2

    root = ET.parse(xml).getroot()
    checked = root.findtext("test_results/symbols", "?")
    problems, warnings = [], []
    for sym in root.iter("removed_symbols"):
        for name in sym.iter("name"):
            problems.append("removed symbol: %s" % name.text)
    for section in root:
        if section.tag not in ("problems_with_types", "problems_with_symbols",
                               "problems_with_constants"):
            continue
        severity = section.get("severity", "?")
        for item in section.iter():
            if item.tag not in ("type", "symbol") or item.find("problem") is None:
                continue
            for problem in item.findall("problem"):
                line = "[%s] %s %s: %s" % (severity, item.tag, item.get("name"),
                                           describe(problem))
                # abi-compliance-checker's own rule: High and Medium are
                # problems, Low and Safe are warnings (not incompatibilities).
                (problems if severity in ("High", "Medium") else warnings).append(line)

    print("abi-compliance-checker: %s, %s symbols checked" % (args.name, checked))
    for line in summary:
        print("  " + line)
    print("  HTML report: %s" % html)
    for w in warnings:
        print("WARNING: " + w)
    if checked in ("0", "?"):
        print("FAIL: abi-compliance-checker checked no symbols; the comparison is void")
        return 1
    if problems or proc_xml.returncode != 0:
        print("PROBLEMS (%d):" % len(problems))
        for p in problems:
            print("  " + p)
        print("FAIL")
        return 1
    print("PASS: binary compatible with the reference dump")
    return 0


if __name__ == "__main__":
    sys.exit(main())
