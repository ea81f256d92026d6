// The checkpoint directory is an output: inside (or as) the --data directory it is refused (exit 2,
// naming the flag and the data), however given, and the data directory is left as it was.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;
namespace fs = std::filesystem;

namespace {

// gpt-tiny on the text files in `data` for two steps, a checkpoint after the first.
std::vector<std::string> train_with_checkpoints(const std::string& data, const std::string& ck) {
  return {"train",         "--model", "gpt-tiny", "--data",       data, "--steps", "2",
          "--eval-windows", "1",      "--sample", "0",            "--save-every", "1",
          "--checkpoint-dir", ck};
}

// The data directory holds its two text files, unchanged, and nothing else.
void check_data_untouched(const scratch_dir& dir) {
  CHECK(pipeworks::test::names_in(dir / "data") == std::vector<std::string>{"a.txt", "b.txt"});
  CHECK(read_file(dir / "data/a.txt") == small_text());
  CHECK(read_file(dir / "data/b.txt") == small_text(5000));
}

void make_data(const scratch_dir& dir) {
  fs::create_directory(dir / "data");
  write_file(dir / "data/a.txt", small_text());
  write_file(dir / "data/b.txt", small_text(5000));
}

}  // namespace

TEST_CASE("a --checkpoint-dir inside the --data directory is refused however the path is spelled",
          "[cli]") {
  scratch_dir dir;
  make_data(dir);
  fs::create_directory_symlink(dir / "data", dir / "link");
  const std::vector<std::string> inside{dir / "data", dir / "data/sub", dir / "data/x/..",
                                        dir / "data/../data/sub", dir / "link/ck"};
  for (const std::string& ck : inside) {
    const cli_result r = run_cli(train_with_checkpoints(dir / "data", ck));
    INFO(ck << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--checkpoint-dir"));
    CHECK(contains(r.err, "the checkpoint directory " + ck));
    CHECK(contains(r.err, "the --data directory " + dir / "data"));
    check_data_untouched(dir);
  }
}

TEST_CASE("a --checkpoint-dir beside the --data directory is still written", "[cli]") {
  scratch_dir dir;
  make_data(dir);
  const std::string ck = dir / "data-ck";  // shares the data directory's name as a prefix
  const cli_result r = run_cli(train_with_checkpoints(dir / "data", ck));
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(has_manifest(ck, 1));
  check_data_untouched(dir);
}

TEST_CASE("a plan whose checkpoint dir lies inside its data directory is refused naming --plan",
          "[cli]") {
  scratch_dir dir;
  make_data(dir);
  std::vector<std::string> print = train_with_checkpoints(dir / "data", dir / "ck");
  print.insert(print.end(), {"--print-plan", dir / "plan.json"});
  const cli_result printed = run_cli(print);
  INFO(printed.err);
  REQUIRE(printed.exit_code == 0);
  nlohmann::json plan = nlohmann::json::parse(read_file(dir / "plan.json"));
  REQUIRE(plan["checkpoint"]["dir"] == dir / "ck");
  plan["checkpoint"]["dir"] = dir / "data/../data/ck";
  write_file(dir / "plan.json", plan.dump(2));
  const cli_result r = run_cli({"train", "--plan", dir / "plan.json"});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--plan"));
  CHECK(contains(r.err, "lies inside the --data directory"));
  check_data_untouched(dir);
  CHECK_FALSE(fs::exists(dir / "ck"));
}
