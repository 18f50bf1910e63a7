# SPDX-License-Identifier: MIT
"""Small helpers shared by the integration tests (not a test itself)."""
import time

import grpc

import profdtest as T

P = T.protos()


status = T.status  # profd.Profd/Status over a fresh channel


def wait_active(addr, n, timeout=5.0):
    """Poll Status until active_sessions == n; returns the last value seen."""
    end = time.time() + timeout
    while True:
        v = status(addr).active_sessions
        if v == n or time.time() > end:
            return v
        time.sleep(0.02)


def wait_log(d, text, timeout=5.0):
    """Wait until the daemon log contains @text; returns whether it did."""
    end = time.time() + timeout
    while text not in d.log():
        if time.time() > end:
            return False
        time.sleep(0.02)
    return True


def rpc_error(fn, *a, **kw):
    """Call @fn, expecting a grpc.RpcError; returns it (or raises AssertionError)."""
    try:
        fn(*a, **kw)
    except grpc.RpcError as e:
        return e
    raise AssertionError("expected an RPC error, the call succeeded")


def main():
    """unittest.main() for a test file, except that the process exits 77
    (meson's "skipped") when every test in it skipped, so that a missing tool
    shows as SKIP rather than a pass that checked nothing."""
    import sys
    import unittest

    prog = unittest.main(verbosity=2, exit=False)
    r = prog.result
    if r.testsRun and len(r.skipped) == r.testsRun and r.wasSuccessful():
        sys.exit(77)
    sys.exit(0 if r.wasSuccessful() else 1)
