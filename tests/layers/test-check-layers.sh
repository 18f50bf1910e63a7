#!/bin/sh
# The layer check passes on the tree, and fails on a copy of it with one
# upward include planted in base/ and others in the agent (the agent may
# include only layer 0's header-only files: base/hash.h, base/macro.h and
# the wire contract proto/agent/agent-proto.h, by rule, not by name).
set -u
src=${PROFD_SRC:?}
check="$src/tools/check-layers"
"$check" "$src" || { echo "FAIL: the tree has upward includes"; exit 1; }
. "$(dirname "$0")/plant.sh"
copy_tree

# include FILE HEADER: FILE including HEADER must fail, naming both.
include() { plant "$1" "#include \"$2\"" "$1:.*$2"; }

include base/log.c collectors/collector.h
include collectors/cupti/agent.c base/log.h
# pbwire.h has no .c of its own but includes buf.h, which needs buf.c.
include collectors/cupti/agent.c base/pbwire.h
# The receiver's headers are the daemon's, even the one beside the contract.
include collectors/cupti/agent.c agent-parse.h
# A generated protobuf-c header is layer 0 but needs its .pb-c.c.
include collectors/cupti/agent.c profd/profd.pb-c.h
include rpc/server.c collector.h
# The wire contract is header-only by rule: given a .c of its own, it is not.
: >"$tmp/proto/agent/agent-proto.c"
out=$("$check" "$tmp") && { echo "FAIL: agent -> agent-proto.h with a .c passed"; exit 1; }
echo "$out" | grep -q 'cupti/.*agent-proto.h' || { echo "FAIL: not named: $out"; exit 1; }
echo "ok"
