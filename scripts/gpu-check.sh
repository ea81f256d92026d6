#!/usr/bin/env bash
# The CUDA issue's device checks as one script for a lent GPU machine (after
# `scripts/gpu-deps.sh gather .debs` here and carrying .debs): builds the test programs and the
# CLI against the carried packages, names the GPU, runs every [cuda] test (ops, the semantics with
# GPU stages, the GPU reducer, the GPU profiler, NCCL, train on a GPU), then the op tests under
# compute-sanitizer's memcheck and initcheck.
# Logs go to $OUT (the device tool's folder) or build-gpu/checks. Exit 0 only if all pass.
#   scripts/gpu-check.sh [DIR]   (DIR: the .deb folder, default .debs)
set -uo pipefail
cd "$(dirname "$0")/.."
dir="${1:-.debs}"
logs="${OUT:-build-gpu/checks}"
mkdir -p "$logs"
start=$(date +%s)
PIPEWORKS_BUILD_BENCH=OFF scripts/gpu-deps.sh build "$dir" pipeworks_tests_ops \
  pipeworks_tests_runtime pipeworks_tests_partition pipeworks_tests_transport pipeworks_tests_cli \
  pipeworks_cli > "$logs/build.log" 2>&1 ||
  { tail -40 "$logs/build.log"; echo "gpu-check: the build failed (log: $logs/build.log)"; exit 1; }
echo "gpu-check: built in $(( $(date +%s) - start )) s"
# shellcheck disable=SC1091
source build-gpu/env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$logs/gpu.txt"
status=0
build-gpu/bin/pipeworks_tests_ops "[cuda],[device]" --durations yes 2>&1 | tee "$logs/cuda-tests.log" ||
  status=1
for t in runtime partition transport cli; do
  build-gpu/bin/pipeworks_tests_$t "[cuda]" 2>&1 | tee -a "$logs/cuda-tests.log" || status=1
done
if command -v compute-sanitizer > /dev/null; then
  # API errors are not reported: the allocator's test plants an out-of-memory and NCCL probes
  # kernels; the tests check every CUDA call's result themselves.
  for tool in memcheck initcheck; do
    compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 3 \
      build-gpu/bin/pipeworks_tests_ops "[cuda]" > "$logs/$tool.log" 2>&1 || status=1
    tail -2 "$logs/$tool.log"
  done
else
  echo "gpu-check: no compute-sanitizer here: memcheck not run" | tee "$logs/memcheck.log"
fi
echo "gpu-check: $([ $status = 0 ] && echo all passed || echo FAILED) in $(( $(date +%s) - start )) s"
exit $status
