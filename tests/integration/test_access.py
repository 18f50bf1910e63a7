# SPDX-License-Identifier: MIT
"""Access control (docs/security.md) through the real daemon over real gRPC:
--allow-from, TLS, mutual TLS, the bearer token, Status's hidden command
lines and Terminate's owner rule. Certificates and keys are made here with
openssl, in a temporary directory, for every run."""
import os
import shutil
import subprocess
import tempfile
import time
import unittest

import grpc

import profdtest as T

P = T.protos()
PROFCTL = os.environ.get("PROFCTL", os.path.join(T.BUILD, "tools", "profctl"))
FAKE = os.environ.get("FAKE_AGENT", os.path.join(T.BUILD, "tests", "agent", "fake-agent"))
OPENSSL = shutil.which("openssl")


def ssl(*args, cwd):
    subprocess.run([OPENSSL] + list(args), cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def make_pki(d):
    """ca.pem; server.{pem,key} for 127.0.0.1/localhost; alice and bob client
    certificates; and other-ca.pem, a CA nobody's certificate chains to."""
    for ca in ("ca", "other-ca"):
        ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN=profd test {ca}",
            "-keyout", f"{ca}.key", "-out", f"{ca}.pem", cwd=d)
    exts = {
        "server": "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        "alice": "subjectAltName=DNS:alice.example\nextendedKeyUsage=clientAuth\n",
        "bob": "subjectAltName=DNS:bob.example\nextendedKeyUsage=clientAuth\n",
    }
    for name, ext in exts.items():
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(ext)
        ssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", cwd=d)
        ssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=d)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def stubs_on(ch):
    s = T.Stubs.__new__(T.Stubs)
    s.ch = ch
    s.profile = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
    s.terminate = T.stub(ch, "Terminate", P.ps.TerminateRequest, P.ps.TerminateResponse)
    s.status = T.stub(ch, "Status", P.profd.StatusRequest, P.profd.StatusResponse, service="profd.Profd")
    return s


def rpc_code(fn, *a, **kw):
    try:
        fn(*a, **kw)
    except grpc.RpcError as e:
        return e.code(), e.details()
    return grpc.StatusCode.OK, ""


def profctl(*args, timeout=60):
    return subprocess.run([PROFCTL] + list(args), capture_output=True, text=True, timeout=timeout)


@unittest.skipUnless(OPENSSL, "openssl is not installed (tools/install-deps)")
class Access(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="profd-access-")
        make_pki(cls.tmp)
        cls.token = os.path.join(cls.tmp, "token")
        with open(cls.token, "w") as f:
            f.write("  tok-3f9a1c77e2\n")
        os.chmod(cls.token, 0o600)
        cls.bad_token = os.path.join(cls.tmp, "bad-token")
        with open(cls.bad_token, "w") as f:
            f.write("tok-3f9a1c77e3\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def f(self, name):
        return os.path.join(self.tmp, name)

    def tls_channel(self, addr, client=None, ca="ca.pem"):
        cert = key = None
        if client:
            key, cert = read(self.f(client + ".key")), read(self.f(client + ".pem"))
        creds = grpc.ssl_channel_credentials(read(self.f(ca)), key, cert)
        return grpc.secure_channel(addr, creds, options=[("grpc.max_receive_message_length", -1)])

    def capture_ok(self, s, d, session="s", metadata=None):
        resp = s.profile(T.profile_request(P, 200, f"localhost:{d.port}", session_id=session), timeout=20,
                         metadata=metadata)
        self.assertEqual([td.name for td in resp.tool_data], ["xplane.pb"])

    # ---- --allow-from ---------------------------------------------------

    def test_allow_from_outside_is_permission_denied(self):
        with T.Daemon("--allow-from", "10.0.0.0/8", "--allow-from", "fd00::/8") as d:
            s = T.Stubs(d.addr)
            code, details = rpc_code(s.profile, T.profile_request(P, 200, "h:1"), timeout=10)
            self.assertEqual(code, grpc.StatusCode.PERMISSION_DENIED)
            self.assertIn("--allow-from", details)
            self.assertIn("127.0.0.1", details)
            self.assertEqual(rpc_code(s.status, P.profd.StatusRequest(), timeout=10)[0],
                             grpc.StatusCode.PERMISSION_DENIED)
            s.close()
            self.assertIn("refused: PERMISSION_DENIED", d.log())

    def test_allow_from_inside_captures(self):
        with T.Daemon("--allow-from", "10.0.0.0/8", "--allow-from", "127.0.0.0/8") as d:
            s = T.Stubs(d.addr)
            self.capture_ok(s, d)
            s.close()

    def test_allow_from_ipv6(self):
        try:
            d = T.Daemon("--listen", "[::1]:0", "--listen", "127.0.0.1:0", "--allow-from", "::1/128")
        except RuntimeError as e:
            self.skipTest(f"no IPv6 loopback here: {e}")
        with d:
            v6, v4 = T.Stubs(f"[::1]:{d.ports[0]}"), T.Stubs(f"127.0.0.1:{d.ports[1]}")
            self.assertEqual(v6.status(P.profd.StatusRequest(), timeout=10).version.count("."), 2)
            self.assertEqual(rpc_code(v4.status, P.profd.StatusRequest(), timeout=10)[0],
                             grpc.StatusCode.PERMISSION_DENIED)
            v6.close()
            v4.close()

    def test_bad_options_stop_the_start(self):
        for args, want in (
            (["--allow-from", "10.1.2.3/8"], "bits are set after the prefix"),
            (["--allow-from", "10.0.0.0/33"], "expected an IPv4 or IPv6"),
            (["--allow-from", "example.com"], "expected an IPv4 or IPv6"),
            (["--tls-cert", self.f("server.pem")], "go together"),
            (["--tls-client-ca", self.f("ca.pem")], "needs --tls-cert"),
            (["--tls-cert", self.f("server.pem"), "--tls-key", self.f("nonexistent")], "cannot read the key"),
            (["--token-file", self.f("ca.ext-none")], "cannot read the token file"),
        ):
            with self.assertRaises(RuntimeError) as e:
                T.Daemon(*args)
            self.assertIn(want, str(e.exception), args)

    # ---- TLS ------------------------------------------------------------

    def tls_args(self, *extra):
        return ["--tls-cert", self.f("server.pem"), "--tls-key", self.f("server.key")] + list(extra)

    def test_tls_python_and_profctl(self):
        with T.Daemon(*self.tls_args()) as d:
            ch = self.tls_channel(d.addr)
            self.capture_ok(stubs_on(ch), d)
            ch.close()
            # A plaintext client cannot talk to a TLS listener.
            s = T.Stubs(d.addr)
            self.assertEqual(rpc_code(s.status, P.profd.StatusRequest(), timeout=5)[0],
                             grpc.StatusCode.UNAVAILABLE)
            s.close()
            # A client that trusts another CA refuses the server.
            ch = self.tls_channel(d.addr, ca="other-ca.pem")
            self.assertEqual(rpc_code(stubs_on(ch).status, P.profd.StatusRequest(), timeout=5)[0],
                             grpc.StatusCode.UNAVAILABLE)
            ch.close()
            logdir = os.path.join(self.tmp, "tb-tls")
            r = profctl("capture", d.addr, "--logdir", logdir, "--duration-ms", "200", "--tls-ca",
                        self.f("ca.pem"))
            self.assertEqual(r.returncode, 0, r.stderr)
            r = profctl("--tls-ca", self.f("ca.pem"), "status", d.addr)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = profctl("status", d.addr)
            self.assertEqual(r.returncode, 1)

    def test_mtls_requires_a_client_certificate(self):
        with T.Daemon(*self.tls_args("--tls-client-ca", self.f("ca.pem"))) as d:
            ch = self.tls_channel(d.addr)  # TLS, but no client certificate
            code, _ = rpc_code(stubs_on(ch).profile, T.profile_request(P, 200, "h:1"), timeout=10)
            self.assertNotEqual(code, grpc.StatusCode.OK)
            self.assertIn(code, (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAUTHENTICATED))
            ch.close()
            ch = self.tls_channel(d.addr, client="alice")
            self.capture_ok(stubs_on(ch), d)
            ch.close()
            r = profctl("status", d.addr, "--tls-ca", self.f("ca.pem"))
            self.assertEqual(r.returncode, 1)
            r = profctl("status", d.addr, "--tls-ca", self.f("ca.pem"), "--tls-cert", self.f("bob.pem"),
                        "--tls-key", self.f("bob.key"))
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_mtls_terminate_only_own_captures(self):
        with T.Daemon(*self.tls_args("--tls-client-ca", self.f("ca.pem"))) as d:
            alice = stubs_on(self.tls_channel(d.addr, client="alice"))
            bob = stubs_on(self.tls_channel(d.addr, client="bob"))
            fut = alice.profile.future(T.profile_request(P, 8000, f"localhost:{d.port}", session_id="mine"),
                                       timeout=30)
            self.assertTrue(T.wait_for(lambda: alice.status(P.profd.StatusRequest(), timeout=5)
                                       .active_sessions == 1))
            code, details = rpc_code(bob.terminate, P.ps.TerminateRequest(session_id="mine"), timeout=5)
            self.assertEqual(code, grpc.StatusCode.PERMISSION_DENIED)
            self.assertIn("another client", details)
            t0 = time.time()
            alice.terminate(P.ps.TerminateRequest(session_id="mine"), timeout=5)
            resp = fut.result(timeout=20)
            self.assertLess(time.time() - t0, 5)
            self.assertEqual([td.name for td in resp.tool_data], ["xplane.pb"])
            self.assertIn("x509:", d.log())
            alice.ch.close()
            bob.ch.close()

    # ---- token ----------------------------------------------------------

    def test_token(self):
        with T.Daemon("--token-file", self.token) as d:
            s = T.Stubs(d.addr)
            code, details = rpc_code(s.profile, T.profile_request(P, 200, "h:1"), timeout=10)
            self.assertEqual(code, grpc.StatusCode.UNAUTHENTICATED)
            self.assertIn("authorization: Bearer", details)
            code, details = rpc_code(s.profile, T.profile_request(P, 200, "h:1"), timeout=10,
                                     metadata=[("authorization", "Bearer tok-3f9a1c77e3")])
            self.assertEqual(code, grpc.StatusCode.UNAUTHENTICATED)
            self.assertIn("not valid", details)
            code, _ = rpc_code(s.profile, T.profile_request(P, 200, "h:1"), timeout=10,
                               metadata=[("authorization", "Bearer tok-3f9a1c77e2x")])
            self.assertEqual(code, grpc.StatusCode.UNAUTHENTICATED)
            self.capture_ok(s, d, metadata=[("authorization", "Bearer tok-3f9a1c77e2")])
            s.close()
            r = profctl("status", d.addr)
            self.assertEqual(r.returncode, 1)
            self.assertIn("UNAUTHENTICATED", r.stderr)
            r = profctl("status", d.addr, "--token-file", self.bad_token)
            self.assertEqual(r.returncode, 1)
            r = profctl("status", d.addr, "--token-file", self.token)
            self.assertEqual(r.returncode, 0, r.stderr)
            logdir = os.path.join(self.tmp, "tb-token")
            r = profctl("capture", d.addr, "--logdir", logdir, "--duration-ms", "200",
                        "--token-file=" + self.token)
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_token_with_tls_and_terminate(self):
        # The token over TLS; a token holder may stop anyone's capture.
        with T.Daemon(*self.tls_args("--token-file", self.token, "--listen", "127.0.0.1:0",
                                     "--listen", "[::1]:0")) as d:
            md = [("authorization", "Bearer tok-3f9a1c77e2")]
            a = stubs_on(self.tls_channel(f"127.0.0.1:{d.ports[0]}"))
            fut = a.profile.future(T.profile_request(P, 8000, f"localhost:{d.port}", session_id="t"),
                                   timeout=30, metadata=md)
            self.assertTrue(T.wait_for(lambda: a.status(P.profd.StatusRequest(), timeout=5, metadata=md)
                                       .active_sessions == 1))
            r = profctl("terminate", f"[::1]:{d.ports[1]}", "t", "--tls-ca", self.f("ca.pem"),
                        "--token-file", self.token)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual([td.name for td in fut.result(timeout=20).tool_data], ["xplane.pb"])
            a.ch.close()

    # ---- Terminate without credentials: same IP -------------------------

    def test_terminate_other_ip_is_refused(self):
        try:
            d = T.Daemon("--listen", "127.0.0.1:0", "--listen", "[::1]:0")
        except RuntimeError as e:
            self.skipTest(f"no IPv6 loopback here: {e}")
        with d:
            v4, v6 = T.Stubs(f"127.0.0.1:{d.ports[0]}"), T.Stubs(f"[::1]:{d.ports[1]}")
            fut = v4.profile.future(T.profile_request(P, 8000, "h:1", session_id="ip"), timeout=30)
            self.assertTrue(T.wait_for(lambda: v4.status(P.profd.StatusRequest(), timeout=5)
                                       .active_sessions == 1))
            code, _ = rpc_code(v6.terminate, P.ps.TerminateRequest(session_id="ip"), timeout=5)
            self.assertEqual(code, grpc.StatusCode.PERMISSION_DENIED)
            code, _ = rpc_code(v6.terminate, P.ps.TerminateRequest(session_id="profd-monitor"), timeout=5)
            self.assertEqual(code, grpc.StatusCode.PERMISSION_DENIED)
            v4.terminate(P.ps.TerminateRequest(session_id="ip"), timeout=5)
            self.assertEqual([td.name for td in fut.result(timeout=20).tool_data], ["xplane.pb"])
            v4.close()
            v6.close()

    # ---- Status: command lines ------------------------------------------

    def agent_status(self, d, **kw):
        sock = d.agent_socket
        proc = subprocess.Popen([FAKE, "--socket", sock, "--devices", "GPU-aaaaaaaa-0000-0000-0000-000000000001",
                                 "--name", "trainer"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            s = kw.pop("stubs")
            st = T.wait_for(lambda: (lambda r: r if r.agents else None)(
                s.status(P.profd.StatusRequest(), timeout=5, **kw)), timeout=10)
            self.assertTrue(st, "the fake agent never showed up in Status")
            return st.agents[0]
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()

    @unittest.skipUnless(os.path.exists(FAKE), "no fake agent built")
    def test_status_cmdlines(self):
        # No access option: the historic open answer, command lines included.
        with T.Daemon() as d:
            s = T.Stubs(d.addr)
            a = self.agent_status(d, stubs=s)
            self.assertIn("--devices", a.cmdline)
            s.close()
        # Access configured, caller not authenticated (an address range only): hidden.
        with T.Daemon("--allow-from", "127.0.0.0/8") as d:
            s = T.Stubs(d.addr)
            a = self.agent_status(d, stubs=s)
            self.assertEqual(a.name, "trainer")
            self.assertEqual(a.cmdline, "")
            s.close()
        # The token authenticates: shown.
        with T.Daemon("--token-file", self.token) as d:
            s = T.Stubs(d.addr)
            a = self.agent_status(d, stubs=s, metadata=[("authorization", "Bearer tok-3f9a1c77e2")])
            self.assertIn("--devices", a.cmdline)
            s.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
