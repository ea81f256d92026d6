// gpt: GPT-2 over bytes. Blocks: the embedding (wte + wpe), one per transformer layer
// (pre-LayerNorm attention and GELU MLP with residuals), and the head (ln_f, untied lm_head,
// cross-entropy). Tensor names and layouts follow Hugging Face's GPT-2.
// B = batch, T = sequence length (<= context), C = width, NH = heads, V = vocab (256).
#pragma once
#include <string>
#include <vector>

#include "ops/model/model.hpp"

namespace pipeworks {

struct gpt_config {
  int context = 64;
  int layers = 2;
  int heads = 2;
  int width = 64;
  int vocab = 256;
  bool operator==(const gpt_config&) const = default;
};

gpt_config gpt_tiny();   // context 64, 2 layers, 2 heads, width 64
gpt_config gpt_small();  // context 128, 8 layers, 4 heads, width 256

template <class T>
model<T> make_gpt(const gpt_config& cfg);

// tokens i32 (B, T) -> x (B, T, C). Saves the tokens. Its backward is all weight gradient:
// backward_input returns an empty tensor and defers the scatter into wte and wpe.
template <class T>
class gpt_embedding_block final : public block<T> {
 public:
  explicit gpt_embedding_block(const gpt_config& cfg) : cfg_(cfg) {}
  std::string name() const override { return "embedding"; }
  std::vector<param_spec> params() const override;
  void init(std::span<T> w, std::uint64_t seed) const override;
  block_forward forward(const device_context& dev, const T* w, tensor tokens,
                        const microbatch_ctx& ctx) const override;
  tensor backward_input(const device_context& dev, const T* w, stash s, tensor dout,
                        const microbatch_ctx& ctx, deferred_grads& later) const override;
  void backward_weight(const device_context& dev, const T* w, T* dw,
                       deferred_grads later) const override;
  layer_cost cost() const override;

 private:
  gpt_config cfg_;
};

// transformer.h.{i}: x + attn(ln_1(x)), then + mlp(ln_2(·)); (B, T, C) -> (B, T, C).
// backward_weight does the four linears' weight and bias gradients; backward_input the rest
// (ln_1 and ln_2's small gradients too, handed to backward_weight to add).
template <class T>
class gpt_transformer_block final : public block<T> {
 public:
  gpt_transformer_block(const gpt_config& cfg, int layer);
  std::string name() const override { return "h." + std::to_string(layer_); }
  std::vector<param_spec> params() const override;
  void init(std::span<T> w, std::uint64_t seed) const override;
  block_forward forward(const device_context& dev, const T* w, tensor x,
                        const microbatch_ctx& ctx) const override;
  tensor backward_input(const device_context& dev, const T* w, stash s, tensor dout,
                        const microbatch_ctx& ctx, deferred_grads& later) const override;
  void backward_weight(const device_context& dev, const T* w, T* dw,
                       deferred_grads later) const override;
  // Drops the attention probabilities (B, NH, T, T: the largest tensor at long contexts, one
  // attention forward to make again) and GELU's output (B, T, 4C: one elementwise pass).
  void drop_recomputable(stash& s) const override;
  layer_cost cost() const override;

 private:
  gpt_config cfg_;
  int layer_;
  std::vector<std::int64_t> off_;  // offsets of the tensors in params() order
};

// ln_f + lm_head + cross-entropy: (B, T, C) -> loss (1), or logits (B, T, V) without targets.
// backward_weight does lm_head's weight gradient; backward_input the rest.
template <class T>
class gpt_head_block final : public block<T> {
 public:
  explicit gpt_head_block(const gpt_config& cfg) : cfg_(cfg) {}
  std::string name() const override { return "head"; }
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
  gpt_config cfg_;
};

}  // namespace pipeworks
