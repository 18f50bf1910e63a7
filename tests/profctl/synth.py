# SPDX-License-Identifier: MIT
"""Synthetic XSpace files for the profctl tests, built with real protobuf.

build(P) returns (XSpace, facts) where facts holds the numbers the tests
expect (kernel totals, copy bytes, correlation ids on both sides...).
Layout (protocol.md §4):
  Task Environment          profile_start_time / profile_stop_time (10 ms)
  /host:CPU                 two processes' lines with cuLaunchKernel /
                            cudaMemcpy events carrying correlation_id (uint64)
  /device:GPU:0             a stream with kernels (kernel_details as a
                            ref_value), a MemcpyH2D + MemcpyD2H, and a
                            `_counters_` line
  /device:GPU:1             a stream with kernels (kernel_details as str_value
                            on the event metadata)
"""
import os
import shlex
import shutil
import subprocess
import tempfile
import unittest

import testtmp  # noqa: F401  (every temporary directory under one root, removed at exit)

START_NS = 1_790_000_000_000_000_000
WINDOW_NS = 10_000_000  # 10 ms

PROFCTL = os.environ.get("PROFCTL") or os.path.join(
    os.environ.get("PROFD_BUILD", "build"), "tools", "profctl")


# The valgrind test setup sets PROFD_WRAPPER; profctl runs under it too, and
# timing bounds are relaxed by SLOW.
WRAPPER = shlex.split(os.environ.get("PROFD_WRAPPER", ""))
SLOW = 6 if WRAPPER else 1


def run(*args, timeout=60, **kw):
    """Run profctl; returns CompletedProcess with text output."""
    return subprocess.run(WRAPPER + [PROFCTL] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout * SLOW, **kw)


class Plane:
    def __init__(self, plane):
        self.p = plane
        self._ev = {}
        self._st = {}

    def stat_id(self, name):
        if name not in self._st:
            i = len(self._st) + 1
            self._st[name] = i
            m = self.p.stat_metadata[i]
            m.id = i
            m.name = name
        return self._st[name]

    def ev_id(self, name):
        if name not in self._ev:
            i = len(self._ev) + 1
            self._ev[name] = i
            m = self.p.event_metadata[i]
            m.id = i
            m.name = name
        return self._ev[name]

    def stat(self, holder, name, value, kind=None):
        s = holder.stats.add()
        s.metadata_id = self.stat_id(name)
        kind = kind or ("u" if isinstance(value, int) else "d" if isinstance(value, float) else "s")
        if kind == "u":
            s.uint64_value = value
        elif kind == "i":
            s.int64_value = value
        elif kind == "d":
            s.double_value = value
        elif kind == "ref":
            s.ref_value = self.stat_id(value)
        else:
            s.str_value = value
        return s

    def event(self, line, name, offset_ns, dur_ns, **stats):
        e = line.events.add()
        e.metadata_id = self.ev_id(name)
        e.offset_ps = offset_ns * 1000
        e.duration_ps = dur_ns * 1000
        for k, v in stats.items():
            if isinstance(v, tuple):
                self.stat(e, k, v[1], v[0])
            else:
                self.stat(e, k, v)
        return e


def kdetails(grid, block, occ):
    return (f"regs:32 static_shared:0 dynamic_shared:0 grid:{grid} block:{block} "
            f"occ_pct:{occ}")


def space(P, hostname):
    """An XSpace of @hostname with the Task Environment plane (a WINDOW_NS
    window from START_NS) and an empty /host:CPU plane (a Plane)."""
    sp = P.xp.XSpace()
    sp.hostnames.append(hostname)
    env = Plane(sp.planes.add())
    env.p.name = "Task Environment"
    env.stat(env.p, "profile_start_time", START_NS)
    env.stat(env.p, "profile_stop_time", START_NS + WINDOW_NS)
    host = Plane(sp.planes.add())
    host.p.name = "/host:CPU"
    return sp, host


def build(P):
    sp, host = space(P, "synthhost")
    facts = {"kernels": {}, "copies": {}, "host_corr": set(), "dev_corr": set(), "counters": 0,
             "procs": {}}

    host.p.id = 1
    l1 = host.p.lines.add()
    l1.id = 1234
    l1.name = "trainer (1234)/main"
    l1.timestamp_ns = 1000  # 1 us after session start
    l2 = host.p.lines.add()
    l2.id = 5678
    l2.name = "loader (5678)/io"
    l2.timestamp_ns = 0

    gpu0 = Plane(sp.planes.add())
    gpu0.p.name = "/device:GPU:0"
    gpu0.p.id = 0
    s7 = gpu0.p.lines.add()
    s7.id = 7
    s7.name = "Stream #7(Compute,MemcpyH2D,MemcpyD2H)"
    s7.timestamp_ns = 0
    ctr = gpu0.p.lines.add()
    ctr.id = 2**63 - 1
    ctr.name = "_counters_"

    gpu1 = Plane(sp.planes.add())
    gpu1.p.name = "/device:GPU:1"
    gpu1.p.id = 1
    s9 = gpu1.p.lines.add()
    s9.id = 9
    s9.name = "Stream #9(Compute)"
    s9.timestamp_ns = 500

    def kernel(facts_name, plane, line, off, dur, corr, grid, block, occ, ref=True):
        if ref:
            e = plane.event(line, facts_name, off, dur, correlation_id=corr)
            plane.stat(e, "kernel_details", kdetails(grid, block, occ), "ref")
        else:
            # details on the metadata, as XProf also accepts
            eid = plane.ev_id(facts_name)
            md = plane.p.event_metadata[eid]
            if not md.stats:
                plane.stat(md, "kernel_details", kdetails(grid, block, occ))
            e = plane.event(line, facts_name, off, dur, correlation_id=corr)
        k = facts["kernels"].setdefault(facts_name, {"count": 0, "total": 0, "min": None, "max": 0,
                                                     "occ": [], "grid": grid, "block": block})
        k["count"] += 1
        k["total"] += dur
        k["min"] = dur if k["min"] is None else min(k["min"], dur)
        k["max"] = max(k["max"], dur)
        k["occ"].append(occ)
        facts["dev_corr"].add(corr)
        return e

    corr = 100
    # trainer launches 4 gemm + 2 relu on GPU 0, and 3 gemm on GPU 1
    t = 0
    launches = []
    for i in range(4):
        launches.append(("gemm_kernel", 0, corr))
        corr += 1
    for i in range(2):
        launches.append(("relu_kernel", 0, corr))
        corr += 1
    for i in range(3):
        launches.append(("gemm_kernel", 1, corr))
        corr += 1
    for name, g, c in launches:
        host.event(l1, "cuLaunchKernel", t, 2000, correlation_id=c, device_id=g)
        facts["host_corr"].add(c)
        t += 3000
    # the loader process does two copies (with correlation ids) and one plain event
    host.event(l2, "cuMemcpyHtoDAsync_v2", 100, 1500, correlation_id=500)
    host.event(l2, "cuMemcpyDtoHAsync_v2", 5000, 1500, correlation_id=501)
    host.event(l2, "read_batch", 9000, 700)
    facts["host_corr"].update([500, 501])
    # a launch whose kernel was not captured: no flow for it
    host.event(l1, "cuLaunchKernel", 40000, 1000, correlation_id=999)
    facts["host_corr"].add(999)

    # GPU 0: gemm 4 x (1000, 2000, 3000, 4000) ns; relu 2 x 500 ns; overlapping pair
    gemm0 = [(10000, 1000), (12000, 2000), (15000, 3000), (19000, 4000)]
    for (off, dur), (_, _, c) in zip(gemm0, launches[0:4]):
        kernel("gemm_kernel", gpu0, s7, off, dur, c, "128,1,1", "256,1,1", 50)
    # relu overlaps the last gemm by 500 ns on a second stream would be realistic; keep one
    # stream but make one relu start inside the previous gemm to test the union
    relu = [(22500, 1000), (30000, 500)]
    for (off, dur), (_, _, c) in zip(relu, launches[4:6]):
        kernel("relu_kernel", gpu0, s7, off, dur, c, "64,1,1", "128,1,1", 100)
    # busy GPU0 = 1000+2000+3000+ [19000,23500) + 500 = 1000+2000+3000+4500+500
    facts["busy0_ns"] = 1000 + 2000 + 3000 + 4500 + 500
    # copies on GPU 0
    mc = "kind_src:pageable kind_dst:device size:1048576 dest:0 async:1"
    gpu0.event(s7, "MemcpyH2D", 1000, 2000, correlation_id=500, memcpy_details=mc)
    mc2 = "kind_src:device kind_dst:pinned size:524288 dest:0 async:1"
    gpu0.event(s7, "MemcpyD2H", 40000, 1000, correlation_id=501, memcpy_details=mc2)
    facts["dev_corr"].update([500, 501])
    facts["copies"] = {"H2D": (1, 1048576, 2000), "D2H": (1, 524288, 1000)}
    # counters
    for i, v in enumerate([1410.0, 1395.5, 1980.25]):
        gpu0.event(ctr, "sm_clock_mhz", i * 1000, 0, sm_clock_mhz=v)
        facts["counters"] += 1

    # GPU 1: gemm 3 x 6000 ns, details on the metadata (str_value)
    for i, (_, _, c) in enumerate(launches[6:9]):
        kernel("gemm_kernel", gpu1, s9, 40000 + i * 7000, 6000, c, "128,1,1", "256,1,1", 50, ref=False)
    facts["busy1_ns"] = 3 * 6000
    # a device event correlated to nothing on the host
    gpu1.event(s9, "orphan_kernel_no_details", 70000, 100, correlation_id=7777)
    facts["dev_corr"].add(7777)

    facts["procs"] = {
        "trainer (1234)": {"host_events": 10, "launches": 10, "kernels": 9,
                           "kernel_ns": 1000 + 2000 + 3000 + 4000 + 1000 + 500 + 3 * 6000},
        "loader (5678)": {"host_events": 3, "launches": 2, "kernels": 0, "kernel_ns": 0},
    }
    return sp, facts


def write(P, path, builder=build):
    sp, facts = builder(P)
    with open(path, "wb") as f:
        f.write(sp.SerializeToString())
    return sp, facts


class SynthCase(unittest.TestCase):
    """cls.xpb: the synthetic XSpace written to a temporary directory
    (cls.tmp, removed after the class); cls.space and cls.facts from
    cls.builder (build())."""
    builder = staticmethod(build)

    @classmethod
    def setUpClass(cls):
        import profdtest as T

        cls.tmp = tempfile.mkdtemp(prefix="profctl-synth-")
        cls.xpb = os.path.join(cls.tmp, "synth.xplane.pb")
        cls.space, cls.facts = write(T.protos(), cls.xpb, cls.builder)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)


# ---- Python stacks (xspace/names.h "Python stacks") -------------------------

NO_PYTHON = "(thread without Python)"
DROPPED = "(Python stack unavailable)"
FWD = ["train.py:120 <module>", "train.py:88 train", "model.py:40 forward"]
BWD = ["train.py:120 <module>", "train.py:91 train", "autograd.py:200 backward"]
LOAD = ["loader.py:30 <module>", "loader.py:12 prefetch"]
WORK = ["worker.py:3 run", "worker.py:9 step"]


def build_py(P):
    """An XSpace whose device events carry python_stack/python_frame and
    whose host thread lines carry frame spans, as profd writes them.
    facts["folded"]: {"frame;...;leaf": ns} of the GPU graph (all events);
    facts["by_pid"] / ["by_device"]: the same for --pid 1234 / --device 1;
    facts["cpu"]: {"frame;...": self ns} of --cpu; facts["sites"]: the
    launch sites of the kernels (python_frame) -> (GPU ns, kernel count)."""
    sp, host = space(P, "pyhost")
    main = host.p.lines.add()
    main.id, main.name, main.timestamp_ns = 1234, "trainer (pid 1234)/tid 1234", 0
    aux = host.p.lines.add()
    aux.id, aux.name, aux.timestamp_ns = 1240, "trainer (pid 1234)/tid 1240", 0
    load = host.p.lines.add()
    load.id, load.name, load.timestamp_ns = 5678, "loader (pid 5678)/tid 5678", 0
    work = host.p.lines.add()
    work.id, work.name, work.timestamp_ns = 1250, "trainer (pid 1234)/tid 1250", 0
    gpus = []
    for g in range(2):
        pl = Plane(sp.planes.add())
        pl.p.name = f"/device:GPU:{g}"
        pl.p.id = g
        ln = pl.p.lines.add()
        ln.id, ln.name, ln.timestamp_ns = 7, "Stream #7(Compute)", 0
        gpus.append((pl, ln))

    facts = {"folded": {}, "by_pid": {}, "by_device": {}, "cpu": {}, "sites": {}}
    corr = [1000]
    t = {"main": 1000, "aux": 1000, "load": 1000, "work": 1000}

    def launch(line_key, pid, gpu, stack, frame, name, dur, what="kernel", ref=False):
        line = {"main": main, "aux": aux, "load": load, "work": work}[line_key]
        c = corr[0]
        corr[0] += 1
        hs = {"correlation_id": c}
        if stack is not None:
            hs["python_stack"] = ";".join(stack)
        if frame is not None:
            hs["python_frame"] = frame
        host.event(line, "cuLaunchKernel" if what == "kernel" else "cuMemcpyAsync", t[line_key], 500, **hs)
        t[line_key] += 1000
        pl, ln = gpus[gpu]
        e = pl.event(ln, name, 100 + c * 10, dur, correlation_id=c)
        if what == "kernel":
            pl.stat(e, "kernel_details", kdetails("1,1,1", "32,1,1", 50), "ref")
        elif what == "memcpy":
            pl.stat(e, "memcpy_details", "kind_src:pageable kind_dst:device size:4096", "s")
        elif what == "memset":
            pl.stat(e, "Memset_details", "size:4096", "s")
        if stack is not None:
            pl.stat(e, "python_stack", ";".join(stack), "ref" if ref else "s")
        if frame is not None:
            pl.stat(e, "python_frame", frame)
        if what == "other":
            return  # not a kernel, copy or memset: not weighed
        root = stack if stack else [frame] if frame else ["[no Python stack]"]
        key = ";".join(root + [name])
        for k, keep in (("folded", True), ("by_pid", pid == 1234), ("by_device", gpu == 1)):
            if keep:
                facts[k][key] = facts[k].get(key, 0) + dur
        if what == "kernel":  # profctl top's launch sites: kernels by python_frame
            site = frame if frame is not None else "[no Python stack]"
            ns, n = facts["sites"].get(site, (0, 0))
            facts["sites"][site] = (ns + dur, n + 1)

    for i in range(3):
        launch("main", 1234, 0, FWD, FWD[-1], "gemm_kernel", 4000 + i * 1000, ref=True)
    launch("main", 1234, 1, FWD, FWD[-1], "gemm_kernel", 2000, ref=True)
    launch("main", 1234, 0, FWD, FWD[-1], "relu_kernel", 700)
    for i in range(2):
        launch("main", 1234, 0, BWD, BWD[-1], "gemm_kernel_bwd", 3000)
    launch("main", 1234, 1, BWD, BWD[-1], "MemcpyD2D", 1500, what="memcpy")
    launch("aux", 1234, 1, None, NO_PYTHON, "nccl_allreduce", 2500)
    launch("aux", 1234, 0, None, DROPPED, "relu_kernel", 300)
    launch("load", 5678, 0, LOAD, LOAD[-1], "MemcpyH2D", 1200, what="memcpy")
    launch("load", 5678, 1, LOAD, LOAD[-1], "Memset", 400, what="memset")
    launch("load", 5678, 1, None, None, "legacy_kernel", 900)
    launch("load", 5678, 1, LOAD, LOAD[-1], "not_an_op", 5000, what="other")
    launch("work", 1234, 0, WORK, WORK[-1], "gemm_kernel", 800)

    # Frame spans on the main thread's line, around its API events (at 1000,
    # 2000, ... 8000, 500 ns each; forward's first, then backward's):
    # <module> [0, 20000) > train [500, 19000) > forward [900, 5900)
    #                                          > backward [5950, 18000)
    # and on the loader's line: <module> [0, 15000) > prefetch [800, 13800).
    def span(line, fn, first, func, s, e, cur):
        host.event(line, f"${fn}:{first} {func}", s, e - s, python_file="/src/" + fn, python_line=cur)

    span(main, "train.py", 1, "<module>", 0, 20000, 120)
    span(main, "train.py", 80, "train", 500, 19000, 91)
    span(main, "model.py", 35, "forward", 900, 5900, 40)
    span(main, "autograd.py", 190, "backward", 5950, 18000, 200)
    span(load, "loader.py", 1, "<module>", 0, 15000, 30)
    span(load, "loader.py", 10, "prefetch", 800, 13800, 12)
    # The worker's spans are exactly as long as the one API event they hold
    # (a stack seen at one launch only), and come after it on the line.
    span(work, "worker.py", 1, "run", 1000, 1500, 3)
    span(work, "worker.py", 8, "step", 1000, 1500, 9)
    # a '$' event without python_file is not a frame span
    host.event(main, "$not_a_frame", 100, 50)
    facts["cpu"] = {
        "train.py:1 <module>": 20000 - 18500,
        "train.py:1 <module>;train.py:80 train": 18500 - 5000 - 12050,
        "train.py:1 <module>;train.py:80 train;model.py:35 forward": 5000,
        "train.py:1 <module>;train.py:80 train;autograd.py:190 backward": 12050,
        "loader.py:1 <module>": 15000 - 13000,
        "loader.py:1 <module>;loader.py:10 prefetch": 13000,
        "worker.py:1 run;worker.py:8 step": 500,  # run's self time is 0: no line
    }
    facts["cpu_by_pid"] = {k: v for k, v in facts["cpu"].items() if k.startswith("loader")}  # --pid 5678
    return sp, facts


def write_py(P, path):
    return write(P, path, build_py)


def flame_nodes(stacks):
    """Every node ("a;b" for b under a) of the tree that folded @stacks make."""
    nodes = set()
    for stack in stacks:
        parts = stack.split(";")
        nodes.update(";".join(parts[:i + 1]) for i in range(len(parts)))
    return nodes


class PyCase(SynthCase):
    """SynthCase with build_py()'s XSpace (Python stacks)."""
    builder = staticmethod(build_py)
