# SPDX-License-Identifier: MIT
"""Helpers for the nvml suite: a daemon on the fake NVML, XSpace readers."""
import os
import subprocess
import unittest

import profdtest as T

P = T.protos()
FAKE = os.environ.get("FAKE_NVML_LIB", os.path.join(T.BUILD, "tests", "nvml", "libfake-nvml.so"))
INT64_MAX = 2**63 - 1


def daemon(*args, lib=FAKE, **env):
    e = {k: str(v) for k, v in env.items()}
    return T.Daemon("--nvml-library", lib, *args, env=e)


def gpu_process():
    """A process to stand in for a training job (NVML lists its pid)."""
    return subprocess.Popen(["sleep", "60"])


class JobCase(unittest.TestCase):
    """One profd on the fake NVML for the class, and cls.job, a process the
    fake lists as a GPU user; daemon_env(job_pid) gives the daemon's
    arguments and FAKE_NVML_* settings as (args, env)."""

    @classmethod
    def daemon_env(cls, job_pid):
        return [], {}

    @classmethod
    def setUpClass(cls):
        cls.job = gpu_process()
        args, env = cls.daemon_env(cls.job.pid)
        cls.d = daemon(*args, **env)

    @classmethod
    def tearDownClass(cls):
        cls.job.kill()
        cls.job.wait()
        rc = cls.d.stop()
        assert rc == 0, cls.d.log()


def capture(d, ms, **kw):
    ch = T.channel(d.addr)
    try:
        prof = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)
        resp = prof(T.profile_request(P, ms, f"localhost:{d.port}", **kw), timeout=60)
        return T.decode_xspace(P, resp.tool_data[0].data)
    finally:
        ch.close()


def monitor(d, ms, level=1, timestamp=False, timeout=60):
    ch = T.channel(d.addr)
    try:
        mon = T.stub(ch, "Monitor", P.ps.MonitorRequest, P.ps.MonitorResponse)
        return mon(P.ps.MonitorRequest(duration_ms=ms, monitoring_level=level, timestamp=timestamp),
                   timeout=timeout)
    finally:
        ch.close()


def plane(x, name):
    ps = [p for p in x.planes if p.name == name]
    return ps[0] if ps else None


def plane_stats(p):
    out = {}
    for s in p.stats:
        out[p.stat_metadata[s.metadata_id].name] = getattr(s, s.WhichOneof("value"))
    return out


def counters(p):
    """{counter name: [(time_ps from session start, value), ...]} of the
    plane's `_counters_` line; checks the counter encoding on the way."""
    out = {}
    lines = [l for l in p.lines if l.name == "_counters_"]
    if not lines:
        return out
    (l,) = lines
    assert l.id == INT64_MAX, l.id
    for e in l.events:
        name = p.event_metadata[e.metadata_id].name
        assert e.duration_ps == 0, (name, e.duration_ps)
        assert len(e.stats) == 1, (name, e.stats)
        st = e.stats[0]
        assert p.stat_metadata[st.metadata_id].name == name, name
        assert st.WhichOneof("value") == "double_value", (name, st)
        out.setdefault(name, []).append((l.timestamp_ns * 1000 + e.offset_ps, st.double_value))
    return out


def values(cs, name):
    return [v for _, v in cs.get(name, [])]
