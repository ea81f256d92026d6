// PipeDream's planner (Narayanan et al., SOSP'19, §3.1): contiguous stages, each replicated over
// r devices, minimising the pipeline's bottleneck (slowest stage or link) within the devices'
// memory. Exact by binary search on the bottleneck: "is there a plan whose every stage and link
// takes at most B, on at most n devices?" is monotone in B and answered by a dynamic program
// over layer ranges that gives every stage the fewest replicas reaching B.
//
// Choices, documented here because the header leaves them open:
// - in_flight = 0 (default) is PipeDream's 1F1B count: stage s of p keeps p − s microbatches'
//   saved bytes (the first stage p, the last 1). A positive options.in_flight applies to every
//   stage.
// - Memory per device of a stage = Σ param_bytes · 2 (weights and gradients) + Σ optimizer_bytes
//   + in_flight · Σ saved_bytes; replicas each hold the whole stage.
// - Microbatches per step m = 2p: predicted_step_ms = bottleneck_ms · (m + p − 1) = (3p − 1) ·
//   bottleneck_ms (fill, steady state and drain of a 1F1B pipeline).
// - Hierarchical clusters: the program is the flat one over all devices, with two bandwidths that
//   depend only on the plan's shape, not on where a stage lands: a stage's all-reduce over r
//   replicas uses the bandwidth of the innermost level whose unit holds r devices (replicas packed
//   into as few units as possible), and every link between stages uses the bandwidth of the level
//   spanning all the devices the plan may use (consecutive stages may sit in different units).
//   PipeDream's level-by-level recursion (inner optimal sub-pipelines as outer "layers") is not
//   done; on one level the objective is exactly the header's.
// - Heterogeneous clusters (`devices`): the slowest device's speed and the smallest memory stand
//   for every device; bandwidth is levels[0]'s, or free when no level is given.
#include "partition/pipedream_planner.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

namespace pipeworks {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr int no_devices = std::numeric_limits<int>::max() / 4;

struct flat_model {
  int layers = 0;
  int devices = 0;
  std::int64_t memory = 0;          // per device; 0: unlimited
  int in_flight = 0;                // 0: p − s
  std::vector<double> compute;      // prefix sums of (fwd + bwd) / speed, ms
  std::vector<double> params;       // prefix sums of param_bytes
  std::vector<std::int64_t> fixed;  // prefix sums of 2 · param + optimizer bytes
  std::vector<std::int64_t> saved;  // prefix sums of saved_bytes
  std::vector<double> link_ms;      // 2 · activation_bytes[j] / link bandwidth, ms
  std::vector<int> unit_size;       // devices in one unit of each level, innermost first
  std::vector<double> ms_per_byte;  // 1000 / bandwidth of each level (0: free)

  double compute_ms(int i, int j) const { return compute[j + 1] - compute[i]; }
  double param_bytes(int i, int j) const { return params[j + 1] - params[i]; }
  std::int64_t memory_of(int i, int j, int f) const {
    return fixed[j + 1] - fixed[i] + static_cast<std::int64_t>(f) * (saved[j + 1] - saved[i]);
  }
  bool fits(int i, int j, int f) const { return memory == 0 || memory_of(i, j, f) <= memory; }
  // The level an all-reduce over r replicas runs at: the innermost whose unit holds r devices.
  int level_of(int r) const {
    for (int l = 0; l < static_cast<int>(unit_size.size()); ++l)
      if (r <= unit_size[l]) return l;
    return static_cast<int>(unit_size.size()) - 1;
  }
  // T(i..j, r) = Σ(fwd + bwd)/r + (r > 1 ? 2(r − 1)/r · Σparam_bytes / bw : 0)
  double stage_ms(int i, int j, int r) const {
    const double c = compute_ms(i, j) / r;
    if (r == 1) return c;
    return c + 2.0 * (r - 1) / r * param_bytes(i, j) * ms_per_byte[level_of(r)];
  }
  // The fewest replicas r ≤ cap with T(i..j, r) ≤ b, or no_devices. Within a level T(r) =
  // a + (c − a)/r with a = 2 · Σparam · ms_per_byte: decreasing in r when c > a (else never below
  // c, already over b); levels further out are slower, so the first level that reaches b holds
  // the answer.
  int min_replicas(int i, int j, double b, int cap) const {
    if (stage_ms(i, j, 1) <= b) return 1;
    const double c = compute_ms(i, j);
    int lo = 2;
    for (int l = 0; l < static_cast<int>(unit_size.size()) && lo <= cap; ++l) {
      const int hi = std::min(cap, l + 1 == static_cast<int>(unit_size.size())
                                       ? std::numeric_limits<int>::max()
                                       : unit_size[l]);
      if (lo > hi) continue;
      const double a = 2.0 * param_bytes(i, j) * ms_per_byte[l];
      if (c > a && b > a) {
        const double need = std::ceil((c - a) / (b - a));
        if (need <= static_cast<double>(hi)) {
          int r = std::max(lo, static_cast<int>(need));
          while (r > lo && stage_ms(i, j, r - 1) <= b) --r;  // rounding: settle on the formula
          while (r <= hi && stage_ms(i, j, r) > b) ++r;
          if (r <= hi) return r;
        }
      }
      lo = hi + 1;
    }
    return no_devices;
  }
};

// The feasibility program for a bottleneck b, over suffixes so that a stage knows how many
// stages follow it (its in_flight under 1F1B):
//   G(k, i) = the fewest devices for layers i..L−1 as k stages, every stage and link ≤ b
//   G(0, L) = 0
//   G(k, i) = min over the first stage [i..j] of  r(i..j) + G(k − 1, j + 1)
//             where r(i..j) = the fewest replicas with T(i..j, r) ≤ b,
//                   link(j) = 2 · activation_bytes[j] / bw ≤ b when j < L − 1,
//                   memory(i..j, in_flight = k) fits a device.
// A plan with bottleneck ≤ b exists iff min over k of G(k, 0) ≤ n; the answer is the least b for
// which one does, found by bisection on the bits of b (non-negative doubles order like their bit
// patterns), so it equals the max of an actual plan's T and link values exactly. This is
// PipeDream's A(j, m) = min over [i..j], r ≤ m of max(A(i − 1, m − r), link(i − 1), T(i..j, r))
// turned inside out: the same plans, searched by bottleneck instead of by device count.
// When in_flight does not depend on k (a fixed options.in_flight, or unlimited memory) k is
// dropped: G(i) = min over j of r(i..j) + G(j + 1), O(L²) per b.
struct feasibility {
  const flat_model& m;
  bool track_k;
  int rows;                   // k = 1..rows (or a single row)
  std::vector<int> best;      // (rows + 1) × (L + 1)
  std::vector<int> cut;       // the first stage's last layer
  std::vector<int> replicas;  // its replicas

  explicit feasibility(const flat_model& model)
      : m(model),
        track_k(model.memory != 0 && model.in_flight == 0),
        rows(track_k ? std::min(model.layers, model.devices) : 1) {
    best.assign(static_cast<std::size_t>(rows + 1) * (m.layers + 1), no_devices);
    cut.assign(best.size(), -1);
    replicas.assign(best.size(), 0);
  }
  std::size_t at(int k, int i) const { return static_cast<std::size_t>(k) * (m.layers + 1) + i; }

  // The k of the best plan (its stage count when tracked), or 0 when none fits in n devices.
  int run(double b) {
    const int L = m.layers;
    std::fill(best.begin(), best.end(), no_devices);
    best[at(0, L)] = 0;
    for (int k = 1; k <= rows; ++k) {
      const int f = m.in_flight > 0 ? m.in_flight : k;
      for (int i = L - 1; i >= 0; --i) {
        int bi = no_devices, cj = -1, cr = 0;
        for (int j = i; j < L; ++j) {
          const int rest = j + 1 == L ? (track_k ? (k == 1 ? 0 : no_devices) : 0)
                                      : (track_k ? best[at(k - 1, j + 1)] : best[at(k, j + 1)]);
          if (rest >= m.devices) continue;
          if (j + 1 < L && m.link_ms[j] > b) continue;
          if (!m.fits(i, j, f)) break;  // memory only grows with j
          const int r = m.min_replicas(i, j, b, m.devices - rest);
          if (r == no_devices || r + rest >= bi) continue;
          bi = r + rest;
          cj = j;
          cr = r;
        }
        best[at(k, i)] = bi;
        cut[at(k, i)] = cj;
        replicas[at(k, i)] = cr;
      }
    }
    int kb = 0;
    for (int k = 1; k <= rows; ++k)
      if (best[at(k, 0)] <= m.devices && (kb == 0 || best[at(k, 0)] < best[at(kb, 0)])) kb = k;
    return kb;
  }

  std::vector<planned_stage> stages(int k) const {
    std::vector<planned_stage> out;
    int i = 0, next_device = 0;
    while (i < m.layers) {
      planned_stage s;
      s.first_layer = i;
      s.last_layer = cut[at(k, i)];
      s.replicas = replicas[at(k, i)];
      for (int d = 0; d < s.replicas; ++d) s.devices.push_back(next_device++);
      s.time_ms = m.stage_ms(s.first_layer, s.last_layer, s.replicas);
      out.push_back(s);
      i = s.last_layer + 1;
      if (track_k) --k;
    }
    return out;
  }
};

// The least peak memory per device of any split into at most n stages (replicas do not change
// it): P(k, i) = min over j of max(memory(i..j, in_flight(k)), P(k − 1, j + 1)), P(0, L) = 0.
std::int64_t least_peak_memory(const flat_model& m) {
  const int L = m.layers, rows = std::min(L, m.devices);
  constexpr std::int64_t big = std::numeric_limits<std::int64_t>::max();
  std::vector<std::int64_t> prev(L + 1, big), cur(L + 1, big);
  prev[L] = 0;
  std::int64_t least = big;
  for (int k = 1; k <= rows; ++k) {
    const int f = m.in_flight > 0 ? m.in_flight : k;
    std::fill(cur.begin(), cur.end(), big);
    for (int i = L - 1; i >= 0; --i)
      for (int j = i; j < L; ++j)
        if (prev[j + 1] != big) cur[i] = std::min(cur[i], std::max(m.memory_of(i, j, f), prev[j + 1]));
    least = std::min(least, cur[0]);
    std::swap(prev, cur);
  }
  return least;
}

std::string bytes_text(std::int64_t b) { return std::to_string(b) + " bytes"; }

}  // namespace

result<pipeline_plan> plan_pipedream(const model_profile& profile, const cluster& c,
                                     const pipedream_options& options) {
  // Check the arguments.
  const int L = static_cast<int>(profile.layers.size());
  if (L == 0) return make_error("cannot plan a pipeline for a profile with no layers");
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

  flat_model m;
  m.layers = L;
  m.in_flight = options.in_flight;
  double speed = 1.0;
  int count = 0;
  if (!c.devices.empty()) {
    count = static_cast<int>(c.devices.size());
    speed = inf;
    for (const device_spec& d : c.devices) {
      if (!(d.speed > 0)) return make_error("device " + d.name + ": speed must be positive");
      speed = std::min(speed, d.speed);
      if (d.memory_bytes > 0 && (m.memory == 0 || d.memory_bytes < m.memory)) m.memory = d.memory_bytes;
    }
    m.unit_size = {count};
    const double bw = c.levels.empty() ? 0.0 : c.levels[0].bandwidth_bytes_per_s;
    m.ms_per_byte = {bw > 0 ? 1000.0 / bw : 0.0};
  } else {
    if (c.levels.empty()) return make_error("the cluster has neither levels nor devices");
    long long units = 1;
    for (const cluster_level& lv : c.levels) {
      if (lv.count < 1) return make_error("cluster level " + lv.name + ": count must be at least 1");
      if (!(lv.bandwidth_bytes_per_s > 0))
        return make_error("cluster level " + lv.name + ": bandwidth_bytes_per_s must be positive");
      units *= lv.count;
      if (units > (1 << 24)) return make_error("the cluster has too many devices to plan for");
      m.unit_size.push_back(static_cast<int>(units));
      m.ms_per_byte.push_back(1000.0 / lv.bandwidth_bytes_per_s);
    }
    count = static_cast<int>(units);
    m.memory = std::max<std::int64_t>(c.device_memory_bytes, 0);
  }
  m.devices = options.max_devices > 0 ? std::min(options.max_devices, count) : count;
  // Links: the level spanning every device the plan may use.
  const double link_ms_per_byte = m.ms_per_byte[m.level_of(m.devices)];

  m.compute.assign(L + 1, 0.0);
  m.params.assign(L + 1, 0.0);
  m.fixed.assign(L + 1, 0);
  m.saved.assign(L + 1, 0);
  m.link_ms.assign(L, 0.0);
  for (int l = 0; l < L; ++l) {
    const layer_profile& x = profile.layers[l];
    m.compute[l + 1] = m.compute[l] + (x.fwd_ms + x.bwd_ms) / speed;
    m.params[l + 1] = m.params[l] + static_cast<double>(x.param_bytes);
    m.fixed[l + 1] = m.fixed[l] + 2 * x.param_bytes + x.optimizer_bytes;
    m.saved[l + 1] = m.saved[l] + x.saved_bytes;
    m.link_ms[l] = 2.0 * static_cast<double>(x.activation_bytes) * link_ms_per_byte;
  }

  feasibility f(m);
  // Any plan at all (memory is the only constraint at b = ∞)?
  int k = f.run(inf);
  if (k == 0) {
    const std::int64_t least = least_peak_memory(m);
    return make_error("no plan fits in memory: the smallest plan on " + std::to_string(m.devices) +
                      " devices needs " + bytes_text(least) + " per device, " +
                      bytes_text(least - m.memory) + " more than the " + bytes_text(m.memory) +
                      " a device has");
  }
  auto bottleneck = [&](const std::vector<planned_stage>& st) {
    double b = 0;
    for (std::size_t s = 0; s < st.size(); ++s) {
      b = std::max(b, st[s].time_ms);
      if (s + 1 < st.size()) b = std::max(b, m.link_ms[st[s].last_layer]);
    }
    return b;
  };
  // Bisection on the bit patterns of [0, b0]: hi always feasible, lo never (lo = −1: none yet).
  std::int64_t hi = std::bit_cast<std::int64_t>(bottleneck(f.stages(k)));
  std::int64_t lo = -1;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (f.run(std::bit_cast<double>(mid)) != 0) hi = mid;
    else lo = mid;
  }
  k = f.run(std::bit_cast<double>(hi));

  pipeline_plan plan;
  plan.stages = f.stages(k);
  const int p = static_cast<int>(plan.stages.size());
  for (int s = 0; s < p; ++s) {
    planned_stage& st = plan.stages[s];
    st.memory_bytes = m.memory_of(st.first_layer, st.last_layer,
                                  m.in_flight > 0 ? m.in_flight : p - s);
    for (int d = 0; d < st.replicas; ++d) plan.memory_bytes.push_back(st.memory_bytes);
  }
  plan.bottleneck_ms = bottleneck(plan.stages);
  const int microbatches = 2 * p;
  plan.predicted_step_ms = plan.bottleneck_ms * (microbatches + p - 1);
  return plan;
}

}  // namespace pipeworks
