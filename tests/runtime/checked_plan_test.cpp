// check_plan: the one check of a run's plan, with the plan's field names or a caller's (the
// CLI's flags), and the block count it was checked for.
#include <catch2/catch.hpp>

#include "ops/model/model.hpp"
#include "runtime/checked_plan.hpp"
#include "tests/runtime/mlp_plan_fixture.hpp"

using namespace pipeworks;

using test::mlp_plan;

TEST_CASE("check_plan hands back the plan it checked and the block count", "[runtime]") {
  auto c = check_plan(mlp_plan(), 3);
  REQUIRE(c);
  CHECK(c->blocks() == 3);
  CHECK(to_json_text(c->get()) == to_json_text(mlp_plan()));
  auto own = check_plan(mlp_plan());  // the blocks of the plan's own model
  REQUIRE(own);
  CHECK(own->blocks() == build_model<float>(mlp_plan().model).size());
}

TEST_CASE("check_plan refuses as check does, or with the caller's names", "[runtime]") {
  run_plan bad = mlp_plan();
  bad.data.batch = 7;
  const status s = check(bad, 3);
  REQUIRE_FALSE(s);
  auto c = check_plan(bad, 3);
  REQUIRE_FALSE(c);
  CHECK(c.message() == s.message());
  auto named = check_plan(bad, 3, [](std::string_view f) { return "<" + std::string(f) + ">"; });
  REQUIRE_FALSE(named);
  CHECK(named.message().rfind("<data.batch>: ", 0) == 0);
  CHECK(named.message().find("<schedule.microbatches>") != std::string::npos);
}
