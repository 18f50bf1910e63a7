# SPDX-License-Identifier: MIT
"""Memory stays flat over many captures: 300 short captures of every kind
(normal, in-band and repository delivery, cancelled, refused, concurrent);
VmRSS after warm-up (50 captures) and at the end differ by < 2 MiB.

And a big capture's memory goes back: profd keeps the store's chunks and
the output warm in its page pool for the next capture (base/pagepool.h),
and returns them, with malloc's free heap, once idle (daemon/footprint.c).
After a 1 M-event capture from the fake agent, RSS first holds the pool
(tens of MB over idle), then comes back to within RETURN_KIB of idle."""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import grpc

import profdtest as T
from helpers import P, wait_active

TOTAL = 300
WARMUP = 50
BATCH = 10
LIMIT_KIB = 2048
FAKE = os.environ.get("FAKE_AGENT", os.path.join(T.BUILD, "tests", "agent", "fake-agent"))
BIG_EVENTS = 1_000_000
# The pool alone holds ~90 MB after a 1 M-event capture (40 B a record,
# ~53 B an encoded event); what must come back is all of that. The bound
# is 2x the bench's target (idle + 2 MiB, bench/RESULTS.md): heap pages
# malloc_trim() cannot return (fragments under live blocks) vary with the
# allocator's history, and this assertion is about the pool and the heap
# being returned at all.
RETURN_KIB = 4096
HELD_KIB = 30 * 1024
# The pool is released 4 s after the daemon went idle (POOL_IDLE_RELEASE_MS);
# a generous wait for a busy machine. Not a timing check: only the end
# state is asserted.
RETURN_WAIT_S = 60


def sanitized():
    """ASan keeps freed memory in quarantine, so RSS grows by design."""
    with open(T.PROFD, "rb") as f:
        return b"__asan_init" in f.read()


@unittest.skipIf(os.environ.get("PROFD_WRAPPER"), "VmRSS of a wrapped daemon is the wrapper's")
@unittest.skipIf(sanitized(), "profd is built with AddressSanitizer")
class Rss(unittest.TestCase):
    def test_rss_flat_over_300_captures(self):
        allowed = tempfile.mkdtemp(prefix="profd-allowed-")
        d = T.Daemon("--hostname", "itest-rss", "--repository-allow", allowed, "--max-sessions", "16")
        ch = T.channel(d.addr)
        profile = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
        raw = ch.unary_unary("/tensorflow.ProfilerService/Profile")
        counts = {}
        samples = {}
        done = 0
        try:
            while done < TOTAL:
                futs = []
                for i in range(BATCH):
                    n = done + i
                    kind = ("normal", "repo", "cancel", "deadline", "invalid", "garbage", "normal",
                            "emit", "normal", "repo")[n % 10]
                    counts[kind] = counts.get(kind, 0) + 1
                    req = T.profile_request(P, 5, d.addr, session_id=f"rss-{n % 7}")
                    if kind == "repo":
                        req.repository_root = os.path.join(allowed, "plugins", "profile")
                    elif kind == "emit":
                        req.emit_xspace = True
                    elif kind == "cancel":
                        req.opts.duration_ms = req.duration_ms = 5000
                    elif kind == "deadline":
                        req.opts.duration_ms = req.duration_ms = 5000
                    elif kind == "invalid":
                        req.session_id = "../bad"
                    if kind == "garbage":
                        futs.append((kind, raw.future(b"\x0a\xff", timeout=10)))
                    else:
                        futs.append((kind, profile.future(req, timeout=0.05 if kind == "deadline" else 10)))
                time.sleep(0.02)
                for kind, f in futs:
                    if kind == "cancel":
                        f.cancel()
                        continue
                    e = f.exception(timeout=10)
                    want = {"deadline": grpc.StatusCode.DEADLINE_EXCEEDED,
                            "invalid": grpc.StatusCode.INVALID_ARGUMENT,
                            "garbage": grpc.StatusCode.INVALID_ARGUMENT}.get(kind)
                    if want is None:
                        self.assertIsNone(e, f"{kind}: {e}")
                    else:
                        self.assertEqual(e.code(), want, kind)
                done += BATCH
                if done in (WARMUP, TOTAL):
                    self.assertEqual(wait_active(d.addr, 0), 0)
                    time.sleep(0.2)
                    samples[done] = T.proc_status_kib(d.proc.pid, "VmRSS")
        finally:
            ch.close()
            rc = d.stop()
            shutil.rmtree(allowed, ignore_errors=True)
        self.assertEqual(rc, 0, d.log())
        growth = samples[TOTAL] - samples[WARMUP]
        print(f"VmRSS after {WARMUP}: {samples[WARMUP]} KiB, after {TOTAL}: {samples[TOTAL]} KiB, "
              f"growth {growth} KiB; kinds {counts}")
        self.assertLess(growth, LIMIT_KIB)
        # Every kind ran and the daemon saw the cancels.
        self.assertEqual(sum(counts.values()), TOTAL)
        # (most of them: a cancel may overtake its request under load)
        self.assertGreaterEqual(d.log().count("cancelled by the client"), (counts["cancel"] + counts["deadline"]) // 2)


def settled_rss_kib(pid, settle_s=1.0, tries=20):
    """VmRSS once two readings settle_s apart agree within 64 KiB."""
    last = T.proc_status_kib(pid, "VmRSS")
    for _ in range(tries):
        time.sleep(settle_s)
        now = T.proc_status_kib(pid, "VmRSS")
        if abs(now - last) < 64:
            return now
        last = now
    return last


@unittest.skipIf(os.environ.get("PROFD_WRAPPER"), "VmRSS of a wrapped daemon is the wrapper's")
@unittest.skipIf(sanitized(), "profd is built with AddressSanitizer")
@unittest.skipUnless(os.path.exists(FAKE), "no fake agent built")
class ReturnedAfterBigCapture(unittest.TestCase):
    def test_big_capture_memory_returns_when_idle(self):
        tmp = tempfile.mkdtemp(prefix="profd-rss-")
        sock = os.path.join(tmp, "agent.sock")
        with T.Daemon("--agent-socket", sock, "--log-level", "info") as d:
            idle = settled_rss_kib(d.proc.pid)
            fake = subprocess.Popen([FAKE, "--socket", sock, "--devices",
                                     "GPU-rss00000-0000-0000-0000-000000000001,GPU-rss00000-0000-0000-0000-000000000002",
                                     "--name", "rss", "--events", str(BIG_EVENTS), "--spread-ms", "1400"],
                                    stdout=subprocess.PIPE, text=True)
            try:
                self.assertEqual(fake.stdout.readline().strip(), "connected")
                ch = T.channel(d.addr)
                profile = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
                req = T.profile_request(P, 1500, d.addr, session_id="rss-big")
                req.opts.start_timestamp_ns = 0
                resp = profile(req, timeout=120)
                ch.close()
            finally:
                fake.wait(timeout=60)
                fake.stdout.close()
            self.assertGreater(len(resp.tool_data[0].data), 30 * 1000 * 1000)
            # Right after the reply the pool still holds the capture's
            # memory (so that a next capture finds it warm)...
            held = T.proc_status_kib(d.proc.pid, "VmRSS")
            # ...and once idle it is returned.
            deadline = time.time() + RETURN_WAIT_S
            now = held
            while time.time() < deadline:
                now = T.proc_status_kib(d.proc.pid, "VmRSS")
                if now - idle < RETURN_KIB:
                    break
                time.sleep(0.5)
            settled = settled_rss_kib(d.proc.pid)
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"VmRSS idle {idle} KiB, right after a {BIG_EVENTS}-event capture {held} KiB, "
              f"settled {settled} KiB (+{settled - idle} KiB)")
        self.assertGreater(held - idle, HELD_KIB, "the capture should have used (and the pool kept) tens of MB")
        self.assertLess(settled - idle, RETURN_KIB)


if __name__ == "__main__":
    res = unittest.main(verbosity=2, exit=False).result
    # Everything skipped (ASan, a wrapper, no fake agent): tell meson (77).
    if res.testsRun and len(res.skipped) == res.testsRun:
        sys.exit(77)
    sys.exit(0 if res.wasSuccessful() else 1)
