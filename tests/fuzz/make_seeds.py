#!/usr/bin/env python3
"""Writes the committed seed corpora of tests/fuzz (run from anywhere:
python3 tests/fuzz/make_seeds.py). Each seed is a well-formed input of its
parser, so the fuzzer starts from the accepted paths, plus a few damaged
ones. Attribute numbers: <rdma/rdma_netlink.h>; MAD layout: struct
ib_user_mad (<rdma/ib_user_mad.h>) followed by the 24-byte MAD common header
(IBTA 1.4 vol. 1, 13.4.2)."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(folder, name, data):
    d = os.path.join(HERE, 'corpus', folder)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# ---- netlink: attribute sets (struct nlattr: u16 len, u16 type, payload, pad 4)
DEV_INDEX, DEV_NAME, PORT_INDEX, NODE_GUID, NODE_TYPE = 1, 2, 3, 6, 14
CHARDEV_NAME, CHARDEV_ABI, CHARDEV, DRIVER_ID, COPY_ON_FORK = 70, 71, 72, 73, 93


def nla(t, payload):
    a = struct.pack('<HH', 4 + len(payload), t) + payload
    return a + b'\0' * (-len(a) % 4)


def s(text):
    return text.encode() + b'\0'


write('netlink', 'device', nla(DEV_INDEX, struct.pack('<I', 3)) + nla(DEV_NAME, s('rxe0')) +
      nla(PORT_INDEX, struct.pack('<I', 1)) + nla(NODE_GUID, struct.pack('<Q', 0x0002c903000e1234)) +
      nla(NODE_TYPE, b'\x01'))
write('netlink', 'device_min', nla(DEV_INDEX, struct.pack('<I', 0)) + nla(DEV_NAME, s('mlx5_0')))
write('netlink', 'device_unterminated', nla(DEV_INDEX, struct.pack('<I', 1)) + nla(DEV_NAME, b'siw0'))
write('netlink', 'chardev', nla(CHARDEV_NAME, s('uverbs0')) + nla(CHARDEV_ABI, struct.pack('<Q', 1)) +
      nla(CHARDEV, struct.pack('<Q', (231 << 20) | 192)) + nla(DRIVER_ID, struct.pack('<Q', 11)))
write('netlink', 'sys', nla(COPY_ON_FORK, b'\x01'))
write('netlink', 'truncated', nla(DEV_INDEX, struct.pack('<I', 3))[:6])

# ---- libibverbs.d config files
write('config', 'rxe', 'driver rxe\n')
write('config', 'mixed', '# comment\n\ndriver mlx5\ndriver  siw \t\nsoft_devices 4\n')
write('config', 'bad', 'driver\nsoft_devices 257\nsoft_devices -1\nunknown x\ndriver a b\n')
write('config', 'crlf', 'driver rxe\r\nsoft_devices 2\r\n')

# ---- sysfs uverbs entry: ibdev, dev, abi_version, node_type (see sysfs_fuzz.cpp)
def sysfs(*attrs):
    return b''.join(struct.pack('<H', len(a)) + a for a in attrs)


write('sysfs', 'rxe', sysfs(b'fz0\n', b'231:192\n', b'1\n', b'1: CA\n'))
write('sysfs', 'no_newline', sysfs(b'mlx5_0', b'231:193', b'1', b'4: RNIC'))
write('sysfs', 'bad_dev', sysfs(b'siw0\n', b'231\n', b'x\n', b'99\n'))
write('sysfs', 'long', sysfs(b'a' * 300, b'1:2:3\n', b'18446744073709551616\n', b'\n'))

# ---- MADs as umad_recv returns them: struct ib_user_mad (64 bytes; the fuzzer
# reads with the old ABI's 56-byte header, so the last 8 bytes start its MAD) + MAD
def user_mad(agent, status, qpn, lid, mad):
    hdr = struct.pack('<IIII', agent, status, 0, 0)            # agent_id, status, timeout, retries
    hdr += struct.pack('<I', 64 + len(mad))                    # length
    hdr += struct.pack('>IIH', qpn, 0x80010000, lid)           # qpn, qkey, lid (network order)
    hdr += bytes([0, 0, 0, 0, 0, 0])                           # sl, path_bits, grh_present, gid_index, hop_limit, traffic_class
    hdr += b'\xfe\x80' + b'\0' * 6 + b'\x00\x02\xc9\x03\x00\x0e\x12\x34'  # gid
    hdr += struct.pack('>I', 0) + struct.pack('<H', 0) + b'\0' * 6  # flow_label, pkey_index, reserved
    assert len(hdr) == 64, len(hdr)
    return hdr + mad


def mad_hdr(mgmt_class, method, attr_id, status=0):
    return struct.pack('>BBBBHHQHHI', 1, mgmt_class, 1, method, status, 0,
                       0x1234, attr_id, 0, 0)


write('mad', 'smp_nodeinfo', user_mad(1, 0, 0, 1, mad_hdr(0x01, 0x81, 0x0011) + b'\0' * 232))
write('mad', 'sa_pathrecord', user_mad(2, 0, 1, 2, mad_hdr(0x03, 0x92, 0x0035, 0x0100) + b'\0' * 232))
write('mad', 'perf_timeout', user_mad(3, 110, 1, 3, mad_hdr(0x04, 0x01, 0x0012) + b'\0' * 40))
write('mad', 'header_only', user_mad(0, 0, 0, 0, b''))

# ---- segment: a flags byte, then patches (u32 LE offset, length - 1, bytes)
# applied to a sound segment (segment_fuzz.cpp). Offsets of layout version
# 17 (providers/soft/shm.h): header 5042176 bytes, the arena's next-fit hint
# at 144 and its reuse queue's head and tail at 152 and 160, the QP and key
# tables' extents (TableExtent.used) at 168 and 192, qps at 12512 (128 bytes
# each: slot 0, srq 40, rq_ring 72; a RingLoc has kind at 0, off at 8), mrs
# at 1036512 (kind 0, key 4). The checks read entries below an extent only, so
# the seeds that make entries live raise the extent too. Another layout
# moves them: the seeds still damage something, only other fields.
HDR, QPS, MRS = 5042176, 12512, 1036512
EXT_QPS, EXT_MRS, ARENA_HINT, REUSE_HEAD, REUSE_TAIL = 168, 192, 144, 152, 160


def patch(off, data):
    return struct.pack('<IB', off, len(data) - 1) + data


for name, flags in (('sound', 0), ('sealed', 1), ('short_file', 2), ('other_device', 4),
                    ('other_user', 8)):
    write('segment', name, bytes([flags]))
write('segment', 'bad_magic', b'\0' + patch(0, b'\xff'))
write('segment', 'bad_magic_sealed', b'\1' + patch(0, b'\xff'))
qp_extent = patch(EXT_QPS, struct.pack('<I', 1))
mr_extent = patch(EXT_MRS, struct.pack('<I', 1))
write('segment', 'live_qp', b'\0' + qp_extent + patch(QPS, struct.pack('<I', 1)))
write('segment', 'live_qp_bad_srq',
      b'\0' + qp_extent + patch(QPS, struct.pack('<I', 1)) +
      patch(QPS + 40, struct.pack('<I', 0xffff)))
ring = struct.pack('<IIII', 0x52494e47, 16, 4, 0)  # magic, cell size, capacity, owner
write('segment', 'live_qp_arena_ring',
      b'\0' + qp_extent + patch(QPS, struct.pack('<I', 1)) +
      patch(QPS + 72, struct.pack('<IIQ', 1, 0, HDR + 64)) + patch(HDR + 64, ring))
write('segment', 'live_qp_above_extent', b'\0' + patch(QPS + 128, struct.pack('<I', 1)))
write('segment', 'extent_past_end', b'\0' + patch(EXT_QPS, struct.pack('<I', 4097)))
write('segment', 'arena_bad_block', b'\0' + patch(HDR, struct.pack('<Q', 100)))
write('segment', 'live_mr', b'\0' + mr_extent + patch(MRS, struct.pack('<II', 1, 1 << 8)))
write('segment', 'mr_wrong_slot', b'\0' + mr_extent + patch(MRS, struct.pack('<II', 1, 2 << 8)))
# The next-fit hint: inside the first block (not a block header), past the
# arena's end, and at a block the patch makes there (a two-block chain).
write('segment', 'arena_hint_inside_block', b'\0' + patch(ARENA_HINT, struct.pack('<Q', 4096)))
write('segment', 'arena_hint_past_end', b'\0' + patch(ARENA_HINT, struct.pack('<Q', 1 << 40)))
write('segment', 'arena_hint_wraps', b'\0' + patch(ARENA_HINT, struct.pack('<Q', (1 << 64) - 64)))
write('segment', 'arena_hint_second_block',
      b'\0' + patch(HDR, struct.pack('<QIIQ', 4096, 1, 0xffffffff, 0x424c4f434b4f5621)) +
      patch(HDR + 4096, struct.pack('<QIIQ', (256 << 20) - 4096, 1, 0xffffffff,
                                    0x424c4f434b4f5621)) +
      patch(ARENA_HINT, struct.pack('<Q', 4096)))
# The reuse queue (arena_alloc's reuse path; a block header is size, free,
# owner, magic, freed_ms, prev, next, queued): a head inside the first block
# (not a block header), past the arena's end, and a chain of two blocks, the
# first in use, the second free and queued with a stamp from the future and
# links to itself (a queue that is not one).
QUEUED, NONE = 0x51554555, (1 << 64) - 1
write('segment', 'reuse_head_inside_block', b'\0' + patch(REUSE_HEAD, struct.pack('<Q', 4096)))
write('segment', 'reuse_head_past_end',
      b'\0' + patch(REUSE_HEAD, struct.pack('<QQ', 1 << 40, 1 << 40)))
write('segment', 'reuse_queue_loop',
      b'\0' + patch(HDR, struct.pack('<QIIQ', 4096, 0, 0, 0x424c4f434b4f5621)) +
      patch(HDR + 4096, struct.pack('<QIIQQQQI', (256 << 20) - 4096, 1, 0xffffffff,
                                    0x424c4f434b4f5621, 1 << 63, 4096, 4096, QUEUED)) +
      patch(REUSE_HEAD, struct.pack('<QQ', 4096, 4096)))
write('segment', 'reuse_queue_one',
      b'\0' + patch(HDR, struct.pack('<QIIQ', 4096, 1, 0xffffffff, 0x424c4f434b4f5621)) +
      patch(HDR + 32, struct.pack('<QQI', NONE, NONE, QUEUED)) +
      patch(HDR + 4096, struct.pack('<QIIQ', (256 << 20) - 4096, 1, 0xffffffff,
                                    0x424c4f434b4f5621)) +
      patch(REUSE_HEAD, struct.pack('<QQ', 0, 0)))
