#!/usr/bin/env bash
# Benchmark: one gpt-small training step (forward, backward, AdamW) at batch 8 in pipeworks and in
# PyTorch (Debian's python3-torch) at every threading it can run with here; prints a table.
set -euo pipefail
cd "$(dirname "$0")/.."
threads="${THREADS:-$(nproc)}"
batch="${BATCH:-8}"
steps="${STEPS:-10}"
scripts/install-deps.sh python3-torch
# PIPEWORKS_BIN_DIR: use binaries already built there instead of building build/.
bin="${PIPEWORKS_BIN_DIR:-build/bin}"
[ -n "${PIPEWORKS_BIN_DIR:-}" ] || scripts/build.sh >/dev/null
# OpenBLAS reads OPENBLAS_CORETYPE when it loads. pipeworks starts with this CPU's best kernels
# (ops/blas_core.hpp); PyTorch, which calls the same system OpenBLAS, is given the same core so
# that the ratio compares the two programs, not their kernels. CORE=name forces one for both.
if [ -n "${CORE:-}" ]; then
  export OPENBLAS_CORETYPE="$CORE" PIPEWORKS_KEEP_OPENBLAS_CORETYPE=1
fi
pw=$("$bin"/bench_gpt_step --json --threads "$threads" --batch "$batch" --steps "$steps")
core=$(/usr/bin/python3 -c 'import json, sys; print(json.loads(sys.argv[1])["blas_core"])' "$pw")
export OPENBLAS_CORETYPE="$core"
# PyTorch's baseline at its best: every split of the cores between torch's own intra-op threads
# (torch.set_num_threads, OMP_NUM_THREADS) and the OpenBLAS threads inside each of its matrix
# products (OPENBLAS_NUM_THREADS, Debian's torch calls the system BLAS), each measured.
pt_runs=()
for t in $(seq 1 "$threads"); do
  for b in $(seq 1 "$threads"); do
    run=$(OMP_NUM_THREADS="$t" OPENBLAS_NUM_THREADS="$b" /usr/bin/python3 bench/torch_gpt_step.py \
            --threads "$t" --batch "$batch" --steps "$steps")
    pt_runs+=("{\"torch_threads\": $t, \"blas_threads\": $b, \"run\": $run}")
  done
done
pt=$(IFS=,; echo "[${pt_runs[*]}]")
/usr/bin/python3 - "$pw" "$pt" <<'PY'
import json, sys
pw, pts = json.loads(sys.argv[1]), json.loads(sys.argv[2])
best = min(pts, key=lambda r: r["run"]["ms_per_step_median"])
ratio = pw["ms_per_step_median"] / best["run"]["ms_per_step_median"]
def gflops(ms):
    return pw["step_gflop"] / (ms / 1000)
cores = sorted({r["run"].get("blas_core", "?") for r in pts})
print(f"gpt-small training step, batch {pw['batch']}, {pw['threads']} cores, "
      f"OpenBLAS core {pw['blas_core']} (PyTorch: {', '.join(cores)})")
print("| implementation | threading | ms/step (median) | achieved GFLOP/s | % of sgemm rate |")
print("|---|---|---:|---:|---:|")
print(f"| pipeworks | {pw['threads']} threads | {pw['ms_per_step_median']:.1f} | "
      f"{pw['achieved_gflops']:.1f} | {100 * pw['fraction_of_sgemm']:.0f}% |")
for r in sorted(pts, key=lambda r: r["run"]["ms_per_step_median"]):
    ms = r["run"]["ms_per_step_median"]
    mark = " (best)" if r is best else ""
    print(f"| {r['run']['impl']}{mark} | torch {r['torch_threads']}, OpenBLAS "
          f"{r['blas_threads']} | {ms:.1f} | {gflops(ms):.1f} | "
          f"{100 * gflops(ms) / pw['sgemm_gflops']:.0f}% |")
print(f"| OpenBLAS sgemm (n=1024) | | | {pw['sgemm_gflops']:.1f} | 100% |")
print(f"\npipeworks / PyTorch at its best threading (torch {best['torch_threads']}, OpenBLAS "
      f"{best['blas_threads']}): {ratio:.2f}x step time (target <= 0.6); "
      f"pipeworks at {100 * pw['fraction_of_sgemm']:.0f}% of the sgemm rate (target >= 50%)")
PY
