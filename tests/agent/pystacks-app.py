# SPDX-License-Identifier: MIT
"""A Python CUDA job on the fake driver, for test_pystacks.py and the bench.

It loads the fake libcudart and libcuda through ctypes (the agent finds
CUPTI beside libcudart, as beside a framework's), calls cuInit (which loads
CUDA_INJECTION64_PATH, as the real driver does) and launches from known
functions and lines: each launch site's line ends with a "# @name" marker
the test looks up, so no line number is written twice. A ctypes call makes
no Python frame: the leaf frame of each launch is the function shown.

Commands on stdin, one answer line each:
  work      every launch site below once (several threads, a generator, a
            coroutine, recursion past 64 frames, a callback through C, a
            thread with no Python) -> "done"
  spin MS   a Python loop for MS ms, no launch (the sampler's) -> "spun"
  deep N    one launch N frames deep -> "deep"
  bench N D K [profile]  N launches, each from a chain of K Python calls
            (as a framework op is: module call, forward, functional), D
            frames deep in all (under cProfile: PyEval_SetProfile, as
            in-process tracers hook every call) -> "bench <CPU ns per launch>"
  threads T [staggered]  T Python threads, 20 frames deep, waking every 50 ms
            (staggered: each at its own phase) until "stop" -> "threads"
  stop      -> "stopped"
  state     the fake CUPTI's subscription -> "<subscribed> <domains on>
            <cuLaunchKernel's callback on> <cuCtxGetCurrent's> <API callbacks so far>"
  other N   N calls of cuCtxGetCurrent (launches nothing) -> "other"
  many N    one launch from each of N new functions many_0 .. many_<N-1>
            (one code object each: N frames and stacks to define) -> "many"
  fork      fork; the child launches from Python and exits -> "child <its exit status>"
  exit
"""
import ctypes
import os
import sys
import tempfile
import threading
import time

HERE = os.environ["FAKECUDA_DIR"]
cudart = ctypes.CDLL(os.path.join(HERE, "libcudart.so.13"))
cuda = ctypes.CDLL(os.path.join(HERE, "libcuda.so.1"))
launch = cuda.cuLaunchKernel
launch.argtypes = [ctypes.c_char_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
copy = cuda.cuMemcpyHtoDAsync_v2
copy.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
alloc = cuda.cuMemAlloc_v2
alloc.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
native = cuda.fakecuda_native_launches
native.argtypes = [ctypes.c_char_p, ctypes.c_uint]
native.restype = ctypes.c_uint32
G = (1, 1, 1, 1, 1, 1, 0)  # grid, block, shared memory
THREADS = 3
# A library's module (an installed package's path): python_frame names the
# user line that called into it, python_stack keeps the library frame.
LIB = os.path.join(tempfile.mkdtemp(prefix="pystacks-"), "site-packages")
os.mkdir(LIB)
with open(os.path.join(LIB, "fakelib.py"), "w") as f:
    f.write("def op(launch, g):\n    launch(b'k_lib', *g, 7, None, None)\n")
sys.path.insert(0, LIB)
import fakelib  # noqa: E402
PER_THREAD = 4
DEEP = 80


def step(i):
    launch(b"k_step", *G, 7, None, None)  # @step-launch
    copy(0, None, 4096, 7)  # @step-copy
    alloc(ctypes.byref(ctypes.c_uint64()), 4096)  # @step-alloc


def train(n):
    for i in range(n):
        step(i)  # @train-call


def worker(t):
    name = b"k_thread%d" % t
    for _ in range(PER_THREAD):
        launch(name, *G, 100 + t, None, None)  # @worker-launch


def gen(n):
    for i in range(n):
        launch(b"k_gen", *G, 7, None, None)  # @gen-launch
        yield i


def use_gen(n):
    for _ in gen(n):  # @use-gen
        pass


async def coro():
    launch(b"k_coro", *G, 7, None, None)  # @coro-launch


def run_coro():
    c = coro()
    try:
        c.send(None)  # @run-coro
    except StopIteration:
        pass


def deep(n):
    if n == 0:
        launch(b"k_deep", *G, 7, None, None)  # @deep-launch
        return
    deep(n - 1)  # @deep-call


CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


def compare(a, b):
    launch(b"k_callback", *G, 7, None, None)  # @callback-launch
    return 0


def through_c():
    arr = (ctypes.c_int * 2)(2, 1)
    libc = ctypes.CDLL(None)
    libc.qsort(arr, 2, ctypes.sizeof(ctypes.c_int), CMP(compare))  # @through-c


def work():
    train(2)  # @work-train
    ts = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    use_gen(2)  # @work-gen
    run_coro()  # @work-coro
    deep(DEEP)  # @work-deep
    through_c()  # @work-c
    fakelib.op(launch, G)  # @work-lib
    native(b"k_native", 2)


def many(n):
    src = "".join(f"def many_{i}():\n    launch(b'k_many', *G, 7, None, None)\n" for i in range(n))
    ns = {"launch": launch, "G": G}
    exec(compile(src, "<many>", "exec"), ns)
    for i in range(n):
        ns[f"many_{i}"]()  # @many-call


def spin(ms):
    end = time.monotonic() + ms / 1000
    # One line: the loop's jump back belongs to it too, so every sample
    # of the loop is the same frame.
    while time.monotonic() < end: pass  # noqa: E701  @spin


def op(k):
    if k > 1:
        return op(k - 1)
    launch(b"k_bench", *G, 7, None, None)  # @bench-launch


def bench(n, depth, k, profile):
    if depth > k + 3:  # <module>, serve, this one
        return bench(n, depth - 1, k, profile)
    prof = None
    if profile:
        import cProfile
        prof = cProfile.Profile()
        prof.enable()
    # The thread's CPU time: a machine shared with other work then
    # disturbs the figure far less than wall time would.
    t0 = time.thread_time_ns()
    for _ in range(n):
        op(k)
    t = time.thread_time_ns() - t0
    if prof:
        prof.disable()
    return t / n


spinning = []


def spinner(stop, depth=20, delay=0.0):
    if depth:
        return spinner(stop, depth - 1, delay)
    stop.wait(delay)
    while not stop.wait(0.05): pass  # noqa: E701  @spinner


class State(ctypes.Structure):
    # The first fields of fake-cupti.h's struct fakecupti_state.
    _fields_ = [("subscribed", ctypes.c_bool), ("kinds", ctypes.c_uint64), ("domains", ctypes.c_uint),
                ("rest", ctypes.c_byte * 512)]


CUPTI_CB_DOMAIN_DRIVER_API, CBID_cuLaunchKernel, CBID_cuCtxGetCurrent = 1, 307, 304


def state():
    cupti = ctypes.CDLL("libcupti.so.13", mode=os.RTLD_NOLOAD)
    s = State()
    cupti.fakecupti_get_state(ctypes.byref(s))
    cupti.fakecupti_api_callbacks.restype = ctypes.c_uint64
    on = [cupti.fakecupti_callback_on(CUPTI_CB_DOMAIN_DRIVER_API, c) for c in (CBID_cuLaunchKernel, CBID_cuCtxGetCurrent)]
    return f"{int(s.subscribed)} {s.domains} {on[0]} {on[1]} {cupti.fakecupti_api_callbacks()}"


def serve():
    print("ready", os.getpid(), threading.get_native_id(), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "work":
            work()  # @serve-work
            out = "done"
        elif cmd[0] == "spin":
            spin(int(cmd[1]))  # @serve-spin
            out = "spun"
        elif cmd[0] == "many":
            many(int(cmd[1]))
            out = "many"
        elif cmd[0] == "deep":
            deep(int(cmd[1]))  # @serve-deep
            out = "deep"
        elif cmd[0] == "bench":
            out = "bench %.1f" % bench(int(cmd[1]), int(cmd[2]), int(cmd[3]), cmd[4:] == ["profile"])
        elif cmd[0] == "threads":
            stop = threading.Event()
            spinning.append(stop)
            n = int(cmd[1])
            for i in range(n):
                # staggered: each thread's 50 ms beat shifted by i/n of it
                delay = 0.05 * i / n if cmd[2:] == ["staggered"] else 0.0
                threading.Thread(target=spinner, args=(stop, 20, delay), daemon=True).start()
            out = "threads"
        elif cmd[0] == "stop":
            for s in spinning:
                s.set()
            out = "stopped"
        elif cmd[0] == "other":
            for _ in range(int(cmd[1])):
                cuda.cuCtxGetCurrent(ctypes.byref(ctypes.c_void_p()))  # @other-call
            out = "other"
        elif cmd[0] == "state":
            out = state()
        elif cmd[0] == "fork":
            pid = os.fork()
            if pid == 0:
                step(0)
                os._exit(0)
            out = "child %d" % os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        elif cmd[0] == "exit":
            break
        else:
            out = "error " + cmd[0]
        print(out, flush=True)


cuda.cuInit(0)
serve()  # @module
