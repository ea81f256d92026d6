// PipeDream's program on one pool of devices, exact by bisection on the bottleneck, and its
// same_replicas variant. The feasibility programs are written out above each one.
#include "partition/pipedream_flat.hpp"

#include <algorithm>
#include <cmath>

#include "partition/pipedream_search.hpp"

namespace pipeworks::pipedream {

int flat_model::aligned_level_of(int r) const {
  for (int l = 0; l < static_cast<int>(unit_size.size()); ++l)
    if (unit_size[l] % r == 0) return l;
  return static_cast<int>(unit_size.size()) - 1;
}

// T(r) = a + (t − a)/r with a = 2 · param · ms_per_byte (3 · under ZeRO, the gather's share):
// decreasing in r when t > a, else never below t. The closed form gives the candidate; the
// formula itself settles rounding.
int fewest_replicas(double t, double param_bytes, double ms_per_byte, double x, int cap, int zero) {
  if (t <= x) return 1;
  const double a = (zero > 0 ? 3.0 : 2.0) * param_bytes * ms_per_byte;
  if (!(t > a && x > a) || cap < 2) return no_devices;
  const double need = std::ceil((t - a) / (x - a));
  if (!(need <= static_cast<double>(cap) + 1)) return no_devices;
  int r = std::clamp(static_cast<int>(need), 2, cap);
  while (r > 2 && replicated_ms(t, param_bytes, ms_per_byte, r - 1, zero) <= x) --r;
  while (r <= cap && replicated_ms(t, param_bytes, ms_per_byte, r, zero) > x) ++r;
  return r <= cap ? r : no_devices;
}

// memory_of(i, j, f, r) = memory_of(i, j, f, 1) − optimizer + zero_share(optimizer, largest, r):
// it fits when zero_share ≤ room = memory − (memory_of(i, j, f, 1) − optimizer), i.e. when the
// largest tensor fits the room and r ≥ ⌈optimizer / room⌉; the check settles the edges.
int flat_model::fewest_fitting(int i, int j, int f, int cap) const {
  if (fits(i, j, f, 1)) return 1;
  if (zero == 0 || cap < 2) return no_devices;
  const std::int64_t opt = optimizer[j + 1] - optimizer[i];
  const std::int64_t room = memory - (memory_of(i, j, f, 1) - opt);
  if (opt == 0 || room <= 0 || largest.max(i, j) > room) return no_devices;  // nothing to share
  const std::int64_t need = (opt + room - 1) / room;
  if (need > cap) return no_devices;
  int r = static_cast<int>(std::max<std::int64_t>(2, need));
  while (r > 2 && fits(i, j, f, r - 1)) --r;
  while (r <= cap && !fits(i, j, f, r)) ++r;
  return r <= cap ? r : no_devices;
}

// Level l serves r in (unit_size[l − 1], unit_size[l]] (the last level up to cap) at its own
// bandwidth, where T = a + (t − a)/r. The ranges are visited in order of r, so the first one that
// holds an r with T ≤ b gives the fewest. fewest_replicas answers only where T falls with r, so
// an answer below a range's first r means that first r serves too. With least > 1 (memory asks
// for at least that many, under ZeRO) a range starts at least there: its first r serves, or T
// falls there and fewest_replicas's answer past it is the fewest, or no r of the range serves.
int flat_model::min_replicas(int i, int j, double b, int cap, int least) const {
  if (least <= 1 && stage_ms(i, j, 1) <= b) return 1;
  const int levels = static_cast<int>(unit_size.size());
  int lo = 2;
  for (int l = 0; l < levels && lo <= cap; ++l) {
    const int hi = std::min(cap, l + 1 == levels ? cap : unit_size[l]);
    const int start = std::max(lo, least);
    if (start > hi) {
      lo = std::max(lo, hi + 1);
      continue;
    }
    const double t = compute_ms(i, j), p = param_bytes(i, j);
    if (start > lo && replicated_ms(t, p, ms_per_byte[l], start, zero) <= b) return start;
    // fewest_replicas searches 2..hi; a level's r must also be ≥ start.
    const int r = fewest_replicas(t, p, ms_per_byte[l], b, hi, zero);
    if (r != no_devices && (start == lo || r > start)) return std::max(r, start);  // r ≤ hi
    lo = hi + 1;
  }
  return no_devices;
}

double flat_bottleneck(const flat_model& m, const std::vector<planned_stage>& st) {
  double b = 0;
  for (std::size_t s = 0; s < st.size(); ++s) {
    b = std::max(b, st[s].time_ms);
    if (s + 1 < st.size()) b = std::max(b, m.link_ms[st[s].last_layer]);
  }
  return b;
}

double placed_bottleneck(const flat_model& m, std::vector<planned_stage>& st) {
  const int levels = static_cast<int>(m.unit_size.size());
  const auto level_spanning = [&](int d, int e) {
    for (int l = 0; l < levels; ++l)
      if (d / m.unit_size[l] == e / m.unit_size[l]) return l;
    return levels - 1;
  };
  double b = 0;
  for (std::size_t s = 0; s < st.size(); ++s) {
    planned_stage& x = st[s];
    const int l = level_spanning(x.devices.front(), x.devices.back());
    x.time_ms = replicated_ms(m.compute_ms(x.first_layer, x.last_layer),
                              m.param_bytes(x.first_layer, x.last_layer), m.ms_per_byte[l], x.replicas,
                              m.zero);
    b = std::max(b, x.time_ms);
    if (s + 1 < st.size()) {
      const int k = level_spanning(x.devices.front(), st[s + 1].devices.back());
      b = std::max(b, link_cost(m.activation[x.last_layer], m.ms_per_byte[k]));
    }
  }
  return b;
}

namespace {

planned_stage make_stage(int i, int j, int r, double time_ms, int& next_device) {
  planned_stage s;
  s.first_layer = i;
  s.last_layer = j;
  s.replicas = r;
  for (int d = 0; d < r; ++d) s.devices.push_back(next_device++);
  s.time_ms = time_ms;
  return s;
}

planned_stage make_stage(const flat_model& m, int i, int j, int r, int& next_device) {
  return make_stage(i, j, r, m.stage_ms(i, j, r), next_device);
}

// With a fixed in_flight f (or unlimited memory) a stage's memory does not depend on its place:
//   G(L) = 0,  G(i) = min over j of r(i..j) + G(j + 1)
// where r(i..j) = the fewest replicas with T(i..j, r) ≤ b, link(j) ≤ b when j < L − 1, and
// memory(i..j, f, r) fits a device; a plan with bottleneck ≤ b exists iff G(0) ≤ n. Without ZeRO
// memory does not depend on r; under it memory(i..j, f, r) falls with r (each replica holds 1/r of
// the optimizer state, at least its largest tensor), so r(i..j) = the fewest r ≥ fewest_fitting
// with T ≤ b (replicas_for). r(i..j) only grows with j (T(i..j, r) and memory(i..j, f, r) do for
// every r), so the scan over j stops once r reaches the best total found or no r ≤ n serves.
struct fixed_in_flight_program {
  const flat_model& m;
  int f;
  fewest_units_program units;

  fixed_in_flight_program(const flat_model& model, int in_flight)
      : m(model), f(in_flight), units(model.layers) {}

  bool run(double b) {
    return units.run_by_runs(
        m.layers, m.devices,
        [&](int i, int j) { return m.replicas_for(i, j, f, b, m.devices); },
        [&](int i, int j, int r) { return m.fits(i, j, f, r) && m.stage_ms(i, j, r) <= b; },
        [&](int j) { return m.link_ms[j] <= b; });
  }

  std::vector<planned_stage> stages() const {
    std::vector<planned_stage> out;
    int next_device = 0;
    for (int i = 0; i < m.layers; i = units.cut[i] + 1)
      out.push_back(make_stage(m, i, units.cut[i], units.reps[i], next_device));
    return out;
  }
};

// With in_flight = p − s a stage keeps as many microbatches as there are stages from it to the
// end, k, so the suffix program carries k:
//   G(k, i) = the fewest devices for layers i..L−1 as k stages, every stage and link ≤ b
//   G(0, L) = 0,  G(k, i) = min over j of r(i..j) + G(k − 1, j + 1), memory(i..j, k) fits.
// A suffix (k, g) dominates (k', g') when k ≤ k' and g ≤ g': every stage before it keeps fewer
// microbatches and fewer devices are used. So each i keeps only its Pareto front (k up, g down),
// which is what makes 1,000 layers on 1,024 devices fast; the answer is the same as over all k.
// Under ZeRO the stage's r is the fewest with T ≤ b that holds memory(i..j, k, r):
//   G(k, i) = min over j of r(i..j, k) + G(k − 1, j + 1),  r(i..j, k) = replicas_for(i, j, k, b)
// r(i..j, k) only grows with k (a stage keeping more microbatches needs at least as many
// replicas to share its optimizer state), so the dominance above still holds and the front is exact.
struct in_flight_by_depth_program {
  struct entry {
    int k, g, cut, reps, next;  // next: the entry of the rest of the plan (in front[cut + 1])
  };
  const flat_model& m;
  std::vector<entry> pool;
  std::vector<int> begin, end;
  std::vector<int> cand_g, cand_j, cand_r, cand_next;

  explicit in_flight_by_depth_program(const flat_model& model)
      : m(model), begin(model.layers + 1), end(model.layers + 1),
        cand_g(model.layers + 2, no_devices), cand_j(model.layers + 2), cand_r(model.layers + 2),
        cand_next(model.layers + 2) {}

  bool run(double b) {
    const int L = m.layers;
    pool.clear();
    pool.push_back({0, 0, -1, 0, -1});
    begin[L] = 0;
    end[L] = 1;
    for (int i = L - 1; i >= 0; --i) {
      int kmin = L + 1, kmax = -1;
      int r = 0;
      for (int j = i; j < L; ++j) {
        // At most replicas a stage needs least memory (without ZeRO any r needs the same).
        if (!m.fits(i, j, 1, m.devices)) break;
        // r(i..j) only grows with j, so while the last one still serves it is the fewest (by
        // time alone; memory may ask for more under ZeRO, below).
        if (r == 0 || m.stage_ms(i, j, r) > b) r = m.min_replicas(i, j, b, m.devices);
        if (r == no_devices) break;
        if (j + 1 < L && m.link_ms[j] > b) continue;
        for (int e = begin[j + 1]; e < end[j + 1]; ++e) {
          const int k = pool[e].k + 1;
          int rk = r;  // r(i..j, k)
          if (!m.fits(i, j, k, r)) {
            const int least = m.zero > 0 ? m.fewest_fitting(i, j, k, m.devices) : no_devices;
            rk = least == no_devices ? no_devices : m.min_replicas(i, j, b, m.devices, least);
          }
          if (rk == no_devices) break;  // the front's k only grows
          const int g = pool[e].g + rk;
          if (g > m.devices || g >= cand_g[k]) continue;
          cand_g[k] = g;
          cand_j[k] = j;
          cand_r[k] = rk;
          cand_next[k] = e;
          kmin = std::min(kmin, k);
          kmax = std::max(kmax, k);
        }
      }
      begin[i] = static_cast<int>(pool.size());
      int last = no_devices;
      for (int k = kmin; k <= kmax; ++k) {
        if (cand_g[k] < last) {
          pool.push_back({k, cand_g[k], cand_j[k], cand_r[k], cand_next[k]});
          last = cand_g[k];
        }
        cand_g[k] = no_devices;
      }
      end[i] = static_cast<int>(pool.size());
    }
    return end[0] > begin[0];
  }

  // The plan of the front's fewest devices.
  std::vector<planned_stage> stages() const {
    std::vector<planned_stage> out;
    int next_device = 0;
    for (int e = end[0] - 1, i = 0; i < m.layers; i = pool[e].cut + 1, e = pool[e].next)
      out.push_back(make_stage(m, i, pool[e].cut, pool[e].reps, next_device));
    return out;
  }
};

// The fewest stages of r replicas each (memory, T(i..j, r) with the all-reduce at ms_per_byte w,
// and links ≤ b):
//   S(L) = 0,  S(i) = min over j of 1 + S(j + 1), memory(i..j, f, r) fits with f = in_flight or
//   1 + S(j + 1) (p − s). A suffix with fewer stages dominates one with more (fewer devices, and
// every earlier stage keeps fewer microbatches), so the least S is the only one to keep.
// Feasible iff S(0) · r ≤ n. With r = 1 and b = ∞ it answers "does anything fit in memory?".
struct fewest_stages_program {
  const flat_model& m;
  int r = 1;
  double w = 0;
  std::vector<int> best, cut;

  explicit fewest_stages_program(const flat_model& model)
      : m(model), best(model.layers + 1), cut(model.layers + 1) {}

  double stage_ms(int i, int j) const {
    return replicated_ms(m.compute_ms(i, j), m.param_bytes(i, j), w, r, m.zero);
  }

  bool run(double b) {
    const int L = m.layers;
    best[L] = 0;
    for (int i = L - 1; i >= 0; --i) {
      best[i] = no_devices;
      for (int j = i; j < L; ++j) {
        if (!m.fits(i, j, 1, r) || stage_ms(i, j) > b) break;
        if (j + 1 < L && m.link_ms[j] > b) continue;
        const int rest = best[j + 1];
        if (rest == no_devices || rest + 1 >= best[i]) continue;
        if (!m.fits(i, j, m.in_flight > 0 ? m.in_flight : rest + 1, r)) continue;
        best[i] = rest + 1;
        cut[i] = j;
      }
    }
    return best[0] != no_devices && static_cast<long long>(best[0]) * r <= m.devices;
  }

  std::vector<planned_stage> stages() const {
    std::vector<planned_stage> out;
    int next_device = 0;
    for (int i = 0; i < m.layers; i = cut[i] + 1) out.push_back(make_stage(i, cut[i], r, stage_ms(i, cut[i]), next_device));
    return out;
  }
};

}  // namespace

std::optional<std::vector<planned_stage>> plan_flat(const flat_model& m) {
  const bool by_depth = m.memory != 0 && m.in_flight == 0;
  // The fixed-in_flight program: exact unless by_depth, where in_flight 1 relaxes memory (every
  // stage keeps at least one microbatch) and so gives a lower bound.
  fixed_in_flight_program fixed(m, m.in_flight > 0 ? m.in_flight : 1);
  in_flight_by_depth_program exact(m);
  double any_b = 0;  // the bottleneck of some plan that fits (the exact search's upper end)
  if (m.zero == 0) {
    // Anything at all in memory? The fewest-stages split on single devices answers it.
    fewest_stages_program any(m);
    if (!any.run(inf)) return std::nullopt;
    any_b = flat_bottleneck(m, any.stages());
    fixed.run(inf);
  } else {
    // Under ZeRO replicas also make room, so the programs themselves answer it at b = ∞ (the
    // relaxation first: when it finds nothing, nothing fits).
    if (!fixed.run(inf)) return std::nullopt;
    if (by_depth) {
      if (!exact.run(inf)) return std::nullopt;
      any_b = flat_bottleneck(m, exact.stages());
    }
  }
  const double lower = m.compute_ms(0, m.layers - 1) / m.devices;  // n · b ≥ Σ r · T ≥ Σ compute
  const double relaxed =
      least_feasible(lower, flat_bottleneck(m, fixed.stages()), [&](double b) { return fixed.run(b); });
  if (!by_depth) return fixed.stages();
  const double hi = std::max(relaxed, any_b);
  least_feasible(relaxed, hi, [&](double b) { return exact.run(b); });
  return exact.stages();
}

// Every r with r · S ≤ n, S the fewest stages memory allows (the same for every r), is a
// candidate, and a plan of r replicas has a bottleneck of at least
//   max(Σcompute / (r · ⌊n / r⌋), T(l..l, r) for the layer of most compute and of most params)
// (at most ⌊n / r⌋ stages share the compute; every layer sits in a stage at least as slow).
// Candidates are searched in order of that bound and the search stops where it passes the best
// found, so only a few r run the program: the best-first order finds the best plan early both when
// compute dominates (large r) and when the all-reduce does (small r).
// Under ZeRO memory depends on r (more replicas, smaller shares), so every r up to n is a
// candidate and the program's own memory check at r decides.
std::optional<std::vector<planned_stage>> plan_same_replicas(const flat_model& m) {
  fewest_stages_program prog(m);
  if (m.zero == 0 && !prog.run(inf)) return std::nullopt;
  const int L = m.layers, n = m.devices, r_max = m.zero == 0 ? n / prog.best[0] : n;
  int heavy = 0, wide = 0;
  for (int l = 1; l < L; ++l) {
    if (m.compute_ms(l, l) > m.compute_ms(heavy, heavy)) heavy = l;
    if (m.param_bytes(l, l) > m.param_bytes(wide, wide)) wide = l;
  }
  const double total = m.compute_ms(0, L - 1);
  struct candidate {
    double lower;
    int r;
  };
  std::vector<candidate> order;
  order.reserve(r_max);
  for (int r = 1; r <= r_max; ++r) {
    const double w = m.ms_per_byte[m.aligned_level_of(r)];
    const double bound = std::max({total / (static_cast<double>(r) * (n / r)),
                                    replicated_ms(m.compute_ms(heavy, heavy), m.param_bytes(heavy, heavy), w, r, m.zero),
                                    replicated_ms(m.compute_ms(wide, wide), m.param_bytes(wide, wide), w, r, m.zero)});
    order.push_back({bound * (1 - 1e-12), r});  // slack for the prefix sums' rounding
  }
  std::sort(order.begin(), order.end(),
            [](const candidate& a, const candidate& b) { return a.lower < b.lower || (a.lower == b.lower && a.r < b.r); });
  std::optional<std::vector<planned_stage>> best;
  double best_b = inf;
  int best_r = 0;
  for (const candidate& c : order) {
    // Later candidates have bounds at least this one's; ties keep the fewer replicas.
    if (best && (c.lower > best_b || (c.lower == best_b && c.r > best_r))) break;
    prog.r = c.r;
    prog.w = m.ms_per_byte[m.aligned_level_of(c.r)];
    const double hi = !best ? inf : c.r < best_r ? best_b : std::nextafter(best_b, 0.0);
    if (!prog.run(hi)) continue;
    least_feasible(std::min(c.lower, hi), hi, [&](double b) { return prog.run(b); });
    auto stages = prog.stages();
    const double b = flat_bottleneck(m, stages);
    if (b < best_b || (b == best_b && c.r < best_r)) {
      best = std::move(stages);
      best_b = b;
      best_r = c.r;
    }
  }
  return best;
}

bool any_plan_within(const flat_model& m, double b) {
  fixed_in_flight_program relaxed(m, m.in_flight > 0 ? m.in_flight : 1);
  if (!relaxed.run(b)) return false;
  if (m.memory == 0 || m.in_flight > 0) return true;  // the relaxed program is exact
  in_flight_by_depth_program exact(m);
  return exact.run(b);
}

// Whether some split into at most n stages fits M bytes per device only grows with M, so the
// least M is bisected over (0, the whole model as one stage], ~63 runs of the fewest-stages
// program (a probe's M ≥ 1: memory 0 would mean unlimited).
std::int64_t least_peak_memory(const flat_model& m) {
  flat_model probe = m;
  fewest_stages_program prog(probe);
  std::int64_t lo = 0, hi = m.memory_of(0, m.layers - 1, m.in_flight > 0 ? m.in_flight : 1);
  if (hi == 0) return 0;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    probe.memory = mid;
    if (prog.run(inf)) hi = mid;
    else lo = mid;
  }
  return hi;
}

}  // namespace pipeworks::pipedream
