# SPDX-License-Identifier: MIT
"""Upstream parts against profd on a GPU machine: the capture client and
the XSpace -> trace converter that jaxlib carries (TSL's code, not ours).

1. Looks for an upstream capture client in this Python: a trace binding in
   jaxlib's _profiler, tensorflow's profiler_client, xprof. If one is there
   it captures one profd, then two profd given comma-separated (the
   multi-host form of TensorBoard's Capture Profile dialog), and the
   result must hold one XSpace per host. Where none is there it says so
   (the capture then goes through profctl, our client, so the converter
   check below still runs).
2. A JAX job runs under the agent of the first profd; the capture's XSpace
   goes through jaxlib's converter (ProfilerSession.export, TSL's
   ExportToTensorBoard with trace JSON): trace.json.gz must hold every
   kernel of the XSpace, by name and count.

    python3 tests/gpu/upstream-client.py [--json FILE]
Exit status 0, 1 on a failed check, 77 without a GPU or JAX.
Environment: PROFD, PROFCTL, AGENT, PROFD_SRC, PYTHON_ML.
"""
import argparse
import glob
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("PROFD_SRC", os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(SRC, "tests", "pylib"))
PY_ML = os.environ.get("PYTHON_ML", "python3")

PROBE = r"""
import json, sys
found = {}
try:
    import jaxlib, jax
    from jax._src.lib import _profiler
    found["jaxlib"] = jaxlib.__version__
    found["jaxlib_profiler"] = sorted(n for n in dir(_profiler) if not n.startswith("__"))
except Exception as e:
    found["jaxlib_error"] = repr(e)
for mod in ("tensorflow.python.profiler.profiler_client", "xprof.convert.raw_to_tool_data",
            "tensorboard_plugin_profile", "xprof"):
    try:
        __import__(mod)
        found[mod] = True
    except Exception as e:
        found[mod] = repr(e)[:120]
print(json.dumps(found))
"""

# Upstream client capture: argv = addresses logdir duration_ms. Tries the
# bindings that carry TSL's CaptureRemoteTrace, in the order users meet them.
CLIENT = r"""
import sys
addrs, logdir, ms = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    from tensorflow.python.profiler import profiler_client
    profiler_client.trace("grpc://" + addrs.replace(",", ",grpc://"), logdir, ms)
    print("client: tensorflow.profiler_client.trace")
    sys.exit(0)
except ImportError:
    pass
from jax._src.lib import _profiler
if hasattr(_profiler, "trace"):
    _profiler.trace(addrs, logdir, "", False, ms, 1, {})
    print("client: jaxlib _profiler.trace")
    sys.exit(0)
print("no upstream capture client in this Python")
sys.exit(3)
"""

JOB = r"""
import sys
import jax, jax.numpy as jnp
if not any(d.platform == 'gpu' for d in jax.devices()):
    sys.exit(77)
x = jnp.ones((512, 512), jnp.float32)
f = jax.jit(lambda a: jnp.tanh(a @ a) + 1.0)
f(x).block_until_ready()
print('ready', flush=True)
import threading
stop = []
def loop():
    while not stop:
        f(x).block_until_ready()
threading.Thread(target=loop, daemon=True).start()
sys.stdin.readline()
stop.append(1)
"""

CONVERT = r"""
import gzip, json, os, sys
from jax._src.lib import _profiler
data = open(sys.argv[1], 'rb').read()
_profiler.ProfilerSession().export(data, sys.argv[2])
names = {}
for root, _, files in os.walk(sys.argv[2]):
    for f in files:
        if f.endswith('trace.json.gz'):
            for e in json.load(gzip.open(os.path.join(root, f))).get('traceEvents', []):
                if e.get('ph') == 'X':
                    names[e.get('name', '')] = names.get(e.get('name', ''), 0) + 1
print(json.dumps(names))
"""

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def xplanes(logdir):
    return sorted(glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb")))


def kernel_names(P, path):
    """{kernel name: count} of the XSpace in @path (profdtest.gpu_kernels())."""
    import profdtest as T
    x = P.xp.XSpace()
    with open(path, "rb") as f:
        x.ParseFromString(f.read())
    names = {}
    for n, _, _ in T.gpu_kernels(x):
        names[n] = names.get(n, 0) + 1
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json")
    args = ap.parse_args()
    import profdtest as T
    if not T.nvidia_gpu():
        print("skip: no NVIDIA GPU")
        return 77
    P = T.protos()
    out = {}
    r = subprocess.run([PY_ML, "-c", PROBE], capture_output=True, text=True, timeout=120)
    probe = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 and r.stdout.strip() else {}
    out["probe"] = probe
    print("upstream parts in this Python:", json.dumps(probe)[:1500])
    if "jaxlib" not in probe:
        print("skip: jaxlib not importable by", PY_ML, r.stderr[-300:])
        return 77
    work = tempfile.mkdtemp(prefix="profd-upstream-")
    sock = os.path.join(work, "agent.sock")
    profctl = os.environ["PROFCTL"]
    with T.Daemon("--agent-socket", sock, timeout=30) as d1, \
            T.Daemon("--agent-socket", os.path.join(work, "agent2.sock"), timeout=30) as d2:
        env = dict(os.environ, CUDA_INJECTION64_PATH=os.environ["AGENT"], PROFD_AGENT_SOCKET=sock,
                   XLA_PYTHON_CLIENT_PREALLOCATE="false")
        job = subprocess.Popen([PY_ML, "-c", JOB], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        if job.stdout.readline().strip() != "ready":
            job.wait(timeout=60)
            check(False, f"JAX job started: {job.stderr.read()[-500:]}")
            return 1
        deadline = time.time() + 30
        while time.time() < deadline and not any(a.pid == job.pid for a in T.status(d1.addr).agents):
            time.sleep(0.1)
        both = f"127.0.0.1:{d1.port},127.0.0.1:{d2.port}"
        # 1. the upstream client, where this Python has one
        for tag, addrs in (("one", f"127.0.0.1:{d1.port}"), ("two", both)):
            logdir = os.path.join(work, "client-" + tag)
            c = subprocess.run([PY_ML, "-c", CLIENT, addrs, logdir, "1500"], capture_output=True,
                               text=True, timeout=120)
            if c.returncode == 3:
                out["upstream_client"] = "none"
                print("note: " + c.stdout.strip() + "; probe above lists what there is")
                break
            files = xplanes(logdir)
            out[f"upstream_{tag}"] = {"rc": c.returncode, "files": [os.path.basename(f) for f in files],
                                      "tail": (c.stdout + c.stderr)[-400:]}
            check(c.returncode == 0 and len(files) == addrs.count(",") + 1,
                  f"upstream client, {tag} host(s): rc {c.returncode}, {len(files)} xplane.pb "
                  f"{(c.stdout + c.stderr)[-300:]}")
        # 2. profctl over both hosts comma-separated, then jaxlib's converter
        logdir = os.path.join(work, "profctl")
        c = subprocess.run([profctl, "capture", both, "--logdir", logdir, "--duration-ms", "1500",
                            "--no-progress"], capture_output=True, text=True, timeout=120)
        files = xplanes(logdir)
        check(c.returncode == 0 and len(files) == 2,
              f"profctl, two hosts comma-separated: rc {c.returncode}, {len(files)} xplane.pb")
        job.stdin.write("stop\n")
        job.stdin.flush()
        job.wait(timeout=60)
        mine = [kernel_names(P, f) for f in files]
        ours = max(mine, key=lambda m: sum(m.values())) if mine else {}
        check(sum(ours.values()) > 0, f"the JAX job's kernels in profd's XSpace: {ours}")
        if ours:
            src = files[[sum(m.values()) for m in mine].index(sum(ours.values()))]
            r = subprocess.run([PY_ML, "-c", CONVERT, src, os.path.join(work, "converted")],
                               capture_output=True, text=True, timeout=180)
            conv = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 and r.stdout.strip() else {}
            missing = {n: (k, conv.get(n, 0)) for n, k in ours.items() if conv.get(n, 0) < k}
            out["converter"] = {"rc": r.returncode, "xspace_kernels": ours, "missing": missing,
                                "stderr": r.stderr[-400:]}
            check(r.returncode == 0 and not missing,
                  f"jaxlib's converter: every kernel in trace.json.gz (missing {missing}; rc {r.returncode} "
                  f"{r.stderr[-300:] if r.returncode else ''})")
    out["failures"] = failures
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
