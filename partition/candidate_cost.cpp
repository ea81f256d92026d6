// The cost model shared by 2BW's planner and the baselines (see candidate_cost.hpp and
// two_bw_planner.hpp for the formulas).
#include "partition/candidate_cost.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include "partition/balanced_split.hpp"
#include "partition/plan_inputs.hpp"
#include "partition/zero_share.hpp"
#include "runtime/lower.hpp"
#include "runtime/simulate.hpp"

namespace pipeworks {
namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

struct link_figures {
  double ms_per_byte = 0;  // 0: free
  double latency_ms = 0;
};

link_figures figures(const cluster& c, int d, int e) {
  const int lv = c.level_between(d, e);
  if (lv < 0 || c.levels.empty()) return {};
  const cluster_level& l = c.levels[static_cast<std::size_t>(lv)];
  return {l.bandwidth_bytes_per_s > 0 ? 1000.0 / l.bandwidth_bytes_per_s : 0.0,
          l.latency_s * 1000.0};
}

std::int64_t scaled(std::int64_t bytes, std::int64_t b, std::int64_t mb) {
  // bytes · b / mb without overflow for the sizes check_profile_totals allows.
  return static_cast<std::int64_t>(std::llround(static_cast<long double>(bytes) * b / mb));
}

// Microbatches stashed at once at stage s of p, under the rules.
std::int64_t stashed(const schedule_rules& r, int s, int p, int m) {
  switch (r.stash) {
    case stash_rule::depth_minus_stage: return p - s;
    case stash_rule::microbatches: return m;
    case stash_rule::one: return 1;
  }
  return 1;
}

// The device of replica r's stage s, at devs[r·p + s]. Levels: r·p + s (a replica's stages are
// consecutive devices, inside a server when p fits). Device lists: ctx.orders[which] dealt in
// groups of w, group s to stage s, so that the replicas of a stage have similar devices.
std::vector<int> arrangement(const cost_context& ctx, int p, int w, int which) {
  std::vector<int> devs(static_cast<std::size_t>(p) * w);
  for (int r = 0; r < w; ++r)
    for (int s = 0; s < p; ++s)
      devs[static_cast<std::size_t>(r) * p + s] =
          ctx.orders.empty()
              ? r * p + s
              : ctx.orders[static_cast<std::size_t>(which)][static_cast<std::size_t>(s) * w + r];
  return devs;
}

// Device d's profile number (-1: the plan's own) and sums.
int profile_number(const cost_context& ctx, int d) {
  return ctx.profile_of.empty() ? -1 : ctx.profile_of[static_cast<std::size_t>(d)];
}
const std::vector<double>& time_sums(const cost_context& ctx, int k) {
  return k < 0 ? ctx.time_prefix : ctx.by_profile[static_cast<std::size_t>(k)].time_prefix;
}
const model_profile& profile_numbered(const cost_context& ctx, int k) {
  return k < 0 ? ctx.profile : *ctx.by_profile[static_cast<std::size_t>(k)].profile;
}

// Bytes a device of stage s (of p) needs for layers i..j − 1 at microbatch b, m per step, by
// profile k (-1: the plan's): weights, gradients and optimizer state, and the stash of the
// microbatches in flight under the profile's recompute mode (stash_bytes; full: the input of each
// in flight and one whole stash). Device profiles share the plan's mode (check_same_model).
// Under ZeRO (options.zero) with w > 1 replicas each holds 1/w of the optimizer state, but at
// least its largest tensor's: the runtime shares whole tensors out (a layer's largest, from the
// profile, or the whole layer's when the profile does not say).
std::int64_t stage_need(const cost_context& ctx, int s, int p, int i, int j, std::int64_t b, int m,
                        int w, int k = -1) {
  const profile_sums* o = k < 0 ? nullptr : &ctx.by_profile[static_cast<std::size_t>(k)];
  const std::vector<std::int64_t>& saved_prefix = o ? o->saved_prefix : ctx.saved_prefix;
  const std::vector<std::int64_t>& weight_prefix = o ? o->weight_prefix : ctx.weight_prefix;
  const std::vector<std::int64_t>& optimizer_prefix = o ? o->optimizer_prefix : ctx.optimizer_prefix;
  const std::int64_t saved = scaled(saved_prefix[j] - saved_prefix[i], b, ctx.profile.microbatch);
  const std::int64_t input = scaled(input_bytes(ctx.profile, i), b, ctx.profile.microbatch);
  std::int64_t shared_out = 0;  // the optimizer state other replicas hold
  if (ctx.options.zero > 0 && w > 1) {
    std::int64_t largest = 0;
    for (int l = i; l < j; ++l)
      largest = std::max(largest, largest_optimizer_tensor(ctx.profile.layers[static_cast<std::size_t>(l)]));
    shared_out = zero_shared_out(optimizer_prefix[j] - optimizer_prefix[i], largest, w);
  }
  return weight_prefix[j] - weight_prefix[i] - shared_out +
         stash_bytes(ctx.profile.recompute, stashed(ctx.rules, s, p, m), saved, input);
}

// One replica of a stage, as the split sees it.
struct replica_figures {
  double speed;
  int profile;         // -1: the plan's
  std::int64_t cap;    // memory, 0: unlimited
};

// With device profiles: the split balanced on the slowest replica of each stage (each by its own
// profile and speed); when it does not fit every replica's memory, the best that does, if any.
const std::vector<int>& choose_replica_split(cost_context& ctx,
                                             const std::vector<std::vector<replica_figures>>& reps,
                                             std::int64_t b, int m, int w) {
  const int p = static_cast<int>(reps.size());
  auto time = [&](int s, int i, int j) {
    double t = 0;
    for (const replica_figures& r : reps[s]) {
      const std::vector<double>& pre = time_sums(ctx, r.profile);
      t = std::max(t, (pre[j] - pre[i]) / r.speed);
    }
    return t;
  };
  auto fits = [&](int s, int i, int j) {
    for (const replica_figures& r : reps[s])
      if (r.cap > 0 && stage_need(ctx, s, p, i, j, b, m, w, r.profile) > r.cap) return false;
    return true;
  };
  std::vector<double> key;
  for (const auto& stage : reps) {
    key.push_back(-1);  // stage separator
    for (const replica_figures& r : stage) key.insert(key.end(), {r.speed, double(r.profile)});
  }
  auto it = ctx.replica_splits.find(key);
  if (it == ctx.replica_splits.end())
    it = ctx.replica_splits
             .emplace(key, balanced_split_by(ctx.L, p, time, [](int, int, int) { return true; }))
             .first;
  const std::vector<int>& first = it->second;
  bool ok = !first.empty();
  for (int s = 0; s < p && ok; ++s) ok = fits(s, first[s], s + 1 < p ? first[s + 1] : ctx.L);
  if (ok || first.empty()) return first;
  key.push_back(-2);  // memory, b and m
  for (const auto& stage : reps)
    for (const replica_figures& r : stage) key.push_back(static_cast<double>(r.cap));
  key.insert(key.end(), {static_cast<double>(b),
                         ctx.rules.stash == stash_rule::microbatches ? double(m) : 0.0,
                         ctx.options.zero > 0 ? double(w) : 0.0});
  auto f = ctx.replica_splits.find(key);
  if (f == ctx.replica_splits.end())
    f = ctx.replica_splits.emplace(key, balanced_split_by(ctx.L, p, time, fits)).first;
  return f->second.empty() ? first : f->second;
}

// The split balanced on time; when it does not fit the stages' memory (caps[s], 0: unlimited),
// the best balanced split that does, if any.
const std::vector<int>& choose_split(cost_context& ctx, const std::vector<double>& speed,
                                     const std::vector<std::int64_t>& caps, std::int64_t b, int m,
                                     int w) {
  const int p = static_cast<int>(speed.size());
  auto fits = [&](int s, int i, int j) {
    return caps[s] == 0 || stage_need(ctx, s, p, i, j, b, m, w) <= caps[s];
  };
  auto it = ctx.splits.find(speed);
  if (it == ctx.splits.end())
    it = ctx.splits.emplace(speed, balanced_split(ctx.time_prefix, speed)).first;
  const std::vector<int>& first = it->second;
  bool ok = true;
  for (int s = 0; s < p && ok; ++s) ok = fits(s, first[s], s + 1 < p ? first[s + 1] : ctx.L);
  if (ok) return first;
  // The stash depends on m only under stash_rule::microbatches; the need on w only under ZeRO.
  std::vector<std::int64_t> caps_w = caps;
  if (ctx.options.zero > 0) caps_w.push_back(-w);
  auto key = std::make_tuple(speed, caps_w, b, ctx.rules.stash == stash_rule::microbatches ? m : 0);
  auto f = ctx.fitted_splits.find(key);
  if (f == ctx.fitted_splits.end())
    f = ctx.fitted_splits.emplace(key, balanced_split(ctx.time_prefix, speed, fits)).first;
  return f->second.empty() ? first : f->second;
}

}  // namespace

schedule_rules two_bw_rules() {
  return {"2bw", schedule_kind::two_bw, 2, stash_rule::depth_minus_stage, false, 2, true};
}
schedule_rules gpipe_rules() {
  return {"gpipe", schedule_kind::gpipe, 1, stash_rule::microbatches, true, 1, false};
}
schedule_rules data_parallel_rules() {
  return {"data-parallel", schedule_kind::gpipe, 1, stash_rule::one, true, 1, false};
}

int arrangements(const cost_context& ctx) {
  return std::max(1, static_cast<int>(ctx.orders.size()));
}

cost_candidate build(cost_context& ctx, int p, int w, std::int64_t b, int m, int which) {
  const cluster& c = ctx.c;
  const model_profile& pr = ctx.profile;
  const double f = static_cast<double>(b) / static_cast<double>(pr.microbatch);
  cost_candidate out;
  scored_config& plan = out.plan;
  plan.p = p;
  plan.w = w;
  plan.b = b;
  plan.m = m;
  plan.zero = w > 1 ? ctx.options.zero : 0;
  const std::vector<int> devs = arrangement(ctx, p, w, which);
  auto dev = [&](int r, int s) { return devs[static_cast<std::size_t>(r) * p + s]; };

  // Per stage position: the slowest replica's speed and the smallest memory, for the split.
  std::vector<double> speed(p, inf);
  std::vector<std::int64_t> caps(p, 0);
  for (int s = 0; s < p; ++s)
    for (int r = 0; r < w; ++r) {
      speed[s] = std::min(speed[s], c.speed(dev(r, s)));
      const std::int64_t cap = c.memory(dev(r, s));
      if (cap > 0) caps[s] = caps[s] == 0 ? cap : std::min(caps[s], cap);
    }
  // With device profiles, each replica by its own profile and speed.
  const bool own = !ctx.by_profile.empty();
  std::vector<std::vector<replica_figures>> reps(own ? p : 0);
  if (own)
    for (int s = 0; s < p; ++s)
      for (int r = 0; r < w; ++r)
        reps[s].push_back(replica_figures{c.speed(dev(r, s)), profile_number(ctx, dev(r, s)),
                                          c.memory(dev(r, s))});
  const std::vector<int>& first =
      own ? choose_replica_split(ctx, reps, b, m, w) : choose_split(ctx, speed, caps, b, m, w);
  if (first.size() != static_cast<std::size_t>(p)) {  // no split: times past the largest double
    out.fits = false;
    out.excess = std::numeric_limits<std::int64_t>::max();
    return out;
  }

  plan.memory_bytes.assign(static_cast<std::size_t>(*std::max_element(devs.begin(), devs.end())) + 1,
                           0);
  double max_stage = 0, max_link = 0, max_reduce = 0;
  for (int s = 0; s < p; ++s) {
    planned_stage st;
    st.first_layer = first[s];
    st.last_layer = (s + 1 < p ? first[s + 1] : ctx.L) - 1;
    st.replicas = w;
    // The stage's slowest replica sets its time: without device profiles the slowest device,
    // with them the replica whose own profile and speed take longest.
    int slow_k = -1;
    double slow_speed = speed[s];
    if (own) {
      double worst = -1;
      for (const replica_figures& r : reps[s]) {
        const std::vector<double>& pre = time_sums(ctx, r.profile);
        const double t = (pre[st.last_layer + 1] - pre[st.first_layer]) / r.speed;
        if (t > worst) {
          worst = t;
          slow_k = r.profile;
          slow_speed = r.speed;
        }
      }
    }
    const model_profile& sp = profile_numbered(ctx, slow_k);
    std::int64_t params = 0, saved = 0;
    double fwd = 0, bwd = 0;
    for (int l = st.first_layer; l <= st.last_layer; ++l) {
      params += pr.layers[l].param_bytes;
      fwd += sp.layers[l].fwd_ms;
      bwd += sp.layers[l].bwd_ms;
      saved += sp.layers[l].saved_bytes;
    }
    fwd *= f;
    bwd *= f;
    const std::int64_t saved_b = scaled(saved, b, pr.microbatch);
    const std::int64_t act_b = scaled(pr.layers[st.last_layer].activation_bytes, b, pr.microbatch);
    st.time_ms = (fwd + bwd) / slow_speed;
    max_stage = std::max(max_stage, st.time_ms);

    // The ring over this stage's replicas: its slowest hop bounds it.
    double reduce_ms = 0;
    if (w > 1) {
      link_figures worst{};
      for (int r = 0; r < w; ++r) {
        const link_figures lf = figures(c, dev(r, s), dev((r + 1) % w, s));
        worst.ms_per_byte = std::max(worst.ms_per_byte, lf.ms_per_byte);
        worst.latency_ms = std::max(worst.latency_ms, lf.latency_ms);
      }
      reduce_ms = 2.0 * (w - 1) / w * static_cast<double>(params) * worst.ms_per_byte +
                  2.0 * (w - 1) * worst.latency_ms;
      // ZeRO: the updated weights are gathered too, each replica receiving (w - 1)/w of them.
      if (ctx.options.zero > 0)
        reduce_ms += zero_gather_ms(w, static_cast<double>(params), worst.ms_per_byte, worst.latency_ms);
    }
    max_reduce = std::max(max_reduce, reduce_ms);

    // The link to the next stage: the slowest over replicas.
    if (s + 1 < p) {
      link_figures worst{};
      for (int r = 0; r < w; ++r) {
        const link_figures lf = figures(c, dev(r, s), dev(r, s + 1));
        worst.ms_per_byte = std::max(worst.ms_per_byte, lf.ms_per_byte);
        worst.latency_ms = std::max(worst.latency_ms, lf.latency_ms);
        if (c.level_between(dev(r, s), dev(r, s + 1)) > 0) ++plan.inter_server_links;
      }
      max_link = std::max(max_link, 2.0 * static_cast<double>(act_b) * worst.ms_per_byte +
                                        2.0 * worst.latency_ms);
      out.links.push_back(device_link{
          s, s + 1,
          link_cost{worst.latency_ms, worst.ms_per_byte > 0 ? 1.0 / worst.ms_per_byte : inf}});
    }

    // Memory on every replica's device, by its own profile.
    std::int64_t min_memory = 0;  // 0: unlimited
    std::int64_t stage_need_max = 0;
    for (int r = 0; r < w; ++r) {
      const int d = dev(r, s);
      const std::int64_t need =
          stage_need(ctx, s, p, st.first_layer, st.last_layer + 1, b, m, w, profile_number(ctx, d));
      stage_need_max = std::max(stage_need_max, need);
      plan.memory_bytes[static_cast<std::size_t>(d)] = need;
      st.devices.push_back(d);
      const std::int64_t cap = c.memory(d);
      if (cap > 0) {
        min_memory = min_memory == 0 ? cap : std::min(min_memory, cap);
        if (need > cap && (out.fits || need - cap > out.excess)) {
          out.fits = false;
          out.excess = need - cap;
          out.worst_device = d;
          out.worst_need = need;
        }
      }
    }
    const int st_first = st.first_layer;
    st.memory_bytes = stage_need_max;
    plan.max_memory_bytes = std::max(plan.max_memory_bytes, stage_need_max);
    plan.stages.push_back(std::move(st));

    stage_cost sc;
    sc.forward = fwd;  // the simulator divides by the device's speed
    sc.backward = bwd;
    sc.weight_grad = 0;
    sc.step = 0;
    sc.reduce = reduce_ms;
    // The simulator stashes activation_bytes per microbatch in flight: under full recomputation
    // that is the stage's input, and the one whole stash a backward holds comes off its memory.
    const bool full = pr.recompute == recompute_mode::full;
    sc.activation_bytes =
        full ? scaled(input_bytes(pr, st_first), b, pr.microbatch) : saved_b;
    sc.boundary_bytes = act_b;
    sc.param_bytes = params;
    out.stage_costs.push_back(sc);
    // With device profiles memory was checked per device above, each by its own profile; the
    // simulator's one figure per stage could not say it.
    std::int64_t sim_memory = ctx.rules.simulator_checks_memory && !own ? min_memory : 0;
    if (full && sim_memory > 0) sim_memory = std::max<std::int64_t>(1, sim_memory - saved_b);
    out.devices.push_back(device_cost{slow_speed, sim_memory});
  }
  const int fill = ctx.rules.flush ? p - 1 : 0;
  plan.bottleneck_ms = std::max(max_stage, max_link);
  plan.analytic_step_ms = (m + fill) * plan.bottleneck_ms + max_reduce;
  plan.step_ms = plan.analytic_step_ms;
  plan.throughput_samples_per_s =
      plan.step_ms > 0 ? static_cast<double>(b) * m * w / plan.step_ms * 1000.0 : inf;
  return out;
}

status simulate_candidate(const cost_context& ctx, cost_candidate& k) {
  scored_config& plan = k.plan;
  const schedule_params params{plan.p, plan.m, 1, plan.w, ctx.rules.sim_steps};
  const footprint fp = estimate_footprint(ctx.rules.schedule, params, true, false);
  if (fp.actions > ctx.options.max_simulated_actions) return {};
  auto sched = make_schedule(ctx.rules.schedule, params);
  if (!sched)
    return make_error(std::string(schedule_name(ctx.rules.schedule)) + " schedule p=" +
                      std::to_string(plan.p) + ": " + sched.message());
  cost_model cm;
  cm.stages = k.stage_costs;
  cm.links = k.links;
  cm.link = link_cost{};
  cm.devices = k.devices;
  simulate_options so;
  so.record_timeline = false;
  auto sim = simulate(lower_communication(std::move(*sched)), cm, so);
  if (!sim) return make_error(sim.message());
  plan.step_ms = sim->makespan / params.steps;
  plan.simulated = true;
  plan.throughput_samples_per_s =
      plan.step_ms > 0 ? static_cast<double>(plan.b) * plan.m * plan.w / plan.step_ms * 1000.0
                       : inf;
  return {};
}

bool better(const scored_config& a, const scored_config& b) {
  const double ta = a.throughput_samples_per_s, tb = b.throughput_samples_per_s;
  if (std::abs(ta - tb) > 1e-9 * std::max(std::abs(ta), std::abs(tb))) return ta > tb;
  if (a.inter_server_links != b.inter_server_links)
    return a.inter_server_links < b.inter_server_links;
  if (a.p * a.w != b.p * b.w) return a.p * a.w < b.p * b.w;
  if (a.p != b.p) return a.p < b.p;
  if (a.b != b.b) return a.b > b.b;
  return a.m < b.m;
}

result<cost_context> make_cost_context(const model_profile& profile, const cluster& c,
                                       const cost_options& options, const schedule_rules& rules) {
  cost_context ctx{profile, c, options, rules, 0, 0, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  ctx.L = static_cast<int>(profile.layers.size());
  if (ctx.L == 0) return make_error("cannot plan a pipeline for a profile with no layers");
  if (profile.microbatch < 1) return make_error("the profile's microbatch must be at least 1");
  if (options.max_devices < 0 || options.simulate_top < 0)
    return make_error(rules.name + " options: max_devices and simulate_top must not be negative");
  if (status st = check_plan_inputs(profile, c); !st) return make_error(st.message());
  if (status st = check_profile_totals(profile); !st) return make_error(st.message());
  if (c.levels.empty() && c.devices.empty())
    return make_error("the cluster has neither levels nor devices");
  for (const cluster_level& lv : c.levels) {
    if (lv.count < 1) return make_error("cluster level " + lv.name + ": count must be at least 1");
  }
  ctx.n = c.device_count();
  if (options.max_devices > 0) ctx.n = std::min(ctx.n, options.max_devices);
  if (ctx.n < 1) return make_error("the cluster has no devices");
  ctx.time_prefix.assign(ctx.L + 1, 0.0);
  ctx.weight_prefix.assign(ctx.L + 1, 0);
  ctx.saved_prefix.assign(ctx.L + 1, 0);
  ctx.optimizer_prefix.assign(ctx.L + 1, 0);
  for (int l = 0; l < ctx.L; ++l) {
    const layer_profile& x = profile.layers[l];
    ctx.time_prefix[l + 1] = ctx.time_prefix[l] + x.fwd_ms + x.bwd_ms;
    // weight versions, gradients and optimizer state: ≤ 4 · 2^50 by check_profile_totals
    ctx.weight_prefix[l + 1] =
        ctx.weight_prefix[l] + (rules.weight_versions + 1) * x.param_bytes + x.optimizer_bytes;
    ctx.saved_prefix[l + 1] = ctx.saved_prefix[l] + x.saved_bytes;
    ctx.optimizer_prefix[l + 1] = ctx.optimizer_prefix[l] + x.optimizer_bytes;
  }
  // Devices that name a profile of their own (a GPU's, measured there): its sums.
  static const std::map<std::string, model_profile> none;
  const auto& own = options.device_profiles ? *options.device_profiles : none;
  if (status st = check_device_profiles(profile, c, own); !st) return make_error(st.message());
  if (std::any_of(c.devices.begin(), c.devices.end(),
                  [](const device_spec& d) { return !d.profile.empty(); })) {
    std::map<std::string, int> number;
    for (const device_spec& d : c.devices) {
      if (d.profile.empty()) {
        ctx.profile_of.push_back(-1);
        continue;
      }
      auto [it, fresh] = number.try_emplace(d.profile, static_cast<int>(ctx.by_profile.size()));
      if (fresh) {
        profile_sums sums{&own.at(d.profile), {0.0}, {0}, {0}, {0}};
        for (const layer_profile& x : sums.profile->layers) {
          sums.time_prefix.push_back(sums.time_prefix.back() + x.fwd_ms + x.bwd_ms);
          sums.weight_prefix.push_back(sums.weight_prefix.back() +
                                       (rules.weight_versions + 1) * x.param_bytes +
                                       x.optimizer_bytes);
          sums.saved_prefix.push_back(sums.saved_prefix.back() + x.saved_bytes);
          sums.optimizer_prefix.push_back(sums.optimizer_prefix.back() + x.optimizer_bytes);
        }
        ctx.by_profile.push_back(std::move(sums));
      }
      ctx.profile_of.push_back(it->second);
    }
  }
  for (int k : {1, 2, 4, 8, 16})  // profile.microbatch × {1/4, 1/2, 1, 2, 4} where integral
    if (profile.microbatch * k % 4 == 0) ctx.sizes.push_back(profile.microbatch * k / 4);
  if (!c.devices.empty()) {
    // Fastest first (then most memory), and most memory first (then fastest); 0 bytes: unlimited.
    // A device with a profile of its own is as fast as its speed times how much less time the
    // whole model takes by that profile than by the plan's.
    const auto mem = [&](int d) {
      return c.devices[d].memory_bytes == 0 ? std::numeric_limits<std::int64_t>::max()
                                            : c.devices[d].memory_bytes;
    };
    std::vector<double> speed(c.devices.size());
    for (std::size_t d = 0; d < speed.size(); ++d) {
      const int k = profile_number(ctx, static_cast<int>(d));
      const double total = time_sums(ctx, k).back();
      speed[d] = c.devices[d].speed;
      if (k >= 0 && total > 0) speed[d] *= ctx.time_prefix.back() / total;
    }
    std::vector<int> by_speed(c.devices.size());
    for (std::size_t d = 0; d < by_speed.size(); ++d) by_speed[d] = static_cast<int>(d);
    std::vector<int> by_memory = by_speed;
    std::stable_sort(by_speed.begin(), by_speed.end(), [&](int a, int b) {
      return speed[a] != speed[b] ? speed[a] > speed[b] : mem(a) > mem(b);
    });
    std::stable_sort(by_memory.begin(), by_memory.end(), [&](int a, int b) {
      return mem(a) != mem(b) ? mem(a) > mem(b) : speed[a] > speed[b];
    });
    ctx.orders.push_back(by_speed);
    if (by_memory != by_speed) ctx.orders.push_back(by_memory);
  }
  return ctx;
}

std::string describe(const cost_context& ctx, const cost_candidate& k) {
  const scored_config& p = k.plan;
  return "(p=" + std::to_string(p.p) + ", w=" + std::to_string(p.w) + ", b=" +
         std::to_string(p.b) + ", m=" + std::to_string(p.m) + ") needs " +
         std::to_string(k.worst_need) + " bytes on " + device_label(ctx.c, k.worst_device) + ", " +
         std::to_string(k.excess) + " bytes more than its memory of " +
         std::to_string(k.worst_need - k.excess) + " bytes";
}

std::string memory_advice() {
  return "; give more devices or devices with more memory, profile at a smaller microbatch, "
         "or profile with activation recomputation (pipeworks profile --recompute full or "
         "selective)";
}

result<scored_config> evaluate_config(cost_context& ctx, int p, int w, std::int64_t b, int m) {
  const int m_min = ctx.rules.stash == stash_rule::depth_minus_stage ? p : 1;
  if (p < 1 || w < 1 || b < 1 || m < m_min || p > ctx.L ||
      static_cast<std::int64_t>(p) * w > ctx.n)
    return make_error("invalid " + ctx.rules.name + " configuration p=" + std::to_string(p) +
                      " w=" + std::to_string(w) + " b=" + std::to_string(b) +
                      " m=" + std::to_string(m) + ": need 1 <= p <= layers, " +
                      (m_min == 1 ? "m >= 1" : "m >= p") + ", b >= 1, p·w <= devices");
  // The best fitting arrangement of the devices (by the analytic score), or the least excess.
  cost_candidate k = build(ctx, p, w, b, m, 0);
  for (int which = 1; which < arrangements(ctx); ++which) {
    cost_candidate alt = build(ctx, p, w, b, m, which);
    if (alt.fits ? !k.fits || better(alt.plan, k.plan) : !k.fits && alt.excess < k.excess)
      k = std::move(alt);
  }
  if (!k.fits)
    return make_error("the " + ctx.rules.name + " plan " + describe(ctx, k) +
                      memory_advice());
  if (ctx.options.use_simulator)
    if (status st = simulate_candidate(ctx, k); !st) return make_error(st.message());
  return std::move(k.plan);
}

double search_size(const cost_context& ctx, int p_min, int top_p,
                   const std::function<std::size_t(int)>& ms_count) {
  double total = 0;
  for (int p = p_min; p <= top_p; ++p) {
    const double ws = ctx.n / p;  // w = 1..ws: the sum of p·w is p·ws·(ws+1)/2
    total += p * ws * (ws + 1) / 2 * static_cast<double>(ctx.sizes.size()) *
             static_cast<double>(ms_count(p)) * arrangements(ctx);
  }
  return total;
}

status check_search_size(const cost_context& ctx, int p_min, int top_p,
                         const std::function<std::size_t(int)>& ms_count) {
  const double size = search_size(ctx, p_min, top_p, ms_count);
  if (size <= max_search_placements) return {};
  // The size grows about as the square of the devices: the largest count under the bound.
  const int fits = std::max(1, static_cast<int>(ctx.n * std::sqrt(max_search_placements / size)));
  char figure[32];
  std::snprintf(figure, sizeof figure, "%.3g", size);
  return make_error("the " + ctx.rules.name + " search over " + std::to_string(ctx.n) +
                    " devices would score about " + figure + " device placements (" +
                    std::to_string(ctx.L) + " layers), more than 2^27: it would take minutes "
                    "and gigabytes; plan for fewer devices (plan --devices " +
                    std::to_string(fits) + " or fewer)");
}

void keep_best(std::vector<cost_candidate>& fitting, std::size_t keep) {
  if (fitting.size() < 2 * keep + 2) return;
  const auto by = [](const cost_candidate& a, const cost_candidate& b) {
    return better(a.plan, b.plan);
  };
  std::nth_element(fitting.begin(), fitting.begin() + static_cast<std::ptrdiff_t>(keep),
                   fitting.end(), by);
  fitting.resize(keep);
}

result<scored_config> pick_best(const cost_context& ctx, std::vector<cost_candidate>& fitting,
                                const cost_candidate* smallest) {
  const std::string& what = ctx.rules.name;
  if (fitting.empty()) {
    if (!smallest) return make_error("no " + what + " candidate to plan");
    return make_error("no " + what + " plan fits in memory: the smallest candidate " +
                      describe(ctx, *smallest) + memory_advice());
  }
  std::sort(fitting.begin(), fitting.end(),
            [](const cost_candidate& a, const cost_candidate& b) { return better(a.plan, b.plan); });
  if (!ctx.options.use_simulator || ctx.options.simulate_top == 0)
    return std::move(fitting.front().plan);
  const std::size_t top =
      std::min(fitting.size(), static_cast<std::size_t>(ctx.options.simulate_top));
  const scored_config* best = nullptr;
  for (std::size_t i = 0; i < top; ++i) {
    status st = simulate_candidate(ctx, fitting[i]);
    if (!st)
      return make_error("simulating the " + what + " plan (p=" + std::to_string(fitting[i].plan.p) +
                        ", w=" + std::to_string(fitting[i].plan.w) + ", b=" +
                        std::to_string(fitting[i].plan.b) + ", m=" +
                        std::to_string(fitting[i].plan.m) + "): " + st.message() +
                        "; plan with use_simulator off to keep the analytic score");
    if (!best || better(fitting[i].plan, *best)) best = &fitting[i].plan;
  }
  return *best;
}

}  // namespace pipeworks
