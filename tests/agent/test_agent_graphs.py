# SPDX-License-Identifier: MIT
"""CUDA graphs through the real daemon, the real agent and the fake CUPTI.

fake-cuda-app's `graphn NODES L NAME DEV STREAM [rt]` instantiates one
executable graph of NODES kernel nodes and launches it L times; the fake
CUPTI records, like the real one, one kernel per node per launch (graphId =
the executable's id, a graphNodeId per node, the launch's correlation id),
or with CUPTI_ACTIVITY_KIND_GRAPH_TRACE on one CUpti_ActivityGraphTrace2 per
launch and no node records. Checked in the decoded XSpace with upstream's
names (docs/agent.md "CUDA graphs"): per-node mode's kernel count, ids and
the launch's "(CudaGraph:<exec id>)" suffix and flows; graph-trace mode
(the request's advanced_configuration, as upstream's client encodes it):
one "CudaGraphExec:<id>" event per launch, no node kernels.
"""
import os
import re
import socket
import struct
import sys
import threading
import time
import unittest

import profdtest as T
import test_agent_cupti as C
from test_agent_cupti import AGENT, APP, TRACED, kernels

P = T.protos()
GRAPH_TRACE_KIND = 1 << 51  # CUPTI_ACTIVITY_KIND_GRAPH_TRACE
GRAPH_TRACE_KEY = "gpu_enable_cupti_activity_graph_trace"


def host_events(x):
    """(event name, stats) of every event on /host:CPU."""
    return [(name, st) for _, _, name, st in T.plane_events(x, "/host:CPU")]


def device_events(x, prefix):
    """(line name, event name, stats) of GPU events whose name starts with @prefix."""
    return [(line.name, name, st) for _, line, name, st in T.plane_events(x, "/device:GPU:")
            if name.startswith(prefix)]


class HostileGraphRecords(unittest.TestCase):
    """GRAPH records and graph launch ids are numbers from a local process:
    checked as kernels are (device known, times placed in the window), the
    ids only shown. A raw v4 connection sends them during a capture."""
    # proto/agent/agent-proto.h
    MAGIC, V = 0x41444650, 4
    HDR = struct.Struct("<IHHII")
    REC_STRING, REC_API, REC_GRAPH = 1, 7, 11

    setUp = C.AgentOnFakeCupti.setUp
    tearDown = C.AgentOnFakeCupti.tearDown

    def frame(self, kind, body):
        return self.HDR.pack(self.MAGIC, self.V, kind, len(body), 0) + body

    def graph(self, start, end, device=0, corr=5, graph_id=77):
        return struct.pack("<HHIQQIIIIII", self.REC_GRAPH, 48, 0, start, end, device, 1, 3, corr, graph_id, device)

    def test_graph_records_checked_like_kernels(self):
        name = b"cuGraphLaunch"
        hello = struct.pack("<8I64s512s", os.getpid(), self.V, 1, 0, 0, 0, 0, 0, b"rawgraph", b"rawgraph")
        dev = struct.pack("<18I2Q48s32s96s", 0, 9, 0, 132, *([0] * 14), 0, 0,
                          C.UUIDS[0].encode(), b"0000:18:00.0", b"rawgraph")
        sk = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sk.connect(self.sock)
        sk.sendall(self.frame(1, hello) + self.frame(2, dev))
        self.assertTrue(T.wait_for(lambda: self.status(P.profd.StatusRequest(), timeout=10).agents, 10))
        fut = self.profile.future(T.profile_request(P, 800, f"localhost:{self.d.port}"), timeout=60)
        time.sleep(0.3)
        a0 = 1 << 40  # agent time at the anchor
        recs = struct.pack("<HHIII", self.REC_STRING, 16 + 16, len(name), 1, 0) + name.ljust(16, b"\0")
        recs += struct.pack("<HHIQQIIIIHHiII", self.REC_API, 56, 0, a0 + 100, a0 + 900, 42, 5, 514, 1, 1, 0, 0,
                            0, 77)
        recs += self.graph(a0 + 1000, a0 + 5000)               # fine
        recs += self.graph(a0 + 1000, a0 + 5000, device=9)     # a device never described
        recs += self.graph(a0 + 5000, a0 + 1000)               # ends before it starts
        recs += self.graph(a0 + 1000, a0 + 1000 + (1 << 62))   # reaches 146 years ahead: shortened
        recs += self.graph(1 << 63, (1 << 64) - 1)             # past INT64_MAX: no wall time
        sk.sendall(self.frame(3, struct.pack("<QQII", a0, time.time_ns(), 0, 0)) + self.frame(4, recs))
        x = T.decode_xspace(P, fut.result().tool_data[0].data)
        sk.close()
        self.assertIsNone(self.d.proc.poll())
        evs = device_events(x, "CudaGraphExec:")
        self.assertEqual([n for _, n, _ in evs], ["CudaGraphExec:77"] * 2, evs)
        win = 10 * 10 ** 12  # the window plus slack, in ps: nothing reaches years ahead
        for p in x.planes:
            for line in p.lines:
                for e in line.events:
                    if p.event_metadata[e.metadata_id].name.startswith("CudaGraphExec:"):
                        self.assertLess(e.duration_ps, win)
        launch = [st for n, st in host_events(x) if n == "cuGraphLaunch (CudaGraph:77)"]
        self.assertEqual(len(launch), 1)
        self.assertEqual(launch[0]["correlation_id"].uint64_value, os.getpid() << 32 | 5)
        self.assertTrue(all(st["correlation_id"].uint64_value == os.getpid() << 32 | 5 for _, _, st in evs))
        w = " ".join(x.warnings)
        self.assertIn("1 GPU records named a device the agent did not describe", w)
        m = re.search(r"rawgraph\): (\d+) records had impossible times .* dropped; (\d+) durations", w)
        self.assertTrue(m, list(x.warnings))
        self.assertEqual((int(m.group(1)), int(m.group(2))), (2, 1))


@unittest.skipUnless(AGENT and os.path.exists(APP), "libprofd-agent.so or the fake CUDA app not built")
class GraphsOnFakeCupti(unittest.TestCase):
    setUp = C.AgentOnFakeCupti.setUp
    tearDown = C.AgentOnFakeCupti.tearDown
    app = C.AgentOnFakeCupti.app

    def capture(self, ms, work, app, graph_trace=None):
        """Capture @ms with work() inside it, once @app traces (and, asked
        for graph-level tracing, once that kind is on too)."""
        req = T.profile_request(P, ms, f"localhost:{self.d.port}")
        if graph_trace is not None:
            req.opts.advanced_configuration[GRAPH_TRACE_KEY].bool_value = graph_trace
        want = TRACED | (GRAPH_TRACE_KIND if graph_trace else 0)
        out = {}

        def run():
            r = self.profile(req, timeout=60)
            out["x"] = T.decode_xspace(P, r.tool_data[0].data)

        t = threading.Thread(target=run)
        t.start()
        if not T.wait_for(lambda: app.state()["kinds"] & want == want, 10):
            raise AssertionError("the agent did not start tracing:\n" + self.d.log())
        result = work()
        t.join()
        return out["x"], result

    def launches(self, x, call, exec_id):
        """The graph launch calls of @exec_id on /host:CPU: correlation id -> stats."""
        name = f"{call} (CudaGraph:{exec_id})"
        return {st["correlation_id"].uint64_value: st for n, st in host_events(x) if n == name}

    def test_per_node_kernels_ids_and_flows(self):
        nodes, runs = 3, 4
        a, _ = self.app()

        def work():
            drv = a.ask(f"graphn {nodes} {runs} graph_node_kernel 0 7")
            rt = a.ask("graphn 2 2 rt_graph_kernel 0 7 rt")
            plain = a.ask("launch 5 plain_kernel 0 7")
            return drv, rt, plain

        x, (drv, rt, plain) = self.capture(1000, work, a)
        exec_id, rt_id = int(drv[1]), int(rt[1])
        self.assertEqual((drv[2], rt[2], plain[1]), (str(runs), "2", "5"))
        self.assertNotEqual(exec_id, rt_id)
        ks = [k for k in kernels(x) if k[2] == "graph_node_kernel"]
        self.assertEqual(len(ks), nodes * runs)

        # Every node kernel: the executable's id and its node's id, uint64 as XProf reads them.
        node_ids = {}
        for _, line, _, st in ks:
            self.assertIn("Compute", line)
            self.assertEqual(st["cuda_graph_id"].WhichOneof("value"), "uint64_value")
            self.assertEqual(st["cuda_graph_id"].uint64_value, exec_id)
            nid = st["cuda_graph_node_id"].uint64_value
            node_ids[nid] = node_ids.get(nid, 0) + 1
        self.assertEqual(node_ids, {exec_id << 32 | i: runs for i in range(1, nodes + 1)})

        # The launch calls: upstream's suffix, the exec id as stats, one
        # correlation id each, and each node kernel flows from one of them.
        launches = self.launches(x, "cuGraphLaunch", exec_id)
        self.assertEqual(len(launches), runs, sorted({n for n, _ in host_events(x) if "Graph" in n}))
        for st in launches.values():
            self.assertEqual(st["cuda_graph_exec_id"].uint64_value, exec_id)
            self.assertEqual(st["cuda_graph_id"].uint64_value, exec_id)
            self.assertNotIn("cuda_graph_orig_id", st)  # CUPTI told no origin
        per_launch = {}
        for _, _, _, st in ks:
            c = st["correlation_id"].uint64_value
            self.assertIn(c, launches)
            per_launch[c] = per_launch.get(c, 0) + 1
        self.assertEqual(sorted(per_launch.values()), [nodes] * runs)

        # The runtime's cudaGraphLaunch alike.
        rt_launches = self.launches(x, "cudaGraphLaunch_v10000", rt_id)
        rks = [k for k in kernels(x) if k[2] == "rt_graph_kernel"]
        self.assertEqual((len(rt_launches), len(rks)), (2, 4))
        self.assertTrue(all(k[3]["correlation_id"].uint64_value in rt_launches for k in rks))

        # Kernels outside graphs carry no graph stats; no launch call is
        # named for a graph it is not; no graph-level events in this mode.
        pk = [k for k in kernels(x) if k[2] == "plain_kernel"]
        self.assertEqual(len(pk), 5)
        self.assertTrue(all("cuda_graph_id" not in k[3] and "cuda_graph_node_id" not in k[3] for k in pk))
        self.assertEqual(device_events(x, "CudaGraphExec:"), [])
        self.assertFalse(a.state()["kinds"] & GRAPH_TRACE_KIND)

    def test_graph_trace_one_event_per_launch(self):
        nodes, runs = 3, 5
        a, _ = self.app()

        def work():
            return a.ask(f"graphn {nodes} {runs} traced_graph_kernel 0 9"), a.ask("launch 2 plain_kernel 0 9")

        x, (g, plain) = self.capture(1000, work, a, graph_trace=True)
        exec_id = int(g[1])
        self.assertEqual(plain[1], "2")
        # No node kernels: the graph as a whole, one event per launch.
        self.assertEqual([k for k in kernels(x) if k[2] == "traced_graph_kernel"], [])
        evs = device_events(x, "CudaGraphExec:")
        self.assertEqual(len(evs), runs, evs)
        launches = self.launches(x, "cuGraphLaunch", exec_id)
        self.assertEqual(len(launches), runs)
        corrs = set()
        for line, name, st in evs:
            self.assertEqual(name, f"CudaGraphExec:{exec_id}")
            self.assertTrue(line.startswith("Stream #9(") and "CudaGraph" in line, line)
            self.assertEqual(st["cuda_graph_id"].uint64_value, exec_id)
            self.assertEqual(st["cuda_graph_exec_id"].uint64_value, exec_id)
            self.assertIn(st["correlation_id"].uint64_value, launches)  # the flow from its launch
            corrs.add(st["correlation_id"].uint64_value)
        self.assertEqual(corrs, set(launches))
        # Kernels outside graphs are still traced one by one.
        self.assertEqual(len([k for k in kernels(x) if k[2] == "plain_kernel"]), 2)
        # The kind goes off with the capture.
        self.assertTrue(T.wait_for(lambda: not a.state()["kinds"] & GRAPH_TRACE_KIND, 10))

    def test_graph_trace_switches_mid_capture(self):
        """A second window asking for graph-level tracing while the first
        runs: the agent gets the union of the open windows' options and
        switches the kind on, then off again when that window closes."""
        a, _ = self.app()
        outer = {}

        def run_outer():
            r = self.profile(T.profile_request(P, 2500, f"localhost:{self.d.port}", session_id="outer"),
                             timeout=60)
            outer["x"] = T.decode_xspace(P, r.tool_data[0].data)

        t = threading.Thread(target=run_outer)
        t.start()
        self.assertTrue(T.wait_for(lambda: a.state()["kinds"] & TRACED == TRACED, 10), self.d.log())
        self.assertFalse(a.state()["kinds"] & GRAPH_TRACE_KIND)
        first = a.ask("graphn 2 2 before_kernel 0 7")
        x_in, whole = self.capture(700, lambda: a.ask("graphn 2 3 whole_kernel 0 7"), a, graph_trace=True)
        self.assertTrue(T.wait_for(lambda: not a.state()["kinds"] & GRAPH_TRACE_KIND, 10), self.d.log())
        after = a.ask("graphn 2 2 after_kernel 0 7")
        t.join()
        x = outer["x"]
        # The inner window: the graph as a whole.
        self.assertEqual(len(device_events(x_in, f"CudaGraphExec:{whole[1]}")), 3)
        self.assertEqual([k for k in kernels(x_in) if k[2] == "whole_kernel"], [])
        # The outer window saw all three phases.
        self.assertEqual(len([k for k in kernels(x) if k[2] == "before_kernel"]), 4)
        self.assertEqual(len(device_events(x, f"CudaGraphExec:{whole[1]}")), 3)
        self.assertEqual([k for k in kernels(x) if k[2] == "whole_kernel"], [])
        self.assertEqual(len([k for k in kernels(x) if k[2] == "after_kernel"]), 4)
        self.assertEqual(device_events(x, f"CudaGraphExec:{first[1]}") + device_events(x, f"CudaGraphExec:{after[1]}"),
                         [])

    def test_graph_trace_off_is_per_node(self):
        """The key set to false (as a client may send it) is per-node mode."""
        a, _ = self.app()
        x, g = self.capture(800, lambda: a.ask("graphn 2 3 off_graph_kernel 0 7"), a, graph_trace=False)
        self.assertEqual(len([k for k in kernels(x) if k[2] == "off_graph_kernel"]), 6)
        self.assertEqual(device_events(x, "CudaGraphExec:"), [])
        self.assertEqual(len(self.launches(x, "cuGraphLaunch", int(g[1]))), 3)


@unittest.skipUnless(AGENT and os.path.exists(APP), "libprofd-agent.so or the fake CUDA app not built")
class FakeGraphLimit(unittest.TestCase):
    """The fake CUPTI holds 64 executable graphs per process; the 65th
    `graphn` must fail where the test sees it (an error line on stderr, a
    non-zero exit), never launch nothing in silence."""
    setUp = C.AgentOnFakeCupti.setUp
    tearDown = C.AgentOnFakeCupti.tearDown
    app = C.AgentOnFakeCupti.app

    def test_limit_is_an_error(self):
        a, _ = self.app()
        for i in range(64):
            got = a.ask("graphn 1 1 limit_kernel 0 7")
            self.assertEqual(len(got), 3, got)
            self.assertNotEqual(got[1], "0", f"graph {i + 1}: no executable graph")
        self.assertEqual(a.ask("graphn 1 1 limit_kernel 0 7"), [])
        self.assertEqual(a.proc.wait(timeout=10), 3)
        self.assertIn("limit of executable graphs", a.proc.stderr.read())


if __name__ == "__main__":
    if not (AGENT and os.path.exists(APP)):
        print("libprofd-agent.so or the fake CUDA app not built")
        sys.exit(77)
    unittest.main(verbosity=2)
