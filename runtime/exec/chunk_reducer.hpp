// chunk_reducer: one replica's share of an all-reduce across processes (reduce-scatter, then
// all-gather). Replica r owns chunk r of the flat gradient: it sums the w replicas' pieces of it
// in replica order 0 + 1 + ... (as gradient_reducer does, so the sums are bit-identical) and sends
// the sum to the others; each replica sends (w - 1)/w of its gradient per phase.
#pragma once
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "base/result.hpp"
#include "ops/model/param_set.hpp"
#include "ops/tensor_payload.hpp"
#include "runtime/exec/messages.hpp"

namespace pipeworks {

// What a chunk message carries (its `kind`): a piece or a sum of the plain all-reduce; or, under
// ZeRO (runtime/exec/owner_reducer.hpp), a replica's gradients of one owner's tensors, an owner's
// squared norms of its tensors' sums, or an owner's updated tensors; or, under cyclic's p2p
// reduce (runtime/exec/chain_reducer.hpp), a partial sum for the next replica or the last
// replica's new version.
namespace chunk_kind {
constexpr std::uint8_t all_reduce = 0, owned_gradient = 1, owned_squares = 2, owned_weights = 3,
                       chain_partial = 4, chain_version = 5;
}

// Replica `replica` → the owner of `chunk`: its piece of that chunk, for `step` (reduce-scatter).
struct reduce_chunk {
  int stage = 0;
  int step = 0;
  int replica = 0;
  int chunk = 0;
  tensor_payload data;
  std::uint8_t kind = chunk_kind::all_reduce;
};

// The owner of `chunk` → every other replica: the chunk's sum (all-gather).
struct gather_chunk {
  int stage = 0;
  int step = 0;
  int chunk = 0;
  tensor_payload data;
  std::uint8_t kind = chunk_kind::all_reduce;
};

// The elements [first, last) of chunk c of n elements split w ways.
std::pair<std::int64_t, std::int64_t> chunk_range(std::int64_t n, int w, int c);

class chunk_reducer {
 public:
  chunk_reducer(int stage, int replica, int replicas);

  // What to send after an input: pieces to owners and sums to replicas (by replica), and the whole
  // sum for the local rank once every chunk is in.
  struct outputs {
    std::vector<std::pair<int, reduce_chunk>> pieces;
    std::vector<std::pair<int, gather_chunk>> sums;
    std::optional<reduce_result> result;
  };

  // The local rank's gradient of a step.
  result<outputs> add_local(reduce_request request);
  // Another replica's piece of this replica's chunk.
  result<outputs> add_piece(reduce_chunk piece);
  // Another replica's summed chunk.
  result<outputs> add_sum(gather_chunk sum);

  int pending_steps() const { return static_cast<int>(steps_.size()); }

 private:
  struct step_state {
    std::shared_ptr<const param_set> local;     // this replica's gradient (its layout)
    std::vector<std::optional<tensor_payload>> pieces;  // of my chunk, by replica
    std::vector<std::optional<tensor_payload>> sums;    // by chunk, other replicas'
    std::optional<tensor_payload> arena;  // the whole sum, once my chunk of it is summed
    bool summed = false;
  };
  std::string who(int step) const;
  result<outputs> advance(int step, outputs out);

  int stage_, replica_, replicas_;
  std::map<int, step_state> steps_;
};

}  // namespace pipeworks
