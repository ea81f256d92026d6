// read_lowered_run: a plan's JSON from another process is read, checked and lowered once, to the
// same programs and boundaries as the process that wrote it lowered.
#include <catch2/catch.hpp>

#include "runtime/exec/rank_setup.hpp"
#include "tests/runtime/mlp_plan_fixture.hpp"

using namespace pipeworks;

namespace {

run_plan mlp_plan() {  // the shared plan, split after the first block
  run_plan p = test::mlp_plan();
  p.split = {0, 1};
  return p;
}

}  // namespace

TEST_CASE("read_lowered_run lowers a plan's JSON as lower_run lowered the plan", "[runtime]") {
  auto here = lower_run(mlp_plan(), 3);
  REQUIRE(here);
  auto there = read_lowered_run(to_json_text(here->plan), "plan.json", 3);
  REQUIRE(there);
  CHECK(to_json_text(there->plan) == to_json_text(here->plan));
  CHECK(there->boundaries == here->boundaries);
  CHECK(there->credit_window == here->credit_window);
  CHECK(there->programs->programs == here->programs->programs);
}

TEST_CASE("read_lowered_run refuses a plan its check refuses, naming the field", "[runtime]") {
  run_plan bad = mlp_plan();
  bad.data.batch = 7;
  auto read = read_lowered_run(to_json_text(bad), "plan.json");
  REQUIRE_FALSE(read);
  CHECK(read.message().find("data.batch") != std::string::npos);
}
