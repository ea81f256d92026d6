// PipeDream's planner: a dynamic program over contiguous layer ranges and the levels of the
// cluster's hierarchy, with stage replication, minimising the slowest stage or link (the
// pipeline's bottleneck) within each device's memory. A pure function of its inputs.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/result.hpp"
#include "partition/cluster.hpp"
#include "partition/profile.hpp"

namespace pipeworks {

struct planned_stage {
  int first_layer = 0;  // inclusive
  int last_layer = 0;   // inclusive
  int replicas = 1;
  std::vector<int> devices;  // replicas devices, in the cluster's numbering
  double time_ms = 0;        // the stage's time per microbatch including its all-reduce share
  std::int64_t memory_bytes = 0;  // per device
};

struct pipeline_plan {
  std::vector<planned_stage> stages;
  double bottleneck_ms = 0;       // the slowest stage or link, per microbatch
  double predicted_step_ms = 0;   // for the plan's microbatches per step (see the planner)
  std::vector<std::int64_t> memory_bytes;  // per device used
};

struct pipedream_options {
  int max_devices = 0;       // 0: all of the cluster's
  int in_flight = 0;         // microbatches in flight per stage for the memory estimate; 0: p − s
  // Every stage gets the same number of replicas (for a runtime that replicates whole
  // pipelines, as `pipeworks train --replicas w` does).
  bool same_replicas = false;
};

// On a flat cluster of n identical devices with bandwidth bw the objective is exactly:
//   stage time = Σ(fwd_ms + bwd_ms)/r + (r > 1 ? 2(r − 1)/r · Σparam_bytes/bw : 0)
//   link time  = 2 · activation_bytes(last layer of the stage) / bw
//   bottleneck = max over stages and links.
// An error when no plan fits in memory, saying by how much the smallest one exceeds it.
result<pipeline_plan> plan_pipedream(const model_profile& profile, const cluster& c,
                                     const pipedream_options& options = {});

}  // namespace pipeworks
