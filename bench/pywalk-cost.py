#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What one pyw_walk_current() costs (collectors/cupti/pywalk.h), in ns.

    bench/pywalk-cost.py [--python /usr/bin/python3] [--runs 21] [--iters 20000]

Needs a build (build/ or $PROFD_BUILD): the walker probe
build/tests/agent/libpywalk-probe.so (or $PYWALK_PROBE). Under the given
interpreter, a thread stands exactly 10 and then 50 Python frames deep and
calls the walker @iters times per run in C (no ctypes call per walk);
prints the median ns per walk over @runs runs with the min, p10, p90 and
max. Also the sampler's cost: pyw_sample_all() over 8 and 32 threads
parked 10 frames deep (plus the main thread), per sample, raw (as the
agent's sampler takes it), with none of them run since its last sample
(none walked, as the agent's sampler skips them) and with every frame
resolved to text.
"""
import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("PROFD_BUILD", os.path.join(HERE, "..", "build"))
PROBE = os.environ.get("PYWALK_PROBE", os.path.join(BUILD, "tests", "agent", "libpywalk-probe.so"))


def depth():
    n, f = 0, sys._getframe()
    while f:
        n, f = n + 1, f.f_back
    return n


def at_depth(want, fn):
    """Call fn() from a frame exactly @want Python frames deep (this one included)."""
    if depth() >= want:
        return fn()
    return at_depth(want, fn)


def spread(xs):
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=10)
    return "median %.0f  (min %.0f, p10 %.0f, p90 %.0f, max %.0f)" % (statistics.median(xs), xs[0], q[0], q[-1],
                                                                      xs[-1])


def measure(lib, args):
    frames = ctypes.c_int()
    for want in (10, 50):
        def runs():
            out = []
            for _ in range(args.runs):
                ns = lib.probe_bench_walk(64, args.iters, ctypes.byref(frames))
                if ns < 0:
                    raise SystemExit("the walk failed")
                out.append(ns)
            return out
        ns = at_depth(want, runs)
        print("walk_current depth %2d (%d frames kept): ns/walk %s" % (want, frames.value, spread(ns)))

    buf = ctypes.create_string_buffer(1 << 22)
    for nthreads in (8, 32):
        stop = threading.Event()
        ths = [threading.Thread(target=at_depth, args=(10, lambda: stop.wait())) for _ in range(nthreads)]
        for t in ths:
            t.start()
        time.sleep(0.2)
        seen = ctypes.c_int()
        raw = [lib.probe_bench_sample(64, 50, 0, ctypes.byref(seen)) / 1000 for _ in range(args.runs)]
        # None run since its last sample: the agent's sampler skips their walks.
        idle = [lib.probe_bench_sample(64, 50, 1, ctypes.byref(seen)) / 1000 for _ in range(args.runs)]
        # Every frame resolved to text as well: a sampler with no symbol cache.
        text = []
        for _ in range(args.runs):
            t0 = time.perf_counter_ns()
            lib.probe_sample(buf, len(buf), 64)
            text.append((time.perf_counter_ns() - t0) / 1000)
        stop.set()
        for t in ths:
            t.join()
        print("sample_all %d threads: us/sample %s" % (seen.value, spread(raw)))
        print("sample_all %d threads, none run since: us/sample %s" % (seen.value, spread(idle)))
        print("sample_all %d threads, resolved to text: us/sample %s" % (seen.value, spread(text)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not args.inner:
        # Measure under the interpreter asked for, whatever runs this script.
        cmd = [args.python, os.path.abspath(__file__), "--inner", "--runs", str(args.runs), "--iters",
               str(args.iters)]
        sys.exit(subprocess.call(cmd, env=dict(os.environ, PYWALK_PROBE=PROBE)))
    lib = ctypes.CDLL(PROBE)
    lib.probe_bench_walk.restype = ctypes.c_double
    lib.probe_bench_sample.restype = ctypes.c_double
    why = ctypes.create_string_buffer(128)
    rc = lib.probe_init(why, len(why))
    if rc != 0:
        raise SystemExit("pyw_init: %d %s" % (rc, why.value.decode()))
    print("Python %s, probe %s, %d runs of %d walks" % (sys.version.split()[0], PROBE, args.runs, args.iters))
    measure(lib, args)


if __name__ == "__main__":
    main()
