# SPDX-License-Identifier: MIT
"""The gpu.agent receiver against fake agents over the real agent socket.

A fake agent (tests/agent/fake-agent.c) speaks the wire protocol the way
libprofd-agent.so does; two of them stand for two CUDA processes that see
the same two GPUs under different local ordinals.
"""
import os
import re
import select
import signal
import socket
import struct
import subprocess
import tempfile
import time
import unittest

import profdtest as T

P = T.protos()
FAKE = os.environ.get("FAKE_AGENT", os.path.join(T.BUILD, "tests", "agent", "fake-agent"))

UUID_A = "GPU-aaaaaaaa-0000-0000-0000-000000000001"
UUID_B = "GPU-bbbbbbbb-0000-0000-0000-000000000002"
MAGIC = 0x41444650
HDR = struct.Struct("<IHHII")
# proto/agent/agent-proto.h: profd serves PROTO_VERSION_MIN..PROTO_VERSION; the
# real agent and the fake one (by default) speak PROTO_VERSION.
PROTO_VERSION_MIN = 1
PROTO_VERSION = 6


class Agent:
    def __init__(self, sock, devices, name, *extra):
        self.proc = subprocess.Popen([FAKE, "--socket", sock, "--devices", ",".join(devices), "--name", name]
                                     + list(extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.wait_line("connected")

    def wait_line(self, want, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"fake agent exited before '{want}': {self.proc.stderr.read()}")
            if line.strip() == want:
                return
        raise AssertionError(f"fake agent: no '{want}'")

    def finish(self, timeout=10):
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.proc.stdout.close()
            self.proc.stderr.close()


def stats_of(plane, stats):
    out = {}
    for s in stats:
        name = plane.stat_metadata[s.metadata_id].name
        kind = s.WhichOneof("value")
        v = getattr(s, kind)
        if kind == "ref_value":
            v = plane.stat_metadata[v].name
        out[name] = (kind, v)
    return out


def planes(x):
    return {p.name: p for p in x.planes}


class AgentTests(T.AgentDaemonCase):
    @classmethod
    def cleanup(cls):
        assert not os.path.exists(cls.sock), "profd left its agent socket behind"

    def capture(self, ms=500, sid="agent"):
        req = T.profile_request(P, ms, f"localhost:{self.d.port}", session_id=sid)
        resp = self.profile(req, timeout=60)
        return T.decode_xspace(P, resp.tool_data[0].data)

    def wait_agents(self, n, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            st = self.status(P.profd.StatusRequest(), timeout=10)
            if len(st.agents) == n:
                return st
            time.sleep(0.05)
        raise AssertionError(f"expected {n} agents, status has {len(st.agents)}")

    # ------------------------------------------------------------------

    def test_1_no_agent_warns(self):
        x = self.capture(200, "noagent")
        self.assertFalse([p for p in x.planes if p.name.startswith("/device:GPU:")])
        w = [w for w in x.warnings if w.startswith("no GPU data")]
        self.assertEqual(len(w), 1, list(x.warnings))
        self.assertIn("CUDA_INJECTION64_PATH=", w[0])
        self.assertIn("libprofd-agent.so", w[0])
        # Not the default socket: jobs must be told where it is.
        self.assertIn("PROFD_AGENT_SOCKET=" + self.sock, w[0])

    def test_2_two_processes_two_devices(self):
        # Process 1 sees A as device 0; process 2 sees B as device 0.
        a1 = Agent(self.sock, [UUID_A, UUID_B], "trainer-r0")
        a2 = Agent(self.sock, [UUID_B, UUID_A], "trainer-r1")
        st = self.wait_agents(2)
        by_pid = {a.pid: a for a in st.agents}
        self.assertEqual(set(by_pid), {a1.proc.pid, a2.proc.pid})
        ag1 = by_pid[a1.proc.pid]
        self.assertEqual(ag1.name, "trainer-r0")
        self.assertIn("--devices", ag1.cmdline)
        planes_by_uuid = {}
        for a in st.agents:
            self.assertEqual(len(a.devices), 2)
            for dv in a.devices:
                planes_by_uuid.setdefault(dv.uuid, set()).add(dv.plane_id)
        self.assertEqual(planes_by_uuid[UUID_A], {planes_by_uuid[UUID_A].copy().pop()})
        self.assertEqual(len(planes_by_uuid[UUID_B]), 1)

        x = self.capture(500, "two")
        self.assertEqual(a1.finish(), 0)
        self.assertEqual(a2.finish(), 0)
        ps = planes(x)
        self.assertIn("/device:GPU:0", ps)
        self.assertIn("/device:GPU:1", ps)
        self.assertFalse([w for w in x.warnings if w.startswith("no GPU data")], list(x.warnings))
        plane_a = ps["/device:GPU:%d" % planes_by_uuid[UUID_A].pop()]
        plane_b = ps["/device:GPU:%d" % planes_by_uuid[UUID_B].pop()]
        self.assertNotEqual(plane_a.name, plane_b.name)

        meta = stats_of(ps["/host:metadata"], ps["/host:metadata"].stats)
        self.assertEqual(meta["cuda_driver_version"], ("str_value", "13.0"))
        host = ps["/host:CPU"]
        host_corr = {}
        for line in host.lines:
            if "(pid " not in line.name or line.name.endswith("/GPU memory"):
                continue
            m = re.fullmatch(r"(\S+) \(pid (\d+)\)/tid (\d+)", line.name)
            self.assertTrue(m, line.name)
            # Thread ids repeat across pid namespaces: the name carries the pid;
            # the id is the plane's own ordinal, below XProf's derived range.
            self.assertLess(line.id, T.LINE_ID_LIMIT)
            self.assertEqual(T.line_owner(line), (int(m.group(2)), int(m.group(3))))
            for ev in line.events:
                st_ = stats_of(host, ev.stats)
                self.assertEqual(st_["correlation_id"][0], "uint64_value")
                host_corr[st_["correlation_id"][1]] = host.event_metadata[ev.metadata_id].name
        self.assertEqual(sum(1 for v in host_corr.values() if v == "cuLaunchKernel"), 2 * 2 * 5)

        for p in (plane_a, plane_b):
            pst = stats_of(p, p.stats)
            self.assertEqual(pst["device_vendor"], ("str_value", "Nvidia"))
            self.assertEqual(pst["core_count"][1], 132)
            self.assertEqual(pst["compute_cap_major"][1], 9)
            self.assertEqual(pst["clock_rate"][1], 1980000)
            self.assertGreater(pst["memory_bandwidth"][1], 1e12)
            self.assertEqual(pst["memory_size"][1], 85899345920)
            self.assertIn("Fake H100", pst["gpu_device_name"][1])
            kernels = 0
            line_names = {}
            pids = set()
            for line in p.lines:
                owner = T.line_owner(line)
                line_names[owner[1]] = line.name
                pids.add(owner[0])
                self.assertLess(line.id, T.LINE_ID_LIMIT)
                for ev in line.events:
                    name = p.event_metadata[ev.metadata_id].name
                    st_ = stats_of(p, ev.stats)
                    self.assertEqual(st_["correlation_id"][0], "uint64_value")
                    if name.startswith("fake_gemm") or name.startswith("Memcpy"):
                        self.assertIn(st_["correlation_id"][1], host_corr, name)  # a flow exists
                    self.assertTrue(st_["context_id"][1].startswith("$$"))
                    if name.startswith("fake_gemm"):
                        kernels += 1
                        self.assertEqual(name, "fake_gemm(float*, float*, int)")
                        self.assertEqual(host_corr[st_["correlation_id"][1]], "cuLaunchKernel")
                        self.assertRegex(st_["kernel_details"][1],
                                         r"^regs:32 static_shared:0 dynamic_shared:16384 grid:6[45],1,1 "
                                         r"block:128,1,1 occ_pct:50$")
                        self.assertEqual(ev.duration_ps, 50000 * 1000)
                    elif name == "MemcpyH2D":
                        self.assertEqual(st_["memcpy_details"][1],
                                         "kind_src:pageable kind_dst:device size:1048576 dest:%d async:1"
                                         % int(p.name.split(":")[-1]))
                    elif name == "Memset":
                        self.assertEqual(st_["Memset_details"][1], "kind:device num_bytes:4096 async:1")
                    elif name == "MemoryAlloc":
                        self.assertEqual(st_["memalloc_details"][1], "kind:device num_bytes:1048576")
                    elif name == "MemoryFree":
                        self.assertEqual(st_["MemFree_details"][1], "kind:device num_bytes:1048576")
            # Each physical GPU got 5 kernels from each of the two processes.
            self.assertEqual(kernels, 10, p.name)
            self.assertEqual(pids, {a1.proc.pid, a2.proc.pid})
            self.assertEqual(line_names[7], "Stream #7(Compute)")
            self.assertEqual(line_names[8], "Stream #8(MemcpyH2D,Memset)")
            self.assertIn("MemoryAlloc", line_names[0])
            # Timestamps were mapped from the agents' clock into the window.
            for line in p.lines:
                for ev in line.events:
                    self.assertLess((line.timestamp_ns * 1000 + ev.offset_ps) / 1e12, 0.6,
                                    (line.name, line.timestamp_ns, ev.offset_ps))

    def test_2b_same_tid_in_two_containers_gives_two_tracks(self):
        # Two jobs in separate pid namespaces both report thread 1 (and use
        # stream 7): their lines must stay apart in XProf, which keeps only
        # the low 32 bits of a line id and derives lines from 0xdeadbeef up.
        a1 = Agent(self.sock, [UUID_A], "job-a", "--tid", "1")
        a2 = Agent(self.sock, [UUID_A], "job-b", "--tid", "1")
        self.wait_agents(2)
        x = self.capture(500, "sametid")
        self.assertEqual(a1.finish(), 0)
        self.assertEqual(a2.finish(), 0)
        pids = {a1.proc.pid: "job-a", a2.proc.pid: "job-b"}
        for p in x.planes:
            if p.name != "/host:CPU" and not p.name.startswith("/device:GPU:"):
                continue
            ids = [l.id for l in p.lines if l.name != "_counters_"]
            self.assertEqual(len(ids), len(set(ids)), p.name)          # unique per plane
            self.assertTrue(all(0 < i < T.LINE_ID_LIMIT for i in ids), (p.name, ids))
            # In order of first appearance: 1, 2, ... (no gaps among agent lines).
            self.assertEqual(sorted(ids), list(range(1, len(ids) + 1)), p.name)
        host = next(p for p in x.planes if p.name == "/host:CPU")
        # Thread lines only (NVTX and GPU memory lines have keys >= 2^30).
        threads = {o: l for l in host.lines if (o := T.line_owner(l)) and o[1] < (1 << 30)}
        self.assertEqual(set(threads), {(pid, 1) for pid in pids})
        self.assertEqual(len({l.id & 0xffffffff for l in threads.values()}), 2)  # two tracks
        for (pid, _), l in threads.items():
            self.assertEqual(l.name, f"{pids[pid]} (pid {pid})/tid 1")
        gpu = next(p for p in x.planes if p.name.startswith("/device:GPU:"))
        streams = {T.line_owner(l): l for l in gpu.lines if l.name.startswith("Stream #7(")}
        self.assertEqual(set(streams), {(pid, 7) for pid in pids})
        self.assertEqual(len({l.id for l in streams.values()}), 2)
        for (pid, _), l in streams.items():
            # The name stays what XProf parses; the display name adds the process.
            self.assertEqual(l.name, "Stream #7(Compute)")
            self.assertEqual(l.display_name, f"{pids[pid]} {pid} / Stream #7(Compute)")
            self.assertTrue(l.events)

    def test_3_malformed_frames_are_rejected(self):
        def raw(data, close=True):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(self.sock)
            s.sendall(data)
            if close:
                time.sleep(0.1)
                s.close()
            return s

        V = PROTO_VERSION
        hello = struct.pack("<8I64s512s", os.getpid(), V, 1, 0, 0, 0, 0, 0, b"py", b"py")
        raw(HDR.pack(0xdeadbeef, V, 1, len(hello), 0) + hello)                    # bad magic
        raw(HDR.pack(MAGIC, V, 4, 0xFFFFFFF0, 0))                                 # huge length
        raw(HDR.pack(MAGIC, V, 99, 8, 0) + b"\0" * 8)                             # unknown kind
        raw(HDR.pack(MAGIC, V, 1, len(hello), 0) + hello[:100])                   # truncated
        raw(HDR.pack(MAGIC, V, 4, 8, 0) + b"\0" * 8)                              # before HELLO
        raw(HDR.pack(MAGIC, V, 1, len(hello), 0) + hello +                        # bad record
            HDR.pack(MAGIC, V, 4, 16, 0) + struct.pack("<HHI", 2, 200, 0) + b"\0" * 8)
        raw(HDR.pack(MAGIC, 7, 1, len(hello), 0) + hello)                         # version 7
        deadline = time.time() + 5
        want = ["bad magic", "frame too long", "unknown frame kind", "truncated", "frame before HELLO",
                "bad record size", "protocol version mismatch"]
        while time.time() < deadline and not all(w in self.d.log() for w in want):
            time.sleep(0.05)
        log = self.d.log()
        for w in want:
            self.assertIn(w, log)
        # Still serving, agents included.
        a = Agent(self.sock, [UUID_A], "after-garbage")
        x = self.capture(300, "after")
        a.finish()
        self.assertTrue([p for p in x.planes if p.name.startswith("/device:GPU:")])
        self.assertTrue([w for w in x.warnings if "version mismatch" in w and "v7" in w], list(x.warnings))

    def test_3b_random_records_do_no_harm(self):
        def raw(data, close=True):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(self.sock)
            s.sendall(data)
            return s

        V = PROTO_VERSION
        hello = struct.pack("<8I64s512s", os.getpid(), V, 1, 0, 0, 0, 0, 0, b"fuzz", b"fuzz")
        # Random record payloads behind a valid HELLO + DEVICE, during a capture.
        import random
        rnd = random.Random(1234)
        dev = struct.pack("<18I2Q48s32s96s", 0, 9, 0, 132, *([0] * 14), 0, 0,
                          UUID_A.encode(), b"0000:18:00.0", b"fuzz")
        req = T.profile_request(P, 600, f"localhost:{self.d.port}", session_id="fuzz")
        fut = self.profile.future(req, timeout=60)
        time.sleep(0.1)
        for i in range(60):
            body = bytearray(rnd.randrange(8, 512) // 8 * 8)
            for j in range(0, len(body), 8):
                # plausible headers (known types, sane sizes) mixed with noise
                struct.pack_into("<HHI", body, j, rnd.randrange(0, 9), rnd.choice([8, 16, 48, 56, 88, 4096]),
                                 rnd.randrange(0, 1 << 13))
                if rnd.random() < 0.3:
                    body[j:j + 8] = bytes(rnd.randrange(256) for _ in range(8))
            raw(HDR.pack(MAGIC, V, 1, len(hello), 0) + hello + HDR.pack(MAGIC, V, 2, len(dev), 0) + dev +
                HDR.pack(MAGIC, V, 4, len(body), 0) + bytes(body), close=False).close()
        x = T.decode_xspace(P, fut.result().tool_data[0].data)
        self.assertIsNotNone(x)
        # Still serving.
        a = Agent(self.sock, [UUID_B], "after-fuzz")
        x = self.capture(300, "after-fuzz")
        a.finish()
        self.assertTrue([p for p in x.planes if p.name.startswith("/device:GPU:")])

    def test_4_agent_killed_mid_capture(self):
        a = Agent(self.sock, [UUID_B], "doomed")
        pid = a.proc.pid
        req = T.profile_request(P, 1000, f"localhost:{self.d.port}", session_id="killed")
        fut = self.profile.future(req, timeout=60)
        a.wait_line("started")
        time.sleep(0.2)
        a.proc.kill()
        a.finish()
        x = T.decode_xspace(P, fut.result().tool_data[0].data)
        ps = planes(x)
        gpu = [p for p in x.planes if p.name.startswith("/device:GPU:")]
        self.assertTrue(gpu)
        kernels = sum(1 for p in gpu for l in p.lines for e in l.events
                      if p.event_metadata[e.metadata_id].name.startswith("fake_gemm"))
        self.assertEqual(kernels, 5)
        self.assertIn("/host:CPU", ps)
        w = [w for w in x.warnings if "disconnected during the capture" in w]
        self.assertEqual(len(w), 1, list(x.warnings))
        self.assertIn(f"pid {pid}", w[0])

    def test_5_drops_are_reported(self):
        a = Agent(self.sock, [UUID_A], "dropper", "--dropped", "3")
        x = self.capture(300, "drops")
        a.finish()
        w = [w for w in x.warnings if "dropped" in w and "dropper" in w]
        self.assertEqual(len(w), 1, list(x.warnings))
        self.assertIn("3 CUPTI buffers", w[0])

    def test_5b_cupti_errors_are_explained(self):
        a = Agent(self.sock, [UUID_A], "noperm", "--error", "2:cuptiSubscribe_v2: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES")
        b = Agent(self.sock, [UUID_B], "busy", "--error", "3:Nsight Systems")
        x = self.capture(300, "errors")
        a.finish()
        b.finish()
        w = list(x.warnings)
        perm = [s for s in w if f"pid {a.proc.pid}" in s]
        self.assertEqual(len(perm), 1, w)
        self.assertIn("insufficient privileges", perm[0])
        self.assertIn("NVreg_RestrictProfilingToAdminUsers=0", perm[0])
        busy = [s for s in w if f"pid {b.proc.pid}" in s]
        self.assertEqual(len(busy), 1, w)
        self.assertIn("another profiler already subscribed", busy[0])
        self.assertIn("Nsight Systems", busy[0])

    def test_6_straggler_does_not_block(self):
        a = Agent(self.sock, [UUID_A], "silent", "--no-flush-reply")
        t0 = time.time()
        x = self.capture(300, "straggler")
        took = time.time() - t0
        a.proc.kill()
        a.finish()
        self.assertLess(took, 5)
        self.assertTrue([p for p in x.planes if p.name.startswith("/device:GPU:")])

    def test_7_reconnect_after_restart(self):
        # An agent started before profd connects once profd is up.
        tmp = tempfile.mkdtemp(prefix="profd-agent-")
        sock = os.path.join(tmp, "agent.sock")
        proc = subprocess.Popen([FAKE, "--socket", sock, "--devices", UUID_A, "--name", "early"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.3)
        with T.Daemon("--agent-socket", sock) as d2:
            self.assertEqual(proc.stdout.readline().strip(), "connected")
            ch = T.channel(d2.addr)
            prof = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
            resp = prof(T.profile_request(P, 300, f"localhost:{d2.port}", session_id="early"), timeout=60)
            x = T.decode_xspace(P, resp.tool_data[0].data)
            ch.close()
        self.assertEqual(proc.wait(timeout=10), 0)
        proc.stdout.close()
        proc.stderr.close()
        self.assertTrue([p for p in x.planes if p.name.startswith("/device:GPU:")])

    def test_9_agent_joining_mid_capture(self):
        req = T.profile_request(P, 800, f"localhost:{self.d.port}", session_id="late")
        fut = self.profile.future(req, timeout=60)
        time.sleep(0.3)
        a = Agent(self.sock, [UUID_A], "latecomer")
        a.wait_line("started")
        x = T.decode_xspace(P, fut.result().tool_data[0].data)
        self.assertEqual(a.finish(), 0)
        kernels = sum(1 for p in x.planes if p.name.startswith("/device:GPU:") for l in p.lines
                      for e in l.events if p.event_metadata[e.metadata_id].name.startswith("fake_gemm"))
        self.assertEqual(kernels, 5)
        self.assertFalse([w for w in x.warnings if w.startswith("no GPU data")], list(x.warnings))

    def test_12_no_warning_when_disabled(self):
        with T.Daemon("--agent-socket", "") as d2:
            ch = T.channel(d2.addr)
            prof = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
            x = T.decode_xspace(P, prof(T.profile_request(P, 200, f"localhost:{d2.port}"), timeout=30)
                                .tool_data[0].data)
            ch.close()
            # The capture holds data (the host counters): an empty answer
            # must not pass for "no warning".
            self.assertTrue(list(T.plane_events(x, "/host:CPU")), [p.name for p in x.planes])
            self.assertFalse([w for w in x.warnings if "GPU data" in w], list(x.warnings))
            self.assertIn("gpu.agent: unavailable: no agent socket configured", d2.log())

    # ---- protocol versions (docs/agent.md "Versions") ------------------

    def test_13_v1_agent_is_served_in_v1(self):
        # A job started with an older agent: profd answers it in v1 (the fake
        # agent, like a real v1 one, drops a connection on any other version)
        # and takes its 40-byte STATS.
        a = Agent(self.sock, [UUID_A], "old-agent", "--proto-version", "1", "--dropped", "2")
        st = self.wait_agents(1)
        self.assertEqual(st.agents[0].version, 1)
        x = self.capture(400, "v1")
        self.assertEqual(a.finish(), 0)
        kernels = sum(1 for p in x.planes if p.name.startswith("/device:GPU:") for l in p.lines
                      for e in l.events if p.event_metadata[e.metadata_id].name.startswith("fake_gemm"))
        self.assertEqual(kernels, 5)
        w = [w for w in x.warnings if "old-agent" in w]
        self.assertEqual(w, [f"GPU events dropped in pid {a.proc.pid} (old-agent): 2 CUPTI buffers, 0 records"])

    def test_14_version_is_fixed_by_hello(self):
        def raw(data):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(self.sock)
            s.sendall(data)
            time.sleep(0.1)
            return s

        clock = struct.pack("<QQII", 1, 2, 0, 0)
        v1 = struct.pack("<8I64s512s", os.getpid(), 1, 1, 0, 0, 0, 0, 0, b"v1raw", b"v1raw")
        s1 = raw(HDR.pack(MAGIC, PROTO_VERSION_MIN, 1, len(v1), 0) + v1)
        st = self.wait_agents(1)
        self.assertEqual(st.agents[0].name, "v1raw")
        self.assertEqual(st.agents[0].version, PROTO_VERSION_MIN)
        s1.sendall(HDR.pack(MAGIC, PROTO_VERSION, 3, len(clock), 0) + clock)  # v2 frame on a v1 connection
        deadline = time.time() + 5
        while time.time() < deadline and "protocol version changed after HELLO" not in self.d.log():
            time.sleep(0.05)
        self.assertIn("protocol version changed after HELLO", self.d.log())
        self.wait_agents(0)
        s1.close()
        # STATS has its own size per version: a v1-sized STATS from a v2 agent is malformed.
        v2 = struct.pack("<8I64s512s", os.getpid(), 2, 1, 0, 0, 0, 0, 0, b"v2raw", b"v2raw")
        s2 = raw(HDR.pack(MAGIC, PROTO_VERSION, 1, len(v2), 0) + v2 +
                 HDR.pack(MAGIC, PROTO_VERSION, 7, 40, 0) + b"\0" * 40)
        deadline = time.time() + 5
        while time.time() < deadline and "pid %d (v2raw) closed: bad frame length" % os.getpid() not in self.d.log():
            time.sleep(0.05)
        s2.close()
        self.assertIn("(v2raw) closed: bad frame length", self.d.log())

    # ---- v2 notices as capture warnings ----------------------------------

    def one_warning(self, name, *args):
        a = Agent(self.sock, [UUID_A], name, *args)
        x = self.capture(300, name)
        a.finish()
        w = [w for w in x.warnings if f"pid {a.proc.pid} " in w]
        self.assertEqual(len(w), 1, list(x.warnings))
        return a.proc.pid, w[0]

    def test_15_error_foreign(self):
        pid, w = self.one_warning("foreign", "--error", "6:PyTorch's profiler owns the Activity API")
        self.assertEqual(w, f"no GPU data from pid {pid} (foreign): PyTorch's profiler owns the Activity API")

    def test_15b_error_no_cupti(self):
        pid, w = self.one_warning("nocupti", "--error", "7:no libcupti.so in LD_LIBRARY_PATH")
        self.assertEqual(w, f"no GPU data from pid {pid} (nocupti): no libcupti.so in LD_LIBRARY_PATH")

    def test_15c_error_notice(self):
        pid, w = self.one_warning("notice", "--error", "8:graph nodes are traced as whole graphs")
        self.assertEqual(w, f"pid {pid} (notice): graph nodes are traced as whole graphs")

    def test_16_stats_cut_records(self):
        pid, w = self.one_warning("cutter", "--stats-v2", "17,0,0")
        self.assertEqual(w, f"pid {pid} (cutter): 17 GPU records were still incomplete when the capture ended "
                            "and were cut")

    def test_16b_stats_foreign_buffers(self):
        pid, w = self.one_warning("shared", "--stats-v2", "0,4,0")
        self.assertEqual(w, f"pid {pid} (shared): 4 CUPTI buffers belonged to another profiler in the job and "
                            "were left alone")

    def test_16c_stats_slabs_leaked(self):
        pid, w = self.one_warning("leaker", "--stats-v2", "0,0,1")
        self.assertEqual(w, f"pid {pid} (leaker): CUPTI took longer than the agent's wait to finalize; its "
                            "activity buffers were left to it, not freed")

    def test_16d_v1_stats_say_nothing_new(self):
        # A v1 agent cannot send the v2 fields: whatever it has in mind, they are 0.
        # Its kernels and its v1 STATS (2 dropped buffers) arrived, and that
        # drop is all the warnings say of it: no cut, foreign or leak warning.
        a = Agent(self.sock, [UUID_A], "v1stats", "--proto-version", "1", "--stats-v2", "17,4,1",
                  "--dropped", "2")
        x = self.capture(300, "v1stats")
        self.assertEqual(a.finish(), 0)
        kernels = sum(1 for p, l, name, st in T.plane_events(x, "/device:GPU:") if name.startswith("fake_gemm"))
        self.assertEqual(kernels, 5, list(x.warnings))
        self.assertEqual([w for w in x.warnings if f"pid {a.proc.pid} " in w],
                         [f"GPU events dropped in pid {a.proc.pid} (v1stats): 2 CUPTI buffers, 0 records"])

    @unittest.skipUnless(os.environ.get("PROFD_AGENT_SO"), "libprofd-agent.so not built (no CUPTI)")
    def test_17_monitor_leaves_agents_idle(self):
        """Monitor reads NVML and host counters only: a connected agent gets
        no START (CUPTI stays detached in the job), also under --watch-like
        repeats. A capture opening beside a monitor arms it; once the
        capture is delivered, only the monitor is left and the agent is
        stopped again."""
        a = Agent(self.sock, [UUID_A], "idle", "--captures", "5")
        try:
            self.wait_agents(1)
            for _ in range(2):
                resp = self.stubs.monitor(P.ps.MonitorRequest(duration_ms=300, monitoring_level=2), timeout=30)
                self.assertIn("profd monitor on", resp.data)
                ready, _, _ = select.select([a.proc.stdout], [], [], 0.3)
                self.assertEqual(ready, [], "Monitor armed the agent: " + (a.proc.stdout.readline() if ready else ""))
            self.assertNotIn("no CUDA process with the profd agent is connected", resp.data)
            mon = self.stubs.monitor.future(P.ps.MonitorRequest(duration_ms=3000), timeout=30)
            time.sleep(0.3)
            x = self.capture(400, "beside-monitor")
            a.wait_line("started")
            a.wait_line("stopped")  # the capture is delivered; the monitor is still open
            self.assertTrue(mon.running(), "the monitor window closed before the capture's")
            self.assertTrue([p for p in x.planes if p.name.startswith("/device:GPU:") and
                             any(l.events for l in p.lines)], "no GPU events from the armed agent")
            mon.result()
            ready, _, _ = select.select([a.proc.stdout], [], [], 0.2)
            self.assertEqual(ready, [], "the agent was armed again: " + (a.proc.stdout.readline() if ready else ""))
        finally:
            a.proc.kill()
            a.finish()

    def test_8_real_agent_without_gpu(self):
        # The real libprofd-agent.so, started the way CUDA would (InitializeInjection),
        # in a process without a GPU: it must connect, say HELLO, answer the capture
        # with an explained CUPTI error, and never hang or crash its host process.
        code = ("import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); "
                "print('init', lib.InitializeInjection(), flush=True); sys.stdin.read()")
        env = dict(os.environ, PROFD_AGENT_SOCKET=self.sock)
        proc = subprocess.Popen(["/usr/bin/python3", "-c", code, os.environ["PROFD_AGENT_SO"]], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = proc.stdout.readline().strip()
        if not first and "ASan runtime" in proc.stderr.read():
            proc.wait()
            proc.stdin.close()
            proc.stdout.close()
            proc.stderr.close()
            self.skipTest("sanitizer build: the agent cannot load into an uninstrumented python")
        try:
            self.assertEqual(first, "init 1")
            st = self.wait_agents(1)
            self.assertEqual(st.agents[0].pid, proc.pid)
            self.assertEqual(st.agents[0].version, PROTO_VERSION)  # the version of its HELLO
            x = self.capture(300, "realagent")
            self.assertTrue([w for w in x.warnings if f"pid {proc.pid}" in w and "cupti" in w.lower()],
                            list(x.warnings))
            x = self.capture(200, "realagent2")  # a second capture works the same way
            self.assertIsNone(proc.poll())
        finally:
            proc.stdin.close()
            self.assertEqual(proc.wait(timeout=10), 0)
            proc.stdout.close()
            proc.stderr.close()

    @unittest.skipUnless(os.environ.get("PROFD_AGENT_SO"), "libprofd-agent.so not built (no CUPTI)")
    def test_10_real_agent_survives_profd_kill_and_restart(self):
        tmp = tempfile.mkdtemp(prefix="profd-agent-")
        sock = os.path.join(tmp, "agent.sock")
        code = ("import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); "
                "print('init', lib.InitializeInjection(), flush=True); sys.stdin.read()")
        env = dict(os.environ, PROFD_AGENT_SOCKET=sock)
        proc = subprocess.Popen(["/usr/bin/python3", "-c", code, os.environ["PROFD_AGENT_SO"]], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = proc.stdout.readline().strip()
        if not first and "ASan runtime" in proc.stderr.read():
            proc.wait()
            for f in (proc.stdin, proc.stdout, proc.stderr):
                f.close()
            self.skipTest("sanitizer build")
        try:
            self.assertEqual(first, "init 1")
            for round_ in range(2):  # profd absent at first, then killed and restarted
                d = T.Daemon("--agent-socket", sock, wrapper=[])
                ch = T.channel(d.addr)
                st = T.stub(ch, "Status", P.profd.StatusRequest, P.profd.StatusResponse, service="profd.Profd")
                deadline = time.time() + 15
                pids = []
                while time.time() < deadline and proc.pid not in pids:
                    pids = [a.pid for a in st(P.profd.StatusRequest(), timeout=10).agents]
                    time.sleep(0.1)
                ch.close()
                self.assertIn(proc.pid, pids, f"round {round_}: agent did not (re)connect")
                d.stop(signal.SIGKILL)
            self.assertIsNone(proc.poll(), "the job must survive its profd dying")
        finally:
            proc.stdin.close()
            self.assertEqual(proc.wait(timeout=10), 0)
            proc.stdout.close()
            proc.stderr.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
