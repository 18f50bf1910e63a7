# SPDX-License-Identifier: MIT
"""Agent records with times no CUPTI would report (fake-agent --hostile-times):
durations of 2^62 ns and INT64_MAX ns, starts near UINT64_MAX, ends before
starts, starts long before the clock anchor and thirty years ahead, mixed
with a normal burst. profd must stay up, the capture must succeed, every
normal record must be there, and the hostile ones must be dropped or
clamped and counted in a warning."""
import os
import re
import subprocess
import threading
import time

import profdtest as T
import tfclient

P = T.protos()
FAKE = os.environ["FAKE_AGENT"]
UUID = "GPU-0badf00d-0000-0000-0000-000000000001"
ROUNDS = 5000
KERNELS = 5
# Per round (fake-agent.c hostile_round()): three start inside the window
# with absurd durations (clamped), five cannot be placed (dropped).
CLAMPED_PER_ROUND = 3
DROPPED_PER_ROUND = 5


def stat(plane, ev, name):
    for s in ev.stats:
        if plane.stat_metadata[s.metadata_id].name == name:
            return getattr(s, s.WhichOneof("value"))
    return None


def reap(a):
    """End a fake agent process (if still running) and close its pipes."""
    if a.poll() is None:
        a.kill()
    a.wait()
    a.stdout.close()
    a.stderr.close()


class Hostile(T.AgentDaemonCase):
    def agent(self, *extra):
        a = subprocess.Popen([FAKE, "--socket", self.sock, "--devices", UUID, "--name", "hostile",
                              "--kernels", str(KERNELS)] + list(extra),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(a.stdout.readline().strip(), "connected")
        deadline = time.time() + 10
        while time.time() < deadline and not self.status(P.profd.StatusRequest(), timeout=10).agents:
            time.sleep(0.05)
        return a

    def capture(self, sid):
        req = T.profile_request(P, 400, f"localhost:{self.d.port}", session_id=sid)
        resp = self.profile(req, timeout=60)  # raises on INTERNAL
        self.assertIsNone(self.d.proc.poll(), "profd died: " + self.d.log()[-2000:])
        return T.decode_xspace(P, resp.tool_data[0].data)

    def check(self, x, pid, rounds):
        ps = {p.name: p for p in x.planes}
        env = ps["Task Environment"]
        st = {env.stat_metadata[s.metadata_id].name: s.uint64_value for s in env.stats}
        win_ps = (st["profile_stop_time"] - st["profile_start_time"]) * 1000
        normal = {"kernel": 0, "api": 0, "gpu_other": 0}
        hostile = 0
        for name in ("/device:GPU:0", "/host:CPU"):
            p = ps[name]
            for line in p.lines:
                if T.line_pid(line) != pid:
                    continue
                for ev in line.events:
                    corr = stat(p, ev, "correlation_id")
                    # Events may reach past the window end by at most its length.
                    self.assertLessEqual(ev.offset_ps + ev.duration_ps, 2 * win_ps + 1000)
                    self.assertGreaterEqual(ev.offset_ps, 0)
                    if line.name.endswith("/GPU memory"):
                        continue  # the memory profile's events (test_agent_memory.py)
                    if corr & 0xffffffff == 0:
                        hostile += 1
                        continue
                    ename = p.event_metadata[ev.metadata_id].name
                    if name == "/host:CPU":
                        normal["api"] += 1
                        self.assertEqual(ev.duration_ps, 5000 * 1000)
                    elif ename.startswith("fake_gemm"):
                        normal["kernel"] += 1
                        self.assertEqual(ev.duration_ps, 50000 * 1000)
                    else:
                        normal["gpu_other"] += 1
        # 5 launches + 1 memcpy call; 5 kernels; memcpy, memset, alloc, free.
        self.assertEqual(normal, {"kernel": KERNELS, "api": KERNELS + 1, "gpu_other": 4})
        self.assertEqual(hostile, CLAMPED_PER_ROUND * rounds)
        if rounds:
            w = [w for w in x.warnings if f"pid {pid} (hostile)" in w and "impossible times" in w]
            self.assertEqual(len(w), 1, list(x.warnings))
            m = re.search(r"(\d+) records .* dropped; (\d+) durations", w[0])
            self.assertTrue(m, w[0])
            self.assertEqual(int(m.group(1)), DROPPED_PER_ROUND * rounds)
            self.assertEqual(int(m.group(2)), CLAMPED_PER_ROUND * rounds)

    def test_1_hostile_records_are_dropped_or_clamped(self):
        a = self.agent("--hostile-times", str(ROUNDS), "--captures", "2")
        try:
            x = self.capture("hostile1")
            self.check(x, a.pid, ROUNDS)
            # The daemon is fine afterwards: a second capture, same agent.
            x = self.capture("hostile2")
            self.check(x, a.pid, ROUNDS)
            self.assertEqual(a.wait(timeout=10), 0)
        finally:
            reap(a)

    def test_3_overlapping_windows_each_count_their_own(self):
        # A long window opens and the agent sends its hostile burst at once;
        # a short window opens after the burst and closes first. The burst
        # is the long window's alone, whichever closes first.
        a = self.agent("--hostile-times", str(ROUNDS), "--captures", "1")
        got = {}

        def long_capture():
            req = T.profile_request(P, 2500, f"localhost:{self.d.port}", session_id="long")
            got["long"] = self.profile(req, timeout=60)

        try:
            t = threading.Thread(target=long_capture)
            t.start()
            self.assertEqual(a.stdout.readline().strip(), "started")
            time.sleep(0.8)  # the burst, mapped before the short window opens
            short = self.capture("short")
            t.join(timeout=60)
            self.assertIn("long", got)
            long = T.decode_xspace(P, got["long"].tool_data[0].data)
            self.assertEqual(self.said(short, a.pid), (0, 0), list(short.warnings))
            self.assertEqual(self.said(long, a.pid), (DROPPED_PER_ROUND * ROUNDS, CLAMPED_PER_ROUND * ROUNDS),
                             list(long.warnings))
        finally:
            reap(a)

    def test_4_recorder_snapshots_each_count_their_own_period(self):
        # A capture has the agent's first burst; the flight recorder's first
        # period its second: the snapshot that ends the period says what
        # came since the period began (not since the process connected),
        # the next period's snapshot says nothing.
        start, snap, stop = tfclient.recorder_stubs(self.ch)
        a = self.agent("--hostile-times", str(ROUNDS), "--captures", "2")
        try:
            self.assertEqual(self.said(self.capture("before"), a.pid),
                             (DROPPED_PER_ROUND * ROUNDS, CLAMPED_PER_ROUND * ROUNDS))
            start(tfclient.continuous_profiling_request(P), timeout=10)
            self.assertEqual([a.stdout.readline().strip() for _ in range(3)], ["started", "stopped", "started"])
            time.sleep(0.8)  # the burst, mapped
            first = snap(P.ps.GetSnapshotRequest(), timeout=30).xspace
            second = snap(P.ps.GetSnapshotRequest(), timeout=30).xspace
            self.assertEqual(self.said(first, a.pid), (DROPPED_PER_ROUND * ROUNDS, CLAMPED_PER_ROUND * ROUNDS),
                             list(first.warnings))
            self.assertEqual(self.said(second, a.pid), (0, 0), list(second.warnings))
        finally:
            stop(P.ps.StopContinuousProfilingRequest(), timeout=10)
            reap(a)

    def test_5_the_agents_own_counts_each_window_its_own(self):
        # The agent counts its dropped buffers from its last fresh START,
        # and while the flight recorder runs that START is the recorder's:
        # a snapshot says what grew in its period (all of it by the first
        # one's flush), not the agent's running count again. Overlapping
        # captures are counted the same way (test_3): these counts were
        # once said by whichever window was open when STATS came.
        start, snap, stop = tfclient.recorder_stubs(self.ch)
        a = self.agent("--dropped", "7", "--captures", "1")
        try:
            start(tfclient.continuous_profiling_request(P), timeout=10)
            self.assertEqual(a.stdout.readline().strip(), "started")
            time.sleep(0.5)
            first = snap(P.ps.GetSnapshotRequest(), timeout=30).xspace
            second = snap(P.ps.GetSnapshotRequest(), timeout=30).xspace
            drops = lambda x: [w for w in x.warnings if f"GPU events dropped in pid {a.pid}" in w]  # noqa: E731
            self.assertEqual(drops(first), [f"GPU events dropped in pid {a.pid} (hostile): 7 CUPTI buffers, 0 records"],
                             list(first.warnings))
            self.assertEqual(drops(second), [], list(second.warnings))
        finally:
            stop(P.ps.StopContinuousProfilingRequest(), timeout=10)
            reap(a)

    def said(self, x, pid):
        """(dropped, shortened) in @x's warning of impossible times from @pid."""
        w = [w for w in x.warnings if f"pid {pid} (hostile)" in w and "impossible times" in w]
        self.assertLessEqual(len(w), 1, list(x.warnings))
        m = w and re.search(r"(\d+) records .* dropped; (\d+) durations", w[0])
        return (int(m.group(1)), int(m.group(2))) if m else (0, 0)

    def test_2_normal_agent_has_no_warning(self):
        a = self.agent()
        try:
            x = self.capture("normal")
            self.check(x, a.pid, 0)
            self.assertFalse([w for w in x.warnings if "impossible times" in w or "shortened" in w],
                             list(x.warnings))
            self.assertEqual(a.wait(timeout=10), 0)
        finally:
            reap(a)


if __name__ == "__main__":
    import unittest
    unittest.main(verbosity=2)
