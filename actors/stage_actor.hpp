// The stage actor: one rank (a device of one replica) as a CAF actor around a stage_executor.
// Each message is delivered to the executor, which then runs in its device context (on the CPU
// the rank's oneTBB arena); the rank writes its own checkpoint files on a thread of its own.
#pragma once
#include <caf/all.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "actors/rank_board.hpp"
#include "actors/wire.hpp"
#include "ops/checkpoint/safetensors.hpp"
#include "ops/model/model.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "runtime/exec/executor.hpp"
#include "runtime/exec/rank_setup.hpp"
#include "runtime/exec/run_api.hpp"

namespace pipeworks {

template <class T>
struct stage_spec {
  const model<T>* net = nullptr;     // outlives the actor system
  executor_setup setup;              // rank_setup's, plus the hooks
  std::vector<param_set> initial;    // a new run: this rank's virtual stages, in stage order
  // A resumed run: this rank's file in resume_dir, as the manifest records it.
  std::string resume_dir;
  checkpoint_file resume;
  std::string checkpoint_dir;        // where its checkpoint files go (DIR/step-N/rank-R...)
  bool own_checkpoint_dir = false;   // checkpoint_dir is its worker's own: the driver hears where
  metadata_map identity;             // rank_identity: in each checkpoint file, checked on resume
  int threads = 1;                   // oneTBB threads of this rank's kernels
  std::shared_ptr<rank_board> board;
  caf::actor driver;                 // monitored from the start: the rank quits when it goes
  // What net lives in, when the rank must keep it alive: a worker's ranks own their model, and
  // may still be inside an action when their run is stopped.
  std::shared_ptr<const void> keep;
  // A run across processes with tensors over UCX: the link its messages to other processes take.
  std::shared_ptr<wire_link> link;
};

// Rank `rank` of `run` as rank_setup says, with its clock counting from `start`, the hooks, the
// checkpoint directory and identity; the caller adds its initial weights or its resume file.
template <class T>
std::shared_ptr<stage_spec<T>> make_stage_spec(const lowered_run& run, int rank, const model<T>* net,
                                               std::chrono::steady_clock::time_point start,
                                               const pipeline_hooks& hooks,
                                               std::shared_ptr<rank_board> board, caf::actor driver);

// Spawns a rank; it waits for its rank_wiring before it starts. Detached: a thread of its own.
template <class T>
caf::actor spawn_stage(caf::actor_system& sys, bool detached, std::shared_ptr<stage_spec<T>> spec);

}  // namespace pipeworks
