#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Meson's summary line for the agent: where it looked for CUPTI and why
each place did not qualify (collectors/cupti/meson.build). Each case is a
real `meson setup` of this source tree into a temporary directory."""
import glob
import os
import re
import subprocess
import tempfile
import unittest

from installtest import SRC, main


def setup(*opts, env=None):
    """`meson setup` with @opts; the summary's "CUPTI agent" value."""
    with tempfile.TemporaryDirectory(prefix="profd-cupti-") as tmp:
        e = dict(os.environ)
        for v in ("CUDA_HOME", "CUDA_PATH"):
            e.pop(v, None)
        e.update(env or {})
        r = subprocess.run(["meson", "setup", os.path.join(tmp, "b"), SRC, "-Dtests=disabled",
                            "-Dbench_peer=disabled", "-Dsystemd=disabled"] + list(opts),
                           capture_output=True, text=True, env=e, timeout=300)
        m = re.search(r"^\s*CUPTI agent\s*: (.*)$", r.stdout, re.M)
        return r.returncode, (m.group(1) if m else None), r.stdout + r.stderr


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
            rc, line, out = setup("-Dcupti_root=" + empty)
            self.assertEqual(rc, 0, out)
            self.assertEqual(line, f"no (looked in {empty}/include (no cupti.h), "
                                   f"{empty}/extras/CUPTI/include (no cupti.h); set -Dcupti_root=DIR)")

    def test_too_old_headers_are_called_too_old(self):
        # CUPTI 11.8's layout as Debian 12's libcupti-dev ships it: a cupti.h
        # without the CUDA 13 record structs the converter reads.
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "include"))
            for name, text in (("cuda.h", "#pragma once\n"),
                               ("cupti.h", "#pragma once\ntypedef struct { int x; } CUpti_ActivityKernel8;\n")):
                with open(os.path.join(root, "include", name), "w") as f:
                    f.write(text)
            rc, line, out = setup("-Dcupti_root=" + root)
            self.assertEqual(rc, 0, out)
            self.assertTrue(line.startswith(f"no (looked in {root}/include (too old"), line)
            self.assertIn("CUpti_ActivityKernel10", line)

    def test_enabled_without_headers_is_an_error_naming_the_places(self):
        with tempfile.TemporaryDirectory() as empty:
            rc, _, out = setup("-Dcupti=enabled", "-Dcupti_root=" + empty)
            self.assertNotEqual(rc, 0)
            self.assertIn(f"{empty}/include (no cupti.h)", out)

    def test_disabled_says_so(self):
        rc, line, out = setup("-Dcupti=disabled")
        self.assertEqual((rc, line), (0, "no (disabled by -Dcupti=disabled)"), out)

    def test_cuda_home_is_searched(self):
        inc = cuda13_headers()
        if not inc:
            self.skipTest("no CUDA 13 CUPTI headers on this machine")
        rc, line, out = setup(env={"CUDA_HOME": os.path.dirname(inc)})
        self.assertEqual((rc, line), (0, f"yes ({inc})"), out)


if __name__ == "__main__":
    main()
