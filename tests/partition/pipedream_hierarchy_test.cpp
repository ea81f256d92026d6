// PipeDream's planner on hierarchies: its bottleneck equals a brute force over every
// level-by-level plan on small two-level clusters, its flattened stages are consistent, and
// under in_flight = p − s its plans fit in memory.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "partition/pipedream_planner.hpp"
#include "profile_fixtures.hpp"

using namespace pipeworks;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

using partition_test::layer;

cluster two_level(int per_server, int servers, double inner_bw, double outer_bw,
                  std::int64_t memory = 0) {
  cluster c;
  c.device_memory_bytes = memory;
  c.levels.push_back(cluster_level{"server", per_server, inner_bw, 0.0});
  c.levels.push_back(cluster_level{"cluster", servers, outer_bw, 0.0});
  return c;
}

// Aˡ(i..j) by enumeration: every split of i..j into stages and every replica vector with
// Σr ≤ count, sums taken directly; level −1 is one device (∞ when the range does not fit it
// with `in_flight` microbatches).
struct brute_levels {
  const model_profile& p;
  const cluster& c;
  std::int64_t memory;
  int in_flight;
  std::map<std::tuple<int, int, int>, double> memo;

  double device(int i, int j) const {
    double t = 0;
    std::int64_t mem = 0;
    for (int l = i; l <= j; ++l) {
      t += p.layers[l].fwd_ms + p.layers[l].bwd_ms;
      mem += 2 * p.layers[l].param_bytes + p.layers[l].optimizer_bytes + in_flight * p.layers[l].saved_bytes;
    }
    return memory != 0 && mem > memory ? inf : t;
  }

  double value(int level, int i, int j) {
    if (level < 0) return device(i, j);
    const auto key = std::make_tuple(level, i, j);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    const int count = c.levels[level].count;
    const double ms_per_byte = 1000.0 / c.levels[level].bandwidth_bytes_per_s;
    double best = inf;
    const int gaps = j - i;
    for (int mask = 0; mask < (1 << gaps); ++mask) {
      std::vector<std::pair<int, int>> st;
      int first = i;
      for (int g = 0; g < gaps; ++g)
        if (mask >> g & 1) {
          st.push_back({first, i + g});
          first = i + g + 1;
        }
      st.push_back({first, j});
      const int s = static_cast<int>(st.size());
      if (s > count) continue;
      double links = 0;
      for (int k = 0; k + 1 < s; ++k)
        links = std::max(links, 2.0 * p.layers[st[k].second].activation_bytes * ms_per_byte);
      std::vector<int> r(s, 1);
      while (true) {
        int used = 0;
        for (int x : r) used += x;
        if (used <= count) {
          double b = links;
          for (int k = 0; k < s; ++k) {
            double w = 0;
            for (int l = st[k].first; l <= st[k].second; ++l) w += static_cast<double>(p.layers[l].param_bytes);
            const double inner = value(level - 1, st[k].first, st[k].second);
            b = std::max(b, inner / r[k] + (r[k] > 1 ? 2.0 * (r[k] - 1) / r[k] * w * ms_per_byte : 0.0));
          }
          best = std::min(best, b);
        }
        int k = 0;
        while (k < s && r[k] == count) r[k++] = 1;
        if (k == s) break;
        ++r[k];
      }
    }
    return memo[key] = best;
  }
};

// Stages cover the layers in order, each device holds at most one stage, replicas = devices.
void check_flattened(const pipeline_plan& plan, int layers, int devices) {
  REQUIRE(!plan.stages.empty());
  CHECK(plan.stages.front().first_layer == 0);
  CHECK(plan.stages.back().last_layer == layers - 1);
  std::set<int> used;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const planned_stage& st = plan.stages[s];
    if (s > 0) CHECK(st.first_layer == plan.stages[s - 1].last_layer + 1);
    CHECK(st.last_layer >= st.first_layer);
    CHECK(static_cast<int>(st.devices.size()) == st.replicas);
    for (int d : st.devices) {
      CHECK(d >= 0);
      CHECK(d < devices);
      CHECK(used.insert(d).second);
    }
    CHECK(plan.bottleneck_ms >= st.time_ms);
  }
  // memory_bytes is indexed by device number, 0 for an idle device.
  REQUIRE(!used.empty());
  CHECK(static_cast<int>(plan.memory_bytes.size()) == *used.rbegin() + 1);
  for (const planned_stage& st : plan.stages)
    for (int d : st.devices) CHECK(plan.memory_bytes[d] == st.memory_bytes);
  for (int d = 0; d < static_cast<int>(plan.memory_bytes.size()); ++d)
    if (!used.count(d)) CHECK(plan.memory_bytes[d] == 0);
  const int p = static_cast<int>(plan.stages.size());
  CHECK(plan.predicted_step_ms == Approx(plan.bottleneck_ms * (3 * p - 1)));
}

model_profile random_profile(std::mt19937& rng, int layers) {
  std::uniform_real_distribution<double> ms(0.0, 10.0);
  std::uniform_int_distribution<std::int64_t> bytes(0, 4000);
  model_profile p;
  for (int l = 0; l < layers; ++l)
    p.layers.push_back(layer(ms(rng), ms(rng), bytes(rng), bytes(rng), bytes(rng), bytes(rng)));
  return p;
}

}  // namespace

TEST_CASE("pipedream planner equals brute force over level-by-level plans on two levels",
          "[partition]") {
  std::mt19937 rng(7112026);
  std::uniform_int_distribution<int> layers_d(1, 7), per_server_d(2, 3), servers_d(1, 3), choice(0, 3);
  int with_plan = 0, without = 0;
  for (int instance = 0; instance < 150; ++instance) {
    const int L = layers_d(rng), per_server = per_server_d(rng), servers = servers_d(rng);
    const model_profile p = random_profile(rng, L);
    // bytes/s: inside a server 1–4 MB/s, between servers 4–16 times slower
    const double inner = 1e6 * (1 + choice(rng)), outer = inner / (4 << choice(rng));
    // Memory: unlimited, or a fixed in_flight with memory tight enough to bind sometimes.
    const bool limited = choice(rng) != 0;
    const std::int64_t memory = limited ? 10000 + 6000 * choice(rng) : 0;
    pipedream_options opt;
    opt.in_flight = limited ? 1 + choice(rng) : 0;
    const cluster c = two_level(per_server, servers, inner, outer, memory);
    const auto planned = plan_pipedream(p, c, opt);
    brute_levels brute{p, c, memory, opt.in_flight, {}};
    const double best = brute.value(1, 0, L - 1);
    INFO("instance " << instance << ": " << L << " layers, " << servers << " servers of "
                     << per_server << ", memory " << memory << ", in_flight " << opt.in_flight);
    REQUIRE(planned.ok() == (best != inf));
    if (best == inf) {
      CHECK(planned.message().find("more than") != std::string::npos);
      ++without;
      continue;
    }
    ++with_plan;
    CHECK(planned->bottleneck_ms == Approx(best).epsilon(1e-9).margin(1e-12));
    check_flattened(*planned, L, per_server * servers);
    for (const planned_stage& st : planned->stages)
      if (memory != 0) CHECK(st.memory_bytes <= memory);
  }
  CHECK(with_plan > 80);
  CHECK(without > 0);
}

TEST_CASE("pipedream planner replicates an inner pipeline over servers", "[partition]") {
  // 2 servers of 2 devices. Two 10 ms layers with 1,000 bytes of parameters and 10,000-byte
  // outputs; 1 GB/s inside a server, 1 MB/s between servers. A link between servers costs 20 ms;
  // each server pipelines the two layers (10 ms) and the pipelines are replicated over both
  // servers: 10/2 + 2·(1/2)·2,000 bytes / 1 MB/s = 7 ms.
  model_profile p;
  for (int l = 0; l < 2; ++l) p.layers.push_back(layer(4.0, 6.0, 10'000, 0, 1'000));
  const auto plan = plan_pipedream(p, two_level(2, 2, 1e9, 1e6));
  REQUIRE(plan.ok());
  CHECK(plan->bottleneck_ms == Approx(7.0));
  REQUIRE(plan->stages.size() == 2);
  CHECK(plan->stages[0].last_layer == 0);
  // Device d is in server d / 2: each layer has one device in each server.
  CHECK(plan->stages[0].devices == std::vector<int>{0, 2});
  CHECK(plan->stages[1].devices == std::vector<int>{1, 3});
  CHECK(plan->stages[0].replicas == 2);
  CHECK(plan->stages[0].time_ms == Approx(7.0));
  CHECK(plan->memory_bytes.size() == 4);
}

TEST_CASE("pipedream planner on a hierarchy uses whole units of max_devices", "[partition]") {
  model_profile p;
  for (int l = 0; l < 12; ++l) p.layers.push_back(layer(10.0, 10.0, 1, 0, 1));
  pipedream_options opt;
  opt.max_devices = 9;  // 3 servers of 4: two whole servers fit in 9
  const auto two_servers = plan_pipedream(p, two_level(4, 3, 1e9, 1e8), opt);
  REQUIRE(two_servers.ok());
  for (const planned_stage& st : two_servers->stages)
    for (int d : st.devices) CHECK(d < 8);
  CHECK(two_servers->bottleneck_ms == Approx(12 * 20.0 / 8).epsilon(1e-3));
  opt.max_devices = 3;  // less than a server: 3 devices of server 0
  const auto one_server = plan_pipedream(p, two_level(4, 3, 1e9, 1e8), opt);
  REQUIRE(one_server.ok());
  CHECK(one_server->memory_bytes.size() <= 3);
  CHECK(one_server->bottleneck_ms == Approx(80.0).epsilon(1e-3));
}

TEST_CASE("pipedream planner on a hierarchy with in_flight p - s fits every device",
          "[partition]") {
  std::mt19937 rng(2211);
  std::uniform_int_distribution<int> layers_d(1, 9), per_server_d(2, 3), servers_d(2, 3), choice(0, 3);
  int with_plan = 0, without = 0;
  for (int instance = 0; instance < 150; ++instance) {
    const int L = layers_d(rng), per_server = per_server_d(rng), servers = servers_d(rng);
    const int n = per_server * servers;
    const model_profile p = random_profile(rng, L);
    const std::int64_t memory = 10000 + 6000 * choice(rng);
    const auto planned = plan_pipedream(p, two_level(per_server, servers, 4e6, 1e6, memory));
    // Some split into at most n single-device stages fits under p − s?
    bool any = false;
    for (int mask = 0; mask < (1 << (L - 1)) && !any; ++mask) {
      const std::vector<std::pair<int, int>> st = partition_test::split_of(L, mask);
      const int s = static_cast<int>(st.size());
      bool fits = s <= n;
      for (int k = 0; k < s && fits; ++k) {
        std::int64_t mem = 0;
        for (int l = st[k].first; l <= st[k].second; ++l)
          mem += 2 * p.layers[l].param_bytes + p.layers[l].optimizer_bytes + (s - k) * p.layers[l].saved_bytes;
        fits = mem <= memory;
      }
      any = fits;
    }
    INFO("instance " << instance << ": " << L << " layers, " << servers << " servers of " << per_server
                     << ", memory " << memory);
    REQUIRE(planned.ok() == any);
    if (!any) {
      CHECK(planned.message().find("more than") != std::string::npos);
      ++without;
      continue;
    }
    ++with_plan;
    check_flattened(*planned, L, n);
    const int depth = static_cast<int>(planned->stages.size());
    for (int s = 0; s < depth; ++s) {
      const planned_stage& st = planned->stages[s];
      std::int64_t mem = 0;
      for (int l = st.first_layer; l <= st.last_layer; ++l)
        mem += 2 * p.layers[l].param_bytes + p.layers[l].optimizer_bytes + (depth - s) * p.layers[l].saved_bytes;
      CHECK(st.memory_bytes == mem);
      CHECK(mem <= memory);
    }
  }
  CHECK(with_plan > 50);
  CHECK(without > 0);
}

TEST_CASE("pipedream planner equals brute force over level-by-level plans on three levels",
          "[partition]") {
  std::mt19937 rng(3032026);
  std::uniform_int_distribution<int> layers_d(1, 5), count_d(1, 2), choice(0, 3);
  for (int instance = 0; instance < 60; ++instance) {
    const int L = layers_d(rng);
    const model_profile p = random_profile(rng, L);
    cluster c;  // devices per server, servers per rack, racks: each 1 or 2, slower outward
    const double inner = 1e6 * (1 + choice(rng));
    c.levels.push_back(cluster_level{"server", 2, inner, 0.0});
    c.levels.push_back(cluster_level{"rack", count_d(rng), inner / 4, 0.0});
    c.levels.push_back(cluster_level{"cluster", count_d(rng) + 1, inner / 16, 0.0});
    const auto planned = plan_pipedream(p, c);
    brute_levels brute{p, c, 0, 0, {}};
    const double best = brute.value(2, 0, L - 1);
    INFO("instance " << instance << ": " << L << " layers, " << c.levels[1].count << " servers of 2 per rack, "
                     << c.levels[2].count << " racks");
    REQUIRE(planned.ok());
    CHECK(planned->bottleneck_ms == Approx(best).epsilon(1e-9).margin(1e-12));
    check_flattened(*planned, L, c.device_count());
  }
}

TEST_CASE("pipedream planner on a hierarchy too wide to tabulate plans flat at its devices",
          "[partition]") {
  // 2 servers of 2^23 devices: one row of the server level's table would take 2^46 steps. The
  // work budget sends it to the flat program, costed at the devices its stages hold. Parameters
  // too heavy to replicate: one layer per device.
  model_profile p;
  for (int l = 0; l < 6; ++l) p.layers.push_back(layer(2.0 + l, 8.0, 1000, 0, 10'000'000'000));
  const int per_server = 1 << 23;
  const auto plan = plan_pipedream(p, two_level(per_server, 2, 1e12, 1e9));
  REQUIRE(plan.ok());
  REQUIRE(plan->stages.size() == 6);
  double b = 0;
  for (std::size_t s = 0; s < plan->stages.size(); ++s) {
    const planned_stage& st = plan->stages[s];
    CHECK(st.replicas == 1);
    CHECK(st.first_layer == st.last_layer);
    CHECK(st.time_ms == Approx(p.layers[st.first_layer].fwd_ms + 8.0));
    b = std::max(b, st.time_ms);
    if (s + 1 < plan->stages.size()) {
      const bool same_server = st.devices[0] / per_server == plan->stages[s + 1].devices[0] / per_server;
      b = std::max(b, 2.0 * 1000 / (same_server ? 1e12 : 1e9) * 1000.0);
    }
  }
  CHECK(plan->bottleneck_ms == Approx(b).epsilon(1e-12));
  CHECK(plan->bottleneck_ms == Approx(15.0));
}
