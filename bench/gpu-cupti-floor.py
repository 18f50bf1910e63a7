# SPDX-License-Identifier: MIT
"""What CUPTI itself costs a launch-bound CUDA loop, beside profd's capture (needs a GPU).

The traced launch-bound loop (bench/gpu/launch-loop.cu) has run at
1.5-1.6x its plain per-launch time under a profd capture, against a goal
of 1.3x and "no worse than an in-process tracer". This bench measures the
in-process floor: the same loop with bench/gpu/cupti-floor.c injected, a
tracer that only enables activity kinds and counts records, one switch at
a time up to the agent's exact kinds and attributes; then profd's capture
of the same loop in the same run. The difference between profd's capture
and the floor with the agent's settings is what the agent adds.

Modes, each a fresh process, interleaved over --reps:
  plain            no tracer
  floor:<FLOOR>    cupti-floor with FLOOR (see bench/gpu/cupti-floor.c)
  profd            the agent, captured by profd (bench/gpu-overhead.py's traced mode)
Per-launch time = median batch time / 256 over a 2 s run once the tracer
is on. Exit 0 when every mode ran, 1 otherwise, 77 without a GPU.

  python3 bench/gpu-cupti-floor.py [--reps 2] [--json FILE] [--floors "k;k,r;..."]
  (tests/gpu/on-device.sh step k: FLOORS="..." REPS=N choose them there)
Environment as bench/gpu-overhead.py, plus GPU_BIN/libcupti-floor.so (else
built here with gcc) and PROFD_CUPTI_PATH (the directory of libcupti.so.13).
"""
import argparse
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("gpu_overhead", os.path.join(HERE, "gpu-overhead.py"))
GO = importlib.util.module_from_spec(spec)
spec.loader.exec_module(GO)

AGENT_KINDS = "k,r,d,m,M,o"
# CUPTI's defaults first, then the agent's settings one at a time, then all
# of them (set_buffer_attributes(), cuptiSetThreadIdType(SYSTEM) and its
# subscriber in collectors/cupti/agent-capture.c).
# "sub,cb": the API callbacks on, as launch stacks turn them on (on an H200
# a torch loop launched faster with launch stacks on than off).
FLOORS = ["k", "k,r", AGENT_KINDS] + [AGENT_KINDS + "," + a
                                      for a in ("sys", "pt0", "z1", "sub", "sub,cb", "pt0,z1,sys,sub")]


def cupti_dirs():
    root = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    dirs = [os.environ.get("PROFD_CUPTI_PATH", ""), f"{root}/lib64", f"{root}/extras/CUPTI/lib64"]
    return [d for d in dirs if d and os.path.isdir(d)]


def prepare_floor(work):
    """libcupti-floor.so into @work: built ahead (GPU_BIN) or here."""
    out = os.path.join(work, "libcupti-floor.so")
    prebuilt = os.path.join(os.environ.get("GPU_BIN", "/nonexistent"), "libcupti-floor.so")
    if os.path.exists(prebuilt):
        shutil.copy(prebuilt, out)
        return out
    root = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", f"-I{root}/include", os.path.join(HERE, "gpu", "cupti-floor.c"),
                    f"-L{root}/lib64", "-lcupti", "-o", out], check=True)
    return out


def floor_one(b, lib, floor):
    env = dict(os.environ)
    env.pop("CUDA_INJECTION64_PATH", None)
    env.update(CUDA_INJECTION64_PATH=lib, FLOOR=floor,
               LD_LIBRARY_PATH=":".join(cupti_dirs() + [env.get("LD_LIBRARY_PATH", "")]))
    j = GO.Job([os.path.join(b.work, "launch-loop")], env)
    out = {"mode": "floor:" + floor}
    try:
        deadline = time.time() + 10
        while time.time() < deadline and not any(e.startswith("floor: on") for e in j.err):
            time.sleep(0.05)
        if not any(e.startswith("floor: on") for e in j.err):
            out["error"] = "the tracer never came on: " + j.stderr()
            return out
        time.sleep(0.3)
        out["per_launch_us"] = GO.per_launch_us(j.ask("run 2", 60))
    finally:
        j.close()
    time.sleep(0.2)  # the stderr pump reads the exit report
    m = [e for e in j.err if e and e.startswith("floor: records")]
    out["records"] = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", m[-1])) if m else None
    bad = [e for e in j.err if e and "cuptiActivityEnable(" in e]
    if bad:
        out["notes"] = bad[:4]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--json")
    ap.add_argument("--floors", default=os.environ.get("FLOORS"),
                    help="';'-separated FLOOR specs (default: $FLOORS, else " + " ; ".join(FLOORS) + ")")
    args = ap.parse_args()
    floors = args.floors.split(";") if args.floors else FLOORS
    b = GO.gpu_bench(args)
    if not b:
        return 77
    lib = prepare_floor(b.work)
    results = []
    try:
        b.start_profd()
        gpu = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.splitlines()[0]
        print(f"# {gpu}; {args.reps} processes per mode; load {os.getloadavg()[0]:.2f}", flush=True)
        for rep in range(args.reps):
            modes = ["plain"] + ["floor:" + f for f in floors] + ["profd"]
            if rep % 2:
                modes.reverse()  # drift hits every mode alike
            for m in modes:
                try:
                    if m in ("plain", "profd"):  # gpu-overhead.py's plain and traced modes
                        r = b.one("cuda-loop", "plain" if m == "plain" else "traced", rep)
                        r["mode"] = m
                    else:
                        r = floor_one(b, lib, m[len("floor:"):])
                except (RuntimeError, OSError) as e:
                    r = {"mode": m, "error": str(e)[-500:]}
                print(json.dumps(r), flush=True)
                results.append(r)
    finally:
        b.stop()
    return report(results, floors, args)


def report(results, floors, args):
    def vals(m):
        return [r["per_launch_us"] for r in results if r["mode"] == m and r.get("per_launch_us")]

    plain = vals("plain")
    base = statistics.median(plain) if plain else None
    print("\n| mode | per launch (us), each run | median | vs plain | records per kernel record |")
    print("|---|---|---|---|---|")
    errors = [f"{r['mode']}: {r['error']}" for r in results if r.get("error")]
    for m in ["plain"] + ["floor:" + f for f in floors] + ["profd"]:
        v = vals(m)
        if not v:
            continue
        med = statistics.median(v)
        recs = [r["records"] for r in results if r["mode"] == m and r.get("records")]
        per = "-"
        if recs and recs[-1].get("kernel"):
            k = recs[-1]["kernel"]
            per = ", ".join(f"{n} {c / k:.2f}" for n, c in recs[-1].items()
                            if c and n not in ("kernel", "buffers", "dropped_buffers"))
            per = f"{k} kernels; {per or 'none other'}"
        print(f"| {m} | {', '.join(f'{x:.2f}' for x in v)} | {med:.2f} | "
              f"{med / base:.3f}x | {per} |" if base else f"| {m} | {v} | {med:.2f} | - | {per} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f)
    for e in errors:
        print("FAIL " + e)
    return 1 if errors or not base else 0


if __name__ == "__main__":
    sys.exit(main())
