# SPDX-License-Identifier: MIT
"""The Monitor RPC: text and monitor_result from the fake NVML's numbers."""
import re
import threading
import time
import unittest

import grpc

import nvmltest as N

P = N.P
UTIL_IDLE = P.mon.ProfilerServiceMonitorResult.UTIL_IDLE
EMPTY = P.mon.ProfilerServiceMonitorResult.EMPTY_RESULT


class Monitor(N.JobCase):
    @classmethod
    def daemon_env(cls, job_pid):
        return ["--max-duration", "3s"], dict(FAKE_NVML_GPUS=2, FAKE_NVML_UTIL=40,
                                              FAKE_NVML_PROCS=f"0:{job_pid}:1024")

    def test_level_1_text_and_result(self):
        t0 = time.time()
        r = N.monitor(self.d, 500)
        self.assertGreaterEqual(time.time() - t0, 0.45)
        text = r.data
        self.assertIn("GPU 0: util 40.0% (min 40, max 40), memory util 20.0%, memory 10240/81920 MiB, "
                      "power 100.0 W, SM clock 1410 MHz, memory clock 2619 MHz, temp 40 C\n", text)
        self.assertIn("GPU 1: util 50.0% (min 50, max 50), memory util 25.0%, memory 11264/81920 MiB, "
                      "power 150.0 W, SM clock 1411 MHz, memory clock 2619 MHz, temp 41 C\n", text)
        self.assertRegex(text, r"\nHost: CPU \d+\.\d%, memory \d+\.\d/\d+\.\d GiB used, "
                              r"net rx [\d.]+ MB/s tx [\d.]+ MB/s(, disk read [\d.]+ MB/s write [\d.]+ MB/s)?\n")
        self.assertNotIn("process", text)
        self.assertTrue(text.startswith("profd monitor on "), text)
        res = r.monitor_result
        self.assertEqual(res.response_type, UTIL_IDLE)
        self.assertAlmostEqual(res.device_idle_time_percent, 100 - (40 + 50) / 2)
        self.assertEqual(res.matrix_unit_utilization_percent, 0)

    def test_level_2_lists_processes(self):
        pid = self.job.pid
        text = N.monitor(self.d, 700, level=2).data
        self.assertRegex(text, rf"GPU 0: .*\n  process {pid} sleep: gpu memory 1024 MiB, sm 20\.0%, "
                               rf"memory util 10\.0%(, cpu \d+\.\d%)?, rss \d+ MiB, threads 1\n")

    def test_level_2_says_why_no_process_is_listed(self):
        with N.daemon(FAKE_NVML_GPUS=1) as d:
            self.assertNotIn("Processes:", N.monitor(d, 300, level=1).data)
            text = N.monitor(d, 300, level=2).data
        self.assertIn("\nProcesses: none (NVML lists no process on any GPU in this window)\n", text)
        with N.daemon(FAKE_NVML_INIT_FAIL=1) as d:
            text = N.monitor(d, 300, level=2).data
        self.assertIn("\nProcesses: none known (no GPU reported, so no NVML process list)\n", text)

    def test_timestamp_prefix(self):
        text = N.monitor(self.d, 200, timestamp=True).data
        self.assertRegex(text, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z profd monitor on ")

    def test_zero_duration_means_one_second(self):
        t0 = time.time()
        r = N.monitor(self.d, 0)
        self.assertGreaterEqual(time.time() - t0, 0.95)
        m = re.search(r"on \S+: (\d+) ms window", r.data)
        self.assertTrue(m, r.data)
        self.assertAlmostEqual(int(m.group(1)), 1000, delta=60)

    def test_longer_than_max_duration_is_invalid(self):
        with self.assertRaises(grpc.RpcError) as e:
            N.monitor(self.d, 5000)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("--max-duration", e.exception.details())

    def test_monitor_during_a_capture_shares_the_collectors(self):
        out = {}

        def cap():
            out["x"] = N.capture(self.d, 1500)

        t = threading.Thread(target=cap)
        t.start()
        time.sleep(0.3)
        r = N.monitor(self.d, 500)
        t.join()
        self.assertEqual(r.monitor_result.response_type, UTIL_IDLE)
        self.assertIn("GPU 0: util 40.0%", r.data)
        cs = N.counters(N.plane(out["x"], "/device:GPU:0"))
        st = N.plane_stats(N.plane(out["x"], "Task Environment"))
        end_ps = (st["profile_stop_time"] - st["profile_start_time"]) * 1000
        ts = [t for t, _ in cs["gpu_util_pct"]]
        # The capture's counters cover all of it, before and after the monitor.
        self.assertLess(min(ts), end_ps * 0.1)
        self.assertGreater(max(ts), end_ps * 0.9)
        self.assertGreaterEqual(len(ts), 60)


class Variants(unittest.TestCase):
    def test_without_nvml(self):
        with N.daemon(lib="/nonexistent/libnvidia-ml.so.1") as d:
            r = N.monitor(d, 200)
            self.assertIn("GPU: none reported\n", r.data)
            self.assertIn("Warning: no GPU counters: /nonexistent/libnvidia-ml.so.1 not found "
                          "(install the NVIDIA driver)", r.data)
            self.assertEqual(r.monitor_result.response_type, EMPTY)

    def test_gpm_gives_matrix_unit_utilization(self):
        with N.daemon(FAKE_NVML_GPUS=2, FAKE_NVML_UTIL=10, FAKE_NVML_GPM=1) as d:
            r = N.monitor(d, 800)
            self.assertAlmostEqual(r.monitor_result.matrix_unit_utilization_percent, (5 + 6) / 2)
            self.assertAlmostEqual(r.monitor_result.device_idle_time_percent, 100 - 15)
            self.assertIn("tensor active 5.0%", r.data)
            self.assertIn("SM active 2.0%", r.data)

    def test_lost_gpu_is_in_the_text(self):
        with N.daemon(FAKE_NVML_GPUS=2, FAKE_NVML_LOSE_GPU=0, FAKE_NVML_LOSE_AFTER=60) as d:
            r = N.monitor(d, 600)
            self.assertRegex(r.data, r"Warning: GPU 0 \(.*\) was lost during the capture")
            self.assertEqual(r.monitor_result.response_type, UTIL_IDLE)


if __name__ == "__main__":
    unittest.main(verbosity=2)
