# SPDX-License-Identifier: MIT
"""The memory profile, end to end: the fake CUDA job's allocations through
the real agent (CUPTI MEMORY2 records, MEM_STATE at capture start) into
MemoryAllocation / MemoryDeallocation events on /host:CPU with the stats
XProf's memory profile reads (xprof/convert/xplane_to_memory_profile.cc),
every number int64, running totals starting at the level in use when the
capture opened."""
import os
import subprocess
import sys
import unittest

import profdtest as T
import test_agent_cupti as C

MIB = 1 << 20
# fake-cuda.c: what a device's primary context holds before any allocation.
CONTEXT_BYTES = 300 * MIB
# CUpti_ActivityKind: CONCURRENT_KERNEL, DRIVER, MEMORY2
MEMORY_TRACED = 1 << 10 | 1 << 4 | 1 << 49
# collectors/agent/agent-memory.h AGENT_MEMORY_MAX_RECORDS
MAX_RECORDS = 1 << 18


def value(s):
    """(oneof name, value) of an XStat."""
    kind = s.WhichOneof("value")
    return kind, getattr(s, kind)


def memory_events(x):
    """MemoryAllocation/MemoryDeallocation events of /host:CPU in time order:
    (kind, line name, {stat: (type, value)}), strings resolved."""
    out = []
    for p in x.planes:
        if p.name != "/host:CPU":
            continue
        for line in p.lines:
            for e in line.events:
                name = p.event_metadata[e.metadata_id].name
                if name not in ("MemoryAllocation", "MemoryDeallocation"):
                    continue
                st = {}
                for s in e.stats:
                    k, v = value(s)
                    if k == "ref_value":
                        k, v = "str_value", p.stat_metadata[v].name
                    st[p.stat_metadata[s.metadata_id].name] = (k, v)
                out.append((line.timestamp_ns * 1000 + e.offset_ps, name, line.name, st))
    out.sort(key=lambda t: t[0])
    return [o[1:] for o in out]


class MemoryProfile(C.AgentOnFakeCupti):
    def capture_memory(self, ms, work, app):
        # Wait for MEMORY2 as well as kernels before the job allocates.
        old = C.TRACED
        C.TRACED = MEMORY_TRACED
        try:
            return self.capture_while(ms, work, app)
        finally:
            C.TRACED = old

    def test_running_totals_start_at_the_level_before_the_capture(self):
        a, info = self.app()
        plane_of = {d.local_ordinal: d.plane_id for d in info.devices}
        pre = int(a.ask("malloc 0 1000000")[1], 16)  # before the capture: only in the level
        self.assertTrue(pre)

        def work():
            p1 = a.ask(f"malloc 0 {4 * MIB}")
            p2 = a.ask(f"mallocasync 0 {2 * MIB}")
            f1 = a.ask(f"free {p1[1]}")
            p3 = a.ask(f"malloc 1 {8 * MIB}")
            f2 = a.ask(f"freeasync {p2[1]}")
            a.ask("busy 1700")
            return p1, p2, f1, p3, f2

        x, (p1, p2, f1, p3, f2) = self.capture_memory(1500, work, a)
        self.assertEqual((p1[0], p2[0], p3[0], f1, f2), ("ptr", "ptr", "ptr", ["freed", str(4 * MIB)],
                                                           ["freed", str(2 * MIB)]))
        ev = memory_events(x)
        self.assertEqual(len(ev), 5, ev)
        base0 = CONTEXT_BYTES + 1000000
        g0 = f"GPU:{plane_of[0]} pid {a.pid}"
        g1 = f"GPU:{plane_of[1]} pid {a.pid}"
        want = [  # kind, allocator, bytes, in use after, peak, addr, region
            ("MemoryAllocation", g0, 4 * MIB, base0 + 4 * MIB, base0 + 4 * MIB, p1[1], "device"),
            ("MemoryAllocation", g0, 2 * MIB, base0 + 6 * MIB, base0 + 6 * MIB, p2[1], "async pool"),
            ("MemoryDeallocation", g0, 4 * MIB, base0 + 2 * MIB, base0 + 6 * MIB, p1[1], "device"),
            ("MemoryAllocation", g1, 8 * MIB, CONTEXT_BYTES + 8 * MIB, CONTEXT_BYTES + 8 * MIB, p3[1], "device"),
            ("MemoryDeallocation", g0, 2 * MIB, base0, base0 + 6 * MIB, p2[1], "async pool"),
        ]
        for (kind, line, st), (wkind, alloc, nbytes, in_use, peak, addr, region) in zip(ev, want):
            self.assertEqual(line, f"fake-cuda-app (pid {a.pid})/GPU memory")
            self.assertEqual(kind, wkind, st)
            self.assertEqual(st["allocator_name"], ("str_value", alloc), st)
            dev = int(alloc.split()[0].split(":")[1])
            # Every number as int64: XProf reads a uint64 here as 0.
            self.assertEqual(st["device_ordinal"], ("int64_value", dev))
            self.assertEqual(st["bytes_allocated"], ("int64_value", in_use), (kind, alloc))
            self.assertEqual(st["peak_bytes_in_use"], ("int64_value", peak), (kind, alloc))
            self.assertEqual(st["requested_bytes"], ("int64_value", nbytes))
            self.assertEqual(st["allocation_bytes"], ("int64_value", nbytes))
            self.assertEqual(st["bytes_reserved"], ("int64_value", 0))
            self.assertEqual(st["addr"], ("int64_value", int(addr, 16)))
            self.assertEqual(st["region_type"], ("str_value", region))
            # No NVTX range around these allocations, no steps: no tf_op, no group_id.
            self.assertNotIn("tf_op", st)
            self.assertNotIn("group_id", st)
        # The trace viewer keeps its instants on the device planes.
        instants = [p.event_metadata[e.metadata_id].name for p in x.planes if p.name.startswith("/device:GPU:")
                    for l in p.lines for e in l.events
                    if p.event_metadata[e.metadata_id].name in ("MemoryAlloc", "MemoryFree")]
        self.assertEqual(sorted(instants), ["MemoryAlloc"] * 3 + ["MemoryFree"] * 2)
        self.assertEqual(C.warnings_of(x, a.pid), [], list(x.warnings))

    def test_an_unknown_starting_level_is_said(self):
        a, _ = self.app(FAKE_CUDA_NO_CONTEXT="1")

        def work():
            p = a.ask(f"malloc 0 {3 * MIB}")
            a.ask("busy 1700")
            return p

        x, p = self.capture_memory(1200, work, a)
        ev = memory_events(x)
        self.assertEqual(len(ev), 1, ev)
        self.assertEqual(ev[0][2]["bytes_allocated"], ("int64_value", 3 * MIB))
        self.assertTrue([w for w in C.warnings_of(x, a.pid) if "when the capture opened is unknown" in w],
                        list(x.warnings))

    def test_memory_records_beyond_the_budget_are_counted(self):
        a, _ = self.app()
        pairs = MAX_RECORDS // 2 + 5000

        def work():
            r = a.ask(f"memchurn {pairs} 0 4096")
            a.ask("busy 2000")
            return r

        x, r = self.capture_memory(4000, work, a)
        self.assertEqual(r, ["churned", str(pairs)])
        ev = memory_events(x)
        self.assertEqual(len(ev), MAX_RECORDS, len(ev))
        dropped = [w for w in C.warnings_of(x, a.pid) if "beyond the memory profile's budget" in w]
        self.assertEqual(len(dropped), 1, list(x.warnings))
        self.assertIn(f"{2 * pairs - MAX_RECORDS} GPU memory records", dropped[0])
        # The totals stay right up to the budget: every pair returns to the level.
        levels = {st["bytes_allocated"][1] for k, _, st in ev if k == "MemoryDeallocation"}
        self.assertEqual(levels, {CONTEXT_BYTES})

    def test_gpu_planes_carry_roofline_peaks(self):
        a, _ = self.app()
        x, _ = self.capture_while(800, lambda: (a.ask("launch 3 _Z6vecAddPKfS0_Pfi 0 7"),
                                                a.ask("launch 3 _Z6vecAddPKfS0_Pfi 1 7")), a)
        planes = [p for p in x.planes if p.name.startswith("/device:GPU:")]
        self.assertEqual(len(planes), 2)
        for p in planes:
            st = {p.stat_metadata[s.metadata_id].name: value(s) for s in p.stats}
            # fake-cuda.c: cc 9.0, 132 SMs at 1980 MHz, 2619 MHz x 5120-bit memory.
            # Doubles: XProf reads a peak of another type as 0.
            kind, tf = st["peak_teraflops_per_second"]
            self.assertEqual(kind, "double_value")
            self.assertAlmostEqual(tf, 4096 * 132 * 1.98e9 / 1e12)
            kind, bw = st["peak_hbm_bw_gigabytes_per_second"]
            self.assertEqual(kind, "double_value")
            self.assertAlmostEqual(bw, 2 * 2619e6 * 5120 / 8 / 1e9)

    def test_doctor_reads_the_capture_back(self):
        """profctl doctor FILE on this capture: the tools it fills, and what is missing."""
        profctl = os.environ.get("PROFCTL")
        if not profctl:
            self.skipTest("PROFCTL not set")
        a, _ = self.app()

        def work():
            a.ask("launch 20 _Z6vecAddPKfS0_Pfi 0 7")
            p = a.ask(f"malloc 0 {MIB}")
            a.ask(f"free {p[1]}")
            a.ask("busy 1700")

        x, _ = self.capture_memory(1200, work, a)
        path = os.path.join(self.tmp, "cap.xplane.pb")
        with open(path, "wb") as f:
            f.write(x.SerializeToString())
        out = subprocess.run([profctl, "doctor", path], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        got = T.doctor_verdicts(out.stdout)
        self.assertEqual(got["trace_viewer"][0], True, out.stdout)
        self.assertEqual(got["kernel_stats"], (True, "20 kernels with kernel_details"), out.stdout)
        self.assertEqual(got["memory_profile"],
                         (True, "2 MemoryAllocation/MemoryDeallocation events on /host:CPU"), out.stdout)
        # No NVTX in this job yet: no op names, no steps, and the check says so.
        self.assertEqual(got["framework_op_stats"][0], False)
        self.assertIn("tf_op", got["framework_op_stats"][1])
        self.assertEqual(got["input_pipeline"][0], False)
        self.assertIn("group_id", got["input_pipeline"][1])
        self.assertIn("no op metrics", got["roofline"][1])


def load_tests(loader, tests, pattern):
    """Only this file's tests, not the ones MemoryProfile inherits."""
    suite = unittest.TestSuite()
    for name in loader.getTestCaseNames(MemoryProfile):
        if name in MemoryProfile.__dict__:
            suite.addTest(MemoryProfile(name))
    return suite


if __name__ == "__main__":
    if not (C.AGENT and os.path.exists(C.APP)):
        print("libprofd-agent.so or the fake CUDA app not built")
        sys.exit(77)
    unittest.main(verbosity=2)
