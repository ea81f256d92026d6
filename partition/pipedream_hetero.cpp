// PipeDream's planner on heterogeneous devices (see pipedream_hetero.hpp): identical devices form
// classes, and a bisection on the bottleneck asks a reachability program whether a plan reaches it.
//
// Why classes make it exact: links are flat, so two devices with the same speed, memory and
// profile are interchangeable, and a plan is determined (up to renaming) by its split and, per
// stage, the number of devices it takes from each class. A stage taking the vector x (x_c devices
// of class c) on layers i..j with f microbatches in flight is allowed when every class with
// x_c > 0 holds memory_c(i..j, f), and then takes T(i..j, Σx) = the largest over those classes of
// Σ(fwd + bwd by the class's profile)/(Σx · speed_c), plus the all-reduce.
//
// For a bottleneck b, over suffixes so that a stage knows how many stages follow it:
//   R(0, L, 0) = true
//   R(k, i, u) = OR over j ≥ i and x ≤ u, x ≠ 0, of  R(k − 1, j + 1, u − x)
//                where stage (i..j, x, in_flight k) is allowed, T ≤ b, link(j) ≤ b (j < L − 1)
// (u: devices per class used by stages i..; k: stages i.. count). A plan with bottleneck ≤ b exists
// iff R(k, 0, u) for some k and Σu ≤ max_devices. The bottleneck of every plan is one of the
// values T_c(i..j, r) of a class c or link(j), so bisection over those sorted values finds the
// optimum exactly (the same floating-point formula is evaluated for both). When in_flight does not
// depend on k (a fixed options.in_flight, or no device with a memory limit) k is dropped, and
// N(i, u), the fewest stages over the choices reaching R(i, u), is kept beside it:
//   N(L, 0) = 0,  N(i, u) = min over the choices above of 1 + N(j + 1, u − x)
// Among plans at the optimum the one with the fewest devices (Σu), then the fewest stages (k, or
// N(0, u)), is returned; with same_replicas, over every replica count r.
// Under ZeRO 1 (zero = 1) a stage's memory and time depend on r = Σx, which the choice fixes: each
// device holds memory_c(i..j, f) less what the other r − 1 replicas hold of its optimizer state
// (zero_shared_out), and T gains the gather (zero_gather_ms); the recurrence is unchanged, the
// "allowed" test reads memory_c(i..j, f, Σx), so the program stays exact.
#include "partition/pipedream_hetero.hpp"

#include "partition/plan_inputs.hpp"
#include "partition/plan_progress.hpp"
#include "partition/zero_share.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace pipeworks {
namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double work_limit = 1e8;

struct device_class {
  double speed = 1.0;
  std::int64_t memory = 0;   // 0: unlimited
  std::string profile;       // the device profile's name; "": the plan's profile
  std::vector<int> devices;  // the cluster's numbers, ascending
  std::vector<double> compute;       // prefix sums of fwd + bwd, ms, from the class's profile
  std::vector<std::int64_t> saved;   // prefix sums of saved_bytes, from the class's profile
};

struct hetero_model {
  int layers = 0;
  int max_devices = 0;
  int in_flight = 0;  // 0: p − s
  bool track_k = false;
  int rows = 1;
  std::vector<device_class> classes;
  // A vector u of devices per class is the state Σ u_c · stride[c] (mixed radix, n_c + 1).
  std::vector<int> stride;
  int states = 1;
  std::vector<int> total;           // Σ u_c
  std::vector<std::uint64_t> used;  // bit c: u_c > 0
  std::vector<double> params;       // prefix sums of param_bytes
  std::vector<std::int64_t> fixed;  // prefix sums of 2 · param + optimizer bytes
  std::vector<std::int64_t> input;  // input_bytes of each layer (layer 0's: 0)
  recompute_mode recompute = recompute_mode::none;  // the profile's (every device profile's)
  std::vector<double> link_ms;      // 2 · activation_bytes[j] / bandwidth
  double ms_per_byte = 0;           // 0: free links
  std::int64_t slack = 0;           // bytes granted to every limited device (the excess search)
  int zero = 0;                     // ZeRO 1: a stage's r replicas share its optimizer state
  std::vector<std::int64_t> optimizer;  // prefix sums of optimizer_bytes (only with zero)
  largest_tensor_table largest;         // each range's largest optimizer tensor (only with zero)

  int count(int state, int c) const {
    return state / stride[c] % (static_cast<int>(classes[c].devices.size()) + 1);
  }
  // Σ(fwd + bwd)/(r · speed) of layers i..j on a device of class c, by its profile.
  double class_ms(int c, int i, int j, int r) const {
    const device_class& k = classes[c];
    return (k.compute[j + 1] - k.compute[i]) / (r * k.speed);
  }
  // T(i..j, r, t) = t + (r > 1 ? 2(r − 1)/r · Σparam / bw : 0), t the slowest class's class_ms
  // (+ the gather of ZeRO, (r − 1)/r · Σparam / bw)
  double with_reduce(int i, int j, int r, double t) const {
    if (r == 1) return t;
    double x = t + 2.0 * (r - 1) / r * (params[j + 1] - params[i]) * ms_per_byte;
    if (zero > 0) x += zero_gather_ms(r, params[j + 1] - params[i], ms_per_byte);
    return x;
  }
  // The stage time of layers i..j on the device vector x: its slowest class sets the pace.
  double stage_ms(int i, int j, int x) const {
    double t = 0;
    for (std::uint64_t bits = used[x]; bits != 0; bits &= bits - 1)
      t = std::max(t, class_ms(std::countr_zero(bits), i, j, total[x]));
    return with_reduce(i, j, total[x], t);
  }
  // On one of r replicas (under ZeRO less the optimizer state the others hold).
  std::int64_t memory_of(int c, int i, int j, int f, int r = 1) const {
    // fixed ≤ 3 · 2^50 by check_profile_totals; the stash saturates rather than overflow
    const device_class& k = classes[c];
    const std::int64_t shared_out =
        zero > 0 && r > 1 ? zero_shared_out(optimizer[j + 1] - optimizer[i], largest.max(i, j), r) : 0;
    // the stash under the profile's mode (stash_bytes: with full, f · input(i) + Σsaved)
    return fixed[j + 1] - fixed[i] - shared_out +
           stash_bytes(recompute, f, k.saved[j + 1] - k.saved[i], input[static_cast<std::size_t>(i)]);
  }
  // Bit c set when a device of class c holds layers i..j with f microbatches in flight, as one
  // of r replicas.
  std::uint64_t fitting(int i, int j, int f, int r = 1) const {
    std::uint64_t bits = 0;
    for (std::size_t c = 0; c < classes.size(); ++c)
      if (classes[c].memory == 0 ||
          memory_of(static_cast<int>(c), i, j, f, r) <= classes[c].memory + slack)
        bits |= std::uint64_t{1} << c;
    return bits;
  }
  // The most any device of the vector x needs for layers i..j.
  std::int64_t most_memory(int i, int j, int f, int x) const {
    std::int64_t most = 0;
    for (std::uint64_t bits = used[x]; bits != 0; bits &= bits - 1)
      most = std::max(most, memory_of(std::countr_zero(bits), i, j, f, total[x]));
    return most;
  }
};

struct stage_choice {
  int first = 0, last = 0, pick = 0;  // layers first..last on the device vector `pick`
};

// A plan's end state (k, u) and its size, for ties: k = 0 when none is reached.
struct found_plan {
  int k = 0, u = 0;
  int devices = 0, stages = 0;
};

// Fewer devices, then fewer stages.
bool smaller(const found_plan& a, const found_plan& b) {
  if (b.k == 0) return a.k != 0;
  if (a.k == 0) return false;
  return a.devices != b.devices ? a.devices < b.devices : a.stages < b.stages;
}

// The reachability table R for one bottleneck, with the choice that reached each entry and the
// stages that choice leads to (N).
struct search {
  const hetero_model& m;
  int replicas = 0;  // same_replicas: every stage's count; 0: any
  std::vector<char> reach;
  std::vector<int> cut, pick, nst;

  explicit search(const hetero_model& model) : m(model) {
    const std::size_t n = static_cast<std::size_t>(m.rows + 1) * (m.layers + 1) * m.states;
    reach.assign(n, 0);
    cut.assign(n, -1);
    pick.assign(n, 0);
    nst.assign(n, 0);
  }
  std::size_t at(int k, int i, int u) const {
    return (static_cast<std::size_t>(k) * (m.layers + 1) + i) * m.states + u;
  }

  // Fills R for bottleneck b; the best final (k, u) (fewest devices, then stages), or k = 0.
  found_plan run(double b) {
    const int L = m.layers, S = m.states, K = static_cast<int>(m.classes.size());
    std::fill(reach.begin(), reach.end(), 0);
    reach[at(m.track_k ? 0 : 1, L, 0)] = 1;
    nst[at(m.track_k ? 0 : 1, L, 0)] = 0;
    std::vector<int> lim(K), x(K);
    std::vector<std::uint64_t> fit_by_r(static_cast<std::size_t>(m.max_devices) + 1);
    for (int k = 1; k <= m.rows; ++k) {
      const int f = m.in_flight > 0 ? m.in_flight : k;
      const int after = m.track_k ? k - 1 : k;
      for (int i = L - 1; i >= 0; --i)
        for (int j = i; j < L; ++j) {
          if (j + 1 < L && m.link_ms[j] > b) continue;
          // Memory only grows with j; the most replicas need the least (under ZeRO).
          const std::uint64_t fit = m.fitting(i, j, f, m.zero > 0 ? m.max_devices : 1);
          if (fit == 0) break;
          if (m.zero > 0)
            for (int r = 1; r <= m.max_devices; ++r) fit_by_r[r] = m.fitting(i, j, f, r);
          for (int v = 0; v < S; ++v) {
            if (!reach[at(after, j + 1, v)] || m.total[v] >= m.max_devices) continue;
            for (int c = 0; c < K; ++c) {
              lim[c] = static_cast<int>(m.classes[c].devices.size()) - m.count(v, c);
              x[c] = 0;
            }
            int xs = 0;
            while (true) {  // every x ≤ n − v, x ≠ 0, as an odometer
              int c = 0;
              while (c < K && x[c] == lim[c]) {
                xs -= x[c] * m.stride[c];
                x[c] = 0;
                ++c;
              }
              if (c == K) break;
              ++x[c];
              xs += m.stride[c];
              const int u = v + xs;
              const std::uint64_t fit_x = m.zero > 0 ? fit_by_r[m.total[xs]] : fit;
              if ((m.used[xs] & ~fit_x) != 0 || m.total[u] > m.max_devices) continue;
              const int r = m.total[xs];
              if (replicas != 0 && r != replicas) continue;
              // With k tracked every choice makes k stages; else keep the fewest (N).
              const int stages = 1 + nst[at(after, j + 1, v)];
              if (reach[at(k, i, u)] && (m.track_k || nst[at(k, i, u)] <= stages)) continue;
              if (m.stage_ms(i, j, xs) > b) continue;
              reach[at(k, i, u)] = 1;
              cut[at(k, i, u)] = j;
              pick[at(k, i, u)] = xs;
              nst[at(k, i, u)] = stages;
            }
          }
        }
    }
    found_plan best;
    for (int k = 1; k <= m.rows; ++k)
      for (int u = 0; u < S; ++u)
        if (reach[at(k, 0, u)]) {
          const found_plan f{k, u, m.total[u], nst[at(k, 0, u)]};
          if (smaller(f, best)) best = f;
        }
    return best;
  }

  std::vector<stage_choice> stages(const found_plan& end) const {
    int k = end.k, u = end.u;
    std::vector<stage_choice> out;
    for (int i = 0; i < m.layers;) {
      const stage_choice s{i, cut[at(k, i, u)], pick[at(k, i, u)]};
      out.push_back(s);
      u -= s.pick;
      i = s.last + 1;
      if (m.track_k) --k;
    }
    return out;
  }
};

// The search over every replica count when all stages must share one.
struct any_replicas {
  search s;
  bool same = false;
  int most = 1;
  found_plan found;

  // Whether a plan reaches bottleneck b (the first replica count that does, with same).
  bool run(double b) {
    if (!same) {
      found = s.run(b);
      return found.k != 0;
    }
    for (int r = 1; r <= most; ++r) {
      s.replicas = r;
      found = s.run(b);
      if (found.k != 0) return true;
    }
    return false;
  }
  // As run, but with same_replicas the plan with the fewest devices, then the fewest stages, over
  // every replica count (not the smallest r: r = 2 on 1 stage beats r = 1 on 3 stages); the
  // tables are left holding that plan's search.
  bool run_best(double b) {
    if (!same) return run(b);
    found_plan best;
    int best_r = 0;
    for (int r = 1; r <= most; ++r) {
      s.replicas = r;
      const found_plan f = s.run(b);
      if (smaller(f, best)) {
        best = f;
        best_r = r;
      }
    }
    if (best_r == 0) return false;
    if (best_r != most) {  // the last run was another r: fill the tables again
      s.replicas = best_r;
      s.run(b);
    }
    found = best;
    return true;
  }
  std::vector<stage_choice> stages() const { return s.stages(found); }
};

std::string bytes_text(std::int64_t b) { return std::to_string(b) + " bytes"; }

// The profile and the options were checked by plan_pipedream; here the device list and the
// device profiles it names.
status check_inputs(const model_profile& profile, const cluster& c, const pipedream_options& o) {
  if (c.devices.empty())
    return make_error("plan_pipedream_devices needs a cluster given as a list of devices");
  if (c.levels.size() > 1)
    return make_error("a cluster of listed devices has one flat level, not " +
                      std::to_string(c.levels.size()));
  if (!c.levels.empty() && !(c.levels[0].bandwidth_bytes_per_s > 0))
    return make_error("cluster level " + c.levels[0].name +
                      ": bandwidth_bytes_per_s must be positive");
  for (const device_spec& d : c.devices) {
    const std::string name = device_label(c, static_cast<int>(&d - c.devices.data()));
    if (!(d.speed > 0) || !std::isfinite(d.speed))
      return make_error(name + ": speed must be finite and positive");
    if (d.memory_bytes < 0)
      return make_error(name + ": memory_bytes must be 0 (unlimited) or positive");
  }
  if (status s = check_device_profiles(profile, c, o.device_profiles); !s) return s;
  return check_profile_totals(profile);
}

// Groups identical devices; fills the state tables. An error when the search would be too big.
status build_model(const model_profile& profile, const cluster& c, const pipedream_options& o,
                   hetero_model& m) {
  const int n = static_cast<int>(c.devices.size());
  const int L = static_cast<int>(profile.layers.size());
  for (int d = 0; d < n; ++d) {
    const device_spec& s = c.devices[d];
    auto same = [&](const device_class& k) {
      return k.speed == s.speed && k.memory == s.memory_bytes && k.profile == s.profile;
    };
    auto it = std::find_if(m.classes.begin(), m.classes.end(), same);
    if (it == m.classes.end())
      it = m.classes.insert(m.classes.end(),
                            device_class{s.speed, s.memory_bytes, s.profile, {}, {}, {}});
    it->devices.push_back(d);
  }
  // Faster classes first, then more memory (0, unlimited, counts as most), then by profile.
  std::stable_sort(m.classes.begin(), m.classes.end(),
                   [](const device_class& a, const device_class& b) {
                     if (a.speed != b.speed) return a.speed > b.speed;
                     const auto mem = [](std::int64_t x) {
                       return x == 0 ? std::numeric_limits<std::int64_t>::max() : x;
                     };
                     if (a.memory != b.memory) return mem(a.memory) > mem(b.memory);
                     return a.profile < b.profile;
                   });
  bool limited = false;
  for (const device_class& k : m.classes) limited = limited || k.memory > 0;
  m.layers = L;
  m.max_devices = o.max_devices > 0 ? std::min(o.max_devices, n) : n;
  m.in_flight = o.in_flight;
  m.track_k = limited && o.in_flight == 0;
  m.rows = m.track_k ? std::min(L, m.max_devices) : 1;

  double pairs = 1;
  for (const device_class& k : m.classes) {
    const double nc = static_cast<double>(k.devices.size());
    pairs *= (nc + 1) * (nc + 2) / 2;
  }
  const double work = m.rows * (L * (L + 1.0) / 2) * pairs * (o.same_replicas ? m.max_devices : 1);
  if (work > work_limit || m.classes.size() > 63)
    return make_error("pipedream planner: " + std::to_string(n) + " devices in " +
                      std::to_string(m.classes.size()) +
                      " classes of equal (speed, memory, profile) and " +
                      std::to_string(L) + " layers make a search of about " +
                      std::to_string(static_cast<long long>(std::min(work, 1e18))) +
                      " stage choices, over the limit of " +
                      std::to_string(static_cast<long long>(work_limit)) +
                      "; give the devices fewer distinct speeds and memories (round them to a few "
                      "common values), "
                      "merge layers in the profile, or use the 2bw planner");

  m.stride.assign(m.classes.size(), 1);
  for (std::size_t k = 1; k < m.classes.size(); ++k)
    m.stride[k] = m.stride[k - 1] * (static_cast<int>(m.classes[k - 1].devices.size()) + 1);
  m.states = m.stride.back() * (static_cast<int>(m.classes.back().devices.size()) + 1);
  m.total.assign(m.states, 0);
  m.used.assign(m.states, 0);
  for (int u = 0; u < m.states; ++u)
    for (std::size_t k = 0; k < m.classes.size(); ++k)
      if (const int x = m.count(u, static_cast<int>(k)); x > 0) {
        m.total[u] += x;
        m.used[u] |= std::uint64_t{1} << k;
      }

  const double bw = c.levels.empty() ? 0.0 : c.levels[0].bandwidth_bytes_per_s;
  m.ms_per_byte = bw > 0 ? 1000.0 / bw : 0.0;
  m.params.assign(L + 1, 0.0);
  m.fixed.assign(L + 1, 0);
  m.link_ms.assign(L, 0.0);
  m.input.assign(L, 0);
  m.recompute = profile.recompute;
  for (int l = 0; l < L; ++l) {
    const layer_profile& x = profile.layers[l];
    m.input[l] = input_bytes(profile, l);
    m.params[l + 1] = m.params[l] + static_cast<double>(x.param_bytes);
    m.fixed[l + 1] = m.fixed[l] + 2 * x.param_bytes + x.optimizer_bytes;
    m.link_ms[l] = 2.0 * static_cast<double>(x.activation_bytes) * m.ms_per_byte;
  }
  for (device_class& k : m.classes) {
    const model_profile& p = k.profile.empty() ? profile : o.device_profiles.at(k.profile);
    k.compute.assign(L + 1, 0.0);
    k.saved.assign(L + 1, 0);
    for (int l = 0; l < L; ++l) {
      k.compute[l + 1] = k.compute[l] + p.layers[l].fwd_ms + p.layers[l].bwd_ms;
      k.saved[l + 1] = k.saved[l] + p.layers[l].saved_bytes;
    }
  }
  return {};
}

// Every value a plan's bottleneck can take, sorted: a stage's time is its slowest class's.
std::vector<double> bottleneck_values(const hetero_model& m) {
  // Classes that differ only in memory give the same times: one of each (speed, profile).
  std::vector<int> timing;
  for (std::size_t c = 0; c < m.classes.size(); ++c) {
    bool seen = false;
    for (int d : timing)
      seen = seen || (m.classes[d].speed == m.classes[c].speed &&
                      m.classes[d].profile == m.classes[c].profile);
    if (!seen) timing.push_back(static_cast<int>(c));
  }
  std::vector<double> v;
  for (int i = 0; i < m.layers; ++i)
    for (int j = i; j < m.layers; ++j) {
      for (int c : timing)
        for (int r = 1; r <= m.max_devices; ++r)
          v.push_back(m.with_reduce(i, j, r, m.class_ms(c, i, j, r)));
      if (j + 1 < m.layers) v.push_back(m.link_ms[j]);
    }
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// The error when no plan fits: the least slack that lets one fit is by how much the best plan
// exceeds a device's memory (bisection; at slack = the whole model's need every stage fits).
error memory_error(hetero_model& m, any_replicas& a, const cluster& c) {
  std::int64_t lo = 0, hi = 0;
  for (std::size_t k = 0; k < m.classes.size(); ++k)
    hi = std::max(hi, m.memory_of(static_cast<int>(k), 0, m.layers - 1,
                                  m.in_flight > 0 ? m.in_flight : m.rows));
  while (hi - lo > 1) {
    m.slack = lo + (hi - lo) / 2;
    if (a.run(inf))
      hi = m.slack;
    else
      lo = m.slack;
  }
  m.slack = hi;
  a.run_best(inf);
  const std::vector<stage_choice> st = a.stages();
  const int p = static_cast<int>(st.size());
  std::vector<int> next(m.classes.size(), 0);
  std::int64_t worst = std::numeric_limits<std::int64_t>::min(), need_at = 0;
  int device = 0;
  for (int s = 0; s < p; ++s) {
    for (std::size_t k = 0; k < m.classes.size(); ++k)
      for (int x = m.count(st[s].pick, static_cast<int>(k)); x > 0; --x) {
        const std::int64_t need = m.memory_of(static_cast<int>(k), st[s].first, st[s].last,
                                              m.in_flight > 0 ? m.in_flight : p - s);
        const int d = m.classes[k].devices[next[k]++];
        const std::int64_t cap = m.classes[k].memory;
        if (cap > 0 && need - cap > worst) {
          worst = need - cap;
          need_at = need;
          device = d;
        }
      }
  }
  return make_error("no plan fits in memory: the smallest plan on " +
                    std::to_string(m.max_devices) + " devices needs " + bytes_text(need_at) +
                    " on " + device_label(c, device) + ", " + bytes_text(worst) +
                    " more than the " + bytes_text(c.devices[device].memory_bytes) +
                    " it has; give more devices or devices with more memory, profile at a "
                    "smaller microbatch, fix in_flight (fewer microbatches in flight per stage), "
                    "or use the 2bw planner (--planner 2bw)");
}

}  // namespace

result<pipeline_plan> plan_pipedream_devices(const model_profile& profile, const cluster& c,
                                             const pipedream_options& options, int zero,
                                             double below) {
  if (status s = check_inputs(profile, c, options); !s) return make_error(s.message());
  hetero_model m;
  if (status s = build_model(profile, c, options, m); !s) return make_error(s.message());
  if (zero > 0) {
    m.zero = zero;
    m.optimizer.assign(static_cast<std::size_t>(m.layers) + 1, 0);
    for (int l = 0; l < m.layers; ++l) m.optimizer[l + 1] = m.optimizer[l] + profile.layers[l].optimizer_bytes;
    m.largest = largest_tensor_table(profile);
  }
  any_replicas a{search(m), options.same_replicas, m.max_devices, {}};
  // (Under ZeRO the caller keeps the unsharded plan's error: that one's excess says more.)
  if (!a.run(inf)) return zero > 0 ? make_error("no plan fits in memory under ZeRO 1") : memory_error(m, a, c);
  if (zero > 0 && below < inf && !a.run(below))
    return make_error("no plan under ZeRO 1 beats the bottleneck of " + std::to_string(below) + " ms");

  // Bisection over the sorted values: the least one a plan reaches is the optimum.
  const std::vector<double> values = bottleneck_values(m);
  // values[hi] is reached (every plan's bottleneck is a value); values[lo] is not (lo = −1: none).
  std::ptrdiff_t lo = -1, hi = static_cast<std::ptrdiff_t>(values.size()) - 1;
  const long long probes = std::bit_width(values.size() + 1);
  const std::string what = "bottleneck search " + std::to_string(next_plan_search()) + ", probe";
  for (long long probe = 1; hi - lo > 1; ++probe) {
    report_plan_progress(what, probe, probes);
    const std::ptrdiff_t mid = lo + (hi - lo) / 2;
    if (a.run(values[static_cast<std::size_t>(mid)]))
      hi = mid;
    else
      lo = mid;
  }
  a.run_best(values[static_cast<std::size_t>(hi)]);

  const std::vector<stage_choice> st = a.stages();
  const int p = static_cast<int>(st.size());
  pipeline_plan plan;
  std::vector<int> next(m.classes.size(), 0);
  for (int s = 0; s < p; ++s) {
    planned_stage ps;
    ps.first_layer = st[s].first;
    ps.last_layer = st[s].last;
    ps.replicas = m.total[st[s].pick];
    const int f = m.in_flight > 0 ? m.in_flight : p - s;
    for (std::size_t k = 0; k < m.classes.size(); ++k)
      for (int x = m.count(st[s].pick, static_cast<int>(k)); x > 0; --x) {
        const int d = m.classes[k].devices[next[k]++];
        ps.devices.push_back(d);
        // indexed by device number, 0 for the unused
        if (plan.memory_bytes.size() <= static_cast<std::size_t>(d))
          plan.memory_bytes.resize(static_cast<std::size_t>(d) + 1, 0);
        plan.memory_bytes[static_cast<std::size_t>(d)] =
            m.memory_of(static_cast<int>(k), ps.first_layer, ps.last_layer, f, ps.replicas);
      }
    std::sort(ps.devices.begin(), ps.devices.end());
    ps.time_ms = m.stage_ms(ps.first_layer, ps.last_layer, st[s].pick);
    ps.memory_bytes = m.most_memory(ps.first_layer, ps.last_layer, f, st[s].pick);
    plan.bottleneck_ms = std::max(plan.bottleneck_ms, ps.time_ms);
    if (s + 1 < p) plan.bottleneck_ms = std::max(plan.bottleneck_ms, m.link_ms[ps.last_layer]);
    plan.stages.push_back(std::move(ps));
  }
  plan.predicted_step_ms = plan.bottleneck_ms * (3 * p - 1);
  return plan;
}

}  // namespace pipeworks
