// chain_reducer: one replica's share of cyclic's point-to-point reduce across processes
// (reduce_mode::p2p): partial sums travel replica 0 -> 1 -> ... -> w-1, and the last replica's
// new version travels to every other replica.
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

// Gradient: replica q adds its gradient to the partial sum of replicas 0..q-1 (replica 0 starts
// it), element by element in that order, so the sum has the bits of gradient_reducer's and of
// chunk_reducer's; it sends the result on to q + 1 as one reduce_chunk of kind chain_partial
// (chunk: the receiver), and its rank gets nothing back. The last replica's rank gets the sum.
// Weights: the last replica's new version goes to every other replica as one gather_chunk of
// kind chain_version, whose rank gets it as a reduce_result of kind weights.
class chain_reducer {
 public:
  chain_reducer(int stage, int replica, int replicas);

  using outputs = chunk_reducer::outputs;

  // The local rank's gradient, or (the last replica only) its new version, of a step.
  result<outputs> add_local(reduce_request request);
  // The previous replica's partial sum.
  result<outputs> add_piece(reduce_chunk piece);
  // The last replica's new version.
  result<outputs> add_sum(gather_chunk version);

  int pending_steps() const { return static_cast<int>(steps_.size()); }

 private:
  struct step_state {
    std::shared_ptr<const param_set> local;
    std::optional<tensor_payload> partial;  // from the previous replica
  };
  // The layout every gradient and version of the stage has (the first local gradient's).
  struct layout {
    std::vector<param_entry> entries;
    std::vector<std::int64_t> block_offsets;
    int first_block = 0;
    dtype type = dtype::f32;
    shape_t arena_shape;
  };
  std::string who(int step) const;
  status check(const tensor_payload& x, int step, const char* what) const;
  result<outputs> advance(int step);

  int stage_, replica_, replicas_;
  std::optional<layout> layout_;
  std::map<int, step_state> steps_;
};

}  // namespace pipeworks
