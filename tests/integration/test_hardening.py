# SPDX-License-Identifier: MIT
"""Regressions for defects found in review: things planted at the temporary
file's name in an allowed repository, an allowed directory renamed and
replaced by a symbolic link, and per-window drop accounting."""
import os
import shutil
import tempfile
import threading
import time
import unittest

import profdtest as T

P = T.protos()


def profile(d, req, timeout=30):
    with T.channel(d.addr) as ch:
        return T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)(req, timeout=timeout)


class PlantedTempFile(unittest.TestCase):
    def setUp(self):
        self.allowed = tempfile.mkdtemp(prefix="profd-allow-")
        self.outside = tempfile.mkdtemp(prefix="profd-outside-")
        self.d = T.Daemon("--repository-allow", self.allowed)
        # Where the first write's temporary file was when its names were
        # predictable (PID and a counter); they are random now, and what is
        # planted at the old name must still change nothing.
        self.sdir = os.path.join(self.allowed, "plugins", "profile", "s1")
        os.makedirs(self.sdir)
        self.tmpname = os.path.join(self.sdir, f".h_1.xplane.pb.{self.d.proc.pid}.0.tmp")

    def tearDown(self):
        self.assertEqual(self.d.stop(timeout=15), 0, self.d.log())
        shutil.rmtree(self.allowed)
        shutil.rmtree(self.outside)

    def capture(self):
        req = T.profile_request(P, 200, "h:1", session_id="s1",
                                logdir=self.allowed)
        return profile(self.d, req)

    def test_fifo_at_temp_name_neither_blocks_nor_is_written(self):
        os.mkfifo(self.tmpname)
        t0 = time.time()
        resp = self.capture()
        self.assertLess(time.time() - t0, 10)
        self.assertTrue(resp.tool_data)
        final = os.path.join(self.sdir, "h_1.xplane.pb")
        T.decode_xspace(P, open(final, "rb").read())
        self.assertTrue(os.path.exists(self.tmpname))  # left alone

    def test_hard_link_at_temp_name_is_not_written_through(self):
        victim = os.path.join(self.outside, "victim")
        with open(victim, "w") as f:
            f.write("precious")
        os.link(victim, self.tmpname)
        self.capture()
        with open(victim) as f:
            self.assertEqual(f.read(), "precious")
        final = os.path.join(self.sdir, "h_1.xplane.pb")
        self.assertNotEqual(os.stat(final).st_ino, os.stat(victim).st_ino)


class RenamedAllowedDirectory(unittest.TestCase):
    """The allowed directory (or a parent) renamed, and a symbolic link to
    a directory outside put at its old path: the capture and every later
    one are answered with their data, the repository copy is refused
    (XSpace.errors says why), and nothing is written outside, nor into the
    renamed directory."""

    def setUp(self):
        self.base = tempfile.mkdtemp(prefix="profd-rename-")
        self.addCleanup(shutil.rmtree, self.base, True)
        self.outside = os.path.join(self.base, "outside")
        os.makedirs(os.path.join(self.outside, "repo"))

    def files_under(self, top):
        return sorted(os.path.relpath(os.path.join(r, f), top) for r, _, fs in os.walk(top) for f in fs)

    def swap_and_capture(self, allowed, renamed_path, new_path, link_to, moved_allowed):
        with T.Daemon("--repository-allow", allowed) as d:
            os.rename(renamed_path, new_path)
            os.symlink(link_to, renamed_path)
            for i in range(2):  # the capture after the swap and a later one
                req = T.profile_request(P, 100, "h:1", session_id=f"s{i}", logdir=allowed)
                resp = profile(d, req)
                self.assertTrue(resp.tool_data)
                xs = T.decode_xspace(P, resp.tool_data[0].data)
                self.assertTrue(any("could not write the repository copy" in e and
                                    "does not follow symbolic links" in e for e in xs.errors), xs.errors)
            self.assertEqual(self.files_under(self.outside), [], "written outside the allowed directory")
            self.assertEqual(self.files_under(moved_allowed), [])
            self.assertEqual(d.stop(), 0, d.log())

    def test_allowed_directory_renamed(self):
        allowed = os.path.join(self.base, "repo")
        os.makedirs(allowed)
        moved = os.path.join(self.base, "repo-moved")
        self.swap_and_capture(allowed, allowed, moved, os.path.join(self.outside, "repo"), moved)

    def test_parent_of_the_allowed_directory_renamed(self):
        parent = os.path.join(self.base, "parent")
        allowed = os.path.join(parent, "repo")
        os.makedirs(allowed)
        moved = os.path.join(self.base, "parent-moved")
        self.swap_and_capture(allowed, parent, moved, self.outside, os.path.join(moved, "repo"))


class DropsPerWindow(unittest.TestCase):
    def test_a_window_reports_only_its_own_drops(self):
        # A tiny budget: the host collector alone fills it within a second.
        with T.Daemon("--max-events", "100", "--host-sample-hz", "50") as d:
            out = {}

            def long_capture():
                out["a"] = profile(d, T.profile_request(P, 3000, "h:1", session_id="a"))

            t = threading.Thread(target=long_capture)
            t.start()
            time.sleep(2.0)
            b = profile(d, T.profile_request(P, 100, "h:1", session_id="b"))
            t.join()

            def dropped(resp):
                x = T.decode_xspace(P, resp.tool_data[0].data)
                for w in x.warnings:
                    if "events were dropped" in w:
                        return int(w.split()[0])
                return 0

            da, db = dropped(out["a"]), dropped(b)
            # A saw ~3 s of drops; B only what 100 ms can produce.
            self.assertGreater(da, 200)
            self.assertLess(db, da / 4)


if __name__ == "__main__":
    unittest.main(verbosity=2)
