// GPT embedding block: x[b, t] = wte[tokens[b, t]] + wpe[t].
#include <utility>

#include "ops/device/device_ops.hpp"
#include "ops/layers/embedding.hpp"
#include "ops/model/gpt.hpp"
#include "ops/model/init.hpp"
#include "base/result.hpp"

namespace pipeworks {

template <class T>
std::vector<param_spec> gpt_embedding_block<T>::params() const {
  return {{"transformer.wte.weight", {cfg_.vocab, cfg_.width}},
          {"transformer.wpe.weight", {cfg_.context, cfg_.width}}};
}

template <class T>
void gpt_embedding_block<T>::init(std::span<T> w, std::uint64_t seed) const {
  std::size_t nwte = static_cast<std::size_t>(cfg_.vocab) * cfg_.width;
  fill_normal(w.subspan(0, nwte), seed, "transformer.wte.weight", 0.02);
  fill_normal(w.subspan(nwte), seed, "transformer.wpe.weight", 0.02);
}

template <class T>
block_forward gpt_embedding_block<T>::forward(const device_context& dev, const T* w,
                                              tensor tokens, const microbatch_ctx& ctx) const {
  if (tokens.rank() != 2 || tokens.dim(0) != ctx.batch || tokens.dim(1) > cfg_.context)
    throw pipeworks_error("gpt embedding: expected token ids (" + std::to_string(ctx.batch) +
                          ", T <= " + std::to_string(cfg_.context) + "), got " +
                          shape_string(tokens.shape()));
  const int B = static_cast<int>(tokens.dim(0)), Tn = static_cast<int>(tokens.dim(1));
  const int C = cfg_.width;
  std::int32_t bad = 0;
  if (first_outside(dev, tokens, cfg_.vocab, &bad) >= 0)
    throw pipeworks_error("gpt embedding: token id " + std::to_string(bad) +
                          " outside the vocabulary of " + std::to_string(cfg_.vocab));
  tensor x = dev.output({B, Tn, C}, dtype_of<T>());
  embedding_forward(dev, x.data<T>(), std::as_const(tokens).data<std::int32_t>(), w,
                    w + static_cast<std::int64_t>(cfg_.vocab) * C, B, Tn, C);
  block_forward r{std::move(x), {}};
  r.saved.saved.push_back(std::move(tokens));
  return r;
}

// Nothing to do now: the block has no input gradient. Deferred: tokens (B, T), dout (B, T, C).
template <class T>
tensor gpt_embedding_block<T>::backward_input(const device_context&, const T*, stash s,
                                              tensor dout, const microbatch_ctx&,
                                              deferred_grads& later) const {
  later.saved.push_back(std::move(s.saved.at(0)));
  later.saved.push_back(std::move(dout));
  return {};
}

template <class T>
void gpt_embedding_block<T>::backward_weight(const device_context& dev, const T*, T* dw,
                                             deferred_grads later) const {
  const tensor& tokens = later.saved.at(0);
  const int B = static_cast<int>(tokens.dim(0)), Tn = static_cast<int>(tokens.dim(1));
  const int C = cfg_.width;
  embedding_backward(dev, dw, dw + static_cast<std::int64_t>(cfg_.vocab) * C,
                     later.saved.at(1).data<T>(), tokens.data<std::int32_t>(), B, Tn, C, cfg_.vocab);
}

template <class T>
layer_cost gpt_embedding_block<T>::cost() const {
  return embedding_cost(cfg_.context, cfg_.vocab, cfg_.context, cfg_.width, sizeof(T));
}

template class gpt_embedding_block<float>;
template class gpt_embedding_block<double>;

}  // namespace pipeworks
