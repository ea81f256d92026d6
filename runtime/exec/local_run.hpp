// run_local: every rank's stage_executor on one thread, with the driver's work done by
// driver_core and the reducers in place, and messages delivered in a seeded random order (first
// in, first out on each link, as CAF delivers them). It is the executor's test bench without
// CAF: it shows that results do not depend on message timing, and that a run restored from its
// checkpoint snapshots continues bit for bit.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/result.hpp"
#include "ops/model/model.hpp"
#include "ops/train/trainer.hpp"
#include "runtime/exec/executor.hpp"
#include "runtime/exec/rank_setup.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks {

struct local_run_options {
  std::uint64_t order_seed = 0;  // 0: first in, first out; otherwise a random delivery order
  fault_injection fault;
  // Every checkpoint snapshot a rank completes (run.plan.checkpoint.every), as it completes.
  std::function<void(rank_state)> on_snapshot;
  // Continue from one snapshot per rank, all of the same step; resume_samples: samples seen.
  std::vector<rank_state> resume;
  std::int64_t resume_samples = 0;
  // Each rank's kernels in an arena of this many threads (an OVERLAP_F_B pair then runs its two
  // at once); 0: on the calling thread.
  int threads = 0;
};

struct local_run_result {
  // Per virtual stage, replica 0's latest (with routes the model's stages are the first
  // route_stages(); dualpipe's copies on the other route hold the same weights).
  std::vector<param_snapshot> weights;
  std::vector<param_snapshot> replica_weights;  // per (replica, virtual stage): r * S + s
  std::vector<stage_stats> stages;              // per virtual stage, the max over replicas
  std::vector<step_metrics> steps;              // each step this run completed, in order
  std::vector<double> losses;                   // per completed step: the mean of its losses
  std::vector<std::int64_t> checkpoints_due;    // steps whose snapshots all completed
  int max_buffered = 0;                         // the most messages any rank held unconsumed
  int credit_window = 0;                        // the window used
};

template <class T>
result<local_run_result> run_local(const model<T>& m, const lowered_run& run,
                                   const param_set& initial, const minibatch_fn& data,
                                   local_run_options options = {});

// A lowered_run around a hand-built schedule (tests): the plan's shape, kind and optimizer from
// the schedule and cfg, the given boundaries, credit window 0 = the smallest safe one.
lowered_run local_lowered_run(std::shared_ptr<const schedule> programs, std::vector<int> boundaries,
                              const train_config& cfg, int credit_window = 0);

}  // namespace pipeworks
