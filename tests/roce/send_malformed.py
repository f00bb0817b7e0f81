#!/usr/bin/env python3
"""Sends malformed RoCE v2 datagrams to a device's UDP port 4791 (bad input
from the wire): each kind the receiver must drop and count under its own
reason. Usage: send_malformed.py [--mad] SRC_IPV4 DST_IPV4 [COUNT]

--mad: well-formed UD datagrams to QP1 (the GSI Q_Key) whose CM MADs are
malformed, each kind once per COUNT: too short, a bad MAD header, an
attribute the CM does not handle, a non-zero reserved field, a QPN of 0;
the connection manager drops and counts each under its reason.

The ICRC of the datagrams that should get past the ICRC check is computed as
the RoCE v2 annex defines it (rocev2.py)."""
import socket
import struct
import sys

import rocev2
from rocev2 import bth

args = sys.argv[1:]
mad_mode = bool(args) and args[0] == "--mad"
if mad_mode:
    args = args[1:]
src, dst = args[0], args[1]
count = int(args[2]) if len(args) > 2 else 5

s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER = IP_PMTUDISC_DO
s.bind((src, 0))
sport = s.getsockname()[1]


def icrc(payload):
    return rocev2.icrc(payload, src, dst, sport)


def cm_mad(attr=0x0010, class_version=2, reserved=0, qpn=0x000123, size=256):
    """A CM REQ MAD (IBTA vol 1 ch. 12-13): header, then the message."""
    hdr = struct.pack("!BBBBHHQHHI", 1, 0x07, class_version, 0x03, 0, 0, 0x1234, attr, 0, 0)
    body = bytearray(232)
    struct.pack_into("!I", body, 0, 0x11223344)   # local communication ID
    struct.pack_into("!I", body, 4, reserved)     # reserved
    struct.pack_into("!Q", body, 8, 0x01060000 | 7174)  # service ID
    body[32:35] = qpn.to_bytes(3, "big")          # local QPN
    body[50] = 3 << 4                              # path MTU 1024
    return (hdr + bytes(body))[:size]


if mad_mode:
    deth = struct.pack("!II", 0x80010000, 1)       # GSI Q_Key, source QP 1
    mads = {
        "length": cm_mad(size=100),
        "header": cm_mad(class_version=1),
        "attribute": cm_mad(attr=0x0019),          # LAP
        "reserved": cm_mad(reserved=1),
        "field": cm_mad(qpn=0),
    }
    for name, m in mads.items():
        for _ in range(count):
            s.sendto(icrc(bth(0x64, 1) + deth + m), (dst, 4791))
    print("sent %d malformed CM MADs of each kind: %s" % (count, " ".join(mads)))
    sys.exit(0)

kinds = {
    # reason the receiver gives -> datagram
    "tiny": b"\x04\x40\xff",                                 # not even a BTH (reason short)
    "short": icrc(bth(0x06, 0x20)),                         # RDMA WRITE First without its RETH
    "length": b"\x00" * 9000,                               # larger than any packet
    "icrc": bth(0x04, 0x20) + b"\x00" * 8,                  # SEND Only with a wrong ICRC
    "opcode": icrc(bth(0x15, 0x20) + b"\x00" * 4),          # reserved RC opcode
    "version": icrc(bytes([0x04, 0x41]) + bth(0x04, 0x20)[2:]),  # TVer 1
    "qpn": icrc(bth(0x04, 0xabcdef) + b"\x00" * 4),         # no such QP
    "pad": icrc(bth(0x11, 0x20, pad=1) + b"\x1f\x00\x00\x00"),   # pad on an ACK
}
# The oversized one goes out fragmented (the link's MTU is smaller): the
# receiver's kernel reassembles it, the device finds it larger than any packet.
big = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
big.setsockopt(socket.IPPROTO_IP, 10, 0)  # IP_PMTUDISC_DONT
big.bind((src, 0))
for name, d in kinds.items():
    for _ in range(count):
        (big if name == "length" else s).sendto(d, (dst, 4791))
print("sent %d malformed datagrams of each kind: %s" % (count, " ".join(kinds)))
