#!/bin/sh
# SPDX-License-Identifier: MIT
# hostile-rss.sh BUILD [PROFD] - peak RSS of profd under issue 10's
# amplification case "8 overlapping windows over one flood", for
# bench/RESULTS.md: runs tests/integration/test_byte_budget.py in its
# figures-only mode (BUDGET_ONLY=1) at profd's default --max-bytes and at
# 48M. PROFD (default BUILD/daemon/profd) may be an older build: it is run
# at its defaults only (no --max-bytes flag). FLOOD_EVENTS sets the flood.
set -eu
build=$(cd "$1" && pwd)
profd=${2:-$build/daemon/profd}
src=$(cd "$(dirname "$0")/.." && pwd)
run() {
	BUDGET_ONLY=1 BUDGET_MIB=$1 PROFD=$profd PROFD_SRC=$src PROFD_BUILD=$build \
		PYTHONPATH=$src/tests/pylib:$src/tests/integration \
		/usr/bin/python3 "$src/tests/integration/test_byte_budget.py" 2>&1 | grep -o -- '--max-bytes.*'
}
run 0
[ -n "${2:-}" ] || run 48
