#!/usr/bin/env bash
# The CPU step time of the main job's run (gpt-small, 2BW over 4 stages) with this build against a
# build of another revision (the code before a change, e.g. the device seam), alternating, REPEATS
# times each; prints the medians and their ratio. Builds REV's CLI in a scratch worktree first
# (a few minutes on 2 cores) unless BASE_BIN names a pipeworks binary already built.
# Usage: bench/seam_cost.sh REV   (REPEATS=5 STEPS=16 PIPEWORKS_BIN_DIR=build/bin BASE_BIN=...)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${PIPEWORKS_BIN_DIR:-build/bin}")/pipeworks"
repeats="${REPEATS:-5}" steps="${STEPS:-16}"
work="$(mktemp -d)"
trap 'rm -rf "$work"; [ -n "${tree:-}" ] && git worktree remove --force "$tree" 2>/dev/null || true' EXIT
base="${BASE_BIN:-}"
if [ -z "$base" ]; then
  [ $# -ge 1 ] || { echo "usage: bench/seam_cost.sh REV  (or BASE_BIN=path/to/pipeworks)" >&2; exit 2; }
  tree="$work/base"
  git worktree add -q --detach "$tree" "$1"
  cmake -S "$tree" -B "$tree/build" -DCMAKE_BUILD_TYPE=Release -DPIPEWORKS_BUILD_TESTS=OFF \
    -DPIPEWORKS_BUILD_BENCH=OFF > "$work/base-build.log" 2>&1
  cmake --build "$tree/build" -j "$(nproc)" --target pipeworks_cli >> "$work/base-build.log" 2>&1 ||
    { tail -20 "$work/base-build.log" >&2; exit 1; }
  base="$tree/build/bin/pipeworks"
fi

per_step() { python3 bench/per_step.py "$1"; }  # seconds per step after the warm-up
run() {  # $1: the binary; prints seconds per step
  "$1" train --model gpt-small --data /usr/share/games/fortunes --steps "$steps" --batch 8 \
    --microbatches 4 --schedule 2bw --stages 4 --sample 0 --eval-windows 4 --json \
    > "$work/run.jsonl" 2> "$work/run.err" || { cat "$work/run.err" >&2; exit 1; }
  per_step "$work/run.jsonl"
}
base_times=() new_times=()
for _ in $(seq 1 "$repeats"); do
  base_times+=("$(run "$base")")
  new_times+=("$(run "$bin")")
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
b=$(median "${base_times[@]}"); n=$(median "${new_times[@]}")
echo "gpt-small, 2BW, p = 4, m = 4, batch 8, CPU; seconds per step, median of $repeats (steps 3..$steps)"
echo "runs: base ${base_times[*]} / this ${new_times[*]}"
printf "%-30s %10s %8s\n" "build" "s/step" "ratio"
printf "%-30s %10.4f %8.3f\n" "base (${1:-$base})" "$b" 1
printf "%-30s %10.4f %8.3f\n" "this build" "$n" "$(awk -v a="$n" -v b="$b" 'BEGIN {print a / b}')"
