#!/usr/bin/env bash
# Benchmark: gpt-small on two pipeline stages (a core each) against one stage on one and on two
# cores, with `pipeworks train`, and PyTorch's Pipe on the same split; prints a table.
set -euo pipefail
cd "$(dirname "$0")/.."
batch="${BATCH:-16}"
microbatches="${MICROBATCHES:-8}"
steps="${STEPS:-8}"          # optimizer steps per pipeworks run
skip="${SKIP:-2}"            # the first steps are not timed
split="${SPLIT:-0,5}"        # first block of each stage: embedding + h.0-3 | h.4-7 + head
schedules="${SCHEDULES:-1f1b 2bw}"
actors="${ACTORS:-detached}"
pt_threads="${PT_THREADS:-1 2}"
pt_steps="${PT_STEPS:-4}"
repeats="${REPEATS:-2}"      # rounds over all runs; each run's best round counts (load bursts)
scripts/install-deps.sh python3-torch
# PIPEWORKS_BIN_DIR: use binaries already built there instead of building build/.
bin="${PIPEWORKS_BIN_DIR:-build/bin}"
[ -n "${PIPEWORKS_BIN_DIR:-}" ] || scripts/build.sh >/dev/null
unset OPENBLAS_CORETYPE
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# One `pipeworks train` run; its --json lines go to $out/NAME.jsonl.
train() {
  local name=$1; shift
  "$bin"/pipeworks train --model gpt-small --batch "$batch" --microbatches "$microbatches" \
    --steps "$steps" --eval-windows 1 --sample 0 --json "$@" >"$out/$name.jsonl"
}
cut=$(( ${split#*,} - 1 ))  # pipeworks block b >= 1 is transformer layer b - 1
load_before=$(cut -d' ' -f1 /proc/loadavg)
for r in $(seq "$repeats"); do
  train "none_t1.$r" --schedule none --threads 1
  train "none_t2.$r" --schedule none --threads 2
  for s in $schedules; do
    train "${s}_p2.$r" --schedule "$s" --stages 2 --split "$split" --threads 2 --actors "$actors"
  done
  for t in $pt_threads; do
    OMP_NUM_THREADS="$t" /usr/bin/python3 bench/torch_pipe.py --batch "$batch" \
      --microbatches "$microbatches" --cut "$cut" --threads "$t" --steps "$pt_steps" \
      >"$out/torch_t$t.$r.json" 2>"$out/torch_t$t.err" || { cat "$out/torch_t$t.err" >&2; exit 1; }
  done
done

/usr/bin/python3 - "$out" "$skip" "$batch" "$microbatches" "$split" "$actors" "$schedules" \
  "$pt_threads" "$repeats" "$load_before" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import json, os, sys
out, skip, batch, m, split, actors = sys.argv[1], int(sys.argv[2]), *sys.argv[3:7]
schedules, pt_threads, repeats = sys.argv[7].split(), sys.argv[8].split(), int(sys.argv[9])
load_before, load_after = sys.argv[10:12]

def one_step_s(path):
    """Seconds per step after the first `skip` steps: elapsed between step skip and the last."""
    rows = [json.loads(l) for l in open(path) if l.startswith("{")]
    steps = [r for r in rows if "step" in r and "elapsed_s" in r and "final_loss" not in r]
    first, last = steps[skip - 1] if skip > 0 else {"step": 0, "elapsed_s": 0}, steps[-1]
    return (last["elapsed_s"] - first["elapsed_s"]) / (last["step"] - first["step"])

def step_s(name):
    return min(one_step_s(os.path.join(out, f"{name}.{r}.jsonl")) for r in range(1, repeats + 1))

def torch_step_s(threads):
    runs = [json.load(open(os.path.join(out, f"torch_t{threads}.{r}.json")))
            for r in range(1, repeats + 1)]
    return min(r["ms_per_step_median"] for r in runs) / 1000

runs = [("none_t1", "pipeworks, 1 stage (--schedule none)", 1, 1),
        ("none_t2", "pipeworks, 1 stage (--schedule none)", 1, 2)]
runs += [(f"{s}_p2", f"pipeworks, 2 stages ({s}, {actors} actors)", 2, 2) for s in schedules]
base = step_s("none_t1")
base2 = step_s("none_t2")
print(f"gpt-small, batch {batch} in {m} microbatches, split {split}; steady-state s/step "
      f"(steps after the first {skip}), best of {repeats} rounds")
print("| run | stages | cores | s/step | samples/s | speedup vs 1 core | vs 1 stage, 2 threads |")
print("|---|---:|---:|---:|---:|---:|---:|")
times = {}
for name, label, p, cores in runs:
    t = step_s(name)
    times[name] = t
    print(f"| {label} | {p} | {cores} | {t:.3f} | {int(batch) / t:.1f} | {base / t:.2f}x | "
          f"{base2 / t:.2f}x |")
pt = {}
for th in pt_threads:
    impl = json.load(open(os.path.join(out, f"torch_t{th}.1.json")))["impl"]
    pt[th] = torch_step_s(th)
    print(f"| {impl}, 2 partitions, checkpoint never | 2 | {th} | {pt[th]:.3f} | "
          f"{int(batch) / pt[th]:.1f} | {base / pt[th]:.2f}x | {base2 / pt[th]:.2f}x |")
best = min(schedules, key=lambda s: times[f"{s}_p2"])
print(f"\nmachine load (1-minute average) {load_before} before, {load_after} after, on "
      f"{os.cpu_count()} cores: other work on the cores makes every figure noisy")
print(f"2 stages ({best}) vs 1 stage on one core each: {base / times[f'{best}_p2']:.2f}x "
      f"(target >= 1.7x); vs 1 stage with 2 intra-op threads: "
      f"{base2 / times[f'{best}_p2']:.2f}x")
for s in schedules:
    for th in pt_threads:
        print(f"step time pipeworks {s} 2 stages / PyTorch Pipe ({th} thread"
              f"{'s' if th != '1' else ''}): {times[f'{s}_p2'] / pt[th]:.2f}x")
PY
