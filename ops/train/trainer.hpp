// The single-device trainer: gradient accumulation over m microbatches per step, then one
// optimizer update that makes a new weight snapshot. This is the `--schedule none` reference.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "ops/model/model.hpp"
#include "ops/optim/lr_schedule.hpp"
#include "ops/optim/optimizer.hpp"
#include "ops/train/microbatches.hpp"
#include "ops/train/stage_optimizer.hpp"
#include "ops/train/trainer_config.hpp"

namespace pipeworks {

struct step_metrics {
  std::int64_t step = 0;   // 1-based: the number of updates done
  std::int64_t steps = 0;  // planned total
  double loss = 0;         // mean over the step's microbatches
  double lr = 0;
  double grad_norm = 0;      // before clipping
  double samples_per_s = 0;  // this step's samples over its wall time
  double step_s = 0;         // this step's wall time
  double elapsed_s = 0;      // since the trainer was made
  std::int64_t samples = 0;  // samples seen so far
};

template <class T>
class trainer {
 public:
  // The model must outlive the trainer, and dev too: the device it trains on (the weights,
  // gradients and optimizer moments live there; on a GPU, initial is copied to it).
  trainer(const model<T>& m, param_set initial, train_config cfg,
          const device_context& dev = host_context());

  // One optimizer step on one minibatch. An error for a bad split or a non-finite loss.
  result<step_metrics> step(const minibatch& mb);

  // Forward and backward of one microbatch at the current weights, adding scale * dloss/dw into
  // the gradient buffer. Returns the microbatch's loss.
  T accumulate(microbatch mb, T scale);
  // Clip (if configured) and apply the accumulated gradient at this step's rate; then zero it.
  status apply();

  // Continues from a checkpoint: these weights and optimizer state after `steps` steps.
  void restore(param_snapshot weights, std::vector<optimizer_state<T>> state, std::int64_t steps);
  const std::vector<optimizer_state<T>>& optimizer_state_now() const { return optimizer_.state(); }
  // A GPU's optimizer moments in page-locked host memory (stage_optimizer::offload_moments).
  void offload_moments() { optimizer_.offload_moments(); }

  param_snapshot weights() const { return weights_; }  // on the trainer's device
  const param_set& gradients() const { return grads_; }
  const train_config& config() const { return cfg_; }
  std::int64_t steps_done() const { return step_; }
  double lr_for(std::int64_t step) const;

 private:
  const model<T>& model_;
  const device_context& dev_;
  train_config cfg_;
  param_snapshot weights_;
  param_set grads_;
  stage_optimizer<T> optimizer_;
  std::int64_t step_ = 0;
  std::int64_t samples_ = 0;
  double elapsed_s_ = 0;
  double last_grad_norm_ = 0;
};

// Supplies the minibatch of each step (0-based).
using minibatch_fn = std::function<result<minibatch>(std::int64_t step)>;
// Called after every step.
using metrics_fn = std::function<void(const step_metrics&)>;

// Runs the trainer to cfg.steps, calling on_step after each step. Returns the last metrics.
template <class T>
result<step_metrics> train_loop(trainer<T>& t, const minibatch_fn& next, const metrics_fn& on_step);

}  // namespace pipeworks
