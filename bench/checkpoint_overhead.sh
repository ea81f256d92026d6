#!/usr/bin/env bash
# Benchmark: the cost of checkpoints on the main job's run (gpt-small, PipeDream-2BW over 4
# stages, 4 microbatches of 2 windows): --save-every 10 against no checkpoints, in the same script,
# alternating, several rounds; each run's training time (its last step's elapsed_s, which
# includes waiting for the last checkpoint's files) counts, the median of the rounds is reported.
# Also how long one checkpoint takes and its size. Prints a markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
steps="${STEPS:-60}"
every="${EVERY:-10}"
rounds="${ROUNDS:-3}"
bin="${PIPEWORKS_BIN_DIR:-build/bin}"
[ -n "${PIPEWORKS_BIN_DIR:-}" ] || scripts/build.sh >/dev/null
unset OPENBLAS_CORETYPE
work="$(mktemp -d "$PWD/out/bench-ckpt-overhead.XXXXXX" 2>/dev/null || mktemp -d)"
trap 'rm -rf "$work"' EXIT

train() {  # the main job's settings, shorter; extra flags after
  "$bin"/pipeworks train --model gpt-small --data /usr/share/games/fortunes --schedule 2bw \
    --stages 4 --microbatches 4 --batch 8 --steps "$steps" --lr 2e-3 --warmup 30 \
    --optimizer adamw --seed 1 --sample 0 --eval-windows 1 --json "$@"
}
elapsed() { tail -1 "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["elapsed_s"])'; }

plain=(); saving=()
for r in $(seq "$rounds"); do
  train > "$work/plain-$r.jsonl"
  plain+=("$(elapsed "$work/plain-$r.jsonl")")
  rm -rf "$work/ckpt"
  train --save-every "$every" --checkpoint-dir "$work/ckpt" > "$work/saving-$r.jsonl"
  saving+=("$(elapsed "$work/saving-$r.jsonl")")
done
bytes=$(du -sb "$(ls -d "$work"/ckpt/step-* | tail -1)" | cut -f1)
count=$(( (steps - 1) / every ))
python3 - "$steps" "$every" "$count" "$bytes" "${plain[*]}" "${saving[*]}" <<'PY'
import statistics, sys
steps, every, count, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
plain = [float(x) for x in sys.argv[5].split()]
saving = [float(x) for x in sys.argv[6].split()]
p, s = statistics.median(plain), statistics.median(saving)
print(f"gpt-small, 2bw over 4 stages, {steps} steps; median of {len(plain)} alternating rounds\n")
print("| run | training time (s) | per step (ms) | ratio |")
print("|---|---:|---:|---:|")
print(f"| no checkpoints (baseline) | {p:.2f} | {1000*p/steps:.1f} | 1.000 |")
print(f"| --save-every {every} ({count} checkpoints of {size/1e6:.1f} MB) | {s:.2f} | {1000*s/steps:.1f} | {s/p:.3f} |")
print(f"\ncost of checkpointing: {100*(s/p-1):+.1f}% (target <= 10%); "
      f"{1000*(s-p)/max(count,1):.0f} ms per checkpoint; rounds: plain {plain}, saving {saving}")
PY
