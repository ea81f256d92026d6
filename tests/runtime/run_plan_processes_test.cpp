// The run plan's processes: workers are checked field by field, ranks are placed on them in
// contiguous blocks unless the plan places them, the JSON round trip keeps them, a plan without
// "processes" is refused (every field is required), and a resumed run may move its ranks.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "runtime/run_plan.hpp"

using namespace pipeworks;

namespace {

run_plan two_stage_plan(int replicas = 1) {
  run_plan p;
  p.model = *parse_model_spec("gpt-tiny");
  p.schedule = schedule_kind::one_f_one_b;
  p.stages = 2;
  p.replicas = replicas;
  p.train.microbatches = 4;
  p.train.steps = 4;
  p.split = {0, 2};
  return p;
}

std::string field_of(const run_plan& p) {
  auto i = first_issue(p);
  return i ? i->field : "";
}

}  // namespace

TEST_CASE("worker addresses and detection times are checked naming the field") {
  run_plan p = two_stage_plan();
  p.processes.workers = {"127.0.0.1:7001", "localhost"};
  CHECK(field_of(p) == "processes.workers[1]");
  p.processes.workers = {"127.0.0.1:7001", "127.0.0.1:7001"};
  CHECK(field_of(p) == "processes.workers[1]");
  p.processes.workers = {"127.0.0.1:7001", "[::1]:7002"};
  CHECK(field_of(p).empty());
  p.processes.heartbeat_ms = 5;
  CHECK(field_of(p) == "processes.heartbeat_ms");
  p.processes.heartbeat_ms = 500;
  p.processes.timeout_ms = 900;
  CHECK(field_of(p) == "processes.timeout_ms");
  p.processes.timeout_ms = 1000;
  p.processes.connect_ms = 0;
  CHECK(field_of(p) == "processes.connect_ms");
  run_plan none = two_stage_plan();
  none.schedule.reset();
  none.stages = 1;
  none.split.clear();
  none.processes.workers = {"127.0.0.1:7001"};
  CHECK(field_of(none) == "processes.workers");
}

TEST_CASE("a rank's process must be the driver's or one of the workers") {
  run_plan p = two_stage_plan();
  p.ranks.assign(2, rank_placement{});
  p.ranks[1].process = 1;
  CHECK(field_of(p) == "ranks[1].process");
  p.processes.workers = {"127.0.0.1:7001"};
  CHECK(field_of(p).empty());
  p.ranks[1].process = 2;
  CHECK(field_of(p) == "ranks[1].process");
}

TEST_CASE("place_ranks spreads the ranks over the workers in contiguous blocks") {
  run_plan p = two_stage_plan(2);  // ranks: replica * 2 + device
  p.processes.workers = {"127.0.0.1:7001", "127.0.0.1:7002"};
  place_ranks(p);
  REQUIRE(p.ranks.size() == 4);
  CHECK(p.ranks[0].process == 1);
  CHECK(p.ranks[1].process == 1);
  CHECK(p.ranks[2].process == 2);
  CHECK(p.ranks[3].process == 2);
  CHECK(ranks_in_process(p, 2) == std::vector<int>{2, 3});
  CHECK(ranks_in_process(p, 0).empty());
  // Three workers for four ranks: every worker gets one at least.
  run_plan q = two_stage_plan(2);
  q.processes.workers = {"a:1", "b:2", "c:3"};
  place_ranks(q);
  for (int k = 1; k <= 3; ++k) CHECK_FALSE(ranks_in_process(q, k).empty());
  // A plan that places its ranks keeps its placement.
  run_plan r = two_stage_plan();
  r.processes.workers = {"a:1", "b:2"};
  r.ranks.assign(2, rank_placement{});
  r.ranks[0].process = 2;
  place_ranks(r);
  CHECK(r.ranks[0].process == 2);
  CHECK(r.ranks[1].process == 0);
  // No workers: nothing changes.
  run_plan s = two_stage_plan();
  place_ranks(s);
  CHECK(s.ranks.empty());
}

TEST_CASE("the processes survive the JSON round trip and plans without them are refused") {
  run_plan p = two_stage_plan();
  p.processes.workers = {"10.0.0.1:7001", "[fe80::1]:7002"};
  p.processes.heartbeat_ms = 100;
  p.processes.timeout_ms = 1000;
  p.processes.connect_ms = 5000;
  place_ranks(p);
  const std::string text = to_json_text(p);
  auto back = parse_run_plan(text, "plan.json");
  REQUIRE(back.ok());
  CHECK(back->processes == p.processes);
  CHECK(back->ranks == p.ranks);
  nlohmann::json old = nlohmann::json::parse(to_json_text(two_stage_plan()));
  old.erase("processes");
  auto read = parse_run_plan(old.dump(), "old.json");
  REQUIRE_FALSE(read.ok());
  CHECK_THAT(read.message(), Catch::Contains("old.json: processes is missing"));
  nlohmann::json extra = nlohmann::json::parse(text);
  extra["processes"]["ports"] = 1;
  auto refused = parse_run_plan(extra.dump(), "plan.json");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.message().find("ports") != std::string::npos);
  extra = nlohmann::json::parse(text);
  extra["processes"]["workers"] = {7};
  refused = parse_run_plan(extra.dump(), "plan.json");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.message().find("processes.workers") != std::string::npos);
}

TEST_CASE("a resumed run takes the given processes and places its ranks anew") {
  run_plan saved = two_stage_plan();
  saved.processes.workers = {"a:1", "b:2"};
  place_ranks(saved);
  run_plan given = two_stage_plan();  // no workers: every rank in the driver's process
  auto out = resume_plan(saved, given);
  REQUIRE(out.ok());
  CHECK(out->processes.workers.empty());
  for (const rank_placement& r : out->ranks) CHECK(r.process == 0);
  given.processes.workers = {"c:3"};
  out = resume_plan(saved, given);
  REQUIRE(out.ok());
  place_ranks(*out);
  CHECK(ranks_in_process(*out, 1) == std::vector<int>{0, 1});
}

TEST_CASE("a run's name for workers' checkpoint directories round trips is checked and is kept on resume") {
  run_plan p = two_stage_plan();
  p.checkpoint = {2, "/ckpt", 1, "0123456789abcdef"};
  auto back = parse_run_plan(to_json_text(p), "plan.json");
  REQUIRE(back.ok());
  CHECK(back->checkpoint == p.checkpoint);
  // Absent from plans without one.
  CHECK_FALSE(nlohmann::json::parse(to_json_text(two_stage_plan()))["checkpoint"].contains("run"));
  // It names a directory: nothing but 16 hex digits.
  for (const char* bad : {"../../etc", "0123456789ABCDEF", "0123", "0123456789abcdef0"}) {
    p.checkpoint.run = bad;
    CHECK(field_of(p) == "checkpoint.run");
  }
  run_plan saved = two_stage_plan();
  saved.checkpoint = {2, "/ckpt", 1, "00000000000000aa"};
  run_plan given = two_stage_plan();
  given.checkpoint = {2, "/moved", 1, ""};
  auto out = resume_plan(saved, given);
  REQUIRE(out.ok());
  CHECK(out->checkpoint.run == "00000000000000aa");
  CHECK(out->checkpoint.dir == "/moved");
}
