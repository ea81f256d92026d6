# Seconds per step of a `pipeworks train --json` run after its first two steps (warm-up), from
# its step lines. Usage: python3 bench/per_step.py RUN.jsonl
import json
import sys

t = {}
for line in open(sys.argv[1]):
    j = json.loads(line)
    if "step" in j and "loss" in j and "final_loss" not in j:
        t[j["step"]] = j["elapsed_s"]
last = max(t)
print((t[last] - t[2]) / (last - 2))
