#!/usr/bin/env bash
# Benchmark: gpt-small on 4 CPU stages with 1F1B, ZB-H1, ZBV, DualPipeV and DualPipe: each one's
# measured time per step against the simulator's prediction from the same run's profile, and
# against 1F1B. DEVICE=cuda (or cuda:N) runs the 4 stages on that GPU instead, unthrottled: the
# GPU column (OVERLAP_F_B's pairs then run on two streams).
set -euo pipefail
cd "$(dirname "$0")/.."
batch="${BATCH:-16}"
microbatches="${MICROBATCHES:-8}"   # DualPipeV and DualPipe need m >= 2p = 8
steps="${STEPS:-10}"                # the first is warm-up, not counted
repeats="${REPEATS:-5}"             # runs of each schedule, in turns; the fastest is kept
# Each stage is a device of SPEED cores (ranks of a --plan, throttled: a rank sleeps
# (1/SPEED - 1) times each compute action's CPU time after it), so that a stage's bubble is idle
# time, as the simulator assumes, and not time another stage runs in. 0.25 asks one core of the
# 2-core development machine for 4 stages, leaving room for the driver and for the moments when
# all four compute at once (0.5 asks both cores, and contention then inflates the times); 1 runs
# them unthrottled, sharing the cores, where a schedule's bubbles cost nothing.
device="${DEVICE:-cpu}"
if [ "$device" = cpu ]; then speed="${SPEED:-0.25}"; else speed="${SPEED:-1}"; fi
schedules="${SCHEDULES:-1f1b zb-h1 zbv dualpipev dualpipe}"
# PIPEWORKS_BIN_DIR: use binaries already built there instead of building build/.
bin="${PIPEWORKS_BIN_DIR:-build/bin}"
[ -n "${PIPEWORKS_BIN_DIR:-}" ] || scripts/build.sh >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# One run of schedule $1 (repeat $2): the plan with each rank's speed, the run with its trace,
# then the simulator on the costs its trace measured. Appends a JSON line to $out/runs.jsonl.
# Measured: the mean time per step after the first (from the step lines), the same steps whose
# actions' mean times are the simulator's costs (bench/trace_costs.py).
run() {
  local s=$1 r=$2 run="$out/$1-$2"
  "$bin"/pipeworks train --model gpt-small --schedule "$s" --stages 4 \
    --microbatches "$microbatches" --batch "$batch" --steps "$steps" --device "$device" \
    --print-plan "$run.plan.json" >/dev/null
  /usr/bin/python3 bench/throttle_plan.py "$run.plan.json" "$speed"
  "$bin"/pipeworks train --plan "$run.plan.json" --trace "$run.trace.json" --compare-sim \
    --eval-windows 1 --sample 0 --json >"$run.jsonl"
  /usr/bin/python3 bench/trace_costs.py "$run.trace.json" "$microbatches" >"$run.costs.json"
  local chunks
  chunks=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["schedule"]["chunks"])' \
    "$run.plan.json")
  "$bin"/pipeworks simulate --schedule "$s" --stages 4 --chunks "$chunks" \
    --microbatches "$microbatches" --costs "$run.costs.json" --json >"$run.sim.json"
  /usr/bin/python3 - "$s" "$run.jsonl" "$run.sim.json" >>"$out/runs.jsonl" <<'PY'
import json, sys
s, run, sim = sys.argv[1], sys.argv[2], sys.argv[3]
lines = [json.loads(l) for l in open(run) if l.startswith("{")]
t = [l["elapsed_s"] for l in lines if "step" in l and "final_loss" not in l]
summary = [l for l in lines if "final_loss" in l][0]
print(json.dumps({
    "schedule": s,
    "measured_ms": 1000 * (t[-1] - t[0]) / (len(t) - 1),
    "predicted_ms": 1000 * json.load(open(sim))["makespan"],
    "compare_sim": summary["measured_makespan_s"] / summary["simulated_makespan_s"],
    "blas_core": summary.get("blas_core", "?")}))
PY
}

for r in $(seq 1 "$repeats"); do
  for s in $schedules; do run "$s" "$r"; done
done

/usr/bin/python3 - "$out/runs.jsonl" "$batch" "$microbatches" "$steps" "$repeats" "$speed" \
  "$(nproc)" "$device" <<'PY'
import json, sys
path, batch, m, steps, repeats, speed, cores, device = sys.argv[1:]
runs = [json.loads(l) for l in open(path)]
order = list(dict.fromkeys(r["schedule"] for r in runs))
best = {s: min((r for r in runs if r["schedule"] == s), key=lambda r: r["measured_ms"])
        for s in order}
base = best.get("1f1b", best[order[0]])
who = "each stage a device of %s core (throttled)" % speed if float(speed) < 1 else \
      "stages unthrottled, sharing the device"
print(f"gpt-small, 4 stages on {device} ({who}), batch {batch} in {m} microbatches, {cores} cores, "
      f"OpenBLAS core {base['blas_core']}; {steps} steps, the first not counted; fastest of "
      f"{repeats} runs of each")
print(f"| schedule | measured ms/step | predicted ms/step | measured / predicted | "
      f"measured vs {base['schedule']} | predicted vs {base['schedule']} | --compare-sim "
      f"measured / simulated (whole run) |")
print("|---|---:|---:|---:|---:|---:|---:|")
for s in order:
    b = best[s]
    print(f"| {s} | {b['measured_ms']:.1f} | {b['predicted_ms']:.1f} | "
          f"{b['measured_ms'] / b['predicted_ms']:.2f} | "
          f"{b['measured_ms'] / base['measured_ms']:.2f}x | "
          f"{b['predicted_ms'] / base['predicted_ms']:.2f}x | {b['compare_sim']:.2f} |")
PY
