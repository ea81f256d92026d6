// GPipe (Huang et al., 2019): each step, every stage runs all forwards, then all backwards in the
// same microbatch order, then its optimizer update. Synchronous: step t uses version t.
#include "runtime/schedules/builder.hpp"

namespace pipeworks {

result<schedule> gpipe(const schedule_params& params) {
  if (auto ok = schedules::check_params("gpipe", params, false); !ok) return error{ok.message()};
  schedule s = schedules::start_schedule(schedule_kind::gpipe, params);
  const int m = params.microbatches;
  schedules::reserve_programs(s, 2 * static_cast<std::size_t>(m) * params.steps);
  for (int d = 0; d < params.stages; ++d) {
    program& p = s.programs[d];
    for (int t = 0; t < params.steps; ++t) {
      for (int k = 0; k < m; ++k) schedules::add(p, d, action_kind::forward, t * m + k);
      for (int k = 0; k < m; ++k) schedules::add(p, d, action_kind::backward, t * m + k);
    }
  }
  schedules::finish_flush_schedule(s);
  return s;
}

}  // namespace pipeworks
