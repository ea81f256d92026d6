// Issue 31, item 1, through the CLI: `train --resume D --keep 1` removes only the files pipeworks
// wrote in the checkpoints it prunes, and names a step directory it left for what else it holds.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"

using namespace pipeworks::cli_test;
namespace fs = std::filesystem;

TEST_CASE("train --resume --keep 1 leaves a step directory with a user's file and names it", "[cli][checkpoint]") {
  scratch_dir dir;
  const std::string text = dir / "text.txt";
  write_file(text, small_text());
  const std::string ck = dir / "D";
  const cli_result first =
      run_cli({"train", "--model", "gpt-tiny", "--data", text, "--steps", "20", "--save-every", "5",
               "--checkpoint-dir", ck, "--sample", "0", "--eval-windows", "4"});
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  // The steps: step 15 loses its manifest, step 3 holds a user's file.
  fs::remove(fs::path(ck) / "step-00000015" / "manifest.json");
  fs::create_directories(fs::path(ck) / "step-00000003" / "sub");
  write_file(fs::path(ck) / "step-00000003" / "sub" / "p.txt", "precious\n");
  write_file(fs::path(ck) / "step-00000005" / "notes.txt", "step 5 was a good one\n");

  const cli_result r = run_cli({"train", "--resume", ck, "--keep", "1", "--sample", "0"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.exit_code == 0);
  // Nothing the user wrote was lost.
  CHECK(read_file(fs::path(ck) / "step-00000003" / "sub" / "p.txt") == "precious\n");
  CHECK(read_file(fs::path(ck) / "step-00000005" / "notes.txt") == "step 5 was a good one\n");
  CHECK(pipeworks::test::names_in(fs::path(ck) / "step-00000005") ==
        std::vector<std::string>{"notes.txt"});
  // Each left directory is named, with what it holds.
  CHECK(contains(r.err, "--keep left " + ck + "/step-00000003 (it holds sub, which pipeworks did "
                        "not write)"));
  CHECK(contains(r.err, "--keep left " + ck + "/step-00000005 (it holds notes.txt, which "
                        "pipeworks did not write)"));
  // Pipeworks' own checkpoints are pruned to the newest, which the resumed run wrote again.
  CHECK(pipeworks::test::names_in(ck) ==
        std::vector<std::string>{"step-00000003", "step-00000005", "step-00000015"});
  CHECK(pipeworks::complete_steps(ck).value() == std::vector<std::int64_t>{15});
  const cli_result inspect = run_cli({"checkpoint", "inspect", ck});
  INFO(inspect.err);
  CHECK(inspect.exit_code == 0);
  CHECK(contains(inspect.out, "step 15"));
}
