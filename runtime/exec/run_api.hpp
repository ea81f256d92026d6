// What a training run exchanges with the program that starts it, besides its plan: the data, the
// callbacks (steps, weights, checkpoints, the resolved plan, stopping), test hooks and the result.
// Used by train_pipeline (actors/pipeline.hpp) and the single-device run (runtime/exec).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "ops/train/trainer.hpp"
#include "runtime/exec/compute_timer.hpp"
#include "runtime/exec/driver_core.hpp"
#include "runtime/exec/executor.hpp"
#include "runtime/run_plan.hpp"
#include "runtime/schedule.hpp"
#include "runtime/timeline.hpp"

namespace pipeworks {

using weights_fn = std::function<void(std::shared_ptr<const model_weights>)>;

// The data of a run, made once its plan is resolved (automatic partitioning may choose the batch):
// minibatch t of resolved.data.batch samples, for t from resolved.data.position on.
using data_factory = std::function<result<minibatch_fn>(const run_plan& resolved)>;

struct pipeline_callbacks {
  metrics_fn on_step;      // after each step every stage has completed, in step order
  // Every plan.weights_every steps (and after the last): the weights of every stage after that
  // step. The ranks send them only then; otherwise weights stay on the stages.
  weights_fn on_weights;
  // Once the plan is resolved (split, or the planner's plan) and before any rank runs; `report`
  // is the planner's table when it planned. An error stops the run before it starts.
  std::function<status(const run_plan& resolved, const std::string& report)> on_plan;
  // After a checkpoint's manifest is written: its step and directory.
  std::function<void(std::int64_t step, const std::string& dir)> on_checkpoint;
  // Polled between messages; returning true stops the run cleanly (for SIGINT).
  std::function<bool()> stop_requested;
};

// For tests and tools: what the plan does not say.
struct pipeline_hooks {
  bool record_trace = false;   // keep the measured timeline in pipeline_result::trace
  // A resumed run may read another data.path than its checkpoint's (--resume-on-other-data;
  // its new checkpoints record the data it replaced).
  bool resume_on_other_data = false;
  fault_injection fault;       // tests only
  // Tests only: with workers, the driver's own clock reports a stop this long that has just
  // ended whenever it is asked (actors/stall_clock.hpp), as a driver stopped that long would see.
  std::chrono::milliseconds driver_stopped{0};
  // The run's throttled sleeps (its ranks in this process sleep through it), cut when the run
  // stops or ends; the run makes its own when none is given.
  std::shared_ptr<throttle_sleeps> sleeps;
};

// The hooks against the plan: a fault must name a replica, a virtual stage and an action of its
// programs that it can affect. Errors say why.
status check(const run_plan& plan, const pipeline_hooks& hooks);

struct pipeline_result {
  run_plan plan;                           // resolved: split, and the planner's choices
  std::string report;                      // the planner's table, when it planned
  std::string plan_summary;                // the planner's plan as JSON, when it planned
  std::shared_ptr<const schedule> programs;  // lowered; empty for the single-device run
  std::vector<int> boundaries;             // virtual stage s runs blocks [b[s], b[s+1])
  model_weights weights;                   // the latest version of every virtual stage (replica 0)
  std::vector<int> weight_steps;           // per stage: the steps its weights have seen
  std::vector<stage_stats> stages;         // per virtual stage, the max over replicas
  step_metrics last;                       // the last completed step
  std::int64_t steps_done = 0;             // steps every stage completed
  bool interrupted = false;                // stop_requested ended the run early
  double wall_s = 0;
  timeline trace;                          // measured (record_trace), in the simulator's format
};

}  // namespace pipeworks
