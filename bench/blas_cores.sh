#!/usr/bin/env bash
# Benchmark: one gpt-small training step with each OpenBLAS core type this machine can run,
# against the core pipeworks chooses (ops/blas_core.hpp); prints a table of ms per step.
# Every configuration runs REPEATS times, in turns, and keeps its fastest median: a busy moment
# then slows one turn, not one configuration.
# Usage: bench/blas_cores.sh   (THREADS, BATCH=8, STEPS=5, REPEATS=3, CORES="SkylakeX Haswell ...")
set -euo pipefail
cd "$(dirname "$0")/.."
threads="${THREADS:-$(nproc)}" batch="${BATCH:-8}" steps="${STEPS:-5}" repeats="${REPEATS:-3}"
bin="${PIPEWORKS_BIN_DIR:-build/bin}"
[ -n "${PIPEWORKS_BIN_DIR:-}" ] || scripts/build.sh >/dev/null
# Each configuration: a label and the environment bench_gpt_step runs in.
labels=("pipeworks chooses" "OpenBLAS picks (no variable)")
envs=("" "-u OPENBLAS_CORETYPE PIPEWORKS_KEEP_OPENBLAS_CORETYPE=1")
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then  # the variable as this environment sets it, kept
  labels+=("this environment's OPENBLAS_CORETYPE, kept"); envs+=("PIPEWORKS_KEEP_OPENBLAS_CORETYPE=1")
fi
for c in ${CORES:-Prescott Nehalem Sandybridge Haswell Zen SkylakeX Cooperlake}; do
  labels+=("OPENBLAS_CORETYPE=$c"); envs+=("OPENBLAS_CORETYPE=$c PIPEWORKS_KEEP_OPENBLAS_CORETYPE=1")
done
runs="$(mktemp)"
trap 'rm -f "$runs"' EXIT
for ((r = 0; r < repeats; ++r)); do
  for i in "${!labels[@]}"; do
    # shellcheck disable=SC2086  # the environment is a list of words
    env ${envs[$i]} "$bin"/bench_gpt_step --json --threads "$threads" --batch "$batch" \
      --steps "$steps" | python3 -c 'import json, sys; d = json.load(sys.stdin); print(sys.argv[1], d["blas_core"], d["ms_per_step_median"])' "$i" >> "$runs"
  done
done
echo "gpt-small training step, batch $batch, $threads threads, best of $repeats turns;" \
  "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)} in this environment"
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), OpenBLAS" \
  "$(dpkg-query -W -f='${Version}' libopenblas0-pthread 2>/dev/null || echo '?')"
echo
python3 - "$runs" "${labels[@]}" <<'PY'
import sys
labels = sys.argv[2:]
best = {}
for line in open(sys.argv[1]):
    i, core, ms = line.split()
    i, ms = int(i), float(ms)
    if i not in best or ms < best[i][1]:
        best[i] = (core, ms)
base = best[0][1]
print("| configuration | core loaded | ms/step (median) | / pipeworks' choice |")
print("|---|---|---:|---:|")
for i, label in enumerate(labels):
    core, ms = best[i]
    print(f"| {label} | {core} | {ms:.1f} | {ms / base:.2f} |")
PY
