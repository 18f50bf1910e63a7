# SPDX-License-Identifier: MIT
"""How a capture ends: Terminate, client cancel, client deadline, daemon
SIGTERM; and serving on the IPv6 loopback."""
import signal
import socket
import subprocess
import sys
import time
import unittest

import grpc

import profdtest as T
from helpers import P, rpc_error, status, wait_active, wait_log
from xspacecheck import check_xspace, task_env


class Lifecycle(T.DaemonCase):
    @classmethod
    def daemon_args(cls):
        return ["--hostname", "itest-life"]

    def tearDown(self):
        # Whatever a test did, nothing may stay open afterwards.
        self.assertEqual(wait_active(self.d.addr, 0), 0, self.d.log())

    def test_terminate_stops_early_with_data(self):
        req = T.profile_request(P, 10000, self.d.addr, session_id="term-1")
        t0 = time.time_ns()
        fut = self.profile.future(req, timeout=30)
        time.sleep(0.5)
        t_term = time.time()
        self.terminate(P.ps.TerminateRequest(session_id="term-1"), timeout=5)
        self.assertLess(time.time() - t_term, 0.5, "Terminate answers at once")
        resp = fut.result(timeout=5)
        t1 = time.time_ns()
        self.assertLess(t1 / 1e9 - t_term, 1.5, "the capture ends soon after Terminate")
        x = P.xp.XSpace.FromString(resp.tool_data[0].data)
        start, stop, _ = check_xspace(self, x, "itest-life", t0, t1, empty_trace=resp.empty_trace)
        self.assertAlmostEqual((stop - start) / 1e9, 0.5, delta=0.15)
        # The daemon may write its log line after the answer went out.
        T.wait_for(lambda: "1 capture(s) stopped" in self.d.log(), 2)
        self.assertIn("terminate 'term-1'", self.d.log())
        self.assertIn("1 capture(s) stopped", self.d.log())

    def test_terminate_unknown_id_is_ok(self):
        self.terminate(P.ps.TerminateRequest(session_id="no-such"), timeout=5)
        self.assertIn("terminate 'no-such'", self.d.log())
        self.assertIn("0 capture(s) stopped", self.d.log())

    def test_client_strings_cannot_forge_log_lines(self):
        # Terminate ids and outside repository roots are logged as sent; a
        # newline in them must not start a new (journald: "<0>" = emergency) line.
        self.terminate(P.ps.TerminateRequest(session_id="evil\n<0>profd: forged-1"), timeout=5)
        req = T.profile_request(P, 20, self.d.addr, session_id="logroot")
        req.repository_root = "/nowhere\r\n<0>profd: forged-2"
        self.profile(req, timeout=10)
        log = self.d.log()
        self.assertIn("forged-1", log)
        self.assertIn("forged-2", log)
        for line in log.splitlines():
            self.assertFalse(line.startswith("<0>"), line)
        self.assertNotIn("\r", log)

    def test_refused_capture_is_logged(self):
        req = T.profile_request(P, 100, self.d.addr, session_id="refused-1")
        req.opts.duration_ms = 0
        req.duration_ms = 0
        with self.assertRaises(grpc.RpcError) as cm:
            self.profile(req, timeout=10)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        line = [l for l in self.d.log().splitlines() if "capture 'refused-1' for " in l]
        self.assertEqual(len(line), 1, self.d.log()[-2000:])
        self.assertIn("refused: duration_ms must be greater than 0", line[0])

    def test_owner_stops_its_capture_named_like_monitors_windows(self):
        # Monitor's windows (id profd-monitor) have no owner and stay open;
        # a client's own capture of that name is its to stop, token or not.
        mon = self.monitor.future(P.ps.MonitorRequest(duration_ms=1500), timeout=30)
        fut = self.profile.future(T.profile_request(P, 10000, self.d.addr, session_id="profd-monitor"),
                                  timeout=30)
        self.assertEqual(wait_active(self.d.addr, 2), 2)
        t0 = time.time()
        self.terminate(P.ps.TerminateRequest(session_id="profd-monitor"), timeout=5)
        fut.result(timeout=5)
        self.assertLess(time.time() - t0, 2)
        self.assertIn("terminate 'profd-monitor'", self.d.log())
        self.assertEqual(wait_active(self.d.addr, 1, timeout=0.3), 1)  # Monitor's window still open
        text = mon.result(timeout=10).data
        self.assertGreaterEqual(float(text.split(": ", 1)[1].split(" ms window")[0]), 1400, text)

    def test_terminate_leaves_no_stale_flag(self):
        # Upstream keeps a flag for an unknown id and a later Profile with
        # that id stops at once; profd only stops captures running now.
        self.terminate(P.ps.TerminateRequest(session_id="stale"), timeout=5)
        resp = self.profile(T.profile_request(P, 300, self.d.addr, session_id="stale"), timeout=10)
        start, stop = task_env(self, P.xp.XSpace.FromString(resp.tool_data[0].data))
        self.assertGreaterEqual(stop - start, 300 * 10**6)

    def test_terminate_stops_every_capture_with_the_id(self):
        futs = [self.profile.future(T.profile_request(P, 10000, self.d.addr, session_id="shared"), timeout=30)
                for _ in range(3)]
        self.assertEqual(wait_active(self.d.addr, 3), 3)
        self.terminate(P.ps.TerminateRequest(session_id="shared"), timeout=5)
        for f in futs:
            self.assertEqual([t.name for t in f.result(timeout=5).tool_data], ["xplane.pb"])
        self.assertIn("terminate 'shared'", self.d.log())
        self.assertIn("3 capture(s) stopped", self.d.log())

    def test_terminate_other_id_does_not_stop(self):
        req = T.profile_request(P, 600, self.d.addr, session_id="term-keep")
        fut = self.profile.future(req, timeout=30)
        time.sleep(0.2)
        self.terminate(P.ps.TerminateRequest(session_id="term-other"), timeout=5)
        resp = fut.result(timeout=10)
        start, stop = task_env(self, P.xp.XSpace.FromString(resp.tool_data[0].data))
        self.assertAlmostEqual((stop - start) / 1e9, 0.6, delta=0.1)

    def test_client_cancel_frees_session(self):
        req = T.profile_request(P, 5000, self.d.addr, session_id="cancel-1")
        fut = self.profile.future(req, timeout=30)
        self.assertEqual(wait_active(self.d.addr, 1), 1)
        n_before = self.d.log().count("cancelled by the client")
        fut.cancel()
        t0 = time.time()
        self.assertTrue(fut.cancelled())
        self.assertEqual(wait_active(self.d.addr, 0, timeout=2), 0, self.d.log())
        self.assertLess(time.time() - t0, 1.0)
        # The log line may land just after Status stops counting the
        # session (seen once under a loaded CI run): wait for it, briefly.
        self.assertTrue(T.wait_for(lambda: self.d.log().count("cancelled by the client") == n_before + 1, 2),
                        self.d.log()[-2000:])
        time.sleep(0.1)
        self.assertEqual(self.d.log().count("cancelled by the client"), n_before + 1)  # once, not twice

    def test_deadline_shorter_than_duration(self):
        req = T.profile_request(P, 5000, self.d.addr, session_id="deadline-1")
        n_before = self.d.log().count("cancelled by the client")
        t0 = time.time()
        e = rpc_error(self.profile, req, timeout=0.5)
        took = time.time() - t0
        self.assertEqual(e.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertAlmostEqual(took, 0.5, delta=0.3)
        self.assertEqual(wait_active(self.d.addr, 0, timeout=2), 0, self.d.log())
        self.assertTrue(wait_log(self.d, "cancelled by the client") and
                        self.d.log().count("cancelled by the client") == n_before + 1, self.d.log())

    def test_cancel_and_deadline_while_waiting_for_start(self):
        req = T.profile_request(P, 300, self.d.addr, session_id="wait-cancel", delay_ms=3000)
        fut = self.profile.future(req, timeout=30)
        self.assertEqual(wait_active(self.d.addr, 1), 1)
        fut.cancel()
        self.assertEqual(wait_active(self.d.addr, 0, timeout=2), 0, self.d.log())
        req = T.profile_request(P, 300, self.d.addr, session_id="wait-deadline", delay_ms=3000)
        t0 = time.time()
        e = rpc_error(self.profile, req, timeout=0.4)
        self.assertEqual(e.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertLess(time.time() - t0, 1.0)
        self.assertEqual(wait_active(self.d.addr, 0, timeout=2), 0, self.d.log())

    def test_client_process_killed(self):
        code = ("import sys, time, profdtest as T\n"
                "P = T.protos()\n"
                "ch = T.channel(sys.argv[1])\n"
                "f = T.stub(ch, 'Profile', P.ps.ProfileRequest, P.ps.ProfileResponse).future(\n"
                "    T.profile_request(P, 10000, sys.argv[1], session_id='killed'), timeout=30)\n"
                "time.sleep(30)\n")
        child = subprocess.Popen([sys.executable, "-c", code, self.d.addr])
        try:
            self.assertEqual(wait_active(self.d.addr, 1, timeout=10), 1)
        finally:
            child.kill()
            child.wait()
        self.assertEqual(wait_active(self.d.addr, 0, timeout=3), 0, self.d.log())

    def test_status_reports_limits(self):
        s = status(self.d.addr)
        self.assertEqual(s.hostname, "itest-life")
        self.assertEqual(s.max_sessions, 16)
        self.assertEqual(s.max_duration_ms, 600000)
        self.assertAlmostEqual(s.now_unix_ns / 1e9, time.time(), delta=2)


class Shutdown(unittest.TestCase):
    def test_sigterm_during_capture(self):
        d = T.Daemon()
        with T.channel(d.addr) as ch:
            profile = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
            # Two open windows and one still waiting for its start time.
            futs = [profile.future(T.profile_request(P, 10000, d.addr, session_id=f"sigterm-{i}",
                                                     delay_ms=5000 if i == 2 else 0),
                                   timeout=30) for i in range(3)]
            self.assertEqual(wait_active(d.addr, 3), 3)
            t0 = time.time()
            d.proc.send_signal(signal.SIGTERM)
            for f in futs:
                e = f.exception(timeout=10)
                self.assertIsNotNone(e, "the capture must not succeed")
                self.assertEqual(e.code(), grpc.StatusCode.UNAVAILABLE, e.details())
                self.assertIn("shutting down", e.details())
            # Answered at once, not after the server's grace period.
            self.assertLess(time.time() - t0, 1)
        # Wait for the exit; d.stop() would signal a second time.
        rc = d.proc.wait(timeout=10)
        d.stop()
        self.assertEqual(rc, 0, d.log())
        self.assertLess(time.time() - t0, 5)
        self.assertIn("exit 0", d.log())
        # Each failed capture is one log line: session, caller, cause.
        for i in range(3):
            self.assertIn(f"capture 'sigterm-{i}' for ip:127.0.0.1 failed: profd is shutting down", d.log())

    def test_listen_failure_after_a_good_address_exits_1(self):
        # The first address is bound, the second is taken: a clean exit 1
        # with the reason, not an abort in the gRPC teardown.
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        try:
            r = subprocess.run([T.PROFD, "--listen", "127.0.0.1:0", "--listen", f"127.0.0.1:{port}"],
                               capture_output=True, text=True, timeout=20)
        finally:
            busy.close()
        self.assertEqual(r.returncode, 1, r.stderr[-2000:])
        self.assertIn(f"cannot listen on 127.0.0.1:{port}", r.stderr)
        self.assertIn("exit 1", r.stderr)

    def test_sigterm_idle(self):
        d = T.Daemon()
        self.assertEqual(d.stop(timeout=10), 0, d.log())

    def test_sigterm_with_idle_client_connection_is_prompt(self):
        # Nothing to wait for: an idle connection (a client that keeps its
        # channel) must not hold the exit for the whole grace period.
        d = T.Daemon()
        with T.channel(d.addr) as ch:
            T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)(
                T.profile_request(P, 5, d.addr), timeout=10)
            t0 = time.time()
            d.proc.send_signal(signal.SIGTERM)
            rc = d.proc.wait(timeout=10)
            took = time.time() - t0
        d.stop()
        self.assertEqual(rc, 0, d.log())
        self.assertLess(took, 1.0, d.log())


def have_ipv6_loopback():
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


@unittest.skipUnless(have_ipv6_loopback(), "no IPv6 loopback on this machine")
class Ipv6(unittest.TestCase):
    def test_wildcard_listener_takes_ipv4_and_ipv6(self):
        # The default listen address [::]:PORT must serve IPv4 clients too.
        d = T.Daemon("--listen", "[::]:0")
        try:
            for addr in (f"127.0.0.1:{d.port}", f"[::1]:{d.port}"):
                with T.channel(addr) as ch:
                    profile = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
                    resp = profile(T.profile_request(P, 50, addr, session_id="wild"), timeout=10)
                    self.assertEqual([t.name for t in resp.tool_data], ["xplane.pb"], addr)
            self.assertEqual(d.log().count("session 'wild', 50 ms"), 2)
        finally:
            self.assertEqual(d.stop(), 0, d.log())

    def test_listen_on_ipv6_loopback(self):
        with T.Daemon(host="::1") as d:
            self.assertTrue(d.addr.startswith("[::1]:"))
            with T.channel(d.addr) as ch:
                profile = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
                t0 = time.time_ns()
                resp = profile(T.profile_request(P, 200, d.addr, session_id="v6"), timeout=10)
                x = P.xp.XSpace.FromString(resp.tool_data[0].data)
                check_xspace(self, x, None, t0, time.time_ns(), empty_trace=resp.empty_trace)
            self.assertIn("ipv6:", d.log())  # the peer was seen over IPv6
            self.assertEqual(d.stop(), 0, d.log())


if __name__ == "__main__":
    unittest.main(verbosity=2)
