// `pipeworks plan --planner v`: the V schedules' split from a profile (device d running pieces d
// and 2p-1-d), as text and JSON, whose printed train flags run; what it cannot plan it refuses.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fixtures.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;

namespace {

// Four layers, as gpt-tiny's four blocks: a heavy first and a light last one.
std::string profile_json() {
  std::string layers;
  const double ms[] = {9, 5, 5, 1};
  for (int l = 0; l < 4; ++l)
    layers += std::string(l ? ", " : "") + R"({"name": "b)" + std::to_string(l) +
              R"(", "fwd_ms": )" + std::to_string(ms[l] / 3) + R"(, "bwd_ms": )" +
              std::to_string(2 * ms[l] / 3) +
              R"(, "activation_bytes": 10, "saved_bytes": 100, "param_bytes": 1000, "optimizer_bytes": 2000})";
  return R"({"model": "toy", "microbatch": 2, "layers": [)" + layers + "]}";
}

// `pipeworks plan --profile DIR/profile.json --cluster DIR/CLUSTER --planner v` and `more`.
cli_result plan_v(const scratch_dir& dir, const char* cluster, std::vector<std::string> more) {
  std::vector<std::string> a{"plan", "--profile", dir / "profile.json", "--cluster", dir / cluster,
                             "--planner", "v"};
  a.insert(a.end(), more.begin(), more.end());
  return run_cli(a);
}

std::string cluster_json(long long memory) {
  return R"({"devices": [{"name": "x", "speed": 1, "memory_bytes": )" + std::to_string(memory) +
         R"(}, {"name": "y", "speed": 1, "memory_bytes": )" + std::to_string(memory) + "}]}";
}

}  // namespace

TEST_CASE("plan --planner v pairs the model's ends on each device and its train flags run", "[cli]") {
  scratch_dir dir;
  write_file(dir / "profile.json", profile_json());
  write_file(dir / "cluster.json", cluster_json(0));
  const cli_result j = plan_v(dir, "cluster.json", {"--schedule", "zbv", "--microbatches", "4", "--json"});
  INFO(j.err);
  REQUIRE(j.exit_code == 0);
  const nlohmann::json plan = last_json(j);
  CHECK(plan["p"] == 2);
  CHECK(plan["split"] == "0,1,2,3");
  CHECK(plan["bottleneck_ms"].get<double>() == Approx(10.0));  // 9 + 1 and 5 + 5
  REQUIRE(plan["stages"].size() == 4);
  CHECK(plan["stages"][3]["device"] == 0);
  CHECK(plan["predicted_step_ms"].get<double>() > 0);
  const cli_result text = plan_v(dir, "cluster.json", {"--schedule", "zbv", "--microbatches", "4"});
  REQUIRE(text.exit_code == 0);
  const std::string flags = "train with --schedule zbv --stages 2 --microbatches 4 --split 0,1,2,3";
  CHECK(contains(text.out, flags));
  // The printed flags train gpt-tiny (four blocks) on the V.
  write_file(dir / "text.txt", small_text());
  std::vector<std::string> run = gpt_tiny_train(dir / "text.txt", 2, {});
  std::istringstream words(flags.substr(std::string("train with ").size()));
  for (std::string w; words >> w;) run.push_back(w);
  run_ok(run);
}

TEST_CASE("plan --planner v refuses a plan that does not fit and flags it does not take", "[cli]") {
  scratch_dir dir;
  write_file(dir / "profile.json", profile_json());
  write_file(dir / "small.json", cluster_json(3000));
  const cli_result tight = plan_v(dir, "small.json", {"--schedule", "v-half", "--microbatches", "4"});
  CHECK(tight.exit_code == 1);
  CHECK(contains(tight.err, "fits every device's memory"));
  write_file(dir / "cluster.json", cluster_json(0));
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--planner", "v", "--microbatches", "4"},
        std::vector<std::string>{"--planner", "v", "--schedule", "1f1b", "--microbatches", "4"},
        std::vector<std::string>{"--planner", "v", "--schedule", "zbv"},
        std::vector<std::string>{"--schedule", "zbv", "--microbatches", "4"}}) {
    std::vector<std::string> args{"plan", "--profile", dir / "profile.json", "--cluster",
                                  dir / "cluster.json"};
    args.insert(args.end(), bad.begin(), bad.end());
    const cli_result r = run_cli(args);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK((contains(r.err, "--schedule") || contains(r.err, "--microbatches")));
  }
}

TEST_CASE("plan --planner v plans dualpipe on an even device count and its train flags run",
          "[cli]") {
  // dualpipe cuts the model in p and mirrors the pieces: on 2 devices each device holds both
  // pieces (one per route), so every split loads each device with the whole model, 20 ms.
  scratch_dir dir;
  write_file(dir / "profile.json", profile_json());
  write_file(dir / "cluster.json", cluster_json(0));
  const cli_result j =
      plan_v(dir, "cluster.json", {"--schedule", "dualpipe", "--microbatches", "4", "--json"});
  INFO(j.err);
  REQUIRE(j.exit_code == 0);
  const nlohmann::json plan = last_json(j);
  CHECK(plan["p"] == 2);
  CHECK(plan["split"] == "0,1");  // the first split of the ties
  CHECK(plan["bottleneck_ms"].get<double>() == Approx(20.0));
  REQUIRE(plan["stages"].size() == 4);                         // two copies of each stage
  CHECK(plan["stages"][2]["first_layer"] == 0);                // stage 2: stage 0's copy,
  CHECK(plan["stages"][2]["device"] == 1);                     // on the other device
  CHECK(plan["stages"][3]["first_layer"] == 1);                // stage 3: stage 1's copy
  CHECK(plan["stages"][3]["device"] == 0);
  const cli_result text =
      plan_v(dir, "cluster.json", {"--schedule", "dualpipe", "--microbatches", "4"});
  REQUIRE(text.exit_code == 0);
  const std::string flags = "train with --schedule dualpipe --stages 2 --microbatches 4 --split 0,1";
  CHECK(contains(text.out, flags));
  write_file(dir / "text.txt", small_text());
  run_ok(gpt_tiny_train(dir / "text.txt", 2,
                        {"--schedule", "dualpipe", "--stages", "2", "--microbatches", "4",
                         "--split", "0,1"}));
}
