# SPDX-License-Identifier: MIT
"""Hardware counters (CUPTI PM sampling) and several profilers on one job,
through a real profd, the real agent and the fake CUPTI
(tests/agent/fakecuda/fake-pmsampling.c).

The fake's samples are predictable: SM throughput 30, tensor pipe 5,
warps active 50 in every interval; DRAM throughput 10, plus 10 per MiB the
app copied to that device in the interval (at most 100). Checked in the
decoded XSpace: the counter tracks the trace viewer draws (`_counters_`),
the perf_counters form (`counter_value` on the "PM counters" line, a
device_id plane stat), times inside the window at the asked interval, and
that privileges, busy counters, an unsupported GPU and a CUPTI held by
another profiler each give one warning while kernels and NVML data stay.
"""
import os
import re
import statistics
import subprocess
import tempfile
import threading
import time
import unittest

import profdtest as T
import test_agent_cupti as C
from test_agent_cupti import AGENT, APP, kernels

P = T.protos()
FAKE_NVML = os.environ.get("FAKE_NVML_LIB", "")
FAKE_AGENT = os.environ.get("FAKE_AGENT", "")
SM = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed"
DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
TENSOR = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"
MULTIPASS = "sm__throughput.avg.pct_of_peak_sustained_elapsed"  # 19 passes alone on an H200
WARPS = "sm__warps_active.avg.pct_of_peak_sustained_active"
DEFAULT = {SM: 30.0, TENSOR: 5.0, WARPS: 50.0}
PM_LINE_ID = 0xdeadbeef + 200
INTERVAL_US = 10000


def counters(x, plane, names=None):
    """{counter name: [(ns into the window, value)]} of @plane's `_counters_`
    line (profd's event offsets count from the window's start)."""
    out = {}
    for p in x.planes:
        if p.name != plane:
            continue
        for l in p.lines:
            if l.name != "_counters_":
                continue
            for e in l.events:
                n = p.event_metadata[e.metadata_id].name
                if names is None or n in names:
                    self_stat = [s for s in e.stats if p.stat_metadata[s.metadata_id].name == n]
                    assert len(e.stats) == 1 and self_stat, (n, e)
                    out.setdefault(n, []).append((l.timestamp_ns + e.offset_ps // 1000, self_stat[0].double_value))
    return out


def pm_line(x, plane):
    for p in x.planes:
        if p.name == plane:
            for l in p.lines:
                if l.id == PM_LINE_ID:
                    return p, l
    return None, None


def request(ms, **adv):
    r = T.profile_request(P, ms, "localhost:1")
    for k, v in adv.items():
        if isinstance(v, str):
            r.opts.advanced_configuration[k].string_value = v
        else:
            r.opts.advanced_configuration[k].int64_value = v
    return r


@unittest.skipUnless(AGENT and os.path.exists(APP), "libprofd-agent.so or the fake CUDA app not built")
class PmSampling(unittest.TestCase):
    app = C.AgentOnFakeCupti.app

    def setUp(self, *args, **env):
        self.tmp = tempfile.mkdtemp(prefix="profd-pm-")
        self.sock = os.path.join(self.tmp, "agent.sock")
        self.d = T.Daemon("--agent-socket", self.sock, "--flush-timeout", "2s", *args, env=env or None)
        self.stubs = T.Stubs(self.d.addr)
        self.profile, self.status = self.stubs.profile, self.stubs.status
        self.apps = []

    tearDown = C.AgentOnFakeCupti.tearDown

    def with_nvml(self):
        """The daemon again, with the fake NVML listing the fake CUDA GPUs."""
        if not FAKE_NVML:
            self.skipTest("no fake NVML")
        self.tearDown()
        self.setUp("--nvml-library", FAKE_NVML, FAKE_NVML_CUDA_UUIDS="1", FAKE_NVML_GPUS="2")

    def capture(self, req, work, app=None, lead=0.6):
        out = {}

        def run():
            out["t0"] = time.time_ns()
            r = self.profile(req, timeout=60)
            out["t1"] = time.time_ns()
            out["x"] = T.decode_xspace(P, r.tool_data[0].data)

        t = threading.Thread(target=run)
        t.start()
        if app is None:
            time.sleep(lead)
        elif not T.wait_for(lambda: app.state()["kinds"] & C.TRACED == C.TRACED, 10):
            raise AssertionError("the agent did not start tracing:\n" + self.d.log())
        res = work()
        t.join()
        return out["x"], out["t0"], out["t1"], res

    def test_counters_follow_the_copies(self):
        a, _ = self.app()

        def work():
            time.sleep(0.3)
            a.ask("memcpy 5 0 1048576")  # 5 MiB to device 0 at once
            a.ask("launch 3 _Z6vecAddPKfS0_Pfi 0 7")
            time.sleep(0.5)

        x, _, _, _ = self.capture(
            request(1500, gpu_pm_sample_counters="default", gpu_pm_sample_interval_us=INTERVAL_US), work, a)
        w = list(x.warnings)
        self.assertFalse([s for s in w if "hardware counters" in s or "PM sampling" in s], w)
        self.assertEqual(len(kernels(x)), 3, w)
        for plane in ("/device:GPU:0", "/device:GPU:1"):
            c = counters(x, plane, {SM, DRAM, TENSOR, WARPS})
            self.assertEqual(set(c), {SM, DRAM, TENSOR, WARPS}, (plane, w, self.d.log()))
            for name, want in DEFAULT.items():
                self.assertEqual({v for _, v in c[name]}, {want}, (plane, name))
            ts = sorted(t for t, _ in c[SM])
            # Inside the window, at the asked interval.
            self.assertGreater(len(ts), 30, plane)
            self.assertTrue(0 <= ts[0] and ts[-1] <= 1500 * 10**6, (ts[0], ts[-1]))
            gaps = [b - a for a, b in zip(ts, ts[1:])]
            self.assertAlmostEqual(statistics.median(gaps), INTERVAL_US * 1000, delta=INTERVAL_US * 200)
        dram0 = counters(x, "/device:GPU:0", {DRAM})[DRAM]
        dram1 = counters(x, "/device:GPU:1", {DRAM})[DRAM]
        # Idle intervals read 10; the copy burst raises device 0's, only there.
        self.assertEqual(min(v for _, v in dram0), 10.0)
        self.assertEqual({v for _, v in dram1}, {10.0})
        high = [(t, v) for t, v in dram0 if v > 10.0]
        self.assertTrue(high, dram0)
        # 10 per MiB: 50 over the intervals the 5 MiB fell in (at most two).
        self.assertEqual(sum(v - 10.0 for _, v in high), 50.0, high)
        self.assertGreaterEqual(max(v for _, v in high), 35.0, high)
        # ... in the intervals the copies ran in (the traced MemcpyH2D events).
        g0 = [p for p in x.planes if p.name == "/device:GPU:0"][0]
        copies = sorted(l.timestamp_ns + e.offset_ps // 1000 for l in g0.lines for e in l.events
                        if g0.event_metadata[e.metadata_id].name == "MemcpyH2D")
        self.assertEqual(len(copies), 5)
        for t, _ in high:
            self.assertTrue(copies[0] - INTERVAL_US * 1000 <= t <= copies[-1], (copies[0], t, copies[-1]))

        # The perf_counters form: counter_value (uint64) on the PM line, and
        # the plane's device_id, as xplane_to_perf_counters.cc reads them.
        p, l = pm_line(x, "/device:GPU:0")
        self.assertIsNotNone(l, [ln.name for pl in x.planes for ln in pl.lines])
        self.assertEqual(l.name, "PM counters")
        plane_stats = {p.stat_metadata[s.metadata_id].name: s for s in p.stats}
        self.assertEqual(plane_stats["device_id"].int64_value, 0)
        seen = {}
        for e in l.events:
            st = {p.stat_metadata[s.metadata_id].name: s for s in e.stats}
            self.assertEqual(st["counter_value"].WhichOneof("value"), "uint64_value")
            self.assertIn("performance_counter_description", st)
            seen.setdefault(p.event_metadata[e.metadata_id].name, set()).add(st["counter_value"].uint64_value)
        self.assertEqual(seen[SM], {30})
        self.assertEqual(seen[WARPS], {50})
        self.assertIn(10, seen[DRAM])
        self.assertTrue(max(seen[DRAM]) >= 35, seen[DRAM])

    def test_daemon_default_turns_it_on(self):
        """profd --pm-sample default: every capture samples, no request key needed."""
        self.tearDown()
        self.setUp("--pm-sample", "default", "--pm-sample-interval", "10ms")
        a, _ = self.app()
        x, _, _, _ = self.capture(request(1000), lambda: time.sleep(0.6), a)
        c = counters(x, "/device:GPU:1", {SM, DRAM, TENSOR, WARPS})
        self.assertEqual(set(c), {SM, DRAM, TENSOR, WARPS}, list(x.warnings))
        ts = sorted(t for t, _ in c[WARPS])
        self.assertAlmostEqual(statistics.median([b - a for a, b in zip(ts, ts[1:])]), 10**7, delta=2 * 10**6)

    def released(self, a, n):
        """A CUDA call after a capture: its API-exit callback claims the
        detach, which disables the stopped sampling objects as its last
        CUPTI call (that finalizes CUPTI); @n detaches so far."""
        a.ask("launch 1 _Z6vecAddPKfS0_Pfi 0 7")
        self.assertTrue(T.wait_for(lambda: a.state()["unsubscribes"] == n, 5), a.state())

    def test_each_capture_samples_with_a_new_object(self):
        """On an H200 (CUPTI 13.0) a job sampled counters in one capture
        only, whichever way the agent kept the sampling object: one that
        went with a cuptiFinalize left the GPU refusing the next Enable,
        and a stopped one started again failed every decode (the fake's
        objects do the same). The agent stops the object at the capture's
        end and disables it as the detach's last CUPTI call, in place of
        cuptiFinalize (the disable finalizes CUPTI; a job whose agent
        disabled it and then went on calling CUPTI aborted at exit): each
        capture enables a new one, and no CUPTI call comes after."""
        a, _ = self.app()
        req = lambda: request(800, gpu_pm_sample_counters="default", gpu_pm_sample_interval_us=INTERVAL_US)
        for round in range(3):
            x, _, _, _ = self.capture(req(), lambda: (a.ask("launch 2 _Z6vecAddPKfS0_Pfi 0 7"), time.sleep(0.4)), a)
            w = list(x.warnings)
            ts = sorted(t for t, _ in counters(x, "/device:GPU:0", {SM}).get(SM, []))
            self.assertGreater(len(ts), 10, (round, w))
            # The decode after the stop brings the samples up to it.
            self.assertGreater(ts[-1], 700 * 10**6, (round, ts[-3:]))
            self.assertFalse([s for s in w if "PM sampling" in s or "hardware counters" in s], (round, w))
            self.released(a, round + 1)
            st = a.state()
            self.assertEqual(st["calls_after_finalize"], 0, (round, st))
            self.assertEqual(st["finalizes"], 0, (round, st))
            self.assertFalse([s for s in w if "not finalized" in s], w)
        self.assertEqual(a.finish(), 0)

    def test_a_held_object_is_said(self):
        """No CUDA call within 2 s after a capture: the detach unsubscribes
        without a finalize and cannot disable the stopped object. The next
        capture says why it has no counters rather than start the held
        object again (which fails); its own end, with the job calling
        CUDA, releases it, and the capture after samples."""
        a, _ = self.app()
        req = lambda: request(800, gpu_pm_sample_counters="default", gpu_pm_sample_interval_us=INTERVAL_US)
        work = lambda: (a.ask("launch 2 _Z6vecAddPKfS0_Pfi 0 7"), time.sleep(0.4))
        x, _, _, _ = self.capture(req(), work, a)
        self.assertTrue(counters(x, "/device:GPU:0", {SM}), list(x.warnings))
        self.assertTrue(T.wait_for(lambda: a.state()["unsubscribes"] == 1, 5), a.state())
        x, _, _, _ = self.capture(req(), work, a)
        w = list(x.warnings)
        held = [s for s in w if "still held" in s]
        self.assertEqual(len(held), 1, w)  # both GPUs, said once
        self.assertIn("no counters from GPU 0 this time", held[0])
        self.assertIn("no CUDA call came within 2 s", held[0])
        self.assertIn(f"pid {a.pid}", held[0])
        self.assertEqual(counters(x, "/device:GPU:0", {SM}), {}, w)
        self.assertEqual(len(kernels(x)), 2, w)  # the trace itself is whole
        self.released(a, 2)
        x, _, _, _ = self.capture(req(), work, a)
        self.assertGreater(len(counters(x, "/device:GPU:1", {SM}).get(SM, [])), 10, list(x.warnings))
        self.released(a, 3)
        self.assertEqual(a.state()["calls_after_finalize"], 0)
        self.assertEqual(a.finish(), 0)

    def test_turned_on_and_off_mid_capture(self):
        """A window asking for counters opens inside one that does not: the
        agent starts sampling then (START again), and stops when it closes."""
        a, _ = self.app()
        out = {}

        def outer():
            r = self.profile(request(2000), timeout=60)
            out["outer"] = T.decode_xspace(P, r.tool_data[0].data)

        t = threading.Thread(target=outer)
        t.start()
        self.assertTrue(T.wait_for(lambda: a.state()["kinds"] & C.TRACED == C.TRACED, 10), self.d.log())
        time.sleep(0.5)
        r = self.profile(request(600, gpu_pm_sample_counters="default", gpu_pm_sample_interval_us=INTERVAL_US),
                         timeout=60)
        inner = T.decode_xspace(P, r.tool_data[0].data)
        t.join()
        ci = counters(inner, "/device:GPU:0", {SM})
        self.assertGreater(len(ci.get(SM, [])), 20, list(inner.warnings))
        co = sorted(t for t, _ in counters(out["outer"], "/device:GPU:0", {SM}).get(SM, []))
        self.assertTrue(co, list(out["outer"].warnings))
        # Within the outer window: none in its first 0.4 s, none in its last 0.4 s.
        self.assertGreater(co[0], 4 * 10**8, co[:3])
        self.assertLess(co[-1], 16 * 10**8, co[-3:])
        self.assertLess(len(co), 1.5 * 1000 * 1000 / INTERVAL_US, len(co))

    def test_other_options_mid_capture_keep_the_first(self):
        """A window asking for a smaller interval opens while counters run:
        restarting would stop the objects for the rest of the capture
        (CUPTI does not sample with a stopped one again, and a new one
        needs the capture's end), so sampling goes on with the options it
        started with, and a notice says so once."""
        a, _ = self.app()
        out = {}

        def outer():
            r = self.profile(request(2000, gpu_pm_sample_counters="default", gpu_pm_sample_interval_us=INTERVAL_US),
                             timeout=60)
            out["outer"] = T.decode_xspace(P, r.tool_data[0].data)

        t = threading.Thread(target=outer)
        t.start()
        self.assertTrue(T.wait_for(lambda: a.state()["kinds"] & C.TRACED == C.TRACED, 10), self.d.log())
        time.sleep(0.5)
        r = self.profile(request(600, gpu_pm_sample_counters="default", gpu_pm_sample_interval_us=INTERVAL_US // 2),
                         timeout=60)
        inner = T.decode_xspace(P, r.tool_data[0].data)
        t.join()
        notes = [s for s in inner.warnings if "not applied" in s]
        self.assertEqual(len(notes), 1, list(inner.warnings))
        self.assertIn("keep the ones they started with", notes[0])
        for x in (inner, out["outer"]):
            self.assertFalse([s for s in x.warnings if "no hardware counters" in s], list(x.warnings))
        ts = sorted(t for t, _ in counters(out["outer"], "/device:GPU:0", {SM}).get(SM, []))
        gaps = [b - a for a, b in zip(ts, ts[1:])]
        self.assertTrue(ts and ts[-1] - ts[0] > 17 * 10**8, (ts[:2], ts[-2:]))  # no stop in between
        self.assertLess(max(gaps), 3 * INTERVAL_US * 1000, max(gaps))
        self.assertAlmostEqual(statistics.median(gaps), INTERVAL_US * 1000, delta=INTERVAL_US * 200)
        ti = sorted(t for t, _ in counters(inner, "/device:GPU:0", {SM}).get(SM, []))
        self.assertGreater(len(ti), 30, len(ti))

    def test_chosen_metrics_and_a_bad_name(self):
        a, _ = self.app()
        x, _, _, _ = self.capture(request(1000, gpu_pm_sample_counters=f"{WARPS}, no__such_metric.sum",
                                          gpu_pm_sample_interval_us=INTERVAL_US),
                                  lambda: time.sleep(0.6), a)
        c = counters(x, "/device:GPU:0", {SM, DRAM, TENSOR, WARPS, "no__such_metric.sum"})
        self.assertEqual(set(c), {WARPS}, list(x.warnings))
        notes = [s for s in x.warnings if "no__such_metric.sum" in s]
        self.assertEqual(len(notes), 1, list(x.warnings))
        self.assertIn(f"pid {a.pid}", notes[0])
        self.assertEqual(notes[0].count("no__such_metric.sum"), 1, notes[0])  # both GPUs, said once

    def test_metrics_the_gpu_cannot_sample_are_left_out(self):
        # Found on an H200 (CUPTI 13.0): ConfigAddMetrics answered
        # NOT_SUPPORTED for the default set, and no counter was sampled.
        a, _ = self.app(FAKE_CUPTI_PM_UNSAMPLED=f"{TENSOR},{WARPS}")
        x, _, _, _ = self.capture(request(1000, gpu_pm_sample_counters="default",
                                          gpu_pm_sample_interval_us=INTERVAL_US),
                                  lambda: time.sleep(0.6), a)
        c = counters(x, "/device:GPU:0", {SM, DRAM, TENSOR, WARPS})
        self.assertEqual(set(c), {SM, DRAM}, list(x.warnings))
        notes = [s for s in x.warnings if "left out metrics" in s]
        self.assertEqual(len(notes), 1, list(x.warnings))
        self.assertIn(TENSOR, notes[0])
        self.assertIn(WARPS, notes[0])
        self.assertFalse([s for s in x.warnings if "no hardware counters" in s], list(x.warnings))

    def test_a_metric_needing_several_passes_costs_only_itself(self):
        # Found on an H200: sm__throughput alone needs 19 passes; dropping
        # names from the end of the set threw away every good one first.
        a, _ = self.app()
        x, _, _, _ = self.capture(request(1000, gpu_pm_sample_counters=f"{MULTIPASS},{DRAM},{WARPS}",
                                          gpu_pm_sample_interval_us=INTERVAL_US),
                                  lambda: time.sleep(0.6), a)
        c = counters(x, "/device:GPU:0", {MULTIPASS, DRAM, WARPS})
        self.assertEqual(set(c), {DRAM, WARPS}, list(x.warnings))
        notes = [s for s in x.warnings if "left out metrics" in s]
        self.assertEqual(len(notes), 1, list(x.warnings))
        self.assertIn(f"{MULTIPASS} (19 passes)", notes[0])

    def test_off_by_default(self):
        a, _ = self.app()

        def work():
            a.ask("memcpy 5 0 1048576")
            a.ask("launch 2 _Z6vecAddPKfS0_Pfi 0 7")
            time.sleep(0.4)

        x, _, _, _ = self.capture(request(800), work, a)
        self.assertEqual(len(kernels(x)), 2)
        for plane in ("/device:GPU:0", "/device:GPU:1"):
            self.assertEqual(counters(x, plane, {SM, DRAM, TENSOR, WARPS}), {})
            self.assertEqual(pm_line(x, plane), (None, None))

    def failing(self, mode, *want):
        """PM sampling refused by the fake as @mode: one warning with @want
        in it, kernels and NVML data kept."""
        self.with_nvml()
        a, _ = self.app(FAKE_CUPTI_PM=mode)

        def work():
            a.ask("launch 4 _Z6vecAddPKfS0_Pfi 0 7")
            time.sleep(0.5)

        x, _, _, _ = self.capture(request(1000, gpu_pm_sample_counters="default"), work, a)
        w = list(x.warnings)
        mine = [s for s in w if "no hardware counters" in s]
        self.assertEqual(len(mine), 1, w)
        self.assertIn(f"pid {a.pid}", mine[0])
        for s in want:
            self.assertIn(s, mine[0])
        self.assertEqual(len(kernels(x)), 4, w)
        self.assertEqual(counters(x, "/device:GPU:0", {SM, DRAM, TENSOR, WARPS}), {})
        self.assertTrue(counters(x, "/device:GPU:0", {"gpu_util_pct"}), w)  # NVML kept

    def test_privileges(self):
        self.failing("privileges", "ERR_NVGPUCTRPERM", "CAP_SYS_ADMIN", "CAP_PERFMON",
                     "NVreg_RestrictProfilingToAdminUsers=0")

    def test_counters_held_by_another_profiler(self):
        self.failing("busy", "held by another profiler", "DCGM", "Nsight")

    def test_unsupported_gpu(self):
        self.failing("unsupported", "not supported on GPU 0")

    def test_buffer_overflow_said_once_a_gpu(self):
        a, _ = self.app(FAKE_CUPTI_PM="overflow")
        x, _, _, _ = self.capture(request(1000, gpu_pm_sample_counters="default",
                                          gpu_pm_sample_interval_us=INTERVAL_US), lambda: time.sleep(0.6), a)
        w = [s for s in x.warnings if "overflowed" in s]
        # Once a GPU (every decode on both reports one).
        self.assertEqual(sorted(s.split("PM sampling: ")[1][:6] for s in w), ["GPU 0'", "GPU 1'"], w)
        for s in w:
            self.assertIn("gpu_pm_sample_buffer_size_per_gpu_mb", s)
            self.assertIn(f"pid {a.pid}", s)
        self.assertFalse([s for s in x.warnings if "no hardware counters" in s], list(x.warnings))
        self.assertTrue(counters(x, "/device:GPU:0", {SM}))  # what was decoded is kept

    def sm_span(self, x):
        ts = sorted(t for t, _ in counters(x, "/device:GPU:0", {SM}).get(SM, []))
        return ts[-1] - ts[0] if ts else None

    def stall_capture(self):
        """1.5 s with counters."""
        x, _, _, _ = self.capture(request(1500, gpu_pm_sample_counters="default",
                                          gpu_pm_sample_interval_us=INTERVAL_US), lambda: time.sleep(1.1))
        return x, list(x.warnings)

    def test_a_full_buffer_stops_sampling_until_the_next_capture(self):
        """CUPTI samples nothing more once its hardware buffer filled
        (decode: OUT_OF_MEMORY). On an H200 a restart within the capture
        (the same object started again) was refused twice in three tries
        and the job then died in CUPTI at the capture's end, so the agent
        leaves the device alone until the capture stops: the counters up
        to the overflow are kept, "stopped early" is said once, and the
        next capture, with a new object, samples again (as the H200's did
        after an overflow at 10 us). The fake fills the buffer 300 ms
        after each Start."""
        a, _ = self.app(FAKE_CUPTI_PM="stall")
        for n in range(2):
            x, w = self.stall_capture()
            self.assertEqual([s for s in w if "no hardware counters" in s], [], w)
            early = [s for s in w if "stopped early" in s and "GPU 0 " in s]
            self.assertEqual(len(early), 1, w)
            self.assertIn("its 64 MiB hardware buffer overflowed", early[0])
            self.assertIn("the next capture tries again", early[0])
            self.assertIn("longest call", early[0])
            self.assertTrue(early[0].endswith("raise --pm-sample-buffer or the interval"), early[0])
            ms = int(re.search(r"stopped early, (\d+) ms in", early[0]).group(1))
            self.assertTrue(300 <= ms <= 700, early[0])  # found at a decode (every 100 ms)
            span = self.sm_span(x)
            self.assertIsNotNone(span, w)
            self.assertLess(span, 4 * 10**8)  # the first 0.3 s only: no restart
            self.released(a, n + 1)
        self.assertEqual(a.finish(), 0)

    def test_a_failed_decode_ends_sampling_for_the_capture(self):
        """A decode that fails otherwise (UNKNOWN) ends sampling on that
        GPU for the capture: the counters before are kept, the failure is
        said once, no decode is tried again; the next capture samples
        again with a new object. The fake fails decodes from 300 ms."""
        a, _ = self.app(FAKE_CUPTI_PM="decode-fail")
        for n in range(2):
            x, w = self.stall_capture()
            failed = [s for s in w if "cuptiPmSamplingDecodeData" in s and "GPU 0" in s]
            self.assertEqual(len(failed), 1, w)
            self.assertIn("CUPTI_ERROR_UNKNOWN", failed[0])
            span = self.sm_span(x)
            self.assertTrue(span is not None and span < 4 * 10**8, (span, w))
            self.released(a, n + 1)
        self.assertEqual(a.finish(), 0)

    def stretch_capture(self, mode):
        """A 1.5 s capture of an app on the fake in FAKE_CUPTI_PM=@mode:
        the app, the warnings, and the gaps between GPU 0's SM samples."""
        a, _ = self.app(FAKE_CUPTI_PM=mode)
        x, _, _, _ = self.capture(request(1500, gpu_pm_sample_counters="default",
                                          gpu_pm_sample_interval_us=INTERVAL_US), lambda: time.sleep(1.1), a)
        ts = sorted(t for t, _ in counters(x, "/device:GPU:0", {SM}).get(SM, []))
        return a, list(x.warnings), [hi - lo for lo, hi in zip(ts, ts[1:])]

    def test_a_stretch_without_samples_is_said(self):
        """An H200 gave one sample, then none for ~0.6 s, with no overflow
        said; a flat counters line there must not read as an idle GPU. The
        fake gives two samples, then none until 300 ms after the start:
        one notice a GPU names the hole, and the samples show it."""
        _, w, gaps = self.stretch_capture("gap")
        self.assertTrue(gaps and max(gaps) >= 270 * 10**6, gaps[:5])
        holes = [s for s in w if "gave no samples" in s and "GPU 0 " in s]
        self.assertEqual(len(holes), 1, (w, gaps[:5]))
        ms = int(re.search(r"no samples for (\d+) ms, from (\d+) ms", holes[0]).group(1))
        self.assertTrue(270 <= ms <= 290, holes[0])  # 300 ms less the two 10 ms samples
        self.assertIn("from 20 ms after its first sample", holes[0])
        self.assertFalse([s for s in w if "overflowed" in s or "no hardware counters" in s], w)

    def test_one_long_sample_is_said(self):
        """The other reading of the H200's 0.6-0.9 s after its first sample:
        one sample that long, not a hole. The fake's third sample lasts
        until 300 ms in: one notice a GPU gives its length and place, no
        hole is said (there is none between samples), and the counters line
        has one point for the stretch."""
        a, w, gaps = self.stretch_capture("long")
        self.assertTrue(gaps and 270 * 10**6 <= max(gaps) <= 290 * 10**6, gaps[:5])
        longs = [s for s in w if "gave one sample" in s]
        self.assertEqual(len(longs), 2, w)  # one a GPU
        for s in longs:
            self.assertIn(f"pid {a.pid}", s)
            self.assertIn("280 ms long, 20 ms after its first (the interval is 10000 us)", s)
        self.assertFalse([s for s in w if "gave no samples" in s or "overflowed" in s
                          or "no hardware counters" in s], w)

    def test_each_gpu_says_its_own_trouble(self):
        """One GPU's full buffer says nothing of another's: GPU 0's buffer
        fills 300 ms in, GPU 1 gives no samples from 20 ms to 300 ms. Each
        gets its own notice; GPU 0's stop is not also said as a hole
        (the overflow explains it), and GPU 1 keeps sampling to the end."""
        a, _ = self.app(FAKE_CUPTI_PM="stall:0,gap:1")
        x, w = self.stall_capture()
        early = [s for s in w if "stopped early" in s]
        self.assertEqual(len(early), 1, w)
        self.assertIn("on GPU 0 ", early[0])
        holes = [s for s in w if "gave no samples" in s]
        self.assertEqual(len(holes), 1, w)
        self.assertIn("GPU 1 ", holes[0])
        self.assertFalse([s for s in w if "overflowed" in s and "GPU 1" in s], w)
        ts = sorted(t for t, _ in counters(x, "/device:GPU:1", {SM}).get(SM, []))
        self.assertTrue(ts and ts[-1] - ts[0] > 8 * 10**8, w)  # no stop on GPU 1
        self.assertLess(self.sm_span(x), 4 * 10**8)
        self.assertEqual(a.finish(), 0)

    def test_cupti_held_by_another_profiler(self):
        """Item 4: the job's CUPTI is taken (here by Nsight Systems): the
        warning names it; NVML counters and the other planes stay."""
        self.with_nvml()
        a, _ = self.app(FAKE_CUPTI_SUBSCRIBE="busy")
        x, _, _, _ = self.capture(request(1000, gpu_pm_sample_counters="default"),
                                  lambda: a.ask("launch 2 _Z6vecAddPKfS0_Pfi 0 7"), None, lead=0.6)
        w = list(x.warnings)
        busy = [s for s in w if "another profiler already subscribed" in s]
        self.assertEqual(len(busy), 1, w)
        self.assertIn("Nsight Systems", busy[0])
        self.assertIn(f"pid {a.pid}", busy[0])
        self.assertEqual(kernels(x), [])
        self.assertTrue(counters(x, "/device:GPU:0", {"gpu_util_pct"}), w)
        self.assertTrue([p for p in x.planes if p.name == "/host:CPU"])


@unittest.skipUnless(FAKE_AGENT, "no fake agent")
class HostileSamples(unittest.TestCase):
    def test_hostile_values_dropped_and_counted(self):
        """fake-agent --pm-hostile (tests/agent/fake-agent.c pm_round()):
        only the two good values are written; the rest is counted in one
        warning; the kernels of the same payload stay."""
        tmp = tempfile.mkdtemp(prefix="profd-pmh-")
        sock = os.path.join(tmp, "agent.sock")
        devs = "GPU-00112233-4455-6677-8899-aabbccddee00,GPU-00112233-4455-6677-8899-aabbccddee01"
        with T.Daemon("--agent-socket", sock) as d:
            a = subprocess.Popen([FAKE_AGENT, "--socket", sock, "--devices", devs, "--pm-hostile"],
                                 stdout=subprocess.PIPE, text=True)
            self.assertEqual(a.stdout.readline().strip(), "connected")
            with T.channel(d.addr) as ch:
                resp = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)(
                    T.profile_request(P, 500, "h:1"), timeout=30)
            a.wait(timeout=10)
            a.stdout.close()
            x = T.decode_xspace(P, resp.tool_data[0].data)
        w = list(x.warnings)
        c = counters(x, "/device:GPU:0", {"good_metric.pct", "other_metric.sum"})
        self.assertEqual({k: [v for _, v in pts] for k, pts in c.items()},
                         {"good_metric.pct": [42.0], "other_metric.sum": [3.0]}, w)
        self.assertEqual(counters(x, "/device:GPU:1", {"good_metric.pct", "other_metric.sum"}), {})
        p, l = pm_line(x, "/device:GPU:0")
        got = sorted((p.event_metadata[e.metadata_id].name, s.uint64_value) for e in l.events
                     for s in e.stats if p.stat_metadata[s.metadata_id].name == "counter_value")
        self.assertEqual(got, [("good_metric.pct", 42), ("other_metric.sum", 3)])
        notes = [s for s in w if "hardware counter samples dropped" in s]
        self.assertEqual(len(notes), 1, w)
        self.assertIn("3 values infinite, negative or above", notes[0])
        self.assertIn("2 samples of a device whose metrics were not announced", notes[0])
        self.assertIn("3 values of unnamed metrics", notes[0])
        self.assertTrue([e for pl in x.planes if pl.name == "/device:GPU:0" for ln in pl.lines
                         if ln.name.startswith("Stream") for e in ln.events], w)


if __name__ == "__main__":
    unittest.main(verbosity=2)
