# SPDX-License-Identifier: MIT
"""profctl status, monitor, terminate, doctor and --help against real daemons."""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

import profdtest as T
import synth
from fakeserver import FakeProfiler

P = T.protos()
SUBCOMMANDS = ["capture", "monitor", "terminate", "status", "export", "top", "flame", "doctor"]


free_port = T.free_port


class Commands(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = T.Daemon()
        cls.v6 = T.Daemon(host="::1")

    @classmethod
    def tearDownClass(cls):
        for d in (cls.d, cls.v6):
            assert d.stop() == 0, d.log()

    def test_status_text_and_json(self):
        r = synth.run("status", self.d.addr)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^profd \d+\.\d+\.\d+ on \S+ \(" + self.d.addr.replace(".", r"\.") + r"\)")
        for word in ("uptime:", "sessions:", "collectors:", "agents:", "agent socket:"):
            self.assertIn(word, r.stdout)
        r = synth.run("status", "--json", self.v6.addr)
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertRegex(j["version"], r"^\d+\.\d+\.\d+")
        self.assertLess(abs(j["now_unix_ns"] - time.time_ns()) / 1e9, 5)
        self.assertIsInstance(j["collectors"], list)
        self.assertIsInstance(j["agents"], list)
        self.assertEqual(j["active_sessions"], 0)

    def test_status_down_host(self):
        r = synth.run("status", f"127.0.0.1:{free_port()}")
        self.assertEqual(r.returncode, 1)
        self.assertIn("UNAVAILABLE", r.stderr)
        self.assertIn("hint:", r.stderr)

    def test_monitor_unimplemented_is_clear(self):
        r = synth.run("monitor", self.d.addr)
        if r.returncode == 0:  # a daemon that implements Monitor
            self.assertTrue(r.stdout.strip())
            return
        self.assertEqual(r.returncode, 1)
        self.assertIn("does not implement Monitor (UNIMPLEMENTED", r.stderr)

    def test_monitor_prints_server_text(self):
        fake = FakeProfiler(P, b"", monitor_text="GPU busy 42%% (level %d)")
        self.addCleanup(fake.stop)
        r = synth.run("monitor", f"127.0.0.1:{fake.ports[0]}", "--level", "2", "--duration-ms", "100")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "GPU busy 42% (level 2)\n"
                                   "device idle: 12.5%  matrix unit utilization: 40.0%\n")
        self.assertEqual(fake.requests[-1].duration_ms, 100)
        # --watch repeats until interrupted
        p = subprocess.Popen([synth.PROFCTL, "monitor", f"127.0.0.1:{fake.ports[0]}", "--watch",
                              "--interval-ms", "50"], stdout=subprocess.PIPE, text=True)
        time.sleep(1)
        p.send_signal(2)
        out, _ = p.communicate(timeout=10)
        self.assertEqual(p.returncode, 0)
        self.assertGreaterEqual(out.count("GPU busy 42% (level 1)"), 2)

    def test_terminate_stops_a_capture_early(self):
        logdir = tempfile.mkdtemp(prefix="profctl-term-")
        self.addCleanup(shutil.rmtree, logdir)
        t0 = time.time()
        cap = subprocess.Popen([synth.PROFCTL, "capture", self.d.addr, "--logdir", logdir, "--duration-ms",
                                "30000", "--session-id", "long", "--allow-empty"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1 * synth.SLOW)
        r = synth.run("terminate", self.d.addr, "long")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("terminate sent for session long", r.stdout)
        out, err = cap.communicate(timeout=30)
        self.assertEqual(cap.returncode, 0, out + err)
        self.assertLess(time.time() - t0, 15 * synth.SLOW)
        self.assertTrue(os.path.isfile(os.path.join(logdir, "plugins", "profile", "long",
                                                    self.d.addr.replace(":", "_") + ".xplane.pb")))

    def test_doctor_remote_and_local(self):
        tmp = tempfile.mkdtemp(prefix="profctl-doc-")
        self.addCleanup(shutil.rmtree, tmp)
        sock_path = os.path.join(tmp, "agent.sock")
        s = socket.socket(socket.AF_UNIX)
        s.bind(sock_path)
        self.addCleanup(s.close)
        r = synth.run("doctor", self.d.addr, "--agent-socket", sock_path)
        self.assertIn(f"[ OK ] {self.d.addr}: reachable", r.stdout)
        self.assertRegex(r.stdout, r"\[ OK \] version: daemon \S+, profctl \S+")
        self.assertRegex(r.stdout, r"\[( OK |WARN)\] time skew: [+-]\d")
        self.assertIn(f"[ OK ] agent socket {sock_path}: present and writable; not the default", r.stdout)
        self.assertIn(f"PROFD_AGENT_SOCKET={sock_path}", r.stdout)
        # No agent connected: the fix names the daemon's own (non-default) socket.
        fix = r.stdout.split("agents: none connected", 1)[1].splitlines()[1]
        self.assertIn(f"PROFD_AGENT_SOCKET={self.d.agent_socket}", fix)
        for tag in ("NVIDIA driver:", "NVML:", "CUPTI:", "perf_event_paranoid:"):
            self.assertIn(tag, r.stdout)
        # every non-OK line is followed by its fix
        lines = r.stdout.splitlines()
        for i, ln in enumerate(lines):
            if ln.startswith("[WARN]") or ln.startswith("[FAIL]"):
                self.assertTrue(lines[i + 1].lstrip().startswith("fix: "), ln)
        self.assertEqual(r.returncode, 1 if "[FAIL]" in r.stdout else 0)

    def test_doctor_down_daemon_and_missing_socket(self):
        r = synth.run("doctor", f"[::1]:{free_port()}", "--agent-socket", "/nonexistent/agent.sock")
        self.assertEqual(r.returncode, 1)
        self.assertIn("not reachable: UNAVAILABLE", r.stdout)
        self.assertIn("fix: start profd there", r.stdout)
        self.assertIn("[FAIL] agent socket /nonexistent/agent.sock", r.stdout)

    def test_help_everywhere(self):
        r = synth.run("--help")
        self.assertEqual(r.returncode, 0)
        for sub in SUBCOMMANDS:
            self.assertIn(sub, r.stdout)
            h = synth.run(sub, "--help")
            self.assertEqual(h.returncode, 0, sub)
            self.assertIn(f"Usage: profctl {sub}", h.stdout)
            self.assertIn("Exit status", h.stdout)
            self.assertEqual(synth.run("help", sub).stdout, h.stdout)
        r = synth.run("frobnicate")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown command", r.stderr)
        r = synth.run()
        self.assertEqual(r.returncode, 2)
        r = synth.run("--version")
        self.assertRegex(r.stdout, r"^profctl \d+\.\d+\.\d+")


if __name__ == "__main__":
    unittest.main(verbosity=2)
