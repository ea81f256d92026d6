// The driver actor: feeds microbatches on input_request credits, turns losses and step reports
// into step_metrics and weight snapshots, detects failures (failure messages and CAF monitoring),
// polls stop_requested, and ends the run by stopping every actor it knows.
#pragma once
#include <caf/all.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "actors/pipeline.hpp"
#include "actors/rank_board.hpp"

namespace pipeworks {

struct driver_spec {
  std::shared_ptr<const schedule> plan;  // lowered and validated
  minibatch_fn data;
  metrics_fn on_step;
  weights_fn on_weights;
  std::function<bool()> stop_requested;
  std::chrono::milliseconds poll_interval{50};
  std::chrono::steady_clock::time_point start;  // elapsed_s counts from here
  std::shared_ptr<rank_board> board;
  caf::actor tracer;  // invalid when no trace is recorded
};

// What the driver hands back when the run ends, well or badly.
struct driver_outcome {
  status run_status;               // ok, or the error that ended the run
  bool interrupted = false;
  std::vector<int> boundaries;
  model_weights weights;           // the latest complete step's (version 0 before any)
  std::vector<stage_stats> stages; // per virtual stage, the max over the ranks that finished
  step_metrics last;
  std::int64_t steps_done = 0;
  timeline trace;
};
struct outcome_box {
  std::shared_ptr<driver_outcome> outcome;
};

// The driver runs on a thread of its own (it calls data and the user's callbacks). Send it
// (run_atom, partition actor): it plans through the partition actor, wires and starts the ranks,
// and at the end sends the sender an outcome_box, stops every actor and quits.
caf::actor spawn_driver(caf::actor_system& sys, std::shared_ptr<driver_spec> spec);

}  // namespace pipeworks

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pipeworks::outcome_box)
