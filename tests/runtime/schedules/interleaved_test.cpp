// Tests for runtime/schedules/interleaved.cpp: Megatron's interleaved 1F1B.
#include <catch2/catch.hpp>

#include "runtime/schedule.hpp"
#include "runtime/validate.hpp"
#include "tests/runtime/schedules/invariants.hpp"

using namespace pipeworks;
using namespace pipeworks::testing;

TEST_CASE("interleaved p=2 m=2 v=2 matches Megatron's order", "[runtime]") {
  auto s = interleaved({2, 2, 2, 1, 1});
  REQUIRE(s.ok());
  CHECK(s->virtual_stages == 4);
  CHECK(s->device_of == std::vector<int>{0, 1, 0, 1});
  // Device 0 warms up with 2(p-d-1) + (v-1)p = 4 forwards: every forward, then the backwards
  // from the last chunk down.
  CHECK(to_string(s->programs[0]) == "0F0 0F1 2F0 2F1 2B0 2B1 2STEP 0B0 0B1 0STEP");
  // Device 1 warms up with 2 forwards, then alternates.
  CHECK(to_string(s->programs[1]) == "1F0 1F1 3F0 3B0 3F1 3B1 3STEP 1B0 1B1 1STEP");
}

TEST_CASE("interleaved invariants on the first, middle and last device", "[runtime]") {
  const int p = 4;
  for (int v : {2, 3})
    for (int m : {4, 8, 12}) {
      auto s = interleaved({p, m, v, 1, 1});
      REQUIRE(s.ok());
      check_complete(*s);
      for (int d : {0, 1, p - 1}) {
        INFO("v=" << v << " m=" << m << " device " << d);
        const int warmup = std::min(2 * (p - d - 1) + (v - 1) * p, m * v);
        int forwards = 0;
        for (const action& a : s->programs[d]) {
          if (a.kind != action_kind::forward) break;
          ++forwards;
        }
        CHECK(forwards == std::min(warmup + 1, m * v));
      }
      CHECK(validate(lower_communication(*s)).ok());
    }
}

TEST_CASE("interleaved needs m to be a multiple of p when v > 1", "[runtime]") {
  auto bad = interleaved({4, 6, 2, 1, 1});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Catch::Contains("multiple of the stage count"));
  CHECK_THAT(bad.message(), Catch::Contains("Use m = 4 or m = 8, or v = 1"));
  // With one chunk it is plain 1F1B and takes any m.
  auto one = interleaved({4, 6, 1, 1, 1});
  REQUIRE(one.ok());
  CHECK(one->programs == one_f_one_b({4, 6, 1, 1, 1})->programs);
}

TEST_CASE("interleaved versions: step t uses version t on every virtual stage", "[runtime]") {
  auto s = interleaved({2, 4, 3, 1, 2});
  REQUIRE(s.ok());
  REQUIRE(s->versions.size() == 6);
  for (int st = 0; st < 6; ++st) {
    for (int mb = 0; mb < 8; ++mb) CHECK(s->versions[st][mb].forward == mb / 4);
    CHECK(peak_live_versions(*s, st) == 1);
  }
}
