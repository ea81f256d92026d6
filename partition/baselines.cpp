// GPipe, model-parallel and data-parallel baselines (see baselines.hpp for the model they use).
#include "partition/baselines.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cost_model.hpp"
#include "runtime/lower.hpp"
#include "runtime/schedule.hpp"
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
  return {l.bandwidth_bytes_per_s > 0 ? 1000.0 / l.bandwidth_bytes_per_s : 0.0, l.latency_s * 1000.0};
}

// First layer of each of p contiguous stages minimising max_s (prefix[j] − prefix[i]) / speed[s]:
//   best[s][j] = min over i < j of max(best[s−1][i], (prefix[j] − prefix[i]) / speed[s−1]).
std::vector<int> balanced_split(const std::vector<double>& prefix, const std::vector<double>& speed) {
  const int L = static_cast<int>(prefix.size()) - 1;
  const int p = static_cast<int>(speed.size());
  std::vector<std::vector<double>> best(p + 1, std::vector<double>(L + 1, inf));
  std::vector<std::vector<int>> cut(p + 1, std::vector<int>(L + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= p; ++s)
    for (int j = s; j <= L - (p - s); ++j)
      for (int i = s - 1; i < j; ++i) {
        if (best[s - 1][i] == inf) continue;
        const double v = std::max(best[s - 1][i], (prefix[j] - prefix[i]) / speed[s - 1]);
        if (v < best[s][j]) {
          best[s][j] = v;
          cut[s][j] = i;
        }
      }
  std::vector<int> first(p);
  for (int s = p, j = L; s >= 1; --s) {
    first[s - 1] = cut[s][j];
    j = cut[s][j];
  }
  return first;
}

std::int64_t scaled(std::int64_t bytes, std::int64_t b, std::int64_t mb) {
  return static_cast<std::int64_t>(std::llround(static_cast<long double>(bytes) * b / mb));
}

struct context {
  const model_profile& profile;
  const cluster& c;
  const baseline_options& options;
  int L = 0;
  int n = 0;
  std::vector<double> time_prefix;
  std::vector<std::int64_t> sizes;  // candidate microbatch sizes
  std::map<std::vector<double>, std::vector<int>> splits;  // by per-stage speeds
};

struct candidate {
  baseline_plan plan;
  bool fits = true;
  std::int64_t excess = 0;
  int worst_device = 0;
  std::int64_t worst_need = 0;
  std::vector<stage_cost> stage_costs;
  std::vector<device_link> links;
  std::vector<device_cost> devices;
};

// One configuration; `stashed` microbatches' saved bytes are held at once on every stage.
candidate build(context& ctx, const std::string& kind, int p, int w, std::int64_t b, int m,
                int stashed) {
  const cluster& c = ctx.c;
  const model_profile& pr = ctx.profile;
  const double f = static_cast<double>(b) / static_cast<double>(pr.microbatch);
  candidate out;
  baseline_plan& plan = out.plan;
  plan.kind = kind;
  plan.p = p;
  plan.w = w;
  plan.b = b;
  plan.m = m;
  auto dev = [&](int r, int s) { return r * p + s; };

  std::vector<double> speed(p, inf);
  for (int s = 0; s < p; ++s)
    for (int r = 0; r < w; ++r) speed[s] = std::min(speed[s], c.speed(dev(r, s)));
  auto it = ctx.splits.find(speed);
  if (it == ctx.splits.end()) it = ctx.splits.emplace(speed, balanced_split(ctx.time_prefix, speed)).first;
  const std::vector<int>& first = it->second;

  double max_stage = 0, max_link = 0, max_reduce = 0;
  for (int s = 0; s < p; ++s) {
    planned_stage st;
    st.first_layer = first[s];
    st.last_layer = (s + 1 < p ? first[s + 1] : ctx.L) - 1;
    st.replicas = w;
    std::int64_t params = 0, opt = 0, saved = 0;
    double fwd = 0, bwd = 0;
    for (int l = st.first_layer; l <= st.last_layer; ++l) {
      const layer_profile& x = pr.layers[l];
      params += x.param_bytes;
      opt += x.optimizer_bytes;
      saved += x.saved_bytes;
      fwd += x.fwd_ms;
      bwd += x.bwd_ms;
    }
    fwd *= f;
    bwd *= f;
    const std::int64_t saved_b = scaled(saved, b, pr.microbatch);
    const std::int64_t act_b = scaled(pr.layers[st.last_layer].activation_bytes, b, pr.microbatch);
    const std::int64_t need = 2 * params + opt + static_cast<std::int64_t>(stashed) * saved_b;
    st.time_ms = (fwd + bwd) / speed[s];
    max_stage = std::max(max_stage, st.time_ms);

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
    }
    max_reduce = std::max(max_reduce, reduce_ms);

    if (s + 1 < p) {
      link_figures worst{};
      for (int r = 0; r < w; ++r) {
        const link_figures lf = figures(c, dev(r, s), dev(r, s + 1));
        worst.ms_per_byte = std::max(worst.ms_per_byte, lf.ms_per_byte);
        worst.latency_ms = std::max(worst.latency_ms, lf.latency_ms);
      }
      max_link = std::max(max_link, 2.0 * static_cast<double>(act_b) * worst.ms_per_byte + 2.0 * worst.latency_ms);
      out.links.push_back(device_link{s, s + 1, link_cost{worst.latency_ms,
                                                          worst.ms_per_byte > 0 ? 1.0 / worst.ms_per_byte : inf}});
    }

    for (int r = 0; r < w; ++r) {
      const int d = dev(r, s);
      st.devices.push_back(d);
      const std::int64_t cap = c.memory(d);
      if (cap > 0 && need > cap && (out.fits || need - cap > out.excess)) {
        out.fits = false;
        out.excess = need - cap;
        out.worst_device = d;
        out.worst_need = need;
      }
    }
    st.memory_bytes = need;
    plan.max_memory_bytes = std::max(plan.max_memory_bytes, need);
    plan.stages.push_back(std::move(st));

    stage_cost sc;
    sc.forward = fwd;
    sc.backward = bwd;
    sc.weight_grad = 0;
    sc.step = 0;
    sc.reduce = reduce_ms;
    sc.activation_bytes = saved_b;
    sc.boundary_bytes = act_b;
    sc.param_bytes = params;
    out.stage_costs.push_back(sc);
    out.devices.push_back(device_cost{speed[s], 0});  // memory is checked here, not by the simulator
  }
  plan.analytic_step_ms = (m + p - 1) * std::max(max_stage, max_link) + max_reduce;
  plan.step_ms = plan.analytic_step_ms;
  plan.throughput_samples_per_s =
      plan.step_ms > 0 ? static_cast<double>(b) * m * w / plan.step_ms * 1000.0 : inf;
  return out;
}

// Re-scores a candidate with the simulator running GPipe for one step (keeps the analytic score
// when the simulation would be too large).
status simulate_candidate(const context& ctx, candidate& k) {
  baseline_plan& plan = k.plan;
  const schedule_params params{plan.p, plan.m, 1, plan.w, 1};
  const footprint fp = estimate_footprint(schedule_kind::gpipe, params, true, false);
  if (fp.actions > ctx.options.max_simulated_actions) return {};
  auto sched = make_schedule(schedule_kind::gpipe, params);
  if (!sched) return make_error("gpipe schedule p=" + std::to_string(plan.p) + ": " + sched.message());
  cost_model cm;
  cm.stages = k.stage_costs;
  cm.links = k.links;
  cm.link = link_cost{};
  cm.devices = k.devices;
  simulate_options so;
  so.record_timeline = false;
  auto sim = simulate(lower_communication(std::move(*sched)), cm, so);
  if (!sim) return make_error(sim.message());
  plan.step_ms = sim->makespan;
  plan.simulated = true;
  plan.throughput_samples_per_s =
      plan.step_ms > 0 ? static_cast<double>(plan.b) * plan.m * plan.w / plan.step_ms * 1000.0 : inf;
  return {};
}

bool better(const baseline_plan& a, const baseline_plan& b) {
  const double ta = a.throughput_samples_per_s, tb = b.throughput_samples_per_s;
  if (std::abs(ta - tb) > 1e-9 * std::max(std::abs(ta), std::abs(tb))) return ta > tb;
  if (a.p * a.w != b.p * b.w) return a.p * a.w < b.p * b.w;
  if (a.p != b.p) return a.p < b.p;
  if (a.b != b.b) return a.b > b.b;
  return a.m < b.m;
}

result<context> make_context(const model_profile& profile, const cluster& c, const baseline_options& options) {
  context ctx{profile, c, options, 0, 0, {}, {}, {}};
  ctx.L = static_cast<int>(profile.layers.size());
  if (ctx.L == 0) return make_error("cannot plan a baseline for a profile with no layers");
  if (profile.microbatch < 1) return make_error("the profile's microbatch must be at least 1");
  if (options.max_devices < 0 || options.simulate_top < 0)
    return make_error("baseline options: max_devices and simulate_top must not be negative");
  for (int l = 0; l < ctx.L; ++l) {
    const layer_profile& x = profile.layers[l];
    if (!(x.fwd_ms >= 0) || !(x.bwd_ms >= 0) || !std::isfinite(x.fwd_ms) || !std::isfinite(x.bwd_ms) ||
        x.activation_bytes < 0 || x.saved_bytes < 0 || x.param_bytes < 0 || x.optimizer_bytes < 0)
      return make_error("layer " + std::to_string(l) + " (" + x.name +
                        "): times and byte counts must be finite and not negative");
  }
  for (const cluster_level& lv : c.levels)
    if (lv.count < 1 || !(lv.bandwidth_bytes_per_s > 0))
      return make_error("cluster level " + lv.name + ": count must be at least 1 and bandwidth positive");
  for (const device_spec& d : c.devices)
    if (!(d.speed > 0)) return make_error("device " + d.name + ": speed must be positive");
  ctx.n = c.device_count();
  if (options.max_devices > 0) ctx.n = std::min(ctx.n, options.max_devices);
  if (ctx.n < 1) return make_error("the cluster has no devices");
  ctx.time_prefix.assign(ctx.L + 1, 0.0);
  for (int l = 0; l < ctx.L; ++l)
    ctx.time_prefix[l + 1] = ctx.time_prefix[l] + profile.layers[l].fwd_ms + profile.layers[l].bwd_ms;
  for (int k : {1, 2, 4, 8, 16})
    if (profile.microbatch * k % 4 == 0) ctx.sizes.push_back(profile.microbatch * k / 4);
  return ctx;
}

std::string describe(const candidate& k) {
  const baseline_plan& p = k.plan;
  return "(p=" + std::to_string(p.p) + ", w=" + std::to_string(p.w) + ", b=" + std::to_string(p.b) +
         ", m=" + std::to_string(p.m) + ") needs " + std::to_string(k.worst_need) + " bytes on device " +
         std::to_string(k.worst_device) + ", " + std::to_string(k.excess) + " bytes more than its memory";
}

// The best of the fitting candidates; simulates the best simulate_top when asked.
result<baseline_plan> pick(const context& ctx, std::vector<candidate>& fitting, const candidate* smallest,
                           const std::string& what) {
  if (fitting.empty()) {
    if (!smallest) return make_error("no " + what + " candidate to plan");
    return make_error("no " + what + " configuration fits in memory: the smallest " + describe(*smallest));
  }
  std::sort(fitting.begin(), fitting.end(), [](const candidate& a, const candidate& b) { return better(a.plan, b.plan); });
  if (!ctx.options.use_simulator || ctx.options.simulate_top == 0) return std::move(fitting.front().plan);
  const std::size_t top = std::min(fitting.size(), static_cast<std::size_t>(ctx.options.simulate_top));
  const baseline_plan* best = nullptr;
  for (std::size_t i = 0; i < top; ++i) {
    status st = simulate_candidate(ctx, fitting[i]);
    if (!st) return make_error("simulating the " + what + " plan " + describe(fitting[i]) + ": " + st.message());
    if (!best || better(fitting[i].plan, *best)) best = &fitting[i].plan;
  }
  return *best;
}

// Enumerates p in [p_min, p_max], w, the sizes and m from `ms(p)`; `stash(m)` microbatches held.
template <class Ms, class Stash>
result<baseline_plan> search(context& ctx, const std::string& kind, int p_min, int p_max, Ms ms, Stash stash) {
  std::vector<candidate> fitting;
  candidate smallest;
  bool any = false;
  for (int p = p_min; p <= std::min({p_max, ctx.L, ctx.n}); ++p)
    for (int w = 1; p * w <= ctx.n; ++w)
      for (std::int64_t b : ctx.sizes)
        for (int m : ms(p)) {
          candidate k = build(ctx, kind, p, w, b, m, stash(m));
          if (k.fits) {
            fitting.push_back(std::move(k));
          } else if (!any || k.excess < smallest.excess) {
            smallest = std::move(k);
            any = true;
          }
        }
  return pick(ctx, fitting, any ? &smallest : nullptr, kind);
}

}  // namespace

result<baseline_plan> plan_gpipe(const model_profile& profile, const cluster& c, const baseline_options& options) {
  auto ctx = make_context(profile, c, options);
  if (!ctx) return ctx.err();
  return search(
      *ctx, "gpipe", 1, ctx->L, [](int p) { return std::vector<int>{p, 2 * p, 4 * p}; }, [](int m) { return m; });
}

result<baseline_plan> plan_model_parallel(const model_profile& profile, const cluster& c,
                                          const baseline_options& options) {
  auto ctx = make_context(profile, c, options);
  if (!ctx) return ctx.err();
  if (ctx->L < 2 || ctx->n < 2) return make_error("model parallelism needs at least 2 layers and 2 devices");
  return search(
      *ctx, "model-parallel", 2, ctx->L, [](int) { return std::vector<int>{1}; }, [](int) { return 1; });
}

result<baseline_plan> plan_data_parallel(const model_profile& profile, const cluster& c,
                                         const baseline_options& options) {
  auto ctx = make_context(profile, c, options);
  if (!ctx) return ctx.err();
  auto r = search(
      *ctx, "data-parallel", 1, 1, [](int) { return std::vector<int>{1, 2, 4, 8}; }, [](int) { return 1; });
  if (r) return r;
  // Nothing fits: say what the whole model needs at the smallest microbatch.
  const candidate k = build(*ctx, "data-parallel", 1, 1, ctx->sizes.front(), 1, 1);
  if (k.fits) return r;  // not a memory problem
  return make_error("data parallelism does not fit: the whole model at b=" + std::to_string(k.plan.b) +
                    " needs " + std::to_string(k.worst_need) + " bytes per device, " +
                    std::to_string(k.excess) + " bytes more than the " +
                    std::to_string(k.worst_need - k.excess) + " bytes of device memory");
}

result<baseline_plan> evaluate_gpipe(const model_profile& profile, const cluster& c, int p, int w, std::int64_t b,
                                     int m, const baseline_options& options) {
  auto ctx = make_context(profile, c, options);
  if (!ctx) return ctx.err();
  if (p < 1 || w < 1 || b < 1 || m < 1 || p > ctx->L || static_cast<std::int64_t>(p) * w > ctx->n)
    return make_error("invalid gpipe configuration p=" + std::to_string(p) + " w=" + std::to_string(w) +
                      " b=" + std::to_string(b) + " m=" + std::to_string(m) +
                      ": need 1 <= p <= layers, m >= 1, b >= 1, p·w <= devices");
  candidate k = build(*ctx, "gpipe", p, w, b, m, m);
  if (!k.fits) return make_error("the gpipe plan " + describe(k));
  if (options.use_simulator) {
    status st = simulate_candidate(*ctx, k);
    if (!st) return make_error(st.message());
  }
  return std::move(k.plan);
}

}  // namespace pipeworks
