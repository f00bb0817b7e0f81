#!/usr/bin/env python3
"""Self-checks of the ABI machinery: it passes on Debian against Debian and
fails, naming the exact difference, on deliberately altered copies.

    selfcheck.py MODE [options]     (see CMakeLists.txt for each invocation)

Modes
  symbols-debian   Debian's installed library against Debian's list: passes.
  symbols-altered  Debian's library against an altered copy of the list and an
                   altered table: fails with the expected lines.
  layout-debian    Debian's headers against themselves: passes.
  layout-altered   A copy of Debian's headers with known edits against the
                   originals: fails with the expected lines.
  dump-debian      Debian's public headers against rdma-core's dump: every
                   public record matches (only provider records are absent).
  acc              abi-compliance-checker: the reference dump against itself
                   passes; against an altered copy fails.
Exit 0 = the machinery behaved, 1 = it did not, 77 = Debian's files absent.
"""

import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77


def run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc.returncode, proc.stdout


def expect(rc_want, cmd, lines=(), forbid=()):
    """Run cmd; check its exit status and that each expected line appears."""
    rc, out = run(cmd)
    ok = True
    if rc != rc_want:
        print("UNEXPECTED exit status %d (wanted %d) from: %s" % (rc, rc_want, " ".join(cmd)))
        ok = False
    for want in lines:
        if want not in out:
            print("MISSING expected line: %s" % want)
            ok = False
    for bad in forbid:
        if bad(out):
            ok = False
    if not ok:
        print("---- output ----\n%s" % out)
    return ok


def edit(path, old, new):
    with open(path) as f:
        text = f.read()
    if old not in text:
        print("MACHINERY ERROR: cannot apply edit to %s: %r not found" % (path, old))
        sys.exit(1)
    with open(path, "w") as f:
        f.write(text.replace(old, new, 1))


def symbols_debian(a):
    if not os.path.isfile(a.lib):
        return SKIP
    return 0 if expect(0, [sys.executable, os.path.join(HERE, "check_symbols.py"),
                           "--lib", a.lib, "--soname", a.soname, "--debian", a.debian,
                           "--installed", a.lib]) else 1


def symbols_altered(a):
    if not os.path.isfile(a.lib):
        return SKIP
    os.makedirs(a.workdir, exist_ok=True)
    listing = os.path.join(a.workdir, "altered.symbols")
    table = os.path.join(a.workdir, "altered-table.symbols")
    shutil.copy(a.debian, listing)
    edit(listing, "T ibv_alloc_pd@@IBVERBS_1.1\n", "")                     # extra in lib
    edit(listing, "T ibv_fork_init@@IBVERBS_1.1\n", "T ibv_fork_init@@IBVERBS_1.5\n")
    with open(listing, "a") as f:
        f.write("T ibv_not_there@@IBVERBS_1.1\n")                           # missing in lib
    shutil.copy(a.debian, table)
    edit(table, "A IBVERBS_1.5\n", "A IBVERBS_1.5 IBVERBS_1.0\n")         # wrong parent
    ok = expect(1, [sys.executable, os.path.join(HERE, "check_symbols.py"),
                    "--lib", a.lib, "--soname", "libwrong.so.9", "--debian", listing,
                    "--table", table],
                ["extra T ibv_alloc_pd@@IBVERBS_1.1",
                 "missing T ibv_not_there@@IBVERBS_1.1",
                 "T ibv_fork_init@@IBVERBS_1.5 is exported as "
                 "T ibv_fork_init@@IBVERBS_1.1 instead",
                 "node IBVERBS_1.5 has parent IBVERBS_1.1, table says IBVERBS_1.0",
                 "SONAME is 'libibverbs.so.1', expected 'libwrong.so.9'"])
    return 0 if ok else 1


def layout_debian(a):
    if not os.path.isfile("/usr/include/infiniband/verbs.h"):
        return SKIP
    return 0 if expect(0, [sys.executable, os.path.join(HERE, "layout", "compare_layouts.py"),
                           "--ours", "/usr/include", "--headers", a.headers,
                           "--clang", a.clang, "--workdir", a.workdir],
                       ["PASS: every name and value matches"]) else 1


def layout_altered(a):
    if not os.path.isfile("/usr/include/infiniband/verbs.h"):
        return SKIP
    alt = os.path.join(a.workdir, "altered")
    shutil.rmtree(alt, ignore_errors=True)
    shutil.copytree("/usr/include/infiniband", os.path.join(alt, "infiniband"))
    v = os.path.join(alt, "infiniband", "verbs.h")
    u = os.path.join(alt, "infiniband", "umad.h")
    # 1. a member type change shifting everything after it
    edit(v, "struct ibv_pd {\n\tstruct ibv_context     *context;\n\tuint32_t",
         "struct ibv_pd {\n\tstruct ibv_context     *context;\n\tuint64_t")
    # 2. an enum value, 3. an integer macro, 4. a string macro
    edit(v, "IBV_QPT_RC = 2,", "IBV_QPT_RC = 12,")
    edit(v, "#define IBV_DEVICE_RAW_SCATTER_FCS (1ULL << 34)",
         "#define IBV_DEVICE_RAW_SCATTER_FCS (1ULL << 35)")
    edit(u, '"rate"', '"rates"')
    # 5. a removed enumerator and an added one
    edit(v, "\tIBV_WC_TM_RNDV_INCOMPLETE,\n", "\tIBV_WC_TM_RNDV_INCOMPLETX,\n")
    # 6. a function's return type changed
    edit(v, "__be64 ibv_get_device_guid(struct ibv_device *device);",
         "uint32_t ibv_get_device_guid(struct ibv_device *device);")
    # 7. a pointer member's target type changed (same size and offset)
    edit(v, "struct ibv_mr {\n\tstruct ibv_context     *context;\n\tstruct ibv_pd\t       *pd;",
         "struct ibv_mr {\n\tstruct ibv_context     *context;\n\tvoid\t       *pd;")
    # 8. a header removed
    os.remove(os.path.join(alt, "infiniband", "umad_str.h"))
    ok = expect(1, [sys.executable, os.path.join(HERE, "layout", "compare_layouts.py"),
                    "--ours", alt, "--headers", a.headers, "--clang", a.clang,
                    "--workdir", os.path.join(a.workdir, "work")],
                ["field struct ibv_pd.handle: Debian offset=8 size=4 align=4 kind=unsigned int, "
                 "ours offset=8 size=8 align=8 kind=unsigned long",
                 "enumerator IBV_QPT_RC: Debian value=2 size=4 signed=1, "
                 "ours value=12 size=4 signed=1",
                 "macro IBV_DEVICE_RAW_SCATTER_FCS: Debian value=17179869184 size=8 signed=0, "
                 "ours value=34359738368 size=8 signed=0",
                 'macro SYS_PORT_RATE: Debian string="rate", ours string="rates"',
                 "missing in ours: enumerator IBV_WC_TM_RNDV_INCOMPLETE (Debian declares it in verbs.h)",
                 "not in Debian: enumerator IBV_WC_TM_RNDV_INCOMPLETX (ours declares it in verbs.h)",
                 "header missing in ours: infiniband/umad_str.h",
                 "function ibv_get_device_guid: does not compile against ours headers: "
                 "static_assert failed",
                 "fieldtype struct ibv_mr.pd: type differs from Debian's 'struct ibv_pd *'",
                 "missing in ours: all 5 names of umad_str.h (header absent)"])
    return 0 if ok else 1


def dump_debian(a):
    if not os.path.isfile("/usr/include/infiniband/verbs.h"):
        return SKIP

    def only_provider_records(out):
        body = out.split("DIFFERENCES", 1)[1] if "DIFFERENCES" in out else ""
        bad = [l for l in body.splitlines()[1:]
               if l.startswith("  ") and "not defined by our headers" not in l]
        for l in bad:
            print("UNEXPECTED difference for a public record: %s" % l.strip())
        return bool(bad)
    ok = expect(1, [sys.executable, os.path.join(HERE, "layout", "compare_dump.py"),
                    "--dump", a.dump, "--ours", "/usr/include", "--headers", a.headers,
                    "--debian-headers", a.headers, "--clang", a.clang,
                    "--workdir", a.workdir],
                ["member offsets stored as decimal read as hex (decoded)",
                 "struct verbs_context_ops: in rdma-core's dump, not defined by our headers"],
                [only_provider_records])
    # An altered copy: two function-pointer slots swapped, one member dropped.
    alt = os.path.join(a.workdir, "altered")
    shutil.rmtree(alt, ignore_errors=True)
    shutil.copytree("/usr/include/infiniband", os.path.join(alt, "infiniband"))
    v = os.path.join(alt, "infiniband", "verbs.h")
    edit(v, "\tvoid *(*_compat_alloc_pd)(void);\n\tvoid *(*_compat_dealloc_pd)(void);\n",
         "\tvoid *(*_compat_dealloc_pd)(void);\n\tvoid *(*_compat_alloc_pd)(void);\n")
    edit(v, "struct ibv_pd {\n\tstruct ibv_context     *context;\n\tuint32_t\t\thandle;\n",
         "struct ibv_pd {\n\tstruct ibv_context     *context;\n")
    ok &= expect(1, [sys.executable, os.path.join(HERE, "layout", "compare_dump.py"),
                     "--dump", a.dump, "--ours", alt, "--headers", a.headers,
                     "--debian-headers", a.headers, "--clang", a.clang,
                     "--workdir", os.path.join(a.workdir, "work-altered")],
                 ["struct ibv_context_ops._compat_alloc_pd: offset 24, rdma-core 16",
                  "struct ibv_context_ops._compat_dealloc_pd: offset 16, rdma-core 24",
                  "struct ibv_pd: size 8, rdma-core 16",
                  "struct ibv_pd: direct members differ (2 in rdma-core, 1 ours; '' = "
                  "anonymous): missing 'handle'",
                  "struct ibv_pd.handle: in rdma-core, not in ours"])
    return 0 if ok else 1


ALTER_DUMP = r'''
use strict; use Data::Dumper; $Data::Dumper::Indent = 1;
my ($in, $out) = @ARGV;
my $d = do $in or die "cannot load $in\n";
my $t = $d->{TypeInfo};
for my $id (keys %$t) { $t->{$id}{Size} = 168 if ($t->{$id}{Name} // "") eq "struct ibv_qp"; }
my ($lib) = keys %{$d->{Symbols}};
delete $d->{Symbols}{$lib}{'ibv_dereg_mr@@IBVERBS_1.1'} or die "no symbol\n";
open my $f, '>', $out or die; print $f Dumper($d);
'''


def acc(a):
    if not shutil.which("abi-compliance-checker") or not shutil.which("abi-dumper"):
        print("abi-compliance-checker or abi-dumper not installed")
        return SKIP
    os.makedirs(a.workdir, exist_ok=True)
    script = os.path.join(HERE, "run_acc.py")
    ok = expect(0, [sys.executable, script, "--name", "ibverbs", "--reference", a.dump,
                    "--new-dump", a.dump, "--workdir", os.path.join(a.workdir, "same")],
                ["ibverbs, 180 symbols checked", "PASS"])
    altered = os.path.join(a.workdir, "altered.dump")
    rc, out = run(["perl", "-e", ALTER_DUMP, os.path.abspath(a.dump), altered])
    if rc != 0:
        print("MACHINERY ERROR: %s" % out)
        return 1
    ok &= expect(1, [sys.executable, script, "--name", "ibverbs", "--reference", a.dump,
                     "--new-dump", altered, "--workdir", os.path.join(a.workdir, "altered")],
                 ["removed symbol: ibv_dereg_mr@@IBVERBS_1.1",
                  "WARNING: [Low] type struct ibv_qp: DataType_Size"])
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=("symbols-debian", "symbols-altered", "layout-debian",
                                     "layout-altered", "dump-debian", "acc"))
    ap.add_argument("--lib")
    ap.add_argument("--soname")
    ap.add_argument("--debian")
    ap.add_argument("--headers")
    ap.add_argument("--dump")
    ap.add_argument("--clang", default="clang")
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    rc = globals()[a.mode.replace("-", "_")](a)
    print({0: "SELFCHECK PASS", 1: "SELFCHECK FAIL", SKIP: "SKIPPED"}[rc])
    return rc


if __name__ == "__main__":
    sys.exit(main())
