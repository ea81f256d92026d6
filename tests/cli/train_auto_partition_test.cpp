// End-to-end tests of `pipeworks train --auto-partition` (cli/auto_partition.cpp): the plan is
// printed and run on the heterogeneous example cluster, --json carries it, contradictions exit 2.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;

namespace {

const std::string hetero_cluster = PIPEWORKS_SOURCE_DIR "/examples/clusters/hetero-2fast-2slow.json";

std::vector<std::string> auto_args(std::vector<std::string> more) {
  std::vector<std::string> a{"train", "--model", "mlp", "--data", fashion_mnist_dir, "--steps", "3",
                             "--batch", "32", "--microbatches", "4", "--auto-partition"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

}  // namespace

TEST_CASE("train --auto-partition on the heterogeneous cluster prints the plan and trains", "[cli]") {
  const cli_result r = run_cli(auto_args({"--cluster", hetero_cluster}));
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "auto-partition: planner pipedream on " + hetero_cluster));
  CHECK(contains(r.out, "| stage | layers | blocks | replicas | devices (speed) | ms per microbatch |"));
  CHECK(contains(r.out, "(0.25)"));
  CHECK(contains(r.out, "run: 1f1b, "));
  CHECK(contains(r.out, "predicted step: "));
  CHECK(contains(r.out, "final loss"));
}

TEST_CASE("train --auto-partition --json carries the plan and the split", "[cli]") {
  const cli_result r = run_cli(auto_args({"--cluster", hetero_cluster, "--json"}));
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const json last = json_lines(r).back();
  REQUIRE(last.contains("plan"));
  const json& plan = last["plan"];
  CHECK(plan["planner"] == "pipedream");
  CHECK(plan["batch"] == 32);
  CHECK(plan["m"].get<int>() * plan["w"].get<int>() == 4);
  CHECK(plan["predicted_step_ms"].get<double>() > 0);
  CHECK(plan["simulated_step_ms"].get<double>() > 0);
  REQUIRE(plan["stages"].size() == plan["p"].get<std::size_t>());
  REQUIRE(last["split"].size() == plan["p"].get<std::size_t>());
  for (std::size_t s = 0; s < plan["stages"].size(); ++s) {
    const json& st = plan["stages"][s];
    CHECK(last["split"][s] == st["first_layer"]);
    CHECK(st["devices"].size() == plan["w"].get<std::size_t>());
    for (const auto& speed : st["speeds"]) CHECK(speed.get<double>() <= 0.5);
  }
}

TEST_CASE("train --json reports the split of a pipelined run without --auto-partition", "[cli]") {
  const cli_result r = run_cli({"train", "--model", "mlp", "--data", fashion_mnist_dir, "--steps", "2",
                                "--batch", "32", "--microbatches", "2", "--schedule", "1f1b",
                                "--stages", "2", "--split", "0,2", "--json"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const json last = json_lines(r).back();
  CHECK(last["split"] == json::array({0, 2}));
  CHECK_FALSE(last.contains("plan"));
}

TEST_CASE("train --auto-partition refuses contradicting flags with exit 2 naming them", "[cli]") {
  struct bad {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<bad> cases{
      {auto_args({"--stages", "2"}), "drop --stages"},
      {auto_args({"--replicas", "2"}), "drop --replicas"},
      {auto_args({"--split", "0,1"}), "drop --split"},
      {auto_args({"--schedule", "none"}), "pipeline schedule"},
      {auto_args({"--planner", "2bw", "--schedule", "1f1b"}), "--schedule 2bw"},
      {auto_args({"--planner", "2bw"}), "drop --microbatches"},
      {{"train", "--model", "mlp", "--cluster", hetero_cluster}, "add --auto-partition"},
      {{"train", "--model", "mlp", "--planner", "2bw"}, "add --auto-partition"},
      {auto_args({"--cluster", "/nonexistent/cluster.json"}), "--cluster"},
  };
  for (const bad& b : cases) {
    const cli_result r = run_cli(b.args);
    INFO("args: " << b.args.back() << "\nstderr:\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, b.says));
  }
}

TEST_CASE("train --auto-partition refuses a cluster with a device faster than one core", "[cli]") {
  scratch_dir dir;
  write_file(dir / "fast.json",
             R"({"devices": [{"name": "gpu0", "speed": 4, "memory_bytes": 0}, {"name": "cpu0", "speed": 1}]})");
  const cli_result r = run_cli(auto_args({"--cluster", dir / "fast.json"}));
  INFO("stderr:\n" << r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "gpu0"));
  CHECK(contains(r.err, "at most 1"));
}

TEST_CASE("train --auto-partition without --microbatches gives the step 2 per device", "[cli]") {
  const cli_result r = run_cli({"train", "--model", "mlp", "--data", fashion_mnist_dir, "--steps", "2",
                                "--batch", "32", "--auto-partition", "--cluster", hetero_cluster, "--json"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const json plan = json_lines(r).back()["plan"];
  CHECK(plan["m"].get<int>() * plan["w"].get<int>() == 8);  // 4 devices
  CHECK(plan["microbatch"] == 4);
}

TEST_CASE("train --auto-partition --planner 2bw runs the planner's p and w and m and batch", "[cli]") {
  const cli_result r = run_cli({"train", "--model", "mlp", "--data", fashion_mnist_dir, "--steps", "2",
                                "--auto-partition", "--planner", "2bw", "--cluster", hetero_cluster,
                                "--json"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const json last = json_lines(r).back();
  CHECK(last["schedule"] == "2bw");
  const json& plan = last["plan"];
  CHECK(plan["planner"] == "2bw");
  CHECK(plan["batch"].get<int>() ==
        plan["microbatch"].get<int>() * plan["m"].get<int>() * plan["w"].get<int>());
  CHECK(last["stages"].size() == plan["p"].get<std::size_t>());
}
