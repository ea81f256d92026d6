// Tests for runtime/custom_schedule.cpp: schedules around hand-written programs.
#include <catch2/catch.hpp>

#include "runtime/schedule.hpp"
#include "runtime/validate.hpp"

using namespace pipeworks;

TEST_CASE("schedule_from_programs infers the layout", "[runtime]") {
  auto s = schedule_from_programs({parse_program("0F0 2F0 0F1 2F1 2B0 2B1 0B0 0B1").value(),
                                   parse_program("1F0 3F0 1F1 3F1 3B0 3B1 1B0 1B1").value()},
                                  2, 2, 1, false);
  REQUIRE(s.ok());
  CHECK(s->virtual_stages == 4);
  CHECK(s->device_of == std::vector<int>{0, 1, 0, 1});
  CHECK(s->params.microbatches == 2);
  CHECK(s->total_microbatches() == 2);
  CHECK_FALSE(s->lowered);
  CHECK(s->versions.size() == 4);
  CHECK(validate(*s).ok());
  CHECK(validate(lower_communication(*s)).ok());
}

TEST_CASE("schedule_from_programs checks the rank count", "[runtime]") {
  auto bad = schedule_from_programs({parse_program("0F0 0B0").value()}, 2);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Catch::Contains("one program per rank (2)"));
  CHECK_FALSE(schedule_from_programs({}, 0).ok());
}
