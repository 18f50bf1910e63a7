#!/bin/sh
# SPDX-License-Identifier: MIT
#
# gpu-overhead.sh - what the agent costs a CUDA job (needs an NVIDIA GPU;
# exits 77 without one). Four modes over the same workloads:
#
#   plain      no agent
#   idle       CUDA_INJECTION64_PATH=libprofd-agent.so, profd running, no
#              capture: the agent is connected but CUPTI is untouched
#   traced     the same, with a profd capture spanning the whole run
#   jax        (JAX workload only) JAX's own in-process profiler
#              (jax.profiler.trace) instead of the agent
#
# Workloads: a launch-bound CUDA C loop (many tiny kernels: worst case for
# per-launch overhead) and, if jax is importable, a jitted small-op loop.
# Prints one line per mode: median wall time of --reps runs and the ratio
# to plain. Record results in bench/RESULTS.md.
#
#   bench/gpu-overhead.sh [launches (200000)] [reps (5)]
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
BUILD=${PROFD_BUILD:-$SRC/build}
LAUNCHES=${1:-200000}
REPS=${2:-5}
PYTHON_ML=${PYTHON_ML:-python3}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "skip: no NVIDIA GPU"
	exit 77
fi
AGENT=$BUILD/collectors/cupti/libprofd-agent.so
[ -f "$AGENT" ] || { echo "build libprofd-agent.so first (-Dcupti=enabled)"; exit 1; }
NVCC=${NVCC:-$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/profd-overhead.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

cat > "$WORK/launch.cu" <<'CU'
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
__global__ void tiny(int *p) { if (threadIdx.x == 0 && p) p[blockIdx.x] += 1; }
int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	int *d;
	struct timespec a, b;
	cudaMalloc(&d, 1024 * sizeof(int));
	tiny<<<1, 32>>>(d);
	cudaDeviceSynchronize();
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++) {
		tiny<<<1, 32>>>(d);
		if (i % 1024 == 1023)
			cudaStreamSynchronize(0);
	}
	cudaDeviceSynchronize();
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.6f\n", (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9);
	return 0;
}
CU
"$NVCC" -O2 -o "$WORK/launch" "$WORK/launch.cu" || exit 1

cat > "$WORK/jaxloop.py" <<'PYJ'
import sys, time
import jax, jax.numpy as jnp
f = jax.jit(lambda x: jnp.tanh(x) * 1.0001 + 0.5)
x = jnp.ones((256, 256))
for _ in range(50): x = f(x)
x.block_until_ready()
mode = sys.argv[1] if len(sys.argv) > 1 else "plain"
def run():
    y = x
    t = time.perf_counter()
    for _ in range(20000): y = f(y)
    y.block_until_ready()
    return time.perf_counter() - t
if mode == "jax":
    with jax.profiler.trace(sys.argv[2]):
        print("%.6f" % run())
else:
    print("%.6f" % run())
PYJ

SOCK=$WORK/agent.sock
"$BUILD/daemon/profd" --listen 127.0.0.1:0 --agent-socket "$SOCK" --log-level warn > "$WORK/profd.log" 2>&1 &
PROFD_PID=$!
trap 'kill $PROFD_PID 2>/dev/null; rm -rf "$WORK"' EXIT
sleep 1
PORT=$(sed -n 's/.*listening on .*(port \([0-9]*\)).*/\1/p' "$WORK/profd.log" | head -1)

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# capture MS: one profd capture of MS milliseconds in the background.
capture() {
	PROFD_SRC=$SRC PROFD_BUILD=$BUILD PYTHONPATH=$SRC/tests/pylib /usr/bin/python3 -c "
import sys, profdtest as T
P = T.protos()
ch = T.channel('127.0.0.1:$PORT')
prof = T.stub(ch, 'Profile', P.ps.ProfileRequest, P.ps.ProfileResponse)
prof(T.profile_request(P, int(sys.argv[1]), 'localhost:$PORT', session_id='overhead'), timeout=600)
" "$1" &
}

run_mode() { # mode cmd...
	mode=$1
	shift
	for i in $(seq "$REPS"); do
		case $mode in
		plain) "$@" ;;
		idle) CUDA_INJECTION64_PATH=$AGENT PROFD_AGENT_SOCKET=$SOCK "$@" ;;
		traced)
			capture 120000
			cap=$!
			sleep 1.5 # the capture must open before CUDA starts working
			CUDA_INJECTION64_PATH=$AGENT PROFD_AGENT_SOCKET=$SOCK "$@"
			kill $cap 2>/dev/null
			wait $cap 2>/dev/null
			;;
		esac
	done | median
}

echo "workload: $LAUNCHES tiny kernel launches, $REPS reps, $(nvidia-smi -L | head -1)"
base=$(run_mode plain "$WORK/launch" "$LAUNCHES")
echo "plain   $base s"
for m in idle traced; do
	t=$(run_mode $m "$WORK/launch" "$LAUNCHES")
	echo "$m $t s  ($(echo "$t $base" | awk '{printf "%.3fx", $1/$2}'))"
done
# Note: "traced" counts CUPTI attach inside the process (first launch after
# START) plus the per-record cost; the agent detaches (cuptiFinalize) after.

if "$PYTHON_ML" -c "import jax" 2>/dev/null; then
	echo "workload: jax jit loop (20000 steps)"
	jbase=$(run_mode plain "$PYTHON_ML" "$WORK/jaxloop.py" plain)
	echo "plain   $jbase s"
	for m in idle traced; do
		t=$(run_mode $m "$PYTHON_ML" "$WORK/jaxloop.py" plain)
		echo "$m $t s  ($(echo "$t $jbase" | awk '{printf "%.3fx", $1/$2}'))"
	done
	t=$(for i in $(seq "$REPS"); do "$PYTHON_ML" "$WORK/jaxloop.py" jax "$WORK/jaxtrace"; done | median)
	echo "jax-in-process $t s  ($(echo "$t $jbase" | awk '{printf "%.3fx", $1/$2}'))"
else
	echo "skip jax workload: jax not importable by $PYTHON_ML"
fi
