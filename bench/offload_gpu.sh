#!/usr/bin/env bash
# Benchmark on a GPU: train --offload's cost and what it frees, GPT-2-124M's shape (context 1024,
# 12 layers, 12 heads, width 768, byte vocabulary) in 1F1B over 2 stages on one GPU: step time
# and each stage's device peak with --offload none, optimizer, activations and both, and whether
# the saved weights equal --offload none's; runs the [cuda] offload tests first. Prints a table.
#   bench/offload_gpu.sh   (BIN=dir of the binaries, default build/bin; STEPS (default 12, the
#                           first 2 untimed), BATCH (8), MICROBATCHES (4), DEVICE (cuda),
#                           OFFLOADS (the list to run), TESTS=0 to skip the tests)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${BIN:-build/bin}"
steps="${STEPS:-12}" batch="${BATCH:-8}" microbatches="${MICROBATCHES:-4}" device="${DEVICE:-cuda}"
offloads="${OFFLOADS:-none optimizer activations optimizer,activations}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if [ "${TESTS:-1}" = 1 ]; then
  "$bin"/pipeworks_tests_ops "offloaded*"
  "$bin"/pipeworks_tests_cli "train --offload on a GPU*"
fi
printf '{"type": "gpt", "context": 1024, "layers": 12, "heads": 12, "width": 768, "vocab": 256}\n' \
  >"$out/gpt2-124m.json"
python3 -c "import random; random.seed(1); open('$out/text.txt', 'w').write(''.join(
  random.choice('abcdefghijklmnopqrstuvwxyz .,\n') for _ in range(4 << 20)))"
for o in $offloads; do
  "$bin"/pipeworks train --model "$out/gpt2-124m.json" --data "$out/text.txt" --schedule 1f1b \
    --stages 2 --microbatches "$microbatches" --batch "$batch" --steps "$steps" --device "$device" \
    --offload "$o" --json --sample 0 --eval-windows 1 --save "$out/$o.safetensors" >"$out/$o.jsonl"
done
python3 - "$out" $offloads <<'PY'
import json, sys, filecmp
out, kinds = sys.argv[1], sys.argv[2:]
def run(kind):
    lines = [json.loads(l) for l in open(f"{out}/{kind}.jsonl") if l.startswith("{")]
    t = {j["step"]: j["elapsed_s"] for j in lines if "step" in j and "final_loss" not in j}
    last = max(t)
    return (t[last] - t[2]) / (last - 2), lines[-1]["stages"]
base_s, base_stages = run(kinds[0])
print(f"\ntrain --offload, GPT-2-124M shape, 1F1B over 2 stages on one GPU, seconds per step after 2")
print("| --offload | ms/step | vs " + kinds[0] + " | stage 0 device peak MiB | stage 1 device peak MiB "
      "| weights equal |")
print("|---|---:|---:|---:|---:|---|")
for k in kinds:
    s, stages = run(k)
    same = filecmp.cmp(f"{out}/{kinds[0]}.safetensors", f"{out}/{k}.safetensors", shallow=False)
    peaks = " | ".join(f"{st['device_peak_bytes'] / 2**20:.1f}" for st in stages)
    print(f"| {k} | {s * 1e3:.1f} | {s / base_s:.3f}x | {peaks} | {'yes' if same else 'NO'} |")
PY
