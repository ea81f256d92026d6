// The library's entry point: train a model with any schedule on CAF actors (stage actors and
// their replicas, gradient reducers, a driver, a tracer, a partition actor), from a data
// callback, reporting metrics and new weight snapshots through callbacks. No CLI needed.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops/model/model.hpp"
#include "base/result.hpp"
#include "ops/train/trainer.hpp"
#include "runtime/exec/executor.hpp"
#include "runtime/schedule.hpp"
#include "runtime/timeline.hpp"

namespace pipeworks {

struct pipeline_options {
  // The schedule; nullopt is single-device gradient accumulation over m microbatches
  // (`--schedule none`), the reference every flush schedule equals.
  std::optional<schedule_kind> schedule = schedule_kind::one_f_one_b;
  int stages = 1;        // p: devices of one pipeline
  int microbatches = 1;  // m: per optimizer step and replica; a minibatch is split w * m ways
  int replicas = 1;      // w: data-parallel replicas of every stage
  int chunks = 1;        // v: virtual stages per device (interleaved, bfs)
  // First block of each virtual stage ({0, 3, 6}); empty: an even split of the FLOPs.
  std::vector<int> split;
  train_config train;    // steps, optimizer, lr schedule; train.microbatches is set to m
  // Stage actors on threads of their own (true) or on CAF's scheduler (false).
  bool detached = true;
  // oneTBB threads each stage's kernels may use; with 1 a throttled rank measures its compute in
  // its thread's CPU time (executor_setup::speed).
  int threads_per_stage = 1;
  int credit_window = 0;       // per link and direction; 0: the smallest window that is safe
  bool record_trace = false;   // keep the measured timeline in pipeline_result::trace
  fault_injection fault;       // tests only
  // Per rank (replica * stages + device), the device's speed in (0, 1]: 1 is one full core of
  // this machine; a slower rank is throttled (see executor_setup::speed). Empty: all 1.
  std::vector<double> device_speed;
  // Polled between messages; returning true stops the run cleanly (for SIGINT).
  std::function<bool()> stop_requested;
};

// The weights of every virtual stage after the same number of steps, in stage order.
using model_weights = std::vector<param_snapshot>;
using weights_fn = std::function<void(std::shared_ptr<const model_weights>)>;

struct pipeline_result {
  std::shared_ptr<const schedule> plan;  // lowered; empty for the single-device run
  std::vector<int> boundaries;           // virtual stage s runs blocks [b[s], b[s+1])
  model_weights weights;                 // the latest version of every virtual stage (replica 0)
  std::vector<stage_stats> stages;       // per virtual stage, the max over replicas
  step_metrics last;                     // the last completed step
  std::int64_t steps_done = 0;           // steps every stage completed
  bool interrupted = false;              // stop_requested ended the run early
  double wall_s = 0;
  timeline trace;                        // measured (record_trace), in the simulator's format
};

// Checks the options against the model (split, schedule parameters, replicas) without running.
status check(const pipeline_options& options, int blocks);

// Trains from `initial` (the whole model's parameters) for options.train.steps steps.
// data(t) gives step t's minibatch (B samples; B divisible by w * m). on_step runs after each
// step that every stage has completed; on_weights, if given, receives that step's weights.
// data and the callbacks run on the driver's thread, one call at a time, in step order.
// Failures (an exception in a stage, a non-finite loss, an actor that dies) end the run within
// a second with an error naming the stage, the replica, the action and the cause.
template <class T>
result<pipeline_result> train_pipeline(const model<T>& m, const param_set& initial,
                                       const pipeline_options& options, const minibatch_fn& data,
                                       const metrics_fn& on_step = {},
                                       const weights_fn& on_weights = {});

}  // namespace pipeworks
