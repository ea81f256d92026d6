// Gradient accumulation, clipping, optimizer update and the training loop.
#include "ops/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "ops/device/device_ops.hpp"

namespace pipeworks {

status validate(const train_config& cfg) {
  if (cfg.steps < 1) return make_error("steps must be at least 1");
  if (cfg.microbatches < 1) return make_error("microbatches must be at least 1");
  if (!(cfg.clip_grad_norm >= 0)) return make_error("clip_grad_norm must be >= 0");
  if (status s = validate(cfg.optim); !s) return s;
  return validate(lr_schedule{cfg.optim.lr, cfg.min_lr, cfg.warmup_steps, cfg.steps});
}

template <class T>
trainer<T>::trainer(const model<T>& m, param_set initial, train_config cfg,
                    const device_context& dev)
    : model_(m), dev_(dev), cfg_(cfg), optimizer_(initial, cfg) {
  if (initial.where() != dev.where()) initial = initial.on(dev);
  grads_ = initial.zeros_like();
  weights_ = std::make_shared<const param_set>(std::move(initial));
}

template <class T>
double trainer<T>::lr_for(std::int64_t step) const {
  return optimizer_.lr_for(step);
}

template <class T>
void trainer<T>::restore(param_snapshot weights, std::vector<optimizer_state<T>> state,
                         std::int64_t steps) {
  if (!weights || !weights->same_layout(grads_))
    throw pipeworks_error("trainer: the restored weights do not have the model's layout");
  if (weights->where() != dev_.where()) weights = std::make_shared<const param_set>(weights->on(dev_));
  weights_ = std::move(weights);
  optimizer_.set_state(std::move(state));
  step_ = steps;
}

template <class T>
T trainer<T>::accumulate(microbatch mb, T scale) {
  stage_forward f = forward_blocks(dev_, model_, *weights_, std::move(mb.input), mb.ctx);
  T loss = loss_value<T>(f.output);
  backward_blocks(dev_, model_, *weights_, grads_, std::move(f.saved), scalar_tensor<T>(scale),
                  mb.ctx);
  return loss;
}

template <class T>
status trainer<T>::apply() {
  auto next = optimizer_.apply(weights_, grads_, step_);
  if (!next) return next.err();
  weights_ = std::move(*next);
  last_grad_norm_ = optimizer_.last_grad_norm();
  zero(grads_.arena());
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
  if (status s = apply(); !s) return make_error(s.message());
  ++step_;
  dev_.wait();  // the update is done: the step's time is all of it
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
