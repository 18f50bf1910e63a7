#!/bin/sh
# SPDX-License-Identifier: MIT
# fuzz-long.sh BUILD [MAX_SECONDS] [TARGET...] - the long fuzz runs issue 10
# asks for: each target's ASan+UBSan build (made by `meson test -C BUILD
# --suite fuzz`) runs until 10 M executions or MAX_SECONDS (default 600),
# one at a time, niced, one job, from the corpus the suite left; then its
# trapping optimised build replays that corpus. Prints one line per target
# for bench/RESULTS.md: executions, seconds, rate, crashes. Exits non-zero
# if any run found something (its crash-* file stays in the target's dir).
set -u
build=$(cd "$1" && pwd)
max=${2:-600}
shift $(( $# > 1 ? 2 : 1 ))
targets=${*:-fuzz-agent-parse fuzz-xspace fuzz-proc fuzz-request fuzz-xspace-reader}
fail=0
for t in $targets; do
	dir=$build/tests/fuzz/$t
	if ! [ -x "$dir/$t" ]; then
		echo "$t: not built (run meson test -C $build --suite fuzz first)"
		fail=1
		continue
	fi
	cd "$dir" || exit 1
	start=$(date +%s)
	nice -n 10 "./$t" -runs=10000000 -max_total_time="$max" -jobs=1 -workers=1 -timeout=10 \
		-rss_limit_mb=2048 -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 corpus seeds \
		>"$dir/long.log" 2>&1
	rc=$?
	secs=$(( $(date +%s) - start ))
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/long.log" | tail -1)
	nice -n 10 "./$t-trap" -runs=0 -error_exitcode=1 corpus seeds >"$dir/long-trap.log" 2>&1
	trc=$?
	crashes=$(ls "$dir" | grep -c '^crash-\|^timeout-\|^oom-')
	echo "$t: ${runs:-?} executions in ${secs} s ($(( ${runs:-0} / (secs > 0 ? secs : 1) ))/s), exit $rc; trap build replayed the corpus: exit $trc; crash files: $crashes"
	[ "$rc" = 0 ] && [ "$trc" = 0 ] || fail=1
done
exit $fail
