// PipeDream's planner (Narayanan et al., SOSP'19, §3.1): checks its arguments, builds the cost
// model and routes to the flat program (one level, heterogeneous devices, same_replicas) or to
// the level-by-level program (pipedream_hierarchy.cpp), then checks memory on the final plan.
//
// Choices, documented here because the header leaves them open:
// - in_flight = 0 (default) is PipeDream's 1F1B count: stage s of p keeps p − s microbatches'
//   saved bytes (the first stage p, the last 1), p the plan's device-level depth. A positive
//   options.in_flight applies to every stage.
// - Memory per device of a stage = Σ param_bytes · 2 (weights and gradients) + Σ optimizer_bytes
//   + in_flight · Σ saved_bytes; replicas each hold the whole stage. With a profile measured under
//   full recomputation the stash is in_flight · input_bytes(first layer) + Σ saved_bytes instead
//   (stash_bytes: the runtime's model); selective's saved_bytes are already the reduced stash.
// - Microbatches per step m = 2p: predicted_step_ms = bottleneck_ms · (m + p − 1) = (3p − 1) ·
//   bottleneck_ms (fill, steady state and drain of a 1F1B pipeline).
// - One level (or a hierarchy whose used part is one level): the exact flat program.
// - Hierarchies: PipeDream's level-by-level recurrence (exact: unlimited memory or a fixed
//   in_flight). Levels of count 1 are dropped (they change nothing). max_devices: the outermost
//   level whose units of the level below fit in max_devices is the top, with ⌊max_devices / unit⌋
//   of them (at most its count); the devices beyond are left idle (e.g. 20 on servers of 8: 2
//   servers; 5: 5 devices of one server, flat).
// - Hierarchies with memory and in_flight = p − s: p is unknown inside a sub-pipeline, so the
//   program takes an in-flight count per layer, F(i), used for a device-stage starting at layer i.
//   Round 1: F = 1, a relaxation, so when its plan fits under the true p − s it is optimal among
//   level-by-level plans (exact). Otherwise each round raises F(i) to what the last plan's stage
//   holding layer i needed (kept non-increasing in i) and plans again, up to 12 rounds; then a
//   uniform F capped at L − i (a device-stage at layer i has at most L − i stages to the end),
//   raised to the last plan's depth (a plan of depth ≤ F fits for sure), at last F = n. Every plan
//   is checked exactly under p − s; the first that fits is returned (not claimed optimal). If none
//   does, the flat program (exact p − s memory) is run with the pool's costs and with every
//   all-reduce at the outermost level, both are placed on devices 0, 1, .. and costed there
//   (all-reduce at the level spanning a stage's devices, a link at the level spanning both
//   stages), and the better is returned with that cost as bottleneck_ms.
// - Work budget: the level-by-level tables cost about c_l² per row, and with long replicated
//   stages (few parameters) or wide levels (NVL72: 72 per server) they can take minutes. One
//   planning spends at most pipedream::hierarchy_work_budget (2^25 rows × c_l², about a second);
//   when it runs out, the flat fallback above is returned instead (costed at its placement).
// - same_replicas: the flat program over the pool with every stage on r devices numbered
//   consecutively. On a hierarchy r's all-reduce is searched at the innermost level whose unit
//   size is a multiple of r (no stage straddles one of its units; else the outermost) and links at
//   the outermost level used; the plan returned is re-costed at its devices (placed, as above).
// - Heterogeneous clusters (`devices`): plan_pipedream_devices (pipedream_hetero.hpp), each
//   device at its own speed and memory.
// - ZeRO 1 (pipeline_plan::zero, with options.max_zero = 1): on a cluster that limits memory (and
//   has two devices or more to share over) the plan is searched twice: as is, and with every
//   replicated stage (r > 1) holding zero_share of its optimizer state (1/r, at least its largest
//   tensor's: zero_share.hpp) and paying the gather of its weights, (r − 1)/r of Σparam_bytes /
//   bw, after its all-reduce. The sharded plan is kept only when its bottleneck is lower (1e-9
//   relative; a tie keeps the unsharded), which in practice means when memory demands it. The
//   flat, same_replicas and device-list programs are exact under it (each stage's memory is a
//   function of its own r, written where each program's recurrence is). The level-by-level
//   program is not: a device-stage's share depends on the replicas of every level above it, which
//   the inner tables do not know; so on a hierarchy the sharded search is the flat program placed
//   on devices 0, 1, .. (plan_flat_placed, as for the work budget), exact in the pool's cost model.
//   Before the sharded search one probe asks whether any sharded plan could beat the unsharded
//   one's bottleneck (the flat program's probe with every level at the fastest bandwidth: a
//   lower bound on every placed plan; on a device list the program's own probe); when none can,
//   the search is skipped, so a limit that does not bind, or binds where sharing cannot help,
//   costs one probe (of about 64 in a search).
#include "partition/plan_inputs.hpp"
#include "partition/pipedream_planner.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "partition/pipedream_flat.hpp"
#include "partition/pipedream_hetero.hpp"
#include "partition/pipedream_hierarchy.hpp"
#include "partition/recompute_choice.hpp"

namespace pipeworks {

namespace {

using pipedream::flat_model;
using pipedream::inf;
using pipedream::level_spec;

std::string bytes_text(std::int64_t b) { return std::to_string(b) + " bytes"; }

int in_flight_of(const flat_model& m, int p, int s) { return m.in_flight > 0 ? m.in_flight : p - s; }

bool fits_memory(const flat_model& m, const std::vector<planned_stage>& st) {
  const int p = static_cast<int>(st.size());
  for (int s = 0; s < p; ++s)
    if (!m.fits(st[s].first_layer, st[s].last_layer, in_flight_of(m, p, s), st[s].replicas))
      return false;
  return true;
}

result<pipeline_plan> no_plan(const flat_model& m) {
  // Under ZeRO the caller keeps the unsharded search's error (with its excess), so no bisection.
  if (m.zero > 0) return make_error("no plan fits in memory under ZeRO 1");
  const std::int64_t least = pipedream::least_peak_memory(m);
  return make_error("no plan fits in memory: the smallest plan on " + std::to_string(m.devices) +
                    " devices needs " + bytes_text(least) + " per device, " +
                    bytes_text(least - m.memory) + " more than the " + bytes_text(m.memory) +
                    " a device has");
}

pipeline_plan finish(const flat_model& m, std::vector<planned_stage> stages, double bottleneck) {
  pipeline_plan plan;
  plan.stages = std::move(stages);
  const int p = static_cast<int>(plan.stages.size());
  for (int s = 0; s < p; ++s) {
    planned_stage& st = plan.stages[s];
    st.memory_bytes = m.memory_of(st.first_layer, st.last_layer, in_flight_of(m, p, s), st.replicas);
    for (int d : st.devices) {
      if (d >= static_cast<int>(plan.memory_bytes.size())) plan.memory_bytes.resize(d + 1, 0);
      plan.memory_bytes[d] = st.memory_bytes;
    }
  }
  plan.bottleneck_ms = bottleneck;
  const int microbatches = 2 * p;
  plan.predicted_step_ms = plan.bottleneck_ms * (microbatches + p - 1);
  return plan;
}

// The flat program (or same_replicas), costed at the devices its stages hold: on one level that
// is its own cost; on a hierarchy stages of a pool cost model may straddle units.
result<pipeline_plan> plan_flat_or_same(const flat_model& m, bool same_replicas) {
  auto stages = same_replicas ? pipedream::plan_same_replicas(m) : pipedream::plan_flat(m);
  if (!stages) return no_plan(m);
  const double b = pipedream::placed_bottleneck(m, *stages);
  return finish(m, std::move(*stages), b);
}

// The flat program on a hierarchy under two cost models: the pool's (replicas packed into the
// innermost unit holding them) and a pessimistic one (every all-reduce at the outermost level);
// the same memory. The better of the two at its actual placement.
result<pipeline_plan> plan_flat_placed(const flat_model& m) {
  std::optional<std::vector<planned_stage>> best;
  double best_b = inf;
  for (int pessimistic = 0; pessimistic < 2; ++pessimistic) {
    flat_model pool = m;
    if (pessimistic) std::fill(pool.ms_per_byte.begin(), pool.ms_per_byte.end(), m.ms_per_byte.back());
    auto stages = pipedream::plan_flat(pool);
    if (!stages) return no_plan(m);
    const double b = pipedream::placed_bottleneck(m, *stages);
    if (b < best_b) {
      best_b = b;
      best = std::move(stages);
    }
  }
  return finish(m, std::move(*best), best_b);
}

// The level-by-level program, with the in_flight = p − s rounds described at the top, and the
// flat fallback when the work budget runs out.
result<pipeline_plan> plan_levels(const flat_model& m, const std::vector<level_spec>& levels) {
  if (m.zero > 0) return plan_flat_placed(m);  // the inner tables cannot see a stage's share
  const int L = m.layers;
  std::int64_t budget = pipedream::hierarchy_work_budget;
  if (m.memory == 0 || m.in_flight > 0) {
    auto h = pipedream::plan_hierarchy(m, levels, std::vector<int>(L, std::max(m.in_flight, 1)), budget);
    if (h.over_budget) return plan_flat_placed(m);
    if (!h.plan) return no_plan(m);
    return finish(m, std::move(h.plan->stages), h.plan->bottleneck_ms);
  }
  // Rounds of per-layer estimates, from 1 (the relaxation) up to what the plans needed.
  std::vector<int> f(L, 1);
  for (int round = 0; round < 12; ++round) {
    auto h = pipedream::plan_hierarchy(m, levels, f, budget);
    if (h.over_budget) return plan_flat_placed(m);
    if (!h.plan) break;
    if (fits_memory(m, h.plan->stages)) return finish(m, std::move(h.plan->stages), h.plan->bottleneck_ms);
    const int p = static_cast<int>(h.plan->stages.size());
    for (int s = 0; s < p; ++s)
      for (int l = h.plan->stages[s].first_layer; l <= h.plan->stages[s].last_layer; ++l) f[l] = std::max(f[l], p - s);
    for (int l = L - 2; l >= 0; --l) f[l] = std::max(f[l], f[l + 1]);  // non-increasing, as plan_hierarchy needs
  }
  // A uniform F, capped by the L − i stages a device-stage at layer i has at most to the end.
  for (int uniform = 1, attempt = 0;; ++attempt) {
    for (int l = 0; l < L; ++l) f[l] = std::min(uniform, L - l);
    auto h = pipedream::plan_hierarchy(m, levels, f, budget);
    if (h.over_budget || !h.plan) break;  // a larger F only needs more memory
    if (fits_memory(m, h.plan->stages)) return finish(m, std::move(h.plan->stages), h.plan->bottleneck_ms);
    if (uniform >= m.devices) break;
    const int depth = static_cast<int>(h.plan->stages.size());
    uniform = attempt < 5 ? std::min(m.devices, std::max(uniform + 1, depth)) : m.devices;
  }
  return plan_flat_placed(m);
}

// The plan at ZeRO level `zero` (0, or 1: see the top of this file). Under ZeRO an error, without
// searching, when no plan can have a bottleneck ≤ `below` (the unsharded plan's, to beat).
result<pipeline_plan> plan_pipedream_checked(const model_profile& profile, const cluster& c,
                                             const pipedream_options& options, int zero,
                                             double below = inf) {
  // Check the arguments.
  const int L = static_cast<int>(profile.layers.size());
  if (L == 0) return make_error("cannot plan a pipeline for a profile with no layers");
  if (status s = check_plan_inputs(profile, c); !s) return make_error(s.message());
  for (int l = 0; l < L; ++l) {
    const layer_profile& x = profile.layers[l];
    const auto bad = [&](const char* field) {
      return make_error("layer " + std::to_string(l) + " (" + x.name + "): " + field +
                        " must be finite and non-negative");
    };
    if (!(x.fwd_ms >= 0 && std::isfinite(x.fwd_ms))) return bad("fwd_ms");
    if (!(x.bwd_ms >= 0 && std::isfinite(x.bwd_ms))) return bad("bwd_ms");
    if (x.activation_bytes < 0) return bad("activation_bytes");
    if (x.saved_bytes < 0) return bad("saved_bytes");
    if (x.param_bytes < 0) return bad("param_bytes");
    if (x.optimizer_bytes < 0) return bad("optimizer_bytes");
  }
  if (options.max_devices < 0 || options.in_flight < 0)
    return make_error("pipedream options: max_devices and in_flight must be 0 (default) or positive");
  if (options.max_zero < 0 || options.max_zero > 1)
    return make_error("pipedream options: max_zero must be 0 (default) or 1, not " +
                      std::to_string(options.max_zero));
  double total_ms = 0;
  for (const layer_profile& x : profile.layers) total_ms += x.fwd_ms + x.bwd_ms;
  if (!std::isfinite(total_ms))
    return make_error("the layers' fwd_ms + bwd_ms total overflows a double; profile in larger time units");
  if (status s = check_profile_totals(profile); !s) return make_error(s.message());
  if (!c.devices.empty()) return plan_pipedream_devices(profile, c, options, zero, below);

  flat_model m;
  m.layers = L;
  m.in_flight = options.in_flight;
  m.zero = zero;
  std::vector<level_spec> levels;  // the hierarchy's levels in use, counts ≥ 2
  if (c.levels.empty()) return make_error("the cluster has neither levels nor devices");
  if (c.device_memory_bytes < 0)
    return make_error("device_memory_bytes must be 0 (unlimited) or positive, not " +
                      std::to_string(c.device_memory_bytes));
  // The largest transfer a level carries: a link's activation both ways, or an all-reduce of at
  // most 2 · Σparam_bytes.
  double largest_bytes = 0, params_total = 0;
  for (const layer_profile& x : profile.layers) {
    largest_bytes = std::max(largest_bytes, static_cast<double>(x.activation_bytes));
    params_total += static_cast<double>(x.param_bytes);
  }
  largest_bytes = std::max(largest_bytes, params_total);
  long long units = 1;
  for (const cluster_level& lv : c.levels) {
    if (lv.count < 1) return make_error("cluster level " + lv.name + ": count must be at least 1");
    if (!(lv.bandwidth_bytes_per_s > 0))
      return make_error("cluster level " + lv.name + ": bandwidth_bytes_per_s must be positive");
    if (!std::isfinite(pipedream::link_cost(largest_bytes, 1000.0 / lv.bandwidth_bytes_per_s)))
      return make_error("cluster level " + lv.name + ": bandwidth_bytes_per_s " +
                        std::to_string(lv.bandwidth_bytes_per_s) + " is too small: moving " +
                        std::to_string(static_cast<std::int64_t>(largest_bytes)) +
                        " bytes (a link or an all-reduce) would take longer than a double holds");
    units *= lv.count;
    if (units > (1 << 24))
      return make_error("the cluster's levels multiply to more than 2^24 = 16777216 devices (at "
                        "level " + lv.name + ", count " + std::to_string(lv.count) +
                        "), more than the planner searches; lower a level's count");
  }
  const long long n = options.max_devices > 0 ? std::min<long long>(options.max_devices, units) : units;
  // The levels in use: full counts while a unit of the level fits in n, then ⌊n / unit⌋.
  long long unit = 1;
  for (const cluster_level& lv : c.levels) {
    if (unit > n) break;
    const int count = static_cast<int>(std::min<long long>(lv.count, n / unit));
    if (count > 1) levels.push_back({count, 1000.0 / lv.bandwidth_bytes_per_s});
    unit *= count;
  }
  m.devices = static_cast<int>(unit);
  if (levels.empty()) levels.push_back({1, 1000.0 / c.levels[0].bandwidth_bytes_per_s});
  for (const level_spec& l : levels) {
    m.unit_size.push_back((m.unit_size.empty() ? 1 : m.unit_size.back()) * l.count);
    m.ms_per_byte.push_back(l.ms_per_byte);
  }
  m.memory = c.device_memory_bytes;
  // Links of the pool: the level spanning every device the plan may use.
  const double link_ms_per_byte = m.ms_per_byte[m.level_of(m.devices)];

  m.compute.assign(L + 1, 0.0);
  m.params.assign(L + 1, 0.0);
  m.fixed.assign(L + 1, 0);
  m.saved.assign(L + 1, 0);
  m.input.assign(L, 0);
  m.recompute = profile.recompute;
  m.activation.assign(L, 0.0);
  m.link_ms.assign(L, 0.0);
  for (int l = 0; l < L; ++l) {
    const layer_profile& x = profile.layers[l];
    m.compute[l + 1] = m.compute[l] + (x.fwd_ms + x.bwd_ms);
    m.params[l + 1] = m.params[l] + static_cast<double>(x.param_bytes);
    m.fixed[l + 1] = m.fixed[l] + 2 * x.param_bytes + x.optimizer_bytes;
    m.saved[l + 1] = m.saved[l] + x.saved_bytes;
    m.input[l] = input_bytes(profile, l);
    m.activation[l] = static_cast<double>(x.activation_bytes);
    m.link_ms[l] = pipedream::link_cost(m.activation[l], link_ms_per_byte);
  }
  if (zero > 0) {
    m.optimizer.assign(L + 1, 0);
    for (int l = 0; l < L; ++l) m.optimizer[l + 1] = m.optimizer[l] + profile.layers[l].optimizer_bytes;
    m.largest = largest_tensor_table(profile);
    // Can any sharded plan beat `below`? Every cost at the fastest level's bandwidth bounds every
    // plan the searches below return (placed or not) from underneath.
    if (below < inf) {
      flat_model bound = m;
      const double fastest = *std::min_element(m.ms_per_byte.begin(), m.ms_per_byte.end());
      std::fill(bound.ms_per_byte.begin(), bound.ms_per_byte.end(), fastest);
      for (int l = 0; l < L; ++l) bound.link_ms[l] = pipedream::link_cost(bound.activation[l], fastest);
      if (!pipedream::any_plan_within(bound, below))
        return make_error("no plan under ZeRO 1 beats the bottleneck of " + std::to_string(below) + " ms");
    }
  }

  if (levels.size() < 2 || options.same_replicas) return plan_flat_or_same(m, options.same_replicas);
  return plan_levels(m, levels);
}

// Whether some device's memory is limited: otherwise nothing binds and ZeRO is not searched.
bool limits_memory(const cluster& c) {
  if (c.devices.empty()) return c.device_memory_bytes > 0;
  for (const device_spec& d : c.devices)
    if (d.memory_bytes > 0) return true;
  return false;
}

}  // namespace

result<pipeline_plan> plan_pipedream(const model_profile& profile, const cluster& c,
                                     const pipedream_options& options) {
  const auto samples_per_s = [&](const pipeline_plan& p) {
    return p.bottleneck_ms > 0 ? 1000.0 * static_cast<double>(profile.microbatch) / p.bottleneck_ms
                               : std::numeric_limits<double>::infinity();
  };
  if (profile_modes(profile).size() > 1)
    return choose_recompute_with<pipeline_plan>(
        profile, options,
        [&](const model_profile& one, const pipedream_options& o, recompute_mode) {
          return plan_pipedream(one, c, o);
        },
        samples_per_s);
  auto plan = plan_pipedream_checked(profile, c, options, 0);
  if (plan) plan->recompute = profile.recompute;
  // ZeRO 1 only when memory binds, there are devices to share over, and it makes a faster plan
  // fit (a tie keeps the plan without it: no gather).
  if (options.max_zero < 1 || !limits_memory(c) || c.device_count() < 2 || options.max_devices == 1)
    return plan;
  // It must beat the unsharded bottleneck: b_s < b_p / (1 + 1e-9) (the rate rule below; the
  // search's bound keeps a little slack for the rounding of the rates).
  const double below = plan ? plan->bottleneck_ms / (1 + 1e-9) * (1 + 1e-12) : inf;
  auto sharded = plan_pipedream_checked(profile, c, options, 1, below);
  if (!sharded) return plan;
  const bool replicated = std::any_of(sharded->stages.begin(), sharded->stages.end(),
                                      [](const planned_stage& s) { return s.replicas > 1; });
  if (!replicated || (plan && !(samples_per_s(*sharded) > samples_per_s(*plan) * (1 + 1e-9))))
    return plan;
  sharded->recompute = profile.recompute;
  sharded->zero = 1;
  return sharded;
}

}  // namespace pipeworks
