// ZBV (Qi et al., 2023, "Zero Bubble Pipeline Parallelism", Section 6): two chunks per device in a
// V (device d holds virtual stages d and 2p-1-d), the backward split into I and W. Synchronous.
#include <algorithm>

#include "runtime/schedules/builder.hpp"

namespace pipeworks {

namespace {

// Device d's order for one step, as PyTorch's ScheduleZBVZeroBubble builds it (chunk 0 is
// virtual stage d, chunk 1 is 2p-1-d). It is written for n = max(m, 2p-1) microbatches, the
// fewest that fill the V; the actions of microbatches m.. are then dropped, as PyTorch does.
//   warm-up: 2(p-d)-1 F of chunk 0; d times F1 F0; p-d times F1 I1 W1
//   steady:  [F0] I0 W0 F1 I1 W1 until every F is issued
//   cool-down: d times I0 I1; p-d times I0 W0; then the pending W of chunk 1, then of chunk 0
void zbv_step(program& out, int d, int p, int m, int first) {
  const int n = std::max(m, 2 * p - 1);
  const int c0 = d, c1 = 2 * p - 1 - d;
  int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  auto emit = [&](int stage, action_kind k, int mb) {
    if (mb < m) out.push_back(action{stage, k, first + mb});
  };
  for (int i = 0; i < 2 * (p - d) - 1; ++i) emit(c0, action_kind::forward, f0++);
  for (int i = 0; i < d; ++i) {
    emit(c1, action_kind::forward, f1++);
    emit(c0, action_kind::forward, f0++);
  }
  for (int i = 0; i < p - d; ++i) {
    emit(c1, action_kind::forward, f1++);
    emit(c1, action_kind::input_grad, b1);
    emit(c1, action_kind::weight_grad, b1++);
  }
  while (f1 < f0 || f0 < n) {
    if (f0 < n) emit(c0, action_kind::forward, f0++);
    emit(c0, action_kind::input_grad, b0);
    emit(c0, action_kind::weight_grad, b0++);
    emit(c1, action_kind::forward, f1++);
    emit(c1, action_kind::input_grad, b1);
    emit(c1, action_kind::weight_grad, b1++);
  }
  int w0 = b0, w1 = b1;
  for (int i = 0; i < d; ++i) {
    emit(c0, action_kind::input_grad, b0++);
    emit(c1, action_kind::input_grad, b1++);
  }
  for (int i = 0; i < p - d; ++i) {
    emit(c0, action_kind::input_grad, b0++);
    emit(c0, action_kind::weight_grad, w0++);
  }
  while (w1 < b1) emit(c1, action_kind::weight_grad, w1++);
  while (w0 < b0) emit(c0, action_kind::weight_grad, w0++);
}

}  // namespace

result<schedule> zbv(const schedule_params& params) {
  if (auto ok = schedules::check_v_params("zbv", params); !ok) return error{ok.message()};
  schedule s = schedules::start_schedule(schedule_kind::zbv, params);
  const int p = params.stages, m = params.microbatches;
  schedules::reserve_programs(s, 6 * static_cast<std::size_t>(m) * params.steps);
  for (int d = 0; d < p; ++d)
    for (int t = 0; t < params.steps; ++t) zbv_step(s.programs[d], d, p, m, t * m);
  schedules::finish_flush_schedule(s);  // [REDUCE when w > 1] and STEP after each step's last W
  return s;
}

}  // namespace pipeworks
