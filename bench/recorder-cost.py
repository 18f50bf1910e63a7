#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""profd's CPU and memory while the flight recorder runs (docs/recorder.md, Cost).

For each case a fresh profd records (StartContinuousProfiling) for --seconds
while fake agents (tests/agent/fake-agent) are connected: idle jobs (armed,
sending nothing), then one job streaming kernel records at each --rates
value. The same stream is then taken as one Profile capture of the same
length, for comparison. Printed per case: the records profd stored (the
ring's bytes / 40 plus what it evicted; a capture's event count from the
log), profd CPU in % of a core (utime + stime over the run, the capture's
encode and send included), CPU per million records, the ring's bytes and
profd's RSS at the end.

    bench/recorder-cost.py [--seconds 10] [--rates 100000,1000000] [--idle-jobs 8]
                           [--ring 256M]

Run from the source root after `ninja -C build` (PROFD_BUILD moves it).
Exits 77 without the fake agent.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("PROFD_SRC", SRC)
os.environ.setdefault("PROFD_BUILD", os.path.join(SRC, "build"))
sys.path[:0] = [os.path.join(SRC, "tests", "pylib"), os.path.join(SRC, "tests", "integration")]

import profdtest as T  # noqa: E402

FAKE = os.path.join(os.environ["PROFD_BUILD"], "tests", "agent", "fake-agent")


def cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def agent(sock, events, seconds):
    args = [FAKE, "--socket", sock]
    args += ["--events", str(events), "--spread-ms", str(int(seconds * 1000))] if events else ["--kernels", "0"]
    a = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert a.stdout.readline().strip() == "connected"
    return a


def run(mode, rate, idle_jobs, seconds, ring):
    p = T.protos()
    tmp = tempfile.mkdtemp(prefix="profd-bench-rec-")
    sock = os.path.join(tmp, "agent.sock")
    d = T.Daemon("--agent-socket", sock, "--recorder-bytes", ring, "--max-bytes", "2048M",
                 "--max-events", "100000000", "--log-level", "info", "--flush-timeout", "5s")
    jobs = [agent(sock, 0, seconds) for _ in range(idle_jobs)]
    if rate:
        jobs.append(agent(sock, int(rate * seconds), seconds))
    ch = T.channel(d.addr)
    try:
        c0, t0 = cpu_s(d.proc.pid), time.time()
        if mode == "record":
            start = T.stub(ch, "StartContinuousProfiling", p.ps.ProfileRequest, p.ps.ContinuousProfilingResponse)
            start(p.ps.ProfileRequest(), timeout=10)
            time.sleep(seconds)
            st = T.status(d.addr).recorder
            held = st.held_bytes
            records = held / 40 + st.evicted
        else:
            req = T.profile_request(p, int(seconds * 1000), "bench:1")
            T.stub(ch, "Profile", p.ps.ProfileRequest, p.ps.ProfileResponse)(req, timeout=seconds + 120)
            held = 0
            m = re.search(r"capture for \S+: (\d+) events", d.log())
            records = int(m.group(1)) if m else 0
        c1, t1 = cpu_s(d.proc.pid), time.time()
        rss = T.proc_status_kib(d.proc.pid, "VmRSS")
    finally:
        ch.close()
        for a in jobs:
            a.kill()
            a.wait()
            a.stdout.close()
        d.stop()
    cpu = c1 - c0
    per_m = f"{cpu / (records / 1e6):.3f} s" if rate and records else "-"
    print(f"| {mode} | {idle_jobs} idle + {'1 at ' + format(rate, ',') + '/s' if rate else 'none'} | "
          f"{records / seconds:,.0f}/s | {100 * cpu / (t1 - t0):.1f} % | {per_m} | {held / 1e6:.1f} MB | "
          f"{rss / 1024:.1f} MiB |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rates", default="100000,1000000")
    ap.add_argument("--idle-jobs", type=int, default=8)
    ap.add_argument("--ring", default="256M")
    a = ap.parse_args()
    if not os.access(FAKE, os.X_OK):
        print("no fake agent built: skipped")
        sys.exit(77)
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; nproc {os.cpu_count()}; "
          f"load {os.getloadavg()[0]:.2f}; {a.seconds:g} s per case")
    print("| mode | jobs | stored | profd CPU | per 1 M records | ring | RSS at the end |")
    print("|---|---|---|---|---|---|---|")
    run("record", 0, a.idle_jobs, a.seconds, a.ring)
    for r in (int(x) for x in a.rates.split(",")):
        run("record", r, 0, a.seconds, a.ring)
        run("capture", r, 0, a.seconds, a.ring)


if __name__ == "__main__":
    main()
