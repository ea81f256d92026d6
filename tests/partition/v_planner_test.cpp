// Tests for partition/v_planner: the V split is the best of every split a brute force tries, on
// random profiles, speeds and memories; its stash counts are the schedule's; what cannot be
// planned is refused with the reason.
#include "partition/v_planner.hpp"

#include <catch2/catch.hpp>
#include <limits>
#include <algorithm>
#include <random>

#include "partition/auto_partition.hpp"
#include "profile_fixtures.hpp"
#include "runtime/lower.hpp"
#include "runtime/simulate.hpp"

using namespace pipeworks;
using namespace pipeworks::partition_test;

namespace {

cluster devices_of(std::vector<double> speeds, std::vector<std::int64_t> memory) {
  cluster c;
  for (std::size_t d = 0; d < speeds.size(); ++d) {
    device_spec spec;
    spec.name = "d" + std::to_string(d);
    spec.speed = speeds[d];
    spec.memory_bytes = memory[d];
    c.devices.push_back(spec);
  }
  return c;
}

// A trial's devices: their speeds (all 1 in odd trials) and memories (unlimited every fifth
// trial, else `base` plus up to 300 bytes).
struct trial_devices {
  std::vector<double> speeds;
  std::vector<std::int64_t> bytes;
};

// A random trial: n layers of random times and bytes, and `devices` devices.
std::pair<model_profile, trial_devices> random_trial(std::mt19937& rng,
                                                     std::uniform_real_distribution<double>& ms,
                                                     std::uniform_int_distribution<int>& bytes,
                                                     int trial, int n, int devices,
                                                     std::int64_t base) {
  model_profile prof;
  for (int l = 0; l < n; ++l)
    prof.layers.push_back(layer(ms(rng), ms(rng), 1, bytes(rng), bytes(rng), bytes(rng)));
  trial_devices d;
  for (int k = 0; k < devices; ++k) {
    d.speeds.push_back(trial % 2 ? 1.0 : 0.5 + (rng() % 3) * 0.5);
    d.bytes.push_back(trial % 5 == 0 ? 0 : base + static_cast<std::int64_t>(rng() % 300));
  }
  return {std::move(prof), std::move(d)};
}

// The plan against the brute force's best bottleneck `expect` over splits into `pieces`: refused
// for memory when none fits (false), else that bottleneck on pieces + 1 boundaries (true).
bool matches(const result<v_plan>& plan, double expect, int pieces) {
  if (expect == std::numeric_limits<double>::infinity()) {
    REQUIRE_FALSE(plan.ok());
    CHECK(plan.message().find("fits every device's memory") != std::string::npos);
    return false;
  }
  REQUIRE(plan.ok());
  CHECK(plan->bottleneck_ms == Approx(expect).epsilon(1e-12));
  REQUIRE(plan->boundaries.size() == static_cast<std::size_t>(pieces + 1));
  return true;
}

// The best bottleneck over every split into 2p pieces (cut g after layer g), and whether any fits.
double brute_force(const model_profile& prof, const cluster& c, int p, const std::vector<int>& fl) {
  const int n = static_cast<int>(prof.layers.size());
  double best = std::numeric_limits<double>::infinity();
  for (int mask = 0; mask < (1 << (n - 1)); ++mask) {
    if (__builtin_popcount(static_cast<unsigned>(mask)) != 2 * p - 1) continue;
    const auto pieces = split_of(n, mask);
    double worst = 0;
    bool fits = true;
    for (int d = 0; d < p; ++d) {
      double ms = 0;
      std::int64_t bytes = 0;
      for (int s : {d, 2 * p - 1 - d}) {
        std::int64_t saved = 0;
        for (int l = pieces[static_cast<std::size_t>(s)].first; l <= pieces[static_cast<std::size_t>(s)].second; ++l) {
          const layer_profile& x = prof.layers[static_cast<std::size_t>(l)];
          ms += x.fwd_ms + x.bwd_ms;
          bytes += 2 * x.param_bytes + x.optimizer_bytes;
          saved += x.saved_bytes;
        }
        bytes += fl[static_cast<std::size_t>(s)] * saved;
      }
      ms /= c.speed(d);
      worst = std::max(worst, ms);
      if (c.memory(d) > 0 && bytes > c.memory(d)) fits = false;
    }
    if (fits) best = std::min(best, worst);
  }
  return best;
}

}  // namespace

TEST_CASE("peak_in_flight is the schedule's: p - s for 1F1B, and a V's per piece", "[partition]") {
  auto f = make_schedule(schedule_kind::one_f_one_b, {4, 8, 1, 1, 1});
  REQUIRE(f.ok());
  CHECK(peak_in_flight(*f) == std::vector<int>{4, 3, 2, 1});
  auto g = make_schedule(schedule_kind::gpipe, {3, 5, 1, 1, 1});
  REQUIRE(g.ok());
  CHECK(peak_in_flight(*g) == std::vector<int>{5, 5, 5});
  for (schedule_kind k : {schedule_kind::zbv, schedule_kind::v_half, schedule_kind::v_min}) {
    auto v = make_schedule(k, {4, 8, 2, 1, 1});
    REQUIRE(v.ok());
    const auto fl = peak_in_flight(*v);
    REQUIRE(fl.size() == 8);
    for (int x : fl) {
      CHECK(x >= 1);
      CHECK(x <= 8);
    }
  }
}

TEST_CASE("plan_v finds the best split a brute force finds, within memory", "[partition]") {
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> ms(0.5, 4.0);
  std::uniform_int_distribution<int> bytes(1, 40);
  int planned = 0, refused = 0;
  for (int trial = 0; trial < 120; ++trial) {
    const int p = 1 + trial % 3, n = 2 * p + static_cast<int>(rng() % 4);
    const auto [prof, memory] = random_trial(rng, ms, bytes, trial, n, p, 150);
    const cluster c = devices_of(memory.speeds, memory.bytes);
    const schedule_kind kind = trial % 3 == 0 ? schedule_kind::zbv
                               : trial % 3 == 1 ? schedule_kind::v_half : schedule_kind::v_min;
    const int m = 2 * p;
    INFO("trial " << trial << ", p " << p << ", " << n << " layers");
    auto plan = plan_v(prof, c, {kind, p, m});
    auto made = make_schedule(kind, {p, m, 2, 1, 1});
    REQUIRE(made.ok());
    if (!matches(plan, brute_force(prof, c, p, peak_in_flight(*made)), 2 * p)) {
      ++refused;
      continue;
    }
    CHECK(plan->boundaries.front() == 0);
    CHECK(plan->boundaries.back() == n);
    for (std::size_t i = 0; i + 1 < plan->boundaries.size(); ++i)
      CHECK(plan->boundaries[i] < plan->boundaries[i + 1]);
    for (int d = 0; d < p; ++d) {
      CHECK(plan->device_ms[static_cast<std::size_t>(d)] <= plan->bottleneck_ms);
      if (memory.bytes[static_cast<std::size_t>(d)] > 0)
        CHECK(plan->device_bytes[static_cast<std::size_t>(d)] <= memory.bytes[static_cast<std::size_t>(d)]);
    }
    ++planned;
  }
  CHECK(planned >= 40);
  CHECK(refused >= 5);
}

TEST_CASE("plan_v pairs the ends: a heavy first and light last layer share a device", "[partition]") {
  // 4 layers on 2 devices: pieces 0 and 3 on device 0, 1 and 2 on device 1. Layer 0 is heavy and
  // layer 3 light, so device 0's pair (9 + 1) equals device 1's (5 + 5).
  model_profile prof;
  for (double t : {9.0, 5.0, 5.0, 1.0}) prof.layers.push_back(layer(t / 3, 2 * t / 3, 1, 1, 1));
  auto plan = plan_v(prof, devices_of({1, 1}, {0, 0}), {schedule_kind::zbv, 2, 4});
  REQUIRE(plan.ok());
  CHECK(plan->boundaries == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(plan->bottleneck_ms == Approx(10.0));
}

TEST_CASE("plan_v refuses what it cannot plan, saying why", "[partition]") {
  model_profile prof;
  for (int l = 0; l < 3; ++l) prof.layers.push_back(layer(1, 2, 1, 1, 1));
  const cluster two = devices_of({1, 1}, {0, 0});
  auto few = plan_v(prof, two, {schedule_kind::zbv, 2, 4});
  REQUIRE_FALSE(few.ok());
  CHECK(few.message().find("at most 1 devices") != std::string::npos);
  auto flat = plan_v(prof, two, {schedule_kind::one_f_one_b, 1, 4});
  REQUIRE_FALSE(flat.ok());
  CHECK(flat.message().find("not a V schedule") != std::string::npos);
  auto many = plan_v(prof, two, {schedule_kind::zbv, 3, 4});
  REQUIRE_FALSE(many.ok());
  CHECK(many.message().find("cluster has 2") != std::string::npos);
  auto dual = plan_v(prof, devices_of({1}, {0}), {schedule_kind::dualpipev, 1, 1});
  REQUIRE_FALSE(dual.ok());  // DualPipeV needs m >= 2p: the schedule's own refusal
}

TEST_CASE("plan_v_devices keeps the device count whose simulated step is fastest", "[partition]") {
  model_profile prof;
  for (int l = 0; l < 8; ++l) prof.layers.push_back(layer(1, 2, 1, 1, 1));
  const cluster four = devices_of({1, 1, 1, 1}, {0, 0, 0, 0});
  auto one = plan_v_devices(prof, four, schedule_kind::zbv, 8, 1);
  REQUIRE(one.ok());
  CHECK(one->devices == 1);
  auto any = plan_v_devices(prof, four, schedule_kind::zbv, 8);
  REQUIRE(any.ok());
  CHECK(any->devices == 4);  // equal layers: each device more takes work off the others
  CHECK(any->step_ms < one->step_ms);
  CHECK(any->plan.boundaries == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8});
  // DualPipeV needs m >= 2p: with m = 4 at most 2 devices are tried.
  auto dual = plan_v_devices(prof, four, schedule_kind::dualpipev, 4);
  REQUIRE(dual.ok());
  CHECK(dual->devices <= 2);
}

TEST_CASE("plan_v_devices places the heavier pair of pieces on the faster device", "[partition]") {
  // Layers 9, 5, 5, 1 (ms per microbatch): pieces 0 and 3 (9 + 1) against 1 and 2 (5 + 5) are
  // even on equal devices. On a slow device listed first and a fast one second, the cluster's
  // order puts one pair on the slow device; every placement is tried, and which one wins is the
  // one a hand count gives: the fast device (speed 1) takes a pair, the slow one (0.5) the other,
  // and no split does better than 20 ms on the slow one unless the fast one takes more layers.
  model_profile prof;
  for (double t : {9.0, 5.0, 5.0, 1.0}) prof.layers.push_back(layer(t / 3, 2 * t / 3, 1, 1, 1));
  const cluster c = devices_of({0.5, 1.0}, {0, 0});
  auto in_order = plan_v(prof, c, {schedule_kind::zbv, 2, 4});
  auto swapped = plan_v(prof, c, {schedule_kind::zbv, 2, 4, {1, 0}});
  REQUIRE(in_order.ok());
  REQUIRE(swapped.ok());
  CHECK(in_order->placement == std::vector<int>{0, 1});
  CHECK(swapped->placement == std::vector<int>{1, 0});
  // Position 0 holds pieces 0 and 3, position 1 pieces 1 and 2: with equal pairs of 10 ms the
  // slow device takes 20 ms wherever it is, so both orders give the same bottleneck.
  CHECK(in_order->bottleneck_ms == Approx(20.0));
  CHECK(swapped->bottleneck_ms == Approx(20.0));
  auto best = plan_v_devices(prof, c, schedule_kind::zbv, 4, 2);
  REQUIRE(best.ok());
  REQUIRE(best->devices == 2);
  CHECK(best->plan.bottleneck_ms <= 20.0);
  // A placement that names a device twice, or one the cluster lacks, is refused.
  CHECK_FALSE(plan_v(prof, c, {schedule_kind::zbv, 2, 4, {1, 1}}).ok());
  CHECK_FALSE(plan_v(prof, c, {schedule_kind::zbv, 2, 4, {0, 2}}).ok());
  CHECK_FALSE(plan_v(prof, c, {schedule_kind::zbv, 2, 4, {0}}).ok());
}

TEST_CASE("plan_v_devices finds a placement no worse than every one a brute force tries",
          "[partition]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> ms(0.5, 4.0);
  const cluster c = devices_of({1.0, 0.5, 0.25}, {0, 0, 0});
  for (int trial = 0; trial < 12; ++trial) {
    model_profile prof;
    for (int l = 0; l < 6; ++l) prof.layers.push_back(layer(ms(rng), ms(rng), 1, 1, 1));
    auto best = plan_v_devices(prof, c, schedule_kind::zbv, 6);
    REQUIRE(best.ok());
    // Every ordered choice of p of the three devices, p = 1..3, planned and its step simulated
    // here: none is faster than the chosen plan.
    double fastest = std::numeric_limits<double>::infinity();
    for (int p = 1; p <= 3; ++p) {
      std::vector<int> ids{0, 1, 2};
      do {
        const std::vector<int> placement(ids.begin(), ids.begin() + p);
        auto plan = plan_v(prof, c, {schedule_kind::zbv, p, 6, placement});
        if (!plan) continue;
        std::vector<double> speed;
        for (int s = 0; s < 2 * p; ++s)
          speed.push_back(c.speed(placement[static_cast<std::size_t>(s < p ? s : 2 * p - 1 - s)]));
        cost_model costs = profile_costs(prof, plan->boundaries, speed);
        costs.devices.resize(static_cast<std::size_t>(p));
        auto made = make_schedule(schedule_kind::zbv, {p, 6, 2, 1, 2});
        REQUIRE(made.ok());
        auto sim = simulate(lower_communication(std::move(*made)), costs);
        REQUIRE(sim.ok());
        fastest = std::min(fastest, 1000.0 * sim->makespan / 2);
      } while (std::next_permutation(ids.begin(), ids.end()));
    }
    INFO("trial " << trial);
    CHECK(best->step_ms == Approx(fastest).epsilon(1e-12));
  }
}

namespace {

// dualpipe's best bottleneck over every split into P pieces: device r holds pieces r and P-1-r
// (virtual stages r and 2P-1-r), each at its own speed and within its own memory.
double brute_force_dualpipe(const model_profile& prof, const cluster& c, int P,
                            const std::vector<int>& fl) {
  const int n = static_cast<int>(prof.layers.size());
  double best = std::numeric_limits<double>::infinity();
  for (int mask = 0; mask < (1 << (n - 1)); ++mask) {
    if (__builtin_popcount(static_cast<unsigned>(mask)) != P - 1) continue;
    const auto pieces = split_of(n, mask);
    double worst = 0;
    bool fits = true;
    for (int r = 0; r < P; ++r) {
      double ms = 0;
      std::int64_t bytes = 0;
      for (int vs : {r, 2 * P - 1 - r}) {
        const auto& piece = pieces[static_cast<std::size_t>(vs % P)];
        std::int64_t saved = 0;
        for (int l = piece.first; l <= piece.second; ++l) {
          const layer_profile& x = prof.layers[static_cast<std::size_t>(l)];
          ms += x.fwd_ms + x.bwd_ms;
          bytes += 2 * x.param_bytes + x.optimizer_bytes;
          saved += x.saved_bytes;
        }
        bytes += fl[static_cast<std::size_t>(vs)] * saved;
      }
      worst = std::max(worst, ms / c.speed(r));
      if (c.memory(r) > 0 && bytes > c.memory(r)) fits = false;
    }
    if (fits) best = std::min(best, worst);
  }
  return best;
}

}  // namespace

TEST_CASE("plan_v plans dualpipe as the brute force over its mirrored devices does", "[partition]") {
  // dualpipe over P devices is a V over P/2 positions, each position's two devices holding the
  // same two pieces: the plan's bottleneck is the best any split of P pieces reaches with every
  // device's speed and memory (each device's own stash counts), or none fits and it says so.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> ms(0.5, 4.0);
  std::uniform_int_distribution<int> bytes(1, 40);
  int planned = 0, refused = 0;
  for (int trial = 0; trial < 90; ++trial) {
    const int P = 2 * (1 + trial % 3), n = P + static_cast<int>(rng() % 4);
    const auto [prof, memory] = random_trial(rng, ms, bytes, trial, n, P, 250);
    const cluster c = devices_of(memory.speeds, memory.bytes);
    const int m = 2 * P;
    INFO("trial " << trial << ", P " << P << ", " << n << " layers");
    auto plan = plan_v(prof, c, {schedule_kind::dualpipe, P, m});
    auto made = make_schedule(schedule_kind::dualpipe, {P, m, 2, 1, 1});
    REQUIRE(made.ok());
    if (!matches(plan, brute_force_dualpipe(prof, c, P, peak_in_flight(*made)), P)) {
      ++refused;
      continue;
    }
    REQUIRE(plan->device_ms.size() == static_cast<std::size_t>(P));
    for (int d = 0; d < P; ++d) {
      CHECK(plan->device_ms[static_cast<std::size_t>(d)] <= plan->bottleneck_ms * (1 + 1e-12));
      if (memory.bytes[static_cast<std::size_t>(d)] > 0)
        CHECK(plan->device_bytes[static_cast<std::size_t>(d)] <= memory.bytes[static_cast<std::size_t>(d)]);
    }
    ++planned;
  }
  CHECK(planned >= 30);
  CHECK(refused >= 3);
  // An odd device count is refused by name; plan_v_devices tries even counts only.
  model_profile prof;
  for (int l = 0; l < 6; ++l) prof.layers.push_back(layer(1, 2, 1, 1, 1, 1));
  const cluster c = devices_of({1, 1, 1, 1}, {0, 0, 0, 0});
  CHECK(plan_v(prof, c, {schedule_kind::dualpipe, 3, 6}).message().find("even device count") !=
        std::string::npos);
  auto choice = plan_v_devices(prof, c, schedule_kind::dualpipe, 8);
  REQUIRE(choice.ok());
  CHECK(choice->devices % 2 == 0);
}
