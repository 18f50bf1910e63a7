# SPDX-License-Identifier: MIT
"""One temporary root per test process, removed at exit.

Imported (for its effect) by every test helper module: from then on every
tempfile.mkdtemp() / mkstemp() / TemporaryDirectory() of the process lands
under one "profd-run-*" directory that is removed when the process exits,
also when a test failed half-way and never reached its own clean-up. A test
run therefore leaves nothing behind in /tmp. The root is short (sockets made
below it stay far from the 108-byte sun_path limit).
"""
import atexit
import os
import shutil
import tempfile

ROOT = tempfile.mkdtemp(prefix="profd-run-")
tempfile.tempdir = ROOT
_OWNER = os.getpid()


@atexit.register
def _remove():
    if os.getpid() == _OWNER:  # not a forked child of the test process
        shutil.rmtree(ROOT, ignore_errors=True)
