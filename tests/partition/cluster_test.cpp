// Tests for cluster.json and the presets: both forms, their errors, level_between against a
// brute-force definition, the presets' figures and exact round trips.
#include "partition/cluster.hpp"

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>

#include "base/cpu_count.hpp"

using namespace pipeworks;

namespace {

std::string error_of(const std::string& text) {
  auto c = parse_cluster(text);
  REQUIRE_FALSE(c.ok());
  return c.message();
}

bool same(const cluster& a, const cluster& b) {
  if (a.device_memory_bytes != b.device_memory_bytes || a.levels.size() != b.levels.size() ||
      a.devices.size() != b.devices.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.levels.size(); ++i) {
    const cluster_level& x = a.levels[i];
    const cluster_level& y = b.levels[i];
    if (x.name != y.name || x.count != y.count ||
        x.bandwidth_bytes_per_s != y.bandwidth_bytes_per_s || x.latency_s != y.latency_s) {
      return false;
    }
  }
  for (std::size_t i = 0; i < a.devices.size(); ++i) {
    const device_spec& x = a.devices[i];
    const device_spec& y = b.devices[i];
    if (x.name != y.name || x.speed != y.speed || x.memory_bytes != y.memory_bytes) return false;
  }
  return true;
}

void check_round_trip(const cluster& c) {
  auto back = parse_cluster(to_json(c));
  REQUIRE(back.ok());
  CHECK(same(c, *back));
  CHECK(to_json(*back) == to_json(c));
}

// Devices share a unit of level i when they agree on d / (count_0 * ... * count_i).
int brute_level(const cluster& c, int d, int e) {
  if (d == e) return -1;
  for (std::size_t i = 0; i < c.levels.size(); ++i) {
    int unit = 1;
    for (std::size_t k = 0; k <= i; ++k) unit *= c.levels[k].count;
    if (d / unit == e / unit) return static_cast<int>(i);
  }
  return -2;
}

}  // namespace

TEST_CASE("cluster: the levels form", "[partition]") {
  auto c = parse_cluster(R"({"device_memory_bytes": 1000, "levels": [
      {"name": "socket", "count": 2, "bandwidth_bytes_per_s": 100, "latency_s": 0.5},
      {"name": "server", "count": 3, "bandwidth_bytes_per_s": 50.5, "latency_s": 1e-6},
      {"name": "cluster", "count": 2, "bandwidth_bytes_per_s": 1e9}]})");
  REQUIRE(c.ok());
  CHECK(c->device_count() == 12);
  CHECK(c->levels[2].latency_s == 0.0);
  CHECK(c->speed(11) == 1.0);
  CHECK(c->memory(0) == 1000);
  CHECK(c->level_between(0, 0) == -1);
  CHECK(c->level_between(0, 1) == 0);
  CHECK(c->level_between(1, 2) == 1);   // sockets 0 and 1 of server 0
  CHECK(c->level_between(5, 6) == 2);   // servers 2 and 3 are in different halves
  CHECK(c->level_between(6, 11) == 1);
  for (int d = 0; d < 12; ++d) {
    for (int e = 0; e < 12; ++e) {
      CHECK(c->level_between(d, e) == brute_level(*c, d, e));
      CHECK(c->level_between(d, e) == c->level_between(e, d));
    }
  }
  CHECK_THROWS_AS(c->level_between(0, 12), pipeworks_error);
  CHECK_THROWS_AS(c->speed(-1), pipeworks_error);
  CHECK_THROWS_AS(c->memory(12), pipeworks_error);
  check_round_trip(*c);
}

TEST_CASE("cluster: the heterogeneous devices form", "[partition]") {
  auto c = parse_cluster(R"({"devices": [
      {"name": "a100", "speed": 2, "memory_bytes": 80000000000},
      {"name": "v100", "speed": 1, "memory_bytes": 17179869184},
      {"name": "t4", "speed": 0.25}],
      "levels": [{"name": "pcie", "bandwidth_bytes_per_s": 16e9, "latency_s": 1e-5}]})");
  REQUIRE(c.ok());
  CHECK(c->device_count() == 3);
  CHECK(c->speed(0) == 2.0);
  CHECK(c->speed(2) == 0.25);
  CHECK(c->memory(1) == 17179869184);
  CHECK(c->memory(2) == 0);
  REQUIRE(c->levels.size() == 1);
  CHECK(c->levels[0].count == 3);  // filled in from the devices
  CHECK(c->level_between(0, 2) == 0);
  CHECK(c->level_between(1, 1) == -1);
  check_round_trip(*c);

  auto bare = parse_cluster(R"({"devices": [{}, {"speed": 3}]})");
  REQUIRE(bare.ok());
  CHECK(bare->device_count() == 2);
  CHECK(bare->speed(0) == 1.0);
  CHECK(bare->levels.empty());
  CHECK(bare->level_between(0, 1) == 0);
  check_round_trip(*bare);
}

TEST_CASE("cluster: a device may name a profile measured on it", "[partition]") {
  auto c = parse_cluster(R"({"devices": [{"name": "cpu", "speed": 1, "memory_bytes": 0},
    {"name": "h100", "speed": 1, "memory_bytes": 0, "profile": "gpu-profile.json"}]})");
  REQUIRE(c.ok());
  CHECK(c->devices[0].profile.empty());
  CHECK(c->devices[1].profile == "gpu-profile.json");
  auto again = parse_cluster(to_json(*c));
  REQUIRE(again.ok());
  CHECK(again->devices[1].profile == "gpu-profile.json");
  CHECK(again->devices[0].profile.empty());
  auto empty = parse_cluster(R"({"devices": [{"name": "x", "speed": 1, "memory_bytes": 0,
    "profile": ""}]})");
  REQUIRE(!empty.ok());
  CHECK(empty.message().find("profile") != std::string::npos);
}

TEST_CASE("cluster: a device may say where a local run places it", "[partition]") {
  auto c = parse_cluster(R"({"devices": [{"name": "cpu", "speed": 1, "memory_bytes": 0},
    {"name": "h100", "speed": 1, "memory_bytes": 0, "profile": "gpu.json", "device": "cuda:0"}]})");
  REQUIRE(c.ok());
  CHECK(c->devices[0].device == "cpu");
  CHECK(c->devices[1].device == "cuda:0");
  auto again = parse_cluster(to_json(*c));
  REQUIRE(again.ok());
  CHECK(again->devices[1].device == "cuda:0");
  CHECK(again->devices[0].device == "cpu");
  auto bad = parse_cluster(R"({"devices": [{"name": "x", "speed": 1, "device": "tpu:1"}]})");
  REQUIRE(!bad.ok());
  CHECK(bad.message().find("devices[0].device") != std::string::npos);
  CHECK(bad.message().find("cpu, cuda, cuda:N") != std::string::npos);
}

TEST_CASE("cluster: errors name the field", "[partition]") {
  using Catch::Matchers::Contains;
  CHECK_THAT(error_of("{}"), Contains("give \"levels\"") && Contains("or \"devices\""));
  CHECK_THAT(error_of(R"({"levels": []})"), Contains("\"levels\" must be a non-empty array"));
  CHECK_THAT(error_of(R"({"devices": []})"), Contains("\"devices\" must be a non-empty array"));
  CHECK_THAT(error_of(R"({"levels": [{"count": 0, "bandwidth_bytes_per_s": 1}]})"),
             Contains("levels[0].count 0 must be a whole number in 1.."));
  CHECK_THAT(error_of(R"({"levels": [{"count": 2, "bandwidth_bytes_per_s": 1},
                                     {"count": 2, "bandwidth_bytes_per_s": 0}]})"),
             Contains("levels[1].bandwidth_bytes_per_s 0 must be a finite number > 0"));
  CHECK_THAT(error_of(R"({"levels": [{"count": 2, "bandwidth_bytes_per_s": -5}]})"),
             Contains("levels[0].bandwidth_bytes_per_s -5"));
  CHECK_THAT(error_of(R"({"levels": [{"count": 2}]})"),
             Contains("levels[0] has no \"bandwidth_bytes_per_s\""));
  CHECK_THAT(error_of(R"({"levels": [{"bandwidth_bytes_per_s": 1}]})"),
             Contains("levels[0] has no \"count\""));
  CHECK_THAT(error_of(R"({"levels": [{"count": 2, "bandwidth_bytes_per_s": 1,
                                      "latency_s": -1e-6}]})"),
             Contains("levels[0].latency_s -1e-06 must be a finite number >= 0"));
  CHECK_THAT(error_of(R"({"device_memory_bytes": -1,
                          "levels": [{"count": 2, "bandwidth_bytes_per_s": 1}]})"),
             Contains("device_memory_bytes -1"));
  CHECK_THAT(error_of(R"({"levels": [{"count": 65536, "bandwidth_bytes_per_s": 1},
                                     {"count": 65536, "bandwidth_bytes_per_s": 1}]})"),
             Contains("levels[1].count 65536 makes more than 2^31-1 devices"));
  CHECK_THAT(error_of(R"({"devices": [{"speed": 0}]})"),
             Contains("devices[0].speed 0 must be a finite number > 0"));
  CHECK_THAT(error_of(R"({"devices": [{}, {"speed": -2}]})"), Contains("devices[1].speed -2"));
  CHECK_THAT(error_of(R"({"devices": [{"memory_bytes": -1}]})"),
             Contains("devices[0].memory_bytes -1"));
  CHECK_THAT(error_of(R"({"devices": [{}], "levels": [{"count": 1, "bandwidth_bytes_per_s": 1},
                                                     {"count": 1, "bandwidth_bytes_per_s": 1}]})"),
             Contains("may hold one level"));
  CHECK_THAT(error_of(R"({"devices": [{}], "levels": [{"count": 2, "bandwidth_bytes_per_s": 1}]})"),
             Contains("levels[0].count 2 must equal the number of devices, 1"));
  CHECK_THAT(error_of(R"({"devices": [{}], "device_memory_bytes": 5})"),
             Contains("give each device its \"memory_bytes\""));
  CHECK_THAT(error_of(R"({"devices": [{"gpu": 1}]})"), Contains("unknown key \"gpu\" in devices[0]"));
  CHECK_THAT(error_of(R"({"levels": [{"count": 2, "bandwidth": 1}]})"),
             Contains("unknown key \"bandwidth\" in levels[0]"));
  CHECK_THAT(error_of("{"), Contains("not valid JSON"));
}

TEST_CASE("cluster: presets", "[partition]") {
  auto dgx = load_cluster("dgx-h100x4");
  REQUIRE(dgx.ok());
  CHECK(dgx->device_count() == 32);
  REQUIRE(dgx->levels.size() == 2);
  CHECK(dgx->levels[0].count == 8);
  CHECK(dgx->levels[0].bandwidth_bytes_per_s == 450e9);
  CHECK(dgx->levels[0].latency_s == 2e-6);
  CHECK(dgx->levels[1].count == 4);
  CHECK(dgx->levels[1].bandwidth_bytes_per_s == 50e9);
  CHECK(dgx->levels[1].latency_s == 5e-6);
  CHECK(dgx->memory(31) == std::int64_t{80} << 30);
  CHECK(dgx->level_between(7, 0) == 0);
  CHECK(dgx->level_between(7, 8) == 1);
  check_round_trip(*dgx);

  auto v100 = load_cluster("v100x1");
  REQUIRE(v100.ok());
  CHECK(v100->device_count() == 8);
  CHECK(v100->levels[0].bandwidth_bytes_per_s == 150e9);
  CHECK(v100->levels[1].bandwidth_bytes_per_s == 12.5e9);
  CHECK(v100->memory(0) == std::int64_t{16} << 30);
  check_round_trip(*v100);

  auto cpu = load_cluster("local-cpu");
  REQUIRE(cpu.ok());
  CHECK(cpu->device_count() == usable_cores());
  REQUIRE(cpu->levels.size() == 1);
  CHECK(cpu->levels[0].bandwidth_bytes_per_s == 10e9);
  CHECK(cpu->levels[0].latency_s == 1e-6);
  CHECK(cpu->memory(0) > 0);
  check_round_trip(*cpu);

  using Catch::Matchers::Contains;
  auto zero = load_cluster("dgx-h100x0");
  REQUIRE_FALSE(zero.ok());
  CHECK_THAT(zero.message(), Contains("needs 1..") && Contains("dgx-h100x4"));
  auto unknown = load_cluster("tpu-v4x8");
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(unknown.message(), Contains("tpu-v4x8") && Contains("dgx-h100x{N}") &&
                                    Contains("v100x{N}") && Contains("local-cpu"));
  auto missing = load_cluster("no/such/cluster.json");
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.message(), Contains("cannot open cluster file 'no/such/cluster.json'"));
}

TEST_CASE("cluster: load_cluster reads a file and names the path in errors", "[partition]") {
  using Catch::Matchers::Contains;
  const std::string path = "pipeworks_cluster_test.json";
  auto dgx = load_cluster("dgx-h100x2");
  REQUIRE(dgx.ok());
  {
    std::ofstream out(path);
    out << to_json(*dgx);
  }
  auto c = load_cluster(path);
  REQUIRE(c.ok());
  CHECK(same(*c, *dgx));
  {
    std::ofstream out(path);
    out << R"({"levels": [{"count": 2, "bandwidth_bytes_per_s": 0}]})";
  }
  auto bad = load_cluster(path);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Contains(path + ": levels[0].bandwidth_bytes_per_s 0"));
  std::remove(path.c_str());
}

TEST_CASE("device_label gives a device's name or device N", "[partition]") {
  auto named = parse_cluster(R"({"devices": [{"name": "fast0", "speed": 0.5}, {"speed": 0.25}]})");
  REQUIRE(named.ok());
  CHECK(device_label(*named, 0) == "fast0");
  CHECK(device_label(*named, 1) == "device 1");
  auto levels = load_cluster("dgx-h100x1");
  REQUIRE(levels.ok());
  CHECK(device_label(*levels, 3) == "device 3");
}
