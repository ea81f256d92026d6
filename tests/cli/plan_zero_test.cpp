// `pipeworks plan` (planner 2bw or pipedream) shares the optimizer state out over replicas (ZeRO 1)
// when only that makes a plan fit, and says so: `train with --zero 1`, and "zero": 1 in --json's
// runtime.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;

TEST_CASE("plan with 2bw names --zero 1 when only sharded optimizer state fits", "[cli]") {
  scratch_dir dir;
  // One layer: 3 x 1000 bytes of weights and gradient, 2000 of optimizer state (its largest
  // tensor's 500); devices of 4000.
  write_file(dir / "profile.json", R"({"model": "toy", "microbatch": 4, "layers": [
    {"name": "a", "fwd_ms": 1, "bwd_ms": 2, "activation_bytes": 10, "saved_bytes": 40,
     "param_bytes": 1000, "optimizer_bytes": 2000, "largest_optimizer_bytes": 500}]})");
  auto cluster = [&](long long memory) {
    const std::string path = dir / ("c" + std::to_string(memory) + ".json");
    write_file(path, R"({"device_memory_bytes": )" + std::to_string(memory) +
                         R"(, "levels": [{"name": "server", "count": 8, "bandwidth_bytes_per_s": 1e9, "latency_s": 0}]})");
    return path;
  };
  const std::string tight = cluster(4000);
  const cli_result text = run_cli({"plan", "--profile", dir / "profile.json", "--cluster", tight,
                                   "--planner", "2bw"});
  INFO(text.err);
  REQUIRE(text.exit_code == 0);
  CHECK(contains(text.out, "train with --zero 1"));
  const cli_result j = run_cli({"plan", "--profile", dir / "profile.json", "--cluster", tight,
                                "--planner", "2bw", "--json"});
  REQUIRE(j.exit_code == 0);
  const nlohmann::json plan = last_json(j);
  CHECK(plan["runtime"]["zero"] == 1);
  CHECK(plan["w"].get<int>() >= 4);
  // With room for the whole state no sharding is planned.
  const cli_result roomy = run_cli({"plan", "--profile", dir / "profile.json", "--cluster",
                                    cluster(1000000), "--planner", "2bw", "--json"});
  REQUIRE(roomy.exit_code == 0);
  CHECK(last_json(roomy)["runtime"]["zero"] == 0);
}

TEST_CASE("plan with pipedream names --zero 1 when only sharded optimizer state fits", "[cli]") {
  scratch_dir dir;
  // Two layers, each 2 x 1000 bytes of weights and gradient and 2000 of optimizer state (its
  // largest tensor's 500): 4000 + 40 per microbatch in flight on a device unsharded. On devices of
  // 4000 only two stages of one layer on 2 replicas each fit, sharing: 2000 + 1000 + 40 · (p − s).
  const std::string layer = R"({"name": "NAME", "fwd_ms": 1, "bwd_ms": 2, "activation_bytes": 10,
     "saved_bytes": 40, "param_bytes": 1000, "optimizer_bytes": 2000, "largest_optimizer_bytes": 500})";
  auto named = [&](const std::string& name) {
    std::string l = layer;
    l.replace(l.find("NAME"), 4, name);
    return l;
  };
  write_file(dir / "profile.json",
             R"({"model": "toy", "microbatch": 4, "layers": [)" + named("a") + ", " + named("b") + "]}");
  auto cluster = [&](long long memory) {
    const std::string path = dir / ("c" + std::to_string(memory) + ".json");
    write_file(path, R"({"device_memory_bytes": )" + std::to_string(memory) +
                         R"(, "levels": [{"name": "server", "count": 4, "bandwidth_bytes_per_s": 1e9, "latency_s": 0}]})");
    return path;
  };
  const std::string tight = cluster(4000);
  const cli_result text = run_cli({"plan", "--profile", dir / "profile.json", "--cluster", tight});
  INFO(text.out << text.err);
  REQUIRE(text.exit_code == 0);
  CHECK(contains(text.out, "planner pipedream"));
  CHECK(contains(text.out, "| 0 | a..a | 2 | 0,1 |"));
  CHECK(contains(text.out, "| 1 | b..b | 2 | 2,3 |"));
  CHECK(contains(text.out, "train with --zero 1"));
  const cli_result j = run_cli({"plan", "--profile", dir / "profile.json", "--cluster", tight, "--json"});
  REQUIRE(j.exit_code == 0);
  const nlohmann::json plan = last_json(j);
  CHECK(plan["runtime"]["zero"] == 1);
  CHECK(plan["memory_bytes"] == nlohmann::json::array({3080, 3080, 3040, 3040}));
  CHECK(plan["stages"][0]["replicas"] == 2);
  CHECK(plan["stages"][1]["replicas"] == 2);
  // Devices of 4100 hold the same plan unsharded (4080 and 4040), and it is faster: no sharing.
  const cli_result both = run_cli({"plan", "--profile", dir / "profile.json", "--cluster", cluster(4100)});
  REQUIRE(both.exit_code == 0);
  CHECK_FALSE(contains(both.out, "--zero"));
  const cli_result both_json =
      run_cli({"plan", "--profile", dir / "profile.json", "--cluster", cluster(4100), "--json"});
  REQUIRE(both_json.exit_code == 0);
  CHECK(last_json(both_json)["runtime"]["zero"] == 0);
  CHECK(last_json(both_json)["memory_bytes"] == nlohmann::json::array({4080, 4080, 4040, 4040}));
}
