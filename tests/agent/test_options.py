# SPDX-License-Identifier: MIT
"""ProfileOptions.advanced_configuration (docs/options.md) through a real
profd over gRPC, with the fake agent printing the START options it got.

Checked: every key's effect on the capture (caps -> drops counted in
XSpace.warnings, GPUs to profile, the kinds agents are asked for, one union
for overlapping windows), unknown keys and bad values as warnings naming
the key, raise_error_on_start_failure -> INVALID_ARGUMENT, session_id and
override_hostname next to GPU keys. NVTX on/off with the real agent is in
test_options_nvtx.py.
"""
import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

import grpc

import profdtest as T

P = T.protos()
FAKE = os.environ.get("FAKE_AGENT", os.path.join(T.BUILD, "tests", "agent", "fake-agent"))
UUID_A = "GPU-aaaaaaaa-0000-0000-0000-00000000000a"
UUID_B = "GPU-bbbbbbbb-0000-0000-0000-00000000000b"
NVTX, GRAPH, PM, PY_STACKS, PY_SAMPLE = 1, 2, 4, 8, 16  # enum agent_start_flag
DEFAULT = NVTX | PY_STACKS  # docs/options.md: NVTX and Python launch stacks on
LINE_ID_LIMIT = 0xdeadbeef


class Agent:
    """fake-agent --print-options: its option lines are collected as they come."""

    def __init__(self, sock, devices, *extra):
        self.proc = subprocess.Popen([FAKE, "--socket", sock, "--devices", ",".join(devices), "--name", "opts",
                                      "--print-options"] + list(extra),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.cv = threading.Condition()
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()
        self.wait(lambda ls: "connected" in ls)

    def _read(self):
        for line in self.proc.stdout:
            with self.cv:
                self.lines.append(line.strip())
                self.cv.notify_all()

    def wait(self, cond, timeout=10):
        with self.cv:
            if not self.cv.wait_for(lambda: cond(self.lines), timeout):
                raise AssertionError(f"fake agent: condition not met; lines {self.lines}")

    def options(self):
        """Each START's options as a dict, in order."""
        out = []
        for line in self.lines:
            if line.startswith("options "):
                d = dict(w.split("=", 1) for w in line.split()[1:])
                d["flags"] = int(d["flags"], 16)
                out.append(d)
        return out

    def finish(self):
        try:
            self.proc.wait(timeout=10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.t.join(5)
            self.proc.stdout.close()
            self.proc.stderr.close()


def gpu_planes(x):
    return [p for p in x.planes if p.name.startswith("/device:GPU:")]


def device_events(x):
    return sum(len(l.events) for p in gpu_planes(x) for l in p.lines if 0 <= l.id < LINE_ID_LIMIT)


def api_events(x):
    return sum(len(l.events) for p in x.planes if p.name == "/host:CPU" for l in p.lines
               if " (pid " in l.name and ")/tid " in l.name and not l.name.endswith("/NVTX"))


class Options(T.AgentDaemonCase):
    @classmethod
    def daemon_args(cls):
        args = super().daemon_args()
        cls.allowed = tempfile.mkdtemp(prefix="profd-opts-")
        return args + ["--repository-allow", cls.allowed]

    @classmethod
    def cleanup(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)
        shutil.rmtree(cls.allowed, ignore_errors=True)

    def req(self, ms=400, advanced=None, sid="opts", **kw):
        return T.profile_request(P, ms, f"localhost:{self.d.port}", session_id=sid, advanced=advanced, **kw)

    def capture(self, advanced=None, ms=400, **kw):
        r = self.profile(self.req(ms, advanced, **kw), timeout=60)
        return T.decode_xspace(P, r.tool_data[0].data)

    def wait_no_agents(self):
        T.wait_for(lambda: not self.status(P.profd.StatusRequest(), timeout=10).agents, 10)

    def setUp(self):
        self.wait_no_agents()

    def test_defaults_nvtx_on_nothing_else(self):
        a = Agent(self.sock, [UUID_A])
        x = self.capture()
        a.finish()
        self.assertEqual(a.options()[0]["flags"], DEFAULT, a.lines)
        self.assertFalse([w for w in x.warnings if "advanced_configuration" in w], list(x.warnings))

    def test_caps_drop_and_count(self):
        a = Agent(self.sock, [UUID_A], "--kernels", "20")
        full = self.capture()
        a.finish()
        self.assertGreater(device_events(full), 7)
        self.assertGreater(api_events(full), 5)
        a = Agent(self.sock, [UUID_A], "--kernels", "20")
        x = self.capture({"gpu_max_activity_api_events": 7, "gpu_max_callback_api_events": 5})
        a.finish()
        self.assertEqual(device_events(x), 7)
        self.assertEqual(api_events(x), 5)
        w = list(x.warnings)
        dev = [s for s in w if s.startswith("gpu_max_activity_api_events=7:")]
        api = [s for s in w if s.startswith("gpu_max_callback_api_events=5:")]
        self.assertEqual(len(dev), 1, w)
        self.assertEqual(len(api), 1, w)
        self.assertIn(f" {device_events(full) - 7} GPU activity events", dev[0])
        self.assertIn(f" {api_events(full) - 5} CUDA API events", api[0])
        # The earliest are kept: the kept API calls are the first ones by time.
        def names(xs):
            h = [p for p in xs.planes if p.name == "/host:CPU"][0]
            return [h.event_metadata[e.metadata_id].name for _, e in
                    sorted(((l.timestamp_ns * 1000 + e.offset_ps, e) for l in h.lines
                            if ")/tid " in l.name and not l.name.endswith("/NVTX") for e in l.events),
                           key=lambda t: t[0])]
        self.assertEqual(names(x), names(full)[:5])

    def test_cap_above_the_data_drops_nothing(self):
        a = Agent(self.sock, [UUID_A], "--kernels", "3")
        x = self.capture({"gpu_max_activity_api_events": 1000000, "gpu_max_callback_api_events": 0})
        a.finish()
        self.assertGreater(device_events(x), 3)
        self.assertFalse([w for w in x.warnings if w.startswith("gpu_max")], list(x.warnings))

    def test_num_chips(self):
        a = Agent(self.sock, [UUID_A, UUID_B], "--kernels", "2")
        x = self.capture({"gpu_num_chips_to_profile_per_task": 1})
        a.finish()
        names = sorted(p.name for p in gpu_planes(x))
        self.assertEqual(len(names), 1, names)
        w = [s for s in x.warnings if s.startswith("gpu_num_chips_to_profile_per_task=1")]
        self.assertEqual(len(w), 1, list(x.warnings))
        self.assertIn("1 GPU plane(s) left out: /device:GPU:", w[0])
        self.assertNotIn(names[0], w[0])

    def test_kinds_reach_the_agent(self):
        a = Agent(self.sock, [UUID_A])
        self.capture({"gpu_enable_cupti_activity_graph_trace": True, "gpu_enable_nvtx_tracking": False,
                      "gpu_pm_sample_counters": " sm__cycles_active.avg, ,dram__bytes.sum ",
                      "gpu_pm_sample_interval_us": 250, "gpu_pm_sample_buffer_size_per_gpu_mb": 128})
        a.finish()
        o = a.options()[0]
        self.assertEqual(o, {"flags": GRAPH | PM | PY_STACKS, "interval_us": "250", "buffer_mb": "128",
                             "metrics": "sm__cycles_active.avg,dram__bytes.sum", "py_hz": "0", "py_depth": "64"})

    def test_pm_buffer_is_clamped_with_a_warning(self):
        a = Agent(self.sock, [UUID_A])
        x = self.capture({"gpu_pm_sample_counters": "default", "gpu_pm_sample_buffer_size_per_gpu_mb": 9000})
        a.finish()
        o = a.options()[0]
        self.assertEqual((o["flags"], o["buffer_mb"], o["metrics"]), (DEFAULT | PM, "4096", ""))
        self.assertTrue([w for w in x.warnings if "gpu_pm_sample_buffer_size_per_gpu_mb=9000" in w
                         and "4096 used" in w], list(x.warnings))

    def test_overlapping_windows_union(self):
        a = Agent(self.sock, [UUID_A])
        f1 = self.profile.future(self.req(1500, {"gpu_enable_nvtx_tracking": False}, sid="w1"), timeout=60)
        a.wait(lambda ls: "started" in ls)
        f2 = self.profile.future(self.req(300, {"gpu_enable_cupti_activity_graph_trace": True,
                                                "gpu_pm_sample_counters": "a.b",
                                                "gpu_pm_sample_interval_us": 100}, sid="w2"),
                                 timeout=60)
        f2.result()
        f1.result()
        a.finish()
        flags = [o["flags"] for o in a.options()]
        # w1 alone, w1 + w2 (their union), w1 alone again.
        self.assertEqual(flags, [PY_STACKS, GRAPH | DEFAULT | PM, PY_STACKS], a.lines)
        self.assertEqual(a.options()[1]["interval_us"], "100")

    def test_unknown_key_and_bad_values_warn(self):
        a = Agent(self.sock, [UUID_A], "--kernels", "2")
        x = self.capture({"gpu_foo": 1, "gpu_max_activity_api_events": "many",
                          "gpu_pm_sample_interval_us": 0, "gpu_pm_sample_counters": "bad name!",
                          "gpu_num_chips_to_profile_per_task": -1,
                          "gpu_range_profiling_counters": "x"})
        a.finish()
        w = list(x.warnings)
        want = ["advanced_configuration: unknown key 'gpu_foo' (ignored)",
                "advanced_configuration: gpu_max_activity_api_events takes a value of type int64, got string "
                "(ignored)",
                "advanced_configuration: gpu_pm_sample_interval_us=0 is out of range 10..1000000 (ignored)",
                "advanced_configuration: gpu_num_chips_to_profile_per_task=-1 is out of range 0..4096 (ignored)",
                "advanced_configuration: gpu_range_profiling_counters: CUPTI range profiling is not supported "
                "by profd (ignored)"]
        for s in want:
            self.assertIn(s, w)
        self.assertTrue([s for s in w if s.startswith("advanced_configuration: gpu_pm_sample_counters=\"bad name!\"")
                         and "[A-Za-z0-9_.]" in s], w)
        # The capture itself is whole, with the defaults.
        self.assertGreater(device_events(x), 2)
        self.assertEqual(a.options()[0]["flags"], DEFAULT)

    def test_many_unknown_keys_are_bounded(self):
        x = self.capture({f"k{i}": i for i in range(40)}, ms=50)
        w = [s for s in x.warnings if s.startswith("advanced_configuration:")]
        self.assertEqual(len(w), 9, w)
        self.assertIn("advanced_configuration: 32 more warnings left out", w)

    def test_raise_error_on_start_failure(self):
        r = self.req(2000, {"gpu_foo": True, "gpu_max_callback_api_events": False},
                     raise_error_on_start_failure=True)
        t0 = time.time()
        with self.assertRaises(grpc.RpcError) as e:
            self.profile(r, timeout=10)
        self.assertLess(time.time() - t0, 1.5, "refused at once")
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("unknown key 'gpu_foo'", e.exception.details())
        self.assertIn("gpu_max_callback_api_events takes a value of type int64, got bool", e.exception.details())
        # Good keys with the flag set: a normal capture.
        x = self.capture({"gpu_enable_nvtx_tracking": True}, ms=50, raise_error_on_start_failure=True)
        self.assertFalse([w for w in x.warnings if "advanced_configuration" in w])

    def test_session_id_and_override_hostname_with_gpu_keys(self):
        root = os.path.join(self.allowed, "logs")
        r = self.req(50, {"override_hostname": "node-9:1234", "gpu_max_activity_api_events": 10}, sid="run-7")
        r.repository_root = root
        self.profile(r, timeout=10)
        self.assertTrue(os.path.exists(os.path.join(root, "run-7", "node-9_1234.xplane.pb")),
                        os.listdir(self.allowed))



class DaemonDefaults(T.AgentDaemonCase):
    """--pm-sample* are the defaults of requests that set no PM key; a
    request's keys override them. Monitor windows arm no agent."""

    @classmethod
    def daemon_args(cls):
        return super().daemon_args() + ["--pm-sample", "a.b, c", "--pm-sample-interval", "2ms",
                                        "--pm-sample-buffer", "128"]

    @classmethod
    def cleanup(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        T.wait_for(lambda: not self.status(P.profd.StatusRequest(), timeout=10).agents, 10)

    def test_defaults_and_overrides(self):
        a = Agent(self.sock, [UUID_A], "--captures", "3")
        addr = f"localhost:{self.d.port}"
        self.profile(T.profile_request(P, 200, addr), timeout=30)
        a.wait(lambda ls: ls.count("stopped") == 1)
        self.profile(T.profile_request(P, 200, addr, advanced={"gpu_pm_sample_counters": "",
                                                                "gpu_pm_sample_interval_us": 900}), timeout=30)
        a.wait(lambda ls: ls.count("stopped") == 2)
        # Monitor arms no agent (NVML and host counters only): no options reach it.
        self.monitor(P.ps.MonitorRequest(duration_ms=200, monitoring_level=1), timeout=30)
        self.profile(T.profile_request(P, 200, addr), timeout=30)
        a.wait(lambda ls: ls.count("stopped") == 3)
        a.finish()
        o = a.options()
        self.assertEqual(len(o), 3, o)
        self.assertEqual(o[0], {"flags": DEFAULT | PM, "interval_us": "2000", "buffer_mb": "128", "metrics": "a.b,c",
                                "py_hz": "0", "py_depth": "64"})
        self.assertEqual(o[1]["flags"], DEFAULT)  # an empty list turns sampling off
        self.assertEqual(o[2], o[0], "a request with no keys gets the daemon defaults again")


if __name__ == "__main__":
    unittest.main(verbosity=2)
