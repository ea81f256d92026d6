// train_config: the optimizer, the learning-rate schedule and the accumulation settings of one
// training run, shared by the single-device trainer and the pipeline's stages.
#pragma once
#include <cstdint>

#include "ops/optim/optimizer.hpp"
#include "base/result.hpp"

namespace pipeworks {

struct train_config {
  std::int64_t steps = 100;
  int microbatches = 1;           // m: the minibatch is split into m microbatches of B/m
  optimizer_config optim;         // optim.lr is the peak rate
  double min_lr = 0.0;            // the cosine schedule's floor
  std::int64_t warmup_steps = 0;  // linear warmup, then cosine decay to min_lr at the last step
  double clip_grad_norm = 0.0;    // > 0: scale the gradient down to this global L2 norm
  bool decay_vectors = false;     // also apply weight decay to rank-1 tensors (biases, norms)
};

status validate(const train_config& cfg);

}  // namespace pipeworks
