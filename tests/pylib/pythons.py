# SPDX-License-Identifier: MIT
"""The Python interpreters the Python-stack tests run under.

Debian's python3 (/usr/bin/python3, 3.11 on bookworm: the README's
install) always; besides, every interpreter found among
  - PROFD_TEST_PYTHONS (paths, separated by ':' or blanks),
  - python3.X on PATH (a version manager's shim that does not start is
    passed over),
  - a pyenv install's versions (PYENV_ROOT, else ~/.pyenv): its
    versions/*/bin/python3.X, which run without the shims,
so a machine that has other CPythons tests them and one that has none
skips those cases (each test says which).
"""
import glob
import os
import shutil
import subprocess

SYSTEM = "/usr/bin/python3"
MINORS = (9, 10, 11, 12, 13, 14)


def candidates():
    out = [SYSTEM] + os.environ.get("PROFD_TEST_PYTHONS", "").replace(":", " ").split()
    out += [shutil.which("python3.%d" % m) for m in MINORS]
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    out += sorted(glob.glob(os.path.join(root, "versions", "*", "bin", "python3.*[0-9]")))
    return [c for c in out if c]


def describe(path):
    """(version "3.X.Y", free-threaded, debug) of an interpreter that starts, else None."""
    try:
        r = subprocess.run([path, "-c", "import sys, sysconfig; print('%d.%d.%d' % sys.version_info[:3], "
                            "bool(sysconfig.get_config_var('Py_GIL_DISABLED')), hasattr(sys, 'gettotalrefcount'))"],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0 or len(r.stdout.split()) != 3:
        return None  # e.g. a pyenv shim for a version not selected
    v, ft, dbg = r.stdout.split()
    return v, ft == "True", dbg == "True"


_found = None


def found():
    """({minor: path} of the first plain (not free-threaded, not debug)
    CPython 3.X found for each minor, [(path, version, ft, debug)] of the
    rest: other builds, older or newer versions, duplicates excluded)."""
    global _found
    if _found is None:
        plain, others, seen = {}, [], set()
        for c in candidates():
            real = os.path.realpath(c)
            if real in seen or not os.access(c, os.X_OK):
                continue
            seen.add(real)
            d = describe(c)
            if d is None:
                continue
            v, ft, dbg = d
            minor = int(v.split(".")[1]) if v.startswith("3.") else -1
            if not ft and not dbg and minor not in plain:
                plain[minor] = c
            elif ft or dbg:
                others.append((c, v, ft, dbg))
        _found = (plain, others)
    return _found


def sanitizer_env(lib, env):
    """@env for an interpreter that will load @lib: when @lib is built with
    ASan/UBSan (the suite's sanitized phase), its runtimes preloaded (an
    uninstrumented interpreter does not load them first, and ASan refuses
    to start otherwise) and leak checks off (the interpreter's own
    allocations are not ours to check). @env unchanged otherwise."""
    try:
        out = subprocess.run(["ldd", lib], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return env
    libs = [ln.split("=>")[1].split()[0] for ln in out.splitlines()
            if "=>" in ln and ("libasan" in ln or "libubsan" in ln)]
    if libs:
        env = dict(env, LD_PRELOAD=":".join(libs), ASAN_OPTIONS=env.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    return env
