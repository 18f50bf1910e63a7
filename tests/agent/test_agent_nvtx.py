# SPDX-License-Identifier: MIT
"""NVTX through the real agent on the fake CUPTI, into a real profd.

fake-cuda-app's `nvtx push TEXT` / `nvtx pop` call the real NVTX3 API from
the toolkit headers; the only variable set is CUDA_INJECTION64_PATH, as for
a user: the agent makes NVTX load it as its tool (NVTX_INJECTION64_PATH).
Checked in the decoded XSpace: ranges on /host:CPU NVTX lines, annotation
stats on the GPU work launched inside them, steps (group_id), the warnings,
and what XProf's own rules then do with the space (IsXSpaceGrouped).
"""
import json
import os
import subprocess
import threading
import time
import unittest

import profdtest as T
import test_agent_cupti as C
from test_agent_cupti import AGENT, APP, kernels

P = T.protos()
STEPS = 3
FUSION = "fusion.3#hlo_op=fusion.3,hlo_module=jit_train_step,program_id=12#"

# XProf's derived-line ids, as upstream defines them (openxla/xla
# xla/tsl/profiler/utils/trace_utils.h, read by xprof):
#   constexpr int kThreadIdDerivedMin = 0xdeadbeef;
#   constexpr int kThreadIdStepInfo = kThreadIdDerivedMin;
#   constexpr int kThreadIdTfOp = kThreadIdDerivedMin + 3;
#   constexpr int kThreadIdHloModule = kThreadIdDerivedMin + 4;
#   constexpr int kThreadIdHloOp = kThreadIdDerivedMin + 5;
# A C++ int: 0xdeadbeef is -559038737, and XLine.id (int64) holds that.
K_THREAD_ID_DERIVED_MIN = -559038737
STEP_INFO, TF_OP, HLO_MODULE, HLO_OP = (K_THREAD_ID_DERIVED_MIN + k for k in (0, 3, 4, 5))


def stats_of(p, e):
    return {p.stat_metadata[s.metadata_id].name: s for s in e.stats}


def value(s):
    kind = s.WhichOneof("value")
    return getattr(s, kind) if kind != "ref_value" else ("ref", s.ref_value)


def ref(p, s):
    """A string stat's text, whether str_value or ref_value."""
    return s.str_value if s.WhichOneof("value") == "str_value" else p.stat_metadata[s.ref_value].name


def device_events(x):
    """(plane, event name, stats) of every event on GPU planes."""
    return [(p, p.event_metadata[e.metadata_id].name, stats_of(p, e))
            for p in x.planes if p.name.startswith("/device:GPU:") for l in p.lines for e in l.events]


def host_plane(x):
    return [p for p in x.planes if p.name == "/host:CPU"][0]


def parse_tf_op_fullname(name):
    """XProf's ParseTfOpFullname (xprof tf_op_utils.cc): (category, op name,
    op type); category None when XProf cannot parse it (framework op stats
    then lump the event into one unknown op)."""
    import re
    parts = name.split(":", 1)
    if len(parts) != 2 or parts[0] == "Iterator":
        return (None, name, "")
    if re.fullmatch(r"[A-Z_][a-zA-Z0-9_]*", parts[1]) and re.fullmatch(r"[A-Za-z0-9.][A-Za-z0-9_./>-]*", parts[0]):
        return ("tensorflow", parts[0], parts[1])
    if re.fullmatch(r"[a-z_][a-z0-9_]*(\[.*\])?", parts[1]):
        return ("jax", parts[0], parts[1].split("[")[0])
    return (None, name, "")


def info_lines(x):
    """profd's information lines: the Task Environment plane's profd_info stat
    (docs/agent.md "Steps"); XSpace has no list for them."""
    for p in x.planes:
        if p.name == "Task Environment":
            for s in p.stats:
                if p.stat_metadata[s.metadata_id].name == "profd_info":
                    return s.str_value.split("\n")
    return []


def is_xspace_grouped(x):
    """XProf's IsXSpaceGrouped: a group_id stat metadata on every host and
    device plane (then XProf skips its grouping, flows and derived lines)."""
    planes = [p for p in x.planes if p.name == "/host:CPU" or p.name.startswith("/device:GPU:")]
    return bool(planes) and all(any(m.name == "group_id" for m in p.stat_metadata.values()) for p in planes)


@unittest.skipUnless(AGENT and os.path.exists(APP), "libprofd-agent.so or the fake CUDA app not built")
class NvtxOnFakeCupti(unittest.TestCase):
    # The daemon and job plumbing of test_agent_cupti, without its tests.
    setUp = C.AgentOnFakeCupti.setUp
    tearDown = C.AgentOnFakeCupti.tearDown
    app = C.AgentOnFakeCupti.app
    capture_while = C.AgentOnFakeCupti.capture_while

    def test_fake_training_loop(self):
        a, _ = self.app()
        # Before any capture: NVTX attaches to the agent, and costs no record.
        self.assertEqual(a.ask("nvtx push warmup"), ["pushed", "0"])
        self.assertEqual(a.ask("nvtx pop"), ["popped", "0"])

        def work():
            a.ask("launch 2 outside_kernel 0 7")
            for _ in range(STEPS):
                self.assertEqual(a.ask("nvtx push train_step"), ["pushed", "0"])
                a.ask("nvtx push dense:MatMul")
                a.ask("launch 2 gemm_kernel 0 7")
                a.ask("nvtx pop")
                a.ask("nvtx push " + FUSION)
                a.ask("launch 1 fusion_kernel 0 7")
                a.ask("memcpy 1 0 4096")
                a.ask("nvtx pop")
                a.ask("nvtx pop")
            a.ask("busy 1500")
        x, _ = self.capture_while(1200, work, a)
        w = list(x.warnings)
        mine = [s for s in w if f"pid {a.pid}" in s]

        ks = kernels(x)
        by_name = {}
        for _, _, name, st in ks:
            by_name.setdefault(name, []).append(st)
        self.assertEqual({n: len(v) for n, v in by_name.items()},
                         {"outside_kernel": 2, "gemm_kernel": 2 * STEPS, "fusion_kernel": STEPS}, w)
        # Outside every range: no annotation, no step.
        for st in by_name["outside_kernel"]:
            self.assertNotIn("tf_op", st)
            self.assertNotIn("group_id", st)
        plane0 = [p for p in x.planes if p.name.startswith("/device:GPU:")][0]
        groups = set()
        for st in by_name["gemm_kernel"]:
            self.assertEqual(ref(plane0, st["tf_op"]), "dense:MatMul")  # the op, not the step
            self.assertEqual(ref(plane0, st["nvtx_range"]), "dense:MatMul")  # the innermost
            self.assertEqual(st["group_id"].WhichOneof("value"), "int64_value")
            groups.add(st["group_id"].int64_value)
        self.assertEqual(groups, set(range(1, STEPS + 1)))
        for st in by_name["fusion_kernel"]:
            self.assertEqual(ref(plane0, st["hlo_op_name"]), "fusion.3")
            # XLA ops: the op and its kind, as op stats group them.
            self.assertEqual(ref(plane0, st["tf_op"]), "fusion.3:fusion")
            self.assertEqual(ref(plane0, st["hlo_module"]), "jit_train_step")
            self.assertEqual(st["program_id"].WhichOneof("value"), "int64_value")
            self.assertEqual(st["program_id"].int64_value, 12)
            # hlo_op itself would make XProf's op metrics drop the kernel (no HLO proto).
            self.assertNotIn("hlo_op", st)
            self.assertEqual(ref(plane0, st["nvtx_range"]), FUSION)
        copies = [(p, st) for p, n, st in device_events(x) if n == "MemcpyH2D"]
        self.assertEqual(len(copies), STEPS)
        self.assertEqual(sorted(st["group_id"].int64_value for _, st in copies), list(range(1, STEPS + 1)))
        self.assertTrue(all(ref(p, st["tf_op"]) == "fusion.3:fusion" for p, st in copies))

        # XProf derives no lines for a grouped space: profd writes the step and
        # op lines of the work inside steps, with XProf's ids and names, one
        # event per run of one name in one step (agent-derived.h).
        derived = {l.id: l for l in plane0.lines if l.id < 0}
        self.assertEqual({i: l.name for i, l in derived.items()},
                         {STEP_INFO: "Steps", TF_OP: "Framework Ops", HLO_MODULE: "XLA Modules", HLO_OP: "XLA Ops"})

        def names(i):
            return [(plane0.event_metadata[e.metadata_id].name, stats_of(plane0, e)["group_id"].int64_value)
                    for e in sorted(derived[i].events, key=lambda e: e.offset_ps)]
        self.assertEqual(names(STEP_INFO), [(str(i), i) for i in range(1, STEPS + 1)])
        self.assertEqual(names(TF_OP),
                         [x for i in range(1, STEPS + 1) for x in (("dense:MatMul", i), ("fusion.3:fusion", i))])
        self.assertEqual(names(HLO_MODULE), [("jit_train_step", i) for i in range(1, STEPS + 1)])
        self.assertEqual(names(HLO_OP), [("fusion.3", i) for i in range(1, STEPS + 1)])
        # Each step's event spans its kernels and copies.
        steps = sorted(derived[STEP_INFO].events, key=lambda e: e.offset_ps)
        spans = [(e.offset_ps, e.offset_ps + e.duration_ps) for e in steps]
        for l in plane0.lines:
            if l.id < 0:
                continue
            for e in l.events:
                g = stats_of(plane0, e).get("group_id")
                if g is None:
                    continue
                t0 = l.timestamp_ns * 1000 + e.offset_ps - derived[STEP_INFO].timestamp_ns * 1000
                lo, hi = spans[g.int64_value - 1]
                self.assertTrue(lo <= t0 and t0 + e.duration_ps <= hi, (g.int64_value, t0, lo, hi))

        # Host: a /NVTX line for the thread, step ranges as XProf root events.
        h = host_plane(x)
        nv = [l for l in h.lines if l.name.endswith(f"(pid {a.pid})/tid {a.main_tid}/NVTX")]
        self.assertEqual(len(nv), 1, [l.name for l in h.lines])
        evs = [(h.event_metadata[e.metadata_id].name, stats_of(h, e), e) for e in nv[0].events]
        names = [n for n, _, _ in evs]
        self.assertEqual(names.count("train_step"), STEPS, names)
        self.assertEqual(names.count("dense:MatMul"), STEPS)
        self.assertEqual(names.count("fusion.3"), STEPS)  # the name before '#'
        self.assertNotIn("warmup", names)  # before the capture
        steps = sorted((st["step_num"].int64_value, st["_r"].int64_value, st["group_id"].int64_value)
                       for n, st, _ in evs if n == "train_step")
        self.assertEqual(steps, [(i, 1, i) for i in range(1, STEPS + 1)])
        inner = [st for n, st, _ in evs if n == "fusion.3"]
        self.assertTrue(all(st["group_id"].int64_value in range(1, STEPS + 1) for st in inner))
        self.assertTrue(all(ref(h, st["hlo_module"]) == "jit_train_step" for st in inner))
        # Each step range encloses its children in time.
        for n, st, e in evs:
            if n == "train_step":
                self.assertGreater(e.duration_ps, 0)
        # The launches on the thread's API line carry the step too.
        api = [stats_of(h, e) for l in h.lines if not l.name.endswith("/NVTX") for e in l.events
               if h.event_metadata[e.metadata_id].name == "cudaLaunchKernel_v7000"]
        self.assertEqual(sorted(st["group_id"].int64_value for st in api if "group_id" in st),
                         sorted(list(range(1, STEPS + 1)) * 3))

        # Where the steps came from is information, not a warning (issue 27
        # item 6), with this window's count; no "no op names", no "no steps".
        self.assertFalse([s for s in w if "steps in this window" in s], w)
        self.assertEqual([s for s in info_lines(x) if f"pid {a.pid}" in s],
                         [f"pid {a.pid} (fake-cuda-app): {STEPS} steps in this window, from NVTX ranges matching "
                          "the step pattern; host and GPU events inside carry group_id"])
        self.assertFalse([s for s in mine if "no op names" in s or "no steps" in s], w)
        # XProf's rule: every host and device plane declares group_id, so XProf
        # takes these steps as they are and skips its own grouping, flows and
        # derived lines (docs/agent.md, "Steps").
        self.assertTrue(is_xspace_grouped(x))
        self.assertEqual(a.finish(), 0)

    def test_api_events_and_their_ranges_share_the_thread_line(self):
        # CUPTI writes the low 32 bits of pthread_self() as an API record's
        # thread id unless asked for the kernel tid (CUPTI 13.0 on an H200,
        # tests/gpu/cupti-probe.cc); NVTX ranges, Python stacks and /proc
        # know only the kernel tid. The agent asks for it: a thread's API
        # line and its NVTX line carry its real tid, and the range encloses
        # the launches made inside it.
        a, _ = self.app()

        def work():
            a.ask("nvtx push around_launch")
            a.ask("launch 2 tid_kernel 0 7")
            a.ask("nvtx pop")
            a.ask("busy 300")
        x, _ = self.capture_while(800, work, a)
        h = host_plane(x)
        mine = [l for l in h.lines if T.line_pid(l) == a.pid]

        def spans(suffix, name):
            return [(l.timestamp_ns * 1000 + e.offset_ps, l.timestamp_ns * 1000 + e.offset_ps + e.duration_ps)
                    for l in mine if l.name.endswith(f"(pid {a.pid})/tid {a.main_tid}{suffix}")
                    for e in l.events if h.event_metadata[e.metadata_id].name == name]
        launches = spans("", "cudaLaunchKernel_v7000")
        ranges = spans("/NVTX", "around_launch")
        self.assertEqual((len(launches), len(ranges)), (2, 1), [l.name for l in mine])
        lo, hi = ranges[0]
        for t0, t1 in launches:
            self.assertTrue(lo <= t0 and t1 <= hi, (lo, t0, t1, hi))
        # The job's one CUDA thread has no line under another id.
        self.assertEqual({T.line_owner(l)[1] & ~(1 << 30) for l in mine if "/tid " in l.name}, {a.main_tid},
                         [l.name for l in mine])

    def test_pytorch_nesting_names_the_inner_ops(self):
        """issue 27 item 1: under the step, each kernel's tf_op is the innermost
        framework-op range (TensorFlow-style names, PyTorch operators as
        emit_nvtx() names them), its scope the ranges in between, and XProf's
        framework op stats then list the real ops, not the step."""
        a, _ = self.app()

        def step():
            a.ask("nvtx push train_step")
            a.ask("nvtx push data:H2D")
            a.ask("memcpy 1 0 4096")
            a.ask("nvtx pop")
            a.ask("nvtx push forward")  # a record_function name
            a.ask("nvtx push dense:MatMul")
            a.ask("launch 2 gemm_kernel 0 7")
            a.ask("nvtx pop")
            a.ask("nvtx push relu:Relu")
            a.ask("launch 1 relu_kernel 0 7")
            a.ask("nvtx pop")
            a.ask("nvtx push aten::mm, seq = 4, op_id = 9, sizes = [[2, 3], [3, 4]]")
            a.ask("launch 1 mm_kernel 0 7")
            a.ask("nvtx pop")
            a.ask("nvtx pop")
            a.ask("nvtx push backward")  # a region, not an op
            a.ask("launch 1 bwd_kernel 0 7")
            a.ask("nvtx pop")
            a.ask("nvtx push optimizer:AdamW")
            a.ask("launch 1 adam_kernel 0 7")
            a.ask("nvtx pop")
            a.ask("nvtx pop")

        def work():
            for _ in range(STEPS):
                step()
            a.ask("busy 1500")
        x, _ = self.capture_while(1200, work, a)
        want = {"gemm_kernel": "forward/dense:MatMul", "relu_kernel": "forward/relu:Relu",
                "mm_kernel": "forward/aten.mm:mm", "bwd_kernel": "backward", "adam_kernel": "optimizer:AdamW",
                "MemcpyH2D": "data:H2D"}
        got = {}
        time_by_op = {}
        for p, name, st in device_events(x):
            if name in want:
                got.setdefault(name, set()).add(ref(p, st["tf_op"]))
                self.assertIn("group_id", st)
                cat, op, typ = parse_tf_op_fullname(ref(p, st["tf_op"]))
                key = (op, typ) if cat else ("", "")  # XProf lumps what it cannot parse
                time_by_op[key] = time_by_op.get(key, 0) + 1
        self.assertEqual(got, {k: {v} for k, v in want.items()}, list(x.warnings))
        # Framework op stats by XProf's parse: the real ops with their types.
        self.assertEqual(set(time_by_op) - {("", "")},
                         {("forward/dense", "MatMul"), ("forward/relu", "Relu"), ("forward/aten.mm", "mm"),
                          ("optimizer", "AdamW"), ("data", "H2D")})
        self.assertEqual(time_by_op[("forward/dense", "MatMul")], 2 * STEPS)
        self.assertNotIn(("train_step", ""), time_by_op)
        h = host_plane(x)
        fw = [l for p in x.planes if p.name.startswith("/device:GPU:") for l in p.lines if l.id == TF_OP]
        self.assertEqual(len(fw), 1)
        p0 = [p for p in x.planes if p.name.startswith("/device:GPU:")][0]
        self.assertEqual({p0.event_metadata[e.metadata_id].name for e in fw[0].events}, set(want.values()))
        self.assertTrue(h.lines)
        profctl = os.environ.get("PROFCTL")
        if profctl:
            path = os.path.join(self.tmp, "torch.xplane.pb")
            with open(path, "wb") as f:
                f.write(x.SerializeToString())
            out = subprocess.run([profctl, "doctor", path], capture_output=True, text=True, timeout=60)
            self.assertTrue(T.doctor_verdicts(out.stdout).get("framework_op_stats", (False,))[0], out.stdout)
        self.assertEqual(a.finish(), 0)

    def test_doctor_says_the_training_loop_fills_the_tools(self):
        """issue: the read-back check on the fake training loop (NVTX steps and
        op ranges, kernels, a copy, allocations): overview, framework op stats,
        memory profile, kernel stats and trace viewer have content."""
        profctl = os.environ.get("PROFCTL")
        if not profctl:
            self.skipTest("PROFCTL not set")
        a, _ = self.app()

        def work():
            for _ in range(STEPS):
                a.ask("nvtx push train_step")
                a.ask("nvtx push dense:MatMul")
                ptr = a.ask("malloc 0 1048576")[1]
                a.ask("launch 2 gemm_kernel 0 7")
                a.ask("nvtx pop")
                a.ask("memcpy 1 0 4096")
                a.ask("free " + ptr)
                a.ask("nvtx pop")
            a.ask("busy 1500")

        old = C.TRACED
        C.TRACED = 1 << 10 | 1 << 4 | 1 << 49  # kernels, driver API, MEMORY2
        try:
            x, _ = self.capture_while(1200, work, a)
        finally:
            C.TRACED = old
        # Allocations inside a range carry its op and step (memory profile).
        h = host_plane(x)
        allocs = [stats_of(h, e) for l in h.lines for e in l.events
                  if h.event_metadata[e.metadata_id].name == "MemoryAllocation"]
        self.assertEqual(len(allocs), STEPS, [l.name for l in h.lines])
        self.assertEqual([ref(h, st["tf_op"]) if "tf_op" in st else None for st in allocs], ["dense:MatMul"] * STEPS,
                         [sorted(st) for st in allocs])
        self.assertEqual(sorted(st["group_id"].int64_value for st in allocs), list(range(1, STEPS + 1)))
        path = os.path.join(self.tmp, "loop.xplane.pb")
        with open(path, "wb") as f:
            f.write(x.SerializeToString())
        out = subprocess.run([profctl, "doctor", path], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        # profctl top counts the kernels once: the derived lines (Steps, ...)
        # repeat them and are left out, as XProf leaves them out of its stats.
        top = subprocess.run([profctl, "top", "--json", path], capture_output=True, text=True, timeout=60)
        self.assertEqual(top.returncode, 0, top.stderr)
        self.assertEqual([g["kernels"] for g in json.loads(top.stdout)["gpus"]], [2 * STEPS])
        got = T.doctor_verdicts(out.stdout)
        for tool in ("overview_page", "framework_op_stats", "memory_profile", "kernel_stats", "trace_viewer"):
            self.assertTrue(got.get(tool, (False,))[0], (tool, out.stdout))
        self.assertEqual(a.finish(), 0)

    def test_step_ids_are_one_space_per_window(self):
        """issue 27 item 3: one group_id space per XSpace, numbered per window
        from 1 in start order: two processes in lockstep on one GPU share
        each step's id, a job that starts late gets ids of its own, a window
        inside a longer one numbers its steps from 1, and a step begun
        before a window is cut from it (its events there carry no id)."""
        a, _ = self.app()
        b, _ = self.app()
        outer, inner = {}, {}

        def capture(ms, out, sid):
            r = self.profile(T.profile_request(P, ms, f"localhost:{self.d.port}", session_id=sid), timeout=60)
            out["x"] = T.decode_xspace(P, r.tool_data[0].data)

        def lockstep(tag):
            a.ask("nvtx push train_step")
            b.ask("nvtx push train_step")
            a.ask(f"launch 1 a_{tag} 0 7")
            b.ask(f"launch 1 b_{tag} 0 7")
            a.ask("nvtx pop")
            b.ask("nvtx pop")

        t = threading.Thread(target=capture, args=(4000, outer, "outer"))
        t.start()
        self.assertTrue(T.wait_for(lambda: a.state()["kinds"] & C.TRACED == C.TRACED, 10), self.d.log())
        self.assertTrue(T.wait_for(lambda: b.state()["kinds"] & C.TRACED == C.TRACED, 10), self.d.log())
        for _ in range(2):
            lockstep("early")                  # outer steps 1, 2
        c, _ = self.app()                      # the late job
        a.ask("nvtx push train_step")          # begun before the inner window
        ti = threading.Thread(target=capture, args=(1000, inner, "inner"))
        ti.start()
        time.sleep(0.4)
        a.ask("launch 1 a_cut 0 7")
        a.ask("nvtx pop")                      # outer step 3
        for _ in range(2):
            lockstep("inner")                  # outer 4, 5; inner 1, 2
        for _ in range(2):
            c.ask("nvtx push train_step")      # outer 6, 7; inner 3, 4
            c.ask("launch 1 c_inner 0 7")
            c.ask("nvtx pop")
        ti.join()
        lockstep("late")                       # outer 8
        t.join()

        def ids(x):
            got = {}
            for _, _, name, st in kernels(x):
                got.setdefault(name, []).append(st["group_id"].int64_value if "group_id" in st else None)
            return {k: sorted(v, key=lambda g: (g is None, g)) for k, v in got.items()}

        def step_line(x):
            p0 = [p for p in x.planes if p.name.startswith("/device:GPU:")][0]
            line = [l for l in p0.lines if l.id == STEP_INFO][0]
            return [p0.event_metadata[e.metadata_id].name for e in sorted(line.events, key=lambda e: e.offset_ps)]

        xo, xi = outer["x"], inner["x"]
        self.assertEqual(ids(xo), {"a_early": [1, 2], "b_early": [1, 2], "a_cut": [3], "a_inner": [4, 5],
                                   "b_inner": [4, 5], "c_inner": [6, 7], "a_late": [8], "b_late": [8]},
                         list(xo.warnings))
        self.assertEqual(step_line(xo), [str(i) for i in range(1, 9)])
        self.assertEqual(ids(xi), {"a_cut": [None], "a_inner": [1, 2], "b_inner": [1, 2], "c_inner": [3, 4]},
                         list(xi.warnings))
        self.assertEqual(step_line(xi), ["1", "2", "3", "4"])
        # The step ranges: step_num follows; the cut step is no step.
        h = host_plane(xi)
        roots = sorted((stats_of(h, e)["step_num"].int64_value, T.line_pid(l)) for l in h.lines
                       if l.name.endswith("/NVTX") for e in l.events if "step_num" in stats_of(h, e))
        self.assertEqual(roots, sorted([(1, a.pid), (1, b.pid), (2, a.pid), (2, b.pid), (3, c.pid), (4, c.pid)]))
        cut = [stats_of(h, e) for l in h.lines if l.name.endswith(f"(pid {a.pid})/tid {a.main_tid}/NVTX")
               for e in l.events if h.event_metadata[e.metadata_id].name == "train_step"]
        self.assertEqual(len(cut), 2)  # the cut step's range began before the window: not in it
        api = [stats_of(h, e) for l in h.lines if l.name.endswith(f"(pid {a.pid})/tid {a.main_tid}")
               for e in l.events if h.event_metadata[e.metadata_id].name == "cudaLaunchKernel_v7000"]
        self.assertEqual(sorted(st["group_id"].int64_value if "group_id" in st else 0 for st in api),
                         [0, 1, 2])  # the cut step's launch keeps no id
        # Counts per window, as information.
        self.assertIn(f"pid {c.pid} (fake-cuda-app): 2 steps in this window", "\n".join(info_lines(xi)))
        self.assertIn(f"pid {a.pid} (fake-cuda-app): 2 steps in this window", "\n".join(info_lines(xi)))
        self.assertIn(f"pid {a.pid} (fake-cuda-app): 6 steps in this window", "\n".join(info_lines(xo)))
        for app in (a, b, c):
            self.assertEqual(app.finish(), 0)

    def test_step_pattern_flag(self):
        bad = subprocess.run([T.PROFD, "--step-pattern", "a,,b"], capture_output=True, text=True, timeout=10)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("--step-pattern", bad.stderr)
        # A daemon that knows this job's step name.
        self.stubs.close()
        self.assertEqual(self.d.stop(), 0)
        self.d = T.Daemon("--agent-socket", self.sock, "--flush-timeout", "2s", "--step-pattern", "my_iter")
        self.stubs = T.Stubs(self.d.addr)
        self.profile, self.status = self.stubs.profile, self.stubs.status
        a, _ = self.app()

        def work():
            for i in range(2):
                a.ask(f"nvtx push my_iter {i}")
                a.ask("launch 1 k 0 7")
                a.ask("nvtx pop")
                a.ask("nvtx push train_step")  # not a step for this daemon
                a.ask("launch 1 k2 0 7")
                a.ask("nvtx pop")
            a.ask("busy 1500")
        x, _ = self.capture_while(1000, work, a)
        g = {n: sorted(st["group_id"].int64_value for _, _, nn, st in kernels(x) if nn == n and "group_id" in st)
             for n in ("k", "k2")}
        self.assertEqual(g, {"k": [1, 2], "k2": []})
        self.assertEqual(a.finish(), 0)

    def test_xla_modules_give_op_names_and_steps_without_a_flag(self):
        # XLA emits NVTX only when nvtxDomainCreateA("TSL") is non-NULL: without
        # a tool it is NULL ...
        bare = subprocess.Popen([APP], env={k: v for k, v in os.environ.items() if k != "CUDA_INJECTION64_PATH"},
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        out, _ = bare.communicate("nvtx domain TSL\nexit\n", timeout=20)
        self.assertEqual(out.split("\n")[1], "domain 0", out)
        # ... and under the agent it is a handle: XLA's annotations flow.
        a, _ = self.app()
        self.assertEqual(a.ask("nvtx domain TSL"), ["domain", "1"])

        def run(module, op, kernel):
            a.ask(f"nvtx dpush XlaModule:#hlo_module={module},program_id=5#")
            a.ask(f"nvtx dpush Thunk:#hlo_op={op}#")
            a.ask(f"launch 1 {kernel} 0 7")
            a.ask("nvtx dpop")
            a.ask("nvtx dpop")

        def work():
            run("jit_init", "broadcast.1", "init_kernel")
            for _ in range(4):
                run("jit_train_step", "fusion.7", "step_kernel")
            a.ask("busy 1500")
        x, _ = self.capture_while(1000, work, a)
        plane0 = [p for p in x.planes if p.name.startswith("/device:GPU:")][0]
        ks = {}
        for _, _, name, st in kernels(x):
            ks.setdefault(name, []).append(st)
        self.assertEqual(len(ks["step_kernel"]), 4)
        for st in ks["step_kernel"]:
            self.assertEqual(ref(plane0, st["hlo_module"]), "jit_train_step")
            self.assertEqual(st["program_id"].int64_value, 5)
            self.assertEqual(ref(plane0, st["hlo_op_name"]), "fusion.7")
            self.assertEqual(ref(plane0, st["tf_op"]), "fusion.7:fusion")
        # Steps: the executions of the first module run twice; its first run
        # came before it was known to repeat.
        self.assertEqual(sorted(st["group_id"].int64_value for st in ks["step_kernel"] if "group_id" in st),
                         [1, 2, 3])
        self.assertNotIn("group_id", ks["init_kernel"][0])
        h = host_plane(x)
        doms = {ref(h, stats_of(h, e)["nvtx_domain"]) for l in h.lines if l.name.endswith("/NVTX")
                for e in l.events}
        self.assertEqual(doms, {"TSL"})
        mine = [s for s in x.warnings if f"pid {a.pid}" in s]
        info = [s for s in info_lines(x) if f"pid {a.pid}" in s]
        self.assertEqual(len([s for s in info if "3 steps in this window, from the executions of XLA module "
                              "jit_train_step" in s]), 1, info)
        self.assertFalse([s for s in mine if "no op names" in s or "no steps" in s], mine)
        self.assertEqual(a.finish(), 0)

    def test_job_without_nvtx_is_told_how_to_get_op_names_and_steps(self):
        a, _ = self.app()

        def work():
            a.ask("launch 5 plain_kernel 0 7")
            a.ask("busy 1500")
        x, _ = self.capture_while(1000, work, a)
        self.assertEqual(len(kernels(x)), 5)
        mine = [s for s in x.warnings if f"pid {a.pid}" in s]
        ops = [s for s in mine if "no op names" in s]
        steps = [s for s in mine if "no steps found" in s]
        self.assertEqual(len(ops), 1, mine)
        self.assertIn("torch.cuda.nvtx", ops[0])
        self.assertEqual(len(steps), 1, mine)
        self.assertIn("--step-pattern", steps[0])
        self.assertFalse(is_xspace_grouped(x))  # XProf groups (and derives lines) itself
        self.assertEqual(a.finish(), 0)

    def test_ranges_beyond_the_budget_are_counted(self):
        a, _ = self.app()

        def work():
            # Far more push/pop pairs than the agent queues between two drains.
            out = a.ask("nvtx bench 200000")
            a.ask("busy 1500")
            return out
        x, out = self.capture_while(1000, work, a)
        self.assertEqual(out[0], "nvtx-bench")
        notes = [s for s in x.warnings if f"pid {a.pid}" in s and "NVTX:" in s and "dropped" in s]
        self.assertEqual(len(notes), 1, list(x.warnings))
        dropped = int(notes[0].split("NVTX: ")[1].split()[0])
        h = host_plane(x)
        kept = sum(1 for l in h.lines if l.name.endswith("/NVTX") for _ in l.events)
        self.assertGreater(dropped, 0)
        self.assertGreater(kept, 0)
        self.assertLessEqual(kept + dropped, 200000)
        self.assertEqual(a.finish(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
