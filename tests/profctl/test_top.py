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


class Top(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="profctl-top-")
        cls.xpb = os.path.join(cls.tmp, "synth.xplane.pb")
        cls.space, cls.facts = synth.write(P, cls.xpb)
        r = synth.run("top", "--json", cls.xpb)
        assert r.returncode == 0, r.stderr
        cls.j = json.loads(r.stdout)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

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


if __name__ == "__main__":
    unittest.main(verbosity=2)
