#!/bin/sh
# SPDX-License-Identifier: MIT
# run-fuzz.sh CLANG NAME SECONDS SOURCE... - build one libFuzzer target with
# clang (the main build may use gcc) into the current build directory, seed
# it with make-corpus.py and fuzz for SECONDS. SOURCE... may also hold the
# target's own compiler flags (-I, -D, -l), passed on as they are. Exits 77 (meson's skip) when
# clang or its libFuzzer runtime is missing; $FUZZ_SECONDS overrides SECONDS
# (shared between the two builds below).
set -eu
clang=$1 name=$2 seconds=${FUZZ_SECONDS:-$3}
shift 3
here=$(cd "$(dirname "$0")" && pwd)
src_root=$(cd "$here/../.." && pwd)
out=${MESON_BUILD_ROOT:-$PWD}/tests/fuzz/$name
if [ -z "$clang" ] || ! [ -x "$clang" ]; then
	echo "skip: no clang"
	exit 77
fi
mkdir -p "$out"
probe="$out/probe.c"
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n); int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' >"$probe"
if ! "$clang" -fsanitize=fuzzer "$probe" -o "$out/probe" 2>"$out/probe.log"; then
	echo "skip: clang has no libFuzzer runtime (Debian: libclang-rt-dev)"
	exit 77
fi
# Two builds: ASan+UBSan (reports), and an optimised one with trapping
# overflow checks, where the optimiser may turn undefined behaviour into a
# real crash that the sanitized build only reports (issue 10's encoder bug).
"$clang" -std=gnu11 -g -O1 -Wall -Wextra -Werror -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=all -o "$out/$name" "$@"
"$clang" -std=gnu11 -g -O2 -Wall -Wextra -Werror -ftrapv -fsanitize=fuzzer,undefined \
	-fsanitize-trap=undefined -o "$out/$name-trap" "$@"
rm -rf "$out/corpus" "$out/seeds"
mkdir -p "$out/corpus"
python3 "$here/make-corpus.py" "$out/seeds" "$name"
# Inputs that once failed (regress/NAME-*) stay seeds for good.
for f in "$here/regress/$name"-*; do
	[ -e "$f" ] && cp "$f" "$out/seeds/"
done
# New inputs go to corpus/ (in the build tree); seeds/ is only read. The
# trapping build starts from what the sanitized one found. FUZZ_RUNS=N
# runs N inputs per build instead of SECONDS (bench/fuzz-long.sh).
cd "$out"
half=$(( (seconds + 1) / 2 ))
limit="-max_total_time=$half"
[ -z "${FUZZ_RUNS:-}" ] || limit="-runs=$FUZZ_RUNS"
for bin in "$name" "$name-trap"; do
	echo "== $bin"
	# libFuzzer's own exit code for a finding is 77, which meson reads
	# as "skipped": a crash must fail the test.
	"./$bin" $limit -timeout=10 -rss_limit_mb=2048 -error_exitcode=1 -timeout_exitcode=1 \
		-print_final_stats=1 corpus seeds
done
