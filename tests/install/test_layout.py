#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`meson install --destdir` of this build: what lands where, and the agent
path each profd recommends (build tree, install tree, agent missing,
$PROFD_AGENT_PATH), as its log and `profctl doctor` say it. Also that the
man pages document every option the binaries' --help lists."""
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from installtest import BUILD, PROFCTL, PROFD, SRC, Profd, config_h, main

HAVE_AGENT = config_h("HAVE_CUPTI_AGENT") == "1"
HAVE_UNIT = config_h("HAVE_SYSTEMD_UNIT") == "1"
AGENT = "libprofd-agent.so"


def introspect(what):
    out = subprocess.run(["meson", "introspect", BUILD, what], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


class InstallTree(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="profd-destdir-")
        cls.dest = os.path.join(cls.tmp.name, "dest")
        subprocess.run(["meson", "install", "-C", BUILD, "--destdir", cls.dest, "--no-rebuild", "--quiet"],
                       check=True, capture_output=True, text=True)
        opts = {o["name"]: o["value"] for o in introspect("--buildoptions")}
        cls.prefix = opts["prefix"]
        cls.installed = list(introspect("--installed").values())

        def under(opt, *rest):
            d = opts[opt]
            return os.path.join(cls.dest + (d if d.startswith("/") else os.path.join(cls.prefix, d)), *rest)
        cls.under = staticmethod(under)
        cls.profd = under("sbindir", "profd")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_binaries_man_pages_unit_and_agent_are_installed(self):
        self.assertTrue(os.access(self.profd, os.X_OK), self.profd)
        self.assertTrue(os.access(self.under("bindir", "profctl"), os.X_OK))
        self.assertTrue(os.path.isfile(self.under("mandir", "man8", "profd.8")))
        self.assertTrue(os.path.isfile(self.under("mandir", "man1", "profctl.1")))
        self.assertEqual(os.path.isfile(self.under("mandir", "man5", "profd.conf.5")),
                         os.path.isfile(os.path.join(SRC, "docs", "man", "profd.conf.5")))
        self.assertEqual(os.path.isfile(self.under("libdir", AGENT)), HAVE_AGENT)
        # A default config, once the source installs one (systemd/ or daemon/).
        sources = [p for p in glob.glob(os.path.join(SRC, "*", "profd.conf*")) if not p.endswith(".5")]
        configs = glob.glob(os.path.join(self.dest, "**", "profd.conf"), recursive=True)
        self.assertEqual(bool(configs), bool(sources), (sources, configs))
        units = [p for p in self.installed if p.endswith("/profd.service")]
        self.assertEqual(len(units), 1 if HAVE_UNIT else 0, units)
        for u in units:
            with open(self.dest + u) as f:
                execs = re.findall(r"^ExecStart=(\S+)", f.read(), re.M)
            self.assertEqual(execs, [self.profd[len(self.dest):]])

    @unittest.skipUnless(HAVE_AGENT, "this build has no agent (no CUPTI 13 headers)")
    def test_installed_profd_recommends_the_installed_agent(self):
        with Profd(self.profd) as d:
            want = self.under("libdir", AGENT)
            self.assertEqual(d.agent_path(), want, d.log())
            self.assertTrue(os.path.isfile(d.agent_path()))

    @unittest.skipUnless(HAVE_AGENT, "this build has no agent (no CUPTI 13 headers)")
    def test_a_missing_agent_is_said_plainly(self):
        agent = self.under("libdir", AGENT)
        os.rename(agent, agent + ".away")
        try:
            with Profd(self.profd) as d:
                self.assertIsNone(d.agent_path(), d.hint)
                self.assertIn(f"{AGENT} is missing ({agent})", d.hint)
                self.assertIn("meson install", d.hint)
        finally:
            os.rename(agent + ".away", agent)

    @unittest.skipIf(HAVE_AGENT, "this build has the agent")
    def test_without_cupti_profd_says_the_agent_was_not_built(self):
        for exe in (self.profd, PROFD):
            with Profd(exe) as d:
                self.assertIsNone(d.agent_path(), d.hint)
                self.assertIn(f"built without {AGENT}", d.hint)
                self.assertIn("CUPTI headers not found at build time", d.hint)


class BuildTree(unittest.TestCase):
    @unittest.skipUnless(HAVE_AGENT, "this build has no agent (no CUPTI 13 headers)")
    def test_build_tree_profd_recommends_the_build_trees_agent(self):
        with Profd(PROFD) as d:
            self.assertEqual(os.path.realpath(d.agent_path()),
                             os.path.realpath(os.path.join(BUILD, "collectors", "cupti", AGENT)), d.log())

    def test_profd_agent_path_names_the_jobs_view(self):
        with Profd(PROFD, env={"PROFD_AGENT_PATH": "/run/profd/" + AGENT}) as d:
            self.assertEqual(d.agent_path(), "/run/profd/" + AGENT)
        with Profd(PROFD, env={"PROFD_AGENT_PATH": "/x" * 2100}) as d:
            self.assertIsNone(d.agent_path())
            self.assertIn(f"PROFD_AGENT_PATH was ignored (longer than {os.pathconf('/', 'PC_PATH_MAX') - 1} bytes)",
                          d.hint)
        with Profd(PROFD, env={"PROFD_AGENT_PATH": "lib/" + AGENT}) as d:
            self.assertIsNone(d.agent_path())
            self.assertIn("PROFD_AGENT_PATH was ignored (not an absolute path)", d.hint)

    def test_doctor_repeats_the_daemons_hint(self):
        with Profd(PROFD) as d:
            sock = re.search(r"agents connect to (\S+)", d.log()).group(1)
            r = subprocess.run([PROFCTL, "doctor", d.addr, "--agent-socket", sock],
                               capture_output=True, text=True, timeout=60)
            self.assertIn(d.hint, r.stdout, r.stdout + r.stderr)
            self.assertNotIn("<libdir>", r.stdout)


def documented(page):
    with open(os.path.join(SRC, "docs", "man", page)) as f:
        return f.read().replace("\\-", "-")


def help_text(*cmd):
    return subprocess.run(list(cmd) + ["--help"], capture_output=True, text=True, timeout=30).stdout


def long_options(text):
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", text))


class ManPages(unittest.TestCase):
    def test_profd_8_documents_every_option_of_profd_help(self):
        missing = long_options(help_text(PROFD)) - long_options(documented("profd.8"))
        self.assertFalse(missing, "in `profd --help` but not in docs/man/profd.8")

    def test_profctl_1_documents_every_command_and_option(self):
        top = help_text(PROFCTL)
        cmds = re.findall(r"^  ([a-z]+)  ", top.split("Commands:")[1].split("\n\n")[0], re.M)
        self.assertGreater(len(cmds), 5)
        page = documented("profctl.1")
        opts = long_options(top)
        for c in cmds:
            self.assertRegex(page, r"\.B %s\b" % c)
            opts |= long_options(help_text(PROFCTL, c))
        self.assertFalse(opts - long_options(page), "in profctl's --help but not in docs/man/profctl.1")

    @unittest.skipUnless(shutil.which("groff"), "groff not installed")
    def test_pages_render_without_warnings(self):
        for page in ("profd.8", "profctl.1", "profd.conf.5"):
            path = os.path.join(SRC, "docs", "man", page)
            if not os.path.exists(path):
                continue
            r = subprocess.run(["groff", "-man", "-ww", "-z", path], capture_output=True, text=True)
            self.assertEqual((r.returncode, r.stderr), (0, ""), page)


if __name__ == "__main__":
    main()
