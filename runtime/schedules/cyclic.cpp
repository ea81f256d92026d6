// Cyclic data parallelism (Fournier & Oyallon, "Cyclic Data Parallelism for Efficient
// Parallelism of Deep Neural Networks", 2024) on a pipeline: microbatches enter one after another
// with a uniform delay (one F+B slot), so every stage holds a constant number of activations and
// the per-stage gradient reductions and updates fall at different times across the step instead
// of all at the end. The programs are an asynchronous 1F1B stream with each stage's update right
// after its m-th backward of a step.
//
// Version rule (declared here, as the paper's update mixes two versions by position in the
// cycle): a microbatch that enters stage 0 before the previous step's gradients have left it
// uses the previous version, the others use the new one. In a 1F1B stream stage 0 runs p - 1
// forwards of step t before its last backward of step t - 1, so
//   microbatch k of step t uses version t - 1 if k < min(p - 1, m), and version t otherwise;
//   step 0 uses version 0.
// This is the paper's "first part of the cycle uses theta_{t-1}, the rest theta_t" with the
// split at p - 1 (half the cycle when m = 2(p - 1)). It needs m >= p - 1, so that version t - 1
// exists on every stage before step t begins; at most two versions are live on a stage.
#include <algorithm>
#include <string>

#include "runtime/schedules/builder.hpp"

namespace pipeworks {

result<schedule> cyclic(const schedule_params& params) {
  if (auto ok = schedules::check_params("cyclic", params, false); !ok) return error{ok.message()};
  const int p = params.stages, m = params.microbatches;
  if (m < p - 1)
    return make_error("cyclic needs at least p - 1 microbatches per step (m >= p - 1), so that "
                      "the previous version exists on every stage before a step begins; got m = " +
                      std::to_string(m) + ", p = " + std::to_string(p) + ". Use m >= " +
                      std::to_string(p - 1));
  schedule s = schedules::start_schedule(schedule_kind::cyclic, params);
  const int total = m * params.steps;
  for (int d = 0; d < p; ++d) schedules::add_one_f_one_b(s.programs[d], d, p, 0, total);
  schedules::add_updates(s);
  schedules::replicate(s);
  const int stale = std::min(p - 1, m);  // microbatches per step that use version t - 1
  s.versions.assign(s.virtual_stages, std::vector<version_use>(total));
  for (auto& row : s.versions)
    for (int mb = 0; mb < total; ++mb) {
      const int t = mb / m, k = mb % m;
      const int v = k < stale ? std::max(t - 1, 0) : t;
      row[mb] = {v, v};
    }
  s.version_rule = "cyclic: microbatch k of step t uses version t-1 if k < min(p-1, m) (it enters "
                   "before step t-1's gradients leave stage 0), else version t; step 0 uses 0";
  return s;
}

}  // namespace pipeworks
