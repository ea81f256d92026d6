#!/usr/bin/env bash
# Benchmark on a GPU: one GPT training step (gpt-small and a GPT-2-124M shape, batch 8) in
# pipeworks (bench_gpu_step) and in PyTorch eager, eager with scaled_dot_product_attention and
# torch.compile (bench/torch_gpu_step.py) on
# the same GPU in this run, plus cuBLAS's rate on the model's own GEMM shapes; prints a table.
#   bench/gpu_step.sh          (BIN=dir of the pipeworks binaries, default build/bin;
#                               TF32=0 for strict fp32 GEMMs on both sides; BF16=1 for
#                               pipeworks --bf16 against torch.autocast(bfloat16) and bf16
#                               cuBLAS; STEPS, WARMUP)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${BIN:-build/bin}"
steps="${STEPS:-20}" warmup="${WARMUP:-5}"
tf=(); [ "${TF32:-1}" = 1 ] && tf=(--tf32)
[ "${BF16:-0}" = 1 ] && tf+=(--bf16)
log=$(mktemp)
for s in gpt-small gpt2-124m; do
  "$bin"/bench_gpu_step --shape "$s" --steps "$steps" --warmup "$warmup" "${tf[@]}" | tee -a "$log"
done
(cd bench && python3 torch_gpu_step.py --steps "$steps" --warmup "$warmup" "${tf[@]}") | tee -a "$log"
python3 - "$log" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
gpu = next((r["gpu"] for r in rows if "gpu" in r), "?")
def pick(shape, **kw):
    for r in rows:
        if r.get("shape") == shape and all(r.get(k) == v for k, v in kw.items()):
            return r
    return None
bf16 = any(r.get('bf16') for r in rows)
tf32 = any(r.get('tf32') for r in rows)
print(f"\nGPT training step on {gpu}, batch 8, matrix products in "
      f"{'bf16 (PyTorch: autocast)' if bf16 else 'TF32' if tf32 else 'fp32'}")
print("| shape | pipeworks ms | PyTorch eager ms | eager + SDPA ms | torch.compile ms | "
      "pipeworks / eager | pipeworks / eager + SDPA | pipeworks TFLOP/s | "
      "cuBLAS TFLOP/s (model GEMMs) | fraction |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
def ms(r):
    return f"{r['ms_median']:.2f}" if r else "-"
for shape in ("gpt-small", "gpt2-124m"):
    pw, eager = pick(shape, impl="pipeworks"), pick(shape, mode="eager")
    sdpa, comp, gemm = pick(shape, mode="sdpa"), pick(shape, mode="compile"), pick(shape, measure="gemm")
    if not pw or not eager:
        print(f"| {shape} | missing: {'pipeworks' if not pw else 'eager'} |")
        continue
    g = gemm["tflops"] if gemm else float("nan")
    vs_sdpa = f"{pw['ms_median'] / sdpa['ms_median']:.2f}x" if sdpa else "-"
    print(f"| {shape} | {ms(pw)} | {ms(eager)} | {ms(sdpa)} | {ms(comp)} | "
          f"{pw['ms_median'] / eager['ms_median']:.2f}x | {vs_sdpa} | {pw['tflops']:.1f} | "
          f"{g:.1f} | {pw['tflops'] / g:.2f} |")
PY
