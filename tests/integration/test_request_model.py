# SPDX-License-Identifier: MIT
"""Randomised requests (fixed seed) checked against a model of profd's
request rules: every answer's status is the one the model predicts, every
repository file lands exactly where the model says and decodes, and
nothing is written outside the allowed directory."""
import os
import random
import re
import shutil
import tempfile
import time
import unittest

import grpc

import profdtest as T
from helpers import P, wait_active
from xspacecheck import check_xspace

N = 300
BATCH = 30
MAX_MS = 1000
SEED = 20261122
TIMESTAMP = re.compile(r"^\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d$")
PIECES = ["a", "b", "/", "..", ".", ":", ":", "\x01", "\x7f", "é", "\\", " ", "_", "-", "x" * 60, "%2e", "9"]


def component_ok(s):
    b = s.encode()
    # A leading '.' covers '.', '..' and hidden names, which profd never creates.
    return 0 < len(b) <= 255 and not s.startswith(".") and not any(c == "/" or ord(c) < 0x20 or ord(c) == 0x7f
                                                                   for c in s)


class Model(unittest.TestCase):
    def test_random_requests_match_the_model(self):
        rnd = random.Random(SEED)
        top = tempfile.mkdtemp(prefix="profd-model-")
        allowed = os.path.join(top, "allowed")
        os.makedirs(allowed)
        d = T.Daemon("--hostname", "model-host", "--max-duration", f"{MAX_MS}ms", "--max-sessions", "64",
                     "--repository-allow", allowed)
        ch = T.channel(d.addr)
        profile = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)

        def rs():
            return "".join(rnd.choice(PIECES) for _ in range(rnd.randint(0, 5)))

        expected_files = set()
        stats = {"OK": 0, "INVALID_ARGUMENT": 0, "files": 0}
        try:
            pending = []
            for i in range(N):
                r = P.ps.ProfileRequest()
                if rnd.random() < 0.8:
                    r.duration_ms = rnd.choice([0, 1, 5, 20, 5, 10, MAX_MS + 1, 2**64 - 1])
                o = None
                if rnd.random() < 0.8:
                    o = r.opts
                    o.version = rnd.choice([0, 1])
                    o.duration_ms = rnd.choice([0, 0, 0, 3, 15, 15, MAX_MS + 1, 2**63])
                    if rnd.random() < 0.4:
                        # Far from the limit on both sides, so timing cannot flip the answer.
                        o.start_timestamp_ns = rnd.choice([1, time.time_ns() - 10**9, time.time_ns() + 10 * 10**6,
                                                           time.time_ns() + 50 * 10**9, 2**64 - 1])
                    if rnd.random() < 0.3:
                        o.session_id = rs()
                    if rnd.random() < 0.2:
                        o.override_hostname = rs()
                    if rnd.random() < 0.2:
                        o.advanced_configuration["override_hostname"].string_value = rs()
                    if rnd.random() < 0.1:
                        o.advanced_configuration["override_hostname"].int64_value = 7
                if rnd.random() < 0.6:
                    r.session_id = rs()
                if rnd.random() < 0.6:
                    r.host_name = rs()
                kind = rnd.choice(["none", "inside", "inside-bad", "outside", "relative", "self"])
                r.repository_root = {"none": "", "inside": os.path.join(allowed, "r" + str(i % 3)),
                                     "inside-bad": allowed + "/" + rnd.choice(["..", ".", "a/../b", "a//./b"]),
                                     "outside": os.path.join(top, "outside"), "relative": "rel/dir",
                                     "self": allowed}[kind]
                r.emit_xspace = rnd.random() < 0.15

                # ---- the model ----
                dur = (o.duration_ms if o and o.duration_ms else 0) or r.duration_ms
                sid = r.session_id or (o.session_id if o else "")
                adv = ""
                if o and "override_hostname" in o.advanced_configuration and \
                        o.advanced_configuration["override_hostname"].WhichOneof("value") == "string_value":
                    adv = o.advanced_configuration["override_hostname"].string_value
                host = (o.override_hostname if o and o.override_hostname else "") or adv or r.host_name or "model-host"
                fname = host.replace(":", "_") + ".xplane.pb"
                delay_ms = ((o.start_timestamp_ns - time.time_ns()) // 10**6) if o and o.start_timestamp_ns else 0
                ok = (0 < dur <= MAX_MS and delay_ms <= MAX_MS and (not sid or component_ok(sid))
                      and component_ok(host) and component_ok(fname))
                writes = None
                if not r.emit_xspace and kind == "inside-bad":
                    ok = False
                if ok and not r.emit_xspace and kind in ("inside", "self"):
                    writes = (r.repository_root, sid or None, fname)
                pending.append((r, ok, writes, profile.future(r, timeout=30)))
                if len(pending) == BATCH or i == N - 1:
                    for r, ok, writes, f in pending:
                        e = f.exception()
                        code = e.code() if e else grpc.StatusCode.OK
                        self.assertEqual(code, grpc.StatusCode.OK if ok else grpc.StatusCode.INVALID_ARGUMENT,
                                         f"{r} -> {e.details() if e else 'OK'}")
                        stats[code.name] += 1
                        if writes:
                            root, sid, fname = writes
                            if sid is None:  # a timestamp directory; find the newest holding fname
                                cands = [x for x in os.listdir(root) if TIMESTAMP.match(x)
                                         and os.path.exists(os.path.join(root, x, fname))]
                                self.assertTrue(cands, writes)
                                sid = max(cands)
                            path = os.path.join(root, sid, fname)
                            self.assertTrue(os.path.isfile(path), path)
                            expected_files.add(os.path.relpath(path, allowed))
                            if not e:
                                data = f.result().tool_data[0].data
                                with open(path, "rb") as fh:
                                    x = P.xp.XSpace.FromString(fh.read())
                                check_xspace(self, x, "model-host")
                                check_xspace(self, P.xp.XSpace.FromString(data), "model-host")
                        if ok and not e:
                            resp = f.result()
                            if r.emit_xspace:
                                self.assertEqual(len(resp.tool_data), 0)
                                self.assertTrue(resp.HasField("xspace"))
                            else:
                                self.assertEqual([t.name for t in resp.tool_data], ["xplane.pb"])
                    pending = []
            self.assertEqual(wait_active(d.addr, 0), 0)
            # Nothing outside the allowed directory; inside only what the model said.
            self.assertEqual(sorted(os.listdir(top)), ["allowed"])
            found = set()
            for root, dirs, files in os.walk(allowed):
                for fn in files:
                    found.add(os.path.relpath(os.path.join(root, fn), allowed))
            self.assertEqual(found, expected_files)
            stats["files"] = len(found)
        finally:
            ch.close()
            rc = d.stop()
            shutil.rmtree(top, ignore_errors=True)
        self.assertEqual(rc, 0, d.log())
        print(f"outcomes: {stats}")
        # The seed exercises both answers and the write path.
        self.assertGreater(stats["OK"], 30)
        self.assertGreater(stats["INVALID_ARGUMENT"], 30)
        self.assertGreater(stats["files"], 5)


if __name__ == "__main__":
    unittest.main(verbosity=2)
