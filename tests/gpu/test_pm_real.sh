#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test_pm_real.sh - hardware counters (CUPTI PM sampling) on a real GPU
# (meson suite "gpu"; on-device.sh runs it too).
#
# Builds tests/gpu/pm-phases.cu, starts profd, and captures 5 s with
# gpu_pm_sample_counters=default (1 ms interval) while the job is idle,
# copies device to device, idles, and runs an FMA kernel. Checks on
# /device:GPU:0's `_counters_` line:
#   - each metric of the default set the GPU accepted has samples, 1 ms apart,
#     inside the window; percentages are within 0..100 (+1 for rounding);
#   - DRAM throughput during the copies is above 20 % and at least twice
#     its idle level; SM throughput during the FMA loop is above its idle
#     level;
#   - the perf_counters form (counter_value on the "PM counters" line) is there;
#   - metrics the GPU refused are named in one warning (printed, not failed).
# Exits 77 (skip) without a GPU or nvcc, when the GPU is older than Hopper,
# or when counters need privileges this job lacks (the warning is printed).
#
# Environment: PROFD, AGENT (or AGENT_SO), PROFD_SRC, PROFD_BUILD, NVCC
# (or GPU_BIN holding pm-phases built ahead by tools/device-bundle),
# PYTHON (grpcio + protobuf; default /usr/bin/python3).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=${PROFD_SRC:-$(cd "$HERE/../.." && pwd)}
BUILD=${PROFD_BUILD:-$SRC/build}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "skip: no NVIDIA GPU"
	exit 77
fi
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader -i 0 2>/dev/null | cut -d. -f1)
if [ -n "$cc" ] && [ "$cc" -lt 9 ] 2>/dev/null; then
	echo "skip: GPU 0 is compute capability $cc.x; PM sampling is checked on Hopper and newer"
	exit 77
fi
AGENT=${AGENT:-${AGENT_SO:-$BUILD/collectors/cupti/libprofd-agent.so}}
PROFD=${PROFD:-$BUILD/daemon/profd}
NVCC=${NVCC:-$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")}
[ -x "${GPU_BIN:-/nonexistent}/pm-phases" ] || [ -x "$NVCC" ] || { echo "skip: no nvcc"; exit 77; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/profd-pm.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
if [ -x "${GPU_BIN:-/nonexistent}/pm-phases" ]; then
	cp "$GPU_BIN/pm-phases" "$WORK/"   # built ahead by tools/device-bundle
else
	"$NVCC" -O2 -o "$WORK/pm-phases" "$HERE/pm-phases.cu" || { echo "FAIL: nvcc"; exit 1; }
fi
export PROFD PROFD_SRC="$SRC" PROFD_BUILD="$BUILD" AGENT WORK
export PYTHONPATH="$SRC/tests/pylib${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-/usr/bin/python3}" - <<'PY'
import os, statistics, subprocess, sys, threading, time
import profdtest as T

P = T.protos()
AGENT, WORK = os.environ["AGENT"], os.environ["WORK"]
SOCK = os.path.join(WORK, "agent.sock")
SM = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed"
DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


with T.Daemon("--agent-socket", SOCK, "--flush-timeout", "5s") as d:
    env = dict(os.environ, CUDA_INJECTION64_PATH=AGENT, PROFD_AGENT_SOCKET=SOCK)
    # A backtrace if the job aborts (it did at exit on an H200; no gdb there).
    at = os.path.join(os.environ.get("GPU_BIN", "/nonexistent"), "libabort-trace.so")
    if os.path.exists(at):
        env["LD_PRELOAD"] = at
    job = subprocess.Popen([os.path.join(WORK, "pm-phases")], env=env, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    assert job.stdout.readline().strip() == "ready"
    time.sleep(1.0)  # HELLO reached profd
    ask = lambda c: (job.stdin.write(c + "\n"), job.stdin.flush(), job.stdout.readline().strip())[2]
    req = T.profile_request(P, 5000, f"localhost:{d.port}")
    req.opts.advanced_configuration["gpu_pm_sample_counters"].string_value = "default"
    req.opts.advanced_configuration["gpu_pm_sample_interval_us"].int64_value = 1000
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("r", T.stub(
        T.channel(d.addr), "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)(req, timeout=120)))
    th.start()
    time.sleep(1.5)  # START reached the agent; sampling runs
    print(ask("idle 500"), ask("copy 1000"), ask("idle 500"), ask("compute 1000"), flush=True)
    th.join()
    ask("exit")
    rc = job.wait(timeout=30)
x = T.decode_xspace(P, out["r"].tool_data[0].data)
w = list(x.warnings)
for s in w:
    print("warning:", s)
refused = [s for s in w if "no hardware counters" in s]
if refused and ("ERR_NVGPUCTRPERM" in refused[0] or "held by another" in refused[0]):
    print("skip: " + refused[0])
    sys.exit(77)
check(not refused, "PM sampling ran (no 'no hardware counters' warning)")
check(rc == 0, f"the job exited 0 after a PM sampling capture (rc {rc})")
g0 = [p for p in x.planes if p.name == "/device:GPU:0"][0]
ctr, spans = {}, {"copy": [], "fma": []}
for l in g0.lines:
    for e in l.events:
        name = g0.event_metadata[e.metadata_id].name
        t = l.timestamp_ns + e.offset_ps // 1000
        if l.name == "_counters_" and "__" in name:
            ctr.setdefault(name, []).append((t, e.stats[0].double_value))
        elif name == "MemcpyD2D":
            spans["copy"].append((t, t + e.duration_ps // 1000))
        elif name.startswith("fma_loop"):
            spans["fma"].append((t, t + e.duration_ps // 1000))
print("metrics sampled:", sorted(ctr), flush=True)
# Where the samples are, against the phases (ms into the capture): a gap
# tells lost samples (overflow) from a phase that read low.
for kind in spans:
    if spans[kind]:
        print(f"{kind} phase: {min(a for a, _ in spans[kind]) / 1e6:.0f}..{max(b for _, b in spans[kind]) / 1e6:.0f} ms",
              flush=True)
if SM in ctr:
    ts = sorted(t for t, _ in ctr[SM])
    gaps = sorted(((b - a, a) for a, b in zip(ts, ts[1:])), reverse=True)[:3]
    print(f"{SM}: samples {ts[0] / 1e6:.0f}..{ts[-1] / 1e6:.0f} ms, largest gaps "
          + ", ".join(f"{g / 1e6:.1f} ms at {a / 1e6:.0f} ms" for g, a in gaps), flush=True)
check(SM in ctr and DRAM in ctr, "SM and DRAM throughput sampled")
for name, pts in ctr.items():
    ts = sorted(t for t, _ in pts)
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    check(len(ts) > 1000 and abs(statistics.median(gaps) - 10**6) < 2 * 10**5,
          f"{name}: {len(ts)} samples, median gap {statistics.median(gaps) if gaps else 0} ns")
    # The agent samples until STOP reaches it, a little after the window's
    # end (an H200's last sample began 0-0.5 ms past it): 50 ms of slack,
    # still far below what a misplaced clock would show.
    check(0 <= ts[0] and ts[-1] <= 5 * 10**9 + 50 * 10**6,
          f"{name}: samples inside the window (first {ts[0]} ns, last {ts[-1]} ns)")
    if ".pct" in name:
        check(all(-0.001 <= v <= 101 for _, v in pts), f"{name}: values within 0..100 "
              f"(min {min(v for _, v in pts):.2f}, max {max(v for _, v in pts):.2f})")


def during(name, kind):
    lo = min(s for s, _ in spans[kind]) if spans[kind] else 0
    hi = max(e for _, e in spans[kind]) if spans[kind] else 0
    inside = [v for t, v in ctr.get(name, []) if lo <= t and t + 10**6 <= hi]
    outside = [v for t, v in ctr.get(name, []) if not (lo - 10**8 <= t <= hi + 10**8)]
    return (statistics.mean(inside) if inside else 0.0), (statistics.mean(outside) if outside else 0.0)


dram_copy, dram_idle = during(DRAM, "copy")
check(dram_copy > 20 and dram_copy > 2 * dram_idle,
      f"DRAM throughput during copies {dram_copy:.1f} % vs elsewhere {dram_idle:.1f} %")
sm_fma, sm_idle = during(SM, "fma")
check(sm_fma > sm_idle, f"SM throughput during the FMA loop {sm_fma:.1f} % vs elsewhere {sm_idle:.1f} %")
pm_lines = [l for l in g0.lines if l.id == 0xdeadbeef + 200]
check(bool(pm_lines) and len(pm_lines[0].events) > 0, "perf_counters form (PM counters line) present")
print("PM sampling on GPU:", "FAILED: " + "; ".join(failures) if failures else "all ok")
sys.exit(1 if failures else 0)
PY
