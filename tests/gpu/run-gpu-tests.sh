#!/bin/sh
# SPDX-License-Identifier: MIT
#
# run-gpu-tests.sh - the agent on a real GPU (meson suite "gpu").
#
# Exits 77 (skip) without nvidia-smi or a visible GPU. Otherwise:
#   1. builds tests/gpu/cuda-sample.cu with nvcc;
#   2. starts profd with a private --agent-socket;
#   3. runs the sample under CUDA_INJECTION64_PATH=libprofd-agent.so, captures
#      while it launches N kernels per device, and checks: kernel count = N x
#      devices, kernel names, every kernel's correlation_id matches a launch
#      API event on /host:CPU, kernel_details format, plausible timings,
#      memcpy/memset events, device capability stats; a second capture in
#      the same process works (CUPTI detached and re-attached);
#   4. feeds the XSpace to jaxlib's converter (if jax is importable) and
#      checks the kernels appear in trace.json.gz;
#   5. if PyTorch with CUDA is importable, runs a small matmul loop under the
#      agent and checks GPU kernels arrive; then PyTorch's own profiler and
#      the agent in both orders (started before the capture, started during
#      it): the job survives, the capture has its kernels up to the takeover
#      and says which profiler had CUPTI;
#   6. if JAX with a GPU is importable, 100 captures in a row of a jitted
#      loop: each has kernels, every kernel linked to its launch, no drops;
#   7. if PyTorch with CUDA is importable, a torch.cuda.CUDAGraph of K
#      kernels replayed L times: per node, K x L kernels with K distinct
#      cuda_graph_node_id, each linked to a "(CudaGraph:<exec id>)" launch
#      whose id is the kernels' cuda_graph_id; with
#      gpu_enable_cupti_activity_graph_trace, L CudaGraphExec events and no
#      node kernels.
#
# Environment: PROFD_BUILD (build dir), NVCC (default: nvcc on PATH, else
# $CUDA_HOME/bin/nvcc), GPU_BIN (a folder with cuda-sample built ahead, as
# tools/device-bundle does; then nvcc is not needed), PYTHON (default
# /usr/bin/python3; the jax/torch checks use PYTHON_ML, default python3 on
# PATH), GPU_CHECKS (which of sample, torch, torch-memory, torch-profiler,
# jax, graphs to run; default all), JAX_CAPTURES (captures in a row for
# "jax", default 100).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=${PROFD_SRC:-$(cd "$HERE/../.." && pwd)}
BUILD=${PROFD_BUILD:-$SRC/build}
PYTHON=${PYTHON:-/usr/bin/python3}
PYTHON_ML=${PYTHON_ML:-python3}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "skip: no NVIDIA GPU (nvidia-smi missing or sees no device)"
	exit 77
fi
nvidia-smi -L

AGENT=${AGENT:-$BUILD/collectors/cupti/libprofd-agent.so}
PROFD=${PROFD:-$BUILD/daemon/profd}
if [ ! -f "$AGENT" ]; then
	echo "FAIL: $AGENT not built; configure with -Dcupti=enabled -Dcupti_root=<CUDA root>"
	exit 1
fi
NVCC=${NVCC:-$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/profd-gpu.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
if [ -x "${GPU_BIN:-/nonexistent}/cuda-sample" ]; then
	cp "$GPU_BIN/cuda-sample" "$WORK/"   # built ahead by tools/device-bundle
else
	"$NVCC" -O2 -o "$WORK/cuda-sample" "$HERE/cuda-sample.cu" || { echo "FAIL: nvcc"; exit 1; }
fi

export PROFD PROFD_SRC="$SRC" PROFD_BUILD="$BUILD" AGENT WORK PYTHON_ML
export PYTHONPATH="$SRC/tests/pylib${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" - <<'PY'
import os, re, subprocess, sys, threading, time
import profdtest as T

P = T.protos()
AGENT, WORK = os.environ["AGENT"], os.environ["WORK"]
SOCK = os.path.join(WORK, "agent.sock")
N = 50
failures = []
checked = [0]


def check(cond, what):
    checked[0] += 1
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


stats = T.stat_values


def capture(d, ms, sid, **advanced):
    ch = T.channel(d.addr)
    prof = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
    req = T.profile_request(P, ms, f"localhost:{d.port}", session_id=sid)
    for k, v in advanced.items():
        req.opts.advanced_configuration[k].bool_value = v
    r = prof(req, timeout=120)
    ch.close()
    return r.tool_data[0].data


def wait_agent(d, pid, timeout=30):
    ch = T.channel(d.addr)
    st = T.stub(ch, "Status", P.profd.StatusRequest, P.profd.StatusResponse, service="profd.Profd")
    deadline = time.time() + timeout
    while time.time() < deadline:
        for a in st(P.profd.StatusRequest(), timeout=10).agents:
            if a.pid == pid:
                ch.close()
                return a
        time.sleep(0.1)
    ch.close()
    return None


def start_sample(d):
    env = dict(os.environ, CUDA_INJECTION64_PATH=AGENT, PROFD_AGENT_SOCKET=SOCK)
    p = subprocess.Popen([os.path.join(WORK, "cuda-sample"), str(N)], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    first = p.stdout.readline().split()
    if len(first) < 2:
        check(False, f"cuda-sample started (exit {p.wait()}; see its stderr above)")
        sys.exit(1)
    ndev = int(first[1])
    a = wait_agent(d, p.pid)
    check(a is not None, f"agent of pid {p.pid} registered")
    if a:
        check(len(a.devices) >= ndev, f"agent lists {len(a.devices)} device(s): "
              + ", ".join(f"{dv.local_ordinal}={dv.uuid}->GPU:{dv.plane_id}" for dv in a.devices))
    return p, ndev


def capture_round(d, p, sid):
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("x", capture(d, 5000, sid)))
    th.start()
    time.sleep(2.0)  # START reached the agent and CUPTI is enabled (attach can be slow)
    t0 = time.time()
    p.stdin.write("go\n")
    p.stdin.flush()
    done = p.stdout.readline().split()
    print(f"{sid}: workload took {time.time() - t0:.3f} s", flush=True)
    th.join()
    return int(done[1]), T.decode_xspace(P, out["x"]), out["x"]


def verify(x, ndev, launched, sid):
    gpu = [p for p in x.planes if p.name.startswith("/device:GPU:")]
    host = [p for p in x.planes if p.name == "/host:CPU"]
    check(len(gpu) >= ndev, f"{sid}: {len(gpu)} GPU plane(s) for {ndev} device(s)")
    check(bool(host), f"{sid}: /host:CPU plane present")
    launches = {}
    for hp in host:
        for line in hp.lines:
            for ev in line.events:
                name = hp.event_metadata[ev.metadata_id].name
                s = stats(hp, ev.stats)
                if "correlation_id" in s:
                    launches[s["correlation_id"]] = name
    kernels, copies, memsets = [], 0, 0
    for p in gpu:
        ps = stats(p, p.stats)
        check(ps.get("device_vendor") == "Nvidia" and ps.get("core_count", 0) > 0 and
              ps.get("memory_size", 0) > 0 and ps.get("clock_rate", 0) > 0,
              f"{sid}: {p.name} capability stats {ps}")
        for line in p.lines:
            for ev in line.events:
                name = p.event_metadata[ev.metadata_id].name
                s = stats(p, ev.stats)
                if name.startswith("vec_add"):
                    kernels.append((p.name, line.name, line.timestamp_ns, ev, s))
                elif name.startswith("Memcpy"):
                    copies += 1
                elif name == "Memset":
                    memsets += 1
    check(len(kernels) == launched, f"{sid}: {len(kernels)} vec_add kernels traced, {launched} launched")
    names = {p.event_metadata[e.metadata_id].name for p in gpu for l in p.lines for e in l.events}
    check(any(n.startswith("vec_add(float const*") for n in names), f"{sid}: demangled name in {sorted(names)[:5]}")
    fmt = re.compile(r"^regs:\d+ static_shared:\d+ dynamic_shared:\d+ grid:4096,1,1 block:256,1,1 occ_pct:[0-9.]+$")
    check(all(fmt.match(k[4].get("kernel_details", "")) for k in kernels),
          f"{sid}: kernel_details like {kernels[0][4].get('kernel_details') if kernels else None}")
    check(all(k[1].startswith("Stream #") and "Compute" in k[1] for k in kernels), f"{sid}: stream line names")
    linked = sum(1 for k in kernels if "launch" in launches.get(k[4].get("correlation_id"), "").lower()
                 or "Launch" in launches.get(k[4].get("correlation_id"), ""))
    check(linked == len(kernels), f"{sid}: {linked}/{len(kernels)} kernels have a launch API event (flow)")
    durs = [k[3].duration_ps / 1e6 for k in kernels]
    check(bool(durs) and all(0.5 < d < 100000 for d in durs),
          f"{sid}: kernel durations {min(durs) if durs else 0:.1f}..{max(durs) if durs else 0:.1f} us")
    offs = [(k[2] * 1000 + k[3].offset_ps) / 1e9 for k in kernels]
    check(bool(offs) and all(0 <= o < 5000 for o in offs), f"{sid}: kernels inside the 5 s window")
    # The buffer canary (agent-capture.c canary_send()) must never cry wolf.
    check(not [w for w in x.warnings if "took over" in w], f"{sid}: no takeover warning {list(x.warnings)[:2]}")
    check(copies >= 3 * ndev, f"{sid}: {copies} memcpy events")
    check(memsets >= ndev, f"{sid}: {memsets} memset events")


def jax_convert(raw):
    code = r"""
import gzip, json, os, sys
from jax._src.lib import _profiler
data = open(sys.argv[1], 'rb').read()
out = sys.argv[2]
_profiler.ProfilerSession().export(data, out)
found = []
for root, _, files in os.walk(out):
    for f in files:
        if f.endswith('trace.json.gz'):
            t = json.load(gzip.open(os.path.join(root, f)))
            ev = t.get('traceEvents', [])
            found.append(sum(1 for e in ev if 'vec_add' in str(e.get('name', ''))))
print(max(found) if found else -1)
"""
    path = os.path.join(WORK, "capture.xplane.pb")
    open(path, "wb").write(raw)
    r = subprocess.run([os.environ["PYTHON_ML"], "-c", code, path, os.path.join(WORK, "jax")],
                       capture_output=True, text=True)
    if r.returncode != 0 and ("No module named" in r.stderr or "ImportError" in r.stderr):
        print("skip jax converter: jax not installed for", os.environ["PYTHON_ML"])
        return
    check(r.returncode == 0 and int(r.stdout.strip() or -1) > 0,
          f"jaxlib converter: trace.json.gz has vec_add events ({r.stdout.strip()} {r.stderr[-300:]})")


def torch_run(d):
    code = r"""
import sys, torch
if not torch.cuda.is_available():
    sys.exit(77)
x = torch.randn(2048, 2048, device='cuda')
print('ready', flush=True)
sys.stdin.readline()
for _ in range(20):
    y = x @ x
torch.cuda.synchronize()
print('done', flush=True)
sys.stdin.readline()
"""
    env = dict(os.environ, CUDA_INJECTION64_PATH=AGENT, PROFD_AGENT_SOCKET=SOCK)
    p = subprocess.Popen([os.environ["PYTHON_ML"], "-c", code], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith("ready"):
        p.wait()
        print("skip PyTorch: not importable or no CUDA", p.stderr.read()[-200:])
        return
    check(wait_agent(d, p.pid) is not None, "torch: agent registered")
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("x", capture(d, 5000, "torch")))
    th.start()
    time.sleep(2.0)
    p.stdin.write("go\n")
    p.stdin.flush()
    p.stdout.readline()
    th.join()
    p.stdin.write("exit\n")
    p.stdin.flush()
    p.wait(timeout=60)
    x = T.decode_xspace(P, out["x"])
    kernels = [pl.event_metadata[e.metadata_id].name for pl in x.planes if pl.name.startswith("/device:GPU:")
               for l in pl.lines for e in l.events if "kernel_details" in stats(pl, e.stats)]
    check(len(kernels) >= 20, f"torch: {len(kernels)} kernels (e.g. {kernels[:1]})")


def torch_memory(d):
    """The memory profile's growth during a capture equals what PyTorch's
    caching allocator reserved from the driver (docs/agent.md "Memory
    profile"): peak - level at start vs max_memory_reserved - reserved at
    start, within 1 %. (The level includes the CUDA context; PyTorch's
    numbers do not, so the growth is compared.)"""
    code = r"""
import sys, torch
if not torch.cuda.is_available():
    sys.exit(77)
torch.zeros(1, device='cuda')
torch.cuda.synchronize()
torch.cuda.reset_peak_memory_stats()
print('ready', torch.cuda.memory_reserved(), flush=True)
sys.stdin.readline()
keep = [torch.empty(n << 20, dtype=torch.uint8, device='cuda') for n in (64, 200, 33, 512)]
del keep[1]
keep.append(torch.empty(300 << 20, dtype=torch.uint8, device='cuda'))
torch.cuda.synchronize()
print('done', torch.cuda.max_memory_reserved(), flush=True)
sys.stdin.readline()
"""
    env = dict(os.environ, CUDA_INJECTION64_PATH=AGENT, PROFD_AGENT_SOCKET=SOCK)
    p = subprocess.Popen([os.environ["PYTHON_ML"], "-c", code], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    if not line or line[0] != "ready":
        p.wait()
        print("skip PyTorch memory: not importable or no CUDA", p.stderr.read()[-200:])
        return
    reserved0 = int(line[1])
    check(wait_agent(d, p.pid) is not None, "torch memory: agent registered")
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("x", capture(d, 4000, "torch-mem")))
    th.start()
    time.sleep(2.0)
    p.stdin.write("go\n")
    p.stdin.flush()
    max_reserved = int(p.stdout.readline().split()[1])
    th.join()
    p.stdin.write("exit\n")
    p.stdin.flush()
    p.wait(timeout=60)
    x = T.decode_xspace(P, out["x"])
    evs = []
    for pl in x.planes:
        if pl.name != "/host:CPU":
            continue
        for l in pl.lines:
            for e in l.events:
                if pl.event_metadata[e.metadata_id].name in ("MemoryAllocation", "MemoryDeallocation"):
                    st = stats(pl, e.stats)
                    evs.append((l.timestamp_ns * 1000 + e.offset_ps, pl.event_metadata[e.metadata_id].name, st))
    evs.sort(key=lambda t: t[0])
    check(evs and evs[0][1] == "MemoryAllocation", f"torch memory: {len(evs)} memory events, first an allocation")
    if not evs:
        return
    first = evs[0][2]
    start = first["bytes_allocated"] - first["allocation_bytes"]
    peak = max(st["peak_bytes_in_use"] for _, _, st in evs)
    grew, want = peak - start, max_reserved - reserved0
    print(f"     torch memory: profile grew {grew} bytes, torch reserved {want} more")
    check(abs(grew - want) <= 0.01 * want, "torch memory: peak growth matches max_memory_reserved within 1 %")


def gpu_kernels(x):
    """(name, correlation_id) of every kernel on the GPU planes."""
    out = []
    for pl in x.planes:
        if pl.name.startswith("/device:GPU:"):
            for l in pl.lines:
                for e in l.events:
                    st = stats(pl, e.stats)
                    if "kernel_details" in st:
                        out.append((pl.event_metadata[e.metadata_id].name, st.get("correlation_id")))
    return out


def host_launches(x):
    """correlation_id -> API name of every host API event."""
    out = {}
    for pl in x.planes:
        if pl.name == "/host:CPU":
            for l in pl.lines:
                for e in l.events:
                    c = stats(pl, e.stats).get("correlation_id")
                    if c is not None:
                        out[c] = pl.event_metadata[e.metadata_id].name
    return out


def torch_profiler_order(d, order):
    """PyTorch's profiler (Kineto: the Activity API, and a subscriber of its
    own in newer versions) and profd's agent in one job: @order 'before'
    starts torch's profiler before profd's capture, 'during' inside it."""
    code = r"""
import sys, torch
from torch.profiler import profile, ProfilerActivity
if not torch.cuda.is_available():
    sys.exit(77)
order = sys.argv[1]
import time
mark = lambda what: print(f'cupti-mark: {time.monotonic() * 1e3:.1f} {what}', file=sys.stderr, flush=True)
x = torch.randn(1024, 1024, device='cuda')
torch.cuda.synchronize()
prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
if order == 'before':
    prof.__enter__()
print('ready', flush=True)
sys.stdin.readline()
mark('first 20')
for _ in range(20):
    y = x @ x
torch.cuda.synchronize()
if order == 'during':
    mark('profile enter')
    prof.__enter__()
mark('second 20')
for _ in range(20):
    y = x @ x
torch.cuda.synchronize()
mark('done')
print('done', flush=True)
sys.stdin.readline()
mark('profile exit')
prof.__exit__(None, None, None)
import json, os, tempfile
path = os.path.join(tempfile.mkdtemp(), 'torch.json')
prof.export_chrome_trace(path)
kernels = sum(1 for e in json.load(open(path)).get('traceEvents', []) if e.get('cat') == 'kernel')
print('torch-ok', sum(1 for e in prof.events() if 'gemm' in e.name.lower() or 'matmul' in e.name.lower()),
      'kernels', kernels, flush=True)
"""
    env = dict(os.environ, CUDA_INJECTION64_PATH=AGENT, PROFD_AGENT_SOCKET=SOCK)
    # The CUPTI calls torch's profiler makes, logged (tests/gpu/cupti-spy.c).
    spy = os.path.join(os.environ.get("GPU_BIN", "/nonexistent"), "libcupti-spy.so")
    if os.path.exists(spy):
        env["LD_PRELOAD"] = spy
    p = subprocess.Popen([os.environ["PYTHON_ML"], "-c", code, order], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not p.stdout.readline().startswith("ready"):
        p.wait()
        print("skip torch profiler", order, p.stderr.read()[-200:])
        return
    check(wait_agent(d, p.pid) is not None, f"torch profiler {order}: agent registered")
    err = []  # drained as it comes: the spy's lines must never fill the pipe
    drain = threading.Thread(target=lambda: err.extend(p.stderr), daemon=True)
    drain.start()
    out = {}
    # 'during': entering torch's profiler took 4.2 s on an H200 (Kineto's
    # CUPTI init), so the capture outlasts it: its kernels must fall inside.
    ms = 12000 if order == "during" else 4000
    th = threading.Thread(target=lambda: out.setdefault("x", capture(d, ms, "torch-" + order)))
    th.start()
    time.sleep(1.5)
    p.stdin.write("go\n")
    p.stdin.flush()
    p.stdout.readline()
    th.join()
    p.stdin.write("exit\n")
    p.stdin.flush()
    last = p.stdout.readline().split()
    rc = p.wait(timeout=120)
    x = T.decode_xspace(P, out["x"])
    drain.join(timeout=10)
    for ln in [ln.rstrip() for ln in err if "cupti" in ln.lower()][:60]:
        print(f"     torch profiler {order}: {ln[:200]}")
    ws = [w for w in x.warnings if f"pid {p.pid}" in w]
    print(f"     torch profiler {order}: {len(gpu_kernels(x))} kernels in profd's capture, "
          f"torch saw {last[1:] if last else '?'}; warnings: {ws}")
    print(f"     torch profiler {order}: profd log:",
          [l[24:200] for l in d.log().splitlines() if f"pid {p.pid}" in l and ("stat" in l or "warn" in l)][-4:])
    check(rc == 0 and last[:1] == ["torch-ok"], f"torch profiler {order}: the job survived (rc {rc})")
    if order == "during":
        check(len(gpu_kernels(x)) >= 20, f"torch profiler during: profd kept the kernels before the takeover")
    check(any("another profiler" in w for w in ws) or order == "during" and len(gpu_kernels(x)) >= 40,
          f"torch profiler {order}: the capture says who had CUPTI")


def xla_annotated(x):
    """Kernels with XLA's NVTX annotations (hlo_module) and with a step (group_id)."""
    n = [0, 0]
    for pl in x.planes:
        if pl.name.startswith("/device:GPU:"):
            for l in pl.lines:
                for e in l.events:
                    st = stats(pl, e.stats)
                    n[0] += "kernel_details" in st and "hlo_module" in st
                    n[1] += "kernel_details" in st and isinstance(st.get("group_id"), int)
    return n


def jax_many(d, n=100):
    code = r"""
import sys, threading
import jax, jax.numpy as jnp
if not any(dv.platform == 'gpu' for dv in jax.devices()):
    sys.exit(77)
x = jnp.ones((1024, 1024))
f = jax.jit(lambda a: (a @ a) * 0.5)
f(x).block_until_ready()
print('ready', flush=True)
stop = []
def loop():
    steps = 0
    while not stop:
        f(x).block_until_ready()
        steps += 1
    print('steps', steps, flush=True)
t = threading.Thread(target=loop)
t.start()
sys.stdin.readline()
stop.append(1)
t.join()
"""
    env = dict(os.environ, CUDA_INJECTION64_PATH=AGENT, PROFD_AGENT_SOCKET=SOCK)
    p = subprocess.Popen([os.environ["PYTHON_ML"], "-c", code], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not p.stdout.readline().startswith("ready"):
        p.wait()
        print("skip JAX captures: jax with a GPU not importable", p.stderr.read()[-200:])
        return
    check(wait_agent(d, p.pid) is not None, "jax: agent registered")
    bad = []
    totals = [0, 0]
    xla = [0, 0]
    t0 = time.time()
    for i in range(n):
        x = T.decode_xspace(P, capture(d, 200, f"jax-{i}"))
        xla = [a + b for a, b in zip(xla, xla_annotated(x))]
        ks = gpu_kernels(x)
        launches = host_launches(x)
        unlinked = sum(1 for _, c in ks if c not in launches)
        dropped = [w for w in x.warnings if "dropped" in w or "cut" in w]
        totals[0] += len(ks)
        totals[1] += sum(1 for v in launches.values() if "Launch" in v)
        if not ks or unlinked or dropped:
            bad.append((i, len(ks), unlinked, dropped[:1]))
    p.stdin.write("stop\n")
    p.stdin.flush()
    steps = p.stdout.readline().split()
    rc = p.wait(timeout=120)
    print(f"     jax: {n} captures in {time.time() - t0:.1f} s, {totals[0]} kernels, {totals[1]} launches, "
          f"{steps[1:] if steps else '?'} steps; bad: {bad[:5]}")
    check(not bad, f"jax: {n} captures in a row, each with kernels linked to launches and no drops")
    # No JAX flag: the agent is XLA's NVTX tool (docs/agent.md, NVTX, "XLA and JAX").
    # Every kernel: a launch's ranges are joined by its exact correlation id
    # (92 % of them before, when a later call's id could take its slot).
    check(totals[0] and xla[0] >= 0.99 * totals[0],
          f"jax: kernels carry hlo_module from XLA's NVTX ranges ({xla[0]} of {totals[0]} kernels)")
    check(xla[1] > 0, f"jax: steps from the jitted module's executions give group_id ({xla[1]} kernels)")
    check(rc == 0, f"jax: the job exited 0 (rc {rc})")
    check("not finalized" not in d.log(), "jax: finalized after each capture (the job was busy)")


def torch_graphs(d, k=4, replays=10):
    """CUDA graphs (docs/agent.md "CUDA graphs"): a graph of @k elementwise
    kernels, made after the capture started (CUPTI cannot trace a graph
    instantiated before it attached as a whole), replayed @replays times."""
    code = r"""
import sys, torch
if not torch.cuda.is_available():
    sys.exit(77)
x = torch.ones(1 << 20, device='cuda')
def ops():
    x.add_(1)
    x.mul_(2)
    x.sub_(1)
    x.div_(3)
ops()  # warm-up outside the capture (PyTorch's advice before graph capture: modules loaded)
torch.cuda.synchronize()
print('ready', flush=True)
for line in sys.stdin:
    if line.strip() != 'go':
        break
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        with torch.cuda.graph(g):
            ops()
    for _ in range(%d):
        g.replay()
    torch.cuda.synchronize()
    print('done', flush=True)
""" % replays
    env = dict(os.environ, CUDA_INJECTION64_PATH=AGENT, PROFD_AGENT_SOCKET=SOCK)
    p = subprocess.Popen([os.environ["PYTHON_ML"], "-c", code], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not p.stdout.readline().startswith("ready"):
        p.wait()
        print("skip CUDA graphs: PyTorch not importable or no CUDA", p.stderr.read()[-200:])
        return
    check(wait_agent(d, p.pid) is not None, "graphs: agent registered")
    print("     graphs:", [l for l in d.log().splitlines() if f"pid {p.pid} " in l and "connected" in l][:1])

    def round_(sid, **advanced):
        out = {}
        th = threading.Thread(target=lambda: out.setdefault("x", capture(d, 4000, sid, **advanced)))
        th.start()
        time.sleep(2.0)
        p.stdin.write("go\n")
        p.stdin.flush()
        p.stdout.readline()
        th.join()
        x = T.decode_xspace(P, out["x"])
        dev = [(pl.event_metadata[e.metadata_id].name, l.name, stats(pl, e.stats)) for pl in x.planes
               if pl.name.startswith("/device:GPU:") for l in pl.lines for e in l.events]
        print(f"     {sid}: {len(dev)} device events; warnings {[w[:160] for w in x.warnings]}")
        return x, dev

    x, dev = round_("graphs-nodes")
    ks = [st for _, _, st in dev if "kernel_details" in st and st.get("cuda_graph_id")]
    nodes = {st.get("cuda_graph_node_id") for st in ks}
    launches = {c: n for c, n in host_launches(x).items() if "(CudaGraph:" in n}
    print(f"     graphs: {len(ks)} graph kernels, {len(nodes)} nodes, launches {sorted(set(launches.values()))}")
    check(len(nodes) == k and len(ks) == k * replays,
          f"graphs: per node {len(ks)} kernels of {len(nodes)} nodes = {k} x {replays}")
    linked = [st for st in ks if st.get("correlation_id") in launches]
    check(len(linked) == len(ks), f"graphs: {len(linked)}/{len(ks)} graph kernels flow from a graph launch")
    check(all(launches[st["correlation_id"]].endswith(f"(CudaGraph:{st['cuda_graph_id']})") for st in linked),
          "graphs: the launch's (CudaGraph:<exec id>) is the kernels' cuda_graph_id")
    x, dev = round_("graphs-whole", gpu_enable_cupti_activity_graph_trace=True)
    whole = [(n, line) for n, line, _ in dev if n.startswith("CudaGraphExec:")]
    ks = [st for _, _, st in dev if "kernel_details" in st and st.get("cuda_graph_id")]
    print(f"     graphs: graph trace {len(whole)} graph events, {len(ks)} node kernels; {whole[:1]}")
    check(len(whole) == replays and not ks,
          f"graphs: graph trace gives {len(whole)} CudaGraphExec events ({replays} launches), {len(ks)} node kernels")
    p.stdin.write("exit\n")
    p.stdin.flush()
    check(p.wait(timeout=60) == 0, "graphs: the job exited 0")


# GPU_CHECKS picks checks by name (comma-separated; default all), so that
# tests/gpu/on-device.sh can give each its own time limit and rerun only
# those that failed.
ALL = ["sample", "torch", "torch-memory", "torch-profiler", "jax", "graphs"]
want = [c for c in os.environ.get("GPU_CHECKS", ",".join(ALL)).split(",") if c]
unknown = [c for c in want if c not in ALL]
if unknown:
    print(f"unknown GPU_CHECKS {unknown}; known: {ALL}")
    sys.exit(2)
with T.Daemon("--agent-socket", SOCK, timeout=30) as d:
    if "sample" in want:
        p, ndev = start_sample(d)
        launched, x, raw = capture_round(d, p, "sample")
        verify(x, ndev, launched, "sample")
        # Same process, second capture: CUPTI was detached (finalized) and re-attaches.
        launched, x2, _ = capture_round(d, p, "sample-again")
        verify(x2, ndev, launched, "sample-again")
        p.stdin.write("exit\n")
        p.stdin.flush()
        rc = p.wait(timeout=60)
        check(rc == 0, f"sample exited 0 (rc {rc})")
        log = d.log()
        check("not finalized" not in log, "agent finalized CUPTI after each capture")
        jax_convert(raw)
    if "torch" in want:
        torch_run(d)
    if "torch-memory" in want:
        torch_memory(d)
    if "torch-profiler" in want:
        torch_profiler_order(d, "before")
        torch_profiler_order(d, "during")
    if "jax" in want:
        jax_many(d, int(os.environ.get("JAX_CAPTURES", "100")))
    if "graphs" in want:
        torch_graphs(d)

print(f"{len(failures)} failure(s) in {checked[0]} check(s)")
# Every selected check skipped (no torch, no jax): a skip, not a pass.
sys.exit(1 if failures else 0 if checked[0] else 77)
PY
