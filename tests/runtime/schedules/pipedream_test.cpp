// Tests for runtime/schedules/pipedream.cpp: PipeDream, PipeDream with vertical sync, and
// PipeDream-2BW (asynchronous 1F1B without flush).
#include <catch2/catch.hpp>

#include "runtime/schedule.hpp"
#include "runtime/validate.hpp"
#include "tests/runtime/schedules/invariants.hpp"

using namespace pipeworks;
using namespace pipeworks::testing;

TEST_CASE("pipedream p=2 m=1: a STEP after every backward, no flush", "[runtime]") {
  auto s = pipedream({2, 1, 1, 1, 3});
  REQUIRE(s.ok());
  CHECK(to_string(s->programs[0]) == "0F0 0F1 0B0 0STEP 0F2 0B1 0STEP 0B2 0STEP");
  CHECK(to_string(s->programs[1]) == "1F0 1B0 1STEP 1F1 1B1 1STEP 1F2 1B2 1STEP");
  // Stage 0 ran F1 before its first STEP, so microbatch 1 uses version 0 there, 1 on stage 1.
  CHECK(s->versions[0][1].forward == 0);
  CHECK(s->versions[0][1].backward == 0);
  CHECK(s->versions[1][1].forward == 1);
  CHECK(s->versions[0][2].forward == 1);
}

TEST_CASE("pipedream m=1: peak live versions p - s on every stage", "[runtime]") {
  for (int p : {1, 2, 4, 6}) {
    auto s = pipedream({p, 1, 1, 1, 3 * p});
    REQUIRE(s.ok());
    check_complete(*s);
    for (int st = 0; st < p; ++st) {
      INFO("p=" << p << " stage " << st);
      CHECK(peak_live_versions(*s, st) == p - st);
    }
    CHECK(validate(lower_communication(*s)).ok());
  }
}

TEST_CASE("pipedream with m > 1: the update follows the m-th backward of a step", "[runtime]") {
  auto s = pipedream({2, 2, 1, 1, 2});
  REQUIRE(s.ok());
  CHECK(to_string(s->programs[0]) == "0F0 0F1 0B0 0F2 0B1 0STEP 0F3 0B2 0B3 0STEP");
  CHECK(s->versions[0][2].forward == 0);
  CHECK(s->versions[0][3].forward == 1);
  CHECK(s->versions[1][2].forward == 1);
}

TEST_CASE("pipedream-vs uses stage 0's version on every stage", "[runtime]") {
  for (int m : {1, 2, 5}) {
    auto vs = pipedream_vertical_sync({4, m, 1, 1, 4});
    auto plain = pipedream({4, m, 1, 1, 4});
    REQUIRE(vs.ok());
    REQUIRE(plain.ok());
    CHECK(vs->programs == plain->programs);
    for (int st = 0; st < 4; ++st)
      for (int mb = 0; mb < vs->total_microbatches(); ++mb) {
        CHECK(vs->versions[st][mb].forward == plain->versions[0][mb].forward);
        CHECK(vs->versions[st][mb].backward == plain->versions[0][mb].forward);
        // Never newer than what the stage has when the microbatch arrives.
        CHECK(vs->versions[st][mb].forward <= plain->versions[st][mb].forward);
      }
    for (int st = 0; st < 4; ++st) peak_live_versions(*vs, st);  // checks versions exist
    CHECK(vs->version_rule.find("vertical sync") != std::string::npos);
  }
}

TEST_CASE("2bw: step t uses version max(t-1, 0), two live versions", "[runtime]") {
  for (int m : {4, 5, 8}) {
    auto s = pipedream_2bw({4, m, 1, 1, 4});
    REQUIRE(s.ok());
    check_complete(*s);
    for (int st = 0; st < 4; ++st) {
      INFO("m=" << m << " stage " << st);
      for (int mb = 0; mb < s->total_microbatches(); ++mb) {
        const int t = mb / m;
        CHECK(s->versions[st][mb].forward == (t > 0 ? t - 1 : 0));
        CHECK(s->versions[st][mb].backward == s->versions[st][mb].forward);
      }
      CHECK(peak_live_versions(*s, st) == 2);
    }
    // Beyond the formula: each version exists at its F and is at most one behind at its B.
    check_versions_usable(*s, 1);
    CHECK(validate(lower_communication(*s)).ok());
  }
}

TEST_CASE("2bw needs m >= p", "[runtime]") {
  auto bad = pipedream_2bw({4, 3, 1, 1, 2});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Catch::Contains("m >= p"));
  CHECK_THAT(bad.message(), Catch::Contains("Use m >= 4"));
}
