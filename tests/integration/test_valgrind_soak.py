# SPDX-License-Identifier: MIT
"""Leak gate (suite `valgrind`, not in the default run):

  meson test -C build --setup valgrind --suite valgrind

Runs profd under valgrind's leak checker, performs 200 captures of every
kind (normal, repository write, emit_xspace, Terminate, cancelled, deadline
exceeded, invalid, garbage, refused by --max-sessions, concurrent), leaves
two captures open, stops the daemon with SIGTERM and asserts exit 0 with no
definitely or indirectly lost bytes. The numbers are printed.
"""
import os
import re
import shutil
import signal
import tempfile
import time
import unittest

import grpc

import profdtest as T
from helpers import P, wait_active

TOTAL = 200
BATCH = 8
MAX_SESSIONS = 12  # above what one batch (and stragglers) holds
KINDS = ("normal", "repo", "cancel", "deadline", "invalid", "garbage", "emit", "terminate",
         "normal", "delay-cancel")


def valgrind_cmd(log):
    return ["valgrind", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
            "--show-leak-kinds=definite,indirect", "--error-exitcode=99", "--num-callers=30",
            f"--log-file={log}"]


def leak_numbers(text):
    """{'definitely': bytes, 'indirectly': bytes, ...} from the LEAK SUMMARY;
    empty when valgrind printed none ("All heap blocks were freed")."""
    out = {}
    for kind in ("definitely", "indirectly", "possibly", "still reachable"):
        m = re.search(kind + r" (?:lost|reachable)?:? *([\d,]+) bytes in ([\d,]+) blocks", text)
        if m:
            out[kind] = int(m.group(1).replace(",", ""))
    m = re.search(r"ERROR SUMMARY: ([\d,]+) errors", text)
    if m:
        out["errors"] = int(m.group(1).replace(",", ""))
    return out


@unittest.skipUnless(shutil.which("valgrind"), "valgrind is not installed")
class ValgrindSoak(unittest.TestCase):
    def test_soak_200_captures(self):
        tmp = tempfile.mkdtemp(prefix="profd-vg-")
        allowed = os.path.join(tmp, "allowed")
        os.makedirs(allowed)
        vglog = os.path.join(tmp, "valgrind.log")
        d = T.Daemon("--hostname", "itest-vg", "--repository-allow", allowed, "--max-sessions", str(MAX_SESSIONS),
                     wrapper=valgrind_cmd(vglog), timeout=60)
        ch = T.channel(d.addr)
        profile = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
        terminate = T.stub(ch, "Terminate", P.ps.TerminateRequest, P.ps.TerminateResponse)
        raw = ch.unary_unary("/tensorflow.ProfilerService/Profile")
        counts = {}
        outcomes = {}
        n = 0
        try:
            while n < TOTAL:
                futs = []
                for i in range(BATCH):
                    kind = KINDS[(n + i) % len(KINDS)]
                    counts[kind] = counts.get(kind, 0) + 1
                    sid = f"vg-{n + i}"
                    req = T.profile_request(P, 30, d.addr, session_id=sid)
                    timeout = 30
                    if kind == "repo":
                        req.repository_root = os.path.join(allowed, "plugins", "profile")
                    elif kind == "emit":
                        req.emit_xspace = True
                    elif kind in ("cancel", "terminate"):
                        req.opts.duration_ms = req.duration_ms = 10000
                    elif kind == "deadline":
                        req.opts.duration_ms = req.duration_ms = 10000
                        timeout = 0.3
                    elif kind == "delay-cancel":
                        req.opts.start_timestamp_ns = time.time_ns() + 5 * 10**9
                    elif kind == "invalid":
                        req.host_name = "../../etc/passwd"
                    if kind == "garbage":
                        futs.append((kind, sid, raw.future(b"\x12\xff\x01", timeout=timeout)))
                    else:
                        futs.append((kind, sid, profile.future(req, timeout=timeout)))
                time.sleep(0.15)
                for kind, sid, f in futs:
                    if kind in ("cancel", "delay-cancel"):
                        f.cancel()
                    elif kind == "terminate":
                        terminate(P.ps.TerminateRequest(session_id=sid), timeout=30)
                for kind, sid, f in futs:
                    if kind in ("cancel", "delay-cancel"):
                        continue
                    e = f.exception(timeout=60)
                    code = e.code() if e else grpc.StatusCode.OK
                    outcomes.setdefault(kind, {}).setdefault(code.name, 0)
                    outcomes[kind][code.name] += 1
                n += BATCH
            self.assertEqual(wait_active(d.addr, 0, timeout=30), 0)
            # Fill every slot, get refused, then stop them all with one Terminate.
            fill = [profile.future(T.profile_request(P, 10000, d.addr, session_id="vg-fill"), timeout=60)
                    for _ in range(MAX_SESSIONS)]
            self.assertEqual(wait_active(d.addr, MAX_SESSIONS, timeout=30), MAX_SESSIONS)
            for _ in range(10):
                e = None
                try:
                    profile(T.profile_request(P, 30, d.addr, session_id="vg-over"), timeout=30)
                except grpc.RpcError as f_err:
                    e = f_err
                self.assertIsNotNone(e)
                self.assertEqual(e.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
                counts["refused"] = counts.get("refused", 0) + 1
            terminate(P.ps.TerminateRequest(session_id="vg-fill"), timeout=30)
            for f in fill:
                self.assertEqual([t.name for t in f.result(timeout=60).tool_data], ["xplane.pb"])
            counts["fill"] = MAX_SESSIONS
            self.assertEqual(wait_active(d.addr, 0, timeout=30), 0)
            # Shut down with captures still open.
            open_futs = [profile.future(T.profile_request(P, 10000, d.addr, session_id=f"vg-open-{i}"),
                                        timeout=60) for i in range(2)]
            self.assertEqual(wait_active(d.addr, 2, timeout=30), 2)
            d.proc.send_signal(signal.SIGTERM)
            for f in open_futs:
                e = f.exception(timeout=60)
                self.assertIsNotNone(e)
                self.assertEqual(e.code(), grpc.StatusCode.UNAVAILABLE, e.details())
        finally:
            ch.close()
            rc = d.stop(timeout=120)
        with open(vglog) as f:
            vg = f.read()
        nums = leak_numbers(vg)
        print(f"captures: {sum(counts.values())} {counts}")
        print(f"outcomes: {outcomes}")
        print(f"profd exit code under valgrind: {rc}; leak numbers: {nums}")
        print("valgrind summary:\n" + "\n".join(l for l in vg.splitlines()
                                               if "lost:" in l or "reachable:" in l or "ERROR SUMMARY" in l))
        self.assertEqual(n, TOTAL)
        # Each kind got the status it must.
        self.assertEqual(outcomes["normal"], {"OK": counts["normal"]})
        self.assertEqual(outcomes["repo"], {"OK": counts["repo"]})
        self.assertEqual(outcomes["emit"], {"OK": counts["emit"]})
        self.assertEqual(outcomes["terminate"], {"OK": counts["terminate"]})
        self.assertEqual(outcomes["deadline"], {"DEADLINE_EXCEEDED": counts["deadline"]})
        self.assertEqual(outcomes["invalid"], {"INVALID_ARGUMENT": counts["invalid"]})
        self.assertEqual(outcomes["garbage"], {"INVALID_ARGUMENT": counts["garbage"]})
        self.assertEqual(rc, 0, vg[-4000:] + d.log()[-4000:])
        self.assertIn("exit 0", d.log())
        self.assertEqual(nums.get("definitely", 0), 0, vg)
        self.assertEqual(nums.get("indirectly", 0), 0, vg)
        self.assertEqual(nums.get("errors", 0), 0, vg)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
