#!/bin/sh
# The layer check passes on the tree, and fails on a copy of it with one
# upward include planted in base/ and others in the agent (the agent may
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

# plant FILE HEADER WHY: FILE including HEADER must fail the check, with
# FILE and HEADER named in its report; FILE is put back after.
plant() {
	printf '#include "%s"\n' "$2" >>"$tmp/$1"
	if out=$("$check" "$tmp"); then
		echo "FAIL: $1 -> $2 ($3) passed"
		exit 1
	fi
	echo "$out" | grep -q "$1:.*$2" || { echo "FAIL: $1 -> $2 not named: $out"; exit 1; }
	cp "$src/$1" "$tmp/$1"
}

plant base/log.c collectors/collector.h "upward"
plant collectors/cupti/agent.c base/log.h "base/log.h needs log.c"
# pbwire.h has no .c of its own but includes buf.h, which needs buf.c.
plant collectors/cupti/agent.c base/pbwire.h "needs buf.c"
# The receiver's headers are the daemon's, even the one beside the contract.
plant collectors/cupti/agent.c agent-parse.h "a receiver header"
# A generated protobuf-c header is layer 0 but needs its .pb-c.c.
plant collectors/cupti/agent.c profd/profd.pb-c.h "a generated header"
plant rpc/server.c collector.h "rpc and collectors are siblings"
# The wire contract is header-only by rule: given a .c of its own, it is not.
: >"$tmp/proto/agent/agent-proto.c"
out=$("$check" "$tmp") && { echo "FAIL: agent -> agent-proto.h with a .c passed"; exit 1; }
echo "$out" | grep -q 'cupti/.*agent-proto.h' || { echo "FAIL: not named: $out"; exit 1; }
echo "ok"
