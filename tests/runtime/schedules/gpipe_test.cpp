// Tests for runtime/schedules/gpipe.cpp: all forwards, then all backwards, then the update.
#include <catch2/catch.hpp>

#include "runtime/schedule.hpp"
#include "runtime/validate.hpp"
#include "tests/runtime/schedules/invariants.hpp"

using namespace pipeworks;
using namespace pipeworks::testing;

TEST_CASE("gpipe p=2 m=3 matches the expected programs", "[runtime]") {
  auto s = gpipe({2, 3, 1, 1, 1});
  REQUIRE(s.ok());
  CHECK(to_string(s->programs[0]) == "0F0 0F1 0F2 0B0 0B1 0B2 0STEP");
  CHECK(to_string(s->programs[1]) == "1F0 1F1 1F2 1B0 1B1 1B2 1STEP");
  CHECK(s->device_of == std::vector<int>{0, 1});
}

TEST_CASE("gpipe invariants: all F before any B on the first, middle and last stage",
          "[runtime]") {
  const int p = 4;
  for (int m : {1, 3, 4, 9}) {
    auto s = gpipe({p, m, 1, 1, 1});
    REQUIRE(s.ok());
    check_complete(*s);
    for (int st : {0, 1, p - 1}) {
      INFO("m=" << m << " stage " << st);
      CHECK(warmup_forwards(*s, st) == m);
      CHECK(peak_live_versions(*s, st) == 1);
    }
    CHECK(validate(lower_communication(*s)).ok());
  }
}

TEST_CASE("gpipe versions: step t uses version t", "[runtime]") {
  auto s = gpipe({3, 2, 1, 1, 3});
  REQUIRE(s.ok());
  REQUIRE(s->versions.size() == 3);
  for (int st = 0; st < 3; ++st) {
    REQUIRE(s->versions[st].size() == 6);
    for (int mb = 0; mb < 6; ++mb) {
      CHECK(s->versions[st][mb].forward == mb / 2);
      CHECK(s->versions[st][mb].backward == mb / 2);
    }
  }
}
