# SPDX-License-Identifier: MIT
"""What the agent costs a CUDA job, side by side in one run (needs a GPU).

Workloads (bench/gpu/): a launch-bound CUDA C loop (launch-loop.cu), and
where JAX is importable a launch-bound JAX loop and a small JAX training
step (jax-work.py). Modes, each in a fresh process:

  plain   no agent
  idle    CUDA_INJECTION64_PATH=libprofd-agent.so, profd running, no capture
  traced  the same, captured by profd (profctl capture)
  jax     JAX workloads only: no agent; JAX's own in-process profiler server
          (jax.profiler.start_server) captured by the same profctl capture

Each process warms up, then:
  plain/idle     run 3 s of batches                 -> steady per-launch time
  traced/jax     capture of CAPTURE_S starts; 1.5 s later:
                 run 1 s (traced per-launch time), steps K (counted: every
                 kernel of these K batches must be in the trace), then
                 batches until 3 s after the capture ended:
                   the longest batch near the end = the detach pause,
                   batches from 1 s after the end = lingering overhead.
Per-launch time = batch time / launches per batch (a JAX call or step
counts as one launch). Numbers are medians over --reps processes.

Exit status: 0 when every check held (kernel counts; idle <= 1 %; traced
CUDA loop <= 1.3x; traced no worse than jax), 1 otherwise, 77 without a
GPU. Prints a table and writes --json.

  python3 bench/gpu-overhead.py [--reps 3] [--json FILE]
Environment: PROFD, PROFCTL, AGENT (default: the build's), NVCC (or
GPU_BIN holding launch-loop built ahead by tools/device-bundle), CAPTURE_S
(capture length, default 6),
PYTHON_ML (the JAX python; default this one), PROFD_SRC/PROFD_BUILD.
"""
import argparse
import glob
import json
import os
import queue
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("PROFD_SRC", os.path.dirname(HERE))
BUILD = os.environ.get("PROFD_BUILD", os.path.join(SRC, "build"))
sys.path.insert(0, os.path.join(SRC, "tests", "pylib"))

CAPTURE_S = float(os.environ.get("CAPTURE_S", "6"))
STEPS = {"cuda-loop": 100, "jax-loop": 100, "jax-train": 50}


def sh_ok(cmd):
    try:
        return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class Job:
    """A workload process speaking the run/steps/quit protocol."""

    def __init__(self, cmd, env, timeout=180):
        self.p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.q = queue.Queue()
        self.err = []
        threading.Thread(target=self._pump, args=(self.p.stdout, self.q.put), daemon=True).start()
        self.err_pump = threading.Thread(target=self._pump, args=(self.p.stderr, self.err.append), daemon=True)
        self.err_pump.start()
        self.stderr = lambda: "\n".join(e for e in self.err if e)[-2000:]
        line = self.q.get(timeout=timeout)
        if line != "ready":
            raise RuntimeError(f"{cmd[0]}: {line!r} instead of ready; {self.died()}")

    def died(self):
        """How the process ended, with all it wrote on stderr (the pump
        is joined: a message printed just before dying is not lost)."""
        try:
            rc = self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            rc = "still running"
        self.err_pump.join(timeout=5)
        return f"exit status {rc}; stderr: {self.stderr()}"

    @staticmethod
    def _pump(f, put):
        for line in f:
            put(line.strip())
        put(None)

    def ask(self, cmd, timeout):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        line = self.q.get(timeout=timeout)
        if not line:
            raise RuntimeError(f"job died on {cmd!r}: {self.died()}")
        return json.loads(line)

    def close(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
            self.p.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.wait()


def per_launch_us(run, lo=0, hi=1 << 64):
    """Median batch time per launch (us) of batches starting in [lo, hi)."""
    d = [dur for start, dur in run["b"] if lo <= start < hi]
    return (statistics.median(d) / run["batch"] / 1000.0) if d else None


def kernels_in(xspace_path, t0, t1, P):
    """Kernels on /device:GPU planes starting in [t0, t1] Unix ns
    (profdtest.gpu_kernels())."""
    x = P.xp.XSpace()
    with open(xspace_path, "rb") as f:
        x.ParseFromString(f.read())
    # Line timestamps are ns since the session start (TSL's normalisation,
    # which profd follows): shift the window by the Task Environment plane's
    # profile_start_time (Unix ns).
    start = 0
    for plane in x.planes:
        if plane.name == "Task Environment":
            for s in plane.stats:
                if plane.stat_metadata[s.metadata_id].name == "profile_start_time":
                    start = s.uint64_value or s.int64_value
    if not start:
        return -1, ["no profile_start_time in the Task Environment plane"]
    t0, t1 = t0 - start, t1 - start
    import profdtest as T
    n = sum(1 for _, ts, _ in T.gpu_kernels(x) if t0 <= ts <= t1)
    return n, list(x.warnings) + list(x.errors)


def steps_in_trace(out, steps, files, why, P):
    """@out with the kernels of the "steps" answer @steps found in the
    first trace of @files and their expected count, or with @why as its
    error when there is none."""
    out["kernels_expected"] = steps["kernels"]
    if not files:
        out["error"] = why
        return out
    out["kernels"], notes = kernels_in(files[0], steps["t0"], steps["t1"] + 50_000_000, P)
    out["notes"] = notes[:5]
    return out


class Bench:
    def __init__(self, args):
        self.args = args
        self.work = tempfile.mkdtemp(prefix="profd-overhead-")
        self.profd = os.environ.get("PROFD", os.path.join(BUILD, "daemon", "profd"))
        self.profctl = os.environ.get("PROFCTL", os.path.join(BUILD, "tools", "profctl"))
        self.agent = os.environ.get("AGENT", os.path.join(BUILD, "collectors", "cupti", "libprofd-agent.so"))
        self.py_ml = os.environ.get("PYTHON_ML", sys.executable)
        self.sock = os.path.join(self.work, "agent.sock")
        self.daemon = None
        self.port = None
        self.P = None

    def prepare_launch_loop(self):
        """The launch-bound CUDA loop into the work directory: built ahead
        by tools/device-bundle (GPU_BIN), else compiled here."""
        prebuilt = os.path.join(os.environ.get("GPU_BIN", "/nonexistent"), "launch-loop")
        if os.access(prebuilt, os.X_OK):
            shutil.copy(prebuilt, os.path.join(self.work, "launch-loop"))
        else:
            nvcc = os.environ.get("NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
            subprocess.run([nvcc, "-O2", "-o", os.path.join(self.work, "launch-loop"),
                            os.path.join(HERE, "gpu", "launch-loop.cu")], check=True)

    def start_profd(self):
        log = open(os.path.join(self.work, "profd.log"), "w")
        self.daemon = subprocess.Popen([self.profd, "--listen", "127.0.0.1:0", "--agent-socket", self.sock],
                                       stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while time.time() < deadline and self.port is None:
            m = re.search(r"listening on .*\(port (\d+)\)", open(log.name).read())
            self.port = int(m.group(1)) if m else None
            time.sleep(0.1)
        if self.port is None:
            raise RuntimeError("profd did not start: " + open(log.name).read()[-2000:])

    def stop(self):
        if self.daemon:
            self.daemon.terminate()
            self.daemon.wait(timeout=20)
        shutil.rmtree(self.work, ignore_errors=True)

    def job(self, workload, mode, port=None):
        env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
        env.pop("CUDA_INJECTION64_PATH", None)
        if mode in ("idle", "traced"):
            env.update(CUDA_INJECTION64_PATH=self.agent, PROFD_AGENT_SOCKET=self.sock)
            # A backtrace on stderr if the job faults (tests/gpu/abort-trace.c).
            at = os.path.join(os.environ.get("GPU_BIN", "/nonexistent"), "libabort-trace.so")
            if os.path.exists(at):
                env["LD_PRELOAD"] = at
        if workload == "cuda-loop":
            cmd = [os.path.join(self.work, "launch-loop")]
        else:
            cmd = [self.py_ml, os.path.join(HERE, "gpu", "jax-work.py"), workload.split("-")[1]]
            if mode == "jax":
                cmd += ["--server", str(port)]
        return Job(cmd, env)

    def capture(self, port, tag):
        logdir = os.path.join(self.work, tag)
        cmd = [self.profctl, "capture", f"127.0.0.1:{port}", "--logdir", logdir,
               "--duration-ms", str(int(CAPTURE_S * 1000)), "--session-id", "s", "--no-progress",
               "--attempts", "1"]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True), logdir

    def one(self, workload, mode, rep):
        """One process: returns a dict of measurements."""
        port = None
        if mode == "jax":
            port = 20000 + (os.getpid() + rep) % 20000
        j = self.job(workload, mode, port)
        out = {"workload": workload, "mode": mode}
        try:
            if mode in ("plain", "idle"):
                out["per_launch_us"] = per_launch_us(j.ask("run 3", 60))
                return out
            if mode == "jax":
                time.sleep(1.0)  # the server thread starts listening
            cap, logdir = self.capture(port if mode == "jax" else self.port, f"{workload}-{mode}-{rep}")
            t_cap = time.time_ns()
            time.sleep(1.5)  # the capture is open and the tracer attached
            traced = j.ask("run 1", 60)
            time.sleep(0.05)
            steps = j.ask(f"steps {STEPS[workload]}", 120)
            time.sleep(0.05)
            t_end = t_cap + int(CAPTURE_S * 1e9)
            after = j.ask(f"run {max(0.5, (t_end - time.time_ns()) / 1e9 + 3.0):.3f}", 60)
            text, _ = cap.communicate(timeout=120)
            files = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
            out["per_launch_us"] = per_launch_us(traced)
            out["lingering_us"] = per_launch_us(after, lo=t_end + 1_000_000_000)
            near = [dur for s, dur in after["b"] if t_end - 200_000_000 <= s < t_end + 2_500_000_000]
            base = statistics.median(d for _, d in after["b"]) if after["b"] else 0
            out["detach_pause_ms"] = (max(near) - base) / 1e6 if near else None
            return steps_in_trace(out, steps, files, "no trace: " + text[-500:], self.P)
        finally:
            j.close()


def gpu_bench(args):
    """A Bench with the protos and the launch-bound loop ready; None (and
    a skip line) without a GPU."""
    import profdtest as T
    if not T.nvidia_gpu():
        print("skip: no NVIDIA GPU")
        return None
    b = Bench(args)
    b.P = T.protos()
    b.prepare_launch_loop()
    return b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", help="write all measurements here")
    ap.add_argument("--workloads", default="cuda-loop,jax-loop,jax-train")
    args = ap.parse_args()
    b = gpu_bench(args)
    if not b:
        return 77
    have_jax = sh_ok([b.py_ml, "-c", "import jax; assert jax.devices('gpu')"])
    workloads = [w for w in args.workloads.split(",") if w == "cuda-loop" or have_jax]
    if not have_jax:
        print(f"note: JAX with a GPU is not importable by {b.py_ml}: CUDA loop only")
    results = []
    try:
        b.start_profd()
        gpu = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.splitlines()[0]
        print(f"# {gpu}; {args.reps} processes per mode; capture {CAPTURE_S:.0f} s", flush=True)
        for w in workloads:
            modes = ["plain", "idle", "traced"] + (["jax"] if w != "cuda-loop" else [])
            for rep in range(args.reps):
                for m in modes:  # interleaved, so drift hits every mode alike
                    r = b.one(w, m, rep)
                    print(json.dumps(r), flush=True)
                    results.append(r)
    finally:
        b.stop()
    return report(results, workloads, args)


def report(results, workloads, args):
    def med(w, m, key):
        v = [r[key] for r in results if r["workload"] == w and r["mode"] == m and r.get(key) is not None]
        return statistics.median(v) if v else None

    fails = []
    print("\n| workload | mode | per launch (us) | vs plain | lingering after (us) | detach pause (ms) | kernels counted / expected |")
    print("|---|---|---|---|---|---|---|")
    summary = {}
    for w in workloads:
        plain = med(w, "plain", "per_launch_us")
        for m in ["plain", "idle", "traced", "jax"]:
            pl = med(w, m, "per_launch_us")
            if pl is None:
                continue
            ratio = pl / plain if plain else None
            ling = med(w, m, "lingering_us")
            pause = med(w, m, "detach_pause_ms")
            ks = [(r.get("kernels"), r.get("kernels_expected")) for r in results
                  if r["workload"] == w and r["mode"] == m and "kernels_expected" in r]
            kcol = ", ".join(f"{k}/{e if e is not None else '?'}" for k, e in ks) if ks else "-"
            print(f"| {w} | {m} | {pl:.2f} | {ratio:.3f}x | "
                  f"{'-' if ling is None else f'{ling:.2f} ({ling / plain:.3f}x)'} | "
                  f"{'-' if pause is None else f'{pause:.1f}'} | {kcol} |")
            summary[(w, m)] = {"per_launch_us": pl, "ratio": ratio, "lingering_us": ling,
                               "detach_pause_ms": pause, "kernels": ks}
            for k, e in ks:
                if e is not None and k != e:
                    fails.append(f"{w} {m}: {k} kernels in the trace, {e} launched")
        idle = summary.get((w, "idle"))
        if idle and idle["ratio"] > 1.01:
            fails.append(f"{w}: idle agent costs {100 * (idle['ratio'] - 1):.1f} % (target <= 1 %)")
        tr, jx = summary.get((w, "traced")), summary.get((w, "jax"))
        if w == "cuda-loop" and tr and tr["ratio"] > 1.3:
            fails.append(f"{w}: traced {tr['ratio']:.2f}x plain per launch (target <= 1.3x)")
        if tr and jx:
            if tr["ratio"] > jx["ratio"] * 1.02:
                fails.append(f"{w}: traced by profd {tr['ratio']:.3f}x vs JAX's own {jx['ratio']:.3f}x")
            tk = [k for k, _ in tr["kernels"]]
            jk = [k for k, _ in jx["kernels"]]
            if tk and jk and len(set(tk + jk)) != 1:
                fails.append(f"{w}: kernel counts differ: profd {tk}, JAX {jk}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f)
    for f in fails:
        print("FAIL " + f)
    print(f"{'all checks held' if not fails else f'{len(fails)} check(s) failed'}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
