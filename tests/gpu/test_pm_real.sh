#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test_pm_real.sh - hardware counters (CUPTI PM sampling) on a real GPU
# (meson suite "gpu"; on-device.sh runs it too).
#
# Builds tests/gpu/pm-phases.cu, starts profd, and captures 5 s with
# gpu_pm_sample_counters=default (1 ms interval, 512 MiB hardware buffer)
# while the job is idle, copies device to device, idles, and runs an FMA
# kernel; captures again (sampled with a new object); makes sampling fail
# on purpose (10 us into 64 MiB during copies: said, the job unharmed) and
# captures once more (sampled again). Checks on
# /device:GPU:0's `_counters_` line:
#   - each metric of the default set the GPU accepted has samples, 1 ms apart,
#     inside the window; percentages are within 0..100 (+20: CUPTI gave up to 110);
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

    def cap(ms, interval_us, buffer_mb, *cmds):
        """Capture @ms with counters while the job runs @cmds (from 1.5 s in)."""
        req = T.profile_request(P, ms, f"localhost:{d.port}")
        adv = req.opts.advanced_configuration
        adv["gpu_pm_sample_counters"].string_value = "default"
        adv["gpu_pm_sample_interval_us"].int64_value = interval_us
        if buffer_mb:
            adv["gpu_pm_sample_buffer_size_per_gpu_mb"].int64_value = buffer_mb
        out = {}
        th = threading.Thread(target=lambda: out.setdefault("r", T.stub(
            T.channel(d.addr), "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)(req, timeout=120)))
        th.start()
        time.sleep(1.5)  # START reached the agent; sampling runs
        print([ask(c) for c in cmds], flush=True)
        th.join()
        return T.decode_xspace(P, out["r"].tool_data[0].data)

    # 1: the phases, with a hardware buffer (512 MiB) that a late decode
    # does not fill (64 MiB at 1 ms overflowed once in three H200 runs).
    x = cap(5000, 1000, 512, "idle 500", "copy 1000", "idle 500", "compute 1000")
    def samples(x):
        g = [p for p in x.planes if p.name == "/device:GPU:0"]
        return sum(1 for l in (g[0].lines if g else []) if l.name == "_counters_" for e in l.events
                   if g[0].event_metadata[e.metadata_id].name == SM)

    try:
        # 2: a second capture samples again, with a new object: the
        # detach disabled the first capture's (an H200 sampled no more with
        # a stopped object started again, nor after a cuptiFinalize took
        # one).
        x2 = cap(2500, 1000, 0, "compute 500")
        w2 = list(x2.warnings)
        check(samples(x2) > 100 and not [s for s in w2 if "no hardware counters" in s],
              f"a second capture samples again ({samples(x2)} samples; {[s[:200] for s in w2]})")
        # 3: sampling that fails on purpose (10 us into 64 MiB, during
        # copies; an H200 answered DecodeData with UNKNOWN): said, and the
        # job unharmed (a restart within the capture, once done, was
        # refused and the job then died in CUPTI at the capture's end).
        x3 = cap(2500, 10, 64, "copy 800")
        w3 = list(x3.warnings)
        for s in w3:
            print("10 us capture warning:", s)
        time.sleep(0.5)  # a fault at the capture's end has had time to land
        check(job.poll() is None, f"the job lives after a capture whose sampling failed (rc {job.poll()})")
        check(any("PM sampling" in s and "GPU 0" in s for s in w3), "the failure is said")
        # 4: after it, counters again (a new object; an H200's did).
        if job.poll() is None:
            x4 = cap(2500, 1000, 0, "compute 500")
            w4 = [s for s in x4.warnings if "PM sampling" in s]
            print(f"after the failure: {samples(x4)} samples; {[s[:240] for s in w4]}", flush=True)
            check(samples(x4) > 100, "the capture after the failure samples again")
    except Exception as e:  # noqa: BLE001 -- the job died under a command, or the RPC failed: said, then its exit status
        check(False, f"captures 2-4: {e!r}")
    if job.poll() is None:
        ask("exit")
    rc = job.wait(timeout=30)
w = list(x.warnings)
for s in w:
    print("warning:", s)
refused = [s for s in w if "no hardware counters" in s]
if refused and ("ERR_NVGPUCTRPERM" in refused[0] or "held by another" in refused[0]):
    print("skip: " + refused[0])
    sys.exit(77)
check(not [s for s in w if "overflowed" in s], "no overflow with a 512 MiB buffer at 1 ms")
check(not refused, "PM sampling ran (no 'no hardware counters' warning)")
check(rc == 0, f"the job exited 0 after four PM sampling captures (rc {rc})")
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
        # CUPTI's own values: an H200 gave sm__cycles_active up to 101.26 %
        # and 109.84 % in two runs (a sample's window and the counter's are
        # not the same): 20 % of slack, printed.
        check(all(-0.001 <= v <= 120 for _, v in pts), f"{name}: values within 0..100 "
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
