# SPDX-License-Identifier: MIT
"""Limits on what a connection to the world-writable agent socket can do,
and shutdown while a flush waits for an agent."""
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import profdtest as T

FAKE = os.environ["FAKE_AGENT"]
P = T.protos()
UUID = "GPU-11111111-2222-3333-4444-555555555555"


def status(d):
    return T.status(d.addr)


def capture(d, ms):
    with T.channel(d.addr) as ch:
        resp = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)(
            T.profile_request(P, ms, f"localhost:{d.port}", session_id="fair"), timeout=60)
    return T.decode_xspace(P, resp.tool_data[0].data)


def kernels_of(x, pid):
    """Records on GPU planes on the stream lines of @pid (named after it)."""
    return sum(len(l.events) for p in x.planes if p.name.startswith("/device:GPU:")
               for l in p.lines if T.line_pid(l) == pid)


def fake(sock, name, *args):
    a = subprocess.Popen([FAKE, "--socket", sock, "--name", name] + list(args), stdout=subprocess.PIPE, text=True)
    assert a.stdout.readline().strip() == "connected"
    return a


def done(*agents):
    for a in agents:
        if a.poll() is None:
            a.kill()
        a.wait()
        a.stdout.close()


class Limits(unittest.TestCase):
    def test_flood_keeps_to_its_share_of_the_budget(self):
        tmp = tempfile.mkdtemp(prefix="profd-lim-")
        sock = os.path.join(tmp, "agent.sock")
        with T.Daemon("--agent-socket", sock, "--flush-timeout", "2s", "--max-events", "2000") as d:
            flood = fake(sock, "flood", "--devices", UUID, "--events", "50000", "--spread-ms", "50")
            quiet = fake(sock, "quiet", "--devices", "GPU-99999999-2222-3333-4444-555555555555",
                         "--events", "100", "--spread-ms", "400")
            try:
                T.wait_for(lambda: len(status(d).agents) == 2)
                x = capture(d, 800)
                self.assertEqual(kernels_of(x, quiet.pid), 100, list(x.warnings))
                self.assertLessEqual(kernels_of(x, flood.pid), 1000)
                self.assertGreater(kernels_of(x, flood.pid), 0)
                w = [w for w in x.warnings if f"pid {flood.pid} (flood)" in w and "fair share" in w]
                self.assertEqual(len(w), 1, list(x.warnings))
                self.assertFalse([w for w in x.warnings if f"pid {quiet.pid} " in w], list(x.warnings))
            finally:
                done(flood, quiet)

    def test_one_process_cannot_fill_the_gpu_map(self):
        tmp = tempfile.mkdtemp(prefix="profd-lim-")
        sock = os.path.join(tmp, "agent.sock")
        with T.Daemon("--agent-socket", sock, "--flush-timeout", "2s") as d:
            hog = fake(sock, "hog", "--devices", UUID, "--fake-uuids", "300")
            time.sleep(0.3)  # its claims are in before the real job says HELLO
            real = fake(sock, "real", "--devices", "GPU-77777777-2222-3333-4444-555555555555", "--kernels", "20")
            try:
                T.wait_for(lambda: len(status(d).agents) == 2)
                x = capture(d, 500)
                self.assertEqual(kernels_of(x, real.pid), 20 + 4, list(x.warnings))  # + copy, memset, alloc, free
                w = [w for w in x.warnings if f"pid {hog.pid} (hog)" in w and "distinct GPUs" in w]
                self.assertEqual(len(w), 1, list(x.warnings))
                self.assertFalse([w for w in x.warnings if "not traced" in w and f"pid {real.pid}" in w])
            finally:
                done(hog, real)

    def test_reconnecting_gets_no_fresh_gpu_allowance(self):
        """The UUIDs one uid may add without NVML are counted per uid: two
        connections of 16 new UUIDs each use up the uid's 32; a third
        process of the same uid (a hog reconnecting) adds none, and says so."""
        tmp = tempfile.mkdtemp(prefix="profd-lim-")
        sock = os.path.join(tmp, "agent.sock")
        with T.Daemon("--agent-socket", sock, "--flush-timeout", "2s") as d:
            hogs = []
            try:
                for i in range(3):
                    hogs.append(fake(sock, f"hog{i}", "--devices", f"GPU-4444444{i}-2222-3333-4444-555555555555",
                                     "--fake-uuids", "40"))
                    T.wait_for(lambda: len(status(d).agents) == i + 1)
                    time.sleep(0.2)  # its DEVICE frames are in before the next one connects
                x = capture(d, 300)
                per_conn = [w for w in x.warnings if "distinct GPUs" in w]
                per_uid = [w for w in x.warnings if f"uid {os.getuid()} has added 32 GPUs" in w]
                # hog0 and hog1 each hit the per-connection cap (16); hog2 got nothing at all.
                self.assertEqual(sorted(w.split()[1] for w in per_conn),
                                 sorted(str(h.pid) for h in hogs[:2]), list(x.warnings))
                self.assertEqual(len(per_uid), 1, list(x.warnings))
                self.assertIn(f"pid {hogs[2].pid} (hog2)", per_uid[0])
                self.assertIn("GPU-44444442-2222-3333-4444-555555555555", per_uid[0])
            finally:
                done(*hogs)

    def test_long_kernel_names_cost_no_capture(self):
        """Issue 26 hole 1: 4,000 kernels with distinct 500-byte names (a
        templated C++ job's CUTLASS GEMMs), each launched once, under three
        overlapping captures, with the default --max-bytes and with one
        below what the names take. The names, not the records, are most of
        the reply; the reservation counts them, so every capture is
        answered with its data (it failed INTERNAL "File too large" when
        only the records were counted)."""
        for budget in ([], ["--max-bytes", "3M"]):  # the default, and less than the names take
            with self.subTest(budget=budget):
                self.long_names_under_three_captures(budget)

    def long_names_under_three_captures(self, budget):
        tmp = tempfile.mkdtemp(prefix="profd-lim-")
        sock = os.path.join(tmp, "agent.sock")
        with T.Daemon("--agent-socket", sock, "--flush-timeout", "5s", *budget) as d:
            job = fake(sock, "cutlass", "--devices", UUID, "--kernels", "4000", "--name-bytes", "500",
                       "--captures", "3")
            try:
                T.wait_for(lambda: len(status(d).agents) == 1)
                results = [None] * 3
                # One start for all three, so each window holds the whole burst.
                t0 = time.time_ns() + 500 * 1000000

                def one(i):
                    try:
                        with T.channel(d.addr) as ch:
                            results[i] = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)(
                                T.profile_request(P, 1500 - 300 * i, f"localhost:{d.port}",
                                                  session_id=f"names-{i}", start_timestamp_ns=t0), timeout=60)
                    except Exception as e:  # reported below, with the daemon's log
                        results[i] = e

                threads = [threading.Thread(target=one, args=(i,)) for i in range(3)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                for i, r in enumerate(results):
                    self.assertNotIsInstance(r, Exception, f"capture {i}: {r}\n{d.log()[-3000:]}")
                    x = T.decode_xspace(P, r.tool_data[0].data)
                    names = {m.name for p in x.planes if p.name.startswith("/device:GPU:")
                             for m in p.event_metadata.values() if m.name.startswith("cutlass::Kernel<")}
                    self.assertEqual(len(names), 4000, f"capture {i}: {list(x.warnings)}")
                    self.assertTrue(all(len(n) == 500 for n in names))
                    self.assertEqual(kernels_of(x, job.pid), 4000 + 4, list(x.warnings))
            finally:
                done(job)

    def test_agent_names_are_escaped_in_the_log(self):
        """An agent chooses its name (and kernel names, NVTX strings...):
        in profd's log it is one line of valid UTF-8, control characters
        and stray bytes shown as \\xNN; Status still decodes."""
        tmp = tempfile.mkdtemp(prefix="profd-lim-")
        sock = os.path.join(tmp, "agent.sock")
        with T.Daemon("--agent-socket", sock) as d:
            a = subprocess.Popen([FAKE.encode(), b"--socket", sock.encode(), b"--devices", UUID.encode(),
                                  b"--name", b"ev\nil\xff\x1b[31m", b"--error", b"7:no\rpe\xc3"],
                                 stdout=subprocess.PIPE, text=True)
            try:
                self.assertEqual(a.stdout.readline().strip(), "connected")
                T.wait_for(lambda: status(d).agents)
                capture(d, 200)
                T.wait_for(lambda: b"no\\x0dpe\\xc3" in open(d.log_path, "rb").read())
            finally:
                done(a)
            log = open(d.log_path, "rb").read()
            log.decode("utf-8")  # valid UTF-8 throughout
            # (the invalid byte of a name is '?' from the start: Status carries it)
            self.assertIn(f"agent connected: pid {a.pid} (ev\\x0ail?\\x1b[31m)".encode(), log)
            self.assertIn(b"no\\x0dpe\\xc3", log)
            for bad in (b"\r", b"\x1b", b"\xff"):
                self.assertNotIn(bad, log)

    def test_idle_connections_cannot_lock_agents_out(self):
        tmp = tempfile.mkdtemp(prefix="profd-lim-")
        sock = os.path.join(tmp, "agent.sock")
        with T.Daemon("--agent-socket", sock) as d:
            idle = []
            for _ in range(80):  # more than one uid may hold
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(sock)
                idle.append(s)
            time.sleep(0.3)
            self.assertIn("refusing an agent connection of uid", d.log())
            # Silent ones are closed after the HELLO deadline; a real agent then gets in.
            time.sleep(3.5)
            self.assertIn("no HELLO within 2 s", d.log())
            a = subprocess.Popen([FAKE, "--socket", sock, "--devices", UUID, "--name", "late"],
                                 stdout=subprocess.PIPE, text=True)
            self.assertEqual(a.stdout.readline().strip(), "connected")
            deadline = time.time() + 5
            while time.time() < deadline and not status(d).agents:
                time.sleep(0.05)
            self.assertEqual([x.name for x in status(d).agents], ["late"])
            a.kill()
            a.wait()
            a.stdout.close()
            for s in idle:
                s.close()

    def test_sigterm_while_a_flush_waits_then_agent_leaves(self):
        tmp = tempfile.mkdtemp(prefix="profd-lim-")
        sock = os.path.join(tmp, "agent.sock")
        d = T.Daemon("--agent-socket", sock, "--flush-timeout", "10s")
        a = subprocess.Popen([FAKE, "--socket", sock, "--devices", UUID, "--name", "mute", "--no-flush-reply"],
                             stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(a.stdout.readline().strip(), "connected")
            with T.channel(d.addr) as ch:
                fut = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse).future(
                    T.profile_request(P, 300, "h:1"), timeout=30)
                time.sleep(0.8)  # the window closed; the flush waits for the mute agent
                d.proc.send_signal(signal.SIGTERM)
                time.sleep(0.2)
                a.kill()  # its disconnect completes the flush during shutdown
                t0 = time.time()
                rc = d.proc.wait(timeout=15)
                self.assertEqual(rc, 0, d.log())
                self.assertLess(time.time() - t0, 10)
                try:
                    fut.result()
                except Exception:
                    pass
        finally:
            if a.poll() is None:
                a.kill()
            a.wait()
            a.stdout.close()
            d.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
