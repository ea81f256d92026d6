// Tests for runtime/schedules/one_f_one_b.cpp: 1F1B with flush (PipeDream-Flush).
#include <catch2/catch.hpp>

#include <algorithm>

#include "runtime/schedule.hpp"
#include "runtime/validate.hpp"
#include "tests/runtime/schedules/invariants.hpp"

using namespace pipeworks;
using namespace pipeworks::testing;

TEST_CASE("1f1b p=2 m=3 matches the expected programs", "[runtime]") {
  auto s = one_f_one_b({2, 3, 1, 1, 1});
  REQUIRE(s.ok());
  REQUIRE(s->ranks() == 2);
  CHECK(to_string(s->programs[0]) == "0F0 0F1 0B0 0F2 0B1 0B2 0STEP");
  CHECK(to_string(s->programs[1]) == "1F0 1B0 1F1 1B1 1F2 1B2 1STEP");
}

TEST_CASE("1f1b p=4 m=2: fewer microbatches than stages", "[runtime]") {
  auto s = one_f_one_b({4, 2, 1, 1, 1});
  REQUIRE(s.ok());
  CHECK(to_string(s->programs[0]) == "0F0 0F1 0B0 0B1 0STEP");
  CHECK(to_string(s->programs[2]) == "2F0 2F1 2B0 2B1 2STEP");
  CHECK(to_string(s->programs[3]) == "3F0 3B0 3F1 3B1 3STEP");
}

TEST_CASE("1f1b invariants on the first, middle and last stage", "[runtime]") {
  const int p = 5;
  for (int m : {1, 2, 4, 5, 8, 13}) {
    auto s = one_f_one_b({p, m, 1, 1, 1});
    REQUIRE(s.ok());
    check_complete(*s);
    for (int st : {0, p / 2, p - 1}) {
      INFO("m=" << m << " stage " << st);
      // Warm-up: min(p - s - 1, m) forwards before the first backward... plus the steady
      // state's first F when microbatches remain.
      const int warmup = std::min(p - st - 1, m);
      CHECK(warmup_forwards(*s, st) == std::min(warmup + 1, m));
      // Never more than warmup + 1 microbatches in flight.
      int in_flight = 0, peak = 0;
      for (const action& a : stage_actions(*s, st)) {
        in_flight += a.kind == action_kind::forward ? 1 : -1;
        peak = std::max(peak, in_flight);
      }
      CHECK(peak == std::min(p - st, m));
    }
    CHECK(validate(lower_communication(*s)).ok());
  }
}

TEST_CASE("1f1b over several steps flushes between steps", "[runtime]") {
  auto s = one_f_one_b({2, 2, 1, 1, 2});
  REQUIRE(s.ok());
  CHECK(to_string(s->programs[0]) == "0F0 0F1 0B0 0B1 0STEP 0F2 0F3 0B2 0B3 0STEP");
  CHECK(s->versions[0][1].forward == 0);
  CHECK(s->versions[1][2].forward == 1);
  CHECK(s->versions[1][3].backward == 1);
  CHECK(s->version_rule.find("synchronous") != std::string::npos);
  for (int st = 0; st < 2; ++st) CHECK(peak_live_versions(*s, st) == 1);
}

TEST_CASE("1f1b with replicas: each replica runs the same program, REDUCE before STEP",
          "[runtime]") {
  auto s = one_f_one_b({2, 2, 1, 2, 1});
  REQUIRE(s.ok());
  REQUIRE(s->ranks() == 4);
  CHECK(s->rank_of(1, 0) == 2);
  CHECK(s->programs[2] == s->programs[0]);
  CHECK(s->programs[3] == s->programs[1]);
  CHECK(to_string(s->programs[1]) == "1F0 1B0 1F1 1B1 1REDUCE 1STEP");
  CHECK(validate(lower_communication(*s)).ok());
}

TEST_CASE("1f1b rejects bad parameters with a reason", "[runtime]") {
  CHECK_THAT(one_f_one_b({0, 1, 1, 1, 1}).message(), Catch::Contains("p must be at least 1"));
  CHECK_THAT(one_f_one_b({2, 0, 1, 1, 1}).message(), Catch::Contains("m must be at least 1"));
  CHECK_THAT(one_f_one_b({2, 2, 2, 1, 1}).message(), Catch::Contains("interleaved or bfs"));
  CHECK_THAT(one_f_one_b({2, 2, 1, 0, 1}).message(), Catch::Contains("w must be at least 1"));
  CHECK_THAT(one_f_one_b({2, 2, 1, 1, 0}).message(), Catch::Contains("step count"));
}
