// Careless and hostile values a new user might give: numbers that would wrap or exhaust the
// machine, a model file with the wrong JSON type, and named pipes where data files belong (which
// would block forever). Each ends at once with a message naming what was wrong.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;

namespace {

std::vector<std::string> mlp_train(std::vector<std::string> more) {
  std::vector<std::string> a{"train", "--model", "mlp", "--data", fashion_mnist_dir, "--steps", "1"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

}  // namespace

TEST_CASE("values that would wrap or exhaust the machine exit 2 naming the flag and the range",
          "[cli]") {
  scratch_dir dir;
  write_file(dir / "type5.json", R"({"type": 5})");
  struct bad_case {
    std::vector<std::string> args;
    std::string names;
  };
  const std::vector<bad_case> cases{
      {mlp_train({"--seed", "-1"}), "--seed: must be a whole number in 0..2^64-1"},
      {mlp_train({"--seed", "18446744073709551616"}), "--seed: must be a whole number in 0..2^64-1"},
      {mlp_train({"--threads", "2147483647"}), "--threads: must be a whole number in 0..4096"},
      {{"profile", "--model", "mlp", "--threads", "100000"}, "--threads"},
      {{"profile", "--model", "mlp", "--out", dir / "p.json", "--repeats", "2147483647"},
       "--repeats: must be a whole number in 1..100000, got '2147483647'"},
      {mlp_train({"--schedule", "1f1b", "--stages", "2", "--inject-fault", "kill@0F1:9999999"}),
       "the replica 9999999 is out of range"},
      {{"train", "--model", dir / "type5.json", "--data", "/usr/share/games/fortunes", "--steps",
        "1"},
       "\"type\" must be \"gpt\" or \"mlp\", not 5"},
  };
  for (const auto& c : cases) {
    const cli_result r = run_cli(c.args);
    INFO(c.args[c.args.size() - 1] << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, c.names));
  }
  // The largest seed is a seed like any other.
  CHECK(run_cli(mlp_train({"--seed", "18446744073709551615"})).exit_code == 0);
}

TEST_CASE("a named pipe given as training or evaluation data is refused instead of read forever",
          "[cli]") {
  scratch_dir dir;
  REQUIRE(::mkfifo((dir / "pipe").c_str(), 0600) == 0);
  std::filesystem::create_directories(dir.path() / "fm");
  REQUIRE(::mkfifo((dir / "fm/train-images-idx3-ubyte.gz").c_str(), 0600) == 0);
  const cli_result text = run_cli({"train", "--model", "gpt-tiny", "--data", dir / "pipe",
                                   "--steps", "1"});
  INFO(text.err);
  CHECK(text.exit_code == 1);
  CHECK(contains(text.err, dir / "pipe"));
  CHECK(contains(text.err, "is a named pipe"));
  const cli_result images = run_cli({"train", "--model", "mlp", "--data", dir / "fm", "--steps", "1"});
  INFO(images.err);
  CHECK(images.exit_code == 1);
  CHECK(contains(images.err, "train-images-idx3-ubyte.gz is not a regular file"));
}

TEST_CASE("a named pipe or a device given as a JSON input or a checkpoint is refused instead of read",
          "[cli]") {
  scratch_dir dir;
  REQUIRE(::mkfifo((dir / "pipe.json").c_str(), 0600) == 0);
  const std::string pipe = dir / "pipe.json";
  const std::vector<std::vector<std::string>> cases{
      {"plan", "--profile", pipe},
      {"plan", "--profile", "/dev/zero"},
      {"simulate", "--schedule", "1f1b", "--stages", "4", "--microbatches", "8", "--costs", pipe},
      {"simulate", "--schedule", "1f1b", "--stages", "4", "--microbatches", "8", "--costs", "/dev/zero"},
      {"train", "--plan", pipe},
      {"train", "--model", pipe},
      {"train", "--model", "gpt-tiny", "--steps", "1", "--auto-partition", "--cluster", pipe},
      {"train", "--model", "gpt-tiny", "--steps", "1", "--init", pipe},
      {"profile", "--model", pipe, "--out", dir / "p.json"},
  };
  for (const auto& args : cases) {
    const cli_result r = run_cli(args);  // a blocking open would never return
    INFO(args[0] << " " << args[1] << ": " << r.err);
    CHECK((r.exit_code == 1 || r.exit_code == 2));
    CHECK((contains(r.err, "is a named pipe") || contains(r.err, "is a device")));
  }
}

TEST_CASE("text-generation flags given to an mlp are refused naming the flag", "[cli]") {
  for (const char* flag : {"--sample", "--temperature", "--eval-windows"}) {
    const cli_result r = run_cli(mlp_train({flag, "1"}));
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, std::string(flag) + " is for gpt models"));
  }
}

TEST_CASE("a text too small for one held-out window names --data and the size that works",
          "[cli]") {
  scratch_dir dir;
  write_file(dir / "tiny.txt", "hello world this is tiny\n");
  for (const char* windows : {"0", "1"}) {
    const cli_result r = run_cli({"train", "--model", "gpt-tiny", "--data", dir / "tiny.txt",
                                  "--steps", "1", "--eval-windows", windows});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--data: " + (dir / "tiny.txt") + " has 25 bytes: too small"));
    CHECK(contains(r.err, "give a text of at least 1300 bytes"));
    CHECK_FALSE(contains(r.err, "eval_windows"));
  }
  write_file(dir / "enough.txt", small_text(1300));
  CHECK(run_cli({"train", "--model", "gpt-tiny", "--data", dir / "enough.txt", "--steps", "1",
                 "--eval-windows", "0"})
            .exit_code == 0);
}

TEST_CASE("plan refuses a profile time or microbatch that would overflow and a 1e-308 speed",
          "[cli]") {
  scratch_dir dir;
  const std::string layer = R"({"name": "a", "fwd_ms": 1, "bwd_ms": 2, "activation_bytes": 1000,
      "saved_bytes": 1000, "param_bytes": 4000000, "optimizer_bytes": 8000000})";
  const std::string huge = R"({"name": "b", "fwd_ms": 1.5e308, "bwd_ms": 2,
      "activation_bytes": 1000, "saved_bytes": 1000, "param_bytes": 4000000,
      "optimizer_bytes": 8000000})";
  write_file(dir / "inf.json", R"({"model": "toy", "microbatch": 4, "layers": [)" + layer + "," +
                                   huge + "," + layer + "]}");
  write_file(dir / "mb.json", R"({"model": "toy", "microbatch": 4611686018427387904, "layers": [)" +
                                  layer + "," + layer + "]}");
  write_file(dir / "two.json", two_devices);
  write_file(dir / "slow.json", R"({"devices": [{"name": "a", "speed": 1e-308}, {"name": "b"}]})");
  for (const char* planner : {"pipedream", "2bw"}) {
    INFO(planner);
    cli_result r = run_cli({"plan", "--profile", dir / "inf.json", "--cluster", dir / "two.json",
                            "--planner", planner});
    CHECK(r.exit_code == 2);  // a bad input file, found before planning
    CHECK(contains(r.err, "--profile: layer 1 (b): fwd_ms 1.5e+308 is outside 0..1e9 ms"));
    r = run_cli({"plan", "--profile", dir / "mb.json", "--cluster", dir / "two.json", "--planner",
                 planner});
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--profile: the profile's microbatch 4611686018427387904 is outside 1..2^31-1"));
    r = run_cli({"plan", "--profile", dir / "mb.json", "--cluster", dir / "slow.json",
                 "--planner", planner});
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "devices[0].speed 1e-308 must be a finite number in 1e-06..1e+06"));
  }
}

TEST_CASE("plan on a cluster too large to search says so at once and how many devices to plan for",
          "[cli]") {
  scratch_dir dir;
  write_file(dir / "four.json", four_layers);
  for (const char* cluster : {"dgx-h100x1024", "dgx-h100x8192"}) {
    const cli_result r = run_cli({"plan", "--profile", dir / "four.json", "--cluster", cluster,
                                  "--planner", "2bw"});
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "device placements (4 layers), more than 2^27"));
    CHECK(contains(r.err, "plan for fewer devices (plan --devices "));
    CHECK_FALSE(contains(r.err, "bad_alloc"));
  }
  // PipeDream's planner searches the same clusters quickly.
  CHECK(run_cli({"plan", "--profile", dir / "four.json", "--cluster", "dgx-h100x8192"}).exit_code ==
        0);
}

TEST_CASE("an empty value for a flag or an argument is refused naming it", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::vector<std::string> gpt{"train", "--model", "gpt-tiny", "--data", dir / "text.txt",
                                     "--steps", "1", "--eval-windows", "1"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& more) {
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  struct empty_case {
    std::vector<std::string> args;
    std::string named;
  };
  // --save "" wrote nothing, --data "" read the default data, --split "" meant no split, and
  // export's --out "" failed in a rename.
  for (const empty_case& c : std::vector<empty_case>{
           {with(gpt, {"--save", ""}), "--save"},
           {{"train", "--model", "gpt-tiny", "--data", "", "--steps", "1"}, "--data"},
           {with(gpt, {"--schedule", "1f1b", "--stages", "2", "--split", ""}), "--split"},
           {{"checkpoint", "export", dir / "ck", "--out", ""}, "--out"},
           {{"checkpoint", "export", "", "--out", dir / "w.safetensors"}, "dir"},
           {{"simulate", "--schedule", "1f1b", "--stages", "2", "--microbatches", "2", "--trace", ""},
            "--trace"}}) {
    const cli_result r = run_cli(c.args);
    INFO(c.named << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, c.named + ": is empty"));
  }
}

TEST_CASE("train --epochs with --steps is refused naming both", "[cli]") {
  const cli_result r = run_cli(mlp_train({"--epochs", "1"}));  // mlp_train gives --steps 1
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--epochs"));
  CHECK(contains(r.err, "--steps sets them too"));
}

TEST_CASE("a number past its flag's type is refused naming the flag the value and the type", "[cli]") {
  const cli_result big = run_cli({"schedule", "--schedule", "1f1b", "--stages", "1000000000000",
                                  "--microbatches", "2"});
  INFO(big.err);
  CHECK(big.exit_code == 2);
  CHECK(contains(big.err, "--stages: 1000000000000 is not a value it takes (INT"));
}

TEST_CASE("a flag for processes that talk is refused when every rank runs in this process", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  for (const char* flag : {"--transport", "--heartbeat-ms"}) {
    const std::string value = std::string(flag) == "--transport" ? "caf" : "500";
    const cli_result r = run_cli({"train", "--model", "gpt-tiny", "--data", dir / "text.txt",
                                  "--steps", "1", "--schedule", "1f1b", "--stages", "2", flag, value});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, std::string(flag) + ": concerns processes that talk"));
  }
}
