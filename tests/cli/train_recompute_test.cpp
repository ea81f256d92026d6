// `pipeworks train --recompute`: full and selective end with the weights of none, bit for bit, and
// hold fewer stashed bytes; a bad mode, or recomputation without a pipeline schedule, exits 2 naming it; a
// plan carries the mode (runtime.recompute) and a plan without it recomputes nothing.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "run_cli.hpp"
#include "runtime/run_plan.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;

namespace {

std::vector<std::string> gpt_args(const scratch_dir& dir, std::vector<std::string> more) {
  more.insert(more.begin(), {"--eval-windows", "2", "--json"});
  return gpt_tiny_train(dir / "text.txt", 4, std::move(more));
}


}  // namespace

TEST_CASE("train --recompute full and selective end with the bits of none and hold fewer bytes", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  std::vector<std::string> files;
  std::vector<json> reports;
  for (const char* mode : {"none", "full", "selective"}) {
    const std::string file = dir / (std::string(mode) + ".safetensors");
    const cli_result r = run_cli(gpt_args(dir, {"--schedule", "gpipe", "--stages", "2",
                                                "--microbatches", "4", "--recompute", mode,
                                                "--save", file}));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    files.push_back(read_file(file));
    reports.push_back(last_json(r));
  }
  REQUIRE(!files[0].empty());
  CHECK(files[0] == files[1]);
  CHECK(files[0] == files[2]);
  CHECK(reports[0]["final_loss"] == reports[1]["final_loss"]);
  CHECK(reports[0]["final_loss"] == reports[2]["final_loss"]);
  // GPipe holds all 4 microbatches of stage 0 at once: 4 stashes against 4 inputs and 1 stash.
  const auto none0 = reports[0]["stages"][0]["peak_activation_bytes"].get<std::int64_t>();
  const auto full0 = reports[1]["stages"][0]["peak_activation_bytes"].get<std::int64_t>();
  CHECK(reports[1]["stages"][0]["peak_inflight"] == 4);
  CHECK(full0 < none0 / 2);
  const auto selective0 = reports[2]["stages"][0]["peak_activation_bytes"].get<std::int64_t>();
  CHECK(selective0 < none0);
  CHECK(selective0 > full0);
}

TEST_CASE("train --recompute refuses a bad mode and a run without a schedule", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const cli_result bad = run_cli(gpt_args(dir, {"--schedule", "1f1b", "--stages", "2",
                                                "--recompute", "some"}));
  INFO(bad.err);
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err, "--recompute"));
  const cli_result single = run_cli(gpt_args(dir, {"--recompute", "full"}));
  INFO(single.err);
  CHECK(single.exit_code == 2);
  CHECK(contains(single.err, "--recompute"));
  CHECK(contains(single.err, "pick a schedule"));
}

TEST_CASE("a run plan carries runtime.recompute and reads without it as none", "[cli]") {
  pipeworks::run_plan p;
  p.model = *pipeworks::parse_model_spec("gpt-tiny");
  p.stages = 2;
  p.split = {0, 2};
  p.recompute = pipeworks::recompute_mode::full;
  json j = json::parse(pipeworks::to_json_text(p));
  CHECK(j["runtime"]["recompute"] == "full");
  auto back = pipeworks::parse_run_plan(j.dump(), "plan.json");
  INFO((back.ok() ? std::string() : back.message()));
  REQUIRE(back.ok());
  CHECK(back->recompute == pipeworks::recompute_mode::full);
  j["runtime"].erase("recompute");
  auto old = pipeworks::parse_run_plan(j.dump(), "plan.json");
  REQUIRE(old.ok());
  CHECK(old->recompute == pipeworks::recompute_mode::none);
  j["runtime"]["recompute"] = "selected";
  auto bad = pipeworks::parse_run_plan(j.dump(), "plan.json");
  REQUIRE(!bad.ok());
  CHECK(contains(bad.message(), "runtime.recompute"));
  CHECK(contains(bad.message(), "none, full, selective"));
}
