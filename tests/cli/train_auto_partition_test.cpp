// End-to-end tests of `pipeworks train --auto-partition` (cli/auto_partition.cpp): the plan is
// printed and run on local-cpu and on heterogeneous clusters, --json carries it (ZeRO 1 too, when
// only it fits), contradictions exit 2 and planner failures exit 1.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "partition/auto_partition.hpp"
#include "fixtures.hpp"
#include "base/cpu_count.hpp"
#include "background_cli.hpp"
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

// The heterogeneous example's speeds add up to 1.5 cores: it needs 2 usable cores to run.
bool hetero_runs_here() {
  if (pipeworks::usable_cores() >= 2) return true;
  WARN("SKIP: this test runs " << hetero_cluster << ", whose speeds add up to 1.5 cores, but this "
       "process may use only " << pipeworks::usable_cores() << " core");
  return false;
}

}  // namespace

TEST_CASE("train --auto-partition on the default local-cpu cluster plans and trains", "[cli]") {
  // The CI path: any machine, 1 core or more; every device is one core of speed 1.
  const cli_result r = run_cli({"train", "--model", "mlp", "--data", fashion_mnist_dir, "--steps", "2",
                                "--auto-partition", "--json"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const json last = json_lines(r).back();
  REQUIRE(last.contains("plan"));
  const json& plan = last["plan"];
  CHECK(plan["cluster"] == "local-cpu");
  CHECK(plan["batch"] == 16);
  const int cores = pipeworks::usable_cores();
  CHECK(plan["p"].get<int>() * plan["w"].get<int>() <= cores);
  CHECK(plan["m"].get<int>() * plan["w"].get<int>() == pipeworks::default_microbatches(16, cores));
  for (const auto& st : plan["stages"])
    for (const auto& speed : st["speeds"]) CHECK(speed.get<double>() == 1.0);
  CHECK(last["steps"] == 2);
}

TEST_CASE("train --auto-partition on three devices with the default batch shares its microbatches", "[cli]") {
  // Batch 16 on 3 devices: 4 microbatches (2 per device would be 6, which does not divide 16),
  // and a plan whose replicas share them. Speeds add up to 0.9: one core runs it.
  scratch_dir dir;
  write_file(dir / "three.json", R"({"devices": [{"name": "a", "speed": 0.3}, {"name": "b", "speed": 0.3},
                                                 {"name": "c", "speed": 0.3}]})");
  const cli_result r = run_cli({"train", "--model", "mlp", "--data", fashion_mnist_dir, "--steps", "2",
                                "--auto-partition", "--cluster", dir / "three.json", "--json"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const json plan = json_lines(r).back()["plan"];
  CHECK(plan["batch"] == 16);
  CHECK(plan["microbatch"] == 4);
  CHECK(plan["m"].get<int>() * plan["w"].get<int>() == 4);
}

TEST_CASE("train --auto-partition on the heterogeneous cluster prints the plan and trains", "[cli]") {
  if (!hetero_runs_here()) return;
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
  if (!hetero_runs_here()) return;
  std::map<std::string, double> speed_of;  // the cluster file's speed of each device, by name
  {
    std::ifstream in(hetero_cluster);
    const json file = json::parse(in);
    for (const auto& d : file["devices"]) speed_of[d["name"]] = d["speed"];
  }
  REQUIRE(speed_of.size() == 4);
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
    REQUIRE(st["speeds"].size() == st["devices"].size());
    for (std::size_t j = 0; j < st["devices"].size(); ++j) {
      const std::string device = st["devices"][j];
      CAPTURE(device);
      REQUIRE(speed_of.count(device) == 1);
      CHECK(st["speeds"][j].get<double>() == speed_of[device]);
    }
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
      {auto_args({"--cluster", "/nonexistent/cluster.json"}),
       "cannot open cluster file '/nonexistent/cluster.json'"},
      {auto_args({"--threads", "2"}), "drop --threads"},
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

TEST_CASE("train --auto-partition plans a CPU and a GPU with the GPU's own profile", "[cli]") {
  // The GPU's profile: the layers and bytes of the CPU's (the same model and microbatch, 4: batch
  // 16 in 2 per device) with fixed times: the embedding 1e9 ms (the most a profile may say), the
  // transformer blocks and the head free. The one fastest plan is then the embedding alone on the
  // CPU and the rest on the GPU for any live times of the CPU (below 5e8 ms for the embedding, and
  // above 0 for a block): no live timing decides it. Planned and printed here; running it needs
  // the GPU.
  scratch_dir dir;
  const cli_result prof = run_cli({"profile", "--model", "gpt-tiny", "--microbatch", "4", "--repeats",
                                   "1", "--out", dir / "cpu.json"});
  REQUIRE(prof.exit_code == 0);
  nlohmann::json gpu = nlohmann::json::parse(read_file(dir / "cpu.json"));
  REQUIRE(gpu["layers"].size() == 4);
  REQUIRE(gpu["layers"][0]["name"] == "embedding");
  for (auto& l : gpu["layers"]) {
    l["fwd_ms"] = l["name"] == "embedding" ? 1e9 : 0.0;
    l["bwd_ms"] = 0.0;
  }
  write_file(dir / "gpu.json", gpu.dump());
  write_file(dir / "mixed.json", R"({"devices": [{"name": "cpu", "speed": 1},
    {"name": "h100", "speed": 1, "profile": "gpu.json", "device": "cuda:0"}]})");
  const cli_result r = run_cli({"train", "--model", "gpt-tiny", "--steps", "2", "--auto-partition",
                                "--cluster", dir / "mixed.json", "--print-plan", dir / "plan.json"});
  INFO("stderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir / "plan.json"));
  REQUIRE(plan["ranks"].size() == 2);
  CHECK(plan["ranks"][0]["device"] == "cpu");
  CHECK(plan["ranks"][1]["device"] == "cuda:0");
  CHECK(plan["ranks"][1]["name"] == "h100");
  // The GPU's stage holds the transformer blocks: the split puts the cut right after the embedding.
  CHECK(plan["split"] == nlohmann::json::array({0, 1}));
  // A profile that is not there is named with the device, before anything is profiled.
  write_file(dir / "missing.json", R"({"devices": [{"name": "cpu", "speed": 1},
    {"name": "h100", "speed": 1, "profile": "nosuch.json", "device": "cuda:0"}]})");
  const cli_result m = run_cli(auto_args({"--cluster", dir / "missing.json"}));
  CHECK(m.exit_code == 2);
  CHECK(contains(m.err, "h100"));
  CHECK(contains(m.err, "nosuch.json"));
}

TEST_CASE("train --auto-partition without --microbatches gives the step 2 per device", "[cli]") {
  if (!hetero_runs_here()) return;
  const cli_result r = run_cli({"train", "--model", "mlp", "--data", fashion_mnist_dir, "--steps", "2",
                                "--batch", "32", "--auto-partition", "--cluster", hetero_cluster, "--json"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const json plan = json_lines(r).back()["plan"];
  CHECK(plan["m"].get<int>() * plan["w"].get<int>() == 8);  // 4 devices
  CHECK(plan["microbatch"] == 4);
}

TEST_CASE("train --auto-partition --planner 2bw runs the planner's p and w and m and batch", "[cli]") {
  if (!hetero_runs_here()) return;
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

TEST_CASE("train --auto-partition --compare-sim without --trace exits 2 before profiling", "[cli]") {
  const cli_result r = run_cli(auto_args({"--compare-sim"}));
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "give --trace FILE"));
  CHECK_FALSE(contains(r.out, "auto-partition: planner"));
}

TEST_CASE("train --auto-partition exits 1 with the planner's message when no plan fits", "[cli]") {
  scratch_dir dir;
  // 1 KB of memory holds no stage of mlp: the planner finds no plan (a failure, not bad usage).
  write_file(dir / "tiny.json", R"({"devices": [{"name": "tiny", "speed": 0.5, "memory_bytes": 1000}]})");
  const cli_result r = run_cli(auto_args({"--cluster", dir / "tiny.json"}));
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.exit_code == 1);
  CHECK(contains(r.err, "PipeDream's planner"));
}

TEST_CASE("train --auto-partition --schedule 2bw with too few microbatches says how many it needs", "[cli]") {
  // mlp with AdamW needs about 3.9 MB on one device and 3.4 MB for fc1 alone (weights, gradients,
  // two moments, stashed activations): 3.5 MB devices force 2 stages, which 2bw cannot run with
  // one microbatch.
  scratch_dir dir;
  write_file(dir / "two.json", R"({"devices": [{"speed": 0.2, "memory_bytes": 3500000},
                                               {"speed": 0.2, "memory_bytes": 3500000}]})");
  const cli_result r = run_cli({"train", "--model", "mlp", "--data", fashion_mnist_dir, "--steps", "2",
                                "--batch", "16", "--microbatches", "1", "--auto-partition",
                                "--planner", "pipedream", "--schedule", "2bw", "--cluster",
                                dir / "two.json"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.exit_code == 1);
  CHECK(contains(r.err, "p=2, m=1"));
  CHECK(contains(r.err, "raise --microbatches to at least 2"));
}

TEST_CASE("train --auto-partition --recompute full profiles and plans in that mode and runs it", "[cli]") {
  // The live profile is checked for shape only; the plan must carry the run's mode.
  scratch_dir dir;
  const cli_result printed = run_cli({"train", "--model", "mlp", "--data", fashion_mnist_dir,
                                      "--steps", "2", "--auto-partition", "--recompute", "full",
                                      "--print-plan", dir / "plan.json"});
  INFO("stdout:\n" << printed.out << "\nstderr:\n" << printed.err);
  REQUIRE(printed.exit_code == 0);
  const json plan = json::parse(read_file(dir / "plan.json"));
  CHECK(plan["runtime"]["recompute"] == "full");
  const cli_result r = run_cli({"train", "--model", "mlp", "--data", fashion_mnist_dir, "--steps",
                                "2", "--auto-partition", "--recompute", "full", "--json"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const json last = json_lines(r).back();
  REQUIRE(last.contains("plan"));
  CHECK(last["plan"]["recompute"] == "full");
  CHECK(last["steps"] == 2);
  // Without the flag the live profile is measured, and the run planned, without recomputation.
  const cli_result plain = run_cli({"train", "--model", "mlp", "--data", fashion_mnist_dir,
                                    "--steps", "1", "--auto-partition", "--json"});
  REQUIRE(plain.exit_code == 0);
  CHECK(json_lines(plain).back()["plan"]["recompute"] == "none");
}

TEST_CASE("train --auto-partition without --recompute profiles every mode and runs the planner's choice", "[cli]") {
  // mlp at microbatch 8 (AdamW): fc1 holds 3,215,360 bytes of weights, gradients and moments and
  // stashes 33,280 bytes a microbatch. On two devices of 3,260,000 bytes the whole model (3.8 MB)
  // fits on neither, and fc1 alone as stage 0 of two holds 2 microbatches in flight: 3,281,920
  // bytes under none and selective (mlp drops nothing), 3,248,640 under full (its input, the
  // data, is not counted, and one whole stash). Only full fits: bytes decide, not timings, which
  // the live profile is checked for only by shape.
  scratch_dir dir;
  write_file(dir / "two.json", R"({"devices": [{"speed": 0.5, "memory_bytes": 3260000},
                                               {"speed": 0.5, "memory_bytes": 3260000}]})");
  const cli_result r = run_cli(auto_args({"--cluster", dir / "two.json", "--print-plan",
                                          dir / "plan.json"}));
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "recompute: none: no plan fits ("));
  CHECK(contains(r.out, "selective: no plan fits ("));
  CHECK(contains(r.out, "-> full"));
  const json plan = json::parse(read_file(dir / "plan.json"));
  CHECK(plan["runtime"]["recompute"] == "full");
  // --recompute given: that mode alone is profiled and planned, and none does not fit.
  const cli_result none = run_cli(auto_args({"--cluster", dir / "two.json", "--recompute",
                                             "none", "--print-plan", dir / "none.json"}));
  INFO("stdout:\n" << none.out << "\nstderr:\n" << none.err);
  CHECK(none.exit_code == 1);
  CHECK(contains(none.err, "no plan fits"));
  CHECK_FALSE(contains(none.err, "no recompute mode fits"));
}

TEST_CASE("train --auto-partition with pipedream shares the optimizer state when only that fits", "[cli]") {
  scratch_dir dir;
  // The mlp's bytes at the run's microbatch (32 / 4 = 8), as the run profiles them (bytes, not
  // times: the plan below is the only one that fits whatever the times).
  const cli_result prof = run_cli({"profile", "--model", "mlp", "--microbatch", "8", "--repeats", "1",
                                   "--out", dir / "profile.json"});
  REQUIRE(prof.exit_code == 0);
  std::ifstream in(dir / "profile.json");
  const json layers = json::parse(in)["layers"];
  REQUIRE(layers.size() == 3);
  const auto at = [&](int l, const char* field) { return layers[l][field].get<std::int64_t>(); };
  // fc1 alone, 2 microbatches in flight (stage 0 of 2): unsharded it needs `whole`; on 2 replicas
  // sharing its optimizer state (each at least its largest tensor's) `shared`. Devices of
  // whole − 1 bytes: no plan fits unsharded (fc1 is in every plan's first stage, and a longer
  // stage or a deeper pipeline needs more), and on 4 devices 2 stages of 2 replicas fit sharded.
  const std::int64_t opt = at(0, "optimizer_bytes");
  const std::int64_t whole = 2 * at(0, "param_bytes") + opt + 2 * at(0, "saved_bytes");
  const std::int64_t shared = whole - opt + std::max((opt + 1) / 2, at(0, "largest_optimizer_bytes"));
  REQUIRE(shared < whole);
  json devices = json::array();
  for (int d = 0; d < 4; ++d)
    devices.push_back({{"name", "d" + std::to_string(d)}, {"speed", 0.25}, {"memory_bytes", whole - 1}});
  write_file(dir / "four.json", json{{"devices", devices}}.dump());
  // Measured in mode none only (recomputing would make another mode fit unsharded).
  const cli_result r = run_cli(auto_args({"--cluster", dir / "four.json", "--recompute", "none", "--json"}));
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const json last = json_lines(r).back();
  const json& plan = last["plan"];
  CHECK(plan["zero"] == 1);
  CHECK(plan["p"] == 2);
  CHECK(plan["w"] == 2);
  CHECK(last["split"] == json::array({0, 1}));
  // Each replica held a share of its stage's moments: less than the same run unsharded holds.
  const cli_result plain = run_cli({"train", "--model", "mlp", "--data", fashion_mnist_dir, "--steps", "3",
                                    "--batch", "32", "--microbatches", "4", "--schedule", "1f1b",
                                    "--stages", "2", "--replicas", "2", "--split", "0,1", "--json"});
  REQUIRE(plain.exit_code == 0);
  const json unsharded = json_lines(plain).back();
  for (int s = 0; s < 2; ++s)
    CHECK(last["stages"][s]["optimizer_bytes"].get<std::int64_t>() <
          unsharded["stages"][s]["optimizer_bytes"].get<std::int64_t>());
  // The text report names it too.
  const cli_result text = run_cli(auto_args({"--cluster", dir / "four.json", "--recompute", "none"}));
  REQUIRE(text.exit_code == 0);
  CHECK(contains(text.out, "split 0,1, zero 1"));
}

TEST_CASE("train --auto-partition with a V schedule plans it with the V planner and trains", "[cli]") {
  if (!hetero_runs_here()) return;
  const cli_result r = run_cli({"train", "--model", "mlp", "--data", fashion_mnist_dir, "--steps",
                                "2", "--batch", "32", "--microbatches", "4", "--auto-partition",
                                "--schedule", "zbv", "--cluster", hetero_cluster, "--json"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const json last = json_lines(r).back();
  const json& plan = last["plan"];
  CHECK(plan["planner"] == "v");
  CHECK(plan["w"] == 1);
  const std::size_t p = plan["p"].get<std::size_t>();
  REQUIRE(plan["stages"].size() == 2 * p);  // two per device, folded: d and 2p-1-d
  REQUIRE(last["split"].size() == 2 * p);
  for (std::size_t s = 0; s < 2 * p; ++s) {
    CHECK(last["split"][s] == plan["stages"][s]["first_layer"]);
    CHECK(plan["stages"][s]["devices"] == plan["stages"][2 * p - 1 - s]["devices"]);
  }
  // The V planner and the V schedules go together.
  const cli_result other = run_cli(auto_args({"--schedule", "1f1b", "--planner", "v"}));
  CHECK(other.exit_code == 2);
  CHECK(contains(other.err, "--planner"));
  const cli_result flat = run_cli(auto_args({"--schedule", "v-half", "--planner", "pipedream"}));
  CHECK(flat.exit_code == 2);
  CHECK(contains(flat.err, "--planner"));
}

TEST_CASE("SIGTERM ends a run of very slow throttled devices without waiting out their stretch", "[cli]") {
  // Devices of speed 1e-6 stretch each action a million times: one of gpt-tiny's is about 17
  // minutes. A stop cuts the stretch: the run saves what it has and exits 143.
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  write_file(dir / "slow.json", R"({"devices": [{"name": "a", "speed": 1e-6}, {"name": "b", "speed": 1e-6}]})");
  background_cli run({"train", "--model", "gpt-tiny", "--data", dir / "text.txt", "--steps", "1",
                      "--sample", "0", "--eval-windows", "1", "--auto-partition", "--cluster",
                      dir / "slow.json", "--save", dir / "w.safetensors"});
  REQUIRE(run.wait_for([&] { return contains(run.output_so_far(), "predicted step"); }));
  run.kill(SIGTERM);
  REQUIRE(run.wait_exit(std::chrono::seconds(120)));  // the stretch alone is hours
  const cli_result r = run.wait();
  INFO(r.err);
  CHECK(r.exit_code == 143);
  CHECK(contains(r.err, "interrupted by SIGTERM"));
}
