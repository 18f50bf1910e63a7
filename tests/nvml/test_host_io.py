# SPDX-License-Identifier: MIT
"""host.io rates from a fake /proc whose counters grow at known rates."""
import os
import re
import shutil
import statistics
import tempfile
import threading
import time
import unittest

import nvmltest as N

NET = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: {lo} 1 0 0 0 0 0 0 {lo} 1 0 0 0 0 0 0
  eth0: {rx} 1 0 0 0 0 0 0 {tx} 1 0 0 0 0 0 0
"""
DISK = """   8       0 sda 1 0 {rd} 0 1 0 {wr} 0 0 0 0 0 0 0 0 0 0
   8       1 sda1 1 0 {rd} 0 1 0 {wr} 0 0 0 0 0 0 0 0 0 0
"""


class FakeProc:
    """net/dev and diskstats under a temp root, rewritten every 10 ms:
    eth0 receives 1 MB/s and sends 2 MB/s; sda reads 512 KB/s and writes
    1 MB/s (in 512-byte sectors); lo moves 100 MB/s and must not count."""

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="profd-proc-")
        os.makedirs(os.path.join(self.root, "net"))
        self.t0 = time.monotonic()
        self.stop = False
        self.write()
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def put(self, name, text):
        tmp = os.path.join(self.root, name + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(self.root, name))

    def write(self):
        ms = int((time.monotonic() - self.t0) * 1000) + 1
        self.put("net/dev", NET.format(lo=ms * 100000, rx=ms * 1000, tx=ms * 2000))
        self.put("diskstats", DISK.format(rd=ms, wr=ms * 2))

    def run(self):
        while not self.stop:
            self.write()
            time.sleep(0.01)

    def close(self):
        self.stop = True
        self.th.join()
        shutil.rmtree(self.root)


class HostIo(unittest.TestCase):
    def test_rates_from_counter_deltas(self):
        fp = FakeProc()
        try:
            with N.daemon("--proc-root", fp.root, "--host-sample-hz", "20", FAKE_NVML_GPUS=1) as d:
                x = N.capture(d, 1500)
                text = N.monitor(d, 1000).data
        finally:
            fp.close()
        cs = N.counters(N.plane(x, "/host:CPU"))
        for name, rate in (("net_rx_bytes_per_s", 1e6), ("net_tx_bytes_per_s", 2e6),
                           ("disk_read_bytes_per_s", 512e3), ("disk_write_bytes_per_s", 1024e3)):
            v = N.values(cs, name)
            self.assertGreaterEqual(len(v), 15, (name, v))
            # The median: the fake's writer, stalled on a loaded machine, makes
            # a flat interval and then a spike (CI saw one 10x the rate as the
            # window's last point pull the mean 28 % high).
            self.assertAlmostEqual(statistics.median(v), rate, delta=rate * 0.2, msg=(name, v))
        # Monitor prints the same rates (no stat/meminfo in this /proc: no CPU, memory).
        m = re.search(r"\nHost: net rx ([\d.]+) MB/s tx ([\d.]+) MB/s, disk read ([\d.]+) MB/s "
                      r"write ([\d.]+) MB/s\n", text)
        self.assertTrue(m, text)
        for got, want in zip(m.groups(), (1.0, 2.0, 0.512, 1.024)):
            self.assertAlmostEqual(float(got), want, delta=want * 0.25, msg=text)
        # A /proc without the GPU process: nothing per process, and no crash.
        self.assertFalse([k for k in cs if k.startswith("process ")])

    def test_unavailable_without_proc(self):
        root = tempfile.mkdtemp(prefix="profd-noproc-")
        try:
            with N.daemon("--proc-root", root, FAKE_NVML_GPUS=1) as d:
                x = N.capture(d, 300)
                # Other collectors may still create /host:CPU; host.io adds nothing to it.
                host = N.plane(x, "/host:CPU")
                names = N.counters(host) if host is not None else {}
                self.assertFalse([k for k in names if k.startswith(("net_", "disk_"))], names)
                self.assertTrue(N.values(N.counters(N.plane(x, "/device:GPU:0")), "gpu_util_pct"))
                self.assertIn("host.io: unavailable", d.log())
                self.assertTrue([w for w in x.warnings if w.startswith("no host I/O counters: ")
                                 and "net/dev is not readable" in w], list(x.warnings))
        finally:
            shutil.rmtree(root)


if __name__ == "__main__":
    unittest.main(verbosity=2)
