// PipeDream-2BW's planner (see two_bw_planner.hpp for the model it scores with): the shared cost
// model of candidate_cost.hpp under 2BW's rules (two weight versions, a stash of p − s).
#include "partition/two_bw_planner.hpp"

#include <cmath>
#include <utility>

#include "partition/candidate_cost.hpp"
#include "partition/recompute_choice.hpp"

namespace pipeworks {
namespace {

cost_options to_cost(const two_bw_options& o, int zero = 0) {
  return {o.max_devices, o.use_simulator, o.simulate_top, o.max_simulated_actions,
          &o.device_profiles, zero};
}

// The best plan of one recompute mode at one ZeRO level.
result<two_bw_plan> search_at(const model_profile& profile, const cluster& c,
                              const two_bw_options& options, int zero) {
  auto ctx = make_cost_context(profile, c, to_cost(options, zero), two_bw_rules());
  if (!ctx) return ctx.err();
  auto r = search_configs(*ctx, 1, ctx->L, [](int p) { return std::vector<int>{p, 2 * p, 4 * p}; });
  if (!r) return r.err();
  r->recompute = profile.recompute;
  return std::move(*r);
}

}  // namespace

result<two_bw_plan> evaluate_two_bw(const model_profile& whole, const cluster& c, int p, int w,
                                    std::int64_t b, int m, const two_bw_options& options) {
  const model_profile profile = profile_in_mode(whole, whole.recompute);
  auto ctx = make_cost_context(profile, c, to_cost(options), two_bw_rules());
  if (!ctx) return ctx.err();
  auto r = evaluate_config(*ctx, p, w, b, m);
  if (!r) return r.err();
  r->recompute = profile.recompute;
  return std::move(*r);
}

result<two_bw_plan> plan_two_bw(const model_profile& profile, const cluster& c,
                                const two_bw_options& options) {
  if (profile_modes(profile).size() > 1)
    return choose_recompute_with<two_bw_plan>(
        profile, options,
        [&](const model_profile& one, const two_bw_options& o, recompute_mode) {
          return plan_two_bw(one, c, o);
        },
        [](const two_bw_plan& p) { return p.throughput_samples_per_s; });
  // ZeRO stage 1 shares each replicated stage's optimizer state out and pays a gather of the
  // weights per step: it is chosen only when it makes a faster plan fit (a tie keeps none).
  auto plain = search_at(profile, c, options, 0);
  if (c.device_count() < 2 || options.max_devices == 1) return plain;  // no replicas to share over
  auto sharded = search_at(profile, c, options, 1);
  if (sharded && sharded->zero > 0) {
    const bool faster = !plain || sharded->throughput_samples_per_s >
                                      plain->throughput_samples_per_s *
                                          (1 + 1e-9);
    if (faster) return sharded;
  }
  return plain;
}

}  // namespace pipeworks
