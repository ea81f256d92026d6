// Issue 31, item 7, through the CLI: the advice of `train` and `checkpoint inspect` about a
// checkpoint directory, followed step by step: it works, and no message sends the user back.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "runtime/checkpoint/dir_lock.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> train_args(const std::string& text, const std::string& ck) {
  return {"train", "--model", "gpt-tiny", "--data", text, "--steps", "20", "--save-every", "5",
          "--checkpoint-dir", ck, "--sample", "0", "--eval-windows", "4"};
}

// Every file under dir with its bytes.
std::map<std::string, std::string> files_under(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = read_file(e.path());
  return out;
}

void check_no_removal(const std::string& message) {
  INFO(message);
  CHECK_FALSE(contains(message, "remove"));
  CHECK_FALSE(contains(message, "delete"));
}

}  // namespace

TEST_CASE("a plan resumed behind a newer checkpoint exits 2 naming it, and both ways it offers work",
          "[cli][checkpoint]") {
  scratch_dir dir;
  const std::string text = dir / "text.txt";
  write_file(text, small_text());
  const std::string ck = dir / "D";
  REQUIRE(run_cli(train_args(text, ck)).exit_code == 0);
  const auto before = files_under(ck);
  REQUIRE(before.count("step-00000015/manifest.json") == 1);
  // The input: step 15's plan with data.position edited to 10.
  json plan = json::parse(read_file(fs::path(ck) / "step-00000015" / "manifest.json"))["plan"];
  plan["data"]["position"] = 10;
  write_file(dir / "at10.json", plan.dump());

  const cli_result r = run_cli({"train", "--plan", dir / "at10.json"});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--plan: " + ck + " holds a complete checkpoint of step 15, after step 10"));
  CHECK(contains(r.err, "set data.position to 15"));
  CHECK(contains(r.err, "copy " + ck + "/step-00000010 into a new directory and make that the "
                        "checkpoint.dir"));
  check_no_removal(r.err);
  CHECK(files_under(ck) == before);  // nothing lost, nothing written
  {
    // While a run holds the directory (and may have written the newer checkpoint), that run is
    // named, not the checkpoint.
    auto running = pipeworks::dir_lock::take(ck);
    REQUIRE(running.ok());
    const cli_result in_use = run_cli({"train", "--plan", dir / "at10.json"});
    INFO(in_use.err);
    CHECK(in_use.exit_code == 1);
    CHECK(contains(in_use.err, "checkpoint directory " + ck + " is in use by another run"));
    CHECK_FALSE(contains(in_use.err, "after step 10"));
    CHECK(files_under(ck) == before);
  }

  // Resuming the newest, as it says.
  plan["data"]["position"] = 15;
  write_file(dir / "at15.json", plan.dump());
  const cli_result newest = run_cli({"train", "--plan", dir / "at15.json"});
  INFO(newest.err);
  CHECK(newest.exit_code == 0);
  // Going on from step 10 beside it, as it says.
  const std::string branch = dir / "branch";
  fs::create_directories(branch);
  fs::copy(fs::path(ck) / "step-00000010", fs::path(branch) / "step-00000010");
  plan["data"]["position"] = 10;
  plan["checkpoint"]["dir"] = branch;
  write_file(dir / "branch.json", plan.dump());
  const cli_result branched = run_cli({"train", "--plan", dir / "branch.json"});
  INFO(branched.err);
  CHECK(branched.exit_code == 0);
  CHECK(has_manifest(branch, 15));
  CHECK(files_under(ck) == before);  // the first run's checkpoints as they were
}

TEST_CASE("a directory holding only a checkpoint cut short: resume and a new run agree, and the advice works",
          "[cli][checkpoint]") {
  scratch_dir dir;
  const std::string text = dir / "text.txt";
  write_file(text, small_text());
  const std::string ck = dir / "D";
  fs::create_directories(fs::path(ck) / "step-00000005");
  write_file(fs::path(ck) / "step-00000005" / "rank-0.safetensors", "cut short");
  const std::string advice = "step-00000005 was cut short before its manifest was written, so "
                             "there is nothing to resume or read, and a new run does not start "
                             "beside it; move it out of " + ck + " to start the run there again";

  const cli_result resume = run_cli({"train", "--resume", ck});
  INFO(resume.err);
  CHECK(resume.exit_code == 1);
  CHECK(contains(resume.err, "--resume: " + ck + " holds no complete checkpoint"));
  CHECK(contains(resume.err, advice));
  CHECK_FALSE(contains(resume.err, "start the run again"));  // the old advice that looped

  const cli_result fresh = run_cli(train_args(text, ck));
  INFO(fresh.err);
  CHECK(fresh.exit_code == 2);
  CHECK(contains(fresh.err, "--checkpoint-dir: "));
  CHECK(contains(fresh.err, advice));
  CHECK_FALSE(contains(fresh.err, "--resume"));  // never sent back to resume

  const cli_result inspect = run_cli({"checkpoint", "inspect", ck});
  CHECK(inspect.exit_code == 1);
  CHECK(contains(inspect.err, advice));
  CHECK_FALSE(contains(inspect.err, "checkpoint inspect`"));  // no longer points at itself
  check_no_removal(resume.err + fresh.err + inspect.err);

  // Following it: moved out, the run starts in D, and the moved file is whole.
  fs::rename(fs::path(ck) / "step-00000005", dir / "cut-short");
  const cli_result again = run_cli(train_args(text, ck));
  INFO(again.err);
  CHECK(again.exit_code == 0);
  CHECK(has_manifest(ck, 15));
  CHECK(read_file(fs::path(dir / "cut-short") / "rank-0.safetensors") == "cut short");
}

TEST_CASE("a new run beside complete checkpoints is sent to --resume, which continues it",
          "[cli][checkpoint]") {
  scratch_dir dir;
  const std::string text = dir / "text.txt";
  write_file(text, small_text());
  const std::string ck = dir / "D";
  std::vector<std::string> args = train_args(text, ck);
  args[6] = "12";  // --steps: checkpoints of steps 5 and 10
  REQUIRE(run_cli(args).exit_code == 0);
  const cli_result fresh = run_cli(args);
  INFO(fresh.err);
  CHECK(fresh.exit_code == 2);
  CHECK(contains(fresh.err, "continue that run with --resume " + ck));
  check_no_removal(fresh.err);
  const cli_result resumed = run_cli({"train", "--resume", ck, "--sample", "0"});
  INFO(resumed.err);
  CHECK(resumed.exit_code == 0);
  CHECK(contains(resumed.out + resumed.err, "resuming from the checkpoint of step 10"));
}
