# SPDX-License-Identifier: MIT
"""profd under systemd: the unit as `meson install --destdir` puts it passes
`systemd-analyze verify`, and the notify protocol (READY=1 after the ports
listen, STATUS=, WATCHDOG=1, STOPPING=1 at SIGTERM) reaches a test socket
standing in for systemd's NOTIFY_SOCKET."""
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

import profdtest as T
from helpers import main, status


class NotifySocket:
    """A datagram socket where profd's notifications arrive; @abstract uses
    a name in the abstract namespace ('@' in NOTIFY_SOCKET)."""

    def __init__(self, abstract=False):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = f"profd-test-notify-{os.getpid()}-{time.monotonic_ns()}"
            self.sock.bind("\0" + name)
            self.env = "@" + name
        else:
            self.tmp = tempfile.mkdtemp(prefix="profd-notify-")
            self.env = os.path.join(self.tmp, "notify.sock")
            self.sock.bind(self.env)
        self.messages = []

    def wait(self, prefix, timeout=10.0):
        """Read until a message starting with @prefix; returns it."""
        end = time.time() + timeout
        while True:
            for m in self.messages:
                if m.startswith(prefix):
                    return m
            left = end - time.time()
            if left <= 0:
                raise AssertionError(f"no {prefix!r} among {self.messages}")
            self.sock.settimeout(left)
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except socket.timeout:
                pass

    def close(self):
        self.sock.close()
        if hasattr(self, "tmp"):
            shutil.rmtree(self.tmp, True)


class Notify(unittest.TestCase):
    def start(self, abstract=False, env=None, *args):
        n = NotifySocket(abstract)
        self.addCleanup(n.close)
        d = T.Daemon(*args, env=dict({"NOTIFY_SOCKET": n.env}, **(env or {})))
        return n, d

    def check_lifecycle(self, abstract):
        n, d = self.start(abstract)
        with d:
            n.wait("READY=1")
            # READY comes after listen(): the port answers now.
            self.assertEqual(status(d.addr).max_sessions, 16)
            st = n.wait("STATUS=")
            self.assertRegex(st, r"^STATUS=listening on 127\.0\.0\.1:0 \(port \d+\); 0 capture\(s\) open, "
                                 r"0 agent\(s\) connected$")
            self.assertIn(f"(port {d.port})", st)
            self.assertNotIn("STOPPING=1", n.messages)
            self.assertEqual(d.stop(signal.SIGTERM), 0, d.log())
            n.wait("STOPPING=1")
            self.assertLess(n.messages.index(next(m for m in n.messages if m == "READY=1")),
                            n.messages.index("STOPPING=1"))

    def test_ready_status_stopping(self):
        self.check_lifecycle(abstract=False)

    def test_abstract_notify_socket(self):
        self.check_lifecycle(abstract=True)

    def test_watchdog_pings_only_for_this_pid(self):
        n, d = self.start(False, {"WATCHDOG_USEC": "200000"})
        with d:
            n.wait("READY=1")
            n.wait("WATCHDOG=1", timeout=3)
        # WATCHDOG_PID naming another process: not ours, no pings.
        n2, d2 = self.start(False, {"WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1"})
        with d2:
            n2.wait("READY=1")
            time.sleep(0.6)
            with self.assertRaises(AssertionError):
                n2.wait("WATCHDOG=1", timeout=0.3)

    def test_sighup_updates_status(self):
        tmp = tempfile.mkdtemp(prefix="profd-notify-conf-")
        self.addCleanup(shutil.rmtree, tmp, True)
        path = os.path.join(tmp, "profd.conf")
        with open(path, "w") as f:
            f.write("max-sessions = 2\n")
        n, d = self.start(False, None, "--config", path)
        with d:
            n.wait("READY=1")
            with open(path, "w") as f:
                f.write("bogus line\n")
            d.proc.send_signal(signal.SIGHUP)
            self.assertIn(f"{path}:1:", n.wait("STATUS=reload failed"))


def meson():
    return shutil.which("meson")


class Unit(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dest = tempfile.mkdtemp(prefix="profd-destdir-")
        cls.installed = None
        if not meson():
            return
        r = subprocess.run([meson(), "install", "-C", T.BUILD, "--destdir", cls.dest, "--no-rebuild",
                            "--quiet"], capture_output=True, text=True, timeout=300)
        cls.install_log = r.stdout + r.stderr
        if r.returncode == 0:
            cls.installed = cls.dest

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dest, True)

    def find(self, name):
        for root, _, files in os.walk(self.dest):
            if name in files:
                yield os.path.join(root, name)

    def unit(self):
        if not meson():
            self.skipTest("meson not on PATH")
        self.assertIsNotNone(self.installed, getattr(self, "install_log", ""))
        units = list(self.find("profd.service"))
        if not units:
            self.skipTest("this build installs no unit (-Dsystemd=disabled, or auto without systemd.pc)")
        self.assertEqual(len(units), 1, units)
        with open(units[0]) as f:
            return units[0], f.read()

    def test_unit_settings(self):
        _, text = self.unit()
        for line in ("Type=notify", "ExecReload=/bin/kill -HUP $MAINPID", "User=profd",
                     "RuntimeDirectory=profd", "WatchdogSec=", "CapabilityBoundingSet=\n"):
            self.assertIn(line, text)
        exe = re.search(r"(?m)^ExecStart=(\S+)", text).group(1)
        self.assertTrue(os.access(self.dest + exe, os.X_OK), f"ExecStart {exe} is installed")
        # The user the unit names is declared where systemd-sysusers reads.
        sysusers = [p for p in self.find("profd.conf") if "/sysusers.d/" in p]
        self.assertEqual(len(sysusers), 1, list(self.find("profd.conf")))
        with open(sysusers[0]) as f:
            users = f.read()
        self.assertRegex(users, r"(?m)^u profd ")
        # The agent socket is for a group, not every local user (issue 10):
        # the group is declared, profd is in it, and the unit sets it.
        self.assertRegex(users, r"(?m)^g profd-agents ")
        self.assertRegex(users, r"(?m)^m profd profd-agents$")
        self.assertRegex(text, r"(?m)^ExecStart=\S+ --agent-socket-group profd-agents --agent-socket-mode 0660$")
        self.assertRegex(text, r"(?m)^SupplementaryGroups=.*\bprofd-agents\b")
        self.assertNotRegex(text, r"(?m)^ExecStart=.*0666")
        # The commented default config sits where the binary looks for it.
        conf = [p for p in self.find("profd.conf") if p.endswith("/etc/profd/profd.conf")]
        self.assertEqual(len(conf), 1)
        r = subprocess.run([self.dest + exe, "--help"], capture_output=True, text=True)
        self.assertIn(conf[0][len(self.dest):], r.stdout, "the installed config's path is the default")

    def test_systemd_analyze_verify(self):
        path, text = self.unit()
        if not shutil.which("systemd-analyze"):
            self.skipTest("systemd-analyze not installed")
        if not os.access("/bin/kill", os.X_OK):
            self.skipTest("/bin/kill (ExecReload) missing on this machine")
        # Verify the installed unit with its paths pointing into the destdir,
        # where the binary is (it is not installed on this machine).
        exe = re.search(r"(?m)^ExecStart=(\S+)", text).group(1)
        tmp = tempfile.mkdtemp(prefix="profd-verify-")
        self.addCleanup(shutil.rmtree, tmp, True)
        copy = os.path.join(tmp, "profd.service")
        with open(copy, "w") as f:
            f.write(text.replace(exe, self.dest + exe))
        r = subprocess.run(["systemd-analyze", "verify", "--man=no", copy], capture_output=True, text=True,
                           timeout=60)
        out = r.stdout + r.stderr
        # A chroot or container without systemd's own units cannot verify anything.
        if r.returncode != 0 and ("Unit sysinit.target not found" in out or "Failed to initialize manager" in out):
            self.skipTest(f"systemd-analyze cannot load units here: {out.strip()[:200]}")
        self.assertEqual(r.returncode, 0, out)
        self.assertNotIn("profd.service:", out, out)


if __name__ == "__main__":
    main()
