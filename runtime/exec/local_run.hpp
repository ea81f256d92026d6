// run_local: every rank's stage_executor on one thread, with the driver's input dealing and the
// reducers done in place and messages delivered in a seeded random order. It is the executor's
// test bench without CAF, and shows that the result does not depend on message timing.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "ops/model/model.hpp"
#include "base/result.hpp"
#include "ops/train/trainer.hpp"
#include "runtime/exec/executor.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks {

struct local_run_options {
  int credit_window = 0;      // 0: min_credit_window(plan)
  std::uint64_t order_seed = 0;  // 0: first in, first out; otherwise a random delivery order
  fault_injection fault;
};

struct local_run_result {
  std::vector<param_snapshot> weights;  // per virtual stage, replica 0's latest
  std::vector<param_snapshot> replica_weights;  // per (replica, virtual stage): r * S + s
  std::vector<stage_stats> stages;      // per virtual stage, the max over replicas
  std::vector<double> losses;           // per step: the mean over its w * m microbatches
  int max_buffered = 0;                 // the most messages any rank held unconsumed
  int credit_window = 0;                // the window used
};

template <class T>
result<local_run_result> run_local(const model<T>& m, std::shared_ptr<const schedule> lowered,
                                   const std::vector<int>& boundaries, const param_set& initial,
                                   const train_config& cfg, const minibatch_fn& data,
                                   const local_run_options& options = {});

}  // namespace pipeworks
