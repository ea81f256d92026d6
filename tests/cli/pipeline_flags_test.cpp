// End-to-end tests of `pipeworks train` pipelined (cli/pipeline_flags.cpp, cli/cmd_train.cpp):
// schedules run and report per-stage peaks, traces and --compare-sim are written, bad flags name
// themselves, injected faults end the run with the stage, replica and action, Ctrl-C saves.
#include <signal.h>

#include <cstdint>
#include <cstring>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "fixtures.hpp"
#include "background_cli.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;

namespace {

std::vector<std::string> mlp_args(std::vector<std::string> more) {
  std::vector<std::string> a{"train", "--model", "mlp", "--data", fashion_mnist_dir, "--steps", "6",
                             "--batch", "32", "--microbatches", "4", "--optimizer", "sgd",
                             "--lr", "0.05", "--json"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

}  // namespace

TEST_CASE("train --schedule 2bw --stages 3: the summary has per-stage peaks", "[cli]") {
  const cli_result r = run_cli(mlp_args({"--schedule", "2bw", "--stages", "3"}));
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const json last = json_lines(r).back();
  REQUIRE(last["schedule"] == "2bw");
  REQUIRE(last["stages"].size() == 3);
  for (const auto& st : last["stages"]) {
    CHECK(st["peak_versions"] == 2);
    CHECK(st["peak_inflight"].get<int>() >= 1);
  }
  CHECK(std::isfinite(last["final_loss"].get<double>()));
}

TEST_CASE("train --trace --compare-sim writes the measured and the simulated trace", "[cli]") {
  scratch_dir dir;
  const std::string trace = dir / "run.json";
  const cli_result r = run_cli(mlp_args({"--schedule", "1f1b", "--stages", "2", "--trace", trace,
                                         "--compare-sim"}));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json last = json_lines(r).back();
  CHECK(last["measured_makespan_s"].get<double>() > 0);
  CHECK(last["simulated_makespan_s"].get<double>() > 0);
  const json measured = json::parse(read_file(trace));
  const json simulated = json::parse(read_file(dir / "run.sim.json"));
  REQUIRE(measured["traceEvents"].size() > 10);
  REQUIRE(simulated["traceEvents"].size() > 10);
  bool versioned = false;  // every F and B carries its weight version
  for (const auto& e : measured["traceEvents"])
    if (e.value("ph", "") == "X" && e.contains("args") && e["args"].contains("version"))
      versioned = true;
  CHECK(versioned);
}

TEST_CASE("train pipeline flags: bad values exit 2 and name the flag", "[cli]") {
  struct bad_case {
    std::vector<std::string> flags;
    std::string names;
  };
  const std::vector<bad_case> cases{
      {{"--schedule", "zigzag", "--stages", "2"}, "--schedule"},
      {{"--schedule", "none", "--stages", "2"}, "--schedule"},
      {{"--schedule", "1f1b", "--stages", "9"}, "--stages"},
      {{"--schedule", "1f1b", "--stages", "2", "--split", "0,9"}, "--split"},
      {{"--schedule", "1f1b", "--stages", "2", "--replicas", "3"}, "--batch"},
      {{"--schedule", "1f1b", "--stages", "2", "--compare-sim"}, "--compare-sim"},
      {{"--schedule", "1f1b", "--stages", "2", "--inject-fault", "boom@1F0"}, "--inject-fault"},
      {{"--schedule", "1f1b", "--stages", "2", "--inject-fault", "kill@1F0:3"}, "--inject-fault"},
      {{"--schedule", "1f1b", "--stages", "2", "--inject-fault", "nan@0B1"}, "--inject-fault"},
      {{"--schedule", "1f1b", "--stages", "2", "--inject-fault", "kill@1F0:1x"}, "--inject-fault"},
      {{"--schedule", "none", "--trace", "t.json"}, "--schedule"},
      {{"--schedule", "none", "--inject-fault", "kill@0F0"}, "--schedule"},
  };
  for (const auto& c : cases) {
    const cli_result r = run_cli(mlp_args(c.flags));
    INFO(c.names << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, c.names));
  }
}

TEST_CASE("injected faults stop the run and name the stage and replica and action and cause", "[cli]") {
  struct fault_case {
    std::string fault, action, cause;
  };
  const std::vector<fault_case> cases{{"exception@1B2", "1B2", "injected fault"},
                                      {"nan@1F3", "1F3", "the loss is not finite"},
                                      {"nan@0F3", "stage 1", "not finite"},  // caught downstream
                                      {"kill@1F1", "stage 1", "died"}};
  for (const auto& c : cases) {
    const auto t0 = std::chrono::steady_clock::now();
    const cli_result r = run_cli(mlp_args({"--schedule", "1f1b", "--stages", "2", "--inject-fault", c.fault}));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO(c.fault << ": " << r.err);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, c.action));
    CHECK(contains(r.err, "replica 0"));
    CHECK(contains(r.err, c.cause));
    CHECK(s < 120);  // it ends rather than hangs (a generous guard, not a timing target)
  }
}

TEST_CASE("SIGTERM and SIGHUP stop a run like Ctrl-C and a second signal does not cut the save",
          "[cli][slow]") {
  for (const int sig : {SIGTERM, SIGHUP}) {
    scratch_dir dir;
    const std::string ckpt = dir / "w.safetensors";
    std::vector<std::string> args;
    for (auto& a : mlp_args({"--schedule", "1f1b", "--stages", "2", "--save", ckpt}))
      args.push_back(a == "6" ? "100000" : a);
    background_cli run(args);
    REQUIRE(run.wait_for([&] { return nonempty_lines(run.output_so_far()).size() >= 3; }));
    run.kill(sig);
    run.kill(sig);  // at once: while the run stops and saves
    const cli_result r = run.wait();
    INFO(strsignal(sig) << ": " << r.err);
    CHECK(r.exit_code == 128 + sig);
    CHECK(contains(r.err, sig == SIGTERM ? "interrupted by SIGTERM" : "interrupted by SIGHUP"));
    CHECK(contains(r.err, "written to"));
    const std::string bytes = read_file(ckpt);
    REQUIRE(bytes.size() >= 8);
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
    REQUIRE(8 + n <= bytes.size());
    CHECK(json::parse(bytes.substr(8, n))["__metadata__"]["pipeworks.interrupted"] == "true");
  }
}

TEST_CASE("a credit window below what the schedule needs is refused before it can deadlock", "[cli]") {
  scratch_dir dir;
  const std::string model = dir / "mlp4.json";
  write_file(model, R"({"type": "mlp", "hidden": [64, 64, 64]})");
  std::vector<std::string> args = mlp_args({"--schedule", "bfs", "--stages", "2", "--chunks", "2",
                                            "--credits", "1"});
  args[2] = model;
  const cli_result r = run_cli(args);
  INFO(r.err);
  CHECK(r.exit_code == 2);  // a bad flag value, refused before anything runs
  CHECK(contains(r.err, "--credits"));
  CHECK(contains(r.err, "deadlocks this schedule"));
  args.back() = "2";
  CHECK(run_cli(args).exit_code == 0);
}

TEST_CASE("Ctrl-C stops a pipelined run and writes the final checkpoint", "[cli][slow]") {
  scratch_dir dir;
  const std::string ckpt = dir / "w.safetensors";
  std::vector<std::string> args;
  for (auto& a : mlp_args({"--schedule", "1f1b", "--stages", "2", "--save", ckpt}))
    args.push_back(a == "6" ? "100000" : a);  // far more steps than it will run
  background_cli run(args);
  // Wait until it has trained a few steps (its --json lines appear), then interrupt it.
  REQUIRE(run.wait_for([&] { return nonempty_lines(run.output_so_far()).size() >= 3; }));
  run.kill(SIGINT);
  const cli_result r = run.wait();
  INFO(r.err);
  CHECK(r.exit_code == 130);
  CHECK(contains(r.err, "interrupted"));
  CHECK(std::filesystem::exists(ckpt));
  // A whole safetensors file: its header parses and says the run was interrupted.
  const std::string bytes = read_file(ckpt);
  REQUIRE(bytes.size() >= 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  REQUIRE(8 + n <= bytes.size());
  const json header = json::parse(bytes.substr(8, n));
  CHECK(header["__metadata__"]["pipeworks.interrupted"] == "true");
  CHECK(header.contains("fc1.weight"));
}
