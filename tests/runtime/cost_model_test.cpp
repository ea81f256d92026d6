// Tests for the cost model: costs.json parsing and its errors, checks, link look-up and derived
// REDUCE times.
#include "runtime/cost_model.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

using namespace pipeworks;

TEST_CASE("cost model: costs.json sets stages, links and devices", "[runtime]") {
  auto c = parse_cost_model(R"({
    "stages": [{"forward": 1.5, "backward": 3, "weight_grad": 1, "step": 0.25, "reduce": 0.5,
                "activation_bytes": 1e6, "boundary_bytes": 4096, "param_bytes": 2e9}],
    "link": {"latency": 1e-5, "bandwidth": 1e10},
    "links": [{"from": 0, "to": 1, "latency": 2e-5}],
    "reduce_link": {"bandwidth": 5e9},
    "devices": [{"speed": 2, "memory": 8e10}, {"memory": 4e10}]
  })");
  REQUIRE(c.ok());
  REQUIRE(c->stages.size() == 1);
  const stage_cost& s = c->stage(3);  // one entry serves every stage
  CHECK(s.forward == 1.5);
  CHECK(s.input_grad() == 2.0);
  CHECK(s.step == 0.25);
  CHECK(s.activation_bytes == 1000000);
  CHECK(s.boundary_bytes == 4096);
  CHECK(s.param_bytes == 2000000000);
  CHECK(c->link.latency == 1e-5);
  CHECK(c->link_between(1, 0).latency == 2e-5);    // either direction
  CHECK(c->link_between(1, 0).bandwidth == 1e10);  // unset fields come from "link"
  CHECK(c->link_between(1, 2).latency == 1e-5);
  CHECK(c->link.transfer(20000000000LL) == 2.0);  // bytes / bandwidth
  CHECK(c->reduce_link.bandwidth == 5e9);
  CHECK(c->reduce_link.latency == 0.0);
  REQUIRE(c->devices.size() == 2);
  CHECK(c->device(0).speed == 2.0);
  CHECK(c->device(1).speed == 1.0);
  CHECK(c->device(1).memory == 40000000000);
  CHECK(c->check(4, 2).ok());
  CHECK(!c->check(4, 3).ok());  // two device entries for three devices
}

TEST_CASE("cost model: an empty object gives the defaults", "[runtime]") {
  auto c = parse_cost_model("{}");
  REQUIRE(c.ok());
  CHECK(c->stage(0).forward == 1.0);
  CHECK(c->stage(0).backward == 2.0);
  CHECK(c->stage(0).weight_grad == 1.0);
  CHECK(std::isinf(c->link.bandwidth));
  CHECK(c->link.transfer(1 << 20) == 0.0);
  CHECK(c->device(0).memory == 0);
}

TEST_CASE("cost model: bad costs.json says what is wrong", "[runtime]") {
  auto bad = [](const char* text) {
    auto c = parse_cost_model(text);
    REQUIRE(!c.ok());
    return c.message();
  };
  CHECK_THAT(bad("{"), Catch::Contains("not valid JSON"));
  CHECK_THAT(bad(R"({"stage": []})"),
             Catch::Contains("unknown key \"stage\"") && Catch::Contains("stages"));
  CHECK_THAT(bad(R"({"stages": [{"fwd": 1}]})"),
             Catch::Contains("\"fwd\"") && Catch::Contains("forward"));
  CHECK_THAT(bad(R"({"stages": [{"forward": "1"}]})"),
             Catch::Contains("stages[0].forward must be a number"));
  CHECK_THAT(bad(R"({"stages": []})"), Catch::Contains("non-empty"));
  CHECK_THAT(bad(R"({"links": [{"latency": 1}]})"), Catch::Contains("\"from\" and \"to\""));
  CHECK_THAT(bad(R"({"link": {"from": 0}})"), Catch::Contains("unknown key \"from\""));
}

TEST_CASE("cost model: check rejects unusable numbers and shapes", "[runtime]") {
  cost_model c = uniform_costs(1.0, 2.0, 3.0);
  CHECK_THAT(c.check(1, 1).message(), Catch::Contains("weight_grad") && Catch::Contains("W <= B"));
  c = uniform_costs(-1.0, 2.0);
  CHECK_THAT(c.check(1, 1).message(), Catch::Contains("forward"));
  c = uniform_costs(1.0, 2.0);
  c.stages.resize(3);
  CHECK_THAT(c.check(4, 4).message(),
             Catch::Contains("3 stage entries") && Catch::Contains("give 1"));
  CHECK(c.check(3, 1).ok());
  c = uniform_costs(1.0, 2.0);
  c.link.bandwidth = 0.0;
  CHECK_THAT(c.check(1, 1).message(), Catch::Contains("bandwidth"));
  c = uniform_costs(1.0, 2.0);
  c.devices[0].speed = 0.0;
  CHECK_THAT(c.check(1, 1).message(), Catch::Contains("speed"));
  c = uniform_costs(1.0, 2.0);
  c.links.push_back(device_link{0, 5, link_cost{}});
  CHECK_THAT(c.check(1, 2).message(), Catch::Contains("outside"));
}

TEST_CASE("cost model: REDUCE time is given, or a ring all-reduce, and 0 with one replica",
          "[runtime]") {
  cost_model c = uniform_costs(1.0, 2.0);
  c.stages[0].param_bytes = 4000;
  c.reduce_link.bandwidth = 1000.0;
  c.reduce_link.latency = 0.5;
  CHECK(c.reduce_time(0, 1) == 0.0);
  CHECK(c.reduce_time(0, 2) == Approx(2.0 * 0.5 * 4.0 + 2.0 * 0.5));
  CHECK(c.reduce_time(0, 4) == Approx(2.0 * 0.75 * 4.0 + 6.0 * 0.5));
  c.stages[0].reduce = 0.125;
  CHECK(c.reduce_time(0, 4) == 0.125);
  CHECK(uniform_costs(1.0, 2.0).reduce_time(0, 8) == 0.0);  // free communication
}

TEST_CASE("cost model: load_cost_model reads a file and names it in errors", "[runtime]") {
  const std::string path = std::string(PIPEWORKS_BINARY_DIR) + "/cost_model_test_costs.json";
  {
    std::ofstream out(path);
    out << R"({"stages": [{"forward": 2}], "devices": [{"memory": 1024}]})";
  }
  auto c = load_cost_model(path);
  REQUIRE(c.ok());
  CHECK(c->stage(0).forward == 2.0);
  CHECK(c->device(0).memory == 1024);
  {
    std::ofstream out(path);
    out << R"({"stages": [{"forwrd": 2}]})";
  }
  auto bad = load_cost_model(path);
  REQUIRE(!bad.ok());
  CHECK_THAT(bad.message(), Catch::Contains(path) && Catch::Contains("forwrd"));
  std::remove(path.c_str());
  auto missing = load_cost_model(path);
  REQUIRE(!missing.ok());
  CHECK_THAT(missing.message(), Catch::Contains("cannot open"));
}

TEST_CASE("cost model: byte counts and link ends must be whole numbers in range", "[runtime]") {
  auto frac = parse_cost_model(R"({"stages": [{"activation_bytes": 1.7}]})");
  REQUIRE_FALSE(frac.ok());
  CHECK_THAT(frac.message(), Catch::Contains("stages[0].activation_bytes 1.7") &&
                                 Catch::Contains("must be a whole number of bytes"));
  auto huge = parse_cost_model(R"({"stages": [{"param_bytes": 1e30}]})");
  REQUIRE_FALSE(huge.ok());
  CHECK_THAT(huge.message(),
             Catch::Contains("param_bytes") && Catch::Contains("too large (max 2^62)"));
  auto big_int = parse_cost_model(R"({"devices": [{"memory": 9223372036854775807}]})");
  REQUIRE_FALSE(big_int.ok());
  CHECK_THAT(big_int.message(), Catch::Contains("devices[0].memory") && Catch::Contains("2^62"));
  auto end = parse_cost_model(R"({"links": [{"from": 0.5, "to": 1}]})");
  REQUIRE_FALSE(end.ok());
  CHECK_THAT(end.message(), Catch::Contains("links[0].from") && Catch::Contains("whole number"));
  auto far = parse_cost_model(R"({"links": [{"from": 0, "to": 1e12}]})");
  REQUIRE_FALSE(far.ok());
  CHECK_THAT(far.message(), Catch::Contains("links[0].to") && Catch::Contains("too large"));
  auto ok = parse_cost_model(R"({"stages": [{"boundary_bytes": 4611686018427387904}]})");
  REQUIRE(ok.ok());  // exactly 2^62
  CHECK(ok->stages[0].boundary_bytes == max_cost_bytes);
  // Models built in code are held to the same range.
  cost_model c;
  c.stages[0].activation_bytes = max_cost_bytes + 1;
  CHECK_THAT(c.check(1, 1).message(),
             Catch::Contains("activation_bytes") && Catch::Contains("2^62"));
}

TEST_CASE("cost model: derived transfer and REDUCE times that overflow are errors", "[runtime]") {
  cost_model c;
  c.stages[0].param_bytes = 1000000000000000000LL;
  c.reduce_link.bandwidth = 1e-300;
  CHECK(c.check(1, 1).ok());  // one replica: no REDUCE
  const status two = c.check(1, 1, 2);
  REQUIRE_FALSE(two.ok());
  CHECK_THAT(two.message(),
             Catch::Contains("REDUCE") && Catch::Contains("reduce_link bandwidth 1e-300"));
  c.stages[0].reduce = 1.0;  // a given REDUCE time needs no bandwidth
  CHECK(c.check(1, 1, 2).ok());
  cost_model b;
  b.stages[0].boundary_bytes = 1000000000000000000LL;
  b.links = {device_link{0, 1, link_cost{0.0, 1e-300}}};
  CHECK_THAT(b.check(1, 2).message(),
             Catch::Contains("boundary_bytes") && Catch::Contains("link 0-1"));
}

TEST_CASE("cost model: a directory is not a cost file", "[runtime]") {
  auto c = load_cost_model("/tmp");
  REQUIRE_FALSE(c.ok());
  CHECK_THAT(c.message(), Catch::Contains("/tmp") && Catch::Contains("is a directory"));
}
