# SPDX-License-Identifier: MIT
"""What Python stacks cost a job, on the fake CUDA (no GPU needed).

The job is tests/agent/pystacks-app.py under the real libprofd-agent.so;
this script plays profd's side of the agent socket (test_pystacks.py's
Receiver) so that each capture's START flags are exactly the ones measured.
In one process, two captures, the modes of each interleaved batch by batch
(the machine's noise then falls on every mode alike):

  capture 1, no Python stacks (the API callbacks stay off):
    off       the agent's own cost only
    cprofile  the same loop under cProfile (PyEval_SetProfile: what
              in-process tracers hook, every call and return)
  capture 2, launch stacks on (the API callbacks on), toggled by a START
  with new options before each batch:
    paused    stacks off again: the callbacks' dispatch only
    depth10   stacks on, the launching function 10 frames deep
    depth50   the same, 50 frames deep

Each mode runs --runs batches of --launches launches, each from a chain of
--calls Python calls (a framework op is several: the module's __call__,
forward, a functional; cProfile's cost grows with them, a stack's with the
depth), the launching frame 10 or 50 frames deep; per-launch time = the launching thread's CPU time / launches; printed as the
median, min and max of the batches; "added" is a mode's median minus the
median of the mode interleaved with it (stacks: paused; cProfile: off).

Then the sampler: --seconds of a capture with PY_SAMPLE at 100 Hz while 8
and then 32 Python threads (20 frames deep) wait; its CPU time is the
sampler thread's own (/proc/PID/task/TID/schedstat), as % of one core.
The threads wake together every 50 ms (as threads started together do);
--staggered spreads their wake-ups over the 50 ms, so that most samples
find some thread run since the last. The peer beside it, over the same
seconds: bench/wakeup-peer, a thread that sleeps as the sampler does at
the same rate and does nothing else (what waking up alone costs this
machine: on a VM, tens of microseconds each); "work" is the sampler's
figure minus the peer's.

  python3 bench/pystacks-overhead.py [--runs 9] [--launches 10000] [--calls 1] [--staggered] [--python PATH]
Environment: PROFD_AGENT_SO, FAKE_CUDA_APP, WAKEUP_PEER (default: the build's).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "tests", "agent"), os.path.join(HERE, "..", "tests", "pylib")]
BUILD = os.environ.get("PROFD_BUILD", os.path.join(HERE, "..", "build"))
os.environ.setdefault("PROFD_AGENT_SO", os.path.join(BUILD, "collectors", "cupti", "libprofd-agent.so"))
os.environ.setdefault("FAKE_CUDA_APP", os.path.join(BUILD, "tests", "agent", "fakecuda", "fake-cuda-app"))
WAKEUP_PEER = os.environ.get("WAKEUP_PEER", os.path.join(BUILD, "bench", "wakeup-peer"))

import test_pystacks as P  # noqa: E402  (after the path)


def sampler_tid(pid):
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            if f.read().strip() == "profd-pysample":
                return int(tid)
    return None


def cpu_ns(pid, tid):
    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
        return int(f.read().split()[0])


class Job:
    def __init__(self, python):
        self.tmp = tempfile.mkdtemp(prefix="profd-pybench-")
        path = os.path.join(self.tmp, "agent.sock")
        self.rx = P.Receiver(path)
        self.app = P.App(python, path)
        self.rx.accept()
        self.rx.wait(P.F_DEVICE, 2)
        self.captures = 0

    def capture(self, flags, depth=0, hz=100):
        self.rx.start(flags, hz, depth)
        self.captures += 1
        self.rx.wait(P.F_CLOCK, 1 + 2 * (self.captures - 1))
        want_domains = bool(flags & P.START_PY_STACKS)
        if not P.T.wait_for(lambda: self.app.tracing(want_domains), 10):
            raise SystemExit(f"the agent did not start the capture: {self.rx.cap.errors}")

    def stop(self):
        self.rx.send(P.F_STOP)
        self.rx.wait(P.F_STATS, self.captures)
        # The agent detaches (no finalize without a CUDA call) before the next START.
        time.sleep(2.5)

    def close(self):
        self.app.finish()
        self.rx.close()


def batches(job, runs, launches, depth, calls, profile=False):
    tail = f" {depth} {calls}" + (" profile" if profile else "")
    job.app.ask(f"bench {max(launches // 10, 1)}" + tail)  # warm-up
    return [float(job.app.ask(f"bench {launches}" + tail)[1]) for _ in range(runs)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--launches", type=int, default=10000)
    ap.add_argument("--calls", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--staggered", action="store_true")
    a = ap.parse_args()

    job = Job(a.python)
    res = {k: [] for k in ("off", "cprofile", "paused", "depth10", "depth50")}
    try:
        job.capture(0)
        for _ in range(a.runs):
            res["off"] += batches(job, 1, a.launches, 50, a.calls)
            res["cprofile"] += batches(job, 1, a.launches, 50, a.calls, profile=True)
        job.stop()
        job.capture(P.START_PY_STACKS, depth=64)
        for _ in range(a.runs):
            for mode, flags, depth in (("paused", 0, 50), ("depth10", P.START_PY_STACKS, 10),
                                       ("depth50", P.START_PY_STACKS, 50)):
                job.rx.start(flags, 100, 64)
                time.sleep(0.2)  # the agent applies it on its own thread
                res[mode] += batches(job, 1, a.launches, depth, a.calls)
        job.stop()
        stats = job.rx.cap.stats
        samp = {}
        for n in (8, 32):
            job.app.ask(f"threads {n}" + (" staggered" if a.staggered else ""))
            job.capture(P.START_PY_SAMPLE, hz=100)
            tid = None
            P.T.wait_for(lambda: sampler_tid(job.app.pid) is not None, 5)
            tid = sampler_tid(job.app.pid)
            s0, c0 = len(job.rx.cap.samples), cpu_ns(job.app.pid, tid)
            t0 = time.monotonic()
            peer = subprocess.Popen([WAKEUP_PEER, "100", str(a.seconds)], stdout=subprocess.PIPE, text=True)
            time.sleep(a.seconds)
            c1, t1 = cpu_ns(job.app.pid, tid), time.monotonic()
            s1 = len(job.rx.cap.samples)
            out = peer.communicate(timeout=30)[0].split()
            if peer.returncode != 0 or len(out) < 2:
                raise SystemExit(f"{WAKEUP_PEER} failed ({peer.returncode}): {out}")
            job.stop()
            job.app.ask("stop")
            # The agent's own figure (STATS v6): its sampler's CPU over
            # the whole capture, start and stop included.
            st = job.rx.cap.stats
            own = 100.0 * st[16] / st[17] if st[17] else float("nan")
            samp[n] = (100.0 * (c1 - c0) / ((t1 - t0) * 1e9), (s1 - s0) / (t1 - t0), float(out[1]), own)
    finally:
        job.close()

    py = os.path.basename(a.python)
    med = {k: statistics.median(v) for k, v in res.items()}
    # Each mode against the one interleaved with it: stacks against
    # "paused" (same capture, callbacks on), cProfile against "off".
    ref = {"off": "off", "cprofile": "off", "paused": "off", "depth10": "paused", "depth50": "paused"}
    print(f"per launch ({py}, {a.launches} launches x {a.runs} batches, {a.calls} Python calls per launch; "
          "CPU ns, median [min..max]):")
    for k in ("off", "cprofile", "paused", "depth10", "depth50"):
        v = res[k]
        print(f"  {k:9s} {med[k]:8.1f} [{min(v):.1f}..{max(v):.1f}]  added vs {ref[k]:6s} {med[k] - med[ref[k]]:+8.1f}")
    stack, prof = med["depth50"] - med["paused"], med["cprofile"] - med["off"]
    if stack > 0:
        print(f"  cProfile adds {prof / stack:.1f}x what depth-50 stacks add")
    print(f"  launch stacks sent {stats[9]}, dropped {stats[10]} (last capture); the agent's own timing of "
          f"them (depths 10 and 50 together): median {stats[14]} ns, p90 {stats[15]} ns, {stats[13]} timed")
    print("sampler at 100 Hz" + (", threads staggered:" if a.staggered else ":"))
    for n, (pct, rate, peer, own) in samp.items():
        print(f"  {n:2d} threads: {pct:.3f} % of one core, {rate:.0f} thread samples/s; "
              f"wakeup-peer {peer:.3f} %, work {pct - peer:+.3f} %; the agent says {own:.3f} %")


if __name__ == "__main__":
    main()
