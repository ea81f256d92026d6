// Asynchronous 1F1B without flush (PipeDream, Narayanan et al., 2019, and PipeDream-2BW, 2021):
// all steps * m microbatches stream through one 1F1B pipeline, and each stage runs its optimizer
// update right after its m-th backward of a step, with no flush. The three variants differ only
// in the version rule: latest version with stashing, vertical sync, or one step of delay.
#include <string>

#include "runtime/schedules/builder.hpp"
#include "runtime/version_rule.hpp"

namespace pipeworks {

namespace {

// The shared programs: one 1F1B stream over every microbatch id, updates after each step.
schedule async_one_f_one_b(schedule_kind kind, const schedule_params& params) {
  schedule s = schedules::start_schedule(kind, params);
  const int total = params.microbatches * params.steps;
  schedules::reserve_programs(s, 2 * static_cast<std::size_t>(total));
  for (int d = 0; d < params.stages; ++d)
    schedules::add_one_f_one_b(s.programs[d], d, params.stages, 0, total);
  schedules::add_updates(s);
  schedules::replicate(s);
  return s;
}

}  // namespace

result<schedule> pipedream(const schedule_params& params) {
  if (auto ok = schedules::check_params("pipedream", params, false); !ok)
    return error{ok.message()};
  schedule s = async_one_f_one_b(schedule_kind::pipedream, params);
  s.versions = latest_versions(s);
  s.version_rule =
      "weight stashing: F(k) on each stage uses that stage's latest version; B(k) uses the same "
      "one";
  return s;
}

result<schedule> pipedream_vertical_sync(const schedule_params& params) {
  if (auto ok = schedules::check_params("pipedream-vs", params, false); !ok)
    return error{ok.message()};
  schedule s = async_one_f_one_b(schedule_kind::pipedream_vs, params);
  // Stage s >= 1 never runs F(k) before stage 0 has, and stage s updates no later than stage 0,
  // so the version stage 0 chose for k already exists on stage s when k arrives.
  s.versions = vertical_sync_versions(latest_versions(s));
  s.version_rule =
      "vertical sync: every stage uses, for microbatch k, the version stage 0 used for k's "
      "forward";
  return s;
}

result<schedule> pipedream_2bw(const schedule_params& params) {
  if (auto ok = schedules::check_params("2bw", params, false); !ok) return error{ok.message()};
  if (params.microbatches < params.stages)
    return make_error("2bw needs at least as many microbatches per step as stages (m >= p), so "
                      "that version t-1 exists before step t's first forward and only two "
                      "versions are live; got m = " +
                      std::to_string(params.microbatches) + ", p = " +
                      std::to_string(params.stages) + ". Use m >= " +
                      std::to_string(params.stages));
  schedule s = async_one_f_one_b(schedule_kind::two_bw, params);
  s.versions = delayed_versions(s.virtual_stages, params.microbatches, params.steps);
  s.version_rule =
      "double buffering: every microbatch of step t uses version max(t-1, 0), so "
      "W(t+1) = W(t) - lr * grad f(W(t-1))";
  return s;
}

}  // namespace pipeworks
