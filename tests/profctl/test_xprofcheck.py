# SPDX-License-Identifier: MIT
"""profctl doctor FILE: which XProf tools an XSpace fills, on synthetic
XSpaces (synth.py) with and without tf_op, hlo_op, group_id, memory events
and device capability stats."""
import os
import unittest

import profdtest as T
import synth

P = T.protos()


class XprofCheck(synth.SynthCase):
    def check(self, space, name):
        path = os.path.join(self.tmp, name + ".xplane.pb")
        with open(path, "wb") as f:
            f.write(space.SerializeToString())
        r = synth.run("doctor", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        v = T.doctor_verdicts(r.stdout)
        self.assertEqual(len(v), 8, r.stdout)
        return v

    def plane(self, space, name):
        return next(synth.Plane(p) for p in space.planes if p.name == name)

    def fresh(self):
        space, _ = synth.build(P)
        return space

    @staticmethod
    def rebind(pl):
        """A synth.Plane over an existing plane: its metadata ids known."""
        for m in pl.p.event_metadata.values():
            pl._ev[m.name] = m.id
        for m in pl.p.stat_metadata.values():
            pl._st[m.name] = m.id
        return pl

    def gpu_stream(self, space, n=0):
        g = self.rebind(self.plane(space, f"/device:GPU:{n}"))
        return g, next(l for l in g.p.lines if l.name.startswith("Stream"))

    def test_several_files_each_get_a_report(self):
        """A glob over a multi-host capture: one report per file, in order;
        a file that is not an XSpace fails the run but not the others."""
        paths = []
        for name in ("w1_6009", "w2_6009"):
            paths.append(os.path.join(self.tmp, name + ".xplane.pb"))
            with open(paths[-1], "wb") as f:
                f.write(self.space.SerializeToString())
        r = synth.run("doctor", *paths)
        self.assertEqual(r.returncode, 0, r.stderr)
        heads = [l for l in r.stdout.splitlines() if l.startswith("XProf tools with content in")]
        self.assertEqual(heads, [f"XProf tools with content in {p}:" for p in paths])
        bad = os.path.join(self.tmp, "bad.xplane.pb")
        with open(bad, "wb") as f:
            f.write(b"\xff" * 64)
        r = synth.run("doctor", paths[0], bad, paths[1])
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("bad.xplane.pb", r.stderr)
        self.assertEqual(r.stdout.count("XProf tools with content in"), 2)

    def test_plain_kernels_fill_trace_viewer_and_kernel_stats_only(self):
        v = self.check(self.space, "plain")
        self.assertEqual(v["trace_viewer"][0], True)
        n = sum(k["count"] for k in self.facts["kernels"].values())
        self.assertEqual(v["kernel_stats"], (True, f"{n} kernels with kernel_details"))
        for tool in ("memory_profile", "framework_op_stats", "overview_page", "input_pipeline", "roofline",
                     "pod_viewer"):
            self.assertFalse(v[tool][0], (tool, v[tool]))
        self.assertIn("tf_op", v["framework_op_stats"][1])
        self.assertIn("group_id", v["input_pipeline"][1])

    def test_tf_op_and_device_model_fill_op_stats_overview_and_roofline(self):
        space = self.fresh()
        g, s = self.gpu_stream(space)
        g.event(s, "fused_gemm", 50000, 700, tf_op=("s", "dense/MatMul:MatMul"))
        v = self.check(space, "tfop-nocaps")
        self.assertEqual(v["framework_op_stats"][0], True, v)
        self.assertEqual(v["overview_page"][0], True)
        self.assertIn("no steps", v["overview_page"][1])
        self.assertEqual(v["roofline"][0], False)
        self.assertIn("device model", v["roofline"][1])
        # The §4.4 capability stats on the plane: the roofline has its device.
        for k, val in (("device_vendor", "Nvidia"), ("compute_cap_major", ("i", 9)), ("clock_rate", ("i", 1980000)),
                       ("core_count", ("i", 132)), ("memory_bandwidth", ("u", 3352320000000)),
                       ("peak_teraflops_per_second", ("d", 1070.5))):
            g.stat(g.p, k, val[1] if isinstance(val, tuple) else val, val[0] if isinstance(val, tuple) else None)
        # Every op has 0 FLOPs (profd has no cost model): an empty chart, so "no".
        v = self.check(space, "tfop-caps")
        self.assertEqual(v["roofline"][0], False, v)
        self.assertTrue(v["roofline"][1].startswith("no FLOP counts (profd has no cost model)"), v["roofline"])
        # An op event that carries its FLOPs puts a point on the chart.
        g.event(s, "fused_gemm", 60000, 700, tf_op=("s", "dense/MatMul:MatMul"), flops=("u", 2 * 512 ** 3))
        v = self.check(space, "tfop-caps-flops")
        self.assertEqual(v["roofline"], (True, "op metrics on 1 GPU planes with a device model and "
                                               "peak_teraflops_per_second"))

    def test_hlo_op_without_hlo_proto_is_dropped_even_with_tf_op(self):
        space = self.fresh()
        g, s = self.gpu_stream(space)
        g.event(s, "fusion.1", 50000, 700, tf_op=("s", "jit(step)/dot:dot"), hlo_op=("s", "fusion.1"))
        v = self.check(space, "hlo")
        self.assertEqual(v["framework_op_stats"][0], False, v)
        self.assertIn("1 events with hlo_op are dropped", v["framework_op_stats"][1])
        # With an HLO proto in /host:metadata the same event counts.
        meta = synth.Plane(space.planes.add())
        meta.p.name = "/host:metadata"
        meta.stat(meta.p.event_metadata[meta.ev_id("jit_step")], "Hlo Proto", "x")
        v = self.check(space, "hlo-proto")
        self.assertEqual(v["framework_op_stats"][0], True, v)

    def test_group_id_gives_steps_only_as_int64(self):
        space = self.fresh()
        g, s = self.gpu_stream(space)
        g.event(s, "fused_gemm", 50000, 700, tf_op=("s", "dense/MatMul:MatMul"), group_id=("u", 3))
        v = self.check(space, "group-u64")
        self.assertEqual(v["input_pipeline"][0], False)
        self.assertIn("another type", v["input_pipeline"][1])
        g.event(s, "fused_gemm", 60000, 700, tf_op=("s", "dense/MatMul:MatMul"), group_id=("i", 4))
        v = self.check(space, "group-i64")
        self.assertEqual(v["input_pipeline"], (True, "1 events in steps"))
        self.assertEqual(v["overview_page"], (True, "op metrics and 1 events in steps"))

    def test_memory_events_fill_the_memory_profile_when_int64(self):
        space = self.fresh()
        h = self.rebind(self.plane(space, "/host:CPU"))
        line = h.p.lines[0]
        h.event(line, "MemoryAllocation", 100, 0, bytes_allocated=("u", 4096))
        v = self.check(space, "mem-u64")
        self.assertEqual(v["memory_profile"][0], False)
        self.assertIn("not int64", v["memory_profile"][1])
        h.event(line, "MemoryDeallocation", 200, 0, bytes_allocated=("i", 0))
        h.event(line, "MemoryAllocation", 300, 0, bytes_allocated=("i", 4096))
        v = self.check(space, "mem-i64")
        self.assertEqual(v["memory_profile"], (True, "2 MemoryAllocation/MemoryDeallocation events on /host:CPU"))

    def test_a_file_that_is_not_an_xspace_fails(self):
        path = os.path.join(self.tmp, "junk.xplane.pb")
        with open(path, "wb") as f:
            f.write(b"\xff" * 64)
        r = synth.run("doctor", path)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("not a readable XSpace", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
