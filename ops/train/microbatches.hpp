// Cutting a minibatch into microbatches: rows [begin, end) of the inputs and targets, copied
// into tensors of their own (one owner per buffer), with the context each block reads.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/model/block.hpp"
#include "base/result.hpp"
#include "ops/tensor.hpp"

namespace pipeworks {

// One optimizer step's data: inputs (B, ...) and targets (B, ...), i32 targets.
struct minibatch {
  tensor inputs;
  tensor targets;
};

// Rows [begin, end) of t along its first dimension, as a new tensor.
tensor slice_rows(const tensor& t, std::int64_t begin, std::int64_t end);

// A microbatch of rows [begin, end): the input handed to block 0 and the targets in the context
// (null targets when with_targets is false: the model then returns logits).
microbatch make_microbatch(const minibatch& mb, std::int64_t begin, std::int64_t end,
                           bool with_targets = true);

// m equal microbatches of B/m rows each; an error when m does not divide B.
result<std::vector<microbatch>> split_minibatch(const minibatch& mb, int m);

}  // namespace pipeworks
