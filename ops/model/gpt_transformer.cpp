// GPT transformer block transformer.h.{i}: pre-LayerNorm attention and GELU MLP, each with a
// residual. Shapes: x (B, T, C); qkv (B, T, 3C); att (B, NH, T, T); fch (B, T, 4C).
#include <algorithm>
#include <cmath>
#include <utility>

#include "ops/device/device_ops.hpp"
#include "ops/layers/activation.hpp"
#include "ops/layers/attention.hpp"
#include "ops/layers/layernorm.hpp"
#include "ops/layers/linear.hpp"
#include "ops/model/gpt.hpp"
#include "ops/model/init.hpp"
#include "base/result.hpp"

namespace pipeworks {
namespace {

// Tensor order in the block's slice (and in params()).
enum : int { ln1_w, ln1_b, attn_w, attn_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fcp_w, fcp_b };
// Stash order, with shapes.
enum : int {
  s_x,         // (B, T, C) the block's input
  s_ln1,       // (B, T, C)
  s_ln1_mean,  // (B, T)
  s_ln1_rstd,  // (B, T)
  s_qkv,       // (B, T, 3C)
  s_att,       // attention_saved_shape: (B, NH, T, T) or, flash, (B, NH, T)
  s_atty,      // (B, T, C) attention output before c_proj
  s_res2,      // (B, T, C) x + attention
  s_ln2,       // (B, T, C)
  s_ln2_mean,  // (B, T)
  s_ln2_rstd,  // (B, T)
  s_fch,       // (B, T, 4C)
  s_fch_gelu,  // (B, T, 4C)
  s_count
};
// Deferred order (backward_input -> backward_weight): each linear's input and output gradient.
enum : int {
  l_fcp_in,     // (B, T, 4C) fch_gelu, moved from the stash
  l_fcp_dout,   // (B, T, C) the block's dout
  l_fc_in,      // (B, T, C) ln2, moved from the stash
  l_fc_dout,    // (B, T, 4C) dfch
  l_proj_in,    // (B, T, C) atty, moved from the stash
  l_proj_dout,  // (B, T, C) dres2 after ln_2's backward
  l_attn_in,    // (B, T, C) ln1, moved from the stash
  l_attn_dout,  // (B, T, 3C) dqkv
  l_ln,         // (4, C) the ln_1 weight, ln_1 bias, ln_2 weight, ln_2 bias gradients
  l_count
};
constexpr auto in_out = weight_layout::in_out;

}  // namespace

template <class T>
gpt_transformer_block<T>::gpt_transformer_block(const gpt_config& cfg, int layer)
    : cfg_(cfg), layer_(layer), off_(spec_offsets(params())) {}

template <class T>
std::vector<param_spec> gpt_transformer_block<T>::params() const {
  const std::int64_t C = cfg_.width;
  const std::string p = "transformer.h." + std::to_string(layer_) + ".";
  return {{p + "ln_1.weight", {C}},
          {p + "ln_1.bias", {C}},
          {p + "attn.c_attn.weight", {C, 3 * C}},
          {p + "attn.c_attn.bias", {3 * C}},
          {p + "attn.c_proj.weight", {C, C}},
          {p + "attn.c_proj.bias", {C}},
          {p + "ln_2.weight", {C}},
          {p + "ln_2.bias", {C}},
          {p + "mlp.c_fc.weight", {C, 4 * C}},
          {p + "mlp.c_fc.bias", {4 * C}},
          {p + "mlp.c_proj.weight", {4 * C, C}},
          {p + "mlp.c_proj.bias", {C}}};
}

// GPT-2: weights normal(0, 0.02), residual projections scaled by 1/sqrt(2 layers), biases 0,
// layernorm weight 1 and bias 0.
template <class T>
void gpt_transformer_block<T>::init(std::span<T> w, std::uint64_t seed) const {
  const auto specs = params();
  const double proj_std = 0.02 / std::sqrt(2.0 * cfg_.layers);
  for (int k = 0; k < static_cast<int>(specs.size()); ++k) {
    std::span<T> s = w.subspan(static_cast<std::size_t>(off_[k]),
                               static_cast<std::size_t>(off_[k + 1] - off_[k]));
    switch (k) {
      case ln1_w:
      case ln2_w:
        fill_value(s, T(1));
        break;
      case attn_w:
      case fc_w:
        fill_normal(s, seed, specs[k].name, 0.02);
        break;
      case proj_w:
      case fcp_w:
        fill_normal(s, seed, specs[k].name, proj_std);
        break;
      default:
        fill_value(s, T(0));
        break;
    }
  }
}

template <class T>
block_forward gpt_transformer_block<T>::forward(const device_context& dev, const T* w, tensor x,
                                                const microbatch_ctx& ctx) const {
  const int C = cfg_.width, NH = cfg_.heads;
  if (x.rank() != 3 || x.dim(0) != ctx.batch || x.dim(1) > cfg_.context || x.dim(2) != C)
    throw pipeworks_error(name() + ": expected (" + std::to_string(ctx.batch) + ", T, " +
                          std::to_string(C) + "), got " + shape_string(x.shape()));
  const int B = static_cast<int>(x.dim(0)), Tn = static_cast<int>(x.dim(1));
  const std::int64_t N = static_cast<std::int64_t>(B) * Tn;
  auto make = [&](shape_t sh) { return dev.output(std::move(sh), dtype_of<T>()); };
  auto W = [&](int k) { return w + off_[k]; };
  std::vector<tensor> s(s_count);
  s[s_ln1] = make({B, Tn, C});
  s[s_ln1_mean] = make({B, Tn});
  s[s_ln1_rstd] = make({B, Tn});
  s[s_qkv] = make({B, Tn, 3 * C});
  s[s_att] = make(attention_saved_shape(dev, B, Tn, C, NH));
  s[s_atty] = make({B, Tn, C});
  s[s_res2] = make({B, Tn, C});
  s[s_ln2] = make({B, Tn, C});
  s[s_ln2_mean] = make({B, Tn});
  s[s_ln2_rstd] = make({B, Tn});
  s[s_fch] = make({B, Tn, 4 * C});
  s[s_fch_gelu] = make({B, Tn, 4 * C});
  tensor out = make({B, Tn, C});
  auto d = [&](int i) { return s[i].template data<T>(); };
  const T* xp = x.data<T>();
  T* op = out.data<T>();

  layernorm_forward(dev, d(s_ln1), d(s_ln1_mean), d(s_ln1_rstd), xp, W(ln1_w), W(ln1_b), N, C);
  linear_forward(dev, d(s_qkv), d(s_ln1), W(attn_w), W(attn_b), N, C, 3 * C, in_out);
  attention_forward(dev, d(s_atty), d(s_att), d(s_qkv), B, Tn, C, NH);
  linear_forward(dev, op, d(s_atty), W(proj_w), W(proj_b), N, C, C, in_out);  // attn projection
  T* res2 = d(s_res2);
  add(dev, res2, xp, static_cast<const T*>(op), N * C);
  layernorm_forward(dev, d(s_ln2), d(s_ln2_mean), d(s_ln2_rstd), res2, W(ln2_w), W(ln2_b), N, C);
  linear_forward(dev, d(s_fch), d(s_ln2), W(fc_w), W(fc_b), N, C, 4 * C, in_out);
  gelu_forward(dev, d(s_fch_gelu), d(s_fch), N * 4 * C);
  linear_forward(dev, op, d(s_fch_gelu), W(fcp_w), W(fcp_b), N, 4 * C, C, in_out);
  add_into(dev, op, static_cast<const T*>(res2), N * C);

  s[s_x] = std::move(x);
  return {std::move(out), stash{std::move(s)}};
}

// The same products as backward, less every linear's dweight and dbias.
template <class T>
void gpt_transformer_block<T>::drop_recomputable(stash& st) const {
  std::vector<tensor>& s = st.saved;
  if (static_cast<int>(s.size()) != s_count) throw pipeworks_error(name() + ": bad stash");
  if (s[s_att].rank() == 4) s[s_att] = tensor();  // the flash kernels' logsumexp is small: kept
  s[s_fch_gelu] = tensor();
}

template <class T>
tensor gpt_transformer_block<T>::backward_input(const device_context& dev, const T* w, stash st,
                                                tensor dout, const microbatch_ctx&,
                                                deferred_grads& later) const {
  const int C = cfg_.width, NH = cfg_.heads;
  std::vector<tensor>& s = st.saved;
  if (static_cast<int>(s.size()) != s_count) throw pipeworks_error(name() + ": bad stash");
  const int B = static_cast<int>(s[s_x].dim(0)), Tn = static_cast<int>(s[s_x].dim(1));
  const std::int64_t N = static_cast<std::int64_t>(B) * Tn;
  auto make = [&](shape_t sh) { return dev.zeros(std::move(sh), dtype_of<T>()); };
  // For a gradient the next op writes whole (grad_into::overwrite): no zero fill first.
  auto fresh = [&](shape_t sh) { return dev.output(std::move(sh), dtype_of<T>()); };
  constexpr auto over = grad_into::overwrite;
  auto W = [&](int k) { return w + off_[k]; };
  auto d = [&](int i) { return s[i].template data<T>(); };
  // What drop_recomputable took, made again by the forward's own kernels: the same bits.
  if (s[s_att].empty()) {
    s[s_att] = fresh(attention_saved_shape(dev, B, Tn, C, NH));
    tensor unused = fresh({B, Tn, C});
    attention_forward(dev, unused.data<T>(), d(s_att), d(s_qkv), B, Tn, C, NH);
  }
  if (s[s_fch_gelu].empty()) {
    s[s_fch_gelu] = fresh({B, Tn, 4 * C});
    gelu_forward(dev, d(s_fch_gelu), d(s_fch), N * 4 * C);
  }
  std::vector<tensor> l(l_count);
  l[l_ln] = make({4, C});
  T* dln = l[l_ln].data<T>();

  // dres2: the gradient of res2, from dout through the residual; dout itself is c_proj's.
  tensor dres2_t = dout.clone();  // on dout's device and stream: this block's
  T* dres2 = dres2_t.data<T>();
  tensor dfch = fresh({B, Tn, 4 * C});  // through mlp.c_proj and the GELU at once
  linear_gelu_backward_input<T>(dev, dfch.data<T>(), dout.data<T>(), W(fcp_w), d(s_fch), N, 4 * C,
                                C, in_out);
  tensor dln2 = fresh({B, Tn, C});
  linear_backward<T>(dev, dln2.data<T>(), nullptr, nullptr, dfch.data<T>(), nullptr, W(fc_w), N, C,
                     4 * C, in_out, over);
  layernorm_backward(dev, dres2, dln + 2 * C, dln + 3 * C, dln2.data<T>(), d(s_res2), W(ln2_w),
                     d(s_ln2_mean), d(s_ln2_rstd), N, C);
  dln2 = tensor();
  // dres2 is attn.c_proj's dout; dx goes on from a copy of it.
  tensor dx = dres2_t.clone();
  tensor datty = fresh({B, Tn, C});
  linear_backward<T>(dev, datty.data<T>(), nullptr, nullptr, dres2, nullptr, W(proj_w), N, C, C, in_out,
                     over);
  tensor dqkv = fresh({B, Tn, 3 * C});
  attention_backward(dev, dqkv.data<T>(), datty.data<T>(), d(s_atty), d(s_qkv), d(s_att), B, Tn, C,
                     NH, over);
  tensor dln1 = std::move(datty);  // reuse: same shape, written whole
  linear_backward<T>(dev, dln1.data<T>(), nullptr, nullptr, dqkv.data<T>(), nullptr, W(attn_w), N, C,
                     3 * C, in_out, over);
  // dx = dres2 (the residual) + the gradient through ln_1.
  layernorm_backward(dev, dx.data<T>(), dln, dln + C, dln1.data<T>(), d(s_x), W(ln1_w), d(s_ln1_mean),
                     d(s_ln1_rstd), N, C);

  l[l_fcp_in] = std::move(s[s_fch_gelu]);
  l[l_fcp_dout] = std::move(dout);
  l[l_fc_in] = std::move(s[s_ln2]);
  l[l_fc_dout] = std::move(dfch);
  l[l_proj_in] = std::move(s[s_atty]);
  l[l_proj_dout] = std::move(dres2_t);
  l[l_attn_in] = std::move(s[s_ln1]);
  l[l_attn_dout] = std::move(dqkv);
  later.saved = std::move(l);
  return dx;
}

// dW += inp^T dout and db += column sums of dout for the four linears; plus the layernorms'.
template <class T>
void gpt_transformer_block<T>::backward_weight(const device_context& dev, const T*, T* dw,
                                               deferred_grads later) const {
  const int C = cfg_.width;
  std::vector<tensor>& l = later.saved;
  if (static_cast<int>(l.size()) != l_count) throw pipeworks_error(name() + ": bad deferred");
  const std::int64_t N = l[l_fc_in].numel() / C;
  auto dW = [&](int k) { return dw + off_[k]; };
  auto L = [&](int i) { return std::as_const(l[i]).template data<T>(); };
  linear_backward<T>(dev, nullptr, dW(fcp_w), dW(fcp_b), L(l_fcp_dout), L(l_fcp_in), nullptr, N, 4 * C,
                     C, in_out);
  linear_backward<T>(dev, nullptr, dW(fc_w), dW(fc_b), L(l_fc_dout), L(l_fc_in), nullptr, N, C, 4 * C,
                     in_out);
  linear_backward<T>(dev, nullptr, dW(proj_w), dW(proj_b), L(l_proj_dout), L(l_proj_in), nullptr, N, C,
                     C, in_out);
  linear_backward<T>(dev, nullptr, dW(attn_w), dW(attn_b), L(l_attn_dout), L(l_attn_in), nullptr, N, C,
                     3 * C, in_out);
  const T* dln = L(l_ln);
  add_into(dev, dW(ln1_w), dln, C);
  add_into(dev, dW(ln1_b), dln + C, C);
  add_into(dev, dW(ln2_w), dln + 2 * C, C);
  add_into(dev, dW(ln2_b), dln + 3 * C, C);
}

template <class T>
layer_cost gpt_transformer_block<T>::cost() const {
  const int Tn = cfg_.context, C = cfg_.width, NH = cfg_.heads;
  const int e = sizeof(T);
  layer_cost c = layernorm_cost(Tn, C, e);
  c += linear_cost(Tn, C, 3 * C, true, e);
  c += attention_cost(Tn, C, NH, e);
  c += linear_cost(Tn, C, C, true, e);
  c += layernorm_cost(Tn, C, e);
  c += linear_cost(Tn, C, 4 * C, true, e);
  c += gelu_cost(static_cast<std::int64_t>(Tn) * 4 * C, e);
  c += linear_cost(Tn, 4 * C, C, true, e);
  return c;
}

template class gpt_transformer_block<float>;
template class gpt_transformer_block<double>;

}  // namespace pipeworks
