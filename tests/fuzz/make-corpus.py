#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Seed corpus for a fuzz target (argv[2], fuzz-agent-parse when absent),
one file each, into argv[1]. fuzz-agent-parse: valid agent connections
(every frame kind and record type, protocol v1 to v3); layouts follow
collectors/agent-proto.h (little-endian, sizes pinned there).
fuzz-xspace: event stores as fuzz-xspace.c reads them, with a sane window
and records in it, some of them hostile."""
import os
import struct
import sys

MAGIC = 0x41444650
HELLO, DEVICE, CLOCK, RECORDS, ERROR, FLUSHED, STATS = 1, 2, 3, 4, 5, 6, 7
REC_SIZES = {2: 88, 3: 56, 4: 56, 5: 56, 6: 48, 7: 48}  # KERNEL..API


def frame(version, kind, payload):
    return struct.pack("<IHHII", MAGIC, version, kind, len(payload), 0) + payload


def string_rec(sid, text):
    t = text.encode()
    size = 16 + (len(t) + 7) // 8 * 8
    return (struct.pack("<HHIII", 1, size, len(t), sid, 0) + t).ljust(size, b"\0")


def record(rtype, fill):
    size = REC_SIZES[rtype]
    return struct.pack("<HHI", rtype, size, 0) + bytes([fill]) * (size - 8)


def nvtx_rec(kind, levels, corr):
    """An NVTX record (v3): kind 1 RANGE / 2 LAUNCH, levels (serial, text id), outermost first."""
    size = 56 + 8 * len(levels)
    return (struct.pack("<HHIQQQIIIIBBBBI", 8, size, len(levels), 5000, 9000, 0, 77, corr, 0, 0, kind, 0, 0, 0,
                        len(levels) - 1) + b"".join(struct.pack("<II", s, t) for s, t in levels))


def connection(version, n_records):
    hello = struct.pack("<8I64s512s", 4242, version, 1, 1, 13000, 12040, 130001, 0, b"trainer", b"python train.py")
    device = struct.pack("<18I2Q48s32s96s", 0, 9, 0, 132, *([1] * 14), 80 << 30, 3 << 40,
                         b"GPU-aaaaaaaa-0000-0000-0000-000000000001", b"0000:18:00.0", b"H100")
    recs = string_rec(1, "gemm(float*, float*, int)") + string_rec(2, "cuLaunchKernel")
    for i in range(n_records):
        recs += record(2 + i % 6, i & 0xff)
    if version >= 3:
        recs += string_rec(3, "train_step") + string_rec(4, "fusion.1#hlo_op=fusion.1,program_id=3#")
        recs += nvtx_rec(2, [(1, 3), (2, 4)], 9) + nvtx_rec(1, [(1, 3), (2, 4)], 0) + nvtx_rec(1, [(1, 3)], 0)
    stats = struct.pack("<7QII", 100, 2, 0, 0, 0, 3, 1, 1, 0)[:40 if version == 1 else 64]
    return b"".join([
        frame(version, HELLO, hello),
        frame(version, DEVICE, device),
        frame(version, CLOCK, struct.pack("<QQII", 1000, 1700000000000000000, 0, 0)),
        frame(version, RECORDS, recs),
        frame(version, ERROR, struct.pack("<Ii248s", 8, 0, b"a notice")),
        frame(version, FLUSHED, struct.pack("<Q", 1)),
        frame(version, STATS, stats),
    ])


def xspace_seed(n_events, hostile):
    """fuzz-xspace.c's layout: window, then per plane/line counts and records."""
    b = bytes([0]) + struct.pack("<I", 10_000_000)    # window mode 0, 10 ms
    b += bytes([0, 1, 0])                             # records near base; 1 plane; no plane stats
    b += bytes([0]) + struct.pack("<q", 7) + bytes([0])  # 1 line, id 7, name k0
    b += struct.pack("<H", n_events)
    for i in range(n_events):
        b += bytes([0x28 | (0x80 if hostile and i % 3 == 0 else 0)])  # statset + u64 value stat
        b += bytes([2]) + struct.pack("<I", 1000 * i)                  # start: base + u32
        if hostile and i % 2:
            b += bytes([0]) + struct.pack("<q", (1 << 62) if i % 4 == 1 else -1)
        else:
            b += bytes([2]) + struct.pack("<I", 500)[:3]
        b += struct.pack("<Q", i)                                      # correlation
    return b + bytes([1, 0]) + struct.pack("<H", 3)                     # one warning


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    if len(sys.argv) > 2 and sys.argv[2] == "fuzz-xspace":
        for n in (0, 5, 200):
            for hostile in (False, True):
                with open(os.path.join(out, f"store-{n}-{int(hostile)}"), "wb") as f:
                    f.write(xspace_seed(n, hostile))
        return
    for version in (1, 2, 3):
        for n in (0, 6, 60):
            with open(os.path.join(out, f"v{version}-{n}"), "wb") as f:
                f.write(connection(version, n))


if __name__ == "__main__":
    main()
