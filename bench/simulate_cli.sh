#!/usr/bin/env bash
# Benchmark: `pipeworks simulate` end to end (start, generate, lower, simulate, print) at the
# issue's sizes, and `pipeworks plan` on 10,000 layers; prints a markdown table of best and
# median wall times against each target (no other tool simulates or plans these; see bench/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
repeats="${REPEATS:-5}"
bin="${PIPEWORKS_BIN_DIR:-build/bin}"
[ -n "${PIPEWORKS_BIN_DIR:-}" ] || scripts/build.sh >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# 10,000 transformer-like layers (±50% around 1 ms forward, 2 ms backward), a fixed seed.
/usr/bin/python3 - "$out/p10k.json" <<'PY'
import json, random, sys
random.seed(1)
layers = [{"name": f"l{i}", "fwd_ms": random.uniform(0.5, 1.5), "bwd_ms": random.uniform(1, 3),
           "activation_bytes": 100000, "saved_bytes": 200000, "param_bytes": 4000000,
           "optimizer_bytes": 8000000} for i in range(10000)]
json.dump({"model": "synthetic-10k", "microbatch": 4, "layers": layers}, open(sys.argv[1], "w"))
PY

cases=(
  "simulate 1f1b p=1024 m=4096|1.0|simulate --schedule 1f1b --stages 1024 --microbatches 4096"
  "simulate zb-h1 p=512 m=2048|1.0|simulate --schedule zb-h1 --stages 512 --microbatches 2048"
  "plan 10,000 layers, 2bw, dgx-h100x8|10|plan --profile $out/p10k.json --cluster dgx-h100x8 --planner 2bw"
  "plan 10,000 layers, pipedream, dgx-h100x8|10|plan --profile $out/p10k.json --cluster dgx-h100x8"
)
load_before=$(cut -d' ' -f1 /proc/loadavg)
for c in "${cases[@]}"; do
  IFS='|' read -r name target args <<<"$c"
  for r in $(seq "$repeats"); do
    start=$EPOCHREALTIME
    # shellcheck disable=SC2086
    "$bin"/pipeworks $args >/dev/null 2>&1
    echo "$name|$target|$start|$EPOCHREALTIME" >>"$out/times"
  done
done
/usr/bin/python3 - "$out/times" "$repeats" "$load_before" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import statistics, sys
rows, order = {}, []
for line in open(sys.argv[1]):
    name, target, start, end = line.rstrip("\n").split("|")
    t = float(end) - float(start)
    if name not in rows:
        order.append(name)
        rows[name] = (float(target), [])
    rows[name][1].append(float(t))
print(f"wall time of the whole command, {sys.argv[2]} runs each; load average "
      f"{sys.argv[3]} before, {sys.argv[4]} after\n")
print("| command | best (s) | median (s) | target (s) | median / target |")
print("|---|---:|---:|---:|---:|")
for name in order:
    target, ts = rows[name]
    med = statistics.median(ts)
    print(f"| {name} | {min(ts):.2f} | {med:.2f} | {target:g} | {med / target:.2f} |")
PY
