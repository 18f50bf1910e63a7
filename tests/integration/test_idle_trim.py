# SPDX-License-Identifier: MIT
"""Idle code-page trim (base/codepages.h, daemon/footprint.c): once idle
after start-up, profd unmaps the clean code and read-only data pages of
its libraries, so its file-backed RSS (Rss - Anonymous of smaps_rollup)
drops by megabytes and its PSS with it; captures afterwards still work
(the code faults back), each later idle period trims again, and the idle
timer stops after it. With idle-trim = no nothing is unmapped, and a
SIGHUP switching it on applies from the next idle period. The ASan build
runs it too: ASan's shadow and quarantine are anonymous memory, and what is
asserted is file-backed RSS and PSS."""
import os
import signal
import tempfile
import time
import unittest

import profdtest as T
from helpers import P, main, wait_log
from xspacecheck import check_xspace

# The first idle period ends 4 s after start-up (POOL_IDLE_RELEASE_MS, one
# 1 s tick late at most); generous for a loaded machine. Only the end
# state is asserted, never a time.
TRIM_WAIT_S = 30
# What must go: gRPC's start-up code alone is ~4 MiB resident.
MIN_DROP_KIB = 1024
TRIMMED = "code pages unmapped"
IDLE = "idle: page pool"


def rollup(pid):
    """Rss, Pss and Anonymous of /proc/PID/smaps_rollup, in KiB."""
    got = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            k, _, rest = line.partition(":")
            if k in ("Rss", "Pss", "Anonymous"):
                got[k] = int(rest.split()[0])
    got["File"] = got["Rss"] - got["Anonymous"]
    return got


def capture(tc, d, session_id):
    s = T.Stubs(d.addr)
    try:
        t0 = time.time_ns()
        resp = s.profile(T.profile_request(P, 200, d.addr, session_id=session_id), timeout=30)
    finally:
        s.close()
    tc.assertEqual([td.name for td in resp.tool_data], ["xplane.pb"])
    check_xspace(tc, T.decode_xspace(P, resp.tool_data[0].data), req_t0_ns=t0, req_t1_ns=time.time_ns())


@unittest.skipIf(os.environ.get("PROFD_WRAPPER"), "the footprint of a wrapped daemon is the wrapper's")
@unittest.skipUnless(os.path.exists("/proc/self/smaps_rollup"), "no /proc/PID/smaps_rollup")
class IdleTrim(unittest.TestCase):
    def test_start_up_code_is_unmapped_and_captures_still_work(self):
        # No self-check here: its connections also lead to a trim (below).
        with T.Daemon("--self-check", "0") as d:
            before = rollup(d.proc.pid)
            self.assertTrue(wait_log(d, TRIMMED, TRIM_WAIT_S), d.log())
            self.assertIn("of start-up code pages unmapped", d.log())
            time.sleep(0.3)
            after = rollup(d.proc.pid)
            print(f"ready: {before}\ntrimmed: {after}")
            self.assertGreaterEqual(before["File"] - after["File"], MIN_DROP_KIB, d.log())
            self.assertLess(after["Pss"], before["Pss"])
            # The idle timer stopped: no second idle pass follows.
            time.sleep(2.5)
            self.assertEqual(d.log().count(IDLE), 1, d.log())

            # What a capture runs faults back in; the reply is whole.
            capture(self, d, "after-trim")
            # The next idle period trims what the capture ran.
            self.assertTrue(T.wait_for(lambda: d.log().count(TRIMMED) == 2, TRIM_WAIT_S), d.log())
            capture(self, d, "after-second-trim")

    def test_off_unmaps_nothing_until_a_reload_turns_it_on(self):
        with tempfile.TemporaryDirectory(prefix="profd-trim-") as tmp:
            path = os.path.join(tmp, "profd.conf")
            with open(path, "w") as f:
                f.write("idle-trim = no\n")
            with T.Daemon("--config", path, "--self-check", "0") as d:
                before = rollup(d.proc.pid)
                self.assertTrue(wait_log(d, IDLE, TRIM_WAIT_S), d.log())
                time.sleep(0.3)
                after = rollup(d.proc.pid)
                print(f"off: ready {before}, idle {after}")
                self.assertNotIn(TRIMMED, d.log())
                self.assertLess(before["File"] - after["File"], MIN_DROP_KIB // 2)

                with open(path, "w") as f:
                    f.write("idle-trim = yes\n")
                d.proc.send_signal(signal.SIGHUP)
                self.assertTrue(wait_log(d, "reload: idle-trim: no -> yes"), d.log())
                capture(self, d, "reloaded")
                self.assertTrue(wait_log(d, TRIMMED, TRIM_WAIT_S), d.log())
                self.assertLess(rollup(d.proc.pid)["File"], after["File"] - MIN_DROP_KIB)

    def test_self_check_connections_are_trimmed_again(self):
        # Each self-check makes gRPC's threads run their connection code
        # (megabytes of text): the idle path runs again after an answered
        # round, with no capture at all.
        with T.Daemon("--self-check", "1s") as d:
            self.assertTrue(wait_log(d, "of start-up code pages unmapped", TRIM_WAIT_S), d.log())
            self.assertTrue(T.wait_for(lambda: d.log().count(TRIMMED) >= 3, TRIM_WAIT_S), d.log())
            self.assertNotIn("self-check: the server did not answer", d.log())
            capture(self, d, "after-self-check-trims")


if __name__ == "__main__":
    main()
