#!/usr/bin/env python3
"""Writes the sysfs fixture trees of the libibumad tests.

    make_fixtures.py OUTDIR

creates OUTDIR/<scenario>/class/infiniband/... and .../class/infiniband_mad/...
laid out like the kernel's sysfs (file contents end in a newline unless the
scenario says otherwise). A scenario's "class" folder can be bind-mounted over
/sys/class (differential test) or its parent given to our library through
OPENVERBS_UMAD_SYSFS_ROOT (unit tests). Devices are created in a deliberate
non-alphabetical order so that readdir order and sorted order differ.
"""
import os
import shutil
import sys


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def guid_str(g):
    return ":".join("%04x" % ((g >> s) & 0xFFFF) for s in (48, 32, 16, 0))


def ca(root, name, node_type="1: CA", guid=0x0002C90300A1B2C0, fw="16.35.2000",
       hw="0x0", hca_type="MT4119", skip=(), extra=None):
    d = os.path.join(root, "class", "infiniband", name)
    os.makedirs(d, exist_ok=True)
    files = {
        "node_type": node_type + "\n",
        "fw_ver": fw + "\n",
        "hw_rev": hw + "\n",
        "hca_type": hca_type + "\n",
        "node_guid": guid_str(guid) + "\n",
        "sys_image_guid": guid_str(guid + 0x10) + "\n",
        "node_desc": name + " HCA\n",
    }
    files.update(extra or {})
    for k, v in files.items():
        if k not in skip and v is not None:
            write(os.path.join(d, k), v)
    os.makedirs(os.path.join(d, "ports"), exist_ok=True)
    return d


def port(cadir, num, state="4: ACTIVE", phys="5: LinkUp", lid="0x5", lmc="0",
         sm_lid="0x1", sm_sl="0", rate="100 Gb/sec (4X EDR)", cap="0xa651e848",
         link_layer="InfiniBand", gid0=None, pkeys=("0xffff", "0x8001", "0x0000"),
         guid=None, skip=(), nl="\n"):
    d = os.path.join(cadir, "ports", str(num))
    os.makedirs(d, exist_ok=True)
    if guid is None:
        guid = 0x0002C90300A1B2C0 + num
    if gid0 is None:
        gid0 = "fe80:0000:0000:0000:" + guid_str(guid)
    files = {"state": state, "phys_state": phys, "lid": lid,
             "lid_mask_count": lmc, "sm_lid": sm_lid, "sm_sl": sm_sl,
             "rate": rate, "cap_mask": cap, "link_layer": link_layer}
    for k, v in files.items():
        if k not in skip and v is not None:
            write(os.path.join(d, k), v + nl)
    if "gids" not in skip:
        os.makedirs(os.path.join(d, "gids"), exist_ok=True)
        if gid0 is not False:
            write(os.path.join(d, "gids", "0"), gid0 + nl)
            write(os.path.join(d, "gids", "1"), "0000:0000:0000:0000:0000:0000:0000:0000\n")
    if "pkeys" not in skip:
        os.makedirs(os.path.join(d, "pkeys"), exist_ok=True)
        for i, p in enumerate(pkeys):
            write(os.path.join(d, "pkeys", str(i)), p + nl)
    return d


def umad(root, idx, dev, portnum, abi="5"):
    m = os.path.join(root, "class", "infiniband_mad")
    write(os.path.join(m, "abi_version"), abi + "\n")
    write(os.path.join(m, "umad%d" % idx, "ibdev"), dev + "\n")
    write(os.path.join(m, "umad%d" % idx, "port"), "%d\n" % portnum)
    write(os.path.join(m, "umad%d" % idx, "dev"), "231:%d\n" % idx)


SCENARIOS = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


@scenario
def ib2port(r):
    """One IB HCA, port 1 INIT/LinkUp, port 2 ACTIVE: default is port 2."""
    c = ca(r, "mlx5_0")
    port(c, 1, state="2: INIT", lid="0x0", rate="56 Gb/sec (4X FDR)")
    port(c, 2, lid="0x1a", lmc="2", sm_lid="0x3", sm_sl="1",
         gid0="fe80:0000:0000:0000:0002:c903:00a1:b2c2")
    umad(r, 0, "mlx5_0", 1)
    umad(r, 1, "mlx5_0", 2)


@scenario
def ib2down(r):
    """Ports DOWN/Polling and DOWN/Disabled: first non-disabled port wins."""
    c = ca(r, "mlx4_0", hca_type="MT4099")
    port(c, 1, state="1: DOWN", phys="3: Disabled", lid="0x0")
    port(c, 2, state="1: DOWN", phys="2: Polling", lid="0x0", rate="10 Gb/sec (4X)")
    umad(r, 0, "mlx4_0", 1)
    umad(r, 1, "mlx4_0", 2)


@scenario
def switch(r):
    """A switch: only port 0 (the SMA port) and node_type 2."""
    c = ca(r, "sw0", node_type="2: SWITCH", hca_type="MT52100",
           guid=0x0008F10500200000)
    port(c, 0, lid="0x1", sm_lid="0x1", rate="40 Gb/sec (4X QDR)")
    umad(r, 0, "sw0", 0)


@scenario
def roce(r):
    """A RoCE-only device (rxe): Ethernet link layer, never the default."""
    c = ca(r, "rxe0", fw="", hw="", hca_type="", guid=0x505400FFFE123456)
    port(c, 1, lid="0x0", sm_lid="0x0", rate="10 Gb/sec (1X QDR)",
         cap="0x00890000", link_layer="Ethernet",
         gid0="fe80:0000:0000:0000:5054:00ff:fe12:3456", pkeys=("0xffff",))
    umad(r, 0, "rxe0", 1)


@scenario
def multi(r):
    """Several CAs in non-alphabetical creation order, one iWARP (node_type 4)."""
    c = ca(r, "mlx5_1", guid=0x0002C90300B00000)
    port(c, 1, guid=0x0002C90300B00001)
    c = ca(r, "qedr0", node_type="4: RNIC", guid=0x0002C90300C00000)
    port(c, 1, link_layer="Ethernet", guid=0x0002C90300C00001)
    c = ca(r, "mlx5_0", guid=0x0002C90300A00000)
    port(c, 1, guid=0x0002C90300A00001, lid="0x7")
    c = ca(r, "hfi1_0", guid=0x0011750101000000, hca_type="")
    port(c, 1, state="1: DOWN", phys="2: Polling", lid="0x0",
         guid=0x0011750101000001)
    c = ca(r, "mlx4_0", guid=0x0002C90300D00000)
    port(c, 1, state="2: INIT", guid=0x0002C90300D00001)
    port(c, 2, link_layer="Ethernet", guid=0x0002C90300D00002)
    for i, (d, p) in enumerate([("mlx5_1", 1), ("mlx5_0", 1), ("hfi1_0", 1),
                                ("mlx4_0", 1), ("mlx4_0", 2)]):
        umad(r, i, d, p)


@scenario
def malformed(r):
    """Missing or bad attributes: rate, gids, pkeys, lid, link_layer."""
    c = ca(r, "bad0")
    port(c, 1, skip=("rate",))
    port(c, 2, gid0=False)
    port(c, 3, pkeys=())
    port(c, 4, lid="junk", rate="fast", cap="zz", gid0="zz:1", state="ACTIVE")
    port(c, 5, skip=("link_layer",), pkeys=("0xffff", "garbage", "0x7fff"))
    port(c, 6, gid0="fe80::1", sm_sl="-1")
    port(c, 7, skip=("pkeys",))
    c = ca(r, "bad1", extra={"node_guid": "12\n"})
    port(c, 1)
    c = ca(r, "bad2", skip=("node_type",))
    c = ca(r, "bad3", skip=("fw_ver", "hw_rev", "hca_type"))
    port(c, 1, nl="")
    shutil.rmtree(os.path.join(c, "..", "bad3", "ports", "1", "pkeys"))
    port(c, 1, pkeys=("0xffff",), nl="", skip=("gids",))
    c = ca(r, "bad4", skip=("sys_image_guid",))
    port(c, 1)
    c = ca(r, "bad5")
    port(c, 1, pkeys=("0xffff", "0x8001"))
    os.makedirs(os.path.join(c, "ports", "notaport"))
    c = ca(r, "averyveryverylongcaname0")
    port(c, 1)
    umad(r, 0, "bad0", 1)
    umad(r, 3, "bad3", 1)


@scenario
def manyports(r):
    """A CA with 12 ports: more than UMAD_CA_MAX_PORTS (10)."""
    c = ca(r, "mlx5_9", guid=0x0002C90300E00000)
    for n in range(1, 13):
        port(c, n, state="1: DOWN" if n != 11 else "4: ACTIVE",
             phys="2: Polling" if n != 11 else "5: LinkUp",
             guid=0x0002C90300E00000 + n)
    umad(r, 0, "mlx5_9", 11)


@scenario
def sim(r):
    """Values as ibsim's umad2sim writes them: no newline, no link_layer."""
    c = ca(r, "ibsim0", guid=0x0002C90000000001)
    port(c, 1, lid="1", sm_lid="1", cap="0x0761086a", skip=("link_layer",),
         rate="20", nl="")
    umad(r, 0, "ibsim0", 1)


@scenario
def smigsi(r):
    """rdma-core 56's SMI/GSI split: data device mlx5_0 (IsSMDisabled, bit
    10 of cap_mask) and SMI device smi1 sharing port GUID ...e001; a classic
    two-port HCA mlx5_2 beside them (port 1 INIT, port 2 ACTIVE)."""
    g = 0x0002C90300E0E001
    c = ca(r, "smi1", guid=0x0002C90300E0E000)
    port(c, 1, guid=g, cap="0xa651e848", lid="0x9")
    c = ca(r, "mlx5_2", guid=0x0002C90300F0F000)
    port(c, 1, state="2: INIT", guid=0x0002C90300F0F001, lid="0x0")
    port(c, 2, guid=0x0002C90300F0F002, lid="0xb")
    c = ca(r, "mlx5_0", guid=0x0002C90300E0E000)
    port(c, 1, guid=g, cap="0xa651ec48", lid="0x9")
    for i, (d, p) in enumerate([("mlx5_0", 1), ("smi1", 1), ("mlx5_2", 1),
                                ("mlx5_2", 2)]):
        umad(r, i, d, p)


@scenario
def empty(r):
    """/sys/class/infiniband exists but lists no device."""
    os.makedirs(os.path.join(r, "class", "infiniband"))


@scenario
def none(r):
    """No /sys/class/infiniband at all (no RDMA in the kernel)."""
    os.makedirs(os.path.join(r, "class", "misc"))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_fixtures.py OUTDIR")
    out = sys.argv[1]
    shutil.rmtree(out, ignore_errors=True)
    for name, fn in SCENARIOS.items():
        fn(os.path.join(out, name))
    with open(os.path.join(out, "SCENARIOS"), "w") as f:
        f.write("\n".join(SCENARIOS) + "\n")


if __name__ == "__main__":
    main()
