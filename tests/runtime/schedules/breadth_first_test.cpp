// Tests for runtime/schedules/breadth_first.cpp: looped breadth-first pipeline.
#include <catch2/catch.hpp>

#include "runtime/schedule.hpp"
#include "runtime/validate.hpp"
#include "tests/runtime/schedules/invariants.hpp"

using namespace pipeworks;
using namespace pipeworks::testing;

TEST_CASE("bfs p=2 m=2 v=2: all microbatches through chunk 0, then chunk 1, backwards oldest first", "[runtime]") {
  auto s = breadth_first({2, 2, 2, 1, 1});
  REQUIRE(s.ok());
  CHECK(to_string(s->programs[0]) == "0F0 0F1 2F0 2F1 2B0 2B1 2STEP 0B0 0B1 0STEP");
  CHECK(to_string(s->programs[1]) == "1F0 1F1 3F0 3F1 3B0 3B1 3STEP 1B0 1B1 1STEP");
}

TEST_CASE("bfs invariants over several m and v", "[runtime]") {
  for (int v : {1, 2, 3})
    for (int m : {1, 3, 5}) {
      auto s = breadth_first({3, m, v, 1, 2});
      REQUIRE(s.ok());
      check_complete(*s);
      for (int d = 0; d < 3; ++d) CHECK(warmup_forwards(*s, d) == m);  // stage d = chunk 0
      for (int st = 0; st < s->virtual_stages; ++st) CHECK(peak_live_versions(*s, st) == 1);
      CHECK(validate(lower_communication(*s)).ok());
    }
}

TEST_CASE("bfs versions: step t uses version t", "[runtime]") {
  auto s = breadth_first({2, 3, 2, 1, 2});
  REQUIRE(s.ok());
  for (int st = 0; st < 4; ++st)
    for (int mb = 0; mb < 6; ++mb) CHECK(s->versions[st][mb].backward == mb / 3);
}
