// The stage actor: one rank (a device of one replica) as a CAF actor around a stage_executor.
// Each message is delivered to the executor, which then runs inside the rank's oneTBB arena.
#pragma once
#include <caf/all.hpp>
#include <memory>
#include <vector>

#include "actors/rank_board.hpp"
#include "ops/model/model.hpp"
#include "runtime/exec/executor.hpp"

namespace pipeworks {

template <class T>
struct stage_spec {
  const model<T>* net = nullptr;     // outlives the actor system
  executor_setup setup;
  std::vector<param_set> initial;    // this rank's virtual stages, in stage order
  int threads = 1;                   // oneTBB threads of this rank's kernels
  std::shared_ptr<rank_board> board;
  caf::actor driver;                 // monitored from the start: the rank quits when it goes
};

// Spawns a rank; it waits for its rank_wiring before it starts. Detached: a thread of its own.
template <class T>
caf::actor spawn_stage(caf::actor_system& sys, bool detached, std::shared_ptr<stage_spec<T>> spec);

}  // namespace pipeworks
