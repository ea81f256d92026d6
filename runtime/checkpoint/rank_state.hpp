// rank_state: what one rank holds at a checkpoint's cut, as plain values that own their data:
// every weight version still needed, the optimizer's moments, the partial gradient, each
// microbatch between its forward and its last backward (its stash), the messages to deliver
// again (buffered and in flight), credits and the losses the driver has not tallied. A rank
// restored from it continues bit for bit (runtime/exec/executor.hpp: snapshot, restore).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "ops/model/block.hpp"
#include "ops/model/param_set.hpp"
#include "ops/tensor.hpp"
#include "runtime/exec/messages.hpp"

namespace pipeworks {

// One virtual stage's weights and optimizer.
struct stage_state {
  int stage = 0;
  int latest = 0;                          // versions made so far (STEPs done)
  std::int64_t forwards_done = 0;          // F's of this stage the rank has run
  std::map<int, param_snapshot> versions;  // every version a later F or a stash needs, and latest
  // Per parameter tensor, in entry order: the optimizer's moments (empty before its first step;
  // SGD keeps only the first) and its update count.
  std::vector<tensor> moment1, moment2;
  std::vector<std::int64_t> updates;
  std::optional<param_set> grads;          // the gradient accumulated so far; nullopt: all zero
};

// A microbatch between its F and its last backward on one virtual stage.
struct held_state {
  int stage = 0;
  int microbatch = 0;
  int version = 0;                         // the weight version its F used
  std::int64_t bytes = 0;                  // stashed activation bytes, as the executor counts them
  // Before I, either the forward's input (the stash is recomputed from it on restore, the same
  // forward with the same weights: bit for bit) or the stash itself, per block.
  tensor input;
  std::vector<std::vector<tensor>> saved;
  bool deferred = false;                   // I ran; `later` holds what W needs
  std::vector<std::vector<tensor>> later;  // per block: the weight-gradient half's operands
  std::int64_t batch = 0;                  // the microbatch context: samples and targets
  std::shared_ptr<const tensor> targets;
};

struct rank_state {
  int rank = 0;
  std::int64_t step = 0;   // steps done at the cut
  std::int64_t pc = 0;     // the program position the rank continues from
  std::vector<stage_state> stages;  // in stage order
  std::vector<held_state> held;
  // Results of F and B (or I) whose SEND comes later: the activations for stage+1 and the input
  // gradients for stage-1, as the SEND will send them.
  std::vector<activation_msg> to_send_f;
  std::vector<gradient_msg> to_send_b;
  // Activations, gradients and credits from other ranks (or this rank's own stages) to deliver
  // again, in arrival order: what was buffered at the cut and sent before the sender's cut, and
  // what arrived later but before the sender's marker.
  std::vector<message> deliver;
  std::map<std::pair<int, bool>, int> credits;  // (consumer stage, forward) -> sends left
  // Losses reported before the cut for steps not complete at the cut; sent to the driver again.
  std::vector<loss_report> losses;
};

}  // namespace pipeworks
