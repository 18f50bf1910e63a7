# SPDX-License-Identifier: MIT
"""The agents' recording mode and the counters' rates while only the flight
recorder runs (docs/recorder.md, Cost), through the real libprofd-agent.so
on the fake CUPTI and the real daemon's continuous-profiling RPCs.

Checked:
- recording mode switches on only kernels, copies, memsets and their API
  records (no MEMORY2, no OVERHEAD); a Profile window opening meanwhile
  turns full capture on for its duration, and its closing turns it off;
- a job SIGKILLed while a long kernel keeps CUPTI's buffer from completing
  still has its records up to about a second before the kill in the next
  snapshot (the forced flush of a buffer CUPTI held for a second);
- host counters (and NVML, with the fake NVML) at 1 Hz while only the
  recorder runs, at their configured rate while a Profile window is open.
"""
import os
import shutil
import signal
import tempfile
import threading
import time
import unittest

import profdtest as T
import tfclient
from test_agent_cupti import AGENT, APP, TRACED, App, kernels
from test_agent_pm import counters

P = T.protos()
FAKE_NVML = os.environ.get("FAKE_NVML_LIB", os.path.join(T.BUILD, "tests", "nvml", "libfake-nvml.so"))
# CUPTI activity kinds only full capture switches on.
MEMORY2, OVERHEAD = 1 << 49, 1 << 17
FULL_ONLY = MEMORY2 | OVERHEAD


v3 = tfclient.recorder_stubs


def start_request(host_level=2):
    """XProf's start request, with /host:CPU kept (as profctl record start asks)."""
    req = tfclient.continuous_profiling_request(P)
    req.opts.host_tracer_level = host_level
    return req


def counter_counts(x, plane_prefix, names=None):
    """{(plane, counter name): points} on the `_counters_` lines of the
    planes whose name starts with @plane_prefix (only @names if given)."""
    return {(p.name, n): len(v) for p in x.planes if p.name.startswith(plane_prefix)
            for n, v in counters(x, p.name, names).items()}


# NVML counters read at every tick of a 1 Hz sampler (utilization and power
# come from NVML's own sample buffers, as many as NVML kept whatever the rate).
NVML_TICKED = ("memory_used_mib", "gpu_temp_c")


@unittest.skipUnless(AGENT and os.path.exists(APP), "libprofd-agent.so or the fake CUDA app not built")
class RecordingMode(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="profd-recmode-")
        self.sock = os.path.join(self.tmp, "agent.sock")
        self.d = T.Daemon("--agent-socket", self.sock, "--flush-timeout", "2s", "--recorder-bytes", "16M")
        self.ch = T.channel(self.d.addr)
        self.start, self.snap, self.stop = v3(self.ch)
        self.profile = T.stub(self.ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
        self.apps = []

    def tearDown(self):
        try:
            self.stop(P.ps.StopContinuousProfilingRequest(), timeout=5)
        except Exception:  # noqa: BLE001 - not recording any more
            pass
        for a in self.apps:
            a.finish()
        self.ch.close()
        rc = self.d.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.assertEqual(rc, 0, self.d.log())

    def app(self):
        a = App(self.sock)
        self.apps.append(a)
        return a

    def kinds(self, a):
        return a.state()["kinds"]

    def test_recording_kinds_and_a_profile_window_meanwhile(self):
        a = self.app()
        self.start(start_request(), timeout=10)
        self.assertTrue(T.wait_for(lambda: self.kinds(a) & TRACED == TRACED, 10), self.d.log())
        k = self.kinds(a)
        self.assertEqual(k & FULL_ONLY, 0, hex(k))
        a.ask("launch 20 _Z6vecAddPKfS0_Pfi 0 7")
        a.ask("memcpy 3 0 4096")
        # A Profile window while recording: full capture for its duration.
        out = {}

        def run():
            r = self.profile(T.profile_request(P, 1500, f"localhost:{self.d.port}"), timeout=60)
            out["x"] = T.decode_xspace(P, r.tool_data[0].data)

        t = threading.Thread(target=run)
        t.start()
        self.assertTrue(T.wait_for(lambda: self.kinds(a) & FULL_ONLY == FULL_ONLY, 10), hex(self.kinds(a)))
        a.ask("launch 5 _Z4gemmPfS_i 1 3")
        t.join()
        self.assertEqual(len([k for k in kernels(out["x"]) if k[2] == "gemm(float*, float*, int)"]), 5)
        # Closed: back to recording mode, still tracing.
        self.assertTrue(T.wait_for(lambda: self.kinds(a) & FULL_ONLY == 0, 10), hex(self.kinds(a)))
        self.assertEqual(self.kinds(a) & TRACED, TRACED)
        a.ask("launch 7 _Z6vecAddPKfS0_Pfi 0 7")
        time.sleep(0.5)
        r = self.snap(P.ps.GetSnapshotRequest(), timeout=20)
        names = [k[2] for k in kernels(r.xspace)]
        self.assertEqual(names.count("vecAdd(float const*, float const*, float*, int)"), 27, names)
        self.assertEqual(names.count("gemm(float*, float*, int)"), 5)
        # A job that starts while recording joins in recording mode.
        b = self.app()
        self.assertTrue(T.wait_for(lambda: self.kinds(b) & TRACED == TRACED, 10), self.d.log())
        self.assertEqual(self.kinds(b) & FULL_ONLY, 0, hex(self.kinds(b)))
        self.stop(P.ps.StopContinuousProfilingRequest(), timeout=5)
        self.assertTrue(T.wait_for(lambda: self.kinds(a) == 0 and self.kinds(b) == 0, 10),
                        (hex(self.kinds(a)), hex(self.kinds(b))))

    def test_killed_job_keeps_all_but_its_last_second(self):
        """A kernel that runs on (a rank stuck in a collective) keeps CUPTI's
        buffer from completing: flush(0) never returns it, so without the
        recorder's forced flush nothing launched after it would reach profd
        before the job is killed."""
        a = self.app()
        self.start(start_request(), timeout=10)
        self.assertTrue(T.wait_for(lambda: self.kinds(a) & TRACED == TRACED, 10), self.d.log())
        stuck = time.time_ns()
        a.ask("launch 1 _Z5stuckv 0 1 60000000000")  # runs 60 s
        launched = []
        for i in range(40):  # 4 s of short kernels, one name per 100 ms
            w = a.ask(f"launch 1 _Z4stepILi{i}EEvv 0 2")
            launched.append((int(w[2]), f"void step<{i}>()"))
            time.sleep(0.1)
        killed = time.time_ns()
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait()
        time.sleep(0.5)
        r = self.snap(P.ps.GetSnapshotRequest(), timeout=20)
        got = {k[2] for k in kernels(r.xspace)}
        # The forced flush that takes the stuck kernel's buffer back cuts it
        # and what CUPTI wrote after it there (its first ~second: reading
        # stops at the unfinished record). Everything launched after that
        # and up to ~1 s before the kill is in the snapshot (1.5 s either
        # side: a loaded CI machine runs the agent's 100 ms tick late).
        want = [n for t, n in launched if stuck + 1500000000 < t < killed - 1500000000]
        self.assertGreaterEqual(len(want), 8)
        missing = [n for n in want if n not in got]
        self.assertEqual(missing, [], sorted(got))


class CounterRates(unittest.TestCase):
    """Host counters (and NVML) at 1 Hz while only the recorder runs."""

    def counts_while(self, d, ch, seconds, window=None):
        """The recorder's snapshot of @seconds during which @window
        ("profile", "monitor" or None) was open beside it."""
        start, snap, stop = v3(ch)
        start(start_request(), timeout=10)
        try:
            snap(P.ps.GetSnapshotRequest(), timeout=20)  # the next period starts now
            ms = int(seconds * 1000)
            if window == "profile":
                T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)(
                    T.profile_request(P, ms, f"localhost:{d.port}"), timeout=60)
            elif window == "monitor":
                T.stub(ch, "Monitor", P.ps.MonitorRequest, P.ps.MonitorResponse)(
                    P.ps.MonitorRequest(duration_ms=ms, monitoring_level=1), timeout=60)
            else:
                time.sleep(seconds)
            return snap(P.ps.GetSnapshotRequest(), timeout=20).xspace
        finally:
            stop(P.ps.StopContinuousProfilingRequest(), timeout=5)

    def test_host_and_nvml_counters_slow_down_while_only_recording(self):
        args = ["--host-sample-hz", "10", "--nvml-sample-hz", "20"]
        nvml = os.access(FAKE_NVML, os.R_OK)
        if nvml:
            args += ["--nvml-library", FAKE_NVML]
        with T.Daemon(*args) as d, T.channel(d.addr) as ch:
            x = self.counts_while(d, ch, 3.0)
            host = counter_counts(x, "/host:CPU")
            self.assertTrue(host, [p.name for p in x.planes])
            # 3 s at 1 Hz: 2 to 5 points per counter (not the 30 of 10 Hz).
            self.assertLessEqual(max(host.values()), 6, host)
            if nvml:
                gpu = counter_counts(x, "/device:GPU:", NVML_TICKED)
                self.assertTrue(gpu, [p.name for p in x.planes])
                self.assertLessEqual(max(gpu.values()), 6, gpu)
            # A Profile or Monitor window meanwhile: the configured rates
            # again, in the recorder's snapshot too.
            for window in ("profile", "monitor"):
                x = self.counts_while(d, ch, 2.0, window)
                host = counter_counts(x, "/host:CPU")
                self.assertGreaterEqual(max(host.values()), 12, (window, host))
                if nvml:  # --nvml-sample-hz 20 reads memory every 4th tick: 5 Hz
                    gpu = counter_counts(x, "/device:GPU:", NVML_TICKED)
                    self.assertGreaterEqual(min(gpu.values()), 7, (window, gpu))


if __name__ == "__main__":
    unittest.main(verbosity=2)
