# SPDX-License-Identifier: MIT
"""profctl flame on synthetic XSpaces with Python stacks (synth.build_py):
exact folded stacks (GPU time summed per stack, kernel leaf, several
processes and devices), --cpu self times, the filters, the merge of several
files and of a capture directory, the SVG's structure and proportions, and
hostile input (absurd names, huge stacks, a million events, bad files)."""
import os
import re
import resource
import shutil
import tempfile
import unittest
import xml.etree.ElementTree as ET

import profdtest as T
import synth

P = T.protos()
SVG_NS = "{http://www.w3.org/2000/svg}"
SVG_W, SVG_PAD = 1200, 10


def folded(text):
    """{"a;b;leaf": ns} from folded output, checking its form on the way."""
    out = {}
    for line in text.splitlines():
        m = re.fullmatch(r"(.+) (\d+)", line)
        assert m, repr(line)
        assert m.group(1) not in out, line  # one line per stack
        out[m.group(1)] = int(m.group(2))
    return out


def svg_frames(path):
    """[(name, info, data-x, data-v, depth, rect x, rect width, label)] of an SVG."""
    tree = ET.parse(path)  # well-formed XML or this raises
    frames = []
    for g in tree.getroot().iter(SVG_NS + "g"):
        if g.get("class") != "f":
            continue
        title = g.find(SVG_NS + "title").text
        rect = g.find(SVG_NS + "rect")
        text = g.find(SVG_NS + "text").text or ""
        name, info = title.split("\n")
        frames.append((name, info, int(g.get("data-x")), int(g.get("data-v")), int(g.get("data-d")),
                       float(rect.get("x")), float(rect.get("width")), text))
    return tree, frames


def slurp(path):
    with open(path, "rb") as f:
        return f.read()


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ld(field, payload):
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def big_gpu_space(path, n, stack_of, dur_ps=1000_000):
    """An XSpace with one GPU plane of @n kernels written on the wire
    directly (protobuf objects for a million events are too slow here):
    event i has python_stack stack_of(i) (bytes) and lasts dur_ps."""
    plane = P.xp.XPlane()
    plane.name = "/device:GPU:0"
    pl = synth.Plane(plane)
    ev = pl.ev_id("big_kernel")
    kd, st = pl.stat_id("kernel_details"), pl.stat_id("python_stack")
    val = pl.stat_id(synth.kdetails("1,1,1", "1,1,1", 1))
    kstat = ld(4, b"\x08" + varint(kd) + b"\x38" + varint(val))
    head = b"\x08" + varint(ev)
    events = b"".join(ld(4, head + b"\x10" + varint(i * 10) + b"\x18" + varint(dur_ps) + kstat +
                         ld(4, b"\x08" + varint(st) + ld(5, stack_of(i)))) for i in range(n))
    line = ld(2, b"Stream #1(Compute)") + events
    space = P.xp.XSpace()
    data = space.SerializeToString() + ld(1, plane.SerializeToString() + ld(3, line))
    with open(path, "wb") as f:
        f.write(data)


def run_rss(*args, timeout=120):
    """profctl, and the peak RSS in bytes of the largest child this test
    process has waited for (RUSAGE_CHILDREN: a maximum, so an upper bound
    of this run's)."""
    r = synth.run(*args, timeout=timeout)
    return r.returncode, r.stdout, r.stderr, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


class Flame(synth.PyCase):
    def flame(self, *args):
        r = synth.run("flame", *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_folded_gpu_time_per_stack_exact(self):
        out = self.flame(self.xpb, "--folded", "-o", "-")
        self.assertEqual(folded(out), self.facts["folded"])
        # depth first, children in name order: the same bytes whatever the event order
        self.assertEqual(out.splitlines()[0], "(Python stack unavailable);relu_kernel 300")
        self.assertEqual(self.flame(self.xpb, "--folded", "-o", "-"), out)

    def test_filters(self):
        self.assertEqual(folded(self.flame(self.xpb, "--folded", "-o", "-", "--pid", "1234")), self.facts["by_pid"])
        self.assertEqual(folded(self.flame(self.xpb, "--folded", "-o", "-", "--device", "1")),
                         self.facts["by_device"])
        both = folded(self.flame(self.xpb, "--folded", "-o", "-", "--device", "0,1", "--pid", "5678,1234"))
        self.assertEqual(both, self.facts["folded"])
        self.assertEqual(self.flame(self.xpb, "--folded", "-o", "-", "--pid", "999"), "")

    def test_cpu_self_times(self):
        self.assertEqual(folded(self.flame(self.xpb, "--cpu", "--folded", "-o", "-")), self.facts["cpu"])
        self.assertEqual(folded(self.flame(self.xpb, "--cpu", "--folded", "-o", "-", "--pid", "5678")),
                         self.facts["cpu_by_pid"])

    def test_several_files_and_a_directory_merge(self):
        d = os.path.join(self.tmp, "session")
        os.makedirs(d, exist_ok=True)
        shutil.copy(self.xpb, os.path.join(d, "host1_6009.xplane.pb"))
        shutil.copy(self.xpb, os.path.join(d, "host2_6009.xplane.pb"))
        with open(os.path.join(d, "notes.txt"), "w") as f:
            f.write("not a capture")
        twice = {k: 2 * v for k, v in self.facts["folded"].items()}
        self.assertEqual(folded(self.flame(self.xpb, self.xpb, "--folded", "-o", "-")), twice)
        self.assertEqual(folded(self.flame(d, "--folded", "-o", "-")), twice)
        thrice = {k: 3 * v for k, v in self.facts["folded"].items()}
        self.assertEqual(folded(self.flame(self.xpb, d, "--folded", "-o", "-")), thrice)

    def test_svg_structure_and_proportions(self):
        out = os.path.join(self.tmp, "gpu.svg")
        self.flame(self.xpb, "-o", out, "--title", "step <7> & co")
        tree, frames = svg_frames(out)
        root = frames[0]
        total = sum(self.facts["folded"].values())
        self.assertEqual((root[0], root[3], root[4]), ("all", total * 1000, 0))
        # one rect per node of the merged tree, none twice
        nodes = synth.flame_nodes(self.facts["folded"])
        self.assertEqual(len(frames), len(nodes) + 1)
        self.assertEqual(sorted(f[0] for f in frames[1:]), sorted(n.split(";")[-1] for n in nodes))
        # widths and places proportional to weights; children inside parents
        scale = (SVG_W - 2 * SVG_PAD) / (total * 1000)
        for name, info, x, v, d, rx, rw, label in frames:
            self.assertAlmostEqual(rw, v * scale, delta=0.006, msg=name)
            self.assertAlmostEqual(rx, SVG_PAD + x * scale, delta=0.006, msg=name)
            self.assertIn("%)", info)
            self.assertTrue(label == "" or label == name or (label.endswith("..") and name.startswith(label[:-2])),
                            (label, name))
        gemm = [f for f in frames if f[0] == "gemm_kernel"][0]
        self.assertEqual(gemm[3], 17000 * 1000)
        self.assertTrue(gemm[1].startswith("17.000 us ("), gemm[1])
        titles = {t.get("id"): "".join(t.itertext()) for t in tree.getroot().iter(SVG_NS + "text") if t.get("id")}
        self.assertEqual(titles["title"], "step <7> & co")
        self.assertIn(b"<![CDATA[", slurp(out))
        # deterministic
        again = os.path.join(self.tmp, "gpu2.svg")
        self.flame(self.xpb, "-o", again, "--title", "step <7> & co")
        self.assertEqual(slurp(out), slurp(again))

    def test_usage_and_bad_files(self):
        r = synth.run("flame", self.xpb)
        self.assertEqual(r.returncode, 2)
        self.assertIn("-o", r.stderr)
        r = synth.run("flame", self.xpb, "-o", "-", "--pid", "x")
        self.assertEqual(r.returncode, 2)
        r = synth.run("flame", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("--folded", r.stdout)
        self.assertIn("[no Python stack]", r.stdout)
        bad = os.path.join(self.tmp, "bad.xplane.pb")
        with open(self.xpb, "rb") as f:
            data = f.read()
        with open(bad, "wb") as f:
            f.write(data[:len(data) // 2] + b"\x0a\xff\xff\xff\xff\x0f")
        r = synth.run("flame", bad, "-o", "-", "--folded")
        self.assertEqual(r.returncode, 1)
        self.assertIn("not a valid XSpace", r.stderr)
        # one bad file among good ones: the graph of the good ones, exit 1
        r = synth.run("flame", bad, self.xpb, "-o", "-", "--folded")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(folded(r.stdout), self.facts["folded"])
        # no events at all: a valid, empty graph
        empty = os.path.join(self.tmp, "empty.xplane.pb")
        with open(empty, "wb") as f:
            f.write(P.xp.XSpace().SerializeToString())
        self.assertEqual(self.flame(empty, "--folded", "-o", "-"), "")
        out = os.path.join(self.tmp, "empty.svg")
        self.flame(empty, "-o", out)
        self.assertEqual([f[0] for f in svg_frames(out)[1]], ["all"])


class Hostile(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="profctl-flame-hostile-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_absurd_names_and_huge_stacks(self):
        sp = P.xp.XSpace()
        pl = synth.Plane(sp.planes.add())
        pl.p.name = "/device:GPU:0"
        ln = pl.p.lines.add()
        ln.name = "Stream #1(Compute)"
        evil = "</title><script>alert(1)</script>&\"' ]]> \x01\x7f;semi\n" + "x" * 10000
        e = pl.event(ln, evil, 0, 1000, kernel_details="grid:1,1,1")
        pl.stat(e, "python_stack", "a.py:1 f;;" + "b.py:2 g\x00" * 3 + ";" + "é" * 300)
        e = pl.event(ln, "deep", 2000, 3000, kernel_details="grid:1,1,1")
        pl.stat(e, "python_stack", ";".join(f"m.py:{i} r" for i in range(100000)))
        # invalid UTF-8 in a name, as bytes on the wire
        e = pl.event(ln, "bad\xff", 6000, 500, kernel_details="grid:1,1,1")
        path = os.path.join(self.tmp, "evil.xplane.pb")
        data = sp.SerializeToString().replace("bad\xff".encode(), b"bad\xff\xfe")
        with open(path, "wb") as f:
            f.write(data)
        r = synth.run("flame", path, "--folded", "-o", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 3, lines)
        deep = [x for x in lines if x.endswith(";deep 3000")][0].split(";")
        self.assertEqual(len(deep), 256 + 2)  # [truncated], the innermost 256 frames, the kernel
        self.assertEqual(deep[0], "[truncated]")
        self.assertEqual(deep[1], "m.py:99744 r")
        evil_line = [x for x in lines if x.startswith("a.py:1 f;")][0]
        frames = evil_line.rsplit(" ", 1)[0].split(";")
        self.assertEqual(len(frames), 4, frames)  # the empty frame skipped; ';' in the kernel name made ','
        self.assertEqual(frames[1], "b.py:2 g " * 3)
        self.assertEqual(len(frames[2].encode()), 240)  # cut at a character boundary
        self.assertTrue(frames[3].startswith("</title><script>alert(1)</script>&\"' ]]>   ,semi "), frames[3])
        self.assertEqual(len(frames[3].encode()), 240)
        out = os.path.join(self.tmp, "evil.svg")
        r = synth.run("flame", path, "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        _, frames = svg_frames(out)  # parses: everything escaped
        names = [f[0] for f in frames]
        self.assertIn("bad\ufffd\ufffd", names)
        self.assertIn(evil.replace("\x01", " ").replace("\x7f", " ").replace("\n", " ")[:240], names)
        self.assertNotIn(b"<script>alert", slurp(out))

    def test_a_million_events_bounded(self):
        path = os.path.join(self.tmp, "big.xplane.pb")
        n = 1_000_000
        big_gpu_space(path, n, lambda i: b"main.py:1 <module>;step.py:%d f%d" % (i % 700_000, i))
        size = os.path.getsize(path)
        rc, out, err, ru = run_rss("flame", path, "--folded", "-o", "-", timeout=180)
        self.assertEqual(rc, 0, err)
        got = folded(out)
        # Every event weighs 1 us; past the node bound its weight stays on a
        # shorter stack, so the total is exact and the tree stays bounded.
        self.assertEqual(sum(got.values()), n * 1000)
        self.assertLessEqual(len(got), 1 << 19)
        self.assertIn("hit a bound of the graph", err)
        if not synth.WRAPPER:
            self.assertLess(ru, size + 256 * 2**20, (ru, size))
        svg = os.path.join(self.tmp, "big.svg")
        rc, _, err, _ = run_rss("flame", path, "-o", svg, timeout=180)
        self.assertEqual(rc, 0, err)
        _, frames = svg_frames(svg)
        self.assertLess(len(frames), 20000)  # narrow frames left out: bounded by the width
        self.assertEqual(frames[0][3], n * 1000 * 1000)

    def test_cpu_deep_and_crossing_spans(self):
        sp, host = synth.space(P, "h")
        ln = host.p.lines.add()
        ln.name = "p (pid 7)/tid 7"
        n = 5000
        for i in range(n):  # 5000 spans, each inside the previous one
            host.event(ln, f"$d.py:{i} f", i, 2 * n - 2 * i, python_file="/d.py", python_line=i)
        # a span that starts inside another and ends after it, and a bare "$" (no frame)
        host.event(ln, "$x.py:1 a", 100000, 1000, python_file="/x.py")
        host.event(ln, "$x.py:2 b", 100500, 1000, python_file="/x.py")
        host.event(ln, "$", 200000, 10, python_file="/x.py")
        path = os.path.join(self.tmp, "deep.xplane.pb")
        with open(path, "wb") as f:
            f.write(sp.SerializeToString())
        r = synth.run("flame", path, "--cpu", "--folded", "-o", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = folded(r.stdout)
        deep = [k for k in got if k.startswith("d.py:0 f")]
        self.assertEqual(max(k.count(";") + 1 for k in deep), 256 + 2)  # the depth bound of the tree
        self.assertIn("hit a bound of the graph", r.stderr)
        self.assertEqual(sum(got[k] for k in deep), 2 * n)  # self times add up to the outermost span
        # the crossing span is cut at its parent's end
        self.assertEqual(got["x.py:1 a"], 500)
        self.assertEqual(got["x.py:1 a;x.py:2 b"], 500)
        self.assertEqual(r.stdout.count("\n"), len(got))
        r = synth.run("flame", path, "--cpu", "-o", os.path.join(self.tmp, "deep.svg"))
        self.assertEqual(r.returncode, 0, r.stderr)
        svg_frames(os.path.join(self.tmp, "deep.svg"))

    def test_saturating_weights(self):
        path = os.path.join(self.tmp, "sat.xplane.pb")
        big_gpu_space(path, 64, lambda i: b"a.py:1 f", dur_ps=2**63 - 1)
        r = synth.run("flame", path, "--folded", "-o", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(folded(r.stdout), {"a.py:1 f;big_kernel": (2**64 - 1) // 1000 + 1})
        out = os.path.join(self.tmp, "sat.svg")
        self.assertEqual(synth.run("flame", path, "-o", out).returncode, 0)
        svg_frames(out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
