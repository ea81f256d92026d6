#!/usr/bin/env bash
# Quick start, command one: set up, build, and run the main job: gpt-small on the fortunes text,
# pipelined over 4 stages with PipeDream-2BW on the actor runtime, writing a trace.
# About a minute of training on 2 AVX-512 cores (450 steps of 8 windows; see bench/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
mkdir -p out
exec build/bin/pipeworks train --model gpt-small --data /usr/share/games/fortunes \
  --schedule 2bw --stages 4 --microbatches 4 \
  --steps 450 --batch 8 --lr 2e-3 --warmup 30 --optimizer adamw --seed 1 \
  --save out/gpt-small.safetensors --metrics out/gpt-small.jsonl --trace out/gpt-small-trace.json \
  --sample 200
