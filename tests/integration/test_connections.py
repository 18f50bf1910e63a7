# SPDX-License-Identifier: MIT
"""Connection-level hardening (docs/protocol.md, Connections): one daemon per
port, bounded requests, idle and stalled connections, recovery from file
descriptor exhaustion, and the systemd watchdog. All traffic is loopback and
bounded in count and time."""
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import grpc

import profdtest as T

P = T.protos()

# HTTP/2 client preface and an empty SETTINGS frame.
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
GRPC_LOG_LINE = re.compile(r"^[EWID]\d{4} \d\d:\d\d:\d\d", re.M)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def status(d, timeout=5):
    return T.status(d.addr, timeout)


def capture(d, ms=200, timeout=15):
    with T.channel(d.addr) as ch:
        return T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)(
            T.profile_request(P, ms, "h:1"), timeout=timeout)


def h2_connect(port, timeout=5):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(PREFACE)
    return s


def read_frames_until_close(s, limit_s):
    """Frame types the server sent until it closed the connection, or None
    if it was still open after @limit_s seconds."""
    s.settimeout(0.2)
    buf, end = b"", time.time() + limit_s
    while time.time() < end:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            types = []
            while len(buf) >= 9:
                n = int.from_bytes(buf[:3], "big")
                types.append(buf[3])
                buf = buf[9 + n:]
            return types
        buf += chunk
    return None


class BusyPort(unittest.TestCase):
    def test_second_daemon_on_a_served_port_exits_with_address_in_use(self):
        with T.Daemon() as d:
            for addr in (f"127.0.0.1:{d.port}", f"[::]:{d.port}"):
                with self.subTest(addr=addr), tempfile.TemporaryDirectory() as tmp:
                    cmd = [T.PROFD, "--listen", addr, "--agent-socket", os.path.join(tmp, "a.sock")]
                    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                    try:
                        out, _ = p.communicate(timeout=15)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        out, _ = p.communicate()
                        self.fail(f"second profd on {addr} kept running (shares the port):\n{out}")
                    self.assertNotEqual(p.returncode, 0, out)
                    self.assertIn("address in use", out)
                    self.assertIsNone(GRPC_LOG_LINE.search(out), f"raw gRPC log in:\n{out}")
            # The first one still serves every connection.
            for _ in range(5):
                self.assertTrue(status(d).version)


class RequestSize(unittest.TestCase):
    def test_oversized_requests_are_refused(self):
        with T.Daemon() as d:
            with T.channel(d.addr) as ch:
                prof = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
                req = T.profile_request(P, 100, "h:1")
                req.session_id = "x" * (100 * 1024)  # above the 64 KiB default
                with self.assertRaises(grpc.RpcError) as e:
                    prof(req, timeout=10)
                self.assertEqual(e.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
                # gRPC 1.51 reads an oversized message whole before refusing
                # it (docs/protocol.md, Connections), and how much of that
                # glibc hands back depends on its arenas and the machine's
                # load (+4..+250 MiB after 192 MiB offered, measured): the
                # RSS is reported, not asserted. Bounding it needs a gRPC
                # that refuses before reading (the hardening issue's open item).
                req.session_id = "x" * (32 << 20)
                with self.assertRaises(grpc.RpcError) as e:
                    prof(req, timeout=20)
                self.assertEqual(e.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
                before = rss_kib(d.proc.pid)
                for _ in range(6):  # 192 MiB more offered
                    with self.assertRaises(grpc.RpcError) as e:
                        prof(req, timeout=20)
                    self.assertEqual(e.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
                grown = rss_kib(d.proc.pid) - before
                print(f"RSS after 6 more: +{grown} KiB", file=sys.stderr)
            self.assertTrue(capture(d).tool_data)

    def test_the_limit_is_an_option(self):
        with T.Daemon("--max-request-size", "1M") as d:
            req = T.profile_request(P, 100, "h:1")
            req.host_name = "h" * (200 * 1024)
            with T.channel(d.addr) as ch:
                prof = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
                with self.assertRaises(grpc.RpcError) as e:
                    prof(req, timeout=10)
                # Passed gRPC's limit; refused by profd's own checks instead.
                self.assertNotEqual(e.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)


class IdleAndStalled(unittest.TestCase):
    def test_idle_connection_is_closed_after_the_idle_timeout(self):
        with T.Daemon("--idle-timeout", "1s") as d:
            s = h2_connect(d.port)
            t0 = time.time()
            types = read_frames_until_close(s, 8)
            s.close()
            self.assertIsNotNone(types, "the idle connection was still open after 8 s")
            self.assertIn(7, types, "no GOAWAY before the close")  # GOAWAY
            self.assertGreater(time.time() - t0, 0.8)

    def test_connection_without_handshake_is_dropped(self):
        with T.Daemon("--first-message-timeout", "1s") as d:
            s = socket.create_connection(("127.0.0.1", d.port), timeout=5)
            types = read_frames_until_close(s, 8)  # we never send the preface
            s.close()
            self.assertIsNotNone(types, "a connection with no HTTP/2 preface stayed open 8 s")

    def test_call_without_request_message_is_cancelled(self):
        with T.Daemon("--first-message-timeout", "1s") as d:
            release = threading.Event()

            def never():
                release.wait(30)
                return
                yield  # a generator that sends nothing until released

            with T.channel(d.addr) as ch:
                call = ch.stream_unary("/tensorflow.ProfilerService/Profile",
                                       request_serializer=P.ps.ProfileRequest.SerializeToString,
                                       response_deserializer=P.ps.ProfileResponse.FromString)
                t0 = time.time()
                futs = [call.future(never()) for _ in range(5)]
                for f in futs:
                    with self.assertRaises(grpc.RpcError) as e:
                        f.result(timeout=10)
                    self.assertEqual(e.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
                self.assertLess(time.time() - t0, 5)
                release.set()
            self.assertIn("no request message within", d.log())
            self.assertTrue(status(d).version)
            self.assertTrue(capture(d).tool_data)
            # Every stalled call was released: profd checks its live count at exit.
            self.assertEqual(d.stop(), 0, d.log())

    def test_many_idle_connections_do_not_block_a_capture(self):
        with T.Daemon() as d:
            socks = []
            try:
                for _ in range(200):
                    socks.append(h2_connect(d.port))
                t0 = time.time()
                self.assertTrue(capture(d, 200).tool_data)
                self.assertLess(time.time() - t0, 5)
            finally:
                for s in socks:
                    s.close()


class FdExhaustion(unittest.TestCase):
    def test_daemon_exits_when_it_can_no_longer_accept(self):
        # 64 descriptors and a burst of 100 connections: gRPC's accept4()
        # fails with EMFILE once, after which gRPC 1.51 never accepts again.
        d = T.Daemon("--self-check", "500ms", wrapper=["prlimit", "--nofile=64:64"])
        try:
            socks = []
            for _ in range(100):
                try:
                    socks.append(socket.create_connection(("127.0.0.1", d.port), timeout=2))
                except OSError:
                    break
            time.sleep(1.0)
            for s in socks:
                s.close()
            rc = d.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.fail("profd stayed up though it accepts no connection:\n" + d.log()[-3000:])
        finally:
            if d.proc.poll() is None:
                d.proc.kill()
                d.proc.wait()
            d._log.close()
        log = d.log()
        self.assertNotEqual(rc, 0, log[-3000:])
        self.assertNotEqual(rc, -signal.SIGKILL, log[-3000:])
        self.assertIn("no longer accepts connections", log)

    def test_self_check_passes_on_a_healthy_daemon(self):
        # Several rounds, each with room for a loaded test machine.
        with T.Daemon("--self-check", "400ms") as d:
            time.sleep(2.0)
            self.assertTrue(capture(d).tool_data)
            self.assertIsNone(d.proc.poll())
            self.assertNotIn("self-check", d.log())


class Watchdog(unittest.TestCase):
    def notify_socket(self):
        tmp = tempfile.mkdtemp(prefix="profd-notify-")
        path = os.path.join(tmp, "notify")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(path)
        s.settimeout(0.1)
        self.addCleanup(s.close)
        return s, path

    @staticmethod
    def collect(s, seconds):
        msgs, end = [], time.time() + seconds
        while time.time() < end:
            try:
                msgs.append(s.recv(4096).decode())
            except socket.timeout:
                pass
        return msgs

    def test_watchdog_pings_while_the_loop_runs(self):
        s, path = self.notify_socket()
        d = T.Daemon(env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "200000"})
        msgs = self.collect(s, 1.5)
        self.assertIn("READY=1", msgs)
        self.assertGreaterEqual(msgs.count("WATCHDOG=1"), 5, msgs)
        d.proc.send_signal(signal.SIGSTOP)  # a stuck loop pings no more
        try:
            s.settimeout(0.1)
            self.collect(s, 0.2)
            self.assertEqual(self.collect(s, 0.6), [])
        finally:
            d.proc.send_signal(signal.SIGCONT)
        self.assertEqual(d.stop(), 0, d.log())
        self.assertIn("STOPPING=1", self.collect(s, 0.3))

    def test_no_pings_for_another_pid(self):
        s, path = self.notify_socket()
        d = T.Daemon(env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "100000", "WATCHDOG_PID": "1"})
        msgs = self.collect(s, 0.8)
        self.assertEqual(d.stop(), 0, d.log())
        self.assertIn("READY=1", msgs)
        self.assertNotIn("WATCHDOG=1", msgs)


if __name__ == "__main__":
    unittest.main(verbosity=2)
