#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""hostile-figures.py BUILD [CASE...] - figures for bench/RESULTS.md under
issue 10's amplification cases and the connection flood, each against a
fresh profd on loopback (run with /usr/bin/python3: Debian's grpcio):

  gzip-bomb  a gzip-compressed ProfileRequest of 256 MiB of zeros (~256 KiB
             on the wire), 4 times: profd's peak RSS (VmHWM) over idle;
  stalled    100 calls that never send their request message: RSS while
             they are held, and how long until profd released them
             (--first-message-timeout, default 10s);
  big-output a capture whose XSpace would pass 2 GiB (45 M GPU events from
             the fake agent; --max-events 60000000 --max-bytes 8192M): the
             reply's size, the cut warning, peak RSS;
  emfile     a burst of connections past RLIMIT_NOFILE=64: how long until
             profd, no longer accepting, exits non-zero for systemd to
             restart it (--self-check 500ms and the default 30s).

The 8-overlapping-windows case is bench/hostile-rss.sh."""
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("PROFD", os.path.join(build, "daemon", "profd"))
os.environ.setdefault("PROFD_SRC", src)
os.environ.setdefault("PROFD_BUILD", build)
sys.path[:0] = [os.path.join(src, "tests", "pylib")]

import grpc  # noqa: E402

import profdtest as T  # noqa: E402

P = T.protos()
FAKE = os.path.join(build, "tests", "agent", "fake-agent")


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def gzip_bomb():
    with T.Daemon() as d:
        idle = status_kib(d.proc.pid, "VmRSS")
        req = T.profile_request(P, 100, d.addr)
        req.host_name = "a" * (256 << 20)
        codes = []
        with T.channel(d.addr) as ch:
            prof = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
            for _ in range(4):
                try:
                    prof(req, timeout=60, compression=grpc.Compression.Gzip)
                    codes.append("OK")
                except grpc.RpcError as e:
                    codes.append(e.code().name)
        peak = status_kib(d.proc.pid, "VmHWM")
        now = status_kib(d.proc.pid, "VmRSS")
    print(f"gzip-bomb: 4 x 256 MiB request (gzip on the wire): {codes}; idle {idle} KiB, "
          f"peak {peak} KiB (+{(peak - idle) >> 10} MiB), after {now} KiB")


def stalled():
    with T.Daemon() as d:
        idle = status_kib(d.proc.pid, "VmRSS")
        release = threading.Event()

        def never():
            release.wait(60)
            return
            yield

        with T.channel(d.addr) as ch:
            call = ch.stream_unary("/tensorflow.ProfilerService/Profile",
                                   request_serializer=P.ps.ProfileRequest.SerializeToString,
                                   response_deserializer=P.ps.ProfileResponse.FromString)
            t0 = time.time()
            futs = [call.future(never()) for _ in range(100)]
            time.sleep(2)
            held = status_kib(d.proc.pid, "VmRSS")
            codes = {}
            for f in futs:
                try:
                    f.result(timeout=60)
                    k = "OK"
                except grpc.RpcError as e:
                    k = e.code().name
                codes[k] = codes.get(k, 0) + 1
            t = time.time() - t0
            release.set()
        peak = status_kib(d.proc.pid, "VmHWM")
    print(f"stalled: 100 calls without a request message: idle {idle} KiB, held {held} KiB "
          f"(+{held - idle} KiB), peak {peak} KiB; all released after {t:.1f} s: {codes}")


def big_output():
    tmp = tempfile.mkdtemp(prefix="profd-big-")
    sock = os.path.join(tmp, "agent.sock")
    n = 45_000_000
    with T.Daemon("--agent-socket", sock, "--max-events", "60000000", "--max-bytes", "8192M",
                  "--flush-timeout", "10s", "--log-level", "info") as d:
        idle = status_kib(d.proc.pid, "VmRSS")
        fake = subprocess.Popen([FAKE, "--socket", sock, "--devices", "GPU-b1600000-0000-0000-0000-000000000001",
                                 "--name", "big", "--events", str(n), "--spread-ms", "9000"],
                                stdout=subprocess.PIPE, text=True)
        try:
            assert fake.stdout.readline().strip() == "connected"
            with T.channel(d.addr) as ch:
                req = T.profile_request(P, 10000, d.addr, session_id="big")
                req.opts.start_timestamp_ns = 0
                t0 = time.time()
                resp = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)(req, timeout=600)
                t = time.time() - t0
        finally:
            fake.kill()
            fake.wait()
            fake.stdout.close()
        peak = status_kib(d.proc.pid, "VmHWM")
        data = resp.tool_data[0].data
        x = P.xp.XSpace()
        x.ParseFromString(data)
        cut = [w for w in x.warnings if "would have exceeded" in w or "were dropped" in w]
    print(f"big-output: {n} events offered; reply {len(data)} bytes after {t:.1f} s; warnings {cut}; "
          f"idle {idle} KiB, peak {peak} KiB (+{(peak - idle) >> 10} MiB)")


def emfile(interval):
    args = ["--self-check", interval] if interval else []
    d = T.Daemon(*args, wrapper=["prlimit", "--nofile=64:64"])
    socks = []
    t0 = time.time()
    for _ in range(100):
        try:
            socks.append(socket.create_connection(("127.0.0.1", d.port), timeout=2))
        except OSError:
            break
    time.sleep(1.0)
    for s in socks:
        s.close()
    try:
        rc = d.proc.wait(timeout=200)
    except subprocess.TimeoutExpired:
        d.proc.kill()
        rc = "still running after 200 s"
    t = time.time() - t0
    d._log.close()
    print(f"emfile (--self-check {interval or '30s (default)'}): burst of 100 connections at "
          f"RLIMIT_NOFILE 64; profd exited {rc} {t:.1f} s after the burst began "
          f"('no longer accepts connections' logged: {'no longer accepts connections' in d.log()}); "
          f"under the unit systemd restarts it RestartSec=2s later")


CASES = {"gzip-bomb": gzip_bomb, "stalled": stalled, "big-output": big_output,
         "emfile": lambda: (emfile("500ms"), emfile(None))}

for name in sys.argv[2:] or list(CASES):
    CASES[name]()
    sys.stdout.flush()
