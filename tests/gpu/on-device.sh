#!/bin/sh
# SPDX-License-Identifier: MIT
#
# on-device.sh - every GPU check in one prepared run, for a GPU machine that
# has CUDA, python3 with PyTorch/JAX/grpcio/protobuf, but not profd's Debian
# libraries or protoc. Device time is scarce (minutes): the most important
# checks come first, each has its own time limit, the whole run has a
# deadline, and results are written as they come, so a killed run still
# returns what it finished.
#
# Here (the build machine):
#   meson setup build-rel -Dbuildtype=release && ninja -C build-rel
#   tools/device-bundle build-rel            # -> .device-bundle/ (with gpu-bin/)
# There (repository root, .device-bundle carried along):
#   OUT=<dir> tests/gpu/on-device.sh         # everything, <= DEADLINE_S (450) s
#   OUT=<dir> ONLY="c g" DEADLINE_S=270 tests/gpu/on-device.sh   # rerun steps
#   OUT=<dir> RERUN=<a summary.json> DEADLINE_S=270 tests/gpu/on-device.sh
#                                   # rerun the steps that failed, timed out or had no time
#
# Steps (ids for ONLY), in order:
#   p  what the real CUPTI answers to calls the agent relies on (the buffer
#      canary's records, PM sampling per metric): facts for the fakes
#   a  the agent on real CUPTI: CUDA sample, kernel count/names/launch links,
#      detach and a second capture, jaxlib's converter on that XSpace
#   b  upstream parts: a capture client in this Python if any (one host,
#      two comma-separated), jaxlib's converter on a JAX job's capture
#   c  profd vs the in-process tracers (PyTorch loop, JAX step): kernel
#      counts equal, median kernel durations within 1 %
#   d  overhead: launch-bound loops plain / agent idle / traced by profd /
#      traced in-process, lingering cost after the capture
#   k  CUPTI's own cost on the same loop: a bare in-process tracer
#      (bench/gpu/cupti-floor.c) with the agent's kinds and attributes
#      one at a time, beside profd's capture (figures in log.txt)
#   e  NVTX op names and steps from JAX with no flag (captures in a row),
#      PyTorch memory peak vs max_memory_reserved
#   f  CUDA graphs (per-node kernels; whole-graph trace)
#   g  PM sampling counters, then NVML counters
#   h  PyTorch alone and beside its own profiler (both orders)
#   i  Python stacks: a PyTorch training step's and a JAX step's launch
#      sites, frame spans, profctl flame, launch cost with stacks off/on;
#      a small training step's CPU time with launch stacks against
#      cProfile and torch.profiler's with_stack (issue 29's 10x goal)
#   j  the flight recorder's cost: the launch-bound CUDA loop plain vs
#      while profd records (goal <= 2 % per launch), a snapshot's kernels
#
# Writes to $OUT (default ./gpu-out), at most 8 files as the device tool
# brings back: env.txt (machine, driver, versions), log.txt (every step's
# output, appended live), summary.json (rewritten after every step:
# id, status pass|fail|skip|timeout|no-time, exit code, seconds), and the
# figures of steps b, c, d, i, j: upstream.json, compare.json, overhead.json,
# pystacks.json, recorder.json.
# Copy summary.json to bench/gpu/<date>-<device>.json once it is back.
#
# Rehearsal without a GPU: REHEARSE=1 puts a stand-in nvidia-smi on PATH, so
# every step runs until its first real CUDA call and the plumbing (bundle,
# limits, summary, ONLY) is exercised. Exits 77 without a GPU otherwise.
set -u
cd "$(dirname "$0")/../.." || exit 1
B=$(cd "${PROFD_BUNDLE:-.device-bundle}" 2>/dev/null && pwd) || {
	echo "no bundle: run tools/device-bundle on the build machine and carry .device-bundle"
	exit 1
}
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
if [ "${REHEARSE:-}" = 1 ]; then
	fake=$(mktemp -d)
	printf '#!/bin/sh\necho "GPU 0: Rehearsal stand-in (UUID: GPU-00000000-0000-0000-0000-000000000000)"\n' > "$fake/nvidia-smi"
	chmod +x "$fake/nvidia-smi"
	PATH="$fake:$PATH"
fi
nvidia-smi -L >/dev/null 2>&1 || { echo "skip: no NVIDIA GPU"; exit 77; }

if [ -n "${RERUN:-}" ]; then
	ONLY=$(${PYTHON:-python3} -c 'import json, sys
print(" ".join(s["id"] for s in json.load(open(sys.argv[1]))["steps"] if s["status"] in ("fail", "timeout", "no-time")))' "$RERUN") ||
		{ echo "RERUN: cannot read $RERUN"; exit 1; }
	[ -n "$ONLY" ] || { echo "RERUN: every step of $RERUN passed or skipped"; exit 0; }
	echo "rerunning: $ONLY"
fi
START=$(date +%s)
DEADLINE_S=${DEADLINE_S:-450}
export PROFD="$B/bin/profd" PROFCTL="$B/bin/profctl" AGENT="$B/agent/libprofd-agent.so"
export PROFD_PROTO_DESC="$B/pyproto/profd.desc" PROFD_SRC="$PWD" PROFD_BUILD="$B"
export PYTHON=${PYTHON:-python3} PYTHON_ML=${PYTHON_ML:-python3} PYTHONUNBUFFERED=1
[ -d "$B/gpu-bin" ] && export GPU_BIN="$B/gpu-bin"
# The agent finds the job's CUPTI itself (docs/agent.md "Which CUPTI").
# Where this machine's CUDA root has no CUDA 13 libcupti, point it at the
# job's nvidia-cuda-cupti wheel, else at the bundled copy.
root=${CUDA_HOME:-/usr/local/cuda}
have=
for f in "$root"/lib64/libcupti.so.13 "$root"/lib/libcupti.so.13 "$root"/extras/CUPTI/lib64/libcupti.so.13; do
	[ -e "$f" ] && have=$f
done
if [ -z "${PROFD_CUPTI_PATH:-}" ] && [ -z "$have" ]; then
	d=$($PYTHON_ML -c 'import nvidia.cuda_cupti as c, os; print(os.path.join(os.path.dirname(c.__file__), "lib"))' 2>/dev/null)
	[ -n "$d" ] && [ -e "$d/libcupti.so.13" ] || d="$B/cupti"
	export PROFD_CUPTI_PATH="$d"
fi

{
	date -u +"date %Y-%m-%dT%H:%M:%SZ"
	nvidia-smi
	nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.max.sm,memory.total --format=csv
	echo "CUPTI for the agent: ${PROFD_CUPTI_PATH:-the job's own if loaded, else beside its libcudart, else $have}"
	ls -l "$root"/lib64/libcupti.so* 2>&1 | head -3
	uname -a
	$PYTHON_ML -c 'import sys; print("python", sys.version.split()[0])' 2>&1
	$PYTHON_ML -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' 2>&1 | tail -1
	$PYTHON_ML -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__)' 2>&1 | tail -1
	$PYTHON -c 'import grpc, google.protobuf as p; print("grpcio", grpc.__version__, "protobuf", p.__version__)' 2>&1 | tail -1
	"$PROFD" --version 2>&1 | head -1
} > "$OUT/env.txt" 2>&1
sed -n '1p;/Driver Version/p' "$OUT/env.txt"
: > "$OUT/log.txt"
STEPS_JSON=""

summary() {
	printf '{\n "device": "%s",\n "started": %s,\n "deadline_s": %s,\n "steps": [%s\n ]\n}\n' \
		"$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 | tr -d '"\\')" \
		"$START" "$DEADLINE_S" "$STEPS_JSON" > "$OUT/summary.json.tmp" &&
		mv "$OUT/summary.json.tmp" "$OUT/summary.json"
}

# step ID LIMIT_S NAME CMD...: runs CMD under min(LIMIT_S, time left), its
# output appended to log.txt; records the outcome in summary.json.
step() {
	id=$1 lim=$2 name=$3
	shift 3
	case " ${ONLY:-$id} " in *" $id "*) ;; *) return 0 ;; esac
	left=$((DEADLINE_S - ($(date +%s) - START)))
	[ "$lim" -gt "$left" ] && lim=$left
	t0=$(date +%s)
	n0=$(wc -l < "$OUT/log.txt")
	if [ "$lim" -lt 15 ]; then
		rc=-1 status=no-time
	else
		printf '\n==== %s: %s (limit %s s) ====\n' "$id" "$name" "$lim" >> "$OUT/log.txt"
		# A figure states the load it was taken under (bench/RESULTS.md).
		echo "load average $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/log.txt"
		timeout -k 5 "$lim" "$@" >> "$OUT/log.txt" 2>&1
		rc=$?
		case $rc in
		0) status=pass ;;
		77) status=skip ;;
		124|137) status=timeout ;;
		*) status=fail ;;
		esac
	fi
	secs=$(($(date +%s) - t0))
	echo "$id $name: $status (exit $rc, $secs s)"
	[ "$status" = pass ] || tail -n +$((n0 + 1)) "$OUT/log.txt" | grep -E '^(FAIL|skip|note|[A-Za-z]*Error)' |
		tail -4 | cut -c1-300 | sed 's/^/    /'
	STEPS_JSON="$STEPS_JSON${STEPS_JSON:+,}
  {\"id\": \"$id\", \"name\": \"$name\", \"status\": \"$status\", \"rc\": $rc, \"seconds\": $secs, \"limit_s\": $lim}"
	summary
}

summary
[ -x "${GPU_BIN:-/nonexistent}/cupti-probe" ] &&
	step p 30 "what CUPTI answers (cupti-probe)" env LD_LIBRARY_PATH="$root/lib64:$root/extras/CUPTI/lib64" \
		"$GPU_BIN/cupti-probe"
step a 100 "agent on real CUPTI, CUDA sample" env GPU_CHECKS=sample sh tests/gpu/run-gpu-tests.sh
step b 90 "upstream client and converter" $PYTHON tests/gpu/upstream-client.py --json "$OUT/upstream.json"
step c 120 "profd vs in-process tracers" $PYTHON tests/gpu/compare-tracers.py --json "$OUT/compare.json"
step d $((75 * ${REPS:-2})) "overhead" env CAPTURE_S=4 $PYTHON bench/gpu-overhead.py --reps "${REPS:-2}" \
	--workloads cuda-loop,jax-loop --json "$OUT/overhead.json"
step k 150 "CUPTI's own floor vs profd (CUDA loop)" $PYTHON bench/gpu-cupti-floor.py --reps "${REPS:-2}"
step e 90 "JAX NVTX names and steps, PyTorch memory" env GPU_CHECKS=jax,torch-memory JAX_CAPTURES=20 \
	sh tests/gpu/run-gpu-tests.sh
step f 60 "CUDA graphs" env GPU_CHECKS=graphs sh tests/gpu/run-gpu-tests.sh
step g 90 "PM sampling and NVML counters" sh -c 'sh tests/gpu/test_pm_real.sh; a=$?
	sh tests/gpu/test_nvml_real.sh; b=$?
	for r in $a $b; do case $r in 0|77) ;; *) exit 1 ;; esac; done
	[ $a = 77 ] && [ $b = 77 ] && exit 77; exit 0'
step h 90 "PyTorch beside its own profiler" env GPU_CHECKS=torch,torch-profiler sh tests/gpu/run-gpu-tests.sh
step i 150 "Python stacks (PyTorch, JAX)" $PYTHON tests/gpu/python-stacks.py --json "$OUT/pystacks.json"
step j 90 "flight recorder overhead" $PYTHON tests/gpu/recorder-overhead.py --reps "${REPS:-2}" \
	--json "$OUT/recorder.json"
echo "total $(($(date +%s) - START)) s; summary in $OUT/summary.json"
