# SPDX-License-Identifier: MIT
"""NVML and agents number GPUs the same way: a process's device is put on
the plane NVML gave that physical GPU, whatever its local ordinal; once
NVML has listed the machine's GPUs, a UUID it does not list is refused."""
import os
import subprocess
import tempfile
import unittest

import profdtest as T

FAKE = os.environ["FAKE_AGENT"]
FAKE_NVML = os.environ["FAKE_NVML_LIB"]
P = T.protos()


def uuid(i):
    return "GPU-fake0000-0000-0000-0000-%012d" % i


class AgentWithNvml(unittest.TestCase):
    def test_planes_follow_nvml_and_unknown_gpus_are_refused(self):
        tmp = tempfile.mkdtemp(prefix="profd-an-")
        sock = os.path.join(tmp, "agent.sock")
        with T.Daemon("--agent-socket", sock, "--nvml-library", FAKE_NVML, env={"FAKE_NVML_GPUS": "2"}) as d:
            # This process sees NVML's GPU 1 as its device 0, plus a GPU NVML never listed.
            a = subprocess.Popen([FAKE, "--socket", sock, "--devices", uuid(1) + ",GPU-bogus000-0000-0000-0000-000000000009",
                                  "--name", "rank1"], stdout=subprocess.PIPE, text=True)
            self.assertEqual(a.stdout.readline().strip(), "connected")
            with T.channel(d.addr) as ch:
                resp = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)(
                    T.profile_request(P, 500, "h:1"), timeout=30)
            a.wait(timeout=10)
            a.stdout.close()
            x = T.decode_xspace(P, resp.tool_data[0].data)
            planes = {p.name: p for p in x.planes}
            self.assertEqual(sorted(n for n in planes if n.startswith("/device:GPU:")),
                             ["/device:GPU:0", "/device:GPU:1"])
            streams = lambda p: [l for l in p.lines if l.name.startswith("Stream #")]
            self.assertEqual(streams(planes["/device:GPU:0"]), [])
            kernels = [e for l in streams(planes["/device:GPU:1"]) for e in l.events
                       if planes["/device:GPU:1"].event_metadata[e.metadata_id].name.startswith("fake_gemm")]
            self.assertEqual(len(kernels), 5)
            self.assertTrue([w for w in x.warnings if "GPU-bogus000" in w and "NVML does not list" in w],
                            list(x.warnings))

    def test_gpu_process_without_agent_is_named(self):
        """README's "no agent connected" warning with NVML up: one per GPU
        process NVML lists that has no agent, naming its pid, its name and
        both variables of the fix (the socket is not the default here);
        none for the process whose agent is connected."""
        tmp = tempfile.mkdtemp(prefix="profd-an-")
        sock = os.path.join(tmp, "agent.sock")
        job = subprocess.Popen(["sleep", "60"])
        # Started first: its pid goes into the fake NVML's process list; it
        # retries until profd's socket exists.
        a = subprocess.Popen([FAKE, "--socket", sock, "--devices", uuid(0), "--name", "withagent"],
                             stdout=subprocess.PIPE, text=True)
        try:
            with T.Daemon("--agent-socket", sock, "--nvml-library", FAKE_NVML,
                          env={"FAKE_NVML_GPUS": "1", "FAKE_NVML_PROCS": f"0:{job.pid}:100,0:{a.pid}:200"}) as d:
                self.assertEqual(a.stdout.readline().strip(), "connected")
                with T.channel(d.addr) as ch:
                    resp = T.stub(ch, "Profile", P.ps.ProfileRequest, P.ps.ProfileResponse)(
                        T.profile_request(P, 600, "h:1"), timeout=30)
            x = T.decode_xspace(P, resp.tool_data[0].data)
            w = [w for w in x.warnings if "no profd agent" in w]
            self.assertEqual(len(w), 1, list(x.warnings))
            self.assertTrue(w[0].startswith(f"no GPU data from pid {job.pid} (sleep): "), w[0])
            self.assertIn("CUDA_INJECTION64_PATH=", w[0])
            self.assertIn("PROFD_AGENT_SOCKET=" + sock, w[0])
            self.assertFalse([w for w in x.warnings if f"pid {a.pid} " in w], list(x.warnings))
        finally:
            for p in (job, a):
                p.kill()
                p.wait()
            a.stdout.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
