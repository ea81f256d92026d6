// Tests for runtime/checkpoint/run_checkpoints: an impossible data position in a manifest is
// refused naming it; a run's manifests record its data, and a run resumed on other data records
// the data it replaced, which later resumes on that data keep.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/checkpoint/run_checkpoints.hpp"
#include "tests/runtime/checkpoint/checkpoint_fixture.hpp"
#include "tests/scratch_dir.hpp"

using namespace pipeworks;
namespace fs = std::filesystem;

namespace {

// The checkpoint of step 10 in dir rewritten (its checksum too) after `edit`.
void rewrite(const std::string& dir, const std::function<void(checkpoint_manifest&)>& edit) {
  auto m = read_manifest(dir, 10);
  REQUIRE(m.ok());
  edit(*m);
  REQUIRE(write_manifest(dir, *m).ok());
}

}  // namespace

TEST_CASE("a manifest whose data position is impossible is refused naming it",
          "[runtime][checkpoint]") {
  struct refusal {
    const char* what;
    std::function<void(checkpoint_manifest&)> edit;
    std::string message;
  };
  const refusal cases[] = {
      {"far beyond the data", [](checkpoint_manifest& m) { m.data_position = 1000000000000; },
       "data_position is 1000000000000, but the checkpoint is of step 10"},
      {"one step off", [](checkpoint_manifest& m) { m.data_position = 11; },
       "data_position is 11, but the checkpoint is of step 10"},
      {"the plan's position", [](checkpoint_manifest& m) { m.plan["data"]["position"] = 9; },
       "plan.data.position is 9, but the checkpoint is of step 10"},
  };
  for (const refusal& c : cases) {
    INFO(c.what);
    test::scratch_dir d;
    const std::string dir = d / "ck";
    test::write_small_checkpoint(dir, 5);
    test::write_small_checkpoint(dir, 10);
    rewrite(dir, c.edit);
    const auto before = test::files_under(dir);
    auto m = read_checked_manifest(dir, 10);
    REQUIRE_FALSE(m.ok());
    CHECK_THAT(m.message(), Catch::StartsWith(step_dir(dir, 10) + "/manifest.json: ") &&
                                Catch::Contains(c.message) &&
                                Catch::Contains("the manifest was damaged or edited") &&
                                Catch::Contains("to use the checkpoint of step 5"));
    CHECK(test::files_under(dir) == before);  // nothing was lost
  }
}

TEST_CASE("a run resumed on other data records the data it replaced in its manifests",
          "[runtime][checkpoint]") {
  test::scratch_dir d;
  const std::string a = d / "a.txt", b = d / "b.txt";
  std::ofstream(a) << "the data the run started on\n";
  std::ofstream(b) << "other data\n";
  run_plan plan = test::small_plan(2, 0);
  plan.data.path = a;
  plan.checkpoint.dir = d / "ck";
  plan.checkpoint.every = 5;

  note_run_data(plan, nullptr);
  const checkpoint_manifest five = manifest_of(plan, 5, 40, 1.0, {});
  REQUIRE(five.data.has_value());
  CHECK(five.data->fingerprint.path == a);
  CHECK_FALSE(five.data->replaced.has_value());
  CHECK(check_resume_data(five, plan).ok());

  // Resumed at step 5 on b: refused by check_resume_data, naming the path and what changed.
  run_plan other = plan;
  other.data.path = b;
  other.data.position = 5;
  const status refused = check_resume_data(five, other);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.message(),
             Catch::StartsWith("the data " + b + " is not what the checkpoint of step 5 was trained on: ") &&
                 Catch::Contains("its path is " + b + ", the checkpoint's was " + a) &&
                 Catch::Contains("its size is 11 bytes, the checkpoint's was 28") &&
                 Catch::Contains("its sha256 is"));
  // Allowed (--resume-on-other-data): its manifests say what it replaced and where.
  note_run_data(other, &five);
  const checkpoint_manifest ten = manifest_of(other, 10, 80, 2.0, {});
  REQUIRE(ten.data.has_value());
  CHECK(ten.data->fingerprint.path == b);
  REQUIRE(ten.data->replaced.has_value());
  CHECK(*ten.data->replaced == five.data->fingerprint);
  CHECK(ten.data->replaced_at == 5);
  // Resumed again on b: the same data, and the earlier choice stays recorded.
  other.data.position = 10;
  CHECK(check_resume_data(ten, other).ok());
  note_run_data(other, &ten);
  const checkpoint_manifest fifteen = manifest_of(other, 15, 120, 3.0, {});
  REQUIRE(fifteen.data.has_value());
  CHECK(fifteen.data->replaced == ten.data->replaced);
  CHECK(fifteen.data->replaced_at == 5);

  // Data the program supplies has no record.
  run_plan callback = plan;
  callback.data.source = data_source::callback;
  note_run_data(callback, nullptr);
  CHECK_FALSE(manifest_of(callback, 5, 40, 1.0, {}).data.has_value());
}
