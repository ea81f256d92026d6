// PipeDream-2BW's planner (see two_bw_planner.hpp for the model it scores with).
#include "partition/two_bw_planner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <tuple>
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
  return {l.bandwidth_bytes_per_s > 0 ? 1000.0 / l.bandwidth_bytes_per_s : 0.0,
          l.latency_s * 1000.0};
}

// Contiguous split of per-layer times into p stages minimising max_s Σtime / speed[s], over the
// splits where allowed(s, i, j) holds for every stage s on layers i..j − 1. Returns the first
// layer of each stage (p entries), or nothing when no split is allowed.
template <class Allowed>
std::vector<int> balanced_split(const std::vector<double>& prefix, const std::vector<double>& speed,
                                Allowed allowed) {
  const int L = static_cast<int>(prefix.size()) - 1;
  const int p = static_cast<int>(speed.size());
  // best[s][j]: the smallest bottleneck placing layers 0..j-1 in stages 0..s-1.
  std::vector<std::vector<double>> best(p + 1, std::vector<double>(L + 1, inf));
  std::vector<std::vector<int>> cut(p + 1, std::vector<int>(L + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= p; ++s)
    for (int j = s; j <= L - (p - s); ++j)
      for (int i = s - 1; i < j; ++i) {
        if (best[s - 1][i] == inf || !allowed(s - 1, i, j)) continue;
        const double v = std::max(best[s - 1][i], (prefix[j] - prefix[i]) / speed[s - 1]);
        if (v < best[s][j]) {
          best[s][j] = v;
          cut[s][j] = i;
        }
      }
  if (best[p][L] == inf) return {};
  std::vector<int> first(p);
  int j = L;
  for (int s = p; s >= 1; --s) {
    first[s - 1] = cut[s][j];
    j = cut[s][j];
  }
  return first;
}

struct context {
  const model_profile& profile;
  const cluster& c;
  const two_bw_options& options;
  int L = 0;
  int n = 0;  // devices usable
  std::vector<double> time_prefix;  // Σ(fwd+bwd) at the profile's microbatch
  std::vector<std::int64_t> weight_prefix;  // Σ(3·param + optimizer): 2 versions, grads, state
  std::vector<std::int64_t> saved_prefix;  // Σsaved at the profile's microbatch
  // Device lists: the orders devices are dealt to stages in (see arrangement()); empty for levels.
  std::vector<std::vector<int>> orders;
  std::map<std::vector<double>, std::vector<int>> splits;  // by per-stage speeds
  // Memory-aware splits, by per-stage speeds, per-stage memory and microbatch size.
  std::map<std::tuple<std::vector<double>, std::vector<std::int64_t>, std::int64_t>,
           std::vector<int>>
      fitted_splits;
};

// A fully evaluated candidate (analytic score), or the memory excess when it does not fit.
struct candidate {
  two_bw_plan plan;
  bool fits = true;
  std::int64_t excess = 0;  // the largest need − memory over devices when it does not fit
  int worst_device = 0;
  std::int64_t worst_need = 0;
  // For the simulator's cost model.
  std::vector<stage_cost> stage_costs;
  std::vector<device_link> links;
  std::vector<device_cost> devices;
};

std::int64_t scaled(std::int64_t bytes, std::int64_t b, std::int64_t mb) {
  // bytes · b / mb without overflow for the sizes a profile holds.
  return static_cast<std::int64_t>(std::llround(static_cast<long double>(bytes) * b / mb));
}

// The device of replica r's stage s, at devs[r·p + s]. Levels: r·p + s (a replica's stages are
// consecutive devices, inside a server when p fits). Device lists: ctx.orders[arrangement] dealt
// in groups of w, group s to stage s, so that the replicas of a stage have similar devices.
std::vector<int> arrangement(const context& ctx, int p, int w, int which) {
  std::vector<int> devs(static_cast<std::size_t>(p) * w);
  for (int r = 0; r < w; ++r)
    for (int s = 0; s < p; ++s)
      devs[static_cast<std::size_t>(r) * p + s] =
          ctx.orders.empty()
              ? r * p + s
              : ctx.orders[static_cast<std::size_t>(which)][static_cast<std::size_t>(s) * w + r];
  return devs;
}

// Bytes a device of stage s (of p) needs for layers i..j − 1 at microbatch b.
std::int64_t stage_need(const context& ctx, int s, int p, int i, int j, std::int64_t b) {
  const std::int64_t saved =
      scaled(ctx.saved_prefix[j] - ctx.saved_prefix[i], b, ctx.profile.microbatch);
  return ctx.weight_prefix[j] - ctx.weight_prefix[i] + static_cast<std::int64_t>(p - s) * saved;
}

// The split balanced on time; when it does not fit the stages' memory (caps[s], 0: unlimited),
// the best balanced split that does, if any.
const std::vector<int>& choose_split(context& ctx, const std::vector<double>& speed,
                                     const std::vector<std::int64_t>& caps, std::int64_t b) {
  const int p = static_cast<int>(speed.size());
  auto fits = [&](int s, int i, int j) {
    return caps[s] == 0 || stage_need(ctx, s, p, i, j, b) <= caps[s];
  };
  auto any = [](int, int, int) { return true; };
  auto it = ctx.splits.find(speed);
  if (it == ctx.splits.end())
    it = ctx.splits.emplace(speed, balanced_split(ctx.time_prefix, speed, any)).first;
  const std::vector<int>& first = it->second;
  bool ok = true;
  for (int s = 0; s < p && ok; ++s) ok = fits(s, first[s], s + 1 < p ? first[s + 1] : ctx.L);
  if (ok) return first;
  auto key = std::make_tuple(speed, caps, b);
  auto f = ctx.fitted_splits.find(key);
  if (f == ctx.fitted_splits.end())
    f = ctx.fitted_splits.emplace(key, balanced_split(ctx.time_prefix, speed, fits)).first;
  return f->second.empty() ? first : f->second;
}

candidate build(context& ctx, int p, int w, std::int64_t b, int m, int which = 0) {
  const cluster& c = ctx.c;
  const model_profile& pr = ctx.profile;
  const double f = static_cast<double>(b) / static_cast<double>(pr.microbatch);
  candidate out;
  two_bw_plan& plan = out.plan;
  plan.p = p;
  plan.w = w;
  plan.b = b;
  plan.m = m;
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
  const std::vector<int>& first = choose_split(ctx, speed, caps, b);

  plan.memory_bytes.assign(
      static_cast<std::size_t>(*std::max_element(devs.begin(), devs.end())) + 1, 0);
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
    const std::int64_t weights = 3 * params + opt;  // two versions + gradients + optimizer state
    const std::int64_t need = weights + static_cast<std::int64_t>(p - s) * saved_b;
    st.time_ms = (fwd + bwd) / speed[s];
    max_stage = std::max(max_stage, st.time_ms);

    // The ring over this stage's replicas: its slowest hop bounds it.
    double reduce_ms = 0;
    if (w > 1) {
      link_figures worst{};
      for (int r = 0; r < w; ++r) {
        const link_figures lf = figures(c, dev(r, s), dev((r + 1) % w, s));
        if (lf.ms_per_byte > worst.ms_per_byte) worst.ms_per_byte = lf.ms_per_byte;
        worst.latency_ms = std::max(worst.latency_ms, lf.latency_ms);
      }
      reduce_ms = 2.0 * (w - 1) / w * static_cast<double>(params) * worst.ms_per_byte +
                  2.0 * (w - 1) * worst.latency_ms;
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
      const double link_ms = 2.0 * static_cast<double>(act_b) * worst.ms_per_byte + 2.0 * worst.latency_ms;
      max_link = std::max(max_link, link_ms);
      out.links.push_back(device_link{s, s + 1, link_cost{worst.latency_ms,
                                                          worst.ms_per_byte > 0 ? 1.0 / worst.ms_per_byte : inf}});
    }

    // Memory on every replica's device.
    std::int64_t min_memory = 0;  // 0: unlimited
    for (int r = 0; r < w; ++r) {
      const int d = dev(r, s);
      plan.memory_bytes[d] = need;
      st.devices.push_back(d);
      const std::int64_t cap = c.memory(d);
      if (cap > 0) {
        min_memory = min_memory == 0 ? cap : std::min(min_memory, cap);
        if (need > cap) {
          if (out.fits || need - cap > out.excess) {
            out.excess = need - cap;
            out.worst_device = d;
            out.worst_need = need;
          }
          out.fits = false;
        }
      }
    }
    st.memory_bytes = need;
    plan.stages.push_back(std::move(st));

    stage_cost sc;
    sc.forward = fwd;  // the simulator divides by the device's speed
    sc.backward = bwd;
    sc.weight_grad = 0;
    sc.step = 0;
    sc.reduce = reduce_ms;
    sc.activation_bytes = saved_b;
    sc.boundary_bytes = act_b;
    sc.param_bytes = params;
    out.stage_costs.push_back(sc);
    out.devices.push_back(device_cost{speed[s], min_memory});
  }
  plan.analytic_step_ms = m * std::max(max_stage, max_link) + max_reduce;
  plan.step_ms = plan.analytic_step_ms;
  plan.throughput_samples_per_s =
      plan.step_ms > 0 ? static_cast<double>(b) * m * w / plan.step_ms * 1000.0 : inf;
  return out;
}

// Re-scores a fitting candidate with the simulator; keeps the analytic score when the
// simulation would be too large. An error if the simulator reports one (e.g. out of memory).
status simulate_candidate(const context& ctx, candidate& cand) {
  two_bw_plan& plan = cand.plan;
  const schedule_params params{plan.p, plan.m, 1, plan.w, 2};
  const footprint fp = estimate_footprint(schedule_kind::two_bw, params, true, false);
  if (fp.actions > ctx.options.max_simulated_actions) return {};
  auto sched = make_schedule(schedule_kind::two_bw, params);
  if (!sched) return make_error("2bw schedule p=" + std::to_string(plan.p) + ": " + sched.message());
  cost_model cm;
  cm.stages = cand.stage_costs;
  cm.links = cand.links;
  cm.link = link_cost{};
  cm.devices = cand.devices;
  simulate_options so;
  so.record_timeline = false;
  auto sim = simulate(lower_communication(std::move(*sched)), cm, so);
  if (!sim) return make_error(sim.message());
  plan.step_ms = sim->makespan / params.steps;
  plan.simulated = true;
  plan.throughput_samples_per_s =
      plan.step_ms > 0 ? static_cast<double>(plan.b) * plan.m * plan.w / plan.step_ms * 1000.0 : inf;
  return {};
}

// Strictly better: higher throughput, then fewer inter-server links, devices, stages.
bool better(const two_bw_plan& a, const two_bw_plan& b) {
  const double ta = a.throughput_samples_per_s, tb = b.throughput_samples_per_s;
  if (std::abs(ta - tb) > 1e-9 * std::max(std::abs(ta), std::abs(tb))) return ta > tb;
  if (a.inter_server_links != b.inter_server_links) return a.inter_server_links < b.inter_server_links;
  if (a.p * a.w != b.p * b.w) return a.p * a.w < b.p * b.w;
  if (a.p != b.p) return a.p < b.p;
  if (a.b != b.b) return a.b > b.b;
  return a.m < b.m;
}

result<context> make_context(const model_profile& profile, const cluster& c,
                             const two_bw_options& options) {
  context ctx{profile, c, options, 0, 0, {}, {}, {}, {}, {}, {}};
  ctx.L = static_cast<int>(profile.layers.size());
  if (ctx.L == 0) return make_error("cannot plan a pipeline for a profile with no layers");
  if (profile.microbatch < 1) return make_error("the profile's microbatch must be at least 1");
  if (options.max_devices < 0 || options.simulate_top < 0)
    return make_error("2bw options: max_devices and simulate_top must not be negative");
  for (int l = 0; l < ctx.L; ++l) {
    const layer_profile& x = profile.layers[l];
    if (!(x.fwd_ms >= 0) || !(x.bwd_ms >= 0) || !std::isfinite(x.fwd_ms) || !std::isfinite(x.bwd_ms) ||
        x.activation_bytes < 0 || x.saved_bytes < 0 || x.param_bytes < 0 || x.optimizer_bytes < 0)
      return make_error("layer " + std::to_string(l) + " (" + x.name +
                        "): times and byte counts must be finite and not negative");
  }
  if (c.levels.empty() && c.devices.empty()) return make_error("the cluster has neither levels nor devices");
  for (const cluster_level& lv : c.levels) {
    if (lv.count < 1) return make_error("cluster level " + lv.name + ": count must be at least 1");
    if (!(lv.bandwidth_bytes_per_s > 0))
      return make_error("cluster level " + lv.name + ": bandwidth_bytes_per_s must be positive");
  }
  for (const device_spec& d : c.devices)
    if (!(d.speed > 0)) return make_error("device " + d.name + ": speed must be positive");
  ctx.n = c.device_count();
  if (options.max_devices > 0) ctx.n = std::min(ctx.n, options.max_devices);
  if (ctx.n < 1) return make_error("the cluster has no devices");
  ctx.time_prefix.assign(ctx.L + 1, 0.0);
  ctx.weight_prefix.assign(ctx.L + 1, 0);
  ctx.saved_prefix.assign(ctx.L + 1, 0);
  for (int l = 0; l < ctx.L; ++l) {
    const layer_profile& x = profile.layers[l];
    ctx.time_prefix[l + 1] = ctx.time_prefix[l] + x.fwd_ms + x.bwd_ms;
    ctx.weight_prefix[l + 1] = ctx.weight_prefix[l] + 3 * x.param_bytes + x.optimizer_bytes;
    ctx.saved_prefix[l + 1] = ctx.saved_prefix[l] + x.saved_bytes;
  }
  if (!c.devices.empty()) {
    // Fastest first (then most memory), and most memory first (then fastest); 0 bytes: unlimited.
    const auto mem = [&](int d) {
      return c.devices[d].memory_bytes == 0 ? std::numeric_limits<std::int64_t>::max()
                                            : c.devices[d].memory_bytes;
    };
    std::vector<int> by_speed(c.devices.size());
    for (std::size_t d = 0; d < by_speed.size(); ++d) by_speed[d] = static_cast<int>(d);
    std::vector<int> by_memory = by_speed;
    std::stable_sort(by_speed.begin(), by_speed.end(), [&](int a, int b) {
      return c.devices[a].speed != c.devices[b].speed ? c.devices[a].speed > c.devices[b].speed
                                                      : mem(a) > mem(b);
    });
    std::stable_sort(by_memory.begin(), by_memory.end(), [&](int a, int b) {
      return mem(a) != mem(b) ? mem(a) > mem(b) : c.devices[a].speed > c.devices[b].speed;
    });
    ctx.orders.push_back(by_speed);
    if (by_memory != by_speed) ctx.orders.push_back(by_memory);
  }
  return ctx;
}

std::string describe(const candidate& k) {
  const two_bw_plan& p = k.plan;
  return "(p=" + std::to_string(p.p) + ", w=" + std::to_string(p.w) + ", b=" + std::to_string(p.b) +
         ", m=" + std::to_string(p.m) + ") needs " + std::to_string(k.worst_need) + " bytes on device " +
         std::to_string(k.worst_device) + ", " + std::to_string(k.excess) + " bytes more than its memory";
}

}  // namespace

result<two_bw_plan> evaluate_two_bw(const model_profile& profile, const cluster& c, int p, int w,
                                    std::int64_t b, int m, const two_bw_options& options) {
  auto ctx = make_context(profile, c, options);
  if (!ctx) return ctx.err();
  if (p < 1 || w < 1 || b < 1 || m < p || p > ctx->L || static_cast<std::int64_t>(p) * w > ctx->n)
    return make_error("invalid 2bw configuration p=" + std::to_string(p) + " w=" + std::to_string(w) +
                      " b=" + std::to_string(b) + " m=" + std::to_string(m) +
                      ": need 1 <= p <= layers, m >= p, b >= 1, p·w <= devices");
  // The best fitting arrangement of the devices (by the analytic score), or the least excess.
  candidate k = build(*ctx, p, w, b, m, 0);
  for (int which = 1; which < static_cast<int>(ctx->orders.size()); ++which) {
    candidate alt = build(*ctx, p, w, b, m, which);
    if (alt.fits ? !k.fits || better(alt.plan, k.plan) : !k.fits && alt.excess < k.excess)
      k = std::move(alt);
  }
  if (!k.fits) return make_error("the 2bw plan " + describe(k));
  if (options.use_simulator) {
    status st = simulate_candidate(*ctx, k);
    if (!st) return make_error(st.message());
  }
  return std::move(k.plan);
}

result<two_bw_plan> plan_two_bw(const model_profile& profile, const cluster& c,
                                const two_bw_options& options) {
  auto ctx_r = make_context(profile, c, options);
  if (!ctx_r) return ctx_r.err();
  context& ctx = *ctx_r;
  const std::int64_t mb = profile.microbatch;

  std::vector<std::int64_t> sizes;  // mb × {1/4, 1/2, 1, 2, 4} where integral
  for (int k : {1, 2, 4, 8, 16})
    if (mb * k % 4 == 0) sizes.push_back(mb * k / 4);

  std::vector<candidate> fitting;
  candidate smallest;  // the candidate with the least excess, for the error
  bool any = false;
  const int arrangements = std::max(1, static_cast<int>(ctx.orders.size()));
  for (int p = 1; p <= std::min(ctx.L, ctx.n); ++p)
    for (int w = 1; p * w <= ctx.n; ++w)
      for (std::int64_t b : sizes)
        for (int m : {p, 2 * p, 4 * p})
          for (int which = 0; which < arrangements; ++which) {
            candidate k = build(ctx, p, w, b, m, which);
            if (k.fits) {
              // Keep the candidate list small: only the stage figures are needed later.
              fitting.push_back(std::move(k));
            } else if (!any || k.excess < smallest.excess) {
              smallest = std::move(k);
              any = true;
            }
          }
  if (fitting.empty()) {
    if (!any) return make_error("no 2bw candidate to plan");
    return make_error("no 2bw plan fits in memory: the smallest candidate " + describe(smallest));
  }
  std::sort(fitting.begin(), fitting.end(),
            [](const candidate& a, const candidate& b) { return better(a.plan, b.plan); });
  if (!options.use_simulator || options.simulate_top == 0) return std::move(fitting.front().plan);

  const std::size_t top = std::min(fitting.size(), static_cast<std::size_t>(options.simulate_top));
  const two_bw_plan* best = nullptr;
  for (std::size_t i = 0; i < top; ++i) {
    status st = simulate_candidate(ctx, fitting[i]);
    if (!st) return make_error("simulating the 2bw plan " + std::to_string(i) + ": " + st.message());
    if (!best || better(fitting[i].plan, *best)) best = &fitting[i].plan;
  }
  return *best;
}

}  // namespace pipeworks
