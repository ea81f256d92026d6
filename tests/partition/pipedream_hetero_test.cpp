// PipeDream's planner on heterogeneous devices: its bottleneck equals a brute force over every
// split and device assignment on small clusters, and faster devices get more layers.
#include "partition/pipedream_hetero.hpp"
#include "profile_fixtures.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace pipeworks;

namespace {

using partition_test::layer;

cluster devices(const std::vector<std::pair<double, std::int64_t>>& specs, double bandwidth) {
  cluster c;
  for (std::size_t d = 0; d < specs.size(); ++d)
    c.devices.push_back(device_spec{"d" + std::to_string(d), specs[d].first, specs[d].second});
  if (bandwidth > 0)
    c.levels.push_back(cluster_level{"link", static_cast<int>(specs.size()), bandwidth, 0.0});
  return c;
}

// Device d's profile: the one it names among o.device_profiles, else the plan's.
const model_profile& profile_of(const model_profile& p, const cluster& c,
                                const pipedream_options& o, int d) {
  const std::string& name = c.devices[static_cast<std::size_t>(d)].profile;
  return name.empty() ? p : o.device_profiles.at(name);
}

// The optimum, and among the plans at it (within 1e-9 relative) the fewest devices, then stages.
struct brute_result {
  double bottleneck = std::numeric_limits<double>::infinity();
  int devices = 0, stages = 0;
};

// The objective of the header, written out: every split (a bit per gap) and every labelling of the
// devices with a stage or "unused".
brute_result brute_force_ties(const model_profile& p, const cluster& c, const pipedream_options& o) {
  const int L = static_cast<int>(p.layers.size()), n = static_cast<int>(c.devices.size());
  const double ms_per_byte = c.levels.empty() ? 0.0 : 1000.0 / c.levels[0].bandwidth_bytes_per_s;
  const int cap = o.max_devices > 0 ? o.max_devices : n;
  double best = std::numeric_limits<double>::infinity();
  std::vector<brute_result> found;  // every plan: bottleneck, devices, stages
  for (int mask = 0; mask < (1 << (L - 1)); ++mask) {
    const std::vector<std::pair<int, int>> st = partition_test::split_of(L, mask);
    const int s = static_cast<int>(st.size());
    if (s > cap) continue;
    double links = 0;
    for (int k = 0; k + 1 < s; ++k)
      links = std::max(
          links, 2.0 * static_cast<double>(p.layers[st[k].second].activation_bytes) * ms_per_byte);
    std::vector<int> label(n, 0);  // 0..s−1: a stage, s: unused
    while (true) {
      std::vector<int> r(s, 0);
      bool fits = true;
      int used = 0;
      for (int d = 0; d < n; ++d) {
        const int k = label[d];
        if (k == s) continue;
        ++used;
        ++r[k];
        const model_profile& dp = profile_of(p, c, o, d);
        std::int64_t need = 0, saved = 0;
        for (int l = st[k].first; l <= st[k].second; ++l) {
          need += 2 * p.layers[l].param_bytes + p.layers[l].optimizer_bytes;
          saved += dp.layers[l].saved_bytes;
        }
        need += (o.in_flight > 0 ? o.in_flight : s - k) * saved;
        if (c.devices[d].memory_bytes != 0 && need > c.devices[d].memory_bytes) fits = false;
      }
      bool ok = fits && used <= cap;
      for (int k = 0; k < s; ++k) ok = ok && r[k] > 0 && (!o.same_replicas || r[k] == r[0]);
      if (ok) {
        double b = links;
        for (int k = 0; k < s; ++k) {
          double t = 0, w = 0;
          for (int l = st[k].first; l <= st[k].second; ++l)
            w += static_cast<double>(p.layers[l].param_bytes);
          for (int d = 0; d < n; ++d) {  // the slowest of its devices, each by its profile
            if (label[d] != k) continue;
            const model_profile& dp = profile_of(p, c, o, d);
            double td = 0;
            for (int l = st[k].first; l <= st[k].second; ++l)
              td += dp.layers[l].fwd_ms + dp.layers[l].bwd_ms;
            t = std::max(t, td / (r[k] * c.devices[d].speed));
          }
          if (r[k] > 1) t += 2.0 * (r[k] - 1) / r[k] * w * ms_per_byte;
          b = std::max(b, t);
        }
        best = std::min(best, b);
        found.push_back({b, used, s});
      }
      int d = 0;  // next labelling, odometer style
      while (d < n && label[d] == s) label[d++] = 0;
      if (d == n) break;
      ++label[d];
    }
  }
  brute_result out;
  out.bottleneck = best;
  for (const brute_result& f : found)
    if (f.bottleneck <= best * (1 + 1e-9) + 1e-12 &&
        (out.devices == 0 || f.devices < out.devices ||
         (f.devices == out.devices && f.stages < out.stages))) {
      out.devices = f.devices;
      out.stages = f.stages;
    }
  return out;
}

double brute_force(const model_profile& p, const cluster& c, const pipedream_options& o) {
  return brute_force_ties(p, c, o).bottleneck;
}

// The plan is well formed: contiguous stages, distinct devices within max, memory within each
// device's, and times recomputed from its devices.
void check_plan(const pipeline_plan& plan, const model_profile& p, const cluster& c,
                const pipedream_options& o) {
  REQUIRE(!plan.stages.empty());
  CHECK(plan.stages.front().first_layer == 0);
  CHECK(plan.stages.back().last_layer == static_cast<int>(p.layers.size()) - 1);
  std::set<int> seen;
  const int stages = static_cast<int>(plan.stages.size());
  for (int s = 0; s < stages; ++s) {
    const planned_stage& st = plan.stages[s];
    if (s > 0) CHECK(st.first_layer == plan.stages[s - 1].last_layer + 1);
    REQUIRE(static_cast<int>(st.devices.size()) == st.replicas);
    if (o.same_replicas) CHECK(st.replicas == plan.stages[0].replicas);
    double t = 0;
    std::int64_t most = 0;
    for (int d : st.devices) {
      CHECK(seen.insert(d).second);
      const model_profile& dp = profile_of(p, c, o, d);
      double td = 0;
      std::int64_t need = 0, saved = 0;
      for (int l = st.first_layer; l <= st.last_layer; ++l) {
        td += dp.layers[l].fwd_ms + dp.layers[l].bwd_ms;
        need += 2 * p.layers[l].param_bytes + p.layers[l].optimizer_bytes;
        saved += dp.layers[l].saved_bytes;
      }
      need += (o.in_flight > 0 ? o.in_flight : stages - s) * saved;
      t = std::max(t, td / (st.replicas * c.devices[d].speed));
      CHECK(plan.memory_bytes.at(static_cast<std::size_t>(d)) == need);
      most = std::max(most, need);
      if (c.devices[d].memory_bytes != 0) CHECK(need <= c.devices[d].memory_bytes);
    }
    CHECK(st.memory_bytes == most);
    CHECK(st.time_ms >= t * (1 - 1e-12));
    CHECK(plan.bottleneck_ms >= st.time_ms);
  }
  CHECK(static_cast<int>(seen.size()) <=
        (o.max_devices > 0 ? o.max_devices : static_cast<int>(c.devices.size())));
  // memory_bytes is indexed by device number: each used device's stage estimate, 0 for the rest,
  // ending at the highest device used.
  REQUIRE(!seen.empty());
  REQUIRE(plan.memory_bytes.size() == static_cast<std::size_t>(*seen.rbegin()) + 1);
  for (std::size_t d = 0; d < plan.memory_bytes.size(); ++d)
    if (!seen.contains(static_cast<int>(d))) CHECK(plan.memory_bytes[d] == 0);
  CHECK(plan.predicted_step_ms == Approx(plan.bottleneck_ms * (3 * stages - 1)));
}

}  // namespace

TEST_CASE("pipedream hetero equals brute force on small mixed clusters", "[partition][hetero]") {
  std::mt19937 rng(20261122);
  std::uniform_int_distribution<int> layers_d(1, 7), devices_d(1, 5), choice(0, 3);
  std::uniform_real_distribution<double> ms(0.0, 10.0), fast(1.2, 3.0);
  std::uniform_int_distribution<std::int64_t> bytes(0, 4000);
  int with_plan = 0, without = 0, mixed = 0;
  for (int instance = 0; instance < 250; ++instance) {
    const int L = layers_d(rng), n = devices_d(rng);
    model_profile p;
    for (int l = 0; l < L; ++l)
      p.layers.push_back(layer(ms(rng), ms(rng), bytes(rng), bytes(rng), bytes(rng), bytes(rng)));
    // Two speed classes; memories unlimited, tight or roomy, per device.
    const double speed2 = fast(rng);
    std::vector<std::pair<double, std::int64_t>> specs;
    for (int d = 0; d < n; ++d) {
      const int m = choice(rng);
      specs.push_back({choice(rng) < 2 ? 1.0 : speed2, m == 0 ? 0 : 6000 + 5000 * m});
    }
    const cluster c = devices(specs, choice(rng) == 0 ? 0.0 : 1e6 * (1 + choice(rng)));
    pipedream_options o;
    o.in_flight = choice(rng) == 0 ? 2 : 0;
    o.max_devices = choice(rng) == 0 ? 1 + choice(rng) : 0;
    o.same_replicas = choice(rng) == 0;
    const auto planned = plan_pipedream(p, c, o);
    const brute_result ties = brute_force_ties(p, c, o);
    const double brute = ties.bottleneck;
    INFO("instance " << instance << ": " << L << " layers, " << n << " devices, in_flight "
                     << o.in_flight << ", max_devices " << o.max_devices << ", same_replicas "
                     << o.same_replicas);
    REQUIRE(planned.ok() == (brute < std::numeric_limits<double>::infinity()));
    if (!planned.ok()) {
      CHECK(planned.message().find("no plan fits in memory") != std::string::npos);
      CHECK(planned.message().find("more than") != std::string::npos);
      ++without;
      continue;
    }
    ++with_plan;
    CHECK(planned->bottleneck_ms == Approx(brute).epsilon(1e-9).margin(1e-12));
    check_plan(*planned, p, c, o);
    // Ties at the optimum: the fewest devices, then the fewest stages.
    int used = 0;
    for (const planned_stage& st : planned->stages) used += st.replicas;
    CHECK(used == ties.devices);
    CHECK(static_cast<int>(planned->stages.size()) == ties.stages);
    for (const planned_stage& st : planned->stages) {
      std::set<double> speeds;
      for (int d : st.devices) speeds.insert(c.devices[d].speed);
      if (speeds.size() > 1) ++mixed;
    }
  }
  CHECK(with_plan > 100);
  CHECK(without > 0);
  CHECK(mixed > 0);  // some optimal stages mix speeds: one class per stage would not be exact
}

TEST_CASE("pipedream hetero: 2 fast and 2 slow devices share 12 layers by speed",
          "[partition][hetero]") {
  // Equal layers; parameters make replication cost an all-reduce, so the plan is a 4-stage pipeline.
  model_profile p;
  for (int l = 0; l < 12; ++l) p.layers.push_back(layer(1.0, 2.0, 1000, 1000, 10'000'000));
  const cluster c = devices({{2.0, 0}, {2.0, 0}, {1.0, 0}, {1.0, 0}}, 1e9);
  const auto plan = plan_pipedream(p, c);
  REQUIRE(plan.ok());
  std::vector<int> layers_on(4, 0);
  for (const planned_stage& st : plan->stages)
    for (int d : st.devices) layers_on[d] += st.last_layer - st.first_layer + 1;
  INFO("layers per device " << layers_on[0] << " " << layers_on[1] << " " << layers_on[2] << " "
                            << layers_on[3]);
  CHECK(layers_on[0] == 2 * layers_on[2]);
  CHECK(layers_on[1] == 2 * layers_on[3]);
  // 4 layers on a fast device, 2 on a slow one: 4·3/2 = 6 ms per stage, against the even split's
  // 3 layers on a slow device, 9 ms.
  CHECK(plan->bottleneck_ms == Approx(6.0));
  const double even = 3 * 3.0 / 1.0;
  CHECK(plan->bottleneck_ms < even);
  check_plan(*plan, p, c, {});
}

TEST_CASE("pipedream hetero: a small-memory device gets fewer layers", "[partition][hetero]") {
  // Two equal-speed devices, one with room for 3 of 8 layers (each 2·100 + 0 + in_flight·10).
  model_profile p;
  for (int l = 0; l < 8; ++l) p.layers.push_back(layer(1.0, 1.0, 10, 10, 100));
  const cluster c = devices({{1.0, 0}, {1.0, 700}}, 1e9);
  pipedream_options o;
  o.in_flight = 2;  // 220 bytes a layer: 3 layers = 660 fit in 700, 4 = 880 do not
  const auto plan = plan_pipedream(p, c, o);
  REQUIRE(plan.ok());
  REQUIRE(plan->stages.size() == 2);
  for (const planned_stage& st : plan->stages) {
    REQUIRE(st.devices.size() == 1);
    if (st.devices[0] == 1) CHECK(st.last_layer - st.first_layer + 1 == 3);
  }
  CHECK(plan->bottleneck_ms == Approx(10.0));  // 5 layers of 2 ms on the roomy device
}

TEST_CASE("pipedream hetero: no plan fits reports by how much and big searches are refused",
          "[partition][hetero]") {
  model_profile p;
  for (int l = 0; l < 3; ++l) p.layers.push_back(layer(1.0, 1.0, 10, 10, 100, 50));
  // 250 + in_flight · 10 bytes a layer; devices of 200, 240 and 200 bytes: the best plan puts one
  // layer on each device, needing 280, 270, 260, with the 240-byte device on the first stage.
  const cluster c = devices({{1.0, 200}, {1.0, 240}, {2.0, 200}}, 1e9);
  const auto plan = plan_pipedream(p, c);
  REQUIRE(!plan.ok());
  INFO(plan.message());
  CHECK(plan.message().find("no plan fits in memory") != std::string::npos);
  // The least excess over plans: 270 on a 200-byte device (70) beats 280 on one (80).
  CHECK(plan.message().find("70 bytes more than the 200 bytes") != std::string::npos);

  model_profile big;
  for (int l = 0; l < 200; ++l) big.layers.push_back(layer(1.0, 1.0, 10, 10, 100));
  std::vector<std::pair<double, std::int64_t>> specs;
  for (int d = 0; d < 24; ++d) specs.push_back({1.0 + d % 4, 0});
  const auto refused = plan_pipedream(big, devices(specs, 1e9));
  REQUIRE(!refused.ok());
  CHECK(refused.message().find("fewer distinct speeds") != std::string::npos);
  CHECK(!plan_pipedream(model_profile{}, devices(specs, 1e9)).ok());
}

TEST_CASE("pipedream hetero: ties go to the fewest devices then the fewest stages",
          "[partition][hetero]") {
  // No memory limit (k is not tracked): layers of 1, 1 and 2 ms on 2 equal devices reach 2 ms
  // both as 2 stages {l0 l1} {l2} and as 1 stage on 2 replicas; both use 2 devices: 1 stage wins.
  model_profile p;
  p.layers = {layer(0.5, 0.5, 0, 0, 0), layer(0.5, 0.5, 0, 0, 0), layer(1.0, 1.0, 0, 0, 0)};
  const auto two = plan_pipedream(p, devices({{1.0, 0}, {1.0, 0}}, 0.0));
  REQUIRE(two.ok());
  CHECK(two->bottleneck_ms == Approx(2.0));
  CHECK(two->stages.size() == 1);
  CHECK(two->stages[0].replicas == 2);

  // same_replicas, layers of 1, 2 and 1 ms, two devices of speed 1 and one of 0.5: r = 1 reaches
  // 2 ms only as 3 stages on 3 devices (the slow one on a 1 ms layer); r = 2 reaches it as 1
  // stage on the 2 fast devices (4 ms / 2). Fewer devices wins, though r is larger.
  p.layers = {layer(0.5, 0.5, 0, 0, 0), layer(1.0, 1.0, 0, 0, 0), layer(0.5, 0.5, 0, 0, 0)};
  pipedream_options o;
  o.same_replicas = true;
  const cluster c = devices({{1.0, 0}, {1.0, 0}, {0.5, 0}}, 0.0);
  const auto same = plan_pipedream(p, c, o);
  REQUIRE(same.ok());
  CHECK(same->bottleneck_ms == Approx(2.0));
  REQUIRE(same->stages.size() == 1);
  CHECK(same->stages[0].devices == std::vector<int>{0, 1});
  CHECK(same->memory_bytes == std::vector<std::int64_t>{0, 0});  // no bytes in this profile
  check_plan(*same, p, c, o);
}

TEST_CASE("pipedream hetero: profile totals over 2^50 bytes are refused", "[partition][hetero]") {
  model_profile p;
  p.layers = {layer(1.0, 1.0, 0, 0, max_profile_total_bytes / 2),
              layer(1.0, 1.0, 0, 0, max_profile_total_bytes / 2 + 1)};
  const auto plan = plan_pipedream(p, devices({{1.0, 0}, {1.0, 0}}, 1e9));
  REQUIRE(!plan.ok());
  CHECK(plan.message().find("param_bytes") != std::string::npos);
  CHECK(plan.message().find("2^50") != std::string::npos);
  // A huge fixed in_flight does not overflow the memory estimate: it just does not fit.
  model_profile q;
  q.layers = {layer(1.0, 1.0, 0, max_profile_total_bytes, 0)};
  pipedream_options o;
  o.in_flight = std::numeric_limits<int>::max();
  const auto huge = plan_pipedream(q, devices({{1.0, std::int64_t{1} << 40}}, 0.0), o);
  REQUIRE(!huge.ok());
  CHECK(huge.message().find("no plan fits in memory") != std::string::npos);
  CHECK(huge.message().find("on d0") != std::string::npos);  // the device by its name
  CHECK(huge.message().find("2bw planner") != std::string::npos);  // and what to try
}

// Mixed CPU and GPU clusters: the GPUs take their times and saved bytes from a profile measured on
// a GPU (per layer anywhere from 50x faster to 2x slower than the CPU's), the CPUs from the plan's.
TEST_CASE("pipedream hetero with a GPU profile equals brute force on small CPU and GPU clusters",
          "[partition][hetero]") {
  std::mt19937 rng(20261126);
  std::uniform_int_distribution<int> layers_d(1, 6), devices_d(1, 4), choice(0, 3);
  std::uniform_real_distribution<double> ms(0.0, 10.0), factor(0.02, 2.0), share(0.1, 1.0);
  std::uniform_int_distribution<std::int64_t> bytes(0, 4000);
  int with_plan = 0, both_kinds = 0;
  for (int instance = 0; instance < 200; ++instance) {
    const int L = layers_d(rng), n = devices_d(rng);
    model_profile p, g;
    for (int l = 0; l < L; ++l) {
      p.layers.push_back(layer(ms(rng), ms(rng), bytes(rng), bytes(rng), bytes(rng), bytes(rng)));
      layer_profile x = p.layers.back();
      x.fwd_ms *= factor(rng);
      x.bwd_ms *= factor(rng);
      x.saved_bytes = static_cast<std::int64_t>(static_cast<double>(x.saved_bytes) * share(rng));
      g.layers.push_back(x);
    }
    cluster c;
    for (int d = 0; d < n; ++d) {
      const bool gpu = choice(rng) < 2;
      const int m = choice(rng);
      c.devices.push_back(device_spec{(gpu ? "gpu" : "cpu") + std::to_string(d),
                                      gpu && choice(rng) == 0 ? 2.0 : 1.0,
                                      m == 0 ? 0 : 6000 + 5000 * m, gpu ? "gpu" : ""});
    }
    if (choice(rng) != 0)
      c.levels.push_back(cluster_level{"link", n, 1e6 * (1 + choice(rng)), 0.0});
    pipedream_options o;
    o.in_flight = choice(rng) == 0 ? 2 : 0;
    o.max_devices = choice(rng) == 0 ? 1 + choice(rng) : 0;
    o.same_replicas = choice(rng) == 0;
    o.device_profiles["gpu"] = g;
    const auto planned = plan_pipedream(p, c, o);
    const brute_result ties = brute_force_ties(p, c, o);
    INFO("instance " << instance << ": " << L << " layers, " << n << " devices");
    REQUIRE(planned.ok() == (ties.bottleneck < std::numeric_limits<double>::infinity()));
    if (!planned.ok()) continue;
    ++with_plan;
    CHECK(planned->bottleneck_ms == Approx(ties.bottleneck).epsilon(1e-9).margin(1e-12));
    check_plan(*planned, p, c, o);
    int used = 0;
    std::set<bool> kinds;
    for (const planned_stage& st : planned->stages) {
      used += st.replicas;
      for (int d : st.devices) kinds.insert(c.devices[d].profile.empty());
    }
    CHECK(used == ties.devices);
    CHECK(static_cast<int>(planned->stages.size()) == ties.stages);
    if (kinds.size() == 2) ++both_kinds;
  }
  CHECK(with_plan > 100);
  CHECK(both_kinds > 0);  // some optimal plans run on CPUs and GPUs together
}

TEST_CASE("pipedream hetero: a GPU profile gives the GPU the layers it is fast at",
          "[partition][hetero]") {
  // The CPU is fast at the first layer (an embedding lookup) and slow at the middle ones; the GPU
  // the other way round. One speed ratio could not say so: the plan puts layer 0 on the CPU.
  model_profile cpu, gpu;
  const double cpu_ms[] = {0.5, 10, 10, 1}, gpu_ms[] = {2, 0.5, 0.5, 1.5};
  for (int l = 0; l < 4; ++l) {
    cpu.layers.push_back(layer(cpu_ms[l], 0, 100, 100, 100));
    gpu.layers.push_back(layer(gpu_ms[l], 0, 100, 100, 100));
  }
  cluster c;
  c.devices.push_back(device_spec{"cpu", 1.0, 0, ""});
  c.devices.push_back(device_spec{"h100", 1.0, 0, "h100"});
  pipedream_options o;
  o.device_profiles["h100"] = gpu;
  const auto plan = plan_pipedream(cpu, c, o);
  REQUIRE(plan.ok());
  REQUIRE(plan->stages.size() == 2);
  CHECK(plan->stages[0].last_layer == 0);
  CHECK(plan->stages[0].devices == std::vector<int>{0});
  CHECK(plan->stages[1].devices == std::vector<int>{1});
  CHECK(plan->bottleneck_ms == Approx(2.5));  // the GPU's 0.5 + 0.5 + 1.5
  // Without the GPU's profile both devices look alike and no split beats 10 ms.
  c.devices[1].profile.clear();
  const auto blind = plan_pipedream(cpu, c, {});
  REQUIRE(blind.ok());
  CHECK(blind->bottleneck_ms >= 10.5);
}

TEST_CASE("pipedream hetero: a device profile that is missing or of another model is refused",
          "[partition][hetero]") {
  model_profile p;
  for (int l = 0; l < 3; ++l) p.layers.push_back(layer(1, 1, 100, 100, 100));
  cluster c;
  c.devices.push_back(device_spec{"cpu", 1.0, 0, ""});
  c.devices.push_back(device_spec{"h100", 1.0, 0, "gpu.json"});
  auto e = plan_pipedream(p, c, {});
  REQUIRE(!e.ok());
  CHECK(e.message().find("h100 names the profile gpu.json") != std::string::npos);
  pipedream_options o;
  o.device_profiles["gpu.json"] = p;
  o.device_profiles["gpu.json"].layers.pop_back();
  e = plan_pipedream(p, c, o);
  REQUIRE(!e.ok());
  CHECK(e.message().find("device profile gpu.json") != std::string::npos);
  CHECK(e.message().find("has 2 layers, the plan's 3") != std::string::npos);
  o.device_profiles["gpu.json"] = p;
  o.device_profiles["gpu.json"].layers[1].param_bytes = 7;
  e = plan_pipedream(p, c, o);
  REQUIRE(!e.ok());
  CHECK(e.message().find("layer 1") != std::string::npos);
  CHECK(e.message().find("param_bytes") != std::string::npos);
  o.device_profiles["gpu.json"] = p;
  o.device_profiles["gpu.json"].microbatch = 4;
  e = plan_pipedream(p, c, o);
  REQUIRE(!e.ok());
  CHECK(e.message().find("microbatch 4") != std::string::npos);
}

TEST_CASE("pipedream hetero: a full recompute profile fits where none does", "[partition][hetero][recompute]") {
  // As the flat case: fixed 400 bytes a layer, 1000 saved, a 10-byte output, 1500 bytes a device.
  // Without recomputation stage 0 needs 400 + 2·1000; with full 400 + 2·0 + 1000 = 1400 (layer
  // 0's input is not in the profile) and stage 1 400 + 10 + 1000 = 1410.
  model_profile p;
  p.model = "two";
  p.microbatch = 1;
  p.layers = {layer(1, 2, 10, 1000, 100, 200), layer(1, 2, 10, 1000, 100, 200)};
  const cluster c = devices({{1.0, 1500}, {0.5, 1500}}, 1e9);
  REQUIRE_FALSE(plan_pipedream(p, c));
  p.recompute = recompute_mode::full;
  auto full = plan_pipedream(p, c);
  REQUIRE(full);
  CHECK(full->recompute == recompute_mode::full);
  REQUIRE(full->stages.size() == 2);
  CHECK(full->stages[0].memory_bytes == 1400);
  CHECK(full->stages[1].memory_bytes == 1410);
}

TEST_CASE("pipedream hetero: device profiles must share the plan's recompute mode",
          "[partition][hetero][recompute]") {
  model_profile p;
  p.model = "two";
  p.microbatch = 1;
  p.layers = {layer(1, 2, 10, 1000, 100, 200), layer(1, 2, 10, 1000, 100, 200)};
  cluster c = devices({{1.0, 0}, {1.0, 0}}, 1e9);
  c.devices[1].profile = "gpu.json";
  pipedream_options o;
  o.device_profiles["gpu.json"] = p;
  o.device_profiles["gpu.json"].recompute = recompute_mode::full;
  auto plan = plan_pipedream(p, c, o);
  REQUIRE_FALSE(plan);
  CHECK_THAT(plan.message(), Catch::Matchers::Contains("recompute full") &&
                                 Catch::Matchers::Contains("--recompute"));
}
