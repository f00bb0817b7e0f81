#!/usr/bin/env python3
"""A scripted RoCE v2 requester against the device's responder: which PSN a
plain ACK names after an RDMA READ or an atomic.

The kernel's rxe, as a requester, takes an ACK that names the PSN it waits
for as the answer to the request it waits on: an RDMA READ then completes
with its last response missing (the buffer holds old bytes, the status says
success) and an atomic without its original value. A responder answers a
duplicate SEND or WRITE with an ACK again (its first ACK may have been lost);
that ACK must name the last SEND or WRITE packet, never a PSN of a READ's
responses or of an atomic. (Seen in the test bed: rc_check against rxe1 over
netem, a WRITE packet held back 1 ms arrived while rxe waited for the READ's
last response.)

Runs as the client side of tests/roce/ack_psn_side.sh, against rc_check's
receiving side (rc_check -n 1 -s 1024): the TCP exchange of rc_check
(struct conn, then one-byte meetings), then, over UDP port 4791, as a
requester would: SEND Only (rc_check's message 0), RDMA WRITE Only, RDMA
READ of 2 packets, the WRITE again (a duplicate), FETCH_ADD, the WRITE
again, the FETCH_ADD again (answered from the replay cache: the counter
moves once), a FETCH_ADD that brings the counter back to 0.

Usage: ack_psn_peer.py -p TCP_PORT SERVER_IPV4
Exit 0 when every answer is as expected."""
import socket
import struct
import sys
import time

import rocev2

MTU = 1024
SIZE = 1024  # rc_check -s: one SEND Only of the path MTU
MY_QPN = 0x000ABC
MY_PSN = 0x000100

# RC opcodes (IBA 9.2, table 38).
SEND_ONLY, WRITE_ONLY, READ_REQ = 0x04, 0x0A, 0x0C
READ_FIRST, READ_LAST = 0x0D, 0x0F
ACK, ATOMIC_ACK, FETCH_ADD = 0x11, 0x12, 0x14

argv = sys.argv[1:]
port = int(argv[argv.index("-p") + 1])
server = argv[-1]
failures = []


def fill(n, seed):
    """rc_check's generator: message `seed`'s bytes."""
    x = (seed * 2654435761 + 1) & 0xFFFFFFFF
    out = bytearray(n)
    for i in range(n):
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        out[i] = x & 0xFF
    return bytes(out)


# ------------------------------------------------------------------ TCP
tcp = None
for _ in range(100):
    try:
        tcp = socket.create_connection((server, port))
        break
    except OSError:
        time.sleep(0.1)
if tcp is None:
    sys.exit("ack_psn_peer: cannot connect to rc_check")


def read_exact(n):
    b = b""
    while len(b) < n:
        c = tcp.recv(n - len(b))
        if not c:
            sys.exit("ack_psn_peer: rc_check closed the connection")
        b += c
    return b


def meet(byte=b"s"):
    tcp.sendall(byte)
    return read_exact(1)


udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER = IP_PMTUDISC_DO
udp.bind(("0.0.0.0", 4791))
src = udp.getsockname()
my_addr = tcp.getsockname()[0]
gid = b"\0" * 10 + b"\xff\xff" + socket.inet_aton(my_addr)
# struct conn: qpn, psn, rkey, pad (u32), addr (u64), gid (16 bytes)
tcp.sendall(struct.pack("<IIIIQ16s", MY_QPN, MY_PSN, 0, 0, 0, gid))
peer_qpn, _, rkey, _, addr, _ = struct.unpack("<IIIIQ16s", read_exact(40))
meet()  # both in RTS
udp.settimeout(0.2)


def send(opcode, psn, rest=b""):
    d = rocev2.bth(opcode, peer_qpn, psn, ack_req=True) + rest
    udp.sendto(rocev2.icrc(d, my_addr, server, src[1]), (server, 4791))


def receive(count=1):
    """The responses to one request, (opcode, psn, original value of an
    atomic or None) each:
    `count` of them (up to 10 s on a busy machine), then any more that come
    within 0.3 s (a second ACK would be a fault too)."""
    got = []
    end = time.monotonic() + 10
    while time.monotonic() < end:
        try:
            d, _ = udp.recvfrom(4096)
        except socket.timeout:
            continue
        opcode, psn = d[0], struct.unpack("!I", d[8:12])[0] & 0xFFFFFF
        orig = struct.unpack("!Q", d[16:24])[0] if opcode == ATOMIC_ACK else None
        got.append((opcode, psn, orig))
        if len(got) >= count:
            end = min(end, time.monotonic() + 0.3)
    return got


def expect(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got}, want {want}")
        print(f"ack_psn_peer: FAIL {what}: got {got}, want {want}")
    else:
        print(f"ack_psn_peer: ok {what}: {got}")


def reth(va, length):
    return struct.pack("!QII", va, rkey, length)


def atomic(va, add):
    return struct.pack("!QIQQ", va, rkey, add & 0xFFFFFFFFFFFFFFFF, 0)


P = MY_PSN
counter = addr + 2 * SIZE  # rc_check: after the message and read-back halves
send(SEND_ONLY, P, fill(SIZE, 0))
expect("SEND Only acknowledged", [(o, p) for o, p, _ in receive()], [(ACK, P)])
meet()  # rc_check has checked message 0
write_bytes = bytes(range(64))
send(WRITE_ONLY, P + 1, reth(addr, 64) + write_bytes)
expect("WRITE Only acknowledged", [(o, p) for o, p, _ in receive()], [(ACK, P + 1)])
send(READ_REQ, P + 2, reth(addr, 2 * MTU))
expect("READ answered", [(o, p) for o, p, _ in receive(2)], [(READ_FIRST, P + 2), (READ_LAST, P + 3)])
send(WRITE_ONLY, P + 1, reth(addr, 64) + write_bytes)
expect("duplicate WRITE after a READ: the ACK names the WRITE, not the READ's last PSN",
       [(o, p) for o, p, _ in receive()], [(ACK, P + 1)])
send(FETCH_ADD, P + 4, atomic(counter, 5))
expect("FETCH_ADD answered", receive(), [(ATOMIC_ACK, P + 4, 0)])
send(WRITE_ONLY, P + 1, reth(addr, 64) + write_bytes)
expect("duplicate WRITE after an atomic: the ACK names the WRITE, not the atomic",
       [(o, p) for o, p, _ in receive()], [(ACK, P + 1)])
send(FETCH_ADD, P + 4, atomic(counter, 5))
expect("duplicate FETCH_ADD answered from the replay cache",
       receive(), [(ATOMIC_ACK, P + 4, 0)])
send(FETCH_ADD, P + 5, atomic(counter, -5))
expect("FETCH_ADD back to 0 (the duplicate did not add again)",
       receive(), [(ATOMIC_ACK, P + 5, 5)])
peer_done = meet(b"x" if failures else b"d")
if peer_done != b"d":
    failures.append("rc_check found a failure")
print(f"ack_psn_peer: {len(failures)} failures")
sys.exit(1 if failures else 0)
