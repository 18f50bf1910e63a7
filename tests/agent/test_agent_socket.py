# SPDX-License-Identifier: MIT
"""Who may reach the agent socket: --agent-socket-mode, --agent-socket-group
and --agent-allow-uid (docs/security.md), with a real profd and the fake agent."""
import grp
import os
import pwd
import stat
import subprocess
import tempfile
import time
import unittest

import profdtest as T

FAKE = os.environ["FAKE_AGENT"]
P = T.protos()
UUID = "GPU-11111111-2222-3333-4444-555555555555"


def status(d):
    return T.status(d.addr)


def sock_path():
    return os.path.join(tempfile.mkdtemp(prefix="profd-sock-"), "agent.sock")


def unused_uid():
    uid = 54321
    while uid == os.getuid():
        uid += 1
    return uid


def start_fails(*args):
    """profd's start-up log when it refuses to start, else None."""
    try:
        d = T.Daemon(*args)
    except RuntimeError as e:
        return str(e)
    d.stop()
    return None


class Mode(unittest.TestCase):
    def test_default_mode_keeps_0666(self):
        sock = sock_path()
        with T.Daemon("--agent-socket", sock):
            self.assertEqual(stat.S_IMODE(os.stat(sock).st_mode), 0o666)

    def test_requested_mode(self):
        for mode in ("0600", "660", "0640"):
            sock = sock_path()
            with T.Daemon("--agent-socket", sock, "--agent-socket-mode", mode):
                st = os.stat(sock)
                self.assertTrue(stat.S_ISSOCK(st.st_mode))
                self.assertEqual(stat.S_IMODE(st.st_mode), int(mode, 8), mode)

    def test_bad_mode_fails_start_up(self):
        for mode in ("8", "0o666", "01666", "rw", ""):
            log = start_fails("--agent-socket", sock_path(), "--agent-socket-mode", mode)
            self.assertIsNotNone(log, mode)
            self.assertIn("--agent-socket-mode", log)


class Group(unittest.TestCase):
    def test_group_by_name_and_number(self):
        # Root may give any group: take one the socket would not get anyway.
        # Others may give only their own groups.
        gid = os.getgid()
        if os.geteuid() == 0:
            gid = next(g.gr_gid for g in grp.getgrall() if g.gr_gid != os.getgid())
        for g in (grp.getgrgid(gid).gr_name, str(gid)):
            sock = sock_path()
            with T.Daemon("--agent-socket", sock, "--agent-socket-group", g, "--agent-socket-mode", "0660"):
                st = os.stat(sock)
                self.assertEqual(st.st_gid, gid, g)
                self.assertEqual(stat.S_IMODE(st.st_mode), 0o660, g)

    def test_unknown_group_fails_start_up_naming_it(self):
        log = start_fails("--agent-socket", sock_path(), "--agent-socket-group", "no-such-group-profd")
        self.assertIsNotNone(log)
        self.assertIn("no-such-group-profd", log)


class AllowUid(unittest.TestCase):
    def run_agent(self, sock, name):
        a = subprocess.Popen([FAKE, "--socket", sock, "--devices", UUID, "--name", name],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.addCleanup(a.stdout.close)
        self.addCleanup(a.wait)
        self.addCleanup(a.kill)
        return a

    def test_unlisted_uid_is_refused(self):
        sock = sock_path()
        other = unused_uid()
        with T.Daemon("--agent-socket", sock, "--agent-allow-uid", str(other)) as d:
            self.run_agent(sock, "stranger")
            self.assertTrue(T.wait_for(lambda: "not in --agent-allow-uid" in d.log()), d.log())
            time.sleep(0.5)
            self.assertEqual(list(status(d).agents), [])
            self.assertNotIn("stranger", d.log())  # closed before it could say HELLO
            self.assertIn(f"uid {os.getuid()}", d.log())

    def test_listed_uid_is_accepted(self):
        me = os.getuid()
        for who in (str(me), pwd.getpwuid(me).pw_name):
            sock = sock_path()
            with T.Daemon("--agent-socket", sock, "--agent-allow-uid", str(unused_uid()),
                          "--agent-allow-uid", who) as d:
                self.run_agent(sock, "friend")
                self.assertTrue(T.wait_for(lambda: [x.name for x in status(d).agents] == ["friend"]),
                                d.log())
                self.assertNotIn("not in --agent-allow-uid", d.log())

    def test_unknown_user_fails_start_up_naming_it(self):
        log = start_fails("--agent-socket", sock_path(), "--agent-allow-uid", "no-such-user-profd")
        self.assertIsNotNone(log)
        self.assertIn("no-such-user-profd", log)


if __name__ == "__main__":
    unittest.main(verbosity=2)
