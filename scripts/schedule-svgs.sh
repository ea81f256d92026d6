#!/usr/bin/env bash
# Draws one SVG per built-in schedule at p=4, m=8 into docs/schedules/. The table of bubbles and
# peaks in docs/schedules.md comes from `pipeworks simulate --every-schedule` instead.
set -euo pipefail
cd "$(dirname "$0")/.."
# PIPEWORKS_BIN=path/to/pipeworks uses a binary already built instead of building build/.
bin="${PIPEWORKS_BIN:-build/bin/pipeworks}"
if [[ -z "${PIPEWORKS_BIN:-}" ]]; then scripts/build.sh; fi
out=docs/schedules
mkdir -p "$out"

# Unit costs: F = 1, B = 2 (for the zero-bubble schedules I = B - W = 1, W = 1), free links.
costs=(--fwd 1 --bwd 2 --wgrad 1)
schedules=(gpipe 1f1b interleaved zb-h1 zb-h2 bfs zbv v-half v-min dualpipev dualpipe pipedream pipedream-vs 2bw
           cyclic)

# The flags each schedule needs beyond --stages and --microbatches: two chunks for the looped
# schedules (the V schedules take theirs without the flag); two steps for the asynchronous ones,
# so that their steady state shows; three for ZB-H2 and ZBV, whose warmup forwards fill the
# bubble only where one step's tail meets the next's head.
extra_flags() {
  case "$1" in
    interleaved|bfs) echo "--chunks 2" ;;
    pipedream|pipedream-vs|2bw|cyclic) echo "--steps 2" ;;
    zb-h2|zbv) echo "--steps 3" ;;
    *) echo "" ;;
  esac
}

for s in "${schedules[@]}"; do
  # shellcheck disable=SC2046
  "$bin" simulate --schedule "$s" --stages 4 --microbatches 8 $(extra_flags "$s") \
    "${costs[@]}" --svg "$out/$s.svg" > /dev/null
  echo "wrote $out/$s.svg"
done

