// mlp: inputs → hidden layers with ReLU → classes, softmax cross-entropy. One block per
// linear (+ ReLU); the last block is linear + loss. Weights in nn.Linear (out, in) layout,
// named fc1.weight, fc1.bias, ..., fcN.*.
#pragma once
#include <vector>

#include "ops/model/model.hpp"

namespace pipeworks {

struct mlp_config {
  int inputs = 784;
  std::vector<int> hidden = {256, 128};
  int classes = 10;
};

template <class T>
model<T> make_mlp(const mlp_config& cfg);

// fcK: out = relu(inp · Wᵀ + b); x (B, in) -> (B, out). With first set it returns no din.
// backward_weight does the weight and bias gradients; backward_input the rest.
template <class T>
class linear_relu_block final : public block<T> {
 public:
  linear_relu_block(int index, int in, int out, bool first);
  std::string name() const override { return "fc" + std::to_string(index_); }
  std::vector<param_spec> params() const override;
  void init(std::span<T> w, std::uint64_t seed) const override;
  block_forward forward(const device_context& dev, const T* w, tensor x,
                        const microbatch_ctx& ctx) const override;
  tensor backward_input(const device_context& dev, const T* w, stash s, tensor dout,
                        const microbatch_ctx& ctx, deferred_grads& later) const override;
  void backward_weight(const device_context& dev, const T* w, T* dw,
                       deferred_grads later) const override;
  layer_cost cost() const override;

 private:
  int index_, in_, out_;
  bool first_;
};

// fcN + softmax cross-entropy: x (B, in) -> loss (1), or logits (B, classes) without targets.
// backward_weight does the weight and bias gradients; backward_input the rest.
template <class T>
class linear_loss_block final : public block<T> {
 public:
  linear_loss_block(int index, int in, int classes, bool first);
  std::string name() const override { return "fc" + std::to_string(index_); }
  std::vector<param_spec> params() const override;
  void init(std::span<T> w, std::uint64_t seed) const override;
  block_forward forward(const device_context& dev, const T* w, tensor x,
                        const microbatch_ctx& ctx) const override;
  tensor backward_input(const device_context& dev, const T* w, stash s, tensor dout,
                        const microbatch_ctx& ctx, deferred_grads& later) const override;
  void backward_weight(const device_context& dev, const T* w, T* dw,
                       deferred_grads later) const override;
  layer_cost cost() const override;
  bool is_loss() const override { return true; }

 private:
  int index_, in_, classes_;
  bool first_;
};

}  // namespace pipeworks
