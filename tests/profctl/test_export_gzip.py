# SPDX-License-Identifier: MIT
"""profctl export --gzip compresses on a second thread, one 256 KiB buffer
while the writer fills the next (tools/profctl/profctl-gzip.c). An export of many
buffers' worth of JSON, plain and gzip: the decompressed gzip stream is the
plain file byte for byte, and the numbers written without printf are the
exact values of the XSpace (ts/dur in us to the ps, ids, negative ints)."""
import gzip
import json
import os
import shutil
import tempfile
import unittest

import profdtest as T
import synth

P = T.protos()
EVENTS = 40000  # ~5 MB of JSON: about 20 hand-overs to the gzip thread


def big_space():
    sp = P.xp.XSpace()
    sp.hostnames.append("gzhost")
    pl = synth.Plane(sp.planes.add())
    pl.p.name = "/device:GPU:0"
    ln = pl.p.lines.add()
    ln.id = 3
    ln.name = "Stream #3(Compute)"
    ln.timestamp_ns = 1700000000000000000
    for i in range(EVENTS):
        e = ln.events.add()
        e.metadata_id = pl.ev_id(f"kernel_{i % 50}")
        e.offset_ps = i * 1234567 + (i % 7)        # fractional us down to the ps
        e.duration_ps = 1000000 * (i % 3) + i % 11  # whole us and not
        pl.stat(e, "correlation_id", (1 << 40) + i)
        pl.stat(e, "delta", -i * 1000003, "i")
    return sp


def us_text(ps):
    """ps as profctl writes microseconds: exact, trailing zeros dropped."""
    us, frac = divmod(ps, 1000000)
    return f"{us}.{frac:06d}".rstrip("0") if frac else str(us)


class ExportGzip(unittest.TestCase):
    def test_gzip_stream_equals_plain_over_many_buffers(self):
        tmp = tempfile.mkdtemp(prefix="profctl-gz-")
        try:
            src = os.path.join(tmp, "big.xplane.pb")
            sp = big_space()
            with open(src, "wb") as f:
                f.write(sp.SerializeToString())
            plain, gz = os.path.join(tmp, "t.json"), os.path.join(tmp, "t.json.gz")
            for out in (plain, gz):
                r = synth.run("export", src, "-o", out)
                self.assertEqual(r.returncode, 0, r.stderr)
            with open(plain, "rb") as f:
                want = f.read()
            self.assertGreater(len(want), 8 * 256 * 1024)
            with gzip.open(gz, "rb") as f:
                self.assertEqual(f.read(), want)
            ev = [e for e in json.loads(want)["traceEvents"] if e["ph"] == "X"]
            self.assertEqual(len(ev), EVENTS)
            base_ps = sp.planes[0].lines[0].timestamp_ns * 1000
            # exact decimals: the numbers as text, not as floats
            text = [e for e in json.loads(want, parse_float=str, parse_int=str)["traceEvents"] if e["ph"] == "X"]
            for i in (0, 1, 6, 7, 12345, EVENTS - 1):
                src_ev = sp.planes[0].lines[0].events[i]
                self.assertEqual(ev[i]["args"]["correlation_id"], (1 << 40) + i)
                self.assertEqual(ev[i]["args"]["delta"], -i * 1000003)
                self.assertEqual(text[i]["ts"], us_text(base_ps + src_ev.offset_ps))
                self.assertEqual(text[i]["dur"], us_text(src_ev.duration_ps))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
