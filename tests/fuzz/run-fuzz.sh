#!/bin/sh
# SPDX-License-Identifier: MIT
# run-fuzz.sh CLANG NAME SECONDS SOURCE... - build one libFuzzer target with
# clang (the main build may use gcc) into the current build directory, seed
# it with make-corpus.py and fuzz for SECONDS. SOURCE... may also hold the
# target's own compiler flags (-I, -D, -l), passed on as they are. Exits 77 (meson's skip) when
# clang or its libFuzzer runtime is missing; $FUZZ_SECONDS overrides SECONDS.
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
"$clang" -std=gnu11 -g -O1 -Wall -Wextra -Werror -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=all -I"$src_root/collectors" -o "$out/$name" "$@"
rm -rf "$out/corpus" "$out/seeds"
mkdir -p "$out/corpus"
python3 "$here/make-corpus.py" "$out/seeds" "$name"
# New inputs go to corpus/ (in the build tree); seeds/ is only read.
cd "$out"
exec "./$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	corpus seeds
