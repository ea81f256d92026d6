// From a resolved run plan to what the ranks run: lower_run builds the lowered, validated schedule
// and the stage boundaries once; rank_setup derives one rank's executor_setup from them. The
// in-process runner, the partition actor and the driver all call these; none copies plan fields.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "runtime/exec/executor.hpp"
#include "runtime/run_plan.hpp"

namespace pipeworks {

struct lowered_run {
  run_plan plan;                             // resolved: the split is filled in
  std::shared_ptr<const schedule> programs;  // lowered and validated; null for `none`
  std::vector<int> boundaries;               // virtual stage s runs blocks [b[s], b[s+1])
  int credit_window = 0;                     // the plan's, or the smallest safe one

  int ranks() const { return programs ? programs->ranks() : 1; }
};

// Lowers and validates the plan's schedule, once per run: whoever needs the lowered run is handed
// it. The plan must be checked (check_plan) and resolved: a split for every virtual stage (or one
// virtual stage), no automatic partitioning pending. blocks: the model's block count.
result<lowered_run> lower_run(run_plan resolved, int blocks);

// A lowered run as a process that did not lower it reads it (a worker, a message from another
// process): the plan's JSON parsed and checked, as input from elsewhere must be, then lowered.
// blocks: the model's block count (-1: the plan's model's).
result<lowered_run> read_lowered_run(std::string_view text, const std::string& source,
                                     int blocks = -1);

// The programs a run executes: the lowered schedule, with each rank's STEPs of a step gathered
// when the plan clips by the global norm (gather_steps), validated.
result<std::shared_ptr<const schedule>> prepare_programs(schedule lowered, const run_plan& plan);

// The plan's schedule, lowered and prepared (prepare_programs); it does not need the split.
result<std::shared_ptr<const schedule>> plan_programs(const run_plan& plan);

// What rank r (replica * p + device) needs: its replica and device, the boundaries, the optimizer,
// its credit window, speed, clipping scope, checkpoint and weight-publishing intervals. The hooks
// (clock, trace recording, fault injection, sleep) are the caller's to add.
executor_setup rank_setup(const lowered_run& run, int rank);

// The GPU on which the reducer of stage (or piece) `piece` sums the replicas' gradients: the GPU
// of replica 0's rank of that stage, when every rank is a GPU rank of the driver's process (where
// the reducer lives), the reduce is the collective one and ZeRO is off. None otherwise: the
// gradients come to the host and the host sums them.
std::optional<device> gpu_reduce_device(const lowered_run& run, int piece);

}  // namespace pipeworks
