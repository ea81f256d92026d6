// The planners' choice of recompute mode from a hand-built profile of several modes: the fastest
// plan that fits each memory limit, ties to less recomputation, and the report of each mode.
#include <catch2/catch.hpp>

#include "partition/auto_partition.hpp"
#include "partition/baselines.hpp"
#include "partition/pipedream_planner.hpp"
#include "partition/profile.hpp"
#include "partition/recompute_choice.hpp"
#include "partition/two_bw_planner.hpp"
#include "profile_fixtures.hpp"

namespace pipeworks {
namespace {

using Catch::Matchers::Contains;
using partition_test::layer;

// Two layers at microbatch 1: forward 1 ms, 40-byte output, 100 parameter bytes, and per mode
//   none:      backward 2 ms,   4000 saved bytes
//   selective: backward 2.5 ms, 3000 saved bytes
//   full:      backward 3 ms,   4000 saved bytes (the whole stash during one backward)
// On 2 devices (PipeDream: 2·param per layer; 2BW: 3·param):
//   none       1 stage on both: 400 + 8000 = 8400    2 stages: 200 + 2·4000 = 8200 on stage 0
//   selective  1 stage on both: 400 + 6000 = 6400    2 stages: 200 + 2·3000 = 6200
//   full       1 stage on both: 400 + 0 + 8000       2 stages: 200 + 1·40 + 4000 = 4240 on stage 1
// (2BW's are 100 bytes a layer more: none 8600 / 8300, selective 6600 / 6300, full 4340.)
model_profile three_modes(double selective_bwd = 2.5, double full_bwd = 3) {
  model_profile p;
  p.model = "three";
  p.microbatch = 1;
  p.layers = {layer(1, 2, 40, 4000, 100), layer(1, 2, 40, 4000, 100)};
  for (layer_profile& l : p.layers) {
    l.other_modes[recompute_mode::selective] = {selective_bwd, 3000};
    l.other_modes[recompute_mode::full] = {full_bwd, 4000};
  }
  return p;
}

cluster two_devices(std::int64_t memory) {
  cluster c;
  c.device_memory_bytes = memory;
  c.levels.push_back(cluster_level{"server", 2, 1e12, 0.0});
  return c;
}

constexpr std::int64_t only_full = 4400;       // none and selective need 6200 or more
constexpr std::int64_t no_none = 6700;         // none needs 8200 or more
constexpr std::int64_t every_mode = 9000;

}  // namespace

TEST_CASE("a profile of several modes lists them with less recomputation first",
          "[partition][recompute]") {
  const model_profile p = three_modes();
  CHECK(profile_modes(p) == std::vector<recompute_mode>{recompute_mode::none,
                                                        recompute_mode::selective,
                                                        recompute_mode::full});
  const model_profile sel = profile_in_mode(p, recompute_mode::selective);
  CHECK(sel.recompute == recompute_mode::selective);
  CHECK(sel.layers[1].bwd_ms == 2.5);
  CHECK(sel.layers[1].saved_bytes == 3000);
  CHECK(sel.layers[1].other_modes.empty());
  CHECK(profile_modes(sel) == std::vector<recompute_mode>{recompute_mode::selective});
  CHECK(profile_in_mode(p, recompute_mode::none).layers[0].bwd_ms == 2);
}

TEST_CASE("pipedream picks selective when none does not fit and selective is faster than full",
          "[partition][recompute]") {
  auto plan = plan_pipedream(three_modes(), two_devices(no_none));
  REQUIRE(plan);
  CHECK(plan->recompute == recompute_mode::selective);
  for (std::int64_t bytes : plan->memory_bytes) CHECK(bytes <= no_none);
  CHECK_THAT(plan->recompute_choice, Contains("none: no plan fits") &&
                                         Contains("selective: ") &&
                                         Contains("full: ") &&
                                         Contains("-> selective"));
}

TEST_CASE("pipedream picks none when every mode fits", "[partition][recompute]") {
  auto plan = plan_pipedream(three_modes(), two_devices(every_mode));
  REQUIRE(plan);
  CHECK(plan->recompute == recompute_mode::none);
  CHECK_THAT(plan->recompute_choice, Contains("-> none"));
  CHECK(plan->recompute_choice.find("no plan fits") == std::string::npos);
}

TEST_CASE("pipedream picks full when only full fits", "[partition][recompute]") {
  auto plan = plan_pipedream(three_modes(), two_devices(only_full));
  REQUIRE(plan);
  CHECK(plan->recompute == recompute_mode::full);
  REQUIRE(plan->stages.size() == 2);
  CHECK(plan->stages[1].memory_bytes == 4240);
  CHECK_THAT(plan->recompute_choice, Contains("selective: no plan fits") &&
                                         Contains("-> full"));
}

TEST_CASE("pipedream with no mode that fits names each mode's reason", "[partition][recompute]") {
  auto plan = plan_pipedream(three_modes(), two_devices(1000));
  REQUIRE_FALSE(plan);
  CHECK_THAT(plan.message(), Contains("no recompute mode fits") &&
                                 Contains("none: no plan fits") &&
                                 Contains("full: no plan fits"));
}

TEST_CASE("a tie in throughput goes to less recomputation", "[partition][recompute]") {
  // Every mode as fast as none: none wins when it fits, selective over full when it does not.
  auto loose = plan_pipedream(three_modes(2, 2), two_devices(every_mode));
  REQUIRE(loose);
  CHECK(loose->recompute == recompute_mode::none);
  // The chooser itself, with a planner of fixed rates: none refused, selective and full equal.
  std::string report;
  auto chosen = choose_recompute<recompute_mode>(
      three_modes(),
      [](const model_profile& one, recompute_mode mode) -> result<recompute_mode> {
        CHECK(one.recompute == mode);
        if (mode == recompute_mode::none) return make_error("needs 8200 bytes");
        return mode;
      },
      [](recompute_mode) { return 10.0; }, report);
  REQUIRE(chosen);
  CHECK(*chosen == recompute_mode::selective);
  CHECK(report == "none: no plan fits (needs 8200 bytes); selective: 10.0 samples/s; full: 10.0 "
                  "samples/s -> selective");
}

TEST_CASE("2bw picks the fastest mode that fits at each limit", "[partition][recompute]") {
  for (bool sim : {false, true}) {
    CAPTURE(sim);
    two_bw_options o;
    o.use_simulator = sim;
    auto loose = plan_two_bw(three_modes(), two_devices(every_mode), o);
    REQUIRE(loose);
    CHECK(loose->recompute == recompute_mode::none);
    auto tight = plan_two_bw(three_modes(), two_devices(no_none), o);
    REQUIRE(tight);
    CHECK(tight->recompute == recompute_mode::selective);
    CHECK(tight->max_memory_bytes <= no_none);
    CHECK_THAT(tight->recompute_choice, Contains("none: no plan fits") &&
                                            Contains("-> selective"));
    auto tightest = plan_two_bw(three_modes(), two_devices(only_full), o);
    REQUIRE(tightest);
    CHECK(tightest->recompute == recompute_mode::full);
    CHECK(tightest->max_memory_bytes <= only_full);
  }
}

TEST_CASE("data parallelism picks its mode too", "[partition][recompute]") {
  // The whole model on each device: none 8400, selective 6400, full 8400.
  auto loose = plan_data_parallel(three_modes(), two_devices(every_mode));
  REQUIRE(loose);
  CHECK(loose->recompute == recompute_mode::none);
  auto tight = plan_data_parallel(three_modes(), two_devices(no_none));
  REQUIRE(tight);
  CHECK(tight->recompute == recompute_mode::selective);
  CHECK_THAT(tight->recompute_choice, Contains("full: no plan fits"));
}

TEST_CASE("a profile of one mode plans as before, with no choice reported",
          "[partition][recompute]") {
  model_profile one = profile_in_mode(three_modes(), recompute_mode::none);
  auto plan = plan_pipedream(one, two_devices(every_mode));
  REQUIRE(plan);
  CHECK(plan->recompute == recompute_mode::none);
  CHECK(plan->recompute_choice.empty());
  auto refused = plan_pipedream(one, two_devices(no_none));
  CHECK_FALSE(refused);
}

TEST_CASE("auto partition runs the chosen mode and simulates its figures",
          "[partition][recompute]") {
  auto_partition_request rq;
  rq.batch = 4;
  rq.microbatches = 4;
  cluster c = two_devices(no_none);
  auto a = plan_auto_partition(three_modes(), c, rq);
  REQUIRE(a);
  CHECK(a->recompute == recompute_mode::selective);
  CHECK_THAT(a->recompute_choice, Contains("-> selective"));
  CHECK_THAT(format_auto_partition(*a, three_modes(), "two"),
             Contains("recompute: ") && Contains(", recompute selective"));
}

TEST_CASE("the device profiles of one mode", "[partition][recompute]") {
  std::map<std::string, model_profile> own{{"gpu", three_modes()}};
  auto full = device_profiles_in_mode(own, recompute_mode::full);
  REQUIRE(full);
  CHECK(full->at("gpu").recompute == recompute_mode::full);
  CHECK(full->at("gpu").layers[0].bwd_ms == 3);
  std::map<std::string, model_profile> single{{"gpu", profile_in_mode(three_modes(), recompute_mode::none)}};
  auto refused = device_profiles_in_mode(single, recompute_mode::full);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.message(), Contains("gpu") && Contains("--recompute all"));
}

TEST_CASE("the mode choice's report reads each mode and the choice", "[partition][recompute]") {
  const recompute_mode chosen = recompute_mode::selective;
  const std::string r = format_mode_choice(
      {{recompute_mode::none, false, 0, "needs 56.2 MB"},
       {recompute_mode::selective, true, 59.1, ""},
       {recompute_mode::full, true, 43.9, ""}},
      &chosen);
  CHECK(r == "none: no plan fits (needs 56.2 MB); selective: 59.1 samples/s; full: 43.9 "
             "samples/s -> selective");
}

}  // namespace pipeworks
