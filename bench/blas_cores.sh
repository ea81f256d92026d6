#!/usr/bin/env bash
# Benchmark: one gpt-small training step with each OpenBLAS core type this machine can run,
# against the core pipeworks chooses (ops/blas_core.hpp); prints a table of ms per step.
# Usage: bench/blas_cores.sh   (THREADS, BATCH=8, STEPS=5, CORES="SkylakeX Haswell ...")
set -euo pipefail
cd "$(dirname "$0")/.."
threads="${THREADS:-$(nproc)}" batch="${BATCH:-8}" steps="${STEPS:-5}"
bin="${PIPEWORKS_BIN_DIR:-build/bin}"
[ -n "${PIPEWORKS_BIN_DIR:-}" ] || scripts/build.sh >/dev/null
step() {  # prints "core ms" of one bench_gpt_step run in the environment given
  env "$@" "$bin"/bench_gpt_step --json --threads "$threads" --batch "$batch" --steps "$steps" |
    python3 -c 'import json, sys; d = json.load(sys.stdin); print(d["blas_core"], d["ms_per_step_median"])'
}
# OpenBLAS's own pick: no variable, and pipeworks told to keep it that way.
read -r own own_ms < <(step -u OPENBLAS_CORETYPE PIPEWORKS_KEEP_OPENBLAS_CORETYPE=1)
# pipeworks' choice, started from the environment as it is.
read -r chosen chosen_ms < <(step)
rows=()
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then  # the variable as this environment sets it, kept
  read -r env_core env_ms < <(step PIPEWORKS_KEEP_OPENBLAS_CORETYPE=1)
fi
for c in ${CORES:-Prescott Nehalem Sandybridge Haswell Zen SkylakeX Cooperlake}; do
  read -r got ms < <(step OPENBLAS_CORETYPE="$c" PIPEWORKS_KEEP_OPENBLAS_CORETYPE=1)
  rows+=("$c $got $ms")
done
echo "gpt-small training step, batch $batch, $threads threads; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)} here"
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), OpenBLAS $(dpkg-query -W -f='${Version}' libopenblas0-pthread 2>/dev/null || echo '?')"
echo
echo "| core | loaded as | ms/step (median) | / pipeworks' choice |"
echo "|---|---|---:|---:|"
printf '| pipeworks chooses | %s | %.1f | 1.00 |\n' "$chosen" "$chosen_ms"
printf '| OpenBLAS picks (no variable) | %s | %.1f | %.2f |\n' "$own" "$own_ms" \
  "$(python3 -c "print($own_ms / $chosen_ms)")"
if [ -n "${env_core:-}" ]; then
  printf '| the environment'"'"'s OPENBLAS_CORETYPE, kept | %s | %.1f | %.2f |\n' "$env_core" "$env_ms" \
    "$(python3 -c "print($env_ms / $chosen_ms)")"
fi
for r in "${rows[@]}"; do
  read -r c got ms <<< "$r"
  printf '| OPENBLAS_CORETYPE=%s | %s | %.1f | %.2f |\n' "$c" "$got" "$ms" \
    "$(python3 -c "print($ms / $chosen_ms)")"
done
