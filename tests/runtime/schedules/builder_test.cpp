// Tests for runtime/schedules/builder.cpp: shared generator helpers.
#include <catch2/catch.hpp>

#include "runtime/schedules/builder.hpp"
#include "runtime/version_rule.hpp"

using namespace pipeworks;

TEST_CASE("start_schedule lays out virtual stages round-robin over devices", "[runtime]") {
  const schedule s = schedules::start_schedule(schedule_kind::bfs, {3, 2, 2, 2, 1});
  CHECK(s.virtual_stages == 6);
  CHECK(s.device_of == std::vector<int>{0, 1, 2, 0, 1, 2});
  CHECK(s.ranks() == 6);
}

TEST_CASE("add_one_f_one_b: warm-up, steady state, cool-down", "[runtime]") {
  program p;
  schedules::add_one_f_one_b(p, 1, 4, 10, 4);  // stage 1 of 4, microbatches 10..13
  CHECK(to_string(p) == "1F10 1F11 1F12 1B10 1F13 1B11 1B12 1B13");
}

TEST_CASE("add_updates puts REDUCE and STEP after each step's m-th backward", "[runtime]") {
  schedule s = schedules::start_schedule(schedule_kind::gpipe, {1, 2, 1, 2, 2});
  s.programs[0] = parse_program("0F0 0F1 0B1 0B0 0F2 0F3 0B2 0B3").value();
  schedules::add_updates(s);
  schedules::replicate(s);
  CHECK(to_string(s.programs[0]) == "0F0 0F1 0B1 0B0 0REDUCE 0STEP 0F2 0F3 0B2 0B3 0REDUCE 0STEP");
  CHECK(s.programs[1] == s.programs[0]);
  // Split backwards: the update follows the m-th W.
  schedule z = schedules::start_schedule(schedule_kind::zb_h1, {1, 1, 1, 1, 1});
  z.programs[0] = parse_program("0F0 0I0 0W0").value();
  schedules::add_updates(z);
  CHECK(to_string(z.programs[0]) == "0F0 0I0 0W0 0STEP");
}

TEST_CASE("check_params explains what is wrong", "[runtime]") {
  CHECK(schedules::check_params("x", {2, 2, 1, 1, 1}, false).ok());
  CHECK_THAT(schedules::check_params("x", {2, 2, 3, 1, 1}, false).message(),
             Catch::Contains("v must be 1"));
  CHECK(schedules::check_params("x", {2, 2, 3, 1, 1}, true).ok());
  CHECK_THAT(schedules::check_params("x", {2, 1 << 20, 1, 1, 1 << 20}, false).message(),
             Catch::Contains("too large"));
  // Virtual stages an action can name: p * v up to max_action_stage + 1.
  CHECK(schedules::check_params("x", {(max_action_stage + 1) / 2, 1, 2, 1, 1}, true).ok());
  CHECK_THAT(schedules::check_params("x", {max_action_stage + 1, 1, 2, 1, 1}, true).message(),
             Catch::Contains("virtual stages, more than the 8388608"));
  CHECK_THAT(schedules::check_params("x", {max_action_stage + 2, 1, 1, 1, 1}, false).message(),
             Catch::Contains("use fewer stages"));
}

TEST_CASE("finish_flush_schedule adds updates, replicates and sets synchronous versions",
          "[runtime]") {
  schedule s = schedules::start_schedule(schedule_kind::gpipe, {1, 2, 1, 2, 2});
  s.programs[0] = parse_program("0F0 0F1 0B0 0B1 0F2 0F3 0B2 0B3").value();
  schedules::finish_flush_schedule(s);
  CHECK(to_string(s.programs[0]) == "0F0 0F1 0B0 0B1 0REDUCE 0STEP 0F2 0F3 0B2 0B3 0REDUCE 0STEP");
  CHECK(s.programs[1] == s.programs[0]);
  CHECK(s.versions == flush_versions(1, 2, 2));
  CHECK(s.versions[0][3] == version_use{1, 1});
  CHECK_THAT(s.version_rule, Catch::Contains("synchronous"));
}
