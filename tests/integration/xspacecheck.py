# SPDX-License-Identifier: MIT
"""XSpace convention checks (reference/protocol.md §4), shared by the
integration tests. Written generically: they hold for whatever planes,
lines and events a capture has, so they stay valid as collectors land.

check_xspace(tc, x, hostname, req_t0, req_t1) -> (start_ns, stop_ns, n_events)
"""

# Line timestamps are ns since the session start (§4.2 step 2). A capture
# is at most minutes long here; an epoch value (~1.7e18) must never appear.
MAX_RELATIVE_NS = 24 * 3600 * 10**9
INT64_MAX = 2**63 - 1


def task_env(tc, x):
    envs = [p for p in x.planes if p.name == "Task Environment"]
    tc.assertEqual(len(envs), 1, "exactly one Task Environment plane")
    env = envs[0]
    stats = {}
    for s in env.stats:
        tc.assertIn(s.metadata_id, env.stat_metadata)
        name = env.stat_metadata[s.metadata_id].name
        if name in ("profile_start_time", "profile_stop_time"):
            tc.assertEqual(s.WhichOneof("value"), "uint64_value", f"{name} is uint64")
            tc.assertNotIn(name, stats, f"{name} once")
            stats[name] = s.uint64_value
    tc.assertIn("profile_start_time", stats)
    tc.assertIn("profile_stop_time", stats)
    return stats["profile_start_time"], stats["profile_stop_time"]


def check_xspace(tc, x, hostname=None, req_t0_ns=None, req_t1_ns=None, empty_trace=None):
    tc.assertEqual(len(x.hostnames), 1, "exactly one hostname")
    if hostname is not None:
        tc.assertEqual(x.hostnames[0], hostname)
    start, stop = task_env(tc, x)
    tc.assertLess(start, stop)
    if req_t0_ns is not None:
        # The window lies inside the client's view of the call.
        tc.assertGreaterEqual(start, req_t0_ns - 5 * 10**6)
    if req_t1_ns is not None:
        tc.assertLessEqual(stop, req_t1_ns + 5 * 10**6)
    window_ps = (stop - start) * 1000
    names = set()
    n_events = 0
    for p in x.planes:
        tc.assertNotIn(p.name, names, "plane names are unique")
        names.add(p.name)
        if p.name.startswith("/device:GPU:"):
            tc.assertEqual(p.id, int(p.name[len("/device:GPU:"):]))
            tc.assertLessEqual(p.id, 500)
        for k, m in p.event_metadata.items():
            tc.assertEqual(k, m.id, f"{p.name}: event_metadata key == id")
        stat_names = [m.name for m in p.stat_metadata.values()]
        for k, m in p.stat_metadata.items():
            tc.assertEqual(k, m.id, f"{p.name}: stat_metadata key == id")
        tc.assertEqual(len(stat_names), len(set(stat_names)), f"{p.name}: stat names unique")

        def check_stats(stats, where):
            for s in stats:
                tc.assertIn(s.metadata_id, p.stat_metadata, f"{where}: stat metadata exists")
                if s.WhichOneof("value") == "ref_value":
                    tc.assertIn(s.ref_value, p.stat_metadata, f"{where}: ref_value target exists")
                if p.stat_metadata[s.metadata_id].name == "correlation_id":
                    tc.assertEqual(s.WhichOneof("value"), "uint64_value")

        check_stats(p.stats, p.name)
        line_ids = set()
        for line in p.lines:
            where = f"{p.name}/{line.name or line.id}"
            tc.assertNotIn(line.id, line_ids, f"{where}: line ids unique")
            line_ids.add(line.id)
            tc.assertGreaterEqual(line.timestamp_ns, 0)
            tc.assertLess(line.timestamp_ns, MAX_RELATIVE_NS, f"{where}: timestamp relative, not epoch")
            prev = None
            for e in line.events:
                n_events += 1
                tc.assertIn(e.metadata_id, p.event_metadata, f"{where}: event metadata exists")
                tc.assertEqual(e.WhichOneof("data"), "offset_ps", f"{where}: events use offset_ps")
                tc.assertGreaterEqual(e.duration_ps, 0)
                t = line.timestamp_ns * 1000 + e.offset_ps
                tc.assertLess(t, INT64_MAX)
                # Only events starting inside the window are kept.
                tc.assertGreaterEqual(t, 0, f"{where}: event before the window")
                tc.assertLess(t, window_ps, f"{where}: event after the window")
                if prev is not None:
                    tc.assertTrue(prev[0] < t or (prev[0] == t and prev[1] >= e.duration_ps),
                                  f"{where}: events sorted by start (longer first on ties)")
                prev = (t, e.duration_ps)
                check_stats(e.stats, where)
    if empty_trace is not None:
        tc.assertEqual(empty_trace, n_events == 0, "empty_trace iff no line has events")
    return start, stop, n_events
