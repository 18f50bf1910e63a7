# SPDX-License-Identifier: MIT
"""The real libprofd-agent.so, end to end, on a fake CUPTI (no GPU needed).

tests/agent/fakecuda/ holds a libcupti.so.13 and libcuda.so.1 that follow
CUPTI's rules, and a fake CUDA program that loads the agent the way the
driver does (InitializeInjection) and makes CUDA calls through the fake
CUPTI. So the agent's own code runs unmodified: idle with no subscription,
START -> subscribe + enable, buffers -> converted records -> profd's XSpace,
STOP -> disable, flush, and the detach (finalize from an API-exit callback
on the job's thread, or unsubscribe without finalize when the job is idle).
"""
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import profdtest as T

P = T.protos()
APP = os.environ.get("FAKE_CUDA_APP", os.path.join(T.BUILD, "tests", "agent", "fakecuda", "fake-cuda-app"))
AGENT = os.environ.get("PROFD_AGENT_SO", "")
FAKE_CUPTI = os.path.join(os.path.dirname(APP), "libcupti.so.13")
UUIDS = ["GPU-00112233-4455-6677-8899-aabbccddee00", "GPU-00112233-4455-6677-8899-aabbccddee01"]
VECADD = "vecAdd(float const*, float const*, float*, int)"
# CUPTI activity kinds the checks need on: MEMCPY, DRIVER, RUNTIME, CONCURRENT_KERNEL
TRACED = 1 << 1 | 1 << 4 | 1 << 5 | 1 << 10


class App:
    """The fake CUDA job: one command line in, one answer line out."""

    def __init__(self, sock, **env):
        e = dict(os.environ, CUDA_INJECTION64_PATH=AGENT, PROFD_AGENT_SOCKET=sock, **env)
        self.proc = subprocess.Popen([APP], env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        first = self.proc.stdout.readline().split()
        if not first:
            raise AssertionError("fake-cuda-app did not start: " + self.proc.stderr.read())
        self.pid, self.main_tid = int(first[1]), int(first[2])

    def ask(self, cmd):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().split()

    def state(self):
        return {k: int(v) for k, v in (w.split("=") for w in self.ask("state"))}

    def framework(self, what):
        return self.ask("framework " + what)

    def finish(self, cmd="exit", timeout=10):
        try:
            if self.proc.poll() is None:
                self.proc.stdin.write(cmd + "\n")
                self.proc.stdin.flush()
            return self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                f.close()


def kernels(x):
    """(plane, line name, event name, stats) of every kernel on GPU planes."""
    return [(p.name, line.name, name, st) for p, line, name, st in T.plane_events(x, "/device:GPU:")
            if "kernel_details" in st]


def warnings_of(x, pid):
    return [w for w in x.warnings if f"pid {pid}" in w]


def host_correlations(x):
    out = {}
    for p in x.planes:
        if p.name != "/host:CPU":
            continue
        for line in p.lines:
            for e in line.events:
                for s in e.stats:
                    if p.stat_metadata[s.metadata_id].name == "correlation_id":
                        out[s.uint64_value] = p.event_metadata[e.metadata_id].name
    return out


@unittest.skipUnless(AGENT and os.path.exists(APP), "libprofd-agent.so or the fake CUDA app not built")
class AgentOnFakeCupti(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="profd-cupti-")
        self.sock = os.path.join(self.tmp, "agent.sock")
        self.d = T.Daemon("--agent-socket", self.sock, "--flush-timeout", "2s")
        self.stubs = T.Stubs(self.d.addr)
        self.profile, self.status = self.stubs.profile, self.stubs.status
        self.apps = []

    def tearDown(self):
        for a in self.apps:
            a.finish()
        self.stubs.close()
        rc = self.d.stop()
        self.assertEqual(rc, 0, self.d.log())

    def app(self, **env):
        """Start a fake CUDA job; return it and its Status entry once profd
        has its HELLO and every DEVICE frame."""
        a = App(self.sock, **env)
        self.apps.append(a)
        want = len(env["CUDA_VISIBLE_DEVICES"].split(",")) if "CUDA_VISIBLE_DEVICES" in env else 2
        deadline = time.time() + 15
        while time.time() < deadline:
            agents = {g.pid: g for g in self.status(P.profd.StatusRequest(), timeout=10).agents}
            if a.pid in agents and len(agents[a.pid].devices) == want:
                return a, agents[a.pid]
            time.sleep(0.05)
        raise AssertionError(f"agent of pid {a.pid} never registered:\n{self.d.log()}")

    def capture_while(self, ms, work, app=None, lead=0.6):
        """Capture @ms and run work() inside it: once @app's agent has
        switched on the activity kinds (START arrived, tracing is on), else
        @lead s in."""
        out = {}

        def run():
            r = self.profile(T.profile_request(P, ms, f"localhost:{self.d.port}"), timeout=60)
            out["x"] = T.decode_xspace(P, r.tool_data[0].data)

        t = threading.Thread(target=run)
        t.start()
        if app is None:
            time.sleep(lead)
        elif not T.wait_for(lambda: app.state()["kinds"] & TRACED == TRACED, 10):
            raise AssertionError("the agent did not start tracing:\n" + self.d.log())
        result = work()
        t.join()
        return out["x"], result

    def test_idle_costs_nothing_and_a_capture_is_complete(self):
        a, info = self.app()
        self.assertEqual(sorted(dv.uuid for dv in info.devices), UUIDS)
        # Idle: connected, but CUPTI untouched.
        st = a.state()
        self.assertEqual((st["subscribed"], st["kinds"], st["domains"], st["subscribes"]), (0, 0, 0, 0), st)

        def work():
            during = a.state()
            launched = [a.ask("launch 50 _Z6vecAddPKfS0_Pfi 0 7"), a.ask("launch 30 _Z4gemmPfS_i 1 3"),
                        a.ask("memcpy 4 0 1048576")]
            a.ask("busy 2200")  # the job keeps calling CUDA past the end of the capture
            return during, launched

        x, (during, launched) = self.capture_while(1500, work, a)
        self.assertEqual(during["subscribed"], 1, during)
        self.assertNotEqual(during["kinds"], 0, during)
        ks = kernels(x)
        names = [k[2] for k in ks]
        self.assertEqual(names.count(VECADD), 50, sorted(set(names)))  # demangled by the agent
        self.assertEqual(names.count("gemm(float*, float*, int)"), 30)
        self.assertEqual(len(ks), 80)
        # Each GPU's kernels on its own plane (numbered by UUID), stream lines named per stream.
        by_plane = {}
        for plane, line, name, _ in ks:
            by_plane.setdefault(plane, set()).add((line, name))
        self.assertEqual(len(by_plane), 2, by_plane)
        self.assertTrue(any(("Stream #7(Compute)", VECADD) in v for v in by_plane.values()), by_plane)
        # Every kernel links to its launch on /host:CPU (XProf's flow arrows).
        host = host_correlations(x)
        corr = [k[3]["correlation_id"].uint64_value for k in ks]
        self.assertEqual([host.get(c) for c in corr], ["cudaLaunchKernel_v7000"] * 80)
        self.assertTrue(all(c >> 32 == a.pid for c in corr))
        kd = ks[0][3]["kernel_details"]
        self.assertTrue(kd.ref_value or kd.str_value)
        copies = [e for p in x.planes if p.name.startswith("/device:GPU:") for l in p.lines
                  for e in l.events if p.event_metadata[e.metadata_id].name == "MemcpyH2D"]
        self.assertEqual(len(copies), 4)
        # No NVTX in this job: only the op-name and step hints (test_agent_nvtx).
        self.assertEqual([w for w in x.warnings if "pid" in w and str(a.pid) in w and "no op names" not in w
                          and "no steps found" not in w], [], list(x.warnings))
        # Versions as the in-process tracer reports them; the runtime was loaded RTLD_LOCAL.
        meta = [p for p in x.planes if p.name == "/host:metadata"]
        self.assertEqual(len(meta), 1)
        mstats = {meta[0].stat_metadata[s.metadata_id].name: s.str_value for s in meta[0].stats}
        self.assertEqual((mstats.get("cuda_driver_version"), mstats.get("cuda_runtime_version")),
                         ("13.0", "13.0"), mstats)
        # After the capture nothing lingers: finalized from an API-exit callback on
        # the job's own thread, kinds off, no subscriber.
        st = a.state()
        self.assertEqual((st["subscribed"], st["kinds"], st["domains"]), (0, 0, 0), st)
        self.assertEqual(st["finalizes"], 1, st)
        self.assertEqual(st["finalize_tid"], a.main_tid, st)
        self.assertEqual(st["finalized_while_subscribed"], 0, st)
        self.assertEqual(st["declined"], 0, st)
        self.assertEqual(a.finish(), 0)

    def test_idle_job_detaches_without_finalize_then_captures_again(self):
        a, _ = self.app()
        # The job makes no CUDA call after the capture: the agent cannot finalize
        # (only safe inside an API callback) and unsubscribes by itself within 2 s.
        x, _ = self.capture_while(1000, lambda: a.ask("launch 5 _Z6vecAddPKfS0_Pfi 0 7"), a)
        self.assertEqual(len(kernels(x)), 5)
        deadline = time.time() + 5
        while time.time() < deadline and a.state()["subscribed"]:
            time.sleep(0.1)
        st = a.state()
        self.assertEqual((st["subscribed"], st["finalizes"], st["unsubscribes"]), (0, 0, 1), st)
        # Said plainly, in the log now and in the next capture.
        self.assertTrue(T.wait_for(lambda: "not finalized" in self.d.log(), 5), self.d.log())

        def work():
            a.ask("launch 7 _Z6vecAddPKfS0_Pfi 1 9")
            a.ask("busy 1700")
        x2, _ = self.capture_while(1000, work, a)
        self.assertEqual(len(kernels(x2)), 7)
        self.assertTrue([w for w in x2.warnings if "not finalized" in w], list(x2.warnings))
        st = a.state()
        self.assertEqual((st["subscribes"], st["finalizes"], st["subscribed"]), (2, 1, 0), st)

    def test_no_finalize_while_the_job_exits(self):
        # A job that exits right after a capture, before its next CUDA call,
        # reaches the armed detach from libcudart's exit teardown: the agent
        # finalized CUPTI there, while CUDA was being torn down (first
        # suspected for an abort at exit on an H200, which PM sampling's
        # disable turned out to cause: test_agent_pm). After the agent's
        # exit hook it makes no CUPTI call.
        a, _ = self.app()
        x, _ = self.capture_while(600, lambda: a.ask("launch 3 _Z6vecAddPKfS0_Pfi 0 7"), a)
        self.assertEqual(len(kernels(x)), 3)
        self.assertEqual(a.state()["finalizes"], 0)  # armed, waiting for an API call
        a.proc.stdin.write("exit teardown\n")
        a.proc.stdin.flush()
        line = a.proc.stdout.readline().split()
        self.assertEqual(line[:1], ["teardown"], line)
        st = {k: int(v) for k, v in (w.split("=") for w in line[1:])}
        self.assertEqual((st["finalizes"], st["calls_after_finalize"]), (0, 0), st)
        self.assertEqual(a.finish(), 0)

    def test_agent_threads_leave_faults_deliverable(self):
        """The agent thread blocks the application's asynchronous signals
        but not faults: a blocked SIGSEGV raised by a fault kills the job
        without its crash handler, and an H200 job died so in silence
        (its backtrace hook never ran). SigBlk of /proc's task status."""
        a, _ = self.app()
        blocked = {}
        for tid in os.listdir(f"/proc/{a.pid}/task"):
            with open(f"/proc/{a.pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{a.pid}/task/{tid}/status") as f:
                blk = [int(l.split()[1], 16) for l in f if l.startswith("SigBlk:")][0]
            blocked[name] = blk
        self.assertIn("profd-agent", blocked, blocked)
        mask = blocked["profd-agent"]
        bit = lambda sig: 1 << (sig - 1)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGUSR1):
            self.assertTrue(mask & bit(sig), f"{sig.name} not blocked: {mask:#x}")
        for sig in (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT):
            self.assertFalse(mask & bit(sig), f"{sig.name} blocked: {mask:#x}")

    def test_ranks_land_on_their_physical_gpu(self):
        # Two ranks, each pinned to one GPU that it calls "device 0".
        r0, i0 = self.app(CUDA_VISIBLE_DEVICES="0")
        r1, i1 = self.app(CUDA_VISIBLE_DEVICES="1")
        self.assertEqual([(d.local_ordinal, d.uuid) for d in i0.devices], [(0, UUIDS[0])])
        self.assertEqual([(d.local_ordinal, d.uuid) for d in i1.devices], [(0, UUIDS[1])])
        self.assertNotEqual(i0.devices[0].plane_id, i1.devices[0].plane_id)

        def work():
            self.assertTrue(T.wait_for(lambda: r1.state()["kinds"] & TRACED == TRACED, 10))
            r0.ask("launch 11 _Z6vecAddPKfS0_Pfi 0 7")
            r1.ask("launch 13 _Z6vecAddPKfS0_Pfi 0 7")
        x, _ = self.capture_while(1000, work, r0)
        per_plane = {}
        for plane, line, _, st in kernels(x):
            per_plane.setdefault(plane, set()).add(st["correlation_id"].uint64_value >> 32)
            per_plane[plane + " n"] = per_plane.get(plane + " n", 0) + 1
        p0, p1 = f"/device:GPU:{i0.devices[0].plane_id}", f"/device:GPU:{i1.devices[0].plane_id}"
        self.assertEqual((per_plane[p0], per_plane[p0 + " n"]), ({r0.pid}, 11), per_plane)
        self.assertEqual((per_plane[p1], per_plane[p1 + " n"]), ({r1.pid}, 13), per_plane)

    def test_cupti_refusals_are_explained(self):
        busy, _ = self.app(FAKE_CUPTI_SUBSCRIBE="busy")
        priv, _ = self.app(FAKE_CUPTI_SUBSCRIBE="privileges")
        x, _ = self.capture_while(1000, lambda: (busy.ask("launch 3 k 0 1"), priv.ask("launch 3 k 0 1")))
        w = list(x.warnings)
        self.assertTrue([s for s in w if f"pid {busy.pid}" in s and "another profiler already subscribed"
                         in s and "Nsight Systems" in s], w)
        self.assertTrue([s for s in w if f"pid {priv.pid}" in s and "insufficient privileges" in s
                         and "NVreg_RestrictProfilingToAdminUsers=0" in s], w)
        self.assertEqual(kernels(x), [])
        for a in (busy, priv):
            st = a.state()
            self.assertEqual((st["subscribed"], st["kinds"]), (0, 0), st)

    def test_records_cupti_dropped_are_reported(self):
        a, _ = self.app(FAKE_CUPTI_DROPPED="123")

        def work():
            a.ask("launch 6 _Z6vecAddPKfS0_Pfi 0 7")
            a.ask("busy 1300")
        x, _ = self.capture_while(1000, work, a)
        self.assertEqual(len(kernels(x)), 6)
        self.assertIn(f"GPU events dropped in pid {a.pid} (fake-cuda-app): 0 CUPTI buffers, 123 records",
                      list(x.warnings))

    def test_cupti_fatal_error_mid_capture(self):
        a, _ = self.app()

        def work():
            a.ask("launch 4 _Z6vecAddPKfS0_Pfi 0 7")
            a.ask("fatal")
            a.ask("busy 1200")  # the job goes on; CUPTI is gone
        x, _ = self.capture_while(1000, work, a)
        self.assertTrue([w for w in x.warnings if f"pid {a.pid}" in w and "disconnected" in w],
                        list(x.warnings))
        st = a.state()
        self.assertEqual(st["calls_after_fatal"], 0, st)
        self.assertIsNone(a.proc.poll())

    def test_job_exiting_mid_capture_keeps_its_data(self):
        a, _ = self.app()

        def work():
            a.ask("launch 20 _Z6vecAddPKfS0_Pfi 0 7")
            t0 = time.monotonic()
            rc = a.finish("exit")
            return rc, time.monotonic() - t0

        x, (rc, took) = self.capture_while(1500, work, a)
        self.assertEqual(rc, 0)
        self.assertLess(took, 1.0)  # the exit hook waits at most 200 ms for the flush
        self.assertEqual(len(kernels(x)), 20)
        self.assertTrue([w for w in x.warnings if f"pid {a.pid}" in w and "disconnected during the capture"
                         in w], list(x.warnings))

    def test_profd_killed_mid_capture_then_back(self):
        a, _ = self.app()

        def work():
            a.ask("launch 5 _Z6vecAddPKfS0_Pfi 0 7")
            time.sleep(0.3)
            self.d.stop(signal.SIGKILL)  # profd dies with the capture open
            a.ask("busy 500")  # the job goes on calling CUDA
            return a.state()

        out = {}

        def run():
            try:
                self.profile(T.profile_request(P, 3000, f"localhost:{self.d.port}"), timeout=30)
            except Exception as e:  # noqa: BLE001 - the daemon is gone
                out["err"] = e

        t = threading.Thread(target=run)
        t.start()
        time.sleep(0.6)
        st = work()
        t.join()
        self.assertIn("err", out)
        # Never traced unobserved: stopped and detached (finalized on the job's thread).
        self.assertEqual((st["subscribed"], st["kinds"], st["finalizes"]), (0, 0, 1), st)
        self.assertEqual(st["finalize_tid"], a.main_tid, st)
        # A new profd on the same socket: the agent comes back and captures again.
        self.stubs.close()
        self.d = T.Daemon("--agent-socket", self.sock, "--flush-timeout", "2s")
        self.stubs = T.Stubs(self.d.addr)
        self.profile, self.status = self.stubs.profile, self.stubs.status
        self.assertTrue(T.wait_for(lambda: a.pid in [g.pid for g in self.status(
            P.profd.StatusRequest(), timeout=10).agents], 15), self.d.log())

        def again():
            a.ask("launch 9 _Z6vecAddPKfS0_Pfi 1 7")
            a.ask("busy 1700")
        x, _ = self.capture_while(1000, again, a)
        self.assertEqual(len(kernels(x)), 9, (list(x.warnings), self.d.log()))

    def test_forked_child_leaves_cupti_alone(self):
        a, _ = self.app()

        def work():
            a.ask("launch 3 _Z6vecAddPKfS0_Pfi 0 7")
            child = a.ask("fork")  # forked while the capture is live
            a.ask("launch 4 _Z6vecAddPKfS0_Pfi 0 7")
            return child

        x, child = self.capture_while(1000, work, a)
        self.assertEqual(child, ["child", "0"])
        self.assertEqual(len(kernels(x)), 7)
        # Forked while the agent waits for an API call to detach from: the
        # child's calls must not run the parent's cuptiFinalize.
        time.sleep(0.3)
        self.assertEqual(a.ask("fork"), ["child", "0"])
        a.ask("busy 300")
        st = a.state()
        self.assertEqual((st["subscribed"], st["finalizes"], st["finalize_tid"]), (0, 1, a.main_tid), st)
        self.assertEqual(len(self.status(P.profd.StatusRequest(), timeout=10).agents), 1)

    # ---- issue: the agent against real CUPTI semantics ------------------------

    def test_detach_waits_for_its_own_enable_calls(self):
        # Every Enable of the DRIVER/RUNTIME domain runs an API call on another
        # thread before it returns: a detach armed before the enables would
        # finalize in the middle of them and the agent's next Enable would
        # start CUPTI again.
        a, _ = self.app(FAKE_CUPTI_STRESS="1")

        def work():
            a.ask("launch 6 _Z6vecAddPKfS0_Pfi 0 7")
            a.ask("busy 2200")
        x, _ = self.capture_while(1000, work, a)
        self.assertEqual(len(kernels(x)), 6)
        st = a.state()
        self.assertEqual((st["finalize_while_enabling"], st["calls_after_finalize"]), (0, 0), st)
        self.assertEqual((st["finalizes"], st["finalize_tid"], st["subscribed"]), (1, a.main_tid, 0), st)
        x2, _ = self.capture_while(800, lambda: (a.ask("launch 3 _Z6vecAddPKfS0_Pfi 0 7"), a.ask("busy 1700")), a)
        self.assertEqual(len(kernels(x2)), 3)
        self.assertEqual(a.state()["calls_after_finalize"], 0)

    def test_foreign_buffers_are_left_alone(self):
        # PyTorch's profiler (Kineto's pattern) took the Activity API first:
        # its buffer, still held by CUPTI, completes into the agent's callback.
        a, _ = self.app(FAKE_APP_CUPTI=FAKE_CUPTI)
        self.assertEqual(a.framework("start"), ["framework", "started"])
        a.ask("launch 5 _Z4gemmPfS_i 0 3")  # the framework's records

        def work():
            a.ask("launch 10 _Z6vecAddPKfS0_Pfi 0 7")
            a.ask("busy 1700")
        x, _ = self.capture_while(1000, work, a)
        names = [k[2] for k in kernels(x)]
        self.assertEqual(names.count(VECADD), 10, names)
        self.assertEqual(len(names), 10, "the framework's kernels were read as profd's")
        w = warnings_of(x, a.pid)
        self.assertTrue([m for m in w if "another profiler in this process" in m], list(x.warnings))
        self.assertTrue([m for m in w if "belonged to another profiler" in m], list(x.warnings))
        self.assertEqual(a.state()["reissued"], 0)

    def test_framework_taking_over_mid_capture_is_reported(self):
        a, _ = self.app(FAKE_APP_CUPTI=FAKE_CUPTI)

        def work():
            # Long kernels keep profd's buffer in CUPTI's hands while the
            # framework registers its own callbacks over profd's.
            a.ask("launch 5 _Z6vecAddPKfS0_Pfi 0 7 200000000")
            self.assertEqual(a.framework("start"), ["framework", "started"])
            a.ask("launch 5 _Z6vecAddPKfS0_Pfi 0 7")
            a.ask("busy 2300")
        x, _ = self.capture_while(1000, work, a)
        self.assertLessEqual(len(kernels(x)), 10)
        x2, _ = self.capture_while(500, lambda: a.ask("busy 600"), a)
        w = warnings_of(x, a.pid) + warnings_of(x2, a.pid)
        self.assertTrue([m for m in w if "took over CUPTI's activity buffers" in m], (w, self.d.log()))
        fw = dict(kv.split("=") for kv in a.framework("state")[1:])
        self.assertGreaterEqual(int(fw["unknown"]), 1, fw)  # it got profd's slab and left it
        self.assertEqual(a.state()["reissued"], 0)

    def test_kernels_launched_while_tracing_switches_on_have_their_launch(self):
        # Found on an H200: JAX's threads launch while the agent switches the
        # activity kinds on one by one; a kernel recorded before the API
        # kinds were on reached XProf with no launch (no flow arrow).
        a, _ = self.app(FAKE_CUPTI_RACE_LAUNCH="1")

        def work():
            a.ask("launch 3 _Z6vecAddPKfS0_Pfi 0 7")
            time.sleep(0.3)
        x, _ = self.capture_while(800, work, a)
        ks = kernels(x)
        launches = host_correlations(x)
        unlinked = [st["correlation_id"].uint64_value for _, _, _, st in ks
                    if st["correlation_id"].uint64_value not in launches]
        self.assertGreater(len(ks), 3, ks)  # the raced launches are traced too
        self.assertEqual(unlinked, [], (len(ks), sorted(launches)[:10]))

    def test_framework_taking_over_after_a_flush_is_reported(self):
        # A profiler that flushes CUPTI before it registers its own buffer
        # callbacks leaves no buffer of profd's out to miss: without the
        # buffer canary the capture ended short in silence.
        a, _ = self.app(FAKE_APP_CUPTI=FAKE_CUPTI)

        def work():
            a.ask("launch 5 _Z6vecAddPKfS0_Pfi 0 7")
            self.assertEqual(a.framework("start-flushed"), ["framework", "started"])
            a.ask("launch 5 _Z6vecAddPKfS0_Pfi 0 7")
            a.ask("busy 300")
        x, _ = self.capture_while(800, work, a)
        self.assertEqual(len(kernels(x)), 5)
        w = warnings_of(x, a.pid)
        self.assertTrue([m for m in w if "took over CUPTI's activity buffers" in m], (w, self.d.log()))

    def test_buffer_canary_is_silent_and_invisible_alone(self):
        a, _ = self.app()

        def work():
            a.ask("launch 3 _Z6vecAddPKfS0_Pfi 0 7")
            a.ask("busy 200")
        x, _ = self.capture_while(600, work, a)
        self.assertEqual(len(kernels(x)), 3)
        self.assertFalse([m for m in warnings_of(x, a.pid) if "took over" in m], list(x.warnings))
        self.assertFalse([e for _, _, e, _ in T.plane_events(x, "/host:CPU") if "DriverGetVersion" in e])

    def test_window_flush_does_not_cut_running_kernels(self):
        a, _ = self.app()
        ms = 1500

        def work():
            time.sleep(ms / 1000 - 0.25)
            # Still running when the window closes: a forced flush there would
            # cut it and lose the 30 launched after it in the same buffer.
            a.ask("launch 1 _Z4gemmPfS_i 0 3 400000000")
            a.ask("launch 30 _Z6vecAddPKfS0_Pfi 0 7")
            a.ask("busy 2200")
        x, _ = self.capture_while(ms, work, a)
        names = [k[2] for k in kernels(x)]
        self.assertEqual((names.count(VECADD), names.count("gemm(float*, float*, int)")), (30, 1), names)
        self.assertFalse([m for m in warnings_of(x, a.pid) if "cut" in m], list(x.warnings))
        # The buffer canary's own record waits in that buffer too: no takeover cried.
        self.assertFalse([m for m in warnings_of(x, a.pid) if "took over" in m], list(x.warnings))

    def test_work_running_past_stop_is_cut_and_counted(self):
        a, _ = self.app()

        def work():
            a.ask("launch 1 _Z4gemmPfS_i 0 3 6000000000")  # runs 6 s
            a.ask("launch 10 _Z6vecAddPKfS0_Pfi 0 7")
            a.ask("busy 4200")
        self.capture_while(800, work, a)
        self.assertTrue(T.wait_for(lambda: "a forced flush cut them" in self.d.log(), 10), self.d.log())
        x2, _ = self.capture_while(500, lambda: a.ask("busy 2000"), a)
        self.assertTrue([m for m in warnings_of(x2, a.pid) if "a forced flush cut them" in m], list(x2.warnings))

    def test_slow_finalize_keeps_the_buffers(self):
        # cuptiFinalize synchronises every context: a rank blocked in a
        # collective holds it for seconds; CUPTI may still write the buffers.
        a, _ = self.app(FAKE_CUPTI_FINALIZE_MS="7000")
        x, _ = self.capture_while(800, lambda: (a.ask("launch 4 _Z6vecAddPKfS0_Pfi 0 7"), a.ask("busy 1500")), a)
        self.assertEqual(len(kernels(x)), 4)
        self.assertTrue(T.wait_for(lambda: "cuptiFinalize did not return" in self.d.log(), 15), self.d.log())
        self.assertTrue(T.wait_for(lambda: a.state()["finalizes"] == 1 and not a.state()["subscribed"], 10))
        x2, _ = self.capture_while(800, lambda: (a.ask("launch 3 _Z6vecAddPKfS0_Pfi 0 7"), a.ask("busy 1700")), a)
        self.assertEqual(len(kernels(x2)), 3, (list(x2.warnings), self.d.log()))
        self.assertTrue([m for m in warnings_of(x2, a.pid) if "cuptiFinalize did not return" in m], list(x2.warnings))
        st = a.state()
        self.assertEqual((st["calls_after_finalize"], st["reissued"]), (0, 0), st)

    def test_64_threads_lose_no_kernel(self):
        a, _ = self.app()

        def work():
            return a.ask("threads 64 20 _Z6vecAddPKfS0_Pfi 0")
        x, out = self.capture_while(1500, work, a)
        self.assertEqual(out, ["threads", "1280"])
        self.assertEqual(len(kernels(x)), 1280, list(x.warnings))
        st = a.state()
        self.assertEqual((st["declined"], st["dirty_buffers"], st["per_thread"]), (0, 0, 0), st)
        self.assertFalse([m for m in warnings_of(x, a.pid) if "dropped" in m], list(x.warnings))

    def test_unwanted_api_records_are_off_at_the_source(self):
        a, _ = self.app()
        before = {}

        def work():
            before.update(a.state())
            a.ask("busy 300")  # cuCtxGetCurrent: never shown, so never recorded
            a.ask("launch 10 _Z6vecAddPKfS0_Pfi 0 7")
            return a.state()
        x, after = self.capture_while(1000, work, a)
        self.assertEqual(after["api_records"] - before["api_records"], 10, (before, after))
        self.assertEqual(len(kernels(x)), 10)

    def test_cupti_13_0_ga(self):
        # 13.0 GA: kernel tracing stays on after the capture (its disable could
        # deadlock); an idle job is not finalized, so CUPTI keeps asking for
        # buffers: none may be handed out again while CUPTI holds it.
        a, _ = self.app(FAKE_CUPTI_VERSION="130000")
        x, _ = self.capture_while(800, lambda: a.ask("graph 3 _Z6vecAddPKfS0_Pfi 0 7"), a)
        self.assertEqual(len(kernels(x)), 3)
        self.assertTrue(T.wait_for(lambda: "not finalized" in self.d.log(), 6), self.d.log())
        a.ask("launch 5 _Z6vecAddPKfS0_Pfi 0 7")  # between captures
        a.ask("threads 3 4 _Z6vecAddPKfS0_Pfi 0")

        def work():
            a.ask("graph 4 _Z6vecAddPKfS0_Pfi 0 7")
            a.ask("threads 3 4 _Z6vecAddPKfS0_Pfi 1")
            a.ask("busy 1700")
        x2, _ = self.capture_while(800, work, a)
        self.assertEqual(len(kernels(x2)), 16, list(x2.warnings))
        w = warnings_of(x2, a.pid)
        self.assertTrue([m for m in w if "CUPTI 13.0 keeps kernel tracing on" in m], w)
        self.assertTrue([m for m in w if "mislabels cudaGraphLaunch" in m and "13.1 Update 1" in m], w)
        self.assertEqual(a.state()["reissued"], 0)

    def test_cupti_search_order_and_refusals(self):
        # The job's own copy wins over the one beside libcudart: a second
        # CUPTI in the process would be a second set of hooks.
        own = os.path.join(self.tmp, "own")
        os.mkdir(own)
        shutil.copy(FAKE_CUPTI, own)
        a, _ = self.app(FAKE_APP_CUPTI=os.path.join(own, "libcupti.so.13"), FAKE_APP_PRELOAD="1")
        x, _ = self.capture_while(800, lambda: (a.ask("launch 2 _Z6vecAddPKfS0_Pfi 0 7"), a.ask("busy 1700")), a)
        self.assertEqual(len(kernels(x)), 2)
        self.assertEqual(a.state()["subscribes"], 1)  # in the app's own copy
        # PROFD_CUPTI_PATH is the only candidate when set.
        missing, _ = self.app(PROFD_CUPTI_PATH=os.path.join(self.tmp, "nowhere"))
        old, _ = self.app(PROFD_CUPTI_PATH=os.path.dirname(FAKE_CUPTI), FAKE_CUPTI_VERSION="18")  # 11.8
        x, _ = self.capture_while(600, lambda: None)
        w = warnings_of(x, missing.pid)
        self.assertTrue([m for m in w if "no usable CUPTI found" in m and "PROFD_CUPTI_PATH" in m], list(x.warnings))
        w = warnings_of(x, old.pid)
        self.assertTrue([m for m in w if "CUDA 11 or older" in m and "cannot read" in m], list(x.warnings))
        for j in (missing, old):
            st = j.state()
            self.assertEqual(st["subscribes"], 0, st)

    def test_cuda_12_cupti(self):
        # cu12 wheels bring CUPTI 12.x: same record fields, older rules.
        new, _ = self.app(FAKE_CUPTI_VERSION="28")  # 12.9 Update 1: finalize is safe there
        old, _ = self.app(FAKE_CUPTI_VERSION="22")  # 12.4: finalizing can crash graph jobs

        def work():
            self.assertTrue(T.wait_for(lambda: old.state()["kinds"] & TRACED == TRACED, 10))
            new.ask("launch 5 _Z6vecAddPKfS0_Pfi 0 7")
            old.ask("launch 6 _Z6vecAddPKfS0_Pfi 1 7")
            new.ask("busy 2200")
        x, _ = self.capture_while(800, work, new)
        per_pid = {}
        for _, _, _, st in kernels(x):
            pid = st["correlation_id"].uint64_value >> 32
            per_pid[pid] = per_pid.get(pid, 0) + 1
        self.assertEqual(per_pid, {new.pid: 5, old.pid: 6}, list(x.warnings))
        self.assertEqual(new.state()["finalizes"], 1)
        self.assertTrue(T.wait_for(lambda: "before 12.6 can crash finalizing" in self.d.log(), 5), self.d.log())
        st = old.state()
        self.assertEqual((st["finalizes"], st["subscribed"]), (0, 0), st)
        old.ask("launch 4 _Z6vecAddPKfS0_Pfi 1 7")  # between captures: not recorded
        x2, _ = self.capture_while(600, lambda: old.ask("launch 2 _Z6vecAddPKfS0_Pfi 1 7"), old)
        self.assertEqual(len([k for k in kernels(x2) if k[3]["correlation_id"].uint64_value >> 32 == old.pid]), 2)
        self.assertTrue([m for m in warnings_of(x2, old.pid) if "not tested" not in m and "12.6" in m],
                        list(x2.warnings))

    def test_mig_instances_are_named_as_nvml_names_them(self):
        _, info = self.app(FAKE_CUDA_MIG="1")
        self.assertEqual(sorted(d.uuid for d in info.devices),
                         ["MIG-ee112233-4455-6677-8899-aabbccddee00", "MIG-ee112233-4455-6677-8899-aabbccddee01"])

@unittest.skipUnless(AGENT and os.path.exists(APP), "libprofd-agent.so or the fake CUDA app not built")
class SocketUnreachable(unittest.TestCase):
    def test_job_says_once_where_it_looked(self):
        """A job whose agent cannot reach profd's socket (profd on another
        --agent-socket, no PROFD_AGENT_SOCKET) says so on its own stderr:
        one line, the path it tried and the variable to set, however often
        the agent retries."""
        tmp = tempfile.mkdtemp(prefix="profd-nosock-")
        bad = os.path.join(tmp, "nobody-listens-here.sock")
        p = subprocess.Popen([APP], env=dict(os.environ, CUDA_INJECTION64_PATH=AGENT, PROFD_AGENT_SOCKET=bad),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            self.assertTrue(p.stdout.readline().split(), "fake-cuda-app did not start")
            time.sleep(1.5)  # several attempts: backoff 100 ms, doubling
            _, err = p.communicate("exit\n", timeout=15)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
            shutil.rmtree(tmp, ignore_errors=True)
        said = [line for line in err.splitlines() if "profd agent" in line]
        self.assertEqual(len(said), 1, err)
        self.assertIn(bad, said[0])
        self.assertIn("PROFD_AGENT_SOCKET=", said[0])


if __name__ == "__main__":
    unittest.main(verbosity=2)
