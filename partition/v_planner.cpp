// The V schedules' split by dynamic programming over both ends of the model; see v_planner.hpp.
#include "partition/v_planner.hpp"

#include "partition/auto_partition.hpp"  // profile_costs
#include "runtime/lower.hpp"
#include "runtime/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>

namespace pipeworks {

std::vector<int> peak_in_flight(const schedule& s) {
  std::vector<int> now(static_cast<std::size_t>(s.virtual_stages), 0), peak = now;
  for (int d = 0; d < s.params.stages; ++d)
    for (const action& a : s.programs[static_cast<std::size_t>(s.rank_of(0, d))]) {
      auto& n = now[static_cast<std::size_t>(a.stage)];
      if (a.kind == action_kind::forward) {
        ++n;
        peak[static_cast<std::size_t>(a.stage)] = std::max(peak[static_cast<std::size_t>(a.stage)], n);
      } else if (a.kind == action_kind::backward || a.kind == action_kind::weight_grad) {
        --n;  // a full backward, or the W that ends a split one, frees the stash
      }
    }
  return peak;
}

namespace {

constexpr int max_v_layers = 96;  // the program below is O(p · L^4)

struct sums {
  std::vector<double> ms;             // Σ(fwd + bwd)
  std::vector<std::int64_t> weights;  // Σ(2·param + optimizer): weights, gradients, moments
  std::vector<std::int64_t> saved;    // Σsaved
};

sums prefix_sums(const model_profile& p) {
  sums s;
  s.ms.push_back(0);
  s.weights.push_back(0);
  s.saved.push_back(0);
  for (const layer_profile& l : p.layers) {
    s.ms.push_back(s.ms.back() + l.fwd_ms + l.bwd_ms);
    s.weights.push_back(s.weights.back() + 2 * l.param_bytes + l.optimizer_bytes);
    s.saved.push_back(s.saved.back() + l.saved_bytes);
  }
  return s;
}

}  // namespace

result<v_plan> plan_v(const model_profile& profile, const cluster& devices,
                      const v_plan_request& request) {
  // dualpipe over P devices holds the model's P pieces as a V over P/2 positions does: position
  // d's devices, d and P-1-d, each hold pieces d and P-1-d (one per route). So the recurrence
  // runs over the positions, each loaded as its slower device and fitting both devices' memory.
  const bool mirrored = request.schedule == schedule_kind::dualpipe;
  const int P = request.devices, n = static_cast<int>(profile.layers.size());
  if (!is_v_shape(request.schedule) && !mirrored)
    return make_error(std::string(schedule_name(request.schedule)) +
                      " is not a V schedule (zbv, v-half, v-min, dualpipev) or dualpipe");
  if (P < 1 || P > devices.device_count())
    return make_error("a V over " + std::to_string(P) + " devices, but the cluster has " +
                      std::to_string(devices.device_count()));
  if (mirrored && P % 2 != 0)
    return make_error("dualpipe mirrors its devices about the middle: give an even device count "
                      "(got " + std::to_string(P) + ")");
  const int p = mirrored ? P / 2 : P;  // the V's positions: position d holds pieces d, 2p-1-d
  std::vector<int> placement = request.placement;
  if (placement.empty())
    for (int d = 0; d < P; ++d) placement.push_back(d);
  {
    std::vector<int> sorted = placement;
    std::sort(sorted.begin(), sorted.end());
    if (static_cast<int>(placement.size()) != P || sorted.front() < 0 ||
        sorted.back() >= devices.device_count() ||
        std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      return make_error("a V's placement names " + std::to_string(placement.size()) +
                        " devices; it needs " + std::to_string(P) + " distinct devices of the "
                        "cluster's " + std::to_string(devices.device_count()));
  }
  if (n < 2 * p)
    return make_error("the profile has " + std::to_string(n) + " layers; a V over " +
                      std::to_string(p) + " devices cuts them into " + std::to_string(2 * p) +
                      " pieces of at least one layer each: use at most " +
                      std::to_string(n / 2) + " devices");
  if (n > max_v_layers)
    return make_error("the profile has " + std::to_string(n) + " layers; the V planner takes at "
                      "most " + std::to_string(max_v_layers) + " (its search grows as layers^4)");
  auto made = make_schedule(request.schedule, {P, request.microbatches, 2, 1, 1});
  if (!made) return made.err();
  v_plan out;
  out.in_flight = peak_in_flight(*made);
  const sums s = prefix_sums(profile);
  auto piece_bytes = [&](int stage, int first, int last) {
    const std::int64_t stash =
        stash_bytes(profile.recompute, out.in_flight[static_cast<std::size_t>(stage)],
                    s.saved[last] - s.saved[first], input_bytes(profile, first));
    return s.weights[last] - s.weights[first] + stash;
  };
  // Position d holds pieces d = [a, a') and 2p-1-d = [b', b): on device d (a V's virtual
  // stages d and 2p-1-d); under dualpipe also on device P-1-d, whose virtual stages are P+d
  // (piece d on route 1) and P-1-d (piece P-1-d on route 0).
  auto speed = [&](int d) {
    const double own = devices.speed(placement[static_cast<std::size_t>(d)]);
    return mirrored ? std::min(own, devices.speed(placement[static_cast<std::size_t>(P - 1 - d)]))
                    : own;
  };
  auto device_ms = [&](int d, int a, int a2, int b2, int b) {
    return (s.ms[a2] - s.ms[a] + s.ms[b] - s.ms[b2]) / speed(d);
  };
  auto device_bytes = [&](int d, int a, int a2, int b2, int b) {  // device d's
    return mirrored ? piece_bytes(d, a, a2) + piece_bytes(2 * P - 1 - d, b2, b)
                    : piece_bytes(d, a, a2) + piece_bytes(2 * p - 1 - d, b2, b);
  };
  auto mirror_bytes = [&](int d, int a, int a2, int b2, int b) {  // dualpipe's device P-1-d
    return piece_bytes(P + d, a, a2) + piece_bytes(P - 1 - d, b2, b);
  };
  // Whether position d's devices hold their pieces; over: the larger share of a memory they need.
  auto fits = [&](int d, int a, int a2, int b2, int b) {
    const std::int64_t cap = devices.memory(placement[static_cast<std::size_t>(d)]);
    if (cap > 0 && device_bytes(d, a, a2, b2, b) > cap) return false;
    if (!mirrored) return true;
    const std::int64_t other = devices.memory(placement[static_cast<std::size_t>(P - 1 - d)]);
    return other <= 0 || mirror_bytes(d, a, a2, b2, b) <= other;
  };

  // The recurrence, from the outermost device inwards. best[d][a][b]: the least largest load of
  // devices 0..d-1 when they hold layers [0, a) and [b, n); with device d taking [a, a') and
  // [b', b), a < a' <= b' < b (and a' = b' for the innermost device, d = p - 1), leaving at least
  // two layers for each device still to come:
  //   best[d+1][a'][b'] = min over (a, b) of max(best[d][a][b], load(d, a, a', b', b)),
  // over the choices whose device fits its memory. The answer is min over c of best[p][c][c].
  // `load` is a device's milliseconds for the plan, and (to explain a plan that does not fit)
  // its bytes over its memory.
  const double inf = std::numeric_limits<double>::infinity();
  const std::size_t N = static_cast<std::size_t>(n) + 1;
  auto run = [&](const std::function<double(int, int, int, int, int)>& load, bool fit,
                 std::vector<int>& cuts) -> double {
    std::vector<std::vector<double>> best(static_cast<std::size_t>(p) + 1,
                                          std::vector<double>(N * N, inf));
    std::vector<std::vector<std::pair<int, int>>> from(
        static_cast<std::size_t>(p) + 1, std::vector<std::pair<int, int>>(N * N, {-1, -1}));
    best[0][0 * N + static_cast<std::size_t>(n)] = -inf;
    for (int d = 0; d < p; ++d) {
      const int later = p - 1 - d;  // devices after d, each needing two layers in the middle
      for (int a = 0; a <= n; ++a)
        for (int b = a; b <= n; ++b) {
          const double here = best[static_cast<std::size_t>(d)][static_cast<std::size_t>(a) * N +
                                                                 static_cast<std::size_t>(b)];
          if (here == inf) continue;
          for (int a2 = a + 1; a2 < b; ++a2)
            for (int b2 = later == 0 ? a2 : a2 + 2 * later; b2 < b; ++b2) {
              if (later == 0 && b2 != a2) break;
              if (fit && !fits(d, a, a2, b2, b)) continue;
              const double v = std::max(here, load(d, a, a2, b2, b));
              const std::size_t k = static_cast<std::size_t>(a2) * N + static_cast<std::size_t>(b2);
              if (v < best[static_cast<std::size_t>(d) + 1][k]) {
                best[static_cast<std::size_t>(d) + 1][k] = v;
                from[static_cast<std::size_t>(d) + 1][k] = {a, b};
              }
            }
        }
    }
    double answer = inf;
    int mid = -1;
    for (int c = 1; c < n; ++c) {
      const double v = best[static_cast<std::size_t>(p)][static_cast<std::size_t>(c) * N +
                                                         static_cast<std::size_t>(c)];
      if (v < answer) {
        answer = v;
        mid = c;
      }
    }
    if (mid < 0) return inf;
    cuts.assign(static_cast<std::size_t>(2 * p) + 1, 0);
    cuts[static_cast<std::size_t>(p)] = mid;
    int a = mid, b = mid;
    for (int d = p; d > 0; --d) {
      const auto [pa, pb] = from[static_cast<std::size_t>(d)][static_cast<std::size_t>(a) * N +
                                                             static_cast<std::size_t>(b)];
      cuts[static_cast<std::size_t>(d) - 1] = pa;
      cuts[static_cast<std::size_t>(2 * p - d) + 1] = pb;
      a = pa;
      b = pb;
    }
    return answer;
  };

  std::vector<int> cuts;
  const double bottleneck = run(device_ms, true, cuts);
  if (bottleneck == inf) {
    std::vector<int> tight;
    auto over = [&](int d, int a, int a2, int b2, int b) {
      auto share = [](std::int64_t bytes, std::int64_t cap) {
        return cap <= 0 ? 0.0 : static_cast<double>(bytes) / static_cast<double>(cap);  // 0: unlimited
      };
      const double own = share(device_bytes(d, a, a2, b2, b),
                               devices.memory(placement[static_cast<std::size_t>(d)]));
      if (!mirrored) return own;
      return std::max(own, share(mirror_bytes(d, a, a2, b2, b),
                                 devices.memory(placement[static_cast<std::size_t>(P - 1 - d)])));
    };
    const double ratio = run(over, false, tight);
    return make_error("no split of the " + std::to_string(n) + " layers into " +
                      std::to_string(2 * p) + " pieces fits every device's memory under " +
                      std::string(schedule_name(request.schedule)) + " with m = " +
                      std::to_string(request.microbatches) + ": the split that needs the least "
                      "still needs " + std::to_string(static_cast<int>(std::ceil(ratio * 100))) +
                      "% of a device's memory; use more devices, fewer microbatches in flight "
                      "(v-half or v-min hold fewer), or recomputation");
  }
  out.boundaries = cuts;
  out.placement = placement;
  out.device_ms.resize(static_cast<std::size_t>(P));
  out.device_bytes.resize(static_cast<std::size_t>(P));
  for (int d = 0; d < p; ++d) {
    const int a = cuts[static_cast<std::size_t>(d)], a2 = cuts[static_cast<std::size_t>(d) + 1];
    const int b2 = cuts[static_cast<std::size_t>(2 * p - 1 - d)],
              b = cuts[static_cast<std::size_t>(2 * p - d)];
    const double pair_ms = s.ms[a2] - s.ms[a] + s.ms[b] - s.ms[b2];
    out.device_ms[static_cast<std::size_t>(d)] =
        pair_ms / devices.speed(placement[static_cast<std::size_t>(d)]);
    out.device_bytes[static_cast<std::size_t>(d)] = device_bytes(d, a, a2, b2, b);
    if (mirrored) {
      const auto m = static_cast<std::size_t>(P - 1 - d);
      out.device_ms[m] = pair_ms / devices.speed(placement[m]);
      out.device_bytes[m] = mirror_bytes(d, a, a2, b2, b);
    }
  }
  out.bottleneck_ms = bottleneck;
  return out;
}

namespace {

// The placements of p of the cluster's devices on the V's positions, devices alike (speed,
// memory, profile, where they run) counted once: each position takes the first unused device of
// a kind. At most `cap`; nullopt when there are more.
std::optional<std::vector<std::vector<int>>> placements(const cluster& c, int p, int cap) {
  std::vector<std::vector<int>> kinds;  // device ids of each kind, in the cluster's order
  for (int d = 0; d < c.device_count(); ++d) {
    bool placed = false;
    for (auto& k : kinds) {
      const int e = k.front();
      const bool alike =
          c.speed(d) == c.speed(e) && c.memory(d) == c.memory(e) &&
          (c.devices.empty() || (c.devices[static_cast<std::size_t>(d)].profile ==
                                     c.devices[static_cast<std::size_t>(e)].profile &&
                                 c.devices[static_cast<std::size_t>(d)].device ==
                                     c.devices[static_cast<std::size_t>(e)].device));
      if (alike) {
        k.push_back(d);
        placed = true;
        break;
      }
    }
    if (!placed) kinds.push_back({d});
  }
  std::vector<std::vector<int>> out;
  std::vector<int> used(kinds.size(), 0), now;
  bool over = false;
  std::function<void()> walk = [&] {
    if (over) return;
    if (static_cast<int>(now.size()) == p) {
      if (static_cast<int>(out.size()) == cap) {
        over = true;
        return;
      }
      out.push_back(now);
      return;
    }
    for (std::size_t k = 0; k < kinds.size(); ++k) {
      if (used[k] == static_cast<int>(kinds[k].size())) continue;
      now.push_back(kinds[k][static_cast<std::size_t>(used[k]++)]);
      walk();
      --used[k];
      now.pop_back();
    }
  };
  walk();
  if (over) return std::nullopt;
  return out;
}

}  // namespace

result<v_choice> plan_v_devices(const model_profile& profile, const cluster& devices,
                                schedule_kind kind, int microbatches, int max_devices) {
  // dualpipe: an even count of devices, whose P pieces need P layers.
  const bool mirrored = kind == schedule_kind::dualpipe;
  const int layers = static_cast<int>(profile.layers.size());
  const int most = std::min(max_devices > 0 ? max_devices : devices.device_count(),
                            std::min(devices.device_count(), mirrored ? layers : layers / 2));
  std::optional<v_choice> best;
  std::string last_error = "no device to plan on";
  for (int p = mirrored ? 2 : 1; p <= most; p += mirrored ? 2 : 1) {
    auto each = placements(devices, p, max_v_placements);
    // Each placement's program is about p · layers^4 steps: past ~2e9 in all, the cluster's order.
    const double n = static_cast<double>(profile.layers.size());
    if (each && static_cast<double>(each->size()) * p * n * n * n * n > 2e9) each.reset();
    if (!each) {  // too many to try: the cluster's order
      std::vector<int> first;
      for (int d = 0; d < p; ++d) first.push_back(d);
      each = std::vector<std::vector<int>>{first};
    }
    for (const std::vector<int>& placement : *each) {
      auto plan = plan_v(profile, devices, {kind, p, microbatches, placement});
      if (!plan) {
        last_error = plan.message();
        continue;
      }
      std::vector<double> speed;  // by virtual stage: its device's
      for (int s = 0; s < 2 * p; ++s)
        speed.push_back(devices.speed(placement[static_cast<std::size_t>(s < p ? s : 2 * p - 1 - s)]));
      // dualpipe: its p pieces' costs (piece d on device d), which the simulator gives each copy.
      cost_model costs = profile_costs(profile, plan->boundaries, speed);
      costs.devices.resize(static_cast<std::size_t>(p));
      auto made = make_schedule(kind, {p, microbatches, 2, 1, 2});
      if (!made) return made.err();
      simulate_options so;
      so.record_timeline = false;
      auto sim = simulate(lower_communication(std::move(*made)), costs, so);
      if (!sim) return sim.err();
      const double step_ms = 1000.0 * sim->makespan / 2;
      const bool better = !best || step_ms < best->step_ms ||
                          (step_ms == best->step_ms && plan->bottleneck_ms < best->plan.bottleneck_ms);
      if (better) best = v_choice{std::move(*plan), p, step_ms};
    }
  }
  if (!best) return make_error(last_error);
  return *best;
}

}  // namespace pipeworks
