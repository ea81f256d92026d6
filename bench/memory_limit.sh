#!/usr/bin/env bash
# Benchmark: the largest GPT that fits a memory limit per rank on 4 CPU stages (1F1B) in each
# --recompute mode, and with 2 replicas at each --zero level, by the runtime's own prediction
# (train --memory-limit), and each feature's step time on the largest model that fits without
# it; prints two tables.
set -euo pipefail
cd "$(dirname "$0")/.."
limit="${LIMIT:-256M}"
layers="${LAYERS:-8}"
batch="${BATCH:-16}"
microbatches="${MICROBATCHES:-8}"
replicas="${REPLICAS:-2}"    # the ZeRO table's replicas of each stage
steps="${STEPS:-5}"          # timed runs: the first step is not counted (warm-up)
# PIPEWORKS_BIN_DIR: use binaries already built there instead of building build/.
bin="${PIPEWORKS_BIN_DIR:-build/bin}"
[ -n "${PIPEWORKS_BIN_DIR:-}" ] || scripts/build.sh >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# A GPT of the given width (64 per head), $layers layers, context 128, byte vocabulary.
model() {
  local width=$1 file="$out/gpt-$1.json"
  printf '{"type": "gpt", "context": 128, "layers": %d, "heads": %d, "width": %d, "vocab": 256}\n' \
    "$layers" $((width / 64)) "$width" >"$file"
  echo "$file"
}
pipeline=(--schedule 1f1b --stages 4 --microbatches "$microbatches" --batch "$batch")
# Whether the model of this width fits the limit with these flags: the check runs before
# anything trains; --print-plan stops there.
fits() {
  local width=$1
  shift
  "$bin"/pipeworks train --model "$(model "$width")" "${pipeline[@]}" "$@" \
    --memory-limit "$limit" --print-plan "$out/plan.json" >/dev/null 2>"$out/err.txt"
}
params() {
  /usr/bin/python3 -c "C=$1; L=$layers; print(2*256*C + 128*C + L*(12*C*C + 13*C) + 2*C)"
}
# The widest multiple of 64 that fits (up to 4096) with these flags.
widest() {
  local lo=0 hi=64
  while [ "$hi" -le 4096 ] && fits "$hi" "$@"; do lo=$hi; hi=$((hi * 2)); done
  while [ $((hi - lo)) -gt 64 ]; do
    local mid=$(((lo + hi) / 128 * 64))
    if fits "$mid" "$@"; then lo=$mid; else hi=$mid; fi
  done
  echo "$lo"
}
# Median step time (ms) of the model of this width with these flags.
step_ms() {
  local width=$1
  shift
  "$bin"/pipeworks train --model "$(model "$width")" "${pipeline[@]}" "$@" --steps "$steps" \
    --eval-windows 1 --sample 0 --json >"$out/run.jsonl"
  /usr/bin/python3 - "$out/run.jsonl" <<'PY'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
t = [l["elapsed_s"] for l in lines if "step" in l and "final_loss" not in l]
steps = [1000 * (b - a) for a, b in zip(t, t[1:])]
print(f"{statistics.median(steps):.1f}")
PY
}
declare -A wide
for mode in none selective full; do wide[$mode]=$(widest --recompute "$mode"); done
base=${wide[none]}
[ "$base" -gt 0 ] || { echo "no width fits $limit without recomputation"; exit 1; }
declare -A ms
for mode in none selective full; do ms[$mode]=$(step_ms "$base" --recompute "$mode"); done
echo "GPT of $layers layers, context 128, 1F1B on 4 CPU stages, batch $batch in $microbatches" \
     "microbatches, memory limit $limit per rank; $(nproc) cores, $(date -u +%F)"
echo "| --recompute | widest that fits | parameters | step time at width $base (ms) | vs none |"
echo "|---|---:|---:|---:|---:|"
for mode in none selective full; do
  w=${wide[$mode]}
  /usr/bin/python3 -c "print(f'| $mode | {$w} | {$(params "$w")/1e6:.1f}M | ${ms[$mode]} | {${ms[$mode]}/${ms[none]}:.2f}x |')"
done

# ZeRO: the same pipeline with $replicas replicas of each stage (each replica's microbatches hold
# batch / replicas samples between them), at each --zero level.
declare -A zwide zms
for zero in 0 1 2; do zwide[$zero]=$(widest --replicas "$replicas" --zero "$zero"); done
zbase=${zwide[0]}
[ "$zbase" -gt 0 ] || { echo "no width fits $limit with $replicas replicas"; exit 1; }
for zero in 0 1 2; do zms[$zero]=$(step_ms "$zbase" --replicas "$replicas" --zero "$zero"); done
echo
echo "The same with $replicas replicas of each stage ($((4 * replicas)) ranks)"
echo "| --zero | widest that fits | parameters | step time at width $zbase (ms) | vs 0 |"
echo "|---|---:|---:|---:|---:|"
for zero in 0 1 2; do
  w=${zwide[$zero]}
  /usr/bin/python3 -c "print(f'| $zero | {$w} | {$(params "$w")/1e6:.1f}M | ${zms[$zero]} | {${zms[$zero]}/${zms[0]}:.2f}x |')"
done
