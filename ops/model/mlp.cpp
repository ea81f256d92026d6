// The mlp blocks: linear + ReLU, and linear + softmax cross-entropy.
#include "ops/model/mlp.hpp"

#include <cmath>

#include "ops/layers/activation.hpp"
#include "ops/layers/cross_entropy.hpp"
#include "ops/layers/linear.hpp"
#include "ops/model/init.hpp"
#include "ops/model/loss_tail.hpp"
#include "base/result.hpp"

namespace pipeworks {
namespace {

constexpr auto out_in = weight_layout::out_in;

void check_input(const tensor& x, std::int64_t B, int in, const std::string& who) {
  if (x.numel() != B * in)
    throw pipeworks_error(who + ": expected an input of " + std::to_string(B) + " x " +
                          std::to_string(in) + " values, got shape " + shape_string(x.shape()));
}

std::vector<param_spec> linear_specs(int index, int in, int out) {
  std::string p = "fc" + std::to_string(index);
  return {{p + ".weight", {out, in}}, {p + ".bias", {out}}};
}

// nn.Linear's default: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias.
template <class T>
void linear_init(std::span<T> w, std::uint64_t seed, int index, int in, int out) {
  std::string p = "fc" + std::to_string(index);
  double bound = 1.0 / std::sqrt(static_cast<double>(in));
  std::size_t nw = static_cast<std::size_t>(in) * static_cast<std::size_t>(out);
  fill_uniform(w.subspan(0, nw), seed, p + ".weight", bound);
  fill_uniform(w.subspan(nw, static_cast<std::size_t>(out)), seed, p + ".bias", bound);
}

}  // namespace

template <class T>
model<T> make_mlp(const mlp_config& cfg) {
  std::vector<std::unique_ptr<const block<T>>> blocks;
  int in = cfg.inputs;
  int index = 1;
  for (int h : cfg.hidden) {
    blocks.push_back(std::make_unique<linear_relu_block<T>>(index, in, h, index == 1));
    in = h;
    ++index;
  }
  blocks.push_back(std::make_unique<linear_loss_block<T>>(index, in, cfg.classes, index == 1));
  return model<T>("mlp", std::move(blocks));
}

// ---- linear + ReLU -------------------------------------------------------------------------

template <class T>
linear_relu_block<T>::linear_relu_block(int index, int in, int out, bool first)
    : index_(index), in_(in), out_(out), first_(first) {}

template <class T>
std::vector<param_spec> linear_relu_block<T>::params() const {
  return linear_specs(index_, in_, out_);
}

template <class T>
void linear_relu_block<T>::init(std::span<T> w, std::uint64_t seed) const {
  linear_init(w, seed, index_, in_, out_);
}

// saved: x (B, in), h (B, out) the pre-activation.
template <class T>
block_forward linear_relu_block<T>::forward(const device_context& dev, const T* w, tensor x,
                                           const microbatch_ctx& ctx) const {
  const std::int64_t B = ctx.batch;
  check_input(x, B, in_, name());
  const T* W = w;
  const T* bias = w + static_cast<std::int64_t>(in_) * out_;
  tensor h = dev.output({B, out_}, dtype_of<T>());
  tensor y = dev.output({B, out_}, dtype_of<T>());
  linear_forward(dev, h.data<T>(), std::as_const(x).data<T>(), W, bias, B, in_, out_, out_in);
  relu_forward(dev, y.data<T>(), std::as_const(h).data<T>(), B * out_);
  block_forward r{std::move(y), {}};
  r.saved.saved.push_back(std::move(x));
  r.saved.saved.push_back(std::move(h));
  return r;
}

// Deferred: x (B, in) and dh (B, out).
template <class T>
tensor linear_relu_block<T>::backward_input(const device_context& dev, const T* w, stash s,
                                            tensor dout, const microbatch_ctx& ctx,
                                            deferred_grads& later) const {
  const std::int64_t B = ctx.batch;
  const tensor& h = s.saved.at(1);
  tensor dh = dev.zeros({B, out_}, dtype_of<T>());
  relu_backward(dev, dh.data<T>(), std::as_const(dout).data<T>(), h.data<T>(), B * out_);
  tensor dx = first_ ? tensor() : dev.zeros({B, in_}, dtype_of<T>());
  if (!first_)
    linear_backward<T>(dev, dx.data<T>(), nullptr, nullptr, dh.data<T>(), nullptr, w, B, in_, out_,
                       out_in);
  later.saved.push_back(std::move(s.saved.at(0)));
  later.saved.push_back(std::move(dh));
  return dx;
}

template <class T>
void linear_relu_block<T>::backward_weight(const device_context& dev, const T*, T* dw,
                                           deferred_grads later) const {
  const tensor& x = later.saved.at(0);
  const tensor& dh = later.saved.at(1);
  linear_backward<T>(dev, nullptr, dw, dw + static_cast<std::int64_t>(in_) * out_, dh.data<T>(),
                     x.data<T>(), nullptr, dh.dim(0), in_, out_, out_in);
}

template <class T>
layer_cost linear_relu_block<T>::cost() const {
  layer_cost c = linear_cost(1, in_, out_, true, sizeof(T));
  c += relu_cost(out_, sizeof(T));
  return c;
}

// ---- linear + cross-entropy ----------------------------------------------------------------

template <class T>
linear_loss_block<T>::linear_loss_block(int index, int in, int classes, bool first)
    : index_(index), in_(in), classes_(classes), first_(first) {}

template <class T>
std::vector<param_spec> linear_loss_block<T>::params() const {
  return linear_specs(index_, in_, classes_);
}

template <class T>
void linear_loss_block<T>::init(std::span<T> w, std::uint64_t seed) const {
  linear_init(w, seed, index_, in_, classes_);
}

// saved: x (B, in), probs (B, classes).
template <class T>
block_forward linear_loss_block<T>::forward(const device_context& dev, const T* w, tensor x,
                                           const microbatch_ctx& ctx) const {
  const std::int64_t B = ctx.batch;
  check_input(x, B, in_, name());
  tensor logits = dev.output({B, classes_}, dtype_of<T>());
  linear_forward(dev, logits.data<T>(), std::as_const(x).data<T>(), w,
                 w + static_cast<std::int64_t>(in_) * classes_, B, in_, classes_, out_in);
  return cross_entropy_tail<T>(dev, std::move(logits), ctx, name(), "labels", std::move(x));
}

// Deferred: x (B, in) and dlogits (B, classes).
template <class T>
tensor linear_loss_block<T>::backward_input(const device_context& dev, const T* w, stash s,
                                            tensor dout, const microbatch_ctx& ctx,
                                            deferred_grads& later) const {
  const std::int64_t B = ctx.batch;
  const tensor& probs = s.saved.at(1);
  tensor dlogits = cross_entropy_tail_backward<T>(dev, probs, dout, ctx);
  tensor dx = first_ ? tensor() : dev.zeros({B, in_}, dtype_of<T>());
  if (!first_)
    linear_backward<T>(dev, dx.data<T>(), nullptr, nullptr, dlogits.data<T>(), nullptr, w, B, in_,
                       classes_, out_in);
  later.saved.push_back(std::move(s.saved.at(0)));
  later.saved.push_back(std::move(dlogits));
  return dx;
}

template <class T>
void linear_loss_block<T>::backward_weight(const device_context& dev, const T*, T* dw,
                                           deferred_grads later) const {
  const tensor& x = later.saved.at(0);
  const tensor& dlogits = later.saved.at(1);
  linear_backward<T>(dev, nullptr, dw, dw + static_cast<std::int64_t>(in_) * classes_,
                     dlogits.data<T>(), x.data<T>(), nullptr, dlogits.dim(0), in_, classes_,
                     out_in);
}

template <class T>
layer_cost linear_loss_block<T>::cost() const {
  layer_cost c = linear_cost(1, in_, classes_, true, sizeof(T));
  c += cross_entropy_cost(1, classes_, sizeof(T));
  return c;
}

template model<float> make_mlp<float>(const mlp_config&);
template model<double> make_mlp<double>(const mlp_config&);
template class linear_relu_block<float>;
template class linear_relu_block<double>;
template class linear_loss_block<float>;
template class linear_loss_block<double>;

}  // namespace pipeworks
