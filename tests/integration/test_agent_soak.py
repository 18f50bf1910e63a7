# SPDX-License-Identifier: MIT
"""Soak with agents streaming, under valgrind (suite `valgrind`, not in the
default run; issue 10 "Fault and soak tests"):

  meson test -C build --setup valgrind --suite valgrind test_agent_soak
  SOAK_CAPTURES=1000 ... (bench/soak.sh: the long run)

profd runs under valgrind's leak checker with two fake agents streaming
kernel records into every capture; one of them is replaced by a new
process every 50 captures (connection teardown and setup). After
SOAK_CAPTURES sequential captures (default 100) profd is stopped with
SIGTERM. Asserted: every capture returned the agents' GPU events; exit 0;
no definitely or indirectly lost bytes and no valgrind errors; RSS and open
fds flat: the median VmRSS of the last 100 captures (of the last half
when fewer) is within SOAK_RSS_KIB of the first 100's after a warm-up,
and the fd count after the last capture equals the one after the first.
"""
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import unittest

import profdtest as T
from helpers import P, wait_active
from test_valgrind_soak import leak_numbers, valgrind_cmd

FAKE = os.environ.get("FAKE_AGENT", os.path.join(T.BUILD, "tests", "agent", "fake-agent"))
N = int(os.environ.get("SOAK_CAPTURES", "100"))
WARMUP = min(20, N // 5)
WINDOW = min(100, (N - WARMUP) // 2)
# VmRSS of the valgrind process (profd plus valgrind's own bookkeeping and
# its queue of freed blocks, see VG_QUARANTINE): what must not grow is
# profd's memory, a leak of ~1 KiB a capture would be 100 KiB per 100
# captures; the bound leaves room for the tool's own growth. Without
# valgrind (SOAK_VALGRIND=0) 1000 captures grow by < 1 MiB, flattening out.
RSS_KIB = int(os.environ.get("SOAK_RSS_KIB", "4096"))
REPLACE_EVERY = 50
# valgrind keeps freed blocks out of reuse until 20 MB of them queue up
# (--freelist-vol), so RSS under it climbs by that much whatever profd does;
# 1 MB still catches a use right after a free and leaves RSS meaningful.
VG_QUARANTINE = ["--freelist-vol=1000000"]


def n_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def start_agent(sock, tmp, name):
    out = open(os.path.join(tmp, f"{name}.out"), "w+")
    a = subprocess.Popen([FAKE, "--socket", sock, "--name", name, "--devices",
                          "GPU-50a50a50-0000-0000-0000-00000000000" + name[-1],
                          "--events", "2000", "--spread-ms", "80", "--captures", "1000000"],
                         stdout=out, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline:
        out.seek(0)
        if "connected" in out.read():
            return a, out
        if a.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"fake agent {name} did not connect")


def stop_agent(a, out):
    a.kill()
    a.wait()
    out.close()


def gpu_events(x):
    return sum(len(l.events) for p in x.planes if p.name.startswith("/device:GPU:") for l in p.lines)


@unittest.skipUnless(shutil.which("valgrind"), "valgrind is not installed")
@unittest.skipUnless(os.path.exists(FAKE), "no fake agent built")
class AgentSoak(unittest.TestCase):
    def test_soak_with_agents_streaming(self):
        tmp = tempfile.mkdtemp(prefix="profd-soak-")
        sock = os.path.join(tmp, "agent.sock")
        vglog = os.path.join(tmp, "valgrind.log")
        under_vg = os.environ.get("SOAK_VALGRIND", "1") != "0"  # 0: the RSS curve without the tool
        d = T.Daemon("--hostname", "itest-soak", "--agent-socket", sock, "--flush-timeout", "5s",
                     wrapper=valgrind_cmd(vglog) + VG_QUARANTINE if under_vg else [], timeout=60)
        agents = {}
        rss, fds, events = [], [], []
        gen = 0
        t0 = time.time()
        try:
            for name in ("soak1", "soak2"):
                agents[name] = start_agent(sock, tmp, name)
            ch = T.channel(d.addr)
            profile = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
            for i in range(N):
                if i and i % REPLACE_EVERY == 0:
                    stop_agent(*agents.pop("soak2"))
                    gen += 1
                    agents["soak2"] = start_agent(sock, tmp, "soak2")
                req = T.profile_request(P, 100, d.addr, session_id=f"soak-{i}")
                req.opts.start_timestamp_ns = 0
                x = T.decode_xspace(P, profile(req, timeout=120).tool_data[0].data)
                events.append(gpu_events(x))
                self.assertEqual(wait_active(d.addr, 0, timeout=30), 0)
                rss.append(T.proc_status_kib(d.proc.pid, "VmRSS"))
                fds.append(n_fds(d.proc.pid))
            ch.close()
            d.proc.send_signal(signal.SIGTERM)
        finally:
            for a in agents.values():
                stop_agent(*a)
            rc = d.stop(timeout=300)
        elapsed = time.time() - t0
        vg = ""
        if under_vg:
            with open(vglog) as f:
                vg = f.read()
        nums = leak_numbers(vg)
        first = rss[WARMUP:WARMUP + WINDOW]
        last = rss[-WINDOW:]
        print(f"{N} captures with 2 agents streaming ({gen} agent replacements) in {elapsed:.0f} s under valgrind")
        print(f"GPU events per capture: min {min(events)}, median {statistics.median(events)}")
        print(f"VmRSS median captures {WARMUP}-{WARMUP + WINDOW - 1}: {statistics.median(first)} KiB, "
              f"last {WINDOW}: {statistics.median(last)} KiB; max {max(rss)} KiB")
        print("VmRSS every 100 captures (KiB): " + " ".join(str(rss[i]) for i in range(0, N, 100)) +
              f" {rss[-1]}")
        print(f"open fds after capture 1: {fds[0]}, after capture {N}: {fds[-1]}, max {max(fds)}")
        print(f"profd exit code{' under valgrind' if under_vg else ''}: {rc}; leak numbers: {nums}")
        self.assertGreater(min(events), 0, "a capture had no GPU events")
        self.assertEqual(rc, 0, vg[-4000:] + d.log()[-4000:])
        self.assertEqual(nums.get("definitely", 0), 0, vg)
        self.assertEqual(nums.get("indirectly", 0), 0, vg)
        self.assertEqual(nums.get("errors", 0), 0, vg)
        self.assertLess(statistics.median(last) - statistics.median(first), RSS_KIB)
        self.assertEqual(fds[-1], fds[0], fds)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    res = unittest.main(verbosity=2, exit=False).result
    if res.testsRun and len(res.skipped) == res.testsRun:
        sys.exit(77)
    sys.exit(0 if res.wasSuccessful() else 1)
