#!/usr/bin/env python3
"""Give a kernel RDMA device the sysfs link to its network interface that
rdma-core's python tests look for (/sys/class/infiniband/DEV/device/net/NAME).

    sysfs_netdev.py DEV IP  (as root, inside a private mount namespace)

rxe and siw are virtual devices: they have no "device" parent in sysfs, so
rdma-core's tests skip every rdmacm test ("doesn't have net interface"). This
builds a copy of /sys/class made of symlinks to the real entries, in which
infiniband/DEV is a folder of symlinks to the device's real entries plus
device/net/<its netdev> (the interface holding IP), and binds it
over /sys/class. Only this namespace sees it; the files read through it are
the kernel's own.
"""
import json
import os
import subprocess
import sys
import tempfile

dev, ip = sys.argv[1], sys.argv[2]
cls = "/sys/class"
real_dev = os.path.realpath(os.path.join(cls, "infiniband", dev))
netdev = None
for link in json.loads(subprocess.check_output(["ip", "-j", "addr", "show"])):
    if any(a.get("local") == ip for a in link.get("addr_info", [])):
        netdev = link["ifname"]
if not netdev:
    sys.exit("no network interface holds %s (device %s)" % (ip, dev))

work = tempfile.mkdtemp(prefix="ov-sysclass-")
for name in os.listdir(cls):
    src = os.path.join(cls, name)
    dst = os.path.join(work, name)
    os.makedirs(dst, exist_ok=True)
    for entry in os.listdir(src):
        path = os.path.join(src, entry)
        if name == "infiniband" and entry == dev:
            os.makedirs(os.path.join(dst, entry), exist_ok=True)
            for sub in os.listdir(real_dev):
                os.symlink(os.path.join(real_dev, sub), os.path.join(dst, entry, sub))
            os.makedirs(os.path.join(dst, entry, "device", "net", netdev), exist_ok=True)
        else:
            os.symlink(os.path.realpath(path), os.path.join(dst, entry))
subprocess.run(["mount", "--bind", work, cls], check=True)
print("%s: device/net/%s" % (dev, netdev))
