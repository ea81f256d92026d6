#!/usr/bin/env bash
# Draws one SVG per built-in schedule at p=4, m=8 into docs/schedules/, and writes
# docs/schedules/table.md: simulated bubble fraction, peak activations and peak versions per schedule.
set -euo pipefail
cd "$(dirname "$0")/.."
# PIPEWORKS_BIN=path/to/pipeworks uses a binary already built instead of building build/.
bin="${PIPEWORKS_BIN:-build/bin/pipeworks}"
if [[ -z "${PIPEWORKS_BIN:-}" ]]; then scripts/build.sh; fi
out=docs/schedules
mkdir -p "$out"

# Unit costs: F = 1, B = 2 (for the zero-bubble schedules I = B - W = 1, W = 1), free links.
costs=(--fwd 1 --bwd 2 --wgrad 1)
schedules=(gpipe 1f1b interleaved zb-h1 zb-h2 bfs pipedream pipedream-vs 2bw cyclic)

# The flags each schedule needs beyond --stages and --microbatches: two chunks for the looped
# schedules; two steps for the asynchronous ones, so that their steady state shows; three for
# ZB-H2, whose warmup forwards fill the bubble only where one step's tail meets the next's head.
extra_flags() {
  case "$1" in
    interleaved|bfs) echo "--chunks 2" ;;
    pipedream|pipedream-vs|2bw|cyclic) echo "--steps 2" ;;
    zb-h2) echo "--steps 3" ;;
    *) echo "" ;;
  esac
}

for s in "${schedules[@]}"; do
  # shellcheck disable=SC2046
  "$bin" simulate --schedule "$s" --stages 4 --microbatches 8 $(extra_flags "$s") \
    "${costs[@]}" --svg "$out/$s.svg" > /dev/null
  echo "wrote $out/$s.svg"
done

# The table: one simulate --json per schedule and size, summarised by python3 (jq-free).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for s in "${schedules[@]}"; do
  for size in "4 8" "8 32"; do
    read -r p m <<< "$size"
    # shellcheck disable=SC2046
    if ! "$bin" simulate --schedule "$s" --stages "$p" --microbatches "$m" $(extra_flags "$s") \
         "${costs[@]}" --json > "$tmp/$s-$p-$m.json" 2> "$tmp/$s-$p-$m.err"; then
      echo "simulate $s p=$p m=$m failed: $(head -c 300 "$tmp/$s-$p-$m.err")" >&2
      rm -f "$tmp/$s-$p-$m.json"
    fi
  done
done

/usr/bin/env python3 - "$tmp" "$out/table.md" "${schedules[@]}" <<'PY'
import json, os, sys

tmp, table, schedules = sys.argv[1], sys.argv[2], sys.argv[3:]
sizes = [(4, 8), (8, 32)]

def cells(s, p, m):
    path = os.path.join(tmp, f"{s}-{p}-{m}.json")
    if not os.path.exists(path):
        return ["n/a"] * 3
    r = json.load(open(path))
    stages = r["stages"]
    inflight = max(st["peak_inflight"] for st in stages)
    versions = max(st["peak_versions"] for st in stages)
    return [f'{100 * r["bubble_fraction"]:.1f}%', str(inflight), str(versions)]

asynchronous = {"pipedream", "pipedream-vs", "2bw", "cyclic"}
head = ["schedule", "steps"]
for p, m in sizes:
    head += [f"bubble p={p} m={m}", f"peak activations p={p} m={m}", f"peak versions p={p} m={m}"]
lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
for s in schedules:
    row = [s, "2" if s in asynchronous else ("3" if s == "zb-h2" else "1")]
    for p, m in sizes:
        row += cells(s, p, m)
    lines.append("| " + " | ".join(row) + " |")
note = ("Simulated with unit costs (F = 1, B = 2, and I = W = 1 where the backward is split; "
        "free communication). Peak activations and peak versions are the largest over the "
        "stages: microbatches whose activations are stashed at once, and live weight versions. "
        "Interleaved and BFS use 2 chunks; pipedream, pipedream-vs, 2bw and cyclic cover 2 steps, zb-h2 3 steps "
        "(with one step it equals zb-h1: its extra warmup forwards pay off across steps). "
        "Made by scripts/schedule-svgs.sh.")
with open(table, "w") as f:
    f.write("\n".join(lines) + "\n\n" + note + "\n")
print(f"wrote {table}")
PY
