// PipeDream's recurrence (Narayanan et al., SOSP'19, §3.1) level by level, with the issue's
// additive objective; per-start memoised programs below the top, bisection at the top.
//
// Levels l = 0..H−1 innermost first; level l joins c_l units of level l − 1 (level −1: one device)
// with bandwidth B_l. For a layer range i..j:
//   A⁻¹(i..j)   = Σ(fwd + bwd) over i..j                          (∞ if it does not fit a device)
//   Tˡ(i..j, r) = Aˡ⁻¹(i..j)/r + (r > 1 ? 2(r − 1)/r · Σparam(i..j)/B_l : 0)
//   Aˡ(i..j)    = min over pipelines of contiguous stages of i..j, stage s replicated over r_s
//                 whole units of level l − 1 with Σ r_s ≤ c_l, of
//                 max(max_s Tˡ(stage s, r_s), max over cuts after layer x of 2 · act(x)/B_l).
// The plan is A^{H−1}(0..L−1). On one level this is the flat objective (pipedream_flat.cpp).
// Exact when a device's memory check does not depend on the plan (unlimited memory, or a fixed
// in_flight); for in_flight = p − s the caller passes per-layer estimates (pipedream_planner.cpp).
//
// Below the top, Aˡ(i..j) is PipeDream's own prefix program from a fixed start i,
//   Dᵢ(j, m) = min over the last stage k..j and r ≤ m of
//              k = i: Tˡ(i..j, r);  k > i: max(Dᵢ(k − 1, m − r), 2 · act(k − 1)/B_l, Tˡ(k..j, r))
//   Aˡ(i..j) = Dᵢ(j, c_l)        (Dᵢ(·, 0) = ∞: m counts units used, at most m)
// memoised per (level, start) and extended in j only as far as the level above asks. For each
// (m, r) the best k is found by bisection where Dᵢ(k − 1, m − r) (growing in k) crosses Tˡ(k..j, r)
// (shrinking), then a scan outward for the links, so a row costs about c_l² · log(j − i).
// At the top the bottleneck X is bisected (pipedream_search.hpp) on
//   G(L) = 0, G(i) = min over j of r(i..j) + G(j + 1) ≤ c_{H−1}
// with r(i..j) the fewest top units with T^{H−1}(i..j, r) ≤ X and links ≤ X. A(i..j) grows with j,
// so r(i..j) does, and the scan over j stops at the first j no r ≤ c_{H−1} serves; near the answer
// that keeps the ranges asked of the levels below short (a stage cannot outgrow X · units).
// Cost: fast when the all-reduce bounds how long a stage can be (transformer-like layers: 1,000
// layers on 128 servers of 8 in a few tens of ms); with (nearly) no parameters a top-level stage
// may span most of the model and the tables grow to O(L²) rows, and a row of level l costs about
// c_l² (NVL72-shaped servers of 72: tens of seconds). So rows are paid for from a work budget
// (c_l² each); when it runs out the program gives up and the caller plans flat (see bench_planner).
//
// The flattened plan: a top stage over r_top units runs, in each unit, the sub-pipeline that
// attains A^{H−2}, and so on down to devices. A device-level stage is a layer range and all the
// devices that hold it: replicas = Π r over the levels (r₀ devices in each of its server's
// copies, times r₁ servers, ...); gradients are all-reduced level by level. Its time_ms is the
// share of the top-level stage time it accounts for: t = T⁰(stage), then t ← t/r_l + the level-l
// all-reduce of the enclosing level-l stage, outward to the top; the top stage's time is the max
// of these and its scaled inner links, so bottleneck_ms = A^{H−1}(0..L−1) ≥ every time_ms.
#include "partition/pipedream_hierarchy.hpp"

#include <algorithm>
#include <cassert>

#include "partition/pipedream_search.hpp"

namespace pipeworks::pipedream {

namespace {

class level_program {
 public:
  level_program(const flat_model& m, std::vector<level_spec> levels, const std::vector<int>& in_flight,
                std::int64_t& budget)
      : m_(m), levels_(std::move(levels)), f_(in_flight), budget_(budget), memo_(levels_.size() - 1),
        top_(m.layers) {
    for (auto& per_start : memo_) per_start.resize(m.layers);
  }

  int top() const { return static_cast<int>(levels_.size()) - 1; }
  bool over_budget() const { return over_budget_; }

  // Aˡ(i..j) for l = −1..H−2; ∞ for everything once the budget is spent (the answer is void).
  double value(int l, int i, int j) {
    if (over_budget_) return inf;
    if (l < 0) return m_.fits(i, j, f_[i]) ? m_.compute_ms(i, j) : inf;
    table& t = memo_[l][i];
    while (t.rows <= j - i) {
      const std::int64_t cost = std::int64_t{levels_[l].count} * levels_[l].count;
      if (budget_ < cost) {
        over_budget_ = true;
        return inf;
      }
      budget_ -= cost;
      extend(l, i, t);
    }
    return t.d[static_cast<std::size_t>(j - i) * (levels_[l].count + 1) + levels_[l].count];
  }

  // Is there a top-level plan with every stage and link ≤ x?
  bool run(double x) {
    const int c = levels_[top()].count;
    const double w = levels_[top()].ms_per_byte;
    return top_.run(
        m_.layers, c,
        [&](int i, int j) {
          const double a = value(top() - 1, i, j);
          return a == inf ? no_devices : fewest_replicas(a, m_.param_bytes(i, j), w, x, c);
        },
        [&](int j) { return link_cost(m_.activation[j], w) <= x; });
  }

  // The plan of the last run, flattened to device-level stages, and its top-level value.
  hierarchy_plan flatten() {
    hierarchy_plan out;
    const level_spec& t = levels_[top()];
    const int unit = devices_per_unit(top() - 1);
    int next_unit = 0;
    for (int i = 0; i < m_.layers; i = top_.cut[i] + 1) {
      const int j = top_.cut[i], r = top_.reps[i];
      const double p = m_.param_bytes(i, j);
      out.bottleneck_ms = std::max(out.bottleneck_ms, replicated_ms(value(top() - 1, i, j), p, t.ms_per_byte, r));
      if (j + 1 < m_.layers) out.bottleneck_ms = std::max(out.bottleneck_ms, link_cost(m_.activation[j], t.ms_per_byte));
      std::vector<int> bases;
      for (int q = 0; q < r; ++q) bases.push_back((next_unit + q) * unit);
      next_unit += r;
      flatten_range(top() - 1, i, j, bases, {{r, p, t.ms_per_byte}}, out.stages);
    }
    return out;
  }

 private:
  struct table {
    int rows = 0;             // Dᵢ(j, ·) for j = i .. i + rows − 1
    std::vector<double> d;    // rows × (c + 1)
    std::vector<int> k, r;    // the last stage's first layer and replicas, per (j, m)
  };
  struct outer_stage {  // an enclosing stage: its replicas, parameters and level
    int r;
    double param_bytes, ms_per_byte;
  };

  int devices_per_unit(int l) const {  // of level l; 1 for l = −1
    int u = 1;
    for (int x = 0; x <= l; ++x) u *= levels_[x].count;
    return u;
  }

  // Appends the row Dᵢ(j, ·), j = i + t.rows, of level l.
  void extend(int l, int i, table& t) {
    const int c = levels_[l].count, j = i + t.rows;
    const double w = levels_[l].ms_per_byte;
    const std::size_t row = static_cast<std::size_t>(t.rows) * (c + 1);
    t.d.resize(row + c + 1, inf);
    t.k.resize(row + c + 1, -1);
    t.r.resize(row + c + 1, 0);
    const auto offer = [&](int mm, double v, int k, int r) {
      if (v < t.d[row + mm]) {
        t.d[row + mm] = v;
        t.k[row + mm] = k;
        t.r[row + mm] = r;
      }
    };
    // One stage i..j on r ≤ m units.
    const double whole = value(l - 1, i, j);  // touches only level l − 1's tables
    for (int r = 1; r <= c && whole != inf; ++r) {
      const double v = replicated_ms(whole, m_.param_bytes(i, j), w, r);
      for (int mm = r; mm <= c; ++mm) offer(mm, v, i, r);
    }
    // A last stage k..j (i < k ≤ j) on r units after Dᵢ(k − 1, m − r):
    //   before(k) = Dᵢ(k − 1, m − r) grows with k, stage(k) = Tˡ(k..j, r) shrinks with k,
    // so max(before, stage) is least where they cross, found by bisection; the links move the
    // best k away from the crossing, so scan outward from it while the growing side alone can
    // still beat the best found.
    const auto stage = [&](int k, int r) { return replicated_ms(value(l - 1, k, j), m_.param_bytes(k, j), w, r); };
    const auto link = [&](int k) { return link_cost(m_.activation[k - 1], w); };
    for (int mm = 2; mm <= c; ++mm)
      for (int r = 1; r < mm; ++r) {
        const auto before = [&](int k) { return t.d[static_cast<std::size_t>(k - 1 - i) * (c + 1) + mm - r]; };
        int lo = i + 1, hi = j + 1;  // the first k with before(k) ≥ stage(k)
        while (lo < hi) {
          const int mid = lo + (hi - lo) / 2;
          if (before(mid) >= stage(mid, r)) hi = mid;
          else lo = mid + 1;
        }
        for (int k = lo; k <= j; ++k) {  // before ≥ stage here
          const double b = before(k);
          if (b >= t.d[row + mm]) break;
          offer(mm, std::max(b, link(k)), k, r);
        }
        for (int k = lo - 1; k > i; --k) {  // stage > before here
          const double x = stage(k, r);
          if (x >= t.d[row + mm]) break;
          offer(mm, std::max(x, link(k)), k, r);
        }
      }
    ++t.rows;
  }

  // The sub-pipeline attaining Aˡ(i..j), run by the level-l units starting at the devices `bases`.
  void flatten_range(int l, int i, int j, const std::vector<int>& bases, std::vector<outer_stage> outer,
                     std::vector<planned_stage>& out) {
    const int c = levels_[l].count;
    const table& t = memo_[l][i];
    std::vector<std::pair<int, int>> stages;  // (first layer, replicas), last stage first
    for (int jj = j, mm = c; jj >= i;) {
      const std::size_t at = static_cast<std::size_t>(jj - i) * (c + 1) + mm;
      stages.push_back({t.k[at], t.r[at]});
      mm -= t.r[at];
      jj = t.k[at] - 1;
    }
    std::reverse(stages.begin(), stages.end());
    const int unit = devices_per_unit(l - 1);
    int next_unit = 0;
    for (std::size_t s = 0; s < stages.size(); ++s) {
      const int k = stages[s].first, r = stages[s].second;
      const int last = s + 1 < stages.size() ? stages[s + 1].first - 1 : j;
      std::vector<int> sub;
      for (int b : bases)
        for (int q = 0; q < r; ++q) sub.push_back(b + (next_unit + q) * unit);
      next_unit += r;
      const double p = m_.param_bytes(k, last), w = levels_[l].ms_per_byte;
      if (l > 0) {
        std::vector<outer_stage> o = outer;
        o.push_back({r, p, w});
        flatten_range(l - 1, k, last, sub, std::move(o), out);
        continue;
      }
      planned_stage st;
      st.first_layer = k;
      st.last_layer = last;
      std::sort(sub.begin(), sub.end());
      st.devices = sub;
      st.replicas = static_cast<int>(sub.size());
      // T⁰, then outward, with the same function as the program (bit for bit the same values)
      double time = replicated_ms(m_.compute_ms(k, last), p, w, r);
      for (auto it = outer.rbegin(); it != outer.rend(); ++it)
        time = replicated_ms(time, it->param_bytes, it->ms_per_byte, it->r);
      st.time_ms = time;
      out.push_back(std::move(st));
    }
  }

  const flat_model& m_;
  std::vector<level_spec> levels_;
  const std::vector<int>& f_;
  std::int64_t& budget_;
  bool over_budget_ = false;
  std::vector<std::vector<table>> memo_;  // [level 0..H−2][start]
  fewest_units_program top_;
};

}  // namespace

hierarchy_outcome plan_hierarchy(const flat_model& m, const std::vector<level_spec>& levels,
                                 const std::vector<int>& in_flight, std::int64_t& work_budget) {
  const int L = m.layers;
  assert(std::is_sorted(in_flight.rbegin(), in_flight.rend()));  // non-increasing in i
  long long devices = 1;
  double slowest = 0;
  for (const level_spec& l : levels) {
    devices *= l.count;
    slowest = std::max(slowest, l.ms_per_byte);
  }
  // Anything in memory? The fewest single-device stages (greedy: maximal stages) must number at
  // most the devices; packed into units with no replicas they form a plan whose bottleneck is at
  // most `hi`, so the top-level search is feasible there.
  int stages = 0;
  double hi = 0;
  for (int i = 0, j; i < L; i = j + 1) {
    if (!m.fits(i, i, in_flight[i])) return {};
    for (j = i; j + 1 < L && m.fits(i, j + 1, in_flight[i]);) ++j;
    ++stages;
    hi = std::max(hi, m.compute_ms(i, j));
    if (j + 1 < L) hi = std::max(hi, link_cost(m.activation[j], slowest));
  }
  if (stages > devices) return {};
  level_program prog(m, levels, in_flight, work_budget);
  const double lower = m.compute_ms(0, L - 1) / static_cast<double>(devices);
  bool found = false;
  least_feasible(std::min(lower, hi), hi, [&](double x) { return found = prog.run(x); });
  if (prog.over_budget()) return {std::nullopt, true};
  if (!found) return {};  // cannot happen: the packed plan above is feasible at hi
  return {prog.flatten(), false};
}

}  // namespace pipeworks::pipedream
