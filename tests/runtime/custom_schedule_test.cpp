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

TEST_CASE("schedule_from_programs infers steps from the STEP count", "[runtime]") {
  auto s = schedule_from_programs({parse_program("0F0 0B0 0STEP 0F1 0B1 0STEP").value()}, 1);
  REQUIRE(s.ok());
  CHECK(s->params.steps == 2);
  CHECK(s->params.microbatches == 1);
  CHECK(s->steps_known);
  CHECK(s->custom_programs);
  CHECK(validate(*s).ok());
  auto none = schedule_from_programs({parse_program("0F0 0B0 0F1 0B1").value()}, 1);
  REQUIRE(none.ok());
  CHECK(none->params.steps == 1);
  CHECK(none->params.microbatches == 2);
  CHECK_FALSE(none->steps_known);
  auto uneven = schedule_from_programs(
      {parse_program("0F0 0B0 0STEP 0F1 0B1 0F2 0B2 0STEP").value()}, 1);
  REQUIRE_FALSE(uneven.ok());
  CHECK_THAT(uneven.message(), Catch::Contains("ids 0..2 do not divide into 2 steps"));
}

TEST_CASE("schedule_from_programs rejects microbatch ids beyond the action count", "[runtime]") {
  auto huge = schedule_from_programs({parse_program("0F2000000000 0B2000000000").value()}, 1);
  REQUIRE_FALSE(huge.ok());
  CHECK_THAT(huge.message(), Catch::Contains("0F2000000000 (rank 0, action 0) names microbatch "
                                             "2000000000, but the programs hold only 2 actions"));
  auto max = schedule_from_programs({parse_program("0F0 0B0 0F2147483647").value()}, 1);
  REQUIRE_FALSE(max.ok());
  CHECK_THAT(max.message(), Catch::Contains("0F2147483647 (rank 0, action 2)"));
  // A gap is allowed up to the bound; the validator then names the missing microbatch.
  auto gap = schedule_from_programs({parse_program("0F0 0B0 0F2 0B2").value()}, 1);
  REQUIRE(gap.ok());
  CHECK_THAT(validate(*gap).message(), Catch::Contains("microbatch 1 never runs on stage 0"));
}

TEST_CASE("schedule_from_programs can infer the placement from the forwards", "[runtime]") {
  // V order on two devices: device 0 holds stages 0 and 3, device 1 holds 1 and 2.
  auto v = schedule_from_programs({parse_program("0F0 3F0 3B0 0B0").value(),
                                   parse_program("1F0 2F0 2B0 1B0").value()},
                                  2, 2, 1, false, true);
  REQUIRE(v.ok());
  CHECK(v->device_of == std::vector<int>{0, 1, 1, 0});
  CHECK(validate(*v).ok());
  auto twice = schedule_from_programs({parse_program("0F0 1F1 1B1 0B0").value(),
                                       parse_program("1F0 0F1 0B1 1B0").value()},
                                      2, 1, 1, false, true);
  REQUIRE_FALSE(twice.ok());
  CHECK_THAT(twice.message(), Catch::Contains("virtual stage 1 has forwards on row 0 (device 0) "
                                              "and on row 1 (device 1)"));
  auto none = schedule_from_programs({parse_program("0F0 0B0").value(), parse_program("1B0").value()},
                                     2, 1, 1, false, true);
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.message(), Catch::Contains("virtual stage 1 has no forward"));
}
