#!/bin/sh
# The layer check passes on the tree, and fails on a copy of it with one
# upward include planted in base/ and one in the agent (the agent may
# include only layer 0's header-only files: base/hash.h, base/macro.h and
# the wire contract proto/agent/agent-proto.h, by rule, not by name).
set -u
src=${PROFD_SRC:?}
check="$src/tools/check-layers"
"$check" "$src" || { echo "FAIL: the tree has upward includes"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for d in base proto xspace rpc collectors daemon tools; do cp -r "$src/$d" "$tmp/"; done
"$check" "$tmp" >/dev/null || { echo "FAIL: a clean copy fails"; exit 1; }
printf '#include "collectors/collector.h"\n' >>"$tmp/base/log.c"
out=$("$check" "$tmp") && { echo "FAIL: planted base -> collectors include passed"; exit 1; }
echo "$out" | grep -q 'base/log.c:.*collectors/collector.h' || { echo "FAIL: not named: $out"; exit 1; }
cp "$src/base/log.c" "$tmp/base/log.c"
printf '#include "base/log.h"\n' >>"$tmp/collectors/cupti/agent.c"
"$check" "$tmp" >/dev/null && { echo "FAIL: agent -> base include passed"; exit 1; }
cp "$src/collectors/cupti/agent.c" "$tmp/collectors/cupti/agent.c"
# pbwire.h has no .c of its own but includes buf.h, which needs buf.c.
printf '#include "base/pbwire.h"\n' >>"$tmp/collectors/cupti/agent.c"
"$check" "$tmp" >/dev/null && { echo "FAIL: agent -> base/pbwire.h (needs buf.c) passed"; exit 1; }
cp "$src/collectors/cupti/agent.c" "$tmp/collectors/cupti/agent.c"
# The receiver's headers are the daemon's, even the one beside the contract.
printf '#include "agent-parse.h"\n' >>"$tmp/collectors/cupti/agent.c"
out=$("$check" "$tmp") && { echo "FAIL: agent -> collectors/agent/agent-parse.h passed"; exit 1; }
echo "$out" | grep -q 'cupti/agent.c:.*agent-parse.h' || { echo "FAIL: not named: $out"; exit 1; }
cp "$src/collectors/cupti/agent.c" "$tmp/collectors/cupti/agent.c"
# A generated protobuf-c header is layer 0 but needs its .pb-c.c.
printf '#include "profd/profd.pb-c.h"\n' >>"$tmp/collectors/cupti/agent.c"
"$check" "$tmp" >/dev/null && { echo "FAIL: agent -> generated proto header passed"; exit 1; }
cp "$src/collectors/cupti/agent.c" "$tmp/collectors/cupti/agent.c"
# The wire contract is header-only by rule: given a .c of its own, it is not.
: >"$tmp/proto/agent/agent-proto.c"
"$check" "$tmp" >/dev/null && { echo "FAIL: agent -> agent-proto.h with a .c passed"; exit 1; }
rm "$tmp/proto/agent/agent-proto.c"
printf '#include "collector.h"\n' >>"$tmp/rpc/server.c"
"$check" "$tmp" >/dev/null && { echo "FAIL: rpc -> collectors include passed"; exit 1; }
echo "ok"
