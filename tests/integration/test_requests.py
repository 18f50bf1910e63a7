# SPDX-License-Identifier: MIT
"""Request validation and limits: malformed requests, --max-duration,
--max-sessions, and every name that ends up in a path."""
import os
import shutil
import tempfile
import time
import unittest

import grpc

import profdtest as T
from helpers import P, rpc_error, wait_active
from xspacecheck import check_xspace


class Requests(T.DaemonCase):
    @classmethod
    def daemon_args(cls):
        cls.allowed = tempfile.mkdtemp(prefix="profd-allowed-")
        cls.outside = tempfile.mkdtemp(prefix="profd-outside-")
        return ["--hostname", "itest-req", "--max-duration", "2s", "--max-sessions", "2",
                "--repository-allow", cls.allowed]

    @classmethod
    def cleanup(cls):
        shutil.rmtree(cls.allowed, ignore_errors=True)
        shutil.rmtree(cls.outside, ignore_errors=True)

    def tearDown(self):
        self.assertEqual(wait_active(self.d.addr, 0), 0, self.d.log())

    # Long by default: a refusal that came only after the capture would
    # show in invalid()'s time bound.
    def req(self, duration_ms=1500, session_id="s", host=None, root=None, **kw):
        r = T.profile_request(P, duration_ms, self.d.addr if host is None else host, session_id=session_id, **kw)
        if root is not None:
            r.repository_root = root
        return r

    def invalid(self, req, *needles):
        t0 = time.time()
        e = rpc_error(self.profile, req, timeout=10)
        self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT, e.details())
        self.assertLess(time.time() - t0, 1.0, "refused before any capture starts")
        for n in needles:
            self.assertIn(n, e.details())
        return e

    def tree(self, d):
        out = []
        for root, dirs, files in os.walk(d):
            out += [os.path.relpath(os.path.join(root, x), d) for x in dirs + files]
        return sorted(out)

    # ---- malformed -----------------------------------------------------------

    def test_tracer_levels_profd_cannot_serve_are_said_once(self):
        x = T.decode_xspace(P, self.profile(self.req(300, python_tracer_level=1, host_tracer_level=3),
                                             timeout=30).tool_data[0].data)
        host = [w for w in x.warnings if w.startswith("host_tracer_level=3:")]
        self.assertEqual(len(host), 1, list(x.warnings))
        self.assertIn("in-process profiler", host[0])
        # python_tracer_level is served from the agents' Python stacks
        # (docs/python-stacks.md): no warning for it.
        self.assertFalse([w for w in x.warnings if w.startswith("python_tracer_level")], list(x.warnings))
        # The defaults (host 2, python 0) ask for nothing profd lacks: no such warning.
        x = T.decode_xspace(P, self.profile(self.req(300), timeout=30).tool_data[0].data)
        self.assertFalse([w for w in x.warnings if "tracer_level" in w], list(x.warnings))

    def test_garbage_bytes(self):
        e = rpc_error(self.ch.unary_unary("/tensorflow.ProfilerService/Profile"), b"\x0a\xff\xff", timeout=5)
        self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("tensorflow.ProfileRequest is not a well-formed protobuf message", e.details())
        e = rpc_error(self.ch.unary_unary("/tensorflow.ProfilerService/Terminate"), b"\xff", timeout=5)
        self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT)
        # Field number 0 (which protobuf-c's unpacker skips) no longer hides
        # a string from the UTF-8 check (tests/fuzz/regress/fuzz-request-*).
        e = rpc_error(self.ch.unary_unary("/tensorflow.ProfilerService/Profile"),
                      b"\x80\x00\x00\x1a\x08tra\xfd\xff\xff./", timeout=5)
        self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("well-formed", e.details())

    def test_empty_request_has_no_duration(self):
        e = rpc_error(self.ch.unary_unary("/tensorflow.ProfilerService/Profile"), b"", timeout=5)
        self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("duration_ms", e.details())

    def test_unknown_methods(self):
        for path in ("/tensorflow.ProfilerService/NoSuch", "/no.Such/Profile",
                     "/tensorflow.ProfilerService/GetSnapShot"):  # V2; V3 is served
            e = rpc_error(self.ch.unary_unary(path), b"", timeout=5)
            self.assertEqual(e.code(), grpc.StatusCode.UNIMPLEMENTED, path)
            self.assertIn(path, e.details())

    def test_unknown_fields_are_tolerated(self):
        # proto3: a newer client's fields must not break decoding.
        raw = self.req(100, "unknown-fields").SerializeToString() + b"\xf8\x06\x01"  # field 111 varint
        resp = P.ps.ProfileResponse.FromString(
            self.ch.unary_unary("/tensorflow.ProfilerService/Profile")(raw, timeout=10))
        self.assertEqual([t.name for t in resp.tool_data], ["xplane.pb"])

    def test_gzip_compressed_request(self):
        resp = self.profile(self.req(20, "gz"), timeout=10, compression=grpc.Compression.Gzip)
        self.assertEqual([t.name for t in resp.tool_data], ["xplane.pb"])

    # ---- limits --------------------------------------------------------------

    def test_duration_above_max(self):
        self.invalid(self.req(2001), "2001", "2000 ms", "--max-duration")
        self.invalid(self.req(10**12), "--max-duration")
        self.invalid(self.req(2**64 - 1), "--max-duration")

    def test_delay_above_max(self):
        r = self.req(100)
        r.opts.start_timestamp_ns = time.time_ns() + 10 * 10**9
        self.invalid(r, "start_timestamp_ns", "2000 ms")

    def test_max_sessions(self):
        futs = [self.profile.future(self.req(1000, f"ms-{i}"), timeout=10) for i in range(2)]
        self.assertEqual(wait_active(self.d.addr, 2), 2)
        t0 = time.time()
        e = rpc_error(self.profile, self.req(100, "ms-3"), timeout=10)
        self.assertLess(time.time() - t0, 1.0)
        self.assertEqual(e.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertIn("2 captures are already running", e.details())
        self.assertIn("--max-sessions", e.details())
        for f in futs:
            self.assertEqual([t.name for t in f.result(timeout=10).tool_data], ["xplane.pb"])
        # The slots are free again.
        self.assertEqual(wait_active(self.d.addr, 0), 0)
        self.profile(self.req(50, "ms-4"), timeout=10)

    # ---- names used in paths ------------------------------------------------

    def test_session_id_traversal(self):
        root = os.path.join(self.allowed, "plugins", "profile")
        for sid in ("../x", "a/b", "..", ".", "/abs", "x\n"):
            self.invalid(self.req(session_id=sid, root=root), "session_id")
            r = self.req(session_id="", root=root)
            r.opts.session_id = sid  # the options' session_id is checked too
            self.invalid(r, "session_id")
        self.assertEqual(self.tree(self.allowed), [])

    def test_host_name_traversal(self):
        root = os.path.join(self.allowed, "plugins", "profile")
        for host in ("../../etc/passwd", "a/b:1", "x\x01"):
            self.invalid(self.req(host=host, root=root), "host_name")
        r = self.req(root=root)
        r.opts.override_hostname = "../evil"
        self.invalid(r, "host_name")
        r = self.req(root=root)
        r.opts.advanced_configuration["override_hostname"].string_value = "a/../../b"
        self.invalid(r, "host_name")
        self.assertEqual(self.tree(self.allowed), [])

    def test_repository_root_with_dotdot(self):
        for root in (self.allowed + "/../" + os.path.basename(self.outside),
                     self.allowed + "/a/../../x", self.allowed + "/./x", self.allowed + "/a/.."):
            self.invalid(self.req(root=root), "repository_root", "leaves the allowed directory")
        self.assertEqual(self.tree(self.allowed), [])
        self.assertEqual(self.tree(self.outside), [])

    def test_symlinked_directory_is_refused(self):
        base = os.path.join(self.allowed, "symdir")
        os.makedirs(base)
        os.symlink(self.outside, os.path.join(base, "plugins"))
        try:
            # The copy is refused; the data still comes back (docs/protocol.md).
            resp = self.profile(self.req(100, "sym", root=os.path.join(base, "plugins", "profile")), timeout=10)
            errs = P.xp.XSpace.FromString(resp.tool_data[0].data).errors
            self.assertTrue(any("symbolic link" in e for e in errs), errs)
            self.assertEqual(self.tree(self.outside), [], "nothing written through the link")
        finally:
            shutil.rmtree(base)

    def test_symlinked_session_dir_is_refused(self):
        root = os.path.join(self.allowed, "symsess")
        os.makedirs(root)
        os.symlink(self.outside, os.path.join(root, "sess"))
        try:
            resp = self.profile(self.req(100, "sess", root=root), timeout=10)
            errs = P.xp.XSpace.FromString(resp.tool_data[0].data).errors
            self.assertTrue(any("symbolic link" in e for e in errs), errs)
            self.assertEqual(self.tree(self.outside), [])
        finally:
            shutil.rmtree(root)

    def test_file_in_place_of_a_directory(self):
        # Not a link: the error must say what is wrong (upstream: INTERNAL;
        # profd still returns the data, with the error in XSpace.errors).
        base = os.path.join(self.allowed, "filedir")
        os.makedirs(base)
        with open(os.path.join(base, "plugins"), "w") as f:
            f.write("x")
        try:
            resp = self.profile(self.req(100, "fd", root=os.path.join(base, "plugins", "profile")), timeout=10)
            (err,) = P.xp.XSpace.FromString(resp.tool_data[0].data).errors
            self.assertIn("Not a directory", err)
            self.assertNotIn("symbolic link", err)
        finally:
            shutil.rmtree(base)

    def test_symlinked_file_is_replaced_not_followed(self):
        root = os.path.join(self.allowed, "symfile")
        sdir = os.path.join(root, "sess")
        os.makedirs(sdir)
        victim = os.path.join(self.outside, "victim")
        with open(victim, "w") as f:
            f.write("keep me")
        target = os.path.join(sdir, self.d.addr.replace(":", "_") + ".xplane.pb")
        os.symlink(victim, target)
        try:
            self.profile(self.req(100, "sess", root=root), timeout=10)
            with open(victim) as f:
                self.assertEqual(f.read(), "keep me")
            self.assertFalse(os.path.islink(target))
            with open(target, "rb") as f:
                check_xspace(self, P.xp.XSpace.FromString(f.read()), "itest-req")
        finally:
            shutil.rmtree(root)
            os.unlink(victim)

    def test_root_outside_allowed_is_in_band_only(self):
        root = os.path.join(self.outside, "plugins", "profile")
        resp = self.profile(self.req(100, "out", root=root), timeout=10)
        self.assertEqual([t.name for t in resp.tool_data], ["xplane.pb"])
        check_xspace(self, P.xp.XSpace.FromString(resp.tool_data[0].data), "itest-req",
                     empty_trace=resp.empty_trace)
        self.assertEqual(self.tree(self.outside), [])
        # A relative root is never written either.
        self.profile(self.req(50, "rel", root="plugins/profile"), timeout=10)
        self.assertFalse(os.path.exists(os.path.join(os.getcwd(), "plugins", "profile", "rel")))

    def test_root_inside_allowed_is_written_atomically(self):
        root = os.path.join(self.allowed, "logdir", "plugins", "profile")
        target = os.path.join(root, "good", self.d.addr.replace(":", "_") + ".xplane.pb")
        # A reader holding the old file keeps its bytes: the new file is
        # renamed over the name, never written in place.
        os.makedirs(os.path.dirname(target))
        with open(target, "wb") as f:
            f.write(b"old")
        held = os.path.join(self.allowed, "held")
        os.link(target, held)
        t0 = time.time_ns()
        resp = self.profile(self.req(200, "good", root=root), timeout=10)
        t1 = time.time_ns()
        with open(target, "rb") as f:
            data = f.read()
        with open(held, "rb") as f:
            self.assertEqual(f.read(), b"old")
        os.unlink(held)
        self.assertEqual(data, resp.tool_data[0].data, "the file and the in-band copy are the same")
        start, stop, _ = check_xspace(self, P.xp.XSpace.FromString(data), "itest-req", t0, t1)
        self.assertAlmostEqual((stop - start) / 1e6, 200, delta=50)
        self.assertEqual(os.listdir(os.path.dirname(target)), [os.path.basename(target)],
                         "no temporary file left")
        self.assertEqual(os.stat(target).st_mode & 0o777, 0o644)
        shutil.rmtree(os.path.join(self.allowed, "logdir"))

    def test_override_hostname_names_the_file(self):
        root = os.path.join(self.allowed, "ovr")
        r = self.req(50, "o1", root=root)
        r.opts.override_hostname = "node-7:8466"
        self.profile(r, timeout=10)
        r = self.req(50, "o2", root=root)
        r.opts.advanced_configuration["override_hostname"].string_value = "node-8:8466"
        self.profile(r, timeout=10)
        r = self.req(50, "o3", host="", root=root)  # no host_name: the daemon's own name
        self.profile(r, timeout=10)
        self.assertEqual(self.tree(root), ["o1", "o1/node-7_8466.xplane.pb", "o2", "o2/node-8_8466.xplane.pb",
                                           "o3", "o3/itest-req.xplane.pb"])
        shutil.rmtree(root)

    def test_same_file_from_two_captures_at_once(self):
        root = os.path.join(self.allowed, "same")
        futs = [self.profile.future(self.req(100, "same", root=root), timeout=10) for _ in range(2)]
        datas = [f.result().tool_data[0].data for f in futs]
        target = os.path.join(root, "same", self.d.addr.replace(":", "_") + ".xplane.pb")
        with open(target, "rb") as f:
            self.assertIn(f.read(), datas, "one complete capture, not a mix")
        self.assertEqual(os.listdir(os.path.dirname(target)), [os.path.basename(target)])
        shutil.rmtree(root)

    def test_no_session_id_gets_a_timestamp_directory(self):
        root = os.path.join(self.allowed, "ts")
        self.profile(self.req(50, "", root=root), timeout=10)
        (sid,) = os.listdir(root)
        self.assertRegex(sid, r"^\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d$")
        shutil.rmtree(root)


if __name__ == "__main__":
    unittest.main(verbosity=2)
