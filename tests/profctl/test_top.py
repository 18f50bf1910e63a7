# SPDX-License-Identifier: MIT
"""profctl top on a synthetic XSpace with known kernel times."""
import json
import os
import shutil
import tempfile
import unittest

import profdtest as T
import synth

P = T.protos()


class Top(synth.SynthCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        r = synth.run("top", "--json", cls.xpb)
        assert r.returncode == 0, r.stderr
        cls.j = json.loads(r.stdout)

    def test_kernel_totals_exact(self):
        got = {k["name"]: k for k in self.j["kernels"]}
        self.assertEqual(set(got), set(self.facts["kernels"]))
        for name, want in self.facts["kernels"].items():
            k = got[name]
            self.assertEqual(k["count"], want["count"], name)
            self.assertEqual(k["total_ns"], want["total"], name)
            self.assertEqual(k["mean_ns"], want["total"] / want["count"], name)
            self.assertEqual(k["min_ns"], want["min"], name)
            self.assertEqual(k["max_ns"], want["max"], name)
            self.assertEqual(k["occupancy_pct"], sum(want["occ"]) / len(want["occ"]), name)
            self.assertEqual(k["grid"], want["grid"])
            self.assertEqual(k["block"], want["block"])
        # sorted by total time
        self.assertEqual([k["name"] for k in self.j["kernels"]], ["gemm_kernel", "relu_kernel"])
        self.assertEqual(self.j["kernels"][0]["total_ns"], 28000)
        self.assertEqual(self.j["kernels"][0]["mean_ns"], 4000)

    def test_gpu_busy_is_union_over_window(self):
        self.assertEqual(self.j["window_ns"], synth.WINDOW_NS)
        self.assertEqual(self.j["window_source"], "task_environment")
        g = {x["plane"]: x for x in self.j["gpus"]}
        self.assertEqual(g["/device:GPU:0"]["busy_ns"], self.facts["busy0_ns"])
        self.assertAlmostEqual(g["/device:GPU:0"]["busy_pct"], 100 * self.facts["busy0_ns"] / synth.WINDOW_NS)
        self.assertEqual(g["/device:GPU:1"]["busy_ns"], self.facts["busy1_ns"])
        self.assertEqual(g["/device:GPU:0"]["kernels"], 6)

    def test_copies_per_direction(self):
        c = {x["direction"]: x for x in self.j["copies"]}
        self.assertEqual(set(c), set(self.facts["copies"]))
        for d, (n, nbytes, dur) in self.facts["copies"].items():
            self.assertEqual(c[d]["count"], n)
            self.assertEqual(c[d]["bytes"], nbytes)
            self.assertEqual(c[d]["duration_ns"], dur)
            self.assertAlmostEqual(c[d]["bandwidth_gbps"], nbytes / dur)

    def test_per_process_split(self):
        p = {x["name"]: x for x in self.j["processes"]}
        self.assertEqual(set(p), set(self.facts["procs"]))
        for name, want in self.facts["procs"].items():
            for k, v in want.items():
                self.assertEqual(p[name][k], v, (name, k))

    def test_text_output(self):
        r = synth.run("top", self.xpb)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout
        self.assertIn("Top kernels by total time (2 distinct, 9 launches)", out)
        line = next(ln for ln in out.splitlines() if ln.rstrip().endswith("gemm_kernel"))
        self.assertIn("28.000 us", line)
        self.assertIn("4.000 us", line)
        self.assertIn("128,1,1", line)
        self.assertIn("/device:GPU:0", out)
        self.assertIn("0.11%", out)
        self.assertIn("H2D", out)
        self.assertIn("trainer (1234)", out)

    def test_limit_and_sort(self):
        r = synth.run("top", "--json", "-n", "1", "--sort", "mean", self.xpb)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([k["name"] for k in json.loads(r.stdout)["kernels"]], ["gemm_kernel"])
        r = synth.run("top", "--json", "--sort", "count", self.xpb)
        self.assertEqual(json.loads(r.stdout)["kernels"][0]["name"], "gemm_kernel")
        r = synth.run("top", "--sort", "bogus", self.xpb)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--sort", r.stderr)


class LaunchSites(synth.PyCase):
    """The launch-site section: kernels grouped by python_frame, only for
    files whose GPU planes carry Python stacks."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.plain = os.path.join(cls.tmp, "plain.xplane.pb")
        synth.write(P, cls.plain)

    def test_sites_exact_and_sorted(self):
        r = synth.run("top", "--json", self.xpb)
        self.assertEqual(r.returncode, 0, r.stderr)
        sites = json.loads(r.stdout)["launch_sites"]
        want = self.facts["sites"]
        total = sum(ns for ns, _ in want.values())
        self.assertEqual({s["site"]: (s["gpu_ns"], s["kernels"]) for s in sites}, want)
        for s in sites:
            self.assertAlmostEqual(s["share_pct"], 100 * s["gpu_ns"] / total)
        self.assertEqual([s["gpu_ns"] for s in sites], sorted((s["gpu_ns"] for s in sites), reverse=True))
        self.assertEqual(sites[0]["site"], "model.py:40 forward")
        self.assertIn("(thread without Python)", want)
        self.assertIn("[no Python stack]", want)

    def test_text_section_and_limit(self):
        r = synth.run("top", "-n", "2", self.xpb)
        self.assertEqual(r.returncode, 0, r.stderr)
        sec = r.stdout.split("Top launch sites by GPU time")[1].split("\n\n")[0].splitlines()
        self.assertEqual(len(sec), 1 + 1 + 2 + 1, sec)  # header, columns, 2 sites, "... more"
        share = 100 * 17700 / sum(ns for ns, _ in self.facts["sites"].values())
        self.assertRegex(sec[2], rf"^\s+17\.700 us\s+{share:.2f}%\s+5\s+model\.py:40 forward$")
        self.assertIn(f"{len(self.facts['sites']) - 2} more", sec[4])

    def test_absent_without_python_stats(self):
        r = synth.run("top", self.plain)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("launch sites", r.stdout)
        r = synth.run("top", "--json", self.plain)
        self.assertNotIn("launch_sites", json.loads(r.stdout))


class Extremes(unittest.TestCase):
    """Times as real captures hold them (epoch ns: x1000 is past int64) and
    hostile values: same answers, no overflow (the ASan+UBSan build traps
    on signed overflow and bad float conversions)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="profctl-top-x-")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def top(self, sp):
        path = os.path.join(self.tmp, "x.xplane.pb")
        with open(path, "wb") as f:
            f.write(sp.SerializeToString())
        r = synth.run("top", "--json", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        t = synth.run("top", path)
        self.assertEqual(t.returncode, 0, t.stderr)
        return json.loads(r.stdout)

    def test_epoch_timestamps_give_the_same_answers(self):
        base_sp, facts = synth.build(P)
        base = self.top(base_sp)
        sp, _ = synth.build(P)
        for pl in sp.planes:
            for line in pl.lines:
                line.timestamp_ns += 1_795_000_000_000_000_000  # 2026, as profd writes them
        j = self.top(sp)
        self.assertEqual(j["kernels"], base["kernels"])
        self.assertEqual(j["gpus"], base["gpus"])
        self.assertEqual({g["plane"]: g["busy_ns"] for g in j["gpus"]}["/device:GPU:0"], facts["busy0_ns"])

    def test_hostile_times_and_sizes(self):
        sp, _ = synth.build(P)
        big = 2**63 - 1
        for pl in sp.planes:
            if pl.name == "Task Environment":
                for st in pl.stats:
                    st.uint64_value = 2**64 - 1 if st.uint64_value > 1 else 1
            for line in pl.lines:
                line.timestamp_ns = big
                for e in line.events:
                    e.offset_ps = big
                    e.duration_ps = big
        for pl in sp.planes:
            for sm in pl.stat_metadata.values():
                if sm.name.startswith("kind_src"):
                    sm.name = sm.name.replace("size:1048576", "size:1e300")
        j = self.top(sp)
        self.assertTrue(j["kernels"])
        self.assertTrue(all(k["total_ns"] > 0 for k in j["kernels"]))

    def test_counters_are_keyed_by_plane_and_name(self):
        # One summary per (plane, counter), in the order first seen: the
        # same name on two planes stays two counters, and a pair whose
        # plane and name concatenate alike ("GPU:7" + "ab", "GPU:7a" + "b")
        # does not merge with another.
        sp, _ = synth.build(P)
        for plane, points in (("/device:GPU:7", [("ab", 1.0), ("sm_clock_mhz", 2.0), ("ab", 3.0)]),
                              ("/device:GPU:7a", [("b", 5.0), ("sm_clock_mhz", 7.0)])):
            pl = synth.Plane(sp.planes.add())
            pl.p.name = plane
            line = pl.p.lines.add()
            line.id = 2**63 - 1
            line.name = "_counters_"
            for i, (name, v) in enumerate(points):
                e = pl.event(line, name, i * 1000, 0)
                pl.stat(e, "value", v, "d")
        got = [(c["plane"], c["name"], c["points"], c["min"], c["max"], c["last"])
               for c in self.top(sp)["counters"]]
        self.assertEqual(got, [
            ("/device:GPU:0", "sm_clock_mhz", 3, 1395.5, 1980.25, 1980.25),
            ("/device:GPU:7", "ab", 2, 1.0, 3.0, 3.0),
            ("/device:GPU:7", "sm_clock_mhz", 1, 2.0, 2.0, 2.0),
            ("/device:GPU:7a", "b", 1, 5.0, 5.0, 5.0),
            ("/device:GPU:7a", "sm_clock_mhz", 1, 7.0, 7.0, 7.0),
        ])


class ReadmeSequence(unittest.TestCase):
    """README.md's sequence as written: TF's client captures into a logdir,
    then profctl into the same logdir, then `profctl top DIR/*/HOST.xplane.pb`
    (the glob matches both sessions) and `profctl export` of the same glob.
    A host-only daemon: top must show the host counters and every warning."""

    def test_tf_then_profctl_then_top_and_export_on_the_glob(self):
        import glob
        import time
        import tfclient

        d = T.Daemon()
        self.addCleanup(d.stop)
        logdir = tempfile.mkdtemp(prefix="profctl-readme-")
        self.addCleanup(shutil.rmtree, logdir)
        tfclient.trace(f"grpc://{d.addr}", logdir, 300, protos=P)
        time.sleep(1.1)  # TF and profctl name sessions by the second
        r = synth.run("capture", d.addr, "--logdir", logdir, "--duration-ms", 300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        files = sorted(glob.glob(os.path.join(logdir, "plugins", "profile", "*",
                                              d.addr.replace(":", "_") + ".xplane.pb")))
        self.assertEqual(len(files), 2)

        r = synth.run("top", *files)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count("==> "), 2)
        for f in files:
            self.assertIn(f"==> {f} <==", r.stdout)
        # The reason there is no GPU data, and the host counters, not empty sections.
        self.assertEqual(r.stdout.count("Warnings (XSpace.warnings):"), 2)
        self.assertIn("no GPU data:", r.stdout)
        self.assertEqual(r.stdout.count("Counters ("), 2)
        self.assertNotIn("Counters (\"_counters_\" lines: points, min, mean, max, last):\n  (none)", r.stdout)

        r = synth.run("top", "--json", *files)
        self.assertEqual(r.returncode, 0, r.stderr)
        js = json.loads(r.stdout)
        self.assertEqual([j["file"] for j in js], files)
        space = P.xp.XSpace.FromString(open(files[1], "rb").read())
        self.assertEqual(js[1]["warnings"], list(space.warnings))
        self.assertEqual(js[1]["errors"], list(space.errors))
        # The counter summary agrees with the points in the file.
        host = next(p for p in space.planes if p.name == "/host:CPU")
        ctr = next(l for l in host.lines if l.name == "_counters_")
        pts = {}
        for e in ctr.events:
            pts.setdefault(host.event_metadata[e.metadata_id].name, []).append(e.stats[0].double_value)
        got = {c["name"]: c for c in js[1]["counters"] if c["plane"] == "/host:CPU"}
        self.assertEqual(set(got), set(pts))
        for name, v in pts.items():
            self.assertEqual(got[name]["points"], len(v), name)
            self.assertEqual(got[name]["min"], min(v), name)
            self.assertEqual(got[name]["max"], max(v), name)
            self.assertEqual(got[name]["last"], v[-1], name)

        out = os.path.join(logdir, "both.json")
        r = synth.run("export", *files, "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            ev = json.load(f)["traceEvents"]
        names = [e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"]
        host_names = [n for n in names if n.endswith(": /host:CPU")]
        self.assertEqual(len(host_names), 2)     # one per session, told apart
        self.assertEqual(len(set(host_names)), 2)

    def test_single_file_json_is_one_object(self):
        sp, _ = synth.build(P)
        tmp = tempfile.mkdtemp(prefix="profctl-top1-")
        self.addCleanup(shutil.rmtree, tmp)
        path = os.path.join(tmp, "a.xplane.pb")
        with open(path, "wb") as f:
            f.write(sp.SerializeToString())
        r = synth.run("top", "--json", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIsInstance(json.loads(r.stdout), dict)
        r = synth.run("top", path, os.path.join(tmp, "missing.xplane.pb"))
        self.assertEqual(r.returncode, 1)          # reported, and the good file still summarized
        self.assertIn("cannot read", r.stderr)
        self.assertIn("Top kernels", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
