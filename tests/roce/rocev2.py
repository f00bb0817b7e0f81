"""RoCE v2 datagram helpers for the test scripts (send_malformed.py,
ack_psn_peer.py): the BTH and the ICRC as the RoCE v2 annex defines it,
over IPv4."""
import socket
import struct
import zlib


def bth(opcode, dqpn, psn=0, pad=0, ack_req=False):
    """A Base Transport Header: the opcode, MigReq set, the pad count, the
    default P_Key, the destination QP, the AckReq bit and the PSN."""
    return struct.pack("!BBHII", opcode, 0x40 | (pad << 4), 0xFFFF, dqpn & 0xFFFFFF,
                       (0x80000000 if ack_req else 0) | (psn & 0xFFFFFF))


def icrc(payload, src, dst, sport):
    """payload (BTH onwards) with its ICRC appended: CRC-32 over 8 bytes of
    ones, the IPv4 and UDP headers with TOS, TTL and checksums set to ones,
    the BTH with its FECN/BECN byte set to ones, then the rest; the IPv4
    identification is 0 (what Linux writes for an unconnected UDP socket's
    Don't Fragment datagrams). src and dst: dotted IPv4 addresses."""
    udp_len = 8 + len(payload) + 4
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0xFF, 20 + udp_len, 0, 0x4000, 0xFF, 17, 0xFFFF,
                     socket.inet_aton(src), socket.inet_aton(dst))
    udp = struct.pack("!HHHH", sport, 4791, udp_len, 0xFFFF)
    b = bytearray(payload[:12])
    b[4] = 0xFF
    return payload + struct.pack("<I", zlib.crc32(b"\xff" * 8 + ip + udp + bytes(b) + payload[12:]))
