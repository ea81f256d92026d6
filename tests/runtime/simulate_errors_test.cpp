// The simulator on bad inputs: out-of-range microbatch ids, mis-shaped version tables, inputs too
// large for memory, times and byte counts that overflow. Each is a clear error, not a crash.
#include <catch2/catch.hpp>
#include <climits>
#include <cmath>
#include <limits>
#include <string>

#include "simulate_helpers.hpp"

using namespace pipeworks;
using namespace pipeworks::sim_test;

TEST_CASE("simulate: a microbatch id far beyond the action count is an error naming it",
          "[runtime]") {
  schedule s = hand({"0F0 0B0"}, 1);
  s.programs[0].push_back({0, action_kind::forward, INT_MAX});
  const std::string msg = fails(s, uniform_costs(1.0, 2.0));
  CHECK_THAT(msg, Catch::Contains("action 2") && Catch::Contains("0F2147483647") &&
                      Catch::Contains("number the microbatches from 0"));
  // Sparse ids within the slack still run.
  CHECK(run(hand({"0F40 0B40"}, 1), uniform_costs(1.0, 2.0)).makespan == exactly(3.0));
}

TEST_CASE("simulate: a version table of the wrong shape is an error naming the shape",
          "[runtime]") {
  schedule s = hand({"0F0 0B0 0F1 0B1"}, 1);
  s.versions = {{{0, 0}}};  // one entry; microbatch 1 has none
  const std::string msg = fails(s, uniform_costs(1.0, 1.0));
  CHECK_THAT(msg, Catch::Contains("version table") &&
                      Catch::Contains("one row per virtual stage") && Catch::Contains("0..1") &&
                      Catch::Contains("leave it empty"));
  s.versions = {{{0, 0}, {0, 0}}, {{0, 0}, {0, 0}}};  // two rows for one stage
  CHECK_THAT(fails(s, uniform_costs(1.0, 1.0)), Catch::Contains("has 2 rows"));
  s.versions.clear();  // no table: the newest version at each F
  CHECK(run(s, uniform_costs(1.0, 1.0)).makespan == exactly(4.0));
}

TEST_CASE("simulate: state larger than memory is refused before allocating", "[runtime]") {
  schedule s = hand({"0F1000 0B1000"}, 1, 1, 4000000);  // 4e6 virtual stages * 1001 ids
  const std::string msg = fails(s, uniform_costs(1.0, 2.0));
  CHECK_THAT(msg, Catch::Contains("would need about") && Catch::Contains("memory"));
}

TEST_CASE("simulate: times that overflow to infinity are an error naming the costs", "[runtime]") {
  auto s = make_schedule(schedule_kind::one_f_one_b, params(2, 4));
  REQUIRE(s.ok());
  const std::string msg = fails(lower_communication(*s), uniform_costs(1e308, 1e308));
  CHECK_THAT(msg, Catch::Contains("overflowed") && Catch::Contains("F=1e+308"));
  // to_json refuses what JSON cannot hold.
  simulation bad;
  bad.makespan = std::numeric_limits<double>::infinity();
  auto j = to_json(bad);
  REQUIRE_FALSE(j.ok());
  CHECK_THAT(j.message(), Catch::Contains("makespan") && Catch::Contains("inf"));
  bad.makespan = 1.0;
  bad.stages.resize(2);
  bad.stages[1].busy = std::nan("");
  CHECK_THAT(to_json(bad).message(), Catch::Contains("stage 1"));
}

TEST_CASE("simulate: activation and weight bytes that overflow 64 bits are an error", "[runtime]") {
  cost_model c = uniform_costs(1.0, 2.0);
  c.stages[0].activation_bytes = max_cost_bytes;
  const std::string msg = fails(hand({"0F0 0F1 0F2 0B0 0B1 0B2"}, 1), c);
  CHECK_THAT(msg, Catch::Contains("2^63") && Catch::Contains("stage 0"));
  cost_model w = uniform_costs(1.0, 1.0);
  w.stages[0].param_bytes = max_cost_bytes;
  CHECK_THAT(fails(hand({"0F0 1F0 1B0 0B0"}, 1, 1, 4), w), Catch::Contains("2^63"));
}

TEST_CASE("footprint: the estimate bounds the lowered actions and too large is refused", "[runtime]") {
  for (auto k : {schedule_kind::one_f_one_b, schedule_kind::zb_h1, schedule_kind::interleaved}) {
    const schedule_params sp = params(4, 8, k == schedule_kind::interleaved ? 2 : 1, 2, 2);
    auto s = make_schedule(k, sp);
    REQUIRE(s.ok());
    const schedule lowered = lower_communication(*s);
    std::int64_t actions = 0;
    for (const auto& p : lowered.programs) actions += static_cast<std::int64_t>(p.size());
    const footprint f = estimate_footprint(k, sp, true, true);
    INFO(schedule_name(k));
    CHECK(f.actions >= actions);
    CHECK(f.actions <= actions * 11 / 10);
    CHECK(f.bytes > static_cast<double>(actions) * sizeof(timeline_event));
    CHECK(check_footprint(k, sp, true, true).ok());
  }
  const status big =
      check_footprint(schedule_kind::one_f_one_b, params(1, 1000000000), true, false);
  REQUIRE_FALSE(big.ok());
  CHECK_THAT(big.message(), Catch::Contains("2000000002 actions") && Catch::Contains("2^28") &&
                                Catch::Contains("p * m can be at most about 134217727"));
  CHECK_FALSE(
      check_footprint(schedule_kind::gpipe, params(1000, 1000000, 1, 4), false, false).ok());
}
