#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tools/bootstrap end to end, into a temporary PREFIX and build directory:
with --no-start it builds and installs and returns; without, it starts the
INSTALLED profd in the foreground, and the agent path that profd prints
exists. Skips where a package tools/install-deps would install
is missing (the test never runs apt-get)."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from installtest import SRC, Profd, main


def missing_packages():
    with open(os.path.join(SRC, "tools", "install-deps")) as f:
        pkgs = re.search(r'PKGS="([^"]*)"', f.read()).group(1).replace("\\", " ").split()
    if not shutil.which("dpkg-query"):
        return pkgs
    return [p for p in pkgs if "ok installed" not in subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True).stdout]


class Bootstrap(unittest.TestCase):
    def test_bootstrap_starts_the_installed_profd_whose_agent_path_exists(self):
        missing = missing_packages()
        if missing:
            self.skipTest("tools/install-deps would install " + " ".join(missing))
        with tempfile.TemporaryDirectory(prefix="profd-bootstrap-") as t:
            prefix, build = os.path.join(t, "prefix"), os.path.join(t, "build")
            env = dict(os.environ, PREFIX=prefix, BUILD=build)
            env.pop("PROFD_AGENT_PATH", None)
            bootstrap = os.path.join(SRC, "tools", "bootstrap")
            # --no-start: installed, and the command returns (for systemd).
            r = subprocess.run([bootstrap, "--no-start"], env=env, capture_output=True, text=True,
                               timeout=900)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            self.assertIn("not started (--no-start)", r.stderr)
            self.assertTrue(os.access(os.path.join(prefix, "sbin", "profd"), os.X_OK))
            # Then the same build started: nothing left to build.
            with Profd(bootstrap, env={"PREFIX": prefix, "BUILD": build}, timeout=900) as d:
                exe = os.readlink(f"/proc/{d.proc.pid}/exe")
                self.assertTrue(exe.startswith(prefix + "/") and exe.endswith("/profd"), exe)
                with open(os.path.join(build, "config.h")) as f:
                    has_agent = "#define HAVE_CUPTI_AGENT 1" in f.read()
                if has_agent:
                    self.assertTrue(d.agent_path() and d.agent_path().startswith(prefix + "/"), d.hint)
                    self.assertTrue(os.path.isfile(d.agent_path()), d.agent_path())
                else:
                    self.assertIn("built without libprofd-agent.so", d.hint)
                # The man pages came with it.
                self.assertTrue(os.path.isfile(os.path.join(prefix, "share", "man", "man8", "profd.8")))


if __name__ == "__main__":
    main()
