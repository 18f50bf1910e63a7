# SPDX-License-Identifier: MIT
"""NVML counters in a capture, against the fake NVML (tests/fake-nvml)."""
import unittest

import profdtest as T
import nvmltest as N

P = N.P


class Capture(N.JobCase):
    @classmethod
    def daemon_env(cls, job_pid):
        return [], dict(FAKE_NVML_GPUS=2, FAKE_NVML_UTIL=40,
                        FAKE_NVML_PROCS=f"0:{job_pid}:1024,1:{job_pid}:2048")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.x = N.capture(cls.d, 1000)

    def test_one_plane_per_gpu_numbered_in_nvml_order(self):
        for i in (0, 1):
            p = N.plane(self.x, f"/device:GPU:{i}")
            self.assertIsNotNone(p, [q.name for q in self.x.planes])
            self.assertEqual(p.id, i)
        self.assertIsNone(N.plane(self.x, "/device:GPU:2"))

    def test_capability_plane_stats(self):
        for i in (0, 1):
            s = N.plane_stats(N.plane(self.x, f"/device:GPU:{i}"))
            self.assertEqual(s["device_vendor"], "Nvidia")
            self.assertEqual(s["gpu_device_name"], "NVIDIA H100 80GB HBM3")
            self.assertEqual(s["clock_rate"], 1980 * 1000)          # kHz
            self.assertEqual(s["core_count"], 16896 // 128)         # SMs from cores, cc 9.0
            self.assertEqual(s["memory_size"], 80 << 30)
            self.assertEqual(s["memory_bandwidth"], 2 * 2619 * 10**6 * 5120 // 8)
            self.assertEqual(s["compute_cap_major"], 9)
            self.assertEqual(s["compute_cap_minor"], 0)
            self.assertEqual(s["gpu_uuid"], f"GPU-fake0000-0000-0000-0000-{i:012d}")
            self.assertEqual(s["gpu_pci_bus_id"], f"00000000:{i + 1:02X}:00.0")
            # Roofline peaks (collectors/gpu-peaks.c), Hopper: 4096 dense FP16 FLOPs/SM/clock.
            self.assertAlmostEqual(s["peak_teraflops_per_second"], 4096 * 132 * 1.98e9 / 1e12)
            self.assertAlmostEqual(s["peak_hbm_bw_gigabytes_per_second"], 2 * 2619e6 * 5120 / 8 / 1e9)

    def test_device_counters_have_the_fakes_values(self):
        for i in (0, 1):
            cs = N.counters(N.plane(self.x, f"/device:GPU:{i}"))
            expect = {
                "gpu_util_pct": 40 + 10 * i,
                "mem_util_pct": (40 + 10 * i) // 2,
                "memory_used_mib": (10 + i) * 1024,
                "memory_total_mib": 80 * 1024,
                "power_mw": 100000 + 50000 * i,
                "sm_clock_mhz": 1410 + i,
                "memory_clock_mhz": 2619,
                "gpu_temp_c": 40 + i,
                "pcie_tx_mib_s": 1.0 * (1 + i),
                "pcie_rx_mib_s": 2.0 * (1 + i),
            }
            for name, v in expect.items():
                got = N.values(cs, name)
                self.assertTrue(got, f"GPU {i}: no {name}; have {sorted(cs)}")
                self.assertEqual(set(got), {v}, f"GPU {i} {name}")
            # 50 Hz for 1 s, from the driver's 20 ms sample buffer.
            self.assertGreaterEqual(len(N.values(cs, "gpu_util_pct")), 35)
            self.assertGreaterEqual(len(N.values(cs, "memory_used_mib")), 35)
            # No GPM on this fake: no GPM counters.
            self.assertNotIn("sm_active_pct", cs)

    def test_counter_times_lie_in_the_window(self):
        env = N.plane(self.x, "Task Environment")
        st = N.plane_stats(env)
        dur_ps = (st["profile_stop_time"] - st["profile_start_time"]) * 1000
        for i in (0, 1):
            cs = N.counters(N.plane(self.x, f"/device:GPU:{i}"))
            ts = [t for series in cs.values() for t, _ in series]
            self.assertGreaterEqual(min(ts), 0)
            self.assertLessEqual(max(ts), dur_ps)
            # Spread over the window, not bunched at one end.
            self.assertLess(min(ts), dur_ps * 0.2)
            self.assertGreater(max(ts), dur_ps * 0.8)

    def test_processes_named_on_every_gpu(self):
        pid = self.job.pid
        for i, mib in ((0, 1024), (1, 2048)):
            p = N.plane(self.x, f"/device:GPU:{i}")
            s = N.plane_stats(p)
            self.assertIn(f"{pid} sleep (sleep 60) gpu_mem={mib}MiB", s["gpu_processes"])
            cs = N.counters(p)
            self.assertEqual(set(N.values(cs, f"process {pid} sleep gpu_mem_mib")), {mib})
            self.assertEqual(set(N.values(cs, f"process {pid} sleep sm_pct")), {20})
            self.assertEqual(set(N.values(cs, f"process {pid} sleep mem_util_pct")), {10})
            self.assertEqual(set(N.values(cs, f"process {pid} sleep threads")), {1})
            self.assertTrue(N.values(cs, f"process {pid} sleep rss_mib"))
            cpu = N.values(cs, f"process {pid} sleep cpu_pct")
            self.assertTrue(cpu)
            self.assertTrue(all(0 <= v < 50 for v in cpu), cpu)

    def test_host_io_counters_on_host_plane(self):
        p = N.plane(self.x, "/host:CPU")
        self.assertIsNotNone(p)
        cs = N.counters(p)
        with open("/proc/diskstats") as f:
            disks = [l.split()[2] for l in f if len(l.split()) > 2]
        for name in ("net_rx_bytes_per_s", "net_tx_bytes_per_s", "disk_read_bytes_per_s",
                     "disk_write_bytes_per_s"):
            if name.startswith("disk") and not any(
                    n.startswith(("sd", "vd", "xvd", "hd", "nvme", "mmcblk")) for n in disks):
                continue  # a machine with no whole disk we count
            self.assertTrue(N.values(cs, name), f"no {name}; have {sorted(cs)}")
            self.assertTrue(all(v >= 0 for v in N.values(cs, name)))
        self.assertTrue(N.values(cs, f"process {self.job.pid} sleep cpu_pct"), sorted(cs))

    def test_no_warnings_when_all_is_well(self):
        # The stand-in job uses both GPUs without the agent: one warning
        # (README's "no agent connected"), and nothing else.
        self.assertEqual([w.split(":")[0] for w in self.x.warnings], [f"no GPU data from pid {self.job.pid} (sleep)"])
        self.assertEqual(list(self.x.errors), [])


class Variants(unittest.TestCase):
    def test_polling_when_the_driver_keeps_no_samples(self):
        with N.daemon(FAKE_NVML_GPUS=1, FAKE_NVML_UTIL=30, FAKE_NVML_NO_SAMPLES=1) as d:
            cs = N.counters(N.plane(N.capture(d, 600), "/device:GPU:0"))
            self.assertEqual(set(N.values(cs, "gpu_util_pct")), {30})
            self.assertEqual(set(N.values(cs, "mem_util_pct")), {15})
            self.assertEqual(set(N.values(cs, "power_mw")), {100000})
            self.assertEqual(set(N.values(cs, "sm_clock_mhz")), {1410})
            self.assertGreaterEqual(len(N.values(cs, "gpu_util_pct")), 15)

    def test_polling_when_the_sample_buffer_stays_empty(self):
        with N.daemon(FAKE_NVML_GPUS=1, FAKE_NVML_UTIL=30, FAKE_NVML_NO_SAMPLES=2) as d:
            x = N.capture(d, 3000)
            cs = N.counters(N.plane(x, "/device:GPU:0"))
            st = N.plane_stats(N.plane(x, "Task Environment"))
            end_ps = (st["profile_stop_time"] - st["profile_start_time"]) * 1000
            u = cs.get("gpu_util_pct", [])
            self.assertTrue(u, sorted(cs))
            self.assertEqual({v for _, v in u}, {30})
            # Polled from about 2 s in.
            self.assertGreater(min(t for t, _ in u), end_ps * 0.5)
            self.assertGreaterEqual(len(u), 20)

    def test_gpm_metrics_on_hopper(self):
        with N.daemon(FAKE_NVML_GPUS=2, FAKE_NVML_GPM=1) as d:
            x = N.capture(d, 1000)
            for i in (0, 1):
                cs = N.counters(N.plane(x, f"/device:GPU:{i}"))
                # The fake reports metric id + GPU index.
                for name, mid in (("sm_active_pct", 2), ("sm_occupancy_pct", 3), ("tensor_active_pct", 5),
                                  ("dram_bw_util_pct", 10), ("fp64_active_pct", 11),
                                  ("fp32_active_pct", 12), ("fp16_active_pct", 13),
                                  ("pcie_tx_mib_s", 20), ("pcie_rx_mib_s", 21),
                                  ("nvlink_rx_mib_s", 60), ("nvlink_tx_mib_s", 61)):
                    self.assertEqual(set(N.values(cs, name)), {mid + i}, (i, name, sorted(cs)))

    def test_nvlink_throughput_from_field_counters(self):
        with N.daemon(FAKE_NVML_GPUS=1, FAKE_NVML_NVLINK=1) as d:
            cs = N.counters(N.plane(N.capture(d, 1200), "/device:GPU:0"))
            tx, rx = N.values(cs, "nvlink_tx_mib_s"), N.values(cs, "nvlink_rx_mib_s")
            self.assertTrue(tx and rx, sorted(cs))
            self.assertAlmostEqual(sum(tx) / len(tx), 100, delta=15)
            self.assertAlmostEqual(sum(rx) / len(rx), 200, delta=30)

    def test_eight_gpus_and_a_ramp(self):
        with N.daemon(FAKE_NVML_GPUS=8) as d:
            x = N.capture(d, 800)
            for i in range(8):
                p = N.plane(x, f"/device:GPU:{i}")
                self.assertIsNotNone(p)
                u = N.values(N.counters(p), "gpu_util_pct")
                self.assertTrue(all(0 <= v <= 99 for v in u))
                self.assertGreater(len(set(u)), 10, u)  # the fake's sawtooth moves

    def test_device_tracer_level_0_drops_gpu_planes(self):
        with N.daemon(FAKE_NVML_GPUS=1) as d:
            x = N.capture(d, 300, device_tracer_level=0)
            self.assertIsNone(N.plane(x, "/device:GPU:0"))
            # ...and says so: the NVML counters went with the plane (issue 27 item 10).
            said = [w for w in x.warnings if w.startswith("device_tracer_level=0:")]
            self.assertEqual(len(said), 1, list(x.warnings))
            self.assertIn("1 /device:GPU:* plane left out", said[0])
            self.assertIn("NVML counters", said[0])

    def test_status_reports_nvml_available(self):
        with N.daemon(FAKE_NVML_GPUS=1) as d:
            ch = T.channel(d.addr)
            st = T.stub(ch, "Status", P.profd.StatusRequest, P.profd.StatusResponse, service="profd.Profd")
            cs = {c.name: c for c in st(P.profd.StatusRequest(), timeout=10).collectors}
            ch.close()
            self.assertTrue(cs["nvml"].available)
            self.assertTrue(cs["host.io"].available)


if __name__ == "__main__":
    unittest.main(verbosity=2)
