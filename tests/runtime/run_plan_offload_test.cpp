// The plan's runtime.offload: optional in plan files (old ones read as none), written back as it
// was read, refused on a CPU rank naming the field and the rank, accepted on GPU ranks.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "runtime/run_plan.hpp"

using namespace pipeworks;
using nlohmann::json;

namespace {

run_plan pipeline(int stages, int replicas) {
  run_plan p;
  p.model = *parse_model_spec("gpt-tiny");
  p.schedule = schedule_kind::one_f_one_b;
  p.stages = stages;
  p.replicas = replicas;
  p.train.microbatches = 2;
  p.data.batch = 8;
  return p;
}

std::string plain(const plan_issue& i) {
  return render(i, [](std::string_view f) { return std::string(f); });
}

}  // namespace

TEST_CASE("parse_offload reads none and comma lists of optimizer and activations", "[run_plan]") {
  CHECK(parse_offload("none") == offload_spec{});
  CHECK(parse_offload("optimizer") == offload_spec{true, false});
  CHECK(parse_offload("activations") == offload_spec{false, true});
  CHECK(parse_offload("activations,optimizer") == offload_spec{true, true});
  CHECK(offload_name(*parse_offload("activations,optimizer")) == "optimizer,activations");
  for (const char* bad : {"", "all", "optimizer,", ",optimizer", "optimizer,optimizer",
                          "none,optimizer", "Optimizer"})
    CHECK_FALSE(parse_offload(bad));
}

TEST_CASE("runtime.offload round-trips and a plan without it reads as none", "[run_plan]") {
  run_plan p = pipeline(2, 1);
  p.offload = {true, true};
  json j = json::parse(to_json_text(p));
  CHECK(j["runtime"]["offload"] == "optimizer,activations");
  auto back = parse_run_plan(j.dump(), "plan.json", 4);  // the check refuses it: CPU ranks
  REQUIRE_FALSE(back.ok());
  CHECK_THAT(back.message(), Catch::Contains("runtime.offload"));
  j["runtime"]["offload"] = "none";
  auto none = parse_run_plan(j.dump(), "plan.json", 4);
  INFO((none.ok() ? std::string() : none.message()));
  REQUIRE(none.ok());
  CHECK_FALSE(none->offload.any());
  CHECK(json::parse(to_json_text(*none))["runtime"]["offload"] == "none");
  j["runtime"].erase("offload");
  auto old = parse_run_plan(j.dump(), "plan.json", 4);
  REQUIRE(old.ok());
  CHECK(old->offload == offload_spec{});
  j["runtime"]["offload"] = "moments";
  auto bad = parse_run_plan(j.dump(), "plan.json", 4);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Catch::Contains("runtime.offload"));
  CHECK_THAT(bad.message(), Catch::Contains("optimizer,activations"));
}

TEST_CASE("offload on a CPU rank is refused naming the field the rank and what to do", "[run_plan]") {
  run_plan p = pipeline(2, 2);
  p.offload.optimizer = true;
  p.ranks.assign(4, rank_placement{"cuda:0", 1.0, "", 0});
  p.ranks[3].device = "cpu";  // stage 1 of replica 1
  auto i = first_issue(p, 4);
  REQUIRE(i);
  CHECK(i->field == "runtime.offload");
  const std::string text = plain(*i);
  CHECK_THAT(text, Catch::Contains("rank 3 (stage 1, replica 1) runs on the CPU"));
  CHECK_THAT(text, Catch::Contains("host memory already"));
  CHECK_THAT(text, Catch::Contains("Drop runtime.offload"));
  CHECK_THAT(text, Catch::Contains("ranks[3].device cuda or cuda:N"));
  // No placements: every rank on the CPU, the first named.
  p.ranks.clear();
  p.offload = {false, true};
  i = first_issue(p, 4);
  REQUIRE(i);
  CHECK_THAT(plain(*i), Catch::Contains("is activations, but rank 0 (stage 0, replica 0)"));
  // schedule none: its one rank.
  run_plan single;
  single.model = *parse_model_spec("gpt-tiny");
  single.schedule.reset();
  single.offload.optimizer = true;
  i = first_issue(single);
  REQUIRE(i);
  CHECK(i->field == "runtime.offload");
  CHECK_THAT(plain(*i), Catch::Contains("rank 0"));
  single.offload = {};
  CHECK_FALSE(first_issue(single));
  // On a GPU: the optimizer's moments move; with one microbatch at a time no stash waits.
  single.ranks = {rank_placement{"cuda", 1.0, "", 0}};
  single.offload.optimizer = true;
  CHECK_FALSE(first_issue(single));
  single.offload.activations = true;
  i = first_issue(single);
  REQUIRE(i);
  CHECK_THAT(plain(*i), Catch::Contains("with schedule.kind none"));
}

TEST_CASE("offload on GPU ranks is accepted", "[run_plan]") {
  run_plan p = pipeline(2, 1);
  p.ranks.assign(2, rank_placement{"cuda", 1.0, "", 0});
  for (offload_spec o : {offload_spec{}, offload_spec{true, false}, offload_spec{false, true},
                         offload_spec{true, true}}) {
    p.offload = o;
    CHECK_FALSE(first_issue(p, 4));
  }
}

TEST_CASE("a resume may change runtime.offload", "[run_plan]") {
  run_plan saved = pipeline(2, 1);
  saved.split = {0, 2};
  run_plan given = saved;
  given.offload.optimizer = true;
  auto r = resume_plan(saved, given);
  REQUIRE(r.ok());
  CHECK(r->offload.optimizer);
  CHECK(first_result_difference(saved, given).empty());
}
