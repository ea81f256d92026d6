// Workers with checkpoint directories of their own (`pipeworks worker --checkpoint-dir`, local to
// their host): the manifest names each file's host and directory, the workers prune as the driver
// does, a resume with the ranks placed otherwise reaches the uninterrupted weights, and a file
// that is not where the manifest says is named with its host.
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "worker_cli.hpp"

using namespace pipeworks::cli_test;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> tiny_gpt(const std::string& text, std::vector<std::string> more) {
  std::vector<std::string> a{"train", "--model", "gpt-tiny", "--data", text, "--steps", "12",
                             "--batch", "16", "--microbatches", "4", "--schedule", "1f1b",
                             "--stages", "2", "--sample", "0", "--eval-windows", "4",
                             "--optimizer", "adamw", "--lr", "3e-3"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// The step directories under dir/run-*/ (the one run's), by name.
std::vector<std::string> own_steps(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& run : fs::directory_iterator(dir))
    for (const auto& step : fs::directory_iterator(run.path())) out.push_back(step.path().filename());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("workers with checkpoint directories of their own resume bit for bit in another placement", "[cli][workers]") {
  scratch_dir dir;
  const std::string text = dir / "text.txt";
  write_file(text, small_text(60000));
  const cli_result whole = run_cli(tiny_gpt(text, {"--save", dir / "whole.safetensors"}));
  REQUIRE(whole.exit_code == 0);

  const std::string own_a = dir / "host-a", own_b = dir / "host-b", ckpt = dir / "ckpt";
  worker_cli a({"--checkpoint-dir", own_a}), b({"--checkpoint-dir", own_b});
  const cli_result first = run_cli(tiny_gpt(text, {"--save-every", "4", "--keep", "1",
                                                   "--checkpoint-dir", ckpt, "--workers",
                                                   a.address() + "," + b.address()}));
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  // The driver's step directory holds the manifest only; each file is in its worker's directory.
  const std::string step8 = ckpt + "/step-00000008";
  CHECK(fs::exists(step8 + "/manifest.json"));
  CHECK_FALSE(fs::exists(step8 + "/rank-0.safetensors"));
  const auto m = nlohmann::json::parse(read_file(step8 + "/manifest.json"));
  REQUIRE(m["files"].size() == 2);
  for (const auto& f : m["files"]) {
    CHECK(f["host"] == "127.0.0.1");
    const std::string own = f["rank"] == 0 ? own_a : own_b;
    CHECK(f["dir"].get<std::string>().rfind(own + "/run-", 0) == 0);
    CHECK(fs::exists(f["dir"].get<std::string>() + "/" + f["path"].get<std::string>()));
  }
  // --keep 1: the driver removed step 4, and so did the workers.
  CHECK_FALSE(fs::exists(ckpt + "/step-00000004"));
  CHECK(own_steps(own_a) == std::vector<std::string>{"step-00000008"});
  CHECK(own_steps(own_b) == std::vector<std::string>{"step-00000008"});

  // The ranks swap processes: each reads its file from the directory the manifest names.
  const cli_result swapped = run_cli({"train", "--resume", ckpt, "--workers",
                                      b.address() + "," + a.address(), "--save",
                                      dir / "resumed.safetensors", "--sample", "0",
                                      "--eval-windows", "4"});
  INFO(swapped.err);
  REQUIRE(swapped.exit_code == 0);
  CHECK(read_file(dir / "resumed.safetensors") == read_file(dir / "whole.safetensors"));

  // A host's directory gone: the error names the file, its host and what to do.
  fs::remove_all(own_a);
  const cli_result lost = run_cli({"train", "--resume", ckpt, "--workers",
                                   a.address() + "," + b.address(), "--sample", "0",
                                   "--eval-windows", "4"});
  INFO(lost.err);
  CHECK(lost.exit_code == 1);
  CHECK(contains(lost.err, "rank-0.safetensors (rank 0's file) is not on this machine"));
  CHECK(contains(lost.err, "a worker on host 127.0.0.1 wrote it"));
  CHECK(contains(lost.err, "Place rank 0 on a worker of that host"));
}
