// Zero-bubble schedules ZB-H1 and ZB-H2 (Qi et al., 2023, "Zero Bubble Pipeline Parallelism",
// Figure 3): the backward split into I (input gradient) and W (weight gradient), W deferred to
// fill the bubbles. Compute-only programs; synchronous, so step t uses version t.
#include <algorithm>

#include "runtime/schedules/builder.hpp"

namespace pipeworks {

namespace {

// Both schedules have one shape. Stage s (0-based) of p runs `warmup` forwards, then repeats
// "I; W if more than `lag` W are pending; F if any is left", and ends with the pending W:
//   ZB-H1: warmup p - s,          lag s   (as many in flight as 1F1B: peak memory p M_B)
//   ZB-H2: warmup 2(p - s) - 1,   lag 2s  (the warm-up fills the bubble before the first I and
//          the W at the tail turn the trapezoid into a parallelogram: peak (2p - 1) M_B)
// With p=4, m=8 this reproduces the paper's Figure 3 row for row.
void zb_step(program& out, int stage, int m, int warmup, int lag, int offset) {
  warmup = std::min(warmup, m);
  int f = 0, i = 0, w = 0;
  auto emit = [&](action_kind k, int mb) { out.push_back(action{stage, k, offset + mb}); };
  while (f < warmup) emit(action_kind::forward, f++);
  while (i < m) {
    emit(action_kind::input_grad, i++);
    if (i - w > lag) emit(action_kind::weight_grad, w++);
    if (f < m) emit(action_kind::forward, f++);
  }
  while (w < m) emit(action_kind::weight_grad, w++);
}

result<schedule> zero_bubble(schedule_kind kind, const schedule_params& params) {
  if (auto ok = schedules::check_params(schedule_name(kind), params, false); !ok)
    return error{ok.message()};
  schedule s = schedules::start_schedule(kind, params);
  const int p = params.stages;
  const int m = params.microbatches;
  const bool h1 = kind == schedule_kind::zb_h1;
  schedules::reserve_programs(s, 3 * static_cast<std::size_t>(m) * params.steps);
  for (int d = 0; d < p; ++d) {
    program& prog = s.programs[d];
    const int warmup = h1 ? p - d : 2 * (p - d) - 1;
    for (int t = 0; t < params.steps; ++t) zb_step(prog, d, m, warmup, h1 ? d : 2 * d, t * m);
  }
  schedules::finish_flush_schedule(s);  // [REDUCE when w > 1] and STEP after each step's last W
  return s;
}

}  // namespace

result<schedule> zero_bubble_h1(const schedule_params& params) {
  return zero_bubble(schedule_kind::zb_h1, params);
}

result<schedule> zero_bubble_h2(const schedule_params& params) {
  return zero_bubble(schedule_kind::zb_h2, params);
}

}  // namespace pipeworks
