# SPDX-License-Identifier: MIT
"""One rule for who sees command lines (docs/security.md, issue 26 hole 2):
with any access option set, a caller that is not authenticated gets pid and
process name only, in every reply that names processes: Profile's XSpace
(NVML's `gpu_processes`, the per-process counters, warnings), Status's
agents and Monitor's text. A token holder sees them; with no access option
everyone does, as before. A secret sits in the command line of a GPU job
the fake NVML lists and of a fake agent; the bytes of each reply are
searched for it."""
import os
import subprocess
import sys
import tempfile
import unittest

import profdtest as T

FAKE = os.environ["FAKE_AGENT"]
FAKE_NVML = os.environ["FAKE_NVML_LIB"]
P = T.protos()
SECRET = b"--db-password=hunter2"
TOKEN = "tok-5e1c7d0a93"
UUID = "GPU-fake0000-0000-0000-0000-000000000000"


class CmdlineRedaction(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="profd-cmd-")
        cls.token = os.path.join(cls.tmp, "token")
        with open(cls.token, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(cls.token, 0o600)
        # The GPU job NVML lists: its /proc/PID/cmdline carries the secret.
        cls.job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)",
                                    SECRET.decode()])

    @classmethod
    def tearDownClass(cls):
        cls.job.kill()
        cls.job.wait()

    def replies(self, *args, metadata=None):
        """Profile, Status and Monitor (level 2) replies as bytes, with the
        job on GPU 0 and a fake agent whose own command line has the secret."""
        sock = os.path.join(tempfile.mkdtemp(dir=self.tmp), "agent.sock")
        env = {"FAKE_NVML_GPUS": "1", "FAKE_NVML_PROCS": f"0:{self.job.pid}:1024"}
        with T.Daemon("--agent-socket", sock, "--nvml-library", FAKE_NVML, *args, env=env) as d:
            agent = subprocess.Popen([FAKE, "--socket", sock, "--devices", UUID, "--name", "trainer",
                                      "--captures", "2", "--", SECRET.decode()],
                                     stdout=subprocess.PIPE, text=True)
            try:
                self.assertEqual(agent.stdout.readline().strip(), "connected")
                with T.channel(d.addr) as ch:
                    kw = {"metadata": metadata} if metadata else {}
                    status = T.stub(ch, "Status", P.profd.StatusRequest, P.profd.StatusResponse,
                                    service="profd.Profd")
                    st = T.wait_for(lambda: (lambda r: r if r.agents else None)(
                        status(P.profd.StatusRequest(), timeout=5, **kw)), timeout=10)
                    self.assertTrue(st, "the fake agent never showed up in Status")
                    prof = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)(
                        T.profile_request(P, 700, f"localhost:{d.port}", session_id="cmd"), timeout=30, **kw)
                    mon = T.stub(ch, "Monitor", P.ps.MonitorRequest, P.ps.MonitorResponse)(
                        P.ps.MonitorRequest(duration_ms=500, monitoring_level=2), timeout=30, **kw)
            finally:
                agent.kill()
                agent.wait()
                agent.stdout.close()
        x = T.decode_xspace(P, prof.tool_data[0].data)
        gpu = [p for p in x.planes if p.name == "/device:GPU:0"]
        self.assertTrue(gpu, [p.name for p in x.planes])
        stats = {gpu[0].stat_metadata[s.metadata_id].name: s.str_value for s in gpu[0].stats}
        return {"Profile": prof.SerializeToString(), "Status": st.SerializeToString(),
                "Monitor": mon.SerializeToString()}, stats["gpu_processes"], st.agents[0], mon.data

    def test_unauthenticated_caller_gets_pid_and_name_only(self):
        replies, procs, agent, text = self.replies("--allow-from", "127.0.0.0/8")
        for what, data in replies.items():
            self.assertFalse(SECRET in data, f"{what} reply carries the secret")
        self.assertIn(f"{self.job.pid} python3 gpu_mem=1024MiB", procs)
        self.assertEqual((agent.name, agent.cmdline), ("trainer", ""))
        self.assertIn(f"process {self.job.pid} python3", text)

    def test_token_holder_sees_command_lines(self):
        replies, procs, agent, _ = self.replies("--allow-from", "127.0.0.0/8", "--token-file", self.token,
                                                metadata=[("authorization", f"Bearer {TOKEN}")])
        self.assertIn(SECRET, replies["Profile"])
        self.assertIn(f"{self.job.pid} python3 (", procs)
        self.assertIn(SECRET.decode(), agent.cmdline)

    def test_no_access_option_shows_them_as_before(self):
        replies, procs, agent, _ = self.replies()
        self.assertIn(SECRET.decode(), procs)
        self.assertIn(SECRET.decode(), agent.cmdline)


if __name__ == "__main__":
    unittest.main(verbosity=2)
