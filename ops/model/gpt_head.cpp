// GPT head block: ln_f, the untied lm_head (V, C) without bias, and the cross-entropy loss.
#include "ops/layers/cross_entropy.hpp"
#include "ops/device/device_ops.hpp"
#include "ops/layers/layernorm.hpp"
#include "ops/layers/linear.hpp"
#include "ops/model/gpt.hpp"
#include "ops/model/init.hpp"
#include "ops/model/loss_tail.hpp"
#include "base/result.hpp"

namespace pipeworks {

template <class T>
std::vector<param_spec> gpt_head_block<T>::params() const {
  const int C = cfg_.width;
  return {{"transformer.ln_f.weight", {C}},
          {"transformer.ln_f.bias", {C}},
          {"lm_head.weight", {cfg_.vocab, C}}};
}

template <class T>
void gpt_head_block<T>::init(std::span<T> w, std::uint64_t seed) const {
  const std::size_t C = static_cast<std::size_t>(cfg_.width);
  fill_value(w.subspan(0, C), T(1));
  fill_value(w.subspan(C, C), T(0));
  fill_normal(w.subspan(2 * C), seed, "lm_head.weight", 0.02);
}

// saved: x (B, T, C), lnf (B, T, C), mean and rstd (B, T), probs (B, T, V).
template <class T>
block_forward gpt_head_block<T>::forward(const device_context& dev, const T* w, tensor x,
                                         const microbatch_ctx& ctx) const {
  const int C = cfg_.width, V = cfg_.vocab;
  if (x.rank() != 3 || x.dim(0) != ctx.batch || x.dim(2) != C)
    throw pipeworks_error("gpt head: expected (" + std::to_string(ctx.batch) + ", T, " +
                          std::to_string(C) + "), got " + shape_string(x.shape()));
  const std::int64_t B = x.dim(0), Tn = x.dim(1), N = B * Tn;
  const T* lnw = w;
  const T* lnb = w + C;
  const T* wlm = w + 2 * C;
  const dtype dt = dtype_of<T>();
  tensor lnf = dev.output({B, Tn, C}, dt), mean = dev.output({B, Tn}, dt),
         rstd = dev.output({B, Tn}, dt);
  layernorm_forward(dev, lnf.data<T>(), mean.data<T>(), rstd.data<T>(),
                    std::as_const(x).data<T>(), lnw, lnb, N, C);
  tensor logits = dev.output({B, Tn, V}, dt);
  linear_forward(dev, logits.data<T>(), std::as_const(lnf).data<T>(), wlm,
                 static_cast<const T*>(nullptr), N, C, V, weight_layout::out_in);
  return cross_entropy_tail<T>(dev, std::move(logits), ctx, "gpt head", "targets", std::move(x),
                               std::move(lnf), std::move(mean), std::move(rstd));
}

// Deferred: lnf (B, T, C) and dlogits (B, T, V) for lm_head, then ln_f's gradients (2, C).
template <class T>
tensor gpt_head_block<T>::backward_input(const device_context& dev, const T* w, stash s,
                                         tensor dout, const microbatch_ctx& ctx,
                                         deferred_grads& later) const {
  const int C = cfg_.width, V = cfg_.vocab;
  const tensor& x = s.saved.at(0);
  tensor& lnf = s.saved.at(1);
  const tensor& mean = s.saved.at(2);
  const tensor& rstd = s.saved.at(3);
  tensor& probs = s.saved.at(4);
  const std::int64_t B = x.dim(0), Tn = x.dim(1), N = B * Tn;
  tensor dlogits = cross_entropy_tail_backward<T>(dev, probs, dout, ctx);
  probs = tensor();
  const dtype dt = dtype_of<T>();
  tensor dlnf = dev.zeros({B, Tn, C}, dt);
  linear_backward<T>(dev, dlnf.data<T>(), nullptr, nullptr, dlogits.data<T>(), nullptr, w + 2 * C,
                     N, C, V, weight_layout::out_in);
  tensor dx = dev.zeros({B, Tn, C}, dt);
  tensor dln = dev.zeros({2, C}, dt);
  layernorm_backward(dev, dx.data<T>(), dln.data<T>(), dln.data<T>() + C, dlnf.data<T>(),
                     x.data<T>(), w, mean.data<T>(), rstd.data<T>(), N, C);
  later.saved.push_back(std::move(lnf));
  later.saved.push_back(std::move(dlogits));
  later.saved.push_back(std::move(dln));
  return dx;
}

// lm_head: dW (V, C) += dlogits^T lnf; ln_f: the gradients backward_input made.
template <class T>
void gpt_head_block<T>::backward_weight(const device_context& dev, const T*, T* dw,
                                        deferred_grads later) const {
  const int C = cfg_.width, V = cfg_.vocab;
  const tensor& lnf = later.saved.at(0);
  const tensor& dlogits = later.saved.at(1);
  const T* dln = later.saved.at(2).data<T>();
  linear_backward<T>(dev, nullptr, dw + 2 * C, nullptr, dlogits.data<T>(), lnf.data<T>(), nullptr,
                     lnf.numel() / C, C, V, weight_layout::out_in);
  add_into(dev, dw, dln, 2 * C);
}

template <class T>
layer_cost gpt_head_block<T>::cost() const {
  const int Tn = cfg_.context, C = cfg_.width, V = cfg_.vocab;
  layer_cost c = layernorm_cost(Tn, C, sizeof(T));
  c += linear_cost(Tn, C, V, false, sizeof(T));
  c += cross_entropy_cost(Tn, V, sizeof(T));
  return c;
}

template class gpt_head_block<float>;
template class gpt_head_block<double>;

}  // namespace pipeworks
