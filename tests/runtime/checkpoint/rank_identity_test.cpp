// Tests for runtime/checkpoint/rank_identity: the plan fields a rank file records, and the check of
// a checkpoint's rank files against its manifest (a file of another step or rank, a plan edited in
// the manifest), each naming the file and the field, and leaving every file as it was.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "base/sha256.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/checkpoint/rank_identity.hpp"
#include "tests/runtime/checkpoint/checkpoint_fixture.hpp"
#include "tests/scratch_dir.hpp"

using namespace pipeworks;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The metadata rank r's file of `step` carries under plan p.
metadata_map metadata_of(const run_plan& p, int r, std::int64_t step) {
  metadata_map md = rank_identity(p, r);
  md["pipeworks.rank_state"] = json{{"rank", r}, {"step", step}}.dump();
  return md;
}

checkpoint_manifest manifest_for(const run_plan& p, std::int64_t step) {
  checkpoint_manifest m;
  m.step = step;
  m.data_position = step;
  m.plan = json::parse(to_json_text(p));
  return m;
}

}  // namespace

TEST_CASE("rank_identity records each rank's virtual stages and the plan fields",
          "[runtime][checkpoint]") {
  run_plan p = test::small_plan(2, 0);
  p.schedule = schedule_kind::interleaved;
  p.chunks = 2;
  p.replicas = 2;
  p.data.batch = 16;
  p.split = {0, 1, 2, 3};
  const metadata_map r0 = rank_identity(p, 0), r1 = rank_identity(p, 1), r2 = rank_identity(p, 2);
  CHECK(r0.at("pipeworks.stages") == "[0,2]");
  CHECK(r1.at("pipeworks.stages") == "[1,3]");
  CHECK(r2.at("pipeworks.stages") == "[0,2]");  // replica 1's first device
  CHECK(r0.at("pipeworks.schedule") == "interleaved");
  CHECK(r0.at("pipeworks.optimizer") == "adamw");
  CHECK(r0.at("pipeworks.split") == "[0,1,2,3]");
  CHECK(r0.at("pipeworks.microbatch") == "2");  // 16 samples over 2 replicas x 4 microbatches
  CHECK(r0.at("pipeworks.model") == to_json(p.model).dump());

  run_plan none = test::small_plan(1, 0);
  none.schedule.reset();
  const metadata_map n = rank_identity(none, 0);
  CHECK(n.at("pipeworks.schedule") == "none");
  CHECK(n.at("pipeworks.stages") == "[0]");
  CHECK(n.at("pipeworks.split") == "[0]");
}

TEST_CASE("a rank file's step rank and plan fields are checked against the manifest naming the field",
          "[runtime][checkpoint]") {
  const run_plan plan = test::small_plan(2, 10);
  const metadata_map good = metadata_of(plan, 1, 10);
  CHECK(check_rank_metadata(good, "D/rank-1.safetensors", manifest_for(plan, 10), plan, 1).ok());

  struct refusal {
    const char* what;
    std::function<void(run_plan&)> edit_manifest_plan;
    std::function<void(metadata_map&)> edit_file;
    std::string message;
  };
  const refusal cases[] = {
      {"the optimizer kind", [](run_plan& p) { p.train.optim.kind = optimizer_kind::sgd; }, {},
       "its pipeworks.optimizer (the optimizer kind) is adamw, but the manifest's plan says sgd"},
      {"the microbatch size", [](run_plan& p) { p.data.batch = 16; }, {},
       "its pipeworks.microbatch (samples per microbatch) is 2, but the manifest's plan says 4"},
      {"the schedule", [](run_plan& p) { p.schedule = schedule_kind::gpipe; }, {},
       "its pipeworks.schedule (the schedule) is 1f1b, but the manifest's plan says gpipe"},
      {"the split", [](run_plan& p) { p.split = {0, 2}; }, {},
       "its pipeworks.split (each stage's first block) is [], but the manifest's plan says [0,2]"},
      {"the model", [](run_plan& p) { p.model = *parse_model_spec("gpt-small"); }, {},
       "its pipeworks.model (the model) is"},
      {"the rank's stages", {}, [](metadata_map& md) { md["pipeworks.stages"] = "[0]"; },
       "its pipeworks.stages (the rank's virtual stages) is [0], but the manifest's plan says [1]"},
      {"a field missing", {}, [](metadata_map& md) { md.erase("pipeworks.optimizer"); },
       "its pipeworks.optimizer (the optimizer kind) is nothing"},
      {"another step", {}, [](metadata_map& md) { md["pipeworks.rank_state"] = json{{"rank", 1}, {"step", 5}}.dump(); },
       "D/rank-1.safetensors is a rank file of step 5, but the manifest is of step 10"},
      {"another rank", {}, [](metadata_map& md) { md["pipeworks.rank_state"] = json{{"rank", 0}, {"step", 10}}.dump(); },
       "D/rank-1.safetensors holds the state of rank 0, but the manifest lists it for rank 1"},
      {"no rank state", {}, [](metadata_map& md) { md.erase("pipeworks.rank_state"); },
       "has no \"pipeworks.rank_state\" metadata"},
  };
  for (const refusal& c : cases) {
    INFO(c.what);
    run_plan edited = plan;
    if (c.edit_manifest_plan) c.edit_manifest_plan(edited);
    metadata_map md = good;
    if (c.edit_file) c.edit_file(md);
    const status s = check_rank_metadata(md, "D/rank-1.safetensors", manifest_for(edited, 10), edited, 1);
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.message(), Catch::StartsWith("D/rank-1.safetensors") && Catch::Contains(c.message));
  }
}

TEST_CASE("a rank file of another step copied in with the manifest updated is named with both steps",
          "[runtime][checkpoint]") {
  test::scratch_dir d;
  const std::string dir = d / "ck";
  test::write_small_checkpoint(dir, 10);
  checkpoint_manifest m = test::write_small_checkpoint(dir, 15);
  const std::string copied = (fs::path(step_dir(dir, 15)) / "rank-1.safetensors").string();
  fs::copy_file(fs::path(step_dir(dir, 10)) / "rank-1.safetensors", copied,
                fs::copy_options::overwrite_existing);
  // The manifest's size and sha256 made to match: the files verify.
  auto again = read_manifest(dir, 15);
  REQUIRE(again.ok());
  m = *again;
  fs::remove(fs::path(step_dir(dir, 15)) / manifest_name);
  for (checkpoint_file& f : m.files)
    if (f.rank == 1) {
      f.bytes = fs::file_size(copied);
      f.sha256 = *sha256_file(copied);
    }
  REQUIRE(write_manifest(dir, m).ok());
  REQUIRE(verify_files(m, step_dir(dir, 15)).ok());
  const auto before = test::files_under(dir);

  const status s = check_rank_files(m, step_dir(dir, 15));
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.message(), Catch::StartsWith(copied + " is a rank file of step 10, but the manifest "
                                                     "is of step 15") &&
                              Catch::Contains("put back the rank file of step 15"));
  CHECK(test::files_under(dir) == before);  // nothing was lost or changed
  // The checkpoint of step 10 is whole.
  auto ten = read_manifest(dir, 10);
  REQUIRE(ten.ok());
  CHECK(check_rank_files(*ten, step_dir(dir, 10)).ok());
}

TEST_CASE("read_rank_metadata names a file that is not a safetensors file", "[runtime][checkpoint]") {
  test::scratch_dir d;
  const std::string path = d / "rank-0.safetensors";
  std::ofstream(path, std::ios::binary) << "short";
  auto md = read_rank_metadata(path);
  REQUIRE_FALSE(md.ok());
  CHECK_THAT(md.message(), Catch::Contains(path) && Catch::Contains("too short"));
  std::ofstream(path, std::ios::binary) << std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) << "{}";
  md = read_rank_metadata(path);
  REQUIRE_FALSE(md.ok());
  CHECK_THAT(md.message(), Catch::Contains(path) && Catch::Contains("more than the file holds"));
}
