#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Seed corpus for a fuzz target (argv[2], fuzz-agent-parse when absent),
one file each, into argv[1]. fuzz-agent-parse: valid agent connections
(every frame kind and record type, protocol v1 to v3, and v5's Python records); layouts follow
proto/agent/agent-proto.h (little-endian, sizes pinned there).
fuzz-xspace: event stores as fuzz-xspace.c reads them, with a sane window
and records in it, some of them hostile. fuzz-request, fuzz-proc and
fuzz-xspace-reader: see their generators below."""
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


def py_recs():
    """Python records (v5): two frames, a stack of both (truncated), its launch and a sample."""
    frames = b"".join(struct.pack("<HHI6I", 14, 32, 0, fid, 5, 6, 10 * fid, 10 * fid + 2, 0) for fid in (1, 2))
    stack = struct.pack("<HHIIIII", 15, 24, 2, 1, 1, 1, 2)
    launch = struct.pack("<HHIQIIII", 16, 32, 0, 5000, 77, 9, 1, 0)
    sample = struct.pack("<HHIQII", 17, 24, 0, 6000, 77, 1)
    return string_rec(5, "/src/train.py") + string_rec(6, "forward") + frames + stack + launch + sample


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
    if version >= 5:
        recs += py_recs()
    stats = struct.pack("<7QII4QQIIQQ", 100, 2, 0, 0, 0, 3, 1, 1, 0, 1, 0, 1, 0, 1, 480, 900, 8000000, 1000000000)
    stats = stats[:{1: 40, 5: 96, 6: 128}.get(version, 64)]
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


def pb_varint(v):
    b = b""
    while True:
        if v < 0x80:
            return b + bytes([v])
        b += bytes([(v & 0x7f) | 0x80])
        v >>= 7


def pb_str(num, s):
    s = s.encode() if isinstance(s, str) else s
    return pb_varint(num << 3 | 2) + pb_varint(len(s)) + s


def pb_int(num, v):
    return pb_varint(num << 3) + pb_varint(v)


def request_seeds():
    """fuzz-request: selector byte (0 Profile, 1 Monitor, 2 Terminate) + wire bytes."""
    opts = pb_int(1, 1) + pb_int(5, 2) + pb_int(6, 1) + pb_int(9, 1700000000000000000) + pb_int(10, 2000) + \
        pb_str(11, "/srv/profiles/run1")
    prof = pb_int(1, 2000) + pb_int(2, 1000000) + pb_str(3, "trace_viewer") + pb_str(3, "xplane.pb") + \
        pb_str(4, opts) + pb_str(5, "/srv/profiles/run1/plugins/profile") + pb_str(6, "2024_01_01") + \
        pb_str(7, "worker-0")
    yield "profile", b"\0" + prof
    yield "profile-dotdot", b"\0" + pb_str(5, "/srv/profiles/../etc") + pb_str(7, "..")
    yield "profile-nul", b"\0" + pb_str(6, "a\0/../x")
    yield "profile-badutf8", b"\0" + pb_str(7, b"\xff\xfe")
    def adv(key, value):  # one advanced_configuration map entry (field 12)
        return pb_str(12, pb_str(1, key) + pb_str(2, value))
    gpu = adv("gpu_pm_sample_counters", pb_str(1, "sm__cycles_active.avg,dram__throughput")) + \
        adv("gpu_pm_sample_interval_us", pb_int(3, 250)) + \
        adv("gpu_pm_sample_buffer_size_per_gpu_mb", pb_int(3, 128)) + \
        adv("gpu_enable_nvtx_tracking", pb_int(2, 0)) + \
        adv("gpu_enable_cupti_activity_graph_trace", pb_int(2, 1)) + \
        adv("gpu_max_activity_api_events", pb_int(3, 1 << 40)) + \
        adv("gpu_num_chips_to_profile_per_task", pb_int(3, 2)) + \
        adv("override_hostname", pb_str(1, "h")) + adv("unknown_key", pb_int(3, 5))
    yield "profile-gpu-options", b"\0" + pb_int(1, 2000) + pb_str(4, opts + gpu)
    yield "monitor", b"\1" + pb_int(1, 1000) + pb_int(2, 1) + pb_int(3, 1)
    yield "terminate", b"\2" + pb_str(1, "2024_01_01")


def proc_seeds():
    """fuzz-proc: selector byte (0 stat, 1 meminfo+loadavg, 2 pid files, 3 net/dev, 4 diskstats) + text."""
    yield "stat", b"\0cpu  10 0 5 100 1 0 0 0 0 0\ncpu0 5 0 2 50 1 0 0 0 0 0\ncpu1 5 0 3 50 0 0 0 0 0 0\nctxt 1234\n"
    yield "meminfo", b"\1MemTotal: 1000 kB\nMemFree: 200 kB\nMemAvailable: 500 kB\nBuffers: 10 kB\nCached: 100 kB\n"
    yield "loadavg", b"\1" + b"0.50 0.40 0.30 2/300 12345\n"
    yield "pid-stat", b"\2" + b"42 (py thon) S 1 42 42 0 -1 4194560 100 0 0 0 11 22 0 0 20 0 7 0 12345 1000000 250\n"
    yield "pid-status", b"\2Name:\tpython\nVmRSS:\t  1024 kB\nThreads:\t7\n"
    yield "pid-cmdline", b"\2python\0train.py\0--x\0"
    yield "netdev", b"\3Inter-|   Receive\n face |bytes packets\n    lo: 100 1 0 0 0 0 0 0 100 1 0 0 0 0 0 0\n  eth0: 5000 10 0 0 0 0 0 0 7000 12 0 0 0 0 0 0\n"
    yield "diskstats", b"\4   8       0 sda 100 0 800 10 200 0 1600 20 0 30 30 0 0 0 0\n 259 0 nvme0n1 1 0 8 1 1 0 8 1 0 1 1\n"


def reader_seeds():
    """fuzz-xspace-reader: XSpace files (a plane with metadata, a line, events with stats)."""
    stat_md = pb_int(1, 1) + pb_str(2, "correlation_id")
    stat_md2 = pb_int(1, 2) + pb_str(2, "kernel_details")
    ev_md = pb_int(1, 1) + pb_str(2, "gemm") + pb_str(5, pb_int(1, 2) + pb_str(5, "regs:32"))
    ev = pb_int(1, 1) + pb_int(2, 1000) + pb_int(3, 5000) + pb_str(4, pb_int(1, 1) + pb_int(3, 77)) + \
        pb_str(4, pb_int(1, 2) + pb_int(7, 1))
    line = pb_int(1, 7) + pb_str(2, "Stream #7") + pb_int(3, 1700000000000000000) + pb_str(4, ev) + pb_str(4, ev) + \
        pb_str(11, "python / Stream #7")
    plane = pb_int(1, 1) + pb_str(2, "/device:GPU:0") + pb_str(3, line) + \
        pb_str(4, pb_int(1, 1) + pb_str(2, ev_md)) + pb_str(5, pb_int(1, 1) + pb_str(2, stat_md)) + \
        pb_str(5, pb_int(1, 2) + pb_str(2, stat_md2)) + pb_str(6, pb_int(1, 1) + pb_int(4, 9))
    # profd's information lines (xs_space_info): two, and an empty one between.
    env = pb_int(1, 2) + pb_str(2, "Task Environment") + pb_str(5, pb_int(1, 3) + pb_str(2, pb_int(1, 3) + pb_str(
        2, "profd_info"))) + pb_str(6, pb_int(1, 3) + pb_str(5, "pid 1 (a): 3 steps\n\npid 1 (a): Python launch "
                                                          "stacks cost 0.48 us a launch"))
    yield "space", pb_str(1, plane) + pb_str(1, pb_str(2, "/host:CPU")) + pb_str(1, env) + pb_str(2, "an error") + \
        pb_str(3, "a warning") + pb_str(4, "worker-0")
    yield "empty", b""


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    gens = {"fuzz-request": request_seeds, "fuzz-proc": proc_seeds, "fuzz-xspace-reader": reader_seeds}
    if len(sys.argv) > 2 and sys.argv[2] in gens:
        for name, data in gens[sys.argv[2]]():
            with open(os.path.join(out, name), "wb") as f:
                f.write(data)
        return
    if len(sys.argv) > 2 and sys.argv[2] == "fuzz-xspace":
        for n in (0, 5, 200):
            for hostile in (False, True):
                with open(os.path.join(out, f"store-{n}-{int(hostile)}"), "wb") as f:
                    f.write(xspace_seed(n, hostile))
        return
    for version in (1, 2, 3, 5, 6):
        for n in (0, 6, 60):
            with open(os.path.join(out, f"v{version}-{n}"), "wb") as f:
                f.write(connection(version, n))


if __name__ == "__main__":
    main()
