#!/usr/bin/env bash
# Benchmark: one gpt-small training step (forward, backward, AdamW) at batch 8 in pipeworks and in
# PyTorch (Debian's python3-torch, run by /usr/bin/python3) with the same threads; prints a table.
set -euo pipefail
cd "$(dirname "$0")/.."
threads="${THREADS:-2}"
batch="${BATCH:-8}"
steps="${STEPS:-10}"
scripts/install-deps.sh python3-torch
# PIPEWORKS_BIN_DIR: use binaries already built there instead of building build/.
bin="${PIPEWORKS_BIN_DIR:-build/bin}"
[ -n "${PIPEWORKS_BIN_DIR:-}" ] || scripts/build.sh >/dev/null
# OpenBLAS reads OPENBLAS_CORETYPE at load time; both sides run with the CPU's own kernels.
unset OPENBLAS_CORETYPE
pw=$("$bin"/bench_gpt_step --json --threads "$threads" --batch "$batch" --steps "$steps")
pt=$(OMP_NUM_THREADS="$threads" /usr/bin/python3 bench/torch_gpt_step.py \
       --threads "$threads" --batch "$batch" --steps "$steps")
/usr/bin/python3 - "$pw" "$pt" <<'PY'
import json, sys
pw, pt = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ratio = pw["ms_per_step_median"] / pt["ms_per_step_median"]
print(f"gpt-small training step, batch {pw['batch']}, {pw['threads']} threads, "
      f"OpenBLAS core {pw['blas_core']}")
print("| implementation | ms/step (median) | achieved GFLOP/s | % of sgemm rate |")
print("|---|---:|---:|---:|")
print(f"| pipeworks | {pw['ms_per_step_median']:.1f} | {pw['achieved_gflops']:.1f} | "
      f"{100 * pw['fraction_of_sgemm']:.0f}% |")
pt_gflops = pw["step_gflop"] / (pt["ms_per_step_median"] / 1000)
print(f"| {pt['impl']} | {pt['ms_per_step_median']:.1f} | {pt_gflops:.1f} | "
      f"{100 * pt_gflops / pw['sgemm_gflops']:.0f}% |")
print(f"| OpenBLAS sgemm (n=1024) | | {pw['sgemm_gflops']:.1f} | 100% |")
print(f"\npipeworks / PyTorch step time: {ratio:.2f}x (target <= 1.0); "
      f"pipeworks at {100 * pw['fraction_of_sgemm']:.0f}% of the sgemm rate (target >= 50%)")
PY
