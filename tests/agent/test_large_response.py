# SPDX-License-Identifier: MIT
"""A capture whose reply is hundreds of MB: 4 M GPU events from a fake agent,
fetched with profctl (the C-core client, receive limit raised like the TF
client's), written to disk and counted with `profctl top --json`.

The window is long and ended by Terminate once the fake agent has sent its
last event: a slow (sanitized, 2-core) machine takes longer to send them,
never fewer of them."""
import glob
import json
import os
import subprocess
import tempfile
import unittest

import profdtest as T

FAKE = os.environ["FAKE_AGENT"]
PROFCTL = os.environ["PROFCTL"]
EVENTS = 4_000_000


class LargeResponse(unittest.TestCase):
    def test_hundreds_of_mb_in_one_reply(self):
        tmp = tempfile.mkdtemp(prefix="profd-large-")
        sock = os.path.join(tmp, "agent.sock")
        with T.Daemon("--agent-socket", sock, "--log-level", "info") as d:
            fake = subprocess.Popen([FAKE, "--socket", sock, "--devices", "GPU-large000-0000-0000-0000-000000000001",
                                     "--name", "large", "--events", str(EVENTS), "--spread-ms", "2500"],
                                    stdout=subprocess.PIPE, text=True)
            self.assertEqual(fake.stdout.readline().strip(), "connected")
            logdir = os.path.join(tmp, "logs")
            cap = subprocess.Popen([PROFCTL, "capture", d.addr, "--logdir", logdir, "--duration-ms", "120000",
                                    "--session-id", "large", "--attempts", "1"],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            try:
                self.assertEqual(fake.stdout.readline().strip(), "started")
                # "stopped" instead: the window closed before the last event.
                self.assertEqual(fake.stdout.readline().strip(), "streamed")
                t = subprocess.run([PROFCTL, "terminate", d.addr, "large"], capture_output=True, text=True,
                                   timeout=30)
                self.assertEqual(t.returncode, 0, t.stdout + t.stderr)
                out = cap.communicate(timeout=300)[0]
            finally:
                if cap.poll() is None:
                    cap.kill()
                    cap.communicate()
            self.assertEqual(cap.returncode, 0, out)
            fake.wait(timeout=30)
            fake.stdout.close()
            (path,) = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
            size = os.path.getsize(path)
            self.assertGreater(size, 150 * 1000 * 1000)  # hundreds of MB in one gRPC reply
            top = subprocess.run([PROFCTL, "top", path, "--json", "-n", "0"], capture_output=True,
                                 text=True, timeout=120)
            self.assertEqual(top.returncode, 0, top.stderr)
            kernels = json.loads(top.stdout)["kernels"]
            self.assertEqual(sum(k["count"] for k in kernels), EVENTS)
            self.assertRegex(d.log(), rf"capture for \S+: \d+ events, {size} bytes")


if __name__ == "__main__":
    unittest.main(verbosity=2)
