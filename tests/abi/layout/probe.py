"""Compile-and-run measurement of C declarations.

An "item" is one line of C inside main() that prints facts about one name
("struct ibv_qp size=160 align=8", "IBV_QPT_RC value=2 ...").  The same item
list is compiled against each side's headers.  Items that do not compile on a
side are found from clang's error lines (one item per line) and dropped, so
one broken declaration cannot hide the others; what was dropped is reported.
"""

import os
import re
import subprocess

# Printing helpers shared by every generated program.  KIND names the type of
# an expression through _Generic, so that "uint64_t" against "__u64"
# (unsigned long against unsigned long long) shows up; anything that is not a
# basic arithmetic type is "other" (pointers, arrays, records).
PRELUDE = r'''
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>   /* umad.h's ioctl numbers use _IO* without it */

#define OV_KIND(e) _Generic((e), \
    _Bool: "_Bool", char: "char", signed char: "signed char", \
    unsigned char: "unsigned char", short: "short", \
    unsigned short: "unsigned short", int: "int", unsigned: "unsigned int", \
    long: "long", unsigned long: "unsigned long", long long: "long long", \
    unsigned long long: "unsigned long long", float: "float", \
    double: "double", long double: "long double", default: "other")
#define OV_SIGNED(e) ((__typeof__(+(e)))-1 < 0)

static void ov_int(const char *key, int neg, long long s, unsigned long long u,
                   size_t size, int is_signed)
{
    if (neg)
        printf("%s value=%lld size=%zu signed=%d\n", key, s, size, is_signed);
    else
        printf("%s value=%llu size=%zu signed=%d\n", key, u, size, is_signed);
}
#define OV_INT(key, e) ov_int(key, (e) < 0, (long long)(e), \
                              (unsigned long long)(e), sizeof(e), OV_SIGNED(e))

static void ov_str(const char *key, const char *s)
{
    printf("%s string=\"", key);
    for (; *s; s++)
        printf((*s >= 32 && *s < 127 && *s != '"') ? "%c" : "\\x%02x",
               (unsigned char)*s);
    printf("\"\n");
}

static void ov_bits(const char *key, const void *obj, size_t size)
{
    const unsigned char *p = obj;
    printf("%s bitmask=", key);
    for (size_t i = 0; i < size; i++)
        if (p[i])
            printf("[%zu]%02x", i, p[i]);
    printf("\n");
}
'''

_ERROR = re.compile(r'^(.*?):(\d+):\d+: (?:fatal )?error: (.*)$')


class ProbeError(Exception):
    pass


def _source(includes, items):
    head = "".join("#include <%s>\n" % (h if "/" in h else "infiniband/" + h)
                   for h in includes)
    lines = [PRELUDE, head, "int main(void)\n{\n"]
    first_line = sum(chunk.count("\n") for chunk in lines) + 1
    for _key, code in items:
        lines.append("    " + code.replace("\n", " ") + "\n")
    lines.append("    return 0;\n}\n")
    return "".join(lines), first_line


def run(items, includes, inc_args, workdir, tag, cc="clang", max_rounds=12):
    """Compile and run items; return (facts, dropped).

    items:    list of (key, C statement) pairs
    facts:    {key: "attr=value ..."} printed by the program
    dropped:  {key: first error message} for items that did not compile
    """
    os.makedirs(workdir, exist_ok=True)
    src_path = os.path.join(workdir, tag + ".c")
    exe_path = os.path.join(workdir, tag)
    live = list(items)
    dropped = {}
    flags = ["-std=gnu11", "-w", "-Werror=gnu-folding-constant",
             "-Werror=implicit-function-declaration", "-Werror=int-conversion",
             "-ferror-limit=0", "-fno-color-diagnostics"] + inc_args
    for _round in range(max_rounds):
        text, first_line = _source(includes, live)
        with open(src_path, "w") as f:
            f.write(text)
        try:
            proc = subprocess.run([cc] + flags + ["-o", exe_path, src_path],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
        except OSError as e:
            raise ProbeError("cannot run %s: %s" % (cc, e))
        if proc.returncode == 0:
            break
        bad = {}
        for line in proc.stdout.splitlines():
            m = _ERROR.match(line)
            if not m or os.path.realpath(m.group(1)) != os.path.realpath(src_path):
                continue
            index = int(m.group(2)) - first_line
            if 0 <= index < len(live):
                bad.setdefault(index, m.group(3))
        if not bad:
            raise ProbeError("%s: the generated program does not compile and the "
                             "errors point at no item:\n%s" % (tag, proc.stdout[-4000:]))
        for index in sorted(bad, reverse=True):
            dropped[live[index][0]] = bad[index]
            del live[index]
    else:
        raise ProbeError("%s: still failing after %d rounds" % (tag, max_rounds))

    proc = subprocess.run([exe_path], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise ProbeError("%s: generated program exited with %d:\n%s"
                         % (tag, proc.returncode, proc.stderr))
    facts = {}
    for line in proc.stdout.splitlines():
        facts_key, rest = _split_key(line)
        facts[facts_key] = facts.get(facts_key, "") + (" " if facts_key in facts else "") + rest
    return facts, dropped


def _split_key(line):
    """A printed line is "<key> attr=value ..."; keys may contain spaces."""
    m = re.match(r'^(.*?) ((?:[a-z_]+=).*)$', line)
    if not m:
        return line, ""
    return m.group(1), m.group(2)


def c_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
