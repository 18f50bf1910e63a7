# SPDX-License-Identifier: MIT
"""Who may reach the agent socket: --agent-socket-mode, --agent-socket-group
and --agent-allow-uid (docs/security.md), with a real profd and the fake agent;
the socket's directory (refused when others may change it) and the symlink
swap race against the socket's permissions."""
import grp
import os
import pwd
import shutil
import stat
import subprocess
import sys
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


NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]

# Runs as the directory's other user: each time the socket appears in the
# directory (inotify), rename a ready symbolic link to the victim over it,
# so that whatever profd does next by path lands on the victim.
ATTACKER = r"""
import ctypes, os, struct, sys
sock, victim = sys.argv[1], sys.argv[2]
d, name = os.path.split(sock)
swap = os.path.join(d, "swap")
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init()
if fd < 0 or libc.inotify_add_watch(fd, d.encode(), 0x100) < 0:  # IN_CREATE
    sys.exit("inotify failed")
print("ready", flush=True)
while True:
    if not os.path.lexists(swap):
        os.symlink(victim, swap)
    buf = os.read(fd, 65536)
    off, hit = 0, False
    while off < len(buf):
        _, _, _, n = struct.unpack_from("iIII", buf, off)
        hit = hit or buf[off + 16:off + 16 + n].rstrip(b"\0") == name.encode()
        off += 16 + n
    if hit:
        try:
            os.rename(swap, sock)
        except OSError:
            pass
"""


def other_gid():
    return next(g.gr_gid for g in grp.getgrall() if g.gr_gid not in (0, os.getgid(), NOBODY))


class Directory(unittest.TestCase):
    """The socket's directory: refused at start-up when users other than
    root and profd's own may change it, unless it is sticky."""

    def setUp(self):
        self.base = tempfile.mkdtemp(prefix="profd-sockdir-")
        self.addCleanup(shutil.rmtree, self.base, True)
        os.chmod(self.base, 0o755)

    def sockdir(self, mode, uid=None):
        d = os.path.join(self.base, f"d{len(os.listdir(self.base))}")
        os.mkdir(d)
        if uid is not None:
            os.chown(d, uid, -1)
        os.chmod(d, mode)
        return d

    def test_world_and_group_writable_directories_are_refused_naming_the_fix(self):
        for mode in (0o777, 0o775, 0o722):
            d = self.sockdir(mode)
            log = start_fails("--agent-socket", os.path.join(d, "agent.sock"))
            self.assertIsNotNone(log, oct(mode))
            self.assertIn(f"agent socket directory {d} (owner uid {os.geteuid()}, mode {mode:04o}) can be "
                          "changed by users other than root and profd's", log)
            self.assertIn("chmod go-w", log)
            self.assertIn("chmod +t", log)
            self.assertFalse(os.path.lexists(os.path.join(d, "agent.sock")))

    @unittest.skipUnless(os.geteuid() == 0, "needs root to give the directory to another user")
    def test_directory_of_another_user_is_refused(self):
        d = self.sockdir(0o755, uid=NOBODY)
        log = start_fails("--agent-socket", os.path.join(d, "agent.sock"))
        self.assertIsNotNone(log)
        self.assertIn(f"agent socket directory {d} (owner uid {NOBODY}, mode 0755)", log)

    def test_sticky_and_private_directories_are_fine(self):
        for mode in (0o1777, 0o755, 0o700):
            sock = os.path.join(self.sockdir(mode), "agent.sock")
            with T.Daemon("--agent-socket", sock, "--agent-socket-mode", "0660") as d:
                st = os.lstat(sock)
                self.assertTrue(stat.S_ISSOCK(st.st_mode))
                self.assertEqual(stat.S_IMODE(st.st_mode), 0o660)
                self.assertEqual(d.stop(), 0, d.log())


class SymlinkSwapRace(unittest.TestCase):
    """The socket's directory belongs to another user, who swaps a symbolic
    link to a root-owned 0600 file in at the socket's path each time profd
    binds it, across profd restarts for a bounded time. Before, profd set
    the group and mode by path after bind(): a swap in between gave the
    victim the socket's mode and group."""

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"), "needs root and setpriv to play nobody")
    def test_victim_file_keeps_its_mode_and_group(self):
        base = tempfile.mkdtemp(prefix="profd-race-")
        self.addCleanup(shutil.rmtree, base, True)
        os.chmod(base, 0o755)
        root = os.path.dirname(base)  # the tests' private root (testtmp.py): nobody must pass
        self.addCleanup(os.chmod, root, stat.S_IMODE(os.stat(root).st_mode))
        os.chmod(root, 0o711)
        d = os.path.join(base, "run")
        os.mkdir(d)
        os.chown(d, NOBODY, NOBODY)
        victim = os.path.join(base, "victim")
        with open(victim, "w") as f:
            f.write("secret")
        os.chmod(victim, 0o600)
        before = os.stat(victim)
        sock = os.path.join(d, "agent.sock")
        attacker = subprocess.Popen(AS_NOBODY + [sys.executable, "-c", ATTACKER, sock, victim],
                                    stdout=subprocess.PIPE, text=True)
        self.addCleanup(attacker.wait)
        self.addCleanup(attacker.kill)
        self.assertEqual(attacker.stdout.readline().strip(), "ready")
        log = os.path.join(base, "profd.log")
        gid = other_gid()
        deadline = time.monotonic() + float(os.environ.get("PROFD_RACE_SECONDS", "10"))
        starts = 0
        while time.monotonic() < deadline:
            if os.path.lexists(sock):
                os.unlink(sock)  # what the last round left (a socket or the link)
            with open(log, "w") as out:
                p = subprocess.Popen([T.PROFD, "--listen", "127.0.0.1:0", "--self-check", "0",
                                      "--agent-socket", sock, "--agent-socket-mode", "0666",
                                      "--agent-socket-group", str(gid)], stdout=out, stderr=subprocess.STDOUT)
            starts += 1
            t0 = time.monotonic()
            while p.poll() is None and time.monotonic() - t0 < 10:
                with open(log) as f:
                    text = f.read()
                if "agents connect to" in text or "ready on" in text:  # bound (or not: ready)
                    break
                time.sleep(0.002)
            p.kill()
            p.wait()
            st = os.stat(victim)
            self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid),
                             (stat.S_IMODE(before.st_mode), before.st_uid, before.st_gid),
                             f"victim changed after {starts} start(s)")
        with open(log) as f:
            text = f.read()
        # profd refuses the directory outright (it belongs to nobody).
        self.assertIn(f"agent socket directory {d} (owner uid {NOBODY}", text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
