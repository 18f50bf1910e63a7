# SPDX-License-Identifier: MIT
"""Memory stays flat over many captures: 300 short captures of every kind
(normal, in-band and repository delivery, cancelled, refused, concurrent);
VmRSS after warm-up (50 captures) and at the end differ by < 2 MiB."""
import os
import shutil
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


def vmrss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


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
                    samples[done] = vmrss_kib(d.proc.pid)
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
