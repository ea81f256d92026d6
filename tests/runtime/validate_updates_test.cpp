// Tests for runtime/validate_updates.cpp: the validator's STEP, REDUCE and version-table checks,
// each with a hand-written or hand-broken schedule.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "runtime/schedule.hpp"
#include "runtime/validate.hpp"
#include "runtime/version_rule.hpp"
#include "tests/runtime/schedule_text.hpp"

using namespace pipeworks;

namespace {

// Compute-only programs, one chunk per device.
schedule compute_only(const std::vector<std::string>& rows, int devices, int replicas = 1) {
  return test::from_text(rows, devices, 1, replicas, false);
}

using test::problem;

}  // namespace

TEST_CASE("validator: a STEP before the backwards of its step", "[runtime]") {
  const std::string msg = problem(compute_only({"0F0 0STEP 0B0"}, 1));
  INFO(msg);
  CHECK_THAT(msg, Catch::Contains("0STEP (rank 0, action 1) is STEP 0 of stage 0"));
  CHECK_THAT(msg, Catch::Contains("backward of microbatch 0, 0B0 (rank 0, action 2)"));
}

TEST_CASE("validator: a missing STEP when the schedule has steps", "[runtime]") {
  schedule s = compute_only({"0F0 0B0"}, 1);
  CHECK(problem(s) == "ok");  // hand-written programs with no STEP declare no steps
  s.steps_known = true;       // now it has steps = 1
  CHECK_THAT(problem(s), Catch::Contains("stage 0 on rank 0 (replica 0) runs 0 STEPs, but the "
                                         "schedule has 1 step"));
}

TEST_CASE("validator: two STEPs in a one-step schedule", "[runtime]") {
  schedule s = gpipe({1, 1, 1, 1, 1}).value();
  s.programs[0].push_back(action{0, action_kind::step, -1});
  CHECK_THAT(problem(s), Catch::Contains("0STEP (rank 0, action 3) is STEP number 2 of stage 0, "
                                         "but the schedule has 1 step"));
}

TEST_CASE("validator: REDUCE only with replicas, one before each STEP", "[runtime]") {
  CHECK_THAT(problem(compute_only({"0F0 0B0 0REDUCE 0STEP"}, 1)),
             Catch::Contains("0REDUCE (rank 0, action 2): a REDUCE with w = 1 replica"));
  CHECK_THAT(problem(compute_only({"0F0 0B0 0STEP", "0F0 0B0 0STEP"}, 1, 2)),
             Catch::Contains("0STEP (rank 0, action 2) has no 0REDUCE before it; with w = 2"));
  CHECK_THAT(problem(compute_only({"0F0 0B0 0REDUCE 0REDUCE 0STEP", "0F0 0B0 0REDUCE 0REDUCE 0STEP"},
                               1, 2)),
             Catch::Contains("a second REDUCE of stage 0 before its STEP"));
  CHECK(problem(compute_only({"0F0 0B0 0REDUCE 0STEP", "0F0 0B0 0REDUCE 0STEP"}, 1, 2)) == "ok");
}

TEST_CASE("validator: gpipe with rank 1's STEP before its last B", "[runtime]") {
  schedule s = gpipe({2, 2, 1, 1, 1}).value();
  REQUIRE(to_string(s.programs[1]) == "1F0 1F1 1B0 1B1 1STEP");
  s.programs[1] = parse_program("1F0 1F1 1B0 1STEP 1B1").value();
  const std::string msg = problem(s);
  INFO(msg);
  CHECK_THAT(msg, Catch::Contains("1STEP (rank 1, action 3) is STEP 0 of stage 1"));
  CHECK_THAT(msg, Catch::Contains("microbatch 1, 1B1 (rank 1, action 4)"));
  CHECK_THAT(msg, Catch::Contains("microbatches 0..1"));
  CHECK_THAT(problem(lower_communication(s)), Catch::Contains("is STEP 0 of stage 1, but the "
                                                              "backward of microbatch 1"));
}

TEST_CASE("validator: a flush schedule steps before the next step's forwards", "[runtime]") {
  schedule s = gpipe({1, 1, 1, 1, 2}).value();
  REQUIRE(to_string(s.programs[0]) == "0F0 0B0 0STEP 0F1 0B1 0STEP");
  s.programs[0] = parse_program("0F0 0B0 0F1 0STEP 0B1 0STEP").value();
  CHECK_THAT(problem(s), Catch::Contains("0F1 (rank 0, action 2) is a forward of step 1, but only "
                                         "0 STEPs of stage 0 ran before it"));
  // The same order is fine for an asynchronous schedule, with its own version rule.
  schedule async = pipedream({1, 1, 1, 1, 2}).value();
  async.programs = s.programs;
  async.versions = latest_versions(async);
  CHECK(problem(async) == "ok");
}

TEST_CASE("validator: a gpipe version table with a wrong entry", "[runtime]") {
  const schedule good = gpipe({2, 2, 1, 1, 2}).value();
  schedule s = good;
  s.versions[1][2] = {0, 0};  // microbatch 2 is in step 1
  CHECK_THAT(problem(s), Catch::Contains("1F2 (rank 1, action 5) uses version 0 in the version "
                                         "table, but gpipe expects 1"));
  s = good;
  s.versions[0][1] = {1, 1};  // step 0 cannot use version 1: it does not exist yet
  CHECK_THAT(problem(s), Catch::Contains("0F1 (rank 0, action 1) uses version 1 (version table), "
                                         "but only 0 STEPs of stage 0 ran before it"));
  s = good;
  s.versions[0][3].backward = 0;
  CHECK_THAT(problem(s), Catch::Contains("stage 0, microbatch 3: F uses version 1 and B version 0"));
  s = good;
  s.versions[1].pop_back();
  CHECK_THAT(problem(s), Catch::Contains("row 1 has 3 entries for 4 microbatches"));
  s = good;
  s.versions.pop_back();
  CHECK_THAT(problem(s), Catch::Contains("1 rows for 2 virtual stages"));
}

TEST_CASE("validator: pipedream, vertical sync and 2bw tables follow their rules", "[runtime]") {
  const schedule latest = pipedream({4, 2, 1, 1, 3}).value();
  schedule vs = pipedream_vertical_sync({4, 2, 1, 1, 3}).value();
  REQUIRE(vs.versions != latest.versions);
  vs.versions = latest.versions;  // each stage's own latest version is not vertical sync
  CHECK_THAT(problem(vs), Catch::Contains("pipedream-vs expects"));
  schedule wrong_latest = latest;
  wrong_latest.versions = vertical_sync_versions(latest.versions);
  CHECK_THAT(problem(wrong_latest), Catch::Contains("pipedream expects"));
  schedule bw = pipedream_2bw({2, 2, 1, 1, 3}).value();
  bw.versions[1][2] = {1, 1};  // step 1 uses version 0 under 2bw (version 1 exists on stage 1)
  CHECK_THAT(problem(bw), Catch::Contains("2bw expects 0: max(t - 1, 0) for step t = 1"));
}

TEST_CASE("validator: cyclic keeps only two versions live", "[runtime]") {
  schedule s = cyclic({2, 2, 1, 1, 3}).value();
  CHECK(problem(s) == "ok");
  s.versions[0][4] = {0, 0};  // step 2 using version 0: two steps behind
  CHECK_THAT(problem(s), Catch::Contains("cyclic keeps only two versions live"));
}

TEST_CASE("validator: huge microbatch counts fail without allocating", "[runtime]") {
  schedule s = gpipe({2, 2, 1, 1, 1}).value();
  s.params.microbatches = 2000000000;
  CHECK_THAT(problem(s), Catch::Contains("programs hold only 10 actions"));
  s.params.steps = 2000000000;
  CHECK_THAT(problem(s), Catch::Contains("programs hold only 10 actions"));
}
