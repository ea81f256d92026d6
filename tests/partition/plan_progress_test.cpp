// Tests for partition/plan_progress.cpp: reports reach the innermost scope's sink, searches are
// numbered per scope, and nothing happens without a scope.
#include "partition/plan_progress.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using namespace pipeworks;

TEST_CASE("plan progress goes to the innermost scope and is dropped without one", "[partition]") {
  report_plan_progress("nobody listens", 1, 2);  // no scope: nothing to call, no crash
  std::vector<std::string> outer_seen, inner_seen;
  {
    plan_progress_scope outer([&](const plan_progress& p) {
      outer_seen.push_back(p.what + " " + std::to_string(p.done) + "/" + std::to_string(p.total));
    });
    CHECK(next_plan_search() == 1);
    report_plan_progress("a", 1, 3);
    {
      plan_progress_scope inner([&](const plan_progress& p) { inner_seen.push_back(p.what); });
      CHECK(next_plan_search() == 1);  // counted afresh in a new scope
      report_plan_progress("b", 2, 3);
    }
    CHECK(next_plan_search() == 2);  // the outer count goes on
    report_plan_progress("c", 3, 3);
  }
  report_plan_progress("after", 1, 1);
  CHECK(outer_seen == std::vector<std::string>{"a 1/3", "c 3/3"});
  CHECK(inner_seen == std::vector<std::string>{"b"});
}
