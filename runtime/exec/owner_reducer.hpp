// owner_reducer: one replica's share of ZeRO's exchanges across processes, over the whole tensors
// each replica owns (shard_owners): stage 2's reduce-scatter of the gradient, and the gather of
// the updated tensors after every STEP (stages 1 and 2).
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "base/result.hpp"
#include "ops/model/param_set.hpp"
#include "runtime/exec/chunk_reducer.hpp"
#include "runtime/exec/messages.hpp"

namespace pipeworks {

// Gradient (stage 2): replica r sends each owner o the gradients of o's tensors (one reduce_chunk
// of kind owned_gradient: o's tensors concatenated in entry order). The owner adds the w replicas'
// values in replica order 0 + 1 + ... (as gradient_reducer does, so the sums are bit-identical),
// computes each of its tensors' squared norm and sends those to every replica (owned_squares).
// The local rank gets a gradient whose own tensors hold the sums (the others zeros) and every
// tensor's squared norm, so clipping and the reported norm have the unsharded bits.
// Weights (stages 1 and 2): the local rank's new version, whose own tensors are updated, goes to
// every other replica as those tensors (owned_weights); the local rank gets the version every
// owner's tensors make together.
class owner_reducer {
 public:
  owner_reducer(int stage, int replica, int replicas);

  using outputs = chunk_reducer::outputs;

  // The local rank's gradient (kind gradient) or new version (kind weights) of a step.
  result<outputs> add_local(reduce_request request);
  // Another replica's gradients of this replica's tensors.
  result<outputs> add_piece(reduce_chunk piece);
  // Another owner's squared norms (owned_squares) or updated tensors (owned_weights).
  result<outputs> add_gathered(gather_chunk share);

  int pending_steps() const { return static_cast<int>(grads_.size() + weights_.size()); }

 private:
  struct exchange {
    std::shared_ptr<const param_set> local;
    std::vector<std::optional<tensor_payload>> from;     // by replica (owner for weights)
    std::vector<std::optional<tensor_payload>> squares;  // by owner (gradient only)
    std::shared_ptr<param_set> sum;                      // gradient: my tensors summed
  };
  std::string who(int step) const;
  exchange& at(std::map<int, exchange>& by_step, int step);
  status check_layout(const param_set& local);
  result<outputs> advance_gradient(int step, outputs out);
  result<outputs> advance_weights(int step, outputs out);

  int stage_, replica_, replicas_;
  std::vector<int> owners_;  // of each tensor, from the first local layout
  std::map<int, exchange> grads_, weights_;
};

}  // namespace pipeworks
