// The driver actor: gets the lowered run and the ranks from the partition actor, feeds
// microbatches and sums global norms through driver_core, reports steps, writes each
// checkpoint's manifest once every rank's file is durable, detects failures (failure messages,
// CAF monitoring, its own stop, every rank stalled), polls stop_requested, and ends the run by
// stopping every actor it knows.
#pragma once
#include <caf/all.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/pipeline.hpp"
#include "actors/rank_board.hpp"
#include "actors/stall_clock.hpp"
#include "actors/wire.hpp"

namespace pipeworks {

struct driver_spec {
  data_factory data;
  pipeline_callbacks callbacks;
  std::shared_ptr<throttle_sleeps> sleeps;  // its ranks' in this process, cut when it stops or ends
  bool record_trace = false;
  std::int64_t resume_samples = 0;        // samples seen before a resumed run's position
  std::chrono::milliseconds poll_interval{50};
  std::chrono::steady_clock::time_point start;  // elapsed_s counts from here
  std::shared_ptr<rank_board> board;
  // The worker processes (process k at workers[k - 1]), told when the run ends and monitored: a
  // lost worker fails the run, naming the ranks and stages it held.
  std::vector<caf::actor> workers;
  std::vector<std::string> worker_addresses;  // "host:port", for messages
  // Tensors over UCX: the link messages to and from other processes take (null: inside CAF's).
  std::shared_ptr<wire_link> link;
  // With workers: the driver process's own clock, so that a worker lost while the driver itself
  // was stopped (every worker's heartbeats then look late) is not blamed.
  std::shared_ptr<stall_clock> own_clock;
};

// The driver runs on a thread of its own (it calls data and the user's callbacks). Send it
// (run_atom, partition actor): it plans through the partition actor, wires and starts the ranks,
// and at the end sends the sender a run_outcome, stops every actor and quits.
caf::actor spawn_driver(caf::actor_system& sys, std::shared_ptr<driver_spec> spec);

}  // namespace pipeworks
