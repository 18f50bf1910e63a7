# SPDX-License-Identifier: MIT
"""Profile over real gRPC: the basic capture path and the error statuses."""
import time
import unittest

import grpc

import profdtest as T

P = T.protos()


class ProfileBasics(T.DaemonCase):
    def test_capture_returns_xplane_in_band(self):
        req = T.profile_request(P, 300, f"localhost:{self.d.port}", session_id="s1")
        t0 = time.time()
        resp = self.profile(req, timeout=30)
        took = time.time() - t0
        self.assertGreaterEqual(took, 0.29)
        self.assertLess(took, 5)
        self.assertEqual([td.name for td in resp.tool_data], ["xplane.pb"])
        x = T.decode_xspace(P, resp.tool_data[0].data)
        self.assertEqual(list(x.hostnames), [self.d.log().split("ready on ")[1].split()[0]])
        env = [p for p in x.planes if p.name == "Task Environment"]
        self.assertEqual(len(env), 1)
        stats = {env[0].stat_metadata[s.metadata_id].name: s.uint64_value for s in env[0].stats}
        self.assertAlmostEqual((stats["profile_stop_time"] - stats["profile_start_time"]) / 1e6, 300, delta=50)

    def test_unknown_method_is_unimplemented(self):
        with self.assertRaises(grpc.RpcError) as e:
            self.ch.unary_unary("/tensorflow.ProfilerService/NoSuchMethod")(b"", timeout=10)
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNIMPLEMENTED)

    def test_garbage_is_invalid_argument(self):
        with self.assertRaises(grpc.RpcError) as e:
            self.ch.unary_unary("/tensorflow.ProfilerService/Profile")(b"\xff\xff\xff\xff", timeout=10)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("ProfileRequest", e.exception.details())

    def test_zero_duration_is_invalid_argument(self):
        req = T.profile_request(P, 0, "h:1")
        with self.assertRaises(grpc.RpcError) as e:
            self.profile(req, timeout=10)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)


if __name__ == "__main__":
    unittest.main(verbosity=2)
