// Issue 31, item 7: every message about a checkpoint directory that gives advice, followed: doing
// what it says works, no two messages send the user to each other, none says to remove a checkpoint.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/checkpoint/dir_lock.hpp"
#include "runtime/checkpoint/run_checkpoints.hpp"
#include "tests/runtime/checkpoint/checkpoint_fixture.hpp"
#include "tests/scratch_dir.hpp"

using namespace pipeworks;
using pipeworks::test::files_under;
using pipeworks::test::scratch_dir;
using pipeworks::test::write_small_checkpoint;
namespace fs = std::filesystem;

namespace {

// A resumed run's plan as far as check_resume_dir reads it.
run_plan resumed_at(const std::string& dir, std::int64_t position) {
  run_plan p;
  p.checkpoint.every = 5;
  p.checkpoint.dir = dir;
  p.data.position = position;
  return p;
}

// Advice never to remove or delete anything.
void check_no_removal(const std::string& message) {
  INFO(message);
  CHECK_THAT(message, !Catch::Contains("remove", Catch::CaseSensitive::No) &&
                          !Catch::Contains("delete", Catch::CaseSensitive::No) &&
                          !Catch::Contains("rm "));
}

}  // namespace

TEST_CASE("a directory of checkpoints cut short gets one advice from resume and a new run, and it works",
          "[runtime][checkpoint]") {
  scratch_dir d("pipeworks-advice-cut-short");
  const std::string dir = (d.path() / "ck").string();
  fs::create_directories(step_dir(dir, 5));
  std::ofstream(step_dir(dir, 5) + "/rank-0.safetensors") << "partial";

  auto resume = latest_complete(dir);  // what --resume, --init and inspect say
  REQUIRE_FALSE(resume.ok());
  const status fresh = prepare_checkpoint_dir(dir, false);  // what a new run says
  REQUIRE_FALSE(fresh.ok());
  const std::string expected =
      dir + " holds no complete checkpoint (no step-*/manifest.json): step-00000005 was cut short "
      "before its manifest was written, so there is nothing to resume or read, and a new run does "
      "not start beside it; move it out of " + dir + " to start the run there again, or give the "
      "run another checkpoint directory";
  CHECK(resume.message() == expected);
  CHECK(fresh.message() == expected);
  check_no_removal(expected);
  CHECK(files_under(dir).size() == 1);  // neither touched it

  // Following it: moved out, the directory takes a new run, and the moved files are whole.
  fs::rename(step_dir(dir, 5), d.path() / "cut-short");
  CHECK(prepare_checkpoint_dir(dir, false).ok());
  CHECK(files_under(d.path() / "cut-short") ==
        std::map<std::string, std::string>{{"rank-0.safetensors", "partial"}});

  // Two of them read as such.
  fs::create_directories(step_dir(dir, 5));
  fs::create_directories(step_dir(dir, 10));
  CHECK_THAT(latest_complete(dir).message(),
             Catch::Contains("step-00000005, step-00000010 were cut short before their manifest") &&
                 Catch::Contains("move them out of " + dir));
}

TEST_CASE("a new run beside complete checkpoints is sent to --resume, which takes them",
          "[runtime][checkpoint]") {
  scratch_dir d("pipeworks-advice-resume");
  const std::string dir = d.path().string();
  write_small_checkpoint(dir, 10);
  fs::create_directories(step_dir(dir, 15));  // cut short after it
  const status fresh = prepare_checkpoint_dir(dir, false);
  REQUIRE_FALSE(fresh.ok());
  CHECK_THAT(fresh.message(), Catch::Contains("continue that run with --resume " + dir));
  check_no_removal(fresh.message());
  CHECK(latest_complete(dir).value() == 10);  // what --resume takes
}

TEST_CASE("resuming behind a newer complete checkpoint is refused, and both ways it offers work",
          "[runtime][checkpoint]") {
  scratch_dir d("pipeworks-advice-behind");
  const std::string dir = (d.path() / "ck").string();
  for (std::int64_t step : {5, 10, 15}) write_small_checkpoint(dir, step);
  const auto before = files_under(dir);

  const status behind = check_resume_dir(resumed_at(dir, 10));
  REQUIRE_FALSE(behind.ok());
  CHECK(behind.message() ==
        dir + " holds a complete checkpoint of step 15, after step 10 that this run resumes from "
              "(data.position): the run's checkpoints would mix with that later history's in one "
              "directory, and checkpoint.keep would prune them together. To resume the newest, set "
              "data.position to 15 (resuming the directory again takes it); to go on from step 10 "
              "beside it, copy " + step_dir(dir, 10) +
              " into a new directory and make that the checkpoint.dir");
  check_no_removal(behind.message());
  {
    // A run still writing there made the newer checkpoint: taking the lock names that run.
    auto running = dir_lock::take(dir);
    REQUIRE(running.ok());
    CHECK(check_resume_dir(resumed_at(dir, 10)).ok());
    auto taken = dir_lock::take(dir);
    REQUIRE_FALSE(taken.ok());
    CHECK_THAT(taken.message(), Catch::Contains("is in use by another run"));
  }
  // The library refuses it too, before it touches anything.
  auto prepared = prepare_checkpoints(resumed_at(dir, 10));
  REQUIRE_FALSE(prepared.ok());
  CHECK(prepared.message() == behind.message());
  CHECK(files_under(dir) == before);

  // Following either way works.
  CHECK(check_resume_dir(resumed_at(dir, 15)).ok());
  const std::string branch = (d.path() / "branch").string();
  fs::create_directories(branch);
  fs::copy(step_dir(dir, 10), step_dir(branch, 10));
  CHECK(check_resume_dir(resumed_at(branch, 10)).ok());
  CHECK(read_manifest(branch, 10).ok());
  // Without more checkpoints to write, nothing would mix: resuming behind is allowed.
  run_plan no_more = resumed_at(dir, 10);
  no_more.checkpoint.every = 0;
  CHECK(check_resume_dir(no_more).ok());
}

TEST_CASE("a damaged checkpoint's advice points at a checkpoint that is there, never at removing one",
          "[runtime][checkpoint]") {
  scratch_dir d("pipeworks-advice-damaged");
  const std::string dir = d.path().string();
  write_small_checkpoint(dir, 10);
  write_small_checkpoint(dir, 20);
  write_small_checkpoint(dir, 30);
  std::ofstream(step_dir(dir, 30) + "/manifest.json") << "{ damaged";
  std::ofstream(step_dir(dir, 10) + "/manifest.json") << "{ damaged";

  // The newest: move it out to use the next older one, which then is the newest.
  auto newest = latest_complete(dir);
  REQUIRE_FALSE(newest.ok());
  CHECK_THAT(newest.message(),
             Catch::EndsWith("restore it, or move " + step_dir(dir, 30) + " out of " + dir +
                             " to use the checkpoint of step 20"));
  check_no_removal(newest.message());
  // An older one: resuming does not depend on it.
  CHECK(other_checkpoint_advice(dir, 10) ==
        "restore it (the newer checkpoint of step 20 does not depend on it)");
  // The only one: nothing else to use.
  CHECK(other_checkpoint_advice(dir, 20).find("use the checkpoint of step") == std::string::npos);

  fs::rename(step_dir(dir, 30), d.path() / "step-30-damaged");
  CHECK(latest_complete(dir).value() == 20);
}

TEST_CASE("writing a checkpoint where a complete one is never says to remove it",
          "[runtime][checkpoint]") {
  scratch_dir d("pipeworks-advice-complete");
  const std::string dir = d.path().string();
  write_small_checkpoint(dir, 8);
  const auto before = files_under(dir);
  const status s = prepare_step_dir(dir, 8);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.message(), Catch::Contains(step_dir(dir, 8) + " already holds a checkpoint") &&
                              Catch::Contains("never overwritten") &&
                              Catch::Contains("resume from the newest checkpoint in " + dir));
  check_no_removal(s.message());
  CHECK(files_under(dir) == before);

  std::ofstream(step_dir(dir, 9)) << "a file";
  const status f = prepare_step_dir(dir, 9);
  REQUIRE_FALSE(f.ok());
  CHECK_THAT(f.message(), Catch::Contains("move it out of " + dir));
  check_no_removal(f.message());
}
