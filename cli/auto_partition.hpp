// `train --auto-partition`: the flags that go with it, profiling on a real sample at the run's
// microbatch size, planning for --cluster, printing the plan and rewriting the flags to it.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "partition/auto_partition.hpp"
#include "cli/pipeline_flags.hpp"
#include "ops/model/model.hpp"
#include "ops/train/microbatches.hpp"

namespace pipeworks::cli {

// Refuses contradictions (throws CLI::ValidationError naming the flag): --cluster or --planner
// without --auto-partition; with it, --stages, --replicas, --chunks or --split (the planner
// chooses them), --schedule none, --planner 2bw with another schedule, and --microbatches with
// 2BW (it chooses m), and --threads (every rank runs on one thread: a device of speed 1 is one
// core, as profiled). Without --schedule, --auto-partition runs 1f1b (2bw with --planner 2bw).
void check_auto_partition_flags(pipeline_flags& flags);

struct planned_run {
  auto_partition plan;
  model_profile profile;
};

// Profiles `net` on one core (a device of speed 1) on sample(b), b = batch / microbatches
// (PipeDream without --microbatches: default_microbatches(batch, devices), the largest divisor of
// --batch up to 2 per cluster device), plans on flags.cluster for usable_cores(), prints the plan
// unless `quiet`, and rewrites flags (stages, replicas, split), batch and microbatches (per
// replica) to it. A bad --cluster (unreadable, a device faster than one core) throws
// CLI::ValidationError (exit 2); a planner that finds no plan throws pipeworks_error (exit 1).
// Both messages say what to change.
planned_run auto_partition_flags(pipeline_flags& flags, const model<float>& net,
                                 const std::function<minibatch(std::int64_t)>& sample,
                                 std::int64_t& batch, int& microbatches, bool quiet);

// The plan for the --json summary: planner, cluster, p, w, m, microbatch, batch, stages
// (first_layer, last_layer, replicas, devices, speeds, time_ms) and both predicted step times.
nlohmann::json plan_json(const planned_run& run, const std::string& cluster_name);

}  // namespace pipeworks::cli
