// model<T>: an ordered list of blocks, so a pipeline can cut between any two; plus running a
// contiguous range of blocks (a stage) forward and backward over one param_set.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ops/model/block.hpp"
#include "ops/model/param_set.hpp"

namespace pipeworks {

template <class T>
class model {
 public:
  model(std::string name, std::vector<std::unique_ptr<const block<T>>> blocks);
  model(model&&) noexcept = default;
  model& operator=(model&&) noexcept = default;

  const std::string& name() const { return name_; }
  int size() const { return static_cast<int>(blocks_.size()); }
  const block<T>& at(int i) const { return *blocks_.at(static_cast<std::size_t>(i)); }

  // Zero-filled parameters for blocks [first, last); last < 0 means to the end.
  param_set make_params(int first = 0, int last = -1) const;
  // GPT-2 / PyTorch-style init, deterministic from seed and independent of the split.
  param_set init_params(std::uint64_t seed, int first = 0, int last = -1) const;
  std::vector<layer_cost> costs() const;
  std::int64_t param_count() const;

 private:
  std::string name_;
  std::vector<std::unique_ptr<const block<T>>> blocks_;
};

struct stage_forward {
  tensor output;
  std::vector<stash> saved;  // one per block of the stage
};

// What a stage keeps from F(k) to B(k): the weight version the forward used (B must use the
// same one, which keeps that version alive), every block's stash, and the microbatch context.
struct stage_stash {
  param_snapshot weights;
  std::vector<stash> saved;
  microbatch_ctx ctx;
};

// Each runner below runs on `dev`, the stage's device context: p and g are on its device, and
// the stage's input (and dout, unless the stage ends with the loss) is copied there when it comes
// from another device. Without `dev`: on the CPU, on the caller's thread (host_context()).

// Runs blocks [p.first_block(), p.end_block()) forward on input.
template <class T>
stage_forward forward_blocks(const device_context& dev, const model<T>& m, const param_set& p,
                             tensor input, const microbatch_ctx& ctx);
template <class T>
stage_forward forward_blocks(const model<T>& m, const param_set& p, tensor input,
                             const microbatch_ctx& ctx) {
  return forward_blocks(host_context(), m, p, std::move(input), ctx);
}

// Selective recomputation over a stage's stash (one per block of p): each block drops what its
// backward makes again (block::drop_recomputable).
template <class T>
void drop_recomputable(const model<T>& m, const param_set& p, std::vector<stash>& saved);

// Runs the same blocks backward in reverse order, adding into g (same layout as p). Returns the
// gradient of the stage's input (empty when the stage starts at a first block).
template <class T>
tensor backward_blocks(const device_context& dev, const model<T>& m, const param_set& p,
                       param_set& g, std::vector<stash> saved, tensor dout,
                       const microbatch_ctx& ctx);
template <class T>
tensor backward_blocks(const model<T>& m, const param_set& p, param_set& g,
                       std::vector<stash> saved, tensor dout, const microbatch_ctx& ctx) {
  return backward_blocks(host_context(), m, p, g, std::move(saved), std::move(dout), ctx);
}

// What a stage keeps from I(k) to W(k) under a split backward: one deferred_grads per block of
// the stage, in block order.
struct stage_deferred {
  std::vector<deferred_grads> blocks;
  std::int64_t bytes() const {
    std::int64_t n = 0;
    for (const auto& b : blocks) n += b.bytes();
    return n;
  }
};

// The input-gradient half (I) of backward_blocks: the same blocks in reverse order, each
// block's backward_input; returns the gradient of the stage's input and fills `later` (its
// previous contents are replaced). Touches no gradient buffer.
template <class T>
tensor backward_input_blocks(const device_context& dev, const model<T>& m, const param_set& p,
                             std::vector<stash> saved, tensor dout, const microbatch_ctx& ctx,
                             stage_deferred& later);
template <class T>
tensor backward_input_blocks(const model<T>& m, const param_set& p, std::vector<stash> saved,
                             tensor dout, const microbatch_ctx& ctx, stage_deferred& later) {
  return backward_input_blocks(host_context(), m, p, std::move(saved), std::move(dout), ctx,
                               later);
}

// The weight-gradient half (W): adds what backward_blocks would have added into g (same layout
// as p), from what backward_input_blocks left. Pass as p the weight version I used (the blocks
// of mlp and gpt read no weights in W, but a block's backward_weight may).
template <class T>
void backward_weight_blocks(const device_context& dev, const model<T>& m, const param_set& p,
                            param_set& g, stage_deferred later);
template <class T>
void backward_weight_blocks(const model<T>& m, const param_set& p, param_set& g,
                            stage_deferred later) {
  backward_weight_blocks(host_context(), m, p, g, std::move(later));
}

// The value of a loss block's output (shape (1)).
template <class T>
T loss_value(const tensor& loss);
// A (1) tensor holding v: the dout of a loss block.
template <class T>
tensor scalar_tensor(T v);

}  // namespace pipeworks
