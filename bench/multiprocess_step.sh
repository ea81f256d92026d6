#!/usr/bin/env bash
# Step time of a 2-stage gpt-small 1F1B run with each stage in a worker process of its own (a
# driver and 2 workers on 127.0.0.1; tensors over UCX, then inside CAF's messages) against the same
# run in one process, alternating, REPEATS times each; prints the medians and their ratios.
# Usage: bench/multiprocess_step.sh   (REPEATS=5 STEPS=12 PIPEWORKS_BIN_DIR=build/bin)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${PIPEWORKS_BIN_DIR:-build/bin}/pipeworks"
repeats="${REPEATS:-5}" steps="${STEPS:-12}"
work="$(mktemp -d)"
# Workers start inside $(...), so they are not this shell's children: their pids are kept.
trap 'pkill -P $$ 2>/dev/null || true; [ -f "$work/pids" ] && kill $(cat "$work/pids") 2>/dev/null; rm -rf "$work"' EXIT

per_step() { python3 bench/per_step.py "$1"; }  # seconds per step after the warm-up

run() {  # $@: extra flags; prints seconds per step
  "$bin" train --model gpt-small --data /usr/share/games/fortunes --steps "$steps" --batch 16 \
    --microbatches 4 --schedule 1f1b --stages 2 --sample 0 --eval-windows 4 --json "$@" \
    > "$work/run.jsonl" 2> "$work/run.err" || { cat "$work/run.err" >&2; exit 1; }
  per_step "$work/run.jsonl"
}

start_worker() {  # $1: name; prints the address
  "$bin" worker --listen 127.0.0.1:0 > "$work/$1.out" 2>/dev/null &
  echo $! >> "$work/pids"
  for _ in $(seq 1 500); do grep -q "listening on" "$work/$1.out" 2>/dev/null && break; sleep 0.01; done
  awk '/listening on/ {print $NF}' "$work/$1.out"
}
w1=$(start_worker w1); w2=$(start_worker w2)

local_times=() remote_times=() caf_times=()
for _ in $(seq 1 "$repeats"); do
  local_times+=("$(run)")
  remote_times+=("$(run --workers "$w1,$w2" --transport ucx)")
  caf_times+=("$(run --workers "$w1,$w2" --transport caf)")
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
l=$(median "${local_times[@]}"); r=$(median "${remote_times[@]}"); c=$(median "${caf_times[@]}")
echo "gpt-small, 1F1B, p = 2, m = 4, batch 16; seconds per step, median of $repeats (steps 3..$steps)"
printf "%-44s %10s %8s\n" "run" "s/step" "ratio"
printf "%-44s %10.4f %8.3f\n" "one process (baseline)" "$l" 1
printf "%-44s %10.4f %8.3f\n" "driver + 2 workers, --transport ucx" "$r" "$(awk -v a="$r" -v b="$l" 'BEGIN {print a / b}')"
printf "%-44s %10.4f %8.3f\n" "driver + 2 workers, --transport caf" "$c" "$(awk -v a="$c" -v b="$l" 'BEGIN {print a / b}')"
