# SPDX-License-Identifier: MIT
"""The same agent input gives the same XSpace, event by event.

Two fake agents (tests/agent/fake-agent.c, burst mode: fixed records at
fixed offsets from their clock anchor) feed a real profd; the capture's
agent-made planes are written out canonically (pids, tids and absolute
times replaced by stable names and offsets) and compared with
tests/agent/golden/two-agents.txt, recorded from the receiver before it
was split into parser / mapping / connection files. A refactor of the
receiver or the store must not change one line of it.

GOLDEN_UPDATE=1 rewrites the file instead (only for an intended change of
what profd emits; say so in the commit).
"""
import os
import re
import unittest

import profdtest as T
from test_agent import Agent, UUID_A, UUID_B

P = T.protos()
GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "two-agents.txt")


def stat_text(plane, s, sub):
    kind = s.WhichOneof("value")
    v = getattr(s, kind)
    if kind == "ref_value":
        v = plane.stat_metadata[v].name
    name = plane.stat_metadata[s.metadata_id].name
    if name == "correlation_id":
        v = f"{sub(str(v >> 32))}:{v & 0xffffffff}"
    elif isinstance(v, float):
        v = repr(v)
    return f"{name}={sub(str(v))}"


def canonical(x, pids):
    """Lines of text for the agent-made parts of XSpace @x; @pids in the
    order their names P1, P2, ... are given."""
    def sub(text):
        for i, pid in enumerate(pids):
            text = re.sub(rf"(?<![0-9]){pid}(?![0-9])", f"P{i + 1}", text)  # whole numbers only
        return text

    out = []
    # Each process's events are relative to its own earliest one: the
    # agents' bursts start at different times, their shapes do not.
    base = {}
    for p in x.planes:
        for line in p.lines:
            pid = T.line_pid(line)
            if pid in pids:
                for e in line.events:
                    t = line.timestamp_ns * 1000 + e.offset_ps
                    base[pid] = min(base.get(pid, t), t)
    for p in sorted(x.planes, key=lambda p: p.name):
        if not (p.name.startswith("/device:GPU:") or p.name in ("/host:CPU", "/host:metadata")):
            continue
        out.append(f"plane {p.name} id={p.id}")
        out += ["  stat " + stat_text(p, s, sub) for s in sorted(p.stats, key=lambda s: p.stat_metadata[s.metadata_id].name)]
        rows = []
        for line in p.lines:
            owner = T.line_owner(line)
            if owner is None or owner[0] not in pids:
                continue  # host counters: not the agents'
            pid, key = owner
            # Line ids are per-plane ordinals in order of arrival, which
            # differs between runs: the text names a line by its owner and
            # its key (tid or stream; the overhead line's was 2^32 - 1).
            key = 0xffffffff if key is None else key
            head = f"  line {sub(line.name)} id={sub(str(pid))}:{sub(str(key))}"
            for e in line.events:
                t = line.timestamp_ns * 1000 + e.offset_ps - base[pid]
                st = " ".join(sorted(stat_text(p, s, sub) for s in e.stats))
                rows.append(f"{head} | {t} +{e.duration_ps} {p.event_metadata[e.metadata_id].name} {st}")
        out += sorted(rows)
    out += ["warning " + sub(w) for w in sorted(x.warnings) if any(str(pid) in w for pid in pids)]
    return out


class Golden(T.AgentDaemonCase):
    def test_two_agents_same_xspace(self):
        a1 = Agent(self.sock, [UUID_A, UUID_B], "golden-r0", "--kernels", "3")
        a2 = Agent(self.sock, [UUID_B, UUID_A], "golden-r1", "--kernels", "4", "--dropped", "2")
        self.assertTrue(T.wait_for(lambda: len(self.status(P.profd.StatusRequest(), timeout=10).agents) == 2, 10))
        req = T.profile_request(P, 500, f"localhost:{self.d.port}", session_id="golden")
        x = T.decode_xspace(P, self.profile(req, timeout=60).tool_data[0].data)
        self.assertEqual(a1.finish(), 0)
        self.assertEqual(a2.finish(), 0)
        got = canonical(x, [a1.proc.pid, a2.proc.pid])
        if os.environ.get("GOLDEN_UPDATE"):
            os.makedirs(os.path.dirname(GOLDEN), exist_ok=True)
            with open(GOLDEN, "w") as f:
                f.write("\n".join(got) + "\n")
            self.skipTest("golden file rewritten")
        with open(GOLDEN) as f:
            want = f.read().splitlines()
        self.assertGreater(len(want), 40)
        self.assertEqual(got, want)


if __name__ == "__main__":
    unittest.main(verbosity=2)
