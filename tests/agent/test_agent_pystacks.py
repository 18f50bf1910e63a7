# SPDX-License-Identifier: MIT
"""Python stacks (agent protocol v5) through a real profd over real gRPC,
from the fake agent's scripted job (fake-agent --python, fake-agent.c
py_define()): the launching frame and stack on each kernel, copy, memset
and API event, frame spans on the thread's line at python_tracer_level 1
and none at level 0, a thread without Python, a walk the agent dropped,
hostile definitions, the string budget, a v4 agent still served, and
launches whose kernels come after thousands of later launches (ids
colliding modulo 8192, across the uint32 wrap). docs/python-stacks.md is
what is checked."""
import os
import subprocess
import tempfile
import time
import unittest

import profdtest as T
from test_agent_hostile import reap
from test_agent_nvtx import info_lines

P = T.protos()
FAKE = os.environ["FAKE_AGENT"]
UUID = "GPU-0badf00d-0000-0000-0000-0000000000a1"
TID = 4242  # --tid: the launching thread; the sampler's second thread is TID + 1
NO_PY = "(thread without Python)"
DROPPED = "(Python stack unavailable)"
# The scripted stacks (fake-agent.c), as python_frame and python_stack say them.
FWD = ("train.py:22 forward", "train.py:10 main;train.py:22 forward")
FWD25 = ("train.py:25 forward", "train.py:10 main;train.py:25 forward")
STEP = ("train.py:31 Model.step;inner", "train.py:10 main;train.py:22 forward;train.py:31 Model.step,inner")
# Kernels 0..4 of device 0, in launch order; then the copy and the memset
# (the allocation after them has STEP's stack, the free none).
KERNELS = [FWD, FWD, FWD25, STEP, (NO_PY, NO_PY)]
COPY, MEMSET = (DROPPED, DROPPED), FWD


def stats_of(p, e):
    out = {}
    for s in e.stats:
        kind = s.WhichOneof("value")
        out[p.stat_metadata[s.metadata_id].name] = (
            ("ref", p.stat_metadata[s.ref_value].name) if kind == "ref_value" else getattr(s, kind))
    return out


def py_stats(st):
    """(python_frame, python_stack) of an event's stats, None when it has neither."""
    f, s = st.get("python_frame"), st.get("python_stack")
    if f is None and s is None:
        return None
    # Both ref-valued: a repeated stack costs one string per plane.
    assert f[0] == "ref" and s[0] == "ref", (f, s)
    return (f[1], s[1])


class PyStacks(T.AgentDaemonCase):
    def agent(self, *extra, version=None):
        args = [FAKE, "--socket", self.sock, "--devices", UUID, "--name", "pyjob", "--tid", str(TID)]
        if version:
            args += ["--proto-version", str(version)]
        a = subprocess.Popen(args + list(extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(reap, a)
        self.assertEqual(a.stdout.readline().strip(), "connected")
        deadline = time.time() + 10
        while time.time() < deadline and not self.status(P.profd.StatusRequest(), timeout=10).agents:
            time.sleep(0.05)
        return a

    def capture(self, a, level=0, **advanced):
        req = T.profile_request(P, 400, f"localhost:{self.d.port}", python_tracer_level=level,
                                advanced=advanced or None)
        resp = self.profile(req, timeout=60)
        self.assertIsNone(self.d.proc.poll(), "profd died: " + self.d.log()[-2000:])
        self.assertEqual(a.wait(timeout=10), 0, a.stderr.read())
        return T.decode_xspace(P, resp.tool_data[0].data)

    def gpu_events(self, x):
        """[(name, (frame, stack) or None)] of device 0's work, by start."""
        p = [p for p in x.planes if p.name == "/device:GPU:0"][0]
        evs = [(l.timestamp_ns * 1000 + e.offset_ps, p.event_metadata[e.metadata_id].name, stats_of(p, e))
               for l in p.lines for e in l.events]
        return [(n, py_stats(st)) for _, n, st in sorted(evs, key=lambda v: v[0])]

    def host(self, x):
        return [p for p in x.planes if p.name == "/host:CPU"][0]

    def thread_line(self, x, tid):
        ls = [l for l in self.host(x).lines if l.name.endswith(f"/tid {tid}")]
        self.assertEqual(len(ls), 1, [l.name for l in self.host(x).lines])
        return ls[0]

    def events(self, x, line):
        """[(start ns, end ns, name, stats)] of @line, by start then longest."""
        p = self.host(x)
        out = [((line.timestamp_ns * 1000 + e.offset_ps) // 1000,
                (line.timestamp_ns * 1000 + e.offset_ps + e.duration_ps) // 1000,
                p.event_metadata[e.metadata_id].name, stats_of(p, e)) for e in line.events]
        return sorted(out, key=lambda v: (v[0], -v[1]))

    def check_stacks(self, x, kernels=KERNELS):
        gpu = self.gpu_events(x)
        names = [n for n, _ in gpu if n.startswith("fake_gemm")]
        self.assertEqual(len(names), 5, gpu)
        self.assertEqual([s for n, s in gpu if n.startswith("fake_gemm")], kernels)
        other = [(n, s) for n, s in gpu if not n.startswith("fake_gemm")]
        self.assertIn(("MemcpyH2D", COPY), other)
        self.assertIn(("Memset", MEMSET), other)
        # An allocation names the line that allocated; the free's call had none.
        self.assertIn(("MemoryAlloc", STEP), other)
        self.assertIn(("MemoryFree", None), other)
        api = [(e[2], py_stats(e[3])) for e in self.events(x, self.thread_line(x, TID)) if e[2].startswith("cu")]
        self.assertEqual(api, [("cuLaunchKernel", s) for s in kernels] + [("cuMemcpyHtoDAsync_v2", COPY)])

    def test_launch_stacks_on_kernels_and_api_events(self):
        a = self.agent("--python")
        x = self.capture(a)
        self.check_stacks(x)
        # Level 0: no frame spans on any line.
        spans = [e for l in self.host(x).lines for e in self.events(x, l) if e[2][0] in "$["]
        self.assertEqual(spans, [])
        # The agent's STATS counters of abandoned walks, said once.
        self.assertEqual([w for w in x.warnings if "Python" in w], [
            f"pid {a.pid} (pyjob): the agent abandoned 1 of 7 Python launch-site walks and 1 of 6 samples (a "
            f'frame changing under it, or its queue full); those say "{DROPPED}"'])

    def test_what_the_stacks_cost_is_said(self):
        """STATS v6: the agent's own timing of its launch stacks and its
        sampler's CPU share, as profd information lines (not warnings); a
        v5 agent has none, and nothing is made up for it."""
        a = self.agent("--python")
        x = self.capture(a)
        cost = [s for s in info_lines(x) if "Python" in s]
        self.assertEqual(cost, [
            f"pid {a.pid} (pyjob): Python launch stacks cost 0.48 us a launch (median of 3 timed, "
            "90 % under 0.90 us)",
            f"pid {a.pid} (pyjob): the Python sampler used 0.53 % of one core over 1.5 s"])
        self.assertFalse([w for w in x.warnings if "cost" in w or "sampler used" in w], list(x.warnings))
        a = self.agent("--python", version=5)
        x = self.capture(a)
        self.check_stacks(x)
        self.assertEqual([s for s in info_lines(x) if "Python" in s], [])
        # profctl capture prints them.
        if os.environ.get("PROFCTL"):
            a = self.agent("--python")
            logdir = tempfile.mkdtemp(prefix="profd-pycost-")
            # The daemon's own address, not "localhost": no resolver (c-ares
            # leaks a resolution's buffer, which LeakSanitizer would see).
            r = subprocess.run([os.environ["PROFCTL"], "capture", self.d.addr, "--logdir", logdir,
                                "--duration-ms", "400", "--session-id", "cost", "--no-progress"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn(f"  {self.d.addr}: pid {a.pid} (pyjob): Python launch stacks cost 0.48 us a "
                          "launch (median of 3 timed, 90 % under 0.90 us)\n", r.stdout)
            self.assertIn(f"  {self.d.addr}: pid {a.pid} (pyjob): the Python sampler used 0.53 % of one "
                          "core over 1.5 s\n", r.stdout)
            self.assertEqual(a.wait(timeout=10), 0, a.stderr.read())
        # Past the agent's 8 us histogram: not a made-up figure; a sampler
        # that ran under 0.1 s gives no share.
        a = self.agent("--python", "--python-slow")
        x = self.capture(a)
        self.assertEqual([s for s in info_lines(x) if "Python" in s], [
            f"pid {a.pid} (pyjob): Python launch stacks cost 0.48 us a launch (median of 3 timed, "
            "a tenth or more over 8 us)"])

    def drawn(self, x, line):
        """@line's events in the order profd wrote them, each with its parent
        as a viewer nests them (the innermost earlier event still open
        around it); asserts every event fits in that parent."""
        p, stack, out = self.host(x), [], []
        for e in line.events:
            s = line.timestamp_ns * 1000 + e.offset_ps
            end = s + e.duration_ps
            name = p.event_metadata[e.metadata_id].name
            while stack and stack[-1][1] <= s:
                stack.pop()
            if stack:
                self.assertLessEqual(end, stack[-1][1], (name, stack[-1][2]))
            out.append((name, stack[-1][2] if stack else None))
            stack.append((s, end, name))
        return out

    def test_frame_spans_nest_on_the_thread_line_at_level_1(self):
        a = self.agent("--python")
        x = self.capture(a, level=1)
        self.check_stacks(x)
        line = self.thread_line(x, TID)
        evs = self.events(x, line)
        t0 = [s for s, _, n, _ in evs if n == "cuLaunchKernel"][0]
        spans = [(s - t0, e - s, n, st.get("python_file"), st.get("python_line")) for s, e, n, st in evs
                 if n.startswith("$")]
        f = ("ref", "/src/train.py")
        # Points: launches [0,5us] [100,105] [200,205] [300,305] [400,405], the copy at
        # [500,505] (dropped walk: says nothing), samples at 50 (FWD), 250 (FWD25), 450 (dropped).
        # A span is the union of its points' intervals, from 1 ns earlier.
        self.assertEqual(spans, [
            (-1, 305001, "$train.py:1 main", f, 10),
            (-1, 105001, "$train.py:20 forward", f, 22),
            (199999, 50001, "$train.py:20 forward", f, 25),
            (299999, 5001, "$train.py:20 forward", f, 22),
            (299999, 5001, "$train.py:30 Model.step;inner", f, 31),
        ])
        # As a viewer nests the line: every CUDA call inside its leaf frame,
        # never a frame inside a call.
        parents = self.drawn(x, line)
        self.assertEqual([p for n, p in parents if n == "cuLaunchKernel"],
                         ["$train.py:20 forward", "$train.py:20 forward", "$train.py:20 forward",
                          "$train.py:30 Model.step;inner", None])
        self.assertFalse([(n, p) for n, p in parents if n.startswith("$") and p and not p.startswith("$")])
        # The sampler's thread without CUDA calls: its truncated stack's root, then its frame.
        loader_line = self.thread_line(x, TID + 1)
        loader = [(s - t0, e - s, n, st.get("python_file"), st.get("python_line"))
                  for s, e, n, st in self.events(x, loader_line)]
        self.assertEqual(loader, [(9999, 10001, "[truncated]", None, None),
                                  (9999, 10001, "$loader.py:5 fetch", ("ref", "/usr/lib/python3/loader.py"), 7)])
        self.assertEqual(self.drawn(x, loader_line), [("[truncated]", None), ("$loader.py:5 fetch", "[truncated]")])

    def test_options_reach_the_agent(self):
        a = self.agent("--print-options")
        self.capture(a, level=1, python_stack_depth=10, python_sample_hz=250)
        out = a.stdout.read()
        opts = [l for l in out.splitlines() if l.startswith("options ")]
        self.assertEqual(len(opts), 1, out)
        d = dict(w.split("=", 1) for w in opts[0].split()[1:])
        self.assertEqual((int(d["flags"], 16) & 0x18, d["py_hz"], d["py_depth"]), (0x18, "250", "10"))

    def test_hostile_definitions_are_refused_and_counted(self):
        a = self.agent("--python-hostile")
        x = self.capture(a)
        # Kernel 1 named the stack with an undefined frame; frame 1 kept its
        # first meaning (main, not the redefinition's fetch).
        self.check_stacks(x, [FWD, (DROPPED, DROPPED), FWD25, STEP, (NO_PY, NO_PY)])
        w = [w for w in x.warnings if "Python frame or stack definitions were refused" in w]
        self.assertEqual(len(w), 1, list(x.warnings))
        self.assertIn(": 4 Python frame or stack definitions were refused", w[0])
        # Its API event and its kernel.
        self.assertIn("; 2 events name a stack that could not be resolved", w[0])

    def test_stack_tables_are_bounded_by_the_string_budget(self):
        a = self.agent("--python", "--python-flood", "9000")
        x = self.capture(a)
        self.check_stacks(x, [(DROPPED, DROPPED)] + KERNELS[1:])
        w = [w for w in x.warnings if "beyond the connection's string budget" in w]
        self.assertEqual(len(w), 1, list(x.warnings))
        # 4 MiB hold about 7,700 stacks of 128 frames (544 bytes each with
        # their table slot; the strings and frames take the rest).
        n = int(w[0].split(": ", 1)[1].split()[0])
        self.assertTrue(9000 - 4194304 // 544 <= n < 9000 - 4194304 // 544 + 50, w[0])

    def test_every_kernel_keeps_its_own_launch(self):
        # fake-agent --late-kernels: 10072 launches (ids c, c + 8192, ...,
        # across 2^32, and 10000 consecutive ones) before any of their
        # kernels; launch i's Python frame is late.py line 1 + i and its
        # NVTX range "op<i>:MatMul". profd once kept 8192 slots by id
        # modulo 8192: the last launch of a slot took every kernel's.
        a = self.agent("--late-kernels")
        x = self.capture(a)
        p = [p for p in x.planes if p.name == "/device:GPU:0"][0]
        got = {}
        for l in p.lines:
            for e in l.events:
                if p.event_metadata[e.metadata_id].name != "late_gemm()":
                    continue
                st = stats_of(p, e)
                # correlation_id: the pid above CUPTI's 32 bits
                got[st["correlation_id"] & 0xffffffff] = (py_stats(st), st.get("tf_op"))
        self.assertEqual(len(got), 10072, sorted(got)[:20])
        ids = [1000000 + k * 8192 for k in range(64)] + \
              [(576 + (k - 4) * 8192) % 2**32 for k in range(8)] + list(range(500000, 510000))
        want = {c: ((f"late.py:{1 + i} launch", f"late.py:{1 + i} launch"), ("ref", f"op{i}:MatMul"))
                for i, c in enumerate(ids)}
        wrong = sorted((c, got.get(c), w) for c, w in want.items() if got.get(c) != w)
        self.assertEqual(wrong[:5], [], f"{len(wrong)} kernels carry another launch's stack")

    def test_v4_agent_still_served(self):
        a = self.agent(version=4)
        x = self.capture(a, level=1)
        gpu = self.gpu_events(x)
        self.assertEqual(len([n for n, _ in gpu if n.startswith("fake_gemm")]), 5)
        self.assertEqual([s for _, s in gpu if s], [])
        self.assertFalse([w for w in x.warnings if "Python" in w], list(x.warnings))


if __name__ == "__main__":
    unittest.main(verbosity=2)
