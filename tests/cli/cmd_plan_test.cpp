// `pipeworks plan`: a plan from a hand-written profile and cluster, as JSON or a table (device
// names and speeds for a device list); bad files exit 2.
#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "fixtures.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;


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
  // The issue's fields: the slowest stage bounds the bottleneck, which bounds the step.
  double slowest = 0;
  for (const auto& st : p["stages"]) slowest = std::max(slowest, st["time_ms"].get<double>());
  CHECK(p["bottleneck_ms"].get<double>() >= slowest);
  CHECK(p["bottleneck_ms"].get<double>() > 0);
  CHECK(p["predicted_step_ms"].get<double>() >= p["m"].get<int>() * slowest);
}

namespace {

// Twelve equal layers with heavy parameters (replicating a stage costs an all-reduce).
std::string twelve_layers() {
  std::string layers;
  for (int l = 0; l < 12; ++l)
    layers +=
        std::string(l ? ", " : "") + "{\"name\": \"l" + std::to_string(l) +
        "\", \"fwd_ms\": 1, \"bwd_ms\": 2, \"activation_bytes\": 1000, \"saved_bytes\": 1000, "
        "\"param_bytes\": 10000000, \"optimizer_bytes\": 0}";
  return "{\"model\": \"twelve\", \"microbatch\": 4, \"layers\": [" + layers + "]}";
}

// As examples/clusters/hetero-2fast-2slow.json: two devices at half a core, two at a quarter.
const char* two_fast_two_slow = R"({"devices": [
  {"name": "fast0", "speed": 0.5}, {"name": "fast1", "speed": 0.5},
  {"name": "slow0", "speed": 0.25}, {"name": "slow1", "speed": 0.25}],
  "levels": [{"name": "link", "bandwidth_bytes_per_s": 1e9, "latency_s": 0}]})";

}  // namespace

TEST_CASE("plan on 2 fast and 2 slow devices gives the fast ones twice the layers",
          "[cli][hetero]") {
  scratch_dir dir;
  write_file(dir / "profile.json", twelve_layers());
  write_file(dir / "cluster.json", two_fast_two_slow);
  const cli_result r = run_cli(
      {"plan", "--profile", dir / "profile.json", "--cluster", dir / "cluster.json", "--json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json p = json::parse(r.out);
  std::vector<int> layers_on(4, 0);
  for (const auto& st : p["stages"]) {
    REQUIRE(st["device_names"].size() == st["devices"].size());
    for (std::size_t k = 0; k < st["devices"].size(); ++k) {
      const int d = st["devices"][k].get<int>();
      layers_on[d] += st["last_layer"].get<int>() - st["first_layer"].get<int>() + 1;
      CHECK(st["device_speeds"][k].get<double>() == (d < 2 ? 0.5 : 0.25));
    }
  }
  CHECK(layers_on[0] == 4);
  CHECK(layers_on[1] == 4);
  CHECK(layers_on[2] == 2);
  CHECK(layers_on[3] == 2);
  CHECK(p["bottleneck_ms"].get<double>() == Approx(24.0));  // 4 · 3 ms / 0.5 = 2 · 3 ms / 0.25

  // The table names each stage's devices with their speeds, for both planners.
  const cli_result text =
      run_cli({"plan", "--profile", dir / "profile.json", "--cluster", dir / "cluster.json"});
  INFO(text.out);
  REQUIRE(text.exit_code == 0);
  CHECK(contains(text.out, "fast0 (speed 0.5)"));
  CHECK(contains(text.out, "slow1 (speed 0.25)"));
  const cli_result two = run_cli({"plan", "--profile", dir / "profile.json", "--cluster",
                                  dir / "cluster.json", "--planner", "2bw"});
  INFO(two.out << two.err);
  REQUIRE(two.exit_code == 0);
  CHECK(contains(two.out, "fast1 (speed 0.5)"));
  CHECK(contains(two.out, "(speed 0.25)"));
}

namespace {

// Unnamed devices, slow ones first, and device 1 too small to hold any layer (unused).
const char* unnamed_mixed = R"({"devices": [
  {"speed": 0.25}, {"speed": 0.5, "memory_bytes": 1}, {"speed": 0.5}, {"speed": 0.25},
  {"speed": 0.5}],
  "levels": [{"name": "link", "bandwidth_bytes_per_s": 1e9, "latency_s": 0}]})";

}  // namespace

TEST_CASE("plan --json memory_bytes is indexed by device number for both planners",
          "[cli][hetero]") {
  scratch_dir dir;
  write_file(dir / "profile.json", twelve_layers());
  write_file(dir / "cluster.json", unnamed_mixed);
  for (const char* planner : {"pipedream", "2bw"}) {
    INFO(planner);
    const cli_result r = run_cli({"plan", "--profile", dir / "profile.json", "--cluster",
                                  dir / "cluster.json", "--planner", planner, "--json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json p = json::parse(r.out);
    // What each device holds, from the stages: entry d of memory_bytes must be it, 0 if unused.
    std::vector<std::int64_t> expect(5, 0);
    for (const auto& st : p["stages"]) {
      REQUIRE(st["device_names"].size() == st["devices"].size());
      for (std::size_t k = 0; k < st["devices"].size(); ++k) {
        const int d = st["devices"][k].get<int>();
        CHECK(st["device_names"][k] == "device " + std::to_string(d));  // never ""
        expect[static_cast<std::size_t>(d)] = st["memory_bytes"].get<std::int64_t>();
      }
    }
    CHECK(expect[1] == 0);  // the 1-byte device holds nothing
    const auto& mem = p["memory_bytes"];
    REQUIRE(mem.size() <= 5);
    REQUIRE(mem.size() > 2);  // a device past the unused device 1 is used
    for (std::size_t d = 0; d < 5; ++d)
      CHECK((d < mem.size() ? mem[d].get<std::int64_t>() : 0) == expect[d]);
  }
  // The table names unnamed devices too.
  const cli_result text =
      run_cli({"plan", "--profile", dir / "profile.json", "--cluster", dir / "cluster.json"});
  REQUIRE(text.exit_code == 0);
  CHECK(contains(text.out, "device 2 (speed 0.5)"));
}

TEST_CASE("plan --progress reports each probe on stderr and leaves stdout alone", "[cli]") {
  scratch_dir dir;
  write_file(dir / "profile.json", four_layers);
  write_file(dir / "cluster.json", two_devices);
  const cli_result quiet = run_cli({"plan", "--profile", dir / "profile.json", "--cluster",
                                    dir / "cluster.json", "--json"});
  REQUIRE(quiet.exit_code == 0);
  CHECK(quiet.err.empty());  // a plan of a few milliseconds prints no status line
  for (const char* planner : {"pipedream", "2bw"}) {
    INFO(planner);
    const cli_result r = run_cli({"plan", "--profile", dir / "profile.json", "--cluster",
                                  "dgx-h100x1", "--planner", planner, "--json", "--progress"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_NOTHROW(json::parse(r.out));
    CHECK(contains(r.err, "pipeworks plan: "));
    if (std::string(planner) == "2bw") {
      CHECK(contains(r.err, "depths searched 0/4"));
      CHECK(contains(r.err, "depths searched 4/4"));
    } else {
      CHECK(contains(r.err, "bottleneck search 1, probe 1/64"));
    }
  }
}

// A CPU and a GPU, the GPU with a profile measured on it (cluster.json names the file, read beside
// it): the layers the GPU is fast at go to the GPU, the first (fast on the CPU) stays on the CPU.
TEST_CASE("plan on a CPU and a GPU takes the GPU's times from its own profile", "[cli]") {
  scratch_dir dir;
  const auto profile = [](double a, double b, double c, double d) {
    json p{{"model", "toy"}, {"microbatch", 4}, {"layers", json::array()}};
    int i = 0;
    for (double ms : {a, b, c, d})
      p["layers"].push_back({{"name", std::string(1, static_cast<char>('a' + i++))},
                             {"fwd_ms", ms}, {"bwd_ms", 0}, {"activation_bytes", 1000},
                             {"saved_bytes", 1000}, {"param_bytes", 4000},
                             {"optimizer_bytes", 8000}});
    return p.dump();
  };
  write_file(dir / "cpu.json", profile(0.5, 10, 10, 1));
  write_file(dir / "gpu-profile.json", profile(2, 0.5, 0.5, 1.5));
  write_file(dir / "cluster.json", R"({"devices": [
    {"name": "cpu", "speed": 1, "memory_bytes": 0},
    {"name": "h100", "speed": 1, "memory_bytes": 0, "profile": "gpu-profile.json"}]})");
  const cli_result r = run_cli({"plan", "--profile", dir / "cpu.json", "--cluster",
                                dir / "cluster.json", "--json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json p = json::parse(r.out);
  REQUIRE(p["stages"].size() == 2);
  CHECK(p["stages"][0]["last_layer"] == 0);
  CHECK(p["stages"][0]["devices"] == json::array({0}));
  CHECK(p["stages"][1]["devices"] == json::array({1}));
  CHECK(p["bottleneck_ms"].get<double>() == Approx(2.5));

  // A profile file that is not there names the device (exit 2).
  write_file(dir / "cluster2.json", R"({"devices": [
    {"name": "cpu", "speed": 1, "memory_bytes": 0},
    {"name": "h100", "speed": 1, "memory_bytes": 0, "profile": "nosuch.json"}]})");
  const cli_result missing = run_cli({"plan", "--profile", dir / "cpu.json", "--cluster",
                                      dir / "cluster2.json"});
  CHECK(missing.exit_code == 2);
  CHECK(contains(missing.err, "h100"));
  CHECK(contains(missing.err, "nosuch.json"));
  // 2BW times each stage by its slowest replica, the GPU by its own profile.
  const cli_result two_bw = run_cli({"plan", "--profile", dir / "cpu.json", "--cluster",
                                     dir / "cluster.json", "--planner", "2bw", "--json"});
  INFO(two_bw.err);
  REQUIRE(two_bw.exit_code == 0);
  const json q = json::parse(two_bw.out);
  const double f = q["microbatch"].get<double>() / 4;
  const std::vector<std::vector<double>> ms{{0.5, 10, 10, 1}, {2, 0.5, 0.5, 1.5}};  // by device
  REQUIRE(!q["stages"].empty());
  for (const json& st : q["stages"]) {
    double slowest = 0;
    for (int d : st["devices"]) {
      double t = 0;
      for (int l = st["first_layer"]; l <= st["last_layer"].get<int>(); ++l) t += ms[d][l];
      slowest = std::max(slowest, t * f);
    }
    CHECK(st["time_ms"].get<double>() == Approx(slowest));
  }
}

namespace {

// Two layers of 100 parameter and 200 optimizer bytes, 1000 saved bytes and a 10-byte output
// each, measured in `mode`, and two devices of 1600 bytes (see the planner tests: only full
// recomputation fits, with 2BW and with PipeDream).
std::string two_heavy_layers(const char* mode) {
  const std::string layer =
      R"({"name": "l", "fwd_ms": 1, "bwd_ms": 2, "activation_bytes": 10, "saved_bytes": 1000, )"
      R"("param_bytes": 100, "optimizer_bytes": 200})";
  return std::string(R"({"model": "two", "microbatch": 1, )") +
         (mode ? std::string(R"("recompute": ")") + mode + "\", " : std::string()) +
         R"("layers": [)" + layer + ", " + layer + "]}";
}
const char* two_small_devices = R"({"device_memory_bytes": 1600,
  "levels": [{"name": "server", "count": 2, "bandwidth_bytes_per_s": 1e9, "latency_s": 0}]})";

}  // namespace

TEST_CASE("plan --json carries the profile's recompute mode as runtime.recompute", "[cli]") {
  scratch_dir dir;
  write_file(dir / "cluster.json", two_devices);
  for (const char* mode : {static_cast<const char*>(nullptr), "none", "selective", "full"}) {
    write_file(dir / "profile.json", two_heavy_layers(mode));
    for (const char* planner : {"pipedream", "2bw"}) {
      CAPTURE(mode ? mode : "(absent)", planner);
      const cli_result r = run_cli({"plan", "--profile", dir / "profile.json", "--cluster",
                                    dir / "cluster.json", "--planner", planner, "--json"});
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      const json p = json::parse(r.out);
      CHECK(p["runtime"]["recompute"] == (mode ? mode : "none"));
    }
  }
}

TEST_CASE("plan: under a memory limit only a full recompute profile has a plan", "[cli]") {
  scratch_dir dir;
  write_file(dir / "cluster.json", two_small_devices);
  for (const char* planner : {"pipedream", "2bw"}) {
    CAPTURE(planner);
    write_file(dir / "profile.json", two_heavy_layers("none"));
    const cli_result none = run_cli({"plan", "--profile", dir / "profile.json", "--cluster",
                                     dir / "cluster.json", "--planner", planner});
    CHECK(none.exit_code == 1);
    write_file(dir / "profile.json", two_heavy_layers("full"));
    const cli_result text = run_cli({"plan", "--profile", dir / "profile.json", "--cluster",
                                     dir / "cluster.json", "--planner", planner});
    INFO(text.err);
    REQUIRE(text.exit_code == 0);
    CHECK(contains(text.out, "train with --recompute full"));
    const cli_result r = run_cli({"plan", "--profile", dir / "profile.json", "--cluster",
                                  dir / "cluster.json", "--planner", planner, "--json"});
    REQUIRE(r.exit_code == 0);
    const json p = json::parse(r.out);
    CHECK(p["runtime"]["recompute"] == "full");
    REQUIRE(p["stages"].size() == 2);
    for (const auto& bytes : p["memory_bytes"]) CHECK(bytes.get<std::int64_t>() <= 1600);
  }
}

namespace {

// The planner tests' profile of three modes (tests/partition/recompute_choice_test.cpp), written
// by hand: on two devices none needs 8200 bytes or more, selective 6200 and full 4240 (PipeDream;
// 2BW 100 more a layer). Selective's backward is faster than full's.
std::string three_modes() {
  const std::string layer =
      R"({"name": "l", "fwd_ms": 1, "bwd_ms": 2, "activation_bytes": 40, "saved_bytes": 4000, )"
      R"("param_bytes": 100, "optimizer_bytes": 0, "modes": {"selective": {"bwd_ms": 2.5, )"
      R"("saved_bytes": 3000}, "full": {"bwd_ms": 3, "saved_bytes": 4000}}})";
  return R"({"model": "three", "microbatch": 1, "layers": [)" + layer + ", " + layer + "]}";
}
std::string two_devices_of(std::int64_t bytes) {
  return R"({"device_memory_bytes": )" + std::to_string(bytes) +
         R"(, "levels": [{"name": "server", "count": 2, "bandwidth_bytes_per_s": 1e12, "latency_s": 0}]})";
}

}  // namespace

TEST_CASE("plan chooses the recompute mode of a profile of several modes", "[cli]") {
  scratch_dir dir;
  write_file(dir / "profile.json", three_modes());
  const std::vector<std::pair<std::int64_t, std::string>> cases = {
      {9000, "none"}, {6700, "selective"}, {4400, "full"}};
  for (const auto& [bytes, chosen] : cases) {
    write_file(dir / "cluster.json", two_devices_of(bytes));
    for (const char* planner : {"pipedream", "2bw"}) {
      CAPTURE(bytes, planner);
      const cli_result r = run_cli({"plan", "--profile", dir / "profile.json", "--cluster",
                                    dir / "cluster.json", "--planner", planner, "--json"});
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      const json p = json::parse(r.out);
      CHECK(p["runtime"]["recompute"] == chosen);
      CHECK(contains(p["recompute_choice"].get<std::string>(), "-> " + chosen));
      for (const auto& b : p["memory_bytes"]) CHECK(b.get<std::int64_t>() <= bytes);
      const cli_result text = run_cli({"plan", "--profile", dir / "profile.json", "--cluster",
                                       dir / "cluster.json", "--planner", planner});
      REQUIRE(text.exit_code == 0);
      CHECK(contains(text.out, "recompute: none: "));
      CHECK(contains(text.out, "train with --recompute " + chosen));
    }
  }
  write_file(dir / "cluster.json", two_devices_of(6700));
  const cli_result tight = run_cli({"plan", "--profile", dir / "profile.json", "--cluster",
                                    dir / "cluster.json"});
  CHECK(contains(tight.out, "none: no plan fits ("));
  CHECK(contains(tight.out, "-> selective"));
  write_file(dir / "cluster.json", two_devices_of(1000));
  const cli_result none_fits = run_cli({"plan", "--profile", dir / "profile.json", "--cluster",
                                        dir / "cluster.json"});
  CHECK(none_fits.exit_code == 1);
  CHECK(contains(none_fits.err, "no recompute mode fits"));
}
