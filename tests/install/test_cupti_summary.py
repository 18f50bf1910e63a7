#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Meson's summary lines for the agent (collectors/cupti/meson.build): the
agent is built everywhere from profd's own CUDA/CUPTI/NVTX declarations,
and the ABI check against NVIDIA's headers says where it found them, or
where it looked and why each place did not qualify. Each case is a real
`meson setup` of this source tree into a temporary directory."""
import glob
import os
import re
import subprocess
import tempfile
import unittest

from installtest import SRC, main


AGENT_YES = "yes (built from profd's own CUDA/CUPTI/NVTX declarations)"


def setup(*opts, env=None):
    """`meson setup` with @opts; the summary's "CUPTI agent" and "CUDA ABI
    check" values."""
    with tempfile.TemporaryDirectory(prefix="profd-cupti-") as tmp:
        e = dict(os.environ)
        for v in ("CUDA_HOME", "CUDA_PATH"):
            e.pop(v, None)
        e.update(env or {})
        r = subprocess.run(["meson", "setup", os.path.join(tmp, "b"), SRC, "-Dtests=disabled",
                            "-Dbench_peer=disabled", "-Dsystemd=disabled"] + list(opts),
                           capture_output=True, text=True, env=e, timeout=300)
        lines = [re.search(r"^\s*" + key + r"\s*: (.*)$", r.stdout, re.M)
                 for key in ("CUPTI agent", "CUDA ABI check")]
        return r.returncode, tuple(m.group(1) if m else None for m in lines), r.stdout + r.stderr


def cuda13_headers():
    """A local include dir with CUPTI 13 headers, or None."""
    for d in [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"] + sorted(glob.glob("/usr/local/cuda-1[3-9]*")):
        inc = os.path.join(d, "include") if d else ""
        try:
            with open(os.path.join(inc, "cupti_activity.h")) as f:
                if "CUpti_ActivityOverhead3" in f.read():
                    return inc
        except OSError:
            pass
    return None


class CuptiSummary(unittest.TestCase):
    def test_empty_cupti_root_names_where_it_looked(self):
        with tempfile.TemporaryDirectory() as empty:
            rc, (agent, abi), out = setup("-Dcupti_root=" + empty)
            self.assertEqual((rc, agent), (0, AGENT_YES), out)
            self.assertEqual(abi, f"no (looked in {empty}/include (no cupti.h), "
                                  f"{empty}/extras/CUPTI/include (no cupti.h); set -Dcupti_root=DIR)")

    def test_too_old_headers_are_called_too_old(self):
        # CUPTI 11.8's layout as Debian 12's libcupti-dev ships it: a cupti.h
        # without the CUDA 13 record structs profd declares. The agent is
        # built all the same; only the ABI check is off.
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "include"))
            for name, text in (("cuda.h", "#pragma once\n"),
                               ("cupti.h", "#pragma once\ntypedef struct { int x; } CUpti_ActivityKernel8;\n")):
                with open(os.path.join(root, "include", name), "w") as f:
                    f.write(text)
            rc, (agent, abi), out = setup("-Dcupti_root=" + root)
            self.assertEqual((rc, agent), (0, AGENT_YES), out)
            self.assertTrue(abi.startswith(f"no (looked in {root}/include (too old"), abi)
            self.assertIn("CUpti_ActivityKernel10", abi)

    def test_enabled_needs_no_cuda_headers(self):
        with tempfile.TemporaryDirectory() as empty:
            rc, (agent, abi), out = setup("-Dcupti=enabled", "-Dcupti_root=" + empty)
            self.assertEqual((rc, agent), (0, AGENT_YES), out)
            self.assertIn(f"{empty}/include (no cupti.h)", abi)

    def test_disabled_says_so(self):
        rc, lines, out = setup("-Dcupti=disabled")
        self.assertEqual((rc, lines), (0, ("no (disabled by -Dcupti=disabled)", "no (no agent)")), out)

    def test_cuda_home_is_searched(self):
        inc = cuda13_headers()
        if not inc:
            self.skipTest("no CUDA 13 CUPTI headers on this machine")
        rc, lines, out = setup(env={"CUDA_HOME": os.path.dirname(inc)})
        self.assertEqual((rc, lines), (0, (AGENT_YES, f"yes (CUDA 13 headers in {inc})")), out)


if __name__ == "__main__":
    main()
