// From a resolved run plan to what the ranks run: lower_run builds the lowered, validated schedule
// and the stage boundaries once; rank_setup derives one rank's executor_setup from them. The
// in-process runner, the partition actor and the driver all call these; none copies plan fields.
#pragma once
#include <memory>
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

// Checks the plan (check()), then lowers and validates its schedule. The plan must be resolved:
// a split for every virtual stage (or one virtual stage), no automatic partitioning pending.
// blocks: the model's block count.
result<lowered_run> lower_run(run_plan resolved, int blocks);

// The programs a run executes: the lowered schedule, with each rank's STEPs of a step gathered
// when the plan clips by the global norm (gather_steps), validated.
result<std::shared_ptr<const schedule>> prepare_programs(schedule lowered, const run_plan& plan);

// The plan's schedule, lowered and prepared (prepare_programs); it does not need the split.
result<std::shared_ptr<const schedule>> plan_programs(const run_plan& plan);

// What rank r (replica * p + device) needs: its replica and device, the boundaries, the optimizer,
// its credit window, speed, clipping scope, checkpoint and weight-publishing intervals. The hooks
// (clock, trace recording, fault injection, sleep) are the caller's to add.
executor_setup rank_setup(const lowered_run& run, int rank);

}  // namespace pipeworks
