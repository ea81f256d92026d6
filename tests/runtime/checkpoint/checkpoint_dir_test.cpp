// Tests for runtime/checkpoint/checkpoint_dir: names, a checkpoint written and read back, which
// steps count as complete, the refusals of prepare_checkpoint_dir and prepare_step_dir, and
// pruning that keeps the newest K and touches nothing else.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "ops/checkpoint/safetensors.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "tests/scratch_dir.hpp"

using namespace pipeworks;
namespace fs = std::filesystem;

namespace {

using test::names_in;

struct temp_dir {
  fs::path path = fs::temp_directory_path() /
                  ("pipeworks_checkpoint_dir_test_" + std::to_string(std::random_device{}()));
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() { fs::remove_all(path); }
  std::string str() const { return path.string(); }
};

// A complete checkpoint of `step` with `ranks` rank files holding one small tensor each.
checkpoint_manifest write_checkpoint(const std::string& dir, std::int64_t step, int ranks = 2) {
  REQUIRE(prepare_step_dir(dir, step).ok());
  checkpoint_manifest m;
  m.step = step;
  m.data_position = step;
  m.plan = {{"schedule", {{"kind", "1f1b"}}}};
  m.rng = nlohmann::json::object();
  m.metrics = {{"samples", step * 8}};
  for (int r = 0; r < ranks; ++r) {
    const std::vector<float> w(16, static_cast<float>(step + r));
    const std::vector<safetensors_entry> e = {entry_of("h.0.w", {4, 4}, std::span(w))};
    const std::string name = rank_file_name(r);
    auto written = write_safetensors((fs::path(step_dir(dir, step)) / name).string(), e);
    REQUIRE(written.ok());
    m.files.push_back({r, name, written->bytes, written->sha256});
  }
  REQUIRE(write_manifest(dir, m).ok());
  return m;
}

}  // namespace

TEST_CASE("step directories and rank files have zero-padded names", "[runtime][checkpoint]") {
  CHECK(step_dir_name(10) == "step-00000010");
  CHECK(step_dir_name(0) == "step-00000000");
  CHECK(step_dir_name(123456789) == "step-123456789");
  CHECK(step_dir("/ck", 7) == "/ck/step-00000007");
  CHECK(rank_file_name(3) == "rank-3.safetensors");
}

TEST_CASE("a checkpoint written with write_manifest reads back and verifies",
          "[runtime][checkpoint]") {
  temp_dir d;
  const checkpoint_manifest m = write_checkpoint(d.str(), 10, 3);
  CHECK(names_in(step_dir(d.str(), 10)) ==
        std::vector<std::string>{"manifest.json", "rank-0.safetensors", "rank-1.safetensors",
                                 "rank-2.safetensors"});
  auto back = read_manifest(d.str(), 10);
  REQUIRE(back.ok());
  CHECK(to_json(*back) == to_json(m));
  CHECK(verify_files(*back, step_dir(d.str(), 10)).ok());
  CHECK(latest_complete(d.str()).value() == 10);
}

TEST_CASE("complete_steps lists step directories with a readable manifest in order",
          "[runtime][checkpoint]") {
  temp_dir d;
  write_checkpoint(d.str(), 30);
  write_checkpoint(d.str(), 10);
  write_checkpoint(d.str(), 20);
  fs::create_directories(step_dir(d.str(), 40));  // cut short: no manifest
  fs::create_directories(step_dir(d.str(), 50));
  std::ofstream(fs::path(step_dir(d.str(), 50)) / "manifest.json") << "{ half written";
  fs::create_directories(d.path / "step-60");  // not a name pipeworks writes
  fs::create_directories(d.path / "notes");
  std::ofstream(d.path / "step-00000070") << "a file, not a directory";
  auto steps = complete_steps(d.str());
  REQUIRE(steps.ok());
  CHECK(*steps == std::vector<std::int64_t>{10, 20, 30});
  // A manifest is written whole, so one that does not read back was damaged: the newest one is
  // named, with the older checkpoint to fall back on, never passed over in silence.
  auto damaged = latest_complete(d.str());
  REQUIRE_FALSE(damaged.ok());
  CHECK_THAT(damaged.message(), Catch::Contains("step-00000050/manifest.json") &&
                                    Catch::Contains("damaged") &&
                                    Catch::Contains("checkpoint of step 30"));
  fs::remove_all(step_dir(d.str(), 50));
  CHECK(latest_complete(d.str()).value() == 30);
}

TEST_CASE("complete_steps and latest_complete name a missing or empty directory",
          "[runtime][checkpoint]") {
  temp_dir d;
  const std::string missing = (d.path / "nope").string();
  auto steps = complete_steps(missing);
  REQUIRE_FALSE(steps.ok());
  CHECK_THAT(steps.message(), Catch::Contains(missing) && Catch::Contains("does not exist"));

  auto none = latest_complete(d.str());
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.message(), Catch::StartsWith(d.str() + " holds no complete checkpoint (no "
                                                         "step-*/manifest.json)"));
  fs::create_directories(step_dir(d.str(), 5));
  auto cut_short = latest_complete(d.str());
  REQUIRE_FALSE(cut_short.ok());
  CHECK_THAT(cut_short.message(), Catch::Contains("step-00000005 was cut short"));
}

TEST_CASE("read_manifest names a missing manifest and one that records another step",
          "[runtime][checkpoint]") {
  temp_dir d;
  fs::create_directories(step_dir(d.str(), 3));
  auto missing = read_manifest(d.str(), 3);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.message(),
             Catch::Contains(step_dir(d.str(), 3) + "/manifest.json does not exist"));

  write_checkpoint(d.str(), 4);
  fs::rename(step_dir(d.str(), 4), step_dir(d.str(), 8));
  auto moved = read_manifest(d.str(), 8);
  REQUIRE_FALSE(moved.ok());
  CHECK_THAT(moved.message(), Catch::Contains("step-00000008/manifest.json: step is 4"));
  CHECK(complete_steps(d.str()).value().empty());
}

TEST_CASE("write_manifest refuses a manifest that would not read back", "[runtime][checkpoint]") {
  temp_dir d;
  checkpoint_manifest m = write_checkpoint(d.str(), 1);
  REQUIRE(prepare_step_dir(d.str(), 2).ok());
  m.step = 2;
  m.files[1].rank = 0;
  const status s = write_manifest(d.str(), m);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.message(), Catch::Contains("files[1].rank 0 appears twice"));
  CHECK(fs::is_empty(step_dir(d.str(), 2)));
}

TEST_CASE("prepare_checkpoint_dir creates the directory and refuses to mix runs",
          "[runtime][checkpoint]") {
  temp_dir d;
  const std::string dir = (d.path / "a" / "b" / "ckpt").string();
  REQUIRE(prepare_checkpoint_dir(dir, false).ok());
  CHECK(fs::is_directory(dir));
  REQUIRE(prepare_checkpoint_dir(dir, false).ok());  // empty: still a fresh start

  fs::create_directories(step_dir(dir, 20));  // even an incomplete one counts
  write_checkpoint(dir, 10);
  const status s = prepare_checkpoint_dir(dir, false);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message() == dir + " already holds checkpoints (step-00000010, step-00000020): continue "
                             "that run with --resume " + dir +
                             ", or choose another --checkpoint-dir");
  CHECK(prepare_checkpoint_dir(dir, true).ok());

  const std::string file = (d.path / "plain").string();
  std::ofstream(file) << "x";
  const status f = prepare_checkpoint_dir(file, true);
  REQUIRE_FALSE(f.ok());
  CHECK_THAT(f.message(), Catch::Contains(file + " exists and is not a directory"));
}

TEST_CASE("prepare_step_dir clears a checkpoint cut short of its files and never overwrites a complete one",
          "[runtime][checkpoint]") {
  temp_dir d;
  REQUIRE(prepare_step_dir(d.str(), 7).ok());
  CHECK(fs::is_directory(step_dir(d.str(), 7)));
  std::ofstream(fs::path(step_dir(d.str(), 7)) / "rank-0.safetensors") << "partial";
  fs::create_directories(fs::path(step_dir(d.str(), 7)) / "junk" / "deeper");
  REQUIRE(prepare_step_dir(d.str(), 7).ok());
  // The partial rank file goes; a directory pipeworks never writes stays, with what it holds
  // (issue 31: only pipeworks' own files are removed).
  CHECK(names_in(step_dir(d.str(), 7)) == std::vector<std::string>{"junk"});
  CHECK(fs::is_directory(fs::path(step_dir(d.str(), 7)) / "junk" / "deeper"));

  const checkpoint_manifest m = write_checkpoint(d.str(), 8);
  const status s = prepare_step_dir(d.str(), 8);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.message(), Catch::Contains(step_dir(d.str(), 8) + " already holds a checkpoint") &&
                              Catch::Contains("never overwritten"));
  CHECK(verify_files(m, step_dir(d.str(), 8)).ok());

  std::ofstream(d.path / step_dir_name(9)) << "a file";
  const status f = prepare_step_dir(d.str(), 9);
  REQUIRE_FALSE(f.ok());
  CHECK_THAT(f.message(), Catch::Contains(step_dir(d.str(), 9) + " exists and is not a directory"));
}

TEST_CASE("prune_checkpoints keeps the newest K and what it does not own",
          "[runtime][checkpoint]") {
  temp_dir d;
  for (std::int64_t step : {10, 20, 30, 40, 50}) write_checkpoint(d.str(), step);
  fs::create_directories(step_dir(d.str(), 25));  // incomplete, older than the newest: goes
  fs::create_directories(step_dir(d.str(), 60));  // incomplete, newer: may be being written
  fs::create_directories(d.path / "step-5");
  fs::create_directories(d.path / "notes");

  REQUIRE(prune_checkpoints(d.str(), 0).ok());  // keep all
  CHECK(names_in(d.path).size() == 9);

  REQUIRE(prune_checkpoints(d.str(), 2).ok());
  CHECK(names_in(d.path) == std::vector<std::string>{"notes", "step-00000040", "step-00000050",
                                                     "step-00000060", "step-5"});
  CHECK(complete_steps(d.str()).value() == std::vector<std::int64_t>{40, 50});

  REQUIRE(prune_checkpoints(d.str(), 1).ok());
  CHECK(names_in(d.path) ==
        std::vector<std::string>{"notes", "step-00000050", "step-00000060", "step-5"});
  CHECK(verify_files(read_manifest(d.str(), 50).value(), step_dir(d.str(), 50)).ok());
}

TEST_CASE("prune_checkpoints leaves incomplete checkpoints alone when none is complete",
          "[runtime][checkpoint]") {
  temp_dir d;
  fs::create_directories(step_dir(d.str(), 1));
  fs::create_directories(step_dir(d.str(), 2));
  REQUIRE(prune_checkpoints(d.str(), 1).ok());
  CHECK(names_in(d.path) == std::vector<std::string>{"step-00000001", "step-00000002"});
  const status missing = prune_checkpoints((d.path / "nope").string(), 1);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.message(), Catch::Contains((d.path / "nope").string()));
}

TEST_CASE("prune_kept_steps removes a worker's step directories that the driver no longer keeps",
          "[runtime][checkpoint]") {
  temp_dir d;
  for (std::int64_t step : {10, 20, 25, 30, 40}) fs::create_directories(step_dir(d.str(), step));
  fs::create_directories(d.path / "notes");
  REQUIRE(prune_kept_steps(d.str(), {}).ok());  // the driver keeps all: nothing goes
  CHECK(names_in(d.path).size() == 6);
  // The driver keeps 20 and 30: older and between go, 40 (being written) stays.
  REQUIRE(prune_kept_steps(d.str(), {20, 30}).ok());
  CHECK(names_in(d.path) ==
        std::vector<std::string>{"notes", "step-00000020", "step-00000030", "step-00000040"});
  REQUIRE(prune_kept_steps((d.path / "absent").string(), {20}).ok());
}

TEST_CASE("write_manifest makes the step directory when every file is elsewhere", "[runtime][checkpoint]") {
  temp_dir d;
  checkpoint_manifest m;
  m.step = 30;
  m.files = {{0, "rank-0.safetensors", 10, std::string(64, 'a'), "10.0.0.2", "/scratch/run-1/step-00000030"}};
  REQUIRE(write_manifest(d.str(), m).ok());
  CHECK(read_manifest(d.str(), 30).value().files.at(0).host == "10.0.0.2");
  CHECK(complete_steps(d.str()).value() == std::vector<std::int64_t>{30});
}

TEST_CASE("a symbolic link or a file named like a step directory is refused, never written through",
          "[runtime][checkpoint]") {
  test::scratch_dir scratch;
  const fs::path root = scratch.path();
  fs::create_directories(root / "other");
  std::ofstream(root / "other" / "rank-0.safetensors") << "precious";
  // A new run's directory holding a link to another directory, named like step 2: refused before
  // anything is written, and the files it points at are left as they were.
  fs::create_directories(root / "ck");
  fs::create_directory_symlink(root / "other", root / "ck" / "step-00000002");
  const status linked = prepare_checkpoint_dir((root / "ck").string(), false);
  REQUIRE_FALSE(linked.ok());
  CHECK_THAT(linked.message(), Catch::Contains("step-00000002 is a symbolic link") &&
                                   Catch::Contains("--checkpoint-dir"));
  CHECK_FALSE(prepare_checkpoint_dir((root / "ck").string(), true).ok());  // resuming too
  // Where a rank writes its file: the same link is refused at that moment too.
  const status own = make_own_step_dir((root / "ck" / "step-00000002").string());
  REQUIRE_FALSE(own.ok());
  CHECK_THAT(own.message(), Catch::Contains("is a symbolic link"));
  std::ifstream in(root / "other" / "rank-0.safetensors");
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(kept == "precious");
  // A plain file so named: refused by name, not found when step 4 is written.
  fs::create_directories(root / "ck2");
  std::ofstream(root / "ck2" / "step-00000004") << "mine";
  const status file = prepare_checkpoint_dir((root / "ck2").string(), false, "--out");
  REQUIRE_FALSE(file.ok());
  CHECK_THAT(file.message(), Catch::Contains("step-00000004 is not a directory") &&
                                 Catch::Contains("--out"));
  CHECK(make_own_step_dir((root / "ck2" / "step-00000006").string()).ok());
  CHECK(fs::is_directory(root / "ck2" / "step-00000006"));
}
