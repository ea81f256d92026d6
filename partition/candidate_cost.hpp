// The cost model PipeDream-2BW's planner and its baselines (GPipe, model and data parallelism)
// share: device placement, the time-balanced (and memory-aware) split, memory, links, ring
// all-reduce, the analytic and simulated step time, and the search over (p, w, b, m).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "base/result.hpp"
#include "partition/cluster.hpp"
#include "partition/pipedream_planner.hpp"  // planned_stage
#include "partition/plan_progress.hpp"
#include "partition/profile.hpp"
#include "partition/two_bw_planner.hpp"
#include "runtime/cost_model.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks {

// How many microbatches' saved bytes a stage holds at once.
enum class stash_rule {
  depth_minus_stage,  // p − s: 2BW's 1F1B (stage 0 holds p microbatches in flight)
  microbatches,       // m: GPipe stashes every microbatch of the step before the first backward
  one,                // 1: one microbatch at a time (model parallelism, data parallelism)
};

// What differs between the approaches; everything else is shared.
struct schedule_rules {
  std::string name;                              // "2bw", "gpipe", ..: for messages
  schedule_kind schedule = schedule_kind::gpipe;  // the simulator's schedule
  int weight_versions = 1;                       // 2BW: 2; GPipe and the others: 1
  stash_rule stash = stash_rule::microbatches;
  // Memory per device at stage s: weight_versions·Σparam + Σparam (gradients) + Σoptimizer
  //                               + stash·Σsaved(b)
  // (with a profile measured under full recomputation: + stash·input(b) + Σsaved(b), input the
  // bytes of the stage's first layer's input; stash_bytes in profile.hpp)
  // Analytic step: (m + fill) · max(max_s stage_s, max_s link_s) + max_s allreduce_s, with
  // fill = 0 for a pipeline without flush (2BW's steady state) and p − 1 with a flush (GPipe).
  bool flush = true;
  // The simulated step is the makespan of sim_steps steps divided by sim_steps (2BW: 2, so the
  // second step overlaps the first's drain; GPipe: 1, the flush makes every step alike).
  int sim_steps = 1;
  // The simulator checks each device's memory too (2BW); otherwise only this estimate does.
  bool simulator_checks_memory = false;
};

schedule_rules two_bw_rules();  // 2BW: 2 versions, stash p − s, no flush, 2 simulated steps
schedule_rules gpipe_rules();   // GPipe: 1 version, stash m, flush (model parallelism: m = 1)
schedule_rules data_parallel_rules();  // p = 1: 1 version, stash 1, m accumulated microbatches

struct cost_options {
  int max_devices = 0;  // 0: all of the cluster's
  bool use_simulator = true;
  int simulate_top = 8;  // how many of the best analytic candidates the simulator re-scores
  std::int64_t max_simulated_actions = std::int64_t{1} << 21;
  // Profiles of the model measured on other kinds of device, by the name a device's `profile`
  // gives (two_bw_options::device_profiles); must outlive the context.
  const std::map<std::string, model_profile>* device_profiles = nullptr;
  // The ZeRO level candidates are planned with (run_plan::zero): above 0, each replica of a stage
  // with w > 1 replicas holds 1/w of its optimizer state (rounded up, and at least its largest
  // layer's), and its STEP gathers the updated weights over the replicas' ring after the
  // all-reduce.
  int zero = 0;
};

// Prefix sums over the layers of one profile, as the cost model reads them.
struct profile_sums {
  const model_profile* profile = nullptr;
  std::vector<double> time_prefix;          // Σ(fwd+bwd) at the profile's microbatch
  std::vector<std::int64_t> weight_prefix;  // Σ((weight_versions + 1)·param + optimizer)
  std::vector<std::int64_t> saved_prefix;   // Σsaved at the profile's microbatch
  std::vector<std::int64_t> optimizer_prefix;  // Σoptimizer (what ZeRO shares out)
};

// One scored configuration (the 2BW planner's plan type; the baselines add their kind).
// stages[s].devices[r]: the device replica r runs stage s on.
using scored_config = two_bw_plan;

// A fully evaluated candidate (analytic score), or the memory excess when it does not fit.
struct cost_candidate {
  scored_config plan;
  bool fits = true;
  std::int64_t excess = 0;  // the largest need − memory over devices when it does not fit
  int worst_device = 0;
  std::int64_t worst_need = 0;
  std::vector<stage_cost> stage_costs;  // for the simulator's cost model
  std::vector<device_link> links;
  std::vector<device_cost> devices;
};

// The inputs checked, prefix sums, the orders devices are dealt in, and cached splits.
struct cost_context {
  const model_profile& profile;
  const cluster& c;
  cost_options options;
  schedule_rules rules;
  int L = 0;
  int n = 0;  // devices usable
  std::vector<double> time_prefix;          // Σ(fwd+bwd) at the profile's microbatch
  std::vector<std::int64_t> weight_prefix;  // Σ((weight_versions + 1)·param + optimizer)
  std::vector<std::int64_t> saved_prefix;   // Σsaved at the profile's microbatch
  std::vector<std::int64_t> optimizer_prefix;  // Σoptimizer (what ZeRO shares out)
  // Devices that name a profile of their own: by_profile[k] its sums, profile_of[d] device d's k
  // (-1: the plan's profile, the sums above). Both empty when no device names one.
  std::vector<profile_sums> by_profile;
  std::vector<int> profile_of;
  std::vector<std::int64_t> sizes;          // candidate microbatch sizes
  // Device lists: the orders devices are dealt to stages in (see arrangement); empty for levels.
  std::vector<std::vector<int>> orders;
  std::map<std::vector<double>, std::vector<int>> splits;  // by per-stage speeds
  std::map<std::tuple<std::vector<double>, std::vector<std::int64_t>, std::int64_t, int>,
           std::vector<int>>
      fitted_splits;  // memory-aware splits by speeds, memory, b and m
  // With device profiles: splits by each stage's replicas (speed, profile; memory, b, m when it
  // binds).
  std::map<std::vector<double>, std::vector<int>> replica_splits;
};

// Checks the profile (check_profile_totals included), the cluster and the options.
result<cost_context> make_cost_context(const model_profile& profile, const cluster& c,
                                       const cost_options& options, const schedule_rules& rules);

// The number of arrangements of the devices build() can try (1 on levels, 1 or 2 on lists).
int arrangements(const cost_context& ctx);

// One configuration on arrangement `which`, scored analytically.
cost_candidate build(cost_context& ctx, int p, int w, std::int64_t b, int m, int which = 0);

// Re-scores a fitting candidate with the simulator; keeps the analytic score when the simulation
// would be too large. An error if the simulator reports one.
status simulate_candidate(const cost_context& ctx, cost_candidate& k);

// Strictly better: higher throughput (within 1e-9 relative), then fewer inter-server links,
// fewer devices, fewer stages, larger b, smaller m.
bool better(const scored_config& a, const scored_config& b);

// "(p=.., w=.., b=.., m=..) needs N bytes on <device>, E bytes more than its memory of M bytes".
std::string describe(const cost_context& ctx, const cost_candidate& k);

// What to try when nothing fits (the same advice for every approach).
std::string memory_advice();

// One configuration, on the best fitting arrangement; simulated when the options ask.
result<scored_config> evaluate_config(cost_context& ctx, int p, int w, std::int64_t b, int m);

// Every p in p_min..min(p_max, layers, devices), w with p·w <= devices, b in ctx.sizes, m in
// ms(p), every arrangement; the best by analytic throughput, then the best of the
// simulate_top best simulated. An error when nothing fits, with the smallest excess.
template <class Ms>
result<scored_config> search_configs(cost_context& ctx, int p_min, int p_max, Ms ms);
result<scored_config> pick_best(const cost_context& ctx, std::vector<cost_candidate>& fitting,
                                const cost_candidate* smallest);

// The device placements a search would score: sum over its (p, w, b, m, arrangement) of p·w.
double search_size(const cost_context& ctx, int p_min, int top_p,
                   const std::function<std::size_t(int)>& ms_count);
// An error when search_size passes max_search_placements, naming the size and the largest
// max_devices under it; the search would take minutes and gigabytes.
inline constexpr double max_search_placements = double(1 << 27);
status check_search_size(const cost_context& ctx, int p_min, int top_p,
                         const std::function<std::size_t(int)>& ms_count);
// Keeps the `keep` best candidates (by `better`) once `fitting` holds twice as many.
void keep_best(std::vector<cost_candidate>& fitting, std::size_t keep);

template <class Ms>
result<scored_config> search_configs(cost_context& ctx, int p_min, int p_max, Ms ms) {
  std::vector<cost_candidate> fitting;
  cost_candidate smallest;
  bool any = false;
  const int top_p = std::min(p_max, std::min(ctx.L, ctx.n));
  if (status st = check_search_size(ctx, p_min, top_p, [&](int p) { return ms(p).size(); }); !st)
    return make_error(st.message());
  // Only the candidates pick_best may look at are kept: the best, or the simulate_top best.
  const std::size_t keep =
      ctx.options.use_simulator ? std::max<std::size_t>(1, ctx.options.simulate_top) : 1;
  // Progress by depth p: the later depths hold fewer widths, so p is a fair clock.
  for (int p = p_min; p <= top_p; ++p) {
    report_plan_progress("depths searched", p - p_min, top_p - p_min + 1);
    for (int w = 1; p * w <= ctx.n; ++w)
      for (std::int64_t b : ctx.sizes)
        for (int m : ms(p))
          for (int which = 0; which < arrangements(ctx); ++which) {
            cost_candidate k = build(ctx, p, w, b, m, which);
            if (k.fits) {
              fitting.push_back(std::move(k));
              keep_best(fitting, keep);
            } else if (!any || k.excess < smallest.excess) {
              smallest = std::move(k);
              any = true;
            }
          }
  }
  report_plan_progress("depths searched", top_p - p_min + 1, top_p - p_min + 1);
  return pick_best(ctx, fitting, any ? &smallest : nullptr);
}

}  // namespace pipeworks
