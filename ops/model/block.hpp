// block<T>: one pipeline-cuttable piece of a model. A block is const and holds no weights: its
// parameters are a slice of a param_set arena, its activations are tensors handed over, and what
// backward needs travels in a stash that the forward returns. B = samples in the microbatch.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ops/device/device_context.hpp"
#include "ops/layers/layer_cost.hpp"
#include "ops/model/param_set.hpp"
#include "ops/tensor.hpp"

namespace pipeworks {

// What every block of one microbatch may read: the targets for the loss block (i32 labels (B)
// or next-token ids (B, T)); null targets ask the loss block for logits instead of a loss.
struct microbatch_ctx {
  std::int64_t batch = 0;
  std::shared_ptr<const tensor> targets;
};

// A microbatch: the first block's input (f32 images (B, 784) for mlp, i32 token ids (B, T) for
// gpt), handed over to block 0, plus the context.
struct microbatch {
  tensor input;
  microbatch_ctx ctx;
};

// What a block's forward saved for its backward. Only the block that made it reads it.
struct stash {
  std::vector<tensor> saved;
};

struct block_forward {
  tensor output;  // the next block's input; for a loss block: the loss, shape (1), or logits
  stash saved;
};

// What a block's backward_input leaves for its backward_weight (the zero-bubble split: I now,
// W later). Only the block that made it reads it: the operands of its deferred weight-gradient
// products, e.g. each linear's input and output gradient.
struct deferred_grads {
  std::vector<tensor> saved;
  std::int64_t bytes() const {
    std::int64_t n = 0;
    for (const auto& t : saved) n += static_cast<std::int64_t>(t.nbytes());
    return n;
  }
};

template <class T>
class block {
 public:
  virtual ~block() = default;
  virtual std::string name() const = 0;  // "h.3", "fc1", ...
  // This block's tensors, in arena order, with their full Hugging Face names.
  virtual std::vector<param_spec> params() const = 0;
  // Fills this block's slice w deterministically from seed (one stream per tensor name).
  virtual void init(std::span<T> w, std::uint64_t seed) const = 0;
  // Every pass runs on `dev`, the rank's device context: w, the tensors and what the block makes
  // are that device's (the block calls the ops of ops/device/device_ops.hpp and makes tensors
  // with dev, never branching on the device itself). A loss block's loss and its dout are host
  // tensors of shape (1).
  // w: this block's slice of a param_set. Takes the input over; may keep it in the stash.
  virtual block_forward forward(const device_context& dev, const T* w, tensor input,
                                const microbatch_ctx& ctx) const = 0;
  // A block's backward is two halves, so that a block (a CUDA one too) is written once and the
  // zero-bubble schedules can run them apart. backward_input returns the gradient of the input
  // (an empty tensor for a first block) and moves into `later` what backward_weight needs; it
  // takes the stash over. For a loss block dout is (1): the factor on the loss (1/m under
  // accumulation over m microbatches). backward_weight adds this microbatch's weight gradients
  // into dw (+=; this block's slice of a gradient param_set), with w the same weight version.
  virtual tensor backward_input(const device_context& dev, const T* w, stash saved, tensor dout,
                                const microbatch_ctx& ctx, deferred_grads& later) const = 0;
  virtual void backward_weight(const device_context& dev, const T* w, T* dw,
                               deferred_grads later) const = 0;
  // The whole backward: the two halves one after the other.
  tensor backward(const device_context& dev, const T* w, T* dw, stash saved, tensor dout,
                  const microbatch_ctx& ctx) const {
    deferred_grads later;
    tensor din = backward_input(dev, w, std::move(saved), std::move(dout), ctx, later);
    backward_weight(dev, w, dw, std::move(later));
    return din;
  }
  // Selective recomputation: empties the tensors of a forward's stash that backward_input can
  // make again cheaply from the rest (it makes again whatever it finds empty, with the same
  // kernels, so the bits do not change). By default the block keeps its whole stash.
  virtual void drop_recomputable(stash&) const {}
  // The sum of its layers' costs, per sample, at element size sizeof(T).
  virtual layer_cost cost() const = 0;
  virtual bool is_loss() const { return false; }
};

}  // namespace pipeworks
