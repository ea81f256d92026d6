#!/usr/bin/env bash
# Benchmark: cyclic data parallelism with the collective reduce against its point-to-point reduce
# (--reduce p2p), gpt-small on 2 stages x 2 replicas of throttled CPU devices: the whole run's
# time, the time of the steps after the first, and the simulator's prediction of the first wait.
set -euo pipefail
cd "$(dirname "$0")/.."
batch="${BATCH:-16}"
microbatches="${MICROBATCHES:-4}"   # per replica and step
steps="${STEPS:-10}"
repeats="${REPEATS:-5}"             # runs of each reduce, in turns; the fastest is kept
# Each rank is a device of SPEED cores (a --plan's ranks, throttled), 4 ranks: 0.25 asks one core
# of the 2-core development machine, so that a rank's idle time is idle, as the simulator assumes.
speed="${SPEED:-0.25}"
# PIPEWORKS_BIN_DIR: use binaries already built there instead of building build/.
bin="${PIPEWORKS_BIN_DIR:-build/bin}"
[ -n "${PIPEWORKS_BIN_DIR:-}" ] || scripts/build.sh >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# One run with reduce $1 (repeat $2); appends a JSON line to $out/runs.jsonl: the run's elapsed
# time at its first and last step (from the step lines).
run() {
  local reduce=$1 r=$2 run="$out/$1-$2"
  "$bin"/pipeworks train --model gpt-small --schedule cyclic --stages 2 --replicas 2 \
    --reduce "$reduce" --microbatches "$microbatches" --batch "$batch" --steps "$steps" \
    --print-plan "$run.plan.json" >/dev/null
  /usr/bin/python3 bench/throttle_plan.py "$run.plan.json" "$speed"
  "$bin"/pipeworks train --plan "$run.plan.json" --eval-windows 1 --sample 0 --json >"$run.jsonl"
  /usr/bin/python3 - "$reduce" "$run.jsonl" >>"$out/runs.jsonl" <<'PY'
import json, sys
reduce, run = sys.argv[1], sys.argv[2]
lines = [json.loads(l) for l in open(run) if l.startswith("{")]
t = [l["elapsed_s"] for l in lines if "step" in l and "final_loss" not in l]
print(json.dumps({"reduce": reduce, "first_s": t[0], "last_s": t[-1],
                  "later_ms": 1000 * (t[-1] - t[0]) / (len(t) - 1)}))
PY
}

for r in $(seq 1 "$repeats"); do
  for reduce in collective p2p; do run "$reduce" "$r"; done
done

# The simulator's view of the same shape with uniform costs (F = 1, B = 2): the collective's one
# wait at the first REDUCE, in F+B slots.
sim() {
  "$bin"/pipeworks simulate --schedule cyclic --stages 2 --replicas 2 --microbatches \
    "$microbatches" --steps "$steps" --reduce "$1" --json |
    /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["makespan"])'
}
/usr/bin/python3 - "$out/runs.jsonl" "$batch" "$microbatches" "$steps" "$repeats" "$speed" \
  "$(nproc)" "$(sim collective)" "$(sim p2p)" <<'PY'
import json, sys
path, batch, m, steps, repeats, speed, cores, sim_all, sim_p2p = sys.argv[1:]
runs = [json.loads(l) for l in open(path)]
best = {r: min((x for x in runs if x["reduce"] == r), key=lambda x: x["last_s"])
        for r in ("collective", "p2p")}
a, b = best["collective"], best["p2p"]
print(f"gpt-small, cyclic, 2 stages x 2 replicas, each rank a device of {speed} core "
      f"(throttled), batch {batch} in {m} microbatches per replica, {steps} steps, {cores} cores; "
      f"fastest of {repeats} runs of each")
print("| reduce | whole run s | first step s | ms per later step | whole run vs collective | "
      "simulated makespan (F=1, B=2) |")
print("|---|---:|---:|---:|---:|---:|")
for name, x, s in (("collective", a, sim_all), ("p2p", b, sim_p2p)):
    print(f"| {name} | {x['last_s']:.2f} | {x['first_s']:.2f} | {x['later_ms']:.0f} | "
          f"{x['last_s'] / a['last_s']:.2f}x | {float(s):g} |")
PY
