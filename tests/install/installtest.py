# SPDX-License-Identifier: MIT
"""Shared helpers for the install suite (tests/install).

These tests check what an operator gets: `meson install` trees, the
container image's build steps, the Kubernetes manifests, and the agent
path the installed profd recommends. meson passes PROFD, PROFCTL,
PROFD_SRC and PROFD_BUILD (tests/meson.build).
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import testtmp  # noqa: F401  (every temporary directory under one root, removed at exit)

SRC = os.environ.get("PROFD_SRC", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("PROFD_BUILD", os.path.join(SRC, "build"))
PROFD = os.environ.get("PROFD", os.path.join(BUILD, "daemon", "profd"))
PROFCTL = os.environ.get("PROFCTL", os.path.join(BUILD, "tools", "profctl"))

HINT_RE = re.compile(r"agents connect to \S+ \([^)]*\); (.*)$", re.M)


def config_h(name):
    """The value of a #define in the build's config.h (None when absent)."""
    with open(os.path.join(BUILD, "config.h")) as f:
        m = re.search(r"^#define %s (.*)$" % re.escape(name), f.read(), re.M)
    return m.group(1).strip() if m else None


class Profd:
    """A profd binary run on loopback with its own agent socket; the hint it
    logs for loading the agent is .hint. Use as a context manager."""

    def __init__(self, exe, env=None, args=(), timeout=20):
        self.tmp = tempfile.TemporaryDirectory(prefix="profd-install-")
        self.log_path = os.path.join(self.tmp.name, "profd.log")
        e = dict(os.environ)
        e.pop("PROFD_AGENT_PATH", None)
        e.update(env or {})
        cmd = [exe, "--listen", "127.0.0.1:0", "--agent-socket", os.path.join(self.tmp.name, "a.sock"),
               "--log-level", "info"] + list(args)
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=e)
        deadline = time.time() + timeout
        while time.time() < deadline:
            text = self.log()
            if "ready on" in text:
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"{exe} exited {self.proc.returncode}:\n{text}")
            time.sleep(0.02)
        else:
            self.proc.kill()
            raise RuntimeError(f"{exe} did not become ready:\n{self.log()}")
        self.port = int(re.search(r"listening on \S+ \(port (\d+)\)", text).group(1))
        self.addr = f"127.0.0.1:{self.port}"
        m = HINT_RE.search(text)
        self.hint = m.group(1) if m else None

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def agent_path(self):
        """The path in "CUDA_INJECTION64_PATH=<path>", or None."""
        m = re.search(r"CUDA_INJECTION64_PATH=(/\S+)", self.hint or "")
        return m.group(1) if m else None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        text = self.log()
        self.tmp.cleanup()
        # A clean stop, and no sanitizer report on the way out.
        if exc[0] is None and self.proc.returncode != 0:
            raise AssertionError(f"profd exited {self.proc.returncode}:\n{text}")


def main():
    """unittest.main, but exit 77 (meson: skipped) when every test skipped."""
    prog = unittest.main(verbosity=2, exit=False)
    r = prog.result
    if r.testsRun and len(r.skipped) == r.testsRun:
        sys.exit(77)
    sys.exit(0 if r.wasSuccessful() else 1)
