# SPDX-License-Identifier: MIT
"""Shared helpers for profd's Python tests.

The tests drive the real daemon over real gRPC on loopback and decode what
it sends with real protobuf (Debian's python3-grpcio / python3-protobuf,
run with /usr/bin/python3). meson passes:
  PROFD        path of the profd binary under test
  PROFD_SRC    source root (for proto/ and fixtures)
  PROFD_BUILD  build root (a cache for generated Python protobuf modules)
  PROFD_WRAPPER optional command prefix, e.g. "valgrind --leak-check=full"
  PROFD_PROTO_DESC  a FileDescriptorSet of proto/ (tools/device-bundle makes
               one) used instead of protoc, for machines without protoc
"""
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import testtmp  # noqa: F401  (every temporary directory under one root, removed at exit)

SRC = os.environ.get("PROFD_SRC", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("PROFD_BUILD", os.path.join(SRC, "build"))
PROFD = os.environ.get("PROFD", os.path.join(BUILD, "daemon", "profd"))

_proto_dir = None


def protos():
    """Compile proto/ with protoc --python_out once per build; import it.

    Returns a namespace with ps (profiler_service_pb2), xp (xplane_pb2),
    opts (profiler_options_pb2), mon (monitor result) and profd (profd_pb2).
    """
    global _proto_dir
    desc = os.environ.get("PROFD_PROTO_DESC")
    if desc or shutil.which("protoc") is None:
        return _protos_from_descriptor_set(desc or os.path.join(BUILD, "pyproto", "profd.desc"))
    if _proto_dir is None:
        out = os.path.join(BUILD, "pyproto")
        os.makedirs(out, exist_ok=True)
        src = os.path.join(SRC, "proto")
        files = [os.path.join(src, "tensorflow", f) for f in sorted(os.listdir(os.path.join(src, "tensorflow")))]
        files.append(os.path.join(src, "profd", "profd.proto"))
        # Write to a private dir and rename, so parallel tests never see a half-written module.
        tmp = tempfile.mkdtemp(dir=out)
        subprocess.run(["protoc", "--proto_path=" + src, "--python_out=" + tmp] + files, check=True)
        for pkg in ("tensorflow", "profd"):
            dst = os.path.join(out, pkg)
            os.makedirs(dst, exist_ok=True)
            for f in os.listdir(os.path.join(tmp, pkg)):
                os.replace(os.path.join(tmp, pkg, f), os.path.join(dst, f))
        _proto_dir = out
        sys.path.insert(0, out)
    from tensorflow import profiler_service_pb2 as ps, xplane_pb2 as xp  # noqa: E402
    from tensorflow import profiler_options_pb2 as opts  # noqa: E402
    from tensorflow import profiler_service_monitor_result_pb2 as mon  # noqa: E402
    from profd import profd_pb2 as profd  # noqa: E402

    class P:
        pass

    p = P()
    p.ps, p.xp, p.opts, p.mon, p.profd = ps, xp, opts, mon, profd
    return p


_desc_protos = None


def _protos_from_descriptor_set(path):
    """protos() without protoc: message classes built from a descriptor set.

    Works with protobuf 3.20 to 6.x (GetMessageClass where it exists, the
    older MessageFactory otherwise). Each proto file becomes a namespace
    holding its top-level messages, as the generated modules would.
    """
    global _desc_protos
    if _desc_protos is not None:
        return _desc_protos
    import types
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fds = descriptor_pb2.FileDescriptorSet()
    with open(path, "rb") as f:
        fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fdp in fds.file:
        pool.Add(fdp)
    get = getattr(message_factory, "GetMessageClass", None)
    if get is None:
        get = message_factory.MessageFactory(pool).GetPrototype
    mods = {}
    for fdp in fds.file:
        ns = types.SimpleNamespace()
        for m in fdp.message_type:
            full = f"{fdp.package}.{m.name}" if fdp.package else m.name
            setattr(ns, m.name, get(pool.FindMessageTypeByName(full)))
        mods[os.path.splitext(os.path.basename(fdp.name))[0]] = ns
    p = types.SimpleNamespace(ps=mods["profiler_service"], xp=mods["xplane"],
                              opts=mods["profiler_options"],
                              mon=mods["profiler_service_monitor_result"], profd=mods["profd"])
    _desc_protos = p
    return p


class LogPipe:
    """A child's stdout and stderr through a pipe that a thread copies into
    the file @path. Not a file the child writes: limits set on the child
    (`ulimit -f`, a full disk) would cut its log short, and a readiness
    line never written would leave the test waiting for it.
    text() is everything copied so far; close() waits for the child's end
    of the pipe to close (the child exited) and closes the file."""

    def __init__(self, path):
        import threading

        self.path = path
        self._rfd, self.wfd = os.pipe()
        self._out = open(path, "wb", buffering=0)
        self._thread = threading.Thread(target=self._copy, daemon=True)
        self._thread.start()

    def _copy(self):
        while True:
            try:
                chunk = os.read(self._rfd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self._out.write(chunk)
        os.close(self._rfd)

    def started(self):
        """The child holds the write end now: ours closes, so the pipe
        reports EOF once the child (and whatever it forked) is gone."""
        if self.wfd is not None:
            os.close(self.wfd)
            self.wfd = None

    def text(self):
        with open(self.path, errors="replace") as f:
            return f.read()

    def close(self, timeout=10):
        self.started()
        self._thread.join(timeout)
        if not self._out.closed and not self._thread.is_alive():
            self._out.close()


class Daemon:
    """A profd process on loopback. Use as a context manager.

    d = Daemon("--max-sessions", "2"); d.port; d.addr; d.log(); d.stop() -> exit code
    """

    def __init__(self, *args, host="127.0.0.1", wrapper=None, env=None, timeout=20):
        self.tmp = tempfile.mkdtemp(prefix="profd-test-")
        self.log_path = os.path.join(self.tmp, "profd.log")
        wrapper = wrapper if wrapper is not None else shlex.split(os.environ.get("PROFD_WRAPPER", ""))
        listen = f"[{host}]:0" if ":" in host else f"{host}:0"
        has_listen = any(a in ("--listen", "-l") for a in args)
        cmd = list(wrapper) + [PROFD] + ([] if has_listen else ["--listen", listen])
        cmd += ["--log-level", "debug"] + list(args)
        if "--agent-socket" not in args:
            # Each test daemon gets its own agent socket: no test touches the
            # machine's /run/profd, and parallel tests never share one.
            self.agent_socket = os.path.join(self.tmp, "agent.sock")
            cmd += ["--agent-socket", self.agent_socket]
        e = dict(os.environ)
        e.update(env or {})
        self._log = LogPipe(self.log_path)
        try:
            self.proc = subprocess.Popen(cmd, stdout=self._log.wfd, stderr=subprocess.STDOUT, env=e)
        finally:
            self._log.started()
        self.ports = []
        deadline = time.time() + timeout * (5 if wrapper else 1)
        while time.time() < deadline:
            text = self.log()
            self.ports = [int(p) for p in re.findall(r"listening on \S+ \(port (\d+)\)", text)]
            if "ready on" in text:
                break
            if self.proc.poll() is not None:
                self._log.close()
                raise RuntimeError(f"profd exited {self.proc.returncode}:\n{self.log()}")
            time.sleep(0.02)
        else:
            self.proc.kill()
            self.proc.wait()
            self._log.close()
            raise RuntimeError("profd did not become ready:\n" + self.log())
        self.port = self.ports[0] if self.ports else None
        self.host = host
        self.addr = (f"[{host}]" if ":" in host else host) + f":{self.port}"

    def log(self):
        return self._log.text()

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        self._log.close()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            rc = self.stop()
            if exc[0] is None and rc != 0:
                raise AssertionError(f"profd exited {rc}:\n{self.log()}")


def channel(addr):
    import grpc

    return grpc.insecure_channel(addr, options=[("grpc.max_receive_message_length", -1)])


def stub(ch, method, req_cls, resp_cls, service="tensorflow.ProfilerService"):
    return ch.unary_unary(f"/{service}/{method}", request_serializer=req_cls.SerializeToString,
                          response_deserializer=resp_cls.FromString)


def status(addr, timeout=10):
    """profd.Profd/Status of the daemon at @addr, over a fresh channel."""
    p = protos()
    with channel(addr) as ch:
        return stub(ch, "Status", p.profd.StatusRequest, p.profd.StatusResponse,
                    service="profd.Profd")(p.profd.StatusRequest(), timeout=timeout)


def free_port():
    """A loopback TCP port nobody listens on right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stubs:
    """One channel to @addr and a callable per RPC: profile, terminate,
    monitor, status (profd.Profd/Status). close() when done."""

    def __init__(self, addr):
        p = protos()
        self.ch = channel(addr)
        self.profile = stub(self.ch, "Profile", p.ps.ProfileRequest, p.ps.ProfileResponse)
        self.terminate = stub(self.ch, "Terminate", p.ps.TerminateRequest, p.ps.TerminateResponse)
        self.monitor = stub(self.ch, "Monitor", p.ps.MonitorRequest, p.ps.MonitorResponse)
        self.status = stub(self.ch, "Status", p.profd.StatusRequest, p.profd.StatusResponse,
                           service="profd.Profd")

    def close(self):
        self.ch.close()


class DaemonCase(unittest.TestCase):
    """A test class sharing one profd: cls.d, cls.ch and the Stubs
    callables as cls.profile, cls.terminate, cls.monitor, cls.status.
    Subclasses give the daemon's arguments in daemon_args() (which may
    make temporary directories) and clean up in cleanup(); a profd that
    does not exit 0 at the end fails the class."""

    @classmethod
    def daemon_args(cls):
        return []

    @classmethod
    def cleanup(cls):
        pass

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(*cls.daemon_args())
        cls.stubs = Stubs(cls.d.addr)
        cls.ch = cls.stubs.ch
        cls.profile, cls.terminate = cls.stubs.profile, cls.stubs.terminate
        cls.monitor, cls.status = cls.stubs.monitor, cls.stubs.status

    @classmethod
    def tearDownClass(cls):
        cls.stubs.close()
        rc = cls.d.stop()
        cls.cleanup()
        assert rc == 0, cls.d.log()


class AgentDaemonCase(DaemonCase):
    """A DaemonCase whose profd takes agents on cls.sock, in a temporary
    directory of its own, and waits up to 2 s for their flush answers."""

    @classmethod
    def daemon_args(cls):
        cls.tmp = tempfile.mkdtemp(prefix="profd-agent-")
        cls.sock = os.path.join(cls.tmp, "agent.sock")
        return ["--agent-socket", cls.sock, "--flush-timeout", "2s"]


def profile_request(p, duration_ms, host_name, session_id="test_session", logdir="/tmp/unused",
                    delay_ms=0, version=1, advanced=None, **opts):
    """A ProfileRequest filled the way the TF capture client fills it
    (reference/protocol.md §3.5). @advanced: {key: value} for
    opts.advanced_configuration, typed as upstream's Python client types
    them (bool -> bool_value, int -> int64_value, str -> string_value)."""
    req = p.ps.ProfileRequest()
    req.duration_ms = duration_ms
    req.max_events = 1000000
    req.tools.extend(["trace_viewer", "op_profile", "input_pipeline", "kernel_stats", "memory_viewer",
                      "memory_profile", "overview_page", "pod_viewer", "tensorflow_stats", "xplane.pb"])
    o = req.opts
    o.version = version
    if version:
        o.include_dataset_ops = True
        o.host_tracer_level = opts.pop("host_tracer_level", 2)
        o.device_tracer_level = opts.pop("device_tracer_level", 1)
        o.python_tracer_level = opts.pop("python_tracer_level", 0)
        o.enable_hlo_proto = True
        o.start_timestamp_ns = time.time_ns() + delay_ms * 1000000
        o.duration_ms = duration_ms
        o.repository_path = logdir
    for k, v in opts.items():
        setattr(req, k, v) if hasattr(req, k) else setattr(o, k, v)
    for k, v in (advanced or {}).items():
        acv = o.advanced_configuration[k]
        if isinstance(v, bool):
            acv.bool_value = v
        elif isinstance(v, int):
            acv.int64_value = v
        else:
            acv.string_value = v
    req.repository_root = os.path.join(logdir, "plugins", "profile")
    req.session_id = session_id
    req.host_name = host_name
    return req


def wait_for(cond, timeout=5.0, step=0.05):
    """Poll cond() until it is true or @timeout s passed; returns its last value."""
    end = time.time() + timeout
    while True:
        v = cond()
        if v or time.time() > end:
            return v
        time.sleep(step)


def decode_xspace(p, data):
    return p.xp.XSpace.FromString(data)


LINE_ID_LIMIT = 0xdeadbeef  # XProf's derived lines (kThreadIdDerivedMin) start here


def proc_status_kib(pid, key):
    """A kB field of /proc/PID/status ("VmRSS", "VmHWM") as an int."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {key} in /proc/{pid}/status")


def nvidia_gpu():
    """Whether nvidia-smi sees a GPU (the GPU checks skip with 77 otherwise)."""
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def gpu_kernels(x):
    """(name, start ns into the session, duration ns) of every kernel on the
    /device:GPU: planes of XSpace @x, profd's or TSL's: events whose own
    stats or whose metadata's stats hold kernel_details (profd puts it on
    the metadata of each launch shape, TSL's tracer on the event). The name
    is the metadata's display_name when it has one (TSL: demangled)."""
    out = []
    for plane in x.planes:
        if not plane.name.startswith("/device:GPU:"):
            continue
        kd = {k for k, m in plane.stat_metadata.items() if m.name == "kernel_details"}
        kmeta = {k for k, m in plane.event_metadata.items() if any(s.metadata_id in kd for s in m.stats)}
        for line in plane.lines:
            for e in line.events:
                if e.metadata_id in kmeta or any(s.metadata_id in kd for s in e.stats):
                    md = plane.event_metadata[e.metadata_id]
                    out.append((md.display_name or md.name, line.timestamp_ns + e.offset_ps // 1000,
                                e.duration_ps / 1000.0))
    return out


def stat_values(plane, stats):
    """{stat name: value} of @stats (an event's or a metadata's) on @plane,
    a ref_value resolved to the string it names."""
    out = {}
    for s in stats:
        kind = s.WhichOneof("value")
        v = getattr(s, kind)
        out[plane.stat_metadata[s.metadata_id].name] = plane.stat_metadata[v].name if kind == "ref_value" else v
    return out


def plane_events(x, prefix):
    """(plane, line, event name, {stat name: stat}) of every event of the
    planes of XSpace @x whose name starts with @prefix ("/host:CPU",
    "/device:GPU:"), in plane, line and event order."""
    for p in x.planes:
        if not p.name.startswith(prefix):
            continue
        for line in p.lines:
            for e in line.events:
                yield (p, line, p.event_metadata[e.metadata_id].name,
                       {p.stat_metadata[s.metadata_id].name: s for s in e.stats})


def line_owner(line):
    """(pid, key) of a line an agent made, from its names: line ids are
    per-plane ordinals and say nothing of the owner. Host lines are named
    "<comm> (pid P)/tid T" -> (P, T); GPU lines show "<comm> P / Stream #S(...)"
    -> (P, S) and "<comm> P / CUPTI overhead" -> (P, None); NVTX and GPU
    memory lines below. None otherwise."""
    m = re.fullmatch(r".* \(pid (\d+)\)/tid (\d+)", line.name)
    if m:
        return int(m.group(1)), int(m.group(2))
    # "<comm> (pid P)/tid T/NVTX" -> (P, T + 2^30); "<comm> (pid P)/GPU memory"
    # -> (P, 2^32 - 3): keys no thread or stream has.
    m = re.fullmatch(r".* \(pid (\d+)\)/tid (\d+)/NVTX", line.name)
    if m:
        return int(m.group(1)), int(m.group(2)) + (1 << 30)
    m = re.fullmatch(r".* \(pid (\d+)\)/GPU memory", line.name)
    if m:
        return int(m.group(1)), 0xfffffffd
    m = re.fullmatch(r".* (\d+) / (?:Stream #(\d+)\(.*\)|CUPTI overhead)", line.display_name)
    if m:
        return int(m.group(1)), int(m.group(2)) if m.group(2) is not None else None
    return None


def line_pid(line):
    """The pid of the agent that made @line, or None."""
    o = line_owner(line)
    return o[0] if o else None


def doctor_verdicts(out):
    """{tool: (yes?, reason)} from `profctl doctor FILE`'s report."""
    v = {}
    for line in out.splitlines():
        parts = line.split(None, 2)
        if line.startswith("  ") and len(parts) >= 2 and parts[1] in ("yes", "no"):
            v[parts[0]] = (parts[1] == "yes", parts[2] if len(parts) > 2 else "")
    return v
