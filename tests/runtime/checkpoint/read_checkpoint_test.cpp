// Issue 31, item 11: a reader of a checkpoint directory that a run prunes meanwhile, with the
// pruning driven at fixed points inside the read: a pruned checkpoint is never reported as damaged.
#include "runtime/checkpoint/read_checkpoint.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "tests/runtime/checkpoint/checkpoint_fixture.hpp"
#include "tests/scratch_dir.hpp"

using namespace pipeworks;
using pipeworks::test::scratch_dir;
using pipeworks::test::write_small_checkpoint;
namespace fs = std::filesystem;

namespace {

// What a run with checkpoint.keep 1 does at its next checkpoint: writes it, then prunes.
void next_checkpoint_and_prune(const std::string& dir, std::int64_t step) {
  write_small_checkpoint(dir, step);
  REQUIRE(prune_checkpoints(dir, 1).ok());
}

// Verifies every file of c, as --resume, --init and inspect do.
status verify(const chosen_checkpoint& c) { return verify_files(c.manifest, c.dir); }

}  // namespace

TEST_CASE("a checkpoint pruned before its files are read is read again at the newest",
          "[runtime][checkpoint]") {
  scratch_dir d("pipeworks-read-pruned");
  const std::string dir = d.path().string();
  write_small_checkpoint(dir, 10);
  std::vector<std::int64_t> given;
  auto got = read_checkpoint(dir, -1, [&](const chosen_checkpoint& c) {
    given.push_back(c.step);
    if (given.size() == 1) next_checkpoint_and_prune(dir, 15);  // 10 goes while it is read
    return verify(c);
  });
  REQUIRE(got.ok());
  CHECK(given == std::vector<std::int64_t>{10, 15});
  CHECK(got->checkpoint.step == 15);
  CHECK(got->checkpoint.dir == step_dir(dir, 15));
  CHECK(got->read.ok());
  CHECK(complete_steps(dir).value() == std::vector<std::int64_t>{15});
}

TEST_CASE("a checkpoint pruned between two of its rank files is read again at the newest",
          "[runtime][checkpoint]") {
  scratch_dir d("pipeworks-read-midway");
  const std::string dir = d.path().string();
  write_small_checkpoint(dir, 10, 3);
  int calls = 0;
  auto got = read_checkpoint(dir, -1, [&](const chosen_checkpoint& c) -> status {
    ++calls;
    for (const checkpoint_file& f : c.manifest.files) {
      if (status s = verify_file(f, c.dir); !s) return s;
      if (calls == 1 && f.rank == 0) next_checkpoint_and_prune(dir, 20);
    }
    return {};
  });
  REQUIRE(got.ok());
  CHECK(calls == 2);
  CHECK(got->checkpoint.step == 20);
  CHECK(got->read.ok());
}

TEST_CASE("a damaged checkpoint that is still there is reported as it is, once",
          "[runtime][checkpoint]") {
  scratch_dir d("pipeworks-read-damaged");
  const std::string dir = d.path().string();
  write_small_checkpoint(dir, 5);
  const checkpoint_manifest m = write_small_checkpoint(dir, 10);
  const std::string rank1 = step_dir(dir, 10) + "/rank-1.safetensors";
  fs::remove(rank1);
  int calls = 0;
  auto got = read_checkpoint(dir, -1, [&](const chosen_checkpoint& c) {
    ++calls;
    return verify(c);
  });
  REQUIRE(got.ok());
  CHECK(calls == 1);
  CHECK(got->checkpoint.step == 10);
  REQUIRE_FALSE(got->read.ok());
  CHECK_THAT(got->read.message(), Catch::Contains(rank1 + " is missing"));
  CHECK(read_manifest(dir, 10).ok());  // nothing was removed or rewritten
  CHECK(verify_files(read_manifest(dir, 5).value(), step_dir(dir, 5)).ok());
}

TEST_CASE("a given step pruned while it is read is named as pruned, not as damaged",
          "[runtime][checkpoint]") {
  scratch_dir d("pipeworks-read-given");
  const std::string dir = d.path().string();
  write_small_checkpoint(dir, 10);
  auto got = read_checkpoint(dir, 10, [&](const chosen_checkpoint& c) {
    next_checkpoint_and_prune(dir, 15);
    return verify(c);
  });
  REQUIRE_FALSE(got.ok());
  CHECK(got.message() == "the checkpoint of step 10 in " + dir +
                             " was pruned while it was read (a run writing there keeps only its "
                             "newest checkpoints: checkpoint.keep); read a newer one");
  CHECK_THAT(got.message(), !Catch::Contains("missing") && !Catch::Contains("corrupt"));
  CHECK(verify_files(read_manifest(dir, 15).value(), step_dir(dir, 15)).ok());
}

TEST_CASE("a reader that pruning always outpaces gives up naming checkpoint.keep",
          "[runtime][checkpoint]") {
  scratch_dir d("pipeworks-read-outpaced");
  const std::string dir = d.path().string();
  write_small_checkpoint(dir, 1);
  std::int64_t next = 2;
  auto got = read_checkpoint(dir, -1, [&](const chosen_checkpoint& c) {
    next_checkpoint_and_prune(dir, next++);
    return verify(c);
  });
  REQUIRE_FALSE(got.ok());
  CHECK(next == 2 + max_pruned_rereads);
  CHECK_THAT(got.message(), Catch::Contains("was pruned " + std::to_string(max_pruned_rereads) +
                                            " times in a row while it was read") &&
                                Catch::Contains("checkpoint.keep") &&
                                !Catch::Contains("missing"));
  // The newest checkpoint is whole: only the reader gave up.
  const std::int64_t newest = latest_complete(dir).value();
  CHECK(newest == next - 1);
  CHECK(verify_files(read_manifest(dir, newest).value(), step_dir(dir, newest)).ok());
}

TEST_CASE("read_checkpoint passes on why a directory holds nothing to read",
          "[runtime][checkpoint]") {
  scratch_dir d("pipeworks-read-none");
  const std::string dir = d.path().string();
  auto none = read_checkpoint(dir, -1, verify);
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.message(), Catch::StartsWith(dir + " holds no complete checkpoint"));
  auto absent = read_checkpoint(dir, 7, verify);
  REQUIRE_FALSE(absent.ok());
  CHECK_THAT(absent.message(), Catch::Contains("there is no complete checkpoint of step 7"));
}
