# SPDX-License-Identifier: MIT
"""End to end with a TF-like capture client (tests/pylib/tfclient.py): one
host, two hosts in one call, the files written and their XSpace conventions.

The daemon writes the repository copy itself when --repository-allow covers
the client's logdir, so every capture leaves a file even when it holds no
events; the client writes the same path from tool_data only for non-empty
answers and retries empty ones (reference/protocol.md §3.7). Both outcomes
are asserted exactly, so the tests hold before and after collectors land.
"""
import os
import re
import shutil
import tempfile
import time
import unittest

import grpc

import profdtest as T
import tfclient
from helpers import P
from xspacecheck import check_xspace

SESSION_RE = re.compile(r"^\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d$")


free_port = T.free_port


class TfClient(unittest.TestCase):
    def setUp(self):
        self.logdir = tempfile.mkdtemp(prefix="profd-logdir-")
        self.daemons = []

    def tearDown(self):
        for d in self.daemons:
            rc = d.stop()
            self.assertEqual(rc, 0, d.log())
        shutil.rmtree(self.logdir, ignore_errors=True)

    def daemon(self, *args):
        d = T.Daemon(*args)
        self.daemons.append(d)
        return d

    def run_trace(self, service_addr, duration_ms, attempts):
        t0 = time.time_ns()
        try:
            res = tfclient.trace(service_addr, self.logdir, duration_ms, num_tracing_attempts=attempts,
                                 protos=P)
            err = None
        except tfclient.UnavailableError as e:
            res, err = None, e
        return t0, time.time_ns(), res, err

    def check_outcome(self, res, err, n_hosts, attempts):
        """Exactly upstream's rule: success iff some host had data."""
        tries = res.attempts if res else err.attempts
        last = tries[-1]
        self.assertEqual(len(last), n_hosts)
        if any(not r.empty for r in last):
            self.assertIsNone(err)
            for r in last:
                if not r.empty:
                    path = os.path.join(res.repository_root, res.session_id,
                                        r.address.replace(":", "_") + ".xplane.pb")
                    self.assertIn(path, res.files)
                    with open(path, "rb") as f:
                        self.assertEqual(f.read(), r.response.tool_data[0].data)
        else:
            self.assertIsNotNone(err, "no host had data: the client must raise")
            self.assertEqual(err.code, "UNAVAILABLE")
            self.assertEqual(len(tries), attempts, "retried up to num_tracing_attempts")
        # Every attempt reached every host and was answered OK, in-band.
        for attempt in tries:
            for r in attempt:
                self.assertEqual(r.code, grpc.StatusCode.OK, r.details)
                self.assertEqual([td.name for td in r.response.tool_data], ["xplane.pb"])
        return tries

    def test_one_host(self):
        d = self.daemon("--hostname", "itest-a", "--repository-allow", self.logdir)
        t0, t1, res, err = self.run_trace(f"grpc://{d.addr}", 300, 2)
        tries = self.check_outcome(res, err, 1, 2)
        sid = tries[0][0].request.session_id
        self.assertRegex(sid, SESSION_RE)
        # The daemon saw one capture per attempt, all with the same session id.
        self.assertEqual(d.log().count(f"session '{sid}', 300 ms"), len(tries))
        path = os.path.join(self.logdir, "plugins", "profile", sid, f"127.0.0.1_{d.port}.xplane.pb")
        with open(path, "rb") as f:
            data = f.read()
        x = P.xp.XSpace.FromString(data)
        start, stop, n = check_xspace(self, x, "itest-a", t0, t1)
        self.assertAlmostEqual((stop - start) / 1e6, 300, delta=60)
        # In-band copy of the last attempt == the file (the last write wins).
        self.assertEqual(tries[-1][0].response.tool_data[0].data, data)
        x2 = P.xp.XSpace.FromString(tries[-1][0].response.tool_data[0].data)
        check_xspace(self, x2, "itest-a", t0, t1, empty_trace=tries[-1][0].response.empty_trace)
        # No temporary files are left next to it.
        self.assertEqual(os.listdir(os.path.dirname(path)), [os.path.basename(path)])

    def test_two_hosts_in_one_call(self):
        a = self.daemon("--hostname", "itest-a", "--repository-allow", self.logdir)
        b = self.daemon("--hostname", "itest-b", "--repository-allow", self.logdir)
        addr = f"grpc://127.0.0.1:{a.port},grpc://127.0.0.1:{b.port}"
        t0, t1, res, err = self.run_trace(addr, 400, 1)
        tries = self.check_outcome(res, err, 2, 1)
        self.assertEqual([r.address for r in tries[0]], [f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"])
        sid = tries[0][0].request.session_id
        self.assertEqual(tries[0][1].request.session_id, sid)
        # host_name carries the port, so each daemon writes its own file.
        windows = []
        for d, name in ((a, "itest-a"), (b, "itest-b")):
            path = os.path.join(self.logdir, "plugins", "profile", sid, f"127.0.0.1_{d.port}.xplane.pb")
            with open(path, "rb") as f:
                x = P.xp.XSpace.FromString(f.read())
            start, stop, _ = check_xspace(self, x, name, t0, t1)
            self.assertAlmostEqual((stop - start) / 1e6, 400, delta=60)
            windows.append((start, stop))
        # Asked in parallel: the two windows overlap almost entirely (one
        # after the other, they would not overlap at all).
        self.assertLess(abs(windows[0][0] - windows[1][0]) / 1e6, 150)

    def test_no_repository_allow_client_writes_only(self):
        d = self.daemon("--hostname", "itest-a")
        _, _, res, err = self.run_trace(d.addr, 200, 1)
        tries = self.check_outcome(res, err, 1, 1)
        sid = tries[0][0].request.session_id
        sdir = os.path.join(self.logdir, "plugins", "profile", sid)
        written = sorted(os.listdir(sdir)) if os.path.isdir(sdir) else []
        # Only the client writes here, and only for a non-empty answer.
        self.assertEqual(written, [] if err else [f"127.0.0.1_{d.port}.xplane.pb"])

    def test_every_host_down_retries_then_raises(self):
        port = free_port()
        t0 = time.time()
        with self.assertRaises(tfclient.UnavailableError) as e:
            tfclient.trace(f"127.0.0.1:{port}", self.logdir, 100, num_tracing_attempts=3, protos=P)
        self.assertLess(time.time() - t0, 30)
        self.assertEqual(len(e.exception.attempts), 3)
        for attempt in e.exception.attempts:
            self.assertEqual(attempt[0].code, grpc.StatusCode.UNAVAILABLE)

    def test_client_deadline_and_retries_against_a_recorder(self):
        """The client itself, against an in-process server that records what
        it receives: one deadline for all attempts, max(60 s, 2 x duration)."""
        from concurrent import futures as cf
        seen = []

        def handler(req, ctx):
            seen.append((time.time(), ctx.time_remaining(), req))
            return P.ps.ProfileResponse(empty_trace=True)

        handler_ref = [handler]

        server = grpc.server(cf.ThreadPoolExecutor(max_workers=4))
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
            "tensorflow.ProfilerService",
            {"Profile": grpc.unary_unary_rpc_method_handler(
                lambda req, ctx: handler_ref[0](req, ctx),
                request_deserializer=P.ps.ProfileRequest.FromString,
                response_serializer=P.ps.ProfileResponse.SerializeToString)})])
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        try:
            for duration, expect in ((100, 60.0), (45000, 90.0)):
                seen.clear()
                with self.assertRaises(tfclient.UnavailableError) as e:
                    tfclient.trace(f"grpc://127.0.0.1:{port}", self.logdir, duration,
                                   num_tracing_attempts=3, session_id="fixed", protos=P)
                self.assertEqual(len(e.exception.attempts), 3)
                self.assertEqual(len(seen), 3)
                for t, remaining, req in seen:
                    self.assertEqual(req.session_id, "fixed")
                    self.assertEqual(req.opts.session_id, "fixed")
                    self.assertEqual(req.host_name, f"127.0.0.1:{port}")
                    self.assertEqual(req.repository_root, os.path.join(self.logdir, "plugins", "profile"))
                    # Deadline base is the session creation, shared by every attempt.
                    self.assertAlmostEqual(t + remaining - seen[0][0], expect, delta=1.0)
            # Data on the second attempt: saved, no third attempt; a dead
            # second host does not spoil the capture.
            seen.clear()
            data = P.xp.XSpace(hostnames=["rec"]).SerializeToString()

            def handler2(req, ctx):
                seen.append((time.time(), ctx.time_remaining(), req))
                if len(seen) == 1:
                    return P.ps.ProfileResponse(empty_trace=True)
                return P.ps.ProfileResponse(tool_data=[
                    P.ps.ProfileToolData(name="xplane.pb", data=data),
                    P.ps.ProfileToolData(name="x.tf_stats_helper_result", data=b"skip")])

            handler_ref[0] = handler2
            dead = free_port()
            res = tfclient.trace(f"127.0.0.1:{port},127.0.0.1:{dead}", self.logdir, 100,
                                 num_tracing_attempts=3, session_id="rec", protos=P)
            self.assertEqual(len(res.attempts), 2)
            self.assertEqual([r.code for r in res.attempts[1]],
                             [grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE])
            path = os.path.join(self.logdir, "plugins", "profile", "rec", f"127.0.0.1_{port}.xplane.pb")
            self.assertEqual(res.files, [path])
            self.assertEqual(os.listdir(os.path.dirname(path)), [os.path.basename(path)])
            with open(path, "rb") as f:
                self.assertEqual(f.read(), data)
        finally:
            server.stop(0)

    def test_client_rules(self):
        with self.assertRaises(tfclient.InvalidArgumentError):
            tfclient.trace("127.0.0.1:1", self.logdir, 0, protos=P)
        with self.assertRaises(tfclient.InvalidArgumentError):
            tfclient.trace("[::1]:6009", self.logdir, 100, protos=P)  # as upstream: no IPv6 literals
        req = tfclient.populate_request(P, "h:1", "/ld", "/ld/plugins/profile", "s", 1500, 700, 2, 1, 0)
        self.assertEqual(req.max_events, 1000000)
        self.assertEqual(list(req.tools)[-1], "xplane.pb")
        self.assertEqual(len(req.tools), 10)
        self.assertEqual((req.opts.version, req.opts.host_tracer_level, req.opts.device_tracer_level),
                         (1, 2, 1))
        self.assertAlmostEqual(req.opts.start_timestamp_ns / 1e9, time.time() + 0.7, delta=0.5)
        self.assertEqual((req.duration_ms, req.opts.duration_ms, req.host_name), (1500, 1500, "h:1"))
        self.assertEqual(req.opts.repository_path, "/ld")
        self.assertFalse(req.emit_xspace)


if __name__ == "__main__":
    unittest.main(verbosity=2)
