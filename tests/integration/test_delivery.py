# SPDX-License-Identifier: MIT
"""Repository delivery faults through the real daemon: bounded depth and
length, write failures that still return the data and leave nothing
behind, and names (NUL, invalid UTF-8, '.', '..', hidden) refused with
INVALID_ARGUMENT naming the field."""
import os
import shutil
import subprocess
import tempfile
import unittest

import grpc

import profdtest as T
from helpers import P, rpc_error, wait_active
from xspacecheck import check_xspace

HOST = "localhost:6009"  # what the TF client sends (reference/protocol.md §3.4)
FILE = "localhost_6009.xplane.pb"


def tree(d):
    out = []
    for root, dirs, files in os.walk(d):
        out += [os.path.relpath(os.path.join(root, x), d) for x in dirs + files]
    return sorted(out)


def raw_request(req, field, value):
    """@req serialized, with string field @field (a ProfileRequest field
    number) appended holding raw bytes @value: the Python library will not
    build invalid UTF-8 itself. The last occurrence wins in protobuf."""
    tag = bytes([(field << 3) | 2])
    return req.SerializeToString() + tag + bytes([len(value)]) + value


class Delivery(T.DaemonCase):
    @classmethod
    def daemon_args(cls):
        cls.allowed = tempfile.mkdtemp(prefix="profd-allowed-")
        return ["--hostname", "itest-deliv", "--repository-allow", cls.allowed,
                "--repository-max-depth", "8"]

    @classmethod
    def cleanup(cls):
        shutil.rmtree(cls.allowed, ignore_errors=True)

    def tearDown(self):
        self.assertEqual(wait_active(self.d.addr, 0), 0, self.d.log())
        shutil.rmtree(self.allowed, ignore_errors=True)
        os.makedirs(self.allowed, exist_ok=True)

    def req(self, duration_ms=100, session_id="s", host=HOST, root=None):
        r = T.profile_request(P, duration_ms, host, session_id=session_id,
                              logdir=os.path.join(self.allowed, "logdir"))
        if root is not None:
            r.repository_root = root
        return r

    def invalid(self, req, *needles, raw=None):
        fn = self.ch.unary_unary("/tensorflow.ProfilerService/Profile") if raw is not None else self.profile
        e = rpc_error(fn, raw if raw is not None else req, timeout=10)
        self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT, e.details())
        for n in needles:
            self.assertIn(n, e.details())
        return e

    def in_band(self, resp):
        self.assertEqual([t.name for t in resp.tool_data], ["xplane.pb"])
        xs = P.xp.XSpace.FromString(resp.tool_data[0].data)
        check_xspace(self, xs, "itest-deliv", empty_trace=resp.empty_trace)
        return xs

    def test_tf_style_request_writes_the_file(self):
        resp = self.profile(self.req(200, "2026_08_21_17_15_10"), timeout=10)
        target = os.path.join(self.allowed, "logdir", "plugins", "profile", "2026_08_21_17_15_10", FILE)
        with open(target, "rb") as f:
            self.assertEqual(f.read(), resp.tool_data[0].data)
        self.assertEqual(list(self.in_band(resp).errors), [])
        self.assertEqual(tree(self.allowed), ["logdir", "logdir/plugins", "logdir/plugins/profile",
                                              "logdir/plugins/profile/2026_08_21_17_15_10",
                                              "logdir/plugins/profile/2026_08_21_17_15_10/" + FILE])

    def test_deep_repository_root_is_not_written_but_returned(self):
        # 8 levels are allowed (--repository-max-depth 8), 9 are not.
        ok = os.path.join(self.allowed, *["d"] * 8)
        self.profile(self.req(root=ok), timeout=10)
        self.assertTrue(os.path.exists(os.path.join(ok, "s", FILE)))
        shutil.rmtree(os.path.join(self.allowed, "d"))
        deep = os.path.join(self.allowed, *["d"] * 9)
        resp = self.profile(self.req(root=deep), timeout=10)
        xs = self.in_band(resp)
        self.assertTrue(any("repository-max-depth" in e for e in xs.errors), xs.errors)
        self.assertEqual(tree(self.allowed), [], "no directory made")
        # Longer than PATH_MAX but within the request size limit: no copy, data in-band.
        long_root = self.allowed + "/d" * 3000
        resp = self.profile(self.req(root=long_root), timeout=10)
        self.assertTrue(any("PATH_MAX" in e for e in self.in_band(resp).errors))
        self.assertEqual(tree(self.allowed), [])
        # The million-level request of the issue (2 MB): gRPC refuses it against
        # --max-request-size before the handler sees it; no tree either.
        huge = self.allowed + "/d" * 1000000
        with self.assertRaises(grpc.RpcError) as e:
            self.profile(self.req(root=huge), timeout=10)
        self.assertEqual(e.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertEqual(tree(self.allowed), [])

    def test_file_in_place_of_a_directory_still_returns_the_data(self):
        with open(os.path.join(self.allowed, "logdir"), "w") as f:
            f.write("x")
        resp = self.profile(self.req(), timeout=10)
        xs = self.in_band(resp)
        self.assertTrue(any("Not a directory" in e and "repository copy" in e for e in xs.errors), xs.errors)
        self.assertEqual(tree(self.allowed), ["logdir"], "nothing left behind")

    def test_symlink_on_the_way_still_returns_the_data(self):
        outside = tempfile.mkdtemp(prefix="profd-outside-")
        try:
            os.symlink(outside, os.path.join(self.allowed, "logdir"))
            xs = self.in_band(self.profile(self.req(), timeout=10))
            self.assertTrue(any("symbolic link" in e for e in xs.errors), xs.errors)
            self.assertEqual(tree(outside), [])
        finally:
            shutil.rmtree(outside)

    def test_names_are_refused_with_the_field(self):
        root = os.path.join(self.allowed, "r")
        for bad in ("..", ".", ".hidden", "a/b"):
            self.invalid(self.req(host=bad, root=root), "host_name")
            self.invalid(self.req(session_id=bad, root=root), "session_id")
            r = self.req(root=root)
            r.opts.override_hostname = bad
            self.invalid(r, "host_name", "override_hostname")
        for root in (os.path.join(self.allowed, ".git", "x"), os.path.join(self.allowed, "a", "..", "b")):
            self.invalid(self.req(root=root), "repository_root")
        # NUL would cut the name short; invalid UTF-8 is not a proto3 string.
        for field, name in ((7, "host_name"), (6, "session_id"), (5, "repository_root")):
            for value, why in ((b"ok\x00/../../x", "NUL"), (b"bad\xff\xfe", "UTF-8")):
                self.invalid(None, name, why, raw=raw_request(self.req(root=root), field, value))
        self.assertEqual(tree(self.allowed), [])


class WriteFailure(unittest.TestCase):
    """A write that fails half-way (files may not grow past 1 KiB: EFBIG)
    after the directories and the temporary file were made."""

    def test_failed_write_returns_the_data_and_leaves_nothing(self):
        allowed = tempfile.mkdtemp(prefix="profd-allowed-")
        # 'trap "" XFSZ' makes the write fail instead of killing profd;
        # ignored signals survive exec.
        wrapper = ["sh", "-c", 'trap "" XFSZ; ulimit -f 2; exec "$@"', "sh"]
        try:
            with T.Daemon("--hostname", "itest-deliv", "--repository-allow", allowed, wrapper=wrapper) as d:
                s = T.Stubs(d.addr)
                try:
                    req = T.profile_request(P, 300, HOST, session_id="s1",
                                            logdir=os.path.join(allowed, "logdir"))
                    resp = s.profile(req, timeout=10)
                finally:
                    s.close()
                self.assertEqual([t.name for t in resp.tool_data], ["xplane.pb"])
                data = resp.tool_data[0].data
                self.assertGreater(len(data), 1024, "big enough to hit the limit")
                xs = P.xp.XSpace.FromString(data)
                check_xspace(self, xs, "itest-deliv", empty_trace=resp.empty_trace)
                self.assertTrue(any("File too large" in e for e in xs.errors), xs.errors)
                self.assertEqual(tree(allowed), [], "no directory, no temporary file")
        finally:
            shutil.rmtree(allowed, ignore_errors=True)


class FullFilesystem(unittest.TestCase):
    """The repository on a filesystem with no space left (a full tmpfs):
    the write fails with ENOSPC, the reply still carries the data with the
    error in XSpace.errors, and nothing is left behind. Needs to mount a
    tmpfs (root, not in every container): skipped otherwise."""

    def setUp(self):
        self.allowed = tempfile.mkdtemp(prefix="profd-full-")
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0755", "tmpfs", self.allowed],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r.returncode != 0:
            os.rmdir(self.allowed)
            self.skipTest("cannot mount a tmpfs here (needs root)")
        # Unmounted also when the rest of setUp fails (tearDown would not run).
        self.addCleanup(shutil.rmtree, self.allowed, True)
        self.addCleanup(subprocess.run, ["umount", self.allowed], check=False)
        # Fill it: every data block taken, so the capture's first byte fails.
        fd = os.open(os.path.join(self.allowed, "filler"), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while os.write(fd, b"\0" * 4096) > 0:
                pass
        except OSError:
            pass
        finally:
            os.close(fd)

    def test_full_filesystem_returns_the_data_and_leaves_nothing(self):
        with T.Daemon("--hostname", "itest-full", "--repository-allow", self.allowed) as d:
            s = T.Stubs(d.addr)
            try:
                req = T.profile_request(P, 300, HOST, session_id="s1",
                                        logdir=os.path.join(self.allowed, "logdir"))
                resp = s.profile(req, timeout=10)
            finally:
                s.close()
            self.assertEqual([t.name for t in resp.tool_data], ["xplane.pb"])
            xs = P.xp.XSpace.FromString(resp.tool_data[0].data)
            check_xspace(self, xs, "itest-full", empty_trace=resp.empty_trace)
            self.assertTrue(any("No space left on device" in e for e in xs.errors), list(xs.errors))
            self.assertEqual(tree(self.allowed), ["filler"], "no directory, no temporary file")


if __name__ == "__main__":
    unittest.main(verbosity=2)
