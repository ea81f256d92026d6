#!/usr/bin/env bash
# Benchmark: the cost of checkpoints on the main job's run (gpt-small, PipeDream-2BW over 4
# stages, 4 microbatches of 2 windows): --save-every 10 against no checkpoints, in the same script,
# alternating over several rounds. For each run: its training time (its last step's elapsed_s;
# the run then also waits for its last checkpoint's files) and the CPU time of the whole process
# (user + system, less sensitive to a noisy machine). Medians over the rounds; prints a table.
set -euo pipefail
cd "$(dirname "$0")/.."
steps="${STEPS:-100}"
every="${EVERY:-10}"
rounds="${ROUNDS:-5}"
bin="${PIPEWORKS_BIN_DIR:-build/bin}"
[ -n "${PIPEWORKS_BIN_DIR:-}" ] || scripts/build.sh >/dev/null
unset OPENBLAS_CORETYPE
mkdir -p out
work="$(mktemp -d "$PWD/out/bench-ckpt-overhead.XXXXXX")"  # the repository's disk
trap 'rm -rf "$work"' EXIT
python3 - "$bin/pipeworks" "$work" "$steps" "$every" "$rounds" <<'PY'
import json, os, resource, shutil, statistics, subprocess, sys
binary, work, steps, every, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
base = [binary, "train", "--model", "gpt-small", "--data", "/usr/share/games/fortunes",
        "--schedule", "2bw", "--stages", "4", "--microbatches", "4", "--batch", "8",
        "--steps", str(steps), "--lr", "2e-3", "--warmup", "30", "--optimizer", "adamw",
        "--seed", "1", "--sample", "0", "--eval-windows", "1", "--json"]
ckpt = os.path.join(work, "ckpt")

def run(extra):
    shutil.rmtree(ckpt, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(base + extra, check=True, capture_output=True, text=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(out.strip().splitlines()[-1])["elapsed_s"], cpu

plain, saving = [], []
for _ in range(rounds):
    plain.append(run([]))
    saving.append(run(["--save-every", str(every), "--checkpoint-dir", ckpt]))
count = (steps - 1) // every
last = sorted(d for d in os.listdir(ckpt) if d.startswith("step-"))[-1]
size = sum(os.path.getsize(os.path.join(ckpt, last, f)) for f in os.listdir(os.path.join(ckpt, last)))
pw, pc = statistics.median(t for t, _ in plain), statistics.median(c for _, c in plain)
sw, sc = statistics.median(t for t, _ in saving), statistics.median(c for _, c in saving)
print(f"gpt-small, 2bw over 4 stages, {steps} steps, {os.cpu_count()} cores; medians of {rounds} alternating rounds\n")
print("| run | training time (s) | per step (ms) | ratio | CPU time (s) | ratio |")
print("|---|---:|---:|---:|---:|---:|")
print(f"| no checkpoints (baseline) | {pw:.2f} | {1000*pw/steps:.1f} | 1.000 | {pc:.1f} | 1.000 |")
print(f"| --save-every {every} ({count} checkpoints of {size/1e6:.1f} MB) | {sw:.2f} | {1000*sw/steps:.1f} | "
      f"{sw/pw:.3f} | {sc:.1f} | {sc/pc:.3f} |")
print(f"\ncost of checkpointing: {100*(sw/pw-1):+.1f}% training time, {100*(sc/pc-1):+.1f}% CPU time "
      f"(target <= 10%); {1000*(sw-pw)/max(count,1):.0f} ms of training time per checkpoint")
print("rounds (s): plain", [round(t, 2) for t, _ in plain], "saving", [round(t, 2) for t, _ in saving])
PY
