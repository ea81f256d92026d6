// Resolving a run plan before any rank runs: an even split of the FLOPs when the plan gives none,
// or, when it asks for automatic partitioning, a profile on one core and the planner's stages,
// replicas, microbatches and batch written into the plan. A pure function of the plan, the
// model and a data sample; the partition actor and `train --print-plan` call it.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "base/result.hpp"
#include "ops/model/model.hpp"
#include "ops/train/microbatches.hpp"
#include "runtime/run_plan.hpp"

namespace pipeworks {

struct resolved_plan {
  run_plan plan;          // runs as it is: split filled, no automatic partitioning left to do
  std::string report;     // the planner's table, for people ("" without automatic partitioning)
  nlohmann::json summary; // the planner's plan as JSON (null without): planner, cluster, p, w, m,
                          // microbatch, batch, stages, predicted and simulated step times
};

// One real sample of `samples` rows, drawn like step 0's (the profile's input).
using sample_fn = std::function<result<minibatch>(std::int64_t samples)>;

// Resolves the plan, which must be checked (check_plan): it is not checked again; the planner's
// plan, a new one, is. Automatic partitioning (plan.auto_partition): loads the cluster, profiles
// `net` on one core at the run's microbatch (PipeDream without keep_microbatches: 2 microbatches
// per cluster device, or the largest divisor of the batch below that), plans for the usable
// cores, and writes stages, replicas, split, microbatches, batch and each rank's device speed and
// name into the plan. Errors say what to change; a model of doubles cannot be profiled.
template <class T>
result<resolved_plan> resolve_plan(run_plan plan, const model<T>& net, const sample_fn& sample);

}  // namespace pipeworks
