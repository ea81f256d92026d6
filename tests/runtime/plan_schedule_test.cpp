// Tests for runtime/plan_schedule.cpp: a plan carrying a schedule file's programs makes the same
// schedule as its built-in kind, keeps the programs through JSON and resume checks, and is refused
// by first_issue when the programs do not fit or do not validate.
#include <catch2/catch.hpp>

#include "mlp_plan_fixture.hpp"
#include "runtime/checkpoint/rank_identity.hpp"
#include "runtime/lower.hpp"
#include "runtime/plan_schedule.hpp"
#include "runtime/pytorch_csv.hpp"
#include "runtime/run_plan.hpp"
#include "runtime/schedule_file.hpp"

using namespace pipeworks;

namespace {

// The mlp plan with the programs of 1F1B's PyTorch CSV (p = 2, m = 2) instead of its kind.
run_plan file_plan(pytorch_form form) {
  run_plan p = test::mlp_plan();
  schedule s = make_schedule(schedule_kind::one_f_one_b, {2, 2, 1, 1, 1}).value();
  if (form == pytorch_form::compute_comms) s = lower_communication(s);
  const auto rows = pytorch_programs(s, form, 0, 0).value();
  p.programs = to_programs_text(parse_schedule_file(to_pytorch_csv(rows)).value().rows);
  p.schedule = schedule_kind::gpipe;  // the stand-in for sync versions
  return p;
}

}  // namespace

TEST_CASE("plan_schedule makes a file's programs into the built-in kind's schedule", "[run_plan]") {
  for (pytorch_form form : {pytorch_form::compute_only, pytorch_form::compute_comms}) {
    const run_plan p = file_plan(form);
    REQUIRE(check(p).ok());
    const run_plan builtin = test::mlp_plan();  // 1f1b
    auto a = plan_schedule(p, 4);
    auto b = plan_schedule(builtin, 4);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK(a->lowered);
    CHECK(a->programs == b->programs);
    CHECK(a->versions == b->versions);
    CHECK(schedule_label(p) == "custom");
    CHECK(schedule_label(builtin) == "1f1b");
    CHECK(rank_identity(p, 1).at("pipeworks.stages") == "[1]");
  }
}

TEST_CASE("a plan's programs survive JSON and count as a result-changing field", "[run_plan]") {
  run_plan p = file_plan(pytorch_form::compute_only);
  const std::string text = to_json_text(p);
  CHECK_THAT(text, Catch::Contains("\"kind\": \"custom\""));
  CHECK_THAT(text, Catch::Contains("\"versions\": \"sync\""));
  auto back = parse_run_plan(text, "plan.json");
  REQUIRE(back.ok());
  CHECK(back->programs == p.programs);
  CHECK(back->schedule == schedule_kind::gpipe);
  CHECK(first_result_difference(*back, p).empty());
  run_plan other = p;
  other.programs = file_plan(pytorch_form::compute_comms).programs;
  CHECK(first_result_difference(p, other) == "schedule.programs");
  run_plan latest = p;
  latest.programs_versions = version_mode::latest;
  CHECK(first_result_difference(p, latest) == "schedule.versions");
  // "programs" and "versions" come with kind "custom", and only with it.
  std::string bad = text;
  bad.replace(bad.find("\"custom\""), 8, "\"1f1b\"");
  CHECK_THAT(parse_run_plan(bad, "plan.json").message(),
             Catch::Contains("come with kind \"custom\""));
}

TEST_CASE("first_issue refuses programs that do not fit the plan or do not validate",
          "[run_plan]") {
  run_plan p = file_plan(pytorch_form::compute_only);
  p.train.microbatches = 4;
  CHECK_THAT(check(p).message(), Catch::Contains("schedule.microbatches: is 4, but "
                                                 "schedule.programs has 2"));
  run_plan deadlock = test::mlp_plan();
  deadlock.schedule = schedule_kind::gpipe;
  deadlock.programs = to_programs_text(
      parse_schedule_file("0F0,0B0,0F1,0B1\n1F1,1F0,1B0,1B1\n").value().rows);
  const std::string m = check(deadlock).message();
  CHECK_THAT(m, Catch::StartsWith("schedule.programs: do not make a valid schedule: deadlock"));
  CHECK_THAT(m, Catch::Contains("[1RECV_F1]"));
  run_plan none = file_plan(pytorch_form::compute_only);
  none.schedule.reset();
  CHECK_THAT(check(none).message(), Catch::Contains("is none"));
}

TEST_CASE("use_schedule_file gives a plan a file's programs, rule and shape", "[run_plan]") {
  run_plan p = test::mlp_plan();
  p.model = *parse_model_spec("gpt-tiny");  // 4 blocks, one per virtual stage
  p.replicas = 2;
  p.data.batch = 16;
  // V-shaped: device 0 holds stages 0 and 3, device 1 holds 1 and 2.
  const auto v = parse_schedule_file("0F0,0F1,3F0,3B0,3F1,3B1,0B0,0B1\n"
                                     "1F0,2F0,1F1,2F1,2B0,1B0,2B1,1B1\n");
  REQUIRE(use_schedule_file(p, v.value()).ok());
  CHECK(p.stages == 2);
  CHECK(p.chunks == 2);
  CHECK(p.train.microbatches == 2);
  CHECK(p.programs_versions == version_mode::sync);
  CHECK(schedule_label(p) == "custom");
  CHECK(p.clips_globally());
  const status ok = check(p);
  if (!ok) FAIL(ok.message());
  auto s = plan_schedule(p, 4);
  REQUIRE(s.ok());
  CHECK(s->device_of == std::vector<int>{0, 1, 1, 0});
  CHECK(s->ranks() == 4);
  // Text with STEPs for both replicas: latest by default, which clips per stage as PipeDream's.
  const auto text = parse_schedule_file("rank 0: 0F0 0B0 0STEP\nrank 1: 0F0 0B0 0STEP\n");
  REQUIRE(use_schedule_file(p, text.value()).ok());
  CHECK(p.programs_versions == version_mode::latest);
  CHECK(p.stages == 1);
  CHECK_FALSE(p.clips_globally());
  const auto delayed = parse_schedule_file("# versions: double buffering\n0F0 0B0 0STEP\n");
  CHECK_THAT(use_schedule_file(p, delayed.value()).message(), Catch::Contains("double buffering"));
}
