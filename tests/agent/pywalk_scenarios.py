# SPDX-License-Identifier: MIT
"""Run under the interpreter being tested (any of 3.10 - 3.14) by
test_pywalk.py: loads the walker probe (PYWALK_PROBE) with ctypes, walks
from known functions and lines, and prints one JSON object with what the
walker saw and the lines it should have seen (the "# L:name" markers
below). The hostile cases fabricate thread states, frames and code
objects with the running interpreter's layout (probe_layout) and report
what the walker returned for each.
"""
import asyncio
import ctypes
import json
import os
import random
import sys
import sysconfig
import threading
import time

lib = ctypes.CDLL(os.environ["PYWALK_PROBE"])
lib.probe_version.restype = ctypes.c_char_p
lib.probe_bench_walk.restype = ctypes.c_double
for name in ("probe_walk_from", "probe_sample_from", "probe_resolve_at"):
    getattr(lib, name).argtypes = None
lib.probe_walk_from.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_uint, ctypes.c_char_p, ctypes.c_size_t,
                                ctypes.POINTER(ctypes.c_int)]
lib.probe_sample_from.argtypes = [ctypes.c_size_t, ctypes.c_uint, ctypes.POINTER(ctypes.c_int)]
lib.probe_resolve_at.argtypes = [ctypes.c_size_t, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t]

HERE = os.path.abspath(__file__)
LINES = {}
with open(HERE) as src:
    for no, text in enumerate(src, 1):
        mark = text.rstrip().rsplit("  # L:", 1)
        if len(mark) == 2 and mark[1].isidentifier():
            LINES[mark[1]] = no


def frames(text):
    """[file, line, name] per walked frame ("[gen]" kept on the name)."""
    out = []
    for ln in text.splitlines():
        if ln == "?":
            out.append(["?", 0, "?"])
            continue
        where, name = ln.split(" ", 1)
        f, line = where.rsplit(":", 1)
        out.append([f, int(line), name])
    return out


def walk(max_frames=64):
    buf = ctypes.create_string_buffer(1 << 16)
    trunc = ctypes.c_int()
    n = lib.probe_walk(buf, len(buf), max_frames, ctypes.byref(trunc))  # L:walk
    return {"n": n, "truncated": trunc.value, "frames": frames(buf.value.decode())}


def sample():
    buf = ctypes.create_string_buffer(1 << 20)
    n = lib.probe_sample(buf, len(buf), 64)
    threads, cur = {}, None
    for ln in buf.value.decode().splitlines():
        if ln.startswith("T "):
            _, tid, count, trunc = ln.split()
            cur = threads.setdefault(tid, {"n": int(count), "frames": []})
        elif cur is not None:
            cur["frames"].extend(frames(ln))
    return n, threads


# Exact frames through three functions and a method.
def leaf():
    return walk()  # L:leaf


def middle():
    return leaf()  # L:middle


def outer():
    return middle()  # L:outer


class Klass:
    def meth(self):
        return walk()  # L:meth


# A generator and a coroutine.
def gen():
    yield walk()  # L:gen


async def coro():
    await asyncio.sleep(0)
    return walk()  # L:coro


# Recursion past the depth cap.
def rec(k, cap):
    if k == 0:
        return walk(cap)  # L:rec_base
    return rec(k - 1, cap)  # L:rec_step


# A C function between two Python frames.
def key_fn(x):
    return walk()  # L:key_fn


def through_sorted():
    return sorted([1], key=key_fn)[0] and KEEP[0]  # L:sorted


KEEP = []


def keep_key(x):
    KEEP.append(walk())  # L:keep_key
    return x


def through_sorted_keep():
    sorted([1], key=keep_key)  # L:sorted_keep
    return KEEP[-1]


def through_map():
    return list(map(lambda x: walk(), [1]))[0]  # L:map


# Threads: each walks itself, then parks at a known line for the sampler
# (enough of them that the sampler's page copies must be reused).
NTHREADS = 24


def thread_body(i, results, stop):
    results[i] = {"tid": threading.get_native_id(), "walk": thread_walk(i)}
    parked(stop)


def thread_walk(i):
    return walk()  # L:thread_walk


def parked(stop):
    while not stop.is_set():
        time.sleep(0.002)  # L:parked


def parked_b(stop):
    while not stop.is_set():
        time.sleep(0.002)  # L:parked_b


def start_parked(n, body):
    """@n threads in body(stop), each with its own stop event, in their
    loops on return: [(stop, thread)]."""
    ready = []

    def run(stop):
        ready.append(1)
        body(stop)

    out = []
    for _ in range(n):
        stop = threading.Event()
        t = threading.Thread(target=run, args=(stop,))
        t.start()
        out.append((stop, t))
    deadline = time.time() + 10
    while len(ready) < n and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)  # each one in its loop by now
    return out


def stop_all(group):
    for stop, _ in group:
        stop.set()
    for _, t in group:
        t.join()


def churn():
    """The sampler keeps the thread list between samples: an unchanged list
    is read in one call (a fast round), a changed one walked anew. Threads
    started and ended between samples: each sample has every live thread,
    and only those, each at its line."""
    def one():
        fast = lib.probe_fast_rounds()
        n, threads = sample()
        return {"n": n, "fast": lib.probe_fast_rounds() - fast,
                "live": sorted(str(t.native_id) for t in threading.enumerate()),
                "tids": sorted(threads), "top": {tid: t["frames"][:1] for tid, t in threads.items()}}

    a = start_parked(6, parked)
    out = {"started": [one(), one()]}
    # Three of them end, three others start, all before the next sample.
    stop_all(a[:3])
    b = start_parked(3, parked_b)
    out["a_kept"] = [str(t.native_id) for _, t in a[3:]]
    out["b"] = [str(t.native_id) for _, t in b]
    out["changed"] = [one(), one()]
    # The oldest of b ends: the list's head stays, a link in it changes.
    stop_all(b[:1])
    out["ended"] = [one(), one()]
    stop_all(a[3:] + b[1:])
    return out


def deep_blocked(stop, depth=40):
    if depth:
        return deep_blocked(stop, depth - 1)
    stop.wait()  # L:deep_blocked


def prefetched():
    """Once a sample has walked them, the next ones read every thread's
    pages in one call: the pages the walk had to read one at a time (deep
    frames past the newest one's page, code objects) are prefetched with
    the newest frames. Pages read one by one per sample, six samples."""
    group = start_parked(4, deep_blocked)
    counts = []
    for _ in range(6):
        before = lib.probe_pages_one_by_one()
        n, threads = sample()
        counts.append(lib.probe_pages_one_by_one() - before)
    deep = [t for t in threads.values() if [HERE, LINES["deep_blocked"], "deep_blocked"] in t["frames"]]
    stop_all(group)
    return {"counts": counts, "deep": len(deep), "deep_n": [t["n"] for t in deep]}


def dated():
    """Each thread's sample is dated when its frames were read, not when
    the round began: a round slowed by 40 ms before its reads (a thread
    started just before: walked one by one; again: the unchanged list in
    one call) dates every thread after the delay."""
    lib.probe_sample_dated.argtypes = [ctypes.c_uint, ctypes.c_char_p, ctypes.c_size_t,
                                       ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64)]
    out = []
    extra = start_parked(1, parked)
    for _ in range(2):
        buf = ctypes.create_string_buffer(1 << 16)
        t0, t1 = ctypes.c_uint64(), ctypes.c_uint64()
        fast = lib.probe_fast_rounds()
        n = lib.probe_sample_dated(40, buf, len(buf), ctypes.byref(t0), ctypes.byref(t1))
        rows = [ln.split() for ln in buf.value.decode().splitlines()]
        out.append({"n": n, "fast": lib.probe_fast_rounds() - fast,
                    "after_ms": [(int(ts) - t0.value) / 1e6 for _, ts, _ in rows],
                    "round_ms": (t1.value - t0.value) / 1e6})
    stop_all(extra)
    return out


def two_step(go, moved, stop):
    go.wait()  # L:two_step_a
    moved.append(1)
    stop.wait()  # L:two_step_b


def quiet():
    """While the GIL stays with one thread no other can run Python: the
    sampler then asks the clock of that thread alone and keeps the others'
    stacks (a quiet round). A thread that takes the GIL makes the next
    round ask every clock again, and it is walked where it went. The
    probe's idle answer stands in for the agent's clock: asked by clock,
    "ran" (walk it); asked quietly, "not run" (keep its stack)."""
    lib.probe_sample_quiet.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint),
                                       ctypes.POINTER(ctypes.c_uint), ctypes.c_size_t, ctypes.c_uint64]
    lib.probe_gil.restype = ctypes.c_size_t
    ctypes.pythonapi.PyThreadState_Get.restype = ctypes.c_void_p
    go, stop, moved = threading.Event(), threading.Event(), []
    blocked = start_parked(3, deep_blocked)
    mover = threading.Thread(target=two_step, args=(go, moved, stop))
    mover.start()
    time.sleep(0.05)

    def one(holder_at=0, holder=0):
        buf = ctypes.create_string_buffer(1 << 20)
        asked, asked_quiet = ctypes.c_uint(), ctypes.c_uint()
        fast, quiet_n, plain = lib.probe_fast_rounds(), lib.probe_quiet_rounds(), lib.probe_plain_rounds()
        # holder_at: the probe stores holder there before it samples.
        n = lib.probe_sample_quiet(buf, len(buf), ctypes.byref(asked), ctypes.byref(asked_quiet), holder_at, holder)
        walked, cur = {}, None
        for ln in buf.value.decode().splitlines():
            if ln.startswith("T "):
                _, tid, count, _ = ln.split()
                cur = walked.setdefault(tid, []) if int(count) >= 0 else None
            elif cur is not None:
                cur.extend(frames(ln))
        return {"n": n, "fast": lib.probe_fast_rounds() - fast, "quiet": lib.probe_quiet_rounds() - quiet_n,
                "plain": lib.probe_plain_rounds() - plain,
                "asked": asked.value, "asked_quiet": asked_quiet.value, "walked": walked}

    def until_quiet(rounds):
        # A thread still settling into its wait takes the GIL: a few rounds.
        for _ in range(50):
            rounds.append(one())
            if len(rounds) >= 2 and rounds[-1]["quiet"] and rounds[-2]["quiet"]:
                break
            time.sleep(0.02)
        return rounds

    out = {"main": str(threading.get_native_id()), "mover": str(mover.native_id),
           "nthreads": threading.active_count()}
    out["before"] = until_quiet([])
    gil = lib.probe_gil()
    out["gil"] = bool(gil)
    if gil:
        out["holder_is_main"] = get64(gil + 8) == ctypes.pythonapi.PyThreadState_Get()
        switches = get64(gil + 24)
    go.set()
    deadline = time.time() + 10
    while not moved and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    out["after"] = until_quiet([one()])
    if gil:
        out["switched"] = get64(gil + 24) > switches
    if gil and sys.version_info < (3, 13):
        # A switch caught half done: take_gil() stores the new holder, then
        # counts the switch. A round reading between the two sees the count
        # of the last round with another holder, and the last holder may
        # have run Python since: not quiet. Made by hand: the probe stores
        # another thread's state as the holder for one sample, the count
        # left alone, and puts the old holder back (no thread takes the
        # GIL meanwhile: the others are parked). Not on 3.13+:
        # 3.13.0 crashed in its collector at exit after it (the sampler's
        # code for this is the same on every version).
        api = ctypes.pythonapi
        for f in (api.PyInterpreterState_Main, api.PyInterpreterState_ThreadHead, api.PyThreadState_Next):
            f.restype = ctypes.c_void_p
        api.PyInterpreterState_ThreadHead.argtypes = [ctypes.c_void_p]
        api.PyThreadState_Next.argtypes = [ctypes.c_void_p]
        me, ts = api.PyThreadState_Get(), api.PyInterpreterState_ThreadHead(api.PyInterpreterState_Main())
        while ts and ts == me:
            ts = api.PyThreadState_Next(ts)
        out["torn"] = one(gil + 8, ts)
    stop.set()
    mover.join()
    stop_all(blocked)
    return out


def maintained():
    """A thread started now walks; after pyw_maintain() (50 ms apart) its
    walks stay inside the hot path's cache of readable ranges."""
    out = {}

    def body():
        out["first"] = rec(30, 64)["n"]
        time.sleep(0.06)
        out["after_maintain"] = lib.probe_maintain()
        out["again"] = rec(30, 64)["n"]
        out["missed_again"] = lib.probe_maintain()

    t = threading.Thread(target=body)
    t.start()
    t.join()
    return out


def scenarios():
    res = {"lines": LINES, "file": HERE}
    res["outer"] = outer()
    res["meth"] = Klass().meth()
    res["gen"] = next(gen())
    res["coro"] = asyncio.run(coro())
    res["rec"] = rec(100, 20)
    res["sorted"] = through_sorted_keep()
    res["map"] = through_map()
    res["cthread"] = lib.probe_cthread_walk()

    stop = threading.Event()
    results = {}
    ths = [threading.Thread(target=thread_body, args=(i, results, stop)) for i in range(NTHREADS)]
    for t in ths:
        t.start()
    deadline = time.time() + 10
    while len(results) < NTHREADS and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)  # every thread in parked() by now
    res["threads"] = results
    res["nthreads"] = NTHREADS
    res["main_tid"] = threading.get_native_id()
    res["sample_n"], res["sample"] = sample()
    res["maintain"] = maintained()
    res["dated"] = dated()
    res["prefetched"] = prefetched()
    res["churn"] = churn()
    stop.set()
    for t in ths:
        t.join()
    res["quiet"] = quiet()  # the other threads gone: nothing else takes the GIL
    return res


# ---- hostile: fabricated interpreter memory ------------------------------------------------

def layout():
    buf = ctypes.create_string_buffer(4096)
    assert lib.probe_layout(buf, len(buf)) == 0
    out = {}
    for ln in buf.value.decode().splitlines():
        k, v = ln.split("=")
        out[k] = int(v)
    return out


def put64(buf, off, val):
    ctypes.c_uint64.from_address(ctypes.addressof(buf) + off).value = val & (2**64 - 1)


def put32(buf, off, val):
    ctypes.c_uint32.from_address(ctypes.addressof(buf) + off).value = val & (2**32 - 1)


def get64(addr):
    return ctypes.c_uint64.from_address(addr).value


def target():
    return 1


# Rounds of random memory per run (each: two walks and one sample).
ROUNDS = 500


def hostile(seed):
    L = layout()
    rnd = random.Random(seed)
    code = target.__code__
    code_addr = id(code)
    out = {"random": {}, "cycle": None, "skip_cycle": None, "bad_instr": None, "not_code": None,
           "thread_cycle": None, "huge_str": None, "huge_table": None, "stale": None, "fresh": None}
    bufs = [ctypes.create_string_buffer(4096) for _ in range(16)]
    addrs = [ctypes.addressof(b) for b in bufs]

    def fresh_frame(buf, prev):
        """A well-formed frame of target() in @buf."""
        ctypes.memset(buf, 0, 4096)
        put64(buf, L["fr_previous"], prev)
        put64(buf, L["fr_code"], code_addr | (1 if L["minor"] >= 14 else 0))
        if L["frame_kind"] == 0:
            put64(buf, L["fr_type"], L["frame_type"])
            put32(buf, L["fr_instr"], 2)
        else:
            units = get64(code_addr + L["var_size"])
            put64(buf, L["fr_instr"], code_addr + L["co_code_adaptive"] + 2 * (units - 1))

    def tstate_for(buf, frame, cframe_buf):
        ctypes.memset(buf, 0, 4096)
        if L["cf_current"] >= 0:
            ctypes.memset(cframe_buf, 0, 4096)
            put64(cframe_buf, L["cf_current"], frame)
            put64(buf, L["ts_frame"], ctypes.addressof(cframe_buf))
        else:
            put64(buf, L["ts_frame"], frame)

    def walk_from(ts, plain, cap=32):
        text = ctypes.create_string_buffer(1 << 16)
        trunc = ctypes.c_int()
        n = lib.probe_walk_from(ts, plain, cap, text, len(text), ctypes.byref(trunc))
        return n, trunc.value, text.value.decode()

    # Random words, pointers into the other buffers (cycles), real objects.
    specials = [0, 1, 8, 2**63, 2**64 - 8, code_addr, L["code_type"], L["frame_type"], id(None), id([])]
    counts = {}
    out["rounds"] = ROUNDS
    for it in range(ROUNDS):
        for b in bufs:
            raw = bytearray(4096)
            for off in range(0, 4096, 8):
                r = rnd.random()
                if r < 0.4:
                    v = rnd.choice(addrs) + rnd.randrange(0, 4096, 8)
                elif r < 0.6:
                    v = rnd.choice(specials)
                elif r < 0.7:
                    v = code_addr + L["co_code_adaptive"] + 2 * rnd.randrange(-4, 64)
                else:
                    v = rnd.getrandbits(64)
                raw[off:off + 8] = v.to_bytes(8, "little")
            ctypes.memmove(b, bytes(raw), 4096)
        for plain in (1, 0):
            n, trunc, _ = walk_from(addrs[0], plain, rnd.choice([1, 8, 64]))
            counts[str(n)] = counts.get(str(n), 0) + 1
        torn = ctypes.c_int()
        seen = lib.probe_sample_from(addrs[1], 16, ctypes.byref(torn))
        counts["sample<=4096"] = counts.get("sample<=4096", 0) + (seen <= 4096)
    out["random"] = counts

    f0, f1, ts, cf = bufs[0], bufs[1], bufs[2], bufs[3]
    # A cycle of well-formed frames: the cap ends it.
    fresh_frame(f0, addrs[0])
    tstate_for(ts, addrs[0], cf)
    out["cycle"] = [walk_from(addrs[2], p, 32) for p in (1, 0)]
    # A cycle of frames to step over (C-stack shims, 3.12+): bounded too.
    if L["fr_owner"] >= 0:
        fresh_frame(f0, addrs[0])
        ctypes.c_uint8.from_address(addrs[0] + L["fr_owner"]).value = 3
        out["skip_cycle"] = [walk_from(addrs[2], p, 32)[0] for p in (1, 0)]
    # An instruction outside the bytecode.
    if L["frame_kind"] != 0:
        fresh_frame(f0, 0)
        put64(f0, L["fr_instr"], code_addr + L["co_code_adaptive"] + 2 * (1 << 20))
        out["bad_instr"] = [walk_from(addrs[2], p)[0] for p in (1, 0)]
    # A code pointer at something else.
    fresh_frame(f0, 0)
    not_code = [1, 2, 3]
    put64(f0, L["fr_code"], id(not_code))
    out["not_code"] = [walk_from(addrs[2], p)[0] for p in (1, 0)]
    # A thread list that loops.
    interp, t1 = bufs[4], bufs[5]
    ctypes.memset(interp, 0, 4096)
    ctypes.memset(t1, 0, 4096)
    put64(interp, L["in_threads"], addrs[5])
    put64(t1, L["ts_next"], addrs[5])
    torn = ctypes.c_int()
    out["thread_cycle"] = lib.probe_sample_from(addrs[4], 16, ctypes.byref(torn))

    # A copy of target's code object with a huge file name, then a huge line table.
    fake_code, fake_str, fake_bytes = bufs[6], bufs[7], bufs[8]
    ctypes.memmove(fake_code, code_addr, 512)
    ctypes.memset(fake_str, 0, 4096)
    put64(fake_str, 8, L["unicode_type"])
    put64(fake_str, L["str_length"], 2**62)
    put32(fake_str, L["str_state"], (1 << 2) | (1 << 5) | (1 << 6))  # kind 1, compact, ascii
    put64(fake_code, L["co_filename"], addrs[7])
    text = ctypes.create_string_buffer(1024)
    out["huge_str"] = lib.probe_resolve_at(addrs[6], 0, 0, text, len(text))
    ctypes.memmove(fake_code, code_addr, 512)
    ctypes.memset(fake_bytes, 0, 4096)
    put64(fake_bytes, 8, L["bytes_type"])
    put64(fake_bytes, 16, 2**40)
    put64(fake_code, L["co_linetable"], addrs[8])
    rc = lib.probe_resolve_at(addrs[6], 3, 0, text, len(text))
    out["huge_table"] = [rc, text.value.decode()]
    # A fingerprint that no longer matches: the code object was reused.
    out["stale"] = lib.probe_resolve_at(code_addr, 0, 0x5a5a, text, len(text))
    out["fresh"] = [lib.probe_resolve_at(code_addr, 0, 0, text, len(text)), text.value.decode()]
    return out


def main():
    why = ctypes.create_string_buffer(128)
    rc = []
    # The agent calls pyw_init() on its own thread, not the main one.
    t = threading.Thread(target=lambda: rc.append(lib.probe_init(why, len(why))))
    t.start()
    t.join()
    res = {"init": rc[0], "why": why.value.decode(), "pyw_version": lib.probe_version().decode(),
           "version": "%d.%d.%d" % sys.version_info[:3],
           "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
           "debug": hasattr(sys, "gettotalrefcount")}
    if rc[0] == 0:
        res.update(scenarios())
        if "--hostile" in sys.argv:
            res["hostile"] = hostile(int(os.environ.get("PYWALK_SEED", "29")))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
