// Learning-rate schedule: linear warmup, then cosine decay to a minimum at the final step.
#pragma once
#include <cstdint>

#include "base/result.hpp"

namespace pipeworks {

struct lr_schedule {
  double max_lr = 1e-3;
  double min_lr = 0.0;
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 1;
};

// The rate for step s, counted from 0:
//   s < W:        max_lr * (s + 1) / W                       (reaches max_lr at s = W - 1)
//   W <= s < N:   min + (max - min) * (1 + cos(pi * p)) / 2,  p = (s - W) / (N - 1 - W)
//   s >= N - 1:   min_lr  (when N - 1 > W; with no room to decay, max_lr)
double lr_at(const lr_schedule& schedule, std::int64_t step);

// An error naming the field when a rate is negative or not finite, min_lr > max_lr, warmup < 0
// or total_steps < 1.
status validate(const lr_schedule& schedule);

}  // namespace pipeworks
