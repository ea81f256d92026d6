// Gradient accumulation, clipping, optimizer update and the training loop.
#include "ops/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

namespace pipeworks {

status validate(const train_config& cfg) {
  if (cfg.steps < 1) return make_error("steps must be at least 1");
  if (cfg.microbatches < 1) return make_error("microbatches must be at least 1");
  if (!(cfg.clip_grad_norm >= 0)) return make_error("clip_grad_norm must be >= 0");
  if (status s = validate(cfg.optim); !s) return s;
  return validate(lr_schedule{cfg.optim.lr, cfg.min_lr, cfg.warmup_steps, cfg.steps});
}

template <class T>
trainer<T>::trainer(const model<T>& m, param_set initial, train_config cfg)
    : model_(m), cfg_(cfg), grads_(initial.zeros_like()) {
  state_.resize(initial.entries().size());
  weights_ = std::make_shared<param_set>(std::move(initial));
}

template <class T>
double trainer<T>::lr_for(std::int64_t step) const {
  return lr_at(lr_schedule{cfg_.optim.lr, cfg_.min_lr, cfg_.warmup_steps, cfg_.steps}, step);
}

template <class T>
T trainer<T>::accumulate(microbatch mb, T scale) {
  stage_forward f = forward_blocks(model_, *weights_, std::move(mb.input), mb.ctx);
  T loss = loss_value<T>(f.output);
  backward_blocks(model_, *weights_, grads_, std::move(f.saved), scalar_tensor<T>(scale), mb.ctx);
  return loss;
}

template <class T>
status trainer<T>::apply(double lr) {
  std::span<T> g = grads_.values<T>();
  double sq = 0;
  for (T x : g) sq += static_cast<double>(x) * static_cast<double>(x);
  last_grad_norm_ = std::sqrt(sq);
  if (!std::isfinite(last_grad_norm_))
    return make_error("the gradient is not finite at step " + std::to_string(step_ + 1));
  if (cfg_.clip_grad_norm > 0 && last_grad_norm_ > cfg_.clip_grad_norm) {
    const T f = static_cast<T>(cfg_.clip_grad_norm / (last_grad_norm_ + 1e-6));
    for (T& x : g) x *= f;
  }
  // A new snapshot; the old one stays valid for whoever still holds it. The buffer of a version
  // that nobody held any more is reused, so a step allocates nothing when no one keeps versions.
  std::shared_ptr<param_set> next = spare_ && spare_.use_count() == 1
                                        ? std::move(spare_)
                                        : std::make_shared<param_set>(weights_->zeros_like());
  spare_.reset();
  const auto& entries = weights_->entries();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const param_entry& e = entries[i];
    optimizer_config oc = cfg_.optim;
    if (e.shape.size() < 2 && !cfg_.decay_vectors) oc.weight_decay = 0;
    std::span<const T> w = weights_->values<T>(e);
    std::span<const T> ge = grads_.values<T>(e);
    if (status s = optimizer_step<T>(oc, lr, w, ge, state_[i], next->values<T>(e), e.name); !s)
      return s;
  }
  spare_ = std::exchange(weights_, std::move(next));
  std::fill(g.begin(), g.end(), T(0));
  return {};
}

template <class T>
result<step_metrics> trainer<T>::step(const minibatch& mb) {
  const auto start = std::chrono::steady_clock::now();
  auto micro = split_minibatch(mb, cfg_.microbatches);
  if (!micro) return micro.err();
  const int m = cfg_.microbatches;
  double loss = 0;
  for (auto& u : *micro) loss += static_cast<double>(accumulate(std::move(u), T(1) / T(m)));
  loss /= m;
  if (!std::isfinite(loss))
    return make_error("the loss is not finite (" + std::to_string(loss) + ") at step " +
                      std::to_string(step_ + 1));
  const double lr = lr_for(step_);
  if (status s = apply(lr); !s) return make_error(s.message());
  ++step_;
  const std::int64_t B = mb.inputs.dim(0);
  samples_ += B;
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  elapsed_s_ += dt;
  step_metrics r;
  r.step = step_;
  r.steps = cfg_.steps;
  r.loss = loss;
  r.lr = lr;
  r.grad_norm = last_grad_norm_;
  r.step_s = dt;
  r.samples_per_s = dt > 0 ? static_cast<double>(B) / dt : 0;
  r.elapsed_s = elapsed_s_;
  r.samples = samples_;
  return r;
}

template <class T>
result<step_metrics> train_loop(trainer<T>& t, const minibatch_fn& next,
                                const metrics_fn& on_step) {
  step_metrics last;
  while (t.steps_done() < t.config().steps) {
    auto mb = next(t.steps_done());
    if (!mb) return mb.err();
    auto r = t.step(*mb);
    if (!r) return r.err();
    last = *r;
    if (on_step) on_step(last);
  }
  return last;
}

template class trainer<float>;
template class trainer<double>;
template result<step_metrics> train_loop<float>(trainer<float>&, const minibatch_fn&,
                                                const metrics_fn&);
template result<step_metrics> train_loop<double>(trainer<double>&, const minibatch_fn&,
                                                 const metrics_fn&);

}  // namespace pipeworks
