# SPDX-License-Identifier: MIT
"""What the flight recorder costs a CUDA job (docs/recorder.md, Cost; needs a GPU).

The launch-bound CUDA loop (bench/gpu/launch-loop.cu, as bench/gpu-overhead.py
runs it), each run in a fresh process, interleaved:

  plain     no agent
  recorded  CUDA_INJECTION64_PATH=libprofd-agent.so while profd records
            (profctl record start: StartContinuousProfiling), so the agent
            runs recording mode from its first CUDA call

Each process runs 3 s of batches (per-launch time = median batch time /
launches per batch); a recorded one then runs K batches, and a snapshot
(profctl snapshot) must hold every kernel of them. Medians over --reps
processes per mode. Goal: recorded within 2 % of plain per launch.

Exit status: 0 when the checks held, 1 otherwise, 77 without a GPU.
Writes --json (the runs and the verdict).

  python3 tests/gpu/recorder-overhead.py [--reps 4] [--json FILE]
Environment as bench/gpu-overhead.py: PROFD, PROFCTL, AGENT, GPU_BIN or NVCC.
"""
import argparse
import glob
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

SRC = os.environ.get("PROFD_SRC", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(SRC, "tests", "pylib"))
_spec = importlib.util.spec_from_file_location("gpu_overhead", os.path.join(SRC, "bench", "gpu-overhead.py"))
G = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(G)

GOAL = 1.02
STEPS = 100


def profctl(b, *args):
    return subprocess.run([b.profctl, *args], capture_output=True, text=True, timeout=120)


def one(b, mode, rep):
    j = b.job("cuda-loop", "traced" if mode == "recorded" else "plain")
    out = {"mode": mode, "rep": rep}
    try:
        out["per_launch_us"] = G.per_launch_us(j.ask("run 3", 60))
        if mode == "recorded":
            steps = j.ask(f"steps {STEPS}", 120)
            time.sleep(1.5)  # the agent's flushes
            logdir = os.path.join(b.work, f"snap-{rep}")
            r = profctl(b, "snapshot", f"127.0.0.1:{b.port}", "--last", "10s", "--logdir", logdir)
            files = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
            return G.steps_in_trace(out, steps, [] if r.returncode else files,
                                    "no snapshot: " + (r.stdout + r.stderr)[-500:], b.P)
        return out
    finally:
        j.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--json", help="write the runs and the verdict here")
    args = ap.parse_args()
    b = G.gpu_bench(args)
    if not b:
        return 77
    runs, fails = [], []
    try:
        b.start_profd()
        r = profctl(b, "record", "start", f"127.0.0.1:{b.port}")
        if r.returncode:
            print("FAIL profctl record start: " + r.stdout + r.stderr)
            return 1
        for rep in range(args.reps):
            for m in ("plain", "recorded") if rep % 2 == 0 else ("recorded", "plain"):
                x = one(b, m, rep)
                print(json.dumps(x), flush=True)
                runs.append(x)
        profctl(b, "record", "stop", f"127.0.0.1:{b.port}")
    finally:
        b.stop()
    med = {m: statistics.median(x["per_launch_us"] for x in runs if x["mode"] == m and x.get("per_launch_us"))
           for m in ("plain", "recorded")}
    ratio = med["recorded"] / med["plain"]
    spread = {m: [round(x["per_launch_us"], 3) for x in runs if x["mode"] == m] for m in med}
    print(f"\nper launch: plain {med['plain']:.3f} us, recorded {med['recorded']:.3f} us "
          f"({100 * (ratio - 1):+.2f} %; goal <= {100 * (GOAL - 1):.0f} %); runs {spread}")
    if ratio > GOAL:
        fails.append(f"recording costs {100 * (ratio - 1):.2f} % per launch (goal <= {100 * (GOAL - 1):.0f} %)")
    for x in runs:
        if "error" in x:
            fails.append(f"rep {x['rep']}: {x['error']}")
        elif x["mode"] == "recorded" and x.get("kernels") != x.get("kernels_expected"):
            fails.append(f"rep {x['rep']}: {x.get('kernels')} kernels in the snapshot, "
                         f"{x.get('kernels_expected')} launched")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "per_launch_us": med, "ratio": ratio, "fails": fails}, f)
    for f in fails:
        print("FAIL " + f)
    print("all checks held" if not fails else f"{len(fails)} check(s) failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
