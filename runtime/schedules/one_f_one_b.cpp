// 1F1B with flush (PipeDream-Flush, Narayanan et al., 2021): stage s runs min(p - s - 1, m)
// warm-up forwards, then alternates F and B, then drains; every step ends with a flush and the
// optimizer update. Synchronous: step t uses version t.
#include "runtime/schedules/builder.hpp"

namespace pipeworks {

result<schedule> one_f_one_b(const schedule_params& params) {
  if (auto ok = schedules::check_params("1f1b", params, false); !ok) return error{ok.message()};
  schedule s = schedules::start_schedule(schedule_kind::one_f_one_b, params);
  const int m = params.microbatches;
  schedules::reserve_programs(s, 2 * static_cast<std::size_t>(m) * params.steps);
  for (int d = 0; d < params.stages; ++d)
    for (int t = 0; t < params.steps; ++t)
      schedules::add_one_f_one_b(s.programs[d], d, params.stages, t * m, m);
  schedules::finish_flush_schedule(s);
  return s;
}

}  // namespace pipeworks
