// The GPipe, model-parallel and data-parallel baselines: hand-computed step times and memory,
// GPipe's stash growing with m, and data parallelism refusing a model too big, with the excess.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "partition/baselines.hpp"
#include "profile_fixtures.hpp"

using namespace pipeworks;

namespace {

cluster one_server(int devices, double bandwidth, std::int64_t memory) {
  cluster c;
  c.device_memory_bytes = memory;
  c.levels.push_back(cluster_level{"server", devices, bandwidth, 0.0});
  return c;
}

model_profile two_layers(std::int64_t microbatch) {
  model_profile p;
  p.model = "two";
  p.microbatch = microbatch;
  p.layers = {partition_test::layer(1, 2, 0, 1000, 100, 200), partition_test::layer(1, 2, 0, 1000, 100, 200)};
  return p;
}

}  // namespace

TEST_CASE("gpipe step time and memory on a hand case", "[partition][baselines]") {
  // Two stages of 1 ms forward, 2 ms backward, free links, m = 4: (4 + 2 − 1) · 3 ms = 15 ms;
  // the simulated GPipe schedule gives the same (forwards 0..5 ms, backwards 5..15 ms).
  const cluster c = one_server(2, 1e30, 0);
  for (bool sim : {false, true}) {
    baseline_options o;
    o.use_simulator = sim;
    auto g = evaluate_gpipe(two_layers(1), c, 2, 1, 1, 4, o);
    REQUIRE(g);
    CHECK(g->simulated == sim);
    CHECK(g->step_ms == Approx(15.0));
    CHECK(g->analytic_step_ms == Approx(15.0));
    CHECK(g->throughput_samples_per_s == Approx(4.0 / 15.0 * 1000.0));
    REQUIRE(g->stages.size() == 2);
    // One version (100) + gradients (100) + optimizer (200) + 4 stashed microbatches (4 · 1000).
    CHECK(g->stages[0].memory_bytes == 100 + 100 + 200 + 4 * 1000);
    CHECK(g->max_memory_bytes == 4400);
  }
}

TEST_CASE("gpipe with replicas adds the ring all-reduce after the flush", "[partition][baselines]") {
  // Two replicas of two stages on one server of 4 at 1e9 B/s; each stage holds 1e6 parameter
  // bytes: 2·(2−1)/2 · 1e6 / 1e9 s = 1 ms of all-reduce after the 15 ms of compute.
  model_profile p = two_layers(1);
  for (layer_profile& l : p.layers) l.param_bytes = 1'000'000;
  const cluster c = one_server(4, 1e9, 0);
  for (bool sim : {false, true}) {
    baseline_options o;
    o.use_simulator = sim;
    auto g = evaluate_gpipe(p, c, 2, 2, 1, 4, o);
    REQUIRE(g);
    CHECK(g->step_ms == Approx(16.0));
    CHECK(g->throughput_samples_per_s == Approx(8.0 / 16.0 * 1000.0));
    CHECK(g->stages[1].devices == std::vector<int>{1, 3});
  }
}

TEST_CASE("gpipe memory grows with the microbatches per step", "[partition][baselines]") {
  const cluster c = one_server(2, 1e30, 0);
  auto m2 = evaluate_gpipe(two_layers(1), c, 2, 1, 1, 2);
  auto m8 = evaluate_gpipe(two_layers(1), c, 2, 1, 1, 8);
  REQUIRE(m2);
  REQUIRE(m8);
  CHECK(m8->max_memory_bytes - m2->max_memory_bytes == 6 * 1000);
  // Doubling b doubles each stashed microbatch.
  auto b2 = evaluate_gpipe(two_layers(1), c, 2, 1, 2, 2);
  REQUIRE(b2);
  CHECK(b2->max_memory_bytes - m2->max_memory_bytes == 2 * 1000);
  // A device of 3,000 bytes holds m = 2 (2,400) but not m = 8 (8,400): the error says by how much.
  const cluster small = one_server(2, 1e30, 3000);
  REQUIRE(evaluate_gpipe(two_layers(1), small, 2, 1, 1, 2));
  auto too_many = evaluate_gpipe(two_layers(1), small, 2, 1, 1, 8);
  REQUIRE_FALSE(too_many);
  CHECK_THAT(too_many.message(), Catch::Contains("5400 bytes more than its memory"));
}

TEST_CASE("plan_gpipe keeps every device within memory", "[partition][baselines]") {
  const cluster c = one_server(4, 1e10, 3000);
  auto g = plan_gpipe(two_layers(4), c);
  REQUIRE(g);
  CHECK(g->kind == "gpipe");
  CHECK(g->m >= g->p);
  for (const planned_stage& s : g->stages) CHECK(s.memory_bytes <= 3000);
}

TEST_CASE("model parallelism without pipelining runs one microbatch", "[partition][baselines]") {
  const cluster c = one_server(2, 1e30, 0);
  baseline_options o;
  o.max_devices = 2;
  auto mp = plan_model_parallel(two_layers(1), c, o);
  REQUIRE(mp);
  CHECK(mp->kind == "model-parallel");
  CHECK(mp->p == 2);
  CHECK(mp->m == 1);
  // One microbatch crosses both stages: 2 · 3 ms at b, whatever b is (times scale with b).
  CHECK(mp->step_ms == Approx(6.0 * static_cast<double>(mp->b)));
  auto g = plan_gpipe(two_layers(1), c, o);
  REQUIRE(g);
  CHECK(g->throughput_samples_per_s > mp->throughput_samples_per_s);
}

TEST_CASE("data parallelism by hand: compute plus a ring all-reduce", "[partition][baselines]") {
  // One layer, 1 ms + 2 ms at the profile's b = 4, 1e6 parameter bytes; four devices at 1e9 B/s.
  // The best is w = 4, b = 16, m = 8: 8 · 3 · 4 ms + 2·3/4 · 1e6 / 1e9 s = 96 + 1.5 ms.
  model_profile p;
  p.model = "one";
  p.microbatch = 4;
  p.layers = {partition_test::layer(1, 2, 0, 10, 1'000'000, 0)};
  const cluster c = one_server(4, 1e9, 0);
  for (bool sim : {false, true}) {
    baseline_options o;
    o.use_simulator = sim;
    auto dp = plan_data_parallel(p, c, o);
    REQUIRE(dp);
    CHECK(dp->kind == "data-parallel");
    CHECK(dp->p == 1);
    CHECK(dp->w == 4);
    CHECK(dp->b == 16);
    CHECK(dp->m == 8);
    CHECK(dp->step_ms == Approx(97.5));
    // Gradient accumulation keeps one microbatch's activations: 2e6 + 0 + 40.
    CHECK(dp->max_memory_bytes == 2'000'000 + 40);
  }
}

TEST_CASE("data parallelism refuses a model that does not fit and says by how much", "[partition][baselines]") {
  // The whole model at b = 1 needs 2·200 + 400 + 2·1000 = 2,800 bytes; devices hold 2,500.
  const cluster c = one_server(4, 1e10, 2500);
  auto dp = plan_data_parallel(two_layers(1), c);
  REQUIRE_FALSE(dp);
  CHECK_THAT(dp.message(), Catch::Contains("data parallelism does not fit"));
  CHECK_THAT(dp.message(), Catch::Contains("needs 2800 bytes per device, 300 bytes more than the 2500"));
  // GPipe fits the same model on the same devices by splitting it.
  CHECK(plan_gpipe(two_layers(1), c));
}

TEST_CASE("evaluate_gpipe refuses invalid configurations", "[partition][baselines]") {
  const cluster c = one_server(2, 1e10, 0);
  CHECK_FALSE(evaluate_gpipe(two_layers(1), c, 3, 1, 1, 4));  // more stages than layers
  CHECK_FALSE(evaluate_gpipe(two_layers(1), c, 2, 2, 1, 4));  // more devices than the cluster's
  CHECK_FALSE(evaluate_gpipe(two_layers(1), c, 2, 1, 0, 4));
  CHECK_FALSE(evaluate_gpipe(two_layers(1), c, 2, 1, 1, 0));
}
