// `train --resume`'s flag rules (cli/train_flag_rules.cpp): the planner's flags are refused naming
// the flag (the checkpoint's partitioning is kept, so they would do nothing), and --data naming the
// checkpoint's data by another spelling (absolute for relative) is the same data, not a change.
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <cerrno>
#include <filesystem>
#include <stdexcept>

#include "fixtures.hpp"

using namespace pipeworks::cli_test;
namespace fs = std::filesystem;

namespace {

// Runs `pipeworks args...` in the working directory `cwd` and waits for it.
cli_result run_in(const std::string& cwd, const std::vector<std::string>& args) {
  scratch_dir io;
  const std::string out_path = io / "stdout", err_path = io / "stderr";
  const pid_t pid = spawn_cli(args, out_path, err_path, {"/usr/bin/env", "-C", cwd});
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error("waitpid failed");
  return {exit_code_of(status), read_file(out_path), read_file(err_path)};
}

// A 4-step gpt-tiny run on `data` with a checkpoint at step 2 in `ckpt`.
std::vector<std::string> checkpointed_run(const std::string& data, const std::string& ckpt) {
  return {"train", "--model", "gpt-tiny", "--data", data, "--steps", "4", "--batch", "8",
          "--microbatches", "2", "--schedule", "1f1b", "--stages", "2", "--sample", "0",
          "--eval-windows", "2", "--save-every", "2", "--checkpoint-dir", ckpt};
}

}  // namespace

TEST_CASE("resume refuses auto-partition, cluster and planner naming the flag", "[cli][checkpoint]") {
  scratch_dir dir;
  const std::string text = dir / "text.txt", ckpt = dir / "ckpt";
  write_file(text, small_text(30000));
  const cli_result first = run_cli(checkpointed_run(text, ckpt));
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  REQUIRE(has_manifest(ckpt, 2));
  const std::string manifest = read_file(fs::path(ckpt) / "step-00000002" / "manifest.json");
  for (const std::vector<std::string>& flag :
       {std::vector<std::string>{"--auto-partition"}, std::vector<std::string>{"--cluster", "local-cpu"},
        std::vector<std::string>{"--planner", "2bw"}}) {
    std::vector<std::string> args{"train", "--resume", ckpt, "--sample", "0", "--eval-windows", "2"};
    args.insert(args.end(), flag.begin(), flag.end());
    const cli_result r = run_cli(args);
    INFO(flag[0] << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, flag[0]));
    CHECK(contains(r.err, "checkpoint's own partitioning"));
    CHECK(contains(r.err, "--init"));
  }
  // Nothing was touched: the checkpoint is as it was and resumes.
  CHECK(read_file(fs::path(ckpt) / "step-00000002" / "manifest.json") == manifest);
  const cli_result resumed = run_cli({"train", "--resume", ckpt, "--sample", "0", "--eval-windows", "2"});
  INFO(resumed.err);
  CHECK(resumed.exit_code == 0);
}

TEST_CASE("resume takes data given as the absolute form of the checkpoint's relative path", "[cli][checkpoint]") {
  scratch_dir dir;
  const std::string here = dir.path().string();
  write_file(dir / "text.txt", small_text(30000));
  write_file(dir / "other.txt", small_text(30000) + "other");
  const std::string ckpt = dir / "ckpt";
  const cli_result first = run_in(here, checkpointed_run("text.txt", "ckpt"));
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  REQUIRE(has_manifest(ckpt, 2));
  // Another file is still refused, naming --data.
  const cli_result other = run_in(here, {"train", "--resume", "ckpt", "--data", dir / "other.txt",
                                         "--sample", "0", "--eval-windows", "2"});
  INFO(other.err);
  CHECK(other.exit_code == 2);
  CHECK(contains(other.err, "--data"));
  // The same file by its absolute path (and through "..") is the checkpoint's data.
  for (const std::string& same : std::vector<std::string>{dir / "text.txt", (fs::path(dir / "ckpt") / ".." / "text.txt").string()}) {
    const cli_result r = run_in(here, {"train", "--resume", "ckpt", "--data", same, "--sample", "0",
                                       "--eval-windows", "2"});
    INFO(same << ": " << r.err);
    CHECK(r.exit_code == 0);
  }
}
