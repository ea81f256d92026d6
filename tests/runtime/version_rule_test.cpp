// Tests for runtime/version_rule.cpp: the version tables of each rule.
#include <catch2/catch.hpp>

#include "runtime/version_rule.hpp"

using namespace pipeworks;

TEST_CASE("flush and delayed tables", "[runtime]") {
  const version_table flush = flush_versions(2, 3, 2);
  const version_table delayed = delayed_versions(2, 3, 3);
  REQUIRE(flush.size() == 2);
  REQUIRE(flush[1].size() == 6);
  CHECK(flush[1][2].forward == 0);
  CHECK(flush[1][3].forward == 1);
  REQUIRE(delayed[0].size() == 9);
  CHECK(delayed[0][2].forward == 0);  // step 0 -> version 0
  CHECK(delayed[0][5].forward == 0);  // step 1 -> version 0
  CHECK(delayed[1][6].backward == 1);  // step 2 -> version 1
}

TEST_CASE("latest versions count STEPs before each F and vertical sync copies stage 0", "[runtime]") {
  auto s = schedule_from_programs({parse_program("0F0 0F1 0B0 0STEP 0F2 0B1 0STEP 0B2 0STEP").value(),
                                   parse_program("1F0 1B0 1STEP 1F1 1B1 1STEP 1F2 1B2 1STEP").value()},
                                  2, 1, 1, false);
  REQUIRE(s.ok());
  const version_table latest = latest_versions(*s);
  CHECK(latest[0][0].forward == 0);
  CHECK(latest[0][1].forward == 0);
  CHECK(latest[0][2].forward == 1);
  CHECK(latest[1][1].forward == 1);
  CHECK(latest[1][2].forward == 2);
  CHECK(latest[1][2].backward == 2);
  const version_table vs = vertical_sync_versions(latest);
  for (int mb = 0; mb < 3; ++mb) CHECK(vs[1][mb].forward == latest[0][mb].forward);
}
