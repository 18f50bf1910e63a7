#!/bin/sh
# SPDX-License-Identifier: MIT
#
# on-device.sh - every GPU check in one go, for a GPU machine that has CUDA,
# python3 with PyTorch/JAX/grpcio/protobuf, but not profd's Debian
# libraries or protoc. Device time is scarce: one call runs it all.
#
# Here (the build machine):
#   ninja -C build && tools/device-bundle          # -> .device-bundle/
# There (repository root, the bundle carried along):
#   OUT=<dir for logs> tests/gpu/on-device.sh
#
# Runs, logging each to $OUT (default ./gpu-out):
#   nvidia-smi.txt    the machine
#   gpu-tests.log     tests/gpu/run-gpu-tests.sh (agent on real CUPTI:
#                     CUDA C sample + PyTorch, jaxlib's converter)
#   nvml-real.log     tests/gpu/test_nvml_real.sh (real NVML counters)
#   pm-real.log       tests/gpu/test_pm_real.sh (CUPTI PM sampling counters)
#   overhead.log/.json  bench/gpu-overhead.py (plain / idle / traced / JAX)
# and prints one line per step with its exit status. Exits 77 without a GPU.
set -u
cd "$(dirname "$0")/../.." || exit 1
B=$(cd "${PROFD_BUNDLE:-.device-bundle}" 2>/dev/null && pwd) || {
	echo "no bundle: run tools/device-bundle on the build machine and carry .device-bundle"
	exit 1
}
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || { echo "skip: no NVIDIA GPU"; exit 77; }
head -12 "$OUT/nvidia-smi.txt"

export PROFD="$B/bin/profd" PROFCTL="$B/bin/profctl" AGENT="$B/agent/libprofd-agent.so"
export PROFD_PROTO_DESC="$B/pyproto/profd.desc" PROFD_SRC="$PWD" PROFD_BUILD="$B"
export PYTHON=${PYTHON:-python3} PYTHON_ML=${PYTHON_ML:-python3} PYTHONUNBUFFERED=1
# The agent finds the job's CUPTI itself (docs/agent.md "Which CUPTI").
# Where this machine's CUDA root has no CUDA 13 libcupti, point it at the
# job's nvidia-cuda-cupti wheel, else at the bundled copy.
root=${CUDA_HOME:-/usr/local/cuda}
if [ -z "${PROFD_CUPTI_PATH:-}" ] && ! ls "$root"/lib64/libcupti.so.13 "$root"/lib/libcupti.so.13 >/dev/null 2>&1; then
	d=$($PYTHON_ML -c 'import nvidia.cuda_cupti as c, os; print(os.path.join(os.path.dirname(c.__file__), "lib"))' 2>/dev/null)
	[ -n "$d" ] && [ -e "$d/libcupti.so.13" ] || d="$B/cupti"
	export PROFD_CUPTI_PATH="$d"
fi
echo "CUPTI for the agent: ${PROFD_CUPTI_PATH:-found by the agent under $root or beside the job's libcudart}"

step() { # name log cmd...
	name=$1 log=$2
	shift 2
	start=$(date +%s)
	"$@" > "$OUT/$log" 2>&1
	rc=$?
	echo "$name: exit $rc ($(( $(date +%s) - start )) s) -> $log"
	tail -5 "$OUT/$log" | sed 's/^/    /'
}
step "gpu tests (agent on CUPTI)" gpu-tests.log sh tests/gpu/run-gpu-tests.sh
step "NVML on a real GPU" nvml-real.log sh tests/gpu/test_nvml_real.sh
step "PM sampling on a real GPU" pm-real.log sh tests/gpu/test_pm_real.sh
step "overhead bench" overhead.log $PYTHON bench/gpu-overhead.py --reps "${REPS:-3}" --json "$OUT/overhead.json"
