// GPipe, model-parallel and data-parallel baselines (see baselines.hpp): the shared cost model of
// candidate_cost.hpp under each one's rules (one weight version; a stash of m, or of 1).
#include "partition/baselines.hpp"

#include <string>
#include <utility>
#include <vector>

#include "partition/candidate_cost.hpp"
#include "partition/recompute_choice.hpp"

namespace pipeworks {
namespace {

cost_options to_cost(const baseline_options& o) {
  return {o.max_devices, o.use_simulator, o.simulate_top, o.max_simulated_actions,
          &o.device_profiles};
}

schedule_rules model_parallel_rules() {
  schedule_rules r = gpipe_rules();
  r.name = "model-parallel";
  return r;
}

baseline_plan to_plan(const std::string& kind, scored_config&& x) {
  baseline_plan plan;
  static_cast<two_bw_plan&>(plan) = std::move(x);
  plan.kind = kind;
  return plan;
}

result<baseline_plan> finish(const std::string& kind, result<scored_config> r) {
  if (!r) return r.err();
  return to_plan(kind, std::move(*r));
}

// plan(profile, options) in each of a profile's modes when it carries several (choose_recompute,
// by throughput); as it is otherwise.
template <class Plan>
result<baseline_plan> in_best_mode(const model_profile& profile, const baseline_options& options,
                                   Plan plan) {
  if (profile_modes(profile).size() < 2) {
    auto r = plan(profile, options);
    if (r) r->recompute = profile.recompute;
    return r;
  }
  return choose_recompute_with<baseline_plan>(
      profile, options,
      [&](const model_profile& one, const baseline_options& o, recompute_mode mode) {
        auto r = plan(one, o);
        if (r) r->recompute = mode;
        return r;
      },
      [](const baseline_plan& p) { return p.throughput_samples_per_s; });
}

}  // namespace

result<baseline_plan> plan_gpipe(const model_profile& whole, const cluster& c,
                                 const baseline_options& all) {
  return in_best_mode(whole, all, [&](const model_profile& profile,
                                      const baseline_options& options) -> result<baseline_plan> {
    auto ctx = make_cost_context(profile, c, to_cost(options), gpipe_rules());
    if (!ctx) return ctx.err();
    return finish("gpipe", search_configs(*ctx, 1, ctx->L, [](int p) {
                    return std::vector<int>{p, 2 * p, 4 * p};
                  }));
  });
}

result<baseline_plan> plan_model_parallel(const model_profile& whole, const cluster& c,
                                          const baseline_options& all) {
  return in_best_mode(whole, all, [&](const model_profile& profile,
                                      const baseline_options& options) -> result<baseline_plan> {
    auto ctx = make_cost_context(profile, c, to_cost(options), model_parallel_rules());
    if (!ctx) return ctx.err();
    if (ctx->L < 2 || ctx->n < 2)
      return make_error(
          "model parallelism needs at least 2 layers and 2 devices; give a profile with more "
          "layers or a cluster with more devices, or plan data parallelism");
    return finish("model-parallel",
                  search_configs(*ctx, 2, ctx->L, [](int) { return std::vector<int>{1}; }));
  });
}

result<baseline_plan> plan_data_parallel(const model_profile& whole, const cluster& c,
                                         const baseline_options& all) {
  return in_best_mode(whole, all, [&](const model_profile& profile,
                                      const baseline_options& options) -> result<baseline_plan> {
    auto ctx = make_cost_context(profile, c, to_cost(options), data_parallel_rules());
    if (!ctx) return ctx.err();
    auto r = search_configs(*ctx, 1, 1, [](int) { return std::vector<int>{1, 2, 4, 8}; });
    if (r) return to_plan("data-parallel", std::move(*r));
    // Nothing fits: say what the whole model needs at the smallest microbatch.
    const cost_candidate k = build(*ctx, 1, 1, ctx->sizes.front(), 1, 0);
    if (k.fits) return r.err();  // not a memory problem
    return make_error("data parallelism does not fit: the whole model at b=" +
                      std::to_string(k.plan.b) + " needs " + std::to_string(k.worst_need) +
                      " bytes per device, " + std::to_string(k.excess) + " bytes more than the " +
                      std::to_string(k.worst_need - k.excess) + " bytes of " +
                      device_label(c, k.worst_device) +
                      "; split the model over devices (plan GPipe or 2BW) or give devices with "
                      "more memory");
  });
}

result<baseline_plan> evaluate_gpipe(const model_profile& whole, const cluster& c, int p, int w,
                                     std::int64_t b, int m, const baseline_options& options) {
  const model_profile profile = profile_in_mode(whole, whole.recompute);
  auto ctx = make_cost_context(profile, c, to_cost(options), gpipe_rules());
  if (!ctx) return ctx.err();
  return finish("gpipe", evaluate_config(*ctx, p, w, b, m));
}

}  // namespace pipeworks
