#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The agent's CPU in recording mode vs capture mode (docs/recorder.md, Cost).

The real libprofd-agent.so in the fake CUDA job (tests/agent/fakecuda: the
fake CUPTI makes the records, so no GPU is needed) under a fresh profd, one
run per mode, alternating, --runs times: `record` starts the flight
recorder (StartContinuousProfiling: the agent runs recording mode), `capture`
a Profile window long enough to cover the same work (full capture mode).
Once the agent traces, the job launches --launches kernels in batches of
--batch, then waits 1.5 s (the agents' flushes); the agent thread's CPU
(/proc/PID/task/TID/schedstat of "profd-agent": conversion, interning, sending,
the timed flushes) over that span is divided by the records the fake CUPTI
made meanwhile (kernel + API records). Printed per run, then per mode the
median, min and max, with the load average before and after: the goal is
recording mode at no more than capture mode per million records.

    bench/recorder-agent-cost.py [--runs 5] [--launches 200000] [--batch 20000]

Run from the source root after `ninja -C build` (PROFD_BUILD moves it).
Exits 77 without the agent or the fake CUDA job.
"""
import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.setdefault("PROFD_BUILD", os.path.join(SRC, "build"))
os.environ.setdefault("PROFD_SRC", SRC)
os.environ.setdefault("PROFD_AGENT_SO", os.path.join(BUILD, "collectors", "cupti", "libprofd-agent.so"))
os.environ.setdefault("FAKE_CUDA_APP", os.path.join(BUILD, "tests", "agent", "fakecuda", "fake-cuda-app"))
sys.path[:0] = [os.path.join(SRC, "tests", "pylib"), os.path.join(SRC, "tests", "agent")]

import profdtest as T  # noqa: E402
import tfclient  # noqa: E402
from test_agent_cupti import AGENT, APP, TRACED, App  # noqa: E402


def agent_cpu_s(pid):
    """CPU seconds of the agent thread of @pid (schedstat: ns, not ticks)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            if open(f"/proc/{pid}/task/{tid}/comm").read().strip() != "profd-agent":
                continue
            return int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0]) / 1e9
        except OSError:
            continue
    raise RuntimeError("no profd-agent thread")


def made(a):
    st = a.state()
    return st["kernels"] + st["api_records"]


def run(mode, launches, batch):
    p = T.protos()
    tmp = tempfile.mkdtemp(prefix="profd-bench-recagent-")
    sock = os.path.join(tmp, "agent.sock")
    d = T.Daemon("--agent-socket", sock, "--recorder-bytes", "512M", "--max-bytes", "2048M",
                 "--max-events", "100000000", "--flush-timeout", "5s")
    ch = T.channel(d.addr)
    a = App(sock)
    th = None
    try:
        if mode == "record":
            start = T.stub(ch, "StartContinuousProfiling", p.ps.ProfileRequest, p.ps.ContinuousProfilingResponse)
            start(tfclient.continuous_profiling_request(p), timeout=10)
        else:
            req = T.profile_request(p, 60000, "bench:1")
            prof = T.stub(ch, "Profile", p.ps.ProfileRequest, p.ps.ProfileResponse)
            th = threading.Thread(target=lambda: prof(req, timeout=180))
            th.start()
        if not T.wait_for(lambda: a.state()["kinds"] & TRACED == TRACED, 20):
            raise RuntimeError("the agent did not start tracing:\n" + d.log())
        r0, c0 = made(a), agent_cpu_s(a.pid)
        for _ in range(launches // batch):
            a.ask(f"launch {batch} _Z6vecAddPKfS0_Pfi 0 7")
        time.sleep(1.5)
        r1, c1 = made(a), agent_cpu_s(a.pid)
        if mode == "record":
            stop = T.stub(ch, "StopContinuousProfiling", p.ps.StopContinuousProfilingRequest,
                          p.ps.StopContinuousProfilingResponse)
            stop(p.ps.StopContinuousProfilingRequest(), timeout=10)
        else:
            term = T.stub(ch, "Terminate", p.ps.TerminateRequest, p.ps.TerminateResponse)
            term(p.ps.TerminateRequest(session_id="test_session"), timeout=10)
            th.join()
    finally:
        a.finish()
        ch.close()
        d.stop()
    return (c1 - c0) / ((r1 - r0) / 1e6), r1 - r0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--launches", type=int, default=200000)
    ap.add_argument("--batch", type=int, default=20000)
    o = ap.parse_args()
    if not (AGENT and os.path.exists(AGENT) and os.access(APP, os.X_OK)):
        print("no agent or fake CUDA job built: skipped")
        sys.exit(77)
    load0 = os.getloadavg()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; nproc {os.cpu_count()}; "
          f"load {load0[0]:.2f} {load0[1]:.2f}; {o.launches} launches per run")
    got = {"record": [], "capture": []}
    for i in range(o.runs):
        for mode in ("record", "capture") if i % 2 == 0 else ("capture", "record"):
            per_m, n = run(mode, o.launches, o.batch)
            got[mode].append(per_m)
            print(f"run {i + 1} {mode:7s}: {n:,} records, agent {per_m:.3f} s CPU per 1 M records", flush=True)
    print("| mode | agent CPU per 1 M records: median | min | max |")
    print("|---|---|---|---|")
    for mode, v in got.items():
        print(f"| {mode} | {statistics.median(v):.3f} s | {min(v):.3f} s | {max(v):.3f} s |")
    load1 = os.getloadavg()
    print(f"# load after {load1[0]:.2f} {load1[1]:.2f}")


if __name__ == "__main__":
    main()
