# SPDX-License-Identifier: MIT
"""The real agent inside a job under valgrind: no invalid access and no
leak of the agent's own through captures, a finalize, an idle detach and
the job's exit (suite "valgrind": tools/run-tests runs it as the leak gate).

The job is the fake CUDA program on the fake CUPTI (tests/agent/fakecuda),
wrapped in valgrind; profd runs plain. Two captures: the first ends with a
CUDA call that finalizes CUPTI (slabs unmapped), the second samples
counters in an idle job, which is unsubscribed without finalize (a finalize
would take the stopped sampling object); then the job exits with the agent
connected.
"""
import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

import profdtest as T

P = T.protos()
APP = os.environ.get("FAKE_CUDA_APP", "")
AGENT = os.environ.get("PROFD_AGENT_SO", "")
VALGRIND = shutil.which("valgrind")


@unittest.skipUnless(AGENT and APP and VALGRIND, "the agent, the fake CUDA app or valgrind is missing")
class AgentUnderValgrind(unittest.TestCase):
    def test_captures_and_exit_are_clean(self):
        tmp = tempfile.mkdtemp(prefix="profd-agent-vg-")
        sock = os.path.join(tmp, "agent.sock")
        log = os.path.join(tmp, "valgrind.log")
        d = T.Daemon("--agent-socket", sock, "--flush-timeout", "5s", wrapper=[])
        stubs = T.Stubs(d.addr)
        env = dict(os.environ, CUDA_INJECTION64_PATH=AGENT, PROFD_AGENT_SOCKET=sock)
        app = subprocess.Popen(
            [VALGRIND, "--quiet", "--error-exitcode=99", "--leak-check=full",
             "--errors-for-leak-kinds=definite,indirect", "--show-leak-kinds=definite,indirect",
             "--log-file=" + log, APP],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            self.assertTrue(app.stdout.readline().startswith("ready"))

            def ask(cmd):
                app.stdin.write(cmd + "\n")
                app.stdin.flush()
                return app.stdout.readline().split()

            self.assertTrue(T.wait_for(lambda: len(stubs.status(P.profd.StatusRequest(), timeout=10).agents) == 1, 60))

            def capture(ms, work, pm=False):
                req = T.profile_request(P, ms, f"localhost:{d.port}")
                if pm:  # PM sampling (pmsample.c, the fake's sampler) under the same gate
                    req.opts.advanced_configuration["gpu_pm_sample_counters"].string_value = "default"
                    req.opts.advanced_configuration["gpu_pm_sample_interval_us"].int64_value = 20000
                out = {}
                t = threading.Thread(target=lambda: out.update(x=T.decode_xspace(P, stubs.profile(
                    req, timeout=120).tool_data[0].data)))
                t.start()
                time.sleep(ms / 2000)
                work()
                t.join()
                return out["x"]

            def kernels(x):
                return sum(1 for p in x.planes if p.name.startswith("/device:GPU:") for line in p.lines
                           for e in line.events if p.event_metadata[e.metadata_id].name.startswith("vecAdd"))

            # NVTX too: the agent as the job's NVTX tool (nvtx.c) under the same gate.
            # CUDA graph launches: the launch callback's exec id handed to the converter.
            def state():
                return {k: int(v) for k, v in (w.split("=") for w in ask("state"))}

            x = capture(3000, lambda: (ask("nvtx push train_step"), ask("launch 20 _Z6vecAddPKfS0_Pfi 0 7"),
                                       ask("graphn 3 2 vecAdd_graph_node 0 7"),
                                       ask("nvtx pop"), ask("busy 4000")))
            self.assertEqual(kernels(x), 26, list(x.warnings))
            self.assertTrue(T.wait_for(lambda: state()["finalizes"] == 1, 20), state())
            # Counters in the idle job: unsubscribed, not finalized (a
            # finalize would take the stopped sampling object with it).
            x = capture(3000, lambda: ask("launch 5 _Z6vecAddPKfS0_Pfi 1 7"), pm=True)
            self.assertEqual(kernels(x), 5, list(x.warnings))
            self.assertTrue([e for p in x.planes for line in p.lines if line.name == "_counters_"
                             for e in line.events if "__" in p.event_metadata[e.metadata_id].name],
                            list(x.warnings))
            self.assertTrue(T.wait_for(lambda: state()["unsubscribes"] == 2, 20), state())
            self.assertEqual(state()["finalizes"], 1)
            app.stdin.write("exit\n")
            app.stdin.flush()
            rc = app.wait(timeout=120)
            with open(log) as f:
                report = f.read()
            self.assertEqual(rc, 0, report)
            self.assertEqual(report.strip(), "", report)
        finally:
            if app.poll() is None:
                app.kill()
                app.wait()
            app.stdin.close()
            app.stdout.close()
            stubs.close()
            self.assertEqual(d.stop(), 0, d.log())
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
