# A simulator cost file (costs.json) from a `pipeworks train --trace` run: each virtual stage's
# mean F, B, I, W and STEP times after the warm-up step, overlapped F&B pairs left out.
# Usage: python3 bench/trace_costs.py TRACE.json MICROBATCHES > costs.json
#
# What differs from --compare-sim's profile (runtime/exec/measured_costs.cpp): the first step
# (warm-up: first-touch allocations) is not counted, and an OVERLAP_F_B pair, which the trace
# records as an F and a B with the same start and the same (joint) duration, counts for neither:
# the simulator runs a pair's F and B one after the other, each at its own cost, so counting the
# joint time as both would count the pair twice.
import json
import sys
from collections import defaultdict

trace, m = sys.argv[1], int(sys.argv[2])
data = json.load(open(trace))
events = data["traceEvents"] if isinstance(data, dict) else data
compute = [e for e in events if e.get("ph") == "X" and e.get("cat") == "compute"]
# A pair's B lies on a second compute row (tid > 0); its F starts at the same time on row 0.
paired = {(e["pid"], e["ts"]) for e in compute if e["tid"] != 0}
times = defaultdict(lambda: defaultdict(list))  # stage -> kind -> durations (s)
steps_seen = defaultdict(int)                   # (rank, stage) -> STEPs so far
for e in sorted(compute, key=lambda e: e["ts"]):
    a = e["args"]
    kind, stage, mb = a["kind"], a["stage"], a["microbatch"]
    if kind == "STEP":
        steps_seen[(e["pid"], stage)] += 1
        if steps_seen[(e["pid"], stage)] > 1:
            times[stage][kind].append(e["dur"] / 1e6)
        continue
    if mb < m or (e["pid"], e["ts"]) in paired:
        continue
    times[stage][kind].append(e["dur"] / 1e6)


def mean(xs):
    return sum(xs) / len(xs) if xs else 0.0


stages = []
for s in range(max(times) + 1 if times else 0):
    t = times[s]
    if not t["F"] or not (t["B"] or t["I"]):
        sys.exit(f"{trace}: virtual stage {s} has no F or backward outside the warm-up and pairs")
    split = bool(t["I"] or t["W"])
    w = mean(t["W"])
    stages.append({"forward": mean(t["F"]),
                   "backward": mean(t["I"]) + w if split else mean(t["B"]),
                   "weight_grad": w, "step": mean(t["STEP"]), "reduce": 0})
json.dump({"stages": stages}, sys.stdout)
print()
