// Every JSON input nested tens of thousands of levels deep (which once overflowed the stack)
// ends with a message that names the file and the nesting, and the exit code of any bad input of
// its kind: 2 for the flags' files (costs, run plan, model, profile, cluster), 1 for a checkpoint
// (eval's convention for a file that cannot be loaded).
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;

namespace {

std::string deep_array(int levels) {
  return std::string(static_cast<std::size_t>(levels), '[') +
         std::string(static_cast<std::size_t>(levels), ']');
}

}  // namespace

TEST_CASE("JSON inputs nested 60000 levels deep end in an error naming the file and the nesting", "[cli]") {
  scratch_dir dir;
  const std::string deep = deep_array(60000);
  write_file(dir / "deep.json", deep);
  write_file(dir / "model.json", "{\"type\": " + deep + "}");
  write_file(dir / "profile.json", four_layers);
  write_file(dir / "cluster.json", two_devices);
  // A safetensors file: the header's length (8 bytes, little-endian), then the header.
  std::string st(8, '\0');
  for (int i = 0; i < 8; ++i) st[i] = static_cast<char>((deep.size() >> (8 * i)) & 0xff);
  write_file(dir / "deep.safetensors", st + deep);
  struct input_case {
    std::vector<std::string> args;
    std::string file;
    int exit_code = 2;
  };
  const std::vector<input_case> cases{
      {{"simulate", "--schedule", "1f1b", "--stages", "2", "--microbatches", "2", "--costs",
        dir / "deep.json"},
       "deep.json"},
      {{"train", "--plan", dir / "deep.json"}, "deep.json"},
      {{"train", "--model", dir / "model.json", "--data", "/usr/share/games/fortunes", "--steps",
        "1"},
       "model.json"},
      {{"plan", "--profile", dir / "deep.json", "--cluster", dir / "cluster.json"}, "deep.json"},
      {{"plan", "--profile", dir / "profile.json", "--cluster", dir / "deep.json"}, "deep.json"},
      {{"eval", "--model", "gpt-tiny", "--checkpoint", dir / "deep.safetensors", "--text",
        "/usr/share/games/fortunes", "--windows", "4"},
       "deep.safetensors: the header", 1},
  };
  for (const auto& c : cases) {
    const cli_result r = run_cli(c.args);
    INFO(c.args[0] << " " << c.args[1] << ": exit " << r.exit_code << ": " << r.err);
    CHECK(r.exit_code == c.exit_code);
    CHECK(contains(r.err, c.file));
    CHECK(contains(r.err, "deeper than 128 levels"));
  }
}
