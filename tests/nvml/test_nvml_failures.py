# SPDX-License-Identifier: MIT
"""NVML missing or failing: a clear warning in the XSpace, never a failed
capture, and profd keeps running (and exits 0)."""
import unittest

import profdtest as T
import nvmltest as N

P = N.P


def status(d):
    ch = T.channel(d.addr)
    st = T.stub(ch, "Status", P.profd.StatusRequest, P.profd.StatusResponse, service="profd.Profd")
    cs = {c.name: c for c in st(P.profd.StatusRequest(), timeout=10).collectors}
    ch.close()
    return cs


class Unavailable(unittest.TestCase):
    def check_unavailable(self, d, reason):
        x = N.capture(d, 300)
        warns = list(x.warnings)
        self.assertIn(f"no GPU counters: {reason}", warns)
        self.assertEqual([p.name for p in x.planes if p.name.startswith("/device:GPU:")], [])
        cs = status(d)
        self.assertFalse(cs["nvml"].available)
        self.assertEqual(cs["nvml"].reason, reason)
        self.assertTrue(cs["host.io"].available)
        # Still serving: a second capture works the same.
        self.assertIn(f"no GPU counters: {reason}", list(N.capture(d, 100).warnings))

    def test_no_library(self):
        with N.daemon(lib="/nonexistent/libnvidia-ml.so.1") as d:
            self.check_unavailable(
                d, "/nonexistent/libnvidia-ml.so.1 not found (install the NVIDIA driver)")
            self.assertIn("nvml: unavailable", d.log())

    def test_not_an_nvml_library(self):
        with N.daemon(lib="libc.so.6") as d:
            self.check_unavailable(d, "libc.so.6 lacks nvmlInit_v2 (driver too old for profd)")

    def test_driver_not_loaded(self):
        with N.daemon(FAKE_NVML_INIT_FAIL=1) as d:
            self.check_unavailable(
                d, "NVML did not start: Driver Not Loaded (is the NVIDIA kernel module loaded?)")

    def test_no_gpu(self):
        with N.daemon(FAKE_NVML_GPUS=0) as d:
            self.check_unavailable(d, "no NVIDIA GPU found by NVML")


class MidCapture(unittest.TestCase):
    def test_nvml_errors_mid_capture(self):
        # ~26 calls at start-up, then ~14 per 20 ms tick: fails ~0.3 s in.
        with N.daemon(FAKE_NVML_GPUS=2, FAKE_NVML_UTIL=40, FAKE_NVML_FAIL_AFTER=250) as d:
            x = N.capture(d, 1000)
            warns = list(x.warnings)
            self.assertTrue(any("GPU 0 counters incomplete: nvmlDeviceGetMemoryInfo failed: Unknown Error"
                                in w for w in warns), warns)
            self.assertTrue(any(w.startswith("GPU 1 counters incomplete:") for w in warns), warns)
            self.assertEqual(list(x.errors), [])
            # What came before the failure is kept; planes keep their capabilities.
            for i in (0, 1):
                p = N.plane(x, f"/device:GPU:{i}")
                self.assertEqual(N.plane_stats(p)["device_vendor"], "Nvidia")
                u = N.values(N.counters(p), "gpu_util_pct")
                self.assertTrue(5 <= len(u) < 45, len(u))
            # Each error is reported once per window, not once per tick.
            self.assertLess(len(warns), 30)
            # The next capture still answers, with the same warnings.
            x2 = N.capture(d, 300)
            self.assertTrue(any("counters incomplete" in w for w in x2.warnings))

    def test_gpu_falls_off_the_bus(self):
        with N.daemon(FAKE_NVML_GPUS=2, FAKE_NVML_UTIL=40, FAKE_NVML_LOSE_GPU=1,
                      FAKE_NVML_LOSE_AFTER=120) as d:
            x = N.capture(d, 1000)
            warns = list(x.warnings)
            lost = [w for w in warns if "was lost" in w]
            self.assertEqual(len(lost), 1, warns)
            self.assertTrue(lost[0].startswith(
                "GPU 1 (NVIDIA H100 80GB HBM3, GPU-fake0000-0000-0000-0000-000000000001) was lost "
                "during the capture ("), lost)
            self.assertIn("GPU is lost", lost[0])
            st = N.plane_stats(N.plane(x, "Task Environment"))
            end_ps = (st["profile_stop_time"] - st["profile_start_time"]) * 1000
            g0 = N.counters(N.plane(x, "/device:GPU:0"))["gpu_util_pct"]
            g1 = N.counters(N.plane(x, "/device:GPU:1"))["gpu_util_pct"]
            # GPU 0 goes on to the end; GPU 1 stops early.
            self.assertGreater(max(t for t, _ in g0), end_ps * 0.9)
            self.assertLess(max(t for t, _ in g1), end_ps * 0.8)
            self.assertEqual(N.plane_stats(N.plane(x, "/device:GPU:1"))["device_vendor"], "Nvidia")
            # Later windows still say so (the GPU is asked once per capture); GPU 0 still samples.
            x2 = N.capture(d, 300)
            self.assertEqual([w for w in x2.warnings if "lost" in w],
                             ["GPU 1 (NVIDIA H100 80GB HBM3, GPU-fake0000-0000-0000-0000-000000000001) "
                              "is still lost (GPU is lost); no counters for it in this capture"])
            self.assertTrue(N.values(N.counters(N.plane(x2, "/device:GPU:0")), "gpu_util_pct"))
            self.assertEqual(N.values(N.counters(N.plane(x2, "/device:GPU:1")), "gpu_util_pct"), [])


    def test_lost_gpu_that_answers_again_resumes(self):
        # Lost for one call only: the next capture asks it again and it answers.
        with N.daemon(FAKE_NVML_GPUS=2, FAKE_NVML_UTIL=40, FAKE_NVML_LOSE_GPU=1,
                      FAKE_NVML_LOSE_AFTER=120, FAKE_NVML_LOSE_FOR=1) as d:
            x = N.capture(d, 1000)
            self.assertEqual(len([w for w in x.warnings if "was lost" in w]), 1, list(x.warnings))
            x2 = N.capture(d, 500)
            warns = list(x2.warnings)
            self.assertEqual([w for w in warns if "lost" in w and "answers again" not in w], [], warns)
            self.assertIn("GPU 1 (NVIDIA H100 80GB HBM3, GPU-fake0000-0000-0000-0000-000000000001) "
                          "answers again after it was lost; its counters resume", warns)
            # Same plane, counters again.
            self.assertTrue(N.values(N.counters(N.plane(x2, "/device:GPU:1")), "gpu_util_pct"))
            self.assertEqual(N.plane_stats(N.plane(x2, "/device:GPU:1"))["gpu_uuid"],
                             "GPU-fake0000-0000-0000-0000-000000000001")
            # And the capture after that has nothing to say about it.
            self.assertEqual([w for w in N.capture(d, 200).warnings if "GPU 1" in w], [])


class Lifecycle(unittest.TestCase):
    def test_sigterm_with_an_nvml_call_that_never_returns(self):
        import os
        import tempfile
        import threading
        import time

        import grpc

        hang = os.path.join(tempfile.mkdtemp(prefix="profd-hang-"), "hang")
        d = N.daemon(FAKE_NVML_GPUS=2, FAKE_NVML_HANG_FILE=hang)
        errs = []

        def cap():
            try:
                N.capture(d, 10000)
            except grpc.RpcError as e:
                errs.append(e.code())

        t = threading.Thread(target=cap)
        t.start()
        time.sleep(0.5)
        open(hang, "w").close()  # the next NVML call blocks until the file is gone
        time.sleep(0.5)
        try:
            t0 = time.monotonic()
            rc = d.stop(timeout=15)
            took = time.monotonic() - t0
            t.join()
            self.assertEqual(rc, 0, d.log())
            self.assertLess(took, 5.0, d.log())
            self.assertIn("has not returned for 2000 ms; shutting down without waiting", d.log())
            self.assertEqual(errs, [grpc.StatusCode.UNAVAILABLE])
        finally:
            os.unlink(hang)
            os.rmdir(os.path.dirname(hang))

    def test_sigterm_during_capture_and_monitor_exits_cleanly(self):
        import threading
        import time

        import grpc

        d = N.daemon(FAKE_NVML_GPUS=4, FAKE_NVML_GPM=1)
        errs = []

        def call(f):
            try:
                f()
            except grpc.RpcError as e:
                errs.append(e.code())

        ts = [threading.Thread(target=call, args=(lambda: N.capture(d, 5000),)),
              threading.Thread(target=call, args=(lambda: N.monitor(d, 5000),))]
        for t in ts:
            t.start()
        time.sleep(1)
        rc = d.stop()
        for t in ts:
            t.join()
        self.assertEqual(rc, 0, d.log())
        self.assertEqual(sorted(errs, key=str), [grpc.StatusCode.UNAVAILABLE] * 2)
        self.assertNotIn("handles left open", d.log())


if __name__ == "__main__":
    unittest.main(verbosity=2)
