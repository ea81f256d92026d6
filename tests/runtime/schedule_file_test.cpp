// Tests for runtime/schedule_file.cpp: PyTorch's two CSV formats and pipeworks' action text read
// back into the programs every built-in flush schedule generates, the placement inferred from the
// rows, and the messages for files that do not make a schedule.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/plan_schedule.hpp"
#include "runtime/pytorch_csv.hpp"
#include "runtime/schedule.hpp"
#include "runtime/schedule_file.hpp"
#include "runtime/validate.hpp"

using namespace pipeworks;

namespace {

// Every built-in flush kind (V schedules and DualPipeV's OVERLAP_F_B included).
// The flush kinds PyTorch's CSV can say: all but dualpipe, whose two routes it has no word for
// (the test below).
std::vector<schedule_kind> flush_kinds() {
  std::vector<schedule_kind> out;
  for (schedule_kind k : every_schedule_kind())
    if (is_flush(k) && default_routes(k) == 1) out.push_back(k);
  return out;
}

// The generator's schedule for kind with p = 2 or 4, m = 4 or 8, v = 1 or 2, w = 2 and 3 steps,
// for each combination the kind permits.
std::vector<schedule> generated(schedule_kind kind) {
  std::vector<schedule> out;
  for (int p : {2, 4})
    for (int m : {4, 8})
      for (int v : {1, 2})
        if (auto s = make_schedule(kind, {p, m, v, 2, 3})) out.push_back(std::move(*s));
  return out;
}

schedule from_text(const std::string& text, int replicas, int steps,
                   std::optional<version_mode> versions = std::nullopt) {
  auto f = parse_schedule_file(text);
  REQUIRE(f.ok());
  auto s = schedule_from_file(*f, replicas, steps, versions);
  if (!s) FAIL(s.message());
  return std::move(*s);
}

// The code block of docs/formats.md that opens with `fence` (```csv, ```text, ...) and whose
// text starts with `start`.
std::string docs_block(const std::string& fence, const std::string& start) {
  std::ifstream in(std::string(PIPEWORKS_SOURCE_DIR) + "/docs/formats.md");
  REQUIRE(in);
  std::stringstream all;
  all << in.rdbuf();
  const std::string doc = all.str();
  const std::size_t at = doc.find(fence + "\n" + start);
  REQUIRE(at != std::string::npos);
  const std::size_t from = at + fence.size() + 1;
  const std::size_t end = doc.find("```", from);
  REQUIRE(end != std::string::npos);
  return doc.substr(from, end - from);
}

std::string problem_of(const std::string& text, int replicas = 1, int steps = 1) {
  auto f = parse_schedule_file(text);
  if (!f) return f.message();
  auto s = schedule_from_file(*f, replicas, steps);
  if (!s) return s.message();
  const status ok = validate(*s);
  return ok ? "ok" : ok.message();
}

}  // namespace

TEST_CASE("PyTorch compute_only CSV of every flush schedule reads back to its programs", "[runtime]") {
  REQUIRE(flush_kinds().size() >= 10);
  for (schedule_kind kind : flush_kinds())
    for (const schedule& gen : generated(kind)) {
      const schedule_params& sp = gen.params;
      INFO(schedule_name(kind) << " p=" << sp.stages << " m=" << sp.microbatches
                               << " v=" << sp.chunks);
      auto rows = pytorch_programs(gen, pytorch_form::compute_only, 0, 0);
      if (!rows) FAIL(rows.message());
      auto f = parse_schedule_file(to_pytorch_csv(*rows));
      REQUIRE(f.ok());
      CHECK(f->format == schedule_file_format::pytorch_compute_only);
      auto shape = shape_of(*f, sp.replicas);
      REQUIRE(shape.ok());
      CHECK(shape->stages == sp.stages);
      CHECK(shape->chunks == sp.chunks);
      CHECK(shape->microbatches == sp.microbatches);
      const schedule back = from_text(to_pytorch_csv(*rows), sp.replicas, sp.steps);
      CHECK_FALSE(back.lowered);
      CHECK(back.programs == gen.programs);
      CHECK(back.device_of == gen.device_of);
      CHECK(back.versions == gen.versions);
      CHECK(validate(back).ok());
    }
}

TEST_CASE("PyTorch compute_comms CSV of every flush schedule reads back to its lowered programs",
          "[runtime]") {
  for (schedule_kind kind : flush_kinds())
    for (const schedule& compute : generated(kind)) {
      const schedule gen = lower_communication(compute);
      INFO(schedule_name(kind) << " p=" << gen.params.stages << " v=" << gen.params.chunks);
      auto rows = pytorch_programs(gen, pytorch_form::compute_comms, 0, 0);
      if (!rows) FAIL(rows.message());
      auto f = parse_schedule_file(to_pytorch_csv(*rows));
      REQUIRE(f.ok());
      CHECK(f->format == schedule_file_format::pytorch_compute_comms);
      const schedule back = from_text(to_pytorch_csv(*rows), gen.params.replicas, gen.params.steps);
      CHECK(back.lowered);
      CHECK(back.programs == gen.programs);
      CHECK(back.device_of == gen.device_of);
    }
}

TEST_CASE("pipeworks action text of any schedule reads back to its programs", "[runtime]") {
  for (const char* name : {"1f1b", "interleaved", "zb-h2", "pipedream", "pipedream-vs", "2bw"}) {
    auto gen = make_schedule(parse_schedule_kind(name).value(), {2, 4, 1, 2, 2});
    REQUIRE(gen.ok());
    INFO(name);
    const std::string text = to_programs_text(gen->programs);
    CHECK(text.rfind("# pipeworks action text", 0) == 0);
    auto f = parse_schedule_file(text);
    REQUIRE(f.ok());
    CHECK(f->format == schedule_file_format::pipeworks_text);
    CHECK(f->has_steps);
    // The file covers every rank of both replicas for its 2 steps; the run repeats it.
    const schedule once = from_text(text, 2, 2);
    CHECK(once.programs == gen->programs);
    CHECK(validate(once).ok());
    const schedule twice = from_text(text, 2, 4);
    CHECK(twice.params.steps == 4);
    CHECK(validate(twice).ok());
    // With STEPs the versions are the latest-version rule; sync holds only for flush schedules.
    auto f2 = parse_schedule_file(text);
    auto sync = schedule_from_file(*f2, 2, 2, version_mode::sync);
    REQUIRE(sync.ok());
    CHECK(validate(*sync).ok() == is_flush(gen->kind));
  }
}

TEST_CASE("pipeworks' own CSV, with REDUCE and STEP, reads back to its programs", "[runtime]") {
  for (const char* name : {"zb-h1", "2bw"}) {
    const schedule gen =
        lower_communication(make_schedule(parse_schedule_kind(name).value(), {2, 4, 1, 2, 2}).value());
    INFO(name);
    auto f = parse_schedule_file(to_csv(gen));
    REQUIRE(f.ok());
    CHECK(f->format == schedule_file_format::pipeworks_csv);
    CHECK(f->has_steps);
    const schedule back = from_text(to_csv(gen), 2, 2);
    CHECK(back.programs == gen.programs);
    CHECK(validate(back).ok());
  }
}

TEST_CASE("action text names its version rule in a versions comment line", "[runtime]") {
  const std::string steps = "rank 0: 0F0 0B0 0STEP\n";
  CHECK(file_versions(parse_schedule_file(steps).value(), std::nullopt).value() ==
        version_mode::latest);
  for (const char* line : {"# versions: sync\n", "# versions: synchronous: every microbatch\n"})
    CHECK(file_versions(parse_schedule_file(line + steps).value(), std::nullopt).value() ==
          version_mode::sync);
  const auto stashing = parse_schedule_file("# versions: weight stashing: F(k)\n" + steps).value();
  CHECK(file_versions(stashing, std::nullopt).value() == version_mode::latest);
  CHECK(file_versions(stashing, version_mode::sync).value() == version_mode::sync);  // the flag
  const auto delayed = parse_schedule_file("# versions: double buffering: max(t-1, 0)\n" + steps);
  CHECK_THAT(file_versions(delayed.value(), std::nullopt).message(),
             Catch::Contains("the file's version rule is \"double buffering: max(t-1, 0)\""));
  CHECK_THAT(schedule_from_file(delayed.value(), 1, 1).message(), Catch::Contains("--schedule-versions"));
}

TEST_CASE("action text takes rank prefixes, comments and blank lines", "[runtime]") {
  // Commas in comments do not make the text CSV.
  const schedule s = from_text("# a comment line, with a comma\n"
                               "rank 0: 0F0 0F1 0B0 0B1  # warm up, then drain\n\n"
                               "rank 1: 1F0 1B0 1F1 1B1\n",
                               1, 2);
  CHECK(s.params.stages == 2);
  CHECK(s.params.steps == 2);
  CHECK(to_string(s.programs[1]) == "1F0 1B0 1F1 1B1 1STEP 1F2 1B2 1F3 1B3 1STEP");
  CHECK(validate(s).ok());
  CHECK_THAT(problem_of("rank 1: 0F0 0B0\n"), Catch::Contains("should start with \"rank 0:\""));
  CHECK_THAT(problem_of("0F0 0X0\n"), Catch::Contains("line 1: action 1: action '0X0': unknown kind"));
}

TEST_CASE("a V-shaped file places each stage on the row that runs its forwards", "[runtime]") {
  // p = 2, four virtual stages: device 0 holds 0 and 3, device 1 holds 1 and 2.
  const schedule s = from_text("0F0,0F1,3F0,3B0,3F1,3B1,0B0,0B1\n"
                               "1F0,2F0,1F1,2F1,2B0,1B0,2B1,1B1\n",
                               1, 2);
  CHECK(s.device_of == std::vector<int>{0, 1, 1, 0});
  CHECK(s.params.chunks == 2);
  CHECK(validate(s).ok());
  // Stages 1 and 2 share a device, so no SEND/RECV between them; 0 and 1 do not.
  const std::string rank1 = to_string(lower_communication(s).programs[1]);
  CHECK_THAT(rank1, Catch::Contains("1RECV_F0 1F0 2F0 2SEND_F0"));
}

TEST_CASE("a stage on two rows or without a forward is refused naming the stage and rows",
          "[runtime]") {
  CHECK_THAT(problem_of("0F0,1F1,0B0,0B1\n1F0,0F1,1B0,1B1\n"),
             Catch::Contains("virtual stage 1 has forwards on row 0 (device 0) and on row 1"));
  CHECK_THAT(problem_of("0F0,0B0\n1B0\n"), Catch::Contains("virtual stage 1 has no forward"));
  CHECK_THAT(problem_of("0F0,1F0,2F0,2B0,1B0,0B0\n3F0,3B0\n"),
             Catch::Contains("row 0 (device 0) runs the forwards of 3 virtual stages (0, 1, 2)"));
}

TEST_CASE("the validator names a deadlock and a backward before its forward in a file",
          "[runtime]") {
  const std::string deadlock = problem_of("0F0,0B0,0F1,0B1\n1F1,1F0,1B0,1B1\n");
  CHECK_THAT(deadlock, Catch::Contains("deadlock"));
  CHECK_THAT(deadlock, Catch::Contains("[1F1]"));
  CHECK_THAT(deadlock, Catch::Contains("[0B0]"));
  CHECK_THAT(problem_of("0F0,0F1,0B0,0B1\n1B0,1F0,1F1,1B1\n"),
             Catch::Contains("1B0 (rank 1, action 0): a B before its F"));
  // compute_comms: a send with no receive.
  CHECK_THAT(problem_of("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0\n"),
             Catch::Contains("unmatched receive: 0RECV_B0 on rank 0 waits for 1SEND_B0, which "
                             "rank 1 never sends"));
}

TEST_CASE("PyTorch's cells: empty ones, REDUCE_GRAD, FSDP's and OVERLAP_F_B", "[runtime]") {
  // compute_only: an empty cell is an idle slot; a row of a file may be empty.
  const schedule idle = from_text("0F0,,0B0\n,1F0,1B0\n", 1, 1);
  CHECK(to_string(idle.programs[1]) == "1F0 1B0 1STEP");
  // compute_comms refuses an empty cell, as PyTorch does.
  CHECK_THAT(problem_of("0F0,0SEND_F0,,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n"),
             Catch::Contains("CSV line 1, column 3 is empty"));
  // REDUCE_GRAD is dropped (the run adds REDUCE when w > 1); UNSHARD and RESHARD are skipped.
  const schedule reduced =
      from_text("0UNSHARD,0F0,0SEND_F0,0RECV_B0,0B0,0REDUCE_GRAD,0RESHARD\n"
                "1RECV_F0,1F0,1B0,1SEND_B0,1REDUCE_GRAD\n",
                2, 1);
  CHECK(to_string(reduced.programs[0]) == "0F0 0SEND_F0 0RECV_B0 0B0 0REDUCE 0STEP");
  CHECK(validate(reduced).ok());
  // OVERLAP_F_B: the marker, then the forward and the backward it joins.
  auto overlap = parse_schedule_file("0F0,(0F1;0B0)OVERLAP_F_B,0B1\n");
  REQUIRE(overlap.ok());
  CHECK(to_string(overlap->rows[0]) == "0F0 (0F1;0B0)OVERLAP_F_B 0B1");
  CHECK(overlap->rows[0].size() == 5);
  CHECK_THAT(problem_of("(0B1;0F0)OVERLAP_F_B\n"), Catch::Contains("joins an F and then a B or I"));

}

TEST_CASE("the version rule: latest needs STEPs, and a file's steps divide the run's", "[runtime]") {
  auto f = parse_schedule_file("0F0 0B0\n");
  REQUIRE(f.ok());
  CHECK_THAT(schedule_from_file(*f, 1, 1, version_mode::latest).message(),
             Catch::Contains("needs STEPs"));
  auto two = parse_schedule_file("0F0 0B0 0STEP 0F1 0B1 0STEP\n");
  REQUIRE(two.ok());
  CHECK_THAT(schedule_from_file(*two, 1, 3).message(),
             Catch::Contains("cover 2 steps (STEPs per stage), and the run's 3 steps"));
  CHECK(parse_version_mode("latest").value() == version_mode::latest);
  CHECK_FALSE(parse_version_mode("newest").ok());
  CHECK_THAT(parse_schedule_file("# only a comment\n").message(), Catch::Contains("no rows"));
}

TEST_CASE("the schedule file examples in docs/formats.md read and validate", "[runtime]") {
  const schedule v = from_text(docs_block("```csv", "0F0,0F1,3F0"), 2, 3);
  CHECK(v.device_of == std::vector<int>{0, 1, 1, 0});
  CHECK(validate(v).ok());
  CHECK(validate(lower_communication(v)).ok());
  const std::string text = docs_block("```text", "# pipeworks action text");
  auto f = parse_schedule_file(text);
  REQUIRE(f.ok());
  CHECK(f->format == schedule_file_format::pipeworks_text);
  const schedule one = from_text(text, 1, 1);
  CHECK(one.programs == make_schedule(schedule_kind::one_f_one_b, {2, 2}).value().programs);
  CHECK(validate(one).ok());
}

TEST_CASE("dualpipe's programs read back from pipeworks' text with their two routes", "[runtime]") {
  // As `pipeworks schedule --schedule dualpipe` prints them: the header, the version rule, the
  // routes line, then one line per rank; compute-only and lowered, with STEPs.
  int checked = 0;
  for (int p : {2, 4})
    for (int m : {2 * p, 2 * p + 2})
      for (int w : {1, 2})
        for (int steps : {1, 3})
          for (bool lowered : {false, true}) {
            INFO("p=" << p << " m=" << m << " w=" << w << " steps=" << steps << " lowered=" << lowered);
            auto made = make_schedule(schedule_kind::dualpipe, {p, m, 2, w, steps});
            REQUIRE(made.ok());
            const schedule gen = lowered ? lower_communication(*made) : *made;
            std::string text = "# dualpipe: (header)\n# versions: " + gen.version_rule +
                               "\n# routes: 2\n";
            for (int r = 0; r < gen.ranks(); ++r)
              text += "rank " + std::to_string(r) + ": " + to_string(gen.programs[r]) + "\n";
            auto f = parse_schedule_file(text);
            REQUIRE(f.ok());
            CHECK(f->routes == 2);
            auto back = schedule_from_file(*f, w, steps);
            INFO((back.ok() ? std::string() : back.message()));
            REQUIRE(back.ok());
            CHECK(back->routes == 2);
            CHECK(back->programs == gen.programs);
            CHECK(back->device_of == gen.device_of);
            CHECK(back->versions == gen.versions);
            CHECK(back->params.microbatches == m / 2);
            CHECK(validate(*back).message() == "");
            ++checked;
          }
  CHECK(checked == 32);
}

TEST_CASE("a routes line names 1 or 2, two routes need their STEPs and travel in a run plan",
          "[runtime]") {
  auto three = parse_schedule_file("# routes: 3\nrank 0: 0F0 0B0\n");
  REQUIRE_FALSE(three.ok());
  CHECK(three.message().find("line 1: \"# routes: 3\"; a schedule runs 1 route, or 2") !=
        std::string::npos);
  auto bare = parse_schedule_file("# routes: 2\nrank 0: 0F0 3F0 3B0 0B0\nrank 1: 2F0 1F0 1B0 2B0\n");
  REQUIRE(bare.ok());
  auto s = schedule_from_file(*bare, 1, 1);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("give them with their REDUCEs and STEPs") != std::string::npos);
  // dualpipe's programs in a run plan: the text keeps its routes line, the step its microbatches
  // of both routes, the split counts the model's stages.
  auto made = make_schedule(schedule_kind::dualpipe, {2, 4, 2, 1, 1});
  REQUIRE(made.ok());
  auto f = parse_schedule_file("# routes: 2\n" + to_programs_text(made->programs));
  REQUIRE(f.ok());
  run_plan plan;
  plan.schedule = schedule_kind::gpipe;
  REQUIRE(use_schedule_file(plan, *f, std::nullopt).ok());
  CHECK(plan.routes() == 2);
  CHECK(plan.train.microbatches == 4);
  CHECK(plan.model_stages() == 2);
  plan.train.steps = 1;
  auto back = plan_schedule(plan, 1);
  REQUIRE(back.ok());
  CHECK(back->routes == 2);
  CHECK(back->programs == lower_communication(*made).programs);
}
