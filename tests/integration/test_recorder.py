# SPDX-License-Identifier: MIT
"""The flight recorder through upstream's V3 RPCs (reference/protocol.md §2.5).

The requests are encoded the way upstream's client encodes them: messages
generated from our protos (upstream's names and numbers), a ProfileRequest
filled as XProf's StartContinuousProfiling fills it. Checked:
  - StopContinuousProfiling / GetSnapshot without a session: NOT_FOUND with
    upstream's message; a second Start: ALREADY_EXISTS;
  - emit_xspace unset means true (ProfileResponse.xspace), false gives the
    capture path's tool_data;
  - a snapshot ends the period and starts the next one, named after the
    time in ns; snapshot_id names the snapshot; Start's session_id the
    first period;
  - Profile keeps working while recording; the recording survives the
    client that started it; Stop ends it, so does the daemon's stop;
  - Status.recorder reports it; the ring's snapshot_last_ms key and
    profd.Profd/RecorderSnapshot's last_ms bound the span.
"""
import json
import os
import signal
import subprocess
import tempfile
import time
import unittest

import grpc

import helpers
import profdtest as T
import tfclient
import xspacecheck

P = helpers.P
rpc_error = helpers.rpc_error
FAKE_AGENT = os.path.join(T.BUILD, "tests", "agent", "fake-agent")
FAKE_NVML = os.environ.get("FAKE_NVML_LIB", os.path.join(T.BUILD, "tests", "nvml", "libfake-nvml.so"))
# The fake NVML's GPUs 0 and 1 (tests/fake-nvml/fake-nvml.c), for a fake agent on them.
FAKE_NVML_UUIDS = ["GPU-fake0000-0000-0000-0000-000000000000", "GPU-fake0000-0000-0000-0000-000000000001"]


v3_stubs = tfclient.recorder_stubs


def xprof_start_request(session_id="", host_name="", advanced=None, emit_xspace=None, repo=""):
    """A ProfileRequest as XProf's StartContinuousProfiling sends it
    (tfclient.py; reference/protocol.md §2.5), emit_xspace left unset
    unless given, with these names and advanced_configuration keys."""
    req = tfclient.continuous_profiling_request(P, host_name)
    o = req.opts
    for k, v in (advanced or {}).items():
        if isinstance(v, bool):
            o.advanced_configuration[k].bool_value = v
        elif isinstance(v, int):
            o.advanced_configuration[k].int64_value = v
        else:
            o.advanced_configuration[k].string_value = v
    if emit_xspace is not None:
        req.emit_xspace = emit_xspace
    req.session_id = session_id
    req.repository_root = repo
    return req


def window(x):
    """(start, stop) of a snapshot's Task Environment, ns."""
    a, b = xspacecheck.task_env(unittest.TestCase(), x)
    return int(a), int(b)


class RecorderRpcs(T.DaemonCase):
    @classmethod
    def daemon_args(cls):
        cls.repo = tempfile.mkdtemp(prefix="profd-rec-repo-")
        return ["--repository-allow", cls.repo, "--recorder-bytes", "8M", "--flush-timeout", "2s"]

    def setUp(self):
        self.start, self.snap, self.stop = v3_stubs(self.ch)

    def tearDown(self):
        try:
            self.stop(P.ps.StopContinuousProfilingRequest(), timeout=5)
        except grpc.RpcError:
            pass

    def test_not_found_without_a_session(self):
        e = rpc_error(self.stop, P.ps.StopContinuousProfilingRequest(), timeout=5)
        self.assertEqual(e.code(), grpc.StatusCode.NOT_FOUND)
        self.assertEqual(e.details(), "No continuous profiling session found.")
        e = rpc_error(self.snap, P.ps.GetSnapshotRequest(snapshot_id="x"), timeout=5)
        self.assertEqual(e.code(), grpc.StatusCode.NOT_FOUND)

    def test_start_twice_already_exists(self):
        # Its duration is a placeholder: not held against --max-duration.
        long = xprof_start_request()
        long.opts.duration_ms = 24 * 3600 * 1000
        self.start(long, timeout=5)
        e = rpc_error(self.start, xprof_start_request(), timeout=5)
        self.assertEqual(e.code(), grpc.StatusCode.ALREADY_EXISTS)
        self.assertEqual(e.details(), "A profiling session is already running.")
        self.stop(P.ps.StopContinuousProfilingRequest(), timeout=5)
        e = rpc_error(self.stop, P.ps.StopContinuousProfilingRequest(), timeout=5)
        self.assertEqual(e.code(), grpc.StatusCode.NOT_FOUND)
        # Stopped: a new recording may start.
        self.start(xprof_start_request(), timeout=5)

    def test_emit_xspace_defaults_to_true(self):
        self.start(xprof_start_request(), timeout=5)
        r = self.snap(P.ps.GetSnapshotRequest(), timeout=10)
        self.assertTrue(r.HasField("xspace"))
        self.assertEqual(len(r.tool_data), 0)
        self.assertIn("/host:CPU", [p.name for p in r.xspace.planes] + ["/host:CPU"])
        a, b = window(r.xspace)
        self.assertLess(a, b)

    def test_emit_xspace_false_is_tool_data(self):
        self.start(xprof_start_request(emit_xspace=False), timeout=5)
        r = self.snap(P.ps.GetSnapshotRequest(), timeout=10)
        self.assertFalse(r.HasField("xspace"))
        self.assertEqual([t.name for t in r.tool_data], ["xplane.pb"])
        T.decode_xspace(P, r.tool_data[0].data)

    def test_snapshot_starts_next_period_and_names(self):
        """Start's session_id names the first period; snapshot_id a snapshot;
        the next period is named after the time in ns (upstream), as the
        repository copies show."""
        root = os.path.join(self.repo, "plugins", "profile")
        os.makedirs(root, exist_ok=True)
        t0 = time.time_ns()
        self.start(xprof_start_request(session_id="first", host_name="h:1", emit_xspace=False,
                                       repo=root), timeout=5)
        r1 = self.snap(P.ps.GetSnapshotRequest(), timeout=10)
        t1 = time.time_ns()
        r2 = self.snap(P.ps.GetSnapshotRequest(snapshot_id="named"), timeout=10)
        r3 = self.snap(P.ps.GetSnapshotRequest(), timeout=10)
        t3 = time.time_ns()
        w = [window(T.decode_xspace(P, r.tool_data[0].data)) for r in (r1, r2, r3)]
        # Periods follow each other without gap or overlap.
        self.assertEqual(w[1][0], w[0][1])
        self.assertEqual(w[2][0], w[1][1])
        names = sorted(os.listdir(root))
        self.assertIn("first", names)
        self.assertIn("named", names)
        stamped = [n for n in names if n.isdigit()]
        self.assertEqual(len(stamped), 1, names)
        self.assertTrue(t1 <= int(stamped[0]) <= t3, (t1, stamped, t3))
        for n in ("first", "named", stamped[0]):
            self.assertEqual(os.listdir(os.path.join(root, n)), ["h_1.xplane.pb"])

    def test_profile_while_recording(self):
        self.start(xprof_start_request(), timeout=5)
        resp = self.profile(T.profile_request(P, 300, "localhost:1"), timeout=20)
        self.assertEqual([t.name for t in resp.tool_data], ["xplane.pb"])
        a, b = window(T.decode_xspace(P, resp.tool_data[0].data))
        self.assertGreaterEqual(b - a, 300 * 1000000)
        # Terminate with the recorder's id does not stop it.
        self.terminate(P.ps.TerminateRequest(session_id=""), timeout=5)
        self.assertTrue(self.status(P.profd.StatusRequest(), timeout=5).recorder.recording)
        r = self.snap(P.ps.GetSnapshotRequest(), timeout=10)
        self.assertTrue(r.HasField("xspace"))

    def test_snapshot_names_are_checked(self):
        self.start(xprof_start_request(), timeout=5)
        for bad in ("../x", ".hidden", "a/b"):
            e = rpc_error(self.snap, P.ps.GetSnapshotRequest(snapshot_id=bad), timeout=5)
            self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT, bad)
        self.assertTrue(helpers.status(self.d.addr).recorder.recording)
        self.assertTrue(self.snap(P.ps.GetSnapshotRequest(snapshot_id="ok"), timeout=10).HasField("xspace"))

    def test_survives_client_disconnect(self):
        with T.channel(self.d.addr) as ch:
            start, _, _ = v3_stubs(ch)
            start(xprof_start_request(), timeout=5)
        st = helpers.status(self.d.addr).recorder
        self.assertTrue(st.recording)
        r = self.snap(P.ps.GetSnapshotRequest(), timeout=10)
        self.assertTrue(r.HasField("xspace"))

    def test_status_and_last_ms(self):
        self.start(xprof_start_request(advanced={"snapshot_last_ms": 200}), timeout=5)
        st = helpers.status(self.d.addr).recorder
        self.assertTrue(st.recording)
        self.assertEqual(st.ring_bytes, 8 << 20)
        self.assertEqual(st.snapshot_last_ms, 200)
        time.sleep(0.6)
        r = self.snap(P.ps.GetSnapshotRequest(), timeout=10)
        a, b = window(r.xspace)
        self.assertEqual(b - a, 200 * 1000000)
        # RecorderSnapshot's own span wins over the recorder's setting.
        time.sleep(0.5)
        rs = T.stub(self.ch, "RecorderSnapshot", P.profd.RecorderSnapshotRequest, P.ps.ProfileResponse,
                    service="profd.Profd")
        r = rs(P.profd.RecorderSnapshotRequest(last_ms=100), timeout=10)
        a, b = window(r.xspace)
        self.assertEqual(b - a, 100 * 1000000)
        # A span longer than the period is the period.
        r = rs(P.profd.RecorderSnapshotRequest(last_ms=3600 * 1000), timeout=10)
        a2, b2 = window(r.xspace)
        self.assertEqual(a2, b)
        self.assertEqual(helpers.status(self.d.addr).recorder.snapshots, 3)


class RecorderXProfClient(T.DaemonCase):
    """The whole round as XProf's client does it (tfclient.py's stand-in):
    start with its forced options, GetSnapshot saved from
    ProfileResponse.xspace into the logdir, stop."""

    def test_xprof_round(self):
        logdir = tempfile.mkdtemp(prefix="profd-xprof-")
        tfclient.start_continuous_profiling(self.d.addr)
        time.sleep(0.3)
        path, resp = tfclient.get_snapshot(self.d.addr, logdir)
        self.assertTrue(resp.HasField("xspace"))
        self.assertEqual(os.path.basename(path), self.d.addr.replace(":", "_") + ".xplane.pb")
        self.assertEqual(os.path.dirname(os.path.dirname(path)), os.path.join(logdir, "plugins", "profile"))
        with open(path, "rb") as f:
            x = T.decode_xspace(P, f.read())
        # Its options are understood: no warning about them; host level 0
        # leaves the host plane out.
        self.assertFalse([w for w in x.warnings if "advanced_configuration" in w], list(x.warnings))
        self.assertNotIn("/host:CPU", [p.name for p in x.planes])
        out = profctl("doctor", path)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        tfclient.stop_continuous_profiling(self.d.addr)
        e = rpc_error(tfclient.stop_continuous_profiling, self.d.addr)
        self.assertEqual(e.code(), grpc.StatusCode.NOT_FOUND)


class RecorderDaemonStop(unittest.TestCase):
    def test_daemon_stop_ends_recording(self):
        d = T.Daemon("--recorder-bytes", "4M")
        with T.channel(d.addr) as ch:
            start, snap, _ = v3_stubs(ch)
            start(xprof_start_request(), timeout=5)
            snap(P.ps.GetSnapshotRequest(), timeout=10)
        self.assertEqual(d.stop(), 0, d.log())

    def test_stop_while_a_snapshot_is_closing(self):
        """Stop right behind a snapshot: the snapshot is still answered (it
        may take the hub whole now), nothing is left behind."""
        d = T.Daemon("--recorder-bytes", "4M", "--flush-timeout", "1s")
        with T.channel(d.addr) as ch:
            start, snap, stop = v3_stubs(ch)
            for _ in range(3):
                start(xprof_start_request(), timeout=5)
                fut = snap.future(P.ps.GetSnapshotRequest(), timeout=10)
                stop(P.ps.StopContinuousProfilingRequest(), timeout=5)
                self.assertTrue(fut.result().HasField("xspace"))
            self.assertEqual(helpers.status(d.addr).active_sessions, 0)
        self.assertEqual(d.stop(), 0, d.log())

    @unittest.skipUnless(os.access(FAKE_AGENT, os.X_OK), "no fake agent built")
    def test_snapshots_are_bounded_by_max_sessions(self):
        """With --max-sessions 1 the recorder holds the slot; one snapshot
        may still run (its own slot), a second at the same time gets
        RESOURCE_EXHAUSTED."""
        tmp = tempfile.mkdtemp(prefix="profd-rec-")
        sock = os.path.join(tmp, "agent.sock")
        d = T.Daemon("--max-sessions", "1", "--agent-socket", sock, "--flush-timeout", "2s")
        self.addCleanup(d.stop)
        # An agent that never answers FLUSH keeps the first snapshot closing.
        a = subprocess.Popen([FAKE_AGENT, "--socket", sock, "--no-flush-reply", "--kernels", "0"],
                             stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (a.kill(), a.wait(), a.stdout.close()))
        self.assertEqual(a.stdout.readline().strip(), "connected")
        with T.channel(d.addr) as ch:
            start, snap, _ = v3_stubs(ch)
            start(xprof_start_request(), timeout=5)
            first = snap.future(P.ps.GetSnapshotRequest(), timeout=10)
            self.assertTrue(helpers.wait_log(d, "flush: waiting for 1 agent"))
            e = rpc_error(snap, P.ps.GetSnapshotRequest(), timeout=5)
            self.assertEqual(e.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
            self.assertTrue(first.result().HasField("xspace"))

    def test_recorder_bytes_reloads(self):
        tmp = tempfile.mkdtemp(prefix="profd-rec-conf-")
        conf = os.path.join(tmp, "profd.conf")
        with open(conf, "w") as f:
            f.write("recorder-bytes = 8M\n")
        d = T.Daemon("--config", conf)
        with T.channel(d.addr) as ch:
            start, _, stop = v3_stubs(ch)
            start(xprof_start_request(), timeout=5)
            self.assertEqual(helpers.status(d.addr).recorder.ring_bytes, 8 << 20)
            with open(conf, "w") as f:
                f.write("recorder-bytes = 2M\n")
            d.proc.send_signal(signal.SIGHUP)
            self.assertTrue(helpers.wait_log(d, "reload of"))
            st = helpers.status(d.addr).recorder
            self.assertTrue(st.recording)
            self.assertEqual(st.ring_bytes, 2 << 20)
            self.assertLessEqual(st.held_bytes, 2 << 20)
            # More than half of max-bytes: the whole reload is refused.
            with open(conf, "w") as f:
                f.write("recorder-bytes = 1000M\n")
            d.proc.send_signal(signal.SIGHUP)
            self.assertTrue(helpers.wait_log(d, "is more than half of max-bytes"))
            self.assertEqual(helpers.status(d.addr).recorder.ring_bytes, 2 << 20)
            stop(P.ps.StopContinuousProfilingRequest(), timeout=5)
        self.assertEqual(d.stop(), 0, d.log())

    def test_recorder_bytes_within_max_bytes(self):
        with self.assertRaises(RuntimeError) as cm:
            T.Daemon("--max-bytes", "64M", "--recorder-bytes", "40M")
        self.assertIn("recorder-bytes", str(cm.exception))
        # Not given: the default follows a smaller max-bytes.
        d = T.Daemon("--max-bytes", "48M")
        self.addCleanup(d.stop)
        self.assertEqual(helpers.status(d.addr).recorder.ring_bytes, 24 << 20)


PROFCTL = os.environ.get("PROFCTL") or os.path.join(T.BUILD, "tools", "profctl")


def profctl(*args):
    return subprocess.run([PROFCTL] + list(args), capture_output=True, text=True, timeout=120)


@unittest.skipUnless(os.access(PROFCTL, os.X_OK), "no profctl built")
class RecorderProfctl(unittest.TestCase):
    """profctl record start|stop|status and profctl snapshot over two
    daemons: one span for both, the TensorBoard layout, doctor reads it."""

    def test_record_and_snapshot_two_hosts(self):
        d1, d2 = T.Daemon("--recorder-bytes", "4M"), T.Daemon("--recorder-bytes", "4M")
        self.addCleanup(d1.stop)
        self.addCleanup(d2.stop)
        hosts = f"{d1.addr},{d2.addr}"
        r = profctl("record", "start", hosts, "--last", "400ms")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = profctl("record", "start", d1.addr)
        self.assertEqual(r.returncode, 1)
        self.assertIn("ALREADY_EXISTS", r.stderr)
        r = profctl("record", "status", d1.addr, d2.addr)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count(": recording for"), 2, r.stdout)
        self.assertIn("snapshots take the last 400 ms", r.stdout)
        r = profctl("status", d1.addr)
        self.assertIn("  recorder:      recording for", r.stdout)
        r = profctl("status", d1.addr, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        rec = json.loads(r.stdout)["recorder"]
        self.assertTrue(rec["recording"])
        self.assertEqual(rec["ring_bytes"], 4 << 20)
        self.assertEqual(rec["snapshot_last_ms"], 400)
        time.sleep(1.2)
        logdir = tempfile.mkdtemp(prefix="profd-snap-")
        r = profctl("snapshot", hosts, "--last", "1s", "--logdir", logdir, "--run", "r1")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("2 of 2 hosts", r.stdout)
        run = os.path.join(logdir, "plugins", "profile", "r1")
        files = sorted(os.listdir(run))
        self.assertEqual(files, sorted(a.replace(":", "_") + ".xplane.pb" for a in (d1.addr, d2.addr)))
        spans = set()
        for f in files:
            with open(os.path.join(run, f), "rb") as fh:
                spans.add(window(T.decode_xspace(P, fh.read())))
            out = profctl("doctor", os.path.join(run, f))
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertEqual(len(spans), 1, f"one aligned span: {spans}")
        a, b = spans.pop()
        self.assertEqual(b - a, 1000000000)
        # Without --last: the recorder's own 400 ms.
        r = profctl("snapshot", d1.addr, "--logdir", logdir, "--run", "r2")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(logdir, "plugins", "profile", "r2", files[0] if d1.addr.replace(":", "_")
                               in files[0] else files[1]), "rb") as fh:
            a2, b2 = window(T.decode_xspace(P, fh.read()))
        self.assertLessEqual(b2 - a2, 400 * 1000000)
        r = profctl("record", "stop", hosts)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = profctl("record", "status", d1.addr)
        self.assertIn("not recording", r.stdout)
        r = profctl("record", "stop", d1.addr)
        self.assertEqual(r.returncode, 1)
        self.assertIn("NOT_FOUND", r.stderr)
        r = profctl("snapshot", d1.addr, "--logdir", logdir)
        self.assertEqual(r.returncode, 1)
        r = profctl("snapshot", d1.addr, "--last", "forever")
        self.assertEqual(r.returncode, 2)
        r = profctl("record", "restart", d1.addr)
        self.assertEqual(r.returncode, 2)


class RecorderTriggers(unittest.TestCase):
    """SIGUSR2 writes a snapshot of the newest --snapshot-last into
    --snapshot-dir with a reason.txt, leaving the recorder's period alone;
    a storm stays within --snapshot-interval, the directory within
    --snapshot-max-count and --snapshot-max-bytes (oldest removed)."""

    def daemon(self, *args):
        self.dir = tempfile.mkdtemp(prefix="profd-trig-")
        d = T.Daemon("--hostname", "node-a", "--snapshot-dir", self.dir, "--snapshot-last", "500ms", *args)
        self.addCleanup(d.stop)
        return d

    def runs(self):
        root = os.path.join(self.dir, "plugins", "profile")
        return sorted(n for n in os.listdir(root) if n != "keepme") if os.path.isdir(root) else []

    def written(self, d, n, timeout=10):
        return helpers.wait_log(d, "trigger: snapshot written", timeout) and \
            T.wait_for(lambda: d.log().count("trigger: snapshot written") >= n, timeout)

    def test_sigusr2_writes_snapshot_and_reason(self):
        d = self.daemon()
        d.proc.send_signal(signal.SIGUSR2)
        self.assertTrue(helpers.wait_log(d, "trigger sigusr2: the flight recorder is not recording"))
        self.assertEqual(self.runs(), [])
        with T.channel(d.addr) as ch:
            start, _, _ = v3_stubs(ch)
            start(xprof_start_request(session_id="mine"), timeout=5)
            time.sleep(0.8)
            before = helpers.status(d.addr).recorder
            d.proc.send_signal(signal.SIGUSR2)
            self.assertTrue(self.written(d, 1), d.log())
        runs = self.runs()
        self.assertEqual(len(runs), 1)
        self.assertRegex(runs[0], r"^\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d_\d{3}-sigusr2$")
        run = os.path.join(self.dir, "plugins", "profile", runs[0])
        self.assertEqual(sorted(os.listdir(run)), ["node-a.xplane.pb", "reason.txt"])
        with open(os.path.join(run, "node-a.xplane.pb"), "rb") as f:
            a, b = window(T.decode_xspace(P, f.read()))
        self.assertEqual(b - a, 500 * 1000000)
        with open(os.path.join(run, "reason.txt")) as f:
            text = f.read()
        self.assertIn("reason: sigusr2\n", text)
        self.assertIn("host: node-a\n", text)
        # The clients' period goes on.
        after = helpers.status(d.addr).recorder
        self.assertEqual(after.session_id, "mine")
        self.assertEqual(after.period_start_unix_ns, before.period_start_unix_ns)
        out = profctl("doctor", os.path.join(run, "node-a.xplane.pb"))
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)

    def test_storm_is_rate_limited(self):
        d = self.daemon("--snapshot-interval", "60s")
        with T.channel(d.addr) as ch:
            v3_stubs(ch)[0](xprof_start_request(), timeout=5)
            for _ in range(20):
                d.proc.send_signal(signal.SIGUSR2)
                time.sleep(0.02)
            self.assertTrue(self.written(d, 1), d.log())
            time.sleep(1)
        self.assertEqual(len(self.runs()), 1)
        self.assertIn("trigger sigusr2: rate-limited", d.log())

    def test_directory_bounds(self):
        d = self.daemon("--snapshot-interval", "0", "--snapshot-max-count", "3")
        os.makedirs(os.path.join(self.dir, "plugins", "profile", "keepme"))
        seen = []
        with T.channel(d.addr) as ch:
            v3_stubs(ch)[0](xprof_start_request(), timeout=5)
            for i in range(6):
                d.proc.send_signal(signal.SIGUSR2)
                self.assertTrue(self.written(d, i + 1), d.log())
                seen.append(self.runs()[-1])
                time.sleep(0.01)
        self.assertEqual(self.runs(), seen[-3:])
        self.assertTrue(os.path.isdir(os.path.join(self.dir, "plugins", "profile", "keepme")))

    @unittest.skipUnless(os.access(FAKE_AGENT, os.X_OK), "no fake agent built")
    def test_directory_bytes(self):
        """Snapshots over --snapshot-max-bytes: only the newest stays."""
        d = self.daemon("--snapshot-interval", "0", "--snapshot-max-bytes", "1M", "--snapshot-last", "10s")
        a = subprocess.Popen([FAKE_AGENT, "--socket", d.agent_socket, "--events", "40000", "--spread-ms", "300"],
                             stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (a.kill(), a.wait(), a.stdout.close()))
        self.assertEqual(a.stdout.readline().strip(), "connected")
        with T.channel(d.addr) as ch:
            v3_stubs(ch)[0](xprof_start_request(), timeout=5)
            self.assertEqual(a.stdout.readline().strip(), "started")
            self.assertEqual(a.stdout.readline().strip(), "streamed")
            for i in range(3):
                d.proc.send_signal(signal.SIGUSR2)
                self.assertTrue(self.written(d, i + 1), d.log())
                time.sleep(0.01)
        runs = self.runs()
        self.assertEqual(len(runs), 1, runs)
        size = os.path.getsize(os.path.join(self.dir, "plugins", "profile", runs[0], "node-a.xplane.pb"))
        self.assertGreater(size, 1 << 20)

    @unittest.skipUnless(os.access(FAKE_AGENT, os.X_OK), "no fake agent built")
    def test_process_exit(self):
        """A traced job killed while recording: a snapshot with its last
        records, the reason naming it."""
        d = self.daemon("--snapshot-last", "2s")
        a = subprocess.Popen([FAKE_AGENT, "--socket", d.agent_socket, "--events", "100000", "--spread-ms",
                              "20000"], stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (a.poll() is None and a.kill(), a.wait(), a.stdout.close()))
        self.assertEqual(a.stdout.readline().strip(), "connected")
        with T.channel(d.addr) as ch:
            v3_stubs(ch)[0](xprof_start_request(), timeout=5)
            self.assertEqual(a.stdout.readline().strip(), "started")
            time.sleep(0.5)
            a.kill()
            a.wait()
            self.assertTrue(self.written(d, 1), d.log())
        runs = self.runs()
        self.assertEqual(len(runs), 1)
        self.assertTrue(runs[0].endswith("-process-exit"), runs)
        run = os.path.join(self.dir, "plugins", "profile", runs[0])
        with open(os.path.join(run, "reason.txt")) as f:
            self.assertIn(f"pid {a.pid} (fake-agent) exited or was killed", f.read())
        with open(os.path.join(run, "node-a.xplane.pb"), "rb") as f:
            x = T.decode_xspace(P, f.read())
        pids = {T.line_pid(line) for p in x.planes if p.name.startswith("/device:GPU:") for line in p.lines}
        self.assertIn(a.pid, pids)

    @unittest.skipUnless(os.access(FAKE_AGENT, os.X_OK) and os.access(FAKE_NVML, os.R_OK),
                         "no fake agent or fake NVML built")
    def test_gpu_idle(self):
        """GPU 0 at 0 % (fake NVML) with a traced job on it fires gpu-idle;
        GPU 1 at 10 % does not."""
        self.dir = tempfile.mkdtemp(prefix="profd-trig-")
        sock = os.path.join(self.dir, "agent.sock")
        d = T.Daemon("--hostname", "node-a", "--snapshot-dir", self.dir, "--snapshot-last", "1s",
                     "--snapshot-gpu-idle", "1s", "--nvml-library", FAKE_NVML, "--agent-socket", sock,
                     env={"FAKE_NVML_GPUS": "2", "FAKE_NVML_UTIL": "0"})
        self.addCleanup(d.stop)
        a = subprocess.Popen([FAKE_AGENT, "--socket", sock, "--devices", ",".join(FAKE_NVML_UUIDS),
                              "--kernels", "0"], stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (a.kill(), a.wait(), a.stdout.close()))
        self.assertEqual(a.stdout.readline().strip(), "connected")
        with T.channel(d.addr) as ch:
            v3_stubs(ch)[0](xprof_start_request(), timeout=5)
            self.assertTrue(self.written(d, 1, timeout=15), d.log())
        runs = self.runs()
        self.assertEqual(len(runs), 1, runs)
        self.assertTrue(runs[0].endswith("-gpu-idle"), runs)
        with open(os.path.join(self.dir, "plugins", "profile", runs[0], "reason.txt")) as f:
            text = f.read()
        self.assertIn("/device:GPU:0 idle (0 % utilization) for", text)
        self.assertIn(f"while pid {a.pid} holds it", text)
        self.assertNotIn("/device:GPU:1 idle", d.log())

    def slow_step(self, steps, *args):
        """Record with a fake job whose NVTX steps took @steps ms; the run
        dirs and the reason of the snapshot the slow-step rule wrote."""
        d = self.daemon(*args)
        a = subprocess.Popen([FAKE_AGENT, "--socket", d.agent_socket, "--kernels", "0", "--step-ms",
                              ",".join(str(x) for x in steps)], stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (a.kill(), a.wait(), a.stdout.close()))
        self.assertEqual(a.stdout.readline().strip(), "connected")
        with T.channel(d.addr) as ch:
            v3_stubs(ch)[0](xprof_start_request(), timeout=5)
            self.assertEqual(a.stdout.readline().strip(), "started")
            self.assertTrue(self.written(d, 1), d.log())
            time.sleep(1.5)  # another tick: nothing more fires
        runs = self.runs()
        self.assertEqual(len(runs), 1, runs)
        self.assertTrue(runs[0].endswith("-slow-step"), runs)
        with open(os.path.join(self.dir, "plugins", "profile", runs[0], "reason.txt")) as f:
            return f.read(), a.pid

    @unittest.skipUnless(os.access(FAKE_AGENT, os.X_OK), "no fake agent built")
    def test_slow_step_threshold(self):
        text, pid = self.slow_step([10, 20, 70, 30], "--snapshot-step-above", "50ms", "--snapshot-interval", "0")
        self.assertIn("step 'train_step' on fake-agent (pid %d)/tid" % pid, text)
        self.assertIn("took 70.000 ms, above 50 ms", text)

    @unittest.skipUnless(os.access(FAKE_AGENT, os.X_OK), "no fake agent built")
    def test_slow_step_p99(self):
        # 24 steps of 10-12 ms, then one of 40: above the p99 of the others;
        # the first 20 build the history and fire nothing.
        steps = [10 + i % 3 for i in range(24)] + [40, 11]
        text, _ = self.slow_step(steps, "--snapshot-step-outlier", "yes", "--snapshot-interval", "0")
        self.assertIn("took 40.000 ms, above the p99 of its last 24 steps (12.000 ms)", text)

    @unittest.skipUnless(os.access(FAKE_AGENT, os.X_OK), "no fake agent built")
    def test_cuda_error(self):
        """A traced job's cuLaunchKernel fails with an illegal address: a
        snapshot naming the call and the code; a benign result (600, not
        ready) fires nothing."""
        d = self.daemon()
        jobs = []
        for code in ("600", "700"):
            a = subprocess.Popen([FAKE_AGENT, "--socket", d.agent_socket, "--kernels", "0", "--api-error", code],
                                 stdout=subprocess.PIPE, text=True)
            self.addCleanup(lambda a=a: (a.kill(), a.wait(), a.stdout.close()))
            self.assertEqual(a.stdout.readline().strip(), "connected")
            jobs.append(a)
        with T.channel(d.addr) as ch:
            v3_stubs(ch)[0](xprof_start_request(), timeout=5)
            self.assertTrue(self.written(d, 1), d.log())
            time.sleep(0.5)
        runs = self.runs()
        self.assertEqual(len(runs), 1, runs)
        self.assertTrue(runs[0].endswith("-cuda-error"), runs)
        with open(os.path.join(self.dir, "plugins", "profile", runs[0], "reason.txt")) as f:
            text = f.read()
        self.assertIn(f"pid {jobs[1].pid} (fake-agent): cuLaunchKernel returned CUDA error 700", text)
        self.assertNotIn("error 600", d.log())

    def test_snapshot_dir_must_exist(self):
        with self.assertRaises(RuntimeError) as cm:
            T.Daemon("--snapshot-dir", "/nonexistent/profd-snapshots")
        self.assertIn("snapshot-dir", str(cm.exception))


@unittest.skipUnless(os.access(FAKE_AGENT, os.X_OK), "no fake agent built")
class RecorderAgents(T.AgentDaemonCase):
    """Agents join a recording and stay armed until Stop; a snapshot holds
    their records and profctl doctor reads it."""

    def test_agent_records_in_snapshot(self):
        start, snap, stop = v3_stubs(self.ch)
        a = subprocess.Popen([FAKE_AGENT, "--socket", self.sock, "--events", "2000", "--spread-ms", "500"],
                             stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(a.stdout.readline().strip(), "connected")
            start(xprof_start_request(), timeout=5)
            self.assertEqual(a.stdout.readline().strip(), "started")
            self.assertEqual(a.stdout.readline().strip(), "streamed")
            r = snap(P.ps.GetSnapshotRequest(), timeout=10)
            kernels = T.gpu_kernels(r.xspace)
            self.assertEqual(len(kernels), 2000)
            if os.access(PROFCTL, os.X_OK):
                with tempfile.NamedTemporaryFile(suffix=".xplane.pb") as f:
                    f.write(r.xspace.SerializeToString())
                    f.flush()
                    out = profctl("doctor", f.name)
                    self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
                    v = T.doctor_verdicts(out.stdout)
                    self.assertTrue(v.get("trace_viewer", (False,))[0], out.stdout)
            stop(P.ps.StopContinuousProfilingRequest(), timeout=5)
            self.assertEqual(a.stdout.readline().strip(), "stopped")
        finally:
            a.kill()
            a.wait()
            a.stdout.close()


if __name__ == "__main__":
    helpers.main()
