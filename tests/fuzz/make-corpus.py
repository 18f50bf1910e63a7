#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Seed corpus for fuzz-agent-parse: valid agent connections (every frame
kind and record type, protocol v1 and v2), one file each, into argv[1].
Layouts follow collectors/agent-proto.h (little-endian, sizes pinned there)."""
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


def connection(version, n_records):
    hello = struct.pack("<8I64s512s", 4242, version, 1, 1, 13000, 12040, 130001, 0, b"trainer", b"python train.py")
    device = struct.pack("<18I2Q48s32s96s", 0, 9, 0, 132, *([1] * 14), 80 << 30, 3 << 40,
                         b"GPU-aaaaaaaa-0000-0000-0000-000000000001", b"0000:18:00.0", b"H100")
    recs = string_rec(1, "gemm(float*, float*, int)") + string_rec(2, "cuLaunchKernel")
    for i in range(n_records):
        recs += record(2 + i % 6, i & 0xff)
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


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for version in (1, 2):
        for n in (0, 6, 60):
            with open(os.path.join(out, f"v{version}-{n}"), "wb") as f:
                f.write(connection(version, n))


if __name__ == "__main__":
    main()
