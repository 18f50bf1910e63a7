# SPDX-License-Identifier: MIT
"""The CPython frame walker (collectors/cupti/pywalk.h) under real interpreters.

pywalk_scenarios.py runs under each interpreter with the walker probe
(tests/agent/pywalk-probe.c) loaded by ctypes and reports what the walker
saw from known functions and lines; this file checks it. Debian's python3
(/usr/bin/python3, 3.11) always runs; 3.10, 3.12, 3.13 and 3.14 run where
an interpreter of that version is found (tests/pylib/pythons.py: PATH,
PROFD_TEST_PYTHONS, a pyenv install), else their test reports itself
skipped. An interpreter the walker must refuse (older than 3.10, a debug or
free-threaded build) found there is checked to be refused with a reason
naming it.
"""
import errno
import json
import os
import subprocess
import sys
import unittest

import pythons

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = os.path.join(HERE, "pywalk_scenarios.py")
PROBE = os.environ.get("PYWALK_PROBE")
MINORS = (10, 11, 12, 13, 14)  # the walker's


def interpreters():
    """{minor: path} of the walkable interpreters found (tests/pylib/
    pythons.py), and those the walker must refuse: the newest one older
    than 3.10, free-threaded and debug builds."""
    plain, others = pythons.found()
    walkable = {m: p for m, p in plain.items() if m in MINORS}
    older = [m for m in plain if m < MINORS[0]]
    refused = [(c, v, ft, dbg) for c, v, ft, dbg in others]
    if older:
        c = plain[max(older)]
        refused.append((c, pythons.describe(c)[0], False, False))
    return walkable, refused


FOUND, REFUSED = interpreters()


def run(py, hostile=True):
    env = pythons.sanitizer_env(PROBE, dict(os.environ, PYWALK_PROBE=PROBE))
    args = [py, "-X", "faulthandler", SCENARIOS] + (["--hostile"] if hostile else [])
    r = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    if r.returncode != 0:
        raise AssertionError("%s exited %d:\n%s" % (py, r.returncode, r.stderr[-4000:]))
    return json.loads(r.stdout)


class Walker:
    """Checks for one interpreter's report (self.r)."""

    def at(self, mark, name):
        return [self.r["file"], self.r["lines"][mark], name]

    def check_exact(self):
        r = self.r
        self.assertEqual(r["init"], 0, r["why"])
        self.assertEqual(r["pyw_version"], r["version"])
        o = r["outer"]
        self.assertEqual(o["n"], len(o["frames"]))
        self.assertEqual(o["truncated"], 0)
        self.assertEqual(o["frames"][:4], [self.at("walk", "walk"), self.at("leaf", "leaf"),
                                           self.at("middle", "middle"), self.at("outer", "outer")])
        self.assertEqual(o["frames"][-1][2], "<module>")
        # co_qualname from 3.11 on, co_name before.
        self.assertEqual(r["meth"]["frames"][1], self.at("meth", "Klass.meth" if self.minor >= 11 else "meth"))

    def check_gen_coro(self):
        r = self.r
        self.assertEqual(r["gen"]["frames"][:2], [self.at("walk", "walk"), self.at("gen", "gen [gen]")])
        c = r["coro"]["frames"]
        self.assertEqual(c[:2], [self.at("walk", "walk"), self.at("coro", "coro [gen]")])
        self.assertIn("scenarios", [f[2] for f in c])

    def check_depth_cap(self):
        rec = self.r["rec"]
        self.assertEqual((rec["n"], rec["truncated"]), (20, 1))
        f = rec["frames"]
        self.assertEqual(f[:2], [self.at("walk", "walk"), self.at("rec_base", "rec")])
        self.assertEqual(f[2:], [self.at("rec_step", "rec")] * 18)

    def check_c_frame_between(self):
        s = self.r["sorted"]["frames"]
        self.assertEqual(s[1:3], [self.at("keep_key", "keep_key"),
                                  self.at("sorted_keep", "through_sorted_keep")])
        m = self.r["map"]["frames"]
        lam = "through_map.<locals>.<lambda>" if self.minor >= 11 else "<lambda>"
        self.assertEqual(m[1:3], [self.at("map", lam), self.at("map", "through_map")])

    def assertParked(self, frame, name):
        """@frame is in @name's loop: at its sleep (the L: mark) or at the
        loop's test the line before, where a thread waking every 2 ms can
        be caught (seen under ASan on 3.10)."""
        want = self.at(name, name)
        self.assertEqual((frame[0], frame[2]), (want[0], want[2]))
        self.assertIn(frame[1], (want[1] - 1, want[1]), frame)

    def check_threads(self):
        r = self.r
        self.assertEqual(r["cthread"], 0, "a thread started from C has no Python frame")
        tids = set()
        for i, t in r["threads"].items():
            self.assertEqual(t["walk"]["frames"][1], self.at("thread_walk", "thread_walk"))
            self.assertEqual(t["walk"]["frames"][2][2], "thread_body")
            tids.add(str(t["tid"]))
        self.assertEqual(r["sample_n"], len(r["sample"]))
        self.assertEqual(r["sample_n"], r["nthreads"] + 1)
        self.assertEqual(len(tids), r["nthreads"])
        self.assertTrue(tids <= set(r["sample"]), "the sampler saw %s, threads are %s" % (list(r["sample"]), tids))
        for tid in tids:
            self.assertParked(r["sample"][tid]["frames"][0], "parked")
        main = r["sample"][str(r["main_tid"])]["frames"]
        self.assertEqual(main[0][2], "sample")
        m = r["maintain"]
        self.assertEqual((m["first"], m["again"]), (m["first"], m["first"]))
        self.assertGreaterEqual(m["first"], 32)
        self.assertEqual((m["after_maintain"], m["missed_again"]), (0, 0), "a walk missed the refreshed cache")

    def check_dated(self):
        rounds = self.r["dated"]
        self.assertEqual([r["fast"] for r in rounds], [0, 1])
        for r in rounds:
            self.assertEqual(len(r["after_ms"]), r["n"])
            self.assertEqual(r["n"], self.r["nthreads"] + 2)
            for ms in r["after_ms"]:
                self.assertTrue(40 <= ms <= r["round_ms"], (ms, r))

    def check_prefetched(self):
        p = self.r["prefetched"]
        self.assertEqual(p["deep"], 4, p)
        self.assertTrue(all(n >= 41 for n in p["deep_n"]), p)
        # The first sample reads pages one by one (the list changed since
        # the last); from the third on, only the few pages that the other
        # scenarios' threads, waking every 2 ms, touch anew, or that a full
        # set of page slots leaves out. Without the prefetch: 16-47.
        self.assertGreaterEqual(p["counts"][0], 10, p)
        self.assertLessEqual(max(p["counts"][-2:]), 6, p)

    def check_churn(self):
        c = self.r["churn"]
        for name in ("started", "changed", "ended"):
            rounds = c[name]
            # The list changed before the first sample of each pair, not before the second.
            self.assertEqual([r["fast"] for r in rounds], [0, 1], name)
            for r in rounds:
                self.assertEqual(r["tids"], r["live"], name)
                self.assertEqual(r["n"], len(r["live"]), name)
        for r in c["changed"]:
            for tid in c["a_kept"]:
                self.assertEqual(len(r["top"][tid]), 1)
                self.assertParked(r["top"][tid][0], "parked")
            for tid in c["b"]:
                self.assertEqual(len(r["top"][tid]), 1)
                self.assertParked(r["top"][tid][0], "parked_b")
        self.assertNotIn(c["b"][0], c["ended"][0]["tids"])

    def check_quiet(self):
        q = self.r["quiet"]
        b, a = q["before"], q["after"]
        n = q["nthreads"]
        self.assertEqual(b[0]["n"], n, q)
        # The list changed since the last sample: one by one, every clock
        # asked (the old list's too, when its head's address was reused).
        self.assertEqual((b[0]["fast"], b[0]["asked_quiet"]), (0, 0), b[0])
        self.assertGreaterEqual(b[0]["asked"], n, b[0])
        # The first fast round after the last slow one asks every clock (no
        # round before it to compare the GIL with).
        last_slow = max(i for i, r in enumerate(b) if not r["fast"])
        first = b[last_slow + 1]
        self.assertEqual((first["fast"], first["quiet"], first["asked"]), (1, 0, n), q)
        if not q["gil"]:
            self.assertGreaterEqual(self.minor, 14, "no GIL layout for 3.%d" % self.minor)
            self.assertTrue(all(r["asked"] >= n and not r["quiet"] for r in b + a), q)
            return
        self.assertTrue(q["holder_is_main"], q)
        # 3.11+ keep the main interpreter and its GIL beside _PyRuntime: a
        # fast round's first read is plain loads there, no system call
        # (3.10's interpreter is on the heap: read fault-safe).
        plain = [r["plain"] for r in b + a if r["fast"]]
        self.assertEqual(set(plain), {0} if self.minor == 10 else {1}, q)
        # Then quiet rounds: the holder's clock alone, the holder alone walked.
        for r in b[-2:]:
            self.assertEqual((r["fast"], r["quiet"], r["asked"], r["asked_quiet"]), (1, 1, 1, n - 1), r)
            self.assertEqual(list(r["walked"]), [q["main"]], r)
        # The mover took the GIL: every clock again, and it is where it went.
        self.assertTrue(q["switched"], q)
        self.assertEqual(a[0]["quiet"], 0, a[0])
        self.assertGreaterEqual(a[0]["asked"], n, a[0])
        moved = a[0]["walked"][q["mover"]]
        self.assertIn(self.at("two_step_b", "two_step"), moved)
        self.assertNotIn(self.at("two_step_a", "two_step"), moved)
        self.assertEqual((a[-1]["quiet"], a[-1]["asked"]), (1, 1), a)
        # Another holder, the same switch count (a switch half done): every
        # clock asked, not only the new holder's (made by hand up to 3.12).
        if self.minor < 13:
            t = q["torn"]
            self.assertEqual((t["fast"], t["quiet"]), (1, 0), t)
            self.assertGreaterEqual(t["asked"], n, t)

    def check_hostile(self):
        h = self.r["hostile"]
        efault = -errno.EFAULT
        # Random memory: every walk is abandoned or finds nothing; every sample is bounded.
        self.assertTrue(set(h["random"]) <= {"0", str(efault), "sample<=4096"}, h["random"])
        self.assertEqual(h["random"]["sample<=4096"], h["rounds"])
        for n, trunc, text in h["cycle"]:
            self.assertEqual((n, trunc), (32, 1))
            self.assertEqual({ln.rsplit(" ", 1)[1] for ln in text.splitlines()}, {"target"})
        if self.minor >= 12:
            self.assertEqual(h["skip_cycle"], [efault, efault])
        if self.minor >= 11:
            self.assertEqual(h["bad_instr"], [efault, efault])
        self.assertEqual(h["not_code"], [efault, efault])
        self.assertEqual(h["thread_cycle"], 4096)
        self.assertEqual(h["huge_str"], efault)
        self.assertEqual(h["huge_table"][0], 0)
        self.assertTrue(h["huge_table"][1].endswith(" target"), h["huge_table"])
        self.assertEqual(h["stale"], -errno.ESTALE)
        self.assertEqual(h["fresh"][0], 0)

    def check_all(self):
        self.check_exact()
        self.check_gen_coro()
        self.check_depth_cap()
        self.check_c_frame_between()
        self.check_threads()
        self.check_dated()
        self.check_prefetched()
        self.check_churn()
        self.check_quiet()
        self.check_hostile()


def make_case(minor):
    def test(self):
        py = FOUND.get(minor)
        if py is None:
            self.skipTest("no python3.%d found (PATH, PROFD_TEST_PYTHONS, pyenv)" % minor)
        self.minor = minor
        self.r = run(py)
        self.check_all()
    test.__name__ = "test_python3_%d" % minor
    return test


class TestPywalk(Walker, unittest.TestCase):
    def test_refused(self):
        if not REFUSED:
            self.skipTest("no interpreter to refuse found (older than 3.10, debug, free-threaded)")
        for py, v, ft, dbg in REFUSED:
            r = run(py, hostile=False)
            self.assertEqual(r["init"], -errno.ENOTSUP, py)
            self.assertIn("Python " + v, r["why"])
            if ft:
                self.assertIn("free-threaded", r["why"])
            if dbg:
                self.assertIn("debug", r["why"])


for _m in MINORS:
    setattr(TestPywalk, "test_python3_%d" % _m, make_case(_m))

if __name__ == "__main__":
    if not PROBE:
        print("SKIP: PYWALK_PROBE not set (run through meson test)")
        sys.exit(77)
    if pythons.describe(pythons.SYSTEM) is None:
        print("SKIP: no %s" % pythons.SYSTEM)
        sys.exit(77)
    unittest.main(verbosity=2)
