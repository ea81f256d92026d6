"""Gives every rank of a run plan (pipeworks train --print-plan) a device of SPEED cores, so that
the run throttles each rank as the benchmarks' devices: throttle_plan.py PLAN.json SPEED."""
import json
import sys

path, speed = sys.argv[1], float(sys.argv[2])
plan = json.load(open(path))
if speed < 1:
    ranks = plan["schedule"]["stages"] * plan["schedule"]["replicas"]
    plan["ranks"] = [{"device": "cpu", "speed": speed, "name": f"rank {r}", "process": 0}
                     for r in range(ranks)]
json.dump(plan, open(path, "w"))
