// PipeDream's planner under ZeRO 1 (pipedream_planner.cpp, max_zero = 1): it shares a replicated
// stage's optimizer state out when only that makes a faster plan fit, equals a brute force over
// both ways of counting on small flat and heterogeneous clusters, and changes nothing otherwise.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "partition/pipedream_planner.hpp"
#include "partition/zero_share.hpp"
#include "profile_fixtures.hpp"

using namespace pipeworks;

namespace {

using partition_test::layer;

// One layer: 3 ms of compute, 1000 parameter bytes, 2000 optimizer bytes (its largest tensor's
// 500), 40 saved bytes per microbatch: 4000 + 40·f bytes on a device unsharded.
layer_profile heavy_layer() {
  layer_profile l = layer(1, 2, 10, 40, 1000, 2000);
  l.largest_optimizer_bytes = 500;
  return l;
}

model_profile two_heavy_layers() {
  model_profile p;
  p.microbatch = 4;
  p.layers = {heavy_layer(), heavy_layer()};
  p.layers[1].name = "m";
  return p;
}

cluster one_level(int n, double bandwidth, std::int64_t memory) {
  cluster c;
  c.device_memory_bytes = memory;
  c.levels.push_back(cluster_level{"server", n, bandwidth, 0.0});
  return c;
}

pipedream_options with_zero() {
  pipedream_options o;
  o.max_zero = 1;
  return o;
}

}  // namespace

TEST_CASE("pipedream planner shares the optimizer state out when only that fits", "[partition]") {
  // Devices of 4000 bytes hold neither layer whole (4000 + 40·f). Shared over r ≥ 2 replicas a
  // layer needs 2000 + max(⌈2000 / r⌉, 500) + 40·f; both layers together never fit. So on 4
  // devices: 2 stages of one layer, 2 replicas each. Stage 0 keeps 2 microbatches (p − s):
  // 2000 + 1000 + 80 = 3080 bytes; stage 1 keeps 1: 3040. Each stage's time: 3/2 ms, its
  // all-reduce 2·(1/2)·1000 bytes at 1e9 bytes/s and the gather (1/2)·1000 more: 1.5015 ms.
  const model_profile prof = two_heavy_layers();
  const cluster tight = one_level(4, 1e9, 4000);
  auto plan = plan_pipedream(prof, tight, with_zero());
  INFO((plan.ok() ? std::string() : plan.message()));
  REQUIRE(plan.ok());
  CHECK(plan->zero == 1);
  REQUIRE(plan->stages.size() == 2);
  CHECK(plan->stages[0].first_layer == 0);
  CHECK(plan->stages[0].last_layer == 0);
  CHECK(plan->stages[1].first_layer == 1);
  CHECK(plan->stages[0].replicas == 2);
  CHECK(plan->stages[1].replicas == 2);
  CHECK(plan->stages[0].devices == std::vector<int>{0, 1});
  CHECK(plan->stages[1].devices == std::vector<int>{2, 3});
  CHECK(plan->stages[0].memory_bytes == 3080);
  CHECK(plan->stages[1].memory_bytes == 3040);
  CHECK(plan->memory_bytes == std::vector<std::int64_t>{3080, 3080, 3040, 3040});
  CHECK(plan->bottleneck_ms == Approx(1.5015).epsilon(1e-12));
  CHECK(plan->predicted_step_ms == Approx(1.5015 * 5).epsilon(1e-12));  // (3p − 1) · bottleneck
  // Without max_zero the planner counts every replica holding the whole state: nothing fits.
  auto unsharded = plan_pipedream(prof, tight);
  REQUIRE_FALSE(unsharded.ok());
  CHECK(unsharded.message().find("no plan fits in memory") != std::string::npos);

  // The same on a list of 4 such devices (the device-list program).
  cluster listed;
  for (int d = 0; d < 4; ++d) listed.devices.push_back(device_spec{"d" + std::to_string(d), 1.0, 4000});
  listed.levels.push_back(cluster_level{"link", 4, 1e9, 0.0});
  auto on_list = plan_pipedream(prof, listed, with_zero());
  INFO((on_list.ok() ? std::string() : on_list.message()));
  REQUIRE(on_list.ok());
  CHECK(on_list->zero == 1);
  REQUIRE(on_list->stages.size() == 2);
  CHECK(on_list->stages[0].last_layer == 0);
  CHECK(on_list->stages[0].replicas == 2);
  CHECK(on_list->stages[1].replicas == 2);
  CHECK(on_list->stages[0].memory_bytes == 3080);
  CHECK(on_list->stages[1].memory_bytes == 3040);
  CHECK(on_list->bottleneck_ms == Approx(1.5015).epsilon(1e-12));

  // And with every stage replicated alike (same_replicas, as train --auto-partition plans).
  pipedream_options same = with_zero();
  same.same_replicas = true;
  auto alike = plan_pipedream(prof, tight, same);
  REQUIRE(alike.ok());
  CHECK(alike->zero == 1);
  CHECK(alike->memory_bytes == std::vector<std::int64_t>{3080, 3080, 3040, 3040});

  // Without knowing the layers' tensors the whole layer's state is one tensor: nothing shares.
  model_profile unknown = prof;
  for (layer_profile& l : unknown.layers) l.largest_optimizer_bytes = 0;
  CHECK_FALSE(plan_pipedream(unknown, tight, with_zero()).ok());
}

TEST_CASE("pipedream planner keeps the whole optimizer state when a plan fits without sharing", "[partition]") {
  const model_profile prof = two_heavy_layers();
  // Devices of 4100 bytes hold one layer with up to 2 microbatches in flight (4080): 2 stages of 2
  // replicas fit unsharded (stage 0: 4080, stage 1: 4040) and are faster than shared (no gather:
  // 1.501 ms against 1.5015), and sharing makes no faster plan fit (both layers on one stage need
  // 4000 + max(⌈4000 / r⌉, 500) + 80 bytes, more than 4100 at any r).
  const cluster both = one_level(4, 1e9, 4100);
  auto plan = plan_pipedream(prof, both, with_zero());
  REQUIRE(plan.ok());
  CHECK(plan->zero == 0);
  REQUIRE(plan->stages.size() == 2);
  CHECK(plan->stages[0].replicas == 2);
  CHECK(plan->stages[1].replicas == 2);
  CHECK(plan->memory_bytes == std::vector<std::int64_t>{4080, 4080, 4040, 4040});
  CHECK(plan->bottleneck_ms == Approx(1.501).epsilon(1e-12));
  // The same plan as without max_zero.
  auto plain = plan_pipedream(prof, both);
  REQUIRE(plain.ok());
  CHECK(plain->bottleneck_ms == plan->bottleneck_ms);
  CHECK(plain->memory_bytes == plan->memory_bytes);

  // With no memory limit ZeRO is not searched: the plan is the one without max_zero, bit for bit.
  const cluster roomy = one_level(4, 1e9, 0);
  auto free_plan = plan_pipedream(prof, roomy, with_zero());
  auto free_plain = plan_pipedream(prof, roomy);
  REQUIRE(free_plan.ok());
  REQUIRE(free_plain.ok());
  CHECK(free_plan->zero == 0);
  CHECK(free_plan->bottleneck_ms == free_plain->bottleneck_ms);
  CHECK(free_plan->memory_bytes == free_plain->memory_bytes);

  // max_zero is 0 or 1.
  pipedream_options bad;
  bad.max_zero = 2;
  CHECK_FALSE(plan_pipedream(prof, roomy, bad).ok());
}

TEST_CASE("pipedream planner shares the optimizer state when only that makes a faster plan fit", "[partition]") {
  // The two layers again, the first's output now 10000 bytes, on 4 devices of 5100 bytes at 1e7
  // bytes/s. Unsharded only single-layer stages fit (4080 with 2 in flight), and their link costs
  // 2 · 10000 / 1e7 s = 2 ms, the bottleneck of every such plan (2 + 2 replicas: stages of
  // 1.5 + 2 · (1/2) · 1000 / 1e7 s = 1.6 ms). Shared over 4 replicas both layers fit on one stage
  // (4000 + max(⌈4000 / 4⌉, 500) + 80 = 5080 bytes; 3 replicas would hold 5414) with no link:
  // 6/4 + 3 · (3/4) · 2000 / 1e7 s = 1.95 ms. Faster, so it is chosen.
  model_profile prof = two_heavy_layers();
  prof.layers[0].activation_bytes = 10000;
  const cluster c = one_level(4, 1e7, 5100);
  auto plan = plan_pipedream(prof, c, with_zero());
  INFO((plan.ok() ? std::string() : plan.message()));
  REQUIRE(plan.ok());
  CHECK(plan->zero == 1);
  REQUIRE(plan->stages.size() == 1);
  CHECK(plan->stages[0].replicas == 4);
  CHECK(plan->memory_bytes == std::vector<std::int64_t>{5080, 5080, 5080, 5080});
  CHECK(plan->bottleneck_ms == Approx(1.95).epsilon(1e-12));
  // The plan without sharing: the link-bound pipeline.
  auto unsharded = plan_pipedream(prof, c);
  REQUIRE(unsharded.ok());
  CHECK(unsharded->stages.size() == 2);
  CHECK(unsharded->bottleneck_ms == Approx(2.0).epsilon(1e-12));
}

TEST_CASE("pipedream planner shares the optimizer state on a hierarchy when only that fits", "[partition]") {
  // Two servers of two: the sharded search is the flat program placed on devices 0..3, its
  // stages' replicas inside a server.
  const model_profile prof = two_heavy_layers();
  cluster c;
  c.device_memory_bytes = 4000;
  c.levels.push_back(cluster_level{"server", 2, 1e10, 0.0});
  c.levels.push_back(cluster_level{"rack", 2, 1e9, 0.0});
  auto plan = plan_pipedream(prof, c, with_zero());
  INFO((plan.ok() ? std::string() : plan.message()));
  REQUIRE(plan.ok());
  CHECK(plan->zero == 1);
  REQUIRE(plan->stages.size() == 2);
  CHECK(plan->stages[0].devices == std::vector<int>{0, 1});
  CHECK(plan->stages[1].devices == std::vector<int>{2, 3});
  CHECK(plan->memory_bytes == std::vector<std::int64_t>{3080, 3080, 3040, 3040});
  // Each stage's all-reduce and gather inside its server (1e10 bytes/s): 1.5 + 1.5e-4 ms.
  CHECK(plan->bottleneck_ms == Approx(1.5 + 1.5e-4).epsilon(1e-12));
}

namespace {

// The best bottleneck over every split and every labelling of the devices with a stage or
// "unused" (the device-list objective written out), counting memory and time with ZeRO `zero`.
double brute_force(const model_profile& p, const cluster& c, const pipedream_options& o, int zero) {
  const int L = static_cast<int>(p.layers.size()), n = static_cast<int>(c.devices.size());
  const double ms_per_byte = 1000.0 / c.levels[0].bandwidth_bytes_per_s;
  double best = std::numeric_limits<double>::infinity();
  for (int mask = 0; mask < (1 << (L - 1)); ++mask) {
    const std::vector<std::pair<int, int>> st = partition_test::split_of(L, mask);
    const int s = static_cast<int>(st.size());
    if (s > n) continue;
    double links = 0;
    for (int k = 0; k + 1 < s; ++k)
      links = std::max(links, 2.0 * static_cast<double>(p.layers[st[k].second].activation_bytes) * ms_per_byte);
    std::vector<int> label(n, 0);  // 0..s−1: a stage, s: unused
    while (true) {
      std::vector<int> r(s, 0);
      for (int d = 0; d < n; ++d)
        if (label[d] < s) ++r[label[d]];
      bool ok = true;
      for (int k = 0; k < s; ++k) ok = ok && r[k] > 0 && (!o.same_replicas || r[k] == r[0]);
      double b = links;
      for (int d = 0; d < n && ok; ++d) {
        const int k = label[d];
        if (k == s) continue;
        std::int64_t need = 0, saved = 0, opt = 0, largest = 0;
        for (int l = st[k].first; l <= st[k].second; ++l) {
          need += 2 * p.layers[l].param_bytes + p.layers[l].optimizer_bytes;
          saved += p.layers[l].saved_bytes;
          opt += p.layers[l].optimizer_bytes;
          largest = std::max(largest, largest_optimizer_tensor(p.layers[l]));
        }
        if (zero > 0 && r[k] > 1) need -= opt - std::max((opt + r[k] - 1) / r[k], largest);
        need += (o.in_flight > 0 ? o.in_flight : s - k) * saved;
        if (c.devices[d].memory_bytes != 0 && need > c.devices[d].memory_bytes) ok = false;
      }
      for (int k = 0; k < s && ok; ++k) {
        double t = 0, w = 0;
        for (int l = st[k].first; l <= st[k].second; ++l) w += static_cast<double>(p.layers[l].param_bytes);
        for (int d = 0; d < n; ++d)
          if (label[d] == k) {
            double td = 0;
            for (int l = st[k].first; l <= st[k].second; ++l) td += p.layers[l].fwd_ms + p.layers[l].bwd_ms;
            t = std::max(t, td / (r[k] * c.devices[d].speed));
          }
        if (r[k] > 1) t += (zero > 0 ? 3.0 : 2.0) * (r[k] - 1) / r[k] * w * ms_per_byte;
        b = std::max(b, t);
      }
      if (ok) best = std::min(best, b);
      int d = 0;  // next labelling, odometer style
      while (d < n && label[d] == s) label[d++] = 0;
      if (d == n) break;
      ++label[d];
    }
  }
  return best;
}

// The bytes a device of `st` needs under ZeRO `zero`, by the same formula.
std::int64_t need_of(const model_profile& p, const planned_stage& st, int f, int zero) {
  std::int64_t need = 0, saved = 0, opt = 0, largest = 0;
  for (int l = st.first_layer; l <= st.last_layer; ++l) {
    need += 2 * p.layers[l].param_bytes + p.layers[l].optimizer_bytes;
    saved += p.layers[l].saved_bytes;
    opt += p.layers[l].optimizer_bytes;
    largest = std::max(largest, largest_optimizer_tensor(p.layers[l]));
  }
  if (zero > 0 && st.replicas > 1) need -= opt - std::max((opt + st.replicas - 1) / st.replicas, largest);
  return need + f * saved;
}

}  // namespace

TEST_CASE("pipedream planner with max_zero equals brute force over both countings", "[partition]") {
  std::mt19937 rng(2027);
  std::uniform_real_distribution<double> ms(0.5, 20.0), unit(0.0, 1.0);
  std::uniform_int_distribution<std::int64_t> bytes(100, 4000);
  int sharded = 0, unsharded = 0, none = 0, faster = 0;  // faster: sharded though one fits unsharded
  for (int instance = 0; instance < 160; ++instance) {
    const int L = 2 + instance % 3, n = 2 + instance / 3 % 4;
    const bool listed = instance % 2 == 1;  // the device-list program, else the flat one
    model_profile prof;
    prof.microbatch = 4;
    std::int64_t whole = 0;
    for (int l = 0; l < L; ++l) {
      const std::int64_t params = bytes(rng);
      layer_profile x = layer(ms(rng), ms(rng), bytes(rng), bytes(rng) / 4, params, 2 * params);
      // Some layers' largest tensor is unknown (the whole layer's state counts).
      x.largest_optimizer_bytes = unit(rng) < 0.2 ? 0 : std::max<std::int64_t>(1, static_cast<std::int64_t>(x.optimizer_bytes * (0.1 + 0.6 * unit(rng))));
      whole += 4 * params + x.saved_bytes;
      prof.layers.push_back(x);
    }
    // Memory that binds: a fraction of the whole model's unsharded bytes.
    const std::int64_t memory = static_cast<std::int64_t>(static_cast<double>(whole) * (0.25 + 0.6 * unit(rng)));
    // Bandwidth so that the all-reduce (and the gather) weigh against compute.
    const double bandwidth = 4000.0 / (0.2 + 5 * unit(rng)) * 1000.0;
    cluster c;
    if (listed) {
      for (int d = 0; d < n; ++d)
        c.devices.push_back(device_spec{"d" + std::to_string(d), d % 2 == 0 ? 1.0 : 0.5,
                                        d % 3 == 2 ? memory * 3 / 2 : memory});
      c.levels.push_back(cluster_level{"link", n, bandwidth, 0.0});
    } else {
      c = one_level(n, bandwidth, memory);
    }
    pipedream_options o = with_zero();
    o.in_flight = instance % 5 == 4 ? 2 : 0;
    o.same_replicas = instance % 7 == 3;
    // The brute force's cluster: the flat one as a list of identical devices.
    cluster as_list = c;
    if (!listed)
      for (int d = 0; d < n; ++d) as_list.devices.push_back(device_spec{"d" + std::to_string(d), 1.0, memory});
    const double plain = brute_force(prof, as_list, o, 0), shared = brute_force(prof, as_list, o, 1);
    INFO("instance " << instance << ": " << L << " layers, " << n << (listed ? " listed" : " flat")
                     << " devices, memory " << memory << ", in_flight " << o.in_flight
                     << ", same_replicas " << o.same_replicas << "; brute force " << plain
                     << " unsharded, " << shared << " shared");
    auto plan = plan_pipedream(prof, c, o);
    const double inf = std::numeric_limits<double>::infinity();
    if (plain == inf && shared == inf) {
      CHECK_FALSE(plan.ok());
      ++none;
      continue;
    }
    INFO((plan.ok() ? std::string() : plan.message()));
    REQUIRE(plan.ok());
    // The sharded plan only when it is faster (a near tie, by other roundings, is not judged).
    const bool near = plain != shared && std::abs(plain - shared) <= 1e-7 * std::max(plain, shared);
    if (!near) {
      const bool want_zero = shared < plain * (1 - 1e-9);
      CHECK(plan->zero == (want_zero ? 1 : 0));
      if (want_zero && plain != inf) ++faster;
      CHECK(plan->bottleneck_ms == Approx(want_zero ? shared : plain).epsilon(1e-9).margin(1e-12));
    }
    (plan->zero ? sharded : unsharded) += 1;
    // Every device within its memory, by the formula of the zero the plan names.
    const int p = static_cast<int>(plan->stages.size());
    for (int s = 0; s < p; ++s) {
      const planned_stage& st = plan->stages[s];
      REQUIRE(static_cast<int>(st.devices.size()) == st.replicas);
      const std::int64_t need = need_of(prof, st, o.in_flight > 0 ? o.in_flight : p - s, plan->zero);
      CHECK(st.memory_bytes == need);
      for (int d : st.devices) {
        CHECK(plan->memory_bytes.at(static_cast<std::size_t>(d)) == need);
        CHECK(need <= as_list.devices[static_cast<std::size_t>(d)].memory_bytes);
      }
    }
  }
  // The instances exercise all three outcomes, and sharing chosen for speed where a plan fits
  // without it.
  INFO(sharded << " sharded (" << faster << " of them faster than a plan that fits unsharded), "
               << unsharded << " unsharded, " << none << " with no plan");
  CHECK(faster > 0);
  CHECK(sharded > 10);
  CHECK(unsharded > 10);
  CHECK(none > 0);
}
