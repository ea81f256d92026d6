// The partition actor: realises the plan (split and rank speeds from actors/auto_partition.hpp,
// or given) by cutting the weights and spawning throttled ranks and reducers; answers plan_atom.
#pragma once
#include <caf/all.hpp>
#include <chrono>
#include <memory>
#include <vector>

#include "actors/rank_board.hpp"
#include "ops/model/model.hpp"
#include "runtime/exec/executor.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks {

template <class T>
struct partition_spec {
  const model<T>* net = nullptr;        // outlive the actor system
  const param_set* initial = nullptr;   // the whole model
  std::shared_ptr<const schedule> plan; // lowered and validated
  std::vector<int> split;               // first block of each virtual stage; empty: even split
  train_config train;
  bool detached = true;
  int threads_per_stage = 1;
  int credit_window = 0;                // as executor_setup takes it (0: unbounded)
  bool record_trace = false;
  fault_injection fault;
  std::vector<double> device_speed;     // per rank; empty: every rank at full speed
  std::chrono::steady_clock::time_point start;  // the common zero of every rank's clock
  std::shared_ptr<rank_board> board;
  caf::actor driver;
};

// The virtual stages' boundaries {b0 = 0, ..., b_V = blocks}: from split, or an even split.
template <class T>
result<std::vector<int>> plan_boundaries(const model<T>& net, const std::vector<int>& split,
                                         int virtual_stages);

template <class T>
caf::actor spawn_partition(caf::actor_system& sys, std::shared_ptr<partition_spec<T>> spec);

}  // namespace pipeworks
