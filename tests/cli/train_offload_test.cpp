// `pipeworks train --offload`: on a CPU rank it is refused naming the flag, the rank and what to
// do (exit 2); on GPU ranks it is refused as not built yet; a bad list names the flag; a plan
// file carries runtime.offload, and --print-plan writes none by default.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "run_cli.hpp"
#include "runtime/offload_mode.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;

namespace {

std::vector<std::string> gpt_args(const scratch_dir& dir, std::vector<std::string> more) {
  more.insert(more.begin(), {"--eval-windows", "1", "--schedule", "1f1b", "--stages", "2",
                             "--microbatches", "2"});
  return gpt_tiny_train(dir / "text.txt", 2, std::move(more));
}

}  // namespace

TEST_CASE("train --offload on a CPU rank exits 2 naming the flag the rank and what to do", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  for (const char* what : {"optimizer", "activations", "optimizer,activations"}) {
    const cli_result r = run_cli(gpt_args(dir, {"--offload", what}));
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--offload: is " + pipeworks::offload_name(*pipeworks::parse_offload(what))));
    CHECK(contains(r.err, "rank 0 (stage 0, replica 0) runs on the CPU"));
    CHECK(contains(r.err, "host memory already"));
    CHECK(contains(r.err, "Drop --offload, or place the rank on a GPU (--device cuda or cuda:N)"));
    CHECK(r.out.find("step") == std::string::npos);  // nothing trained
  }
  const cli_result single = run_cli(gpt_tiny_train(dir / "text.txt", 2, {"--offload", "optimizer"}));
  INFO(single.err);
  CHECK(single.exit_code == 2);
  CHECK(contains(single.err, "rank 0 (stage 0, replica 0) runs on the CPU"));
}

TEST_CASE("train --offload on GPU ranks exits 2 saying it is not built yet", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  // Refused by the plan's check, before any GPU is opened: the same with a GPU or without.
  const cli_result r = run_cli(gpt_args(dir, {"--device", "cuda", "--offload", "optimizer"}));
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--offload: is optimizer for GPU rank 0 (stage 0, replica 0) on cuda"));
  CHECK(contains(r.err, "not built yet"));
  CHECK(contains(r.err, "--recompute"));
}

TEST_CASE("train --offload refuses a bad list naming the flag", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  for (const char* bad : {"moments", "optimizer,optimizer", "all", ""}) {
    const cli_result r = run_cli(gpt_args(dir, {"--offload", bad}));
    INFO(bad << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--offload"));
  }
}

TEST_CASE("a plan file carries runtime.offload and is refused with it on CPU ranks", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::string plan = dir / "plan.json";
  const cli_result printed = run_cli(gpt_args(dir, {"--print-plan", plan}));
  INFO(printed.err);
  REQUIRE(printed.exit_code == 0);
  json j = json::parse(read_file(plan));
  CHECK(j["runtime"]["offload"] == "none");
  j["runtime"]["offload"] = "activations";
  write_file(plan, j.dump());
  const cli_result r = run_cli({"train", "--plan", plan});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "is activations, but rank 0 (stage 0, replica 0) runs on the CPU"));
  j["runtime"].erase("offload");  // a plan written before the field: no offload
  write_file(plan, j.dump());
  const cli_result old = run_cli({"train", "--plan", plan, "--sample", "0"});
  INFO(old.err);
  CHECK(old.exit_code == 0);
}
