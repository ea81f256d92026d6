// Output paths a careless or hostile user gives: a symbolic link, a device, a named pipe, one path
// named by two output flags, an output that is an input, and a NAME.tmp beside the output. Each is
// refused (exit 2, naming the flag and what the path is) and left as it was, before any work.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// train gpt-tiny on a small text for one step, pipelined so --trace is allowed.
std::vector<std::string> tiny_train(const fs::path& text) {
  return {"train", "--model", "gpt-tiny", "--data", text.string(), "--steps", "1",
          "--schedule", "1f1b", "--stages", "2", "--eval-windows", "1"};
}

const std::vector<std::string> tiny_simulate{"simulate", "--schedule", "1f1b", "--stages", "2",
                                             "--microbatches", "4"};

}  // namespace

TEST_CASE("every output flag refuses a symbolic link and leaves the link and its file as they were",
          "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  write_file(dir / "real", "precious");
  fs::create_symlink(dir / "real", dir / "link");
  const std::string link = dir / "link";
  const std::vector<std::pair<std::vector<std::string>, std::string>> runs{
      {with(tiny_train(dir / "text.txt"), {"--save", link}), "--save"},
      {with(tiny_train(dir / "text.txt"), {"--metrics", link}), "--metrics"},
      {with(tiny_train(dir / "text.txt"), {"--trace", link}), "--trace"},
      {with(tiny_train(dir / "text.txt"), {"--print-plan", link}), "--print-plan"},
      {with(tiny_simulate, {"--trace", link}), "--trace"},
      {with(tiny_simulate, {"--svg", link}), "--svg"},
      {{"profile", "--model", "mlp", "--out", link}, "--out"},
  };
  for (const auto& [args, flag] : runs) {
    const cli_result r = run_cli(args);
    INFO(flag << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, flag));
    CHECK(contains(r.err, link + ": it is a symbolic link"));
    CHECK(fs::is_symlink(dir / "link"));
    CHECK(read_file(dir / "real") == "precious");
  }
}

TEST_CASE("a device or a named pipe as an output is refused at once and stays what it was",
          "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  REQUIRE(::mkfifo((dir / "pipe").c_str(), 0600) == 0);
  const std::vector<std::pair<std::vector<std::string>, std::string>> runs{
      {with(tiny_train(dir / "text.txt"), {"--save", "/dev/null"}), "/dev/null: it is a device"},
      {with(tiny_train(dir / "text.txt"), {"--metrics", "/dev/null"}), "/dev/null: it is a device"},
      {with(tiny_simulate, {"--svg", "/dev/null"}), "/dev/null: it is a device"},
      {{"profile", "--model", "mlp", "--out", "/dev/null"}, "/dev/null: it is a device"},
      {with(tiny_simulate, {"--trace", dir / "pipe"}), "pipe: it is a named pipe"},
      {with(tiny_train(dir / "text.txt"), {"--metrics", dir / "pipe"}), "pipe: it is a named pipe"},
  };
  for (const auto& [args, says] : runs) {
    const cli_result r = run_cli(args);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, says));
    CHECK(contains(r.err, "not a regular file"));
  }
  struct stat st {};
  REQUIRE(::stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  CHECK(fs::is_fifo(dir / "pipe"));
}

TEST_CASE("one path named by two outputs, or an output that is an input, is refused naming both",
          "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  write_file(dir / "out", "earlier checkpoint");
  const std::string out = dir / "out";
  struct bad_case {
    std::vector<std::string> args;
    std::string flag, other;
  };
  const std::vector<bad_case> cases{
      {with(tiny_train(dir / "text.txt"), {"--save", out, "--trace", out}), "--trace", "--save"},
      {with(tiny_train(dir / "text.txt"), {"--save", out, "--metrics", dir / "./out"}),
       "--metrics", "--save"},
      {with(tiny_train(dir / "text.txt"), {"--metrics", dir / "text.txt"}), "--metrics", "--data"},
      {with(tiny_train(dir / "text.txt"), {"--trace", "t.json", "--compare-sim", "--print-plan",
                                           "t.sim.json"}),
       "--print-plan", "--compare-sim"},
      {with(tiny_simulate, {"--trace", out, "--svg", out}), "--svg", "--trace"},
  };
  for (const auto& c : cases) {
    const cli_result r = run_cli(c.args);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, c.flag));
    CHECK(contains(r.err, "is also the " + c.other + " file") !=
          contains(r.err, "is the " + c.other + " input"));
  }
  CHECK(read_file(dir / "out") == "earlier checkpoint");
  CHECK(read_file(dir / "text.txt") == small_text());
}

TEST_CASE("an output naming the schedule file is refused and the file is left as it was", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const cli_result shown = run_cli({"schedule", "--schedule", "1f1b", "--stages", "2", "--microbatches", "4"});
  REQUIRE(shown.exit_code == 0);
  const std::string file = dir / "1f1b.txt";
  write_file(file, shown.out);
  const std::vector<std::string> train{"train", "--model", "gpt-tiny", "--data", dir / "text.txt",
                                       "--steps", "1", "--eval-windows", "1", "--schedule-file", file};
  const std::vector<std::string> simulate{"simulate", "--schedule-file", file};
  for (const auto& [args, flag] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {with(train, {"--trace", file}), "--trace"},
           {with(train, {"--save", file}), "--save"},
           {with(train, {"--metrics", file}), "--metrics"},
           {with(simulate, {"--trace", file}), "--trace"},
           {with(simulate, {"--svg", file}), "--svg"}}) {
    const cli_result r = run_cli(args);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, flag));
    CHECK(contains(r.err, "is the --schedule-file input"));
    CHECK(read_file(file) == shown.out);
  }
  // The file itself still trains and simulates.
  CHECK(run_cli(with(train, {"--trace", dir / "t.json"})).exit_code == 0);
  CHECK(run_cli(with(simulate, {"--svg", dir / "s.svg"})).exit_code == 0);
}

TEST_CASE("writing an output leaves a file named like its temporary alone and leaves no temporary",
          "[cli]") {
  scratch_dir dir;
  write_file(dir / "t.json.tmp", "mine");
  write_file(dir / "t.svg.tmp", "mine too");
  const cli_result r =
      run_cli(with(tiny_simulate, {"--trace", dir / "t.json", "--svg", dir / "t.svg"}));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(read_file(dir / "t.json.tmp") == "mine");
  CHECK(read_file(dir / "t.svg.tmp") == "mine too");
  CHECK(pipeworks::test::names_in(dir.path()) ==
        std::vector<std::string>{"t.json", "t.json.tmp", "t.svg", "t.svg.tmp"});
}

TEST_CASE("an output inside the checkpoint directory a run reads or writes is refused", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::string ck = dir / "ck";
  std::vector<std::string> two_steps = tiny_train(dir / "text.txt");
  two_steps[6] = "2";  // --steps
  const cli_result first =
      run_cli(with(two_steps, {"--save-every", "1", "--checkpoint-dir", ck}));
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  const fs::path step = fs::path(ck) / "step-00000001";
  const std::string rank1 = read_file(step / "rank-1.safetensors");
  const std::string manifest = read_file(step / "manifest.json");
  struct bad_case {
    std::vector<std::string> args;
    std::string flag, dir_flag;
  };
  const std::vector<bad_case> cases{
      {{"train", "--resume", ck, "--save", step / "rank-1.safetensors"}, "--save", "--resume"},
      {{"train", "--resume", ck, "--metrics", step / "manifest.json"}, "--metrics", "--resume"},
      {{"train", "--resume", ck, "--trace", dir / "ck/t.json"}, "--trace", "--resume"},
      {with(tiny_train(dir / "text.txt"), {"--init", ck, "--save", step / "rank-0.safetensors"}),
       "--save", "--init"},
      {with(tiny_train(dir / "text.txt"), {"--save-every", "1", "--checkpoint-dir", dir / "ck2",
                                           "--save", dir / "ck2/w.safetensors"}),
       "--save", "--checkpoint-dir"},
  };
  fs::create_directory(dir / "ck2");
  for (const auto& c : cases) {
    const cli_result r = run_cli(c.args);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, c.flag));
    CHECK(contains(r.err, "inside the " + c.dir_flag + " directory"));
  }
  CHECK(read_file(step / "rank-1.safetensors") == rank1);
  CHECK(read_file(step / "manifest.json") == manifest);
  CHECK_FALSE(fs::exists(dir / "ck/t.json"));
  CHECK(fs::is_empty(dir / "ck2"));
}

TEST_CASE("an output inside the --data directory is refused and the data is left as it was", "[cli]") {
  scratch_dir dir;
  fs::create_directory(dir / "data");
  write_file(dir / "data/a.txt", small_text());
  write_file(dir / "data/b.txt", small_text());
  for (const std::string flag : {"--save", "--metrics"}) {
    const cli_result r = run_cli({"train", "--model", "gpt-tiny", "--data", dir / "data", "--steps", "1",
                                  "--sample", "0", "--eval-windows", "1", flag, dir / "data/b.txt"});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, flag));
    CHECK(contains(r.err, "inside the --data directory"));
  }
  CHECK(read_file(dir / "data/b.txt") == small_text());
}

TEST_CASE("an output name too long for its temporary is refused before the run", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::string name = std::string(245, 'y') + ".st";  // a legal name; its temporary is not
  const cli_result r = run_cli(with(tiny_train(dir / "text.txt"), {"--save", dir / name}));
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--save"));
  CHECK(contains(r.err, "choose a name of at most"));
  CHECK(pipeworks::test::names_in(dir.path()) == std::vector<std::string>{"text.txt"});
}
