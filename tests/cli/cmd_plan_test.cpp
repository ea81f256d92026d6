// `pipeworks plan`: a plan from a hand-written profile and cluster, as JSON; bad files exit 2.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;

namespace {

// Four equal layers, small activations: two devices should take two layers each.
const char* four_layers = R"({"model": "toy", "microbatch": 4, "layers": [
  {"name": "a", "fwd_ms": 1, "bwd_ms": 2, "activation_bytes": 1000, "saved_bytes": 1000, "param_bytes": 4000000, "optimizer_bytes": 8000000},
  {"name": "b", "fwd_ms": 1, "bwd_ms": 2, "activation_bytes": 1000, "saved_bytes": 1000, "param_bytes": 4000000, "optimizer_bytes": 8000000},
  {"name": "c", "fwd_ms": 1, "bwd_ms": 2, "activation_bytes": 1000, "saved_bytes": 1000, "param_bytes": 4000000, "optimizer_bytes": 8000000},
  {"name": "d", "fwd_ms": 1, "bwd_ms": 2, "activation_bytes": 1000, "saved_bytes": 1000, "param_bytes": 4000000, "optimizer_bytes": 8000000}]})";
const char* two_devices = R"({"device_memory_bytes": 1000000000,
  "levels": [{"name": "server", "count": 2, "bandwidth_bytes_per_s": 1e9, "latency_s": 0}]})";

}  // namespace

TEST_CASE("plan --json splits four equal layers over two devices", "[cli]") {
  scratch_dir dir;
  write_file(dir / "profile.json", four_layers);
  write_file(dir / "cluster.json", two_devices);
  const cli_result r = run_cli({"plan", "--profile", dir / "profile.json", "--cluster",
                                dir / "cluster.json", "--json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json p = json::parse(r.out);
  REQUIRE(p["stages"].size() == 2);
  CHECK(p["stages"][0]["first_layer"] == 0);
  CHECK(p["stages"][0]["last_layer"] == 1);
  CHECK(p["stages"][1]["first_layer"] == 2);
  CHECK(p["bottleneck_ms"].get<double>() == Approx(6.0));
}

TEST_CASE("plan: a bad profile or cluster exits 2 naming the flag", "[cli]") {
  scratch_dir dir;
  write_file(dir / "bad.json", R"({"model": "x", "microbatch": 0, "layers": []})");
  write_file(dir / "profile.json", four_layers);
  const cli_result bad = run_cli({"plan", "--profile", dir / "bad.json"});
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err, "--profile"));
  const cli_result cl = run_cli({"plan", "--profile", dir / "profile.json", "--cluster", "nosuch-preset"});
  CHECK(cl.exit_code == 2);
  CHECK(contains(cl.err, "--cluster"));
}

TEST_CASE("plan --planner 2bw picks depth and width within memory", "[cli]") {
  scratch_dir dir;
  write_file(dir / "profile.json", four_layers);
  write_file(dir / "cluster.json", two_devices);
  const cli_result r = run_cli({"plan", "--profile", dir / "profile.json", "--cluster",
                                dir / "cluster.json", "--planner", "2bw", "--json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json p = json::parse(r.out);
  CHECK(p["p"].get<int>() * p["w"].get<int>() <= 2);
  CHECK(p["m"].get<int>() >= p["p"].get<int>());
  for (const auto& bytes : p["memory_bytes"]) CHECK(bytes.get<std::int64_t>() <= 1000000000);
  CHECK(p["samples_per_s"].get<double>() > 0);
}
