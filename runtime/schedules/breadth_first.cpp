// Looped breadth-first pipeline (Lamy-Poirier, "Breadth-First Pipeline Parallelism", 2022):
// v chunks per device, virtual stage c * p + d on device d. Each step, a device runs the
// forwards of all microbatches through chunk 0, then chunk 1, ..., then the backwards chunk by
// chunk in reverse, oldest microbatch first, so that each stage adds its microbatches' gradients
// in the order --schedule none does and ends with its bits (PyTorch's ScheduleLoopedBFS takes the
// newest first; the times and peaks are the same, since a step's every forward is done before its
// first backward). Synchronous.
#include "runtime/schedules/builder.hpp"

namespace pipeworks {

result<schedule> breadth_first(const schedule_params& params) {
  if (auto ok = schedules::check_params("bfs", params, true); !ok) return error{ok.message()};
  schedule s = schedules::start_schedule(schedule_kind::bfs, params);
  const int p = params.stages, v = params.chunks, m = params.microbatches;
  schedules::reserve_programs(s, 2 * static_cast<std::size_t>(m) * v * params.steps);
  for (int d = 0; d < p; ++d) {
    program& prog = s.programs[d];
    for (int t = 0; t < params.steps; ++t) {
      for (int c = 0; c < v; ++c)
        for (int k = 0; k < m; ++k) schedules::add(prog, c * p + d, action_kind::forward, t * m + k);
      for (int c = v - 1; c >= 0; --c)
        for (int k = 0; k < m; ++k) schedules::add(prog, c * p + d, action_kind::backward, t * m + k);
    }
  }
  schedules::finish_flush_schedule(s);
  return s;
}

}  // namespace pipeworks
