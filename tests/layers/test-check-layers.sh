#!/bin/sh
# The layer check passes on the tree, and fails on a copy of it with one
# upward include planted in base/ and one in the agent (the agent may
# include only base/'s header-only files).
set -u
src=${PROFD_SRC:?}
check="$src/tools/check-layers"
"$check" "$src" || { echo "FAIL: the tree has upward includes"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for d in base xspace rpc collectors daemon tools; do cp -r "$src/$d" "$tmp/"; done
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
printf '#include "collector.h"\n' >>"$tmp/rpc/server.c"
"$check" "$tmp" >/dev/null && { echo "FAIL: rpc -> collectors include passed"; exit 1; }
echo "ok"
