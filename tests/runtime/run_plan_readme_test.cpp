// The sample run plan in docs/formats.md is a plan the reader accepts and checks: a required
// field added to the format without the document, or a field renamed, fails here.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "runtime/run_plan.hpp"

using namespace pipeworks;

TEST_CASE("the sample run plan in docs/formats.md parses and checks", "[run_plan]") {
  std::ifstream in(std::string(PIPEWORKS_SOURCE_DIR) + "/docs/formats.md");
  REQUIRE(in);
  std::stringstream all;
  all << in.rdbuf();
  const std::string doc = all.str();
  const std::string start = "```json\n{\"format\": \"pipeworks-run-plan\"";
  const std::size_t at = doc.find(start);
  REQUIRE(at != std::string::npos);
  const std::size_t from = at + std::string("```json\n").size();
  const std::size_t end = doc.find("```", from);
  REQUIRE(end != std::string::npos);
  const result<run_plan> plan = parse_run_plan(doc.substr(from, end - from), "docs/formats.md");
  if (!plan) FAIL(plan.message());
  CHECK(plan->stages == 4);
  CHECK(plan->data.batch == 8);
  const status ok = check(*plan);
  if (!ok) FAIL(ok.message());
}
