#!/usr/bin/env bash
# Quick start, command one: set up, build, and run the main job (gpt-small on the fortunes text).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
mkdir -p out
exec build/bin/pipeworks train --model gpt-small --data /usr/share/games/fortunes \
  --steps 300 --batch 16 --lr 3e-3 --optimizer adamw --seed 1 \
  --save out/gpt-small.safetensors --sample 200
