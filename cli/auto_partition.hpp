// `train --auto-partition`: the flags that go with it. The planning itself is the run plan's
// (partition/plan_resolve.hpp), done by the partition actor or by --print-plan.
#pragma once
#include "cli/pipeline_flags.hpp"

namespace pipeworks::cli {

// Refuses contradictions (throws CLI::ValidationError naming the flag): --cluster or --planner
// without --auto-partition; with it, --stages, --replicas, --chunks or --split (the planner
// chooses them), --schedule none, --planner 2bw with another schedule, and --microbatches with
// 2BW (it chooses m), and --threads (every rank runs on one thread: a device of speed 1 is one
// core, as profiled). Without --schedule, --auto-partition runs 1f1b (2bw with --planner 2bw).
// --recompute passes through: the live profile is measured in the run's mode, so the planner
// counts the memory the run will hold, and the plan runs in it (resolve_plan). Without it, on a
// cluster that limits memory, every mode is profiled and the run takes the planner's choice
// (auto_partition_spec::choose_recompute).
void check_auto_partition_flags(pipeline_flags& flags);

// The --cluster of --auto-partition, read and checked before any data loads or any profile runs:
// an unreadable file or a device faster than one core throws CLI::ValidationError (exit 2).
void check_cluster_flag(const pipeline_flags& flags);

}  // namespace pipeworks::cli
