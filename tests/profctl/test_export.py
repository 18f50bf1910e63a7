# SPDX-License-Identifier: MIT
"""profctl export: the Chrome trace-event JSON checked against the XSpace."""
import gzip
import json
import os
import unittest

import profdtest as T
import synth

P = T.protos()


def decode(path):
    if path.endswith(".gz"):
        with gzip.open(path, "rt") as f:
            return json.load(f)
    with open(path) as f:
        return json.load(f)


class Export(synth.SynthCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.out = os.path.join(cls.tmp, "trace.json")
        r = synth.run("export", cls.xpb, "--format", "perfetto", "-o", cls.out)
        assert r.returncode == 0, r.stderr
        cls.stderr = r.stderr
        cls.trace = decode(cls.out)
        cls.ev = cls.trace["traceEvents"]

    def planes_with_lines(self):
        return [(i + 1, p) for i, p in enumerate(self.space.planes) if len(p.lines)]

    def test_one_process_per_plane(self):
        names = {e["pid"]: e["args"]["name"] for e in self.ev if e["ph"] == "M" and e["name"] == "process_name"}
        self.assertEqual(names, {pid: p.name for pid, p in self.planes_with_lines()})

    def test_processes_labelled_with_hostname(self):
        labels = {e["pid"]: e["args"]["labels"] for e in self.ev if e["ph"] == "M" and e["name"] == "process_labels"}
        self.assertEqual(labels, {pid: "synthhost" for pid, _ in self.planes_with_lines()})

    def test_one_thread_per_line(self):
        threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in self.ev
                   if e["ph"] == "M" and e["name"] == "thread_name"}
        want = {}
        for pid, p in self.planes_with_lines():
            for i, ln in enumerate(p.lines):
                if ln.name != "_counters_":
                    want[(pid, i + 1)] = ln.display_name or ln.name
        self.assertEqual(threads, want)

    def test_complete_events_match_xspace(self):
        x = [e for e in self.ev if e["ph"] == "X"]
        want = []
        for pid, p in self.planes_with_lines():
            for i, ln in enumerate(p.lines):
                if ln.name == "_counters_":
                    continue
                for e in ln.events:
                    want.append((pid, i + 1, p.event_metadata[e.metadata_id].name,
                                 (ln.timestamp_ns * 1000 + e.offset_ps) / 1e6, e.duration_ps / 1e6))
        got = [(e["pid"], e["tid"], e["name"], e["ts"], e["dur"]) for e in x]
        self.assertEqual(len(got), len(want))
        for g, w in zip(sorted(got), sorted(want)):
            self.assertEqual(g[:3], w[:3])
            self.assertAlmostEqual(g[3], w[3], places=6)
            self.assertAlmostEqual(g[4], w[4], places=6)

    def test_sub_microsecond_precision(self):
        # GPU 1's line starts at 500 ns: the first kernel is at 40.5 us exactly.
        gemm1 = sorted(e["ts"] for e in self.ev if e["ph"] == "X" and e["pid"] == 4 and e["name"] == "gemm_kernel")
        self.assertEqual(gemm1[0], 40.5)

    def test_args_resolve_refs_and_types(self):
        k = next(e for e in self.ev if e["ph"] == "X" and e["name"] == "relu_kernel")
        self.assertEqual(k["args"]["kernel_details"], synth.kdetails("64,1,1", "128,1,1", 100))
        self.assertIsInstance(k["args"]["correlation_id"], int)
        # details stored on the event metadata show up as args too
        g1 = next(e for e in self.ev if e["ph"] == "X" and e["pid"] == 4 and e["name"] == "gemm_kernel")
        self.assertIn("occ_pct:50", g1["args"]["kernel_details"])
        m = next(e for e in self.ev if e["ph"] == "X" and e["name"] == "MemcpyH2D")
        self.assertIn("size:1048576", m["args"]["memcpy_details"])

    def test_counters(self):
        c = [e for e in self.ev if e["ph"] == "C"]
        self.assertEqual(len(c), self.facts["counters"])
        self.assertEqual({e["name"] for e in c}, {"sm_clock_mhz"})
        self.assertEqual(sorted(e["args"]["sm_clock_mhz"] for e in c), [1395.5, 1410.0, 1980.25])
        self.assertTrue(all(e["pid"] == 3 for e in c))

    def test_flows_join_launches_to_kernels(self):
        both = self.facts["host_corr"] & self.facts["dev_corr"]
        s = [e for e in self.ev if e["ph"] == "s"]
        f = [e for e in self.ev if e["ph"] == "f"]
        # Dense ids, 1.. in correlation-id order (they stay below 2^53).
        dense = {c: i + 1 for i, c in enumerate(sorted(both))}
        self.assertEqual({e["id"] for e in s}, set(dense.values()))
        self.assertEqual(len(s), len(both))
        self.assertEqual({e["id"] for e in f}, set(dense.values()))
        self.assertEqual(len(f), len(both))
        # Each start sits on the launch that carries the correlation id its id stands for.
        xs = {(e["pid"], e["tid"], e["ts"]): e for e in self.ev if e["ph"] == "X"}
        for e in s + f:
            launch = xs[(e["pid"], e["tid"], e["ts"])]
            self.assertEqual(dense[launch["args"]["correlation_id"]], e["id"])
        self.assertTrue(all(e.get("bp") == "e" for e in f))
        host_pid = 2
        self.assertTrue(all(e["pid"] == host_pid for e in s))
        self.assertTrue(all(e["pid"] in (3, 4) for e in f))
        # each flow end sits on the kernel's own start, after its launch
        start = {e["id"]: e["ts"] for e in s}
        for e in f:
            self.assertGreaterEqual(e["ts"], start[e["id"]])
        self.assertNotIn(999, dense)  # launch without a kernel
        self.assertNotIn(7777, dense)  # kernel without a launch

    def test_gzip_and_chrome_format_same_content(self):
        gz = os.path.join(self.tmp, "trace.json.gz")
        r = synth.run("export", self.xpb, "--format", "chrome", "-o", gz)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(gz, "rb") as f:
            self.assertEqual(f.read(2), b"\x1f\x8b")
        self.assertEqual(decode(gz), self.trace)

    def test_stdout_and_no_leftover_temp_files(self):
        r = synth.run("export", self.xpb, "-o", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), self.trace)
        self.assertEqual([f for f in os.listdir(self.tmp) if ".tmp." in f], [])

    def test_bad_input(self):
        bad = os.path.join(self.tmp, "bad.xplane.pb")
        with open(bad, "wb") as f:
            f.write(b"\x0a\xff\xff\xff\x0f")
        r = synth.run("export", bad, "-o", os.path.join(self.tmp, "bad.json"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("not a valid XSpace", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "bad.json")))
        r = synth.run("export", os.path.join(self.tmp, "missing.pb"), "-o", "-")
        self.assertEqual(r.returncode, 1)
        self.assertIn("No such file", r.stderr)
        r = synth.run("export")
        self.assertEqual(r.returncode, 2)

    def test_corrupted_files_never_crash(self):
        # Flip, truncate and splice bytes of a valid file: export and top must
        # answer 0 or 1, never die on a signal (the ASan and valgrind setups
        # also check every access).
        import random
        rnd = random.Random(1234)
        with open(self.xpb, "rb") as f:
            good = f.read()
        bad = os.path.join(self.tmp, "fuzz.xplane.pb")
        for i in range(60):
            b = bytearray(good)
            kind = i % 3
            if kind == 0:
                for _ in range(rnd.randint(1, 8)):
                    b[rnd.randrange(len(b))] = rnd.randrange(256)
            elif kind == 1:
                del b[rnd.randrange(len(b)):]
            else:
                at = rnd.randrange(len(b))
                b[at:at] = os.urandom(rnd.randint(1, 16))
            with open(bad, "wb") as f:
                f.write(b)
            for args in (("export", bad, "-o", os.path.join(self.tmp, "fuzz.json")), ("top", "--json", bad)):
                r = synth.run(*args)
                self.assertIn(r.returncode, (0, 1), (i, args, r.stderr))
                self.assertNotIn("runtime error", r.stderr)
                self.assertNotIn("Sanitizer", r.stderr)

    def test_empty_file_is_an_empty_trace(self):
        empty = os.path.join(self.tmp, "empty.xplane.pb")
        open(empty, "wb").close()
        r = synth.run("export", empty, "-o", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["traceEvents"], [])


def big_pid_space(P, hostname, pids, launches=3):
    """Host launches and GPU kernels joined by correlation ids pid << 32 | n,
    as the agent map writes them, with pids above 2^21."""
    sp = P.xp.XSpace()
    sp.hostnames.append(hostname)
    host = synth.Plane(sp.planes.add())
    host.p.name = "/host:CPU"
    gpu = synth.Plane(sp.planes.add())
    gpu.p.name = "/device:GPU:0"
    stream = gpu.p.lines.add()
    stream.id = 1
    stream.name = "Stream #7(Compute)"
    stream.timestamp_ns = synth.START_NS
    for k, pid in enumerate(pids):
        ln = host.p.lines.add()
        ln.id = k + 1
        ln.name = f"python ({pid})/main"
        ln.timestamp_ns = synth.START_NS
        for n in range(launches):
            corr = pid << 32 | (n + 1)
            host.event(ln, "cudaLaunchKernel", 1000 * (k * launches + n), 100, correlation_id=corr)
            gpu.event(stream, "k", 1000 * (k * launches + n) + 500, 200, correlation_id=corr)
    return sp


class ExportPython(synth.PyCase):
    """Python frame spans and the python_* stats (synth.build_py) come
    through as ordinary slices with args on their thread's track, nested
    around the API events, which keep their flows to the kernels."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        out = os.path.join(cls.tmp, "trace.json")
        r = synth.run("export", cls.xpb, "-o", out)
        assert r.returncode == 0, r.stderr
        cls.ev = decode(out)["traceEvents"]

    def thread(self, name):
        (pid, tid), = [(e["pid"], e["tid"]) for e in self.ev
                       if e["ph"] == "M" and e["name"] == "thread_name" and e["args"]["name"] == name]
        return [e for e in self.ev if e["ph"] == "X" and (e["pid"], e["tid"]) == (pid, tid)]

    def test_frame_spans_are_slices_with_args(self):
        main = self.thread("trainer (pid 1234)/tid 1234")
        spans = [(e["name"], e["ts"], e["dur"], e.get("args")) for e in main if e["name"].startswith("$")]
        self.assertIn(("$model.py:35 forward", 0.9, 5, {"python_file": "/src/model.py", "python_line": 40}), spans)
        self.assertIn(("$train.py:1 <module>", 0, 20, {"python_file": "/src/train.py", "python_line": 120}), spans)
        self.assertEqual(len(spans), 5)  # four frames and the "$" event that is not one, all kept
        loader = self.thread("loader (pid 5678)/tid 5678")
        self.assertEqual(sorted(e["name"] for e in loader if e["name"].startswith("$")),
                         ["$loader.py:1 <module>", "$loader.py:10 prefetch"])

    def test_api_events_carry_the_stack_and_nest_in_the_spans(self):
        main = self.thread("trainer (pid 1234)/tid 1234")
        spans = [e for e in main if e["name"].startswith("$") and "python_file" in e.get("args", {})]
        api = [e for e in main if e["name"].startswith("cu")]
        self.assertEqual(len(api), 8)
        for a in api:
            self.assertIn("python_frame", a["args"])
            self.assertEqual(a["args"]["python_stack"].split(";")[-1], a["args"]["python_frame"])
            around = [s for s in spans if s["ts"] <= a["ts"] and a["ts"] + a["dur"] <= s["ts"] + s["dur"]]
            self.assertEqual(len(around), 3, a)  # <module> > train > forward|backward
            # every span either holds the API event or is apart from it
            for s in spans:
                self.assertTrue(s in around or s["ts"] + s["dur"] <= a["ts"] or a["ts"] + a["dur"] <= s["ts"],
                                (s, a))
        # Spans as long as the API event they hold come before it, so that
        # viewers, which nest equal slices in the order they come, keep them
        # its parents (the worker's line writes them after it).
        work = self.thread("trainer (pid 1234)/tid 1250")
        self.assertEqual([(e["name"], e["ts"], e["dur"]) for e in work],
                         [("$worker.py:1 run", 1, 0.5), ("$worker.py:8 step", 1, 0.5), ("cuLaunchKernel", 1, 0.5)])
        # the flows still start at the API events
        starts = {(e["pid"], e["tid"], e["ts"]) for e in self.ev if e["ph"] == "s"}
        self.assertTrue({(a["pid"], a["tid"], a["ts"]) for a in api} <= starts)


class ExportFlowIds(unittest.TestCase):
    def setUp(self):
        import tempfile
        self.tmp = tempfile.mkdtemp(prefix="profctl-flow-")

    def tearDown(self):
        import shutil
        shutil.rmtree(self.tmp)

    def write(self, name, sp):
        path = os.path.join(self.tmp, name)
        with open(path, "wb") as f:
            f.write(sp.SerializeToString())
        return path

    def test_flow_ids_below_2_53_for_pids_above_2_21(self):
        pids = [3_000_000, 4_194_303, 2**31 - 1]
        src = self.write("big.xplane.pb", big_pid_space(P, "h", pids))
        out = os.path.join(self.tmp, "t.json")
        r = synth.run("export", src, "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        # Parse the ids as exact integers: a viewer would round ids above 2^53.
        with open(out) as f:
            ev = json.load(f)["traceEvents"]
        s = [e for e in ev if e["ph"] == "s"]
        f_ = [e for e in ev if e["ph"] == "f"]
        self.assertEqual(len(s), 9)
        self.assertEqual(sorted(e["id"] for e in s), list(range(1, 10)))
        self.assertEqual(sorted(e["id"] for e in f_), list(range(1, 10)))
        self.assertTrue(all(e["id"] < 2**53 for e in s + f_))
        # Every arrow still goes from a launch to the kernel of the same correlation id.
        xs = {(e["pid"], e["tid"], e["ts"]): e for e in ev if e["ph"] == "X"}
        corr_of = {}
        for e in s + f_:
            c = xs[(e["pid"], e["tid"], e["ts"])]["args"]["correlation_id"]
            self.assertGreater(c, 2**53)
            corr_of.setdefault(e["id"], set()).add(c)
        self.assertTrue(all(len(v) == 1 for v in corr_of.values()))

    def test_several_files_one_timeline(self):
        a = self.write("w1_6009.xplane.pb", big_pid_space(P, "w1", [3_000_000]))
        b = self.write("w2_6009.xplane.pb", big_pid_space(P, "w2", [3_000_000]))
        c = self.write("w2_again.xplane.pb", big_pid_space(P, "w2", [5]))
        out = os.path.join(self.tmp, "t.json")
        r = synth.run("export", a, b, c, "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        ev = decode(out)["traceEvents"]
        names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
        self.assertEqual(sorted(names.values()),
                         sorted(["w1: /host:CPU", "w1: /device:GPU:0", "w2: /host:CPU", "w2: /device:GPU:0",
                                 "w2 #3: /host:CPU", "w2 #3: /device:GPU:0"]))
        self.assertEqual(len(names), 6)  # distinct pids per host
        s = [e for e in ev if e["ph"] == "s"]
        # The same correlation ids on two hosts are two arrows each, not one.
        self.assertEqual(sorted(e["id"] for e in s), list(range(1, 10)))
        for e in [e for e in ev if e["ph"] in "sf"]:
            host = names[e["pid"]].split(":")[0]
            peers = {names[x["pid"]].split(":")[0] for x in ev if x["ph"] in "sf" and x["id"] == e["id"]}
            self.assertEqual(peers, {host})
        # One timeline: the same wall-clock instants from both hosts.
        ts = {names[e["pid"]]: e["ts"] for e in ev if e["ph"] == "X" and e["name"] == "cudaLaunchKernel"}
        self.assertEqual(ts["w1: /host:CPU"], ts["w2: /host:CPU"])

    def test_captures_2_s_apart_on_one_wall_clock_timeline(self):
        """profd, like the in-process profiler, writes line times from the
        capture's start (Task Environment's profile_start_time): two captures
        started 2 s apart are 2 s apart in the export, the earliest at 0."""
        def capture(host, start_ns):
            sp = big_pid_space(P, host, [7])
            for p in sp.planes:
                for ln in p.lines:
                    ln.timestamp_ns = 0
            env = synth.Plane(sp.planes.add())
            env.p.name = "Task Environment"
            env.stat(env.p, "profile_start_time", start_ns)
            env.stat(env.p, "profile_stop_time", start_ns + synth.WINDOW_NS)
            return sp
        late = self.write("w2_6009.xplane.pb", capture("w2", synth.START_NS + 2_000_000_000))
        early = self.write("w1_6009.xplane.pb", capture("w1", synth.START_NS))
        out = os.path.join(self.tmp, "t.json")
        r = synth.run("export", late, early, "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        ev = decode(out)["traceEvents"]
        names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
        first = {}
        for e in ev:
            if e["ph"] == "X" and e["name"] == "cudaLaunchKernel":
                host = names[e["pid"]].split(":")[0]
                first[host] = min(first.get(host, e["ts"]), e["ts"])
        self.assertEqual(first, {"w1": 0, "w2": 2_000_000})  # us
        self.assertIn("time 0 is 2026-09-21T", r.stderr)

    def test_default_output_is_beside_the_input(self):
        """Without -o the JSON goes next to the input, never into the
        current directory."""
        src = self.write("w1_6009.xplane.pb", big_pid_space(P, "w1", [7]))
        cwd = os.path.join(self.tmp, "elsewhere")
        os.mkdir(cwd)
        r = synth.run("export", src, cwd=cwd)
        self.assertEqual(r.returncode, 0, r.stderr)
        want = os.path.join(self.tmp, "w1_6009.trace.json.gz")
        self.assertIn(want, r.stderr)
        self.assertTrue(decode(want)["traceEvents"])
        self.assertEqual(os.listdir(cwd), [])
        r = synth.run("export", src, src, cwd=cwd)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "all-hosts.trace.json.gz")), r.stderr)
        self.assertEqual(os.listdir(cwd), [])

    def test_files_without_host_name_are_named_by_file(self):
        sp = big_pid_space(P, "x", [7])
        del sp.hostnames[:]
        a = self.write("10.0.0.1_6009.xplane.pb", sp)
        b = self.write("10.0.0.2_6009.xplane.pb", sp)
        out = os.path.join(self.tmp, "t.json")
        r = synth.run("export", a, b, "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        names = {e["args"]["name"] for e in decode(out)["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "process_name"}
        self.assertEqual(names, {"10.0.0.1_6009: /host:CPU", "10.0.0.1_6009: /device:GPU:0",
                                 "10.0.0.2_6009: /host:CPU", "10.0.0.2_6009: /device:GPU:0"})

    def test_a_bad_file_among_several_fails(self):
        a = self.write("w1.xplane.pb", big_pid_space(P, "w1", [1]))
        r = synth.run("export", a, os.path.join(self.tmp, "missing.xplane.pb"), "-o",
                      os.path.join(self.tmp, "t.json"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot read", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "t.json")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
