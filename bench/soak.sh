#!/bin/sh
# SPDX-License-Identifier: MIT
# soak.sh BUILD [CAPTURES] - the long soak of issue 10: CAPTURES (default
# 1000) sequential captures with two fake agents streaming, profd under
# valgrind's leak checker (tests/integration/test_agent_soak.py, which the
# `valgrind` suite runs with 100). Prints the figures for bench/RESULTS.md:
# leaks, VmRSS of the first and last 100 captures, open fds.
set -eu
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
SOAK_CAPTURES=${2:-1000} PROFD=$build/daemon/profd PROFD_SRC=$src PROFD_BUILD=$build \
	PYTHONPATH=$src/tests/pylib:$src/tests/integration \
	/usr/bin/python3 "$src/tests/integration/test_agent_soak.py"
