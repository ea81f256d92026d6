// `checkpoint reshard --restart-pipeline`: an asynchronous schedule's checkpoint restarted on
// another layout from each stage's newest weights (exported bit for bit), trained on to the end,
// the same wherever it restarts; without the flag, resume and reshard refuse it naming both.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "ops/checkpoint/safetensors.hpp"
#include "run_cli.hpp"

using namespace pipeworks;
using namespace pipeworks::cli_test;
using nlohmann::json;

namespace {

std::vector<std::string> gpt(const scratch_dir& dir, std::vector<std::string> more) {
  more.insert(more.begin(), {"--eval-windows", "1"});
  return gpt_tiny_train(dir / "text.txt", 6, std::move(more));
}


// A run of `schedule` over 4 stages, 4 microbatches, checkpointed at step 3 into dir/ck-SCHEDULE.
std::string async_checkpoint(const scratch_dir& dir, const std::string& schedule) {
  const std::string ck = dir / ("ck-" + schedule);
  run_ok(gpt(dir, {"--schedule", schedule, "--stages", "4", "--microbatches", "4", "--save-every",
                   "3", "--checkpoint-dir", ck}));
  REQUIRE(has_manifest(ck, 3));
  return ck;
}

// Every tensor of an exported model, by name.
std::map<std::string, std::string> exported(const std::string& ck, const std::string& out) {
  run_ok({"checkpoint", "export", ck, "--out", out});
  auto f = read_safetensors(out);
  INFO((f.ok() ? std::string() : f.message()));
  REQUIRE(f.ok());
  std::map<std::string, std::string> t;
  for (const safetensors_info& i : f->tensors) {
    const auto b = f->bytes_of(i);
    t[i.name] = std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  return t;
}

// Restarts `ck` into `to` with the layout, checks that it starts from the checkpoint's newest
// weights bit for bit, resumes it to the end with finite losses, and returns the saved weights.
std::string restart_and_train(const scratch_dir& dir, const std::string& ck, const std::string& to,
                              std::vector<std::string> layout) {
  std::vector<std::string> args{"checkpoint", "reshard", ck, "--out", to, "--restart-pipeline"};
  args.insert(args.end(), layout.begin(), layout.end());
  const cli_result r = run_cli(args);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "restarts at step 3"));
  const std::string name = std::filesystem::path(to).filename().string();
  CHECK(exported(to, dir / (name + "-start.safetensors")) ==
        exported(ck, dir / (name + "-newest.safetensors")));
  const std::string save = dir / (name + ".safetensors"), metrics = dir / (name + ".jsonl");
  run_ok({"train", "--resume", to, "--save", save, "--metrics", metrics, "--save-every", "1"});
  // The resumed run's own checkpoints still say that the pipeline was restarted, and how.
  const json restarted = json::parse(read_file(to + "/step-00000003/manifest.json")).at("restart");
  const json later = json::parse(read_file(to + "/step-00000004/manifest.json"));
  CHECK(later.value("restart", json()) == restarted);
  int steps = 0;
  for (const std::string& line : nonempty_lines(read_file(metrics))) {
    const json j = json::parse(line);
    if (!j.contains("step") || !j.contains("loss") || j.contains("final_loss")) continue;
    CHECK(j["step"].get<int>() > 3);
    CHECK(std::isfinite(j["loss"].get<double>()));
    ++steps;
  }
  CHECK(steps == 3);
  return read_file(save);
}

}  // namespace

TEST_CASE("an asynchronous checkpoint on another layout is refused naming the field and the flag", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::string ck = async_checkpoint(dir, "2bw");
  const cli_result resume = run_cli({"train", "--resume", ck, "--stages", "2"});
  CHECK(resume.exit_code == 2);
  CHECK(contains(resume.err, "--stages"));
  CHECK(contains(resume.err, "asynchronous schedule's checkpoint"));
  CHECK(contains(resume.err, "--restart-pipeline"));
  const cli_result reshard = run_cli({"checkpoint", "reshard", ck, "--out", dir / "a", "--stages", "2"});
  CHECK(reshard.exit_code == 2);
  CHECK(contains(reshard.err, "schedule.kind"));
  CHECK(contains(reshard.err, "--restart-pipeline"));
  CHECK(!std::filesystem::exists(dir / "a"));
  // The restarted pipeline needs a flush schedule: the checkpoint's own is refused, by name.
  const cli_result async_target = run_cli({"checkpoint", "reshard", ck, "--out", dir / "b",
                                           "--stages", "2", "--restart-pipeline"});
  CHECK(async_target.exit_code == 2);
  CHECK(contains(async_target.err, "--schedule"));
  CHECK(contains(async_target.err, "2bw"));
  CHECK(!std::filesystem::exists(dir / "b"));
}

TEST_CASE("a 2bw checkpoint restarts from each stage's newest weights, the same on any layout", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::string ck = async_checkpoint(dir, "2bw");
  const std::string two = restart_and_train(dir, ck, dir / "two", {"--schedule", "1f1b", "--stages", "2"});
  // The manifest says what was dropped: stage 0 had forwarded microbatches of step 4, and every
  // stage held 2BW's older version 2.
  const std::string manifest = read_file(dir / "two/step-00000003/manifest.json");
  const json restart = json::parse(manifest).at("restart");
  CHECK(restart.at("from_schedule") == "2bw");
  CHECK(restart.at("step") == 3);
  std::size_t held = 0, versions = 0;
  for (const json& r : restart.at("dropped")) {
    held += r.at("microbatches").size();
    versions += r.at("weight_versions").size();
    for (const json& h : r.at("microbatches")) CHECK(h.at("microbatch").get<int>() >= 12);
  }
  CHECK(held > 0);
  CHECK(versions == 4);
  const cli_result inspect = run_cli({"checkpoint", "inspect", dir / "two"});
  CHECK(contains(inspect.out, "--restart-pipeline"));
  // On the same layout (4 stages), and as one device: the same computation, every bit.
  CHECK(restart_and_train(dir, ck, dir / "same", {"--schedule", "1f1b"}) == two);
  CHECK(restart_and_train(dir, ck, dir / "none", {"--schedule", "none"}) == two);
  // The restarted checkpoint is a step boundary: re-cut again without the flag, it resumes to the
  // same bits.
  run_ok({"checkpoint", "reshard", dir / "same", "--out", dir / "again", "--stages", "2"});
  const std::string again = dir / "again.safetensors";
  run_ok({"train", "--resume", dir / "again", "--save", again});
  CHECK(read_file(again) == two);
}

TEST_CASE("pipedream and cyclic checkpoints restart the same on any layout", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  for (const std::string schedule : {"pipedream", "cyclic"}) {
    INFO(schedule);
    const std::string ck = async_checkpoint(dir, schedule);
    const std::string same = restart_and_train(dir, ck, dir / (schedule + "-same"),
                                               {"--schedule", "gpipe"});
    CHECK(restart_and_train(dir, ck, dir / (schedule + "-two"),
                            {"--schedule", "1f1b", "--stages", "2"}) == same);
  }
}

// Under cyclic's p2p reduce only the last replica holds each stage's optimizer moments: a restart
// takes them from there, and so continues as the collective reduce's checkpoint does, bit for bit.
TEST_CASE("a --reduce p2p checkpoint restarts with the last replica's moments", "[cli][checkpoint]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  std::vector<std::string> weights;
  for (const char* reduce : {"collective", "p2p"}) {
    const std::string ck = dir / (std::string("ck-") + reduce);
    run_ok(gpt(dir, {"--schedule", "cyclic", "--stages", "2", "--replicas", "2", "--microbatches",
                     "4", "--reduce", reduce, "--optimizer", "adamw", "--save-every", "3",
                     "--checkpoint-dir", ck}));
    REQUIRE(has_manifest(ck, 3));
    weights.push_back(restart_and_train(dir, ck, dir / (std::string("to-") + reduce),
                                        {"--schedule", "1f1b"}));
  }
  REQUIRE(!weights[0].empty());
  CHECK(weights[0] == weights[1]);
}
