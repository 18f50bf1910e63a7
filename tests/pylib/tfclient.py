# SPDX-License-Identifier: MIT
"""A Python stand-in for TensorFlow's remote capture client.

It behaves like `tf.profiler.experimental.client.trace()` → `CaptureRemoteTrace`
(reference/protocol.md §3) so the tests can check profd the way TensorBoard,
XProf and `python -m jax.collect_profile` use it, without TensorFlow:

  * service_addr is a comma-separated list; a leading "grpc://" is stripped
    from each entry; each entry must be HOST:PORT (IPv6 literals are refused,
    as upstream's ValidateHostPortPair does);
  * one channel per address, receive size unlimited;
  * every host is asked in parallel, then the answers are read in address
    order; an RPC error counts as an empty answer (its status is kept);
  * the ProfileRequest is filled as in §3.5 (PopulateProfileRequest);
  * every RPC of every attempt has the same deadline: session creation +
    max(60 s, 2 × duration_ms) (the delay is not added, §3.6);
  * each non-empty answer's tool_data is written to
    <logdir>/plugins/profile/<session_id>/<address with ':'→'_'>.<tool name>;
  * an attempt succeeds if at least one host had data; otherwise it is
    retried (same session_id) up to num_tracing_attempts times in all, and
    then UnavailableError is raised.

Usage:
    import tfclient
    res = tfclient.trace("grpc://127.0.0.1:6009,127.0.0.1:6010", logdir, 1000)
    res.session_id, res.files, res.attempts[-1][0].response
"""
import datetime
import os
import threading
import time

import grpc

import profdtest

KMAX_EVENTS = 1000000
TOOLS = ["trace_viewer", "op_profile", "input_pipeline", "kernel_stats", "memory_viewer",
         "memory_profile", "overview_page", "pod_viewer", "tensorflow_stats", "xplane.pb"]
MIN_SESSION_S = 60.0


class CaptureError(Exception):
    """An error the TF client would raise; `code` is the grpc.StatusCode name."""

    def __init__(self, code, message, attempts=None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.attempts = attempts or []


class InvalidArgumentError(CaptureError):
    def __init__(self, message):
        super().__init__("INVALID_ARGUMENT", message)


class UnavailableError(CaptureError):
    def __init__(self, message, attempts):
        super().__init__("UNAVAILABLE", message, attempts)


class HostResult:
    """One host's answer in one attempt."""

    def __init__(self, address, request):
        self.address = address
        self.request = request
        self.response = None  # ProfileResponse when the RPC returned OK
        self.code = None      # grpc.StatusCode
        self.details = ""
        self.elapsed = None   # seconds from issue to completion

    @property
    def empty(self):
        # Upstream pre-initialises the response with empty_trace = true, so a
        # failed RPC reads as empty.
        return self.response is None or self.response.empty_trace


class TraceResult:
    def __init__(self, session_id, repository_root, attempts, files):
        self.session_id = session_id
        self.repository_root = repository_root
        self.attempts = attempts  # [[HostResult per address] per attempt]
        self.files = files        # paths written by this client


def _strip(addr):
    return addr[len("grpc://"):] if addr.startswith("grpc://") else addr


def _validate_host_port(addr):
    parts = addr.split(":")
    if len(parts) != 2 or not parts[1].isdigit() or not parts[0] or "/" in parts[0]:
        raise InvalidArgumentError(f'Could not interpret "{addr}" as a host-port pair.')


def session_timestamp():
    """The client's local time as %Y_%m_%d_%H_%M_%S (GetCurrentTimeStampAsString)."""
    return datetime.datetime.now().strftime("%Y_%m_%d_%H_%M_%S")


def populate_request(p, address, logdir, repository_root, session_id, duration_ms, delay_ms,
                     host_tracer_level, device_tracer_level, python_tracer_level,
                     opts_session_id=None, override_hostname=None):
    req = p.ps.ProfileRequest()
    req.duration_ms = duration_ms
    req.max_events = KMAX_EVENTS
    req.tools.extend(TOOLS)
    o = req.opts
    o.version = 1
    o.include_dataset_ops = True
    o.host_tracer_level = host_tracer_level
    o.device_tracer_level = device_tracer_level
    o.python_tracer_level = python_tracer_level
    o.enable_hlo_proto = True
    # Set on every attempt, even with no delay (§3.5).
    o.start_timestamp_ns = time.time_ns() + delay_ms * 1000000
    o.duration_ms = duration_ms
    o.repository_path = logdir
    if opts_session_id:
        o.session_id = opts_session_id
    if override_hostname is not None:
        o.advanced_configuration["override_hostname"].string_value = override_hostname
    req.repository_root = repository_root
    req.session_id = session_id
    req.host_name = address
    return req


def save_profile(repository_root, session_id, address, response):
    """SaveProfile: write each tool_data entry; returns the paths written."""
    out = []
    d = os.path.join(repository_root, session_id)
    os.makedirs(d, exist_ok=True)
    for td in response.tool_data:
        if td.name.endswith("tf_stats_helper_result"):
            continue
        path = os.path.join(d, address.replace(":", "_") + "." + td.name)
        with open(path, "wb") as f:
            f.write(td.data)
        out.append(path)
    return out


def trace(service_addr, logdir, duration_ms, num_tracing_attempts=3, host_tracer_level=2,
          device_tracer_level=1, python_tracer_level=0, delay_ms=0, session_id=None,
          override_hostnames=None, protos=None):
    """CaptureRemoteTrace. Returns a TraceResult or raises CaptureError."""
    p = protos or profdtest.protos()
    if duration_ms <= 0:
        raise InvalidArgumentError("duration_ms must be greater than zero.")
    addresses = [_strip(a) for a in service_addr.split(",")]
    for a in addresses:
        _validate_host_port(a)
    hostnames = None
    if override_hostnames is not None:
        hostnames = override_hostnames.split(",")
        if len(hostnames) != len(addresses):
            raise InvalidArgumentError("override_hostnames must have one name per address.")

    creation = time.time()
    deadline = creation + max(MIN_SESSION_S, 2 * duration_ms / 1000.0)
    sid = session_id or session_timestamp()
    repository_root = os.path.join(logdir, "plugins", "profile")

    attempts = []
    files = []
    for _ in range(max(1, num_tracing_attempts)):
        # Upstream builds a new RemoteProfilerSessionManager, hence new
        # channels, for every attempt.
        channels = [profdtest.channel(a) for a in addresses]
        stubs = [profdtest.stub(ch, "Profile", p.ps.ProfileRequest, p.ps.ProfileResponse)
                 for ch in channels]
        try:
            results = []
            futures = []
            # Issue every host's RPC before waiting for any (parallel fan-out).
            for i, (a, st) in enumerate(zip(addresses, stubs)):
                req = populate_request(p, a, logdir, repository_root, sid, duration_ms, delay_ms,
                                       host_tracer_level, device_tracer_level, python_tracer_level,
                                       opts_session_id=session_id,
                                       override_hostname=hostnames[i] if hostnames else None)
                r = HostResult(a, req)
                t0 = time.time()
                f = st.future(req, timeout=max(0.0, deadline - t0))
                _track_time(f, r, t0)
                results.append(r)
                futures.append(f)
            for r, f in zip(results, futures):
                try:
                    r.response = f.result()
                    r.code = grpc.StatusCode.OK
                except grpc.RpcError as e:
                    r.code = e.code()
                    r.details = e.details() or ""
            attempts.append(results)
            had_data = False
            for r in results:
                if not r.empty:
                    had_data = True
                    files += save_profile(repository_root, sid, r.address, r.response)
            if had_data:
                return TraceResult(sid, repository_root, attempts, files)
        finally:
            for ch in channels:
                ch.close()
    raise UnavailableError(
        "No trace event was collected because there were no responses from clients or "
        "the responses did not have trace data.", attempts)


def _track_time(future, result, t0):
    lock = threading.Lock()

    def done(_f):
        with lock:
            result.elapsed = time.time() - t0

    future.add_done_callback(done)


# ---- continuous profiling: XProf's client (reference/protocol.md §2.5) ----

def continuous_profiling_request(p, host_name=""):
    """The ProfileRequest of XProf's StartContinuousProfiling
    (xprof/pywrap/profiler_plugin_impl.cc): options forced to
    tpu_circular_buffer_tracing, host and python tracers off, a placeholder
    duration of 2000 ms; emit_xspace left unset (the server's default: true)."""
    req = p.ps.ProfileRequest()
    req.duration_ms = 2000
    o = req.opts
    o.version = 1
    o.duration_ms = 2000
    o.host_tracer_level = 0
    o.python_tracer_level = 0
    o.device_tracer_level = 1
    o.advanced_configuration["tpu_circular_buffer_tracing"].bool_value = True
    req.host_name = host_name
    return req


def recorder_stubs(ch, protos=None):
    """StartContinuousProfiling, GetSnapshot, StopContinuousProfiling on
    channel @ch, as upstream's generated stub calls them."""
    p = protos or profdtest.protos()
    return (profdtest.stub(ch, "StartContinuousProfiling", p.ps.ProfileRequest, p.ps.ContinuousProfilingResponse),
            profdtest.stub(ch, "GetSnapshot", p.ps.GetSnapshotRequest, p.ps.ProfileResponse),
            profdtest.stub(ch, "StopContinuousProfiling", p.ps.StopContinuousProfilingRequest,
                           p.ps.StopContinuousProfilingResponse))


def start_continuous_profiling(service_addr, protos=None, timeout=10):
    """StartContinuousProfiling as XProf calls it. Raises grpc.RpcError on
    an error status."""
    p = protos or profdtest.protos()
    addr = _strip(service_addr)
    _validate_host_port(addr)
    req = continuous_profiling_request(p, addr)
    with profdtest.channel(addr) as ch:
        profdtest.stub(ch, "StartContinuousProfiling", p.ps.ProfileRequest,
                       p.ps.ContinuousProfilingResponse)(req, timeout=timeout)
    return req


def get_snapshot(service_addr, logdir, protos=None, timeout=60):
    """tsl::profiler::GetSnapshot: GetSnapshotRequest (no snapshot_id), then
    response.xspace saved to <logdir>/plugins/profile/<timestamp>/
    <service_addr ':'→'_'>.xplane.pb. Returns (path, response)."""
    p = protos or profdtest.protos()
    addr = _strip(service_addr)
    with profdtest.channel(addr) as ch:
        resp = profdtest.stub(ch, "GetSnapshot", p.ps.GetSnapshotRequest, p.ps.ProfileResponse)(
            p.ps.GetSnapshotRequest(), timeout=timeout)
    d = os.path.join(logdir, "plugins", "profile", session_timestamp())
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, addr.replace(":", "_") + ".xplane.pb")
    with open(path, "wb") as f:
        f.write(resp.xspace.SerializeToString())
    return path, resp


def stop_continuous_profiling(service_addr, protos=None, timeout=10):
    p = protos or profdtest.protos()
    with profdtest.channel(_strip(service_addr)) as ch:
        profdtest.stub(ch, "StopContinuousProfiling", p.ps.StopContinuousProfilingRequest,
                       p.ps.StopContinuousProfilingResponse)(p.ps.StopContinuousProfilingRequest(),
                                                             timeout=timeout)
