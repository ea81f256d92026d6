// Choosing the recompute mode: a profile that carries several modes' figures is planned in each,
// and the fastest plan that fits wins (a tie goes to less recomputation). Shared by every planner.
#pragma once
#include <cmath>
#include <optional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/result.hpp"
#include "partition/profile.hpp"

namespace pipeworks {

// One mode's try: its plan's throughput when one fits, else why not (the planner's error).
struct mode_trial {
  recompute_mode mode = recompute_mode::none;
  bool fits = false;
  double samples_per_s = 0;
  std::string why;
};

// "none: no plan fits (no plan fits in memory: ..); selective: 59.1 samples/s; full: 43.9
// samples/s -> selective" (the last part names the chosen mode, or says none fits).
std::string format_mode_choice(const std::vector<mode_trial>& trials, const recompute_mode* chosen);

// Each device profile in `mode`: an error naming the device profile when it lacks the mode. A
// device profile of one mode other than `mode` is refused too (its figures are another mode's).
result<std::map<std::string, model_profile>> device_profiles_in_mode(
    const std::map<std::string, model_profile>& device_profiles, recompute_mode mode);

// plan_in(profile_in_mode(profile, mode), mode) for each of profile_modes(profile), in the order
// none, selective, full; rate(plan) is its throughput (samples/s). The best plan that fits, the
// first of the fastest within 1e-9 relative (less recomputation on a tie), with `report` set to
// format_mode_choice. When none fits: an error listing every mode's reason.
template <class Plan, class PlanIn, class Rate>
result<Plan> choose_recompute(const model_profile& profile, PlanIn plan_in, Rate rate,
                              std::string& report) {
  std::vector<mode_trial> trials;
  std::optional<Plan> best;
  double best_rate = 0;
  recompute_mode best_mode = recompute_mode::none;
  for (recompute_mode mode : profile_modes(profile)) {
    result<Plan> plan = plan_in(profile_in_mode(profile, mode), mode);
    mode_trial t;
    t.mode = mode;
    if (!plan) {
      t.why = plan.message();
    } else {
      t.fits = true;
      t.samples_per_s = rate(*plan);
      if (!best || t.samples_per_s > best_rate * (1 + 1e-9)) {
        best = std::move(*plan);
        best_rate = t.samples_per_s;
        best_mode = mode;
      }
    }
    trials.push_back(std::move(t));
  }
  report = format_mode_choice(trials, best ? &best_mode : nullptr);
  if (!best) return make_error("no recompute mode fits: " + report);
  return std::move(*best);
}

// What every planner does with a profile of several modes: choose_recompute over
// plan(profile in the mode, options with their device profiles in the mode, the mode), by
// rate(plan); the chosen plan's recompute_choice is the report.
template <class Plan, class Options, class PlanWith, class Rate>
result<Plan> choose_recompute_with(const model_profile& profile, const Options& options,
                                   PlanWith plan, Rate rate) {
  std::string report;
  auto out = choose_recompute<Plan>(
      profile,
      [&](const model_profile& one, recompute_mode mode) -> result<Plan> {
        auto own = device_profiles_in_mode(options.device_profiles, mode);
        if (!own) return own.err();
        Options o = options;
        o.device_profiles = std::move(*own);
        return plan(one, o, mode);
      },
      rate, report);
  if (out) out->recompute_choice = report;
  return out;
}

}  // namespace pipeworks
