// PipeDream's planner: its bottleneck equals a brute force over every contiguous split and
// replica assignment on small flat clusters, and it makes the obvious choices on hand-built cases.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "partition/pipedream_planner.hpp"
#include "profile_fixtures.hpp"

using namespace pipeworks;

namespace {

cluster flat(int n, double bandwidth, std::int64_t memory = 0) {
  cluster c;
  c.device_memory_bytes = memory;
  c.levels.push_back(cluster_level{"server", n, bandwidth, 0.0});
  return c;
}

using partition_test::layer;

struct brute_result {
  double bottleneck = std::numeric_limits<double>::infinity();
  bool any = false;
};

// Every split into contiguous stages (a bit per gap) and every replica vector with Σr ≤ n; the
// objective written out from the header, with sums taken directly.
brute_result brute_force(const model_profile& p, int n, double bw, std::int64_t memory,
                         int in_flight) {
  const int L = static_cast<int>(p.layers.size());
  brute_result best;
  for (int mask = 0; mask < (1 << (L - 1)); ++mask) {
    const std::vector<std::pair<int, int>> st = partition_test::split_of(L, mask);
    const int s = static_cast<int>(st.size());
    if (s > n) continue;
    bool fits = true;
    double links = 0;
    for (int k = 0; k < s; ++k) {
      std::int64_t mem = 0, saved = 0;
      for (int l = st[k].first; l <= st[k].second; ++l) {
        mem += 2 * p.layers[l].param_bytes + p.layers[l].optimizer_bytes;
        saved += p.layers[l].saved_bytes;
      }
      mem += (in_flight > 0 ? in_flight : s - k) * saved;
      if (memory != 0 && mem > memory) fits = false;
      if (k + 1 < s)
        links = std::max(links, 2.0 * p.layers[st[k].second].activation_bytes / bw * 1000.0);
    }
    if (!fits) continue;
    std::vector<int> r(s, 1);
    while (true) {
      int used = 0;
      for (int x : r) used += x;
      if (used <= n) {
        double b = links;
        for (int k = 0; k < s; ++k) {
          double c = 0, w = 0;
          for (int l = st[k].first; l <= st[k].second; ++l) {
            c += p.layers[l].fwd_ms + p.layers[l].bwd_ms;
            w += static_cast<double>(p.layers[l].param_bytes);
          }
          const double t = c / r[k] + (r[k] > 1 ? 2.0 * (r[k] - 1) / r[k] * w / bw * 1000.0 : 0.0);
          b = std::max(b, t);
        }
        best.any = true;
        best.bottleneck = std::min(best.bottleneck, b);
      }
      int k = 0;  // next replica vector, odometer style, digits 1..n
      while (k < s && r[k] == n) r[k++] = 1;
      if (k == s) break;
      ++r[k];
    }
  }
  return best;
}

// The returned stages' own bottleneck and memory, recomputed from the layers with the header's
// formulas: stage s of p keeps in_flight (or p − s) microbatches' saved bytes.
void check_returned_stages(const pipeline_plan& plan, const model_profile& p, double bw,
                           std::int64_t memory, int in_flight) {
  const int stages = static_cast<int>(plan.stages.size());
  double b = 0;
  for (int s = 0; s < stages; ++s) {
    const planned_stage& st = plan.stages[s];
    double c = 0, w = 0;
    std::int64_t mem = 0;
    for (int l = st.first_layer; l <= st.last_layer; ++l) {
      c += p.layers[l].fwd_ms + p.layers[l].bwd_ms;
      w += static_cast<double>(p.layers[l].param_bytes);
      mem += 2 * p.layers[l].param_bytes + p.layers[l].optimizer_bytes +
             (in_flight > 0 ? in_flight : stages - s) * p.layers[l].saved_bytes;
    }
    const int r = st.replicas;
    b = std::max(b, c / r + (r > 1 ? 2.0 * (r - 1) / r * w / bw * 1000.0 : 0.0));
    if (s + 1 < stages) b = std::max(b, 2.0 * p.layers[st.last_layer].activation_bytes / bw * 1000.0);
    CHECK(st.memory_bytes == mem);
    if (memory != 0) CHECK(mem <= memory);
  }
  CHECK(plan.bottleneck_ms == Approx(b).epsilon(1e-9).margin(1e-12));
}

void check_consistent(const pipeline_plan& plan, const model_profile& p, int n) {
  REQUIRE(!plan.stages.empty());
  CHECK(plan.stages.front().first_layer == 0);
  CHECK(plan.stages.back().last_layer == static_cast<int>(p.layers.size()) - 1);
  int next_device = 0;
  double worst = 0;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const planned_stage& st = plan.stages[s];
    if (s > 0) CHECK(st.first_layer == plan.stages[s - 1].last_layer + 1);
    CHECK(st.last_layer >= st.first_layer);
    CHECK(static_cast<int>(st.devices.size()) == st.replicas);
    for (int d : st.devices) CHECK(d == next_device++);
    worst = std::max(worst, st.time_ms);
  }
  CHECK(next_device <= n);
  CHECK(static_cast<int>(plan.memory_bytes.size()) == next_device);
  CHECK(plan.bottleneck_ms >= worst);
  const int stages = static_cast<int>(plan.stages.size());
  CHECK(plan.predicted_step_ms == Approx(plan.bottleneck_ms * (3 * stages - 1)));
}

}  // namespace

TEST_CASE("pipedream planner equals brute force on small flat clusters", "[partition]") {
  std::mt19937 rng(20261122);
  std::uniform_int_distribution<int> layers_d(1, 10), devices_d(1, 6), choice(0, 3);
  std::uniform_real_distribution<double> ms(0.0, 10.0);
  std::uniform_int_distribution<std::int64_t> bytes(0, 4000);
  int with_plan = 0, without = 0;
  for (int instance = 0; instance < 300; ++instance) {
    const int L = layers_d(rng), n = devices_d(rng);
    model_profile p;
    for (int l = 0; l < L; ++l)
      p.layers.push_back(layer(ms(rng), ms(rng), bytes(rng), bytes(rng), bytes(rng), bytes(rng)));
    const double bw = 1e6 * (1 + choice(rng));  // bytes/s: 4000 bytes are a few ms
    // Memory: unlimited, or tight enough to bind sometimes.
    const std::int64_t memory = choice(rng) == 0 ? 0 : 8000 + 4000 * choice(rng);
    const int in_flight = choice(rng) == 0 ? 2 : 0;
    pipedream_options opt;
    opt.in_flight = in_flight;
    const auto planned = plan_pipedream(p, flat(n, bw, memory), opt);
    const brute_result brute = brute_force(p, n, bw, memory, in_flight);
    INFO("instance " << instance << ": " << L << " layers, " << n << " devices, memory " << memory
                     << ", in_flight " << in_flight);
    REQUIRE(planned.ok() == brute.any);
    if (!brute.any) {
      CHECK(planned.message().find("more than") != std::string::npos);
      ++without;
      continue;
    }
    ++with_plan;
    CHECK(planned->bottleneck_ms == Approx(brute.bottleneck).epsilon(1e-9).margin(1e-12));
    check_consistent(*planned, p, n);
    for (std::size_t s = 0; s < planned->stages.size(); ++s)
      if (memory != 0) CHECK(planned->stages[s].memory_bytes <= memory);
    check_returned_stages(*planned, p, bw, memory, in_flight);
  }
  CHECK(with_plan > 100);
  CHECK(without > 0);
}

TEST_CASE("pipedream planner: one device runs every layer as one stage", "[partition]") {
  model_profile p;
  for (int l = 0; l < 5; ++l) p.layers.push_back(layer(1.0 + l, 2.0, 100, 10, 50));
  const auto plan = plan_pipedream(p, flat(1, 1e9));
  REQUIRE(plan.ok());
  REQUIRE(plan->stages.size() == 1);
  CHECK(plan->stages[0].first_layer == 0);
  CHECK(plan->stages[0].last_layer == 4);
  CHECK(plan->stages[0].replicas == 1);
  CHECK(plan->stages[0].devices == std::vector<int>{0});
  CHECK(plan->bottleneck_ms == Approx(5 * 2.0 + (1 + 2 + 3 + 4 + 5)));
  CHECK(plan->stages[0].memory_bytes == 5 * (2 * 50 + 10));
  CHECK(plan->memory_bytes == std::vector<std::int64_t>{5 * (2 * 50 + 10)});
  CHECK(plan->predicted_step_ms == Approx(plan->bottleneck_ms * 2));
}

TEST_CASE("pipedream planner does not cut after a layer with a huge activation", "[partition]") {
  // Four equal layers on two devices: the even cut is after layer 1, whose output is huge; the
  // planner cuts after layer 0 or 2 instead.
  model_profile p;
  for (int l = 0; l < 4; ++l) p.layers.push_back(layer(5.0, 5.0, 1000, 0, 1'000'000'000));
  p.layers[1].activation_bytes = 1'000'000'000;
  const auto plan = plan_pipedream(p, flat(2, 1e9));  // 1 GB/s: 2 GB take 2 s on the link
  REQUIRE(plan.ok());
  REQUIRE(plan->stages.size() == 2);
  CHECK(plan->stages[0].last_layer != 1);
  CHECK(plan->bottleneck_ms == Approx(30.0));
  // Without the huge activation the even cut wins.
  p.layers[1].activation_bytes = 1000;
  const auto even = plan_pipedream(p, flat(2, 1e9));
  REQUIRE(even.ok());
  REQUIRE(even->stages.size() == 2);
  CHECK(even->stages[0].last_layer == 1);
  CHECK(even->bottleneck_ms == Approx(20.0));
}

TEST_CASE("pipedream planner replicates when parameters are tiny and compute is big",
          "[partition]") {
  // One heavy layer with almost no parameters: replicating it over all 4 devices quarters it.
  model_profile p;
  p.layers.push_back(layer(40.0, 80.0, 1'000'000'000, 0, 8));
  const auto plan = plan_pipedream(p, flat(4, 1e9));
  REQUIRE(plan.ok());
  REQUIRE(plan->stages.size() == 1);
  CHECK(plan->stages[0].replicas == 4);
  CHECK(plan->stages[0].devices == std::vector<int>{0, 1, 2, 3});
  CHECK(plan->bottleneck_ms == Approx(120.0 / 4 + 2.0 * 3 / 4 * 8 / 1e9 * 1000));
  CHECK(plan->memory_bytes.size() == 4);
  // With huge parameters the all-reduce costs more than it saves: no replicas.
  p.layers[0].param_bytes = 1'000'000'000;
  const auto heavy = plan_pipedream(p, flat(4, 1e9));
  REQUIRE(heavy.ok());
  CHECK(heavy->stages[0].replicas == 1);
  CHECK(heavy->bottleneck_ms == Approx(120.0));
}

TEST_CASE("pipedream planner reports by how much the smallest plan exceeds memory",
          "[partition]") {
  // Each layer needs 2·100 + 50 = 250 bytes plus in_flight · 10 saved; on 3 devices of 200 bytes
  // the smallest plan is one layer per stage... still 250 + 10 or more per device.
  model_profile p;
  for (int l = 0; l < 3; ++l) p.layers.push_back(layer(1.0, 1.0, 10, 10, 100, 50));
  const auto plan = plan_pipedream(p, flat(3, 1e9, 200));
  REQUIRE(!plan.ok());
  // Three stages: the first keeps 3 microbatches (280), the second 2 (270), the last 1 (260);
  // two stages: 2·250 + 2·20 or more. The least peak is 280: 80 bytes over.
  CHECK(plan.message().find("280 bytes") != std::string::npos);
  CHECK(plan.message().find("80 bytes more than the 200 bytes") != std::string::npos);
  // With enough memory it plans, and memory per device follows p − s.
  const auto fits = plan_pipedream(p, flat(3, 1e9, 280));
  REQUIRE(fits.ok());
  REQUIRE(fits->stages.size() == 3);
  CHECK(fits->stages[0].memory_bytes == 280);
  CHECK(fits->stages[2].memory_bytes == 260);
}

TEST_CASE("pipedream planner respects max_devices and rejects bad input", "[partition]") {
  model_profile p;
  for (int l = 0; l < 8; ++l) p.layers.push_back(layer(10.0, 10.0, 1, 0, 1));
  pipedream_options opt;
  opt.max_devices = 2;
  const auto plan = plan_pipedream(p, flat(8, 1e9), opt);
  REQUIRE(plan.ok());
  CHECK(plan->memory_bytes.size() <= 2);
  CHECK(plan->bottleneck_ms == Approx(80.0).epsilon(1e-6));
  CHECK(!plan_pipedream(model_profile{}, flat(2, 1e9)).ok());
  p.layers[3].fwd_ms = -1;
  const auto bad = plan_pipedream(p, flat(2, 1e9));
  REQUIRE(!bad.ok());
  CHECK(bad.message().find("layer 3") != std::string::npos);
}

TEST_CASE("pipedream planner on a two-level cluster uses the slower level where it must",
          "[partition]") {
  // 2 servers of 2 devices; inside a server 1 GB/s, between servers 1 MB/s.
  cluster c;
  c.levels.push_back(cluster_level{"server", 2, 1e9, 0.0});
  c.levels.push_back(cluster_level{"cluster", 2, 1e6, 0.0});
  model_profile p;
  p.layers.push_back(layer(40.0, 80.0, 1000, 0, 1'000'000));
  // Replicas inside a server: 2 MB·(1/2)/1 GB/s = 1 ms of all-reduce; across servers 1 s.
  const auto plan = plan_pipedream(p, c);
  REQUIRE(plan.ok());
  CHECK(plan->stages[0].replicas == 2);
  CHECK(plan->bottleneck_ms == Approx(60.0 + 1.0));
}

TEST_CASE("pipedream planner with same_replicas equals brute force on small flat clusters",
          "[partition]") {
  std::mt19937 rng(1122);
  std::uniform_int_distribution<int> layers_d(1, 9), devices_d(1, 6), choice(0, 3);
  std::uniform_real_distribution<double> ms(0.0, 10.0);
  std::uniform_int_distribution<std::int64_t> bytes(0, 4000);
  int with_plan = 0, without = 0;
  for (int instance = 0; instance < 200; ++instance) {
    const int L = layers_d(rng), n = devices_d(rng);
    model_profile p;
    for (int l = 0; l < L; ++l)
      p.layers.push_back(layer(ms(rng), ms(rng), bytes(rng), bytes(rng), bytes(rng), bytes(rng)));
    const double bw = 1e6 * (1 + choice(rng));
    const std::int64_t memory = choice(rng) == 0 ? 0 : 8000 + 4000 * choice(rng);
    pipedream_options opt;
    opt.in_flight = choice(rng) == 0 ? 2 : 0;
    opt.same_replicas = true;
    const auto planned = plan_pipedream(p, flat(n, bw, memory), opt);
    // Every split and every r with stages · r ≤ n, written out from the header's objective.
    double best = std::numeric_limits<double>::infinity();
    for (int mask = 0; mask < (1 << (L - 1)); ++mask) {
      const std::vector<std::pair<int, int>> st = partition_test::split_of(L, mask);
      const int s = static_cast<int>(st.size());
      bool fits = true;
      for (int k = 0; k < s; ++k) {
        std::int64_t mem = 0;
        for (int l = st[k].first; l <= st[k].second; ++l)
          mem += 2 * p.layers[l].param_bytes + p.layers[l].optimizer_bytes +
                 (opt.in_flight > 0 ? opt.in_flight : s - k) * p.layers[l].saved_bytes;
        if (memory != 0 && mem > memory) fits = false;
      }
      if (!fits) continue;
      for (int r = 1; r * s <= n; ++r) {
        double b = 0;
        for (int k = 0; k < s; ++k) {
          double c = 0, w = 0;
          for (int l = st[k].first; l <= st[k].second; ++l) {
            c += p.layers[l].fwd_ms + p.layers[l].bwd_ms;
            w += static_cast<double>(p.layers[l].param_bytes);
          }
          b = std::max(b, c / r + (r > 1 ? 2.0 * (r - 1) / r * w / bw * 1000.0 : 0.0));
          if (k + 1 < s) b = std::max(b, 2.0 * p.layers[st[k].second].activation_bytes / bw * 1000.0);
        }
        best = std::min(best, b);
      }
    }
    INFO("instance " << instance << ": " << L << " layers, " << n << " devices, memory " << memory
                     << ", in_flight " << opt.in_flight);
    REQUIRE(planned.ok() == (best != std::numeric_limits<double>::infinity()));
    if (!planned.ok()) {
      CHECK(planned.message().find("more than") != std::string::npos);
      ++without;
      continue;
    }
    ++with_plan;
    CHECK(planned->bottleneck_ms == Approx(best).epsilon(1e-9).margin(1e-12));
    check_consistent(*planned, p, n);
    for (const planned_stage& st : planned->stages) CHECK(st.replicas == planned->stages[0].replicas);
    check_returned_stages(*planned, p, bw, memory, opt.in_flight);
  }
  CHECK(with_plan > 100);
  CHECK(without > 0);
}

namespace {

// A stage's time and the links of a flat plan on servers of `per_server`, recomputed from the
// devices the stages hold: the all-reduce crosses servers when a stage's devices do, a link when
// the two stages' devices do.
double bottleneck_at_devices(const pipeline_plan& plan, const model_profile& p, int per_server,
                             double inner_bw, double outer_bw) {
  const auto one_server = [&](const std::vector<int>& a, const std::vector<int>& b) {
    for (int d : a)
      for (int e : b)
        if (d / per_server != e / per_server) return false;
    return true;
  };
  double b = 0;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const planned_stage& st = plan.stages[s];
    double c = 0, w = 0;
    for (int l = st.first_layer; l <= st.last_layer; ++l) {
      c += p.layers[l].fwd_ms + p.layers[l].bwd_ms;
      w += static_cast<double>(p.layers[l].param_bytes);
    }
    const double bw = one_server(st.devices, st.devices) ? inner_bw : outer_bw;
    const int r = st.replicas;
    const double t = c / r + (r > 1 ? 2.0 * (r - 1) / r * w / bw * 1000.0 : 0.0);
    CHECK(st.time_ms == Approx(t).epsilon(1e-9).margin(1e-12));
    b = std::max(b, t);
    if (s + 1 < plan.stages.size()) {
      const double link_bw = one_server(st.devices, plan.stages[s + 1].devices) ? inner_bw : outer_bw;
      b = std::max(b, 2.0 * p.layers[st.last_layer].activation_bytes / link_bw * 1000.0);
    }
  }
  return b;
}

cluster servers(int per_server, int count, double inner_bw, double outer_bw, std::int64_t memory = 0) {
  cluster c;
  c.device_memory_bytes = memory;
  c.levels.push_back(cluster_level{"server", per_server, inner_bw, 0.0});
  c.levels.push_back(cluster_level{"cluster", count, outer_bw, 0.0});
  return c;
}

}  // namespace

TEST_CASE("pipedream planner with same_replicas costs a hierarchy at the devices it returns",
          "[partition]") {
  // 3 servers of 8, eight 30 ms layers of 1 MB parameters: an all-reduce of 3 replicas costs
  // 4/3 · 1 µs inside a server and 4/3 · 10 ms across. Three replicas per stage number stage 2 on
  // devices 6, 7, 8, across two servers, so r = 3 is not the 10 ms plan it looks like.
  model_profile p;
  for (int l = 0; l < 8; ++l) p.layers.push_back(layer(10.0, 20.0, 1, 0, 1'000'000));
  pipedream_options opt;
  opt.same_replicas = true;
  const auto plan = plan_pipedream(p, servers(8, 3, 1e12, 1e8), opt);
  REQUIRE(plan.ok());
  CHECK(plan->bottleneck_ms == Approx(bottleneck_at_devices(*plan, p, 8, 1e12, 1e8)).epsilon(1e-12));
  // Three stages of 8 replicas, one per server: 90/8 ms plus 7/4 · 3 MB at 1 TB/s.
  CHECK(plan->bottleneck_ms == Approx(90.0 / 8 + 2.0 * 7 / 8 * 3e6 / 1e12 * 1000).epsilon(1e-12));
  for (const planned_stage& st : plan->stages) CHECK(st.replicas == 8);

  // Random profiles on servers of 3 to 5: the bottleneck reported is the one at the devices.
  std::mt19937 rng(90210);
  std::uniform_int_distribution<int> layers_d(1, 8), per_server_d(3, 5), servers_d(2, 3), choice(0, 3);
  std::uniform_real_distribution<double> ms(0.0, 10.0);
  std::uniform_int_distribution<std::int64_t> bytes(0, 4000);
  for (int instance = 0; instance < 100; ++instance) {
    const int L = layers_d(rng), per_server = per_server_d(rng), count = servers_d(rng);
    model_profile q;
    for (int l = 0; l < L; ++l)
      q.layers.push_back(layer(ms(rng), ms(rng), bytes(rng), bytes(rng), bytes(rng), bytes(rng)));
    const double inner = 4e6, outer = 1e6 / (1 + choice(rng));
    const auto planned = plan_pipedream(q, servers(per_server, count, inner, outer), opt);
    INFO("instance " << instance << ": " << L << " layers, " << count << " servers of " << per_server);
    REQUIRE(planned.ok());
    CHECK(planned->bottleneck_ms ==
          Approx(bottleneck_at_devices(*planned, q, per_server, inner, outer)).epsilon(1e-12));
    for (const planned_stage& st : planned->stages) CHECK(st.replicas == planned->stages[0].replicas);
  }
}

TEST_CASE("pipedream planner does not wrap memory with a huge in_flight", "[partition]") {
  // (2^31 − 1) · 2^33 saved bytes wraps an int64 to a negative number that "fits" any device.
  model_profile p;
  p.layers.push_back(layer(1.0, 1.0, 1, std::int64_t{1} << 33, 1000));
  pipedream_options opt;
  opt.in_flight = std::numeric_limits<int>::max();
  const auto plan = plan_pipedream(p, flat(4, 1e9, std::int64_t{1} << 40), opt);
  REQUIRE(!plan.ok());
  CHECK(plan.message().find("more than") != std::string::npos);
  // Nothing saved: the same in_flight plans.
  p.layers[0].saved_bytes = 0;
  const auto fits = plan_pipedream(p, flat(4, 1e9, std::int64_t{1} << 40), opt);
  REQUIRE(fits.ok());
  CHECK(fits->stages[0].memory_bytes == 2000);
}

TEST_CASE("pipedream planner rejects negative memory tiny bandwidths and infinite totals",
          "[partition]") {
  model_profile p;
  for (int l = 0; l < 4; ++l) p.layers.push_back(layer(1.0, 2.0, 1'000'000, 10, 1'000'000));
  const auto negative = plan_pipedream(p, flat(4, 1e9, -1));
  REQUIRE(!negative.ok());
  CHECK(negative.message().find("device_memory_bytes") != std::string::npos);
  // 1e-300 bytes/s: a link would take ∞ ms; the error names the level.
  const auto slow = plan_pipedream(p, servers(2, 2, 1e9, 1e-300));
  REQUIRE(!slow.ok());
  CHECK(slow.message().find("cluster level cluster") != std::string::npos);
  CHECK(slow.message().find("too small") != std::string::npos);
  const auto slow_flat = plan_pipedream(p, flat(4, 1e-300));
  REQUIRE(!slow_flat.ok());
  CHECK(slow_flat.message().find("cluster level server") != std::string::npos);
  // Each time is finite, their total is not.
  p.layers[0].fwd_ms = p.layers[1].fwd_ms = 1e308;
  const auto huge = plan_pipedream(p, flat(4, 1e9));
  REQUIRE(!huge.ok());
  CHECK(huge.message().find("total") != std::string::npos);
}

TEST_CASE("pipedream planner with same_replicas on many devices finishes", "[partition]") {
  // No parameters: one stage on every device is best. Searching every r of 65,536 with its own
  // program took two minutes; the bounds leave a few.
  model_profile p;
  for (int l = 0; l < 1000; ++l) p.layers.push_back(layer(1.0 + l % 7, 2.0, 1000, 10, 0));
  pipedream_options opt;
  opt.same_replicas = true;
  const auto plan = plan_pipedream(p, flat(65536, 1e9), opt);
  REQUIRE(plan.ok());
  double total = 0;
  for (const layer_profile& x : p.layers) total += x.fwd_ms + x.bwd_ms;
  CHECK(plan->bottleneck_ms == Approx(total / 65536).epsilon(1e-9));
  CHECK(plan->stages.size() == 1);
}

TEST_CASE("pipedream planner reports the least peak memory of many layers quickly", "[partition]") {
  // 8,000 layers on as many devices, each layer 260 bytes against 200: the search for the least
  // peak memory was cubic in the layers (80 s here).
  model_profile p;
  for (int l = 0; l < 8000; ++l) p.layers.push_back(layer(1.0, 1.0, 10, 10, 100, 50));
  pipedream_options opt;
  opt.in_flight = 1;
  const auto plan = plan_pipedream(p, flat(8000, 1e9, 200), opt);
  REQUIRE(!plan.ok());
  CHECK(plan.message().find("needs 260 bytes") != std::string::npos);
}

TEST_CASE("pipedream planner counts a full recompute profile's stash as the runtime holds it",
          "[partition][recompute]") {
  // Two layers of 100 parameter and 200 optimizer bytes (fixed 2·100 + 200 = 400 each), 1000
  // saved bytes and a 10-byte output each, 1500 bytes per device. One stage needs 800 + 2000;
  // two stages without recomputation 400 + 2·1000 on stage 0: nothing fits. With full
  // recomputation stage 0 keeps 2 inputs of 0 bytes (layer 0's input is not in the profile) and
  // one whole stash: 400 + 0 + 1000 = 1400; stage 1 one input of 10 bytes: 400 + 10 + 1000 = 1410.
  model_profile p;
  p.model = "two";
  p.microbatch = 1;
  p.layers = {layer(1, 2, 10, 1000, 100, 200), layer(1, 2, 10, 1000, 100, 200)};
  const cluster c = flat(2, 1e9, 1500);
  auto none = plan_pipedream(p, c);
  REQUIRE_FALSE(none);
  p.recompute = recompute_mode::full;
  auto full = plan_pipedream(p, c);
  REQUIRE(full);
  CHECK(full->recompute == recompute_mode::full);
  REQUIRE(full->stages.size() == 2);
  CHECK(full->stages[0].memory_bytes == 1400);
  CHECK(full->stages[1].memory_bytes == 1410);
  CHECK(full->memory_bytes == std::vector<std::int64_t>{1400, 1410});
  // Selective's saved bytes are already the reduced stash: counted as without recomputation.
  p.recompute = recompute_mode::selective;
  CHECK_FALSE(plan_pipedream(p, c));
}

TEST_CASE("pipedream planner with full recompute: every stage's memory by the formula, within "
          "the limit",
          "[partition][recompute]") {
  std::mt19937 rng(27);
  for (int trial = 0; trial < 200; ++trial) {
    const int L = 2 + static_cast<int>(rng() % 6);
    const int n = 1 + static_cast<int>(rng() % 4);
    model_profile p;
    p.model = "random";
    p.microbatch = 1;
    p.recompute = recompute_mode::full;
    for (int l = 0; l < L; ++l)
      p.layers.push_back(layer(1 + rng() % 5, 2 + rng() % 9, 1 + rng() % 500, rng() % 2000,
                               rng() % 300, rng() % 600));
    const std::int64_t memory = rng() % 2 ? 0 : 1500 + static_cast<std::int64_t>(rng() % 4000);
    auto plan = plan_pipedream(p, flat(n, 1e6, memory));
    CAPTURE(trial, L, n, memory);
    if (!plan) continue;
    CHECK(plan->recompute == recompute_mode::full);
    const int stages = static_cast<int>(plan->stages.size());
    for (int s = 0; s < stages; ++s) {
      const planned_stage& st = plan->stages[s];
      std::int64_t fixed = 0, saved = 0;
      for (int l = st.first_layer; l <= st.last_layer; ++l) {
        fixed += 2 * p.layers[l].param_bytes + p.layers[l].optimizer_bytes;
        saved += p.layers[l].saved_bytes;
      }
      const std::int64_t input =
          st.first_layer == 0 ? 0 : p.layers[st.first_layer - 1].activation_bytes;
      const std::int64_t need = fixed + (stages - s) * input + saved;
      CHECK(st.memory_bytes == need);
      if (memory != 0) CHECK(need <= memory);
    }
  }
}
