# SPDX-License-Identifier: MIT
"""A stand-in ProfilerService in Python (grpcio), for what a profd test
daemon cannot show: the exact ProfileRequest profctl sends, a non-empty
reply without collectors, and a server that implements Monitor."""
from concurrent import futures
import threading
import time

import grpc


class FakeProfiler:
    """Records every request; answers Profile with @xspace_bytes."""

    def __init__(self, P, xspace_bytes, ports=1, monitor_text=None, empty=False):
        self.P = P
        self.requests = []
        self.received_ns = []
        self.lock = threading.Lock()
        self.xspace_bytes = xspace_bytes
        self.monitor_text = monitor_text
        self.empty = empty
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        handlers = {
            "Profile": grpc.unary_unary_rpc_method_handler(
                self.profile, request_deserializer=P.ps.ProfileRequest.FromString,
                response_serializer=P.ps.ProfileResponse.SerializeToString),
        }
        if monitor_text is not None:
            handlers["Monitor"] = grpc.unary_unary_rpc_method_handler(
                self.monitor, request_deserializer=P.ps.MonitorRequest.FromString,
                response_serializer=P.ps.MonitorResponse.SerializeToString)
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("tensorflow.ProfilerService", handlers),))
        self.ports = [self.server.add_insecure_port("127.0.0.1:0") for _ in range(ports)]
        self.server.start()

    def reset(self):
        """Forget what earlier tests sent: requests[i] was received at
        received_ns[i], so both lists go together."""
        with self.lock:
            del self.requests[:]
            del self.received_ns[:]

    def profile(self, req, ctx):
        with self.lock:
            self.requests.append(req)
            self.received_ns.append(time.time_ns())
        resp = self.P.ps.ProfileResponse()
        if self.empty:
            resp.empty_trace = True
            return resp
        td = resp.tool_data.add()
        td.name = "xplane.pb"
        td.data = self.xspace_bytes
        # TF's client skips these; profctl must too.
        skip = resp.tool_data.add()
        skip.name = "x.tf_stats_helper_result"
        skip.data = b"junk"
        return resp

    def monitor(self, req, ctx):
        with self.lock:
            self.requests.append(req)
        resp = self.P.ps.MonitorResponse(data=self.monitor_text % req.monitoring_level)
        resp.monitor_result.response_type = 2  # UTIL_IDLE
        resp.monitor_result.device_idle_time_percent = 12.5
        resp.monitor_result.matrix_unit_utilization_percent = 40.0
        return resp

    def stop(self):
        self.server.stop(0)
