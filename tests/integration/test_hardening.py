# SPDX-License-Identifier: MIT
"""Regressions for defects found in review: things planted at the temporary
file's name in an allowed repository, and per-window drop accounting."""
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
        # The first write of this daemon uses sequence number 0.
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
