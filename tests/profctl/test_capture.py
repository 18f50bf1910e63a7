# SPDX-License-Identifier: MIT
"""profctl capture end to end: real profd daemons on IPv4 and IPv6 loopback,
hosts down, retries, delay alignment; and the exact request on the wire
(against a recording Python server)."""
import glob
import os
import shutil
import subprocess
import tempfile
import time
import unittest

import profdtest as T
import synth
from fakeserver import FakeProfiler

P = T.protos()


free_port = T.free_port


def read_space(path):
    with open(path, "rb") as f:
        return P.xp.XSpace.FromString(f.read())


def env_times(space):
    env = next(p for p in space.planes if p.name == "Task Environment")
    st = {env.stat_metadata[s.metadata_id].name: s.uint64_value for s in env.stats}
    return st["profile_start_time"], st["profile_stop_time"]


class CaptureRealDaemons(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.a = T.Daemon()
        cls.b = T.Daemon()
        cls.v6 = T.Daemon(host="::1")

    @classmethod
    def tearDownClass(cls):
        for d in (cls.a, cls.b, cls.v6):
            assert d.stop() == 0, d.log()

    def setUp(self):
        self.logdir = tempfile.mkdtemp(prefix="profctl-cap-")

    def tearDown(self):
        shutil.rmtree(self.logdir)

    def capture(self, urls, *extra, session="s1", duration=200):
        return synth.run("capture", urls, "--logdir", self.logdir, "--duration-ms", duration,
                         "--session-id", session, "--allow-empty", *extra, timeout=120)

    def path(self, session, addr):
        return os.path.join(self.logdir, "plugins", "profile", session, addr.replace(":", "_") + ".xplane.pb")

    def test_one_host(self):
        r = self.capture(self.a.addr)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        p = self.path("s1", self.a.addr)
        self.assertTrue(os.path.isfile(p), r.stdout)
        self.assertIn("wrote " + p, r.stdout)
        self.assertIn("1 of 1 host returned data", r.stdout)
        space = read_space(p)
        start, stop = env_times(space)
        self.assertAlmostEqual((stop - start) / 1e6, 200, delta=60)
        self.assertEqual(len(space.hostnames), 1)

    def test_capture_says_what_the_capture_lacks(self):
        """The XSpace's own errors and warnings ("no GPU data: ...") are
        printed per host: the count and the first lines, all with -v. They
        are not a failure: the data is saved and the exit status is 0."""
        def count(n, what):
            return f"{n} {what}{'' if n == 1 else 's'}"

        for session, extra in (("notes", ()), ("notes-v", ("-v",))):
            r = self.capture(self.a.addr, *extra, session=session)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            space = read_space(self.path(session, self.a.addr))
            notes = [("error", e) for e in space.errors] + [("warning", w) for w in space.warnings]
            self.assertTrue([w for w in space.warnings if w.startswith("no GPU data")], notes)
            self.assertIn(f"  {self.a.addr}: {count(len(space.errors), 'error')}, "
                          f"{count(len(space.warnings), 'warning')} in the capture\n", r.stdout)
            shown = notes if extra else notes[:3]
            for kind, text in shown:
                self.assertIn(f"    {kind}: {text}\n", r.stdout)
            if len(notes) > len(shown):
                self.assertIn(f"    ... {len(notes) - len(shown)} more (profctl capture -v", r.stdout)
            else:
                self.assertNotIn(" more (", r.stdout)

    def test_several_hosts_in_parallel_ipv4_and_ipv6(self):
        urls = ",".join([self.a.addr, self.b.addr, self.v6.addr])
        t0 = time.time()
        r = self.capture(urls, duration=1500)
        took = time.time() - t0
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertLess(took, 3.5 * synth.SLOW, "hosts were not captured in parallel")
        self.assertIn("3 of 3 hosts returned data", r.stdout)
        for d in (self.a, self.b, self.v6):
            self.assertTrue(os.path.isfile(self.path("s1", d.addr)), r.stdout)
        # the IPv6 literal keeps its brackets, ':' -> '_' as in TF's client
        self.assertTrue(os.path.isfile(os.path.join(
            self.logdir, "plugins", "profile", "s1", f"[__1]_{self.v6.port}.xplane.pb")))
        self.assertEqual(glob.glob(os.path.join(self.logdir, "plugins", "profile", "s1", "*.tmp.*")), [])

    def test_grpc_prefix_on_every_entry_and_separate_args(self):
        r = synth.run("capture", f"grpc://{self.a.addr},grpc://{self.b.addr}", f"grpc://{self.v6.addr}",
                      "--logdir", self.logdir, "--duration-ms", 100, "--session-id", "g", "--allow-empty")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for d in (self.a, self.b, self.v6):
            self.assertTrue(os.path.isfile(self.path("g", d.addr)))

    def test_one_host_down_is_partial_success(self):
        dead = f"127.0.0.1:{free_port()}"
        r = self.capture(f"{self.a.addr},{dead}")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("1 of 2 hosts returned data", r.stdout)
        self.assertIn(f"FAILED {dead}: UNAVAILABLE", r.stdout)
        self.assertIn("hint: is the profiler server running", r.stdout)
        self.assertTrue(os.path.isfile(self.path("s1", self.a.addr)))
        self.assertFalse(os.path.exists(self.path("s1", dead)))

    def test_all_hosts_down_fails_after_retries(self):
        dead = [f"127.0.0.1:{free_port()}", f"[::1]:{free_port()}"]
        r = self.capture(",".join(dead), "--attempts", "2")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("attempt 1 of 2: no host returned data; retrying", r.stderr)
        self.assertIn("no host returned data", r.stderr)
        for d in dead:
            self.assertIn(f"FAILED {d}:", r.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.logdir, "plugins", "profile", "s1")))

    def test_tf_rule_empty_trace_is_no_data(self):
        # Without --allow-empty an empty trace counts as no data and is retried (TF's rule).
        r = synth.run("capture", self.a.addr, "--logdir", self.logdir, "--duration-ms", 100,
                      "--session-id", "e", "--attempts", "2", "--host-level", "0", "--device-level", "0")
        if r.returncode == 0:
            self.skipTest("this daemon returned data even with every tracer off")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(f"EMPTY  {self.a.addr}: the host answered with an empty trace", r.stdout)
        self.assertIn("attempt 1 of 2", r.stderr)
        self.assertFalse(os.path.exists(self.path("e", self.a.addr)))

    def test_delay_aligns_start_across_hosts(self):
        t0 = time.time_ns()
        r = self.capture(f"{self.a.addr},{self.v6.addr}", "--delay-ms", str(1000 * synth.SLOW), duration=100)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        sa, _ = env_times(read_space(self.path("s1", self.a.addr)))
        sb, _ = env_times(read_space(self.path("s1", self.v6.addr)))
        self.assertLess(abs(sa - sb) / 1e6, 30 * synth.SLOW)
        self.assertGreater((sa - t0) / 1e6, 950 * synth.SLOW)
        self.assertLess((sa - t0) / 1e6, 1000 * synth.SLOW + 500 * synth.SLOW)

    def test_progress_line_on_a_terminal(self):
        import pty
        import select
        try:
            master, slave = pty.openpty()
        except OSError as e:  # minimal containers and chroots: no /dev/ptmx or devpts
            self.skipTest(f"no pseudo-terminal here: {e}")
        p = subprocess.Popen([synth.PROFCTL, "capture", f"{self.a.addr},{self.b.addr}", "--logdir", self.logdir,
                              "--duration-ms", "800", "--delay-ms", "600", "--session-id", "tty",
                              "--allow-empty"], stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        buf = b""
        while True:
            r, _, _ = select.select([master], [], [], 20)
            if not r:
                break
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
        os.close(master)
        out, _ = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, out)
        text = buf.decode(errors="replace")
        self.assertIn("starting in", text)          # the countdown
        self.assertIn("capturing:", text)
        self.assertIn("2/2 hosts done", text)       # per-host completion
        self.assertIn(self.a.addr, text)

    def test_no_progress_line_when_not_a_terminal(self):
        r = self.capture(self.a.addr, duration=100)
        self.assertNotIn("\r", r.stderr)
        self.assertNotIn("capturing:", r.stderr)

    def test_usage_errors(self):
        r = synth.run("capture", self.a.addr, "--duration-ms", 100)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--logdir is required", r.stderr)
        r = synth.run("capture", "nonsense", "--logdir", self.logdir)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not HOST:PORT", r.stderr)
        r = synth.run("capture", self.a.addr, "--logdir", self.logdir, "--device-level", "5")
        self.assertEqual(r.returncode, 2)


    def test_option_keys_reach_the_daemon_typed(self):
        """--option values typed true/false -> bool, integer -> int64, else
        string: the daemon's warnings name the type it received."""
        r = self.capture(self.a.addr, "--option", "gpu_enable_nvtx_tracking=1",
                         "--option", "gpu_max_callback_api_events=true",
                         "--option", "gpu_max_activity_api_events=12abc",
                         "--option", "gpu_pm_sample_counters=-7",
                         "--option", "gpu_enable_cupti_activity_graph_trace=false",
                         "--option", "gpu_foo=x", session="opt")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        w = list(read_space(self.path("opt", self.a.addr)).warnings)
        for s in ["gpu_enable_nvtx_tracking takes a value of type bool, got int64",
                  "gpu_max_callback_api_events takes a value of type int64, got bool",
                  "gpu_max_activity_api_events takes a value of type int64, got string",
                  "gpu_pm_sample_counters takes a value of type string, got int64",
                  "unknown key 'gpu_foo'"]:
            self.assertTrue([x for x in w if s in x], (s, w))
        self.assertFalse([x for x in w if "graph_trace" in x], w)  # a bool, as it should be

    def test_option_usage_errors(self):
        for args, err in [(["--option", "novalue"], "expected KEY=VALUE"),
                          (["--option", "=1"], "expected KEY=VALUE"),
                          (["--option", "a=1", "--option", "a=2"], "--option a is given twice"),
                          ([x for i in range(33) for x in ("--option", f"k{i}=1")], "too many --option")]:
            r = synth.run("capture", self.a.addr, "--logdir", self.logdir, *args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(err, r.stderr)


class CaptureRequest(unittest.TestCase):
    """The request on the wire, checked field by field against protocol.md §3.5."""

    @classmethod
    def setUpClass(cls):
        sp, _ = synth.build(P)
        cls.xbytes = sp.SerializeToString()
        cls.fake = FakeProfiler(P, cls.xbytes, ports=2)

    @classmethod
    def tearDownClass(cls):
        cls.fake.stop()

    def test_same_request_as_tf_and_nonempty_reply_saved(self):
        logdir = tempfile.mkdtemp(prefix="profctl-req-")
        self.addCleanup(shutil.rmtree, logdir)
        urls = [f"127.0.0.1:{p}" for p in self.fake.ports]
        self.fake.reset()
        t0 = time.time_ns()
        r = synth.run("capture", ",".join("grpc://" + u for u in urls), "--logdir", logdir, "--duration-ms", 1234,
                      "--delay-ms", 500, "--host-level", 3, "--device-level", 0, "--python-level", 1)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(len(self.fake.requests), 2)
        sessions = {q.session_id for q in self.fake.requests}
        self.assertEqual(len(sessions), 1)
        session = sessions.pop()
        self.assertRegex(session, r"^\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d$")
        self.assertEqual(sorted(q.host_name for q in self.fake.requests), sorted(urls))
        for q, got_ns in zip(self.fake.requests, self.fake.received_ns):
            self.assertEqual(q.duration_ms, 1234)
            self.assertEqual(q.max_events, 1000000)
            self.assertEqual(list(q.tools), ["trace_viewer", "op_profile", "input_pipeline", "kernel_stats",
                                             "memory_viewer", "memory_profile", "overview_page", "pod_viewer",
                                             "tensorflow_stats", "xplane.pb"])
            self.assertEqual(q.repository_root, os.path.join(logdir, "plugins", "profile"))
            o = q.opts
            self.assertEqual(o.version, 1)
            self.assertTrue(o.include_dataset_ops)
            self.assertTrue(o.enable_hlo_proto)
            self.assertEqual((o.host_tracer_level, o.device_tracer_level, o.python_tracer_level), (3, 0, 1))
            self.assertEqual(o.duration_ms, 1234)
            self.assertEqual(o.repository_path, logdir)
            # start = the send time + delay. The request arrives after it is
            # sent: at most 500 ms (and a clock read) before the start, less
            # by however long it waited on a loaded machine. The lower bounds
            # still catch a start taken from the wrong clock or unit.
            lead_ms = (o.start_timestamp_ns - got_ns) / 1e6
            self.assertGreater(o.start_timestamp_ns, t0 + 500 * 10**6)
            self.assertLessEqual(lead_ms, 510)
            self.assertGreater(lead_ms, 500 - 2000 * synth.SLOW)
            self.assertFalse(q.HasField("emit_xspace") if hasattr(q, "HasField") and
                             "emit_xspace" in [f.name for f in q.DESCRIPTOR.fields if f.has_presence]
                             else q.emit_xspace)
            self.assertEqual(len(q.opts.advanced_configuration), 0)
        # both hosts got the same start instant
        self.assertEqual(len({q.opts.start_timestamp_ns for q in self.fake.requests}), 1)
        for u in urls:
            p = os.path.join(logdir, "plugins", "profile", session, u.replace(":", "_") + ".xplane.pb")
            with open(p, "rb") as f:
                self.assertEqual(f.read(), self.xbytes)
        self.assertEqual(glob.glob(os.path.join(logdir, "plugins", "profile", session, "*tf_stats*")), [])

    def test_option_is_sent_as_upstreams_client_encodes_it(self):
        logdir = tempfile.mkdtemp(prefix="profctl-req-")
        self.addCleanup(shutil.rmtree, logdir)
        self.fake.reset()
        r = synth.run("capture", f"127.0.0.1:{self.fake.ports[0]}", "--logdir", logdir, "--duration-ms", 50,
                      "--option", "gpu_enable_nvtx_tracking=false", "--option", "gpu_max_activity_api_events=100",
                      "--option", "gpu_pm_sample_counters=a.b,c", "--option", "neg=-5",
                      "--option", "big=99999999999999999999", "--option", "eq=a=b", "--option", "empty=")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        ac = self.fake.requests[0].opts.advanced_configuration
        got = {k: (v.WhichOneof("value"), getattr(v, v.WhichOneof("value"))) for k, v in ac.items()}
        self.assertEqual(got, {"gpu_enable_nvtx_tracking": ("bool_value", False),
                               "gpu_max_activity_api_events": ("int64_value", 100),
                               "gpu_pm_sample_counters": ("string_value", "a.b,c"),
                               "neg": ("int64_value", -5),
                               "big": ("string_value", "99999999999999999999"),  # not an int64
                               "eq": ("string_value", "a=b"),
                               "empty": ("string_value", "")})

    def test_empty_reply_is_retried_then_fails(self):
        fake = FakeProfiler(P, b"", empty=True)
        self.addCleanup(fake.stop)
        logdir = tempfile.mkdtemp(prefix="profctl-req-")
        self.addCleanup(shutil.rmtree, logdir)
        r = synth.run("capture", f"127.0.0.1:{fake.ports[0]}", "--logdir", logdir, "--duration-ms", 50,
                      "--attempts", 3)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(len(fake.requests), 3)
        self.assertEqual(len({q.session_id for q in fake.requests}), 1)
        self.assertIn("empty trace", r.stdout)

    def test_unwritable_logdir_says_why_and_is_not_retried(self):
        fake = FakeProfiler(P, self.xbytes)
        self.addCleanup(fake.stop)
        tmp = tempfile.mkdtemp(prefix="profctl-req-")
        self.addCleanup(shutil.rmtree, tmp)
        # A regular file where a directory must be: unwritable even for root.
        blocker = os.path.join(tmp, "file")
        with open(blocker, "w") as f:
            f.write("x")
        url = f"127.0.0.1:{fake.ports[0]}"
        r = synth.run("capture", url, "--logdir", blocker, "--duration-ms", 50, "--attempts", 3)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, rf"FAILED {url}: could not write \S+{url.replace(':', '_')}\.xplane\.pb: "
                                   r"Not a directory")
        self.assertIn("hint: the host answered, but its data could not be saved", r.stdout)
        self.assertEqual(len(fake.requests), 1)   # a local failure is not the host's: no retry
        self.assertNotIn("retrying", r.stderr)

    def test_dns_failure_says_the_name_does_not_resolve(self):
        logdir = tempfile.mkdtemp(prefix="profctl-req-")
        self.addCleanup(shutil.rmtree, logdir)
        r = synth.run("capture", "no-such-host.invalid:6009", "--logdir", logdir, "--duration-ms", 50,
                      "--attempts", 1)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("FAILED no-such-host.invalid:6009: UNAVAILABLE", r.stdout)
        self.assertIn("hint: the host name does not resolve", r.stdout)
        self.assertNotIn("is the profiler server running", r.stdout)

    def test_silent_port_bounded_wait_with_notice(self):
        # Accepts TCP connections and never says a word.
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        self.addCleanup(s.close)
        url = f"127.0.0.1:{s.getsockname()[1]}"
        logdir = tempfile.mkdtemp(prefix="profctl-req-")
        self.addCleanup(shutil.rmtree, logdir)
        t0 = time.monotonic()
        r = synth.run("capture", url, "--logdir", logdir, "--duration-ms", 300, "--grace-ms", 4000)
        took = time.monotonic() - t0
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertGreater(took, 4.0)
        self.assertLess(took, 4.3 + 3 * synth.SLOW)     # once, bounded: not 60 s, not 3 attempts
        self.assertIn(f"still waiting for {url} (giving up in", r.stderr)
        self.assertIn(f"FAILED {url}: DEADLINE_EXCEEDED: no reply 4.0 s after the capture window ended", r.stdout)
        self.assertIn("hint: the address accepted the connection but sent no reply", r.stdout)
        self.assertNotIn("shorter --duration-ms", r.stdout)

    def test_monitor_refused_and_dns_hints(self):
        r = synth.run("monitor", f"127.0.0.1:{free_port()}", "--duration-ms", 100)
        self.assertEqual(r.returncode, 1)
        self.assertIn("UNAVAILABLE", r.stderr)
        self.assertIn("hint: is the profiler server running", r.stderr)
        r = synth.run("monitor", "no-such-host.invalid:6009", "--duration-ms", 100)
        self.assertEqual(r.returncode, 1)
        self.assertIn("hint: the host name does not resolve", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
