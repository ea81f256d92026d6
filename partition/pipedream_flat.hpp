// PipeDream's planner on one pool of identical devices: the cost model (prefix sums over the
// layers) shared with the level-by-level planner, the exact flat program and same_replicas.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "partition/pipedream_planner.hpp"
#include "partition/profile.hpp"
#include "partition/zero_share.hpp"

namespace pipeworks::pipedream {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr int no_devices = std::numeric_limits<int>::max() / 4;

// The time of a link that carries an activation of `bytes` forward and its gradient back, ms.
inline double link_cost(double bytes, double ms_per_byte) { return 2.0 * bytes * ms_per_byte; }

struct flat_model {
  int layers = 0;
  int devices = 0;
  std::int64_t memory = 0;          // per device; 0: unlimited
  int in_flight = 0;                // 0: p − s
  std::vector<double> compute;      // prefix sums of (fwd + bwd), ms
  std::vector<double> params;       // prefix sums of param_bytes
  std::vector<std::int64_t> fixed;  // prefix sums of 2 · param + optimizer bytes
  std::vector<std::int64_t> saved;  // prefix sums of saved_bytes
  std::vector<std::int64_t> input;  // input_bytes of each layer (layer 0's: 0)
  recompute_mode recompute = recompute_mode::none;  // the profile's: how a stage stashes
  std::vector<double> activation;   // activation_bytes of each layer
  std::vector<double> link_ms;      // link_cost(activation_bytes[j], the pool's outermost level)
  std::vector<int> unit_size;       // devices in one unit of each level, innermost first
  std::vector<double> ms_per_byte;  // 1000 / bandwidth of each level (0: free)
  // ZeRO 1 (run_plan::zero): each of a stage's r > 1 replicas holds zero_share of its optimizer
  // state (1/r, at least its largest tensor's) and its step gathers the updated weights after the
  // all-reduce (zero_gather_ms). Then a stage's memory falls with r and its time has the gather.
  int zero = 0;
  std::vector<std::int64_t> optimizer;  // prefix sums of optimizer_bytes (read only with zero)
  largest_tensor_table largest;         // each range's largest optimizer tensor (only with zero)

  double compute_ms(int i, int j) const { return compute[j + 1] - compute[i]; }
  double param_bytes(int i, int j) const { return params[j + 1] - params[i]; }
  // Fixed bytes plus the stash of f microbatches in flight under the profile's mode (stash_bytes:
  // f · Σsaved, or with full recomputation f · input(i) + Σsaved); capped far below 2^63 (at a
  // value no device has), so a huge f never wraps to a plan that "fits". Under full the stash of
  // i..j may exceed that of i + 1..j (a larger input): the programs' plans still fit (each stage
  // is checked), but are then not claimed optimal.
  // On each of r replicas: under ZeRO less the optimizer state the other replicas hold.
  std::int64_t memory_of(int i, int j, int f, int r = 1) const {
    const std::int64_t in = input.empty() ? 0 : input[static_cast<std::size_t>(i)];
    const std::int64_t shared_out =
        zero > 0 && r > 1 ? zero_shared_out(optimizer[j + 1] - optimizer[i], largest.max(i, j), r) : 0;
    return fixed[j + 1] - fixed[i] - shared_out +
           stash_bytes(recompute, f, saved[j + 1] - saved[i], in);
  }
  bool fits(int i, int j, int f, int r = 1) const {
    return memory == 0 || memory_of(i, j, f, r) <= memory;
  }
  // The fewest replicas r ≤ cap on which layers i..j with f in flight fit, or no_devices: 1 or
  // none without ZeRO; under it memory only falls with r, so the least r the share allows.
  int fewest_fitting(int i, int j, int f, int cap) const;
  // The level an all-reduce over r replicas runs at in the pool cost model: the innermost whose
  // unit holds r devices, as if a stage's replicas were packed into as few units as possible
  // (plan_flat's placement does not promise that; callers on a hierarchy re-cost its plans with
  // placed_bottleneck).
  int level_of(int r) const {
    for (int l = 0; l < static_cast<int>(unit_size.size()); ++l)
      if (r <= unit_size[l]) return l;
    return static_cast<int>(unit_size.size()) - 1;
  }
  // The innermost level whose unit size is a multiple of r, else the outermost: stages of r
  // devices each, numbered 0, 1, .. in order, never straddle a unit of it (same_replicas).
  int aligned_level_of(int r) const;
  // T(i..j, r) = Σ(fwd + bwd)/r + (r > 1 ? 2(r − 1)/r · Σparam_bytes / bw : 0), bw of level_of(r)
  // (+ (r − 1)/r · Σparam_bytes / bw for the gather under ZeRO)
  double stage_ms(int i, int j, int r) const;  // (inline below)
  // The fewest replicas r with least ≤ r ≤ cap and T(i..j, r) ≤ b, or no_devices.
  int min_replicas(int i, int j, double b, int cap, int least = 1) const;
  // The fewest replicas r ≤ cap that hold layers i..j with f in flight and give T(i..j, r) ≤ b,
  // or no_devices: the r that hold them are every r from fewest_fitting on, so it is
  // min_replicas from there.
  int replicas_for(int i, int j, int f, double b, int cap) const {
    const int least = fewest_fitting(i, j, f, cap);
    return least == no_devices ? no_devices : min_replicas(i, j, b, cap, least);
  }
};

// The fewest r ≤ cap with a + (t − a)/r ≤ x where a = 2 · param_bytes · ms_per_byte (the stage
// time t / r plus its all-reduce 2(r − 1)/r · param / bw; under ZeRO a = 3 · param_bytes ·
// ms_per_byte, the gather's (r − 1)/r · param / bw added), or no_devices. The formula decides.
int fewest_replicas(double t, double param_bytes, double ms_per_byte, double x, int cap, int zero = 0);
inline double replicated_ms(double t, double param_bytes, double ms_per_byte, int r, int zero = 0) {
  if (r == 1) return t;
  double x = t / r + 2.0 * (r - 1) / r * param_bytes * ms_per_byte;
  if (zero > 0) x += zero_gather_ms(r, param_bytes, ms_per_byte);
  return x;
}
inline double flat_model::stage_ms(int i, int j, int r) const {
  return replicated_ms(compute_ms(i, j), param_bytes(i, j), ms_per_byte[level_of(r)], r, zero);
}

// The fewest units for layers i..L−1 when a stage i..j takes r(i..j) units:
//   G(L) = 0,  G(i) = min over j of r(i..j) + G(j + 1),  feasible iff G(0) ≤ cap.
// replicas(i, j) gives r(i..j), no_devices when none serves; it only grows with j, so the scan
// over j stops there or once r reaches the best total found. link_ok(j): a cut after j is allowed.
// Shared by the flat program (fixed in_flight) and the top level of the hierarchy program.
struct fewest_units_program {
  std::vector<int> best, cut, reps;

  explicit fewest_units_program(int layers) : best(layers + 1), cut(layers + 1), reps(layers + 1) {}

  template <class Replicas, class LinkOk>
  bool run(int L, int cap, Replicas&& replicas, LinkOk&& link_ok) {
    best[L] = 0;
    for (int i = L - 1; i >= 0; --i) {
      int bi = no_devices, cj = -1, cr = 0;
      for (int j = i; j < L; ++j) {
        const int r = replicas(i, j);
        if (r == no_devices || r >= bi) break;
        if (j + 1 < L && !link_ok(j)) continue;
        const int rest = best[j + 1];
        if (rest == no_devices || r + rest >= bi || r + rest > cap) continue;
        bi = r + rest;
        cj = j;
        cr = r;
      }
      best[i] = bi;
      cut[i] = cj;
      reps[i] = cr;
    }
    return best[0] <= cap;
  }

  // The same program and the same answer (best, cut and reps alike), for replicas that may be
  // asked any j (run asks them in order): over a run of j with one r(i..j), r + G(j + 1) is least
  // at the run's last allowed cut, as G only falls with j (a shorter suffix never needs more
  // units), so each run costs a bisection for its end and for the earliest cut reaching that
  // total, not a step per layer. O(L · distinct r · log L) instead of O(L²). serves(i, j, r):
  // whether r units serve i..j, asked only with r = r(i..j') for some j' <= j (there it holds
  // exactly when r(i..j) == r); a cheaper question than replicas.
  template <class Replicas, class Serves, class LinkOk>
  bool run_by_runs(int L, int cap, Replicas&& replicas, Serves&& serves, LinkOk&& link_ok) {
    best[L] = 0;
    auto allowed = [&](int j) { return j + 1 == L || link_ok(j); };
    for (int i = L - 1; i >= 0; --i) {
      int bi = no_devices, cj = -1, cr = 0;
      for (int j = i; j < L;) {
        const int r = replicas(i, j);
        if (r == no_devices || r >= bi) break;
        // The run's end: gallop from j (runs are mostly short), then bisect.
        int lo = j, hi = L;  // r serves i..lo; the run ends before hi
        for (int step = 1; lo + step < L; step *= 2) {
          if (!serves(i, lo + step, r)) {
            hi = lo + step;
            break;
          }
          lo += step;
        }
        while (hi - lo > 1) {
          const int mid = lo + (hi - lo) / 2;
          if (serves(i, mid, r)) lo = mid;
          else hi = mid;
        }
        const int end = lo;
        int last = end;  // the run's last allowed cut
        while (last >= j && !allowed(last)) --last;
        if (last >= j) {
          const int rest = best[last + 1];
          if (rest != no_devices && r + rest < bi && r + rest <= cap) {
            // The earliest cut in the run with the same total: G(k + 1) == rest from some k on.
            int a = j, b = last;
            while (a < b) {
              const int mid = a + (b - a) / 2;
              if (best[mid + 1] <= rest) b = mid;
              else a = mid + 1;
            }
            while (!allowed(a)) ++a;
            bi = r + rest;
            cj = a;
            cr = r;
          }
        }
        j = end + 1;
      }
      best[i] = bi;
      cut[i] = cj;
      reps[i] = cr;
    }
    return best[0] <= cap;
  }
};

// The exact flat program in the pool cost model (links at link_ms, all-reduce at level_of(r),
// memory with in_flight = p − s when 0). Stages with devices numbered 0, 1, .. and time_ms;
// nothing when no split into at most `devices` stages fits in memory.
std::optional<std::vector<planned_stage>> plan_flat(const flat_model& m);
// Every stage with the same replica count r: the least bottleneck over r with p · r ≤ devices,
// each r costed with its all-reduce at aligned_level_of(r) (on one level: exact). Ties keep the
// fewer replicas.
std::optional<std::vector<planned_stage>> plan_same_replicas(const flat_model& m);
// Whether some plan in the pool cost model (memory with in_flight, or p − s) has every stage and
// link ≤ b: false proves no plan of `m`, or of a model whose costs are at least m's, does. One
// probe of plan_flat's programs (the relaxed one first, then, with p − s, the exact one).
bool any_plan_within(const flat_model& m, double b);
// The least peak memory per device of any split into at most `devices` stages (for the error).
std::int64_t least_peak_memory(const flat_model& m);
// max over stages of time_ms and over consecutive stages of link_ms[last layer].
double flat_bottleneck(const flat_model& m, const std::vector<planned_stage>& stages);
// Re-costs stages at the devices they hold: each stage's time_ms with its all-reduce at the level
// spanning its devices, each link at the level spanning both stages' devices; the bottleneck.
double placed_bottleneck(const flat_model& m, std::vector<planned_stage>& stages);

}  // namespace pipeworks::pipedream
