// The tail that every loss block shares: logits (N, V) -> mean softmax cross-entropy against the
// microbatch's targets (N), and its backward. N = positions, V = classes or vocab.
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "ops/device/device_ops.hpp"
#include "ops/layers/cross_entropy.hpp"
#include "ops/model/block.hpp"
#include "ops/model/model.hpp"
#include "base/result.hpp"

namespace pipeworks {

// N: the product of every dimension of logits (N..., V) but the last.
inline std::int64_t loss_positions(const tensor& logits) {
  std::int64_t n = 1;
  for (int i = 0; i + 1 < logits.rank(); ++i) n *= logits.dim(i);
  return n;
}

// Without targets: the logits are the output and nothing is saved. With targets: the output is
// the loss (1), and the stash holds `saved` in order, then probs (shape of logits) last. A wrong
// target count throws "who: expected N targets_noun, got M".
template <class T, class... Saved>
block_forward cross_entropy_tail(const device_context& dev, tensor logits, const microbatch_ctx& ctx,
                                 const std::string& who, const std::string& targets_noun,
                                 Saved... saved) {
  if (!ctx.targets) return {std::move(logits), {}};
  const int V = static_cast<int>(logits.dim(logits.rank() - 1));
  const std::int64_t N = loss_positions(logits);
  if (ctx.targets->numel() != N)
    throw pipeworks_error(who + ": expected " + std::to_string(N) + " " + targets_noun + ", got " +
                          std::to_string(ctx.targets->numel()));
  tensor probs = dev.output(logits.shape(), dtype_of<T>());
  T loss = cross_entropy_forward(dev, probs.data<T>(), std::as_const(logits).data<T>(),
                                 *ctx.targets, N, V);
  block_forward r{scalar_tensor<T>(loss), {}};
  (r.saved.saved.push_back(std::move(saved)), ...);
  r.saved.saved.push_back(std::move(probs));
  return r;
}

// dlogits (shape of probs) for the loss times dout (1), from the probs cross_entropy_tail saved.
template <class T>
tensor cross_entropy_tail_backward(const device_context& dev, const tensor& probs,
                                   const tensor& dout, const microbatch_ctx& ctx) {
  const int V = static_cast<int>(probs.dim(probs.rank() - 1));
  tensor dlogits = dev.zeros(probs.shape(), dtype_of<T>());
  cross_entropy_backward(dev, dlogits.data<T>(), probs.data<T>(), *ctx.targets,
                         loss_value<T>(dout), loss_positions(probs), V);
  return dlogits;
}

}  // namespace pipeworks
