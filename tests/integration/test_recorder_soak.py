# SPDX-License-Identifier: MIT
"""The flight recorder over a minute of streaming (issue "flight recorder",
Must show): fake agents stream kernels into a recording for >= 60 s of
test time, logging every record they send (--stream-log: correlation id
and start on profd's clock), and the test checks against those logs:
  - a snapshot of the last 10 s holds exactly the records whose start lies
    in its window (the same set: count, first and last timestamps);
  - records the ring evicted are counted: the whole-period snapshot's
    warning names exactly how many of the period's records it lacks;
  - profd's RSS stays within 5 % while the ring is full and records keep
    coming, and the ring within --recorder-bytes;
  - a job killed mid-recording keeps its last second: every record it sent
    in the second before SIGKILL is in the next snapshot.
SOAK_SECONDS (default 60) stretches the run.
"""
import os
import re
import signal
import subprocess
import time
import unittest

import helpers
import profdtest as T
import xspacecheck
from test_recorder import v3_stubs, xprof_start_request

P = helpers.P
FAKE_AGENT = os.path.join(T.BUILD, "tests", "agent", "fake-agent")
SOAK_S = float(os.environ.get("SOAK_SECONDS", "60"))
RING = 4 << 20
RATE_A = 5000  # records/s of the job that lives (4 streams: the ring holds ~20 s of it)
RATE_B = 1000  # of the job killed half way


def read_log(path):
    """The wall start ns of every record a fake agent sent, sorted (a batch
    shares one start: a multiset; correlation ids are the agent's own, and
    profd may renumber them per process)."""
    out = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                out.append(int(parts[1]))
    return sorted(out)


def kernels_by_pid(x, start_ns):
    """{pid: sorted wall start ns of its kernels} in XSpace @x, whose
    offsets count from its profile_start_time @start_ns."""
    out = {}
    for plane in x.planes:
        if not plane.name.startswith("/device:GPU:"):
            continue
        for line in plane.lines:
            pid = T.line_pid(line)
            if pid is None:
                continue
            base = start_ns + line.timestamp_ns
            out.setdefault(pid, []).extend(base + e.offset_ps // 1000 for e in line.events)
    return {pid: sorted(v) for pid, v in out.items()}


def evicted_in(x):
    """The ring's eviction count a snapshot's warnings state (0 if none)."""
    for w in x.warnings:
        m = re.search(r"flight recorder: (\d+) older records were evicted", w)
        if m:
            return int(m.group(1))
    return 0


def in_window(log, a, b):
    return [t for t in log if a <= t < b]


@unittest.skipUnless(os.access(FAKE_AGENT, os.X_OK), "no fake agent built")
class RecorderSoak(T.AgentDaemonCase):
    @classmethod
    def daemon_args(cls):
        return super().daemon_args() + ["--recorder-bytes", str(RING), "--max-bytes", "64M"]

    def agent(self, log, rate, seconds):
        a = subprocess.Popen([FAKE_AGENT, "--socket", self.sock, "--events", str(int(rate * seconds)),
                              "--spread-ms", str(int(seconds * 1000)), "--stream-log", log],
                             stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (a.poll() is None and a.kill(), a.wait(), a.stdout.close()))
        self.assertEqual(a.stdout.readline().strip(), "connected")
        return a

    def test_a_minute_of_streaming(self):
        start, snap, stop = v3_stubs(self.ch)
        rs = T.stub(self.ch, "RecorderSnapshot", P.profd.RecorderSnapshotRequest, P.ps.ProfileResponse,
                    service="profd.Profd")
        log_a, log_b = os.path.join(self.tmp, "a.log"), os.path.join(self.tmp, "b.log")
        run_s = SOAK_S + 15
        # A is there before the recording starts, B joins it.
        a = self.agent(log_a, RATE_A, run_s)
        t0 = time.time()
        start(xprof_start_request(), timeout=5)
        self.assertEqual(a.stdout.readline().strip(), "started")
        b = self.agent(log_b, RATE_B, run_s)
        self.assertEqual(b.stdout.readline().strip(), "started")

        # Half way: B dies without a word (SIGKILL, between two of its
        # batches: its log then names all it sent).
        time.sleep(max(0, t0 + SOAK_S / 2 - time.time()))
        b.send_signal(signal.SIGUSR1)
        self.assertEqual(b.wait(), -signal.SIGKILL)
        killed = time.time_ns()
        time.sleep(1)
        r1 = snap(P.ps.GetSnapshotRequest(), timeout=30)
        x1 = r1.xspace
        s1, e1 = (int(v) for v in xspacecheck.task_env(self, x1))
        got1 = kernels_by_pid(x1, s1)
        la, lb = read_log(log_a), read_log(log_b)
        # B's last second is all there.
        last_b = [t for t in lb if t >= killed - 1000000000]
        self.assertGreater(len(last_b), RATE_B // 2)
        got_b = got1.get(b.pid, [])
        self.assertEqual(got_b[-len(last_b):], last_b)
        # What the period lacks is what the ring says it evicted.
        want1 = len(in_window(la, s1, e1)) + len(in_window(lb, s1, e1))
        have1 = len(got1.get(a.pid, [])) + len(got_b)
        self.assertGreater(want1 - have1, 0, "the ring should have evicted by now")
        self.assertEqual(evicted_in(x1), want1 - have1, list(x1.warnings))

        # The ring is full and records keep coming: RSS and the ring flat.
        rss = []
        while time.time() < t0 + SOAK_S:
            time.sleep(2.5)
            rss.append(T.proc_status_kib(self.d.proc.pid, "VmRSS"))
            st = helpers.status(self.d.addr).recorder
            self.assertLessEqual(st.held_bytes, RING)
        self.assertGreaterEqual(len(rss), 4)
        self.assertLessEqual(max(rss), min(rss) * 1.05, f"RSS (KiB) over the run: {rss}")

        # The last 10 s: exactly the records that started in them.
        r2 = rs(P.profd.RecorderSnapshotRequest(last_ms=10000), timeout=30)
        x2 = r2.xspace
        s2, e2 = (int(v) for v in xspacecheck.task_env(self, x2))
        self.assertEqual(e2 - s2, 10 * 1000000000)
        self.assertGreaterEqual(time.time() - t0, 60 if SOAK_S >= 60 else SOAK_S)
        la = read_log(log_a)
        want2 = in_window(la, s2, e2)
        got2 = kernels_by_pid(x2, s2).get(a.pid, [])
        self.assertGreater(len(want2), RATE_A * 9)
        self.assertEqual(len(got2), len(want2))
        self.assertEqual((got2[0], got2[-1]), (want2[0], want2[-1]))
        self.assertEqual(got2, want2)
        self.assertGreater(evicted_in(x2), 0, list(x2.warnings))
        st = helpers.status(self.d.addr).recorder
        self.assertEqual(st.snapshots, 2)
        self.assertGreater(st.evicted, 0)
        stop(P.ps.StopContinuousProfilingRequest(), timeout=5)
        self.assertEqual(a.stdout.readline().strip(), "stopped")
        print(f"rss KiB {rss}; last 10 s: {len(got2)} records; evicted {st.evicted}")


if __name__ == "__main__":
    helpers.main()
