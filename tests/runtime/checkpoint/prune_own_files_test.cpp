// Issue 31, item 1: pruning and clearing checkpoints remove only what pipeworks wrote, by name
// (manifest.json, rank-R.safetensors, their temporaries), and name a step directory left for more.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "tests/runtime/checkpoint/checkpoint_fixture.hpp"
#include "tests/scratch_dir.hpp"

using namespace pipeworks;
using pipeworks::test::files_under;
using pipeworks::test::names_in;
using pipeworks::test::scratch_dir;
using pipeworks::test::write_small_checkpoint;
namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("prune_checkpoints removes only pipeworks' files and leaves a step directory holding more",
          "[runtime][checkpoint]") {
  scratch_dir d("pipeworks-prune-own");
  const std::string dir = d.path().string();
  for (std::int64_t step : {5, 10, 15, 20}) write_small_checkpoint(dir, step);
  // The case: a step directory without a manifest holding a user's file.
  write_text(fs::path(step_dir(dir, 3)) / "sub" / "p.txt", "precious");
  // A complete checkpoint the user added notes to, and names that only look like pipeworks'.
  const fs::path ten = step_dir(dir, 10);
  write_text(ten / "notes.txt", "why step 10 matters");
  write_text(ten / "rank-01.safetensors", "not a name pipeworks writes");
  write_text(ten / "manifest.json.bak", "a copy");
  fs::create_directories(ten / "rank-7.safetensors");  // a directory, not a rank file
  write_text(ten / "rank-7.safetensors" / "inside", "kept");
  write_text(fs::path(step_dir(dir, 5)) / ".rank-0.safetensors.tmp.host.123.4", "a temporary");
  write_text(fs::path(step_dir(dir, 5)) / ".manifest.json.tmp.other-host.9.0", "a temporary");
  write_text(d.path() / "notes.txt", "beside the steps");

  REQUIRE(prune_checkpoints(dir, 1).ok());

  CHECK(names_in(dir) == std::vector<std::string>{"notes.txt", "step-00000003", "step-00000010",
                                                  "step-00000020"});
  // Nothing the user put there was lost; every file pipeworks wrote in a pruned step went.
  CHECK(files_under(step_dir(dir, 3)) ==
        std::map<std::string, std::string>{{"sub/p.txt", "precious"}});
  CHECK(files_under(ten) == std::map<std::string, std::string>{
                                {"manifest.json.bak", "a copy"},
                                {"notes.txt", "why step 10 matters"},
                                {"rank-01.safetensors", "not a name pipeworks writes"},
                                {"rank-7.safetensors/inside", "kept"}});
  CHECK(complete_steps(dir).value() == std::vector<std::int64_t>{20});
  CHECK(verify_files(read_manifest(dir, 20).value(), step_dir(dir, 20)).ok());

  // The directories left are named, with what they hold.
  auto left = foreign_step_dirs(dir);
  REQUIRE(left.ok());
  REQUIRE(left->size() == 2);
  CHECK((*left)[0] == step_dir(dir, 3) + " (it holds sub, which pipeworks did not write)");
  CHECK_THAT((*left)[1], Catch::StartsWith(step_dir(dir, 10) + " (it holds manifest.json.bak, "
                                                               "notes.txt, rank-01.safetensors, ..."));

  // Pruning again changes nothing: what it leaves stays left.
  const auto before = files_under(dir);
  REQUIRE(prune_checkpoints(dir, 1).ok());
  CHECK(files_under(dir) == before);
}

TEST_CASE("prune_checkpoints leaves a symbolic link named like a rank file and what it points to",
          "[runtime][checkpoint]") {
  scratch_dir d("pipeworks-prune-link");
  const std::string dir = (d.path() / "ck").string();
  write_small_checkpoint(dir, 1);
  write_small_checkpoint(dir, 2);
  write_text(d.path() / "elsewhere.bin", "the user's");
  fs::create_symlink(d.path() / "elsewhere.bin", fs::path(step_dir(dir, 1)) / "rank-5.safetensors");
  REQUIRE(prune_checkpoints(dir, 1).ok());
  CHECK(names_in(step_dir(dir, 1)) == std::vector<std::string>{"rank-5.safetensors"});
  CHECK(fs::is_symlink(fs::path(step_dir(dir, 1)) / "rank-5.safetensors"));
  CHECK(files_under(d.path()).at("elsewhere.bin") == "the user's");
}

TEST_CASE("prepare_step_dir clears a checkpoint cut short of pipeworks' files only",
          "[runtime][checkpoint]") {
  scratch_dir d("pipeworks-prepare-own");
  const std::string dir = d.path().string();
  const fs::path seven = step_dir(dir, 7);
  write_text(seven / "rank-0.safetensors", "partial");
  write_text(seven / ".rank-1.safetensors.tmp.host.55.0", "partial");
  write_text(seven / "sub" / "p.txt", "precious");
  REQUIRE(prepare_step_dir(dir, 7).ok());
  CHECK(files_under(seven) == std::map<std::string, std::string>{{"sub/p.txt", "precious"}});
  // The checkpoint is written beside it, and pruning it later leaves the user's file again.
  write_small_checkpoint(dir, 9);
  REQUIRE(prune_checkpoints(dir, 1).ok());
  CHECK(files_under(seven) == std::map<std::string, std::string>{{"sub/p.txt", "precious"}});
}

TEST_CASE("prune_kept_steps removes a worker's own files and names a step directory holding more",
          "[runtime][checkpoint]") {
  scratch_dir d("pipeworks-prune-worker");
  const std::string dir = d.path().string();
  for (std::int64_t step : {10, 20, 30}) write_text(fs::path(step_dir(dir, step)) / "rank-1.safetensors", "w");
  write_text(fs::path(step_dir(dir, 10)) / "sub" / "p.txt", "precious");
  const status s = prune_kept_steps(dir, {30});
  REQUIRE_FALSE(s.ok());  // the worker logs it; its run goes on
  CHECK(s.message() == "left " + step_dir(dir, 10) +
                           " (it holds sub, which pipeworks did not write): only pipeworks' own "
                           "files were removed");
  CHECK(names_in(dir) == std::vector<std::string>{"step-00000010", "step-00000030"});
  CHECK(files_under(step_dir(dir, 10)) == std::map<std::string, std::string>{{"sub/p.txt", "precious"}});
}
