// The partition actor computes the plan up front: it resolves the run plan (an even split, or
// profiling and planning when the plan asks for automatic partitioning), then spawns the ranks
// (from the initial weights, or each from its checkpoint file) and the reducers, and answers the
// driver's plan_atom with the resolved plan and the actors. Ranks the plan places on worker
// processes are spawned there: the partition actor sends each worker a host_request.
#pragma once
#include <caf/all.hpp>
#include <chrono>
#include <memory>
#include <optional>

#include "actors/pipeline.hpp"
#include "actors/rank_board.hpp"
#include "ops/model/model.hpp"
#include "actors/wire.hpp"
#include "runtime/checkpoint/manifest.hpp"

namespace pipeworks {

template <class T>
struct partition_spec {
  const model<T>* net = nullptr;        // outlive the actor system
  const param_set* initial = nullptr;   // the whole model (unused when resuming)
  run_plan plan;                        // as given
  data_factory data;                    // draws the profile's sample under automatic partitioning
  pipeline_hooks hooks;
  std::optional<checkpoint_manifest> resume;  // the checkpoint of plan.data.position
  std::chrono::steady_clock::time_point start;  // the common zero of every rank's clock
  std::shared_ptr<rank_board> board;
  caf::actor driver;
  // Worker k of the plan's processes (k >= 1) at workers[k - 1], connected and greeted.
  std::vector<caf::actor> workers;
  // The largest CAF frame each of them accepts (its --max-frame-mb; 0: no bound).
  std::vector<std::uint64_t> worker_frames;
  // Tensors over UCX: this process's link and what the workers must know to join it (null: the
  // tensors go inside CAF's messages).
  std::shared_ptr<wire_link> link;
  wire_peers peers;
};

template <class T>
caf::actor spawn_partition(caf::actor_system& sys, std::shared_ptr<partition_spec<T>> spec);

}  // namespace pipeworks
