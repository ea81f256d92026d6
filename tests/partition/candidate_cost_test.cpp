// The cost model 2BW's planner and the baselines share: each approach's memory rule, GPipe placed
// and split as 2BW is on device lists, memory_bytes by device number, the 2^50 byte cap, and
// errors that name the device and say what to do.
#include "partition/candidate_cost.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "partition/baselines.hpp"
#include "profile_fixtures.hpp"
#include "partition/two_bw_planner.hpp"

using namespace pipeworks;
using Catch::Matchers::Contains;

namespace {

model_profile equal_layers(int n, std::int64_t saved, std::int64_t params, std::int64_t opt) {
  model_profile p;
  p.model = "equal";
  for (int l = 0; l < n; ++l) p.layers.push_back(partition_test::layer(1, 2, 0, saved, params, opt));
  return p;
}

cluster one_server(int devices, std::int64_t memory) {
  cluster c;
  c.device_memory_bytes = memory;
  c.levels.push_back(cluster_level{"server", devices, 1e9, 0.0});
  return c;
}

cluster device_list(const std::vector<device_spec>& specs) {
  cluster c;
  c.devices = specs;
  c.levels.push_back(cluster_level{"link", static_cast<int>(specs.size()), 1e9, 0.0});
  return c;
}

}  // namespace

TEST_CASE("candidate cost: memory follows each approach's versions and stash", "[partition]") {
  // 4 layers of 1000 saved, 100 parameter and 200 optimizer bytes; p = 2, m = 4.
  const model_profile p = equal_layers(4, 1000, 100, 200);
  const cluster c = one_server(4, 0);
  auto stage_bytes = [&](const schedule_rules& rules, int stages) {
    auto ctx = make_cost_context(p, c, {}, rules);
    REQUIRE(ctx);
    const cost_candidate k = build(*ctx, stages, 1, 1, 4);
    std::vector<std::int64_t> out;
    for (const planned_stage& s : k.plan.stages) out.push_back(s.memory_bytes);
    return out;
  };
  // 2BW: 2 versions + gradients + optimizer = 2·(3·100 + 200); stash p − s of 2000 bytes.
  CHECK(stage_bytes(two_bw_rules(), 2) == std::vector<std::int64_t>{1000 + 2 * 2000, 1000 + 2000});
  // GPipe: 1 version + gradients + optimizer = 2·(2·100 + 200); stash m = 4 on every stage.
  CHECK(stage_bytes(gpipe_rules(), 2) == std::vector<std::int64_t>{800 + 4 * 2000, 800 + 4 * 2000});
  // Data parallelism: the whole model, 1 microbatch stashed whatever m.
  CHECK(stage_bytes(data_parallel_rules(), 1) == std::vector<std::int64_t>{1600 + 4000});
}

TEST_CASE("gpipe on a device list is placed as 2bw places it", "[partition]") {
  // Slow devices first in the list: 2BW deals the fast ones (1 and 2) to a 2-stage pipeline; GPipe
  // used to take devices 0 and 1 (r·p + s) whatever their speed.
  const model_profile p = equal_layers(4, 10, 10, 0);
  const cluster c = device_list({{"slow0", 0.5, 0}, {"fast0", 1.0, 0}, {"fast1", 1.0, 0},
                                 {"slow1", 0.5, 0}});
  baseline_options bo;
  bo.use_simulator = false;
  two_bw_options to;
  to.use_simulator = false;
  auto g = evaluate_gpipe(p, c, 2, 1, 1, 2, bo);
  auto t = evaluate_two_bw(p, c, 2, 1, 1, 2, to);
  REQUIRE(g);
  REQUIRE(t);
  REQUIRE(g->stages.size() == 2);
  for (std::size_t s = 0; s < 2; ++s) {
    CHECK(g->stages[s].devices == t->stages[s].devices);
    CHECK(g->stages[s].first_layer == t->stages[s].first_layer);
  }
  CHECK(g->stages[0].devices == std::vector<int>{1});
  CHECK(g->stages[1].devices == std::vector<int>{2});
  // memory_bytes by device number: 0 for the unused slow0, the stage's estimate for the others.
  CHECK(g->memory_bytes ==
        std::vector<std::int64_t>{0, g->stages[0].memory_bytes, g->stages[1].memory_bytes});
  CHECK(t->memory_bytes ==
        std::vector<std::int64_t>{0, t->stages[0].memory_bytes, t->stages[1].memory_bytes});
}

TEST_CASE("gpipe takes the memory-aware split when the balanced one does not fit",
          "[partition]") {
  // Equal times; layers 0 and 1 hold 100 parameter bytes each (GPipe: 2·100 per layer), 2 and 3
  // none. The balanced split {0 1} {2 3} needs 400 bytes on stage 0, over the 300 a device has;
  // {0} {1 2 3} needs 200 on each.
  model_profile p = equal_layers(4, 0, 0, 0);
  p.layers[0].param_bytes = 100;
  p.layers[1].param_bytes = 100;
  baseline_options bo;
  bo.use_simulator = false;
  auto g = evaluate_gpipe(p, one_server(2, 300), 2, 1, 1, 2, bo);
  REQUIRE(g);
  CHECK(g->stages[0].last_layer == 0);
  CHECK(g->max_memory_bytes == 200);
}

TEST_CASE("planners refuse profiles whose byte totals pass 2^50", "[partition]") {
  model_profile p = equal_layers(2, 0, 0, 0);
  p.layers[0].optimizer_bytes = max_profile_total_bytes;
  p.layers[1].optimizer_bytes = 1;
  const cluster c = one_server(2, 0);
  for (const std::string& message :
       {plan_two_bw(p, c).message(), plan_gpipe(p, c).message(),
        plan_data_parallel(p, c).message(), evaluate_gpipe(p, c, 1, 1, 1, 1).message()}) {
    CHECK_THAT(message, Contains("optimizer_bytes") && Contains("2^50") && Contains("layers[1]"));
  }
  // At the cap exactly, a plan is made (its memory estimate is 2^50 + saved bytes, no overflow).
  p.layers[1].optimizer_bytes = 0;
  auto ok = plan_two_bw(p, c);
  REQUIRE(ok);
  CHECK(ok->stages[0].memory_bytes >= max_profile_total_bytes);
}

TEST_CASE("nothing fits: the error names the device and says what to try", "[partition]") {
  const model_profile p = equal_layers(2, 10, 1000, 0);
  const cluster named = device_list({{"gpu-a", 1.0, 100}, {"gpu-b", 1.0, 100}});
  auto two = plan_two_bw(p, named);
  REQUIRE_FALSE(two);
  CHECK_THAT(two.message(), Contains("no 2bw plan fits in memory") && Contains("on gpu-") &&
                                Contains("more than its memory of 100 bytes") &&
                                Contains("give more devices"));
  auto gp = plan_gpipe(p, named);
  REQUIRE_FALSE(gp);
  CHECK_THAT(gp.message(), Contains("no gpipe plan fits in memory") && Contains("on gpu-") &&
                               Contains("give more devices"));
  // Unnamed devices, and levels, are "device <d>".
  const cluster unnamed = device_list({{"", 1.0, 100}, {"", 1.0, 100}});
  CHECK_THAT(plan_two_bw(p, unnamed).message(), Contains("on device "));
  CHECK_THAT(plan_two_bw(p, one_server(2, 100)).message(), Contains("on device "));
  auto dp = plan_data_parallel(p, named);
  REQUIRE_FALSE(dp);
  CHECK_THAT(dp.message(), Contains("of gpu-a") && Contains("split the model over devices"));
}
