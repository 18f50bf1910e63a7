# SPDX-License-Identifier: MIT
"""The config file (profd.conf(5)): every key round-trips through
--dump-config, bad lines stop the start naming FILE:LINE, flags override
the file, SIGHUP reloads while a capture is open; docs list every key.
Also the daemon's first-hour messages (agent socket, --listen)."""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import grpc

import profdtest as T
from helpers import P, main, status, wait_active, wait_log
from xspacecheck import check_xspace


def run(*args, env=None):
    e = dict(os.environ)
    e.pop("PROFD_AGENT_SOCKET", None)
    e.update(env or {})
    return subprocess.run([T.PROFD, *args], capture_output=True, text=True, env=e, timeout=30)


def dump_pairs(text):
    """[(key, value)] of a dump, comments and blank lines left out."""
    out = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        k, _, v = line.partition("=")
        out.append((k.strip(), v.strip()))
    return out


class Config(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="profd-conf-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def write(self, text, name="profd.conf"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def dump(self, *args):
        r = run(*args, "--dump-config")
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def default_keys(self):
        return [k for k, _ in dump_pairs(self.dump("--config", "/dev/null"))]

    def test_defaults_round_trip(self):
        first = self.dump("--config", "/dev/null")
        again = self.dump("--config", self.write(first))
        self.assertEqual(first, again)
        keys = [k for k, _ in dump_pairs(first)]
        self.assertEqual(len(keys), len(set(keys)), "each key once at its default")
        self.assertGreaterEqual(len(keys), 30)

    def test_every_key_round_trips_with_a_non_default_value(self):
        repo = os.path.join(self.tmp, "repo")
        os.mkdir(repo)
        given = {
            "listen": ["127.0.0.1:7001", "[::1]:7002"], "max-streams": ["7"],
            "max-request-size": ["2048"], "first-message-timeout": ["0"], "idle-timeout": ["90000"],
            "keepalive": ["2m"], "keepalive-timeout": ["1500ms"], "self-check": ["1h"],
            "max-duration": ["90s"], "max-sessions": ["3"], "max-events": ["12345"],
            "max-bytes": ["64M"], "recorder-bytes": ["8M"], "snapshot-dir": [repo], "snapshot-last": ["5s"],
            "snapshot-interval": ["2m"], "snapshot-max-count": ["4"], "snapshot-max-bytes": ["64M"],
            "snapshot-gpu-idle": ["90s"], "snapshot-step-above": ["2s"], "snapshot-step-outlier": ["yes"],
            "repository-allow": [repo], "repository-max-depth": ["4"],
            "allow-from": ["10.0.0.0/8", "::1/128"], "tls-cert": ["/etc/x/cert.pem"],
            "tls-key": ["/etc/x/key.pem"], "tls-client-ca": ["/etc/x/ca.pem"],
            "token-file": ["/etc/x/token"], "agent-socket-mode": ["660"], "agent-socket-group": ["0"],
            "agent-allow-uid": ["0", "root"], "host-sample-hz": ["11"], "nvml-sample-hz": ["12"],
            "agent-socket": ["/run/x/agent.sock"], "flush-timeout": ["2s"], "hostname": ["conf-host"],
            "proc-root": ["/srv/proc-fixture"], "sys-root": ["/srv/sys-fixture"], "nvml-library": ["/opt/libnvml.so"],
            "step-pattern": ["my_step,iter.x"], "log-level": ["debug"],
            "pm-sample": ["sm__cycles_active.avg,dram__throughput"], "pm-sample-interval": ["250"],
            "pm-sample-buffer": ["128"], "idle-trim": ["no"],
        }
        self.assertEqual(sorted(given), sorted(self.default_keys()), "the test names every key")
        text = "".join(f"{k} = {v}\n" for k, vs in given.items() for v in vs)
        first = self.dump("--config", self.write(text))
        again = self.dump("--config", self.write(first, "dumped.conf"))
        self.assertEqual(first, again)
        got = {}
        for k, v in dump_pairs(first):
            got.setdefault(k, []).append(v)
        # Normalised spellings: durations and sizes in their largest unit,
        # the mode as four octal digits.
        want = dict(given, **{"max-request-size": ["2K"], "idle-timeout": ["90s"],
                              "keepalive-timeout": ["1500ms"], "max-duration": ["90s"],
                              "agent-socket-mode": ["0660"], "first-message-timeout": ["0"],
                              "pm-sample-interval": ["250us"]})
        self.assertEqual(got, want)
        # Dumped values differ from every default.
        defaults = dict(dump_pairs(self.dump("--config", "/dev/null")))
        for k, vs in got.items():
            self.assertNotEqual([defaults[k]], vs, k)

    def test_default_config_is_commented_defaults(self):
        r = run("--default-config")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(dump_pairs(r.stdout), [], "every key is commented out")
        for k in self.default_keys():
            self.assertRegex(r.stdout, rf"(?m)^#{re.escape(k)} =", k)
        # Uncommented, it is the defaults again.
        plain = re.sub(r"(?m)^#([a-z-]+ =)", r"\1", r.stdout)
        self.assertEqual(self.dump("--config", self.write(plain)), self.dump("--config", "/dev/null"))
        # What meson installs is this output.
        built = os.path.join(T.BUILD, "daemon", "profd.conf")
        if os.path.exists(built):
            with open(built) as f:
                self.assertEqual(f.read(), r.stdout)

    def test_bad_lines_name_file_and_line(self):
        cases = [
            ("max-sessions = 4\n# fine\nno-such-key = 1\n", 3, "unknown key \"no-such-key\""),
            ("max-sessions = 0\n", 1, "expected 1-1024"),
            ("\n\nmax-request-size = 1G\n", 3, "max-request-size"),
            ("log-level = loud\n", 1, "expected err, warn, notice, info or debug"),
            ("idle-trim = maybe\n", 1, "invalid value \"maybe\" for idle-trim: expected yes or no"),
            ("max-sessions 4\n", 1, "expected \"key = value\""),
            ("listen = nowhere\n", 1, "HOST:PORT"),
            ("allow-from = 10.1.2.3/8\n", 1, "bits are set after the prefix"),
            ("agent-socket-group = no-such-group-profd\n", 1, "no group"),
            ("agent-allow-uid = no-such-user-profd\n", 1, "no user"),
            ("agent-socket-mode = 0444\n", 1, "octal permission bits"),
            ("repository-allow = /no/such/dir\n", 1, "No such file"),
            ("max-duration = 25h\n", 1, "a duration from 1ms to 24h"),
            ("proc-root =\n", 1, "non-empty path"),
            ("max-events = -1\n", 1, "max-events"),
            ("hostname = " + "x" * 5000 + "\n", 1, "line longer than"),
        ]
        for text, line, want in cases:
            path = self.write(text)
            r = run("--config", path, "--dump-config")
            self.assertNotEqual(r.returncode, 0, text)
            self.assertEqual(r.stdout, "", "nothing dumped for a bad file")
            self.assertIn(f"{path}:{line}: ", r.stderr, text)
            self.assertIn(want, r.stderr, text)
        # The daemon itself does not start either.
        r = run("--config", self.write("max-sessions = 0\n"), "--listen", "127.0.0.1:0")
        self.assertNotEqual(r.returncode, 0)
        self.assertNotIn("ready on", r.stderr)

    def test_nul_byte_in_a_line_is_refused_naming_the_line(self):
        # Before, a NUL hid the rest of its line from every check: a line
        # that starts "#\0" and fills fgets()'s buffer let the next line
        # through unseen, here one that changes max-sessions.
        cases = [
            (b"#\0" + b"x" * 4093 + b"max-sessions = 2\n", 1),
            (b"log-level = info\nmax-sessions = 4\0 = 9\n", 2),
            (b"hostname = a\0" + b"y" * 5000 + b"\n", 1),
        ]
        for data, line in cases:
            path = os.path.join(self.tmp, "nul.conf")
            with open(path, "wb") as f:
                f.write(data)
            r = run("--config", path, "--dump-config")
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertIn(f"{path}:{line}: NUL byte", r.stderr)

    def test_bad_hostname_is_refused(self):
        for value in ("a\x01b", "tab\there", "x" * 65, ".hidden", "a/b", "\x7fdel"):
            path = self.write(f"max-sessions = 3\nhostname = {value}\n")
            r = run("--config", path, "--dump-config")
            self.assertNotEqual(r.returncode, 0, value)
            self.assertIn(f"{path}:2: invalid value", r.stderr, value)
            self.assertIn("for hostname: expected 1-64 bytes of printable UTF-8", r.stderr, value)
        path = os.path.join(self.tmp, "utf8.conf")
        with open(path, "wb") as f:
            f.write(b"hostname = ab\xff\xfe\n")
        r = run("--config", path, "--dump-config")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("for hostname", r.stderr)
        r = run("--hostname", "bad\x1bname", "--dump-config")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--hostname", r.stderr)
        # A good one, 64 bytes and not ASCII, is taken.
        name = "h\u00f6st-" + "n" * 58
        self.assertEqual(len(name.encode()), 64)
        self.assertIn(("hostname", name), dump_pairs(self.dump("--config", self.write(f"hostname = {name}\n"))))

    def test_empty_allow_from_flag_is_refused(self):
        r = run("--allow-from", "", "--dump-config")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--allow-from needs an address", r.stderr)
        self.assertEqual(r.stdout, "")

    def test_fifo_token_file_is_refused_at_once(self):
        fifo = os.path.join(self.tmp, "token")
        os.mkfifo(fifo, 0o600)
        t0 = time.monotonic()
        # Before, open() blocked until someone wrote the FIFO: no start, no exit.
        r = run("--token-file", fifo, "--listen", "127.0.0.1:0", "--agent-socket", "")
        self.assertLess(time.monotonic() - t0, 20)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(f"cannot read the token file {fifo}: not a regular file", r.stderr)
        self.assertNotIn("ready on", r.stderr)

    def test_hostile_files_are_refused_not_crashed_on(self):
        import random
        rnd = random.Random(16)
        for i in range(40):
            data = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 600)))
            if i % 2:  # near-valid lines with odd bytes in keys and values
                data = b"max-sessions = " + data + b"\nlisten=" + data[:40] + b"\n"
            path = os.path.join(self.tmp, f"hostile-{i}.conf")
            with open(path, "wb") as f:
                f.write(data)
            r = subprocess.run([T.PROFD, "--config", path, "--dump-config"], capture_output=True, timeout=30)
            self.assertIn(r.returncode, (0, 1), (data, r.stderr))
            if r.returncode:
                self.assertIn(path.encode() + b":", r.stderr)

    def test_missing_config_is_an_error_only_when_named(self):
        r = run("--config", os.path.join(self.tmp, "absent.conf"), "--dump-config")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("absent.conf", r.stderr)

    def test_flags_override_the_file(self):
        path = self.write("max-sessions = 5\nallow-from = 10.0.0.0/8\nallow-from = 192.0.2.0/24\n"
                          "hostname = from-file\n")
        got = dump_pairs(self.dump("--config", path, "--max-sessions", "7", "--allow-from", "::1/128"))
        self.assertIn(("max-sessions", "7"), got)
        self.assertEqual([v for k, v in got if k == "allow-from"], ["::1/128"], "a flag list replaces the file's")
        self.assertIn(("hostname", "from-file"), got, "keys without a flag keep the file's value")
        # Bad flags keep their --name in the message.
        r = run("--config", path, "--max-sessions", "0")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('invalid value "0" for --max-sessions: expected 1-1024', r.stderr)

    def test_help_shows_the_table(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0)
        flat = " ".join(r.stdout.split())
        for k in self.default_keys():
            self.assertIn(f"--{k} ", r.stdout, k)
        self.assertIn("--max-sessions N captures open at once; more get RESOURCE_EXHAUSTED "
                      "(default 16; 1-1024); reloaded on SIGHUP", flat)
        self.assertIn("--config FILE", r.stdout)

    def test_docs_list_every_key(self):
        keys = set(self.default_keys())
        with open(os.path.join(T.SRC, "docs", "config.md")) as f:
            doc = set(re.findall(r"(?m)^\| `([a-z-]+)` \|", f.read()))
        self.assertEqual(doc, keys, "docs/config.md's table")
        with open(os.path.join(T.SRC, "docs", "man", "profd.conf.5")) as f:
            man = set(re.findall(r"(?m)^\.TP\n\\fB([a-z\\-]+)\\fR", f.read()))
        self.assertEqual({k.replace("\\-", "-") for k in man}, keys, "profd.conf(5)")
        # The reloadable ones are marked as such in the doc.
        with open(os.path.join(T.SRC, "docs", "config.md")) as f:
            rows = dict(re.findall(r"(?m)^\| `([a-z-]+)` \|.*\| (yes|no) \|$", f.read()))
        with open(os.path.join(T.SRC, "docs", "config.md")) as f:
            defaults = dict(re.findall(r"(?m)^\| `([a-z-]+)` \| [^|]* \| `([^`]*)` \|", f.read()))
        help_text = " ".join(run("--help").stdout.split())
        for k in keys:
            m = re.search(rf"--{re.escape(k)} .*?(?= --[a-z]|$)", help_text)
            self.assertEqual(rows.get(k) == "yes", "reloaded on SIGHUP" in m.group(0), k)
            # --help breaks a list longer than a line after a comma.
            self.assertIn(re.sub(r",\s+", ",", f"(default {defaults[k]}"), re.sub(r",\s+", ",", m.group(0)), k)

    def test_file_settings_reach_the_daemon(self):
        path = self.write("hostname = conf-file-host\nmax-sessions = 2\n")
        with T.Daemon("--config", path) as d:
            st = status(d.addr)
            self.assertEqual(st.hostname, "conf-file-host")
            self.assertEqual(st.max_sessions, 2)


class Reload(unittest.TestCase):
    """SIGHUP while a capture is open."""

    def test_sighup_changes_a_limit_and_the_open_capture_completes(self):
        tmp = tempfile.mkdtemp(prefix="profd-conf-")
        self.addCleanup(shutil.rmtree, tmp, True)
        path = os.path.join(tmp, "profd.conf")
        with open(path, "w") as f:
            f.write("max-sessions = 1\nhostname = reload-host\n")
        with T.Daemon("--config", path) as d:
            s = T.Stubs(d.addr)
            self.addCleanup(s.close)
            t0 = time.time_ns()
            fut = s.profile.future(T.profile_request(P, 1500, d.addr, session_id="long"), timeout=30)
            self.assertEqual(wait_active(d.addr, 1), 1)
            with self.assertRaises(grpc.RpcError) as e:
                s.profile(T.profile_request(P, 100, d.addr, session_id="second"), timeout=10)
            self.assertEqual(e.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)

            # A bad file changes nothing, and says where.
            with open(path, "w") as f:
                f.write("max-sessions = 3\nmax-sessions = 0\n")
            d.proc.send_signal(signal.SIGHUP)
            self.assertTrue(wait_log(d, f"{path}:2: invalid value"), d.log())
            self.assertIn("keeping the current settings", d.log())
            self.assertEqual(status(d.addr).max_sessions, 1)

            # A good one applies the reloadable key, reports the rest.
            with open(path, "w") as f:
                f.write("max-sessions = 3\nhostname = reload-host\nmax-events = 999\n")
            d.proc.send_signal(signal.SIGHUP)
            self.assertTrue(wait_log(d, "reload: max-sessions: 1 -> 3"), d.log())
            self.assertTrue(wait_log(d, "reload: max-events changed (20000000 -> 999) but needs a restart"),
                            d.log())
            self.assertEqual(status(d.addr).max_sessions, 3)
            resp = s.profile(T.profile_request(P, 100, d.addr, session_id="second"), timeout=10)
            self.assertEqual(resp.tool_data[0].name, "xplane.pb")

            # The capture that was open across both reloads completes.
            resp = fut.result(timeout=20)
            x = P.xp.XSpace.FromString(resp.tool_data[0].data)
            start, stop, _ = check_xspace(self, x, "reload-host", t0, time.time_ns(),
                                          empty_trace=resp.empty_trace)
            self.assertGreaterEqual(stop - start, 1400 * 10**6)
            self.assertEqual(d.stop(), 0, d.log())


    def test_sighup_changes_allow_from(self):
        tmp = tempfile.mkdtemp(prefix="profd-conf-")
        self.addCleanup(shutil.rmtree, tmp, True)
        path = os.path.join(tmp, "profd.conf")

        def write(text):
            with open(path, "w") as f:
                f.write(text)

        def status_code(addr):
            try:
                status(addr)
                return grpc.StatusCode.OK
            except grpc.RpcError as e:
                return e.code()

        write("allow-from = 127.0.0.0/8\n")
        with T.Daemon("--config", path) as d:
            self.assertEqual(status_code(d.addr), grpc.StatusCode.OK)
            write("allow-from = 10.0.0.0/8\n")
            d.proc.send_signal(signal.SIGHUP)
            self.assertTrue(wait_log(d, "reload: allow-from: 127.0.0.0/8 -> 10.0.0.0/8"), d.log())
            self.assertEqual(status_code(d.addr), grpc.StatusCode.PERMISSION_DENIED)
            write("allow-from =\n")  # cleared: open again
            d.proc.send_signal(signal.SIGHUP)
            self.assertTrue(wait_log(d, "reload: allow-from: 10.0.0.0/8 -> (none)"), d.log())
            self.assertEqual(status_code(d.addr), grpc.StatusCode.OK)
            self.assertEqual(d.stop(), 0, d.log())


class ReloadRefused(unittest.TestCase):
    """Reloads that must change nothing: a FIFO at the config path, a file
    without the allow-from lines the running daemon has, a bad hostname."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="profd-conf-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.path = os.path.join(self.tmp, "profd.conf")

    def write(self, text):
        with open(self.path, "w") as f:
            f.write(text)

    def sighup_refused(self, d, want):
        before = d.log().count("keeping the current settings")
        d.proc.send_signal(signal.SIGHUP)
        self.assertTrue(wait_log(d, want), d.log())
        self.assertTrue(T.wait_for(lambda: d.log().count("keeping the current settings") > before), d.log())

    def test_fifo_config_on_sighup_does_not_block_the_loop(self):
        self.write("max-sessions = 3\n")
        with T.Daemon("--config", self.path) as d:
            os.unlink(self.path)
            os.mkfifo(self.path, 0o600)
            d.proc.send_signal(signal.SIGHUP)
            # Before, the reload's open() blocked the loop until someone
            # wrote the FIFO: this call got DEADLINE_EXCEEDED.
            t0 = time.monotonic()
            self.assertEqual(T.status(d.addr, timeout=5).max_sessions, 3)
            self.assertLess(time.monotonic() - t0, 5)
            self.assertTrue(wait_log(d, f"reload: {self.path}: not a regular file; keeping the current settings"),
                            d.log())
            self.assertEqual(d.stop(), 0, d.log())

    def test_file_without_allow_from_does_not_open_access(self):
        self.write("allow-from = 10.0.0.0/8\n")
        with T.Daemon("--config", self.path) as d:
            with self.assertRaises(grpc.RpcError) as e:
                status(d.addr)
            self.assertEqual(e.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
            for text in ("", "max-sessions = 4\n"):  # emptied; the line deleted
                self.write(text)
                self.sighup_refused(d, f"reload: {self.path} has no allow-from line")
                with self.assertRaises(grpc.RpcError) as e:
                    status(d.addr)
                self.assertEqual(e.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
            self.assertNotIn("reload: max-sessions", d.log())
            self.assertEqual(d.stop(), 0, d.log())

    def test_bad_hostname_on_reload_keeps_the_old_settings(self):
        self.write("hostname = good-host\nmax-sessions = 3\n")
        with T.Daemon("--config", self.path) as d:
            self.write("hostname = bad\x01host\nmax-sessions = 5\n")
            self.sighup_refused(d, f"reload: {self.path}:1: invalid value")
            st = status(d.addr)
            self.assertEqual((st.hostname, st.max_sessions), ("good-host", 3))
            self.assertEqual(d.stop(), 0, d.log())


class FirstHour(unittest.TestCase):
    """The messages a new user meets starting profd by hand."""

    def test_custom_agent_socket_names_the_job_variable(self):
        with T.Daemon() as d:
            self.assertIn(f"jobs need PROFD_AGENT_SOCKET={d.agent_socket}", d.log())

    def test_bad_listen_prints_one_line_not_grpc_dump(self):
        for addr, want in (("192.0.2.1:6009", "not an address of this host"),
                           ("host.invalid:6009", "not an address of this host")):
            r = run("--listen", addr, "--agent-socket", os.path.join(tempfile.gettempdir(), "x.sock"),
                    "--self-check", "0")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(f"cannot listen on {addr}: {want}", r.stderr)
            self.assertNotIn("created_time", r.stderr, "gRPC's error dump")
            self.assertNotIn("chttp2_server", r.stderr)

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"), "needs root and setpriv to drop to nobody")
    def test_agent_socket_permission_denied_is_a_warning_with_the_fix(self):
        tmp = tempfile.mkdtemp(prefix="profd-perm-")
        self.addCleanup(shutil.rmtree, tmp, True)
        os.chmod(tmp, 0o755)  # root's: nobody may not create the socket
        with T.Daemon("--agent-socket", os.path.join(tmp, "agent.sock"),
                      wrapper=["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]) as d:
            text = d.log()
        self.assertRegex(text, r"warn collector\.agent: cannot listen on agent socket .*Permission denied")
        self.assertIn("PROFD_AGENT_SOCKET", text)
        self.assertIn("Run profd as root", text)


if __name__ == "__main__":
    main()
