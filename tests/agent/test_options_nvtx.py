# SPDX-License-Identifier: MIT
"""gpu_enable_nvtx_tracking (docs/options.md) through the real agent on the
fake CUPTI, into a real profd: off -> the agent records no NVTX range; on
(profd's default) -> ranges and their annotations are there; two
overlapping windows, one off and one on: each gets what it asked for;
gpu_max_annotation_strings keeps the ranges of the first N distinct texts.
"""
import os
import threading
import time
import unittest

import profdtest as T
import test_agent_cupti as C
from test_agent_cupti import AGENT, APP, TRACED, kernels

P = T.protos()


def nvtx_events(x):
    return [p.event_metadata[e.metadata_id].name for p in x.planes if p.name == "/host:CPU"
            for l in p.lines if l.name.endswith("/NVTX") for e in l.events]


def annotated(x):
    return [k for k in kernels(x) if "nvtx_range" in k[3]]


@unittest.skipUnless(AGENT and os.path.exists(APP), "libprofd-agent.so or the fake CUDA app not built")
class NvtxOption(unittest.TestCase):
    setUp = C.AgentOnFakeCupti.setUp
    tearDown = C.AgentOnFakeCupti.tearDown
    app = C.AgentOnFakeCupti.app

    def start(self, ms, advanced, sid):
        out = {}

        def run():
            r = self.profile(T.profile_request(P, ms, f"localhost:{self.d.port}", session_id=sid,
                                               advanced=advanced), timeout=60)
            out["x"] = T.decode_xspace(P, r.tool_data[0].data)
        t = threading.Thread(target=run)
        t.start()
        return t, out

    def work(self, a, tag):
        for _ in range(2):
            a.ask(f"nvtx push {tag}_step")
            a.ask(f"launch 2 {tag}_kernel 0 7")
            a.ask("nvtx pop")

    def traced(self, a):
        if not T.wait_for(lambda: a.state()["kinds"] & TRACED == TRACED, 10):
            raise AssertionError("the agent did not start tracing:\n" + self.d.log())

    def test_off_records_nothing_on_records(self):
        a, _ = self.app()
        t, out = self.start(900, {"gpu_enable_nvtx_tracking": False}, "off")
        self.traced(a)
        self.work(a, "off")
        a.ask("busy 1500")  # CUDA calls past the capture's end let the agent detach
        t.join()
        x = out["x"]
        self.assertEqual(len(kernels(x)), 4, list(x.warnings))
        self.assertEqual(nvtx_events(x), [])
        self.assertEqual(annotated(x), [])
        # Nothing was collected, so nothing had to be cut from the window.
        self.assertFalse([w for w in x.warnings if "gpu_enable_nvtx_tracking" in w], list(x.warnings))
        # NVTX hints ("wrap ops in NVTX ranges") would mislead: NVTX was turned off.
        self.assertFalse([w for w in x.warnings if "no op names" in w or "no steps found" in w],
                         list(x.warnings))
        # Explicitly on (also the default): ranges and annotations.
        t, out = self.start(900, {"gpu_enable_nvtx_tracking": True}, "on")
        self.traced(a)
        self.work(a, "on")
        t.join()
        x = out["x"]
        self.assertEqual(nvtx_events(x), ["on_step", "on_step"])
        self.assertEqual(len(annotated(x)), 4)

    def test_overlapping_windows_each_get_what_they_asked(self):
        a, _ = self.app()
        t_off, off = self.start(2500, {"gpu_enable_nvtx_tracking": False}, "off")
        self.traced(a)
        time.sleep(0.1)
        t_on, on = self.start(1000, None, "on")  # the default: NVTX on
        time.sleep(0.3)  # START with NVTX on has reached the agent
        self.work(a, "both")
        t_on.join()
        t_off.join()
        self.assertEqual(nvtx_events(on["x"]), ["both_step", "both_step"], list(on["x"].warnings))
        self.assertEqual(nvtx_events(off["x"]), [])
        w = [s for s in off["x"].warnings if s.startswith("gpu_enable_nvtx_tracking=false: 2 NVTX ranges")]
        self.assertEqual(len(w), 1, list(off["x"].warnings))
        # Both windows have the kernels.
        self.assertEqual(len([k for k in kernels(off["x"]) if k[2] == "both_kernel"]), 4)
        self.assertEqual(len([k for k in kernels(on["x"]) if k[2] == "both_kernel"]), 4)

    def test_annotation_strings_cap(self):
        a, _ = self.app()
        t, out = self.start(900, {"gpu_max_annotation_strings": 2}, "cap")
        self.traced(a)
        for text in ["alpha", "beta", "alpha", "gamma", "delta", "beta"]:
            a.ask(f"nvtx push {text}")
            a.ask("nvtx pop")
        t.join()
        x = out["x"]
        self.assertEqual(sorted(nvtx_events(x)), ["alpha", "alpha", "beta", "beta"])
        w = [s for s in x.warnings if s.startswith("gpu_max_annotation_strings=2: 2 NVTX ranges")]
        self.assertEqual(len(w), 1, list(x.warnings))


if __name__ == "__main__":
    unittest.main(verbosity=2)
