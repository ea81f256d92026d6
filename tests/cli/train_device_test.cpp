// `pipeworks train --device` and per-rank devices in a plan: bad names are refused naming the flag
// or the plan field, a GPU that cannot be had is named with the reason (exit 1), and where a GPU
// is present the run trains there and reports its device memory peak.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "ops/device/device.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;

namespace {

std::vector<std::string> gpt_args(const scratch_dir& dir, std::vector<std::string> more) {
  std::vector<std::string> a{"train", "--model", "gpt-tiny", "--data", dir / "text.txt",
                             "--steps", "3", "--batch", "8", "--sample", "0", "--eval-windows", "2"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

}  // namespace

TEST_CASE("train --device names a bad device and refuses it with --auto-partition", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const cli_result bad = run_cli(gpt_args(dir, {"--device", "gpu0"}));
  INFO(bad.err);
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err, "--device"));
  CHECK(contains(bad.err, "gpu0"));
  const cli_result auto_part = run_cli(gpt_args(dir, {"--device", "cuda", "--auto-partition"}));
  INFO(auto_part.err);
  CHECK(auto_part.exit_code == 2);
  CHECK(contains(auto_part.err, "--auto-partition places the ranks"));
}

TEST_CASE("train --device cuda runs on the GPU or names why it cannot", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const cli_result r = run_cli(gpt_args(dir, {"--device", "cuda:0", "--schedule", "1f1b", "--stages",
                                              "2", "--microbatches", "2", "--json"}));
  INFO(r.err);
  if (pipeworks::find_gpus().count == 0) {
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "cuda:0 cannot be used"));
    CHECK(contains(r.err, "--device cpu"));
  } else {
    REQUIRE(r.exit_code == 0);
    const json last = json_lines(r).back();
    for (const auto& st : last.at("stages")) CHECK(st.at("device_peak_bytes").get<long long>() > 0);
  }
}

TEST_CASE("a plan names a bad rank device or a throttled GPU rank by field", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const auto plan = dir / "plan.json";
  REQUIRE(run_cli(gpt_args(dir, {"--schedule", "1f1b", "--stages", "2", "--device", "cuda",
                                 "--print-plan", plan}))
              .exit_code == 0);
  json p = json::parse(read_file(plan));
  REQUIRE(p.at("ranks").size() == 2);
  CHECK(p["ranks"][0]["device"] == "cuda");
  p["ranks"][0]["device"] = "tpu";
  write_file(plan, p.dump());
  const cli_result bad = run_cli({"train", "--plan", plan});
  INFO(bad.err);
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err, "ranks[0].device"));
  CHECK(contains(bad.err, "tpu"));
  p["ranks"][0]["device"] = "cpu";
  p["ranks"][1]["speed"] = 0.5;
  write_file(plan, p.dump());
  const cli_result slow = run_cli({"train", "--plan", plan});
  INFO(slow.err);
  CHECK(slow.exit_code == 2);
  CHECK(contains(slow.err, "ranks[1].speed"));
}
