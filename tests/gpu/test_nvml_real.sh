#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test_nvml_real.sh - NVML counters on a real GPU (meson suite "gpu").
#
# Starts profd with the system's libnvidia-ml.so.1, captures while a
# python job (torch, else cupy) allocates 2 GiB on GPU 0 and runs matrix
# multiplies, and checks on /device:GPU:0 that:
#   - the capability plane stats are there (device_vendor Nvidia, memory_size);
#   - gpu_util_pct rises above 50 % while the job computes;
#   - memory_used_mib grows by about the allocation (>= 1.5 GiB);
#   - the job's pid is named in gpu_processes and has a gpu_mem_mib counter.
# Exits 77 (skip) without nvidia-smi, libnvidia-ml or a CUDA python module.
#
# Environment: PROFD (daemon), PROFD_SRC, PROFD_BUILD (set by meson);
# PYTHON runs the checks (needs grpcio + protobuf; default /usr/bin/python3),
# PYTHON_ML the GPU job (needs torch or cupy; default python3 on PATH).
set -u

command -v nvidia-smi >/dev/null 2>&1 || { echo "skip: no nvidia-smi"; exit 77; }
ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1' || { echo "skip: no libnvidia-ml.so.1"; exit 77; }
nvidia-smi -L >/dev/null 2>&1 || { echo "skip: nvidia-smi sees no GPU"; exit 77; }

PY=${PYTHON_ML:-python3}
if $PY -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	LIB=torch
elif $PY -c 'import cupy; cupy.cuda.runtime.getDeviceCount()' 2>/dev/null; then
	LIB=cupy
else
	echo "skip: neither torch nor cupy can use the GPU from $PY"
	exit 77
fi

SRC=${PROFD_SRC:-$(dirname "$0")/../..}
export PROFD_SRC="$SRC"
export PYTHONPATH="$SRC/tests/pylib:$SRC/tests/nvml${PYTHONPATH:+:$PYTHONPATH}"

exec "${PYTHON:-/usr/bin/python3}" - "$PY" "$LIB" <<'EOF'
import subprocess
import sys
import time

import profdtest as T
import nvmltest as N

py, lib = sys.argv[1], sys.argv[2]
JOB = {
    "torch": """
import time, torch
x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda:0")
a = torch.randn(8192, 8192, device="cuda:0")
print("ready", flush=True)
time.sleep(2)
t = time.time()
while time.time() - t < 6:
    a = a @ a
    a = a / a.norm()
torch.cuda.synchronize()
""",
    "cupy": """
import time, cupy
x = cupy.empty(2 << 30, dtype=cupy.uint8)
a = cupy.random.randn(8192, 8192, dtype=cupy.float32)
print("ready", flush=True)
time.sleep(2)
t = time.time()
while time.time() - t < 6:
    a = a @ a
    a = a / cupy.linalg.norm(a)
cupy.cuda.Device().synchronize()
""",
}[lib]

fails = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)


with T.Daemon("--nvml-library", "libnvidia-ml.so.1") as d:
    base = N.capture(d, 500)
    p0 = N.plane(base, "/device:GPU:0")
    check(p0 is not None, "GPU 0 plane without any job")
    used0 = min(N.values(N.counters(p0), "memory_used_mib") or [0]) if p0 else 0
    job = subprocess.Popen([py, "-c", JOB], stdout=subprocess.PIPE, text=True)
    check(job.stdout.readline().strip() == "ready", "job allocated its memory")
    x = N.capture(d, 6000)
    job.wait(timeout=120)
    p = N.plane(x, "/device:GPU:0")
    s = N.plane_stats(p)
    cs = N.counters(p)
    check(s.get("device_vendor") == "Nvidia" and s.get("memory_size", 0) > 0, "capability stats")
    util = N.values(cs, "gpu_util_pct")
    check(bool(util) and max(util) > 50, f"utilization rises while the job computes (max {max(util or [0])})")
    used = N.values(cs, "memory_used_mib")
    check(bool(used) and max(used) - used0 >= 1536,
          f"memory used grows by the 2 GiB allocation ({used0:.0f} -> {max(used or [0]):.0f} MiB)")
    check(str(job.pid) in s.get("gpu_processes", ""), f"pid {job.pid} named in gpu_processes")
    check(any(k.startswith(f"process {job.pid} ") and k.endswith(" gpu_mem_mib") for k in cs),
          "per-process gpu_mem_mib counter")
    check(not [w for w in x.warnings if "no GPU counters" in w], "no 'no GPU counters' warning")
    print("warnings:", list(x.warnings))

sys.exit(1 if fails else 0)
EOF
