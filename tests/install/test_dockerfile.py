#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""docker/Dockerfile without a container engine: run the build stage's RUN
steps on a copy of the source in a temporary directory (each absolute path
the stage uses mapped into it), assemble the final stage's files as its
COPY does, and check the image layout and its entrypoint: profd, profctl,
the agent (built from profd's own CUDA declarations, so always, with no
CUDA anywhere), the unit, man pages, a default config when the source
installs one, and the agent the entrypoint shares with jobs."""
import filecmp
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from installtest import SRC, Profd, main

DOCKERFILE = os.path.join(SRC, "docker", "Dockerfile")
AGENT = "libprofd-agent.so"
# Packages Debian's slim image already has (priority required).
SLIM_BASE = {"libc6", "libgcc-s1", "libstdc++6", "libsystemd0", "zlib1g"}


def instructions(path):
    """[(stage, INSTRUCTION, args)], continuation lines joined, comments dropped."""
    out, cur, stage = [], "", None
    with open(path) as f:
        for line in f:
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            if s.endswith("\\"):
                cur += s[:-1].strip() + " "
                continue
            cur += s
            word, _, rest = cur.partition(" ")
            word = word.upper()
            if word == "FROM":
                m = re.search(r"\s+AS\s+(\S+)$", rest, re.I)
                stage = m.group(1) if m else "final"
            out.append((stage, word, rest.strip()))
            cur = ""
    return out


def apt_packages(cmd):
    m = re.search(r"apt-get install ([^&]*)", cmd)
    return {w for w in m.group(1).split() if not w.startswith("-")} if m else set()


def install_deps_packages():
    """Every package tools/install-deps names, for any release or mode."""
    with open(os.path.join(SRC, "tools", "install-deps")) as f:
        lists = re.findall(r'PKGS="([^"]*)"', f.read())
    return {w for m in lists for w in m.replace("\\", " ").split() if not w.startswith("$")}


def image_release(stage="final"):
    """The Debian release of a stage's base image ("debian:12-slim" -> 12)."""
    with open(DOCKERFILE) as f:
        text = f.read()
    froms = re.findall(r"^FROM\s+debian:(\d+)\S*(?:\s+AS\s+(\S+))?\s*$", text, re.M | re.I)
    return next(int(rel) for rel, name in froms if (name or "final") == stage)


def as_in_image(pkg):
    """A package name as the final image's release spells it. Debian 13's
    64-bit time_t transition renamed libraries (libuv1 -> libuv1t64): on a
    newer host dpkg says the new name of the package the image has."""
    return pkg[:-3] if image_release() < 13 and pkg.endswith("t64") else pkg


def host_deps(pkg):
    """Depends and Pre-Depends of package @pkg (as the image names it) on
    this machine, where it may carry the t64 suffix, as the image names them."""
    for name in (pkg, pkg + "t64"):
        r = subprocess.run(["dpkg-query", "-W", "-f=${Depends}, ${Pre-Depends}", name],
                           capture_output=True, text=True)
        if r.returncode == 0:
            break
    names = (dep.strip().split(" ")[0].split(":")[0] for dep in re.split(r"[,|]", r.stdout))
    return {as_in_image(n) for n in names if n}


def copy_source(dst):
    """The build context: the source tree less VCS data and build directories."""
    def ignore(d, names):
        return [n for n in names if n == ".git" or n == "__pycache__" or
                os.path.isdir(os.path.join(d, n, "meson-private"))]
    shutil.copytree(SRC, dst, symlinks=True, ignore=ignore, dirs_exist_ok=True)


class Dockerfile(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="profd-docker-")
        t = cls.tmp.name
        cls.steps = instructions(DOCKERFILE)
        # Every absolute path the build stage names, mapped into the temp dir;
        # /opt/profd stays: it is the prefix, installed under DESTDIR=/out.
        paths = {"/src": "src", "/build": "build", "/out": "out"}
        cls.map = {k: os.path.join(t, v) for k, v in paths.items()}
        cls.ran, cls.build_apt, cls.final_apt = [], set(), set()
        cwd = t
        for stage, word, args in cls.steps:
            if stage != "build":
                continue
            if word == "WORKDIR":
                cwd = cls.mapped(args)
                os.makedirs(cwd, exist_ok=True)
            elif word == "COPY" and args == ". .":
                copy_source(cwd)
            elif word == "RUN" and "apt-get" in args:
                cls.build_apt |= apt_packages(args)
            elif word == "RUN":
                cmd = cls.mapped(args)
                r = subprocess.run(["sh", "-ec", cmd], cwd=cwd, capture_output=True, text=True, timeout=1100)
                if r.returncode != 0:
                    raise AssertionError(f"RUN {cmd} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
                cls.ran.append(cmd)
            elif word not in ("FROM", "ARG"):
                raise AssertionError(f"build stage: {word} {args} is not understood by this test")
        # The final stage, assembled.
        cls.root = os.path.join(t, "image")
        cls.env, cls.entrypoint = {}, None
        for stage, word, args in cls.steps:
            if stage != "final":
                continue
            if word == "COPY":
                m = re.fullmatch(r"--from=build (\S+) (\S+)", args)
                assert m, args
                src = cls.map["/out"] + m.group(1)[len("/out"):]
                shutil.copytree(src, cls.root + m.group(2), symlinks=True, dirs_exist_ok=True)
            elif word == "RUN":
                cls.final_apt |= apt_packages(args)
            elif word == "ENV":
                cls.env.update(dict(kv.split("=", 1) for kv in args.split()))
            elif word == "ENTRYPOINT":
                cls.entrypoint = json.loads(args)

    @classmethod
    def mapped(cls, text):
        return re.sub(r"(?<![\w.-])(/src|/build|/out)(?=/|\s|$)",
                      lambda m: cls.map[m.group(1)], text)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def img(self, *p):
        return os.path.join(self.root, *[x.lstrip("/") for x in p])

    def test_build_stage_ran_meson_setup_build_and_install(self):
        joined = "\n".join(self.ran)
        for step in ("meson setup", "ninja -C", "meson install"):
            self.assertIn(step, joined)

    def test_no_cuda_image_and_the_agent_is_required(self):
        # The agent is built from profd's own declarations: no stage may pull
        # a CUDA image for headers, and -Dcupti=enabled makes a build that
        # cannot produce the agent fail instead of shipping an image without it.
        stages = {st for st, w, a in self.steps if w == "FROM"}
        self.assertEqual(stages, {"build", "final"})
        for st, w, a in self.steps:
            self.assertNotRegex(f"{w} {a}", r"(?i)nvidia/cuda|--from=cuda|cupti_root|/cuda\b")
        (setup,) = [a for st, w, a in self.steps if st == "build" and w == "RUN" and "meson setup" in a]
        self.assertIn("-Dcupti=enabled", setup.split())

    def test_build_stage_packages_are_those_install_deps_knows(self):
        self.assertTrue(self.build_apt)
        self.assertFalse(self.build_apt - install_deps_packages() - {"ca-certificates"})

    def test_image_layout(self):
        for exe in ("/opt/profd/sbin/profd", "/opt/profd/bin/profctl", "/opt/profd/libexec/profd-entrypoint"):
            self.assertTrue(os.access(self.img(exe), os.X_OK), exe)
        self.assertTrue(os.path.isfile(self.img("/opt/profd/lib", AGENT)))
        self.assertTrue(os.path.isfile(self.img("/opt/profd/lib/systemd/system/profd.service")))
        self.assertTrue(os.path.isfile(self.img("/opt/profd/share/man/man8/profd.8")))
        self.assertTrue(os.path.isfile(self.img("/opt/profd/share/man/man1/profctl.1")))
        self.assertEqual(self.entrypoint, ["/opt/profd/libexec/profd-entrypoint"])
        # The default config (generated by `profd --default-config`).
        configs = [p for p in glob.glob(self.img("/opt/profd/etc/**/profd.conf"), recursive=True)]
        self.assertEqual(len(configs), 1, configs)

    def test_runtime_packages_cover_what_the_binaries_link(self):
        if not shutil.which("dpkg-query") or not shutil.which("readelf"):
            self.skipTest("needs dpkg-query and readelf")
        # The image's own package set, named as its release names them; the
        # libraries' owners on this machine (which may run a newer release)
        # are translated to those names before they are looked up in it.
        have = set(self.final_apt) | SLIM_BASE
        todo = list(have)
        while todo:  # what apt would pull in with them
            for name in host_deps(todo.pop()) - have:
                have.add(name)
                todo.append(name)
        bins = [self.img("/opt/profd/sbin/profd"), self.img("/opt/profd/bin/profctl"),
                self.img("/opt/profd/lib", AGENT)]
        for b in bins:
            needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", subprocess.run(
                ["readelf", "-d", b], capture_output=True, text=True, check=True).stdout)
            ldd = subprocess.run(["ldd", b], capture_output=True, text=True).stdout
            for lib in needed:
                if lib.startswith("ld-linux"):
                    continue  # the dynamic loader: libc6
                m = re.search(r"^\s*%s => (\S+)" % re.escape(lib), ldd, re.M)
                self.assertTrue(m, f"{b}: {lib} not found on this machine")
                owner = subprocess.run(["dpkg-query", "-S", os.path.realpath(m.group(1))],
                                       capture_output=True, text=True).stdout.split(":")[0]
                if not owner:  # /lib -> /usr/lib merged paths
                    owner = subprocess.run(["dpkg-query", "-S", m.group(1)],
                                           capture_output=True, text=True).stdout.split(":")[0]
                self.assertIn(as_in_image(owner), have, f"{os.path.basename(b)} needs {lib} from {owner}, "
                                                      "which the final stage does not install")

    def test_header_shows_how_to_run_next_to_jobs(self):
        with open(DOCKERFILE) as f:
            header = f.read().split("\nFROM ")[0]
        d = self.env.get("PROFD_AGENT_DIR")
        self.assertTrue(d)
        for want in ("--gpus all", "--pid host", "-p 6009:6009", f"-v {d}:{d}",
                     f"CUDA_INJECTION64_PATH={d}/{AGENT}"):
            self.assertIn(want, header)

    def test_entrypoint_shares_the_agent_and_profd_recommends_that_copy(self):
        # The entrypoint with the image's /opt/profd relocated here.
        with open(self.img("/opt/profd/libexec/profd-entrypoint")) as f:
            script = f.read().replace("/opt/profd", self.img("/opt/profd"))
        ep = os.path.join(self.tmp.name, "entrypoint.sh")
        with open(ep, "w") as f:
            f.write(script)
        os.chmod(ep, 0o755)
        shared = os.path.join(self.tmp.name, "run-profd")
        with Profd(ep, env={"PROFD_AGENT_DIR": shared}) as d:
            self.assertEqual(d.agent_path(), os.path.join(shared, AGENT), d.log())
            self.assertTrue(filecmp.cmp(d.agent_path(), self.img("/opt/profd/lib", AGENT), shallow=False))
        # Without the entrypoint the image's profd finds the image's agent.
        with Profd(self.img("/opt/profd/sbin/profd")) as d:
            self.assertEqual(d.agent_path(), self.img("/opt/profd/lib", AGENT))


if __name__ == "__main__":
    main()
