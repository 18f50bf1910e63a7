# SPDX-License-Identifier: MIT
"""Capture windows: overlapping captures, delayed starts, option versions
and where the XSpace is delivered (tool_data or ProfileResponse.xspace)."""
import os
import shutil
import tempfile
import time
import unittest

import grpc

import profdtest as T
from helpers import P, rpc_error, wait_active
from xspacecheck import check_xspace, task_env


class Windows(T.DaemonCase):
    @classmethod
    def daemon_args(cls):
        cls.allowed = tempfile.mkdtemp(prefix="profd-allowed-")
        return ["--hostname", "itest-win", "--max-duration", "5s", "--repository-allow", cls.allowed]

    @classmethod
    def cleanup(cls):
        shutil.rmtree(cls.allowed, ignore_errors=True)

    def tearDown(self):
        self.assertEqual(wait_active(self.d.addr, 0), 0, self.d.log())

    def xspace(self, resp, t0=None, t1=None):
        self.assertEqual([t.name for t in resp.tool_data], ["xplane.pb"])
        x = P.xp.XSpace.FromString(resp.tool_data[0].data)
        return check_xspace(self, x, "itest-win", t0, t1, empty_trace=resp.empty_trace)

    def test_overlapping_captures_get_their_own_windows(self):
        t0 = time.time_ns()
        fa = self.profile.future(T.profile_request(P, 1500, self.d.addr, session_id="A"), timeout=10)
        time.sleep(0.5)
        tb = time.time_ns()
        fb = self.profile.future(T.profile_request(P, 500, self.d.addr, session_id="B"), timeout=10)
        rb = fb.result()
        tb1 = time.time_ns()
        ra = fa.result()
        t1 = time.time_ns()
        # check_xspace also asserts that every event lies in its own window.
        a0, a1, _ = self.xspace(ra, t0, t1)
        b0, b1, _ = self.xspace(rb, tb, tb1)
        self.assertAlmostEqual((a1 - a0) / 1e9, 1.5, delta=0.1)
        self.assertAlmostEqual((b1 - b0) / 1e9, 0.5, delta=0.1)
        self.assertAlmostEqual((b0 - a0) / 1e9, 0.5, delta=0.15)
        self.assertLess(a0, b0)
        self.assertLess(b1, a1)
        # B answered when its window closed, not when A's did.
        self.assertLess(tb1, a1)

    def test_delay_in_the_future(self):
        req = T.profile_request(P, 300, self.d.addr, session_id="delay", delay_ms=700)
        t0 = time.time_ns()
        start_at = req.opts.start_timestamp_ns
        resp = self.profile(req, timeout=10)
        t1 = time.time_ns()
        s, e, _ = self.xspace(resp, t0, t1)
        self.assertGreaterEqual(s, start_at - 2 * 10**6, "the window starts at start_timestamp_ns")
        self.assertGreaterEqual((s - t0) / 1e9, 0.69)
        self.assertLess((s - start_at) / 1e9, 0.1)
        self.assertAlmostEqual((e - s) / 1e9, 0.3, delta=0.06)

    def test_windows_never_shorter_or_earlier_than_asked(self):
        # Upstream traces while elapsed < duration and sleeps until
        # start_timestamp_ns: a window is never shorter than duration_ms and
        # never starts before the asked start, even with many calls at once.
        reqs = [T.profile_request(P, 100 + i, self.d.addr, session_id=f"many-{i}",
                                  delay_ms=30 if i % 2 else 0) for i in range(14)]
        futs = [self.profile.future(r, timeout=10) for r in reqs]
        for i, (r, f) in enumerate(zip(reqs, futs)):
            s, e = task_env(self, P.xp.XSpace.FromString(f.result().tool_data[0].data))
            self.assertGreaterEqual(e - s, r.opts.duration_ms * 10**6, f"{r.session_id}: window too short")
            self.assertLess(e - s, (r.opts.duration_ms + 50) * 10**6)
            if i % 2:
                self.assertGreaterEqual(s, r.opts.start_timestamp_ns, f"{r.session_id}: started early")

    def test_start_in_the_past_starts_at_once(self):
        req = T.profile_request(P, 200, self.d.addr, session_id="past")
        req.opts.start_timestamp_ns = time.time_ns() - 5 * 10**9
        t0 = time.time_ns()
        resp = self.profile(req, timeout=10)
        s, e, _ = self.xspace(resp, t0, time.time_ns())
        self.assertLess((s - t0) / 1e9, 0.1)
        self.assertAlmostEqual((e - s) / 1e9, 0.2, delta=0.05)

    def test_delay_beyond_max_is_refused(self):
        req = T.profile_request(P, 200, self.d.addr, session_id="far")
        req.opts.start_timestamp_ns = time.time_ns() + 6 * 10**9
        e = rpc_error(self.profile, req, timeout=10)
        self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("longest delay is 5000 ms", e.details())
        # Values past INT64_MAX are far in the future too, not in the past.
        for ts in (2**63 - 1, 2**63, 2**64 - 1):
            req.opts.start_timestamp_ns = ts
            e = rpc_error(self.profile, req, timeout=10)
            self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT, ts)
            self.assertIn("longest delay is 5000 ms", e.details())

    def test_terminate_while_waiting_for_start(self):
        req = T.profile_request(P, 300, self.d.addr, session_id="wait-term", delay_ms=3000)
        fut = self.profile.future(req, timeout=10)
        time.sleep(0.3)
        t0 = time.time()
        self.terminate(P.ps.TerminateRequest(session_id="wait-term"), timeout=5)
        resp = fut.result(timeout=5)
        self.assertLess(time.time() - t0, 1.0)
        s, e, _ = self.xspace(resp)
        self.assertLess((e - s) / 1e9, 0.05, "a window of ~0 s, closed at once")

    def test_version_0_uses_field_1(self):
        req = P.ps.ProfileRequest(duration_ms=300, host_name=self.d.addr, session_id="v0")
        req.opts.SetInParent()  # present but all defaults: version 0, no duration
        t0 = time.time_ns()
        resp = self.profile(req, timeout=10)
        s, e, _ = self.xspace(resp, t0, time.time_ns())
        self.assertAlmostEqual((e - s) / 1e9, 0.3, delta=0.06)
        # Without opts at all, too.
        resp = self.profile(P.ps.ProfileRequest(duration_ms=100), timeout=10)
        s, e, _ = self.xspace(resp)
        self.assertAlmostEqual((e - s) / 1e9, 0.1, delta=0.05)

    def test_opts_duration_wins_over_field_1(self):
        req = T.profile_request(P, 200, self.d.addr, session_id="both")
        req.duration_ms = 1200
        resp = self.profile(req, timeout=10)
        s, e, _ = self.xspace(resp)
        self.assertAlmostEqual((e - s) / 1e9, 0.2, delta=0.05)

    def test_emit_xspace(self):
        root = os.path.join(self.allowed, "emit")
        req = T.profile_request(P, 200, self.d.addr, session_id="emit", emit_xspace=True)
        req.repository_root = root
        t0 = time.time_ns()
        resp = self.profile(req, timeout=10)
        self.assertEqual(len(resp.tool_data), 0)
        self.assertTrue(resp.HasField("xspace"))
        s, e, _ = check_xspace(self, resp.xspace, "itest-win", t0, time.time_ns(),
                               empty_trace=resp.empty_trace)
        self.assertAlmostEqual((e - s) / 1e9, 0.2, delta=0.05)
        self.assertFalse(os.path.exists(root), "emit_xspace writes no file (as upstream)")


if __name__ == "__main__":
    unittest.main(verbosity=2)
