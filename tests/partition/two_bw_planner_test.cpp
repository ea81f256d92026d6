// PipeDream-2BW's planner: plans fit in memory (by its estimate and in the simulator), a model too
// big for any device is an error with the excess, the chosen plan scores at least as well as the
// alternatives, and m >= p always.
#include "partition/two_bw_planner.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "runtime/cost_model.hpp"
#include "runtime/lower.hpp"
#include "runtime/schedule.hpp"
#include "runtime/simulate.hpp"
#include "profile_fixtures.hpp"

using namespace pipeworks;

namespace {

cluster servers(int per_server, int count, double nvlink, double network, std::int64_t memory) {
  cluster c;
  c.device_memory_bytes = memory;
  c.levels.push_back(cluster_level{"server", per_server, nvlink, 0.0});
  if (count > 1) c.levels.push_back(cluster_level{"cluster", count, network, 0.0});
  return c;
}

using partition_test::layer;

model_profile random_profile(std::mt19937& rng, int layers, std::int64_t microbatch) {
  std::uniform_real_distribution<double> t(0.5, 4.0);
  std::uniform_int_distribution<std::int64_t> bytes(1000, 100000);
  model_profile p;
  p.model = "random";
  p.microbatch = microbatch;
  for (int l = 0; l < layers; ++l) {
    const double f = t(rng);
    p.layers.push_back(layer(f, 2 * f, bytes(rng), bytes(rng), bytes(rng), bytes(rng)));
  }
  return p;
}

// The plan's 2BW schedule in the simulator, with the cluster's memory per device and the
// planner's stage figures.
result<simulation> simulate_plan(const two_bw_plan& plan, const model_profile& prof, const cluster& c) {
  const schedule_params params{plan.p, plan.m, 1, plan.w, 2};
  auto sched = make_schedule(schedule_kind::two_bw, params);
  if (!sched) return sched.err();
  cost_model cm;
  cm.stages.clear();
  cm.devices.clear();
  const double f = static_cast<double>(plan.b) / static_cast<double>(prof.microbatch);
  for (int s = 0; s < plan.p; ++s) {
    const planned_stage& st = plan.stages[s];
    stage_cost sc;
    sc.forward = 0;
    sc.backward = 0;
    sc.weight_grad = 0;
    for (int l = st.first_layer; l <= st.last_layer; ++l) {
      sc.forward += prof.layers[l].fwd_ms * f;
      sc.backward += prof.layers[l].bwd_ms * f;
      sc.activation_bytes += static_cast<std::int64_t>(prof.layers[l].saved_bytes * f + 0.5);
      sc.param_bytes += prof.layers[l].param_bytes;
    }
    sc.boundary_bytes = static_cast<std::int64_t>(prof.layers[st.last_layer].activation_bytes * f + 0.5);
    sc.reduce = 0;
    cm.stages.push_back(sc);
    std::int64_t mem = 0;
    for (int d : st.devices) {
      const std::int64_t cap = c.memory(d);
      if (cap > 0) mem = mem == 0 ? cap : std::min(mem, cap);
    }
    cm.devices.push_back(device_cost{1.0, mem});
  }
  simulate_options so;
  so.record_timeline = false;
  return simulate(lower_communication(std::move(*sched)), cm, so);
}

}  // namespace

TEST_CASE("2bw: every plan fits in memory by its estimate and in the simulator", "[partition]") {
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int> layers(2, 9), per_server(1, 4), count(1, 3), mbk(0, 3);
  int planned = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const std::int64_t microbatch = std::int64_t{1} << mbk(rng);
    const model_profile prof = random_profile(rng, layers(rng), microbatch);
    std::int64_t total = 0;
    for (const auto& l : prof.layers) total += 3 * l.param_bytes + l.optimizer_bytes + l.saved_bytes;
    // Memory from a fraction to a few times the whole model's need: some instances must split.
    std::uniform_real_distribution<double> frac(0.25, 3.0);
    const std::int64_t memory = static_cast<std::int64_t>(static_cast<double>(total) * frac(rng));
    const cluster c = servers(per_server(rng), count(rng), 1e9, 1e8, memory);
    two_bw_options opt;
    opt.simulate_top = 4;
    auto plan = plan_two_bw(prof, c, opt);
    if (!plan) {
      CHECK(plan.message().find("bytes more than its memory") != std::string::npos);
      continue;
    }
    ++planned;
    INFO("trial " << trial << " p=" << plan->p << " w=" << plan->w << " b=" << plan->b << " m=" << plan->m);
    REQUIRE(static_cast<int>(plan->memory_bytes.size()) == plan->p * plan->w);
    for (int d = 0; d < plan->p * plan->w; ++d) CHECK(plan->memory_bytes[d] <= c.memory(d));
    CHECK(plan->m >= plan->p);
    CHECK(plan->throughput_samples_per_s > 0);
    CHECK(plan->simulated);
    auto sim = simulate_plan(*plan, prof, c);
    INFO((sim ? std::string("ok") : sim.message()));
    CHECK(sim.ok());
  }
  CHECK(planned > 10);
}

TEST_CASE("2bw: a model too big for any device is an error with the excess", "[partition]") {
  model_profile prof;
  prof.microbatch = 4;
  // One layer of 1000 parameter bytes: 3·1000 + 500 optimizer bytes with no split possible.
  prof.layers.push_back(layer(1, 2, 10, 40, 1000, 500));
  const cluster c = servers(4, 2, 1e9, 1e8, 3000);
  auto plan = plan_two_bw(prof, c);
  REQUIRE_FALSE(plan.ok());
  // The smallest candidate: b = 1 (4 × 1/4), p = 1: 3500 + 10 saved bytes = 3510, 510 over.
  INFO(plan.message());
  CHECK(plan.message().find("no 2bw plan fits in memory") != std::string::npos);
  CHECK(plan.message().find("510 bytes more than its memory") != std::string::npos);
}

TEST_CASE("2bw: shares the optimizer state out over replicas when only that fits", "[partition]") {
  model_profile prof;
  prof.microbatch = 4;
  // One layer: 3 x 1000 bytes of weights (two versions and the gradient) and 2000 of optimizer
  // state. On devices of 4000 bytes nothing fits whole (5000 before the stash); shared out over
  // w replicas (ZeRO 1) a replica holds 3000 + 2000 / w and its stash: 4000 at w = 2 leaves no
  // room for the stash, w = 4 does.
  // Its largest tensor holds a quarter of the state, so up to 4 replicas can share it evenly.
  prof.layers.push_back(layer(1, 2, 10, 40, 1000, 2000));
  prof.layers.back().largest_optimizer_bytes = 500;
  const cluster tight = servers(4, 2, 1e9, 1e8, 4000);
  auto plan = plan_two_bw(prof, tight);
  INFO((plan.ok() ? std::string() : plan.message()));
  REQUIRE(plan.ok());
  CHECK(plan->zero == 1);
  CHECK(plan->w >= 4);
  CHECK(plan->max_memory_bytes <= 4000);
  // The same plan without ZeRO would not fit.
  CHECK(plan->max_memory_bytes + 2000 - std::max<std::int64_t>((2000 + plan->w - 1) / plan->w, 500) > 4000);
  // Without knowing the layer's tensors the planner cannot share one layer out at all.
  prof.layers.back().largest_optimizer_bytes = 0;
  CHECK_FALSE(plan_two_bw(prof, tight).ok());
  // With memory to spare the gather is not worth it.
  const cluster roomy = servers(4, 2, 1e9, 1e8, 1000000);
  auto free_plan = plan_two_bw(prof, roomy);
  REQUIRE(free_plan.ok());
  CHECK(free_plan->zero == 0);
}

TEST_CASE("2bw: the chosen plan scores at least as well as the alternatives", "[partition]") {
  // 8 equal layers, ample memory, cheap communication, one server of 8.
  model_profile prof;
  prof.microbatch = 8;
  for (int l = 0; l < 8; ++l) prof.layers.push_back(layer(1, 2, 1000, 1000, 1000, 1000));
  const cluster c = servers(8, 1, 1e12, 1e12, std::int64_t{1} << 40);
  two_bw_options opt;
  opt.simulate_top = 1000;  // every candidate simulated: the choice is the best by the simulator
  auto plan = plan_two_bw(prof, c, opt);
  REQUIRE(plan.ok());
  auto data_parallel = evaluate_two_bw(prof, c, 1, 8, plan->b, plan->m < 1 ? 1 : plan->m, opt);
  auto deep = evaluate_two_bw(prof, c, 8, 1, plan->b, 8 * ((plan->m + 7) / 8), opt);
  REQUIRE(data_parallel.ok());
  REQUIRE(deep.ok());
  // Data parallelism has no fill or drain: with free communication it beats the deep pipeline.
  CHECK(data_parallel->throughput_samples_per_s > deep->throughput_samples_per_s);
  CHECK(plan->throughput_samples_per_s >= data_parallel->throughput_samples_per_s * (1 - 1e-9));
  CHECK(plan->throughput_samples_per_s >= deep->throughput_samples_per_s * (1 - 1e-9));
  // And the plan is the best over every configuration.
  for (int p = 1; p <= 8; ++p)
    for (int w = 1; p * w <= 8; ++w)
      for (std::int64_t b : {2, 4, 8, 16, 32})
        for (int m : {p, 2 * p, 4 * p}) {
          auto alt = evaluate_two_bw(prof, c, p, w, b, m, opt);
          REQUIRE(alt.ok());
          CHECK(plan->throughput_samples_per_s >= alt->throughput_samples_per_s * (1 - 1e-9));
        }
  CHECK(plan->p == 1);
  CHECK(plan->w == 8);
}

TEST_CASE("2bw: pipeline stages of a replica stay inside a server when they fit", "[partition]") {
  // Memory forces p >= 2; 2 servers of 4: p = 2 or 4 keeps every pipeline link on level 0.
  model_profile prof;
  prof.microbatch = 2;
  for (int l = 0; l < 4; ++l) prof.layers.push_back(layer(1, 2, 100, 100, 1000, 1000));
  const cluster c = servers(4, 2, 1e12, 1e6, 9000);
  auto plan = plan_two_bw(prof, c);
  REQUIRE(plan.ok());
  CHECK(plan->p >= 2);
  CHECK(plan->inter_server_links == 0);
  for (const auto& st : plan->stages)
    for (std::size_t r = 0; r < st.devices.size(); ++r) CHECK(st.devices[r] == static_cast<int>(r) * plan->p + (&st - plan->stages.data()));
}

TEST_CASE("2bw: never m < p and invalid configurations are errors", "[partition]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> layers(1, 8);
  for (int trial = 0; trial < 20; ++trial) {
    const model_profile prof = random_profile(rng, layers(rng), 4);
    const cluster c = servers(4, 2, 1e9, 1e8, 0);
    two_bw_options opt;
    opt.use_simulator = trial % 2 == 0;
    auto plan = plan_two_bw(prof, c, opt);
    REQUIRE(plan.ok());
    CHECK(plan->m >= plan->p);
    CHECK(plan->p <= static_cast<int>(prof.layers.size()));
    CHECK(plan->p * plan->w <= 8);
  }
  model_profile prof;
  prof.microbatch = 1;
  for (int l = 0; l < 4; ++l) prof.layers.push_back(layer(1, 2, 10, 10, 10));
  const cluster c = servers(4, 1, 1e9, 1e9, 0);
  CHECK_FALSE(evaluate_two_bw(prof, c, 4, 1, 1, 3).ok());  // m < p
  CHECK_FALSE(evaluate_two_bw(prof, c, 5, 1, 1, 5).ok());  // p > layers
  CHECK_FALSE(evaluate_two_bw(prof, c, 2, 3, 1, 2).ok());  // p·w > devices
  CHECK(evaluate_two_bw(prof, c, 4, 1, 1, 4).ok());
}

namespace {

cluster device_list(const std::vector<std::pair<double, std::int64_t>>& specs, double bandwidth) {
  cluster c;
  for (std::size_t d = 0; d < specs.size(); ++d)
    c.devices.push_back(device_spec{"d" + std::to_string(d), specs[d].first, specs[d].second});
  c.levels.push_back(cluster_level{"link", static_cast<int>(specs.size()), bandwidth, 0.0});
  return c;
}

}  // namespace

TEST_CASE("2bw: 2 fast and 2 slow devices each get their share", "[partition][hetero]") {
  // 12 equal layers, tiny parameters (cheap all-reduce); fast devices listed first, so replica r
  // on devices r·p + s would pair a fast stage with a slow one in every replica.
  model_profile prof;
  prof.microbatch = 4;
  for (int l = 0; l < 12; ++l) prof.layers.push_back(layer(1, 2, 100, 100, 10));
  const cluster c = device_list({{2.0, 0}, {2.0, 0}, {1.0, 0}, {1.0, 0}}, 1e12);
  // p = 2, w = 2: the fast pair serves stage 0 with 8 layers, the slow pair stage 1 with 4.
  auto two = evaluate_two_bw(prof, c, 2, 2, 4, 8);
  REQUIRE(two.ok());
  CHECK(two->stages[0].devices == std::vector<int>{0, 1});
  CHECK(two->stages[1].devices == std::vector<int>{2, 3});
  CHECK(two->stages[0].last_layer == 7);
  CHECK(two->stages[0].time_ms == Approx(8 * 3 / 2.0));
  CHECK(two->stages[1].time_ms == Approx(4 * 3 / 1.0));
  // The planner's choice: every stage's replicas have one speed, every fast device holds twice
  // the layers of a slow one, and it beats four slow devices by more than 1.3x (6 / 4 ideal).
  auto plan = plan_two_bw(prof, c);
  REQUIRE(plan.ok());
  INFO("p=" << plan->p << " w=" << plan->w << " b=" << plan->b << " m=" << plan->m);
  std::vector<int> layers_on(4, 0);
  for (const planned_stage& st : plan->stages) {
    for (int d : st.devices) {
      CHECK(c.speed(d) == c.speed(st.devices[0]));
      layers_on[d] = st.last_layer - st.first_layer + 1;
    }
  }
  CHECK(plan->p * plan->w == 4);
  CHECK(layers_on[0] == 2 * layers_on[2]);
  CHECK(layers_on[1] == 2 * layers_on[3]);
  auto slow = plan_two_bw(prof, device_list({{1.0, 0}, {1.0, 0}, {1.0, 0}, {1.0, 0}}, 1e12));
  REQUIRE(slow.ok());
  CHECK(plan->throughput_samples_per_s > 1.3 * slow->throughput_samples_per_s);
}

TEST_CASE("2bw: a device with less memory takes fewer layers", "[partition][hetero]") {
  // 8 equal layers of 300 weight bytes (two versions, gradients) and 100 saved bytes per sample.
  // Device 0 holds 1300 bytes: 4 layers (1200 + stash) never fit it, 3 layers at the last stage
  // (900 + 300 at b = 1) do; device 1 is unlimited.
  model_profile prof;
  prof.microbatch = 1;
  for (int l = 0; l < 8; ++l) prof.layers.push_back(layer(1, 2, 10, 100, 100));
  const cluster c = device_list({{1.0, 1300}, {1.0, 0}}, 1e12);
  auto plan = plan_two_bw(prof, c);
  REQUIRE(plan.ok());
  INFO("p=" << plan->p << " w=" << plan->w << " b=" << plan->b << " m=" << plan->m);
  REQUIRE(plan->p == 2);
  int small = -1, big = -1;
  for (const planned_stage& st : plan->stages) {
    REQUIRE(st.devices.size() == 1);
    (st.devices[0] == 0 ? small : big) = st.last_layer - st.first_layer + 1;
    if (st.devices[0] == 0) CHECK(st.memory_bytes <= 1300);
  }
  CHECK(small < big);
  CHECK(small + big == 8);
  REQUIRE(plan->memory_bytes.size() == 2);
  CHECK(plan->memory_bytes[0] <= 1300);
  // The roomy device runs stage 0, which stashes p microbatches; the small one the last (1).
  CHECK(plan->stages[0].devices == std::vector<int>{1});
}

TEST_CASE("2bw: on random device lists every plan fits each device's own memory",
          "[partition][hetero]") {
  std::mt19937 rng(99);
  std::uniform_int_distribution<int> layers(2, 8), devices(1, 6), pick(0, 2);
  int planned = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const model_profile prof = random_profile(rng, layers(rng), 4);
    std::int64_t total = 0;
    for (const auto& l : prof.layers)
      total += 3 * l.param_bytes + l.optimizer_bytes + l.saved_bytes;
    std::vector<std::pair<double, std::int64_t>> specs;
    const int n = devices(rng);
    for (int d = 0; d < n; ++d)
      specs.push_back({0.5 + pick(rng), pick(rng) == 0 ? 0 : total * (1 + pick(rng)) / 3});
    const cluster c = device_list(specs, 1e9);
    auto plan = plan_two_bw(prof, c);
    if (!plan) {
      CHECK(plan.message().find("bytes more than its memory") != std::string::npos);
      continue;
    }
    ++planned;
    INFO("trial " << trial << " p=" << plan->p << " w=" << plan->w);
    std::vector<int> seen;
    for (const planned_stage& st : plan->stages) {
      REQUIRE(static_cast<int>(st.devices.size()) == plan->w);
      for (int d : st.devices) {
        seen.push_back(d);
        REQUIRE(d < static_cast<int>(plan->memory_bytes.size()));
        CHECK(plan->memory_bytes[d] == st.memory_bytes);
        if (c.memory(d) > 0) CHECK(st.memory_bytes <= c.memory(d));
      }
    }
    std::sort(seen.begin(), seen.end());
    CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
  }
  CHECK(planned > 10);
}

namespace {

// A copy of `base` whose times are divided by `faster` and saved bytes by `lighter` (a GPU's
// profile of the same model).
model_profile measured_elsewhere(const model_profile& base, double faster, std::int64_t lighter) {
  model_profile p = base;
  p.model = base.model;
  for (layer_profile& l : p.layers) {
    l.fwd_ms /= faster;
    l.bwd_ms /= faster;
    l.saved_bytes /= lighter;
  }
  return p;
}

// device_list with each device's profile name ("" for the plan's).
cluster named(const std::vector<std::pair<double, std::int64_t>>& specs,
              const std::vector<std::string>& profiles, double bandwidth) {
  cluster c = device_list(specs, bandwidth);
  for (std::size_t d = 0; d < profiles.size(); ++d) c.devices[d].profile = profiles[d];
  return c;
}

}  // namespace

TEST_CASE("2bw with device profiles equal to the plan's own plans as without them", "[partition][2bw]") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 10; ++trial) {
    const model_profile prof = random_profile(rng, 6, 4);
    const std::vector<std::pair<double, std::int64_t>> specs{{1.0, 0}, {2.0, 0}, {1.0, 0}};
    two_bw_options o;
    o.device_profiles.emplace("same", prof);
    auto with = plan_two_bw(prof, named(specs, {"same", "", "same"}, 1e9), o);
    auto without = plan_two_bw(prof, device_list(specs, 1e9));
    REQUIRE(with.ok());
    REQUIRE(without.ok());
    INFO("trial " << trial);
    CHECK(with->p == without->p);
    CHECK(with->w == without->w);
    CHECK(with->b == without->b);
    CHECK(with->m == without->m);
    CHECK(with->step_ms == without->step_ms);
    CHECK(with->memory_bytes == without->memory_bytes);
    REQUIRE(with->stages.size() == without->stages.size());
    for (std::size_t s = 0; s < with->stages.size(); ++s) {
      CHECK(with->stages[s].first_layer == without->stages[s].first_layer);
      CHECK(with->stages[s].devices == without->stages[s].devices);
      CHECK(with->stages[s].time_ms == without->stages[s].time_ms);
    }
  }
}

TEST_CASE("2bw times and sizes each device by its own profile", "[partition][2bw]") {
  // 12 equal layers (3 ms a microbatch, 100 saved bytes); two CPUs and two GPUs of the same
  // nominal speed, the GPUs' profile 4 times faster and saving half the bytes.
  model_profile prof;
  prof.model = "m";
  prof.microbatch = 4;
  for (int l = 0; l < 12; ++l) prof.layers.push_back(layer(1, 2, 100, 100, 10));
  two_bw_options o;
  o.device_profiles.emplace("gpu", measured_elsewhere(prof, 4.0, 2));
  const cluster c = named({{1.0, 0}, {1.0, 0}, {1.0, 0}, {1.0, 0}}, {"", "", "gpu", "gpu"}, 1e12);
  // p = 2, w = 2: the GPUs (faster by their profile) serve stage 0; 10 layers there take
  // 10 · 0.75 = 7.5 ms against 2 · 3 = 6 on the CPUs (9 would leave 9 ms to the CPUs).
  auto two = evaluate_two_bw(prof, c, 2, 2, 4, 8, o);
  REQUIRE(two.ok());
  CHECK(two->stages[0].devices == std::vector<int>{2, 3});
  CHECK(two->stages[1].devices == std::vector<int>{0, 1});
  CHECK(two->stages[0].last_layer == 9);
  CHECK(two->stages[0].time_ms == Approx(7.5));
  CHECK(two->stages[1].time_ms == Approx(6.0));
  // Memory by each device's own profile: 3 · 10 weight bytes per layer, the stash (p − s) times
  // the saved bytes at b = 4 (the profile's microbatch): 50 per layer on a GPU, 100 on a CPU.
  REQUIRE(two->memory_bytes.size() == 4);
  CHECK(two->memory_bytes[2] == 10 * 30 + 2 * 10 * 50);
  CHECK(two->memory_bytes[0] == 2 * 30 + 1 * 2 * 100);
  // Without the GPUs' profile the same devices are four equals: 6 layers each.
  auto flat = evaluate_two_bw(prof, device_list({{1.0, 0}, {1.0, 0}, {1.0, 0}, {1.0, 0}}, 1e12), 2,
                              2, 4, 8);
  REQUIRE(flat.ok());
  CHECK(flat->stages[0].last_layer == 5);
  auto plan = plan_two_bw(prof, c, o);
  REQUIRE(plan.ok());
  CHECK(plan->throughput_samples_per_s > flat->throughput_samples_per_s);
}

// For each configuration the planner scores, the split it takes is the best of every contiguous
// split on the devices it placed, each replica by its own profile and speed, within each device's
// own memory by its own profile: a brute force over the splits of random small cases.
TEST_CASE("2bw splits optimally over devices with profiles of their own", "[partition][2bw]") {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> layers(2, 7), devices(2, 5), pick(0, 2);
  int checked = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const model_profile prof = random_profile(rng, layers(rng), 4);
    const int L = static_cast<int>(prof.layers.size());
    two_bw_options o;
    o.device_profiles.emplace("gpu", measured_elsewhere(prof, 1.0 + 4.0 * pick(rng), 1 + pick(rng)));
    std::int64_t total = 0;
    for (const auto& l : prof.layers) total += 3 * l.param_bytes + l.optimizer_bytes + 2 * l.saved_bytes;
    std::vector<std::pair<double, std::int64_t>> specs;
    std::vector<std::string> names;
    const int n = devices(rng);
    for (int d = 0; d < n; ++d) {
      specs.push_back({0.5 + pick(rng), pick(rng) == 0 ? 0 : total * (1 + pick(rng)) / 3});
      names.push_back(pick(rng) == 0 ? "" : "gpu");
    }
    const cluster c = named(specs, names, 1e9);
    const model_profile& gpu = o.device_profiles.at("gpu");
    for (int p = 1; p <= std::min(L, n); ++p)
      for (int w = 1; p * w <= n; ++w) {
        auto plan = evaluate_two_bw(prof, c, p, w, 4, 2 * p, o);
        if (!plan) continue;
        ++checked;
        INFO("trial " << trial << " p=" << p << " w=" << w);
        auto of = [&](int d) -> const model_profile& { return names[d].empty() ? prof : gpu; };
        auto need = [&](int d, int s, int first, int last) {
          std::int64_t bytes = 0;
          for (int l = first; l <= last; ++l)
            bytes += 3 * of(d).layers[l].param_bytes + of(d).layers[l].optimizer_bytes +
                     (p - s) * of(d).layers[l].saved_bytes;
          return bytes;
        };
        auto time = [&](int d, int first, int last) {
          double t = 0;
          for (int l = first; l <= last; ++l) t += of(d).layers[l].fwd_ms + of(d).layers[l].bwd_ms;
          return t / c.speed(d);
        };
        double planned = 0;
        for (int s = 0; s < p; ++s) {
          const planned_stage& st = plan->stages[s];
          planned = std::max(planned, st.time_ms);
          double slowest = 0;
          for (int d : st.devices) {
            slowest = std::max(slowest, time(d, st.first_layer, st.last_layer));
            CHECK(plan->memory_bytes[d] == need(d, s, st.first_layer, st.last_layer));
            if (c.memory(d) > 0) CHECK(plan->memory_bytes[d] <= c.memory(d));
          }
          CHECK(st.time_ms == Approx(slowest).epsilon(1e-12));
        }
        double best = std::numeric_limits<double>::infinity();
        for (int mask = 0; mask < (1 << (L - 1)); ++mask) {
          const auto split = partition_test::split_of(L, mask);
          if (static_cast<int>(split.size()) != p) continue;
          double worst = 0;
          bool fits = true;
          for (int s = 0; s < p; ++s)
            for (int d : plan->stages[s].devices) {
              worst = std::max(worst, time(d, split[s].first, split[s].second));
              fits = fits && (c.memory(d) == 0 ||
                              need(d, s, split[s].first, split[s].second) <= c.memory(d));
            }
          if (fits) best = std::min(best, worst);
        }
        CHECK(planned == Approx(best).epsilon(1e-12));
      }
  }
  CHECK(checked > 50);
}

TEST_CASE("2bw refuses device profiles it was not given or of another model", "[partition][2bw]") {
  model_profile p;
  p.model = "m";
  for (int l = 0; l < 4; ++l) p.layers.push_back(partition_test::layer(1, 2, 100, 100, 100));
  cluster c;
  c.devices.push_back(device_spec{"cpu", 1.0, 0, ""});
  c.devices.push_back(device_spec{"h100", 1.0, 0, "gpu-profile.json"});
  auto plan = plan_two_bw(p, c, {});
  REQUIRE(!plan.ok());
  CHECK(plan.message().find("h100 names the profile gpu-profile.json, which the planner was not "
                            "given") != std::string::npos);
  two_bw_options o;
  model_profile other = p;
  other.layers[2].param_bytes = 7;
  o.device_profiles.emplace("gpu-profile.json", other);
  plan = plan_two_bw(p, c, o);
  REQUIRE(!plan.ok());
  CHECK(plan.message().find("layer 2") != std::string::npos);
  CHECK(plan.message().find("param_bytes") != std::string::npos);
}

namespace {

// Two layers of 100 parameter and 200 optimizer bytes (2BW's fixed 3·100 + 200 = 500 each),
// 4000 saved bytes and a 40-byte output each, at microbatch 4 (b = 1: 1000 and 10).
model_profile two_heavy_layers(recompute_mode mode) {
  model_profile p;
  p.model = "two";
  p.microbatch = 4;
  p.recompute = mode;
  p.layers = {layer(1, 2, 40, 4000, 100, 200), layer(1, 2, 40, 4000, 100, 200)};
  return p;
}

}  // namespace

TEST_CASE("2bw: a full recompute profile's stash is each input in flight and one whole stash",
          "[partition][recompute]") {
  // p = 2, b = 4: stage 0 holds 2 microbatches, stage 1 one.
  //   none: stage 0 500 + 2·4000 = 8500, stage 1 500 + 4000 = 4500.
  //   full: stage 0 500 + 2·0 + 4000 = 4500 (layer 0's input is not in the profile: 0),
  //         stage 1 500 + 1·40 + 4000 = 4540; at b = 2 the bytes halve: 500 + 20 + 2000.
  const cluster c = servers(2, 1, 1e9, 1e9, 0);
  two_bw_options o;
  o.use_simulator = false;
  auto none = evaluate_two_bw(two_heavy_layers(recompute_mode::none), c, 2, 1, 4, 2, o);
  REQUIRE(none);
  CHECK(none->recompute == recompute_mode::none);
  CHECK(none->stages[0].memory_bytes == 8500);
  CHECK(none->stages[1].memory_bytes == 4500);
  auto full = evaluate_two_bw(two_heavy_layers(recompute_mode::full), c, 2, 1, 4, 2, o);
  REQUIRE(full);
  CHECK(full->recompute == recompute_mode::full);
  CHECK(full->stages[0].memory_bytes == 4500);
  CHECK(full->stages[1].memory_bytes == 4540);
  CHECK(full->memory_bytes == std::vector<std::int64_t>{4500, 4540});
  auto half = evaluate_two_bw(two_heavy_layers(recompute_mode::full), c, 2, 1, 2, 2, o);
  REQUIRE(half);
  CHECK(half->stages[1].memory_bytes == 500 + 20 + 2000);
  // Selective's saved bytes are already the reduced stash: as without recomputation.
  auto selective = evaluate_two_bw(two_heavy_layers(recompute_mode::selective), c, 2, 1, 4, 2, o);
  REQUIRE(selective);
  CHECK(selective->stages[0].memory_bytes == 8500);
}

TEST_CASE("2bw: under a memory limit only full recomputation fits", "[partition][recompute]") {
  // 1600 bytes per device, 2 devices. One stage holds both layers' 1000 fixed bytes and at least
  // (b = 1) 2000 saved: never. Two stages at b = 1 without recomputation: stage 0 500 + 2·1000.
  // With full: stage 0 500 + 0 + 1000 = 1500, stage 1 500 + 10 + 1000 = 1510; b = 2 would need
  // 500 + 2000 on stage 0. So the plan is p = 2, b = 1, and it runs with --recompute full.
  const cluster c = servers(2, 1, 1e9, 1e9, 1600);
  for (bool sim : {false, true}) {
    two_bw_options o;
    o.use_simulator = sim;
    CAPTURE(sim);
    auto none = plan_two_bw(two_heavy_layers(recompute_mode::none), c, o);
    REQUIRE_FALSE(none);
    CHECK_THAT(none.message(), Catch::Matchers::Contains("no 2bw plan fits") &&
                                   Catch::Matchers::Contains("--recompute"));
    auto full = plan_two_bw(two_heavy_layers(recompute_mode::full), c, o);
    REQUIRE(full);
    CHECK(full->recompute == recompute_mode::full);
    CHECK(full->p == 2);
    CHECK(full->b == 1);
    CHECK(full->stages[0].memory_bytes == 1500);
    CHECK(full->stages[1].memory_bytes == 1510);
    CHECK(full->max_memory_bytes <= 1600);
    CHECK(full->simulated == sim);
  }
}
