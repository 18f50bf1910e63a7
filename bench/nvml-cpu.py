#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""profd's CPU use while it samples NVML at 50 Hz during a long capture.

    bench/nvml-cpu.py [--gpus 8] [--hz 50] [--seconds 10]

Needs a build (build/ or $PROFD_BUILD). Starts profd with the fake NVML
(FAKE_NVML_LIB or build/tests/nvml/libfake-nvml.so), holds one capture
open, and reads /proc/<pid>/stat utime+stime over the measuring interval.
Prints one line with the CPU % of one core; also the idle daemon for
comparison.
"""
import argparse
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "pylib"))
os.environ.setdefault("PROFD_SRC", os.path.join(HERE, ".."))
os.environ.setdefault("PROFD_BUILD", os.path.join(HERE, "..", "build"))
os.environ.setdefault("PROFD", os.path.join(os.environ["PROFD_BUILD"], "daemon", "profd"))
import profdtest as T  # noqa: E402


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def measure(pid, seconds):
    hz = os.sysconf("SC_CLK_TCK")
    t0, c0 = time.monotonic(), cpu_ticks(pid)
    time.sleep(seconds)
    t1, c1 = time.monotonic(), cpu_ticks(pid)
    return 100.0 * (c1 - c0) / hz / (t1 - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--hz", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=10)
    a = ap.parse_args()
    lib = os.environ.get("FAKE_NVML_LIB", os.path.join(os.environ["PROFD_BUILD"], "tests", "nvml",
                                                        "libfake-nvml.so"))
    procs = ",".join(f"{i}:{os.getpid()}:1024" for i in range(a.gpus))
    P = T.protos()
    with T.Daemon("--nvml-library", lib, "--nvml-sample-hz", str(a.hz), "--log-level", "info",
                  env={"FAKE_NVML_GPUS": str(a.gpus), "FAKE_NVML_PROCS": procs}) as d:
        pid = d.proc.pid
        idle = measure(pid, min(a.seconds, 3))
        ch = T.channel(d.addr)
        prof = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
        ms = int((a.seconds + 3) * 1000)
        out = {}
        th = threading.Thread(target=lambda: out.setdefault("r", prof(T.profile_request(P, ms, "h:1"),
                                                                      timeout=ms / 1000 + 60)))
        th.start()
        time.sleep(1)
        busy = measure(pid, a.seconds)
        th.join()
        ch.close()
        x = T.decode_xspace(P, out["r"].tool_data[0].data)
        n = sum(len(l.events) for p in x.planes for l in p.lines)
    print(f"nvml-cpu: {a.gpus} fake GPUs at {a.hz} Hz + host.io: profd {busy:.2f}% of one core "
          f"during a capture ({a.seconds:.0f} s measured, {n} events captured); idle {idle:.2f}%")


if __name__ == "__main__":
    main()
