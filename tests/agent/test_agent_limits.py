# SPDX-License-Identifier: MIT
"""Limits on what a connection to the world-writable agent socket can do,
and shutdown while a flush waits for an agent."""
import os
import signal
import socket
import subprocess
import tempfile
import time
import unittest

import profdtest as T

FAKE = os.environ["FAKE_AGENT"]
P = T.protos()
UUID = "GPU-11111111-2222-3333-4444-555555555555"


def status(d):
    with T.channel(d.addr) as ch:
        return T.stub(ch, "Status", P.profd.StatusRequest, P.profd.StatusResponse,
                      service="profd.Profd")(P.profd.StatusRequest(), timeout=10)


class Limits(unittest.TestCase):
    def test_idle_connections_cannot_lock_agents_out(self):
        tmp = tempfile.mkdtemp(prefix="profd-lim-")
        sock = os.path.join(tmp, "agent.sock")
        with T.Daemon("--agent-socket", sock) as d:
            idle = []
            for _ in range(80):  # more than one uid may hold
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(sock)
                idle.append(s)
            time.sleep(0.3)
            self.assertIn("refusing an agent connection of uid", d.log())
            # Silent ones are closed after the HELLO deadline; a real agent then gets in.
            time.sleep(3.5)
            self.assertIn("no HELLO within 2 s", d.log())
            a = subprocess.Popen([FAKE, "--socket", sock, "--devices", UUID, "--name", "late"],
                                 stdout=subprocess.PIPE, text=True)
            self.assertEqual(a.stdout.readline().strip(), "connected")
            deadline = time.time() + 5
            while time.time() < deadline and not status(d).agents:
                time.sleep(0.05)
            self.assertEqual([x.name for x in status(d).agents], ["late"])
            a.kill()
            a.wait()
            a.stdout.close()
            for s in idle:
                s.close()

    def test_sigterm_while_a_flush_waits_then_agent_leaves(self):
        tmp = tempfile.mkdtemp(prefix="profd-lim-")
        sock = os.path.join(tmp, "agent.sock")
        d = T.Daemon("--agent-socket", sock, "--flush-timeout", "10s")
        a = subprocess.Popen([FAKE, "--socket", sock, "--devices", UUID, "--name", "mute", "--no-flush-reply"],
                             stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(a.stdout.readline().strip(), "connected")
            with T.channel(d.addr) as ch:
                fut = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse).future(
                    T.profile_request(P, 300, "h:1"), timeout=30)
                time.sleep(0.8)  # the window closed; the flush waits for the mute agent
                d.proc.send_signal(signal.SIGTERM)
                time.sleep(0.2)
                a.kill()  # its disconnect completes the flush during shutdown
                t0 = time.time()
                rc = d.proc.wait(timeout=15)
                self.assertEqual(rc, 0, d.log())
                self.assertLess(time.time() - t0, 10)
                try:
                    fut.result()
                except Exception:
                    pass
        finally:
            if a.poll() is None:
                a.kill()
            a.wait()
            a.stdout.close()
            d.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
