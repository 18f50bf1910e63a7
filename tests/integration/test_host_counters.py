# SPDX-License-Identifier: MIT
"""Host counters from /proc, end to end: the real daemon reads a fixture
/proc tree (--proc-root) that a thread of this test rewrites during the
capture, and the XSpace that comes back over gRPC must hold the counter
events XProf's trace viewer draws (docs/counters.md): a `_counters_` line
(id INT64_MAX) on the /host:CPU plane, one zero-duration event per point,
named after the counter, carrying one double stat of the same name.

The fixture is built so that every value can be checked exactly whatever
the timing: each step of the writer adds the same jiffies to each CPU, so
a CPU's utilisation is the same over one step or several; memory and load
take one of a few known values; context switches grow by a fixed amount
per step, so rate * interval is a whole number of steps.
"""
import os
import shutil
import tempfile
import threading
import time
import unittest

import profdtest as T

P = T.protos()

HZ = 20
CAPTURE_MS = 1000
STEP_S = 0.03  # the writer's period: shorter than the sampling period

# Per CPU, the jiffies each step adds: user, nice, system, idle.
STEP = [(30, 0, 10, 60),   # 40 % busy
        (5, 0, 0, 95),     # 5 %
        (50, 25, 0, 25),   # 75 %
        (0, 0, 0, 100)]    # idle
UTIL = {f"cpu{i}_util_pct": 100.0 * sum(s[:3]) / sum(s) for i, s in enumerate(STEP)}
UTIL["cpu_util_pct"] = 100.0 * sum(sum(s[:3]) for s in STEP) / sum(sum(s) for s in STEP)
BASE = [(1132, 34, 1441, 11311718), (1123, 0, 849, 11313845), (2050, 12, 770, 11309921),
        (988, 3, 1210, 11312004)]
CTXT_BASE, CTXT_STEP = 215062148, 1000
MEM_TOTAL_KB = 16 * 1024 * 1024
MEM_AVAIL_KB = [8 * 1024 * 1024 + k * 256 * 1024 for k in range(4)]
LOADS = ["0.25", "0.50", "1.25", "2.00"]

NAMES = set(UTIL) | {"memory_used_bytes", "memory_available_bytes", "load_avg_1m",
                     "context_switches_per_s"}
INT64_MAX = 2**63 - 1


def stat_text(k):
    cpus = [[b + k * s for b, s in zip(base, step)] for base, step in zip(BASE, STEP)]
    # iowait irq softirq steal guest guest_nice stay constant
    rest = [[3675, 127, 438, 0, 0, 0], [2614, 0, 18, 0, 0, 0], [1503, 0, 97, 5, 0, 0],
            [2210, 0, 61, 0, 0, 0]]
    rows = [c + r for c, r in zip(cpus, rest)]
    total = [sum(col) for col in zip(*rows)]
    lines = ["cpu  " + " ".join(map(str, total))]
    lines += [f"cpu{i} " + " ".join(map(str, r)) for i, r in enumerate(rows)]
    lines += ["intr 114930548 113 0 0 0", f"ctxt {CTXT_BASE + k * CTXT_STEP}",
              "btime 1763791200", "processes 86113", "procs_running 2", "procs_blocked 0"]
    return "\n".join(lines) + "\n"


def meminfo_text(k):
    avail = MEM_AVAIL_KB[k % 4]
    return (f"MemTotal:       {MEM_TOTAL_KB} kB\nMemFree:        {avail - 1024} kB\n"
            f"MemAvailable:   {avail} kB\nBuffers:           1024 kB\nCached:           2048 kB\n"
            "HugePages_Total:       0\n")


def loadavg_text(k):
    return f"{LOADS[k % 4]} 0.58 0.59 2/1234 {56789 + k}\n"


def write_atomic(root, name, text):
    tmp = os.path.join(root, "." + name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(root, name))


class Writer(threading.Thread):
    """Moves the fixture tree one step every STEP_S until stopped."""

    def __init__(self, root, files=("stat", "meminfo", "loadavg")):
        super().__init__(daemon=True)
        self.root, self.files, self.k = root, files, 0
        self.halt = threading.Event()
        self.write()

    def write(self):
        gen = {"stat": stat_text, "meminfo": meminfo_text, "loadavg": loadavg_text}
        for name in self.files:
            write_atomic(self.root, name, gen[name](self.k))

    def run(self):
        while not self.halt.wait(STEP_S):
            self.k += 1
            self.write()

    def stop(self):
        self.halt.set()
        self.join()


def counter_points(space):
    """{name: [(t_ps, value)]} from the /host:CPU counter line; checks the
    form every counter event must have on the way."""
    planes = [p for p in space.planes if p.name == "/host:CPU"]
    assert len(planes) == 1, [p.name for p in space.planes]
    plane = planes[0]
    lines = [l for l in plane.lines if l.name == "_counters_"]
    assert len(lines) == 1, [(l.id, l.name) for l in plane.lines]
    line = lines[0]
    assert line.id == INT64_MAX, line.id
    assert line.timestamp_ns == 0
    points = {}
    for e in line.events:
        name = plane.event_metadata[e.metadata_id].name
        assert e.duration_ps == 0, (name, e.duration_ps)
        assert len(e.stats) == 1, (name, e.stats)
        st = e.stats[0]
        assert plane.stat_metadata[st.metadata_id].name == name
        assert st.WhichOneof("value") == "double_value", st
        points.setdefault(name, []).append((line.timestamp_ns * 1000 + e.offset_ps, st.double_value))
    return points


class HostCounters(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="profd-proc-")
        cls.writer = Writer(cls.root)
        cls.writer.start()
        cls.d = T.Daemon("--proc-root", cls.root, "--host-sample-hz", str(HZ))
        cls.ch = T.channel(cls.d.addr)
        cls.profile = T.stub(cls.ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)

    @classmethod
    def tearDownClass(cls):
        cls.writer.stop()
        cls.ch.close()
        rc = cls.d.stop()
        shutil.rmtree(cls.root, ignore_errors=True)
        assert rc == 0, cls.d.log()

    def capture(self, ms, sid):
        req = T.profile_request(P, ms, f"localhost:{self.d.port}", session_id=sid)
        resp = self.profile(req, timeout=30)
        return T.decode_xspace(P, resp.tool_data[0].data)

    def check_capture(self, space, ms):
        self.assertFalse([w for w in space.warnings if "host.proc" in w], list(space.warnings))
        pts = counter_points(space)
        self.assertEqual(set(pts), NAMES)

        # Every point lies inside the window.
        for name, series in pts.items():
            for t, _ in series:
                self.assertGreaterEqual(t, 0, name)
                self.assertLess(t, (ms + 100) * 10**9, name)

        # The configured rate: gauges get a point on every tick.
        n = len(pts["memory_used_bytes"])
        want = HZ * ms / 1000
        self.assertGreaterEqual(n, want * 0.7, n)
        self.assertLessEqual(n, want * 1.3, n)
        self.assertEqual(len(pts["load_avg_1m"]), n)
        self.assertEqual(len(pts["context_switches_per_s"]), n)

        # Utilisation: exact, whatever the number of steps between samples.
        for name, want_pct in UTIL.items():
            values = {v for _, v in pts[name]}
            self.assertEqual(values, {want_pct}, name)
            self.assertGreaterEqual(len(pts[name]), n * 0.5, name)

        # Memory: one of the fixture's states, used + available = total,
        # and the changes the writer made are seen.
        total = MEM_TOTAL_KB * 1024
        avail = dict(pts["memory_available_bytes"])
        self.assertTrue(set(avail.values()) <= {kb * 1024.0 for kb in MEM_AVAIL_KB}, avail)
        self.assertGreaterEqual(len(set(avail.values())), 2)
        for t, used in pts["memory_used_bytes"]:
            self.assertEqual(used + avail[t], total)

        loads = {v for _, v in pts["load_avg_1m"]}
        self.assertTrue(loads <= {float(x) for x in LOADS}, loads)
        self.assertGreaterEqual(len(loads), 2)

        # Context switches/s over the interval between two points is a whole
        # number of writer steps (the first point's interval starts at the
        # baseline taken before the window).
        ctxt = pts["context_switches_per_s"]
        steps = 0
        for (t0, _), (t1, rate) in zip(ctxt, ctxt[1:]):
            self.assertGreaterEqual(rate, 0)
            k = rate * (t1 - t0) / 1e12 / CTXT_STEP
            self.assertAlmostEqual(k, round(k), places=6)
            steps += round(k)
        self.assertGreater(steps, 0)

    def test_capture_has_host_counters_from_the_fixture(self):
        self.check_capture(self.capture(CAPTURE_MS, "host1"), CAPTURE_MS)

    def test_second_capture_after_the_hub_moved_out(self):
        # The first window's snapshot took the hub's planes: the collector
        # must re-resolve its plane, line and ids (collector.h hub rule).
        self.check_capture(self.capture(CAPTURE_MS, "host2a"), CAPTURE_MS)
        self.check_capture(self.capture(CAPTURE_MS, "host2b"), CAPTURE_MS)

    def test_overlapping_captures_both_get_counters(self):
        # The inner window closes while the outer is open: its snapshot is a
        # copy and the hub keeps its generation; the outer one then takes
        # the hub itself.
        out = {}

        def outer():
            out["outer"] = self.capture(CAPTURE_MS, "outer")

        t = threading.Thread(target=outer)
        t.start()
        time.sleep(0.3)
        inner = self.capture(400, "inner")
        t.join()
        self.check_capture(out["outer"], CAPTURE_MS)
        self.check_capture(inner, 400)


class FileProblems(unittest.TestCase):
    def test_missing_meminfo_disables_memory_counters_with_a_warning(self):
        root = tempfile.mkdtemp(prefix="profd-proc-")
        writer = Writer(root, files=("stat", "loadavg"))
        writer.start()
        try:
            with T.Daemon("--proc-root", root, "--host-sample-hz", str(HZ)) as d:
                with T.channel(d.addr) as ch:
                    profile = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
                    req = T.profile_request(P, 500, f"localhost:{d.port}", session_id="nomem")
                    space = T.decode_xspace(P, profile(req, timeout=30).tool_data[0].data)
                self.assertEqual(d.log().count("meminfo"), 1, d.log())
        finally:
            writer.stop()
            shutil.rmtree(root, ignore_errors=True)
        pts = counter_points(space)
        self.assertEqual(set(pts), NAMES - {"memory_used_bytes", "memory_available_bytes"})
        self.assertEqual({v for _, v in pts["cpu0_util_pct"]}, {40.0})
        warns = [w for w in space.warnings if "host.proc" in w]
        self.assertEqual(len(warns), 1, list(space.warnings))
        self.assertIn("meminfo", warns[0])
        self.assertIn("memory", warns[0])

    def test_garbage_loadavg_is_reported_as_unexpected_contents(self):
        root = tempfile.mkdtemp(prefix="profd-proc-")
        writer = Writer(root, files=("stat", "meminfo"))
        write_atomic(root, "loadavg", "high medium low\n")
        writer.start()
        try:
            with T.Daemon("--proc-root", root, "--host-sample-hz", str(HZ)) as d:
                with T.channel(d.addr) as ch:
                    profile = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
                    req = T.profile_request(P, 300, f"localhost:{d.port}", session_id="badload")
                    space = T.decode_xspace(P, profile(req, timeout=30).tool_data[0].data)
        finally:
            writer.stop()
            shutil.rmtree(root, ignore_errors=True)
        self.assertNotIn("load_avg_1m", counter_points(space))
        warns = [w for w in space.warnings if "host.proc" in w]
        self.assertEqual(len(warns), 1, list(space.warnings))
        self.assertIn("loadavg: unexpected contents", warns[0])

    def test_unusable_proc_root_makes_the_collector_unavailable_not_the_capture(self):
        root = tempfile.mkdtemp(prefix="profd-proc-")
        missing = os.path.join(root, "absent")
        try:
            with T.Daemon("--proc-root", missing, "--host-sample-hz", str(HZ)) as d:
                with T.channel(d.addr) as ch:
                    profile = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
                    req = T.profile_request(P, 200, f"localhost:{d.port}", session_id="noproc")
                    space = T.decode_xspace(P, profile(req, timeout=30).tool_data[0].data)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        self.assertFalse([p.name for p in space.planes if p.name == "/host:CPU"])
        warns = [w for w in space.warnings if "host.proc" in w]
        self.assertEqual(len(warns), 1, list(space.warnings))
        self.assertIn("unavailable", warns[0])
        self.assertIn("No such file or directory", warns[0])


if __name__ == "__main__":
    unittest.main(verbosity=2)
