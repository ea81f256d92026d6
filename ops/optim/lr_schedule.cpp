// Warmup-then-cosine learning rate.
#include "ops/optim/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace pipeworks {

double lr_at(const lr_schedule& s, std::int64_t step) {
  if (step < 0) step = 0;
  if (step < s.warmup_steps)
    return s.max_lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);
  const std::int64_t span = s.total_steps - 1 - s.warmup_steps;
  if (span <= 0) return s.max_lr;
  const double p = std::min(1.0, static_cast<double>(step - s.warmup_steps) / span);
  return s.min_lr + (s.max_lr - s.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * p));
}

status validate(const lr_schedule& s) {
  if (!std::isfinite(s.max_lr) || s.max_lr < 0)
    return make_error("lr schedule: max_lr = " + std::to_string(s.max_lr) + " must be >= 0");
  if (!std::isfinite(s.min_lr) || s.min_lr < 0 || s.min_lr > s.max_lr)
    return make_error("lr schedule: min_lr = " + std::to_string(s.min_lr) +
                      " must be between 0 and max_lr = " + std::to_string(s.max_lr));
  if (s.warmup_steps < 0)
    return make_error("lr schedule: warmup_steps = " + std::to_string(s.warmup_steps) +
                      " must be >= 0");
  if (s.total_steps < 1)
    return make_error("lr schedule: total_steps = " + std::to_string(s.total_steps) +
                      " must be >= 1");
  return {};
}

}  // namespace pipeworks
